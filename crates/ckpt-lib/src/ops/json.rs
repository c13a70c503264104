//! The JSON form of every report: schema 1, one place.
//!
//! Every `--json` output, every MCP tool result and (later) every HTTP
//! answer is a report of [`crate::ops`] serialised with `serde`; this module
//! holds the encodings they share, and `docs/CLI.md` ("JSON output")
//! documents the fields.
//!
//! - Every top-level object carries `"schema": 1` ([`Schema`]).
//! - Paths are bytes: `"path"` is UTF-8 (lossy), plus `"path_hex"` when the
//!   bytes are not valid UTF-8, so no name is lost. Agent-state keys and
//!   values follow the same rule (`key`/`key_hex`, `value`/`value_hex`).
//! - Times are UTC RFC 3339 (`time`) plus nanoseconds (`time_ns`).
//! - Checkpoints are named by id (`"v12"`).

use serde::{Serialize, Serializer};
use serde_json::{json, Map, Value};

use crate::engine::diff::Change;
use crate::store::catalog::{Annotation, Checkpoint, Skipped};
use crate::store::state::{ChangeKind as StateChangeKind, StateChange, Versioned};
use crate::store::tree::{Entry, Node};
use crate::workspace::scan::Unreadable;

/// JSON schema version of every report.
pub const SCHEMA: u32 = 1;

/// The `"schema": 1` field of a report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Schema;

impl Serialize for Schema {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u32(SCHEMA)
    }
}

/// Implements `Serialize` for report types through their `to_json`.
macro_rules! serialize_via_to_json {
    ($($t:ty),* $(,)?) => {$(
        impl serde::Serialize for $t {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                self.to_json().serialize(s)
            }
        }
    )*};
}
pub(crate) use serialize_via_to_json;

/// Adds `key` (and `key_hex` when the bytes are not UTF-8) to an object.
pub fn path_fields(obj: &mut Map<String, Value>, key: &str, path: &[u8]) {
    obj.insert(
        key.into(),
        Value::String(String::from_utf8_lossy(path).into_owned()),
    );
    if std::str::from_utf8(path).is_err() {
        obj.insert(format!("{key}_hex"), Value::String(hex(path)));
    }
}

/// Lowercase hex of bytes (the `*_hex` fields).
pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The bytes of a `*_hex` field (what a client sends back); `None` when
/// it is not an even number of hex digits.
pub fn from_hex(h: &str) -> Option<Vec<u8>> {
    if !h.len().is_multiple_of(2) {
        return None;
    }
    (0..h.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(h.get(i..i + 2)?, 16).ok())
        .collect()
}

/// RFC 3339 time (UTC, seconds).
pub fn time(ns: i64) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_nanos(ns.max(0) as u64);
    humantime::format_rfc3339_seconds(t).to_string()
}

/// Milliseconds, as a number rounded to 3 decimals (whole microseconds:
/// `13.513`, not `13.512913999999999`).
pub fn ms(d: std::time::Duration) -> Value {
    let us = d.as_nanos().saturating_add(500) / 1000;
    json!(us as f64 / 1e3)
}

/// The exit code of a command as a shell reports it (128 + the signal for
/// one killed by a signal): `command_status` of `fork … -- CMD`.
pub fn exit_code(st: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    st.code().unwrap_or_else(|| 128 + st.signal().unwrap_or(0))
}

/// A tree entry: kind, mode, mtime, and size + hash, tree, or target.
pub fn entry(e: &Entry) -> Value {
    let mut o = json!({
        "kind": e.node.kind().as_str(),
        "mode": format!("{:o}", e.mode),
        "mtime_ns": e.mtime_ns,
    });
    let m = o.as_object_mut().expect("object");
    match &e.node {
        Node::File { size, hash } => {
            m.insert("size".into(), json!(size));
            m.insert("hash".into(), json!(hash.to_hex()));
        }
        Node::Dir { tree } => {
            m.insert("tree".into(), json!(tree.to_hex()));
        }
        Node::Symlink { target } => path_fields(m, "target", target),
    }
    o
}

/// One changed path: `path`, `status`, `old`, `new`.
pub fn change(c: &Change) -> Value {
    let mut m = Map::new();
    path_fields(&mut m, "path", &c.path);
    m.insert("status".into(), serde_json::to_value(c.kind).expect("kind"));
    m.insert("old".into(), c.old.as_ref().map_or(Value::Null, entry));
    m.insert("new".into(), c.new.as_ref().map_or(Value::Null, entry));
    Value::Object(m)
}

/// The interesting changes of a list (see [`Change::is_interesting`]).
pub fn changes(cs: &[Change]) -> Value {
    Value::Array(
        cs.iter()
            .filter(|c| c.is_interesting())
            .map(change)
            .collect(),
    )
}

fn skipped(s: &Skipped) -> Value {
    let mut m = Map::new();
    path_fields(&mut m, "path", &s.path);
    m.insert("kind".into(), json!(s.kind));
    Value::Object(m)
}

/// Entries a scan was not allowed to read: `[{path, kind: "file"|"dir",
/// content: "unchanged"|"unknown"}]`. `unchanged`: recorded with the
/// content last read, which the stat index proves unchanged; `unknown`:
/// left out (also under `skipped`, kind `unreadable`, in a checkpoint).
pub fn unreadable(list: &[Unreadable]) -> Value {
    Value::Array(
        list.iter()
            .map(|u| {
                let mut m = Map::new();
                path_fields(&mut m, "path", &u.path);
                m.insert("kind".into(), json!(if u.dir { "dir" } else { "file" }));
                let content = if u.kept { "unchanged" } else { "unknown" };
                m.insert("content".into(), json!(content));
                Value::Object(m)
            })
            .collect(),
    )
}

/// A checkpoint record; `head` is the head's sequence number.
pub fn checkpoint(cp: &Checkpoint, head: Option<u64>) -> Value {
    json!({
        "id": cp.id(),
        "seq": cp.seq,
        "hash": cp.hash.to_hex(),
        "parent": cp.parent.map(|p| format!("v{p}")),
        "time": time(cp.time_ns),
        "time_ns": cp.time_ns,
        "message": cp.message,
        "tags": cp.tags,
        "root": cp.root.to_hex(),
        "stats": cp.stats,
        "skipped": cp.skipped.iter().map(skipped).collect::<Vec<_>>(),
        "duration_ms": cp.duration_us as f64 / 1e3,
        "head": head == Some(cp.seq),
        "state_version": cp.state_version,
    })
}

/// A checkpoint's annotations (tags and a note added after it was saved):
/// `{tags, note, time, time_ns}` (`note` null when none), or null.
pub fn annotation(a: Option<&Annotation>) -> Value {
    match a {
        None => Value::Null,
        Some(a) => json!({
            "tags": a.tags,
            "note": a.note,
            "time": time(a.time_ns),
            "time_ns": a.time_ns,
        }),
    }
}

/// A checkpoint record as [`checkpoint`] plus its `annotations` (`log`,
/// `show`).
pub fn annotated(cp: &Checkpoint, head: Option<u64>, a: Option<&Annotation>) -> Value {
    let mut v = checkpoint(cp, head);
    v["annotations"] = annotation(a);
    v
}

/// `{version, value, value_hex?}`.
pub fn versioned(v: &Versioned) -> Value {
    let mut m = Map::new();
    m.insert("version".into(), json!(v.version));
    path_fields(&mut m, "value", &v.value);
    Value::Object(m)
}

/// One agent-state key that changed: `key`, `status`, `old`, `new`.
pub fn state_change(c: &StateChange) -> Value {
    let mut m = Map::new();
    path_fields(&mut m, "key", &c.key);
    let status = match c.kind {
        StateChangeKind::Added => "added",
        StateChangeKind::Changed => "changed",
        StateChangeKind::Removed => "removed",
    };
    m.insert("status".into(), json!(status));
    m.insert("old".into(), c.old.as_ref().map_or(Value::Null, versioned));
    m.insert("new".into(), c.new.as_ref().map_or(Value::Null, versioned));
    Value::Object(m)
}

/// A list of agent-state changes.
pub fn state_changes(cs: &[StateChange]) -> Value {
    Value::Array(cs.iter().map(state_change).collect())
}

/// A failed operation: `{error, exit_code}` (ckpt's message and the exit
/// code `ckpt` returns for it), as MCP tool errors and the UI's HTTP
/// errors carry it.
pub fn error(e: &crate::Error) -> Value {
    json!({ "error": e.to_string(), "exit_code": e.exit_code() })
}

/// A serialisable value with `"schema": 1` added (for library types that
/// already derive `Serialize`).
pub fn with_schema<T: Serialize>(v: &T) -> Value {
    let mut v = serde_json::to_value(v).expect("report serialises");
    if let Some(m) = v.as_object_mut() {
        m.insert("schema".into(), json!(SCHEMA));
    }
    v
}

/// How a checkpoint's objects came from another store (`fork`, `adopt`):
/// `linked`, `copied`, `present`.
pub fn imported(i: &crate::store::objects::Imported) -> Value {
    json!({ "linked": i.linked, "copied": i.copied, "present": i.present })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ms_has_at_most_three_decimals() {
        let d = std::time::Duration::from_nanos(13_512_913_999);
        assert_eq!(ms(d).to_string(), "13512.914");
        let d = std::time::Duration::from_nanos(13_512_914);
        assert_eq!(ms(d).to_string(), "13.513");
        assert_eq!(ms(std::time::Duration::ZERO).to_string(), "0.0");
    }

    #[test]
    fn hex_round_trips_and_refuses_non_hex() {
        let b = b"\xff\x00a/b".to_vec();
        assert_eq!(from_hex(&hex(&b)), Some(b));
        assert_eq!(from_hex("abc"), None);
        assert_eq!(from_hex("zz"), None);
        assert_eq!(from_hex(""), Some(Vec::new()));
    }
}
