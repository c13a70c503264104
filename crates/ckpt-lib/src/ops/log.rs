//! `ckpt log` (to be filled in).
