//! `ckpt gc --remote REMOTE`: delete packs no ref reaches, safely while
//! others push. In the spirit of restic's prune, but without stopping
//! pushers: a lock between gcs, and a grace period between finding a pack
//! unreachable and deleting it.
//!
//! 1. **Lock.** `gc/lock` is created with create-if-absent; a second gc
//!    fails clearly (a lock older than a day is taken over as stale).
//! 2. **Mark.** Every ref's current generation and every checkpoint record
//!    it lists are read (a ref in another remote format stops the gc,
//!    deleting nothing), then the pack indexes (after the refs, so a push
//!    that wrote its ref meanwhile is indexed too), then every mtimes node
//!    and tree below the records; every blob they reach is live, and so is
//!    every pack holding one (packs are never rewritten).
//! 3. **Sweep.** A pack condemned by an earlier gc at least `grace` before
//!    this gc read the refs, and still unreachable, is deleted (its index
//!    first, so nobody sees an index whose pack is gone).
//! 4. **Condemn.** Every other unreachable pack older than `grace` is
//!    written to `gc/condemned` with the time it was first condemned.
//!    Old ref generations beyond the last 16 are deleted.
//!
//! Why a concurrent push never loses data: a push relies on packs it
//! uploaded and packs whose blobs it found; immediately before it writes
//! its ref generation (one request later) it reads `gc/condemned` and gives
//! up, changing nothing, if any of those packs is on it. So a pack it
//! relies on was condemned, if at all, after that check, at time T; it can
//! only be deleted by a gc that read the refs at T + grace or later, by
//! which time the push's ref is written (the grace, 1 h by default, is far
//! longer than one request) and the pack is live again. A pack a push is
//! still uploading is younger than the grace and is not condemned. Clocks
//! of machines running gc are assumed to agree to well within the grace.
//! Packs partly live are kept whole (no repacking yet).

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use ckpt_copy::fs::now_ns;
use ckpt_lib::ops::json::SCHEMA;
use ckpt_lib::ops::Context;
use ckpt_lib::store::tree::Node;
use ckpt_lib::Hash;
use serde_json::{json, Value};

use crate::client::{Client, Created};
use crate::known::{self, Known};
use crate::layout::{self, parse_hash};
use crate::log::{fetch_records, ref_ids};
use crate::pull::fetch_blobs;
use crate::push::read_ref;
use crate::remotes;
use crate::report::{with_transfer, Transfer};
use crate::trees::{self, MNode};
use crate::{Error, Result, Settings};

pub use crate::layout::Condemned;

/// Ref generations kept per workspace.
const KEEP_GENERATIONS: usize = 16;
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

/// What [`gc`] did.
#[derive(Debug, Default)]
pub struct GcReport {
    /// URL.
    pub url: String,
    /// Workspaces (refs) read.
    pub workspaces: u64,
    /// Checkpoints reachable.
    pub checkpoints: u64,
    /// Packs on the remote.
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
    /// Old ref generations deleted.
    pub deleted_generations: u64,
    /// Total bytes in packs.
    pub stored_bytes: u64,
    /// Dry run.
    pub dry_run: bool,
    /// Wire summary.
    pub transfer: Transfer,
}

impl GcReport {
    /// JSON: every field above, and the transfer fields.
    pub fn to_json(&self) -> Value {
        with_transfer(
            json!({
                "schema": SCHEMA,
                "remote": self.url,
                "workspaces": self.workspaces,
                "checkpoints": self.checkpoints,
                "stored_packs": self.packs,
                "live_packs": self.live_packs,
                "live_objects": self.live_objects,
                "duplicate_objects": self.duplicate_objects,
                "deleted_packs": self.deleted_packs,
                "deleted_bytes": self.deleted_bytes,
                "condemned_packs": self.condemned_packs,
                "deleted_generations": self.deleted_generations,
                "stored_bytes": self.stored_bytes,
                "dry_run": self.dry_run,
            }),
            &self.transfer,
        )
    }
}

async fn lock(client: &Client) -> Result<()> {
    let body = Bytes::from(json!({"time_ns": now_ns(), "pid": std::process::id()}).to_string());
    for _ in 0..2 {
        if client.create(layout::GC_LOCK, body.clone()).await? == Created::Yes {
            return Ok(());
        }
        let held: Value = client
            .get(layout::GC_LOCK)
            .await?
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or(Value::Null);
        let since = held["time_ns"].as_i64().unwrap_or(0);
        if now_ns() - since > STALE_LOCK.as_nanos() as i64 {
            client.delete(layout::GC_LOCK).await?;
            continue;
        }
        return Err(Error::Remote(format!(
            "another `ckpt gc --remote` holds {} (since {}); nothing was deleted: retry later \
             (a lock older than a day is taken over)",
            client.shown("", layout::GC_LOCK).trim_start(),
            ckpt_lib::ops::json::time(since)
        )));
    }
    Err(Error::Remote("could not take the gc lock; retry".into()))
}

/// Collects garbage on a remote.
pub fn gc(ctx: &Context, opts: &GcOptions<'_>) -> Result<GcReport> {
    let t0 = Instant::now();
    let ws = ctx.workspace()?;
    let store = ws.open_store_read_only(&ctx.config)?;
    let target = remotes::resolve(&ws, opts.remote, None)?;
    let cache = known::cache_dir(&store.root, &target.url.url);
    let client = Client::open(&target.url, opts.settings)?;
    let rt = crate::runtime()?;
    let mut rep = GcReport {
        url: target.url.url.clone(),
        dry_run: opts.dry_run,
        ..GcReport::default()
    };
    rt.block_on(async {
        if !opts.dry_run {
            lock(&client).await?;
        }
        let r = sweep(&client, &cache, opts, &mut rep).await;
        if !opts.dry_run {
            client.delete(layout::GC_LOCK).await?;
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
    let prev: Condemned = match client.get(layout::CONDEMNED).await? {
        Some(b) => serde_json::from_slice(&b).map_err(|e| {
            Error::Corrupt(format!("{}: {e}", client.shown("GET", layout::CONDEMNED)))
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
    // candidate at all.
    let listed = client.list("packs").await?;
    let refs_read_ns = now_ns();
    let mut names: Vec<(String, Vec<u64>)> = Vec::new();
    {
        let mut by: HashMap<String, Vec<u64>> = HashMap::new();
        for (k, _) in client.list("refs").await? {
            if let Some((n, g)) = k.split_once('/') {
                if let Ok(g) = g.parse::<u64>() {
                    by.entry(n.to_string()).or_default().push(g);
                }
            }
        }
        names.extend(by);
    }
    rep.workspaces = names.len() as u64;
    // Mark: the roots of every checkpoint the refs list.
    let mut live: HashSet<Hash> = HashSet::new();
    let mut frontier: Vec<Hash> = Vec::new();
    for (name, _) in &names {
        let Some((_, body)) = read_ref(client, name).await? else {
            continue;
        };
        let ids = ref_ids(&body)?;
        rep.checkpoints += ids.len() as u64;
        for r in fetch_records(client, cache, &ids).await? {
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
            Some(&since) if since + grace_ns <= refs_read_ns => delete.push((p, m.size)),
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
    rep.deleted_packs = delete.len() as u64;
    rep.deleted_bytes = delete.iter().map(|d| d.1).sum();
    rep.condemned_packs = condemn.packs.len() as u64;
    if opts.dry_run {
        return Ok(());
    }
    // Condemn first (pushers must see it), then delete.
    client
        .put(
            layout::CONDEMNED,
            Bytes::from(serde_json::to_vec(&condemn).expect("serialises")),
        )
        .await?;
    for (p, _) in &delete {
        client.delete(&layout::index_key(p)).await?;
        client.delete(&layout::pack_key(p)).await?;
    }
    for (name, mut gens) in names {
        gens.sort_unstable();
        if gens.len() > KEEP_GENERATIONS {
            for g in &gens[..gens.len() - KEEP_GENERATIONS] {
                client.delete(&layout::ref_key(&name, *g)).await?;
                rep.deleted_generations += 1;
            }
        }
    }
    Ok(())
}

crate::serialize_via_to_json!(GcReport);
