//! `ckpt init` (to be filled in).
