//! The in-memory multi-version map: every retained version of every key.
//!
//! Owns [`MemState`]: an ordered map `key -> Chain`, where a chain is the key's retained
//! entries `(commit version, value or tombstone)` in strictly ascending version order,
//! plus the set of garbage-collected version ranges. Invariants:
//! - a chain is never empty; its last entry is the key's latest write (a tombstone if the
//!   latest write was a delete), and GC never removes it unless it is a tombstone older than
//!   every live snapshot (then the key is absent everywhere anyone can still look);
//! - the value of key `k` at readable version `v` is the last chain entry with version ≤ v
//!   (absent if none or if that entry is a tombstone);
//! - only the commit leader mutates chains (under the store's write lock), so validation
//!   done under the read lock by the leader sees a stable latest state;
//! - a version is readable iff it is ≤ latest and not inside a collected range.
//!
//! Readers never copy the map: a transaction keeps only its snapshot number and looks
//! entries up on demand, so `begin` is O(1) whatever the state size.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::Bound;
use std::sync::Arc;

use crate::error::{show_key, ConflictKind, Error};

/// A stored value: `None` is a tombstone (the key was deleted by that commit).
pub(crate) type Val = Option<Arc<[u8]>>;

/// Retained entries of one key, ascending by version, never empty.
#[derive(Debug, Clone, Default)]
pub(crate) struct Chain {
    pub(crate) entries: Vec<(u64, Val)>,
}

impl Chain {
    /// Latest entry (version, value) of this key.
    #[inline]
    pub(crate) fn latest(&self) -> &(u64, Val) {
        self.entries.last().expect("chain is never empty")
    }

    /// The entry visible at `version`: the last one with entry version ≤ `version`.
    #[inline]
    pub(crate) fn at(&self, version: u64) -> Option<&(u64, Val)> {
        let last = self.entries.last()?;
        if last.0 <= version {
            return Some(last);
        }
        let idx = self.entries.partition_point(|e| e.0 <= version);
        if idx == 0 {
            None
        } else {
            Some(&self.entries[idx - 1])
        }
    }

    /// Visible live value at `version` with the version that wrote it.
    #[inline]
    pub(crate) fn visible(&self, version: u64) -> Option<(u64, &Arc<[u8]>)> {
        match self.at(version) {
            Some((v, Some(val))) => Some((*v, val)),
            _ => None,
        }
    }
}

/// One validated commit: its version and its writes (key → value or tombstone).
#[derive(Debug, Clone)]
pub(crate) struct CommitRecord {
    pub(crate) version: u64,
    pub(crate) writes: Vec<(Vec<u8>, Val)>,
}

/// The keys a transaction read, packed into one buffer: a read costs no allocation of
/// its own (tracked reads are the hot path of read-mostly transactions).
#[derive(Debug, Default)]
pub(crate) struct KeyList {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl KeyList {
    pub(crate) fn push(&mut self, key: &[u8]) {
        self.bytes.extend_from_slice(key);
        self.ends.push(self.bytes.len());
    }

    pub(crate) fn len(&self) -> usize {
        self.ends.len()
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &[u8]> + '_ {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts
            .zip(self.ends.iter())
            .map(|(a, &b)| &self.bytes[a..b])
    }
}

/// What a transaction depended on, checked at commit.
#[derive(Debug, Default)]
pub(crate) struct Intent {
    pub(crate) snapshot: u64,
    pub(crate) reads: KeyList,
    pub(crate) scans: Vec<Vec<u8>>,
    pub(crate) writes: BTreeMap<Vec<u8>, Val>,
}

/// Result of planning a GC: entries to delete and the new collected ranges.
#[derive(Debug, Default)]
pub(crate) struct GcPlan {
    /// (key, version) rows to delete.
    pub(crate) removals: Vec<(Vec<u8>, u64)>,
    /// Keys whose chain becomes empty.
    pub(crate) keys_removed: usize,
    /// The complete new collected-range set (start → end inclusive).
    pub(crate) collected: BTreeMap<u64, u64>,
    /// How many versions become unreadable by this GC.
    pub(crate) versions_collected: u64,
}

/// The in-memory state (see module doc). Chains live in a hash map for point lookups
/// (the hot path: one hash + one compare); an ordered set of the same keys (shared `Arc`
/// allocations) serves scans, diff and GC. Both always hold exactly the same keys.
#[derive(Debug, Default)]
pub(crate) struct MemState {
    chains: HashMap<Arc<[u8]>, Chain, foldhash::fast::RandomState>,
    order: BTreeSet<Arc<[u8]>>,
    /// Garbage-collected version ranges, start → end (inclusive), disjoint.
    pub(crate) collected: BTreeMap<u64, u64>,
}

/// Iterate the map entries whose key starts with `prefix`.
pub(crate) fn prefix_range<'a, V>(
    map: &'a BTreeMap<Vec<u8>, V>,
    prefix: &'a [u8],
) -> impl Iterator<Item = (&'a Vec<u8>, &'a V)> + 'a {
    map.range::<[u8], _>((Bound::Included(prefix), Bound::Unbounded))
        .take_while(move |(k, _)| k.starts_with(prefix))
}

impl MemState {
    /// The chain of `key`, if it has any retained entry.
    #[inline]
    pub(crate) fn chain(&self, key: &[u8]) -> Option<&Chain> {
        self.chains.get(key)
    }

    /// All chains in key order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&[u8], &Chain)> + '_ {
        self.order.iter().map(|k| (&**k, &self.chains[k]))
    }

    /// Chains whose key starts with `prefix`, in key order.
    pub(crate) fn prefix<'a>(
        &'a self,
        prefix: &'a [u8],
    ) -> impl Iterator<Item = (&'a [u8], &'a Chain)> + 'a {
        self.order
            .range::<[u8], _>((Bound::Included(prefix), Bound::Unbounded))
            .take_while(move |k| k.starts_with(prefix))
            .map(|k| (&**k, &self.chains[k]))
    }

    /// Install a whole chain (used when loading; `chain` must be non-empty).
    pub(crate) fn insert_chain(&mut self, key: &[u8], chain: Chain) {
        debug_assert!(!chain.entries.is_empty());
        let k: Arc<[u8]> = Arc::from(key);
        self.order.insert(k.clone());
        self.chains.insert(k, chain);
    }

    /// Number of keys with a retained entry.
    #[allow(dead_code)]
    pub(crate) fn key_count(&self) -> usize {
        self.chains.len()
    }

    /// Is `version` collected (not readable although ≤ latest)?
    pub(crate) fn is_collected(&self, version: u64) -> bool {
        match self.collected.range(..=version).next_back() {
            Some((_, &end)) => version <= end,
            None => false,
        }
    }

    /// Check an intent against the latest in-memory state plus the writes accepted earlier
    /// in the same commit group (`overlay`: key → version). First committer wins.
    pub(crate) fn validate(
        &self,
        intent: &Intent,
        overlay: &BTreeMap<Vec<u8>, u64>,
    ) -> Result<(), Error> {
        let snap = intent.snapshot;
        let check_key = |key: &[u8], kind: ConflictKind| -> Result<(), Error> {
            let newer = overlay
                .get(key)
                .copied()
                .or_else(|| self.chain(key).map(|c| c.latest().0).filter(|&v| v > snap));
            match newer {
                Some(by) => Err(Error::Conflict {
                    key: show_key(key),
                    kind,
                    snapshot: snap,
                    by_version: by,
                }),
                None => Ok(()),
            }
        };
        for key in intent.reads.iter() {
            check_key(key, ConflictKind::Read)?;
        }
        for key in intent.writes.keys() {
            check_key(key, ConflictKind::Write)?;
        }
        for prefix in &intent.scans {
            let conflict = prefix_range(overlay, prefix)
                .map(|(k, &v)| (k.as_slice(), v))
                .next()
                .or_else(|| {
                    self.prefix(prefix)
                        .map(|(k, c)| (k, c.latest().0))
                        .find(|&(_, v)| v > snap)
                });
            if let Some((k, by)) = conflict {
                return Err(Error::Conflict {
                    key: show_key(k),
                    kind: ConflictKind::Scan,
                    snapshot: snap,
                    by_version: by,
                });
            }
        }
        Ok(())
    }

    /// Apply a validated commit (versions must be applied in increasing order).
    pub(crate) fn apply(&mut self, rec: &CommitRecord) {
        for (key, val) in &rec.writes {
            match self.chains.get_mut(key.as_slice()) {
                Some(chain) => {
                    debug_assert!(chain.latest().0 < rec.version);
                    chain.entries.push((rec.version, val.clone()));
                }
                None => self.insert_chain(
                    key,
                    Chain {
                        entries: vec![(rec.version, val.clone())],
                    },
                ),
            }
        }
    }

    /// Plan a GC that keeps exactly the versions in `retained` (sorted, readable, includes
    /// latest) readable. Tombstones at the head of a chain are dropped only when not newer
    /// than `min_active` (the oldest live snapshot, or latest), so commit validation of every
    /// live transaction still sees them.
    pub(crate) fn plan_gc(&self, retained: &BTreeSet<u64>, latest: u64, min_active: u64) -> GcPlan {
        let retained_vec: Vec<u64> = retained.iter().copied().collect();
        let mut plan = GcPlan::default();
        let mut keep_flags: Vec<bool> = Vec::new();
        for (key, chain) in self.iter() {
            let n = chain.entries.len();
            keep_flags.clear();
            keep_flags.resize(n, false);
            for (i, flag) in keep_flags.iter_mut().enumerate() {
                let v = chain.entries[i].0;
                let next = chain.entries.get(i + 1).map_or(u64::MAX, |e| e.0);
                let idx = retained_vec.partition_point(|&r| r < v);
                *flag = i + 1 == n || (idx < retained_vec.len() && retained_vec[idx] < next);
            }
            // Drop leading tombstones no live snapshot can need for conflict detection.
            for (flag, (v, val)) in keep_flags.iter_mut().zip(&chain.entries) {
                if !*flag {
                    continue;
                }
                if val.is_none() && *v <= min_active {
                    *flag = false;
                } else {
                    break;
                }
            }
            let mut kept = 0;
            for (i, &keep) in keep_flags.iter().enumerate() {
                if keep {
                    kept += 1;
                } else {
                    plan.removals.push((key.to_vec(), chain.entries[i].0));
                }
            }
            if kept == 0 {
                plan.keys_removed += 1;
            }
        }
        // New collected set: every version in [0, latest] that is not retained.
        let mut start = 0u64;
        for &r in &retained_vec {
            if r > start {
                plan.collected.insert(start, r - 1);
            }
            start = r + 1;
        }
        if start <= latest {
            plan.collected.insert(start, latest);
        }
        let old: u64 = self
            .collected
            .values()
            .zip(self.collected.keys())
            .map(|(e, s)| e - s + 1)
            .sum();
        let new: u64 = plan.collected.iter().map(|(s, e)| e - s + 1).sum();
        plan.versions_collected = new.saturating_sub(old);
        plan
    }

    /// Apply a GC plan computed by [`MemState::plan_gc`] on this very state.
    pub(crate) fn apply_gc(&mut self, plan: &GcPlan) {
        let mut i = 0;
        while i < plan.removals.len() {
            let key = &plan.removals[i].0;
            let mut j = i;
            while j < plan.removals.len() && &plan.removals[j].0 == key {
                j += 1;
            }
            let versions: BTreeSet<u64> = plan.removals[i..j].iter().map(|r| r.1).collect();
            let empty = match self.chains.get_mut(key.as_slice()) {
                Some(chain) => {
                    chain.entries.retain(|e| !versions.contains(&e.0));
                    chain.entries.is_empty()
                }
                None => false,
            };
            if empty {
                self.chains.remove(key.as_slice());
                self.order.remove(key.as_slice());
            }
            i = j;
        }
        self.collected = plan.collected.clone();
    }
}
