//! Garbage collection: delete trees and objects no checkpoint references.
//!
//! Mark: walk every checkpoint's root tree (each shared subtree once) and
//! collect the live trees and objects. Sweep, in this order — each step is
//! safe to be interrupted by a crash:
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
//! Agent state: every state version that no checkpoint pins (the
//! `state_version`s in the catalog, derived here, never stored twice) and
//! that is not the latest is collected from `state.redb` in one state-store
//! transaction ([`crate::store::state::gc`]), before the sweep above.

use std::collections::HashSet;
use std::sync::Arc;

use serde::Serialize;

use crate::store::index::{DirRecord, Index, UNKNOWN_TREE};
use crate::store::tree::Node;
use crate::store::Store;
use crate::{Hash, Result};
use ckpt_copy::fs;

/// What gc removed (or, with `dry_run`, would remove).
#[derive(Debug, Default, Serialize)]
pub struct GcReport {
    /// Checkpoints kept.
    pub checkpoints: u64,
    /// Objects still referenced.
    pub objects_live: u64,
    /// Objects removed.
    pub objects_removed: u64,
    /// Bytes those objects occupied.
    pub bytes_freed: u64,
    /// Trees removed from the catalog.
    pub trees_removed: u64,
    /// Files in the object directory that are not objects (left alone).
    pub strays: Vec<String>,
    /// Agent-state collection (None: no state store).
    pub state: Option<crate::store::state::StateGcReport>,
}

/// The trees and objects reachable from every checkpoint.
pub fn live_set(store: &Store) -> Result<(HashSet<Hash>, HashSet<Hash>, u64)> {
    live_set_excluding(store, &[])
}

/// The trees and objects reachable from every checkpoint except those in
/// `exclude` (sequence numbers): what would stay live if they were deleted.
pub fn live_set_excluding(
    store: &Store,
    exclude: &[u64],
) -> Result<(HashSet<Hash>, HashSet<Hash>, u64)> {
    let reader = store.catalog.reader()?;
    let mut checkpoints = reader.checkpoints()?;
    checkpoints.retain(|c| !exclude.contains(&c.seq));
    let mut trees = HashSet::new();
    let mut objects = HashSet::new();
    let mut stack: Vec<Hash> = checkpoints.iter().map(|c| c.root).collect();
    while let Some(h) = stack.pop() {
        if !trees.insert(h) {
            continue;
        }
        for e in reader.tree(&h)?.entries {
            match e.node {
                Node::Dir { tree } => stack.push(tree),
                Node::File { hash, .. } => {
                    objects.insert(hash);
                }
                Node::Symlink { .. } => {}
            }
        }
    }
    Ok((trees, objects, checkpoints.len() as u64))
}

/// Runs gc.
pub fn gc(store: &Store, dry_run: bool) -> Result<GcReport> {
    gc_excluding(store, &[], dry_run)
}

/// Runs gc as if the checkpoints in `exclude` were deleted (retention's
/// dry run uses this to report exactly what dropping them would free; a
/// real run deletes their records first, so the exclusion changes nothing).
pub fn gc_excluding(store: &Store, exclude: &[u64], dry_run: bool) -> Result<GcReport> {
    let (live_trees, live_objects, checkpoints) = live_set_excluding(store, exclude)?;
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
        .filter(|h| !live_trees.contains(h))
        .collect();
    let (objects, manifests, strays) = store.objects.list_all()?;
    // A live banded file keeps its manifest and every band it names. A
    // manifest that cannot be read stops gc before anything is removed.
    let mut live_stored = live_objects.clone();
    let mut dead_manifests = Vec::new();
    for h in &manifests {
        if live_objects.contains(h) {
            if let Some(m) = store.objects.manifest(h)? {
                live_stored.extend(m.bands);
            }
        } else {
            dead_manifests.push(*h);
        }
    }
    let dead_objects: Vec<Hash> = objects
        .iter()
        .copied()
        .filter(|h| !live_stored.contains(h))
        .collect();
    let mut report = GcReport {
        checkpoints,
        objects_live: (objects.len() - dead_objects.len()) as u64,
        objects_removed: dead_objects.len() as u64,
        trees_removed: dead_trees.len() as u64,
        strays: strays.iter().map(|p| p.display().to_string()).collect(),
        state,
        ..Default::default()
    };
    for h in &dead_objects {
        if let Ok(m) = fs::stat_at(
            store.objects.dir_fd(),
            &crate::store::objects::object_name(h),
        ) {
            report.bytes_freed += m.size;
        }
    }
    if dry_run || (dead_trees.is_empty() && dead_objects.is_empty() && dead_manifests.is_empty()) {
        return Ok(report);
    }
    let next = generation + 1;
    let mut index = store.load_index()?;
    prune_index(&mut index, &live_trees, &live_objects);
    index.generation = next;
    index.save_durable(&store.index_path())?;
    ckpt_fault::point("gc.after_index");
    store.catalog.remove_trees(&dead_trees, next)?;
    ckpt_fault::point("gc.after_generation");
    for h in &dead_manifests {
        store.objects.remove_manifest(h)?;
    }
    for h in &dead_objects {
        store.objects.remove(h)?;
        ckpt_fault::point("gc.after_delete");
    }
    Ok(report)
}

/// Drops index entries that reference dead objects and marks records whose
/// tree is dead (or lost an entry) for rebuilding.
fn prune_index(index: &mut Index, live_trees: &HashSet<Hash>, live_objects: &HashSet<Hash>) {
    let entry_live = |n: &Node| match n {
        Node::File { hash, .. } => live_objects.contains(hash),
        _ => true,
    };
    let pruned: Vec<(Vec<u8>, Arc<DirRecord>)> = index
        .dirs
        .iter()
        .filter(|(_, rec)| {
            !(live_trees.contains(&rec.tree)
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
