//! OpenAI Codex CLI: hooks in `.codex/hooks.json`, in Claude Code's format
//! and with its payload field names (`session_id`, `hook_event_name`,
//! `tool_name`, `tool_input`, `prompt`). Its shell tool reports as `Bash`;
//! its edit tool is `apply_patch`, whose `tool_input.command` is the patch.
//!
//! ## Trust
//!
//! Two gates stand before a project hook runs, both silent in `codex
//! exec`. ckpt passes neither itself (that decision is the user's): `ckpt
//! init` says what to do, and [`untrusted`] tells `ckpt doctor` and `ckpt
//! status` which gate is closed, from what Codex keeps in
//! `$CODEX_HOME/config.toml`:
//!
//! 1. The project must be trusted, or `.codex/` is not read at all:
//!    `[projects."DIR"] trust_level = "trusted"` for the directory or an
//!    ancestor.
//! 2. Each hook must be trusted by its hash: `[hooks.state."KEY"]
//!    trusted_hash = "sha256:…"`, written by the TUI ("Hooks need review",
//!    `/hooks`). KEY is `<absolute path of hooks.json>:<event label>:<index
//!    of the matcher group>:<index of the handler in it>`; a hook whose
//!    state says `enabled = false` does not run either. The hash is
//!    [`hook_hash`]: SHA-256 of compact JSON with sorted keys of the hook's
//!    normalized identity (the event label, the matcher where the event
//!    has one, and the handler with its defaults filled in), so a hook
//!    edited after approval reads as "modified" and does not run.
//!
//! [`hook_hash`] is checked against the hashes the real Codex reports
//! (`codex app-server`, `hooks/list`, whose `currentHash` is what the TUI
//! stores when the user approves); the unit tests hold those values, and
//! `tests/harnesses.rs` approves the hooks the way the TUI records it and
//! sees Codex run them.
//!
//! ## Sessions
//!
//! `$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<session id>.jsonl`,
//! for every project; the file's first line (`session_meta`) names the
//! working directory (`"cwd":"DIR"`).

use std::path::{Path, PathBuf};

use crate::sessions::{head, newer_entries, Found, Query};

use serde_json::{Map, Value};

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
\"Hooks need review\" (or run `/hooks`). `ckpt doctor` says which are not approved yet. For one \
non-interactive run, `codex exec --trust --dangerously-bypass-hook-trust` runs them without that.",
    ),
    latest_session: Some(latest_session),
};

fn latest_session(q: &Query) -> Option<Found> {
    let sessions = q.homes.codex.as_ref()?.join("sessions");
    // The two newest days hold the latest sessions.
    let newest = |dir: &Path| -> Vec<PathBuf> {
        let mut names: Vec<PathBuf> = std::fs::read_dir(dir)
            .map(|rd| rd.filter_map(|e| Some(e.ok()?.path())).collect())
            .unwrap_or_default();
        names.sort();
        names.reverse();
        names
    };
    let mut days = Vec::new();
    'find: for y in newest(&sessions) {
        for m in newest(&y) {
            for d in newest(&m) {
                days.push(d);
                if days.len() == 2 {
                    break 'find;
                }
            }
        }
    }
    let mut files: Vec<(PathBuf, std::time::SystemTime)> = days
        .iter()
        .flat_map(|d| {
            newer_entries(d, q.since, |n| {
                n.starts_with("rollout-") && n.ends_with(".jsonl")
            })
        })
        .collect();
    files.sort_by_key(|f| std::cmp::Reverse(f.1));
    let cwd = format!("\"cwd\":{}", serde_json::to_string(q.root.to_str()?).ok()?);
    files.into_iter().take(20).find_map(|(f, t)| {
        if !head(&f, 16 * 1024).contains(&cwd) {
            return None;
        }
        let stem = f.file_stem()?.to_str()?;
        let id = stem.get(stem.len().checked_sub(36)?..)?.to_string();
        Some((id, false, f, t))
    })
}

/// Codex's hook events: the name in `hooks.json`, the label in trust keys
/// and hashes, and whether the event keeps a matcher (Codex drops it for
/// events that have no tool). Events whose normalization ckpt does not
/// know (e.g. `SessionEnd`'s clamped timeout) are left out: their hooks are
/// checked for approval but not for modification.
const EVENTS: &[(&str, &str, bool)] = &[
    ("PreToolUse", "pre_tool_use", true),
    ("PermissionRequest", "permission_request", true),
    ("PostToolUse", "post_tool_use", true),
    ("SessionStart", "session_start", true),
    ("UserPromptSubmit", "user_prompt_submit", false),
    ("Stop", "stop", false),
];

/// Codex's default hook timeout, in seconds.
const DEFAULT_TIMEOUT: u64 = 600;
/// Codex's default `additionalContextLimit` (left out of the hash).
const DEFAULT_CONTEXT_LIMIT: u64 = 2500;
/// Events whose `additionalContextLimit` Codex keeps.
const CONTEXT_EVENTS: &[&str] = &[
    "PreToolUse",
    "PostToolUse",
    "SessionStart",
    "UserPromptSubmit",
];

/// Where one of ckpt's hooks stands with Codex's per-hook trust.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Trust {
    /// Approved with the hook's current hash: Codex runs it.
    Trusted,
    /// Never approved.
    Untrusted,
    /// Approved, but the hook changed since (or the approval was recorded
    /// by a Codex that hashes differently): Codex shows it as modified.
    Modified,
    /// Turned off in `/hooks`.
    Disabled,
}

/// The hash Codex keeps for an approved hook: `event` as `hooks.json`
/// names it, the group's `matcher`, and the handler object.
pub(crate) fn hook_hash(
    event: &str,
    matcher: Option<&str>,
    handler: &Map<String, Value>,
) -> Option<String> {
    use sha2::{Digest, Sha256};
    let &(_, label, keeps_matcher) = EVENTS.iter().find(|(e, _, _)| *e == event)?;
    let mut h = Map::new();
    h.insert("type".into(), "command".into());
    h.insert("command".into(), handler.get("command")?.as_str()?.into());
    let timeout = handler
        .get("timeout")
        .and_then(Value::as_u64)
        .unwrap_or(DEFAULT_TIMEOUT)
        .max(1);
    h.insert("timeout".into(), timeout.into());
    let is_async = handler
        .get("async")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    h.insert("async".into(), is_async.into());
    if let Some(s) = handler.get("statusMessage").and_then(Value::as_str) {
        h.insert("statusMessage".into(), s.into());
    }
    if let Some(l) = handler
        .get("additionalContextLimit")
        .and_then(Value::as_u64)
    {
        if CONTEXT_EVENTS.contains(&event) && l != DEFAULT_CONTEXT_LIMIT {
            h.insert("additionalContextLimit".into(), l.into());
        }
    }
    let mut identity = Map::new();
    identity.insert("event_name".into(), label.into());
    if let (true, Some(m)) = (keeps_matcher, matcher) {
        identity.insert("matcher".into(), m.into());
    }
    identity.insert("hooks".into(), Value::Array(vec![Value::Object(h)]));
    let bytes = serde_json::to_vec(&sorted(Value::Object(identity))).expect("JSON prints");
    let digest = Sha256::digest(&bytes);
    Some(format!(
        "sha256:{}",
        digest
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    ))
}

/// The same JSON with every object's keys in sorted order (this crate's
/// `serde_json` keeps insertion order).
fn sorted(v: Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut entries: Vec<(String, Value)> = m.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(entries.into_iter().map(|(k, v)| (k, sorted(v))).collect())
        }
        Value::Array(a) => Value::Array(a.into_iter().map(sorted).collect()),
        other => other,
    }
}

/// ckpt's hooks in `hooks_file` (parsed `hooks.json`), each with its trust
/// key and where it stands, given Codex's parsed `config.toml`.
pub(crate) fn hook_trust(
    hooks_file: &Path,
    doc: &Value,
    config: &toml::Table,
) -> Vec<(String, String, Trust)> {
    let states = config
        .get("hooks")
        .and_then(|h| h.get("state"))
        .and_then(toml::Value::as_table);
    let source = hooks_file.display().to_string();
    let mut out = Vec::new();
    let Some(hooks) = doc.get("hooks").and_then(Value::as_object) else {
        return out;
    };
    for (event, groups) in hooks {
        let label = match EVENTS.iter().find(|(e, _, _)| e == event) {
            Some((_, label, _)) => label.to_string(),
            None => camel_to_snake(event),
        };
        for (gi, group) in groups.as_array().into_iter().flatten().enumerate() {
            let matcher = group.get("matcher").and_then(Value::as_str);
            for (hi, handler) in group
                .get("hooks")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .enumerate()
            {
                let Some(handler) = handler.as_object() else {
                    continue;
                };
                let is_ckpt = handler.get("type").and_then(Value::as_str) == Some("command")
                    && handler
                        .get("command")
                        .and_then(Value::as_str)
                        .is_some_and(crate::setup::is_ckpt_hook);
                if !is_ckpt {
                    continue;
                }
                let key = format!("{source}:{label}:{gi}:{hi}");
                let state = states.and_then(|s| s.get(&key));
                let enabled = state
                    .and_then(|s| s.get("enabled"))
                    .and_then(toml::Value::as_bool);
                let trusted = state
                    .and_then(|s| s.get("trusted_hash"))
                    .and_then(toml::Value::as_str);
                let trust = match (enabled, trusted) {
                    (Some(false), _) => Trust::Disabled,
                    (_, None) => Trust::Untrusted,
                    (_, Some(t)) => match hook_hash(event, matcher, handler) {
                        Some(now) if now != t => Trust::Modified,
                        _ => Trust::Trusted,
                    },
                };
                out.push((event.clone(), key, trust));
            }
        }
    }
    out
}

/// `SessionEnd` → `session_end`: Codex's label for an event it names in
/// CamelCase.
fn camel_to_snake(s: &str) -> String {
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// Why Codex will not run ckpt's hooks in the workspace `root`, or `None`
/// when both gates are open. `home` is `$CODEX_HOME` (else `~/.codex`).
pub(crate) fn untrusted(root: &Path, home: Option<&Path>) -> Option<String> {
    let Some(home) = home else {
        return Some(
            "Codex: cannot tell whether this project and ckpt's hooks are trusted (no \
             $CODEX_HOME or $HOME); Codex runs no hook you have not approved"
                .into(),
        );
    };
    // Codex keys trust by the path it runs in, which the kernel gives with
    // symbolic links resolved.
    let root: PathBuf = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    let hooks_file = root.join(SPEC.path);
    let config_path = home.join("config.toml");
    let config = std::fs::read_to_string(&config_path)
        .ok()
        .and_then(|t| t.parse::<toml::Table>().ok())
        .unwrap_or_default();
    let projects = config.get("projects").and_then(toml::Value::as_table);
    let project_trusted = root.ancestors().any(|dir| {
        projects
            .and_then(|p| p.get(dir.to_str().unwrap_or_default()))
            .and_then(|p| p.get("trust_level"))
            .and_then(toml::Value::as_str)
            == Some("trusted")
    });
    if !project_trusted {
        return Some(format!(
            "Codex ignores {} because the project is not trusted in {}: nothing is recorded \
             from Codex until you start `codex` here, trust the project and approve ckpt's hooks \
             (\"Hooks need review\", or `/hooks`)",
            hooks_file.display(),
            config_path.display()
        ));
    }
    let doc: Value = std::fs::read_to_string(&hooks_file)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())?;
    let hooks = hook_trust(&hooks_file, &doc, &config);
    let named = |t: Trust| -> Vec<&str> {
        hooks
            .iter()
            .filter(|h| h.2 == t)
            .map(|h| h.0.as_str())
            .collect()
    };
    let (untrusted, modified, disabled) = (
        named(Trust::Untrusted),
        named(Trust::Modified),
        named(Trust::Disabled),
    );
    if untrusted.is_empty() && modified.is_empty() && disabled.is_empty() {
        return None;
    }
    let mut why = Vec::new();
    if !untrusted.is_empty() {
        why.push(format!("not approved yet: {}", untrusted.join(", ")));
    }
    if !modified.is_empty() {
        why.push(format!(
            "changed since you approved them: {}",
            modified.join(", ")
        ));
    }
    if !disabled.is_empty() {
        why.push(format!("turned off in /hooks: {}", disabled.join(", ")));
    }
    Some(format!(
        "Codex does not run ckpt's hooks in {} ({}): nothing is recorded from Codex for those \
         events until you start `codex` here and approve them when it says \"Hooks need review\" \
         (or in `/hooks`); ckpt does not approve its own hooks",
        hooks_file.display(),
        why.join("; ")
    ))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::json;

    /// The `currentHash` the real Codex (0.171.0, `codex app-server`,
    /// `hooks/list`) reports for the hooks `ckpt init --agent codex` writes:
    /// (event, label, hash).
    pub(crate) const CODEX_HASHES: &[(&str, &str, &str)] = &[
        (
            "UserPromptSubmit",
            "user_prompt_submit",
            "sha256:17aa52354cd548fd0b9592f9ccbd12f841dfe8925c9d3e13e6b2926c9a7c6d90",
        ),
        (
            "PreToolUse",
            "pre_tool_use",
            "sha256:2a15668563e98dd720a24b2c086c39ea1af6b230f0c1a9845a987323404c8bdd",
        ),
        (
            "PostToolUse",
            "post_tool_use",
            "sha256:eaa4ca598aae29706e840166fb9372b15dce898a3f77f6554c856497f5b1a69a",
        ),
        (
            "Stop",
            "stop",
            "sha256:fa05e5b09827aa62ce60ed75ba5db5da1447297e121282e4ab3ace49a2820bbb",
        ),
    ];

    fn handler(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn hashes_are_the_ones_codex_reports() {
        let ckpt = handler(json!({"type": "command", "command": "ckpt hook --agent codex"}));
        for (event, _, hash) in CODEX_HASHES {
            assert_eq!(
                hook_hash(event, None, &ckpt).as_deref(),
                Some(*hash),
                "{event}"
            );
        }
        // A matcher, a timeout, a status message (kept for tool events),
        // and a matcher Codex drops (Stop has no tool); from the same
        // `hooks/list`.
        let custom = handler(json!({"type": "command", "command": "/usr/bin/ckpt hook",
            "timeout": 30, "statusMessage": "saving"}));
        assert_eq!(
            hook_hash("PreToolUse", Some("Bash"), &custom).as_deref(),
            Some("sha256:44f00a034b2f86ae4d933e404b64562dc0959b9ffcff052a995fdfc68a0f1f3b")
        );
        let is_async = handler(
            json!({"type": "command", "command": "ckpt hook --agent codex", "async": true}),
        );
        assert_eq!(
            hook_hash("Stop", Some("Bash"), &is_async).as_deref(),
            Some("sha256:4e173cad29d17d533bbdaaa92f76884d69132ba2f6fe579fc2f6e01d2873d6b8")
        );
    }

    #[test]
    fn trust_keys_count_groups_and_handlers_per_event() {
        let doc = json!({"hooks": {
            "PreToolUse": [
                {"matcher": "x", "hooks": [{"type": "command", "command": "lint"}]},
                {"matcher": "Bash", "hooks": [{"type": "command", "command": "echo a"},
                    {"type": "command", "command": "ckpt hook --agent codex"}]}],
            "SessionEnd": [{"hooks": [{"type": "command", "command": "ckpt hook"}]}]
        }});
        let keys: Vec<String> =
            hook_trust(Path::new("/p/.codex/hooks.json"), &doc, &toml::Table::new())
                .into_iter()
                .map(|(_, k, t)| {
                    assert_eq!(t, Trust::Untrusted);
                    k
                })
                .collect();
        assert_eq!(
            keys,
            [
                "/p/.codex/hooks.json:pre_tool_use:1:1",
                "/p/.codex/hooks.json:session_end:0:0"
            ]
        );
    }
}
