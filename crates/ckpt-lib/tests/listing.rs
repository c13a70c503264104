//! `platform::fs::list_dir_packed`, the scan's directory listing, against
//! the standard library's `read_dir` on real directories: the same names
//! (any bytes but `/` and NUL, up to 255 bytes, enough of them to need
//! several `getdents64` calls of its 32 KiB buffer), each exactly once, and
//! `c_name` is the same name NUL-terminated.

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

use ckpt_fs::fs;
use proptest::prelude::*;

fn arb_name() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(1u8..=255, 1..12),
        proptest::collection::vec(1u8..=255, 200..=255),
    ]
    .prop_filter("valid name", |n| {
        !n.contains(&b'/') && n.as_slice() != b"." && n.as_slice() != b".."
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn packed_listing_matches_read_dir(
        names in proptest::collection::btree_set(arb_name(), 0..400),
        dirs in proptest::collection::btree_set(arb_name(), 0..5),
    ) {
        let tmp = tempfile::tempdir().unwrap();
        for n in &names {
            std::fs::write(tmp.path().join(OsStr::from_bytes(n)), b"").unwrap();
        }
        for d in dirs.difference(&names) {
            std::fs::create_dir(tmp.path().join(OsStr::from_bytes(d))).unwrap();
        }
        let want: BTreeSet<Vec<u8>> = std::fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().as_bytes().to_vec())
            .collect();
        let l = fs::list_dir_packed(fs::open_dir_path(tmp.path()).unwrap()).unwrap();
        let mut got = Vec::new();
        for i in 0..l.len() {
            prop_assert_eq!(l.c_name(i).to_bytes(), l.name(i));
            got.push(l.name(i).to_vec());
        }
        let n = got.len();
        let got: BTreeSet<Vec<u8>> = got.into_iter().collect();
        prop_assert_eq!(n, got.len(), "a name listed twice");
        prop_assert_eq!(got, want);
        // The descriptor is the directory's: a name stats through it.
        if let Some(first) = names.iter().next() {
            let m = fs::stat_at(l.fd(), first).unwrap();
            prop_assert_eq!(m.size, 0);
        }
    }
}
