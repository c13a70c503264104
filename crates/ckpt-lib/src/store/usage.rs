//! Space accounting (`ckpt du`): how big the store is, how many bytes each
//! checkpoint alone holds, and what gc would free now.
//!
//! Every figure comes from [`Reach`], the same answer to "what does each
//! checkpoint reach" that gc acts on (bands of banded files included), so:
//! - `unreferenced_*` is exactly what `ckpt gc` removes now;
//! - a checkpoint's `unique_*` is exactly what deleting it alone and then
//!   running gc removes on top of that (the stored files it reaches and no
//!   other checkpoint does).
//!
//! Sizes are on-disk: allocated blocks, so a sparse band counts what it
//! occupies (see [`crate::store::gc`] for hard-linked objects). Read-only:
//! takes the catalog read view under the store lock the caller holds.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;

use serde::Serialize;

use crate::store::gc::{allocated, Reach, SHARED};
use crate::store::objects::{manifest_name, object_name};
use crate::store::Store;
use crate::Result;

/// One checkpoint's share of the store.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct CheckpointUsage {
    /// Sequence number (JSON: `seq` and the id, `id`).
    #[serde(flatten, serialize_with = "seq_and_id")]
    #[schemars(with = "SeqAndId")]
    pub seq: u64,
    /// On-disk bytes of the objects (and band manifests) no other
    /// checkpoint reaches: what deleting this one alone, then gc, frees.
    pub unique_bytes: u64,
    /// Number of those objects (band manifests not counted).
    pub unique_objects: u64,
    /// Bytes this checkpoint added to the store when it was saved.
    pub new_bytes: u64,
}

/// A checkpoint's sequence number and its id (`v12`), as `ckpt du --json`
/// shows them. Here rather than in `ops::json` because a store module may
/// not use the layer above it (`tests/layers.rs`).
#[derive(Serialize, schemars::JsonSchema)]
struct SeqAndId {
    seq: u64,
    id: String,
}

fn seq_and_id<S: serde::Serializer>(seq: &u64, s: S) -> std::result::Result<S::Ok, S::Error> {
    SeqAndId {
        seq: *seq,
        id: format!("v{seq}"),
    }
    .serialize(s)
}

/// The whole store. Every size is on-disk (allocated) bytes.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct Usage {
    /// Every file ckpt keeps in the store directory.
    pub store_bytes: u64,
    /// Files in `objects/` (objects and band manifests).
    pub object_bytes: u64,
    /// Objects in `objects/` (band manifests not counted).
    pub objects: u64,
    /// The catalog database.
    pub catalog_bytes: u64,
    /// The agent-state database (0 if none).
    pub state_bytes: u64,
    /// Per checkpoint, oldest first.
    pub checkpoints: Vec<CheckpointUsage>,
    /// Objects no checkpoint reaches (what `ckpt gc` would remove).
    pub unreferenced_objects: u64,
    /// Their bytes, with the band manifests gc would remove.
    pub unreferenced_bytes: u64,
}

/// Computes [`Usage`].
pub fn usage(store: &Store) -> Result<Usage> {
    let reach = Reach::of(store, &[], true)?;
    // Per owner: (bytes, objects).
    let mut per: HashMap<u64, (u64, u64)> = HashMap::new();
    let mut object_bytes = 0;
    let mut unreferenced_objects = 0;
    let mut unreferenced_bytes = 0;
    let mut count = |owner: Option<u64>, size: u64, object: u64| {
        object_bytes += size;
        match owner {
            None => {
                unreferenced_objects += object;
                unreferenced_bytes += size;
            }
            Some(SHARED) => {}
            Some(seq) => {
                let e = per.entry(seq).or_default();
                e.0 += size;
                e.1 += object;
            }
        }
    };
    for h in &reach.stored_objects {
        count(reach.object_owner(h), allocated(store, &object_name(h)), 1);
    }
    for h in &reach.stored_manifests {
        count(
            reach.manifest_owner(h),
            allocated(store, &manifest_name(h)),
            0,
        );
    }
    let checkpoints = reach
        .checkpoints
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
    let file_size = |name: &str| {
        std::fs::symlink_metadata(store.root.join(name)).map_or(0, |m| m.blocks() * 512)
    };
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
        objects: reach.stored_objects.len() as u64,
        catalog_bytes,
        state_bytes,
        checkpoints,
        unreferenced_objects,
        unreferenced_bytes,
    })
}
