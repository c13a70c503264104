//! The project-level configuration that makes a harness run `ckpt hook`.
//!
//! [`plan`] reads the harness's file (if any) and computes the file as it
//! should be: ckpt's hooks merged in, or taken out. Nothing is written
//! until [`Plan::apply`], which replaces the file atomically (a temporary
//! file in the same directory, then `rename`). The merge is the contract
//! users rely on:
//!
//! - every key, event and hook that is not ckpt's is kept as it was;
//! - an event that already runs ckpt's hook is left alone, so planning an
//!   install twice changes nothing the second time;
//! - a file that does not parse, or whose `hooks` is not the shape the
//!   harness documents, is an error naming the file, and nothing is
//!   written.
//!
//! A hook is ckpt's when its command's first word is a `ckpt` executable
//! and a later word is `hook`, so hooks written by hand as `ckpt hook` or
//! `/usr/local/bin/ckpt hook --agent claude` count as installed.

use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use crate::harness::{Layout, Spec};
use crate::Harness;

/// Install or remove.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Merge ckpt's hooks in.
    Install,
    /// Take ckpt's hooks out.
    Remove,
}

/// What [`Plan::apply`] will do to the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// Create the file (and its directory).
    Create,
    /// Rewrite the file.
    Update,
    /// Delete the file (it held only ckpt's hooks, or is ckpt's plugin).
    Delete,
    /// Nothing to do.
    Unchanged,
}

/// One harness's configuration change, computed and not yet written.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The harness.
    pub harness: Harness,
    /// The file, absolute.
    pub path: PathBuf,
    /// What happens to it.
    pub change: Change,
    /// The events whose ckpt hook is added (install) or removed (remove).
    pub events: Vec<String>,
    /// The file's new text (empty for [`Change::Delete`]).
    pub text: String,
}

/// A configuration file ckpt cannot merge into.
#[derive(Debug)]
pub struct SetupError {
    /// The file.
    pub path: PathBuf,
    /// What is wrong, and what to do.
    pub problem: String,
}

impl std::fmt::Display for SetupError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.problem)
    }
}

impl std::error::Error for SetupError {}

/// The command a harness's hooks run.
pub fn command(h: Harness, event: &str) -> String {
    let spec = h.spec();
    let event = if spec.event_in_command {
        format!(" --event {event}")
    } else {
        String::new()
    };
    format!(
        "ckpt hook --agent {}{event}{}",
        h.name(),
        spec.command_suffix
    )
}

/// Whether a hook command runs ckpt's hook.
pub fn is_ckpt_hook(command: &str) -> bool {
    let mut words = command.split_whitespace();
    words
        .next()
        .is_some_and(|w| Path::new(w).file_name().is_some_and(|n| n == "ckpt"))
        && words.any(|w| w == "hook")
}

/// The harnesses a directory shows signs of (their configuration
/// directories or instruction files), in [`Harness::ALL`]'s order.
pub fn detect(root: &Path) -> Vec<Harness> {
    Harness::ALL
        .into_iter()
        .filter(|h| h.spec().markers.iter().any(|m| root.join(m).exists()))
        .collect()
}

/// Whether `root`'s configuration for `h` runs ckpt's hook at all (a file
/// that does not parse counts as not).
pub fn installed(root: &Path, h: Harness) -> bool {
    plan(root, h, Action::Remove).is_ok_and(|p| p.change != Change::Unchanged)
}

/// Computes the change for one harness under the workspace `root`.
pub fn plan(root: &Path, h: Harness, action: Action) -> Result<Plan, SetupError> {
    let spec = h.spec();
    let path = root.join(spec.path);
    let err = |problem: String| SetupError {
        path: path.clone(),
        problem,
    };
    let existing = match std::fs::read_to_string(&path) {
        Ok(t) => Some(t),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(err(format!("cannot read it ({e}); nothing was changed"))),
    };
    let done = |change, events, text| {
        Ok(Plan {
            harness: h,
            path: path.clone(),
            change,
            events,
            text,
        })
    };
    if let Layout::Plugin { text } = spec.layout {
        return match (action, existing) {
            (Action::Install, Some(t)) if t == text => done(Change::Unchanged, vec![], t),
            (Action::Install, Some(_)) => done(Change::Update, vec![], text.to_string()),
            (Action::Install, None) => done(Change::Create, vec![], text.to_string()),
            (Action::Remove, Some(_)) => done(Change::Delete, vec![], String::new()),
            (Action::Remove, None) => done(Change::Unchanged, vec![], String::new()),
        };
    }
    let mut doc = match existing.as_deref() {
        None => Value::Object(Map::new()),
        Some(t) if t.trim().is_empty() => Value::Object(Map::new()),
        Some(t) => serde_json::from_str(t).map_err(|e| {
            err(format!(
                "not valid JSON ({e}); fix it, or add the hooks by hand (`ckpt init --agent {}` prints them); nothing was changed",
                h.name()
            ))
        })?,
    };
    let events = match action {
        Action::Install => merge(spec, h, &mut doc),
        Action::Remove => remove(&mut doc),
    }
    .map_err(|p| err(format!("{p}; nothing was changed")))?;
    if events.is_empty() {
        return done(Change::Unchanged, events, existing.unwrap_or_default());
    }
    let only_version_left = doc.as_object().is_some_and(|m| {
        m.iter().all(|(k, v)| {
            k == "version" || (k == "hooks" && v.as_object().is_some_and(Map::is_empty))
        })
    });
    if action == Action::Remove && only_version_left {
        return done(Change::Delete, events, String::new());
    }
    let mut text = serde_json::to_string_pretty(&doc).expect("a JSON value prints");
    text.push('\n');
    let change = if existing.is_some() {
        Change::Update
    } else {
        Change::Create
    };
    done(change, events, text)
}

/// The configuration ckpt would write for `h` into an empty project: what
/// `ckpt init --agent NAME` prints without `--write`.
pub fn fresh(h: Harness) -> String {
    match h.spec().layout {
        Layout::Plugin { text } => text.to_string(),
        _ => {
            let mut doc = Value::Object(Map::new());
            merge(h.spec(), h, &mut doc).expect("an empty object takes hooks");
            let mut text = serde_json::to_string_pretty(&doc).expect("a JSON value prints");
            text.push('\n');
            text
        }
    }
}

impl Plan {
    /// Writes the plan: the new file through a temporary file and `rename`
    /// (so a reader sees the old file or the new one), or its removal.
    pub fn apply(&self) -> std::io::Result<()> {
        match self.change {
            Change::Unchanged => Ok(()),
            Change::Delete => std::fs::remove_file(&self.path),
            Change::Create | Change::Update => {
                let dir = self.path.parent().expect("a file under the root");
                std::fs::create_dir_all(dir)?;
                let name = self
                    .path
                    .file_name()
                    .expect("a file name")
                    .to_string_lossy();
                let tmp = dir.join(format!(".{name}.ckpt-tmp"));
                std::fs::write(&tmp, &self.text)?;
                std::fs::rename(&tmp, &self.path)
            }
        }
    }
}

/// The `hooks` object of a configuration document, created if absent.
fn hooks_of(doc: &mut Value, versioned: bool) -> Result<&mut Map<String, Value>, String> {
    let Value::Object(root) = doc else {
        return Err("the file is not a JSON object".into());
    };
    if versioned {
        root.entry("version").or_insert(json!(1));
    }
    match root.entry("hooks").or_insert_with(|| json!({})) {
        Value::Object(m) => Ok(m),
        _ => Err("\"hooks\" is not a JSON object".into()),
    }
}

/// The commands of one entry of an event's list, in any layout.
fn entry_commands(entry: &Value) -> Vec<&str> {
    let mut out: Vec<&str> = ["command", "bash"]
        .iter()
        .filter_map(|k| entry.get(*k).and_then(Value::as_str))
        .collect();
    if let Some(hs) = entry.get("hooks").and_then(Value::as_array) {
        out.extend(
            hs.iter()
                .filter_map(|h| h.get("command").and_then(Value::as_str)),
        );
    }
    out
}

fn runs_ckpt(entry: &Value) -> bool {
    entry_commands(entry).into_iter().any(is_ckpt_hook)
}

/// Adds ckpt's entry to every hooked event that lacks one.
fn merge(spec: &Spec, h: Harness, doc: &mut Value) -> Result<Vec<String>, String> {
    let versioned = matches!(spec.layout, Layout::Copilot | Layout::Cursor);
    let hooks = hooks_of(doc, versioned)?;
    let mut added = Vec::new();
    for hook in spec.hooks {
        let list = hooks.entry(hook.event).or_insert_with(|| json!([]));
        let Value::Array(list) = list else {
            return Err(format!("\"hooks\".\"{}\" is not a JSON array", hook.event));
        };
        if list.iter().any(runs_ckpt) {
            continue;
        }
        let cmd = command(h, hook.event);
        let mut entry = match spec.layout {
            Layout::Grouped => json!({ "hooks": [{ "type": "command", "command": cmd }] }),
            Layout::Copilot => json!({ "type": "command", "bash": cmd, "timeoutSec": 60 }),
            Layout::Cursor => json!({ "command": cmd }),
            Layout::Plugin { .. } => unreachable!("plugins are whole files"),
        };
        if let Some(m) = hook.matcher {
            entry["matcher"] = json!(m);
        }
        list.push(entry);
        added.push(hook.event.to_string());
    }
    Ok(added)
}

/// Takes ckpt's hooks out of every event: a grouped entry loses its ckpt
/// commands (and goes when none is left), and an event left with no entry
/// goes.
fn remove(doc: &mut Value) -> Result<Vec<String>, String> {
    let Value::Object(root) = doc else {
        return Err("the file is not a JSON object".into());
    };
    let Some(hooks) = root.get_mut("hooks") else {
        return Ok(Vec::new());
    };
    let Value::Object(hooks) = hooks else {
        return Err("\"hooks\" is not a JSON object".into());
    };
    let mut removed = Vec::new();
    let mut emptied = Vec::new();
    for (event, list) in hooks.iter_mut() {
        let Value::Array(list) = list else { continue };
        let before = list.clone();
        for entry in list.iter_mut() {
            if let Some(Value::Array(inner)) = entry.get_mut("hooks") {
                inner.retain(|h| {
                    !h.get("command")
                        .and_then(Value::as_str)
                        .is_some_and(is_ckpt_hook)
                });
            }
        }
        list.retain(|entry| {
            let grouped_empty = entry
                .get("hooks")
                .and_then(Value::as_array)
                .is_some_and(Vec::is_empty);
            !grouped_empty && !runs_ckpt(entry)
        });
        if *list != before {
            removed.push(event.clone());
        }
        if list.is_empty() {
            emptied.push(event.clone());
        }
    }
    for e in emptied.iter().filter(|e| removed.contains(e)) {
        hooks.shift_remove(e);
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp() -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "ckpt-harness-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn install_keeps_everything_and_is_idempotent_then_remove_restores() {
        let root = tmp();
        for h in Harness::ALL {
            let path = root.join(h.spec().path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            let theirs = match h.spec().layout {
                Layout::Grouped => json!({"model": "x", "hooks": {"PreToolUse": [
                    {"matcher": "Bash", "hooks": [{"type": "command", "command": "lint.sh"}]}]}}),
                Layout::Copilot => json!({"version": 1, "hooks": {"preToolUse": [
                    {"type": "command", "bash": "audit.sh"}]}}),
                Layout::Cursor => {
                    json!({"version": 1, "hooks": {"stop": [{"command": "notify.sh"}]}})
                }
                Layout::Plugin { .. } => continue,
            };
            let original = serde_json::to_string_pretty(&theirs).unwrap();
            std::fs::write(&path, &original).unwrap();
            assert!(!installed(&root, h));
            let p = plan(&root, h, Action::Install).unwrap();
            assert_eq!(p.change, Change::Update);
            assert_eq!(p.events.len(), h.spec().hooks.len(), "{h}");
            p.apply().unwrap();
            assert!(installed(&root, h));
            let after: Value =
                serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            for (k, v) in theirs.as_object().unwrap() {
                if k != "hooks" {
                    assert_eq!(&after[k], v, "{h}: {k} kept");
                }
            }
            let again = plan(&root, h, Action::Install).unwrap();
            assert_eq!(again.change, Change::Unchanged, "{h}: idempotent");
            plan(&root, h, Action::Remove).unwrap().apply().unwrap();
            let back: Value =
                serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            assert_eq!(back, theirs, "{h}: remove gives back the user's file");
            assert!(!installed(&root, h));
        }
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn fresh_install_then_remove_deletes_the_file() {
        let root = tmp();
        for h in Harness::ALL {
            let p = plan(&root, h, Action::Install).unwrap();
            assert_eq!(p.change, Change::Create);
            assert_eq!(p.text, fresh(h));
            p.apply().unwrap();
            assert!(installed(&root, h), "{h}");
            let r = plan(&root, h, Action::Remove).unwrap();
            assert_eq!(r.change, Change::Delete, "{h}");
            r.apply().unwrap();
            assert!(!root.join(h.spec().path).exists());
        }
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_broken_file_is_reported_and_left_alone() {
        let root = tmp();
        let path = root.join(".claude/settings.json");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        for bad in [
            "{not json",
            "[1]",
            r#"{"hooks": 3}"#,
            r#"{"hooks": {"Stop": {}}}"#,
        ] {
            std::fs::write(&path, bad).unwrap();
            let e = plan(&root, Harness::Claude, Action::Install).unwrap_err();
            assert!(e.to_string().contains("nothing was changed"), "{e}");
            assert_eq!(std::fs::read_to_string(&path).unwrap(), bad);
        }
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn hand_written_hooks_count() {
        assert!(is_ckpt_hook("ckpt hook"));
        assert!(is_ckpt_hook("/usr/local/bin/ckpt hook --agent claude"));
        assert!(!is_ckpt_hook("ckpt-lint hook"));
        assert!(!is_ckpt_hook("echo ckpt hook"));
        assert_eq!(
            command(Harness::Copilot, "preToolUse"),
            "ckpt hook --agent copilot --event preToolUse || true"
        );
        assert!(is_ckpt_hook(&command(Harness::Gemini, "BeforeTool")));
    }
}
