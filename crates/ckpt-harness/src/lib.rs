//! # ckpt-harness — the hook contracts of agent harnesses
//!
//! A coding-agent harness (Claude Code, Codex, Gemini CLI, GitHub Copilot
//! CLI, Cursor, opencode) runs a command of the user's at points of its
//! loop: when a prompt is submitted, before and after a tool call, at the
//! end of a turn. Each harness spells that contract its own way: where the
//! configuration lives and how it nests, what the events are called, which
//! fields the JSON on the command's stdin has, and what the command may
//! print or exit with. This crate owns those differences, and nothing
//! else: it opens no store and saves nothing.
//!
//! - [`event`]: a hook's stdin → one [`HookEvent`] (session, event, the
//!   [`Kind`] of event, tool, and the detail worth a checkpoint message),
//!   with the harness detected from the payload's shape or named by the
//!   caller.
//! - [`setup`]: the project-level configuration that makes a harness run
//!   `ckpt hook`: planned, merged into what is there (every other setting
//!   kept, idempotent), removed again; and which harnesses a directory is
//!   configured for.
//! - [`gates`]: what a harness requires before it runs the hooks (Codex's
//!   project and per-hook trust), checked from outside for `ckpt doctor`
//!   and `ckpt status`.
//! - [`sessions`]: the latest session a harness ran in a workspace, read
//!   from the harness's own files, so `ckpt doctor` and `ckpt status` can
//!   tell when no hook recorded anything for it.
//! - `harness/`: one file per harness with its table: configuration file,
//!   events, matchers and payload quirks. Adding a harness is adding a file
//!   and a [`Harness`] variant.
//!
//! ## The one rule every contract shares
//!
//! A checkpointing problem must never stop the agent. Every harness here
//! reads exit code 2 from a before-tool hook as "block this tool call"
//! (Copilot CLI any non-zero code), and Gemini CLI parses a hook's stdout
//! as JSON. So `ckpt hook` prints nothing on stdout in hook mode, exits 0
//! when it recorded (or had nothing to record), and otherwise writes one
//! line on stderr and exits with the harness's non-blocking failure
//! ([`Harness::failure_exit`]). The commands ckpt writes also survive a
//! missing `ckpt` binary where the harness would block on one (see
//! `harness/gemini.rs` and `harness/copilot.rs`).

pub mod event;
pub mod gates;
mod harness;
pub mod sessions;
pub mod setup;

pub use event::{HookEvent, Kind};

/// Where the harnesses keep their user-level state.
#[derive(Clone, Debug, Default)]
pub struct Homes {
    /// `$CODEX_HOME`, else `~/.codex`.
    pub codex: Option<std::path::PathBuf>,
    /// `$CLAUDE_CONFIG_DIR`, else `~/.claude`.
    pub claude: Option<std::path::PathBuf>,
    /// `~/.gemini`.
    pub gemini: Option<std::path::PathBuf>,
    /// `~/.copilot`.
    pub copilot: Option<std::path::PathBuf>,
}

/// The exit code of a hook that could not record, when the harness is not
/// known: a non-blocking error in most harnesses (never 2, which blocks a
/// tool call in all of them). [`Harness::failure_exit`] is the one to use.
pub const WARNING_EXIT: u8 = 1;

/// A harness ckpt knows the hook contract of.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Harness {
    /// Claude Code (`claude`).
    Claude,
    /// OpenAI Codex CLI (`codex`).
    Codex,
    /// Google Gemini CLI (`gemini`).
    Gemini,
    /// GitHub Copilot CLI (`copilot`).
    Copilot,
    /// Cursor (the editor's agent and `cursor-agent`).
    Cursor,
    /// opencode (`opencode`), through a plugin.
    Opencode,
}

impl Harness {
    /// Every harness, in the order they are listed to users.
    pub const ALL: [Harness; 6] = [
        Harness::Claude,
        Harness::Codex,
        Harness::Gemini,
        Harness::Copilot,
        Harness::Cursor,
        Harness::Opencode,
    ];

    /// The name used on the command line and in the `harness` tag.
    pub fn name(self) -> &'static str {
        self.spec().name
    }

    /// The product's name, for people.
    pub fn title(self) -> &'static str {
        self.spec().title
    }

    /// The harness called `name` (as [`Harness::name`] spells it).
    pub fn from_name(name: &str) -> Option<Harness> {
        Harness::ALL.into_iter().find(|h| h.name() == name)
    }

    /// Every name, for usage messages.
    pub fn names() -> Vec<&'static str> {
        Harness::ALL.iter().map(|h| h.name()).collect()
    }

    pub(crate) fn spec(self) -> &'static harness::Spec {
        match self {
            Harness::Claude => &harness::claude::SPEC,
            Harness::Codex => &harness::codex::SPEC,
            Harness::Gemini => &harness::gemini::SPEC,
            Harness::Copilot => &harness::copilot::SPEC,
            Harness::Cursor => &harness::cursor::SPEC,
            Harness::Opencode => &harness::opencode::SPEC,
        }
    }

    /// The exit code of a hook that could not record: the harness's
    /// non-blocking failure (0 on Copilot CLI, where any other code denies
    /// the tool call).
    pub fn failure_exit(self) -> u8 {
        self.spec().failure_exit
    }

    /// What the user must do before this harness runs ckpt's hooks, when
    /// the harness gates hooks behind the user's approval (ckpt never
    /// approves its own hooks: that gate is the user's).
    pub fn approval(self) -> Option<&'static str> {
        self.spec().approval
    }
}

impl std::fmt::Display for Harness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
