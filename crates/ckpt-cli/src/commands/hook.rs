//! `ckpt hook`: one checkpoint per agent-harness event, and
//! `ckpt init --agent claude`: the hook configuration that calls it.
//!
//! Input: a Claude Code hook event as JSON on stdin (`session_id`, `cwd`,
//! `hook_event_name`, `tool_name`, `tool_input`, `prompt`, …; unknown fields
//! are ignored, missing ones are empty), or for other harnesses the
//! environment variables `CKPT_EVENT`, `CKPT_SESSION`, `CKPT_TOOL`,
//! `CKPT_MESSAGE` (they fill in what the JSON lacks). The workspace is found
//! from `-C`, else the event's `cwd`, else the current directory.
//!
//! Output: a checkpoint saved through the same library entry point as
//! `ckpt save` ([`ckpt_lib::ops::save::save`]: through a live watcher when there is one), tagged `session`, `event`
//! and `tool`, with a one-line summary of the event as its message; then
//! the workspace's retention policy. Nothing is printed on success and
//! nothing is saved when nothing changed (exit 0 either way), so it can run
//! on every tool call. `--json` or `--verbose` report what happened.
//!
//! Exit codes: 0 on success or nothing to do (also outside a workspace, with
//! a note on stderr); every failure exits 1, never 2 — Claude Code treats 2
//! from a PreToolUse hook as "block the tool call", and a checkpointing
//! problem must never stop the agent.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Read};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use ckpt_lib::engine::save::{SaveOptions, SaveOutcome};
use ckpt_lib::workspace::Workspace;
use ckpt_lib::{Error, Result};
use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::context::Ctx;
use ckpt_lib::ops::json::SCHEMA;

use crate::render::{self, print_json};

/// Longest message a hook writes (characters).
const SUMMARY_MAX: usize = 100;

/// The fields of a hook event ckpt uses (Claude Code's names).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct HookEvent {
    /// Harness session.
    pub session_id: String,
    /// Directory the agent runs in.
    pub cwd: String,
    /// PreToolUse, PostToolUse, UserPromptSubmit, Stop, …
    pub hook_event_name: String,
    /// Bash, Edit, Write, …
    pub tool_name: String,
    /// The tool's arguments.
    pub tool_input: Value,
    /// The user's prompt (UserPromptSubmit).
    pub prompt: String,
}

impl HookEvent {
    /// Parses stdin (empty: no event) and fills gaps from the environment.
    pub fn read(stdin: &[u8], env: impl Fn(&str) -> Option<String>) -> Result<HookEvent> {
        let mut ev: HookEvent = if stdin.iter().all(u8::is_ascii_whitespace) {
            HookEvent::default()
        } else {
            serde_json::from_slice(stdin).map_err(|e| {
                Error::Usage(format!(
                    "stdin is not a hook event (JSON object): {e}; nothing was saved"
                ))
            })?
        };
        let fill = |field: &mut String, var: &str| {
            if field.is_empty() {
                if let Some(v) = env(var) {
                    *field = v;
                }
            }
        };
        fill(&mut ev.hook_event_name, "CKPT_EVENT");
        fill(&mut ev.session_id, "CKPT_SESSION");
        fill(&mut ev.tool_name, "CKPT_TOOL");
        if let Some(m) = env("CKPT_MESSAGE").filter(|m| !m.is_empty()) {
            ev.tool_input = match ev.tool_input {
                Value::Null => json!({ "message": m }),
                other => other,
            };
        }
        Ok(ev)
    }

    /// Tags recorded on the checkpoint (empty values left out).
    pub fn tags(&self) -> BTreeMap<String, String> {
        [
            ("session", &self.session_id),
            ("event", &self.hook_event_name),
            ("tool", &self.tool_name),
        ]
        .into_iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
    }

    /// One line saying what happened, e.g. `after Bash: npm install`.
    pub fn summary(&self) -> String {
        let when = match self.hook_event_name.as_str() {
            "PreToolUse" => "before",
            "PostToolUse" | "PostToolUseFailure" => "after",
            "UserPromptSubmit" => "prompt",
            "Stop" | "SubagentStop" => "end of turn",
            "" => "hook",
            other => other,
        };
        let detail = if self.hook_event_name == "UserPromptSubmit" {
            self.prompt.clone()
        } else {
            input_summary(&self.tool_input, Path::new(&self.cwd))
        };
        let head = match (self.tool_name.is_empty(), detail.is_empty()) {
            (true, true) => when.to_string(),
            (true, false) => format!("{when}: {detail}"),
            (false, true) => format!("{when} {}", self.tool_name),
            (false, false) => format!("{when} {}: {detail}", self.tool_name),
        };
        one_line(&head, SUMMARY_MAX)
    }
}

/// The interesting part of a tool's input: a shell command, a file path
/// (relative to `cwd` when inside it), a pattern, a URL, or compact JSON.
fn input_summary(input: &Value, cwd: &Path) -> String {
    let Value::Object(m) = input else {
        return match input {
            Value::Null => String::new(),
            Value::String(s) => s.clone(),
            v => v.to_string(),
        };
    };
    for key in [
        "command",
        "file_path",
        "notebook_path",
        "path",
        "pattern",
        "url",
        "query",
        "message",
        "description",
    ] {
        if let Some(Value::String(s)) = m.get(key) {
            let p = Path::new(s);
            return match p.strip_prefix(cwd) {
                Ok(rel) if key.ends_with("path") && !cwd.as_os_str().is_empty() => {
                    rel.display().to_string()
                }
                _ => s.clone(),
            };
        }
    }
    Value::Object(m.clone()).to_string()
}

/// Collapses whitespace runs (newlines included) to one space and cuts
/// after `max` characters with an ellipsis.
fn one_line(s: &str, max: usize) -> String {
    let flat = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        flat
    } else {
        let mut out: String = flat.chars().take(max - 1).collect();
        out.push('…');
        out
    }
}

// Arguments of `ckpt hook`.
#[derive(clap::Args)]
pub struct HookArgs {
    /// JSON output.
    #[arg(long)]
    json: bool,
}

/// `ckpt hook`.
pub fn run(ctx: &Ctx, args: &HookArgs, chdir_given: bool) -> ExitCode {
    let json_out = args.json;
    match hook(ctx, chdir_given, json_out) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ckpt hook: error: {e}");
            ExitCode::from(crate::exit::EXIT_FAILURE)
        }
    }
}

fn hook(ctx: &Ctx, chdir_given: bool, json_out: bool) -> Result<()> {
    let t0 = Instant::now();
    let mut input = Vec::new();
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        stdin
            .lock()
            .read_to_end(&mut input)
            .map_err(|e| Error::io("read", "<stdin>", e))?;
    }
    let ev = HookEvent::read(&input, |k| std::env::var(k).ok())?;
    let start = if !chdir_given && !ev.cwd.is_empty() {
        PathBuf::from(&ev.cwd)
    } else {
        ctx.ops.cwd.clone()
    };
    let ws = match Workspace::discover(&start) {
        Ok(ws) => ws,
        Err(Error::NotAWorkspace(p)) => {
            if !ctx.quiet {
                eprintln!(
                    "ckpt hook: {} is not in a ckpt workspace; nothing saved (run `ckpt init`)",
                    p.display()
                );
            }
            return Ok(());
        }
        Err(e) => return Err(e),
    };
    let opts = SaveOptions {
        message: ev.summary(),
        tags: ev.tags(),
        allow_empty: false,
        journal: None,
    };
    let here = ckpt_lib::ops::Context::new(ws.root.clone(), ctx.ops.config.clone());
    let done = ckpt_lib::ops::save::save(&here, &opts)?;
    let saved = match &done.outcome {
        SaveOutcome::Saved(cp) => Some(cp),
        SaveOutcome::Unchanged(_) => None,
    };
    let retention = done.retention;
    let elapsed = t0.elapsed();
    if json_out {
        let mut v = Map::new();
        v.insert("schema".into(), json!(SCHEMA));
        v.insert("saved".into(), json!(saved.is_some()));
        v.insert("id".into(), json!(saved.map(|c| c.id())));
        v.insert("message".into(), json!(opts.message));
        v.insert("tags".into(), json!(opts.tags));
        v.insert(
            "dropped".into(),
            json!(retention
                .as_ref()
                .map_or(&[][..], |r| &r.selection.drop[..])),
        );
        v.insert("elapsed_ms".into(), ckpt_lib::ops::json::ms(elapsed));
        v.insert(
            "unreadable".into(),
            ckpt_lib::ops::json::unreadable(&done.unreadable),
        );
        print_json(&Value::Object(v));
        return Ok(());
    }
    // Everything else was saved; say what was not readable.
    render::warn_unreadable("ckpt hook: ", &done.unreadable);
    if ctx.verbose {
        match saved {
            Some(cp) => eprintln!(
                "ckpt hook: saved {} \"{}\" ({})",
                cp.id(),
                opts.message,
                render::ms(elapsed)
            ),
            None => eprintln!("ckpt hook: nothing changed ({})", render::ms(elapsed)),
        }
    }
    Ok(())
}

/// Harnesses `ckpt init --agent` knows.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum Agent {
    /// Claude Code (`.claude/settings.json` hooks).
    Claude,
}

/// The tools whose calls can change files (matcher for PreToolUse and
/// PostToolUse). Read-only tools are left out to keep turns fast; changes
/// made behind the agent's back are still caught by the next event.
const MUTATING_TOOLS: &str = "Bash|Edit|MultiEdit|Write|NotebookEdit";

/// The command the hooks run.
const HOOK_COMMAND: &str = "ckpt hook";

/// Claude Code hook configuration: checkpoint before and after every tool
/// that can change files, when a prompt is submitted and at the end of each
/// turn.
pub fn claude_hooks() -> Value {
    let cmd = json!([{ "type": "command", "command": HOOK_COMMAND }]);
    json!({
        "hooks": {
            "UserPromptSubmit": [{ "hooks": cmd }],
            "PreToolUse": [{ "matcher": MUTATING_TOOLS, "hooks": cmd }],
            "PostToolUse": [{ "matcher": MUTATING_TOOLS, "hooks": cmd }],
            "Stop": [{ "hooks": cmd }],
        }
    })
}

/// True if a matcher group already runs `ckpt … hook`.
fn runs_ckpt_hook(group: &Value) -> bool {
    group["hooks"].as_array().is_some_and(|hs| {
        hs.iter().any(|h| {
            h["command"].as_str().is_some_and(|c| {
                let words: Vec<&str> = c.split_whitespace().collect();
                words.first().is_some_and(|w| w.ends_with("ckpt")) && words.contains(&"hook")
            })
        })
    })
}

/// Merges [`claude_hooks`] into existing settings: other keys, other hooks
/// and other events are kept as they are; an event that already runs
/// `ckpt hook` is left alone. Returns the events added.
pub fn merge_claude_settings(settings: &mut Value) -> Result<Vec<String>> {
    let Value::Object(root) = settings else {
        return Err(Error::Usage("settings are not a JSON object".into()));
    };
    let hooks = root.entry("hooks").or_insert_with(|| json!({}));
    let Value::Object(hooks) = hooks else {
        return Err(Error::Usage("\"hooks\" is not a JSON object".into()));
    };
    let mut added = Vec::new();
    let ours = claude_hooks();
    for (event, groups) in ours["hooks"].as_object().expect("object") {
        let list = hooks.entry(event.clone()).or_insert_with(|| json!([]));
        let Value::Array(list) = list else {
            return Err(Error::Usage(format!(
                "\"hooks\".\"{event}\" is not a JSON array"
            )));
        };
        if list.iter().any(runs_ckpt_hook) {
            continue;
        }
        list.extend(groups.as_array().expect("array").iter().cloned());
        added.push(event.clone());
    }
    Ok(added)
}

/// `ckpt init --agent claude [--write]` after the workspace exists.
pub fn init_agent(
    ctx: &Ctx,
    ws: &Workspace,
    agent: Agent,
    write: bool,
    json_out: bool,
) -> Result<()> {
    let Agent::Claude = agent;
    if !write {
        let v = claude_hooks();
        if json_out {
            print_json(&json!({ "schema": SCHEMA, "settings": v, "written": false }));
        } else {
            if !ctx.quiet {
                eprintln!(
                    "# add this to {}/.claude/settings.json (or run with --write to merge it):",
                    ws.root.display()
                );
            }
            print_json(&v);
        }
        return Ok(());
    }
    let dir = ws.root.join(".claude");
    let path = dir.join("settings.json");
    let mut settings = match std::fs::read(&path) {
        Ok(b) if b.iter().all(u8::is_ascii_whitespace) => json!({}),
        Ok(b) => serde_json::from_slice(&b).map_err(|e| {
            Error::Usage(format!(
                "{}: not valid JSON ({e}); fix it or merge the hooks by hand (`ckpt init --agent claude` prints them); nothing was changed",
                path.display()
            ))
        })?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => json!({}),
        Err(e) => return Err(Error::io("read", &path, e)),
    };
    let added = merge_claude_settings(&mut settings)
        .map_err(|e| Error::Usage(format!("{}: {e}; nothing was changed", path.display())))?;
    if !added.is_empty() {
        std::fs::create_dir_all(&dir).map_err(|e| Error::io("create", &dir, e))?;
        let tmp = dir.join(".settings.json.ckpt-tmp");
        let mut text = serde_json::to_string_pretty(&settings).expect("json");
        text.push('\n');
        std::fs::write(&tmp, text).map_err(|e| Error::io("write", &tmp, e))?;
        std::fs::rename(&tmp, &path).map_err(|e| Error::io("rename", &path, e))?;
    }
    if json_out {
        print_json(&json!({
            "schema": SCHEMA, "written": !added.is_empty(),
            "path": path.display().to_string(), "added": added,
        }));
    } else if !ctx.quiet {
        if added.is_empty() {
            println!(
                "{} already runs `ckpt hook`; nothing changed",
                path.display()
            );
        } else {
            println!(
                "added `{HOOK_COMMAND}` for {} to {}",
                added.join(", "),
                path.display()
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries() {
        let ev = HookEvent {
            hook_event_name: "PostToolUse".into(),
            tool_name: "Edit".into(),
            cwd: "/p".into(),
            tool_input: json!({"file_path": "/p/src/a.rs", "old_string": "x"}),
            ..Default::default()
        };
        assert_eq!(ev.summary(), "after Edit: src/a.rs");
        let ev = HookEvent {
            hook_event_name: "UserPromptSubmit".into(),
            prompt: "fix\nthe   bug".into(),
            ..Default::default()
        };
        assert_eq!(ev.summary(), "prompt: fix the bug");
        assert_eq!(one_line(&"x".repeat(200), 10).chars().count(), 10);
    }

    #[test]
    fn merge_keeps_everything_and_is_idempotent() {
        let mut s = json!({
            "model": "opus",
            "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "lint.sh"}]}]}
        });
        let added = merge_claude_settings(&mut s).unwrap();
        assert_eq!(added.len(), 4);
        assert_eq!(s["model"], "opus");
        assert_eq!(
            s["hooks"]["PreToolUse"][0]["hooks"][0]["command"],
            "lint.sh"
        );
        assert_eq!(s["hooks"]["PreToolUse"].as_array().unwrap().len(), 2);
        let before = s.clone();
        assert!(merge_claude_settings(&mut s).unwrap().is_empty());
        assert_eq!(s, before);
        assert!(merge_claude_settings(&mut json!([1])).is_err());
    }
}
