//! `ckpt du` (to be filled in).
