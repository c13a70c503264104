//! `ckpt state` (to be filled in).
