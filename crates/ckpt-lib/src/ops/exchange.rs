//! # Exchange: checkpoints out of a store and into one, for a carrier above
//!
//! `ckpt-remote` (push, pull, clone, `log --remote`, `gc --remote`,
//! `remote add/list/remove`) carries checkpoints between a store and object
//! storage. It is a crate above this one, so `ckpt-lib` links no HTTP or
//! S3 stack; this module is the whole of what it may do to a store, so
//! `ops` stays the one layer that opens one. The remote's wire formats
//! (packs, refs, records, encryption) stay in `ckpt-remote`; what touches
//! the store is here, once:
//!
//! - **Export** ([`Local::open`]): a workspace's store opened read-only,
//!   under the store's lock, held until the [`Local`] is dropped (so no
//!   save, gc or delete changes it while a push reads). It hands out
//!   consistent catalog reads ([`Local::snapshot`]: checkpoints,
//!   revisions, trees), object bytes, and a checkpoint's agent-state
//!   snapshot.
//! - **Import** ([`Local::open_for_import`], [`ClonePlace::create`]): the
//!   store opened for writing, under the same lock. Contents arrive
//!   through [`Import::put_object`], each already checked by the carrier
//!   against its name (the remote's decoder hashes every blob), as pending
//!   objects made durable (temp → fsync → rename) every `commit_bytes` and
//!   at [`Import::commit_objects`], so a killed import keeps what arrived. A
//!   checkpoint becomes visible only through [`Import::add_checkpoint`]:
//!   one catalog transaction with its trees, after the carrier has checked
//!   the trees' depth ([`Import::too_deep`]) and LtHash digest
//!   ([`Import::digest_matches`]) and applied its agent state
//!   ([`Import::apply_state`]). So what a reader sees is a whole checkpoint
//!   whose every object is durable, or nothing of it.
//! - **Clone** ([`clone_into`]): a new workspace and store for a clone,
//!   checked before anything is created; the checkpoint imported into it
//!   is written out with the contents hashed on arrival not hashed again
//!   ([`ClonePlace::materialize`]); [`ClonePlace::undo`] removes what a
//!   failed clone made.
//!
//! **Vocabulary.** The remote's records carry a [`Checkpoint`]'s fields
//! (named, with the other parts of reports, in [`super::parts`]), and its
//! tree format encodes the store's trees ([`tree`]: entries, the varint and
//! zigzag codec, the depth limit), so a pulled checkpoint rebuilds byte for
//! byte: the tree items are re-exported here, and only those.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use super::parts::Checkpoint;

use super::{normalize, Context};
use crate::engine::diff::TreeSource;
use crate::engine::digest;
use crate::engine::materialize::{self, MaterializeOptions, Verified};
use crate::store::catalog::CatalogReader;
use crate::store::Store;
use crate::workspace::Workspace;
use crate::{Error, Hash, Result};

/// The store's tree encoding, which the remote tree format builds on
/// (shapes are local trees with their mtimes zeroed; mtimes nodes use the
/// same varints), and the depth limit every imported tree must keep.
pub mod tree {
    pub use crate::store::tree::{
        put_varint, unzigzag, zigzag, Entry, Node, Reader, Tree, MAX_DEPTH,
    };
}

/// A workspace's store, opened under its lock for as long as this lives.
pub struct Local {
    ws: Workspace,
    store: Store,
}

impl Local {
    /// The store of the workspace containing `ctx.cwd`, read-only (under
    /// the store's lock).
    pub fn open(ctx: &Context) -> Result<Local> {
        let ws = ctx.workspace()?;
        let store = ws.open_store_read_only(&ctx.config)?;
        Ok(Local { ws, store })
    }

    /// The store of the workspace containing `ctx.cwd`, for an import
    /// (under the store's lock); objects are made durable every
    /// `commit_bytes`.
    pub fn open_for_import(ctx: &Context, commit_bytes: u64) -> Result<Import> {
        let ws = ctx.workspace()?;
        let store = ws.open_store(&ctx.config)?;
        Ok(Import::new(Local { ws, store }, commit_bytes, false))
    }

    /// The workspace root (absolute).
    pub fn root(&self) -> &Path {
        &self.ws.root
    }

    /// The store directory: where a carrier keeps its own files (its
    /// configuration, its caches), under this store's lock.
    pub fn store_dir(&self) -> &Path {
        &self.store.root
    }

    /// One consistent read of the catalog.
    pub fn snapshot(&self) -> Result<Snapshot<'_>> {
        Ok(Snapshot {
            reader: self.store.catalog.reader()?,
        })
    }

    /// The bytes of object `h` (not checked against its name).
    pub fn object(&self, h: &Hash) -> Result<Vec<u8>> {
        self.store.objects.read_object(h)
    }

    /// Where object `h` is kept (for messages).
    pub fn object_path(&self, h: &Hash) -> PathBuf {
        self.store.objects.object_path(h)
    }

    /// The agent-state snapshot `cp` pins, as (key, value) pairs in key
    /// order; empty for none.
    pub fn state_at(&self, cp: &Checkpoint) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let Some(v) = cp.state_version.filter(|&v| v > 0) else {
            return Ok(Vec::new());
        };
        let Some(s) = self.store.state.get()? else {
            return Err(Error::Corrupt(format!(
                "{} recorded agent state version {v} but {} is missing",
                cp.id(),
                self.store.state.path().display()
            )));
        };
        let snap = s.snapshot(v)?;
        Ok(snap
            .scan(b"")
            .into_iter()
            .map(|e| (e.key, e.value))
            .collect())
    }
}

/// A consistent read of a store's catalog.
pub struct Snapshot<'s> {
    reader: CatalogReader<'s>,
}

impl Snapshot<'_> {
    /// Every checkpoint, oldest first.
    pub fn checkpoints(&self) -> Result<Vec<Checkpoint>> {
        self.reader.checkpoints()
    }

    /// The checkpoint a revision names (`v3`, `HEAD`, `latest`, a tag, …).
    pub fn resolve(&self, rev: &str) -> Result<Checkpoint> {
        self.reader.resolve(rev)
    }

    /// The head, or else the latest checkpoint.
    pub fn head(&self) -> Result<Checkpoint> {
        self.reader
            .resolve("HEAD")
            .or_else(|_| self.reader.resolve("latest"))
    }

    /// Checkpoint number `seq`, if it exists.
    pub fn checkpoint(&self, seq: u64) -> Result<Option<Checkpoint>> {
        self.reader.checkpoint(seq)
    }

    /// Tree `h` from the catalog.
    pub fn tree(&self, h: &Hash) -> Result<tree::Tree> {
        self.reader.tree(h)
    }
}

/// How an imported checkpoint's agent state is applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StateMode {
    /// Keep the workspace's current state as the latest (a pull: the
    /// snapshot is committed, so the record can pin it, then the latest
    /// state is restored to what it was).
    KeepLatest,
    /// The imported state becomes the latest (a clone).
    Become,
}

/// A store taking checkpoints in (see the module doc for the rules).
pub struct Import {
    local: Local,
    /// The store was just made and holds nothing (a clone).
    fresh: bool,
    commit_every: u64,
    since_commit: AtomicU64,
    commit_lock: Mutex<()>,
    /// Contents hashed and stored by an import into a fresh store: the
    /// clone's write need not read and hash them again.
    verified: Verified,
}

impl std::ops::Deref for Import {
    type Target = Local;
    fn deref(&self) -> &Local {
        &self.local
    }
}

impl Import {
    fn new(local: Local, commit_every: u64, fresh: bool) -> Import {
        Import {
            local,
            fresh,
            commit_every,
            since_commit: AtomicU64::new(0),
            commit_lock: Mutex::new(()),
            verified: Verified::default(),
        }
    }

    /// Whether the catalog holds tree `h` (and so its whole subtree and
    /// every content in it).
    pub fn has_tree(&self, h: &Hash) -> Result<bool> {
        self.store.catalog.has_tree(h)
    }

    /// Whether content `h` must be fetched: always into a fresh store (no
    /// object is looked for), else when the store lacks it.
    pub fn lacks_object(&self, h: &Hash) -> bool {
        self.fresh || !self.store.objects.contains(h)
    }

    /// Adds content `h` as a pending object (the caller has checked that
    /// `raw` hashes to it), making pending objects durable once
    /// `commit_bytes` arrived since the last time. Safe from several
    /// threads; into a fresh store, each content at most once.
    pub fn put_object(&self, h: Hash, raw: &[u8]) -> Result<()> {
        if self.fresh {
            self.store.objects.put_verified_new(h, raw)?;
            self.verified
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(h);
        } else {
            self.store.objects.put_verified(h, raw)?;
        }
        // One thread at a time makes the pending objects durable.
        if self
            .since_commit
            .fetch_add(raw.len() as u64, Ordering::Relaxed)
            >= self.commit_every
        {
            let _one = self.commit_lock.lock().unwrap_or_else(|p| p.into_inner());
            if self.since_commit.load(Ordering::Relaxed) >= self.commit_every {
                self.since_commit.store(0, Ordering::Relaxed);
                self.store.objects.commit()?;
            }
        }
        Ok(())
    }

    /// Makes every pending object durable.
    pub fn commit_objects(&self) -> Result<()> {
        self.store.objects.commit()?;
        Ok(())
    }

    /// The first directory below `root` nested deeper than a scan allows
    /// ([`tree::MAX_DEPTH`]), reading `fresh` trees (not yet in the
    /// catalog) first: the engine's walks recurse, so no such tree may be
    /// imported.
    pub fn too_deep(&self, fresh: &HashMap<Hash, Vec<u8>>, root: Hash) -> Result<Option<Vec<u8>>> {
        let reader = self.store.catalog.reader()?;
        let src = TreeSource {
            fresh: Some(fresh),
            catalog: &reader,
        };
        crate::store::tree::too_deep(|h| src.tree(h), root)
    }

    /// Whether the trees below `root` (`fresh` ones first) match the LtHash
    /// digest `cp` records (true when it records none).
    pub fn digest_matches(
        &self,
        cp: &Checkpoint,
        fresh: &HashMap<Hash, Vec<u8>>,
        root: Hash,
    ) -> Result<bool> {
        let Some(want) = digest::stored_digest(cp)? else {
            return Ok(true);
        };
        let reader = self.store.catalog.reader()?;
        let src = TreeSource {
            fresh: Some(fresh),
            catalog: &reader,
        };
        Ok(digest::tree_digest(&src, root)?.state() == want.state())
    }

    /// Commits `entries` as the agent state (a state commit, so a record
    /// can pin it); returns the version that holds them (None when there
    /// are none). See [`StateMode`] for what becomes the latest.
    pub fn apply_state(
        &self,
        entries: &[(Vec<u8>, Vec<u8>)],
        mode: StateMode,
    ) -> Result<Option<u64>> {
        if entries.is_empty() {
            return Ok(None);
        }
        let s = self.store.state.get_or_create()?;
        let before = s.latest_version();
        let want: HashMap<&[u8], &[u8]> = entries
            .iter()
            .map(|(k, v)| (k.as_slice(), v.as_slice()))
            .collect();
        let mut txn = s.begin();
        for (k, _) in txn.scan(b"") {
            if !want.contains_key(k.as_slice()) {
                txn.delete(&k);
            }
        }
        for (k, v) in entries {
            if txn.get(k).as_deref() != Some(v.as_slice()) {
                txn.put(k, v);
            }
        }
        let v = if txn.write_count() == 0 {
            txn.rollback();
            before
        } else {
            txn.commit()?
        };
        if mode == StateMode::KeepLatest && v != before {
            s.restore_to(before)?;
        }
        Ok(Some(v))
    }

    /// Adds checkpoint `cp` with the trees it needs (`new_trees`) in one
    /// durable catalog transaction: number `seq` when given, else the next;
    /// the head only with `make_head`. Call after [`Import::commit_objects`].
    pub fn add_checkpoint(
        &self,
        new_trees: &[(Hash, Vec<u8>)],
        cp: Checkpoint,
        seq: Option<u64>,
        make_head: bool,
    ) -> Result<Checkpoint> {
        self.store
            .catalog
            .import_checkpoint(new_trees, cp, seq, make_head)
    }
}

/// The directory a clone writes, checked ([`clone_into`]).
pub struct CloneDir {
    dest: PathBuf,
    /// It did not exist (so a failed clone removes it).
    missing: bool,
}

/// Checks that `dir` (relative to `ctx.cwd`) is a new or empty directory
/// for `ckpt clone`. Creates nothing.
pub fn clone_into(ctx: &Context, dir: &Path) -> Result<CloneDir> {
    let dest = normalize(&ctx.abs(dir));
    let missing = materialize::check_fresh(&dest, "`ckpt clone`")?;
    Ok(CloneDir { dest, missing })
}

impl CloneDir {
    /// Decides where the clone's store goes (`store`, relative to
    /// `ctx.cwd`, else the usual rule); it must be a new directory outside
    /// the workspace. Creates the workspace directory only (removed again
    /// if the store is refused).
    pub fn place(self, ctx: &Context, store: Option<&Path>) -> Result<ClonePlace> {
        let ws = Workspace::plan(
            &self.dest,
            store.map(|s| ctx.abs(s)).as_deref(),
            ctx.config.data_home.as_deref(),
        )?;
        if ws.store_path.starts_with(&ws.root) || ws.store_path.exists() {
            if self.missing {
                let _ = std::fs::remove_dir(&self.dest);
            }
            return Err(Error::Usage(format!(
                "the clone's store {} must be a new directory outside {} (nothing was changed)",
                ws.store_path.display(),
                ws.root.display()
            )));
        }
        Ok(ClonePlace {
            ws,
            missing: self.missing,
        })
    }
}

/// Where a clone goes: its workspace and its (not yet created) store.
pub struct ClonePlace {
    ws: Workspace,
    missing: bool,
}

/// What [`ClonePlace::materialize`] wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Written {
    /// Files and symlinks.
    pub files: u64,
    /// Directories.
    pub dirs: u64,
    /// Bytes of file content.
    pub bytes: u64,
}

impl ClonePlace {
    /// The new workspace's root.
    pub fn root(&self) -> &Path {
        &self.ws.root
    }

    /// The new store's directory.
    pub fn store_dir(&self) -> &Path {
        &self.ws.store_path
    }

    /// Creates the store and opens it for an import (under its lock; it is
    /// fresh: no object is looked for first).
    pub fn create(&self, ctx: &Context, commit_bytes: u64) -> Result<Import> {
        Store::create_for(&self.ws.store_path, Some(&self.ws.root))?;
        let store = Store::open(&self.ws.store_path, &ctx.config)?;
        Ok(Import::new(
            Local {
                ws: self.ws.clone(),
                store,
            },
            commit_bytes,
            true,
        ))
    }

    /// Writes checkpoint `id` of `import`'s store into the workspace
    /// (contents the import hashed on arrival are not hashed again), then
    /// the workspace marker: the workspace exists only once it is whole.
    pub fn materialize(&self, import: &Import, id: &str) -> Result<Written> {
        let rep = materialize::restore_to_with(
            &import.store,
            id,
            &self.ws.root,
            &[],
            MaterializeOptions {
                verified: Some(&import.verified),
                ..Default::default()
            },
        )?;
        self.ws.write_marker()?;
        Ok(Written {
            files: rep.files,
            dirs: rep.dirs,
            bytes: rep.bytes,
        })
    }

    /// Removes what a failed clone made: the store, and what was written
    /// to the workspace directory (the directory too if it was new). Best
    /// effort: the error that stopped the clone is the one to report.
    pub fn undo(&self) {
        let _ = std::fs::remove_dir_all(&self.ws.store_path);
        materialize::remove_partial(&self.ws.root, self.missing);
    }
}
