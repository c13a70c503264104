//! Fuzz target: a checkpoint record (8-byte little-endian sequence number,
//! then the stored JSON) and the digest inside it. Never panics.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 8 {
        return;
    }
    let seq = u64::from_le_bytes(data[..8].try_into().unwrap());
    if let Ok(cp) = ckpt_lib::store::catalog::decode_checkpoint(seq, &data[8..]) {
        let _ = ckpt_lib::engine::digest::stored_digest(&cp);
    }
});
