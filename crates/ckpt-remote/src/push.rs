//! `ckpt push [REMOTE] [ID…|--all]`: upload checkpoints (default: the
//! head) with everything they reference that the remote lacks, then add
//! them to the workspace's ref.
//!
//! Order (the argument is in [`crate::layout`]): blobs of file contents and
//! state snapshots in packs, uploaded in parallel, each pack before its
//! index → packs of trees (without mtimes) and mtimes nodes
//! ([`crate::trees`]) one after another, children before parents →
//! checkpoint records → one new ref generation by create-if-absent,
//! retried on top of a concurrent pusher's. Nothing the remote already
//! holds is sent: the pack indexes say which blobs it has; an mtimes node
//! it has stands for its whole subtree, and a tree it has for its subtree's
//! trees and contents (so a second workspace with the same files sends
//! only its mtimes). A push after a one-file edit walks and sends only the
//! changed path (a handful of requests: two listings, the ref, one pack and
//! its index, the record, the new ref generation, and the gc check); the
//! shapes and nodes of unchanged subtrees come from the store's cache
//! ([`crate::trees::Cache`]), not from reading their trees.
//!
//! Resuming: a killed push leaves whole packs (and maybe a pack without its
//! index, which the next push recovers, see [`crate::known`]); the re-run
//! finds their blobs and sends only the rest. A push never relies on a pack
//! that `gc --remote` has condemned: it re-reads the condemned list just
//! before it writes the ref and fails (asking for a re-run, which then
//! uploads those blobs again) if one of the packs it relied on is on it
//! (the gc module says why that makes gc safe).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ckpt_copy::copytree::Progress;
use ckpt_lib::ops::json::SCHEMA;
use ckpt_lib::ops::Context;
use ckpt_lib::store::catalog::{CatalogReader, Checkpoint};
use ckpt_lib::store::tree::Node;
use ckpt_lib::store::Store;
use ckpt_lib::Hash;
use futures::{stream, StreamExt, TryStreamExt};
use rayon::prelude::*;
use serde_json::{json, Value};

use crate::client::{Client, Created};
use crate::known::{self, Known};
use crate::layout::{self, Record, RefBody};
use crate::pack::{self, Builder, Kind};
use crate::remotes;
use crate::report::{with_transfer, Transfer};
use crate::trees::{self, Encoder};
use crate::{Error, Result, Settings};

/// What [`push`] sends.
#[derive(Clone, Copy, Debug)]
pub struct PushOptions<'a> {
    /// A configured remote's name or a URL (None: the default remote).
    pub remote: Option<&'a str>,
    /// The workspace name on the remote (None: the configured one, else
    /// the directory's name).
    pub workspace: Option<&'a str>,
    /// Checkpoints to push (none: the head).
    pub revs: &'a [String],
    /// Push every checkpoint.
    pub all: bool,
    /// How to reach the remote.
    pub settings: &'a Settings,
    /// Advanced as blobs are uploaded.
    pub progress: Option<&'a Progress>,
}

/// What [`push`] did.
#[derive(Debug)]
pub struct PushReport {
    /// The remote's URL.
    pub url: String,
    /// The workspace name on the remote.
    pub workspace: String,
    /// Checkpoints added to the ref: (local id, remote id).
    pub pushed: Vec<(String, String)>,
    /// Checkpoints the ref already had.
    pub already: Vec<(String, String)>,
    /// The ref generation written (or found).
    pub generation: Option<u64>,
    /// Times the ref write lost to a concurrent pusher and was retried on top.
    pub ref_retries: u64,
    /// Packs left without an index by an interrupted push, recovered.
    pub recovered_packs: u64,
    /// Blobs found on the remote (not sent).
    pub skipped_objects: u64,
    /// What went over the wire (`objects`, `raw_bytes`: blobs sent).
    pub transfer: Transfer,
}

fn ids(v: &[(String, String)]) -> Vec<Value> {
    v.iter()
        .map(|(l, r)| json!({"id": l, "remote_id": r}))
        .collect()
}

impl PushReport {
    /// JSON: `remote`, `workspace`, `pushed`, `already` (each `{id,
    /// remote_id}`), `generation`, `ref_retries`, `recovered_packs`,
    /// `skipped_objects`, and the transfer fields.
    pub fn to_json(&self) -> Value {
        with_transfer(
            json!({
                "schema": SCHEMA,
                "remote": self.url,
                "workspace": self.workspace,
                "pushed": ids(&self.pushed),
                "already": ids(&self.already),
                "generation": self.generation,
                "ref_retries": self.ref_retries,
                "recovered_packs": self.recovered_packs,
                "skipped_objects": self.skipped_objects,
            }),
            &self.transfer,
        )
    }
}

/// The current generation of a ref and its body (None: no ref yet).
pub async fn read_ref(client: &Client, name: &str) -> Result<Option<(u64, RefBody)>> {
    for _ in 0..5 {
        let listed = client.list(&layout::ref_dir(name)).await?;
        let Some(generation) = listed
            .iter()
            .filter_map(|(k, _)| k.parse::<u64>().ok())
            .max()
        else {
            return Ok(None);
        };
        let key = layout::ref_key(name, generation);
        // A generation trimmed by gc between the listing and the read: list again.
        let Some(b) = client.get(&key).await? else {
            continue;
        };
        let body: RefBody = serde_json::from_slice(&b)
            .map_err(|e| Error::Corrupt(format!("{}: {e}", client.shown("GET", &key))))?;
        if body.format != layout::FORMAT {
            return Err(layout::format_error(
                &format!(
                    "workspace {name:?} at {}",
                    client.shown("", &key).trim_start()
                ),
                body.format,
            ));
        }
        return Ok(Some((generation, body)));
    }
    Err(Error::Remote(format!(
        "{}: the ref kept changing while it was read; retry",
        client.shown("LIST", &layout::ref_dir(name))
    )))
}

/// The packs `gc --remote` has condemned (`gc/condemned`).
pub async fn read_condemned(client: &Client) -> Result<HashSet<Hash>> {
    let Some(b) = client.get(layout::CONDEMNED).await? else {
        return Ok(HashSet::new());
    };
    let c: layout::Condemned = serde_json::from_slice(&b)
        .map_err(|e| Error::Corrupt(format!("{}: {e}", client.shown("GET", layout::CONDEMNED))))?;
    c.packs
        .iter()
        .map(|p| layout::parse_hash(p, layout::CONDEMNED))
        .collect()
}

/// A state snapshot blob: its hash and bytes.
pub type StateBlob = (Hash, Vec<u8>);

/// A local checkpoint, its remote record, and its state snapshot.
pub type Pushable = (Checkpoint, Record, Option<StateBlob>);

/// The state snapshot blob of a checkpoint (None: the empty state).
pub fn state_blob(store: &Store, cp: &Checkpoint) -> Result<Option<StateBlob>> {
    let Some(v) = cp.state_version.filter(|&v| v > 0) else {
        return Ok(None);
    };
    let Some(s) = store.state.get()? else {
        return Err(Error::Corrupt(format!(
            "{} recorded agent state version {v} but {} is missing",
            cp.id(),
            store.state.path().display()
        )));
    };
    let snap = s.snapshot(v)?;
    let entries: Vec<(Vec<u8>, Vec<u8>)> = snap
        .scan(b"")
        .into_iter()
        .map(|e| (e.key, e.value))
        .collect();
    if entries.is_empty() {
        return Ok(None);
    }
    let b = layout::encode_state(&entries);
    Ok(Some((Hash::of(&b), b)))
}

/// The remote records of `cps` (with their state blobs), computing the
/// parents' ids too.
pub fn records(
    store: &Store,
    reader: &CatalogReader<'_>,
    cps: &[Checkpoint],
    workspace: &str,
) -> Result<Vec<Pushable>> {
    let mut ids: HashMap<u64, Hash> = HashMap::new();
    let id_of =
        |cp: &Checkpoint, ids: &mut HashMap<u64, Hash>| -> Result<(Hash, Option<StateBlob>)> {
            let blob = state_blob(store, cp)?;
            let r = Record::of(cp, blob.as_ref().map(|b| b.0), None, workspace);
            ids.insert(cp.seq, r.hash());
            Ok((r.hash(), blob))
        };
    let mut out = Vec::new();
    for cp in cps {
        let (_, blob) = id_of(cp, &mut ids)?;
        let parent = match cp.parent {
            Some(p) => match ids.get(&p) {
                Some(h) => Some(*h),
                None => match reader.checkpoint(p)? {
                    Some(pc) => Some(id_of(&pc, &mut ids)?.0),
                    None => None,
                },
            },
            None => None,
        };
        let r = Record::of(cp, blob.as_ref().map(|b| b.0), parent, workspace);
        out.push((cp.clone(), r, blob));
    }
    Ok(out)
}

/// One blob to send.
struct Want {
    kind: Kind,
    hash: Hash,
    size: u64,
}

/// What a walk of the trees to push found.
#[derive(Default)]
struct Walk {
    /// File contents the remote lacks.
    objects: Vec<Want>,
    /// Trees and mtimes nodes the remote lacks, children before parents
    /// (and a region's trees before its node), with their bytes.
    trees: Vec<(Kind, Hash, Vec<u8>)>,
    /// Packs holding blobs this push relies on instead of sending.
    relied: HashSet<Hash>,
    /// Blobs sent or found so far.
    seen: HashSet<Hash>,
    /// The mtimes node of each root pushed.
    roots: HashMap<Hash, Hash>,
    skipped: u64,
}

impl Walk {
    /// Whether blob `h` is on the remote or already on its way (noting the
    /// pack relied on).
    fn have(&mut self, known: &Known, h: &Hash) -> bool {
        if self.seen.contains(h) {
            return true;
        }
        match known.blobs.get(h) {
            Some(l) => {
                self.relied.insert(l.pack);
                self.skipped += 1;
                self.seen.insert(*h);
                true
            }
            None => false,
        }
    }

    /// Sends local tree `l` as a node of its own (unless the remote has
    /// it); returns the node's hash.
    fn node(&mut self, enc: &mut Encoder<'_>, known: &Known, l: &Hash) -> Result<Hash> {
        let cached = enc.node(l)?;
        if self.have(known, &cached) {
            return Ok(cached);
        }
        self.dir(enc, known, l)?;
        // Encoded anew: subdirectory nodes are named as just sent or found.
        let bytes = enc.node_bytes(l)?;
        let h = Hash::of(&bytes);
        enc.set_node(l, h);
        if !self.have(known, &h) {
            self.seen.insert(h);
            self.trees.push((Kind::Mtimes, h, bytes));
        }
        Ok(h)
    }

    /// Sends the region of directory `l`: its subdirectories (inlined ones
    /// as regions, the others as nodes), then its file contents and tree,
    /// unless the remote has its tree.
    fn dir(&mut self, enc: &mut Encoder<'_>, known: &Known, l: &Hash) -> Result<()> {
        for (child, inline) in enc.subdirs(l)? {
            if inline {
                self.dir(enc, known, &child)?;
            } else {
                self.node(enc, known, &child)?;
            }
        }
        let shape = enc.info(l)?.shape;
        if self.have(known, &shape) {
            return Ok(());
        }
        for e in &enc.tree(l)?.entries {
            if let Node::File { size, hash } = e.node {
                if !self.have(known, &hash) {
                    self.seen.insert(hash);
                    self.objects.push(Want {
                        kind: Kind::Object,
                        hash,
                        size,
                    });
                }
            }
        }
        let bytes = enc.shape_bytes(l)?;
        self.seen.insert(shape);
        self.trees.push((Kind::Tree, shape, bytes));
        Ok(())
    }
}

/// What of `roots` (local root trees) the remote lacks, in upload order.
fn walk(enc: &mut Encoder<'_>, roots: &[Hash], known: &Known) -> Result<Walk> {
    let mut w = Walk::default();
    for root in roots {
        let n = w.node(enc, known, root)?;
        w.roots.insert(*root, n);
    }
    Ok(w)
}

/// Groups blobs into packs of about [`PACK_TARGET`] raw bytes.
fn group(wants: Vec<Want>, target: u64) -> Vec<Vec<Want>> {
    let mut out: Vec<Vec<Want>> = Vec::new();
    let mut cur: Vec<Want> = Vec::new();
    let mut size = 0;
    for w in wants {
        if !cur.is_empty() && size + w.size > target {
            out.push(std::mem::take(&mut cur));
            size = 0;
        }
        size += w.size;
        cur.push(w);
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// A finished pack ready to upload.
struct Built {
    name: Hash,
    bytes: Vec<u8>,
    index: Vec<u8>,
    raw: u64,
    count: u64,
}

fn finish(b: Builder) -> Built {
    let raw = b.raw_len();
    let (name, bytes, index, entries) = b.finish();
    Built {
        name,
        bytes,
        index,
        raw,
        count: entries.len() as u64,
    }
}

/// Reads and compresses one group of blobs into a pack (in parallel).
fn build(store: &Store, group: &[Want], states: &HashMap<Hash, Vec<u8>>) -> Result<Built> {
    let stored: Vec<(Option<Vec<u8>>, Vec<u8>, u8)> = group
        .par_iter()
        .map(|w| {
            let raw = match w.kind {
                Kind::State => states.get(&w.hash).cloned().unwrap_or_default(),
                _ => store.objects.read_object(&w.hash)?,
            };
            if Hash::of(&raw) != w.hash {
                return Err(Error::Corrupt(format!(
                    "object {} ({}) does not match its name; run `ckpt verify --store` (nothing was pushed)",
                    w.hash,
                    store.objects.object_path(&w.hash).display()
                )));
            }
            let (z, codec) = pack::compress(&raw);
            Ok((z, raw, codec))
        })
        .collect::<Result<_>>()?;
    let mut b = Builder::default();
    for (w, (z, raw, codec)) in group.iter().zip(&stored) {
        b.add_stored(
            w.kind,
            w.hash,
            raw.len() as u64,
            z.as_deref().unwrap_or(raw),
            *codec,
        );
    }
    Ok(finish(b))
}

/// Uploads a pack, then its index.
async fn upload(
    client: &Client,
    cache: &std::path::Path,
    p: Built,
    progress: Option<&Progress>,
    sent: &std::sync::Mutex<HashSet<Hash>>,
) -> Result<(u64, u64)> {
    sent.lock().unwrap().insert(p.name);
    client
        .put(&layout::pack_key(&p.name), Bytes::from(p.bytes))
        .await?;
    client
        .create(&layout::index_key(&p.name), Bytes::from(p.index.clone()))
        .await?;
    known::remember(cache, &p.name, &p.index);
    ckpt_fault::point("remote.push.after_pack");
    if let Some(pr) = progress {
        pr.bytes.fetch_add(p.raw, Ordering::Relaxed);
        pr.entries.fetch_add(p.count, Ordering::Relaxed);
    }
    Ok((p.count, p.raw))
}

/// Pushes checkpoints to a remote.
pub fn push(ctx: &Context, opts: &PushOptions<'_>) -> Result<PushReport> {
    let t0 = Instant::now();
    let ws = ctx.workspace()?;
    let store = ws.open_store_read_only(&ctx.config)?;
    let target = remotes::resolve(&ws, opts.remote, opts.workspace)?;
    let reader = store.catalog.reader()?;
    let mut cps: Vec<Checkpoint> = if opts.all {
        reader.checkpoints()?
    } else if opts.revs.is_empty() {
        vec![reader
            .resolve("HEAD")
            .or_else(|_| reader.resolve("latest"))?]
    } else {
        opts.revs
            .iter()
            .map(|r| reader.resolve(r))
            .collect::<Result<_>>()?
    };
    cps.sort_by_key(|c| c.seq);
    cps.dedup_by_key(|c| c.seq);
    let recs = records(&store, &reader, &cps, &target.workspace)?;
    let cache = known::cache_dir(&store.root, &target.url.url);
    let client = Client::open(&target.url, opts.settings)?;
    let rt = crate::runtime()?;
    let mut report = PushReport {
        url: target.url.url.clone(),
        workspace: target.workspace.clone(),
        pushed: Vec::new(),
        already: Vec::new(),
        generation: None,
        ref_retries: 0,
        recovered_packs: 0,
        skipped_objects: 0,
        transfer: Transfer::default(),
    };
    // Phase A: what the remote has, what to send.
    let prepared = rt.block_on(async {
        let current = read_ref(&client, &target.workspace).await?;
        let on_remote: HashSet<String> = current
            .as_ref()
            .map(|(_, b)| b.checkpoints.iter().cloned().collect())
            .unwrap_or_default();
        report.generation = current.as_ref().map(|(g, _)| *g);
        let todo: Vec<usize> = (0..recs.len())
            .filter(|&i| !on_remote.contains(&recs[i].1.id))
            .collect();
        report.already = recs
            .iter()
            .filter(|(_, r, _)| on_remote.contains(&r.id))
            .map(|(c, r, _)| (c.id(), r.id.clone()))
            .collect();
        if todo.is_empty() {
            return Ok(None);
        }
        let condemned = read_condemned(&client).await?;
        let mut known = Known::load(&client, &cache).await?;
        known.forget(&condemned);
        report.recovered_packs = known.recover_orphans(&client, &cache, &condemned).await?;
        Ok::<_, Error>(Some((current, todo, known)))
    })?;
    let Some((current, todo, known)) = prepared else {
        report.transfer =
            std::mem::take(&mut report.transfer).counted(&client.counters, t0.elapsed());
        return Ok(report);
    };
    let todo: Vec<&Pushable> = todo.iter().map(|&i| &recs[i]).collect();
    let roots: Vec<Hash> = todo.iter().map(|(c, _, _)| c.root).collect();
    let load = |h: &Hash| reader.tree(h);
    let mut enc = Encoder::new(&load, trees::Cache::load(&store.root));
    let walked = walk(&mut enc, &roots, &known);
    enc.cache.save();
    let mut w = walked?;
    let mut states: HashMap<Hash, Vec<u8>> = HashMap::new();
    for (_, _, blob) in &todo {
        if let Some((h, b)) = blob {
            if let Some(l) = known.blobs.get(h) {
                w.relied.insert(l.pack);
            } else if !states.contains_key(h) {
                states.insert(*h, b.clone());
                w.objects.push(Want {
                    kind: Kind::State,
                    hash: *h,
                    size: b.len() as u64,
                });
            }
        }
    }
    report.skipped_objects = w.skipped;

    // Phase B: file contents and state snapshots, in packs built on a
    // thread (reading and compressing in parallel) and uploaded as they come.
    let groups = group(std::mem::take(&mut w.objects), opts.settings.pack_target);
    let sent: std::sync::Mutex<HashSet<Hash>> = Default::default();
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Built>>(2);
    let (objects, raw, packs) = std::thread::scope(|s| {
        let store = &store;
        let states = &states;
        let groups = &groups;
        s.spawn(move || {
            for g in groups {
                let b = build(store, g, states);
                let failed = b.is_err();
                if tx.blocking_send(b).is_err() || failed {
                    break;
                }
            }
        });
        let rx = stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|v| (v, rx)) });
        let (client, cache, sent) = (&client, &cache, &sent);
        rt.block_on(
            rx.map(|b| async move { upload(client, cache, b?, opts.progress, sent).await })
                .buffer_unordered(client.concurrency())
                .try_fold((0u64, 0u64, 0u64), |(n, r, p), (dn, dr)| async move {
                    Ok((n + dn, r + dr, p + 1))
                }),
        )
    })?;
    report.transfer.objects += objects;
    report.transfer.raw_bytes += raw;
    report.transfer.packs += packs;

    rt.block_on(async {
        // Phase C: trees, children before parents, one pack at a time.
        let mut b = Builder::default();
        for (kind, h, bytes) in &w.trees {
            b.add(*kind, *h, bytes);
            if b.raw_len() >= opts.settings.pack_target {
                let (n, r) = upload(&client, &cache, finish(std::mem::take(&mut b)), opts.progress, &sent).await?;
                report.transfer.objects += n;
                report.transfer.raw_bytes += r;
                report.transfer.packs += 1;
            }
        }
        if !b.is_empty() {
            let (n, r) = upload(&client, &cache, finish(b), opts.progress, &sent).await?;
            report.transfer.objects += n;
            report.transfer.raw_bytes += r;
            report.transfer.packs += 1;
        }

        // Phase D: checkpoint records. One already there (a re-run) must
        // be in this format.
        stream::iter(todo.iter())
            .map(|(c, r, _)| {
                let client = &client;
                let mut r = r.clone();
                r.mtimes = w.roots.get(&c.root).map(|n| n.to_hex());
                async move {
                    let body = serde_json::to_vec(&r).expect("record serialises");
                    let key = layout::record_key(&r.hash());
                    if client.create(&key, Bytes::from(body)).await? == Created::AlreadyThere {
                        Record::decode(&client.get_existing(&key).await?, &r.hash())?;
                    }
                    Ok::<_, Error>(())
                }
            })
            .buffer_unordered(client.concurrency())
            .try_collect::<Vec<()>>()
            .await?;

        ckpt_fault::point("remote.push.before_ref");
        // Nothing relied on may have been condemned meanwhile.
        let condemned_now = read_condemned(&client).await?;
        let sent = sent.lock().unwrap().clone();
        if let Some(p) = w.relied.iter().chain(&sent).find(|p| condemned_now.contains(p)) {
            return Err(Error::Remote(format!(
                "a concurrent `ckpt gc --remote` condemned pack {p}, which this push relies on; \
                 the ref was not changed: run the push again (it will upload that data anew)"
            )));
        }

        // Phase E: the ref, a new generation, retried on top of concurrent pushers.
        let mut current = current;
        let mut delay = Duration::from_millis(20);
        loop {
            let (generation, mut body) = match current.take() {
                Some((g, b)) => (g + 1, b),
                None => (
                    0,
                    RefBody {
                        format: layout::FORMAT,
                        workspace: target.workspace.clone(),
                        generation: 0,
                        checkpoints: Vec::new(),
                    },
                ),
            };
            let have: HashSet<String> = body.checkpoints.iter().cloned().collect();
            let split = |mine: bool| -> Vec<(String, String)> {
                recs.iter()
                    .filter(|(_, r, _)| have.contains(&r.id) != mine)
                    .map(|(c, r, _)| (c.id(), r.id.clone()))
                    .collect()
            };
            report.pushed = split(true);
            report.already = split(false);
            if report.pushed.is_empty() {
                report.generation = Some(body.generation);
                return Ok(());
            }
            body.checkpoints.extend(report.pushed.iter().map(|(_, r)| r.clone()));
            body.generation = generation;
            let bytes = serde_json::to_vec(&body).expect("ref serialises");
            match client.create(&layout::ref_key(&target.workspace, generation), Bytes::from(bytes)).await? {
                Created::Yes => {
                    report.generation = Some(generation);
                    return Ok(());
                }
                Created::AlreadyThere => {
                    report.ref_retries += 1;
                    if report.ref_retries > 50 {
                        return Err(Error::Remote(format!(
                            "{}: the ref kept changing under concurrent pushers; the data is uploaded, run the push again",
                            client.shown("PUT", &layout::ref_dir(&target.workspace))
                        )));
                    }
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_millis(500));
                    current = read_ref(&client, &target.workspace).await?;
                }
            }
        }
    })?;
    report.transfer = std::mem::take(&mut report.transfer).counted(&client.counters, t0.elapsed());
    Ok(report)
}

crate::serialize_via_to_json!(PushReport);
