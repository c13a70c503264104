//! Garbage collection: delete trees and objects no checkpoint references,
//! and [`Reach`], the one answer to "what does each checkpoint reach" that
//! gc, its dry run, retention's preview and `ckpt du` (the CLI's and the
//! UI's, [`crate::store::usage`]) all read, so what they report is what gc
//! does.
//!
//! Mark ([`Reach::of`]): walk every checkpoint's root tree (each shared
//! subtree once, or twice when `du` asks who owns what) and collect the live
//! trees and file contents; then every band manifest on disk whose content
//! is live keeps every band it names. A stored file is live exactly when
//! [`Reach::object_owner`] or [`Reach::manifest_owner`] says so; nothing
//! else decides it. Sweep, in this order — each step is safe to be
//! interrupted by a crash:
//! 1. write a new stat index, durably, without entries that point at dead
//!    objects or trees, stamped with the next *generation*;
//! 2. in one catalog transaction, delete the dead trees and set the
//!    catalog's generation to match (until this commits, the index's
//!    generation is ahead and it is discarded on load: a full re-hash, never
//!    a dangling reference);
//! 3. unlink the dead objects (a crash leaves some behind; the next gc
//!    removes them).
//!
//! The store lock is held throughout, so no save can add references
//! concurrently.
//!
//! Sizes are on-disk: a stored file counts its allocated blocks
//! ([`allocated`]), so a sparse band counts what it occupies, not its
//! length, and a band manifest counts too. A file hard-linked from
//! elsewhere (a fork's store imports its origin's objects as hard links)
//! counts in full in each store; unlinking one name frees its blocks only
//! once the last name is gone.
//!
//! Agent state: every state version that no checkpoint pins (the
//! `state_version`s in the catalog, derived here, never stored twice) and
//! that is not the latest is collected from `state.redb` in one state-store
//! transaction ([`crate::store::state::gc`]), before the sweep above.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use rustix::fs::AtFlags;
use serde::Serialize;

use crate::store::catalog::Checkpoint;
use crate::store::index::{DirRecord, Index, UNKNOWN_TREE};
use crate::store::objects::{manifest_name, object_name};
use crate::store::tree::Node;
use crate::store::Store;
use crate::{Hash, Result};

/// What gc removed (or, with `dry_run`, would remove).
#[derive(Debug, Default, Serialize, schemars::JsonSchema)]
pub struct SweepReport {
    /// Checkpoints kept.
    pub checkpoints: u64,
    /// Objects still referenced.
    pub objects_live: u64,
    /// Objects removed (band manifests are not counted here, but their
    /// bytes are in `bytes_freed`).
    pub objects_removed: u64,
    /// On-disk (allocated) bytes of the objects and band manifests removed.
    pub bytes_freed: u64,
    /// Trees removed from the catalog.
    pub trees_removed: u64,
    /// Files in the object directory that are not objects (left alone).
    pub strays: Vec<String>,
    /// Agent-state collection (None: no state store).
    pub state: Option<crate::store::state::StateGcReport>,
}

/// Who reaches something: one checkpoint's sequence number, or [`SHARED`].
pub type Owner = u64;
/// Reached by more than one checkpoint (or, in a walk that does not track
/// owners, by any).
pub const SHARED: Owner = u64::MAX;

fn merge(slot: &mut Owner, owner: Owner) {
    if *slot != owner {
        *slot = SHARED;
    }
}

/// What the checkpoints of a store reach, and what its object directory
/// holds. Built by [`Reach::of`]; read by gc, retention and `du`.
#[derive(Debug)]
pub struct Reach {
    /// The checkpoints walked, oldest first.
    pub checkpoints: Vec<Checkpoint>,
    /// Live trees, with who reaches them.
    pub trees: HashMap<Hash, Owner>,
    /// File contents named by live trees, with who reaches them.
    pub files: HashMap<Hash, Owner>,
    /// Bands named by the manifests of live contents, with who reaches them.
    pub bands: HashMap<Hash, Owner>,
    /// Plain objects in `objects/` (bands included).
    pub stored_objects: Vec<Hash>,
    /// Band manifests in `objects/`, by the content they describe.
    pub stored_manifests: Vec<Hash>,
    /// Other names in `objects/`.
    pub strays: Vec<PathBuf>,
}

impl Reach {
    /// Walks every checkpoint except those in `exclude` (sequence numbers:
    /// what stays reached if they were deleted) and lists `objects/`. With
    /// `owners`, each tree, content and band records the one checkpoint
    /// that reaches it, or [`SHARED`]; without, everything is [`SHARED`]
    /// and each tree is read once (gc needs only the live sets). A band
    /// manifest of a live content that cannot be read is an error, so gc
    /// stops before removing anything.
    pub fn of(store: &Store, exclude: &[u64], owners: bool) -> Result<Reach> {
        let reader = store.catalog.reader()?;
        let mut checkpoints = reader.checkpoints()?;
        checkpoints.retain(|c| !exclude.contains(&c.seq));
        let mut trees: HashMap<Hash, Owner> = HashMap::new();
        let mut files: HashMap<Hash, Owner> = HashMap::new();
        for cp in &checkpoints {
            let mut stack = vec![(cp.root, !owners)];
            while let Some((t, shared)) = stack.pop() {
                let owner = if shared { SHARED } else { cp.seq };
                match trees.get(&t).copied() {
                    Some(SHARED) => continue,
                    Some(o) if o == owner => continue,
                    // First reached from another checkpoint: walk it again
                    // as shared, which makes everything under it shared.
                    Some(_) if !shared => {
                        stack.push((t, true));
                        continue;
                    }
                    _ => {}
                }
                trees.insert(t, owner);
                for e in reader.tree(&t)?.entries {
                    match e.node {
                        Node::Dir { tree } => stack.push((tree, shared)),
                        Node::File { hash, .. } => {
                            merge(files.entry(hash).or_insert(owner), owner);
                        }
                        Node::Symlink { .. } => {}
                    }
                }
            }
        }
        drop(reader);
        let (stored_objects, stored_manifests, strays) = store.objects.list_all()?;
        let mut bands: HashMap<Hash, Owner> = HashMap::new();
        for h in &stored_manifests {
            if let Some(&owner) = files.get(h) {
                if let Some(m) = store.objects.manifest(h)? {
                    for b in m.bands {
                        merge(bands.entry(b).or_insert(owner), owner);
                    }
                }
            }
        }
        Ok(Reach {
            checkpoints,
            trees,
            files,
            bands,
            stored_objects,
            stored_manifests,
            strays,
        })
    }

    /// Who keeps the plain object `h` (a whole content, or a band of a live
    /// manifest, or both); None: gc removes it.
    pub fn object_owner(&self, h: &Hash) -> Option<Owner> {
        match (self.files.get(h), self.bands.get(h)) {
            (Some(&a), Some(&b)) => Some(if a == b { a } else { SHARED }),
            (Some(&a), None) | (None, Some(&a)) => Some(a),
            (None, None) => None,
        }
    }

    /// Who keeps the band manifest of content `h`; None: gc removes it.
    pub fn manifest_owner(&self, h: &Hash) -> Option<Owner> {
        self.files.get(h).copied()
    }

    /// The stored objects and manifests gc removes, and their on-disk
    /// bytes.
    pub fn garbage(&self, store: &Store) -> Garbage {
        let mut g = Garbage::default();
        for h in &self.stored_objects {
            if self.object_owner(h).is_none() {
                g.bytes += allocated(store, &object_name(h));
                g.objects.push(*h);
            }
        }
        for h in &self.stored_manifests {
            if self.manifest_owner(h).is_none() {
                g.bytes += allocated(store, &manifest_name(h));
                g.manifests.push(*h);
            }
        }
        g
    }
}

/// What gc removes ([`Reach::garbage`]).
#[derive(Debug, Default)]
pub struct Garbage {
    /// Plain objects.
    pub objects: Vec<Hash>,
    /// Band manifests, by content.
    pub manifests: Vec<Hash>,
    /// On-disk bytes of both.
    pub bytes: u64,
}

/// On-disk bytes of the file `name` below `objects/` (its allocated blocks;
/// 0 if it is gone).
pub fn allocated(store: &Store, name: &[u8]) -> u64 {
    rustix::fs::statat(store.objects.dir_fd(), name, AtFlags::SYMLINK_NOFOLLOW)
        .map_or(0, |st| blocks_bytes(&st))
}

/// `st_blocks` in bytes (always 512-byte units, whatever the block size).
#[allow(clippy::unnecessary_cast)]
pub fn blocks_bytes(st: &rustix::fs::Stat) -> u64 {
    st.st_blocks as u64 * 512
}

/// Runs gc.
pub fn gc(store: &Store, dry_run: bool) -> Result<SweepReport> {
    gc_excluding(store, &[], dry_run)
}

/// Runs gc as if the checkpoints in `exclude` were deleted (retention's
/// dry run uses this to report exactly what dropping them would free; a
/// real run deletes their records first, so the exclusion changes nothing).
pub fn gc_excluding(store: &Store, exclude: &[u64], dry_run: bool) -> Result<SweepReport> {
    let reach = Reach::of(store, exclude, false)?;
    let state = crate::store::state::gc(
        &store.state,
        &store.catalog.reader()?.checkpoints()?,
        dry_run,
    )?;
    ckpt_fault::point("gc.after_state_gc");
    let (all_trees, generation) = {
        let r = store.catalog.reader()?;
        (r.tree_hashes()?, r.generation()?)
    };
    let dead_trees: Vec<Hash> = all_trees
        .into_iter()
        .filter(|h| !reach.trees.contains_key(h))
        .collect();
    let dead = reach.garbage(store);
    let report = SweepReport {
        checkpoints: reach.checkpoints.len() as u64,
        objects_live: (reach.stored_objects.len() - dead.objects.len()) as u64,
        objects_removed: dead.objects.len() as u64,
        bytes_freed: dead.bytes,
        trees_removed: dead_trees.len() as u64,
        strays: reach
            .strays
            .iter()
            .map(|p| p.display().to_string())
            .collect(),
        state,
    };
    if dry_run || (dead_trees.is_empty() && dead.objects.is_empty() && dead.manifests.is_empty()) {
        return Ok(report);
    }
    let next = generation + 1;
    let mut index = store.load_index()?;
    prune_index(&mut index, &reach.trees, &reach.files);
    index.generation = next;
    index.save_durable(&store.index_path())?;
    ckpt_fault::point("gc.after_index");
    store.catalog.remove_trees(&dead_trees, next)?;
    ckpt_fault::point("gc.after_generation");
    for h in &dead.manifests {
        store.objects.remove_manifest(h)?;
    }
    for h in &dead.objects {
        store.objects.remove(h)?;
        ckpt_fault::point("gc.after_delete");
    }
    Ok(report)
}

/// Drops index entries that reference dead objects and marks records whose
/// tree is dead (or lost an entry) for rebuilding.
fn prune_index(
    index: &mut Index,
    live_trees: &HashMap<Hash, Owner>,
    live_files: &HashMap<Hash, Owner>,
) {
    let entry_live = |n: &Node| match n {
        Node::File { hash, .. } => live_files.contains_key(hash),
        _ => true,
    };
    let pruned: Vec<(Vec<u8>, Arc<DirRecord>)> = index
        .dirs
        .iter()
        .filter(|(_, rec)| {
            !(live_trees.contains_key(&rec.tree)
                && rec.entries.iter().all(|e| entry_live(&e.entry.node)))
        })
        .map(|(p, rec)| {
            let entries = rec
                .entries
                .iter()
                .filter(|e| entry_live(&e.entry.node))
                .cloned()
                .collect();
            let rec = DirRecord {
                tree: UNKNOWN_TREE,
                entries,
                exact_names: false,
            };
            (p.clone(), Arc::new(rec))
        })
        .collect();
    index.dirs.extend(pruned);
}
