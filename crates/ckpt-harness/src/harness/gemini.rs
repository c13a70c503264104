//! Gemini CLI: `hooks` in `.gemini/settings.json`, grouped like Claude
//! Code's, with its own event names (`BeforeAgent`, `BeforeTool`,
//! `AfterTool`, `AfterAgent`) and tool names (`run_shell_command`,
//! `write_file`, `replace`). Gemini CLI parses a hook's stdout as JSON, so
//! ckpt prints nothing there; exit 2 blocks, other non-zero exits are
//! warnings, but a command that is not found (the shell's 127 with a
//! message) blocks the whole turn: so the command ends in `|| exit 1`, and
//! a missing `ckpt` is a warning too.
//!
//! Sessions: `~/.gemini/projects.json` maps each project directory to a
//! short name, and the project's sessions are
//! `~/.gemini/tmp/<name>/chats/session-<time>-<first 8 characters of the
//! session id>.jsonl`.

use super::{Hook, Layout, Spec};
use crate::sessions::{newer_entries, Found, Query};

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
    latest_session: Some(latest_session),
};

fn latest_session(q: &Query) -> Option<Found> {
    let home = q.homes.gemini.as_ref()?;
    let projects: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(home.join("projects.json")).ok()?).ok()?;
    let name = projects.get("projects")?.get(q.root.to_str()?)?.as_str()?;
    let dir = home.join("tmp").join(name).join("chats");
    let (file, t) = newer_entries(&dir, q.since, |n| {
        n.starts_with("session-") && (n.ends_with(".jsonl") || n.ends_with(".json"))
    })
    .into_iter()
    .next()?;
    let id = file.file_stem()?.to_str()?.rsplit('-').next()?.to_string();
    Some((id, true, file, t))
}
