//! `ckpt remote add NAME URL`, `remote list`, `remote remove NAME`: the
//! named remotes of a workspace.
//!
//! They are kept with the workspace's store, in `<store>/remotes.json`:
//! `{"remotes":{"origin":{"url":"s3://bucket/prefix","workspace":"app"}}}`
//! (`workspace`, optional, is the name this workspace pushes as and pulls
//! from; default: the workspace directory's name). Written temp + rename
//! under the store lock, so a crash leaves the old file or the new one.
//! A command that takes a remote accepts a name from this file or a URL.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ckpt_lib::ops::json::SCHEMA;
use ckpt_lib::ops::Context;
use ckpt_lib::workspace::Workspace;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::layout::check_name;
use crate::url::RemoteUrl;
use crate::{usage, Error, Result};

/// One configured remote.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteEntry {
    /// Its URL.
    pub url: String,
    /// The workspace name used on it (None: the directory's name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
}

/// `remotes.json`.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Remotes {
    /// Name → remote.
    pub remotes: BTreeMap<String, RemoteEntry>,
}

fn file(store: &Path) -> PathBuf {
    store.join("remotes.json")
}

/// Reads a store's remotes (none when the file is absent).
pub fn read(store: &Path) -> Result<Remotes> {
    let p = file(store);
    match std::fs::read(&p) {
        Ok(b) => {
            serde_json::from_slice(&b).map_err(|e| Error::Corrupt(format!("{}: {e}", p.display())))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Remotes::default()),
        Err(e) => Err(Error::io("read", p, e)),
    }
}

fn write(store: &Path, r: &Remotes) -> Result<()> {
    let p = file(store);
    let tmp = store.join("remotes.json.tmp");
    let bytes = serde_json::to_vec_pretty(r).expect("remotes serialise");
    std::fs::write(&tmp, bytes).map_err(|e| Error::io("write", &tmp, e))?;
    std::fs::rename(&tmp, &p).map_err(|e| Error::io("rename", &p, e))
}

/// A remote resolved from a name or URL, with the workspace name to use.
#[derive(Clone, Debug)]
pub struct Target {
    /// The configured name, if it came from the file.
    pub name: Option<String>,
    /// The URL.
    pub url: RemoteUrl,
    /// The workspace name on the remote.
    pub workspace: String,
}

/// The default workspace name: the directory's name, made usable.
pub fn default_name(ws: &Workspace) -> String {
    let n: String = ws
        .root
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '-'
            }
        })
        .collect();
    let n = n.trim_start_matches('.').to_string();
    if n.is_empty() {
        "workspace".into()
    } else {
        n
    }
}

/// Resolves `remote` (a configured name, a URL, or None: the only
/// configured remote, or `origin`) for workspace `ws`; `workspace`
/// overrides the name used on the remote.
pub fn resolve(ws: &Workspace, remote: Option<&str>, workspace: Option<&str>) -> Result<Target> {
    let remotes = read(&ws.store_path)?;
    let (name, entry) = match remote {
        Some(r) if r.contains("://") => (
            None,
            RemoteEntry {
                url: r.to_string(),
                workspace: None,
            },
        ),
        Some(r) => match remotes.remotes.get(r) {
            Some(e) => (Some(r.to_string()), e.clone()),
            None => {
                return Err(usage(format!(
                    "no remote named {r:?} (see `ckpt remote list`; add one with `ckpt remote add {r} URL`)"
                )))
            }
        },
        None => {
            let pick = remotes
                .remotes
                .get_key_value("origin")
                .or_else(|| (remotes.remotes.len() == 1).then(|| remotes.remotes.iter().next()).flatten());
            match pick {
                Some((n, e)) => (Some(n.clone()), e.clone()),
                None => {
                    return Err(usage(
                        "which remote? name one, or add one with `ckpt remote add origin URL`".into(),
                    ))
                }
            }
        }
    };
    let url = RemoteUrl::parse(&entry.url)?;
    let workspace = workspace
        .map(str::to_string)
        .or(entry.workspace)
        .unwrap_or_else(|| default_name(ws));
    check_name(&workspace)?;
    Ok(Target {
        name,
        url,
        workspace,
    })
}

/// What `remote add/remove/list` did and what is configured now.
#[derive(Debug)]
pub struct RemotesReport {
    /// What changed (`added`, `removed`, or None for list).
    pub action: Option<(&'static str, String)>,
    /// The remotes now.
    pub remotes: Remotes,
}

impl RemotesReport {
    /// JSON: `remotes` (name → {url, workspace}), and `added`/`removed`.
    pub fn to_json(&self) -> Value {
        let mut v = json!({
            "schema": SCHEMA,
            "remotes": self.remotes.remotes,
        });
        if let (Some((k, n)), Some(m)) = (&self.action, v.as_object_mut()) {
            m.insert((*k).to_string(), json!(n));
        }
        v
    }
}

fn locked<T>(ctx: &Context, f: impl FnOnce(&Path) -> Result<T>) -> Result<T> {
    let ws = ctx.workspace()?;
    let _store = ws.open_store_read_only(&ctx.config)?;
    f(&ws.store_path)
}

/// Adds remote `name` → `url` (replacing nothing: an existing name is an
/// error).
pub fn add(ctx: &Context, name: &str, url: &str, workspace: Option<&str>) -> Result<RemotesReport> {
    check_name(name)?;
    RemoteUrl::parse(url)?;
    if let Some(w) = workspace {
        check_name(w)?;
    }
    locked(ctx, |store| {
        let mut r = read(store)?;
        if r.remotes.contains_key(name) {
            return Err(usage(format!(
                "a remote named {name:?} already exists ({}); remove it first (nothing was changed)",
                r.remotes[name].url
            )));
        }
        r.remotes.insert(
            name.to_string(),
            RemoteEntry {
                url: url.to_string(),
                workspace: workspace.map(str::to_string),
            },
        );
        write(store, &r)?;
        Ok(RemotesReport {
            action: Some(("added", name.to_string())),
            remotes: r,
        })
    })
}

/// Records remote `origin` → `entry` in a new store (a clone's: nothing
/// else can hold its lock yet, and it has no remotes).
pub fn set_origin(store: &Path, entry: RemoteEntry) -> Result<()> {
    let mut r = read(store)?;
    r.remotes.insert("origin".to_string(), entry);
    write(store, &r)
}

/// Removes remote `name` (its data on the remote is untouched).
pub fn remove(ctx: &Context, name: &str) -> Result<RemotesReport> {
    locked(ctx, |store| {
        let mut r = read(store)?;
        if r.remotes.remove(name).is_none() {
            return Err(usage(format!(
                "no remote named {name:?} (see `ckpt remote list`)"
            )));
        }
        write(store, &r)?;
        Ok(RemotesReport {
            action: Some(("removed", name.to_string())),
            remotes: r,
        })
    })
}

/// Lists the remotes.
pub fn list(ctx: &Context) -> Result<RemotesReport> {
    locked(ctx, |store| {
        Ok(RemotesReport {
            action: None,
            remotes: read(store)?,
        })
    })
}

crate::serialize_via_to_json!(RemotesReport);
