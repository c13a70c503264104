//! `ckpt gc --remote REMOTE`: delete packs no ref reaches, safely while
//! others push. In the spirit of restic's prune, but without stopping
//! pushers: a lock between gcs, and a grace period between finding a pack
//! unreachable and deleting it.
//!
//! 1. **Lock.** A gc writes `gc/locks/<token>`, then lists `gc/locks/`:
//!    if another gc's lock is there, it removes its own and fails clearly
//!    (a lock older than a day is taken over as stale). No conditional
//!    write is needed ([`lock`]).
//! 2. **Mark.** The packs are listed (at time L), then every workspace's
//!    history ([`crate::refs`]) and every checkpoint record in it are read
//!    (a ref in another remote format stops the gc, deleting nothing), then the pack
//!    indexes (after the refs, so a push that wrote its ref meanwhile is
//!    indexed too), then every mtimes node and tree below the records;
//!    every blob they reach is live, and so is every pack holding one
//!    (packs are never rewritten).
//! 3. **Sweep.** A pack condemned by an earlier gc at least `grace` before
//!    L, and still unreachable, is to be deleted.
//! 4. **Condemn.** Every other unreachable pack older than `grace` is
//!    condemned, and so is every unreachable pack holding a tree or mtimes
//!    node that names a blob only the packs to be deleted hold (a
//!    *dependent*: a killed push's tree pack, younger than its content
//!    packs).
//! 5. **Write, then delete.** `gc/condemned` gets the condemned packs with
//!    the time each was first condemned, and the packs to be deleted (they
//!    stay on it until a gc no longer finds them); then those are deleted,
//!    each index before its pack. Refs are never deleted ([`crate::refs`]).
//!
//! **Why no checkpoint a ref names loses data.** Assumed: a push writes its
//! ref, or stops, within the grace of loading the indexes (1 h by default;
//! a push takes seconds), and the clocks of machines running gc agree to
//! well within the grace. Then:
//!
//! - (a) A pack is on `gc/condemned` from its condemnation until the first
//!   gc that no longer finds it, after its deletion; it is deleted only if
//!   it was condemned at least a grace before the deleting gc listed the
//!   packs.
//! - (b) A push P reads the list and then loads the indexes at time s,
//!   forgetting the packs on the list; it reads the list again at C, while
//!   it uploads, and writes its ref at W (s < C < W < s + grace). If that
//!   list is not empty, P first checks that every blob its checkpoints
//!   reach is in a pack it loaded or uploaded and that is not on the list,
//!   and uploads the others anew (then reads the list again) (crate::push).
//!   Nothing below needs C to be late: reading the list at s alone would
//!   do; the second read only narrows what a push stalled past the grace
//!   could miss.
//! - (c) A gc that lists the packs after W sees the ref and deletes nothing
//!   it reaches. So only a gc that listed them at L < W matters.
//!
//! 1. A pack P loaded at s and not on the list at C is not deleted by such
//!    a gc: it would have been condemned by L − grace < s, so it was on the
//!    list at s (its index was still there) and P forgot it. So after the
//!    check, everything P's checkpoints reach survives.
//! 2. If the list at C is empty, P writes its ref unchecked. A deletion
//!    after C by such a gc is of a pack condemned before L − grace < s, so
//!    on the list at C: impossible. A blob missing at C was not found by P
//!    itself (by 1), so it lies below a tree or node t0 that P found, along
//!    a chain t0 → t1 → … (each naming the next). Take the first ti missing
//!    at C (i ≥ 1: t0's pack is not gone, by 1). When ti's last copy was
//!    deleted, that gc condemned every unreachable pack it listed that
//!    holds t(i−1) (step 4); a copy of t(i−1) uploaded after that listing
//!    comes from a push that had forgotten ti's condemned packs, so it
//!    found ti elsewhere or sent it anew first — then ti is not missing. So
//!    the copy of t(i−1) present at C is condemned and not yet deleted: on
//!    the list at C, which is not empty.
//!
//! Packs partly live are kept whole (no repacking yet).

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use ckpt_fs::fs::now_ns;
use ckpt_lib::ops::exchange::tree::Node;
use ckpt_lib::ops::exchange::Local;
use ckpt_lib::ops::json::Schema;
use ckpt_lib::ops::Context;
use ckpt_lib::Hash;
use serde::Serialize;
use serde_json::{json, Value};

use crate::client::Client;
use crate::known::{self, Known};
use crate::layout::{self, parse_hash};
use crate::log::fetch_records;
use crate::pack::Kind;
use crate::pull::fetch_blobs;
use crate::refs;
use crate::remotes;
use crate::report::Transfer;
use crate::trees::{self, MNode};
use crate::{Error, Result, Settings};

pub use crate::layout::Condemned;

/// A gc lock older than this is stale.
const STALE_LOCK: Duration = Duration::from_secs(24 * 3600);

/// What [`gc`] does.
#[derive(Clone, Copy, Debug)]
pub struct GcOptions<'a> {
    /// Remote name or URL.
    pub remote: Option<&'a str>,
    /// Time between condemning a pack and deleting it.
    pub grace: Duration,
    /// Report only.
    pub dry_run: bool,
    /// How to reach the remote.
    pub settings: &'a Settings,
}

/// What [`gc`] did; serialises as its `--json` form (every field, then
/// the transfer fields).
#[derive(Debug, Default, Serialize, schemars::JsonSchema)]
pub struct GcReport {
    /// `schema`.
    pub schema: Schema,
    /// URL.
    #[serde(rename = "remote")]
    pub url: String,
    /// Workspaces (refs) read.
    pub workspaces: u64,
    /// Checkpoints reachable.
    pub checkpoints: u64,
    /// Packs on the remote.
    #[serde(rename = "stored_packs")]
    pub packs: u64,
    /// Packs holding something reachable.
    pub live_packs: u64,
    /// Blobs reachable.
    pub live_objects: u64,
    /// Blobs stored in more than one pack (concurrent pushers).
    pub duplicate_objects: u64,
    /// Packs deleted (or that would be).
    pub deleted_packs: u64,
    /// Their bytes.
    pub deleted_bytes: u64,
    /// Packs condemned now (deleted by a later gc after the grace).
    pub condemned_packs: u64,
    /// Total bytes in packs.
    pub stored_bytes: u64,
    /// Dry run.
    pub dry_run: bool,
    /// Wire summary.
    #[serde(flatten)]
    pub transfer: Transfer,
}

/// Takes the gc lock without a conditional write: writes
/// `gc/locks/<token>`, then lists `gc/locks/`. If another gc's lock (not
/// stale) is there, this one is removed again and the gc stops. Of two gcs
/// that start together, the one that lists last sees the other's lock
/// (each writes before it lists), so at most one goes on (both may stop).
/// An older ckpt's `gc/lock` is honoured too. Returns the lock's key.
async fn lock(client: &Client) -> Result<String> {
    let now = now_ns();
    let held = |since: i64| {
        Error::Request(format!(
            "another `ckpt gc --remote` holds a lock in {} (since {}); nothing was deleted: retry later \
             (a lock older than a day is taken over)",
            client.shown("", "gc/").trim_start(),
            ckpt_lib::ops::json::time(since)
        ))
    };
    if let Some(b) = client.get(layout::GC_LOCK).await? {
        let v: Value = serde_json::from_slice(&b).unwrap_or(Value::Null);
        let since = v["time_ns"].as_i64().unwrap_or(0);
        if now - since <= STALE_LOCK.as_nanos() as i64 {
            return Err(held(since));
        }
    }
    let token = Hash::of(format!("{now} {} {:p}", std::process::id(), &now).as_bytes());
    let key = format!("{}/{}", layout::GC_LOCKS, token.to_hex());
    let body = Bytes::from(json!({"time_ns": now, "pid": std::process::id()}).to_string());
    client.put(&key, body).await?;
    let mut other: Option<i64> = None;
    for (k, m) in client.list(layout::GC_LOCKS).await? {
        let k = format!("{}/{k}", layout::GC_LOCKS);
        if k == key {
            continue;
        }
        let since: i64 = m.last_modified.timestamp_nanos_opt().unwrap_or(0);
        if now - since > STALE_LOCK.as_nanos() as i64 {
            client.delete(&k).await?;
        } else {
            other = Some(other.map_or(since, |o| o.min(since)));
        }
    }
    if let Some(since) = other {
        client.delete(&key).await?;
        return Err(held(since));
    }
    Ok(key)
}

/// Collects garbage on a remote.
pub fn gc(ctx: &Context, opts: &GcOptions<'_>) -> Result<GcReport> {
    let t0 = Instant::now();
    let local = Local::open(ctx)?;
    let target = remotes::resolve(&local, opts.remote, None)?;
    let cache = known::cache_dir(local.store_dir(), &target.url.url);
    let rt = crate::runtime()?;
    let client = rt.block_on(target.connect(opts.settings, Some(&cache)))?;
    let mut rep = GcReport {
        url: target.url.url.clone(),
        dry_run: opts.dry_run,
        ..GcReport::default()
    };
    rt.block_on(async {
        let key = if opts.dry_run {
            None
        } else {
            Some(lock(&client).await?)
        };
        let r = sweep(&client, &cache, opts, &mut rep).await;
        if let Some(k) = key {
            client.delete(&k).await?;
        }
        r
    })?;
    rep.transfer = Transfer::default().counted(&client.counters, t0.elapsed());
    Ok(rep)
}

async fn sweep(
    client: &Client,
    cache: &std::path::Path,
    opts: &GcOptions<'_>,
    rep: &mut GcReport,
) -> Result<()> {
    let prev: Condemned = match client.get_sealed(layout::CONDEMNED).await? {
        Some(b) => serde_json::from_slice(&b).map_err(|e| {
            Error::corrupt(format!("{}: {e}", client.shown("GET", layout::CONDEMNED)))
        })?,
        None => Condemned::default(),
    };
    let prev_since: HashMap<Hash, i64> = prev
        .packs
        .iter()
        .zip(&prev.since_ns)
        .filter_map(|(p, t)| Some((parse_hash(p, layout::CONDEMNED).ok()?, *t)))
        .collect();
    // Packs first, then refs: a pack uploaded after this listing is not a
    // candidate at all. Its time is taken before it starts.
    let listed_ns = now_ns();
    let listed = client.list("packs").await?;
    let names = refs::workspaces(client).await?;
    rep.workspaces = names.len() as u64;
    // Mark: the roots of every checkpoint the refs hold.
    let mut live: HashSet<Hash> = HashSet::new();
    let mut frontier: Vec<Hash> = Vec::new();
    for name in &names {
        let Some(h) = refs::read(client, Some(cache), name).await? else {
            continue;
        };
        rep.checkpoints += h.ids.len() as u64;
        for r in fetch_records(client, cache, &h.ids).await? {
            frontier.push(r.mtimes()?);
            if let Some(s) = r.state()? {
                live.insert(s);
            }
        }
    }
    // The indexes after the refs: a ref read above was written after the
    // indexes of everything it reaches (data before refs), so they are all
    // listed now, also for a push that finished during this gc.
    let mut known = Known::load(client, cache).await?;
    known
        .recover_orphans(client, cache, &HashSet::new())
        .await?;
    // Then mtimes nodes and trees (crate::trees), level by level.
    while !frontier.is_empty() {
        let need: Vec<Hash> = frontier.drain(..).filter(|h| live.insert(*h)).collect();
        if need.is_empty() {
            break;
        }
        let got = std::sync::Mutex::new(Vec::new());
        fetch_blobs(client, &known, &need, &|h, raw| {
            got.lock().unwrap().push((h, raw));
            Ok(())
        })
        .await?;
        for (h, raw) in got.into_inner().unwrap() {
            if trees::is_node(&raw) {
                let m = MNode::decode(&raw, &h.to_hex())?;
                frontier.push(m.shape);
                frontier.extend(m.children());
                continue;
            }
            for e in trees::decode_shape(&raw, &h)?.entries {
                match e.node {
                    Node::Dir { tree } => frontier.push(tree),
                    Node::File { hash, .. } => {
                        live.insert(hash);
                    }
                    Node::Symlink { .. } => {}
                }
            }
        }
    }
    rep.live_objects = live.len() as u64;
    let mut seen: HashSet<Hash> = HashSet::new();
    let mut live_packs: HashSet<Hash> = HashSet::new();
    for (p, entries) in &known.packs {
        for e in entries {
            if !seen.insert(e.hash) {
                rep.duplicate_objects += 1;
            }
            if live.contains(&e.hash) {
                live_packs.insert(*p);
            }
        }
    }
    rep.live_packs = live_packs.len() as u64;
    rep.packs = listed.len() as u64;
    let grace_ns = opts.grace.as_nanos() as i64;
    let mut delete: Vec<(Hash, u64)> = Vec::new();
    let mut condemn = Condemned::default();
    for (k, m) in &listed {
        rep.stored_bytes += m.size;
        let Ok(p) = parse_hash(k, "pack key") else {
            continue;
        };
        if live_packs.contains(&p) {
            continue;
        }
        match prev_since.get(&p) {
            Some(&since) if since + grace_ns <= listed_ns => delete.push((p, m.size)),
            Some(&since) => {
                condemn.packs.push(p.to_hex());
                condemn.since_ns.push(since);
            }
            None => {
                let age = SystemTime::now()
                    .duration_since(m.last_modified.into())
                    .unwrap_or_default();
                if age >= opts.grace {
                    condemn.packs.push(p.to_hex());
                    condemn.since_ns.push(now_ns());
                }
            }
        }
    }
    // Packs that depend on the deleted ones are condemned with them.
    let gone: HashSet<Hash> = delete.iter().map(|d| d.0).collect();
    let condemned: HashSet<&str> = condemn.packs.iter().map(String::as_str).collect();
    let young: Vec<Hash> = listed
        .iter()
        .filter_map(|(k, _)| parse_hash(k, "pack key").ok())
        .filter(|p| {
            !live_packs.contains(p) && !gone.contains(p) && !condemned.contains(p.to_hex().as_str())
        })
        .collect();
    for p in dependents(client, &known, &gone, &young).await? {
        condemn.packs.push(p.to_hex());
        condemn.since_ns.push(now_ns());
    }
    rep.deleted_packs = delete.len() as u64;
    rep.deleted_bytes = delete.iter().map(|d| d.1).sum();
    rep.condemned_packs = condemn.packs.len() as u64;
    if opts.dry_run {
        return Ok(());
    }
    ckpt_fault::point("remote.gc.after_mark");
    // The packs about to be deleted stay on the list (until the next gc,
    // which no longer finds them): a push that loads the indexes before
    // they are deleted must not rely on them.
    for (p, _) in &delete {
        condemn.packs.push(p.to_hex());
        condemn.since_ns.push(prev_since[p]);
    }
    // Condemn first (pushers must see it), then delete.
    client
        .put_sealed(
            layout::CONDEMNED,
            serde_json::to_vec(&condemn).expect("serialises"),
        )
        .await?;
    for (p, _) in &delete {
        client.delete(&layout::index_key(p)).await?;
        client.delete(&layout::pack_key(p)).await?;
    }
    Ok(())
}

/// The packs of `young` (unreachable, not condemned) holding a tree or
/// mtimes node that names a blob only the packs of `gone` hold: deleting
/// `gone` would leave them pointing at nothing, so they are condemned with
/// it (the module doc says why).
async fn dependents(
    client: &Client,
    known: &Known,
    gone: &HashSet<Hash>,
    young: &[Hash],
) -> Result<Vec<Hash>> {
    if gone.is_empty() || young.is_empty() {
        return Ok(Vec::new());
    }
    let mut kept: HashSet<Hash> = HashSet::new();
    for (p, entries) in &known.packs {
        if !gone.contains(p) {
            kept.extend(entries.iter().map(|e| e.hash));
        }
    }
    let dead: HashSet<Hash> = gone
        .iter()
        .filter_map(|p| known.packs.get(p))
        .flatten()
        .map(|e| e.hash)
        .filter(|h| !kept.contains(h))
        .collect();
    if dead.is_empty() {
        return Ok(Vec::new());
    }
    // Tree or node → the young packs holding it.
    let mut holders: HashMap<Hash, Vec<Hash>> = HashMap::new();
    for p in young {
        for e in known.packs.get(p).into_iter().flatten() {
            if matches!(e.kind, Kind::Tree | Kind::Mtimes) {
                holders.entry(e.hash).or_default().push(*p);
            }
        }
    }
    let wants: Vec<Hash> = holders.keys().copied().collect();
    let hit: std::sync::Mutex<HashSet<Hash>> = Default::default();
    fetch_blobs(client, known, &wants, &|h, raw| {
        let names: Vec<Hash> = if trees::is_node(&raw) {
            let m = MNode::decode(&raw, &h.to_hex())?;
            std::iter::once(m.shape).chain(m.children()).collect()
        } else {
            trees::decode_shape(&raw, &h)?
                .entries
                .iter()
                .filter_map(|e| match &e.node {
                    Node::Dir { tree } => Some(*tree),
                    Node::File { hash, .. } => Some(*hash),
                    Node::Symlink { .. } => None,
                })
                .collect()
        };
        if names.iter().any(|n| dead.contains(n)) {
            hit.lock().unwrap().insert(h);
        }
        Ok(())
    })
    .await?;
    let mut out: Vec<Hash> = hit
        .into_inner()
        .unwrap()
        .iter()
        .flat_map(|h| holders[h].iter().copied())
        .collect();
    out.sort_unstable();
    out.dedup();
    Ok(out)
}
