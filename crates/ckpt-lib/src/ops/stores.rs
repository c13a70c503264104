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

use serde_json::{json, Value};

use super::json::{self as j, serialize_via_to_json, SCHEMA};
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
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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

/// One store found.
#[derive(Clone, Debug)]
pub struct StoreInfo {
    /// The store directory.
    pub path: PathBuf,
    /// The workspace root it records.
    pub workspace: Option<PathBuf>,
    /// Whether that workspace is still there.
    pub attachment: Attachment,
    /// Its checkpoints (oldest first) and head, when the store could be read.
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

/// What [`stores`] found.
#[derive(Clone, Debug)]
pub struct StoresReport {
    /// Every store, most recently saved first.
    pub stores: Vec<StoreInfo>,
    /// Where it looked.
    pub searched: Vec<PathBuf>,
}

impl StoresReport {
    /// The JSON form: `stores` (each `path`, `workspace`, `attachment`,
    /// then `checkpoints`, `head`, `latest`, or `error`), `searched`.
    pub fn to_json(&self) -> Value {
        let stores: Vec<Value> = self
            .stores
            .iter()
            .map(|s| {
                let mut v = json!({
                    "path": s.path.display().to_string(),
                    "workspace": s.workspace.as_ref().map(|w| w.display().to_string()),
                    "attachment": s.attachment.as_str(),
                });
                match &s.contents {
                    Ok(c) => {
                        v["checkpoints"] = json!(c.count);
                        v["head"] = json!(c.head.map(|h| format!("v{h}")));
                        v["latest"] = c
                            .latest
                            .as_ref()
                            .map_or(Value::Null, |cp| j::checkpoint(cp, c.head));
                    }
                    Err(e) => v["error"] = json!(e),
                }
                v
            })
            .collect();
        json!({
            "schema": SCHEMA,
            "stores": stores,
            "searched": self.searched.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
        })
    }
}

serialize_via_to_json!(StoresReport);

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
