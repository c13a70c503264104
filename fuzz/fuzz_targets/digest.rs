//! Fuzz target: a stored LtHash16 digest (base64url). Never panics; what it
//! accepts re-encodes to the same text.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(s) = std::str::from_utf8(data) {
        if let Ok(l) = ckpt_lthash::LtHash::from_base64url(s) {
            assert_eq!(l.to_base64url(), s);
        }
    }
});
