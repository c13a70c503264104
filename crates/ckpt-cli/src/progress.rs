//! Progress on stderr for long operations, shown only when stderr is a
//! terminal, `--quiet` is off, and the operation has already taken longer
//! than [`DELAY`] — so quick operations, pipes, logs and `--json` consumers
//! never see it. Both kinds clear themselves when the operation ends.
//!
//! - [`Spinner`]: elapsed time only (first save, `restore --to`, verify);
//! - [`with_bar`]: a byte bar for copies (`ckpt cp`, `ckpt fork`). The
//!   library only advances atomic counters ([`ckpt_fs::copytree::Progress`]);
//!   a thread here samples them.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use ckpt_fs::copytree::Progress;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Operations quicker than this show nothing.
pub const DELAY: Duration = Duration::from_millis(400);

fn shown(quiet: bool) -> bool {
    !quiet && std::io::stderr().is_terminal()
}

/// A running spinner; clears itself on drop.
pub struct Spinner {
    bar: Option<ProgressBar>,
}

impl Spinner {
    /// Starts a spinner for `what` (e.g. "saving"), if stderr is a
    /// terminal and `quiet` is false.
    pub fn start(what: &str, quiet: bool) -> Spinner {
        if !shown(quiet) {
            return Spinner { bar: None };
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
        Spinner { bar: Some(bar) }
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

/// Runs `f` while a bar shows `progress`. `total_bytes` sets a bounded bar;
/// `None` shows a spinner with the byte count.
pub fn with_bar<T>(
    progress: &Progress,
    total_bytes: Option<u64>,
    quiet: bool,
    f: impl FnOnce() -> T,
) -> T {
    if !shown(quiet) {
        return f();
    }
    let template = match total_bytes {
        Some(_) => "{bar:40} {binary_bytes}/{binary_total_bytes} {binary_bytes_per_sec} {msg}",
        None => "{spinner} {binary_bytes} {binary_bytes_per_sec} {msg}",
    };
    let bar = ProgressBar::with_draw_target(total_bytes, ProgressDrawTarget::hidden()).with_style(
        ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut waited = Duration::ZERO;
            while !done.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(100));
                waited += Duration::from_millis(100);
                if waited < DELAY {
                    continue;
                }
                if bar.is_hidden() {
                    bar.set_draw_target(ProgressDrawTarget::stderr());
                }
                bar.set_position(progress.bytes.load(Ordering::Relaxed));
                bar.set_message(format!(
                    "{} entries",
                    progress.entries.load(Ordering::Relaxed)
                ));
            }
            bar.finish_and_clear();
        });
        let out = f();
        done.store(true, Ordering::Relaxed);
        out
    })
}
