//! Fuzz target: one agent-state value record of `state.redb`. Never panics.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = ckpt_state::decode_value_record(data);
});
