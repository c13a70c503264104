//! Directory trees: one object per directory listing.
//!
//! A [`Tree`] is the sorted listing of one directory. Entries are sorted by
//! name *bytes* and names are unique, so one directory state has exactly one
//! encoding and one hash. A subdirectory entry holds the hash of the child's
//! tree, so an unchanged subtree is shared by every checkpoint that contains
//! it, and a save writes new tree objects only for directories on the path
//! from a change to the root.
//!
//! Encoding (version 1, all integers little-endian; see `docs/FORMAT.md`):
//!
//! ```text
//! tree   := "CKT1" u32:count entry*count
//! entry  := u8:kind u32:mode i64:mtime_ns u32:name_len name payload
//! payload:= kind=1 (file):    u64:size [32]content_hash
//!         | kind=2 (dir):     [32]tree_hash
//!         | kind=3 (symlink): u32:target_len target
//! ```
//!
//! `mode` holds the permission bits only (`st_mode & 0o7777`). The tree hash is
//! BLAKE3 of the encoding.

use crate::{Error, Hash, Result};

/// The deepest a checkpoint's directories may nest below the workspace root
/// (the root's children are at depth 1). A scan refuses a deeper directory
/// ([`Error::TooDeep`]) and a pull a deeper remote checkpoint
/// ([`too_deep`]), so the engine's walks of a tree, which recurse, stay
/// within their threads' stacks ([`WALK_STACK`]; 4,000 levels overflowed
/// them). `tests/hostile.rs` saves, diffs, verifies and restores a tree
/// this deep. git has such a limit for the same reason
/// (`core.maxTreeDepth`).
pub const MAX_DEPTH: usize = 2048;

/// The stack to give every thread that may walk a tree: the engine's
/// walks recurse once per level, up to about 2 KiB a level, so
/// [`MAX_DEPTH`] levels take about 4 MiB, where a new thread gets 2 MiB
/// (the main thread 8 MiB). The CLI gives every thread of its process
/// this stack (`RUST_MIN_STACK`, which rayon's global pool also gets), and
/// the servers' runtimes are built with it.
pub const WALK_STACK: usize = 16 << 20;

/// How deep the directory at relative path `rel` is (the root, `""`, is 0).
pub fn depth(rel: &[u8]) -> usize {
    if rel.is_empty() {
        0
    } else {
        1 + rel.iter().filter(|&&b| b == b'/').count()
    }
}

/// What an entry is, with what identifies its content.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Node {
    /// A regular file: its size and content hash (an object in the store).
    File {
        /// Length in bytes.
        size: u64,
        /// BLAKE3 of the content.
        hash: Hash,
    },
    /// A directory: the hash of its own [`Tree`].
    Dir {
        /// Hash of the child tree.
        tree: Hash,
    },
    /// A symbolic link, stored by its target bytes and never followed.
    Symlink {
        /// The link target, as raw bytes.
        target: Vec<u8>,
    },
}

/// The kind of a [`Node`] without its payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// Regular file.
    File,
    /// Directory.
    Dir,
    /// Symbolic link.
    Symlink,
}

impl Kind {
    /// Short lower-case name used in output.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::File => "file",
            Kind::Dir => "dir",
            Kind::Symlink => "symlink",
        }
    }
}

impl Node {
    /// The kind of this node.
    pub fn kind(&self) -> Kind {
        match self {
            Node::File { .. } => Kind::File,
            Node::Dir { .. } => Kind::Dir,
            Node::Symlink { .. } => Kind::Symlink,
        }
    }

    /// Size in bytes: file length, symlink target length, 0 for directories.
    pub fn size(&self) -> u64 {
        match self {
            Node::File { size, .. } => *size,
            Node::Dir { .. } => 0,
            Node::Symlink { target } => target.len() as u64,
        }
    }
}

/// One named entry of a directory.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Entry {
    /// The name within its directory: raw bytes, never empty, no `/`.
    pub name: Vec<u8>,
    /// Permission bits (`st_mode & 0o7777`).
    pub mode: u32,
    /// Modification time in nanoseconds since the Unix epoch.
    pub mtime_ns: i64,
    /// What the entry is.
    pub node: Node,
}

impl Entry {
    /// Appends this entry's canonical encoding (see the module doc).
    pub(crate) fn encode_into(&self, out: &mut Vec<u8>) {
        let kind: u8 = match self.node {
            Node::File { .. } => 1,
            Node::Dir { .. } => 2,
            Node::Symlink { .. } => 3,
        };
        out.push(kind);
        out.extend_from_slice(&self.mode.to_le_bytes());
        out.extend_from_slice(&self.mtime_ns.to_le_bytes());
        out.extend_from_slice(&(self.name.len() as u32).to_le_bytes());
        out.extend_from_slice(&self.name);
        match &self.node {
            Node::File { size, hash } => {
                out.extend_from_slice(&size.to_le_bytes());
                out.extend_from_slice(&hash.0);
            }
            Node::Dir { tree } => out.extend_from_slice(&tree.0),
            Node::Symlink { target } => {
                out.extend_from_slice(&(target.len() as u32).to_le_bytes());
                out.extend_from_slice(target);
            }
        }
    }

    /// Parses one entry written by [`Entry::encode_into`], validating it.
    pub(crate) fn decode_from(r: &mut Reader<'_>) -> Result<Entry> {
        EntryRef::decode_from(r).map(|e| e.to_entry())
    }
}

/// An entry borrowed from its encoding, for readers that compare entries
/// without allocating (the stat index, see [`crate::store::index`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct EntryRef<'a> {
    pub(crate) name: &'a [u8],
    pub(crate) mode: u32,
    pub(crate) mtime_ns: i64,
    pub(crate) node: NodeRef<'a>,
}

/// A [`Node`] borrowed from its encoding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NodeRef<'a> {
    File { size: u64, hash: Hash },
    Dir { tree: Hash },
    Symlink { target: &'a [u8] },
}

impl<'a> EntryRef<'a> {
    /// Parses one entry written by [`Entry::encode_into`], validating it
    /// (the one parser of the entry encoding).
    pub(crate) fn decode_from(r: &mut Reader<'a>) -> Result<EntryRef<'a>> {
        let kind = r.take(1)?[0];
        let mode = r.u32()?;
        let mtime_ns = r.u64()? as i64;
        let name_len = r.u32()? as usize;
        let name = r.take(name_len)?;
        let node = match kind {
            1 => NodeRef::File {
                size: r.u64()?,
                hash: r.hash()?,
            },
            2 => NodeRef::Dir { tree: r.hash()? },
            3 => {
                let n = r.u32()? as usize;
                NodeRef::Symlink { target: r.take(n)? }
            }
            k => return Err(Error::Corrupt(format!("entry has unknown kind {k}"))),
        };
        if !valid_name(name) || mode & !0o7777 != 0 {
            return Err(Error::Corrupt("entry has an invalid name or mode".into()));
        }
        Ok(EntryRef {
            name,
            mode,
            mtime_ns,
            node,
        })
    }

    /// The owned entry.
    pub(crate) fn to_entry(self) -> Entry {
        Entry {
            name: self.name.to_vec(),
            mode: self.mode,
            mtime_ns: self.mtime_ns,
            node: self.node.to_node(),
        }
    }
}

impl NodeRef<'_> {
    /// The owned node.
    pub(crate) fn to_node(self) -> Node {
        match self {
            NodeRef::File { size, hash } => Node::File { size, hash },
            NodeRef::Dir { tree } => Node::Dir { tree },
            NodeRef::Symlink { target } => Node::Symlink {
                target: target.to_vec(),
            },
        }
    }
}

impl Entry {
    /// This entry as an [`EntryRef`].
    pub(crate) fn borrowed(&self) -> EntryRef<'_> {
        EntryRef {
            name: &self.name,
            mode: self.mode,
            mtime_ns: self.mtime_ns,
            node: match &self.node {
                Node::File { size, hash } => NodeRef::File {
                    size: *size,
                    hash: *hash,
                },
                Node::Dir { tree } => NodeRef::Dir { tree: *tree },
                Node::Symlink { target } => NodeRef::Symlink { target },
            },
        }
    }
}

/// The sorted listing of one directory.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tree {
    /// Entries sorted by name bytes, names unique.
    pub entries: Vec<Entry>,
}

const MAGIC: &[u8; 4] = b"CKT1";

impl Tree {
    /// Serialises the tree in the canonical encoding.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(8 + self.entries.len() * 64);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&(self.entries.len() as u32).to_le_bytes());
        for e in &self.entries {
            e.encode_into(&mut out);
        }
        out
    }

    /// Encodes and hashes the tree.
    pub fn encode_and_hash(&self) -> (Hash, Vec<u8>) {
        let bytes = self.encode();
        (Hash::of(&bytes), bytes)
    }

    /// Parses the canonical encoding, checking every invariant (sorted,
    /// unique, valid names) so a corrupt tree is reported, never restored.
    pub fn decode(bytes: &[u8]) -> Result<Tree> {
        let mut r = Reader::new(bytes);
        if r.take(4)? != MAGIC {
            return Err(Error::Corrupt("tree object has a bad magic".into()));
        }
        let count = r.u32()? as usize;
        let mut entries = Vec::with_capacity(count.min(bytes.len() / 17));
        for _ in 0..count {
            let entry = Entry::decode_from(&mut r)?;
            if let Some(prev) = entries.last() {
                let prev: &Entry = prev;
                if prev.name >= entry.name {
                    return Err(Error::Corrupt("tree entries are not sorted".into()));
                }
            }
            entries.push(entry);
        }
        if !r.at_end() {
            return Err(Error::Corrupt("tree object has trailing bytes".into()));
        }
        Ok(Tree { entries })
    }

    /// Finds an entry by name (binary search; entries are sorted).
    pub fn get(&self, name: &[u8]) -> Option<&Entry> {
        self.entries
            .binary_search_by(|e| e.name.as_slice().cmp(name))
            .ok()
            .map(|i| &self.entries[i])
    }
}

/// A name that can appear in a directory: non-empty, no `/` or NUL, not `.`/`..`.
pub fn valid_name(name: &[u8]) -> bool {
    !name.is_empty() && name != b"." && name != b".." && !name.iter().any(|&b| b == b'/' || b == 0)
}

/// What [`Reader`] reports when its buffer ends before what it reads.
const TRUNCATED: &str = "object is truncated";

/// A bounds-checked cursor over a byte buffer; every overrun is reported as
/// corruption rather than a panic (also used by the remote encodings in
/// `ckpt-remote`).
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// A cursor at the start of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }
    /// Bytes consumed so far.
    pub fn position(&self) -> usize {
        self.pos
    }
    /// Whether every byte was consumed.
    pub fn at_end(&self) -> bool {
        self.pos == self.buf.len()
    }
    /// The next `n` bytes.
    #[inline]
    pub fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.buf.len())
            .ok_or_else(|| Error::Corrupt(TRUNCATED.into()))?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    /// A little-endian u32.
    #[inline]
    pub fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().unwrap()))
    }
    /// A little-endian u64.
    pub fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().unwrap()))
    }
    /// A 32-byte hash.
    #[inline]
    pub fn hash(&mut self) -> Result<Hash> {
        Ok(Hash(self.take(32)?.try_into().unwrap()))
    }
    /// One byte.
    #[inline]
    pub fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }
    /// An unsigned LEB128 number (at most 10 bytes, no bits beyond 64).
    #[inline]
    pub fn varint(&mut self) -> Result<u64> {
        // One byte, the common case (names' lengths, modes, most deltas).
        match self.buf.get(self.pos) {
            Some(&b) if b < 0x80 => {
                self.pos += 1;
                Ok(u64::from(b))
            }
            _ => self.varint_long(),
        }
    }

    /// [`Self::varint`] of two bytes or more, read from the slice without
    /// a bounds check per byte.
    fn varint_long(&mut self) -> Result<u64> {
        let rest = self.buf.get(self.pos..).unwrap_or_default();
        let mut v = 0u64;
        for (i, &b) in rest.iter().take(10).enumerate() {
            // The tenth byte holds bit 63 only.
            if i == 9 && b > 1 {
                break;
            }
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                self.pos += i + 1;
                return Ok(v);
            }
        }
        Err(Error::Corrupt(
            match rest.len() < 10 {
                true => TRUNCATED,
                false => "number too long",
            }
            .into(),
        ))
    }
}

/// Appends `v` as unsigned LEB128 (the encoding [`Reader::varint`] reads).
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A signed number as an unsigned one whose LEB128 is short when the
/// number is near zero (zigzag: 0, -1, 1, -2 … → 0, 1, 2, 3 …).
pub fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// The inverse of [`zigzag`].
pub fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// The first directory of the tree `root` nested deeper than [`MAX_DEPTH`]
/// (its path), if any: the check for trees that did not come from a scan
/// (a pull). Iterative, and each subtree is walked again only when it is
/// met deeper than before, so shared subtrees cost once per depth.
pub fn too_deep(load: impl Fn(&Hash) -> Result<Tree>, root: Hash) -> Result<Option<Vec<u8>>> {
    let mut deepest: std::collections::HashMap<Hash, usize> = Default::default();
    let mut stack = vec![(Vec::new(), 0usize, root)];
    while let Some((rel, depth, h)) = stack.pop() {
        if depth > MAX_DEPTH {
            return Ok(Some(rel));
        }
        match deepest.get(&h) {
            Some(&d) if d >= depth => continue,
            _ => {
                deepest.insert(h, depth);
            }
        }
        for e in load(&h)?.entries {
            if let Node::Dir { tree } = e.node {
                stack.push((ckpt_fs::fs::join(&rel, &e.name), depth + 1, tree));
            }
        }
    }
    Ok(None)
}

/// Any node (for property tests here and in the stat index).
#[cfg(test)]
pub(crate) fn arb_node() -> impl proptest::strategy::Strategy<Value = Node> {
    use proptest::prelude::*;
    prop_oneof![
        (any::<u64>(), any::<[u8; 32]>()).prop_map(|(size, h)| Node::File {
            size,
            hash: Hash(h)
        }),
        any::<[u8; 32]>().prop_map(|h| Node::Dir { tree: Hash(h) }),
        proptest::collection::vec(any::<u8>(), 0..40).prop_map(|target| Node::Symlink { target }),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The reference decoder: one byte at a time, as LEB128 is defined.
    fn model_varint(bytes: &[u8]) -> std::result::Result<(u64, usize), &'static str> {
        let mut v = 0u64;
        for (i, &b) in bytes.iter().enumerate() {
            // A u64 has 64 bits: the tenth byte may carry bit 63 alone.
            if i == 9 && b > 1 {
                return Err("number too long");
            }
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok((v, i + 1));
            }
        }
        Err("object is truncated")
    }

    proptest! {
        // Microseconds a case: enough cases to reach every ending often.
        #![proptest_config(ProptestConfig::with_cases(4096))]

        #[test]
        fn varint_reads_what_put_varint_writes(v in any::<u64>(), tail in proptest::collection::vec(any::<u8>(), 0..4)) {
            let mut b = Vec::new();
            put_varint(&mut b, v);
            let n = b.len();
            b.extend_from_slice(&tail);
            let mut r = Reader::new(&b);
            prop_assert_eq!(r.varint().unwrap(), v);
            prop_assert_eq!(r.position(), n);
        }

        #[test]
        fn varint_agrees_with_the_model_on_any_bytes(
            // Mostly continuation bytes, so that long and over-long
            // numbers and truncation are all common.
            bytes in proptest::collection::vec(
                (any::<u8>(), 0..10u8).prop_map(|(b, k)| match k {
                    0..=7 => b | 0x80,
                    8 => b,
                    _ => b & 3, // a tenth byte near the limit
                }),
                0..13,
            ),
            skip in 0usize..3,
        ) {
            let skip = skip.min(bytes.len());
            let mut r = Reader::new(&bytes);
            r.take(skip).unwrap();
            match (r.varint(), model_varint(&bytes[skip..])) {
                (Ok(v), Ok((m, n))) => {
                    prop_assert_eq!(v, m);
                    prop_assert_eq!(r.position(), skip + n);
                }
                (Err(Error::Corrupt(e)), Err(m)) => prop_assert_eq!(e, m),
                (got, want) => prop_assert!(false, "{:?} vs {:?}", got.map_err(|e| e.to_string()), want),
            }
        }
    }

    fn arb_entry() -> impl Strategy<Value = Entry> {
        let name =
            proptest::collection::vec(1u8..=255, 1..20).prop_filter("valid", |n| valid_name(n));
        (name, 0u32..0o7777, any::<i64>(), arb_node()).prop_map(|(name, mode, mtime_ns, node)| {
            Entry {
                name,
                mode,
                mtime_ns,
                node,
            }
        })
    }

    proptest! {
        #[test]
        fn encode_decode_round_trip(mut entries in proptest::collection::vec(arb_entry(), 0..30)) {
            entries.sort_by(|a, b| a.name.cmp(&b.name));
            entries.dedup_by(|a, b| a.name == b.name);
            let tree = Tree { entries };
            let bytes = tree.encode();
            prop_assert_eq!(Tree::decode(&bytes).unwrap(), tree.clone());
            // Any truncation is detected, never mis-parsed.
            for cut in 0..bytes.len() {
                prop_assert!(Tree::decode(&bytes[..cut]).is_err());
            }
        }
    }

    type Trees = std::collections::HashMap<Hash, Tree>;

    fn dir(name: &[u8], tree: Hash) -> Entry {
        Entry {
            name: name.to_vec(),
            mode: 0o755,
            mtime_ns: 0,
            node: Node::Dir { tree },
        }
    }

    /// `n` directories `d/d/…` above `bottom`: the returned tree, placed at
    /// depth x, has `bottom` at depth x + n.
    fn chain(trees: &mut Trees, n: usize, bottom: Tree) -> Hash {
        let mut t = bottom;
        for _ in 0..n {
            let (h, _) = t.encode_and_hash();
            trees.insert(h, t);
            t = Tree {
                entries: vec![dir(b"d", h)],
            };
        }
        let (h, _) = t.encode_and_hash();
        trees.insert(h, t);
        h
    }

    #[test]
    fn too_deep_finds_the_first_directory_past_the_limit() {
        let found =
            |trees: &Trees, root: Hash| too_deep(|h: &Hash| Ok(trees[h].clone()), root).unwrap();
        let empty = || Tree { entries: vec![] };
        let mut trees = Trees::new();
        let at_limit = chain(&mut trees, MAX_DEPTH, empty());
        assert_eq!(found(&trees, at_limit), None);
        let past = chain(&mut trees, MAX_DEPTH + 1, empty());
        let path = found(&trees, past).expect("too deep");
        assert_eq!(depth(&path), MAX_DEPTH + 1);
        // One subtree, 10 deep, met first at depth 1 (`b`, walked first)
        // and then again at depth MAX_DEPTH - 8 below `a`: found there.
        let shared = chain(&mut trees, 10, empty());
        let holder = Tree {
            entries: vec![dir(b"s", shared)],
        };
        let a = chain(&mut trees, MAX_DEPTH - 10, holder);
        let root = Tree {
            entries: vec![dir(b"a", a), dir(b"b", shared)],
        };
        let (r, _) = root.encode_and_hash();
        trees.insert(r, root);
        let path = found(&trees, r).expect("too deep below a");
        assert!(
            path.starts_with(b"a/d/d/"),
            "{}",
            String::from_utf8_lossy(&path)
        );
        assert_eq!(depth(&path), MAX_DEPTH + 1);
    }

    #[test]
    fn unsorted_is_corrupt() {
        let e = |n: &[u8]| Entry {
            name: n.to_vec(),
            mode: 0o644,
            mtime_ns: 0,
            node: Node::Dir {
                tree: Hash::default(),
            },
        };
        let t = Tree {
            entries: vec![e(b"b"), e(b"a")],
        };
        assert!(Tree::decode(&t.encode()).is_err());
    }
}
