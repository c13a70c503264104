//! `ckpt pull [REMOTE] [ID…]` and `ckpt clone URL[#ID] DIR`: checkpoints
//! from a remote into a store.
//!
//! Nothing becomes visible before it is verified:
//! 1. Trees (without mtimes) and mtimes nodes are fetched level by level
//!    (one batch of range requests per level, grouped by pack), each
//!    checked against its BLAKE3 name and decoded; a node whose local tree
//!    the store already holds is not fetched. The exact local trees are
//!    rebuilt from them ([`crate::trees::rebuild`]) and the root must be
//!    the record's root tree, with no directory nested deeper than a scan
//!    allows ([`ckpt_lib::ops::exchange::tree::MAX_DEPTH`]).
//! 2. Every file content the local store lacks is fetched (adjacent blobs
//!    of a pack in one range request), decompressed, checked against its
//!    BLAKE3 name and length, and added to the store as a pending object;
//!    they are made durable (the store's usual temp → fsync → rename) every
//!    [`Settings::commit_bytes`] (64 MiB) and at the end, so a killed pull keeps what arrived and a
//!    re-run fetches only the rest ([`ckpt_lib::ops::exchange::Import`] does
//!    the storing).
//! 3. The checkpoint's LtHash digest is recomputed from the rebuilt trees
//!    and compared with the record's: a mismatch stops the pull.
//! 4. The agent-state snapshot is applied as a state commit, giving the
//!    local version the record will pin. A pull into a workspace then
//!    restores the latest state to what it was (one more commit), so the
//!    agent's current state is unchanged; a clone keeps the snapshot as its
//!    current state.
//! 5. Only then one catalog transaction adds the trees and the record
//!    ([`ckpt_lib::ops::exchange::Import::add_checkpoint`]).
//!
//! A pulled checkpoint gets the next local sequence number (a clone keeps
//! the number it had where it was made); its parent is the local
//! checkpoint with the remote parent's id, if there is one. Pushing it back
//! gives the same remote id (see [`crate::layout`]), so it is not stored
//! twice.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::Instant;

use ckpt_fs::copytree::Progress;
use ckpt_lib::ops::exchange::tree::{self, Node, Tree};
use ckpt_lib::ops::exchange::{self, Import, Local, StateMode};
use ckpt_lib::ops::json::Schema;
use ckpt_lib::ops::parts::Checkpoint;
use ckpt_lib::ops::Context;
use ckpt_lib::trace;
use ckpt_lib::Hash;
use futures::{stream, StreamExt, TryStreamExt};
use schemars::JsonSchema;
use serde::Serialize;

use crate::client::Client;
use crate::known::{self, Known};
use crate::layout::{self, Record};
use crate::log::history;
use crate::pack::{self, Entry};
use crate::push::records;
use crate::refs;
use crate::remotes;
use crate::report::{remote_local, RemoteIdPair, Transfer};
use crate::trees::{self, MNode, Rebuild, Sub};
use crate::url::RemoteUrl;
use crate::{usage, Error, Result, Settings};

/// Blobs of one pack closer than this are fetched in one range request.
const GAP: u64 = 1 << 20;

/// Fetches blobs, grouped by pack, checking each; calls `sink` with each
/// (hash, raw bytes) as it arrives.
///
/// Up to [`Client::concurrency`] range requests are in flight; what they
/// return is decoded, checked and handed to `sink` by [`decoders`] threads
/// of their own, so the network never waits for the disk and the disk work
/// uses every core. (Decoding inside the stream that drives the requests
/// ran it one range at a time, on one core, and stalled the requests
/// meanwhile.)
pub(crate) async fn fetch_blobs(
    client: &Client,
    known: &Known,
    wants: &[Hash],
    sink: &(dyn Fn(Hash, Vec<u8>) -> Result<()> + Sync),
) -> Result<(u64, u64)> {
    let mut by_pack: HashMap<Hash, Vec<Entry>> = HashMap::new();
    let mut asked: HashSet<Hash> = HashSet::new();
    for h in wants.iter().filter(|h| asked.insert(**h)) {
        let l = known.blobs.get(h).ok_or_else(|| {
            Error::corrupt(format!(
                "blob {h} is named by a checkpoint on {} but no pack holds it",
                client.url.url
            ))
        })?;
        by_pack.entry(l.pack).or_default().push(l.entry);
    }
    let mut ranges: Vec<(Hash, Vec<Entry>)> = Vec::new();
    for (p, mut entries) in by_pack {
        // By offset; an empty blob shares its offset with the blob after
        // it, so blobs are told apart by hash (deduplicated above), never by
        // offset.
        entries.sort_by_key(|e| (e.offset, e.stored_len));
        let mut cur: Vec<Entry> = Vec::new();
        for e in entries {
            if let Some(last) = cur.last() {
                if e.offset > last.offset + last.stored_len + GAP {
                    ranges.push((p, std::mem::take(&mut cur)));
                }
            }
            cur.push(e);
        }
        if !cur.is_empty() {
            ranges.push((p, cur));
        }
    }
    let packs = ranges
        .iter()
        .map(|(p, _)| *p)
        .collect::<HashSet<Hash>>()
        .len() as u64;
    let fetch = |(p, entries): (Hash, Vec<Entry>)| async move {
        let key = layout::pack_key(&p);
        let start = entries[0].offset;
        let last = entries[entries.len() - 1];
        let end = last.offset + last.stored_len;
        let b = client.get_range(&key, start..end).await?;
        if b.len() as u64 != end - start {
            return Err(Error::corrupt(format!(
                "{}: {} bytes instead of {}",
                client.shown("GET (range)", &key),
                b.len(),
                end - start
            )));
        }
        Ok(Fetched {
            key,
            start,
            entries,
            bytes: b,
        })
    };
    let decode = |f: Fetched| -> Result<u64> {
        let shown = client.shown("GET", &f.key);
        for e in &f.entries {
            let at = (e.offset - f.start) as usize;
            let raw = pack::decode_blob(
                client.keys(),
                e,
                &f.bytes[at..at + e.stored_len as usize],
                &shown,
            )?;
            sink(e.hash, raw)?;
        }
        Ok(f.entries.len() as u64)
    };
    let threads = decoders();
    let (tx, rx) = tokio::sync::mpsc::channel::<Fetched>(threads);
    let rx: Queue = std::sync::Mutex::new(rx);
    let handle = tokio::runtime::Handle::current();
    let (fetched, decoded) = tokio::task::block_in_place(|| {
        std::thread::scope(|s| {
            let workers: Vec<_> = (0..threads)
                .map(|_| {
                    s.spawn(|| -> Result<u64> {
                        // However this thread ends (an error, a panic), no
                        // more ranges are queued, so the requests stop.
                        let _stop = CloseOnExit(&rx);
                        let mut n = 0;
                        loop {
                            // Its own statement: the lock is not held while
                            // decoding.
                            let next = lock(&rx).blocking_recv();
                            let Some(f) = next else { return Ok(n) };
                            n += decode(f)?;
                        }
                    })
                })
                .collect();
            let fetched = handle.block_on(async {
                let r = stream::iter(ranges)
                    .map(fetch)
                    .buffer_unordered(client.concurrency())
                    .try_for_each(|f| {
                        let tx = &tx;
                        async move {
                            tx.send(f)
                                .await
                                .map_err(|_| Error::Request("decoding stopped".into()))
                        }
                    })
                    .await;
                drop(tx);
                r
            });
            let decoded: Vec<Result<u64>> = workers
                .into_iter()
                .map(|w| {
                    w.join().unwrap_or_else(|_| {
                        Err(Error::Request("a decoding thread panicked".into()))
                    })
                })
                .collect();
            (fetched, decoded)
        })
    });
    // A decoder's error says what was wrong with the data; the requests'
    // "decoding stopped" only follows from it.
    let mut n = 0;
    for d in decoded {
        n += d?;
    }
    fetched?;
    Ok((n, packs))
}

/// One fetched range of a pack, waiting to be decoded.
struct Fetched {
    key: String,
    start: u64,
    entries: Vec<Entry>,
    bytes: bytes::Bytes,
}

type Queue = std::sync::Mutex<tokio::sync::mpsc::Receiver<Fetched>>;

fn lock(q: &Queue) -> std::sync::MutexGuard<'_, tokio::sync::mpsc::Receiver<Fetched>> {
    q.lock().unwrap_or_else(|p| p.into_inner())
}

/// Closes the decoders' queue when dropped.
struct CloseOnExit<'q>(&'q Queue);

impl Drop for CloseOnExit<'_> {
    fn drop(&mut self) {
        lock(self.0).close();
    }
}

/// Threads that decode, check and store fetched blobs: one per core.
fn decoders() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get())
}

/// What one import did.
#[derive(Default)]
struct Imported {
    done: Vec<(Record, Checkpoint)>,
    transfer: Transfer,
}

/// Imports `recs` (oldest first) into `store` (into a fresh one, a
/// clone's, no object is looked for first).
#[allow(clippy::too_many_arguments)]
fn import(
    store: &Import,
    client: &Client,
    rt: &tokio::runtime::Runtime,
    known: &Known,
    recs: &[Record],
    keep_seq: bool,
    mode: StateMode,
    progress: Option<&Progress>,
) -> Result<Imported> {
    let mut out = Imported::default();
    let mut cache = trees::Cache::load(store.store_dir());
    // Remote id → local seq, for parents.
    let mut local_ids: HashMap<String, u64> = HashMap::new();
    {
        let reader = store.snapshot()?;
        let all = reader.checkpoints()?;
        for (c, r, _) in records(store, &reader, &all, "")? {
            local_ids.insert(r.id, c.seq);
        }
    }
    let raw_files = std::sync::atomic::AtomicU64::new(0);
    let put = |h: Hash, raw: Vec<u8>| -> Result<()> {
        // Into a fresh store, `files` below has no repeats.
        store.put_object(h, &raw)?;
        raw_files.fetch_add(raw.len() as u64, Ordering::Relaxed);
        if let Some(p) = progress {
            p.bytes.fetch_add(raw.len() as u64, Ordering::Relaxed);
            p.entries.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    };
    for rec in recs {
        if local_ids.contains_key(&rec.id) {
            continue;
        }
        let root = rec.root()?;
        // 1. Trees and mtimes nodes, level by level; the local trees rebuilt.
        let t_trees = trace::span("pull: trees");
        let (fresh, files) = if store.has_tree(&root)? {
            (HashMap::new(), Vec::new())
        } else {
            let (fresh, t) = fetch_trees(store, client, rt, known, &mut cache, rec)?;
            out.transfer.objects += t.objects;
            out.transfer.raw_bytes += t.raw_bytes;
            let mut files: Vec<Hash> = Vec::new();
            let mut seen_files: HashSet<Hash> = HashSet::new();
            for bytes in fresh.values() {
                for e in Tree::decode(bytes)?.entries {
                    if let Node::File { hash, .. } = e.node {
                        if seen_files.insert(hash) && store.lacks_object(&hash) {
                            files.push(hash);
                        }
                    }
                }
            }
            (fresh, files)
        };
        if !fresh.is_empty() {
            // The engine's walks recurse: no tree deeper than a scan makes.
            if let Some(p) = store.too_deep(&fresh, root)? {
                return Err(Error::corrupt(format!(
                    "remote checkpoint {} ({}): {} is nested more than {} directories deep, which ckpt does not import; nothing was imported",
                    rec.id,
                    client.shown("GET", &client.record_key(&rec.hash())),
                    String::from_utf8_lossy(&p),
                    tree::MAX_DEPTH
                )));
            }
        }
        drop(t_trees);
        // 2. File contents (and the state snapshot).
        let t_blobs = trace::span("pull: blobs");
        let state_blob = rec.state()?;
        let state_bytes: std::sync::Mutex<Option<Vec<u8>>> = Default::default();
        let (n, packs) = rt.block_on(fetch_blobs(client, known, &files, &|h, raw| {
            let _ = h;
            put(h, raw)
        }))?;
        out.transfer.objects += n;
        out.transfer.packs += packs;
        if let Some(sb) = state_blob {
            rt.block_on(fetch_blobs(client, known, &[sb], &|_, raw| {
                *state_bytes.lock().unwrap() = Some(raw);
                Ok(())
            }))?;
            out.transfer.objects += 1;
        }
        drop(t_blobs);
        store.commit_objects()?;
        // 3. The digest.
        let t_digest = trace::span("pull: digest");
        let mut cp = rec.to_local()?;
        if !store.digest_matches(&cp, &fresh, root)? {
            return Err(Error::corrupt(format!(
                "remote checkpoint {} ({}): its trees do not match its LtHash digest; nothing was imported",
                rec.id,
                client.shown("GET", &client.record_key(&rec.hash()))
            )));
        }
        drop(t_digest);
        // 4. The state.
        let entries = match state_bytes.into_inner().unwrap() {
            Some(b) => layout::decode_state(&b, &rec.id)?,
            None => Vec::new(),
        };
        cp.state_version = store.apply_state(&entries, mode)?;
        // 5. The record.
        cp.parent = rec.parent.as_ref().and_then(|p| local_ids.get(p).copied());
        let new_trees: Vec<(Hash, Vec<u8>)> = fresh.into_iter().collect();
        let seq = keep_seq.then_some(rec.seq);
        let imported = store.add_checkpoint(&new_trees, cp, seq, mode == StateMode::Become)?;
        local_ids.insert(rec.id.clone(), imported.seq);
        out.done.push((rec.clone(), imported));
    }
    cache.save();
    out.transfer.raw_bytes += raw_files.load(Ordering::Relaxed);
    Ok(out)
}

/// Fetches the trees and mtimes nodes of `rec` the store lacks, level by
/// level (one batch of range requests per level), and rebuilds its local
/// trees, checking the root against the record; returns the rebuilt trees
/// and what was fetched. A node whose local tree the store holds (known
/// from `cache`) is not fetched; what the rebuild learns goes into `cache`.
fn fetch_trees(
    store: &Import,
    client: &Client,
    rt: &tokio::runtime::Runtime,
    known: &Known,
    cache: &mut trees::Cache,
    rec: &Record,
) -> Result<(HashMap<Hash, Vec<u8>>, Transfer)> {
    let mut t = Transfer::default();
    let held: HashMap<Hash, (Hash, Hash)> = cache
        .infos
        .iter()
        .filter_map(|(l, i)| Some((i.node?, (*l, i.shape))))
        .collect();
    let mut local: HashMap<Hash, (Hash, Hash)> = HashMap::new();
    let mut fetched = trees::Fetched::default();
    let mut nodes = vec![rec.mtimes()?];
    // Directories whose tree is wanted: (tree, node, index of its record).
    let mut dirs: Vec<(Hash, Hash, usize)> = Vec::new();
    while !nodes.is_empty() || !dirs.is_empty() {
        let mut need: Vec<Hash> = Vec::new();
        let mut expand: Vec<Hash> = Vec::new();
        nodes.sort();
        nodes.dedup();
        for n in nodes.drain(..) {
            if local.contains_key(&n) || fetched.nodes.contains_key(&n) {
                continue;
            }
            if let Some(&(l, s)) = held.get(&n) {
                if store.has_tree(&l)? {
                    local.insert(n, (l, s));
                    continue;
                }
            }
            need.push(n);
            expand.push(n);
        }
        need.extend(
            dirs.iter()
                .map(|d| d.0)
                .filter(|s| !fetched.shapes.contains_key(s)),
        );
        need.sort();
        need.dedup();
        let got: std::sync::Mutex<Vec<(Hash, Vec<u8>)>> = Default::default();
        let (n, _) = rt.block_on(fetch_blobs(client, known, &need, &|h, raw| {
            got.lock().unwrap().push((h, raw));
            Ok(())
        }))?;
        t.objects += n;
        for (h, raw) in got.into_inner().unwrap() {
            t.raw_bytes += raw.len() as u64;
            if trees::is_node(&raw) {
                fetched.nodes.insert(h, MNode::decode(&raw, &h.to_hex())?);
            } else {
                fetched.shapes.insert(h, trees::decode_shape(&raw, &h)?);
            }
        }
        let mut next: Vec<(Hash, Hash, usize)> = Vec::new();
        for (shape, node, at) in dirs.drain(..) {
            let (Some(s), Some(m)) = (fetched.shapes.get(&shape), fetched.nodes.get(&node)) else {
                return Err(Error::corrupt(format!(
                    "remote tree {shape} was not fetched"
                )));
            };
            let children = s.entries.iter().filter_map(|e| match e.node {
                Node::Dir { tree } => Some(tree),
                _ => None,
            });
            for (child, sub) in children.zip(&m.dirs[at].subs) {
                match sub {
                    Sub::Inline(i) => next.push((child, node, *i)),
                    Sub::Node(n) => nodes.push(*n),
                }
            }
        }
        for n in expand {
            let m = fetched.nodes.get(&n).ok_or_else(|| {
                Error::corrupt(format!("remote mtimes node {n} is not an mtimes node"))
            })?;
            next.push((m.shape, n, 0));
        }
        dirs = next;
    }
    let mut r = Rebuild {
        fetched: &fetched,
        local: &local,
        trees: HashMap::new(),
        nodes: HashMap::new(),
    };
    let (root, _) = trees::rebuild(&mut r, &rec.mtimes()?)?;
    if root != rec.root()? {
        return Err(Error::corrupt(format!(
            "remote checkpoint {} ({}): its trees and mtimes do not rebuild its root tree {}; nothing was imported",
            rec.id,
            client.shown("GET", &client.record_key(&rec.hash())),
            rec.identity.root
        )));
    }
    for (n, (l, shape, weight)) in &r.nodes {
        cache.insert(
            *l,
            trees::Info {
                shape: *shape,
                weight: *weight,
                node: Some(*n),
            },
        );
    }
    Ok((r.trees, t))
}

/// Picks records of a history (oldest first, [`crate::log::sort`]) by id:
/// a remote-id prefix (≥ 4 hex digits), `v<seq>` (the number it had where
/// it was made), or `latest` (the last).
fn select<'r>(recs: &'r [Record], rev: &str, url: &str) -> Result<&'r Record> {
    if rev == "latest" || rev == "HEAD" {
        return recs
            .last()
            .ok_or_else(|| usage(format!("{url} has no checkpoints for this workspace")));
    }
    let hits: Vec<&Record> = recs
        .iter()
        .filter(|r| {
            (rev.len() >= 4 && r.id.starts_with(&rev.to_ascii_lowercase()))
                || rev.strip_prefix('v').and_then(|n| n.parse::<u64>().ok()) == Some(r.seq)
        })
        .collect();
    match hits.as_slice() {
        [one] => Ok(one),
        [] => Err(Error::bad_revision(format!(
            "no checkpoint {rev:?} on {url} (see `ckpt log --remote`)"
        ))),
        _ if rev.starts_with('v') => Ok(hits[hits.len() - 1]),
        _ => Err(Error::bad_revision(format!(
            "checkpoint id {rev:?} is ambiguous on {url}; give more digits of the remote id"
        ))),
    }
}

/// What [`pull`] fetches.
#[derive(Clone, Copy, Debug)]
pub struct PullOptions<'a> {
    /// Remote name or URL.
    pub remote: Option<&'a str>,
    /// Workspace name on the remote.
    pub workspace: Option<&'a str>,
    /// Checkpoints (remote-id prefixes, `v<seq>`, `latest`); none: every
    /// checkpoint of the ref this store lacks.
    pub revs: &'a [String],
    /// How to reach the remote.
    pub settings: &'a Settings,
    /// Advanced as blobs arrive.
    pub progress: Option<&'a Progress>,
}

/// What [`pull`] did; serialises as its `--json` form (`pulled` as
/// `{remote_id, id}`, then the transfer fields).
#[derive(Debug, Serialize, JsonSchema)]
pub struct PullReport {
    /// `schema`.
    pub schema: Schema,
    /// URL.
    #[serde(rename = "remote")]
    pub url: String,
    /// Workspace name.
    pub workspace: String,
    /// Imported: (remote id, local id).
    #[serde(serialize_with = "remote_local")]
    #[schemars(with = "Vec<RemoteIdPair<'static>>")]
    pub pulled: Vec<(String, String)>,
    /// Already here.
    pub already: u64,
    /// Wire summary.
    #[serde(flatten)]
    pub transfer: Transfer,
}

/// Pulls checkpoints from a remote into this workspace's store (the files
/// are not touched: restore one afterwards).
pub fn pull(ctx: &Context, opts: &PullOptions<'_>) -> Result<PullReport> {
    let t0 = Instant::now();
    let store = Local::open_for_import(ctx, opts.settings.commit_bytes)?;
    let target = remotes::resolve(&store, opts.remote, opts.workspace)?;
    let cache = known::cache_dir(store.store_dir(), &target.url.url);
    let rt = crate::runtime()?;
    let client = rt.block_on(target.connect(opts.settings, Some(&cache)))?;
    let (recs, known) = rt.block_on(async {
        let Some(recs) = history(&client, Some(&cache), &target.workspace).await? else {
            return Err(usage(format!(
                "{} has no workspace {:?} (see `ckpt log --remote`; names: --workspace NAME)",
                target.url.url, target.workspace
            )));
        };
        let known = Known::load(&client, &cache).await?;
        Ok((recs, known))
    })?;
    let chosen: Vec<Record> = if opts.revs.is_empty() {
        recs.clone()
    } else {
        let mut v: Vec<Record> = Vec::new();
        for r in opts.revs {
            let one = select(&recs, r, &target.url.url)?;
            if !v.iter().any(|x| x.id == one.id) {
                v.push(one.clone());
            }
        }
        v
    };
    let total = chosen.len() as u64;
    let imported = import(
        &store,
        &client,
        &rt,
        &known,
        &chosen,
        false,
        StateMode::KeepLatest,
        opts.progress,
    )?;
    Ok(PullReport {
        schema: Schema,
        url: target.url.url.clone(),
        workspace: target.workspace,
        already: total - imported.done.len() as u64,
        pulled: imported
            .done
            .iter()
            .map(|(r, c)| (r.id.clone(), c.id()))
            .collect(),
        transfer: imported.transfer.counted(&client.counters, t0.elapsed()),
    })
}

/// What [`clone`] makes.
#[derive(Clone, Copy, Debug)]
pub struct CloneOptions<'a> {
    /// `URL[#ID]`.
    pub source: &'a str,
    /// The new workspace directory (new or empty).
    pub dir: &'a Path,
    /// Workspace name on the remote (None: the only one there).
    pub workspace: Option<&'a str>,
    /// Where to keep the new store (None: the usual rule).
    pub store: Option<&'a Path>,
    /// The key file of an encrypted remote (recorded with `origin`);
    /// [`Settings::secret`] comes first.
    pub key_file: Option<&'a Path>,
    /// How to reach the remote.
    pub settings: &'a Settings,
    /// Advanced as blobs arrive.
    pub progress: Option<&'a Progress>,
}

/// What [`clone`] did; serialises as its `--json` form (`cloned`: the
/// local id; `checkpoint`: the remote record as in `log --remote`; then
/// the transfer fields).
#[derive(Debug, Serialize, JsonSchema)]
pub struct CloneReport {
    /// `schema`.
    pub schema: Schema,
    /// URL.
    #[serde(rename = "remote")]
    pub url: String,
    /// Workspace name on the remote.
    pub workspace: String,
    /// Its local id in the new store.
    #[serde(rename = "cloned")]
    pub id: String,
    /// The record cloned.
    #[serde(rename = "checkpoint", serialize_with = "crate::log::record")]
    #[schemars(with = "crate::log::RecordJson<'static>")]
    pub record: Record,
    /// The new workspace.
    #[serde(serialize_with = "ckpt_lib::ops::json::with::path")]
    #[schemars(with = "String")]
    pub to: PathBuf,
    /// Its store.
    #[serde(serialize_with = "ckpt_lib::ops::json::with::path")]
    #[schemars(with = "String")]
    pub store: PathBuf,
    /// Files and symlinks written.
    pub files: u64,
    /// Directories written.
    pub dirs: u64,
    /// Bytes of file content written.
    pub bytes: u64,
    /// Wire summary.
    #[serde(flatten)]
    pub transfer: Transfer,
}

/// Clones checkpoint `#ID` (default: the latest) of a remote workspace
/// into a new workspace at `dir`, with its own store, whose remote
/// `origin` is the source (URL and workspace name). On failure the new
/// store and whatever was written to `dir` are removed.
pub fn clone(ctx: &Context, opts: &CloneOptions<'_>) -> Result<CloneReport> {
    let t0 = Instant::now();
    let (url, rev) = match opts.source.split_once('#') {
        Some((u, r)) if !r.is_empty() => (u, r),
        Some((u, _)) => (u, "latest"),
        None => (opts.source, "latest"),
    };
    let url = RemoteUrl::parse(url)?;
    if let Some(w) = opts.workspace {
        layout::check_name(w)?;
    }
    let dest = exchange::clone_into(ctx, opts.dir)?;
    let key_file = opts.key_file.map(|k| ckpt_lib::ops::normalize(&ctx.abs(k)));
    let rt = crate::runtime()?;
    let client = rt.block_on(Client::connect(
        &url,
        opts.settings,
        false,
        key_file.as_deref(),
        None,
    ))?;
    // Everything is read before anything local is created.
    let (name, recs) = rt.block_on(async {
        let name = match opts.workspace {
            Some(w) => w.to_string(),
            None => {
                let names = refs::workspaces(&client).await?;
                match names.as_slice() {
                    [one] => one.clone(),
                    [] => {
                        return Err(usage(format!(
                            "{} holds no workspace (push one first); nothing was changed",
                            url.url
                        )))
                    }
                    _ => {
                        return Err(usage(format!(
                            "{} holds several workspaces ({}); choose one with --workspace NAME (nothing was changed)",
                            url.url,
                            names.join(", ")
                        )))
                    }
                }
            }
        };
        let Some(recs) = history(&client, None, &name).await? else {
            return Err(usage(format!(
                "{} has no workspace {name:?}; nothing was changed",
                url.url
            )));
        };
        Ok((name, recs))
    })?;
    let rec = select(&recs, rev, &url.url)?.clone();
    let place = dest.place(ctx, opts.store)?;
    let run = || -> Result<CloneReport> {
        let store = place.create(ctx, opts.settings.commit_bytes)?;
        let cache = known::cache_dir(store.store_dir(), &url.url);
        let known = rt.block_on(Known::load(&client, &cache))?;
        let imported = import(
            &store,
            &client,
            &rt,
            &known,
            std::slice::from_ref(&rec),
            true,
            StateMode::Become,
            opts.progress,
        )?;
        let (_, cp) = imported
            .done
            .first()
            .cloned()
            .ok_or_else(|| Error::Request("internal error: nothing was imported".into()))?;
        // Every content was hashed as it arrived, in this operation.
        let rep = place.materialize(&store, &cp.id())?;
        // The source becomes `origin`, with the workspace name, so `push`
        // and `pull` work at once (as after `git clone`).
        remotes::set_origin(
            place.store_dir(),
            remotes::RemoteEntry {
                url: url.url.clone(),
                workspace: Some(name.clone()),
                encrypt: client.keys().is_some(),
                key_file: key_file.clone(),
            },
        )?;
        Ok(CloneReport {
            schema: Schema,
            url: url.url.clone(),
            workspace: name.clone(),
            record: rec.clone(),
            id: cp.id(),
            to: place.root().to_path_buf(),
            store: place.store_dir().to_path_buf(),
            files: rep.files,
            dirs: rep.dirs,
            bytes: rep.bytes,
            transfer: imported.transfer.counted(&client.counters, t0.elapsed()),
        })
    };
    run().inspect_err(|_| place.undo())
}
