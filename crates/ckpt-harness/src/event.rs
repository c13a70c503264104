//! A hook's stdin → one [`HookEvent`].
//!
//! The harnesses agree on little: Claude Code, Codex and Gemini CLI send
//! `session_id`, `hook_event_name`, `tool_name`, `tool_input`; Cursor names
//! the session `conversation_id` and puts a shell command or a path at the
//! top level; Copilot CLI sends `toolName` and `toolArgs` (a JSON string)
//! and no event or session at all. [`HookEvent::parse`] reads every
//! spelling into one shape, and [`Kind`] says what the event means to a
//! checkpoint whatever the harness called it. Unknown fields are ignored
//! and missing ones are empty, so a harness adding fields breaks nothing.
//!
//! The harness is the caller's when it names one (`ckpt hook --agent`, which
//! every configuration ckpt writes does); otherwise it is read off the
//! payload's shape ([`detect`]), and so is Copilot CLI's event, which its
//! payloads do not name. What still needs `--agent`: an opencode payload
//! other than the plugin's three events (the plugin names the harness),
//! and a Claude-shaped payload from a harness not listed here.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::Harness;

/// What an event means to a checkpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The user submitted a prompt: a turn begins.
    Prompt,
    /// A tool is about to run.
    BeforeTool,
    /// A tool has run.
    AfterTool,
    /// The agent finished its turn.
    TurnEnd,
    /// Anything else (session start or end, notifications, …).
    Other,
}

impl Kind {
    /// Classifies an event name of any harness: compared without case and
    /// without `.`, `_` and `-`, so `PreToolUse`, `preToolUse` and
    /// `pre_tool_use` are one event.
    pub fn of(event: &str) -> Kind {
        let n: String = event
            .chars()
            .filter(|c| c.is_ascii_alphanumeric())
            .map(|c| c.to_ascii_lowercase())
            .collect();
        match n.as_str() {
            "userpromptsubmit"
            | "userpromptsubmitted"
            | "beforeagent"
            | "beforesubmitprompt"
            | "chatmessage" => Kind::Prompt,
            "pretooluse"
            | "beforetool"
            | "beforeshellexecution"
            | "beforemcpexecution"
            | "toolexecutebefore" => Kind::BeforeTool,
            "posttooluse"
            | "posttoolusefailure"
            | "aftertool"
            | "aftershellexecution"
            | "afterfileedit"
            | "aftermcpexecution"
            | "toolexecuteafter" => Kind::AfterTool,
            "stop" | "subagentstop" | "afteragent" | "agentstop" | "sessionidle" => Kind::TurnEnd,
            _ => Kind::Other,
        }
    }

    /// The word a checkpoint message starts with.
    fn word(self) -> Option<&'static str> {
        match self {
            Kind::Prompt => Some("prompt"),
            Kind::BeforeTool => Some("before"),
            Kind::AfterTool => Some("after"),
            Kind::TurnEnd => Some("end of turn"),
            Kind::Other => None,
        }
    }
}

/// One hook event, whatever harness sent it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HookEvent {
    /// The harness, when it was named or recognised.
    pub harness: Option<Harness>,
    /// The harness's session (conversation) id, or empty.
    pub session: String,
    /// The event as the harness spelled it, or empty.
    pub event: String,
    /// What the event means.
    pub kind: Kind,
    /// The tool's name, or empty.
    pub tool: String,
    /// The prompt text (prompt events), the shell command (shell tools) or
    /// the path (file tools; relative to `cwd` inside it), else compact
    /// JSON of the tool's input; empty when there is none.
    pub detail: String,
    /// The directory the agent runs in, or empty.
    pub cwd: PathBuf,
}

/// Longest checkpoint message a hook writes, in characters.
pub const MESSAGE_MAX: usize = 100;

/// Why stdin is not a hook event.
#[derive(Debug, PartialEq, Eq)]
pub struct NotAnEvent(pub String);

impl std::fmt::Display for NotAnEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "stdin is not a hook event: {}", self.0)
    }
}

impl std::error::Error for NotAnEvent {}

impl HookEvent {
    /// Reads a hook's stdin. `harness` forces the format (else it is
    /// detected); `event` names the event when the payload does not (the
    /// `--event` of Copilot CLI's configuration). Empty stdin is an event
    /// with nothing but what the caller named.
    pub fn parse(
        stdin: &[u8],
        harness: Option<Harness>,
        event: Option<&str>,
    ) -> Result<HookEvent, NotAnEvent> {
        let v: Map<String, Value> = if stdin.iter().all(u8::is_ascii_whitespace) {
            Map::new()
        } else {
            match serde_json::from_slice(stdin) {
                Ok(Value::Object(m)) => m,
                Ok(_) => return Err(NotAnEvent("a JSON value that is not an object".into())),
                Err(e) => return Err(NotAnEvent(format!("not JSON ({e})"))),
            }
        };
        let harness = harness.or_else(|| (!v.is_empty()).then(|| detect(&v)));
        let text = |keys: &[&str]| {
            keys.iter()
                .find_map(|k| v.get(*k).and_then(Value::as_str))
                .unwrap_or("")
                .to_string()
        };
        let event = match event {
            Some(e) => e.to_string(),
            None => match text(&["hook_event_name", "hookEventName", "event"]) {
                e if e.is_empty() && harness == Some(Harness::Copilot) => {
                    copilot_event(&v).to_string()
                }
                e => e,
            },
        };
        let kind = Kind::of(&event);
        let cwd = PathBuf::from(match text(&["cwd", "directory"]) {
            c if c.is_empty() => v
                .get("workspace_roots")
                .and_then(|r| r.get(0))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            c => c,
        });
        let mut tool = text(&["tool_name", "toolName", "tool"]);
        if tool.is_empty() {
            // Cursor names the tool by the event instead.
            tool = match event.as_str() {
                "beforeShellExecution" | "afterShellExecution" => "shell",
                "afterFileEdit" => "edit",
                "beforeMCPExecution" | "afterMCPExecution" => "mcp",
                _ => "",
            }
            .to_string();
        }
        let detail = if kind == Kind::Prompt {
            text(&["prompt", "user_prompt", "initialPrompt"])
        } else {
            let input = v
                .get("tool_input")
                .or_else(|| v.get("toolArgs"))
                .or_else(|| v.get("args"))
                .cloned()
                .map(|i| match i {
                    // Copilot CLI sends the arguments as a JSON string.
                    Value::String(s) => serde_json::from_str(&s).unwrap_or(Value::String(s)),
                    other => other,
                });
            match input {
                Some(i) if !i.is_null() => input_detail(&i, &cwd),
                // Cursor's shell and file events carry the command or the
                // path at the top level.
                _ => top_level_detail(&v, &cwd),
            }
        };
        Ok(HookEvent {
            harness,
            session: text(&["session_id", "sessionId", "sessionID", "conversation_id"]),
            event,
            kind,
            tool,
            detail,
            cwd,
        })
    }

    /// One line for the checkpoint's message, e.g. `after Bash: npm
    /// install` or `prompt: fix the bug`, at most [`MESSAGE_MAX`]
    /// characters.
    pub fn message(&self) -> String {
        let when =
            self.kind
                .word()
                .map(str::to_string)
                .unwrap_or_else(|| match self.event.as_str() {
                    "" => "hook".to_string(),
                    e => e.to_string(),
                });
        let head = match (
            self.tool.is_empty() || self.kind == Kind::Prompt,
            self.detail.is_empty(),
        ) {
            (true, true) => when,
            (true, false) => format!("{when}: {}", self.detail),
            (false, true) => format!("{when} {}", self.tool),
            (false, false) => format!("{when} {}: {}", self.tool, self.detail),
        };
        one_line(&head, MESSAGE_MAX)
    }

    /// The tags a checkpoint of this event carries: `harness`, `session`,
    /// `event`, `tool` (empty values left out).
    pub fn tags(&self) -> Vec<(String, String)> {
        [
            ("harness", self.harness.map(Harness::name).unwrap_or("")),
            ("session", &self.session),
            ("event", &self.event),
            ("tool", &self.tool),
        ]
        .into_iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }
}

/// The harness a payload came from, by its shape: the fields only one
/// harness sends, then the event names only one harness uses, then where
/// the harness keeps the session's transcript. Claude Code, Codex and
/// Gemini CLI share field and some event names (`SessionStart`,
/// `SessionEnd`); Gemini CLI alone stamps every payload with `timestamp`,
/// Codex alone sends `turn_id`, and their transcripts are
/// `…/chats/session-….jsonl` and `…/rollout-….jsonl`. What is left is
/// read as Claude Code's.
pub fn detect(v: &Map<String, Value>) -> Harness {
    let has = |k: &str| v.contains_key(k);
    if has("conversation_id") || has("workspace_roots") {
        return Harness::Cursor;
    }
    let event = v
        .get("hook_event_name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if event.is_empty()
        && (has("sessionId")
            || has("toolName")
            || has("toolArgs")
            || has("hookName")
            || has("timestamp"))
    {
        return Harness::Copilot;
    }
    let transcript = v
        .get("transcript_path")
        .and_then(Value::as_str)
        .unwrap_or("");
    let transcript_name = Path::new(transcript)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("");
    match event {
        "BeforeAgent"
        | "AfterAgent"
        | "BeforeTool"
        | "AfterTool"
        | "BeforeModel"
        | "AfterModel"
        | "BeforeToolSelection"
        | "PreCompress" => Harness::Gemini,
        "tool.execute.before" | "tool.execute.after" | "chat.message" => Harness::Opencode,
        _ if has("turn_id")
            || transcript_name.starts_with("rollout-")
            || transcript.contains("/.codex/") =>
        {
            Harness::Codex
        }
        _ if has("timestamp")
            || transcript.contains("/chats/session-")
            || transcript.contains("/.gemini/") =>
        {
            Harness::Gemini
        }
        _ => Harness::Claude,
    }
}

/// The event of a Copilot CLI payload, which does not name it, read off
/// its fields (the fields each event sends, as recorded from the real CLI
/// and documented). `subagentStop` sends what `agentStop` does and is read
/// as `agentStop`; ckpt's configuration names the event in every command
/// (`--event`), so this is for hand-written hooks.
fn copilot_event(v: &Map<String, Value>) -> &str {
    let has = |k: &str| v.contains_key(k);
    if let Some(name) = v.get("hookName").and_then(Value::as_str) {
        return name;
    }
    if has("toolResult") {
        "postToolUse"
    } else if has("toolName") || has("toolArgs") {
        "preToolUse"
    } else if has("stopReason") {
        "agentStop"
    } else if has("initialPrompt") || has("source") {
        "sessionStart"
    } else if has("prompt") {
        "userPromptSubmitted"
    } else if has("error") {
        "errorOccurred"
    } else if has("reason") {
        "sessionEnd"
    } else {
        ""
    }
}

/// The interesting part of a tool's input: a shell command, a file path
/// (relative to `cwd` when inside it), a pattern, a URL, or compact JSON.
fn input_detail(input: &Value, cwd: &Path) -> String {
    let Value::Object(m) = input else {
        return match input {
            Value::String(s) => s.clone(),
            v => v.to_string(),
        };
    };
    named_detail(m, cwd).unwrap_or_else(|| input.to_string())
}

/// [`input_detail`] for a payload whose top level is the input (Cursor's
/// shell and file events); nothing when no known key is there.
fn top_level_detail(v: &Map<String, Value>, cwd: &Path) -> String {
    named_detail(v, cwd).unwrap_or_default()
}

fn named_detail(m: &Map<String, Value>, cwd: &Path) -> Option<String> {
    const KEYS: [&str; 12] = [
        "command",
        "cmd",
        "file_path",
        "filePath",
        "absolute_path",
        "notebook_path",
        "path",
        "pattern",
        "url",
        "query",
        "message",
        "description",
    ];
    for key in KEYS {
        let Some(v) = m.get(key) else { continue };
        let s = match v {
            Value::String(s) => s.clone(),
            // Shell tools that take an argument vector (`["bash", "-lc",
            // "…"]`): the script when it is a shell's `-c`, else the words.
            Value::Array(words) => {
                let words: Vec<&str> = words.iter().filter_map(Value::as_str).collect();
                match words.as_slice() {
                    [sh, flag, script] if sh.ends_with("sh") && flag.ends_with('c') => {
                        script.to_string()
                    }
                    _ => words.join(" "),
                }
            }
            _ => continue,
        };
        // Codex's `apply_patch` sends the whole patch as its command: the
        // files it touches say more than its first line.
        if let Some(files) = patched_files(&s, cwd) {
            return Some(files);
        }
        let is_path = key.to_ascii_lowercase().ends_with("path");
        return Some(match Path::new(&s).strip_prefix(cwd) {
            Ok(rel) if is_path && !cwd.as_os_str().is_empty() => rel.display().to_string(),
            _ => s,
        });
    }
    None
}

/// The files a patch in Codex's `apply_patch` format adds, updates or
/// deletes (relative to `cwd` when inside it), joined by `, `; `None` when
/// `s` is not such a patch.
fn patched_files(s: &str, cwd: &Path) -> Option<String> {
    if !s.trim_start().starts_with("*** Begin Patch") {
        return None;
    }
    let files: Vec<String> = s
        .lines()
        .filter_map(|l| {
            ["*** Add File: ", "*** Update File: ", "*** Delete File: "]
                .iter()
                .find_map(|p| l.strip_prefix(p))
        })
        .map(|f| {
            let f = f.trim();
            match Path::new(f).strip_prefix(cwd) {
                Ok(rel) if !cwd.as_os_str().is_empty() => rel.display().to_string(),
                _ => f.to_string(),
            }
        })
        .collect();
    (!files.is_empty()).then(|| files.join(", "))
}

/// Collapses whitespace runs (newlines included) to one space and cuts
/// after `max` characters with an ellipsis.
pub fn one_line(s: &str, max: usize) -> String {
    let flat = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        flat
    } else {
        let mut out: String = flat.chars().take(max.saturating_sub(1)).collect();
        out.push('…');
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: Value) -> HookEvent {
        HookEvent::parse(v.to_string().as_bytes(), None, None).unwrap()
    }

    #[test]
    fn claude_shapes() {
        let ev = parse(json!({
            "session_id": "s1", "cwd": "/p", "hook_event_name": "PostToolUse",
            "tool_name": "Edit", "tool_input": {"file_path": "/p/src/a.rs", "old_string": "x"}
        }));
        assert_eq!(ev.harness, Some(Harness::Claude));
        assert_eq!(ev.kind, Kind::AfterTool);
        assert_eq!(ev.message(), "after Edit: src/a.rs");
        let ev = parse(json!({"hook_event_name": "UserPromptSubmit", "prompt": "fix\nthe   bug"}));
        assert_eq!(ev.message(), "prompt: fix the bug");
        assert_eq!(one_line(&"x".repeat(200), 10).chars().count(), 10);
    }

    #[test]
    fn every_harness_is_recognised_by_its_shape() {
        let cases = [
            (
                json!({"hook_event_name": "BeforeTool", "session_id": "g", "tool_name": "run_shell_command",
                    "tool_input": {"command": "ls"}}),
                Harness::Gemini,
                "before run_shell_command: ls",
            ),
            (
                json!({"conversation_id": "c", "hook_event_name": "beforeShellExecution",
                    "command": "rm -rf x", "workspace_roots": ["/w"]}),
                Harness::Cursor,
                "before shell: rm -rf x",
            ),
            (
                json!({"timestamp": 1, "cwd": "/w", "toolName": "bash",
                    "toolArgs": "{\"command\":\"make\"}"}),
                Harness::Copilot,
                "before bash: make",
            ),
            (
                json!({"session_id": "g", "transcript_path": "/h/.gemini/tmp/ws/chats/session-2026-12-06T04-20-052ab6f0.jsonl",
                    "cwd": "/w", "hook_event_name": "SessionStart", "timestamp": "2026-12-06T04:20:34.386Z",
                    "source": "startup"}),
                Harness::Gemini,
                "SessionStart",
            ),
            (
                json!({"session_id": "x", "transcript_path": "/ch/sessions/2026/12/06/rollout-2026-12-06T04-19-25-01a2.jsonl",
                    "cwd": "/w", "hook_event_name": "SessionEnd", "reason": "exit"}),
                Harness::Codex,
                "SessionEnd",
            ),
            (
                json!({"session_id": "x", "transcript_path": "/h/.claude/projects/-w/x.jsonl",
                    "cwd": "/w", "hook_event_name": "SessionEnd", "reason": "other"}),
                Harness::Claude,
                "SessionEnd",
            ),
            (
                json!({"sessionId": "c", "timestamp": 1, "cwd": "/w", "stopReason": "end_turn"}),
                Harness::Copilot,
                "end of turn",
            ),
            (
                json!({"sessionId": "c", "timestamp": 1, "cwd": "/w", "prompt": "fix it"}),
                Harness::Copilot,
                "prompt: fix it",
            ),
            (
                json!({"hook_event_name": "tool.execute.after", "session_id": "o", "tool_name": "write",
                    "tool_input": {"filePath": "/w/a.txt"}, "cwd": "/w"}),
                Harness::Opencode,
                "after write: a.txt",
            ),
            (
                json!({"hook_event_name": "PreToolUse", "transcript_path": "/h/.codex/sessions/x.jsonl",
                    "tool_name": "Bash", "tool_input": {"command": ["bash", "-lc", "echo hi"]}}),
                Harness::Codex,
                "before Bash: echo hi",
            ),
            (
                json!({"hook_event_name": "PostToolUse", "transcript_path": "/h/.codex/sessions/x.jsonl",
                    "tool_name": "apply_patch", "tool_input": {"command":
                    "*** Begin Patch\n*** Add File: /w/notes.txt\n+hi\n*** Update File: src/a.rs\n@@\n*** End Patch\n"},
                    "cwd": "/w"}),
                Harness::Codex,
                "after apply_patch: notes.txt, src/a.rs",
            ),
        ];
        for (payload, want, message) in cases {
            let ev = parse(payload);
            assert_eq!(ev.harness, Some(want), "{ev:?}");
            assert_eq!(ev.message(), message);
        }
    }

    #[test]
    fn a_named_harness_and_event_win() {
        let ev = HookEvent::parse(
            br#"{"timestamp": 5, "cwd": "/w", "prompt": "add tests"}"#,
            Some(Harness::Copilot),
            Some("userPromptSubmitted"),
        )
        .unwrap();
        assert_eq!(ev.kind, Kind::Prompt);
        assert_eq!(ev.message(), "prompt: add tests");
        assert_eq!(
            ev.tags(),
            vec![
                ("harness".to_string(), "copilot".to_string()),
                ("event".to_string(), "userPromptSubmitted".to_string())
            ]
        );
    }

    #[test]
    fn bad_input_is_an_error_not_a_panic() {
        assert!(HookEvent::parse(b"[1]", None, None).is_err());
        assert!(HookEvent::parse(b"{", None, None).is_err());
        let empty = HookEvent::parse(b"  \n", None, None).unwrap();
        assert_eq!(empty.harness, None);
        assert_eq!(empty.message(), "hook");
    }

    proptest::proptest! {
        /// Any JSON object parses (no panic), and the message is one line
        /// of at most MESSAGE_MAX characters.
        #[test]
        fn any_object_gives_a_bounded_one_line_message(
            keys in proptest::collection::vec(
                proptest::sample::select(vec!["session_id", "hook_event_name", "tool_name", "tool_input",
                    "prompt", "cwd", "toolArgs", "command", "conversation_id", "file_path"]), 0..8),
            vals in proptest::collection::vec(".{0,300}", 8),
        ) {
            let mut m = Map::new();
            for (k, v) in keys.iter().zip(&vals) {
                m.insert(k.to_string(), Value::String(v.clone()));
            }
            let ev = HookEvent::parse(Value::Object(m).to_string().as_bytes(), None, None).unwrap();
            let msg = ev.message();
            proptest::prop_assert!(msg.chars().count() <= MESSAGE_MAX);
            proptest::prop_assert!(!msg.contains('\n'));
        }
    }
}
