//! `ckpt log`: the checkpoints, newest first, and which one is the head.
//! Reads only (the store is opened read-only).
//!
//! A page of the history ([`LogOptions::before`] + [`LogOptions::limit`])
//! reads the catalog's records newest first and stops once the page is
//! full, so the first page of a 10,000-checkpoint history costs a page, not
//! the history. [`LogOptions::search`] and [`LogOptions::path`] filter the
//! records as they are read (`ckpt log --search`, `ckpt log --path`, and the
//! timeline of `ckpt ui`). Each listed checkpoint comes with its
//! annotations ([`super::annotate`]), which the search also matches.

use std::collections::BTreeMap;
use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Serialize, Serializer};

use super::json::{schema_via, with, AnnotatedForm, Schema};
use super::show::changes_from_parent;
use super::Context;
use crate::engine::diff::PathFilter;
use crate::store::catalog::{Annotation, Checkpoint};
use crate::{Error, Result};

/// What [`log`] lists.
#[derive(Clone, Debug, Default)]
pub struct LogOptions {
    /// At most this many checkpoints (the newest that match); all when
    /// `None`.
    pub limit: Option<usize>,
    /// Only checkpoints older than `v{before}` (the cursor of the next
    /// page: the last `seq` of the previous one).
    pub before: Option<u64>,
    /// Only checkpoints whose id, message, a tag (`key=value`, save-time or
    /// annotation) or note contains this text, ignoring case.
    pub search: Option<String>,
    /// Only checkpoints that changed this path (relative to the context's
    /// directory) or something below it, compared with their parent: the
    /// history of one file or directory.
    pub path: Option<PathBuf>,
    /// Only checkpoints whose `session` tag (recorded by `ckpt hook`) is
    /// this.
    pub session: Option<String>,
}

/// The checkpoints. JSON: `head` (an id), `checkpoints` (records with
/// their `annotations`), `total` and `more`.
#[derive(Debug)]
pub struct LogReport {
    /// The head's sequence number (None before the first save).
    pub head: Option<u64>,
    /// The checkpoints, newest first.
    pub checkpoints: Vec<Checkpoint>,
    /// The annotations of those that have one, by `seq`.
    pub annotations: BTreeMap<u64, Annotation>,
    /// How many checkpoints the workspace has (more than `checkpoints`
    /// holds when a limit, a cursor or a filter cut the list).
    pub total: usize,
    /// Older checkpoints may match too: the limit stopped the listing
    /// (ask again with `before` = the last `seq`).
    pub more: bool,
}

/// The JSON form of a [`LogReport`]: each checkpoint's record needs the
/// head and its annotation, which are fields of the report beside it.
#[derive(Serialize, JsonSchema)]
struct LogForm<'a> {
    schema: Schema,
    #[serde(serialize_with = "with::opt_seq")]
    #[schemars(with = "Option<String>")]
    head: Option<u64>,
    checkpoints: Vec<AnnotatedForm<'a>>,
    total: usize,
    more: bool,
}

schema_via!(LogReport => LogForm<'static>);

impl Serialize for LogReport {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        LogForm {
            schema: Schema,
            head: self.head,
            checkpoints: self
                .checkpoints
                .iter()
                .map(|c| AnnotatedForm::new(c, self.head, self.annotations.get(&c.seq)))
                .collect(),
            total: self.total,
            more: self.more,
        }
        .serialize(s)
    }
}

/// Lists the workspace's checkpoints, newest first.
pub fn log(ctx: &Context, opts: &LogOptions) -> Result<LogReport> {
    let ws = ctx.workspace()?;
    let path = match &opts.path {
        Some(p) => {
            let rel = ctx.rel_paths(&ws, std::slice::from_ref(p))?.remove(0);
            if rel.is_empty() {
                return Err(Error::Usage(format!(
                    "--path {} names the whole workspace: leave it out to list every checkpoint",
                    p.display()
                )));
            }
            Some(PathFilter::new(vec![rel]))
        }
        None => None,
    };
    let needle = opts.search.as_ref().map(|s| s.to_lowercase());
    let store = ws.open_store_read_only(&ctx.config)?;
    let r = store.catalog.reader()?;
    let notes = r.annotations()?;
    let head = r.head()?;
    let total = r.count()? as usize;
    let limit = opts.limit.unwrap_or(usize::MAX);
    let mut checkpoints = Vec::new();
    let mut annotations = BTreeMap::new();
    let mut more = false;
    r.for_each_newest(opts.before, |cp| {
        let a = notes.get(cp.seq)?;
        let keep = opts
            .session
            .as_ref()
            .is_none_or(|s| cp.tags.get("session") == Some(s))
            && needle
                .as_deref()
                .is_none_or(|n| matches(&cp, a.as_ref(), n))
            && match &path {
                Some(f) => !changes_from_parent(&r, &cp, f)?.is_empty(),
                None => true,
            };
        if keep {
            if checkpoints.len() == limit {
                more = true;
                return Ok(false);
            }
            if let Some(a) = a {
                annotations.insert(cp.seq, a);
            }
            checkpoints.push(cp);
        }
        Ok(true)
    })?;
    Ok(LogReport {
        head,
        checkpoints,
        annotations,
        total,
        more,
    })
}

/// Whether `needle` (lower case) occurs in the checkpoint's id, message, a
/// `key=value` tag (save-time or annotation) or its note.
fn matches(cp: &Checkpoint, a: Option<&Annotation>, needle: &str) -> bool {
    let tags = cp.tags.iter().chain(a.into_iter().flat_map(|a| &a.tags));
    cp.id().contains(needle)
        || cp.message.to_lowercase().contains(needle)
        || a.and_then(|a| a.note.as_ref())
            .is_some_and(|n| n.to_lowercase().contains(needle))
        || tags
            .into_iter()
            .any(|(k, v)| format!("{k}={v}").to_lowercase().contains(needle))
}
