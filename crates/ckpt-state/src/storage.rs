//! On-disk layout in redb and every read/write of the database file.
//!
//! Owns the table definitions and their encodings. Tables (format 2):
//! - `meta` (`&str → u64`): `format` = [`FORMAT`], `latest` = latest commit version that is
//!   in the file.
//! - `log` (`(u64, &[u8]) → &[u8]`): one row per retained entry, keyed by (commit version,
//!   user key); the value is a tag byte (`0` = tombstone/delete, `1` = value) followed by
//!   the value bytes. Keyed by version first so that a group of commits, whose versions are
//!   consecutive and above every existing row, lands in the right-most leaf of the B-tree:
//!   a group of N commits dirties about as many pages as one commit, whatever its keys
//!   (with user-key-first rows, N commits on unrelated keys dirtied N leaves and made the
//!   group's fsync that much longer). A load scans in version order and appends to each
//!   key's chain, so chains are rebuilt ascending.
//! - `collected` (`u64 → u64`): garbage-collected version ranges, start → end inclusive.
//!
//! Format 1 had the same rows keyed (user key, version) in a table `versions`. Opening a
//! format-1 file migrates it in ONE redb write transaction (copy the rows into `log`, drop
//! `versions`, set `format` = 2), so a crash during the migration leaves the format-1 file
//! untouched and the next open migrates again.
//!
//! Invariants: a group of commits (all its rows + the new `latest`) is written in ONE redb
//! write transaction, so after a crash either all of it or none of it is in the file (redb
//! commits are atomic: copy-on-write B-trees, a checksummed commit slot, recovery to the last
//! complete commit). GC rewrites rows and `collected` in one transaction too. Nothing here
//! holds state; callers serialise writers.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use redb::{
    Database, Durability as RedbDurability, ReadableDatabase, ReadableTable, TableDefinition,
};

use crate::error::{Error, Result};
use crate::mvcc::{Chain, CommitRecord, GcPlan, MemState, Val};

/// On-disk format version written in `meta.format`.
pub(crate) const FORMAT: u64 = 2;

const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
const LOG: TableDefinition<(u64, &[u8]), &[u8]> = TableDefinition::new("log");
/// Format 1's rows, keyed (user key, version); only read, by the migration.
const V1_VERSIONS: TableDefinition<(&[u8], u64), &[u8]> = TableDefinition::new("versions");
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

/// Create the tables if missing, migrate a format-1 file, and check the format. Returns
/// true if the file was new.
pub(crate) fn init(db: &Database, path: &std::path::Path) -> Result<bool> {
    let tx = db.begin_write()?;
    let fresh;
    let migrate;
    {
        let mut meta = tx.open_table(META)?;
        let format = meta.get("format")?.map(|g| g.value());
        fresh = format.is_none();
        migrate = format == Some(1);
        match format {
            None => {
                meta.insert("format", FORMAT)?;
                meta.insert("latest", 0)?;
            }
            Some(FORMAT) | Some(1) => {}
            Some(other) => {
                return Err(Error::Format {
                    path: path.to_path_buf(),
                    reason: format!(
                        "on-disk format {other} is not supported by this build (supports 1 and {FORMAT}); upgrade ckpt"
                    ),
                })
            }
        }
        if migrate {
            migrate_v1(&tx)?;
            meta.insert("format", FORMAT)?;
        }
        tx.open_table(LOG)?;
        tx.open_table(COLLECTED)?;
    }
    if fresh || migrate {
        tx.commit()?;
    } else {
        tx.abort()?;
    }
    Ok(fresh)
}

/// Copy format 1's `versions` rows into `log` and drop `versions` (inside the caller's
/// transaction, which also sets the new format).
fn migrate_v1(tx: &redb::WriteTransaction) -> Result<()> {
    {
        let old = tx.open_table(V1_VERSIONS)?;
        let mut log = tx.open_table(LOG)?;
        for row in old.iter()? {
            let (k, v) = row?;
            let (key, version) = k.value();
            log.insert((version, key), v.value())?;
        }
    }
    tx.delete_table(V1_VERSIONS)?;
    Ok(())
}

/// Load the whole state into memory. Returns (state, latest version).
pub(crate) fn load(db: &Database) -> Result<(MemState, u64)> {
    let tx = db.begin_read()?;
    let meta = tx.open_table(META)?;
    let latest = meta.get("latest")?.map(|g| g.value()).unwrap_or(0);
    let log = tx.open_table(LOG)?;
    let mut chains: HashMap<Vec<u8>, Chain, foldhash::fast::RandomState> = HashMap::default();
    for row in log.iter()? {
        let (k, v) = row?;
        let (version, key) = k.value();
        let val = decode(v.value(), key, version)?;
        if version > latest {
            return Err(Error::Corrupt(format!(
                "row at version {version} is newer than the latest commit {latest}"
            )));
        }
        // Rows come in version order, so each chain is built ascending.
        match chains.get_mut(key) {
            Some(chain) => chain.entries.push((version, val)),
            None => {
                chains.insert(
                    key.to_vec(),
                    Chain {
                        entries: vec![(version, val)],
                    },
                );
            }
        }
    }
    let mut state = MemState::default();
    for (key, chain) in chains {
        state.insert_chain(&key, chain);
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
        let mut table = tx.open_table(LOG)?;
        let mut buf = Vec::new();
        for rec in records {
            for (key, val) in &rec.writes {
                encode(val, &mut buf);
                table.insert((rec.version, key.as_slice()), buf.as_slice())?;
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
        let mut table = tx.open_table(LOG)?;
        for (key, version) in &plan.removals {
            table.remove((*version, key.as_slice()))?;
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
    let log = tx.open_table(LOG)?;
    let mut out = BTreeMap::new();
    for row in log.iter()? {
        let (k, _) = row?;
        *out.entry(k.value().1.to_vec()).or_insert(0) += 1;
    }
    Ok(out)
}
