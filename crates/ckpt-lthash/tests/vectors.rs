//! Known-answer vectors, computed once by this implementation and pinned, so
//! any change to the construction or the element encoding fails here. The
//! `hello`/`world!` checksums are copied from `solana-lattice-hash`'s own test
//! suite (v3.1.14 `test_hello_world`), proving the construction is the same.

use ckpt_lthash::{encode_entry, entry_element, Digest, Entry, EntryKind, LtHash};

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The fixed small tree used by the tree vectors (also documented for the
/// lead's `docs/FORMAT.md`).
fn tree() -> Digest {
    let readme = blake3::hash(b"# demo\n");
    let main = blake3::hash(b"fn main() {}\n");
    let empty = blake3::hash(b"");
    [
        Entry::file(b"README.md", 0o644, readme.as_bytes()),
        Entry::dir(b"src", 0o755),
        Entry::file(b"src/main.rs", 0o644, main.as_bytes()),
        Entry::file(b"run.sh", 0o755, empty.as_bytes()),
        Entry::symlink(b"latest", b"src/main.rs"),
        Entry::dir(b"weird\n\xff", 0o700),
    ]
    .into_iter()
    .collect()
}

#[test]
fn solana_lattice_hash_interop() {
    let hello = LtHash::of_element(b"hello");
    assert_eq!(&hello.lanes()[..4], &[0x8fea, 0x3d16, 0x86b3, 0x9282]);
    assert_eq!(hello.lanes()[1023], 0x9924);
    assert_eq!(
        hello.checksum(),
        [
            79, 156, 26, 184, 156, 205, 94, 208, 182, 235, 33, 147, 111, 153, 229, 152, 207, 133,
            75, 109, 182, 198, 119, 61, 11, 81, 41, 70, 24, 87, 100, 85,
        ]
    );
    let world = LtHash::of_element(b"world!");
    assert_eq!(&world.lanes()[..3], &[0x56dc, 0x1d98, 0x5420]);
    assert_eq!(
        world.checksum(),
        [
            171, 53, 185, 10, 179, 49, 48, 151, 87, 43, 141, 13, 43, 152, 121, 1, 144, 7, 120, 188,
            115, 248, 214, 220, 229, 210, 175, 134, 215, 231, 18, 245,
        ]
    );
}

#[test]
fn identity_vector() {
    assert_eq!(
        LtHash::identity().checksum_hex(),
        "be2a8de3dcf46c94ce85cdc8e07ac308f4d8a95490d956c38d780fd610db0813"
    );
    assert_eq!(Digest::new().checksum(), LtHash::identity().checksum());
}

#[test]
fn encoding_vector() {
    assert_eq!(
        hex(&encode_entry(b"l", EntryKind::Symlink, 0o777, b"a")),
        concat!(
            "636b70742d6c746861736831362d656e7472792d7631", // "ckpt-lthash16-entry-v1"
            "03",                                           // symlink
            "00000000",                                     // mode (0 for symlinks)
            "0100000000000000",                             // path length 1
            "6c",                                           // "l"
            "0100000000000000",                             // content length 1
            "61",                                           // "a"
        )
    );
}

/// (path, kind, mode, content, first four lanes, checksum hex)
type Case<'a> = (&'a [u8], EntryKind, u32, &'a [u8], [u16; 4], &'a str);

#[test]
fn entry_element_vectors() {
    let a_digest = blake3::hash(b"a");
    let cases: [Case; 3] = [
        (
            b"a",
            EntryKind::File,
            0o644,
            a_digest.as_bytes(),
            [0x8fbc, 0xd032, 0x3db2, 0xda18],
            "dc58c1e32bc9046368911970c1c05f632cf41c12a63710fb544d25b662a5f5cd",
        ),
        (
            b"d",
            EntryKind::Dir,
            0o755,
            b"",
            [0x9737, 0xad33, 0x1308, 0x0d57],
            "1f6ee4691c552107f12c3661ae5d7a720dd1d4f72fcc2ada309f304357230e8c",
        ),
        (
            b"l",
            EntryKind::Symlink,
            0o777,
            b"a",
            [0x512b, 0x8fbe, 0x2e4c, 0x26bc],
            "0ed045c45fa7c7f1b7694b74d09c68d044fa2a9d93214b86dc79bd10df5b6be4",
        ),
    ];
    for (path, kind, mode, content, lanes, sum) in cases {
        let e = entry_element(path, kind, mode, content);
        assert_eq!(&e.lanes()[..4], &lanes, "{kind:?}");
        assert_eq!(e.checksum_hex(), sum, "{kind:?}");
    }
}

#[test]
fn tree_vector() {
    let t = tree();
    assert_eq!(
        t.checksum_hex(),
        "68be93b85164f898e4505b887df78c86b1b579f94697351ae1ea82bc3e695c57"
    );
    assert!(t
        .state()
        .to_base64url()
        .starts_with("FsikeaZyUpKyChIMwuCsTd51SvemC96v2f1RWH5r"));
}
