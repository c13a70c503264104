//! Which checkpoints a workspace name holds on a remote (remote format 3).
//!
//! ```text
//! refs/<name>/<C>                     an entry: checkpoint C was pushed as <name>
//! refs/<name>/18446744073709551615    the marker: this ref is in format 3
//! refs/<name>/<gen>                   a format-2 generation (20 digits): read, never written
//! ```
//!
//! **Why no acknowledged checkpoint is lost, whatever the server
//! honours.** A push adds one entry per checkpoint it adds, after
//! everything the checkpoint reaches is uploaded, and reports success
//! only once every entry's PUT succeeded. The key of an entry is the
//! checkpoint's id and its bytes are a function of the workspace name and
//! that id ([`Entry`]), so two pushers that write the same key write the
//! same bytes, and two pushers of different checkpoints write different
//! keys: no write ever replaces what another push wrote with something
//! else, and nothing is ever deleted (gc leaves refs alone). A workspace's
//! history is the union of the entries a listing finds, so it holds every
//! acknowledged checkpoint on any server whose listings show an object
//! once its PUT has returned (S3 since 2020, GCS, Azure, MinIO, s3rver, a
//! filesystem). No conditional write is needed: `If-None-Match` and
//! `If-Match` may be ignored, as s3rver does, without losing anything.
//!
//! On an encrypted remote (crate::crypt) the directory and entry names are
//! keyed hashes of the workspace name and the id, and entries and markers
//! are sealed: an entry is read (once, then cached) to learn its id, a
//! marker to learn the workspace name. Sealing uses a random nonce, so two
//! pushers of one checkpoint write different bytes under its entry's key,
//! which open to the same entry: nothing is lost either way.
//!
//! **Order.** A listing has no order of pushes; the history is ordered by
//! the checkpoints' creation time, ties by id ([`crate::log::sort`]). So
//! `latest` (what `clone` takes by default) is the same checkpoint for
//! every reader of the same listing.
//!
//! **Format 2.** A ref written by an older ckpt is a sequence of
//! generations, each listing every checkpoint so far; the highest
//! listed one is read and its checkpoints join the history, so a
//! remote in the older format is read, not refused. The first push of this
//! ckpt to a name writes the marker: generation `u64::MAX`, a format-2
//! ref body with `"format":3` and no checkpoints. An older ckpt takes it
//! for the newest generation and refuses the ref ("newer than this ckpt
//! reads; upgrade ckpt") instead of missing the entries it cannot see.
//! A generation in format 1 is refused with the message of
//! [`layout::format_error`].

use std::collections::BTreeSet;
use std::path::Path;

use ckpt_lib::Hash;
use futures::{stream, StreamExt, TryStreamExt};
use serde::{Deserialize, Serialize};

use crate::client::Client;
use crate::layout::{self, parse_hash, RefBody};
use crate::{Error, Result};

pub use crate::layout::REF_FORMAT;

/// The generation number of the marker: the highest, for an older ckpt.
pub const MARKER: u64 = u64::MAX;

/// The body of `refs/<name>/<C>`: a function of the name and the id only,
/// so every push of C as <name> writes the same bytes.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Entry {
    /// [`REF_FORMAT`].
    pub format: u32,
    /// The workspace name.
    pub workspace: String,
    /// The checkpoint's remote id (hex).
    pub id: String,
}

/// Key of the entry of checkpoint `id` under workspace `name`.
pub fn entry_key(client: &Client, name: &str, id: &Hash) -> String {
    format!("{}/{}", client.ref_dir(name), client.entry_name(id))
}

/// Key of the marker of workspace `name`.
pub fn marker_key(client: &Client, name: &str) -> String {
    format!("{}/{MARKER:020}", client.ref_dir(name))
}

/// A workspace's history as a listing found it.
#[derive(Debug, Default)]
pub struct History {
    /// The checkpoints' remote ids, ascending (unordered in time: see
    /// [`crate::log::sort`]).
    pub ids: Vec<Hash>,
    /// Whether the marker is there.
    pub marked: bool,
}

impl History {
    /// Whether checkpoint `id` is in it.
    pub fn contains(&self, id: &Hash) -> bool {
        self.ids.binary_search(id).is_ok()
    }
}

/// Reads the history of workspace `name` (None: nothing was ever pushed as
/// it). On an encrypted remote an entry's name is a keyed hash, so each
/// entry is read once and its id kept in `cache` (`entries/`).
pub async fn read(client: &Client, cache: Option<&Path>, name: &str) -> Result<Option<History>> {
    let dir = client.ref_dir(name);
    for _ in 0..5 {
        let listed = client.list(&dir).await?;
        if listed.is_empty() {
            return Ok(None);
        }
        let mut ids: BTreeSet<Hash> = BTreeSet::new();
        let mut sealed: Vec<String> = Vec::new();
        let mut legacy: Option<u64> = None;
        let mut marked = false;
        for (k, _) in &listed {
            if k.len() == 64 {
                match client.keys() {
                    None => {
                        ids.insert(parse_hash(k, &client.shown("LIST", &dir))?);
                    }
                    Some(_) => sealed.push(k.clone()),
                }
            } else if let Ok(g) = k.parse::<u64>() {
                if g == MARKER {
                    marked = true;
                } else {
                    legacy = legacy.max(Some(g));
                }
            }
            // Anything else (a filesystem's temporary file) is no entry.
        }
        ids.extend(open_entries(client, cache, name, &dir, &sealed).await?);
        if let Some(g) = legacy {
            let key = layout::ref_key(name, g);
            // Deleted by an older ckpt's gc between the listing and the
            // read: list again.
            let Some(b) = client.get(&key).await? else {
                continue;
            };
            let body: RefBody = serde_json::from_slice(&b)
                .map_err(|e| Error::corrupt(format!("{}: {e}", client.shown("GET", &key))))?;
            if body.format != layout::FORMAT {
                return Err(layout::format_error(
                    &format!(
                        "workspace {name:?} at {}",
                        client.shown("", &key).trim_start()
                    ),
                    body.format,
                ));
            }
            for c in &body.checkpoints {
                ids.insert(parse_hash(c, &client.shown("GET", &key))?);
            }
        }
        return Ok(Some(History {
            ids: ids.into_iter().collect(),
            marked,
        }));
    }
    Err(Error::Request(format!(
        "{}: the ref kept changing while it was read; retry",
        client.shown("LIST", &dir)
    )))
}

/// The ids of the sealed entries `names` of `dir` (encrypted remotes),
/// from `cache` where it has them.
async fn open_entries(
    client: &Client,
    cache: Option<&Path>,
    name: &str,
    dir: &str,
    names: &[String],
) -> Result<Vec<Hash>> {
    let cdir = cache.map(|c| c.join("entries"));
    stream::iter(names)
        .map(|n| {
            let cdir = cdir.clone();
            async move {
                if let Some(d) = &cdir {
                    if let Some(id) = std::fs::read_to_string(d.join(n))
                        .ok()
                        .and_then(|s| parse_hash(s.trim(), "cached entry").ok())
                    {
                        return Ok(id);
                    }
                }
                let key = format!("{dir}/{n}");
                let e: Entry = client
                    .get_decoded(&key, |b| {
                        let b = client.unseal(&key, b)?;
                        serde_json::from_slice(&b).map_err(|e| {
                            Error::corrupt(format!("{}: {e}", client.shown("GET", &key)))
                        })
                    })
                    .await?
                    .ok_or_else(|| {
                        Error::corrupt(format!(
                            "{}: the object is missing from the remote",
                            client.shown("GET", &key)
                        ))
                    })?;
                let id = parse_hash(&e.id, &client.shown("GET", &key))?;
                if e.workspace != name || client.entry_name(&id) != *n {
                    return Err(Error::corrupt(format!(
                        "{}: the entry names another checkpoint or workspace",
                        client.shown("GET", &key)
                    )));
                }
                if let Some(d) = &cdir {
                    crate::known::write_cache(d, n, id.to_hex().as_bytes());
                }
                Ok(id)
            }
        })
        .buffer_unordered(client.concurrency())
        .try_collect()
        .await
}

/// Adds checkpoint `id` to workspace `name` (its data and record must be
/// on the remote already).
pub async fn add(client: &Client, name: &str, id: Hash) -> Result<()> {
    let body = Entry {
        format: REF_FORMAT,
        workspace: name.to_string(),
        id: id.to_hex(),
    };
    let key = entry_key(client, name, &id);
    client
        .put_sealed(&key, serde_json::to_vec(&body).expect("entry serialises"))
        .await
}

/// Notes in `cache` that the sealed entry of `id` names `id` (a push that
/// wrote it then need not read it back).
pub fn remember(client: &Client, cache: &Path, id: &Hash) {
    if client.keys().is_some() {
        crate::known::write_cache(
            &cache.join("entries"),
            &client.entry_name(id),
            id.to_hex().as_bytes(),
        );
    }
}

/// Writes the marker of workspace `name` (the same bytes every time on a
/// remote that is not encrypted).
pub async fn mark(client: &Client, name: &str) -> Result<()> {
    let body = RefBody {
        format: REF_FORMAT,
        workspace: name.to_string(),
        generation: MARKER,
        checkpoints: Vec::new(),
    };
    let key = marker_key(client, name);
    client
        .put_sealed(&key, serde_json::to_vec(&body).expect("marker serialises"))
        .await
}

/// The workspace names on a remote, sorted. (On an encrypted remote, from
/// the markers: a directory's name is a keyed hash.)
pub async fn workspaces(client: &Client) -> Result<Vec<String>> {
    let mut dirs: Vec<String> = client
        .list("refs")
        .await?
        .into_iter()
        .filter_map(|(k, _)| k.split_once('/').map(|(n, _)| n.to_string()))
        .collect();
    dirs.sort();
    dirs.dedup();
    if client.keys().is_none() {
        return Ok(dirs);
    }
    let mut names = Vec::new();
    for d in dirs {
        let key = format!("refs/{d}/{MARKER:020}");
        // A directory without a marker has no entries either: a push
        // writes the marker first.
        let body = client
            .get_decoded(&key, |b| {
                serde_json::from_slice::<RefBody>(&client.unseal(&key, b)?)
                    .map_err(|e| Error::corrupt(format!("{}: {e}", client.shown("GET", &key))))
            })
            .await?;
        if let Some(body) = body {
            names.push(body.workspace);
        }
    }
    names.sort();
    Ok(names)
}
