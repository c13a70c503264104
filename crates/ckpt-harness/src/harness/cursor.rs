//! Cursor: `.cursor/hooks.json` (`version: 1`), a flat list of commands per
//! event. Payloads carry `conversation_id` (the session),
//! `hook_event_name`, `workspace_roots`, and per event `command` (shell
//! events), `file_path` (edits) or `prompt`. Cursor's CLI does not run
//! here, so this table follows Cursor's documented schema only.

use super::{Hook, Layout, Spec};

pub(crate) static SPEC: Spec = Spec {
    name: "cursor",
    title: "Cursor",
    path: ".cursor/hooks.json",
    layout: Layout::Cursor,
    hooks: &[
        Hook {
            event: "beforeSubmitPrompt",
            matcher: None,
        },
        Hook {
            event: "beforeShellExecution",
            matcher: None,
        },
        Hook {
            event: "afterShellExecution",
            matcher: None,
        },
        Hook {
            event: "afterFileEdit",
            matcher: None,
        },
        Hook {
            event: "stop",
            matcher: None,
        },
    ],
    command_suffix: "",
    failure_exit: 1,
    event_in_command: false,
    markers: &[".cursor", ".cursorrules"],
    approval: None,
    latest_session: None,
};
