//! A progress bar for long copies (`ckpt cp`, `ckpt fork`), drawn with
//! indicatif on stderr only when stderr is a terminal; otherwise nothing
//! extra is printed. The library only advances atomic counters
//! ([`ckpt::copytree::Progress`]); a thread here samples them.

use std::io::IsTerminal;
use std::sync::atomic::Ordering;
use std::time::Duration;

use ckpt::copytree::Progress;

/// Runs `f` while a bar shows `progress` (if stderr is a terminal and not
/// `quiet`). `total_bytes` sets a bounded bar; `None` shows a spinner.
pub fn with_bar<T>(
    progress: &Progress,
    total_bytes: Option<u64>,
    quiet: bool,
    f: impl FnOnce() -> T,
) -> T {
    if quiet || !std::io::stderr().is_terminal() {
        return f();
    }
    let bar = match total_bytes {
        Some(n) => indicatif::ProgressBar::new(n).with_style(
            indicatif::ProgressStyle::with_template(
                "{bar:40} {binary_bytes}/{binary_total_bytes} {binary_bytes_per_sec} {msg}",
            )
            .expect("template"),
        ),
        None => indicatif::ProgressBar::new_spinner().with_style(
            indicatif::ProgressStyle::with_template(
                "{spinner} {binary_bytes} {binary_bytes_per_sec} {msg}",
            )
            .expect("template"),
        ),
    };
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            // Only draw for operations that last: the first frame after 300 ms.
            let mut waited = Duration::ZERO;
            while !done.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(100));
                waited += Duration::from_millis(100);
                if waited < Duration::from_millis(300) {
                    continue;
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
