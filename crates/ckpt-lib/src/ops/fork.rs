//! `ckpt fork` (to be filled in).
