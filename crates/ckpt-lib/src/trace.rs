//! Phase timings for profiling: once [`enable`]d (the CLI does so for
//! `CKPT_TRACE=1`), every [`span`] prints its duration to stderr when it
//! ends, and when it ended, counted from [`enable`] (a timeline: spans on
//! other threads overlap). Costs one relaxed load when off.
//!
//! The one piece of process-wide state in the library, and a documented
//! exception to "configuration is explicit" (see [`crate::config`]): a
//! diagnostics switch, set once at start-up, that changes no result. Threading
//! a tracer through every engine call would cost more than it shows.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

static ON: AtomicBool = AtomicBool::new(false);
static SINCE: OnceLock<Instant> = OnceLock::new();

/// Turns tracing on for the rest of the process.
pub fn enable() {
    SINCE.get_or_init(Instant::now);
    ON.store(true, Ordering::Relaxed);
}

fn enabled() -> bool {
    ON.load(Ordering::Relaxed)
}

/// A timed phase; prints on drop when tracing is on.
pub struct Span {
    name: &'static str,
    start: Option<Instant>,
}

/// Starts timing a phase.
pub fn span(name: &'static str) -> Span {
    Span {
        name,
        start: enabled().then(Instant::now),
    }
}

impl Drop for Span {
    fn drop(&mut self) {
        if let Some(s) = self.start {
            let at = SINCE.get().map_or(0.0, |t| t.elapsed().as_secs_f64() * 1e3);
            eprintln!(
                "trace: {:<18} {:>9.3} ms   (ended at {at:.3} ms)",
                self.name,
                s.elapsed().as_secs_f64() * 1e3
            );
        }
    }
}
