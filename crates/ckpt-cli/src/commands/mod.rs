//! The subcommands: one file per command, each with its own arguments
//! (`#[derive(clap::Args)]`) next to the code that runs it, and the dispatch.
//!
//! clap builds a subcommand's arguments only when that subcommand runs
//! (`defer`): building all of them cost every command, however small, the
//! time and page faults of thirty argument sets it never reads. A deferred
//! subcommand's arguments are built after its help line, so a doc comment
//! on an argument struct or a nested subcommand enum would replace that
//! line: theirs are plain comments.

mod adopt;
mod annotate;
mod cat;
mod clone;
mod cp;
mod delete;
mod diff;
mod doctor;
mod du;
mod fork;
mod forks;
mod gc;
mod gen;
mod hash;
mod hook;
mod init;
mod log;
mod mcp;
mod pull;
mod push;
mod remote;
mod restore;
mod save;
mod show;
mod state;
mod status;
mod stores;
mod ui;
mod undo;
mod verify;
mod watch;

use std::process::ExitCode;

use clap::Subcommand;

use crate::context::Ctx;

#[derive(Subcommand)]
#[command(defer = true)]
pub enum Command {
    /// Make a directory (default: the current one) a workspace.
    Init(init::InitArgs),
    /// Record a checkpoint of the whole workspace.
    Save(save::SaveArgs),
    /// List checkpoints, newest first.
    Log(log::LogArgs),
    /// Show one checkpoint and what it changed.
    Show(show::ShowArgs),
    /// What changed since the last checkpoint.
    Status(status::StatusArgs),
    /// Print one file as a checkpoint saved it.
    Cat(cat::CatArgs),
    /// Compare two checkpoints, or a checkpoint and the working directory.
    Diff(diff::DiffArgs),
    /// Bring the workspace (or some paths, or another directory) back to a checkpoint.
    Restore(restore::RestoreArgs),
    /// Undo the agent's last file-changing tool call (or, --turn, its last
    /// prompt): an undoable restore to the checkpoint just before it.
    Undo(undo::UndoArgs),
    /// Delete a checkpoint record (its data goes at the next gc).
    Delete(delete::DeleteArgs),
    /// Add, change or remove tags and a note on an existing checkpoint
    /// (kept apart from the tags it was saved with).
    Annotate(annotate::AnnotateArgs),
    /// Check that the workspace is exactly a checkpoint's state (default:
    /// HEAD), or with --store that every stored object, tree and record is
    /// intact.
    Verify(verify::VerifyArgs),
    /// Print the state digest of any directory (no workspace needed).
    Hash(hash::HashArgs),
    /// Agent state: a transactional key-value store that rewinds with the files.
    State {
        #[command(subcommand)]
        cmd: state::StateCmd,
    },
    /// Copy a file or tree like `cp -a`, in parallel, with the copy engine.
    Cp(cp::CpArgs),
    /// Materialise a checkpoint as new, independent workspaces (forks), or
    /// remove one (--remove).
    Fork(fork::ForkArgs),
    /// List this workspace's forks: where, latest checkpoint, divergence.
    Forks(forks::ForksArgs),
    /// Make this workspace a fork's checkpoint (files and agent state), as
    /// an undoable restore.
    Adopt(adopt::AdoptArgs),
    /// Show filesystems, probed copy capabilities, store space, inotify
    /// limits, and what ckpt will use.
    Doctor(doctor::DoctorArgs),
    /// Remove stored data that no checkpoint references; with --keep-*
    /// flags (or a saved policy), first drop the checkpoints no rule keeps.
    Gc(gc::GcArgs),
    /// Record a checkpoint for an agent-harness hook event (JSON on stdin);
    /// silent, and nothing saved, when nothing changed.
    Hook(hook::HookArgs),
    /// Run a Model Context Protocol server on stdin/stdout.
    Mcp,
    /// Store size, the bytes unique to each checkpoint, what gc would free
    /// (on-disk bytes).
    Du(du::DuArgs),
    /// List the stores on this machine and the workspace each belongs to
    /// (to find the checkpoints of a deleted workspace).
    Stores(stores::StoresArgs),
    /// Print a shell completion script.
    Completions(gen::CompletionsArgs),
    /// Print the man page (roff).
    Man,
    /// Serve the checkpoint timeline to a browser (diffs, restore, usage) on
    /// 127.0.0.1; prints the URL with its access token.
    Ui(ui::UiArgs),
    /// Run a watcher so that saves, status, diff and restore cost what changed.
    Watch(watch::WatchArgs),
    /// Named remotes (object storage) this workspace pushes to and pulls from.
    Remote {
        #[command(subcommand)]
        cmd: remote::RemoteCmd,
    },
    /// Upload checkpoints (default: the head) to a remote.
    Push(push::PushArgs),
    /// Download checkpoints from a remote into this workspace's store.
    Pull(pull::PullArgs),
    /// Make a new workspace from a remote checkpoint (default: the latest).
    Clone(clone::CloneArgs),
}

/// Runs one command; `chdir_given` says whether `-C` was passed (`ckpt hook`
/// finds its workspace differently without it).
pub fn run(
    cmd: &Command,
    ctx: &Ctx,
    chdir_given: bool,
) -> std::result::Result<ExitCode, crate::exit::Error> {
    match cmd {
        Command::Init(args) => init::run(ctx, args),
        Command::Save(args) => save::run(ctx, args),
        Command::Log(args) => return done(log::run(ctx, args)),
        Command::Undo(args) => undo::run(ctx, args),
        Command::Show(args) => show::run(ctx, args),
        Command::Status(args) => status::run(ctx, args),
        Command::Diff(args) => diff::run(ctx, args),
        Command::Cat(args) => cat::run(ctx, args),
        Command::Restore(args) => restore::run(ctx, args),
        Command::Delete(args) => delete::run(ctx, args),
        Command::Annotate(args) => annotate::run(ctx, args),
        Command::Gc(args) => return done(gc::run(ctx, args)),
        Command::Hook(args) => return Ok(hook::run(ctx, args, chdir_given)),
        Command::Mcp => mcp::run(ctx),
        Command::Du(args) => du::run(ctx, args),
        Command::Stores(args) => stores::run(ctx, args),
        Command::Completions(args) => gen::completions::<crate::Cli>(args.shell),
        Command::Man => gen::man::<crate::Cli>(),
        Command::Verify(args) => return Ok(verify::run(ctx, args)?),
        Command::Hash(args) => hash::run(ctx, args),
        Command::State { cmd } => return Ok(state::run(ctx, cmd)?),
        Command::Cp(args) => cp::run(ctx, args),
        Command::Fork(args) => return Ok(fork::run(ctx, args)?),
        Command::Forks(args) => forks::run(ctx, args),
        Command::Adopt(args) => adopt::run(ctx, args),
        Command::Doctor(args) => doctor::run(ctx, args),
        Command::Watch(args) => watch::run(ctx, args),
        Command::Ui(args) => ui::run(ctx, args),
        Command::Remote { cmd } => return done(remote::run(ctx, cmd)),
        Command::Push(args) => return done(push::run(ctx, args)),
        Command::Pull(args) => return done(pull::run(ctx, args)),
        Command::Clone(args) => return done(clone::run(ctx, args)),
    }?;
    Ok(ExitCode::SUCCESS)
}

/// Success, or the error of a command that may fail with a remote error.
fn done<E: Into<crate::exit::Error>>(
    r: std::result::Result<(), E>,
) -> std::result::Result<ExitCode, crate::exit::Error> {
    r.map_err(Into::into)?;
    Ok(ExitCode::SUCCESS)
}
