//! Opening a redb file that is damaged: an error, never a panic.
//!
//! redb checks a file's checksums when it repairs it, not on every read,
//! and a read-only open of a cleanly closed file loads the allocator state
//! from its pages unchecked. Bytes damaged there can make redb index out of
//! bounds and panic (seen with a catalog whose every 97th byte was flipped:
//! `range end index 21986 out of range for slice of length 4096` in
//! `ReadOnlyDatabase::new`). A panic is not an answer ckpt gives to bad
//! input, so [`opened`] runs an open under `catch_unwind` and turns a panic
//! into redb's own error for a corrupted file, which names nothing but what
//! redb said; the caller adds the path.
//!
//! The process's panic hook would still print the panic. So the first call
//! wraps the hook that is set then (the default one, or the caller's):
//! the wrapper stays quiet for a panic on a thread that is inside
//! [`opened`], and passes every other panic on. That is the one piece of
//! process-wide state this adds, set once; like [`crate::trace`]'s switch,
//! it changes no result.
//!
//! Why catching is sound: what redb had built when it panicked is dropped
//! while unwinding, and nothing of it is used after (the open failed).
//! What [`opened`] does not cover: a page damaged where a later read, not
//! the open, reaches it.

use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Once;

thread_local! {
    /// This thread is inside [`opened`]: the hook stays quiet.
    static CONTAINED: Cell<bool> = const { Cell::new(false) };
}

static QUIET_HOOK: Once = Once::new();

/// `open`, with a panic in it returned as
/// `StorageError::Corrupted` (see the module doc).
pub(crate) fn opened<T>(
    open: impl FnOnce() -> Result<T, redb::DatabaseError>,
) -> Result<T, redb::DatabaseError> {
    QUIET_HOOK.call_once(|| {
        let passed_on = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !CONTAINED.with(Cell::get) {
                passed_on(info);
            }
        }));
    });
    let outer = CONTAINED.with(|c| c.replace(true));
    let result = catch_unwind(AssertUnwindSafe(open));
    CONTAINED.with(|c| c.set(outer));
    result.unwrap_or_else(|panic| {
        let why = panic
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| panic.downcast_ref::<&str>().copied())
            .unwrap_or("a panic");
        Err(redb::DatabaseError::Storage(redb::StorageError::Corrupted(
            format!("redb could not read it ({why})"),
        )))
    })
}
