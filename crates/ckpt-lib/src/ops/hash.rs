//! `ckpt hash` (to be filled in).
