//! `ckpt gc` (to be filled in).
