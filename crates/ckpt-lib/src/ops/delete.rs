//! `ckpt delete` (to be filled in).
