//! `ckpt state get|put|del|ls|history|cas`: the agent-state key-value store.
//!
//! Keys and values are bytes; in the JSON form they are strings plus
//! `key_hex`/`value_hex` when not UTF-8 ([`json::KeyField`], [`json::ValueField`]).
//!
//! These operations open only the state store, `<store>/state.redb`
//! ([`Workspace::state`](crate::workspace::Workspace::state)), and never the
//! store lock, so they do not wait for a running save; reads never create
//! the state store. Writes are single transactions that are retried on
//! conflict.
//!
//! "No such key" ([`GetReport::found`] is `None`) and a compare-and-swap
//! that found another version ([`Swap::Mismatch`]) are report values,
//! not errors: the caller chooses the exit code (the CLI: 8 and
//! [`crate::error::EXIT_CAS_MISMATCH`]).

use std::io::Read;

use serde::{Serialize, Serializer};

use super::json::{with, KeyField, Schema, ValueField, VersionedForm};
use super::Context;
use crate::store::state::{LazyState, ScanEntry, StateError, Versioned};
use crate::{Error, Result};

/// Where a value to write comes from.
pub enum ValueSource<'a> {
    /// These bytes.
    Bytes(Vec<u8>),
    /// All of a reader, read once the workspace and its store are found.
    Reader {
        /// What the reader is, for errors (`"stdin"`).
        name: &'static str,
        /// The reader.
        reader: &'a mut dyn Read,
    },
}

impl std::fmt::Debug for ValueSource<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ValueSource::Bytes(b) => f.debug_tuple("Bytes").field(b).finish(),
            ValueSource::Reader { name, .. } => {
                f.debug_struct("Reader").field("name", name).finish()
            }
        }
    }
}

/// A value to write and how it is checked.
#[derive(Debug)]
pub struct NewValue<'a> {
    /// Where the value comes from.
    pub source: ValueSource<'a>,
    /// The value must parse as JSON (it is stored as given).
    pub json_value: bool,
}

impl NewValue<'_> {
    /// The bytes, checked as JSON when asked.
    fn read(self) -> Result<Vec<u8>> {
        let value = match self.source {
            ValueSource::Bytes(b) => b,
            ValueSource::Reader { name, reader } => {
                let mut buf = Vec::new();
                reader
                    .read_to_end(&mut buf)
                    .map_err(|e| Error::io("read", name, e))?;
                buf
            }
        };
        if self.json_value {
            if let Err(e) = serde_json::from_slice::<serde_json::Value>(&value) {
                return Err(Error::Usage(format!(
                    "--json-value: the value is not valid JSON ({e}); nothing was written"
                )));
            }
        }
        Ok(value)
    }
}

/// The workspace's state store (never the store lock).
fn open(ctx: &Context) -> Result<LazyState> {
    ctx.workspace()?.state(ctx.config.lock_timeout)
}

/// With no state store, only version 0 (the empty state) exists.
fn check_empty_at(at: Option<u64>) -> Result<u64> {
    match at {
        None | Some(0) => Ok(0),
        Some(v) => Err(Error::Usage(format!(
            "state version {v} does not exist: this workspace has no agent state yet"
        ))),
    }
}

// ---- get ----

/// What [`get`] reads.
#[derive(Clone, Debug, Default)]
pub struct GetOptions {
    /// The key.
    pub key: Vec<u8>,
    /// Read at this state version (default: the latest).
    pub at: Option<u64>,
}

/// A key's value at one state version, if it has one.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct GetReport {
    /// `"schema": 1`.
    pub schema: Schema,
    /// The key.
    #[serde(flatten, serialize_with = "with::key")]
    #[schemars(with = "KeyField<'static>")]
    pub key: Vec<u8>,
    /// The state version read.
    pub at: u64,
    /// The value and the version that wrote it; `None`: no such key.
    #[serde(flatten, serialize_with = "found")]
    #[schemars(with = "FoundForm<'static>")]
    pub found: Option<Versioned>,
}

/// Reads a key's value.
pub fn get(ctx: &Context, opts: &GetOptions) -> Result<GetReport> {
    let state = open(ctx)?;
    let (at, found) = match state.get()? {
        None => (check_empty_at(opts.at)?, None),
        Some(s) => {
            let v = opts.at.unwrap_or_else(|| s.latest_version());
            (v, s.snapshot(v)?.get_versioned(&opts.key))
        }
    };
    Ok(GetReport {
        schema: Schema,
        key: opts.key.clone(),
        at,
        found,
    })
}

// ---- put ----

/// What [`put`] writes.
#[derive(Debug)]
pub struct PutOptions<'a> {
    /// The key.
    pub key: Vec<u8>,
    /// The value.
    pub value: NewValue<'a>,
}

/// A key that was set.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct PutReport {
    /// `"schema": 1`.
    pub schema: Schema,
    /// The key.
    #[serde(flatten, serialize_with = "with::key")]
    #[schemars(with = "KeyField<'static>")]
    pub key: Vec<u8>,
    /// The state version of the write.
    pub version: u64,
}

/// Sets a key (creating the state store if needed).
pub fn put(ctx: &Context, opts: PutOptions<'_>) -> Result<PutReport> {
    let state = open(ctx)?;
    let value = opts.value.read()?;
    let s = state.get_or_create()?;
    let version = s.put(&opts.key, &value)?;
    Ok(PutReport {
        schema: Schema,
        key: opts.key,
        version,
    })
}

// ---- del ----

/// What [`del`] deletes.
#[derive(Clone, Debug, Default)]
pub struct DelOptions {
    /// The key.
    pub key: Vec<u8>,
}

/// A delete: whether the key existed.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct DelReport {
    /// `"schema": 1`.
    pub schema: Schema,
    /// The key.
    #[serde(flatten, serialize_with = "with::key")]
    #[schemars(with = "KeyField<'static>")]
    pub key: Vec<u8>,
    /// The key existed and was deleted.
    pub deleted: bool,
    /// The state version of the delete (when nothing was deleted: the
    /// latest version, or 0 without a state store).
    pub version: u64,
}

/// Deletes a key; deleting a missing key commits nothing and succeeds.
pub fn del(ctx: &Context, opts: &DelOptions) -> Result<DelReport> {
    let state = open(ctx)?;
    let key = &opts.key[..];
    // Read first so that deleting a missing key commits nothing.
    let (deleted, version) = match state.get()? {
        None => (false, 0),
        Some(s) => s.transaction_with_retry(Default::default(), |t| {
            let existed = t.get(key).is_some();
            if existed {
                t.delete(key);
            }
            Ok(existed)
        })?,
    };
    Ok(DelReport {
        schema: Schema,
        key: opts.key.clone(),
        deleted,
        version,
    })
}

// ---- ls ----

/// What [`ls`] lists.
#[derive(Clone, Debug, Default)]
pub struct LsOptions {
    /// Only keys starting with this (all when empty).
    pub prefix: Vec<u8>,
    /// List at this state version (default: the latest).
    pub at: Option<u64>,
}

/// Keys and values at one state version, in byte order of the keys.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct LsReport {
    /// `"schema": 1`.
    pub schema: Schema,
    /// The prefix listed.
    #[serde(flatten, serialize_with = "with::prefix")]
    #[schemars(with = "super::json::PrefixField<'static>")]
    pub prefix: Vec<u8>,
    /// The state version listed.
    pub version: u64,
    /// The entries.
    #[serde(serialize_with = "entries")]
    #[schemars(with = "Vec<EntryForm<'static>>")]
    pub entries: Vec<ScanEntry>,
}

/// Lists keys with their values.
pub fn ls(ctx: &Context, opts: &LsOptions) -> Result<LsReport> {
    let state = open(ctx)?;
    let (version, entries) = match state.get()? {
        None => (check_empty_at(opts.at)?, Vec::new()),
        Some(s) => {
            let v = opts.at.unwrap_or_else(|| s.latest_version());
            let snap = s.snapshot(v)?;
            (v, snap.scan(&opts.prefix))
        }
    };
    Ok(LsReport {
        schema: Schema,
        prefix: opts.prefix.clone(),
        version,
        entries,
    })
}

// ---- history ----

/// Whose history [`history`] reads.
#[derive(Clone, Debug, Default)]
pub struct HistoryOptions {
    /// The key.
    pub key: Vec<u8>,
}

/// Every retained version of a key, oldest first.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct HistoryReport {
    /// `"schema": 1`.
    pub schema: Schema,
    /// The key.
    #[serde(flatten, serialize_with = "with::key")]
    #[schemars(with = "KeyField<'static>")]
    pub key: Vec<u8>,
    /// `(version, value)`; `None`: deleted at that version.
    #[serde(serialize_with = "history_form")]
    #[schemars(with = "Vec<HistoryForm<'static>>")]
    pub history: Vec<(u64, Option<Vec<u8>>)>,
}

/// Reads a key's retained versions.
pub fn history(ctx: &Context, opts: &HistoryOptions) -> Result<HistoryReport> {
    let state = open(ctx)?;
    let history = match state.get()? {
        None => Vec::new(),
        Some(s) => s.history(&opts.key),
    };
    Ok(HistoryReport {
        schema: Schema,
        key: opts.key.clone(),
        history,
    })
}

// ---- cas ----

/// What [`cas`] writes, and when.
#[derive(Debug)]
pub struct CasOptions<'a> {
    /// The key.
    pub key: Vec<u8>,
    /// The version the key must have (0: absent).
    pub expected_version: u64,
    /// The value.
    pub value: NewValue<'a>,
}

/// What a compare-and-swap did.
#[derive(Debug)]
pub enum Swap {
    /// The key had the expected version; the value was written.
    Set {
        /// The state version of the write.
        version: u64,
    },
    /// The key had another version; nothing was written.
    Mismatch {
        /// The version expected (0: absent).
        expected: u64,
        /// The version found (0: absent).
        actual: u64,
        /// The state store's error, for callers that report it as one.
        error: StateError,
    },
}

/// A compare-and-swap.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct CasReport {
    /// `"schema": 1`.
    pub schema: Schema,
    /// The key.
    #[serde(flatten, serialize_with = "with::key")]
    #[schemars(with = "KeyField<'static>")]
    pub key: Vec<u8>,
    /// What happened.
    #[serde(flatten, serialize_with = "swap")]
    #[schemars(with = "SwapForm")]
    pub outcome: Swap,
}

impl CasReport {
    /// The report, or the mismatch as an error (exit code
    /// [`crate::error::EXIT_CAS_MISMATCH`]).
    pub fn into_result(self) -> Result<CasReport> {
        match self.outcome {
            Swap::Mismatch { error, .. } => Err(error.into()),
            Swap::Set { .. } => Ok(self),
        }
    }
}

/// Sets a key only if its version is the expected one (creating the state
/// store if needed).
pub fn cas(ctx: &Context, opts: CasOptions<'_>) -> Result<CasReport> {
    let state = open(ctx)?;
    let value = opts.value.read()?;
    let s = state.get_or_create()?;
    let outcome = match s.cas(&opts.key, opts.expected_version, &value) {
        Ok(version) => Swap::Set { version },
        Err(StateError::CasMismatch {
            key,
            expected,
            actual,
        }) => Swap::Mismatch {
            expected,
            actual,
            error: StateError::CasMismatch {
                key,
                expected,
                actual,
            },
        },
        Err(e) => return Err(e.into()),
    };
    Ok(CasReport {
        schema: Schema,
        key: opts.key,
        outcome,
    })
}

/// Whether a key was found, and its value.
#[derive(Serialize, schemars::JsonSchema)]
struct FoundForm<'a> {
    found: bool,
    #[serde(flatten)]
    value: Option<VersionedForm<'a>>,
}

/// `found`, and the `version` and `value` of a value found.
fn found<S: Serializer>(f: &Option<Versioned>, s: S) -> std::result::Result<S::Ok, S::Error> {
    FoundForm {
        found: f.is_some(),
        value: f.as_ref().map(VersionedForm::from),
    }
    .serialize(s)
}

/// One key of a listing.
#[derive(Serialize, schemars::JsonSchema)]
struct EntryForm<'a> {
    #[serde(flatten)]
    key: KeyField<'a>,
    version: u64,
    size: usize,
    #[serde(flatten)]
    value: ValueField<'a>,
}

/// `[{key, version, size, value}]`.
fn entries<S: Serializer>(list: &[ScanEntry], s: S) -> std::result::Result<S::Ok, S::Error> {
    s.collect_seq(list.iter().map(|e| EntryForm {
        key: KeyField(&e.key),
        version: e.version,
        size: e.value.len(),
        value: ValueField(&e.value),
    }))
}

/// One version of a key.
#[derive(Serialize, schemars::JsonSchema)]
struct HistoryForm<'a> {
    version: u64,
    deleted: bool,
    #[serde(flatten)]
    value: Option<ValueField<'a>>,
}

/// `[{version, deleted, value?}]`.
fn history_form<S: Serializer>(
    list: &[(u64, Option<Vec<u8>>)],
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    s.collect_seq(list.iter().map(|(v, val)| HistoryForm {
        version: *v,
        deleted: val.is_none(),
        value: val.as_deref().map(ValueField),
    }))
}

/// What a compare-and-swap did.
#[derive(Serialize, schemars::JsonSchema)]
#[serde(untagged)]
enum SwapForm {
    Set {
        ok: bool,
        version: u64,
    },
    Mismatch {
        ok: bool,
        expected: u64,
        actual: u64,
    },
}

/// `ok`, and `version`, or `expected` and `actual`.
fn swap<S: Serializer>(w: &Swap, s: S) -> std::result::Result<S::Ok, S::Error> {
    match w {
        Swap::Set { version } => SwapForm::Set {
            ok: true,
            version: *version,
        },
        Swap::Mismatch {
            expected, actual, ..
        } => SwapForm::Mismatch {
            ok: false,
            expected: *expected,
            actual: *actual,
        },
    }
    .serialize(s)
}
