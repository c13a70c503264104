//! `ckpt log --remote REMOTE`: the checkpoints a workspace's ref lists on
//! the remote, newest first (records are immutable, so they are cached in
//! the store like pack indexes and fetched once).

use std::time::Instant;

use ckpt_lib::ops::json::{self, SCHEMA};
use ckpt_lib::ops::Context;
use ckpt_lib::Hash;
use futures::{stream, StreamExt, TryStreamExt};
use serde_json::{json, Value};

use crate::client::Client;
use crate::layout::{self, parse_hash, Record};
use crate::push::read_ref;
use crate::report::{with_transfer, Transfer};
use crate::{remotes, Result, Settings};

/// What [`log`] lists.
#[derive(Clone, Copy, Debug)]
pub struct LogOptions<'a> {
    /// Remote name or URL.
    pub remote: Option<&'a str>,
    /// Workspace name on the remote.
    pub workspace: Option<&'a str>,
    /// At most this many (the newest).
    pub limit: Option<usize>,
    /// How to reach the remote.
    pub settings: &'a Settings,
}

/// The remote checkpoints.
#[derive(Debug)]
pub struct LogReport {
    /// URL.
    pub url: String,
    /// Workspace name.
    pub workspace: String,
    /// Ref generation read.
    pub generation: Option<u64>,
    /// Records, newest first.
    pub checkpoints: Vec<Record>,
    /// How many the ref lists.
    pub total: usize,
    /// Requests and bytes.
    pub transfer: Transfer,
}

/// One remote record as JSON (shared by log, pull and clone).
pub fn record_json(r: &Record) -> Value {
    json!({
        "remote_id": r.id,
        "seq": r.seq,
        "parent": r.parent,
        "time": json::time(r.identity.time_ns),
        "time_ns": r.identity.time_ns,
        "message": r.identity.message,
        "tags": r.identity.tags,
        "root": r.identity.root,
        "stats": r.stats,
        "workspace": r.workspace,
        "has_state": r.identity.state.is_some(),
    })
}

impl LogReport {
    /// JSON: `remote`, `workspace`, `generation`, `checkpoints` (newest
    /// first: `remote_id`, `seq`, `parent`, `time`, `time_ns`, `message`,
    /// `tags`, `root`, `stats`, `workspace`, `has_state`), `total`, and
    /// the transfer fields.
    pub fn to_json(&self) -> Value {
        with_transfer(
            json!({
                "schema": SCHEMA,
                "remote": self.url,
                "workspace": self.workspace,
                "generation": self.generation,
                "checkpoints": self.checkpoints.iter().map(record_json).collect::<Vec<_>>(),
                "total": self.total,
            }),
            &self.transfer,
        )
    }
}

/// Fetches records (from the cache in `cache` when there), in order.
pub async fn fetch_records(
    client: &Client,
    cache: &std::path::Path,
    ids: &[Hash],
) -> Result<Vec<Record>> {
    let dir = cache.join("checkpoints");
    stream::iter(ids.iter().copied())
        .map(|id| {
            let dir = dir.clone();
            async move {
                let cached = std::fs::read(dir.join(id.to_hex())).ok();
                if let Some(r) = cached.and_then(|b| Record::decode(&b, &id).ok()) {
                    return Ok(r);
                }
                let key = layout::record_key(&id);
                let b = client.get_existing(&key).await?;
                let r = Record::decode(&b, &id)?;
                let _ = std::fs::create_dir_all(&dir);
                let tmp = dir.join(format!(".{}.tmp{}", id.to_hex(), std::process::id()));
                if std::fs::write(&tmp, &b).is_ok() {
                    let _ = std::fs::rename(&tmp, dir.join(id.to_hex()));
                }
                Ok(r)
            }
        })
        .buffered(client.concurrency())
        .try_collect()
        .await
}

/// The ids a ref lists, oldest first.
pub fn ref_ids(body: &layout::RefBody) -> Result<Vec<Hash>> {
    body.checkpoints
        .iter()
        .map(|s| parse_hash(s, "ref entry"))
        .collect()
}

/// Lists a workspace's checkpoints on a remote.
pub fn log(ctx: &Context, opts: &LogOptions<'_>) -> Result<LogReport> {
    let t0 = Instant::now();
    let ws = ctx.workspace()?;
    let store = ws.open_store_read_only(&ctx.config)?;
    let target = remotes::resolve(&ws, opts.remote, opts.workspace)?;
    let cache = crate::known::cache_dir(&store.root, &target.url.url);
    let client = Client::open(&target.url, opts.settings)?;
    let rt = crate::runtime()?;
    let (generation, mut checkpoints, total) = rt.block_on(async {
        let Some((g, body)) = read_ref(&client, &target.workspace).await? else {
            return Ok::<_, crate::Error>((None, Vec::new(), 0));
        };
        let mut ids = ref_ids(&body)?;
        let total = ids.len();
        ids.reverse();
        ids.truncate(opts.limit.unwrap_or(usize::MAX));
        Ok((Some(g), fetch_records(&client, &cache, &ids).await?, total))
    })?;
    checkpoints.truncate(opts.limit.unwrap_or(usize::MAX));
    Ok(LogReport {
        url: target.url.url.clone(),
        workspace: target.workspace,
        generation,
        checkpoints,
        total,
        transfer: Transfer::default().counted(&client.counters, t0.elapsed()),
    })
}

crate::serialize_via_to_json!(LogReport);
