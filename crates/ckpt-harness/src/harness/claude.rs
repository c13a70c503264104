//! Claude Code: hooks in `.claude/settings.json` (the project's shared
//! settings), Claude Code's own format; the payload is JSON on stdin with
//! `session_id`, `cwd`, `hook_event_name`, `tool_name`, `tool_input` and,
//! for prompts, `prompt`. Exit 2 from `PreToolUse` blocks the tool call,
//! any other non-zero exit is a non-blocking error shown to the user, and
//! stdout of `UserPromptSubmit` is added to the model's context: so ckpt
//! prints nothing there.

use super::{Hook, Layout, Spec};

/// The tools whose calls can change files. Read-only tools are left out to
/// keep turns fast; a change made behind the agent's back is still caught
/// by the next event that saves.
const MUTATING: &str = "Bash|Edit|MultiEdit|Write|NotebookEdit";

pub(crate) static SPEC: Spec = Spec {
    name: "claude",
    title: "Claude Code",
    path: ".claude/settings.json",
    layout: Layout::Grouped,
    hooks: &[
        Hook {
            event: "UserPromptSubmit",
            matcher: None,
        },
        Hook {
            event: "PreToolUse",
            matcher: Some(MUTATING),
        },
        Hook {
            event: "PostToolUse",
            matcher: Some(MUTATING),
        },
        Hook {
            event: "Stop",
            matcher: None,
        },
    ],
    command_suffix: "",
    failure_exit: 1,
    event_in_command: false,
    markers: &[".claude", "CLAUDE.md"],
    approval: None,
};
