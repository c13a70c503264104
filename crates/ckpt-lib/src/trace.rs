//! Phase timings for profiling: with `CKPT_TRACE=1` every [`span`] prints
//! its duration to stderr when it ends. Costs one branch when off.

use std::sync::OnceLock;
use std::time::Instant;

fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("CKPT_TRACE").is_some_and(|v| v != "0"))
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
            eprintln!(
                "trace: {:<18} {:>9.3} ms",
                self.name,
                s.elapsed().as_secs_f64() * 1e3
            );
        }
    }
}
