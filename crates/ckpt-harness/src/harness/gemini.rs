//! Gemini CLI: `hooks` in `.gemini/settings.json`, grouped like Claude
//! Code's, with its own event names (`BeforeAgent`, `BeforeTool`,
//! `AfterTool`, `AfterAgent`) and tool names (`run_shell_command`,
//! `write_file`, `replace`). Gemini CLI parses a hook's stdout as JSON, so
//! ckpt prints nothing there; exit 2 blocks, other non-zero exits are
//! warnings, but a command that is not found (the shell's 127 with a
//! message) blocks the whole turn: so the command ends in `|| exit 1`, and
//! a missing `ckpt` is a warning too.

use super::{Hook, Layout, Spec};

/// The tools whose calls can change files.
const MUTATING: &str = "run_shell_command|write_file|replace|edit";

pub(crate) static SPEC: Spec = Spec {
    name: "gemini",
    title: "Gemini CLI",
    path: ".gemini/settings.json",
    layout: Layout::Grouped,
    hooks: &[
        Hook {
            event: "BeforeAgent",
            matcher: None,
        },
        Hook {
            event: "BeforeTool",
            matcher: Some(MUTATING),
        },
        Hook {
            event: "AfterTool",
            matcher: Some(MUTATING),
        },
        Hook {
            event: "AfterAgent",
            matcher: None,
        },
    ],
    command_suffix: " || exit 1",
    failure_exit: 1,
    event_in_command: false,
    markers: &[".gemini", "GEMINI.md"],
    approval: None,
};
