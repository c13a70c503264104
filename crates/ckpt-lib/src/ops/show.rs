//! `ckpt show` (to be filled in).
