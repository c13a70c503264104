//! OpenAI Codex CLI: hooks in `.codex/hooks.json`, in Claude Code's format
//! and with its payload field names (`session_id`, `hook_event_name`,
//! `tool_name`, `tool_input`, `prompt`). Its shell tool reports as `Bash`;
//! its edit tool is `apply_patch`, whose `tool_input.command` is the patch.
//!
//! Two gates stand before a project hook runs, both silent in `codex
//! exec`: the project must be trusted (`[projects."DIR"] trust_level =
//! "trusted"` in `~/.codex/config.toml`), or `.codex/` is not read at all;
//! and each hook must be trusted by its hash (`/hooks` in the TUI). ckpt
//! passes neither gate itself: `ckpt init` says what to do, and `ckpt
//! doctor` and `ckpt status` check the first.

use super::{Hook, Layout, Spec};

pub(crate) static SPEC: Spec = Spec {
    name: "codex",
    title: "Codex",
    path: ".codex/hooks.json",
    layout: Layout::Grouped,
    hooks: &[
        Hook {
            event: "UserPromptSubmit",
            matcher: None,
        },
        Hook {
            event: "PreToolUse",
            matcher: None,
        },
        Hook {
            event: "PostToolUse",
            matcher: None,
        },
        Hook {
            event: "Stop",
            matcher: None,
        },
    ],
    command_suffix: "",
    failure_exit: 1,
    event_in_command: false,
    markers: &[".codex"],
    approval: Some(
        "Codex runs these hooks only once you trust them, and says nothing until then: start \
`codex` in this directory, trust the project when asked, and approve the hooks when it says \
\"Hooks need review\" (or run `/hooks`). For one non-interactive run, `codex exec --trust \
--dangerously-bypass-hook-trust` runs them without that.",
    ),
};
