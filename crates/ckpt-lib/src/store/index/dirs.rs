//! The directory records of an index in memory ([`Dirs`]): the map from a
//! directory's path to its [`DirRecord`], with the paths whose tree is
//! unknown and the paths changed since the base file kept exact as records
//! change (see "Work that follows the change" in [`crate::store::index`]).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::store::index::entries::{DirRecord, UNKNOWN_TREE};
use crate::store::tree::NodeRef;
use ckpt_fs::fs::{is_within, join};

/// The directory records of an index by path (relative, `""` for the
/// root), with two sets kept up to date as records change, so that what a
/// watch-mode save does follows the change and not the tree:
/// - the paths whose record has [`UNKNOWN_TREE`] (every partial scan lists
///   them, see `crate::workspace::scan`);
/// - the paths whose record was replaced or removed since the base file
///   was loaded or written, each with whether the base holds that path:
///   the delta is made of these alone ([`Index::encode_delta`]).
///
/// Reads go to the map (`Deref`); every change goes through the methods
/// below, which keep both sets exact. A record replaced by the very same
/// `Arc` (a scan keeping it) is not a change.
#[derive(Clone, Debug, Default)]
pub struct Dirs {
    pub(super) map: DirMap,
    pub(super) unknown: PathSet,
    /// Path → whether the base holds it, for every path whose record
    /// changed since the base. `None`: not known (records made without a
    /// base to compare with); the next write is then a whole base.
    pub(super) changed: Option<HashMap<Vec<u8>, bool, PathHasher>>,
}

/// The hasher of the maps and sets keyed by a directory's path. A scan
/// hashes every directory's path four or five times (its record, its
/// subdirectories' records, the new index), so the hash shows in
/// scan-mode saves: foldhash's, seeded anew in every process. SipHash's
/// resistance to chosen keys bought nothing here (the paths are the
/// user's own tree) and showed in a scan's CPU profile.
pub type PathHasher = foldhash::fast::RandomState;
/// Directory path → record.
pub type DirMap = HashMap<Vec<u8>, Arc<DirRecord>, PathHasher>;
/// A set of directory paths.
pub type PathSet = HashSet<Vec<u8>, PathHasher>;

impl std::ops::Deref for Dirs {
    type Target = DirMap;
    fn deref(&self) -> &Self::Target {
        &self.map
    }
}

impl PartialEq for Dirs {
    fn eq(&self, other: &Self) -> bool {
        self.map == other.map
    }
}

impl Eq for Dirs {}

/// Records with nothing known about what changed since a base.
impl From<DirMap> for Dirs {
    fn from(map: DirMap) -> Dirs {
        Dirs {
            unknown: unknown_trees(&map),
            map,
            changed: None,
        }
    }
}

/// The paths whose record has [`UNKNOWN_TREE`], by a walk over `map` (the
/// set [`Dirs`] keeps is tested against it).
pub(crate) fn unknown_trees(map: &DirMap) -> PathSet {
    map.iter()
        .filter(|(_, r)| r.tree == UNKNOWN_TREE)
        .map(|(p, _)| p.clone())
        .collect()
}

impl<'a> IntoIterator for &'a Dirs {
    type Item = (&'a Vec<u8>, &'a Arc<DirRecord>);
    type IntoIter = std::collections::hash_map::Iter<'a, Vec<u8>, Arc<DirRecord>>;
    fn into_iter(self) -> Self::IntoIter {
        self.map.iter()
    }
}

impl FromIterator<(Vec<u8>, Arc<DirRecord>)> for Dirs {
    fn from_iter<I: IntoIterator<Item = (Vec<u8>, Arc<DirRecord>)>>(it: I) -> Dirs {
        Dirs::from(it.into_iter().collect::<DirMap>())
    }
}

impl Dirs {
    /// The records of a base file: nothing changed since it.
    pub(super) fn of_base(map: DirMap) -> Dirs {
        Dirs {
            changed: Some(HashMap::default()),
            ..Dirs::from(map)
        }
    }

    /// `records` as a whole new set succeeding `old`: what changed since
    /// `old`'s base is carried over and completed when `track`, else left
    /// unknown. (Full scans made their index this way before they updated
    /// it in place; the tests keep it as a model of the tracking.)
    #[cfg(test)]
    pub(crate) fn succeeding(
        old: &Dirs,
        records: Vec<(Vec<u8>, Arc<DirRecord>)>,
        track: bool,
    ) -> Dirs {
        let mut new = Dirs {
            changed: old.changed.clone().filter(|_| track),
            ..Dirs::default()
        };
        new.map.reserve(records.len());
        let mut held = 0;
        for (p, rec) in records {
            match old.map.get(&p) {
                Some(o) => {
                    held += 1;
                    if !Arc::ptr_eq(o, &rec) {
                        new.note(&p, true);
                    }
                }
                None => new.note(&p, false),
            }
            if rec.tree == UNKNOWN_TREE {
                new.unknown.insert(p.clone());
            }
            new.map.insert(p, rec);
        }
        if held != old.map.len() && new.changed.is_some() {
            for p in old.map.keys() {
                if !new.map.contains_key(p) {
                    new.note(p, true);
                }
            }
        }
        new
    }

    /// Notes that `path`'s record changes; `held`: the map holds `path`
    /// before the change (so does the base, if nothing changed it since).
    fn note(&mut self, path: &[u8], held: bool) {
        if let Some(c) = &mut self.changed {
            if !c.contains_key(path) {
                c.insert(path.to_vec(), held);
            }
        }
    }

    /// Sets `path`'s record; returns the one it replaces.
    pub fn insert(&mut self, path: Vec<u8>, rec: Arc<DirRecord>) -> Option<Arc<DirRecord>> {
        let held = match self.map.get(&path) {
            Some(o) if Arc::ptr_eq(o, &rec) => return Some(rec),
            o => o.is_some(),
        };
        self.note(&path, held);
        if rec.tree == UNKNOWN_TREE {
            self.unknown.insert(path.clone());
        } else if !self.unknown.is_empty() {
            self.unknown.remove(&path);
        }
        self.map.insert(path, rec)
    }

    /// Removes `path`'s record and returns it.
    pub fn remove(&mut self, path: &[u8]) -> Option<Arc<DirRecord>> {
        let old = self.map.remove(path)?;
        self.unknown.remove(path);
        self.note(path, true);
        Some(old)
    }

    /// Removes the record of the directory `path` and of every directory
    /// below it: those the records' directory entries lead to, and any
    /// record with an unknown tree within `path` (an index written by an
    /// older restore may hold such a record that no entry leads to). Costs
    /// what the subtree holds, not the whole index.
    pub fn remove_subtree(&mut self, path: &[u8]) {
        let mut todo = vec![path.to_vec()];
        while let Some(p) = todo.pop() {
            let Some(rec) = self.remove(&p) else { continue };
            for v in rec.entries.views() {
                if matches!(v.entry.node, NodeRef::Dir { .. }) {
                    todo.push(join(&p, v.entry.name));
                }
            }
        }
        let stray: Vec<Vec<u8>> = self
            .unknown
            .iter()
            .filter(|u| is_within(u, path))
            .cloned()
            .collect();
        for p in stray {
            self.remove(&p);
        }
    }

    /// Removes every record that no directory entry leads to from the
    /// root's record (an index written by an older restore may hold one):
    /// the records a full scan of the tree would make are then the only
    /// ones. Costs a walk over every record.
    pub fn retain_reachable(&mut self) {
        let mut reached = PathSet::default();
        let mut todo = vec![Vec::new()];
        while let Some(p) = todo.pop() {
            let Some(rec) = self.map.get(&p) else {
                continue;
            };
            for v in rec.entries.views() {
                if matches!(v.entry.node, NodeRef::Dir { .. }) {
                    todo.push(join(&p, v.entry.name));
                }
            }
            reached.insert(p);
        }
        let stray: Vec<Vec<u8>> = self
            .map
            .keys()
            .filter(|p| !reached.contains(*p))
            .cloned()
            .collect();
        for p in stray {
            self.remove(&p);
        }
    }

    /// Sets every record of `records`.
    pub fn extend(&mut self, records: impl IntoIterator<Item = (Vec<u8>, Arc<DirRecord>)>) {
        for (p, rec) in records {
            self.insert(p, rec);
        }
    }

    /// The paths whose record has [`UNKNOWN_TREE`].
    pub fn unknown_trees(&self) -> &PathSet {
        &self.unknown
    }
}
