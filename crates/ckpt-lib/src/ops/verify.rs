//! `ckpt verify` (to be filled in).
