//! Fuzz target: the stat-index delta decoder (`CKID`), applied to a small
//! real index. The input's last 32 bytes are replaced by the BLAKE3 trailer
//! of the rest, so the fuzzer explores the parser behind the checksum.
//! Never panics; a refused delta leaves the index unchanged.
#![no_main]
use libfuzzer_sys::fuzz_target;

use ckpt_lib::store::index::Index;

fuzz_target!(|data: &[u8]| {
    let base = Index::default().encode();
    let mut ix = Index::decode(&base).expect("an empty index decodes");
    let _ = ix.apply_delta(data.to_vec());
    if data.len() >= 32 {
        let body = &data[..data.len() - 32];
        let mut b = body.to_vec();
        b.extend_from_slice(&ckpt_lib::Hash::of(body).0);
        let before = ix.dirs.clone();
        match ix.apply_delta(b) {
            Ok(()) => {
                let again = Index::decode(&ix.encode()).expect("re-encoded index decodes");
                assert_eq!(again.dirs, ix.dirs);
            }
            Err(_) => assert_eq!(ix.dirs, before),
        }
    }
});
