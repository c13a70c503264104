//! `ckpt watch`: run, detach, stop and describe the workspace's watcher
//! (the watcher itself is `ckpt_lib::daemon`).
//!
//! `--daemon` re-executes this binary as `ckpt -C ROOT watch …` in a new
//! session (setsid), with stdin closed and output appended to
//! `<store>/watch.log`, and returns once the child answers `--status` as
//! ready (or fails, quoting the end of the log).

use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ckpt_lib::daemon::server::{self, WatchOptions};
use ckpt_lib::ops::parts::{watch_log_path, WatchStatus, Workspace};
use ckpt_lib::ops::watch::{self as ops, StopOptions, WatchStatusOptions};
use ckpt_lib::{Error, Result};
use clap::Args;

use crate::context::Ctx;
use crate::render::{self, print_report};

// `ckpt watch` arguments.
#[derive(Args)]
pub struct WatchArgs {
    /// Run detached in the background (log: `<store>/watch.log`).
    #[arg(long, conflicts_with_all = ["stop", "status"])]
    daemon: bool,
    /// Stop the running watcher.
    #[arg(long, conflicts_with = "status")]
    stop: bool,
    /// Describe the running watcher (pid, epoch, watches, dirty, memory, uptime).
    #[arg(long)]
    status: bool,
    /// Save a checkpoint after the tree has been quiet this long, if anything changed.
    #[arg(long, value_name = "QUIET_SECS")]
    auto_save: Option<f64>,
    /// Tag KEY=VALUE for auto-saves (repeatable).
    #[arg(
        long = "auto-save-tag",
        value_name = "KEY=VALUE",
        requires = "auto_save"
    )]
    auto_save_tags: Vec<String>,
    /// Stop after this many seconds without a request (status requests
    /// do not count); what watchers started by `ckpt hook` use.
    #[arg(long, value_name = "SECS", conflicts_with_all = ["stop", "status"])]
    idle_stop: Option<u64>,
    /// JSON output (with --status, --stop, --daemon).
    #[arg(long)]
    json: bool,
}

/// Longest wait for a detached watcher to become ready.
const START_TIMEOUT: Duration = Duration::from_secs(300);

fn print_ready(st: &WatchStatus) {
    eprintln!(
        "ckpt watch: watching {} ({} directories, ready in {:.0} ms, pid {})",
        st.facts.root.display(),
        st.facts.watches,
        st.facts.startup_ms.unwrap_or(0.0),
        st.facts.pid
    );
    warn_incomplete(st);
}

/// Says why a watcher cannot vouch for every change (e.g. the inotify
/// watch limit, with the sysctl to raise), if it cannot.
fn warn_incomplete(st: &WatchStatus) {
    if let Some(why) = st.facts.reason.as_deref().filter(|_| !st.facts.complete) {
        eprintln!("ckpt: warning: {why}");
    }
}

/// Runs `ckpt watch`.
pub fn run(ctx: &Ctx, args: &WatchArgs) -> Result<()> {
    if args.status {
        let r = ops::status(&ctx.ops, &WatchStatusOptions::default())?;
        if let (Some(e), true) = (&r.error, ctx.verbose) {
            eprintln!("watch: {e}");
        }
        if args.json {
            print_report(&r);
        } else {
            match &r.status {
                None => println!("no watcher is running for {}", r.root.display()),
                Some(s) => {
                    println!(
                        "watcher for {} (pid {})",
                        s.facts.root.display(),
                        s.facts.pid
                    );
                    println!(
                        "  state: {}",
                        match &s.facts.reason {
                            None => "complete (saves scan only dirty directories)".to_string(),
                            Some(r) => format!("incomplete, saves do full scans: {r}"),
                        }
                    );
                    println!("  epoch {:016x}, seq {}", s.epoch, s.facts.seq);
                    println!(
                        "  {} directories watched, {} dirty",
                        s.facts.watches, s.facts.dirty
                    );
                    println!(
                        "  memory {} RSS, up {:.0} s, started in {:.0} ms, {} queue overflows",
                        render::bytes(s.facts.rss_bytes),
                        s.facts.uptime_secs,
                        s.facts.startup_ms.unwrap_or(0.0),
                        s.facts.overflows
                    );
                    if let Some(i) = s.facts.idle_stop_secs {
                        println!("  stops itself after {i} s without a request");
                    }
                    if let Some(q) = s.facts.auto_save_secs {
                        println!(
                            "  auto-save after {q} s quiet ({} so far)",
                            s.facts.auto_saves
                        );
                    }
                    if s.facts.warming > 0 || s.facts.warmed_entries > 0 {
                        println!(
                            "  forks: {} being warmed, {} entries warmed",
                            s.facts.warming, s.facts.warmed_entries
                        );
                    }
                }
            }
        }
        return Ok(());
    }
    if args.stop {
        let r = ops::stop(&ctx.ops, &StopOptions::default())?;
        if args.json {
            print_report(&r);
        } else if !ctx.quiet {
            if r.stopped {
                println!("stopped the watcher for {}", r.root.display());
            } else {
                println!("no watcher was running for {}", r.root.display());
            }
        }
        return Ok(());
    }
    let ws = ctx.ops.workspace()?;
    let tags = crate::render::parse_tags(&args.auto_save_tags)?;
    let auto_save = match args.auto_save {
        Some(q) if !(q.is_finite() && q >= 0.0) => {
            return Err(Error::Usage(format!(
                "--auto-save {q}: expected a number of seconds"
            )))
        }
        Some(q) => Some(Duration::from_secs_f64(q)),
        None => None,
    };
    if args.daemon {
        return daemonize(ctx, &ws, args);
    }
    let opts = WatchOptions {
        auto_save,
        auto_save_tags: tags.into_iter().collect(),
        idle_stop: args.idle_stop.map(Duration::from_secs),
        on_ready: (!ctx.quiet).then_some(print_ready as fn(&WatchStatus)),
        config: ctx.ops.config.clone(),
    };
    server::run(&ws, opts)
}

fn daemonize(ctx: &Ctx, ws: &Workspace, args: &WatchArgs) -> Result<()> {
    let store = &ws.store_path;
    let log_path = watch_log_path(store);
    let log_start = std::fs::metadata(&log_path).map(|m| m.len()).unwrap_or(0);
    let mut extra: Vec<String> = Vec::new();
    if let Some(q) = args.auto_save {
        extra.extend(["--auto-save".into(), q.to_string()]);
    }
    for t in &args.auto_save_tags {
        extra.extend(["--auto-save-tag".into(), t.clone()]);
    }
    if let Some(i) = args.idle_stop {
        extra.extend(["--idle-stop".into(), i.to_string()]);
    }
    let mut child = spawn_detached(ws, &extra)?;
    let t0 = Instant::now();
    loop {
        let rep = ops::status(&ctx.ops, &WatchStatusOptions::default())?;
        if let Some(st) = rep.status.as_ref().filter(|s| s.facts.pid == child.id()) {
            if args.json {
                print_report(&rep);
            } else if !ctx.quiet {
                println!(
                    "watcher started (pid {}): {} directories in {:.0} ms; log {}",
                    st.facts.pid,
                    st.facts.watches,
                    st.facts.startup_ms.unwrap_or(0.0),
                    log_path.display()
                );
                warn_incomplete(st);
            }
            return Ok(());
        }
        if let Ok(Some(status)) = child.try_wait() {
            let text = std::fs::read(&log_path).unwrap_or_default();
            let tail = child_error(&text[(log_start as usize).min(text.len())..]);
            return Err(Error::Usage(format!(
                "the watcher exited ({status}) before it was ready: {tail}"
            )));
        }
        if t0.elapsed() > START_TIMEOUT {
            return Err(Error::Usage(format!(
                "the watcher (pid {}) did not become ready within {} s; see {}",
                child.id(),
                START_TIMEOUT.as_secs(),
                log_path.display()
            )));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Starts `ckpt -C ROOT watch EXTRA…` in a session of its own (so it
/// outlives this process and its terminal), with stdin closed and output
/// appended to `<store>/watch.log`, and returns without waiting for it.
/// A second watcher of the same store exits at once (the watch lock).
pub fn spawn_detached(ws: &Workspace, extra: &[String]) -> Result<std::process::Child> {
    let log_path = watch_log_path(&ws.store_path);
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .map_err(|e| Error::io("open", &log_path, e))?;
    let exe = std::env::current_exe().map_err(|e| Error::io("find own binary", "ckpt", e))?;
    let mut cmd = Command::new(exe);
    cmd.arg("-C").arg(&ws.root).arg("watch").args(extra);
    cmd.stdin(Stdio::null())
        .stdout(
            log.try_clone()
                .map_err(|e| Error::io("dup", &log_path, e))?,
        )
        .stderr(log);
    // SAFETY: setsid is async-signal-safe; it detaches the child from our
    // session and terminal so it outlives us.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    cmd.spawn()
        .map_err(|e| Error::io("start watcher", &ws.root, e))
}

/// What a detached watcher that exited early wrote to its log, for our own
/// error message: its `ckpt: error: ` prefix is dropped, since the message
/// it goes into already has one.
fn child_error(log: &[u8]) -> String {
    String::from_utf8_lossy(log)
        .trim()
        .lines()
        .map(|l| l.strip_prefix("ckpt: error: ").unwrap_or(l))
        .collect::<Vec<_>>()
        .join("\n")
}
