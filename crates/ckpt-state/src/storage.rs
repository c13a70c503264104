//! On-disk layout in redb and every read/write of the database file.
//!
//! Owns the table definitions and their encodings. Tables:
//! - `meta` (`&str → u64`): `format` = [`FORMAT`], `latest` = latest commit version that is
//!   in the file.
//! - `versions` (`(&[u8], u64) → &[u8]`): one row per retained entry, keyed by
//!   (user key, commit version); the value is a tag byte (`0` = tombstone/delete, `1` = value)
//!   followed by the value bytes. redb orders tuples element-wise, so a key's rows are
//!   adjacent and ascending by version: a full scan rebuilds every chain in order.
//! - `collected` (`u64 → u64`): garbage-collected version ranges, start → end inclusive.
//!
//! Invariants: a group of commits (all its rows + the new `latest`) is written in ONE redb
//! write transaction, so after a crash either all of it or none of it is in the file (redb
//! commits are atomic: copy-on-write B-trees, a checksummed commit slot, recovery to the last
//! complete commit). GC rewrites rows and `collected` in one transaction too. Nothing here
//! holds state; callers serialise writers.

use std::collections::BTreeMap;
use std::sync::Arc;

use redb::{
    Database, Durability as RedbDurability, ReadableDatabase, ReadableTable, TableDefinition,
};

use crate::error::{Error, Result};
use crate::mvcc::{Chain, CommitRecord, GcPlan, MemState, Val};

/// On-disk format version written in `meta.format`.
pub(crate) const FORMAT: u64 = 1;

const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
const VERSIONS: TableDefinition<(&[u8], u64), &[u8]> = TableDefinition::new("versions");
const COLLECTED: TableDefinition<u64, u64> = TableDefinition::new("collected");

const TAG_TOMBSTONE: u8 = 0;
const TAG_VALUE: u8 = 1;

fn encode(val: &Val, buf: &mut Vec<u8>) {
    buf.clear();
    match val {
        None => buf.push(TAG_TOMBSTONE),
        Some(v) => {
            buf.reserve(v.len() + 1);
            buf.push(TAG_VALUE);
            buf.extend_from_slice(v);
        }
    }
}

pub(crate) fn decode(raw: &[u8], key: &[u8], version: u64) -> Result<Val> {
    match raw.split_first() {
        Some((&TAG_TOMBSTONE, [])) => Ok(None),
        Some((&TAG_VALUE, rest)) => Ok(Some(Arc::from(rest))),
        _ => Err(Error::Corrupt(format!(
            "bad value record for key {} at version {version}",
            crate::error::show_key(key)
        ))),
    }
}

/// Create the tables if missing and check the format. Returns true if the file was new.
pub(crate) fn init(db: &Database, path: &std::path::Path) -> Result<bool> {
    let tx = db.begin_write()?;
    let fresh;
    {
        let mut meta = tx.open_table(META)?;
        let format = meta.get("format")?.map(|g| g.value());
        fresh = format.is_none();
        match format {
            None => {
                meta.insert("format", FORMAT)?;
                meta.insert("latest", 0)?;
            }
            Some(FORMAT) => {}
            Some(other) => {
                return Err(Error::Format {
                    path: path.to_path_buf(),
                    reason: format!(
                        "on-disk format {other} is not supported by this build (supports {FORMAT}); upgrade ckpt"
                    ),
                })
            }
        }
        tx.open_table(VERSIONS)?;
        tx.open_table(COLLECTED)?;
    }
    if fresh {
        tx.commit()?;
    } else {
        tx.abort()?;
    }
    Ok(fresh)
}

/// Load the whole state into memory. Returns (state, latest version).
pub(crate) fn load(db: &Database) -> Result<(MemState, u64)> {
    let tx = db.begin_read()?;
    let meta = tx.open_table(META)?;
    let latest = meta.get("latest")?.map(|g| g.value()).unwrap_or(0);
    let versions = tx.open_table(VERSIONS)?;
    let mut state = MemState::default();
    let mut cur_key: Option<Vec<u8>> = None;
    let mut cur_chain = Chain::default();
    for row in versions.iter()? {
        let (k, v) = row?;
        let (key, version) = k.value();
        let val = decode(v.value(), key, version)?;
        if version > latest {
            return Err(Error::Corrupt(format!(
                "row at version {version} is newer than the latest commit {latest}"
            )));
        }
        if cur_key.as_deref() != Some(key) {
            if let Some(prev) = cur_key.take() {
                state.insert_chain(&prev, std::mem::take(&mut cur_chain));
            }
            cur_key = Some(key.to_vec());
        }
        cur_chain.entries.push((version, val));
    }
    if let Some(prev) = cur_key {
        state.insert_chain(&prev, cur_chain);
    }
    let collected = tx.open_table(COLLECTED)?;
    for row in collected.iter()? {
        let (s, e) = row?;
        state.collected.insert(s.value(), e.value());
    }
    Ok((state, latest))
}

/// Write commit records (ascending versions) in one redb transaction; `sync` = fsync
/// before returning (redb `Durability::Immediate`).
pub(crate) fn write_commits(db: &Database, records: &[CommitRecord], sync: bool) -> Result<()> {
    let Some(last) = records.last() else {
        return Ok(());
    };
    let mut tx = db.begin_write()?;
    tx.set_durability(if sync {
        RedbDurability::Immediate
    } else {
        RedbDurability::None
    })?;
    {
        let mut table = tx.open_table(VERSIONS)?;
        let mut buf = Vec::new();
        for rec in records {
            for (key, val) in &rec.writes {
                encode(val, &mut buf);
                table.insert((key.as_slice(), rec.version), buf.as_slice())?;
            }
        }
        let mut meta = tx.open_table(META)?;
        meta.insert("latest", last.version)?;
    }
    ckpt_fault::point("state.before_commit");
    tx.commit()?;
    ckpt_fault::point("state.after_commit");
    Ok(())
}

/// Persist a GC plan in one fsync'd transaction.
pub(crate) fn write_gc(db: &Database, plan: &GcPlan) -> Result<()> {
    let mut tx = db.begin_write()?;
    tx.set_durability(RedbDurability::Immediate)?;
    {
        let mut table = tx.open_table(VERSIONS)?;
        for (key, version) in &plan.removals {
            table.remove((key.as_slice(), *version))?;
        }
        let mut collected = tx.open_table(COLLECTED)?;
        collected.retain(|_, _| false)?;
        for (&s, &e) in &plan.collected {
            collected.insert(s, e)?;
        }
    }
    ckpt_fault::point("state.gc_before_commit");
    tx.commit()?;
    ckpt_fault::point("state.gc_after_commit");
    Ok(())
}

/// Used by tests of this module only: number of rows per key.
#[allow(dead_code)]
pub(crate) fn row_counts(db: &Database) -> Result<BTreeMap<Vec<u8>, usize>> {
    let tx = db.begin_read()?;
    let versions = tx.open_table(VERSIONS)?;
    let mut out = BTreeMap::new();
    for row in versions.iter()? {
        let (k, _) = row?;
        *out.entry(k.value().0.to_vec()).or_insert(0) += 1;
    }
    Ok(out)
}
