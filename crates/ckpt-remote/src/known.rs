//! What blobs the remote holds: every pack index, merged.
//!
//! Pack indexes are immutable, so each is fetched once and kept in a local
//! cache (`<store>/remote-cache/<url id>/index/<P>`; a cache: written
//! temp + rename, checked by its trailer on load, a damaged one is fetched
//! again). A `LIST index/` (one request per 1000 packs) says which exist;
//! cached indexes of packs gone from the list (removed by `gc --remote`)
//! are dropped. So a push after a small change costs one listing, not one
//! request per pack.
//!
//! A push that was killed after uploading a pack but before its index
//! leaves a pack without an index: [`Known::recover_orphans`] reads the
//! copy of the index at the end of such a pack (two range requests) and
//! uploads it, so the re-run uses what arrived instead of sending it again.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use bytes::Bytes;
use ckpt_lib::Hash;
use futures::{stream, StreamExt, TryStreamExt};

use crate::client::Client;
use crate::layout::{self, parse_hash};
use crate::pack::{self, Entry};
use crate::Result;

/// Where a blob is.
#[derive(Clone, Copy, Debug)]
pub struct Loc {
    /// The pack.
    pub pack: Hash,
    /// Its entry.
    pub entry: Entry,
}

/// The merged pack indexes of a remote.
#[derive(Default)]
pub struct Known {
    /// Blob → where (the first pack listed, when several hold it).
    pub blobs: HashMap<Hash, Loc>,
    /// Packs with an index, and their sizes where known.
    pub packs: HashMap<Hash, Vec<Entry>>,
}

/// The cache directory of a remote inside a store.
pub fn cache_dir(store_root: &Path, url: &str) -> PathBuf {
    let id = Hash::of(url.as_bytes()).to_hex();
    store_root.join("remote-cache").join(&id[..16])
}

/// Writes a cache file (temp + rename; a failure only costs a refetch).
pub(crate) fn write_cache(dir: &Path, name: &str, bytes: &[u8]) {
    let _ = std::fs::create_dir_all(dir);
    let tmp = dir.join(format!(".{name}.tmp{}", std::process::id()));
    if std::fs::write(&tmp, bytes).is_ok() && std::fs::rename(&tmp, dir.join(name)).is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
}

impl Known {
    /// Loads every pack index of the remote (from the cache where it can).
    pub async fn load(client: &Client, cache: &Path) -> Result<Known> {
        let listed = client.list("index").await?;
        let dir = cache.join("index");
        let mut names: HashSet<String> = HashSet::new();
        let mut todo = Vec::new();
        let mut known = Known::default();
        for (rel, _) in &listed {
            let Ok(p) = parse_hash(rel, "pack index key") else {
                continue;
            };
            names.insert(rel.clone());
            match std::fs::read(dir.join(rel))
                .ok()
                .and_then(|b| pack::open_index(client.keys(), &b, rel).ok())
            {
                Some(entries) => known.add(p, entries),
                None => todo.push(p),
            }
        }
        // Drop cached indexes of packs gc removed.
        if let Ok(rd) = std::fs::read_dir(&dir) {
            for e in rd.flatten() {
                let n = e.file_name().to_string_lossy().into_owned();
                if !names.contains(&n) {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
        let fetched: Vec<Option<(Hash, Vec<Entry>)>> = stream::iter(todo)
            .map(|p| {
                let dir = dir.clone();
                async move {
                    let key = layout::index_key(&p);
                    // Listed, then deleted by a `gc --remote` before this
                    // read: that pack is gone, so it is not known.
                    let shown = client.shown("GET", &key);
                    let got = client
                        .get_decoded(&key, |b| {
                            let e = pack::open_index(client.keys(), &b, &shown)?;
                            Ok((e, b))
                        })
                        .await;
                    let got = match got {
                        // An index that still does not decode after the
                        // retries (a server whose PUTs are not atomic keeps
                        // the first bytes of an upload killed mid-way) is
                        // no index: the pack is an orphan, and
                        // `recover_orphans` rebuilds its index from the
                        // pack's own footer, which the pack's name and (on
                        // an encrypted remote) its key vouch for.
                        Err(crate::Error::Tampered(_)) => None,
                        Err(crate::Error::Lib(ckpt_lib::Error::Corrupt(_))) => None,
                        r => r?,
                    };
                    let Some((entries, b)) = got else {
                        return Ok::<_, crate::Error>(None);
                    };
                    write_cache(&dir, &p.to_hex(), &b);
                    Ok(Some((p, entries)))
                }
            })
            .buffer_unordered(client.concurrency())
            .try_collect()
            .await?;
        for (p, e) in fetched.into_iter().flatten() {
            known.add(p, e);
        }
        Ok(known)
    }

    /// Adds one pack's index.
    pub fn add(&mut self, pack: Hash, entries: Vec<Entry>) {
        for e in &entries {
            self.blobs.entry(e.hash).or_insert(Loc { pack, entry: *e });
        }
        self.packs.insert(pack, entries);
    }

    /// Forgets packs (condemned by gc: a push must not rely on them).
    pub fn forget(&mut self, packs: &HashSet<Hash>) {
        if packs.is_empty() {
            return;
        }
        for p in packs {
            self.packs.remove(p);
        }
        self.blobs.retain(|_, l| !packs.contains(&l.pack));
        for (p, entries) in &self.packs {
            for e in entries {
                self.blobs.entry(e.hash).or_insert(Loc {
                    pack: *p,
                    entry: *e,
                });
            }
        }
    }

    /// Finds packs without an index (a push killed between the two
    /// uploads), recovers each index from the pack's end, uploads it and
    /// adds it. Returns how many were recovered.
    pub async fn recover_orphans(
        &mut self,
        client: &Client,
        cache: &Path,
        skip: &HashSet<Hash>,
    ) -> Result<u64> {
        let listed = client.list("packs").await?;
        self.recover_listed(client, cache, skip, &listed).await
    }

    /// [`Known::recover_orphans`] with the packs already listed (`LIST
    /// packs/`, made after or with the `LIST index/` of [`Known::load`]).
    pub async fn recover_listed(
        &mut self,
        client: &Client,
        cache: &Path,
        skip: &HashSet<Hash>,
        listed: &[(String, object_store::ObjectMeta)],
    ) -> Result<u64> {
        let orphans: Vec<(Hash, u64)> = listed
            .iter()
            .filter_map(|(rel, m)| Some((parse_hash(rel, "pack key").ok()?, m.size)))
            .filter(|(p, _)| !self.packs.contains_key(p) && !skip.contains(p))
            .collect();
        let dir = cache.join("index");
        let got: Vec<Option<(Hash, Vec<Entry>)>> = stream::iter(orphans)
            .map(|(p, size)| {
                let dir = dir.clone();
                async move {
                    let key = layout::pack_key(&p);
                    if size < 8 {
                        return Ok(None);
                    }
                    let tail = client.get_range(&key, size - 8..size).await?;
                    let Ok(n) = pack::footer_len(&tail, &key) else {
                        return Ok(None);
                    };
                    if n + 8 > size {
                        return Ok(None);
                    }
                    let idx = client.get_range(&key, size - 8 - n..size - 8).await?;
                    let Ok(entries) = pack::open_index(client.keys(), &idx, &key) else {
                        return Ok(None);
                    };
                    // Over whatever is there: an index that did not decode
                    // (see `load`). The bytes are the pack's own footer, so
                    // every writer of this key writes the same bytes.
                    client
                        .put(&layout::index_key(&p), Bytes::from(idx.to_vec()))
                        .await?;
                    write_cache(&dir, &p.to_hex(), &idx);
                    Ok::<_, crate::Error>(Some((p, entries)))
                }
            })
            .buffer_unordered(client.concurrency())
            .try_collect()
            .await?;
        let mut n = 0;
        for (p, e) in got.into_iter().flatten() {
            self.add(p, e);
            n += 1;
        }
        Ok(n)
    }
}

/// Caches an index this process uploaded.
pub fn remember(cache: &Path, pack: &Hash, index: &[u8]) {
    write_cache(&cache.join("index"), &pack.to_hex(), index);
}
