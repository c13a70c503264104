//! Differences between two trees, and unified diffs of file contents.
//!
//! [`diff_trees`] walks two trees side by side and skips every subtree whose
//! hash is equal on both sides, so its cost follows the change, not the tree.
//! It reports every difference, including metadata-only ones
//! ([`ChangeKind::Touched`]: mtime), because restore needs all of them; the
//! name-status view filters what people want to see.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use similar::TextDiff;

use crate::store::catalog::{CatalogReader, ChangeStats};
use crate::store::tree::{Entry, Kind, Node, Tree};
use crate::{Hash, Result};
use ckpt_fs::fs::is_within;
use ckpt_fs::fs::join;

/// How one path differs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    /// Only in the new state.
    Added,
    /// Only in the old state.
    Deleted,
    /// Content (file data or symlink target) differs.
    Modified,
    /// File ↔ directory ↔ symlink.
    TypeChanged,
    /// Only the permission bits differ.
    ModeChanged,
    /// Only the mtime differs.
    Touched,
}

impl ChangeKind {
    /// The one-letter code of the name-status view.
    pub fn letter(self) -> char {
        match self {
            ChangeKind::Added => 'A',
            ChangeKind::Deleted => 'D',
            ChangeKind::Modified => 'M',
            ChangeKind::TypeChanged => 'T',
            ChangeKind::ModeChanged => 'P',
            ChangeKind::Touched => 't',
        }
    }
}

/// One difference.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    /// Workspace-relative path.
    pub path: Vec<u8>,
    /// What kind of difference.
    pub kind: ChangeKind,
    /// The entry in the old state.
    pub old: Option<Entry>,
    /// The entry in the new state.
    pub new: Option<Entry>,
}

impl Change {
    /// Whether people want to see this in a name-status listing: directory
    /// additions and deletions are implied by their contents (except when
    /// empty), and directory mtimes move with every change inside them.
    pub fn is_interesting(&self) -> bool {
        let is_dir = |e: &Option<Entry>| e.as_ref().is_some_and(|e| e.node.kind() == Kind::Dir);
        let empty_dir = |e: &Option<Entry>| {
            e.as_ref()
                .is_some_and(|e| matches!(e.node, Node::Dir { tree } if tree == empty_tree_hash()))
        };
        match self.kind {
            ChangeKind::Added => !is_dir(&self.new) || empty_dir(&self.new),
            ChangeKind::Deleted => !is_dir(&self.old) || empty_dir(&self.old),
            ChangeKind::Touched => !is_dir(&self.new),
            _ => true,
        }
    }
}

/// Hash of the empty tree.
pub fn empty_tree_hash() -> Hash {
    Tree::default().encode_and_hash().0
}

/// Where trees come from: freshly built ones first, then the catalog.
pub struct TreeSource<'a> {
    /// Trees built by a scan and not yet committed.
    pub fresh: Option<&'a HashMap<Hash, Vec<u8>>>,
    /// The catalog.
    pub catalog: &'a CatalogReader<'a>,
}

impl TreeSource<'_> {
    /// Loads a tree by hash.
    pub fn tree(&self, h: &Hash) -> Result<Tree> {
        if let Some(bytes) = self.fresh.and_then(|f| f.get(h)) {
            return Tree::decode(bytes);
        }
        self.catalog.tree(h)
    }
}

/// Restricts a diff to some paths (and everything below them).
#[derive(Clone, Debug, Default)]
pub struct PathFilter {
    paths: Vec<Vec<u8>>,
}

impl PathFilter {
    /// A filter from relative paths; empty means everything.
    pub fn new(paths: Vec<Vec<u8>>) -> PathFilter {
        let paths = paths
            .into_iter()
            .map(|mut p| {
                while p.last() == Some(&b'/') {
                    p.pop();
                }
                p
            })
            .collect();
        PathFilter { paths }
    }

    /// Whether nothing is filtered.
    pub fn is_all(&self) -> bool {
        self.paths.is_empty() || self.paths.iter().any(|p| p.is_empty() || p == b".")
    }

    /// The filter paths.
    pub fn paths(&self) -> &[Vec<u8>] {
        &self.paths
    }

    /// `path` is selected (equal to or below a filter path).
    pub fn selects(&self, path: &[u8]) -> bool {
        self.is_all() || self.paths.iter().any(|p| is_within(path, p))
    }

    /// A directory at `path` must be descended into.
    pub fn descends(&self, path: &[u8]) -> bool {
        self.is_all()
            || self
                .paths
                .iter()
                .any(|p| is_within(path, p) || is_within(p, path))
    }
}

/// The `paths` (relative, `/`-separated) that name no entry in the tree
/// `root`; the empty path (the root itself) always does.
pub fn missing_paths(
    reader: &CatalogReader<'_>,
    root: Hash,
    paths: &[Vec<u8>],
) -> Result<Vec<Vec<u8>>> {
    let mut missing = Vec::new();
    'paths: for p in paths {
        let mut cur = root;
        let comps: Vec<&[u8]> = p
            .split(|&b| b == b'/')
            .filter(|c| !c.is_empty() && *c != b".")
            .collect();
        for (i, comp) in comps.iter().enumerate() {
            let tree = reader.tree(&cur)?;
            match tree.get(comp).map(|e| &e.node) {
                Some(Node::Dir { tree }) => cur = *tree,
                Some(_) if i + 1 == comps.len() => {}
                _ => {
                    missing.push(p.clone());
                    continue 'paths;
                }
            }
        }
    }
    Ok(missing)
}

/// All differences from tree `a` to tree `b` (either may be absent: the empty
/// state), restricted by `filter`, in path order.
pub fn diff_trees(
    src: &TreeSource<'_>,
    a: Option<Hash>,
    b: Option<Hash>,
    filter: &PathFilter,
) -> Result<Vec<Change>> {
    let mut out = Vec::new();
    if a == b {
        return Ok(out);
    }
    let ta = a.map(|h| src.tree(&h)).transpose()?.unwrap_or_default();
    let tb = b.map(|h| src.tree(&h)).transpose()?.unwrap_or_default();
    diff_dir(src, b"", &ta, &tb, filter, &mut out)?;
    Ok(out)
}

fn diff_dir(
    src: &TreeSource<'_>,
    rel: &[u8],
    a: &Tree,
    b: &Tree,
    filter: &PathFilter,
    out: &mut Vec<Change>,
) -> Result<()> {
    let (mut i, mut j) = (0, 0);
    while i < a.entries.len() || j < b.entries.len() {
        let ea = a.entries.get(i);
        let eb = b.entries.get(j);
        let ord = match (ea, eb) {
            (Some(x), Some(y)) => x.name.cmp(&y.name),
            (Some(_), None) => std::cmp::Ordering::Less,
            _ => std::cmp::Ordering::Greater,
        };
        match ord {
            std::cmp::Ordering::Less => {
                let e = ea.unwrap();
                whole(src, rel, e, ChangeKind::Deleted, filter, out)?;
                i += 1;
            }
            std::cmp::Ordering::Greater => {
                let e = eb.unwrap();
                whole(src, rel, e, ChangeKind::Added, filter, out)?;
                j += 1;
            }
            std::cmp::Ordering::Equal => {
                let (x, y) = (ea.unwrap(), eb.unwrap());
                pair(src, rel, x, y, filter, out)?;
                i += 1;
                j += 1;
            }
        }
    }
    Ok(())
}

fn push(
    out: &mut Vec<Change>,
    path: Vec<u8>,
    kind: ChangeKind,
    old: Option<&Entry>,
    new: Option<&Entry>,
) {
    out.push(Change {
        path,
        kind,
        old: old.cloned(),
        new: new.cloned(),
    });
}

/// An entry present on one side only, with all its descendants.
fn whole(
    src: &TreeSource<'_>,
    rel: &[u8],
    e: &Entry,
    kind: ChangeKind,
    filter: &PathFilter,
    out: &mut Vec<Change>,
) -> Result<()> {
    let path = join(rel, &e.name);
    let is_dir = matches!(e.node, Node::Dir { .. });
    if !(filter.selects(&path) || (is_dir && filter.descends(&path))) {
        return Ok(());
    }
    if filter.selects(&path) {
        let (old, new) = if kind == ChangeKind::Deleted {
            (Some(e), None)
        } else {
            (None, Some(e))
        };
        push(out, path.clone(), kind, old, new);
    }
    if let Node::Dir { tree } = &e.node {
        let t = src.tree(tree)?;
        for child in &t.entries {
            whole(src, &path, child, kind, filter, out)?;
        }
    }
    Ok(())
}

fn pair(
    src: &TreeSource<'_>,
    rel: &[u8],
    x: &Entry,
    y: &Entry,
    filter: &PathFilter,
    out: &mut Vec<Change>,
) -> Result<()> {
    if x == y {
        return Ok(());
    }
    let path = join(rel, &x.name);
    match (&x.node, &y.node) {
        (Node::Dir { tree: ta }, Node::Dir { tree: tb }) => {
            if filter.selects(&path) {
                if x.mode != y.mode {
                    push(out, path.clone(), ChangeKind::ModeChanged, Some(x), Some(y));
                } else if x.mtime_ns != y.mtime_ns {
                    push(out, path.clone(), ChangeKind::Touched, Some(x), Some(y));
                }
            }
            if ta != tb && filter.descends(&path) {
                let (a, b) = (src.tree(ta)?, src.tree(tb)?);
                diff_dir(src, &path, &a, &b, filter, out)?;
            }
        }
        (a, b) if a.kind() == b.kind() => {
            if filter.selects(&path) {
                let kind = if a != b {
                    ChangeKind::Modified
                } else if x.mode != y.mode {
                    ChangeKind::ModeChanged
                } else {
                    ChangeKind::Touched
                };
                push(out, path, kind, Some(x), Some(y));
            }
        }
        _ => {
            // Kind changed: report the path, then the subtree that went or came.
            if filter.selects(&path) {
                push(out, path.clone(), ChangeKind::TypeChanged, Some(x), Some(y));
            }
            for (e, kind) in [(x, ChangeKind::Deleted), (y, ChangeKind::Added)] {
                if let Node::Dir { tree } = &e.node {
                    if filter.descends(&path) {
                        for child in &src.tree(tree)?.entries {
                            whole(src, &path, child, kind, filter, out)?;
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

/// Counts files and bytes added, modified and deleted. Directories are not
/// counted; a type change counts as a modification.
pub fn stats(changes: &[Change]) -> ChangeStats {
    let mut s = ChangeStats::default();
    let not_dir = |e: &Option<Entry>| e.as_ref().is_some_and(|e| e.node.kind() != Kind::Dir);
    for c in changes {
        match c.kind {
            ChangeKind::Added if not_dir(&c.new) => {
                s.files_added += 1;
                s.bytes_added += c.new.as_ref().unwrap().node.size();
            }
            ChangeKind::Deleted if not_dir(&c.old) => {
                s.files_deleted += 1;
                s.bytes_deleted += c.old.as_ref().unwrap().node.size();
            }
            ChangeKind::Modified
            | ChangeKind::ModeChanged
            | ChangeKind::Touched
            | ChangeKind::TypeChanged
                if not_dir(&c.new) || not_dir(&c.old) =>
            {
                s.files_modified += 1;
                s.bytes_modified += c.new.as_ref().map_or(0, |e| e.node.size());
            }
            _ => {}
        }
    }
    s
}

/// A content difference between two versions of a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ContentDiff {
    /// A unified diff of text.
    Text(String),
    /// At least one side is binary; their sizes.
    Binary {
        /// Old size.
        old_size: u64,
        /// New size.
        new_size: u64,
    },
}

/// Git's heuristic: a NUL byte in the first 8000 bytes means binary.
pub fn is_binary(bytes: &[u8]) -> bool {
    bytes[..bytes.len().min(8000)].contains(&0)
}

/// A unified diff (3 lines of context) between two contents.
pub fn unified(old: &[u8], new: &[u8], old_label: &str, new_label: &str) -> ContentDiff {
    if is_binary(old) || is_binary(new) {
        return ContentDiff::Binary {
            old_size: old.len() as u64,
            new_size: new.len() as u64,
        };
    }
    let (o, n) = (String::from_utf8_lossy(old), String::from_utf8_lossy(new));
    let diff = TextDiff::from_lines(o.as_ref(), n.as_ref());
    let text = diff
        .unified_diff()
        .context_radius(3)
        .header(old_label, new_label)
        .to_string();
    ContentDiff::Text(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn within() {
        assert!(is_within(b"a/b", b"a"));
        assert!(is_within(b"a", b"a"));
        assert!(!is_within(b"ab", b"a"));
        assert!(is_within(b"x", b""));
        let f = PathFilter::new(vec![b"src/lib/".to_vec()]);
        assert!(f.selects(b"src/lib/x.rs"));
        assert!(!f.selects(b"src/main.rs"));
        assert!(f.descends(b"src"));
        assert!(!f.descends(b"docs"));
    }

    #[test]
    fn unified_and_binary() {
        match unified(b"a\nb\n", b"a\nc\n", "a/x", "b/x") {
            ContentDiff::Text(t) => assert!(t.contains("-b\n+c\n"), "{t}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            unified(b"\0\x01", b"zz", "a", "b"),
            ContentDiff::Binary {
                old_size: 2,
                new_size: 2
            }
        );
    }
}
