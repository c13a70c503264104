//! Trees on a remote (remote format 2): what a directory holds, named
//! without its modification times, so two workspaces (or two checkpoints)
//! holding the same files share every tree; and the modification times
//! apart, in *mtimes nodes*. Encodings in `docs/FORMAT.md` ("Remotes").
//!
//! - A **shape** is the local tree encoding ([`Tree`]) of a directory with
//!   every `mtime_ns` 0 and each subdirectory entry naming the *child's
//!   shape*. It is a pure function of the local tree, so equal content,
//!   modes and names give equal shapes, whoever pushed them and when.
//! - An **mtimes node** holds the mtimes of a *region*: one directory, and
//!   whole regions of some of its subdirectories inlined (in entry order,
//!   while the region stays within [`NODE_BUDGET`] entries); every other
//!   subdirectory is its own node, named by hash. A checkpoint's record
//!   names the node of its root. So a push after a one-file edit sends the
//!   nodes on the changed path (each at most about [`NODE_BUDGET`] mtimes),
//!   and an unchanged subtree's node is shared by every checkpoint holding
//!   it.
//! - **Exact rebuild.** The local tree of a directory is its shape with the
//!   node's mtimes put back and each subdirectory naming the rebuilt
//!   child's local tree ([`rebuild`]): a pull checks the rebuilt root
//!   against the record's root hash (a Merkle hash over every entry, mtimes
//!   included) and the LtHash digest, so what it imports is exactly what
//!   was pushed, or nothing is imported.
//!
//! [`Encoder`] computes shapes and nodes from local trees, remembering what
//! it computed in a cache of the store (`<store>/remote-cache/trees`, see
//! [`Cache`]) so a push after a small change reads only the trees on the
//! changed path. The cache maps a local tree to facts derived from it
//! (shape, region weight, a node hash known to rebuild it), so it can never
//! be stale, only missing or damaged, and then it is recomputed. A node hash
//! from the cache is only used where the remote holds that node; nodes sent
//! are always encoded from the local trees.
//!
//! No recursion follows the directory depth: a workspace may be as deep as
//! its paths allow, so every walk here keeps an explicit stack.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ckpt_lib::ops::exchange::tree::{put_varint, unzigzag, zigzag, Entry, Node, Reader, Tree};
use ckpt_lib::Hash;

use crate::{corrupt, Result};

/// Entries (mtimes) an mtimes node aims to hold at most: a subdirectory's
/// region is inlined while the node stays within this (a directory with
/// more entries of its own is a node alone).
pub const NODE_BUDGET: u64 = 1024;

const NODE_MAGIC: &[u8; 4] = b"CKM1";

/// How a subdirectory appears in a node's directory record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sub {
    /// Inlined: its record is the given index in [`MNode::dirs`].
    Inline(usize),
    /// Its own node, by hash.
    Node(Hash),
}

/// One directory of a node's region.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DirRec {
    /// The mtime of each entry, in entry order.
    pub mtimes: Vec<i64>,
    /// Each subdirectory entry, in entry order.
    pub subs: Vec<Sub>,
}

/// A decoded mtimes node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MNode {
    /// Shape of the node's directory.
    pub shape: Hash,
    /// The region's directories in pre-order; `dirs[0]` is the node's own.
    pub dirs: Vec<DirRec>,
}

impl MNode {
    /// Entries (mtimes) in the region.
    pub fn weight(&self) -> u64 {
        self.dirs.iter().map(|d| d.mtimes.len() as u64).sum()
    }

    /// The nodes it names.
    pub fn children(&self) -> impl Iterator<Item = Hash> + '_ {
        self.dirs.iter().flat_map(|d| {
            d.subs.iter().filter_map(|s| match s {
                Sub::Node(h) => Some(*h),
                Sub::Inline(_) => None,
            })
        })
    }

    /// The encoding:
    ///
    /// ```text
    /// mnode := "CKM1" [32]:shape varint:n_dirs dir*n_dirs mtime*
    /// dir   := varint:n_entries varint:n_subdirs sub*n_subdirs
    /// sub   := 0x00 (inlined: its dir comes later, in pre-order) | 0x01 [32]:node
    /// mtime := varint:zigzag(mtime - previous mtime)   (the first: minus 0)
    /// ```
    ///
    /// with the mtimes of every dir, in the order of the dirs.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(40 + self.dirs.len() * 4 + self.weight() as usize * 3);
        b.extend_from_slice(NODE_MAGIC);
        b.extend_from_slice(&self.shape.0);
        put_varint(&mut b, self.dirs.len() as u64);
        for d in &self.dirs {
            put_varint(&mut b, d.mtimes.len() as u64);
            put_varint(&mut b, d.subs.len() as u64);
            for s in &d.subs {
                match s {
                    Sub::Inline(_) => b.push(0),
                    Sub::Node(h) => {
                        b.push(1);
                        b.extend_from_slice(&h.0);
                    }
                }
            }
        }
        let mut prev = 0i64;
        for m in self.dirs.iter().flat_map(|d| &d.mtimes) {
            put_varint(&mut b, zigzag(m.wrapping_sub(prev)));
            prev = *m;
        }
        b
    }

    /// Decodes a node, checking its structure; `what` names it in errors.
    pub fn decode(bytes: &[u8], what: &str) -> Result<MNode> {
        let bad = |why: &str| corrupt(format!("remote mtimes node {what}: {why}"));
        let mut r = Reader::new(bytes);
        let parse = |r: &mut Reader<'_>| -> ckpt_lib::Result<(Hash, Vec<RawDir>)> {
            if r.take(4)? != NODE_MAGIC {
                return Err(ckpt_lib::Error::Corrupt("bad magic".into()));
            }
            let shape = r.hash()?;
            let n = r.varint()? as usize;
            let mut raw = Vec::with_capacity(n.min(bytes.len()));
            for _ in 0..n {
                let entries = r.varint()?;
                let k = r.varint()? as usize;
                let mut subs = Vec::with_capacity(k.min(bytes.len()));
                for _ in 0..k {
                    subs.push(match r.u8()? {
                        0 => None,
                        1 => Some(r.hash()?),
                        _ => return Err(ckpt_lib::Error::Corrupt("bad subdirectory tag".into())),
                    });
                }
                raw.push((entries, subs));
            }
            Ok((shape, raw))
        };
        let (shape, raw) = parse(&mut r).map_err(|e| bad(&e.to_string()))?;
        if raw.is_empty() {
            return Err(bad("no directory"));
        }
        // Link inlined subdirectories to their records, in pre-order.
        let mut dirs: Vec<DirRec> = vec![DirRec::default(); raw.len()];
        let mut next = 1;
        let mut stack: Vec<(usize, usize)> = vec![(0, 0)];
        while let Some(&(d, pos)) = stack.last() {
            let Some(s) = raw[d].1.get(pos) else {
                stack.pop();
                continue;
            };
            stack.last_mut().expect("non-empty").1 += 1;
            match s {
                Some(h) => dirs[d].subs.push(Sub::Node(*h)),
                None => {
                    if next >= raw.len() {
                        return Err(bad("an inlined directory has no record"));
                    }
                    dirs[d].subs.push(Sub::Inline(next));
                    stack.push((next, 0));
                    next += 1;
                }
            }
        }
        if next != raw.len() {
            return Err(bad("a directory record is not reached"));
        }
        let mut prev = 0i64;
        for (d, (n, _)) in dirs.iter_mut().zip(&raw) {
            let n = *n as usize;
            if n > bytes.len() {
                return Err(bad("truncated"));
            }
            d.mtimes.reserve(n);
            for _ in 0..n {
                let z = r.varint().map_err(|e| bad(&e.to_string()))?;
                prev = prev.wrapping_add(unzigzag(z));
                d.mtimes.push(prev);
            }
        }
        if !r.at_end() {
            return Err(bad("trailing bytes"));
        }
        Ok(MNode { shape, dirs })
    }
}

/// A directory record as read: entries, and each subdirectory's node (None:
/// inlined).
type RawDir = (u64, Vec<Option<Hash>>);

/// Whether `bytes` are an mtimes node (else a shape).
pub fn is_node(bytes: &[u8]) -> bool {
    bytes.starts_with(NODE_MAGIC)
}

/// Decodes a shape: a tree whose mtimes are all 0.
pub fn decode_shape(bytes: &[u8], what: &Hash) -> Result<Tree> {
    let t = Tree::decode(bytes).map_err(|e| corrupt(format!("remote tree {what}: {e}")))?;
    if t.entries.iter().any(|e| e.mtime_ns != 0) {
        return Err(corrupt(format!(
            "remote tree {what} carries mtimes (remote format 1?)"
        )));
    }
    Ok(t)
}

/// What a local tree is on a remote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Info {
    /// Its shape.
    pub shape: Hash,
    /// Entries of its region (what inlining it costs its parent's node).
    pub weight: u64,
    /// An mtimes node that rebuilds it, when one was computed or pulled.
    pub node: Option<Hash>,
}

/// The cache of [`Info`] by local tree hash (`<store>/remote-cache/trees`):
///
/// ```text
/// cache := "CKRC" u32:version=1 u64:n ([32]:tree [32]:shape [32]:node-or-zero u64:weight)*n
///          [32]:blake3(all preceding bytes)
/// ```
///
/// Written whole (temp + rename); a damaged one is ignored and rebuilt.
#[derive(Default)]
pub struct Cache {
    path: Option<PathBuf>,
    /// Local tree → info.
    pub infos: HashMap<Hash, Info>,
    dirty: bool,
}

const CACHE_MAGIC: &[u8; 4] = b"CKRC";
const CACHE_RECORD: usize = 32 * 3 + 8;

impl Cache {
    /// The cache of a store.
    pub fn load(store_root: &Path) -> Cache {
        let path = store_root.join("remote-cache").join("trees");
        let infos = std::fs::read(&path)
            .ok()
            .and_then(|b| Cache::decode(&b))
            .unwrap_or_default();
        Cache {
            path: Some(path),
            infos,
            dirty: false,
        }
    }

    fn decode(b: &[u8]) -> Option<HashMap<Hash, Info>> {
        if b.len() < 16 + 32 || &b[..4] != CACHE_MAGIC {
            return None;
        }
        let (body, sum) = b.split_at(b.len() - 32);
        if Hash::of(body).0 != sum || u32::from_le_bytes(b[4..8].try_into().ok()?) != 1 {
            return None;
        }
        let n = u64::from_le_bytes(b[8..16].try_into().ok()?) as usize;
        if body.len() != 16 + n.checked_mul(CACHE_RECORD)? {
            return None;
        }
        let h = |s: &[u8]| Hash(s.try_into().expect("32"));
        Some(
            body[16..]
                .chunks_exact(CACHE_RECORD)
                .map(|r| {
                    let node = h(&r[64..96]);
                    (
                        h(&r[..32]),
                        Info {
                            shape: h(&r[32..64]),
                            node: (node != Hash::default()).then_some(node),
                            weight: u64::from_le_bytes(r[96..104].try_into().expect("8")),
                        },
                    )
                })
                .collect(),
        )
    }

    /// Records what is known of local tree `tree`.
    pub fn insert(&mut self, tree: Hash, info: Info) {
        if self.infos.insert(tree, info) != Some(info) {
            self.dirty = true;
        }
    }

    /// Writes the cache if it changed (a failure only costs recomputing).
    pub fn save(&self) {
        let Some(path) = self.path.as_ref().filter(|_| self.dirty) else {
            return;
        };
        let mut b = Vec::with_capacity(16 + self.infos.len() * CACHE_RECORD + 32);
        b.extend_from_slice(CACHE_MAGIC);
        b.extend_from_slice(&1u32.to_le_bytes());
        b.extend_from_slice(&(self.infos.len() as u64).to_le_bytes());
        for (t, i) in &self.infos {
            b.extend_from_slice(&t.0);
            b.extend_from_slice(&i.shape.0);
            b.extend_from_slice(&i.node.unwrap_or_default().0);
            b.extend_from_slice(&i.weight.to_le_bytes());
        }
        let sum = Hash::of(&b);
        b.extend_from_slice(&sum.0);
        crate::known::write_cache(path.parent().expect("in remote-cache"), "trees", &b);
    }
}

/// What [`Encoder::derive`] finds of a local tree.
struct Derived {
    shape: Tree,
    weight: u64,
    /// (child tree, inlined?) per subdirectory, in entry order.
    subs: Vec<(Hash, bool)>,
}

/// Computes shapes and mtimes nodes of local trees (see the module doc).
pub struct Encoder<'a> {
    load: &'a dyn Fn(&Hash) -> ckpt_lib::Result<Tree>,
    trees: HashMap<Hash, Arc<Tree>>,
    /// [`NODE_BUDGET`] (smaller in tests, to have many nodes).
    budget: u64,
    /// What is known, seeded from the store's cache.
    pub cache: Cache,
}

impl<'a> Encoder<'a> {
    /// An encoder reading local trees with `load`.
    pub fn new(load: &'a dyn Fn(&Hash) -> ckpt_lib::Result<Tree>, cache: Cache) -> Self {
        Encoder {
            load,
            trees: HashMap::new(),
            budget: NODE_BUDGET,
            cache,
        }
    }

    /// A local tree.
    pub fn tree(&mut self, h: &Hash) -> Result<Arc<Tree>> {
        if let Some(t) = self.trees.get(h) {
            return Ok(t.clone());
        }
        let t = Arc::new((self.load)(h)?);
        self.trees.insert(*h, t.clone());
        Ok(t)
    }

    /// The shape and weight of local tree `h`.
    pub fn info(&mut self, h: &Hash) -> Result<Info> {
        if let Some(i) = self.cache.infos.get(h) {
            return Ok(*i);
        }
        // Children before parents, so each derive finds its children's.
        let mut stack = vec![(*h, false)];
        while let Some((t, children_done)) = stack.pop() {
            if self.cache.infos.contains_key(&t) {
                continue;
            }
            if !children_done {
                stack.push((t, true));
                for e in &self.tree(&t)?.entries {
                    if let Node::Dir { tree } = e.node {
                        if !self.cache.infos.contains_key(&tree) {
                            stack.push((tree, false));
                        }
                    }
                }
                continue;
            }
            let d = self.derive(&t)?;
            let info = Info {
                shape: d.shape.encode_and_hash().0,
                weight: d.weight,
                node: None,
            };
            self.cache.insert(t, info);
        }
        Ok(self.cache.infos[h])
    }

    /// The shape's bytes.
    pub fn shape_bytes(&mut self, h: &Hash) -> Result<Vec<u8>> {
        Ok(self.derive(h)?.shape.encode())
    }

    /// The subdirectories of local tree `h` (child tree, inlined in `h`'s
    /// region?), in entry order.
    pub fn subdirs(&mut self, h: &Hash) -> Result<Vec<(Hash, bool)>> {
        Ok(self.derive(h)?.subs)
    }

    /// The shape of `h`, its region's weight, and its subdirectories (the
    /// one place the inlining rule is applied).
    fn derive(&mut self, h: &Hash) -> Result<Derived> {
        let t = self.tree(h)?;
        let mut shape = Tree {
            entries: Vec::with_capacity(t.entries.len()),
        };
        let mut weight = t.entries.len() as u64;
        let mut subs = Vec::new();
        for e in &t.entries {
            let mut e = e.clone();
            e.mtime_ns = 0;
            if let Node::Dir { tree } = e.node {
                let c = self.info(&tree)?;
                let inline = weight + c.weight <= self.budget;
                if inline {
                    weight += c.weight;
                }
                subs.push((tree, inline));
                e.node = Node::Dir { tree: c.shape };
            }
            shape.entries.push(e);
        }
        Ok(Derived {
            shape,
            weight,
            subs,
        })
    }

    /// The hash of an mtimes node rebuilding `h` (from the cache, else
    /// computed).
    pub fn node(&mut self, h: &Hash) -> Result<Hash> {
        if let Some(n) = self.info(h)?.node {
            return Ok(n);
        }
        // The nodes the region names before the region's own.
        let mut stack = vec![(*h, false)];
        while let Some((t, named_done)) = stack.pop() {
            if self.info(&t)?.node.is_some() {
                continue;
            }
            if named_done {
                let n = Hash::of(&self.node_bytes(&t)?);
                self.set_node(&t, n);
                continue;
            }
            stack.push((t, true));
            let mut region = vec![t];
            while let Some(d) = region.pop() {
                for (child, inline) in self.subdirs(&d)? {
                    if inline {
                        region.push(child);
                    } else if self.info(&child)?.node.is_none() {
                        stack.push((child, false));
                    }
                }
            }
        }
        Ok(self.info(h)?.node.expect("just computed"))
    }

    /// Records that node `n` rebuilds `h`.
    pub fn set_node(&mut self, h: &Hash, n: Hash) {
        if let Some(i) = self.cache.infos.get(h).copied() {
            self.cache.insert(*h, Info { node: Some(n), ..i });
        }
    }

    /// Encodes the mtimes node of `h`'s region (its own subdirectory nodes
    /// named by [`Encoder::node`]).
    pub fn node_bytes(&mut self, h: &Hash) -> Result<Vec<u8>> {
        let mut node = MNode {
            shape: self.info(h)?.shape,
            dirs: Vec::new(),
        };
        self.region(h, &mut node.dirs)?;
        Ok(node.encode())
    }

    /// Appends the records of `h`'s region to `dirs`, in pre-order.
    fn region(&mut self, h: &Hash, dirs: &mut Vec<DirRec>) -> Result<()> {
        // (directory, where its parent names it: record and subdirectory).
        let mut stack: Vec<(Hash, Option<(usize, usize)>)> = vec![(*h, None)];
        while let Some((d, named)) = stack.pop() {
            let at = dirs.len();
            if let Some((parent, i)) = named {
                dirs[parent].subs[i] = Sub::Inline(at);
            }
            let t = self.tree(&d)?;
            dirs.push(DirRec {
                mtimes: t.entries.iter().map(|e| e.mtime_ns).collect(),
                subs: Vec::new(),
            });
            let mut inlined = Vec::new();
            for (i, (child, inline)) in self.subdirs(&d)?.into_iter().enumerate() {
                let sub = if inline {
                    inlined.push((child, Some((at, i))));
                    Sub::Inline(usize::MAX)
                } else {
                    Sub::Node(self.node(&child)?)
                };
                dirs[at].subs.push(sub);
            }
            stack.extend(inlined.into_iter().rev());
        }
        Ok(())
    }
}

/// What a pull fetched: nodes and shapes by hash.
#[derive(Default)]
pub struct Fetched {
    /// Mtimes nodes.
    pub nodes: HashMap<Hash, MNode>,
    /// Shapes.
    pub shapes: HashMap<Hash, Tree>,
}

/// Rebuilds local trees from fetched nodes and shapes.
pub struct Rebuild<'a> {
    /// What was fetched.
    pub fetched: &'a Fetched,
    /// Nodes not fetched because the store holds their tree: node → (local
    /// tree, shape).
    pub local: &'a HashMap<Hash, (Hash, Hash)>,
    /// Rebuilt local trees (hash → encoding).
    pub trees: HashMap<Hash, Vec<u8>>,
    /// Rebuilt nodes: node → (local tree, shape, weight).
    pub nodes: HashMap<Hash, (Hash, Hash, u64)>,
}

/// Rebuilds the local tree of node `node` (see [`Rebuild`]); returns it
/// and the node's shape. An explicit stack, children before parents.
pub fn rebuild(r: &mut Rebuild<'_>, node: &Hash) -> Result<(Hash, Hash)> {
    /// One step of the rebuild.
    enum Step {
        /// A node: rebuilt unless known.
        Node(Hash),
        /// Directory `at` of node `node`'s region, whose shape is `shape`:
        /// its subdirectories first (`ready` false), then itself.
        Dir {
            node: Hash,
            shape: Hash,
            at: usize,
            ready: bool,
        },
        /// After its region: the node's local tree is its first directory's.
        NodeEnd(Hash),
    }
    let fetched = r.fetched;
    let node_of = |n: &Hash| {
        fetched
            .nodes
            .get(n)
            .ok_or_else(|| corrupt(format!("remote mtimes node {n} was not fetched")))
    };
    // Rebuilt directories: (node, index of its record) → local tree.
    let mut dirs: HashMap<(Hash, usize), Hash> = HashMap::new();
    let mut stack = vec![Step::Node(*node)];
    while let Some(step) = stack.pop() {
        match step {
            Step::Node(n) => {
                if r.local.contains_key(&n) || r.nodes.contains_key(&n) {
                    continue;
                }
                let m = node_of(&n)?;
                stack.push(Step::NodeEnd(n));
                stack.push(Step::Dir {
                    node: n,
                    shape: m.shape,
                    at: 0,
                    ready: false,
                });
            }
            Step::NodeEnd(n) => {
                let m = node_of(&n)?;
                let l = dirs[&(n, 0)];
                r.nodes.insert(n, (l, m.shape, m.weight()));
            }
            Step::Dir {
                node,
                shape,
                at,
                ready,
            } => {
                let m = node_of(&node)?;
                let s = fetched
                    .shapes
                    .get(&shape)
                    .ok_or_else(|| corrupt(format!("remote tree {shape} was not fetched")))?;
                let d = &m.dirs[at];
                let subdirs = s.entries.iter().filter_map(|e| match e.node {
                    Node::Dir { tree } => Some(tree),
                    _ => None,
                });
                if !ready {
                    if d.mtimes.len() != s.entries.len() || d.subs.len() != subdirs.clone().count()
                    {
                        return Err(corrupt(format!(
                            "remote mtimes node {node} does not fit remote tree {shape}"
                        )));
                    }
                    stack.push(Step::Dir {
                        node,
                        shape,
                        at,
                        ready: true,
                    });
                    for (child, sub) in subdirs.zip(&d.subs) {
                        stack.push(match sub {
                            Sub::Inline(i) => Step::Dir {
                                node,
                                shape: child,
                                at: *i,
                                ready: false,
                            },
                            Sub::Node(n) => Step::Node(*n),
                        });
                    }
                    continue;
                }
                let mut entries = Vec::with_capacity(s.entries.len());
                let mut subs = d.subs.iter();
                for (e, mtime) in s.entries.iter().zip(&d.mtimes) {
                    let local = match &e.node {
                        Node::Dir { tree: child } => {
                            let l = match subs.next().expect("counted") {
                                Sub::Inline(i) => dirs[&(node, *i)],
                                Sub::Node(n) => {
                                    let (l, s) = known_node(r, n)?;
                                    if s != *child {
                                        return Err(corrupt(format!(
                                            "remote mtimes node {n} is not of remote tree {child}"
                                        )));
                                    }
                                    l
                                }
                            };
                            Node::Dir { tree: l }
                        }
                        n => n.clone(),
                    };
                    entries.push(Entry {
                        name: e.name.clone(),
                        mode: e.mode,
                        mtime_ns: *mtime,
                        node: local,
                    });
                }
                let (h, bytes) = Tree { entries }.encode_and_hash();
                r.trees.insert(h, bytes);
                dirs.insert((node, at), h);
            }
        }
    }
    known_node(r, node)
}

/// The local tree and shape of a node rebuilt or held locally.
fn known_node(r: &Rebuild<'_>, n: &Hash) -> Result<(Hash, Hash)> {
    if let Some(&(l, s)) = r.local.get(n) {
        return Ok((l, s));
    }
    r.nodes
        .get(n)
        .map(|&(l, s, _)| (l, s))
        .ok_or_else(|| corrupt(format!("remote mtimes node {n} was not rebuilt")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A local tree store built from a random directory structure.
    fn build(
        spec: &[(u8, u8, i64)],
        depth: usize,
        at: &mut usize,
        trees: &mut HashMap<Hash, Tree>,
    ) -> Hash {
        let mut entries = Vec::new();
        let mut i = 0;
        while *at < spec.len() && i < 40 {
            let (kind, name, mtime) = spec[*at];
            *at += 1;
            i += 1;
            let node = match kind % 5 {
                0 if depth < 5 => Node::Dir {
                    tree: build(spec, depth + 1, at, trees),
                },
                1 => Node::Symlink { target: vec![name] },
                4 if depth > 0 => break,
                _ => Node::File {
                    size: name as u64,
                    hash: Hash::of(&[name % 7]),
                },
            };
            entries.push(Entry {
                name: format!("n{name}").into_bytes(),
                mode: 0o644 + u32::from(kind % 2),
                mtime_ns: mtime,
                node,
            });
        }
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        entries.dedup_by(|a, b| a.name == b.name);
        let (h, bytes) = Tree { entries }.encode_and_hash();
        trees.insert(h, Tree::decode(&bytes).unwrap());
        h
    }

    /// Pushes `root` the way push does (every node and shape), then
    /// rebuilds it from those alone.
    fn round_trip(root: Hash, trees: &HashMap<Hash, Tree>, budget: u64) -> (Hash, Fetched) {
        let load = |h: &Hash| Ok::<_, ckpt_lib::Error>(trees[h].clone());
        let mut enc = Encoder::new(&load, Cache::default());
        enc.budget = budget;
        let mut f = Fetched::default();
        for l in trees.keys() {
            let b = enc.shape_bytes(l).unwrap();
            f.shapes.insert(Hash::of(&b), decode_shape(&b, l).unwrap());
            let n = enc.node_bytes(l).unwrap();
            let h = Hash::of(&n);
            let m = MNode::decode(&n, "t").unwrap();
            assert_eq!(m.encode(), n, "canonical");
            assert!(m.weight() <= budget.max(trees[l].entries.len() as u64));
            f.nodes.insert(h, m);
        }
        let top = enc.node(&root).unwrap();
        let local = HashMap::new();
        let mut r = Rebuild {
            fetched: &f,
            local: &local,
            trees: HashMap::new(),
            nodes: HashMap::new(),
        };
        let (l, _) = rebuild(&mut r, &top).unwrap();
        for (h, b) in &r.trees {
            assert_eq!(Tree::decode(b).unwrap(), trees[h]);
        }
        (l, f)
    }

    proptest! {
        #[test]
        fn rebuild_gives_back_the_exact_local_trees(
            spec in proptest::collection::vec((any::<u8>(), any::<u8>(), any::<i64>()), 0..400),
            budget in 0u64..64,
        ) {
            let mut trees = HashMap::new();
            let root = build(&spec, 0, &mut 0, &mut trees);
            let (l, f) = round_trip(root, &trees, budget);
            prop_assert_eq!(l, root);
            // Budget 0: every directory is a node of its own.
            if budget == 0 {
                prop_assert!(f.nodes.values().all(|m| m.dirs.len() == 1));
            }
        }
    }

    #[test]
    fn same_content_other_mtimes_share_every_shape() {
        let spec: Vec<(u8, u8, i64)> = (0..3000u32)
            .map(|i| {
                (
                    (i % 9) as u8,
                    (i % 251) as u8,
                    1_700_000_000_000_000_000 + i as i64,
                )
            })
            .collect();
        let later: Vec<(u8, u8, i64)> = spec.iter().map(|&(k, n, m)| (k, n, m + 77_777)).collect();
        let (mut ta, mut tb) = (HashMap::new(), HashMap::new());
        let a = build(&spec, 0, &mut 0, &mut ta);
        let b = build(&later, 0, &mut 0, &mut tb);
        assert_ne!(a, b);
        let (_, fa) = round_trip(a, &ta, NODE_BUDGET);
        let (_, fb) = round_trip(b, &tb, NODE_BUDGET);
        let sa: std::collections::BTreeSet<_> = fa.shapes.keys().collect();
        let sb: std::collections::BTreeSet<_> = fb.shapes.keys().collect();
        assert_eq!(sa, sb);
        // Every node holding an mtime differs.
        assert!(fa
            .nodes
            .iter()
            .filter(|(_, m)| m.weight() > 0)
            .all(|(n, _)| !fb.nodes.contains_key(n)));
    }

    #[test]
    fn damaged_nodes_are_refused() {
        let m = MNode {
            shape: Hash::of(b"s"),
            dirs: vec![
                DirRec {
                    mtimes: vec![5, -3, i64::MAX, i64::MIN],
                    subs: vec![Sub::Inline(1), Sub::Node(Hash::of(b"n"))],
                },
                DirRec {
                    mtimes: vec![0],
                    subs: vec![],
                },
            ],
        };
        let b = m.encode();
        assert_eq!(MNode::decode(&b, "t").unwrap(), m);
        for cut in 0..b.len() {
            assert!(MNode::decode(&b[..cut], "t").is_err(), "cut at {cut}");
        }
        let mut extra = b.clone();
        extra.push(0);
        assert!(MNode::decode(&extra, "t").is_err());
    }
}
