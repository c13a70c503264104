//! Claude Code: hooks in `.claude/settings.json` (the project's shared
//! settings), Claude Code's own format; the payload is JSON on stdin with
//! `session_id`, `cwd`, `hook_event_name`, `tool_name`, `tool_input` and,
//! for prompts, `prompt`. Exit 2 from `PreToolUse` blocks the tool call,
//! any other non-zero exit is a non-blocking error shown to the user, and
//! stdout of `UserPromptSubmit` is added to the model's context: so ckpt
//! prints nothing there.
//!
//! Sessions: `~/.claude/projects/<DIR>/<session id>.jsonl` (under
//! `$CLAUDE_CONFIG_DIR` instead of `~/.claude` when set), where DIR is the
//! working directory with every character but ASCII letters and digits
//! turned into `-`.

use super::{Hook, Layout, Spec};
use crate::sessions::{newer_entries, Found, Query};

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
    latest_session: Some(latest_session),
};

fn latest_session(q: &Query) -> Option<Found> {
    let dir: String = q
        .root
        .to_str()?
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let dir = q.homes.claude.as_ref()?.join("projects").join(dir);
    let (file, t) = newer_entries(&dir, q.since, |n| n.ends_with(".jsonl"))
        .into_iter()
        .next()?;
    let id = file.file_stem()?.to_str()?.to_string();
    Some((id, false, file, t))
}
