//! Fuzz target: the tree decoder (`CKT1`, docs/FORMAT.md). Never panics;
//! whatever it accepts re-encodes to the same bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(t) = ckpt_lib::store::tree::Tree::decode(data) {
        assert_eq!(t.encode(), data);
    }
});
