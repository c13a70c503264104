//! `ckpt stores`: the stores on this machine and the workspaces they belong
//! to, so a user whose workspace was deleted can find its checkpoints again
//! (then `ckpt restore --store S ID --to DIR`, or `ckpt init --attach
//! --store S DIR`; docs/CLI.md, "A deleted workspace").
//!
//! Where it looks ([`crate::workspace::known`]): every store below
//! `<data home>/ckpt/stores/`, every store in the `known-stores` list, and
//! each directory the user names (a store itself, a directory of stores, or
//! one with a `.ckpt-stores/` beside its workspaces). Each store is opened
//! read-only, waiting at most [`BUSY_WAIT`] for its lock: a listing changes
//! nothing in a store (beyond removing what a crashed process left, as
//! every command does) and never hangs behind a long save.

use std::path::{Path, PathBuf};
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Serialize, Serializer};

use super::json::{self as j, CheckpointForm, Schema};
use super::Context;
use crate::store::catalog::Checkpoint;
use crate::store::Store;
use crate::workspace::{known, marker_names};
use crate::Result;

/// The longest a listing waits for one store's lock.
pub const BUSY_WAIT: Duration = Duration::from_secs(1);

/// Where else [`stores`] looks.
#[derive(Clone, Debug, Default)]
pub struct StoresOptions {
    /// Directories to search besides the default places (relative to the
    /// context's directory).
    pub dirs: Vec<PathBuf>,
}

/// How a store's recorded workspace stands today.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Attachment {
    /// The directory exists and its `.ckpt` names this store.
    Attached,
    /// The directory is gone: recover with `restore --store … --to` or
    /// `init --attach`.
    Missing,
    /// The directory exists but is not (or no longer) this store's
    /// workspace.
    Detached,
    /// The store does not record its workspace (made by an older ckpt).
    Unknown,
}

impl Attachment {
    /// The JSON and text name.
    pub fn as_str(self) -> &'static str {
        match self {
            Attachment::Attached => "attached",
            Attachment::Missing => "missing",
            Attachment::Detached => "detached",
            Attachment::Unknown => "unknown",
        }
    }
}

/// One store found. JSON: `path`, `workspace`, `attachment`, then
/// `checkpoints`, `head`, `latest`, or `error`.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct StoreInfo {
    /// The store directory.
    #[serde(serialize_with = "j::with::path")]
    #[schemars(with = "String")]
    pub path: PathBuf,
    /// The workspace root it records.
    #[serde(serialize_with = "j::with::opt_path")]
    #[schemars(with = "Option<String>")]
    pub workspace: Option<PathBuf>,
    /// Whether that workspace is still there.
    pub attachment: Attachment,
    /// Its checkpoints (oldest first) and head, when the store could be read.
    #[serde(flatten, serialize_with = "contents")]
    #[schemars(with = "ContentsForm<'static>")]
    pub contents: std::result::Result<Contents, String>,
}

/// What a readable store holds.
#[derive(Clone, Debug)]
pub struct Contents {
    /// How many checkpoints.
    pub count: usize,
    /// The head checkpoint's sequence number.
    pub head: Option<u64>,
    /// The newest checkpoint.
    pub latest: Option<Checkpoint>,
}

/// A store's contents, or why it could not be read (flattened into
/// [`StoreInfo`]).
// One lives for one serialisation, on the stack: its size does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Serialize, JsonSchema)]
#[serde(untagged)]
enum ContentsForm<'a> {
    Read {
        checkpoints: usize,
        head: Option<String>,
        latest: Option<CheckpointForm<'a>>,
    },
    Unreadable {
        error: &'a str,
    },
}

fn contents<S: Serializer>(
    c: &std::result::Result<Contents, String>,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    match c {
        Ok(c) => ContentsForm::Read {
            checkpoints: c.count,
            head: c.head.map(|h| format!("v{h}")),
            latest: c.latest.as_ref().map(|cp| CheckpointForm::new(cp, c.head)),
        },
        Err(e) => ContentsForm::Unreadable { error: e },
    }
    .serialize(s)
}

/// What [`stores`] found. JSON: `stores` (each a [`StoreInfo`]),
/// `searched`.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct StoresReport {
    /// `"schema": 1`.
    pub schema: Schema,
    /// Every store, most recently saved first.
    pub stores: Vec<StoreInfo>,
    /// Where it looked.
    #[serde(serialize_with = "j::with::paths")]
    #[schemars(with = "Vec<String>")]
    pub searched: Vec<PathBuf>,
}

/// Lists the stores (see the module doc).
pub fn stores(ctx: &Context, opts: &StoresOptions) -> Result<StoresReport> {
    let mut searched = Vec::new();
    let mut candidates = Vec::new();
    if let Some(home) = ctx.config.data_home.as_deref() {
        let dir = known::default_dir(home);
        candidates.extend(children(&dir));
        searched.push(dir);
        candidates.extend(known::listed(home));
        searched.push(known::list_path(home));
    }
    for d in &opts.dirs {
        let d = ctx.abs(d);
        candidates.push(d.clone());
        candidates.extend(children(&d));
        candidates.extend(children(&d.join(".ckpt-stores")));
        searched.push(d);
    }
    let mut seen = std::collections::BTreeSet::new();
    let mut found: Vec<StoreInfo> = candidates
        .into_iter()
        .filter(|p| Store::exists_at(p))
        .filter_map(|p| p.canonicalize().ok())
        .filter(|p| seen.insert(p.clone()))
        .map(|p| describe(ctx, p))
        .collect();
    let newest = |s: &StoreInfo| {
        s.contents
            .as_ref()
            .ok()
            .and_then(|c| c.latest.as_ref())
            .map_or(i64::MIN, |cp| cp.time_ns)
    };
    found.sort_by(|a, b| newest(b).cmp(&newest(a)).then_with(|| a.path.cmp(&b.path)));
    Ok(StoresReport {
        schema: Schema,
        stores: found,
        searched,
    })
}

fn children(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|it| it.filter_map(|e| e.ok()).map(|e| e.path()).collect())
        .unwrap_or_default()
}

fn describe(ctx: &Context, path: PathBuf) -> StoreInfo {
    let mut config = ctx.config.clone();
    config.lock_timeout = config.lock_timeout.min(BUSY_WAIT);
    let read = || -> Result<(Option<PathBuf>, Contents)> {
        let store = Store::open_read_only(&path, &config)?;
        let reader = store.catalog.reader()?;
        let cps = reader.checkpoints()?;
        Ok((
            reader.workspace()?,
            Contents {
                count: cps.len(),
                head: reader.head()?,
                latest: cps.into_iter().max_by_key(|c| c.seq),
            },
        ))
    };
    match read() {
        Ok((workspace, contents)) => StoreInfo {
            attachment: match &workspace {
                None => Attachment::Unknown,
                Some(w) if marker_names(w, &path) => Attachment::Attached,
                Some(w) if w.exists() => Attachment::Detached,
                Some(_) => Attachment::Missing,
            },
            workspace,
            path,
            contents: Ok(contents),
        },
        Err(e) => StoreInfo {
            path,
            workspace: None,
            attachment: Attachment::Unknown,
            contents: Err(e.to_string()),
        },
    }
}
