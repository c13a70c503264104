//! `ckpt hook`: an agent harness's hook event (JSON on stdin) → at most one
//! checkpoint ([`ckpt_lib::ops::hook`]).
//!
//! The payload is read by `ckpt_harness::HookEvent::parse`: the harness is
//! named by `--agent` (every configuration `ckpt init --agent` writes does)
//! or recognised from the payload's shape, and `--event` names the event
//! for harnesses whose payload does not. For a harness or a shell loop
//! without JSON, the variables `CKPT_EVENT`, `CKPT_SESSION`, `CKPT_TOOL`
//! and `CKPT_MESSAGE` fill in what stdin lacks. The workspace is found from
//! `-C`, else the event's `cwd`, else the current directory.
//!
//! The contract with every harness (`ckpt_harness`, "The one rule"):
//! nothing on stdout unless `--json` is asked for; exit 0 when the event
//! was recorded or there was nothing to record (also outside a workspace,
//! with a note on stderr); otherwise one line on stderr and exit 1, which
//! every harness shows and goes on from. Never exit 2: it blocks a tool
//! call in several harnesses. The store lock is waited for 1 s unless
//! `--lock-timeout` says otherwise, so a long `gc` or restore costs the
//! agent a second, not a stall; the change is in the next checkpoint.
//!
//! When no watcher answered, the hook starts one for the workspace
//! (detached, not waited for; it stops itself once idle:
//! `CKPT_HOOK_WATCH`), so the hooks after the first save at watch-mode
//! cost.

use std::io::{IsTerminal, Read};
use std::process::ExitCode;
use std::time::Duration;

use ckpt_harness::{Harness, HookEvent, Kind};
use ckpt_lib::ops::hook::{HookOptions, HookReport};
use ckpt_lib::ops::parts::{watch_log_path, Workspace};
use ckpt_lib::ops::Context;
use ckpt_lib::{Error, Result};

use crate::context::Ctx;
use crate::render::{self, print_report};

/// How long a hook waits for the store lock unless `--lock-timeout` is
/// given.
const HOOK_LOCK_TIMEOUT: Duration = Duration::from_secs(1);

// Arguments of `ckpt hook`.
#[derive(clap::Args)]
pub struct HookArgs {
    /// The harness that sends the event (default: recognised from the payload).
    #[arg(long, value_name = "HARNESS", value_parser = harness_names())]
    agent: Option<String>,
    /// The event's name, for harnesses whose payload does not carry it (Copilot CLI).
    #[arg(long, value_name = "EVENT")]
    event: Option<String>,
    /// JSON output.
    #[arg(long)]
    json: bool,
}

/// The `--agent` values.
pub fn harness_names() -> clap::builder::PossibleValuesParser {
    clap::builder::PossibleValuesParser::new(Harness::names())
}

/// `ckpt hook`.
pub fn run(ctx: &Ctx, args: &HookArgs, chdir_given: bool) -> ExitCode {
    let named = args.agent.as_deref().and_then(Harness::from_name);
    match hook(ctx, args, named, chdir_given) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ckpt hook: {e}");
            crate::exit::hook_failure(named)
        }
    }
}

/// Reads the event: stdin, then the `CKPT_*` variables for what it lacks.
fn read_event(args: &HookArgs, harness: Option<Harness>) -> Result<HookEvent> {
    let mut input = Vec::new();
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        stdin
            .lock()
            .read_to_end(&mut input)
            .map_err(|e| Error::io("read", "<stdin>", e))?;
    }
    let mut ev = HookEvent::parse(&input, harness, args.event.as_deref())
        .map_err(|e| Error::Usage(format!("{e}; nothing was saved")))?;
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    if ev.event.is_empty() {
        if let Some(e) = var("CKPT_EVENT") {
            ev.kind = Kind::of(&e);
            ev.event = e;
        }
    }
    if ev.session.is_empty() {
        ev.session = var("CKPT_SESSION").unwrap_or_default();
    }
    if ev.tool.is_empty() {
        ev.tool = var("CKPT_TOOL").unwrap_or_default();
    }
    if ev.detail.is_empty() {
        ev.detail = var("CKPT_MESSAGE").unwrap_or_default();
    }
    Ok(ev)
}

fn hook(ctx: &Ctx, args: &HookArgs, harness: Option<Harness>, chdir_given: bool) -> Result<()> {
    let event = read_event(args, harness)?;
    let start = if !chdir_given && !event.cwd.as_os_str().is_empty() {
        event.cwd.clone()
    } else {
        ctx.ops.cwd.clone()
    };
    let mut config = ctx.ops.config.clone();
    if !ctx.lock_timeout_given {
        config.lock_timeout = HOOK_LOCK_TIMEOUT;
    }
    let here = Context::new(start, config);
    let report = match ckpt_lib::ops::hook::hook(&here, &HookOptions { event }) {
        Ok(r) => r,
        Err(Error::NotAWorkspace(p)) => {
            if !ctx.quiet {
                eprintln!(
                    "ckpt hook: {} is not in a ckpt workspace; nothing saved (run `ckpt init`)",
                    p.display()
                );
            }
            return Ok(());
        }
        Err(Error::LockTimeout { path, waited_secs }) => {
            return Err(Error::Usage(format!(
                "warning: the store is busy ({} held by another ckpt command for {waited_secs} s); \
                 nothing was saved for this event, and the next event's checkpoint will hold its changes",
                path.display()
            )))
        }
        Err(e) => return Err(Error::Usage(format!("warning: {e}; nothing was saved for this event, the agent goes on"))),
    };
    if report.start_watcher {
        start_watcher(ctx, &here, &report);
    }
    if args.json {
        print_report(&report);
        return Ok(());
    }
    render::warn_unreadable("ckpt hook: ", &report.save.unreadable);
    if ctx.verbose {
        match report.saved() {
            Some(cp) => eprintln!(
                "ckpt hook: saved {} \"{}\" ({})",
                cp.id(),
                report.message,
                render::ms(report.save.elapsed)
            ),
            None => eprintln!(
                "ckpt hook: nothing changed ({})",
                render::ms(report.save.elapsed)
            ),
        }
    }
    Ok(())
}

/// Starts the workspace's watcher in the background (see the module doc).
/// A failure to start costs nothing but speed, so it is only a note.
fn start_watcher(ctx: &Ctx, here: &Context, report: &HookReport) {
    let Ok(ws) = Workspace::discover(&here.cwd) else {
        return;
    };
    let mut extra = Vec::new();
    if let Some(idle) = report.watcher_idle {
        extra = vec!["--idle-stop".to_string(), idle.as_secs().to_string()];
    }
    match super::watch::spawn_detached(&ws, &extra) {
        Ok(child) if ctx.verbose => eprintln!(
            "ckpt hook: started the watcher (pid {}; log {})",
            child.id(),
            watch_log_path(&ws.store_path).display()
        ),
        Ok(_) => {}
        Err(e) if ctx.verbose => eprintln!("ckpt hook: could not start the watcher: {e}"),
        Err(_) => {}
    }
}
