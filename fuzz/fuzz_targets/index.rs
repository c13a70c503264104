//! Fuzz target: the stat-index decoder (`CKIX`). The input's last 32 bytes
//! are replaced by the BLAKE3 trailer of the rest, so the fuzzer explores
//! the parser behind the checksum, not just the checksum, and reads every
//! record's entries (checked as they are read). Never panics.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = ckpt_lib::store::index::Index::decode(data);
    if data.len() >= 32 {
        let body = &data[..data.len() - 32];
        let mut b = body.to_vec();
        b.extend_from_slice(blake3_trailer(body).as_slice());
        if let Ok(ix) = ckpt_lib::store::index::Index::decode(&b) {
            // Entries are checked as they are read: counted without
            // decoding, then decoded, the same number.
            for rec in ix.dirs.values() {
                let n = rec.entries.len();
                assert_eq!(rec.entries.iter().count(), n);
            }
            let _ = ckpt_lib::store::index::Index::decode(&ix.encode()).expect("re-encoded index decodes");
        }
    }
});

fn blake3_trailer(body: &[u8]) -> [u8; 32] {
    ckpt_lib::Hash::of(body).0
}
