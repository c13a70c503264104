//! Each change the digest must see, and tricky element encodings that must not
//! collide. Every test compares two digests that a wrong implementation (e.g.
//! content-only elements as in the lthash-rs seed, no length prefixes, mtime or
//! kind ignored) would make equal.

use ckpt_lthash::{encode_entry, entry_element, par_digest, Digest, Entry, EntryKind, LtHash};
use rayon::prelude::*;

fn h(data: &[u8]) -> [u8; 32] {
    *blake3::hash(data).as_bytes()
}

/// A small tree: (path, kind, mode, content) with owned bytes.
type Tree = Vec<(Vec<u8>, EntryKind, u32, Vec<u8>)>;

fn digest(tree: &Tree) -> Digest {
    tree.iter()
        .map(|(p, k, m, c)| Entry {
            path: p,
            kind: *k,
            mode: *m,
            content: c,
        })
        .collect()
}

fn base() -> Tree {
    vec![
        (b"src".to_vec(), EntryKind::Dir, 0o755, vec![]),
        (
            b"src/a.rs".to_vec(),
            EntryKind::File,
            0o644,
            h(b"alpha").to_vec(),
        ),
        (
            b"src/b.rs".to_vec(),
            EntryKind::File,
            0o644,
            h(b"beta").to_vec(),
        ),
        (
            b"link".to_vec(),
            EntryKind::Symlink,
            0o777,
            b"src/a.rs".to_vec(),
        ),
    ]
}

fn assert_changes(name: &str, edit: impl FnOnce(&mut Tree)) {
    let before = digest(&base());
    let mut t = base();
    edit(&mut t);
    let after = digest(&t);
    assert_ne!(before, after, "{name} did not change the digest");
    assert_ne!(before.checksum(), after.checksum(), "{name}: checksum");
}

#[test]
fn rename_changes_digest() {
    assert_changes("rename", |t| t[1].0 = b"src/c.rs".to_vec());
}

#[test]
fn chmod_changes_digest() {
    assert_changes("chmod file", |t| t[1].2 = 0o755);
    assert_changes("chmod dir", |t| t[0].2 = 0o700);
    assert_changes("setuid", |t| t[1].2 = 0o4644);
}

#[test]
fn content_swap_changes_digest() {
    assert_changes("swap", |t| {
        let a = t[1].3.clone();
        t[1].3 = t[2].3.clone();
        t[2].3 = a;
    });
}

#[test]
fn content_edit_changes_digest() {
    assert_changes("edit", |t| t[2].3 = h(b"beta2").to_vec());
}

#[test]
fn file_symlink_kind_change_changes_digest() {
    // Same path, same "content" bytes: only the kind differs.
    assert_changes("file->symlink", |t| {
        t[1].1 = EntryKind::Symlink;
        t[1].2 = 0o777;
    });
    assert_changes("symlink->file", |t| {
        t[3].1 = EntryKind::File;
        t[3].2 = 0o777;
    });
    assert_changes("dir->file", |t| t[0].1 = EntryKind::File);
    assert_ne!(
        entry_element(b"x", EntryKind::File, 0o644, b"t"),
        entry_element(b"x", EntryKind::Symlink, 0o644, b"t")
    );
}

#[test]
fn symlink_target_change_changes_digest() {
    assert_changes("retarget", |t| t[3].3 = b"src/b.rs".to_vec());
}

#[test]
fn empty_dir_add_and_remove_change_digest() {
    assert_changes("add empty dir", |t| {
        t.push((b"empty".to_vec(), EntryKind::Dir, 0o755, vec![]))
    });
    let mut with = base();
    with.push((b"empty".to_vec(), EntryKind::Dir, 0o755, vec![]));
    let mut d = digest(&with);
    d.remove(b"empty", EntryKind::Dir, 0o755, &[]);
    assert_eq!(
        d,
        digest(&base()),
        "remove must restore the previous digest"
    );
    assert_ne!(digest(&with), digest(&base()));
}

#[test]
fn mtime_is_not_an_input() {
    // The API has no mtime; two identical trees always agree.
    assert_eq!(digest(&base()), digest(&base()));
}

fn empty_files(n: usize) -> Digest {
    let empty = h(b"");
    let paths: Vec<Vec<u8>> = (0..n).map(|i| format!("f{i:05}").into_bytes()).collect();
    par_digest(paths.par_iter().map(|p| Entry::file(p, 0o644, &empty)))
}

#[test]
fn identical_empty_files_do_not_cancel() {
    let zero = Digest::new();
    let d65535 = empty_files(65_535);
    let d65536 = empty_files(65_536);
    assert_ne!(d65536, zero, "65,536 identical empty files cancelled out");
    assert_ne!(d65536, d65535);
    assert_ne!(d65535, zero);
    // The control: a content-only construction (the seed's) does cancel,
    // so this test would catch an element without the path.
    let content_only = LtHash::of_element(&h(b""));
    let mut acc = LtHash::identity();
    for _ in 0..65_536 {
        acc.add(&content_only);
    }
    assert!(acc.is_identity());
}

/// (path, content) of one entry.
type PathContent = (&'static [u8], &'static [u8]);

#[test]
fn length_prefixes_separate_path_and_content() {
    // Moving bytes across the path/content boundary, or hiding a separator in
    // the path, must change the element.
    let pairs: [(PathContent, PathContent); 5] = [
        ((b"a\0", b"b"), (b"a", b"\0b")),
        ((b"ab", b""), (b"a", b"b")),
        ((b"", b"ab"), (b"a", b"b")),
        ((b"a\n", b"x"), (b"a", b"\nx")),
        ((b"a\x01\0\0\0\0\0\0\0b", b""), (b"a", b"b")),
    ];
    for ((p1, c1), (p2, c2)) in pairs {
        for k in [EntryKind::File, EntryKind::Dir, EntryKind::Symlink] {
            assert_ne!(
                encode_entry(p1, k, 0o644, c1),
                encode_entry(p2, k, 0o644, c2),
                "{p1:?}/{c1:?} vs {p2:?}/{c2:?}"
            );
            assert_ne!(
                entry_element(p1, k, 0o644, c1),
                entry_element(p2, k, 0o644, c2)
            );
        }
    }
}

#[test]
fn length_boundaries_are_distinct() {
    let mut seen = std::collections::HashSet::new();
    for len in [
        0usize, 1, 255, 256, 257, 1023, 1024, 1025, 4096, 65_535, 65_536,
    ] {
        let path = vec![b'p'; len];
        for (k, c) in [
            (EntryKind::Dir, &b""[..]),
            (EntryKind::File, &[0u8; 32][..]),
            (EntryKind::Symlink, &b"p"[..]),
        ] {
            assert!(seen.insert(encode_entry(&path, k, 0o755, c)), "len {len}");
            assert!(
                seen.insert(encode_entry(b"x", k, 0o755, &path)),
                "clen {len}"
            );
        }
    }
}

#[test]
fn non_utf8_and_newline_paths_hash() {
    let d1: Digest = [Entry::dir(b"\xff\xfe\n", 0o755)].into_iter().collect();
    let d2: Digest = [Entry::dir(b"\xff\xfe", 0o755)].into_iter().collect();
    assert_ne!(d1, d2);
}
