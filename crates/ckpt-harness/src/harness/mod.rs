//! One file per harness: its hook table. The shape every table fills in
//! is [`Spec`]; [`crate::setup`] writes configuration from it and
//! [`crate::event`] reads payloads with it.

pub(crate) mod claude;
pub(crate) mod codex;
pub(crate) mod copilot;
pub(crate) mod cursor;
pub(crate) mod gemini;
pub(crate) mod opencode;

use crate::sessions::{Found, Query};

/// A harness's hook contract, as far as ckpt uses it.
#[derive(Debug)]
pub(crate) struct Spec {
    /// Command-line name (`claude`).
    pub name: &'static str,
    /// Product name (`Claude Code`).
    pub title: &'static str,
    /// The project-level file ckpt's hooks go in, relative to the
    /// workspace root.
    pub path: &'static str,
    /// How that file nests hooks.
    pub layout: Layout,
    /// The events ckpt hooks, in the harness's spelling, each with the
    /// tool matcher it runs under (`None`: every occurrence).
    pub hooks: &'static [Hook],
    /// Appended to the hook command (`|| exit 1`), where the harness
    /// treats a failing command worse than ckpt's contract allows.
    pub command_suffix: &'static str,
    /// The exit code of a hook that could not record: the harness's
    /// non-blocking failure.
    pub failure_exit: u8,
    /// Whether the hook command must name the event (`--event E`) because
    /// the harness's payload does not carry it.
    pub event_in_command: bool,
    /// Paths (relative to the root) whose presence says the project uses
    /// this harness, for `ckpt init --agent` with no name.
    pub markers: &'static [&'static str],
    /// What the user must do before the harness runs the hooks, where it
    /// gates them behind approval.
    pub approval: Option<&'static str>,
    /// Finds the latest session the harness ran in a workspace after ckpt's
    /// hooks were written ([`crate::sessions`]), where ckpt knows where the
    /// harness keeps its sessions.
    pub latest_session: Option<fn(&Query) -> Option<Found>>,
}

/// One hooked event.
#[derive(Debug)]
pub(crate) struct Hook {
    /// The event as the harness spells it.
    pub event: &'static str,
    /// Tool-name matcher (a regular expression in every harness that has
    /// one), or `None`.
    pub matcher: Option<&'static str>,
}

/// How a configuration file nests its hooks.
#[derive(Debug)]
pub(crate) enum Layout {
    /// `{"hooks": {EVENT: [{"matcher": M, "hooks": [{"type": "command",
    /// "command": CMD}]}]}}`: Claude Code, and the harnesses that took its
    /// format (Codex, Gemini CLI). Other keys of the file are settings of
    /// the harness and are kept.
    Grouped,
    /// `{"version": 1, "hooks": {EVENT: [{"type": "command", "bash": CMD,
    /// "timeoutSec": N}]}}`: GitHub Copilot CLI.
    Copilot,
    /// `{"version": 1, "hooks": {EVENT: [{"command": CMD, "matcher": M}]}}`:
    /// Cursor.
    Cursor,
    /// A plugin file that is ckpt's alone (opencode): written whole,
    /// removed whole.
    Plugin {
        /// The file's text.
        text: &'static str,
    },
}
