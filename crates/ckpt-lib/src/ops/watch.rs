//! `ckpt watch` (to be filled in).
