//! `ckpt`: the command-line front end of the `ckpt` library.
//!
//! This crate only parses arguments, calls the library and prints results
//! (text for people, `--json` for programs; see `render`). Exit codes are
//! those of [`ckpt_lib::Error::exit_code`], documented in README.md.

mod context;
mod cp_cmd;
mod doctor_cmd;
mod du_cmd;
mod fork_cmd;
mod gc_cmd;
mod gen_cmd;
mod hook_cmd;
mod mcp_cmd;
mod progress;
mod render;
mod state_cmd;
mod watch_cmd;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use ckpt_lib::engine::diff::{self, ContentDiff, PathFilter, TreeSource};
use ckpt_lib::engine::restore;
use ckpt_lib::engine::save::{SaveOptions, SaveOutcome, ScanCounts};
use ckpt_lib::ops;
use ckpt_lib::workspace::Workspace;
use ckpt_lib::{Error, Result};
use clap::{Parser, Subcommand};
use serde_json::{json, Value};

use context::Ctx;
use render::SCHEMA;

/// Instant checkpoint, diff and restore for a working directory.
#[derive(Parser)]
#[command(
    name = "ckpt",
    version,
    about = "Instant checkpoints of a whole working directory: save, diff, restore",
    long_about = None,
    after_help = "Start with `ckpt init`, then `ckpt save -m MESSAGE` before anything risky, \
`ckpt log`, `ckpt diff`, `ckpt restore ID` (itself undoable).\n\
Agents: `ckpt init --agent claude --write` (hooks), `ckpt mcp` (MCP server). \
Every command takes --json; exit codes are listed in README.md."
)]
struct Cli {
    /// Run as if started in DIR.
    #[arg(short = 'C', global = true, value_name = "DIR", id = "chdir")]
    chdir: Option<PathBuf>,
    /// Seconds to wait for another ckpt process to finish.
    #[arg(long, global = true, default_value_t = 60, value_name = "SECS")]
    lock_timeout: u64,
    /// Print less.
    #[arg(short, long, global = true)]
    quiet: bool,
    /// Print more (timings, what was read).
    #[arg(short, long, global = true)]
    verbose: bool,
    /// Scan the whole workspace even when a watcher could say what changed.
    #[arg(long, global = true)]
    full_scan: bool,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Make a directory (default: the current one) a workspace.
    Init {
        /// The directory.
        dir: Option<PathBuf>,
        /// Where to keep the store (default: see README, "Where the store lives").
        #[arg(long, value_name = "DIR")]
        store: Option<PathBuf>,
        /// Also set up hooks for an agent harness: print its configuration,
        /// or merge it with --write (an existing workspace is kept).
        #[arg(long, value_enum, value_name = "HARNESS")]
        agent: Option<hook_cmd::Agent>,
        /// With --agent: merge the hooks into the harness settings file
        /// (.claude/settings.json), keeping everything already there.
        #[arg(long, requires = "agent")]
        write: bool,
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// Record a checkpoint of the whole workspace.
    Save {
        /// Message.
        #[arg(short, long, default_value = "")]
        message: String,
        /// Tag KEY=VALUE (repeatable).
        #[arg(long = "tag", value_name = "KEY=VALUE")]
        tags: Vec<String>,
        /// Record a checkpoint even if nothing changed.
        #[arg(long)]
        allow_empty: bool,
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// List checkpoints, newest first.
    Log {
        /// Show at most N.
        #[arg(short = 'n', long)]
        limit: Option<usize>,
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// Show one checkpoint and what it changed.
    Show {
        /// Checkpoint id (v12, a hash prefix, HEAD, HEAD~1, latest).
        id: String,
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// What changed since the last checkpoint.
    Status {
        /// JSON output.
        #[arg(long)]
        json: bool,
        /// Limit to paths.
        #[arg(last = true)]
        paths: Vec<PathBuf>,
    },
    /// Compare two checkpoints, or a checkpoint and the working directory.
    Diff {
        /// From (default: HEAD).
        a: Option<String>,
        /// To (default: the working directory).
        b: Option<String>,
        /// Only the name-status summary, no content diffs.
        #[arg(long)]
        name_status: bool,
        /// JSON output.
        #[arg(long)]
        json: bool,
        /// Limit to paths.
        #[arg(last = true)]
        paths: Vec<PathBuf>,
    },
    /// Bring the workspace (or some paths, or another directory) back to a checkpoint.
    Restore {
        /// Checkpoint id.
        id: String,
        /// Materialise into this new or empty directory instead.
        #[arg(long, value_name = "DIR")]
        to: Option<PathBuf>,
        /// Only show what would change.
        #[arg(long)]
        dry_run: bool,
        /// Do not save the current state first.
        #[arg(long)]
        no_save: bool,
        /// Restore only the files, leave the agent state as it is.
        #[arg(long, conflicts_with = "state_only")]
        files_only: bool,
        /// Restore only the agent state, leave the files as they are.
        #[arg(long, conflicts_with = "to")]
        state_only: bool,
        /// JSON output.
        #[arg(long)]
        json: bool,
        /// Restore only these paths.
        #[arg(last = true)]
        paths: Vec<PathBuf>,
    },
    /// Delete a checkpoint record (its data goes at the next gc).
    Delete {
        /// Checkpoint id.
        id: String,
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// Check that the workspace is exactly a checkpoint's state (default:
    /// HEAD), or with --store that every stored object, tree and record is
    /// intact.
    Verify {
        /// Checkpoint id.
        id: Option<String>,
        /// Check the store instead of the workspace.
        #[arg(long)]
        store: bool,
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// Print the state digest of any directory (no workspace needed).
    Hash {
        /// The directory.
        dir: PathBuf,
        /// Print the full 2048-byte LtHash state (base64url) instead of the checksum.
        #[arg(long)]
        full: bool,
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// Agent state: a transactional key-value store that rewinds with the files.
    State {
        #[command(subcommand)]
        cmd: state_cmd::StateCmd,
    },
    /// Copy a file or tree like `cp -a`, in parallel, with the copy engine.
    Cp(cp_cmd::CpArgs),
    /// Materialise a checkpoint as a new, independent workspace.
    Fork(fork_cmd::ForkArgs),
    /// Show filesystems, probed copy capabilities, store space, inotify
    /// limits, and what ckpt will use.
    Doctor {
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// Remove stored data that no checkpoint references; with --keep-*
    /// flags (or a saved policy), first drop the checkpoints no rule keeps.
    Gc {
        /// Only report what would be removed.
        #[arg(long)]
        dry_run: bool,
        /// JSON output.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        keep: gc_cmd::KeepArgs,
    },
    /// Record a checkpoint for an agent-harness hook event (JSON on stdin);
    /// silent, and nothing saved, when nothing changed.
    Hook {
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// Run a Model Context Protocol server on stdin/stdout.
    Mcp,
    /// Store size, the bytes unique to each checkpoint, what gc would free.
    Du {
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// Print a shell completion script.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff).
    Man,
    /// Run a watcher so that saves, status, diff and restore cost what changed.
    Watch(watch_cmd::WatchArgs),
}

fn main() -> ExitCode {
    // Die quietly on a closed pipe (`ckpt log | head`), like other Unix tools,
    // instead of panicking in println!.
    // SAFETY: restoring the default disposition of SIGPIPE before any thread
    // is started.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = Cli::parse();
    let globals = context::Globals {
        chdir: cli.chdir.as_ref(),
        lock_timeout: cli.lock_timeout,
        quiet: cli.quiet,
        verbose: cli.verbose,
        full_scan: cli.full_scan,
    };
    let result = context::Ctx::new(globals, |k| std::env::var(k).ok()).and_then(|ctx| {
        let r = run(&cli, &ctx);
        if ctx.verbose {
            for n in ctx.ops.notes() {
                eprintln!("watch: {n}");
            }
        }
        r
    });
    match result {
        Ok(code) => code,
        Err(e) => {
            let _ = std::io::stdout().flush();
            eprintln!("ckpt: error: {e}");
            ExitCode::from(e.exit_code() as u8)
        }
    }
}

fn print_json(v: &Value) {
    println!("{}", serde_json::to_string_pretty(v).expect("json"));
}

fn parse_tags(tags: &[String]) -> Result<BTreeMap<String, String>> {
    tags.iter()
        .map(|t| match t.split_once('=') {
            Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
            _ => Err(Error::Usage(format!("--tag {t:?}: expected KEY=VALUE"))),
        })
        .collect()
}

fn run(cli: &Cli, ctx: &Ctx) -> Result<ExitCode> {
    match &cli.cmd {
        Cmd::Init {
            dir,
            store,
            agent,
            write,
            json,
        } => cmd_init(ctx, dir.as_deref(), store.as_deref(), *agent, *write, *json),
        Cmd::Save {
            message,
            tags,
            allow_empty,
            json,
        } => cmd_save(ctx, message, tags, *allow_empty, *json),
        Cmd::Log { limit, json } => cmd_log(ctx, *limit, *json),
        Cmd::Show { id, json } => cmd_show(ctx, id, *json),
        Cmd::Status { json, paths } => cmd_status(ctx, paths, *json),
        Cmd::Diff {
            a,
            b,
            name_status,
            json,
            paths,
        } => cmd_diff(ctx, a.as_deref(), b.as_deref(), paths, *name_status, *json),
        Cmd::Restore {
            id,
            to,
            dry_run,
            no_save,
            files_only,
            state_only,
            json,
            paths,
        } => {
            let scope = match (files_only, state_only) {
                (true, _) => restore::Scope::FilesOnly,
                (_, true) => restore::Scope::StateOnly,
                _ => restore::Scope::All,
            };
            cmd_restore(
                ctx,
                id,
                to.as_deref(),
                *dry_run,
                *no_save,
                scope,
                paths,
                *json,
            )
        }
        Cmd::Delete { id, json } => cmd_delete(ctx, id, *json),
        Cmd::Gc {
            dry_run,
            json,
            keep,
        } => gc_cmd::run(ctx, keep, *dry_run, *json),
        Cmd::Hook { json } => return Ok(hook_cmd::run(ctx, cli.chdir.is_some(), *json)),
        Cmd::Mcp => mcp_cmd::run(ctx),
        Cmd::Du { json } => du_cmd::run(ctx, *json),
        Cmd::Completions { shell } => gen_cmd::completions::<Cli>(*shell),
        Cmd::Man => gen_cmd::man::<Cli>(),
        Cmd::Verify { id, store, json } => return cmd_verify(ctx, id.as_deref(), *store, *json),
        Cmd::Hash { dir, full, json } => cmd_hash(ctx, dir, *full, *json),
        Cmd::State { cmd } => return state_cmd::run(ctx, cmd),
        Cmd::Cp(args) => cp_cmd::run(ctx, args),
        Cmd::Fork(args) => fork_cmd::run(ctx, args),
        Cmd::Doctor { json } => doctor_cmd::run(ctx, *json),
        Cmd::Watch(args) => watch_cmd::run(ctx, args),
    }?;
    Ok(ExitCode::SUCCESS)
}

fn cmd_init(
    ctx: &Ctx,
    dir: Option<&Path>,
    store: Option<&Path>,
    agent: Option<hook_cmd::Agent>,
    write: bool,
    json: bool,
) -> Result<()> {
    let dir = dir.map_or_else(|| ctx.ops.cwd.clone(), |d| ctx.ops.cwd.join(d));
    let store = store.map(|s| ctx.ops.cwd.join(s));
    if let Some(agent) = agent {
        let ws = match Workspace::init(&dir, store.as_deref(), ctx.ops.config.data_home.as_deref())
        {
            Err(Error::AlreadyAWorkspace(_)) => Workspace::discover(&dir)?,
            r => r?,
        };
        return hook_cmd::init_agent(ctx, &ws, agent, write, json);
    }
    let ws = Workspace::init(&dir, store.as_deref(), ctx.ops.config.data_home.as_deref())?;
    if json {
        print_json(&json!({
            "schema": SCHEMA,
            "root": ws.root.display().to_string(),
            "store": ws.store_path.display().to_string(),
        }));
    } else if !ctx.quiet {
        let s = ws.open_store(&ctx.ops.config)?;
        println!("initialised workspace {}", ws.root.display());
        println!(
            "store: {} (copy strategy: {:?})",
            ws.store_path.display(),
            s.caps.preferred()
        );
    }
    Ok(())
}

fn cmd_save(
    ctx: &Ctx,
    message: &str,
    tags: &[String],
    allow_empty: bool,
    json: bool,
) -> Result<()> {
    let opts = SaveOptions {
        message: message.to_string(),
        tags: parse_tags(tags)?,
        allow_empty,
        journal: None,
    };
    let spinner = progress::Spinner::start("saving", ctx.quiet || json);
    let saved = ops::save::save(&ctx.ops, &opts)?;
    drop(spinner);
    if let Some(rep) = &saved.retention {
        gc_cmd::report_retention(ctx, rep);
    }
    print_save(ctx, &saved.outcome, saved.elapsed, json, saved.counts);
    Ok(())
}

/// Prints a save's outcome, and under `--verbose` what it cost.
fn print_save(ctx: &Ctx, outcome: &SaveOutcome, elapsed: Duration, json: bool, counts: ScanCounts) {
    match outcome {
        SaveOutcome::Saved(cp) => {
            if json {
                let mut v = render::checkpoint_json(cp, Some(cp.seq));
                v["schema"] = json!(SCHEMA);
                v["saved"] = json!(true);
                v["elapsed_ms"] = json!(elapsed.as_secs_f64() * 1e3);
                print_json(&v);
            } else if ctx.quiet {
                println!("{}", cp.id());
            } else {
                let s = &cp.stats;
                println!(
                    "saved {}  +{} ~{} -{} files, {} new in store  ({})",
                    cp.id(),
                    s.files_added,
                    s.files_modified,
                    s.files_deleted,
                    render::bytes(s.new_bytes),
                    render::ms(elapsed)
                );
                for sk in &cp.skipped {
                    eprintln!("skipped {} ({})", render::quote(&sk.path), sk.kind);
                }
            }
        }
        SaveOutcome::Unchanged(head) => {
            if json {
                print_json(&json!({
                    "schema": SCHEMA,
                    "saved": false,
                    "id": head.as_ref().map(|h| h.id()),
                    "elapsed_ms": elapsed.as_secs_f64() * 1e3,
                }));
            } else if !ctx.quiet {
                match head {
                    Some(h) => {
                        println!("nothing changed since {} ({})", h.id(), render::ms(elapsed))
                    }
                    None => println!(
                        "nothing to save: the workspace is empty ({})",
                        render::ms(elapsed)
                    ),
                }
            }
        }
    }
    if ctx.verbose {
        eprintln!(
            "scanned {} entries, read {} files, {} new objects ({})",
            counts.entries,
            counts.files_read,
            counts.new_objects,
            render::bytes(counts.new_bytes)
        );
    }
}

fn cmd_log(ctx: &Ctx, limit: Option<usize>, json: bool) -> Result<()> {
    let ws = ctx.ops.workspace()?;
    let store = ws.open_store_read_only(&ctx.ops.config)?;
    let r = store.catalog.reader()?;
    let head = r.head()?;
    let mut cps = r.checkpoints()?;
    cps.reverse();
    cps.truncate(limit.unwrap_or(usize::MAX));
    if json {
        print_json(&json!({
            "schema": SCHEMA,
            "head": head.map(|h| format!("v{h}")),
            "checkpoints": cps.iter().map(|c| render::checkpoint_json(c, head)).collect::<Vec<_>>(),
        }));
    } else {
        if cps.is_empty() && !ctx.quiet {
            println!("no checkpoints yet: run `ckpt save`");
        }
        for c in &cps {
            println!("{}", render::checkpoint_line(c, head));
        }
    }
    Ok(())
}

fn cmd_show(ctx: &Ctx, id: &str, json: bool) -> Result<()> {
    let ws = ctx.ops.workspace()?;
    let store = ws.open_store_read_only(&ctx.ops.config)?;
    let r = store.catalog.reader()?;
    let cp = r.resolve(id)?;
    let head = r.head()?;
    let parent_root = match cp.parent {
        Some(p) => r.checkpoint(p)?.map(|c| c.root),
        None => None,
    };
    let src = TreeSource {
        fresh: None,
        catalog: &r,
    };
    let changes = diff::diff_trees(&src, parent_root, Some(cp.root), &PathFilter::default())?;
    let shown: Vec<_> = changes.iter().filter(|c| c.is_interesting()).collect();
    if json {
        let mut v = render::checkpoint_json(&cp, head);
        v["schema"] = json!(SCHEMA);
        v["changes"] = Value::Array(shown.iter().map(|c| render::change_json(c)).collect());
        print_json(&v);
        return Ok(());
    }
    println!(
        "checkpoint {}{}",
        cp.id(),
        if head == Some(cp.seq) { " (HEAD)" } else { "" }
    );
    println!("hash:     {}", cp.hash);
    println!(
        "parent:   {}",
        cp.parent.map_or("none".into(), |p| format!("v{p}"))
    );
    println!("time:     {}", render::when(cp.time_ns));
    println!("message:  {}", cp.message);
    for (k, v) in &cp.tags {
        println!("tag:      {k}={v}");
    }
    let s = &cp.stats;
    println!(
        "changes:  +{} ~{} -{} files (+{} ~{} -{}), {} new in store, saved in {:.1} ms",
        s.files_added,
        s.files_modified,
        s.files_deleted,
        render::bytes(s.bytes_added),
        render::bytes(s.bytes_modified),
        render::bytes(s.bytes_deleted),
        render::bytes(s.new_bytes),
        cp.duration_us as f64 / 1e3
    );
    if let Some(v) = cp.state_version {
        println!("state:    version {v}");
    }
    for sk in &cp.skipped {
        println!("skipped:  {} ({})", render::quote(&sk.path), sk.kind);
    }
    println!();
    for c in shown {
        println!("{}", render::change_line(c));
    }
    Ok(())
}

fn cmd_status(ctx: &Ctx, paths: &[PathBuf], json: bool) -> Result<()> {
    let opts = ops::status::StatusOptions {
        paths: paths.to_vec(),
    };
    let st = ops::status::status(&ctx.ops, &opts)?;
    let shown: Vec<_> = st.changes.iter().filter(|c| c.is_interesting()).collect();
    let state_changes = &st.state_changes;
    let clean = st.clean();
    if json {
        print_json(&json!({
            "schema": SCHEMA,
            "head": st.head.as_ref().map(|h| h.id()),
            "clean": clean,
            "changes": shown.iter().map(|c| render::change_json(c)).collect::<Vec<_>>(),
            "state_changes": state_changes.iter().map(render::state_change_json).collect::<Vec<_>>(),
            "interrupted_restore": st.journal.as_ref().map(|j| format!("v{}", j.target)),
        }));
        return Ok(());
    }
    if let Some(j) = &st.journal {
        println!(
            "warning: a restore to v{} was interrupted; run `ckpt restore v{}` to finish it",
            j.target, j.target
        );
    }
    match &st.head {
        Some(h) => println!(
            "on {}{}",
            h.id(),
            if h.message.is_empty() {
                String::new()
            } else {
                format!(": {}", h.message)
            }
        ),
        None => println!("no checkpoint yet"),
    }
    if clean {
        println!("nothing changed");
    }
    for c in &shown {
        println!("{}", render::change_line(c));
    }
    for c in state_changes {
        println!("state {}", render::state_change_line(c));
    }
    for sk in &st.skipped {
        println!("skipped {} ({})", render::quote(&sk.path), sk.kind);
    }
    if ctx.verbose {
        eprintln!("status in {}", render::ms(st.elapsed));
    }
    Ok(())
}

fn cmd_diff(
    ctx: &Ctx,
    a: Option<&str>,
    b: Option<&str>,
    paths: &[PathBuf],
    name_status: bool,
    json: bool,
) -> Result<()> {
    let opts = ops::diff::DiffOptions {
        from: a.map(str::to_string),
        to: b.map(str::to_string),
        paths: paths.to_vec(),
        content: !name_status,
    };
    let d = ops::diff::diff(&ctx.ops, &opts)?;
    let state_changes = d.state.as_ref().map_or(&[][..], |s| &s.changes[..]);
    if json {
        let list: Vec<_> = d
            .changes
            .iter()
            .map(|c| {
                let mut v = render::change_json(&c.change);
                match &c.content {
                    Some(ContentDiff::Text(t)) => v["diff"] = json!(t),
                    Some(ContentDiff::Binary { old_size, new_size }) => {
                        v["binary"] = json!(true);
                        v["old_size"] = json!(old_size);
                        v["new_size"] = json!(new_size);
                    }
                    None => {}
                }
                v
            })
            .collect();
        print_json(&json!({
            "schema": SCHEMA, "from": d.from.id(), "to": d.to_label(), "changes": list,
            "state_from": d.state.as_ref().map(|s| s.from),
            "state_to": d.state.as_ref().map(|s| s.to),
            "state_changes": state_changes.iter().map(render::state_change_json).collect::<Vec<_>>(),
        }));
        return Ok(());
    }
    let mut out = std::io::stdout().lock();
    for c in &d.changes {
        let _ = writeln!(out, "{}", render::change_line(&c.change));
    }
    for c in state_changes {
        let _ = writeln!(out, "state {}", render::state_change_line(c));
        if !name_status {
            if let Some(o) = &c.old {
                let _ = writeln!(out, "  - {}", render::preview(&o.value, 200));
            }
            if let Some(n) = &c.new {
                let _ = writeln!(out, "  + {}", render::preview(&n.value, 200));
            }
        }
    }
    for c in &d.changes {
        if !matches!(
            c.change.kind,
            diff::ChangeKind::Added
                | diff::ChangeKind::Deleted
                | diff::ChangeKind::Modified
                | diff::ChangeKind::TypeChanged
        ) {
            continue;
        }
        match &c.content {
            Some(ContentDiff::Text(t)) if !t.is_empty() => {
                let _ = write!(out, "\n{}", render::paint_diff(t));
            }
            Some(ContentDiff::Binary { old_size, new_size }) => {
                let _ = writeln!(
                    out,
                    "\nbinary file {} differs ({} → {})",
                    render::quote(&c.change.path),
                    render::bytes(*old_size),
                    render::bytes(*new_size)
                );
            }
            _ => {}
        }
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn cmd_restore(
    ctx: &Ctx,
    id: &str,
    to: Option<&Path>,
    dry_run: bool,
    no_save: bool,
    scope: restore::Scope,
    paths: &[PathBuf],
    json: bool,
) -> Result<()> {
    if let Some(dest) = to {
        let spinner = progress::Spinner::start("materialising", ctx.quiet || json);
        let (rep, dest, elapsed) = ops::restore::restore_to(&ctx.ops, id, dest, paths)?;
        drop(spinner);
        if json {
            print_json(&json!({
                "schema": SCHEMA, "restored": rep.target.id(), "to": dest.display().to_string(),
                "files": rep.files, "dirs": rep.dirs, "bytes": rep.bytes,
                "elapsed_ms": elapsed.as_secs_f64() * 1e3,
            }));
        } else if !ctx.quiet {
            println!(
                "materialised {} into {}: {} files, {} directories, {} ({})",
                rep.target.id(),
                dest.display(),
                rep.files,
                rep.dirs,
                render::bytes(rep.bytes),
                render::ms(elapsed)
            );
        }
        return Ok(());
    }
    let req = ops::restore::RestoreRequest {
        rev: id.to_string(),
        paths: paths.to_vec(),
        dry_run,
        no_save,
        scope,
    };
    let (rep, elapsed) = ops::restore::restore(&ctx.ops, &req)?;
    let shown: Vec<_> = rep.changes.iter().filter(|c| c.is_interesting()).collect();
    let stats = diff::stats(&rep.changes);
    if json {
        print_json(&json!({
            "schema": SCHEMA,
            "restored": rep.target.id(),
            "dry_run": dry_run,
            "resumed": rep.resumed,
            "undo": rep.undo.map(|u| format!("v{u}")),
            "pre_save": rep.pre_save.as_ref().map(|c| c.id()),
            "changes": shown.iter().map(|c| render::change_json(c)).collect::<Vec<_>>(),
            "state": rep.state.as_ref().map(|s| json!({
                "target": s.target,
                "before": s.before,
                "after": s.after,
                "changes": s.changes.iter().map(render::state_change_json).collect::<Vec<_>>(),
            })),
            "elapsed_ms": elapsed.as_secs_f64() * 1e3,
        }));
        return Ok(());
    }
    if dry_run {
        for c in &shown {
            println!("{}", render::change_line(c));
        }
        if let Some(s) = &rep.state {
            for c in &s.changes {
                println!("state {}", render::state_change_line(c));
            }
            println!(
                "dry run: restoring the agent state to version {} would change {} keys",
                s.target,
                s.changes.len()
            );
        }
        println!(
            "dry run: restoring {} would add {}, modify {}, delete {} files",
            rep.target.id(),
            stats.files_added,
            stats.files_modified,
            stats.files_deleted
        );
        return Ok(());
    }
    if ctx.verbose {
        for c in &shown {
            println!("{}", render::change_line(c));
        }
        for c in rep.state.iter().flat_map(|s| &s.changes) {
            println!("state {}", render::state_change_line(c));
        }
    }
    if !ctx.quiet {
        if let Some(p) = &rep.pre_save {
            println!("saved the current state as {}", p.id());
        }
        if let Some(s) = &rep.state {
            if s.changes.is_empty() {
                println!("agent state: already as at version {}", s.target);
            } else {
                println!(
                    "agent state: {} keys changed, back to version {} as new version {}",
                    s.changes.len(),
                    s.target,
                    s.after
                );
            }
        }
        if scope == restore::Scope::StateOnly {
            println!(
                "restored the agent state of {} ({}){}",
                rep.target.id(),
                render::ms(elapsed),
                rep.undo.map_or(String::new(), |u| format!(
                    "; undo with `ckpt restore v{u}`"
                ))
            );
            return Ok(());
        }
        println!(
            "{} {}: {} files written, {} removed ({}){}",
            if rep.resumed {
                "finished restoring"
            } else {
                "restored"
            },
            rep.target.id(),
            rep.written,
            rep.removed,
            render::ms(elapsed),
            rep.undo.map_or(String::new(), |u| format!(
                "; undo with `ckpt restore v{u}`"
            ))
        );
    }
    Ok(())
}

fn cmd_delete(ctx: &Ctx, id: &str, json: bool) -> Result<()> {
    let ws = ctx.ops.workspace()?;
    let store = ws.open_store(&ctx.ops.config)?;
    let cp = store.catalog.reader()?.resolve(id)?;
    store.catalog.delete_checkpoint(&cp)?;
    if json {
        print_json(&json!({ "schema": SCHEMA, "deleted": cp.id() }));
    } else if !ctx.quiet {
        println!("deleted {}; run `ckpt gc` to free its data", cp.id());
    }
    Ok(())
}

pub(crate) fn cmd_gc(ctx: &Ctx, dry_run: bool, json: bool) -> Result<()> {
    let ws = ctx.ops.workspace()?;
    let store = ws.open_store(&ctx.ops.config)?;
    let rep = ckpt_lib::store::gc::gc(&store, dry_run)?;
    if json {
        let mut v = serde_json::to_value(&rep).expect("json");
        v["schema"] = json!(SCHEMA);
        v["dry_run"] = json!(dry_run);
        print_json(&v);
    } else if !ctx.quiet {
        println!("{}", gc_cmd::gc_summary(&rep, dry_run));
        for s in &rep.strays {
            println!("warning: unexpected file in the object store: {s}");
        }
    }
    Ok(())
}

/// Exit code of `ckpt verify` when the workspace differs from the checkpoint.
const EXIT_DIFFERS: u8 = 6;

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn cmd_verify(ctx: &Ctx, id: Option<&str>, check_store: bool, json: bool) -> Result<ExitCode> {
    let t0 = Instant::now();
    let ws = ctx.ops.workspace()?;
    let store = ws.open_store_read_only(&ctx.ops.config)?;
    if check_store {
        let rep = ckpt_lib::engine::verify::verify_store(&store)?;
        let ok = rep.problems.is_empty();
        if json {
            let mut v = serde_json::to_value(&rep).expect("json");
            v["schema"] = json!(SCHEMA);
            v["ok"] = json!(ok);
            print_json(&v);
        } else {
            for p in &rep.problems {
                println!(
                    "{} {}: {} (used by {})",
                    p.what,
                    p.id,
                    p.error,
                    p.checkpoints.join(", ")
                );
            }
            if !ctx.quiet {
                println!(
                    "{}: {} checkpoints, {} trees, {} objects ({}) checked in {}",
                    if ok {
                        "store is intact"
                    } else {
                        "STORE IS DAMAGED"
                    },
                    rep.checkpoints,
                    rep.trees,
                    rep.objects,
                    render::bytes(rep.bytes),
                    render::ms(t0.elapsed())
                );
            }
        }
        return Ok(if ok {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(5)
        });
    }
    let spinner = progress::Spinner::start("verifying", ctx.quiet || json);
    let rep = ckpt_lib::engine::verify::verify_workspace(&ws, &store, id.unwrap_or("HEAD"))?;
    drop(spinner);
    let elapsed = t0.elapsed();
    let rate = rep.bytes as f64 / elapsed.as_secs_f64().max(1e-9);
    if json {
        print_json(&json!({
            "schema": SCHEMA,
            "checkpoint": rep.checkpoint.id(),
            "matches": rep.matches(),
            "expected": hex(&rep.expected),
            "actual": hex(&rep.actual),
            "differences": rep.differences.iter().filter(|c| c.is_interesting()).map(render::change_json).collect::<Vec<_>>(),
            "files": rep.files,
            "bytes": rep.bytes,
            "elapsed_ms": elapsed.as_secs_f64() * 1e3,
        }));
    } else if rep.matches() {
        if !ctx.quiet {
            println!(
                "matches {} (digest {}); {} files, {} read in {} ({}/s)",
                rep.checkpoint.id(),
                &hex(&rep.expected)[..16],
                rep.files,
                render::bytes(rep.bytes),
                render::ms(elapsed),
                render::bytes(rate as u64)
            );
        }
    } else {
        println!("differs from {}:", rep.checkpoint.id());
        for c in rep.differences.iter().filter(|c| c.is_interesting()) {
            println!("{}", render::change_line(c));
        }
    }
    Ok(if rep.matches() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_DIFFERS)
    })
}

fn cmd_hash(ctx: &Ctx, dir: &Path, full: bool, json: bool) -> Result<()> {
    let dir = ctx.ops.cwd.join(dir);
    let (digest, scan) = ckpt_lib::engine::verify::hash_dir(&dir)?;
    let checksum = hex(&digest.checksum());
    if json {
        let mut v = json!({
            "schema": SCHEMA,
            "path": dir.display().to_string(),
            "checksum": checksum,
            "entries": scan.entries,
            "skipped": scan.skipped.len(),
        });
        if full {
            v["state"] = json!(digest.state().to_base64url());
        }
        print_json(&v);
    } else if full {
        println!("{}", digest.state().to_base64url());
    } else {
        println!("{checksum}");
    }
    Ok(())
}
