//! A progress indicator for long operations (first save, `restore --to`,
//! verify): a spinner with the elapsed time on stderr, shown only when
//! stderr is a terminal, `--quiet` is off, and the operation has already
//! taken longer than [`DELAY`] — so quick operations, pipes, logs and
//! `--json` consumers never see it. It is cleared when dropped.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Operations quicker than this show nothing.
pub const DELAY: Duration = Duration::from_millis(400);

/// A running indicator; clears itself on drop.
pub struct Progress {
    bar: Option<ProgressBar>,
}

impl Progress {
    /// Starts an indicator for `what` (e.g. "saving"), if stderr is a
    /// terminal and `quiet` is false.
    pub fn start(what: &str, quiet: bool) -> Progress {
        if quiet || !std::io::stderr().is_terminal() {
            return Progress { bar: None };
        }
        let bar = ProgressBar::hidden();
        bar.set_style(
            ProgressStyle::with_template("{spinner} {msg} {elapsed}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        bar.set_message(what.to_string());
        // Nothing is drawn until the first tick, after DELAY.
        let b = bar.clone();
        std::thread::spawn(move || {
            std::thread::sleep(DELAY);
            if !b.is_finished() {
                b.set_draw_target(ProgressDrawTarget::stderr());
                b.enable_steady_tick(Duration::from_millis(100));
            }
        });
        Progress { bar: Some(bar) }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}
