//! Space accounting (`ckpt du`): how big the store is, how many bytes each
//! checkpoint alone holds (what deleting just it would free), and what gc
//! would free now.
//!
//! "Unique to a checkpoint" counts the objects referenced by that checkpoint
//! and by no other, at their content size. One pass over the trees: each
//! tree is walked once when first reached; a tree reached again from another
//! checkpoint makes every object under it shared (that walk, too, happens
//! once per tree). Read-only: takes the catalog read view under the store
//! lock the caller holds.

use std::collections::HashMap;

use serde::Serialize;

use crate::store::tree::Node;
use crate::store::Store;
use crate::{Hash, Result};

/// One checkpoint's share of the store.
#[derive(Debug, Serialize)]
pub struct CheckpointUsage {
    /// Sequence number.
    pub seq: u64,
    /// Bytes of objects no other checkpoint references.
    pub unique_bytes: u64,
    /// Number of those objects.
    pub unique_objects: u64,
    /// Bytes this checkpoint added to the store when it was saved.
    pub new_bytes: u64,
}

/// The whole store.
#[derive(Debug, Serialize)]
pub struct Usage {
    /// Apparent size of every file in the store directory.
    pub store_bytes: u64,
    /// Bytes in `objects/`.
    pub object_bytes: u64,
    /// Files in `objects/`.
    pub objects: u64,
    /// The catalog database.
    pub catalog_bytes: u64,
    /// The agent-state database (0 if none).
    pub state_bytes: u64,
    /// Per checkpoint, oldest first.
    pub checkpoints: Vec<CheckpointUsage>,
    /// Objects no checkpoint references (what `ckpt gc` would free).
    pub unreferenced_objects: u64,
    /// Their bytes.
    pub unreferenced_bytes: u64,
}

const SHARED: u64 = u64::MAX;

/// Computes [`Usage`].
pub fn usage(store: &Store) -> Result<Usage> {
    let r = store.catalog.reader()?;
    let cps = r.checkpoints()?;
    // Owner of each tree/object: a checkpoint seq, or SHARED.
    let mut tree_owner: HashMap<Hash, u64> = HashMap::new();
    let mut obj_owner: HashMap<Hash, (u64, u64)> = HashMap::new();
    for cp in &cps {
        let mut stack = vec![(cp.root, false)];
        while let Some((t, shared)) = stack.pop() {
            let owner = if shared { SHARED } else { cp.seq };
            match tree_owner.get(&t).copied() {
                Some(SHARED) => continue,
                Some(o) if o == owner => continue,
                // First reached from another checkpoint: walk it again as
                // shared, which makes everything under it shared.
                Some(_) if !shared => {
                    stack.push((t, true));
                    continue;
                }
                _ => {}
            }
            tree_owner.insert(t, owner);
            for e in r.tree(&t)?.entries {
                match e.node {
                    Node::Dir { tree } => stack.push((tree, shared)),
                    Node::File { hash, size } => {
                        let slot = obj_owner.entry(hash).or_insert((owner, size));
                        if slot.0 != owner {
                            slot.0 = SHARED;
                        }
                    }
                    Node::Symlink { .. } => {}
                }
            }
        }
    }
    let mut per: HashMap<u64, (u64, u64)> = HashMap::new();
    for (owner, size) in obj_owner.values() {
        if *owner != SHARED {
            let e = per.entry(*owner).or_default();
            e.0 += size;
            e.1 += 1;
        }
    }
    let checkpoints = cps
        .iter()
        .map(|c| {
            let (b, n) = per.get(&c.seq).copied().unwrap_or_default();
            CheckpointUsage {
                seq: c.seq,
                unique_bytes: b,
                unique_objects: n,
                new_bytes: c.stats.new_bytes,
            }
        })
        .collect();
    drop(r);
    let (objects, _strays) = store.objects.list()?;
    let mut object_bytes = 0;
    let mut unreferenced_objects = 0;
    let mut unreferenced_bytes = 0;
    for h in &objects {
        let size = ckpt_copy::fs::stat_at(
            store.objects.dir_fd(),
            &crate::store::objects::object_name(h),
        )
        .map_or(0, |m| m.size);
        object_bytes += size;
        if !obj_owner.contains_key(h) {
            unreferenced_objects += 1;
            unreferenced_bytes += size;
        }
    }
    let file_size = |name: &str| std::fs::metadata(store.root.join(name)).map_or(0, |m| m.len());
    let catalog_bytes = file_size("catalog.redb");
    let state_bytes = file_size("state.redb");
    let other = [
        "index",
        "index.delta",
        "CKPT_STORE",
        "lock",
        "state.redb.lock",
        "reserve",
        crate::store::verified::FILE,
    ]
    .iter()
    .map(|n| file_size(n))
    .sum::<u64>();
    Ok(Usage {
        store_bytes: object_bytes + catalog_bytes + state_bytes + other,
        object_bytes,
        objects: objects.len() as u64,
        catalog_bytes,
        state_bytes,
        checkpoints,
        unreferenced_objects,
        unreferenced_bytes,
    })
}
