//! GitHub Copilot CLI: `.github/hooks/*.json` (`version: 1`), one `bash`
//! command per hook. Its payloads carry no event name (`sessionId`,
//! `timestamp`, `cwd`, `toolName`, `toolArgs` as an object or, as
//! documented, a JSON string, `prompt`), so the command names the event
//! (`--event`). Any non-zero exit of a `preToolUse` hook denies the tool
//! call, and hook stderr is not shown: so ckpt's hook exits 0 on Copilot
//! CLI even when it could not record, and the command ends in `|| true`
//! for a missing `ckpt`.

use super::{Hook, Layout, Spec};

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
};
