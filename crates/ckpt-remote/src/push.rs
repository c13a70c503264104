//! `ckpt push [REMOTE] [ID…|--all]`: upload checkpoints (default: the
//! head) with everything they reference that the remote lacks, then add
//! them to the workspace's ref.
//!
//! Order (the argument is in [`crate::layout`]): blobs of file contents
//! and state snapshots in packs, uploaded in parallel, each pack before its
//! index → packs of trees (without mtimes) and mtimes nodes
//! ([`crate::trees`]) one after another, children before parents → one
//! ref entry per checkpoint ([`crate::refs`]: no conditional write, so no
//! concurrent pusher can replace it). The checkpoint records (reachable
//! only through a ref) are written meanwhile. Nothing the remote already holds is sent: the pack
//! indexes say which blobs it has; an mtimes node it has stands for its
//! whole subtree, and a tree it has for its subtree's trees and contents
//! (so a second workspace with the same files sends only its mtimes). The
//! shapes and nodes of unchanged subtrees come from the store's cache
//! ([`crate::trees::Cache`]), not from reading their trees, so a push after
//! a one-file edit walks and sends only the changed path: 12 requests in 8
//! round trips one after another (the remote's `config`, crate::crypt; the
//! listing of the workspace's ref, with the gc list; the listings of indexes and packs; a pack of contents,
//! then its index, with the record and the gc list again; a pack of trees
//! and nodes, then its index; the ref entry).
//!
//! Resuming: a killed push leaves whole packs (and maybe a pack without its
//! index, which the next push recovers, see [`crate::known`]); the re-run
//! finds their blobs and sends only the rest.
//!
//! With `gc --remote`: a push forgets the packs on `gc/condemned` when it
//! loads the indexes, and reads the list again while it uploads. If it is
//! empty (the usual case) nothing more is done; else, before the ref, every
//! blob the pushed checkpoints reach (computed from the local trees, no
//! request) must be in a pack that is not on it, and those that are not
//! are uploaded again in new packs (the list is then read once more). The
//! gc module says why that keeps every checkpoint a ref names readable.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::time::Instant;

use bytes::Bytes;
use ckpt_fs::copytree::Progress;
use ckpt_lib::ops::exchange::tree::Node;
use ckpt_lib::ops::exchange::{Local, Snapshot};
use ckpt_lib::ops::json::Schema;
use ckpt_lib::ops::parts::Checkpoint;
use ckpt_lib::ops::Context;
use ckpt_lib::{trace, Hash};
use futures::{stream, StreamExt, TryStreamExt};
use rayon::prelude::*;
use schemars::JsonSchema;
use serde::Serialize;

use crate::client::{Client, Created};
use crate::crypt::Keys;
use crate::known::{self, Known};
use crate::layout::{self, Record};
use crate::pack::{self, Builder, Entry, Kind};
use crate::refs;
use crate::remotes;
use crate::report::{local_remote, IdPair, Transfer};
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

/// What [`push`] did; serialises as its `--json` form (`pushed` and
/// `already` each as `{id, remote_id}`, then the transfer fields).
#[derive(Debug, Serialize, JsonSchema)]
pub struct PushReport {
    /// `schema`.
    pub schema: Schema,
    /// The remote's URL.
    #[serde(rename = "remote")]
    pub url: String,
    /// The workspace name on the remote.
    pub workspace: String,
    /// Checkpoints added to the ref: (local id, remote id).
    #[serde(serialize_with = "local_remote")]
    #[schemars(with = "Vec<IdPair<'static>>")]
    pub pushed: Vec<(String, String)>,
    /// Checkpoints the ref already had.
    #[serde(serialize_with = "local_remote")]
    #[schemars(with = "Vec<IdPair<'static>>")]
    pub already: Vec<(String, String)>,
    /// Packs left without an index by an interrupted push, recovered.
    pub recovered_packs: u64,
    /// Blobs found on the remote (not sent).
    pub skipped_objects: u64,
    /// What went over the wire (`objects`, `raw_bytes`: blobs sent).
    #[serde(flatten)]
    pub transfer: Transfer,
}

/// The packs `gc --remote` has condemned (`gc/condemned`).
pub async fn read_condemned(client: &Client) -> Result<HashSet<Hash>> {
    let Some(b) = client.get_sealed(layout::CONDEMNED).await? else {
        return Ok(HashSet::new());
    };
    let c: layout::Condemned = serde_json::from_slice(&b)
        .map_err(|e| Error::corrupt(format!("{}: {e}", client.shown("GET", layout::CONDEMNED))))?;
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
pub fn state_blob(local: &Local, cp: &Checkpoint) -> Result<Option<StateBlob>> {
    let entries = local.state_at(cp)?;
    if entries.is_empty() {
        return Ok(None);
    }
    let b = layout::encode_state(&entries);
    Ok(Some((Hash::of(&b), b)))
}

/// The remote records of `cps` (with their state blobs), computing the
/// parents' ids too.
pub fn records(
    local: &Local,
    reader: &Snapshot<'_>,
    cps: &[Checkpoint],
    workspace: &str,
) -> Result<Vec<Pushable>> {
    let mut ids: HashMap<u64, Hash> = HashMap::new();
    let id_of =
        |cp: &Checkpoint, ids: &mut HashMap<u64, Hash>| -> Result<(Hash, Option<StateBlob>)> {
            let blob = state_blob(local, cp)?;
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
    /// Blobs sent or found so far.
    seen: HashSet<Hash>,
    /// The mtimes node of each root pushed.
    roots: HashMap<Hash, Hash>,
    skipped: u64,
}

impl Walk {
    /// Whether blob `h` is on the remote or already on its way.
    fn have(&mut self, known: &Known, h: &Hash) -> bool {
        if self.seen.contains(h) {
            return true;
        }
        match known.blobs.get(h) {
            Some(_) => {
                self.skipped += 1;
                self.seen.insert(*h);
                true
            }
            None => false,
        }
    }

    /// Sends local tree `root` as a node of its own and, below it, every
    /// region the remote lacks (a directory's subdirectories, inlined ones
    /// as part of its region and the others as nodes of their own, then its
    /// file contents and tree, unless the remote has its tree; then the
    /// node, unless the remote has it). An explicit stack, not recursion:
    /// a workspace may be as deep as its paths allow.
    fn node(&mut self, enc: &mut Encoder<'_>, known: &Known, root: &Hash) -> Result<Hash> {
        enum Step {
            /// A node of its own: skipped if the remote has it.
            Node(Hash),
            /// A directory of a region: its subdirectories first.
            Dir(Hash),
            /// After its subdirectories: its contents and tree.
            DirEnd(Hash),
            /// After its region: the node.
            NodeEnd(Hash),
        }
        let mut stack = vec![Step::Node(*root)];
        while let Some(step) = stack.pop() {
            match step {
                Step::Node(l) => {
                    let cached = enc.node(&l)?;
                    if !self.have(known, &cached) {
                        stack.push(Step::NodeEnd(l));
                        stack.push(Step::Dir(l));
                    }
                }
                Step::Dir(l) => {
                    stack.push(Step::DirEnd(l));
                    for (child, inline) in enc.subdirs(&l)?.into_iter().rev() {
                        stack.push(if inline {
                            Step::Dir(child)
                        } else {
                            Step::Node(child)
                        });
                    }
                }
                Step::DirEnd(l) => {
                    let shape = enc.info(&l)?.shape;
                    if self.have(known, &shape) {
                        continue;
                    }
                    for e in &enc.tree(&l)?.entries {
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
                    let bytes = enc.shape_bytes(&l)?;
                    self.seen.insert(shape);
                    self.trees.push((Kind::Tree, shape, bytes));
                }
                Step::NodeEnd(l) => {
                    // Encoded anew: subdirectory nodes are named as just
                    // sent or found.
                    let bytes = enc.node_bytes(&l)?;
                    let h = Hash::of(&bytes);
                    enc.set_node(&l, h);
                    if !self.have(known, &h) {
                        self.seen.insert(h);
                        self.trees.push((Kind::Mtimes, h, bytes));
                    }
                }
            }
        }
        enc.node(root)
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

/// Where a blob of a pushed checkpoint comes from (to send it again).
#[derive(Clone, Copy)]
enum Src {
    /// A file content of the local store, of this size.
    File(u64),
    /// A state snapshot (in the push's state blobs).
    State,
    /// The shape of this local tree.
    Shape(Hash),
    /// The mtimes node of this local tree.
    Node(Hash),
}

/// Every blob the pushed checkpoints reach on the remote, parents first:
/// each root's mtimes node and, below it, every directory's shape and file
/// contents and the node of every subdirectory that is a node of its own;
/// and their state snapshots. Computed from the local trees (the encoder's
/// cache spares re-deriving what did not change), no request.
fn reach(
    enc: &mut Encoder<'_>,
    roots: &HashMap<Hash, Hash>,
    states: &HashMap<Hash, Vec<u8>>,
) -> Result<Vec<(Hash, Src)>> {
    let mut out: Vec<(Hash, Src)> = states.keys().map(|h| (*h, Src::State)).collect();
    let mut seen: HashSet<Hash> = states.keys().copied().collect();
    let mut visited: HashSet<(Hash, Option<Hash>)> = HashSet::new();
    let mut stack: Vec<(Hash, Option<Hash>)> = roots.iter().map(|(l, n)| (*l, Some(*n))).collect();
    while let Some((l, node)) = stack.pop() {
        if !visited.insert((l, node)) {
            continue;
        }
        if let Some(n) = node {
            // The node names exactly what this encoder names (else its
            // region could not be told from the local trees).
            if Hash::of(&enc.node_bytes(&l)?) != n {
                return Err(Error::Request(format!(
                    "mtimes node {n} on the remote was not encoded the way this ckpt encodes \
                     local tree {l}, so this push cannot check it against the packs `ckpt gc --remote` \
                     condemned; the ref was not changed: run the push again after the gc's grace period"
                )));
            }
            if seen.insert(n) {
                out.push((n, Src::Node(l)));
            }
        }
        let shape = enc.info(&l)?.shape;
        if seen.insert(shape) {
            out.push((shape, Src::Shape(l)));
            for e in &enc.tree(&l)?.entries {
                if let Node::File { size, hash } = e.node {
                    if seen.insert(hash) {
                        out.push((hash, Src::File(size)));
                    }
                }
            }
        }
        for (child, inline) in enc.subdirs(&l)? {
            let n = if inline {
                None
            } else {
                Some(enc.node(&child)?)
            };
            stack.push((child, n));
        }
    }
    Ok(out)
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
    entries: Vec<Entry>,
}

fn finish(b: Builder, keys: Option<&Keys>) -> Built {
    let raw = b.raw_len();
    let (name, bytes, index, entries) = b.finish(keys);
    Built {
        name,
        bytes,
        index,
        raw,
        entries,
    }
}

/// One blob ready for a pack: its stored form (compressed when that pays,
/// sealed on an encrypted remote).
struct Item {
    kind: Kind,
    hash: Hash,
    raw_len: u64,
    stored: Vec<u8>,
    codec: u8,
}

impl Item {
    fn new(kind: Kind, hash: Hash, raw: Vec<u8>, keys: Option<&Keys>) -> Item {
        let (z, codec) = pack::compress(&raw);
        let raw_len = raw.len() as u64;
        let stored = z.unwrap_or(raw);
        let stored = match keys {
            Some(k) => pack::seal_blob(k, kind, &hash, &stored),
            None => stored,
        };
        Item {
            kind,
            hash,
            raw_len,
            stored,
            codec,
        }
    }
}

/// Packs `items` into a pack whose name is not in `avoid`: packs are named
/// by their bytes, so the same blobs in the same order make a pack a gc has
/// condemned or is deleting, and uploading it again would not save it. The
/// pack then starts with a few zero bytes more until its name differs.
fn assemble(items: &[Item], avoid: &HashSet<Hash>, keys: Option<&Keys>) -> Built {
    let mut pad = 0;
    loop {
        let mut b = Builder::default();
        b.pad(pad);
        for it in items {
            b.add_stored(it.kind, it.hash, it.raw_len, &it.stored, it.codec);
        }
        let p = finish(b, keys);
        if !avoid.contains(&p.name) {
            return p;
        }
        pad += 1;
    }
}

/// Reads and compresses one group of blobs into a pack (in parallel).
fn build(
    local: &Local,
    group: &[Want],
    states: &HashMap<Hash, Vec<u8>>,
    avoid: &HashSet<Hash>,
    keys: Option<&Keys>,
) -> Result<Built> {
    let items: Vec<Item> = group
        .par_iter()
        .map(|w| {
            let raw = match w.kind {
                Kind::State => states.get(&w.hash).cloned().unwrap_or_default(),
                _ => local.object(&w.hash)?,
            };
            if Hash::of(&raw) != w.hash {
                return Err(Error::corrupt(format!(
                    "object {} ({}) does not match its name; run `ckpt verify --store` (nothing was pushed)",
                    w.hash,
                    local.object_path(&w.hash).display()
                )));
            }
            Ok(Item::new(w.kind, w.hash, raw, keys))
        })
        .collect::<Result<_>>()?;
    Ok(assemble(&items, avoid, keys))
}

/// Packs trees and nodes (children before parents) into packs of about
/// `target` raw bytes, with names not in `avoid`.
fn tree_packs(
    trees: &[(Kind, Hash, Vec<u8>)],
    target: u64,
    avoid: &HashSet<Hash>,
    keys: Option<&Keys>,
) -> Vec<Built> {
    let mut out = Vec::new();
    let mut items: Vec<Item> = Vec::new();
    let mut size = 0;
    for (i, (kind, h, bytes)) in trees.iter().enumerate() {
        size += bytes.len() as u64;
        items.push(Item::new(*kind, *h, bytes.clone(), keys));
        if size >= target || i + 1 == trees.len() {
            out.push(assemble(&items, avoid, keys));
            items.clear();
            size = 0;
        }
    }
    out
}

/// The packs a push uploaded, with their entries.
type Sent = std::sync::Mutex<Vec<(Hash, Vec<Entry>)>>;

/// Uploads a pack, then its index; notes it in `sent`.
async fn upload(
    client: &Client,
    cache: &std::path::Path,
    p: Built,
    progress: Option<&Progress>,
    sent: &Sent,
) -> Result<(u64, u64)> {
    let count = p.entries.len() as u64;
    client
        .put(&layout::pack_key(&p.name), Bytes::from(p.bytes))
        .await?;
    client
        .create(&layout::index_key(&p.name), Bytes::from(p.index.clone()))
        .await?;
    known::remember(cache, &p.name, &p.index);
    sent.lock().unwrap().push((p.name, p.entries));
    ckpt_fault::point("remote.push.after_pack");
    if let Some(pr) = progress {
        pr.bytes.fetch_add(p.raw, Ordering::Relaxed);
        pr.entries.fetch_add(count, Ordering::Relaxed);
    }
    Ok((count, p.raw))
}

/// Pushes checkpoints to a remote.
pub fn push(ctx: &Context, opts: &PushOptions<'_>) -> Result<PushReport> {
    let t0 = Instant::now();
    let local = Local::open(ctx)?;
    let target = remotes::resolve(&local, opts.remote, opts.workspace)?;
    let reader = local.snapshot()?;
    let mut cps: Vec<Checkpoint> = if opts.all {
        reader.checkpoints()?
    } else if opts.revs.is_empty() {
        vec![reader.head()?]
    } else {
        opts.revs
            .iter()
            .map(|r| reader.resolve(r))
            .collect::<ckpt_lib::Result<_>>()?
    };
    cps.sort_by_key(|c| c.seq);
    cps.dedup_by_key(|c| c.seq);
    let recs = records(&local, &reader, &cps, &target.workspace)?;
    let cache = known::cache_dir(local.store_dir(), &target.url.url);
    let rt = crate::runtime()?;
    let client = rt.block_on(target.connect(opts.settings, Some(&cache)))?;
    let mut report = PushReport {
        schema: Schema,
        url: target.url.url.clone(),
        workspace: target.workspace.clone(),
        pushed: Vec::new(),
        already: Vec::new(),
        recovered_packs: 0,
        skipped_objects: 0,
        transfer: Transfer::default(),
    };
    // Phase A: what the remote has, what to send. The ref and the
    // condemned list at once, then the indexes and the packs at once.
    let prepared = rt.block_on(async {
        let _t = trace::span("push: remote state");
        let (current, condemned) = futures::try_join!(
            refs::read(&client, Some(&cache), &target.workspace),
            read_condemned(&client)
        )?;
        let on_remote: HashSet<String> = current
            .as_ref()
            .map(|h| h.ids.iter().map(|i| i.to_hex()).collect())
            .unwrap_or_default();
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
        let (mut known, packs) =
            futures::try_join!(Known::load(&client, &cache), client.list("packs"))?;
        known.forget(&condemned);
        report.recovered_packs = known
            .recover_listed(&client, &cache, &condemned, &packs)
            .await?;
        let marked = current.is_some_and(|h| h.marked);
        Ok::<_, Error>(Some((marked, todo, known, condemned)))
    })?;
    let Some((marked, todo, mut known, condemned)) = prepared else {
        report.transfer =
            std::mem::take(&mut report.transfer).counted(&client.counters, t0.elapsed());
        return Ok(report);
    };
    let todo: Vec<&Pushable> = todo.iter().map(|&i| &recs[i]).collect();
    let roots: Vec<Hash> = todo.iter().map(|(c, _, _)| c.root).collect();
    let load = |h: &Hash| reader.tree(h);
    let mut enc = Encoder::new(&load, trees::Cache::load(local.store_dir()));
    let walked = {
        let _t = trace::span("push: walk");
        walk(&mut enc, &roots, &known)
    };
    enc.cache.save();
    let mut w = walked?;
    // Every state snapshot pushed; those the remote lacks are sent.
    let all_states: HashMap<Hash, Vec<u8>> =
        todo.iter().filter_map(|(_, _, b)| b.clone()).collect();
    let mut states: HashMap<Hash, Vec<u8>> = HashMap::new();
    for (_, _, blob) in &todo {
        if let Some((h, b)) = blob {
            if !known.blobs.contains_key(h) && !states.contains_key(h) {
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
    // thread (reading and compressing in parallel) and uploaded as they
    // come; then phase C: trees, children before parents, one pack at a
    // time. Meanwhile, phase D: the checkpoint records (one already there,
    // from a re-run, must be in this format), and the condemned list read
    // for the check below (any time after phase A will do: see crate::gc).
    let groups = group(std::mem::take(&mut w.objects), opts.settings.pack_target);
    let sent: Sent = Default::default();
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Built>>(2);
    let ((objects, raw, packs), condemned_now) = std::thread::scope(|s| {
        let local = &local;
        let states = &states;
        let groups = &groups;
        let avoid = &condemned;
        let keys = client.keys();
        s.spawn(move || {
            for g in groups {
                let b = build(local, g, states, avoid, keys);
                let failed = b.is_err();
                if tx.blocking_send(b).is_err() || failed {
                    break;
                }
            }
        });
        let rx = stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|v| (v, rx)) });
        let (client, cache, sent, w, avoid) = (&client, &cache, &sent, &w, &condemned);
        let uploads = async move {
            let _t = trace::span("push: upload");
            let mut total = rx
                .map(|b| async move { upload(client, cache, b?, opts.progress, sent).await })
                .buffer_unordered(client.concurrency())
                .try_fold((0u64, 0u64, 0u64), |(n, r, p), (dn, dr)| async move {
                    Ok((n + dn, r + dr, p + 1))
                })
                .await?;
            for p in tree_packs(&w.trees, opts.settings.pack_target, avoid, client.keys()) {
                let (n, r) = upload(client, cache, p, opts.progress, sent).await?;
                total = (total.0 + n, total.1 + r, total.2 + 1);
            }
            Ok::<_, Error>(total)
        };
        let records = stream::iter(todo.iter())
            .map(|(c, r, _)| {
                let mut r = r.clone();
                r.mtimes = w.roots.get(&c.root).map(|n| n.to_hex());
                async move {
                    let body = serde_json::to_vec(&r).expect("record serialises");
                    let key = client.record_key(&r.hash());
                    if client.create(&key, client.seal(&key, body)).await? == Created::AlreadyThere
                    {
                        let there = client.get_existing(&key).await?;
                        Record::decode(&client.unseal(&key, there)?, &r.hash())?;
                    }
                    Ok::<_, Error>(())
                }
            })
            .buffer_unordered(client.concurrency())
            .try_collect::<Vec<()>>();
        rt.block_on(async {
            let (total, _, condemned) =
                futures::try_join!(uploads, records, read_condemned(client))?;
            Ok::<_, Error>((total, condemned))
        })
    })?;
    report.transfer.objects += objects;
    report.transfer.raw_bytes += raw;
    report.transfer.packs += packs;

    rt.block_on(async {
        ckpt_fault::point("remote.push.before_ref");
        // Nothing the checkpoints reach may be only in condemned packs (the
        // gc module says why this check suffices).
        let _t = trace::span("push: gc check");
        let mut condemned_now = condemned_now;
        if !condemned_now.is_empty() {
            let reached = reach(&mut enc, &w.roots, &all_states)?;
            for round in 0.. {
                for (p, entries) in sent.lock().unwrap().drain(..) {
                    known.add(p, entries);
                }
                known.forget(&condemned_now);
                let missing: Vec<(Hash, Src)> = reached
                    .iter()
                    .filter(|(h, _)| !known.blobs.contains_key(h))
                    .copied()
                    .collect();
                if missing.is_empty() {
                    break;
                }
                if round == 2 {
                    return Err(Error::Request(format!(
                        "`ckpt gc --remote` condemned packs holding data this push needs (e.g. blob {}) \
                         three times while it pushed; the ref was not changed: run the push again \
                         (when no gc is running)",
                        missing[0].0
                    )));
                }
                let (n, r, p) =
                    resend(&local, &mut enc, &all_states, &missing, &client, &cache, opts, &sent, &condemned_now).await?;
                report.transfer.objects += n;
                report.transfer.raw_bytes += r;
                report.transfer.packs += p;
                condemned_now = read_condemned(&client).await?;
            }
        }
        enc.cache.save();
        drop(_t);

        // Phase E: the ref: the marker (once per name), then an entry
        // per checkpoint, all at once (crate::refs says why no concurrent
        // pusher can lose them).
        let _t = trace::span("push: ref");
        if !marked {
            refs::mark(&client, &target.workspace).await?;
        }
        stream::iter(todo.iter())
            .map(|(_, r, _)| refs::add(&client, &target.workspace, r.hash()))
            .buffer_unordered(client.concurrency())
            .try_collect::<Vec<()>>()
            .await?;
        for (_, r, _) in &todo {
            refs::remember(&client, &cache, &r.hash());
        }
        report.pushed = todo.iter().map(|(c, r, _)| (c.id(), r.id.clone())).collect();
        Ok::<_, Error>(())
    })?;
    report.transfer = std::mem::take(&mut report.transfer).counted(&client.counters, t0.elapsed());
    Ok(report)
}

/// Uploads `missing` again, in new packs (file contents and state
/// snapshots first, then trees and nodes, children before parents): their
/// only copies on the remote are in packs `gc --remote` condemned. Returns
/// (blobs, raw bytes, packs) sent.
#[allow(clippy::too_many_arguments)]
async fn resend(
    local: &Local,
    enc: &mut Encoder<'_>,
    states: &HashMap<Hash, Vec<u8>>,
    missing: &[(Hash, Src)],
    client: &Client,
    cache: &std::path::Path,
    opts: &PushOptions<'_>,
    sent: &Sent,
    avoid: &HashSet<Hash>,
) -> Result<(u64, u64, u64)> {
    let mut wants: Vec<Want> = Vec::new();
    let mut trees: Vec<(Kind, Hash, Vec<u8>)> = Vec::new();
    for (hash, src) in missing {
        let hash = *hash;
        match *src {
            Src::File(size) => wants.push(Want {
                kind: Kind::Object,
                hash,
                size,
            }),
            Src::State => wants.push(Want {
                kind: Kind::State,
                hash,
                size: states.get(&hash).map_or(0, |b| b.len() as u64),
            }),
            Src::Shape(l) => trees.push((Kind::Tree, hash, enc.shape_bytes(&l)?)),
            Src::Node(l) => trees.push((Kind::Mtimes, hash, enc.node_bytes(&l)?)),
        }
    }
    let mut built: Vec<Built> = Vec::new();
    for g in group(wants, opts.settings.pack_target) {
        built.push(build(local, &g, states, avoid, client.keys())?);
    }
    trees.reverse();
    built.extend(tree_packs(
        &trees,
        opts.settings.pack_target,
        avoid,
        client.keys(),
    ));
    let mut total = (0, 0, 0);
    for p in built {
        let (n, r) = upload(client, cache, p, opts.progress, sent).await?;
        total = (total.0 + n, total.1 + r, total.2 + 1);
    }
    Ok(total)
}
