//! `ckpt log --remote REMOTE`: the checkpoints a workspace's ref holds on
//! the remote ([`crate::refs`]), newest first in the order of [`sort`]
//! (records are immutable, so they are cached in the store like pack
//! indexes and fetched once).

use std::time::Instant;

use ckpt_lib::ops::exchange::Local;
use ckpt_lib::ops::json::{self, Schema};
use ckpt_lib::ops::parts::ChangeStats;
use ckpt_lib::ops::Context;
use ckpt_lib::Hash;
use futures::{stream, StreamExt, TryStreamExt};
use serde::{Serialize, Serializer};

use crate::client::Client;
use crate::layout::Record;
use crate::refs;
use crate::report::Transfer;
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

/// The remote checkpoints; serialises as the `--json` form (each record
/// as [`RecordJson`], then the transfer fields).
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct LogReport {
    /// `schema`.
    pub schema: Schema,
    /// URL.
    #[serde(rename = "remote")]
    pub url: String,
    /// Workspace name.
    pub workspace: String,
    /// Records, newest first.
    #[serde(serialize_with = "records")]
    #[schemars(with = "Vec<RecordJson<'static>>")]
    pub checkpoints: Vec<Record>,
    /// How many the ref lists.
    pub total: usize,
    /// Requests and bytes.
    #[serde(flatten)]
    pub transfer: Transfer,
}

/// One remote record as a report shows it (log, clone): not its stored
/// form ([`Record`]'s own `Serialize`).
#[derive(Serialize, schemars::JsonSchema)]
pub struct RecordJson<'a> {
    remote_id: &'a str,
    seq: u64,
    parent: &'a Option<String>,
    /// RFC 3339.
    time: String,
    time_ns: i64,
    message: &'a str,
    tags: &'a std::collections::BTreeMap<String, String>,
    root: &'a str,
    stats: &'a ChangeStats,
    workspace: &'a str,
    has_state: bool,
}

impl<'a> From<&'a Record> for RecordJson<'a> {
    fn from(r: &'a Record) -> Self {
        RecordJson {
            remote_id: &r.id,
            seq: r.seq,
            parent: &r.parent,
            time: json::time(r.identity.time_ns),
            time_ns: r.identity.time_ns,
            message: &r.identity.message,
            tags: &r.identity.tags,
            root: &r.identity.root,
            stats: &r.stats,
            workspace: &r.workspace,
            has_state: r.identity.state.is_some(),
        }
    }
}

/// A record as [`RecordJson`].
pub(crate) fn record<S: Serializer>(r: &Record, s: S) -> std::result::Result<S::Ok, S::Error> {
    RecordJson::from(r).serialize(s)
}

fn records<S: Serializer>(v: &[Record], s: S) -> std::result::Result<S::Ok, S::Error> {
    s.collect_seq(v.iter().map(RecordJson::from))
}

/// Reads record `id` at `key`: the record and its (opened) bytes.
async fn get_record(client: &Client, key: &str, id: &Hash) -> Result<(Record, bytes::Bytes)> {
    client
        .get_decoded(key, |b| {
            let b = client.unseal(key, b)?;
            Ok((Record::decode(&b, id)?, b))
        })
        .await?
        .ok_or_else(|| {
            crate::Error::corrupt(format!(
                "{}: the object is missing from the remote",
                client.shown("GET", key)
            ))
        })
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
                let key = client.record_key(&id);
                let (r, b) = get_record(client, &key, &id).await?;
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

/// Orders records oldest first: by creation time, then by id. A listing
/// has no push order ([`crate::refs`]); this order depends only on the
/// records, so every reader of one history sees the same order and the
/// same `latest` (the last).
pub fn sort(recs: &mut [Record]) {
    recs.sort_by(|a, b| (a.identity.time_ns, &a.id).cmp(&(b.identity.time_ns, &b.id)));
}

/// The records of workspace `name`, oldest first ([`sort`]); None when
/// nothing was pushed as it. `cache`: where records are cached (None: not
/// cached).
pub async fn history(
    client: &Client,
    cache: Option<&std::path::Path>,
    name: &str,
) -> Result<Option<Vec<Record>>> {
    let Some(h) = refs::read(client, cache, name).await? else {
        return Ok(None);
    };
    let mut recs = match cache {
        Some(c) => fetch_records(client, c, &h.ids).await?,
        None => fetch_records_uncached(client, &h.ids).await?,
    };
    sort(&mut recs);
    Ok(Some(recs))
}

/// Fetches records without a cache, in order.
pub async fn fetch_records_uncached(client: &Client, ids: &[Hash]) -> Result<Vec<Record>> {
    stream::iter(ids.iter().copied())
        .map(|id| async move {
            let key = client.record_key(&id);
            Ok::<_, crate::Error>(get_record(client, &key, &id).await?.0)
        })
        .buffered(client.concurrency())
        .try_collect()
        .await
}

/// Lists a workspace's checkpoints on a remote.
pub fn log(ctx: &Context, opts: &LogOptions<'_>) -> Result<LogReport> {
    let t0 = Instant::now();
    let local = Local::open(ctx)?;
    let target = remotes::resolve(&local, opts.remote, opts.workspace)?;
    let cache = crate::known::cache_dir(local.store_dir(), &target.url.url);
    let rt = crate::runtime()?;
    let client = rt.block_on(target.connect(opts.settings, Some(&cache)))?;
    let mut checkpoints = rt
        .block_on(history(&client, Some(&cache), &target.workspace))?
        .unwrap_or_default();
    let total = checkpoints.len();
    checkpoints.reverse();
    checkpoints.truncate(opts.limit.unwrap_or(usize::MAX));
    Ok(LogReport {
        schema: Schema,
        url: target.url.url.clone(),
        workspace: target.workspace,
        checkpoints,
        total,
        transfer: Transfer::default().counted(&client.counters, t0.elapsed()),
    })
}
