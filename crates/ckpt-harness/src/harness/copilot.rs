//! GitHub Copilot CLI: `.github/hooks/*.json` (`version: 1`), one `bash`
//! command per hook. Its payloads carry no event name (`sessionId`,
//! `timestamp`, `cwd`, `toolName`, `toolArgs` as an object or, as
//! documented, a JSON string, `prompt`), so the command names the event
//! (`--event`). Any non-zero exit of a `preToolUse` hook denies the tool
//! call, and hook stderr is not shown: so ckpt's hook exits 0 on Copilot
//! CLI even when it could not record, and the command ends in `|| true`
//! for a missing `ckpt`.
//!
//! Sessions: `~/.copilot/session-state/<session id>/`, whose
//! `events.jsonl` grows as the session runs and whose `workspace.yaml`
//! names the directory (`cwd: DIR`).

use super::{Hook, Layout, Spec};
use crate::sessions::{head, Found, Query};

pub(crate) static SPEC: Spec = Spec {
    name: "copilot",
    title: "GitHub Copilot CLI",
    path: ".github/hooks/ckpt.json",
    layout: Layout::Copilot,
    hooks: &[
        Hook {
            event: "userPromptSubmitted",
            matcher: None,
        },
        Hook {
            event: "preToolUse",
            matcher: None,
        },
        Hook {
            event: "postToolUse",
            matcher: None,
        },
        Hook {
            event: "agentStop",
            matcher: None,
        },
    ],
    command_suffix: " || true",
    failure_exit: 0,
    event_in_command: true,
    markers: &[".github/hooks", ".github/copilot-instructions.md"],
    approval: None,
    latest_session: Some(latest_session),
};

fn latest_session(q: &Query) -> Option<Found> {
    let dir = q.homes.copilot.as_ref()?.join("session-state");
    let mut recent: Vec<(std::path::PathBuf, std::time::SystemTime)> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| {
            let d = e.ok()?.path();
            let t = std::fs::metadata(d.join("events.jsonl"))
                .ok()?
                .modified()
                .ok()?;
            (t > q.since).then_some((d, t))
        })
        .collect();
    recent.sort_by_key(|r| std::cmp::Reverse(r.1));
    let line = format!("cwd: {}", q.root.to_str()?);
    // Every project's sessions are here: the few newest are read to find
    // this one's.
    recent.into_iter().take(20).find_map(|(d, t)| {
        head(&d.join("workspace.yaml"), 4096)
            .lines()
            .any(|l| l.trim_end() == line)
            .then(|| {
                let id = d.file_name()?.to_str()?.to_string();
                Some((id, false, d.join("events.jsonl"), t))
            })
            .flatten()
    })
}
