//! What a remote holds, and the rules that keep it correct. The same text,
//! with the encodings, is in `docs/FORMAT.md` ("Remotes").
//!
//! ```text
//! <prefix>/
//!   packs/<P>               pack files: blobs (file contents, trees without mtimes,
//!                           mtimes nodes, agent-state snapshots), zstd where it pays
//!                           (crate::pack); P = BLAKE3 of the pack
//!   index/<P>               the index of pack P (also at the end of the pack)
//!   checkpoints/<C>         one checkpoint record, JSON ([`Record`]); C = BLAKE3 of its [`Identity`]
//!   refs/<name>/<C>         checkpoint C was pushed as workspace <name> (crate::refs)
//!   refs/<name>/<u64::MAX>  the marker: the ref is in format 3 (an older ckpt refuses it)
//!   refs/<name>/<gen>       a format-2 ref generation (20 digits), JSON [`RefBody`]: read, never written
//!   gc/condemned            packs the last `gc --remote` condemned or deleted (crate::gc)
//!   gc/locks/<token>        held by a running `gc --remote` (crate::gc)
//! ```
//!
//! - **Content-addressed and shared.** Blobs are named by the BLAKE3 of
//!   their raw bytes; a pusher loads every pack index (cached locally, only
//!   new ones fetched) and uploads only blobs no pack holds, so workspaces
//!   pushing to one prefix share everything they have in common. Trees are
//!   stored without their mtimes (crate::trees), so the same files written
//!   at other times share their trees too; the mtimes travel apart, in
//!   mtimes nodes, and a pull rebuilds the exact local trees from both.
//! - **Data before refs.** A push uploads packs of file contents and state
//!   snapshots, then (one at a time, children before parents) the packs of
//!   trees and mtimes nodes, then the checkpoint records, and only then a
//!   new ref generation. So a tree on the remote implies its whole subtree
//!   and every file content in it is there, an mtimes node implies the
//!   trees of its region and the nodes it names are there (a pusher skips
//!   what it finds), and a ref never names a checkpoint whose data is
//!   missing. (`gc --remote` deletes only unreachable packs, each after
//!   condemning it for a grace period; crate::gc says how pushers and gc
//!   keep this true together.)
//! - **Refs without conditional writes.** A push adds one object per
//!   checkpoint under a name only that checkpoint has, with bytes that
//!   depend only on it, and nothing is ever overwritten with other bytes
//!   or deleted; a workspace's history is the union of what a listing
//!   finds. So concurrent pushers never lose a checkpoint, whether or not
//!   the server honours `If-None-Match` (crate::refs has the argument).
//! - **Identity.** A checkpoint's remote id is the BLAKE3 of its
//!   [`Identity`] (root tree, LtHash digest, time, message, tags, state
//!   snapshot), not of its local sequence number: the same checkpoint pulled
//!   to another machine and pushed again keeps its id, so it is never
//!   stored twice.
//! - **Versioned.** Refs and records carry [`FORMAT`]; one written in
//!   another format is refused with an error that says what to do (format
//!   1 stored trees with their mtimes and is not read: push to a new
//!   prefix), never half-read.

use std::collections::BTreeMap;

use ckpt_lib::ops::parts::{ChangeStats, Checkpoint, Skipped};
use ckpt_lib::Hash;
use serde::{Deserialize, Serialize};

use crate::{corrupt, usage, Result};

/// Remote format of everything below (records, refs). 2: trees without
/// mtimes, and mtimes nodes (crate::trees); 1 stored the local trees.
pub const FORMAT: u32 = 2;

/// The format of ref entries and of the marker (crate::refs); an
/// encrypted remote's config records it too (crate::crypt).
pub const REF_FORMAT: u32 = 3;

/// The error for a ref or record (`what`) in remote format `found`.
pub fn format_error(what: &str, found: u32) -> crate::Error {
    if found < FORMAT {
        usage(format!(
            "{what} is in remote format {found}, written by an older ckpt; this ckpt reads and writes \
             format {FORMAT} (trees shared across workspaces) and does not read it: push to a new \
             prefix (or another workspace name), or use the older ckpt for this one (nothing was changed)"
        ))
    } else {
        usage(format!(
            "{what} is in remote format {found}, newer than this ckpt reads ({FORMAT}); upgrade ckpt \
             (nothing was changed)"
        ))
    }
}

/// Key of a pack.
pub fn pack_key(p: &Hash) -> String {
    format!("packs/{}", p.to_hex())
}

/// Key of a pack's index.
pub fn index_key(p: &Hash) -> String {
    format!("index/{}", p.to_hex())
}

/// Key of a checkpoint record.
pub fn record_key(id: &Hash) -> String {
    format!("checkpoints/{}", id.to_hex())
}

/// The directory of a workspace's ref (crate::refs).
pub fn ref_dir(name: &str) -> String {
    format!("refs/{name}")
}

/// Key of one format-2 ref generation (or of the marker, crate::refs).
pub fn ref_key(name: &str, generation: u64) -> String {
    format!("refs/{name}/{generation:020}")
}

/// Key of the gc lock of an older ckpt (honoured, never taken).
pub const GC_LOCK: &str = "gc/lock";
/// Directory of the gc locks (crate::gc).
pub const GC_LOCKS: &str = "gc/locks";
/// Key of the condemned-pack list.
pub const CONDEMNED: &str = "gc/condemned";

/// Checks a workspace name: letters, digits, `.`, `_`, `-`, not starting
/// with `.`.
pub fn check_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 200
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(usage(format!(
            "{name:?} is not a usable workspace name on a remote: use letters, digits, '.', '_' and '-' \
             (not starting with '.'), e.g. with --workspace NAME (nothing was changed)"
        )))
    }
}

/// Parses a hex hash from a key or record.
pub fn parse_hash(s: &str, what: &str) -> Result<Hash> {
    let b = s.as_bytes();
    if b.len() != 64 {
        return Err(corrupt(format!("{what}: {s:?} is not a hash")));
    }
    let mut out = [0u8; 32];
    for (i, o) in out.iter_mut().enumerate() {
        let pair = std::str::from_utf8(&b[2 * i..2 * i + 2]).unwrap_or("zz");
        *o = u8::from_str_radix(pair, 16)
            .map_err(|_| corrupt(format!("{what}: {s:?} is not a hash")))?;
    }
    Ok(Hash(out))
}

/// What makes a checkpoint the same checkpoint on every machine.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    /// Root tree (hex).
    pub root: String,
    /// LtHash16 digest of the tree (base64url), as in the local record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// Creation time, ns since the epoch.
    pub time_ns: i64,
    /// Message.
    pub message: String,
    /// Tags.
    pub tags: BTreeMap<String, String>,
    /// Agent-state snapshot blob (hex); absent: the empty state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
}

impl Identity {
    /// The remote id: BLAKE3 of this JSON.
    pub fn id(&self) -> Hash {
        Hash::of(&serde_json::to_vec(self).expect("identity serialises"))
    }
}

/// A checkpoint record on the remote (`checkpoints/<id>`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Record {
    /// [`FORMAT`].
    pub format: u32,
    /// The remote id (hex), BLAKE3 of `identity`.
    pub id: String,
    /// What the id covers.
    pub identity: Identity,
    /// The mtimes node of the root (hex, crate::trees): with the trees it
    /// rebuilds the local root tree.
    pub mtimes: Option<String>,
    /// The parent's remote id, if it was pushed with it (informational).
    pub parent: Option<String>,
    /// The sequence number it had where it was made (a clone keeps it).
    pub seq: u64,
    /// The workspace that pushed it first.
    pub workspace: String,
    /// Change counts, as in the local record.
    pub stats: ChangeStats,
    /// Entries the save could not capture.
    pub skipped: Vec<Skipped>,
    /// Save duration.
    pub duration_us: u64,
}

impl Record {
    /// The remote record of a local checkpoint whose state snapshot is
    /// `state` and whose parent has remote id `parent` (`mtimes` is filled
    /// in by the push that sends its trees).
    pub fn of(
        cp: &Checkpoint,
        state: Option<Hash>,
        parent: Option<Hash>,
        workspace: &str,
    ) -> Record {
        let identity = Identity {
            root: cp.root.to_hex(),
            digest: cp.digest.clone(),
            time_ns: cp.time_ns,
            message: cp.message.clone(),
            tags: cp.tags.clone(),
            state: state.map(|h| h.to_hex()),
        };
        Record {
            format: FORMAT,
            id: identity.id().to_hex(),
            identity,
            mtimes: None,
            parent: parent.map(|h| h.to_hex()),
            seq: cp.seq,
            workspace: workspace.to_string(),
            stats: cp.stats.clone(),
            skipped: cp.skipped.clone(),
            duration_us: cp.duration_us,
        }
    }

    /// Decodes `checkpoints/<id>`, checking that it is the record `id`.
    pub fn decode(bytes: &[u8], id: &Hash) -> Result<Record> {
        let r: Record = serde_json::from_slice(bytes)
            .map_err(|e| corrupt(format!("remote checkpoint record {id}: {e}")))?;
        if r.format != FORMAT {
            return Err(format_error(
                &format!("remote checkpoint record {id}"),
                r.format,
            ));
        }
        if r.mtimes.is_none() {
            return Err(corrupt(format!(
                "remote checkpoint record {id} names no mtimes node"
            )));
        }
        if r.identity.id() != *id || r.id != id.to_hex() {
            return Err(corrupt(format!(
                "remote checkpoint record {id} does not match its id"
            )));
        }
        Ok(r)
    }

    /// The id.
    pub fn hash(&self) -> Hash {
        self.identity.id()
    }

    /// Root tree.
    pub fn root(&self) -> Result<Hash> {
        parse_hash(&self.identity.root, "checkpoint record root")
    }

    /// The root's mtimes node.
    pub fn mtimes(&self) -> Result<Hash> {
        parse_hash(
            self.mtimes.as_deref().unwrap_or_default(),
            "checkpoint record mtimes",
        )
    }

    /// State snapshot blob.
    pub fn state(&self) -> Result<Option<Hash>> {
        self.identity
            .state
            .as_deref()
            .map(|s| parse_hash(s, "checkpoint record state"))
            .transpose()
    }

    /// The local record this becomes (seq, parent and state version are
    /// filled in by the importer).
    pub fn to_local(&self) -> Result<Checkpoint> {
        Ok(Checkpoint {
            seq: 0,
            hash: Hash::default(),
            parent: None,
            time_ns: self.identity.time_ns,
            message: self.identity.message.clone(),
            tags: self.identity.tags.clone(),
            root: self.root()?,
            stats: self.stats.clone(),
            skipped: self.skipped.clone(),
            duration_us: self.duration_us,
            digest: self.identity.digest.clone(),
            state_version: None,
        })
    }
}

/// `gc/condemned`: the packs the last `gc --remote` condemned, and those
/// it deleted (gc.rs).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Condemned {
    /// Packs (hex) found unreachable.
    pub packs: Vec<String>,
    /// When each was first condemned (ns since the epoch), same order.
    pub since_ns: Vec<i64>,
}

/// One format-2 ref generation (`refs/<name>/<gen>`), or the marker
/// (crate::refs).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct RefBody {
    /// [`FORMAT`].
    pub format: u32,
    /// The workspace name.
    pub workspace: String,
    /// This generation.
    pub generation: u64,
    /// Remote ids (hex), oldest first; the last is the latest.
    pub checkpoints: Vec<String>,
}

/// Agent-state snapshot blob: every key and value of one state version.
///
/// ```text
/// state := "CKS1" u32:n (u32:key_len key u64:value_len value)*n   keys ascending
/// ```
pub fn encode_state(entries: &[(Vec<u8>, Vec<u8>)]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(b"CKS1");
    b.extend_from_slice(&(entries.len() as u32).to_le_bytes());
    for (k, v) in entries {
        b.extend_from_slice(&(k.len() as u32).to_le_bytes());
        b.extend_from_slice(k);
        b.extend_from_slice(&(v.len() as u64).to_le_bytes());
        b.extend_from_slice(v);
    }
    b
}

/// Decodes an agent-state snapshot.
pub fn decode_state(b: &[u8], what: &str) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let bad = || corrupt(format!("agent-state snapshot {what} is malformed"));
    if b.len() < 8 || &b[..4] != b"CKS1" {
        return Err(bad());
    }
    let n = u32::from_le_bytes(b[4..8].try_into().expect("4")) as usize;
    let mut at: usize = 8;
    let mut take = |len: usize| -> Result<&[u8]> {
        let s = b
            .get(at..at.checked_add(len).ok_or_else(bad)?)
            .ok_or_else(bad)?;
        at += len;
        Ok(s)
    };
    let mut out = Vec::with_capacity(n.min(1 << 16));
    for _ in 0..n {
        let kl = u32::from_le_bytes(take(4)?.try_into().expect("4")) as usize;
        let k = take(kl)?.to_vec();
        let vl = u64::from_le_bytes(take(8)?.try_into().expect("8")) as usize;
        let v = take(vl)?.to_vec();
        out.push((k, v));
    }
    if at != b.len() {
        return Err(bad());
    }
    Ok(out)
}
