//! `ckpt cp` (to be filled in).
