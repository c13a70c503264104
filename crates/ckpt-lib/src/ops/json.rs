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
//!
//! Reports derive `Serialize`: fields carry serde attributes (`rename`,
//! `skip`, `flatten`) and the encodings of [`with`] (ids, milliseconds,
//! paths, the `*_hex` pairs, the shared parts). A report whose JSON needs
//! two of its fields at once (a checkpoint record marked `head`, a diff's
//! `to` label) serialises through a private derived form built in its
//! `Serialize`. The shared parts are the `…Form` types here. No report
//! builds its JSON by hand, so each report's schema ([`super::schema`])
//! is generated from the same types that write it.
//! `crates/ckpt-cli/tests/json_reports.rs` holds every report to its
//! golden JSON.

use std::borrow::Cow;

use schemars::{JsonSchema, SchemaGenerator};
use serde::{Serialize, Serializer};
use serde_json::{json, Value};

use crate::engine::diff::Change;
use crate::store::catalog::{Annotation, Checkpoint};
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

impl JsonSchema for Schema {
    fn schema_name() -> Cow<'static, str> {
        "Schema".into()
    }
    fn inline_schema() -> bool {
        true
    }
    fn json_schema(_: &mut SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "The JSON schema version of ckpt's reports.",
            "type": "integer",
            "const": SCHEMA,
        })
    }
}

/// Implements `JsonSchema` for a report that serialises through a derived
/// form: the report's schema is the form's.
macro_rules! schema_via {
    ($t:ty => $form:ty) => {
        impl schemars::JsonSchema for $t {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                stringify!($t).into()
            }
            fn json_schema(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
                <$form as schemars::JsonSchema>::json_schema(g)
            }
        }
    };
}
pub(crate) use schema_via;

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

/// Milliseconds, rounded to 3 decimals (whole microseconds: `13.513`, not
/// `13.512913999999999`).
fn ms_f64(d: std::time::Duration) -> f64 {
    let us = d.as_nanos().saturating_add(500) / 1000;
    us as f64 / 1e3
}

/// The exit code of a command as a shell reports it (128 + the signal for
/// one killed by a signal): `command_status` of `fork … -- CMD`.
pub fn exit_code(st: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    st.code().unwrap_or_else(|| 128 + st.signal().unwrap_or(0))
}

/// A failed operation: `{error, exit_code}` (ckpt's message and the exit
/// code `ckpt` returns for it), as MCP tool errors and the UI's HTTP
/// errors carry it.
pub fn error(e: &crate::Error) -> Value {
    json!({ "error": e.to_string(), "exit_code": e.exit_code() })
}

/// How a checkpoint's objects came from another store (`fork`, `adopt`):
/// `linked`, `copied`, `present`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ImportedForm {
    linked: u64,
    copied: u64,
    present: u64,
}

impl From<&crate::store::objects::Imported> for ImportedForm {
    fn from(i: &crate::store::objects::Imported) -> Self {
        ImportedForm {
            linked: i.linked,
            copied: i.copied,
            present: i.present,
        }
    }
}

// Typed forms: the shared parts of the reports as `Serialize` types, and
// the `serialize_with` encodings report fields use.

macro_rules! bytes_field {
    ($(#[$doc:meta])* $t:ident, $key:literal, $hex:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug)]
        pub struct $t<'a>(pub &'a [u8]);

        impl Serialize for $t<'_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                use serde::ser::SerializeMap;
                let utf8 = std::str::from_utf8(self.0).is_ok();
                let mut m = s.serialize_map(Some(if utf8 { 1 } else { 2 }))?;
                m.serialize_entry($key, &String::from_utf8_lossy(self.0))?;
                if !utf8 {
                    m.serialize_entry($hex, &hex(self.0))?;
                }
                m.end()
            }
        }

        impl JsonSchema for $t<'_> {
            fn schema_name() -> Cow<'static, str> {
                stringify!($t).into()
            }
            fn inline_schema() -> bool {
                true
            }
            fn json_schema(_: &mut SchemaGenerator) -> schemars::Schema {
                schemars::json_schema!({
                    "type": "object",
                    "properties": {
                        $key: {
                            "description": "UTF-8 (lossy).",
                            "type": "string",
                        },
                        $hex: {
                            "description": "The bytes in lowercase hex, when they are not UTF-8.",
                            "type": "string",
                        },
                    },
                    "required": [$key],
                })
            }
        }
    };
}

bytes_field!(
    /// `path` (+ `path_hex`), for `#[serde(flatten)]`.
    PathField,
    "path",
    "path_hex"
);
bytes_field!(
    /// `target` (+ `target_hex`) of a symlink, for `#[serde(flatten)]`.
    TargetField,
    "target",
    "target_hex"
);
bytes_field!(
    /// `key` (+ `key_hex`) of agent state, for `#[serde(flatten)]`.
    KeyField,
    "key",
    "key_hex"
);
bytes_field!(
    /// `prefix` (+ `prefix_hex`) of an agent-state listing, for
    /// `#[serde(flatten)]`.
    PrefixField,
    "prefix",
    "prefix_hex"
);
bytes_field!(
    /// `value` (+ `value_hex`) of agent state, for `#[serde(flatten)]`.
    ValueField,
    "value",
    "value_hex"
);

/// A tree entry: kind, mode, mtime, and size + hash, tree, or target.
#[derive(Debug, Serialize, JsonSchema)]
pub struct EntryForm<'a> {
    kind: &'static str,
    mode: String,
    mtime_ns: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    size: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    hash: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tree: Option<String>,
    #[serde(flatten)]
    target: Option<TargetField<'a>>,
}

impl<'a> From<&'a Entry> for EntryForm<'a> {
    fn from(e: &'a Entry) -> Self {
        let mut f = EntryForm {
            kind: e.node.kind().as_str(),
            mode: format!("{:o}", e.mode),
            mtime_ns: e.mtime_ns,
            size: None,
            hash: None,
            tree: None,
            target: None,
        };
        match &e.node {
            Node::File { size, hash } => {
                f.size = Some(*size);
                f.hash = Some(hash.to_hex());
            }
            Node::Dir { tree } => f.tree = Some(tree.to_hex()),
            Node::Symlink { target } => f.target = Some(TargetField(target)),
        }
        f
    }
}

/// One changed path: `path`, `status`, `old`, `new`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ChangeForm<'a> {
    #[serde(flatten)]
    path: PathField<'a>,
    status: crate::engine::diff::ChangeKind,
    old: Option<EntryForm<'a>>,
    new: Option<EntryForm<'a>>,
}

impl<'a> From<&'a Change> for ChangeForm<'a> {
    fn from(c: &'a Change) -> Self {
        ChangeForm {
            path: PathField(&c.path),
            status: c.kind,
            old: c.old.as_ref().map(EntryForm::from),
            new: c.new.as_ref().map(EntryForm::from),
        }
    }
}

/// An entry that was not captured.
#[derive(Debug, Serialize, JsonSchema)]
struct SkippedForm<'a> {
    #[serde(flatten)]
    path: PathField<'a>,
    kind: &'a str,
}

/// A checkpoint record; `head` is true for the head checkpoint.
#[derive(Debug, Serialize, JsonSchema)]
pub struct CheckpointForm<'a> {
    id: String,
    seq: u64,
    hash: String,
    parent: Option<String>,
    time: String,
    time_ns: i64,
    message: &'a str,
    tags: &'a std::collections::BTreeMap<String, String>,
    root: String,
    stats: &'a crate::store::catalog::ChangeStats,
    skipped: Vec<SkippedForm<'a>>,
    duration_ms: f64,
    head: bool,
    state_version: Option<u64>,
}

impl<'a> CheckpointForm<'a> {
    /// The record of `cp`; `head` is the head's sequence number.
    pub fn new(cp: &'a Checkpoint, head: Option<u64>) -> Self {
        CheckpointForm {
            id: cp.id(),
            seq: cp.seq,
            hash: cp.hash.to_hex(),
            parent: cp.parent.map(|p| format!("v{p}")),
            time: time(cp.time_ns),
            time_ns: cp.time_ns,
            message: &cp.message,
            tags: &cp.tags,
            root: cp.root.to_hex(),
            stats: &cp.stats,
            skipped: cp
                .skipped
                .iter()
                .map(|s| SkippedForm {
                    path: PathField(&s.path),
                    kind: &s.kind,
                })
                .collect(),
            duration_ms: cp.duration_us as f64 / 1e3,
            head: head == Some(cp.seq),
            state_version: cp.state_version,
        }
    }
}

/// A checkpoint's annotations (tags and a note added after it was saved):
/// `{tags, note, time, time_ns}` (`note` null when none).
#[derive(Debug, Serialize, JsonSchema)]
pub struct AnnotationForm<'a> {
    tags: &'a std::collections::BTreeMap<String, String>,
    note: &'a Option<String>,
    time: String,
    time_ns: i64,
}

impl<'a> From<&'a Annotation> for AnnotationForm<'a> {
    fn from(a: &'a Annotation) -> Self {
        AnnotationForm {
            tags: &a.tags,
            note: &a.note,
            time: time(a.time_ns),
            time_ns: a.time_ns,
        }
    }
}

/// A checkpoint record with its `annotations` (`log`, `show`).
#[derive(Debug, Serialize, JsonSchema)]
pub struct AnnotatedForm<'a> {
    #[serde(flatten)]
    checkpoint: CheckpointForm<'a>,
    annotations: Option<AnnotationForm<'a>>,
}

impl<'a> AnnotatedForm<'a> {
    /// The record of `cp` with its annotation `a`.
    pub fn new(cp: &'a Checkpoint, head: Option<u64>, a: Option<&'a Annotation>) -> Self {
        AnnotatedForm {
            checkpoint: CheckpointForm::new(cp, head),
            annotations: a.map(AnnotationForm::from),
        }
    }
}

/// An entry a scan was not allowed to read: `{path, kind: "file"|"dir",
/// content: "unchanged"|"unknown"}`. `unchanged`: recorded with the
/// content last read, which the stat index proves unchanged; `unknown`:
/// left out (also under `skipped`, kind `unreadable`, in a checkpoint).
#[derive(Debug, Serialize, JsonSchema)]
pub struct UnreadableForm<'a> {
    #[serde(flatten)]
    path: PathField<'a>,
    kind: &'static str,
    content: &'static str,
}

impl<'a> From<&'a Unreadable> for UnreadableForm<'a> {
    fn from(u: &'a Unreadable) -> Self {
        UnreadableForm {
            path: PathField(&u.path),
            kind: if u.dir { "dir" } else { "file" },
            content: if u.kept { "unchanged" } else { "unknown" },
        }
    }
}

/// A versioned agent-state value: `{version, value, value_hex?}`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct VersionedForm<'a> {
    version: u64,
    #[serde(flatten)]
    value: ValueField<'a>,
}

impl<'a> From<&'a Versioned> for VersionedForm<'a> {
    fn from(v: &'a Versioned) -> Self {
        VersionedForm {
            version: v.version,
            value: ValueField(&v.value),
        }
    }
}

/// One agent-state key that changed: `key`, `status`, `old`, `new`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct StateChangeForm<'a> {
    #[serde(flatten)]
    key: KeyField<'a>,
    status: &'static str,
    old: Option<VersionedForm<'a>>,
    new: Option<VersionedForm<'a>>,
}

impl<'a> From<&'a StateChange> for StateChangeForm<'a> {
    fn from(c: &'a StateChange) -> Self {
        StateChangeForm {
            key: KeyField(&c.key),
            status: match c.kind {
                StateChangeKind::Added => "added",
                StateChangeKind::Changed => "changed",
                StateChangeKind::Removed => "removed",
            },
            old: c.old.as_ref().map(VersionedForm::from),
            new: c.new.as_ref().map(VersionedForm::from),
        }
    }
}

/// `serialize_with` encodings of report fields.
pub mod with {
    use super::*;

    /// A checkpoint as its id (`"v12"`).
    pub fn id<S: Serializer>(cp: &Checkpoint, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&format_args!("v{}", cp.seq))
    }

    /// An optional checkpoint as its id, or null.
    pub fn opt_id<S: Serializer>(cp: &Option<Checkpoint>, s: S) -> Result<S::Ok, S::Error> {
        match cp {
            Some(cp) => id(cp, s),
            None => s.serialize_none(),
        }
    }

    /// A sequence number as a checkpoint id (`"v12"`).
    pub fn seq<S: Serializer>(seq: &u64, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&format_args!("v{seq}"))
    }

    /// An optional sequence number as a checkpoint id, or null.
    pub fn opt_seq<S: Serializer>(seq: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
        match seq {
            Some(q) => self::seq(q, s),
            None => s.serialize_none(),
        }
    }

    /// A checkpoint's annotations ([`AnnotationForm`]), or null.
    pub fn annotation<S: Serializer>(a: &Option<Annotation>, s: S) -> Result<S::Ok, S::Error> {
        a.as_ref().map(AnnotationForm::from).serialize(s)
    }

    /// An optional duration in milliseconds, or null.
    pub fn opt_ms<S: Serializer>(d: &Option<std::time::Duration>, s: S) -> Result<S::Ok, S::Error> {
        d.map(ms_f64).serialize(s)
    }

    /// Agent-state key bytes as `key` (+ `key_hex`), with `flatten`.
    pub fn key<S: Serializer>(k: &[u8], s: S) -> Result<S::Ok, S::Error> {
        KeyField(k).serialize(s)
    }

    /// Agent-state prefix bytes as `prefix` (+ `prefix_hex`), with `flatten`.
    pub fn prefix<S: Serializer>(k: &[u8], s: S) -> Result<S::Ok, S::Error> {
        PrefixField(k).serialize(s)
    }

    /// A duration in milliseconds, rounded to 3 decimals (whole
    /// microseconds: `13.513`, not `13.512913999999999`).
    pub fn ms<S: Serializer>(d: &std::time::Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(ms_f64(*d))
    }

    /// A path as text (lossy), as `Path::display` shows it.
    pub fn path<S: Serializer>(p: &std::path::Path, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&p.display())
    }

    /// An optional path as text (lossy), or null.
    pub fn opt_path<S: Serializer, P: AsRef<std::path::Path>>(
        p: &Option<P>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match p {
            Some(p) => path(p.as_ref(), s),
            None => s.serialize_none(),
        }
    }

    /// Paths as text (lossy).
    pub fn paths<S: Serializer>(ps: &[std::path::PathBuf], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(ps.iter().map(|p| p.display().to_string()))
    }

    /// The interesting changes of a list ([`Change::is_interesting`]).
    pub fn changes<S: Serializer>(cs: &[Change], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(
            cs.iter()
                .filter(|c| c.is_interesting())
                .map(ChangeForm::from),
        )
    }

    /// Agent-state changes ([`StateChangeForm`]).
    pub fn state_changes<S: Serializer>(cs: &[StateChange], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(cs.iter().map(StateChangeForm::from))
    }

    /// Entries a scan was not allowed to read ([`UnreadableForm`]).
    pub fn unreadable<S: Serializer>(list: &[Unreadable], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(list.iter().map(UnreadableForm::from))
    }

    /// Objects imported from another store ([`ImportedForm`]).
    pub fn imported<S: Serializer>(
        i: &crate::store::objects::Imported,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        ImportedForm::from(i).serialize(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ms_has_at_most_three_decimals() {
        let d = std::time::Duration::from_nanos(13_512_913_999);
        let ms = |d| serde_json::to_string(&ms_f64(d)).unwrap();
        assert_eq!(ms(d), "13512.914");
        let d = std::time::Duration::from_nanos(13_512_914);
        assert_eq!(ms(d), "13.513");
        assert_eq!(ms(std::time::Duration::ZERO), "0.0");
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
