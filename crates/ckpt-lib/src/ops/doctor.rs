//! `ckpt doctor` (to be filled in).
