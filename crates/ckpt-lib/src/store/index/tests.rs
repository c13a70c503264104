//! Unit tests of the stat index: round trips, damaged records, version 3,
//! device maps, and the tracked delta against a walk over every record.

use super::entries::{block_flags, implied_size, remap, type_bits};
use super::files::OLD_VERSION;
use super::*;
use crate::store::tree::{Entry, Node};
use ckpt_fs::fs::Meta;
use proptest::prelude::*;
use std::collections::HashSet;

#[test]
fn round_trip_and_corruption_detected() {
    let mut ix = Index {
        generation: 3,
        scan_start_ns: 42,
        ..Default::default()
    };
    ix.dirs.insert(
        b"a/b".to_vec(),
        Arc::new(DirRecord {
            tree: Hash::of(b"t"),
            entries: vec![file_entry(b"f\n\xff", 0o755, true)].into(),
            exact_names: true,
        }),
    );
    let bytes = ix.encode();
    let back = Index::decode(&bytes).unwrap();
    assert_eq!(back.dirs, ix.dirs);
    assert_eq!(back.generation, 3);
    for i in 0..bytes.len() {
        let mut b = bytes.clone();
        b[i] ^= 1;
        assert!(Index::decode(&b).is_err(), "flip at {i} undetected");
    }
}

/// A 3-byte file's entry (content `abc`, device 1, inode 2).
fn file_entry(name: &[u8], perm: u32, racy: bool) -> IndexEntry {
    IndexEntry {
        entry: Entry {
            name: name.to_vec(),
            mode: perm,
            mtime_ns: 7,
            node: Node::File {
                size: 3,
                hash: Hash::of(b"abc"),
            },
        },
        meta: Meta {
            dev: 1,
            ino: 2,
            mode: 0o100000 | perm,
            size: 3,
            mtime_ns: 7,
            ctime_ns: 9,
        },
        racy,
    }
}

/// Entries damaged behind a matching trailer (only a writer's bug could
/// make such a file): the index loads, the damaged record's entries read
/// up to the damage, and every way of counting or reading them agrees.
/// A record that claims more entries than its block has room for is
/// refused when loaded.
#[test]
fn damaged_entries_end_their_record() {
    let e = |name: &[u8]| file_entry(name, 0o644, false);
    let mut ix = Index::default();
    let names: [&[u8]; 3] = [b"name-a", b"name-b", b"name-c"];
    ix.dirs.insert(
        b"d".to_vec(),
        Arc::new(DirRecord {
            tree: Hash::of(b"t"),
            entries: names.iter().map(|n| e(n)).collect(),
            exact_names: true,
        }),
    );
    let good = ix.encode();
    let resealed = |mut b: Vec<u8>| {
        let n = b.len() - 32;
        let h = Hash::of(&b[..n]);
        b[n..].copy_from_slice(&h.0);
        b
    };
    let at = |name: &[u8]| good.windows(name.len()).position(|w| w == name).unwrap();
    let b = at(b"name-b");
    let reads = |bytes: Vec<u8>| {
        let ix = Index::decode(&resealed(bytes)).unwrap();
        let rec = &ix.dirs[b"d".as_slice()];
        assert_eq!(rec.entries.claimed(), 3);
        let (len, views) = (rec.entries.len(), rec.entries.views().count());
        assert_eq!(len, views);
        assert_eq!(rec.entries.to_vec().len(), len);
        len
    };
    assert_eq!(reads(good.clone()), 3);
    // The second entry's flags unknown, or its name equal to the first's.
    let mut flags = good.clone();
    flags[b - 2] = 0xff;
    assert_eq!(reads(flags), 1);
    let mut order = good.clone();
    order[b + 5] = b'a';
    assert_eq!(reads(order), 1);
    // The third's name before the second's: two read.
    let mut last = good.clone();
    last[at(b"name-c") + 5] = b'a';
    assert_eq!(reads(last), 2);
    // The count (u32 before the first entry's flags and name length).
    let mut count = good.clone();
    let n = at(b"name-a") - 6;
    assert_eq!(count[n..n + 4], 3u32.to_le_bytes());
    count[n..n + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(Index::decode(&resealed(count)).is_err());
}

/// A version-3 file, as the previous release wrote it: the tree-entry
/// encoding plus fixed-width meta (test-only writer).
fn encode_v3(ix: &Index) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&OLD_VERSION.to_le_bytes());
    out.extend_from_slice(&ix.generation.to_le_bytes());
    out.extend_from_slice(&ix.scan_start_ns.to_le_bytes());
    let mut paths: Vec<_> = ix.dirs.keys().collect();
    paths.sort();
    out.extend_from_slice(&(paths.len() as u32).to_le_bytes());
    for p in paths {
        let d = &ix.dirs[p];
        let mut b = Vec::new();
        b.extend_from_slice(&(p.len() as u32).to_le_bytes());
        b.extend_from_slice(p);
        b.extend_from_slice(&d.tree.0);
        b.push(block_flags(d));
        b.extend_from_slice(&(d.entries.len() as u32).to_le_bytes());
        for e in d.entries.iter() {
            e.entry.encode_into(&mut b);
            b.extend_from_slice(&e.meta.dev.to_le_bytes());
            b.extend_from_slice(&e.meta.ino.to_le_bytes());
            b.extend_from_slice(&e.meta.mode.to_le_bytes());
            b.extend_from_slice(&e.meta.size.to_le_bytes());
            b.extend_from_slice(&e.meta.ctime_ns.to_le_bytes());
            b.push(e.racy as u8);
        }
        out.extend_from_slice(&(b.len() as u32).to_le_bytes());
        out.extend_from_slice(&b);
    }
    let h = blake3::hash(&out);
    out.extend_from_slice(h.as_bytes());
    out
}

fn arb_entry() -> impl Strategy<Value = IndexEntry> {
    let node = crate::store::tree::arb_node();
    // Small pools for dev, times and sizes, so that both the implied
    // and the explicit encodings of each field come up.
    let dev = prop_oneof![Just(7u64), any::<u64>()];
    let time = prop_oneof![Just(1_700_000_000_000_000_000i64), any::<i64>()];
    (
        node,
        0u32..=0o7777,
        time.clone(),
        time,
        dev,
        any::<u64>(),
        prop_oneof![Just(None), any::<u32>().prop_map(Some)],
        prop_oneof![Just(None), any::<u64>().prop_map(Some)],
        any::<bool>(),
    )
        .prop_map(|(node, perm, mtime, ctime, dev, ino, mode, size, racy)| {
            let entry = Entry {
                name: Vec::new(),
                mode: perm,
                mtime_ns: mtime,
                node,
            };
            let n = entry.borrowed().node;
            let (mode, size) = (
                mode.unwrap_or(type_bits(&n) | perm),
                size.unwrap_or(implied_size(&n)),
            );
            IndexEntry {
                entry,
                meta: Meta {
                    dev,
                    ino,
                    mode,
                    size,
                    mtime_ns: mtime,
                    ctime_ns: ctime,
                },
                racy,
            }
        })
}

/// The model of a device map: `dirs` with every entry on device `from`
/// on device `to`.
fn moved(dirs: &DirMap, from: u64, to: u64) -> DirMap {
    dirs.iter()
        .map(|(p, r)| {
            let entries = r.entries.iter().map(|e| {
                let mut e = e.clone();
                e.meta.dev = remap(Some((from, to)), e.meta.dev);
                e
            });
            let rec = DirRecord {
                tree: r.tree,
                entries: entries.collect(),
                exact_names: r.exact_names,
            };
            (p.clone(), Arc::new(rec))
        })
        .collect()
}

fn arb_index() -> impl Strategy<Value = Index> {
    let dir = (
        proptest::collection::vec(arb_entry(), 0..12),
        any::<[u8; 32]>(),
        any::<bool>(),
    )
        .prop_map(|(mut entries, tree, exact_names)| {
            for (i, e) in entries.iter_mut().enumerate() {
                e.entry.name = format!("n{i:02}").into_bytes();
            }
            Arc::new(DirRecord {
                tree: Hash(tree),
                entries: entries.into(),
                exact_names,
            })
        });
    (
        proptest::collection::vec(dir, 1..6),
        any::<u64>(),
        any::<i64>(),
    )
        .prop_map(|(dirs, generation, scan_start_ns)| Index {
            generation,
            scan_start_ns,
            dirs: dirs
                .into_iter()
                .enumerate()
                .map(|(i, d)| (format!("d{i}").into_bytes(), d))
                .collect(),
            base: None,
        })
}

/// A device map on a real-sized index is a delta of a few bytes, and
/// the base file is left as it was.
#[test]
fn a_device_map_is_a_small_delta() {
    let entry = |i: u32| IndexEntry {
        entry: Entry {
            name: format!("f{i:04}").into_bytes(),
            mode: 0o644,
            mtime_ns: 1_700_000_000_000_000_000,
            node: Node::File {
                size: 10,
                hash: Hash([i as u8; 32]),
            },
        },
        meta: Meta {
            dev: 7,
            ino: u64::from(i),
            mode: libc::S_IFREG | 0o644,
            size: 10,
            mtime_ns: 1_700_000_000_000_000_000,
            ctime_ns: 1_700_000_000_000_000_000,
        },
        racy: false,
    };
    let ix = Index {
        generation: 3,
        scan_start_ns: 0,
        dirs: (0..100)
            .map(|d| {
                let rec = DirRecord {
                    tree: Hash([d as u8; 32]),
                    entries: (0..20).map(entry).collect(),
                    exact_names: true,
                };
                (format!("d{d}").into_bytes(), Arc::new(rec))
            })
            .collect(),
        base: None,
    };
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("index");
    let mut ix = ix;
    ix.save(&path).unwrap();
    let base = std::fs::read(&path).unwrap();
    let mut a = Index::load(&path, 3);
    assert!(a.remap_dev(7, 8));
    a.save(&path).unwrap();
    assert_eq!(
        std::fs::read(&path).unwrap(),
        base,
        "the base was rewritten"
    );
    let delta = std::fs::metadata(delta_path(&path)).unwrap().len();
    assert!(delta < 200, "a device map took {delta} bytes");
    let b = Index::load(&path, 3);
    assert!(b
        .dirs
        .values()
        .all(|r| r.exact_names && r.entries.iter().all(|e| e.meta.dev == 8)));
    index_at_a_snapshot(&path);
}

/// An index read at `path` is taken at another path only where that
/// file is its base file (here a hard link, as a snapshot keeps the
/// inode): saved there, it writes a delta there, and leaves `path`
/// and its delta alone. A copy (another inode) or another index is
/// refused.
fn index_at_a_snapshot(path: &Path) {
    let tmp = tempfile::tempdir().unwrap();
    let (link, copy, other) = (
        tmp.path().join("link"),
        tmp.path().join("copy"),
        tmp.path().join("other"),
    );
    std::fs::hard_link(path, &link).unwrap();
    std::fs::copy(path, &copy).unwrap();
    let read = Index::load(path, 3);
    let before = (
        std::fs::read(path).unwrap(),
        std::fs::read(delta_path(path)).unwrap(),
    );
    assert!(read.at_snapshot(&copy).is_none(), "another inode was taken");
    assert!(
        !read.save_snapshot_delta(&copy, 8, 9).unwrap() && !delta_path(&copy).exists(),
        "a delta was written beside another inode"
    );
    let mut changed = Index {
        base: None,
        ..read.clone()
    };
    assert!(changed.remap_dev(8, 9));
    changed.save(&other).unwrap();
    assert!(
        read.at_snapshot(&other).is_none(),
        "another index was taken"
    );

    let mut at = read.at_snapshot(&link).expect("the same file is taken");
    assert!(at.remap_dev(8, 10));
    at.save(&link).unwrap();
    assert!(delta_path(&link).exists(), "no delta beside the link");
    assert_eq!(
        std::fs::read(&link).unwrap(),
        before.0,
        "the base was rewritten"
    );
    assert_eq!(
        std::fs::read(delta_path(path)).unwrap(),
        before.1,
        "the original's delta changed"
    );
    let devs = |p: &Path| -> HashSet<u64> {
        Index::load(p, 3)
            .dirs
            .values()
            .flat_map(|r| r.entries.iter().map(|e| e.meta.dev).collect::<Vec<_>>())
            .collect()
    };
    assert_eq!(devs(&link), HashSet::from([10]));
    assert_eq!(devs(path), HashSet::from([8]));
}

proptest! {
    /// Every entry survives the compact encoding, whatever its fields;
    /// an index written by the previous version (3) loads to the same
    /// records, and written again (version 4) still does.
    #[test]
    fn compact_records_round_trip_and_version_3_is_still_read(ix in arb_index()) {
        let v4 = Index::decode(&ix.encode()).unwrap();
        prop_assert_eq!(&v4.dirs, &ix.dirs);
        let v3 = Index::decode(&encode_v3(&ix)).unwrap();
        prop_assert_eq!(&v3.dirs, &ix.dirs);
        prop_assert_eq!(v3.generation, ix.generation);
        let again = v3.encode();
        prop_assert_eq!(&again[4..8], &VERSION.to_le_bytes()[..]);
        prop_assert_eq!(&Index::decode(&again).unwrap().dirs, &ix.dirs);
    }

    /// A loaded index maps its file, and after its pages are handed
    /// back (what the idle watcher does) it reads the same records.
    #[test]
    fn a_mapped_index_reads_the_same_after_its_pages_are_released(ix in arb_index()) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("index");
        std::fs::write(&path, ix.encode()).unwrap();
        let loaded = Index::load(&path, ix.generation);
        let base = loaded.base.as_ref().unwrap();
        prop_assert!(matches!(base.loaded.as_deref(), Some(Bytes::Mapped(_))));
        loaded.release_pages();
        prop_assert_eq!(&loaded.dirs, &ix.dirs);
    }

    /// An index moved to another device by a device map reads as the
    /// same index with every entry on that device rewritten: from the
    /// base and a delta, after a further change (the
    /// next delta carries the map on), after a second map (composed
    /// with the first), and written whole (no map left).
    #[test]
    fn a_device_map_reads_as_the_rewritten_devices(
        ix in arb_index(),
        to in any::<u64>(),
        to2 in any::<u64>(),
    ) {
        let from = 7u64;
        let devs: HashSet<u64> = ix.dirs.values().flat_map(|r| r.entries.iter().map(|e| e.meta.dev)).collect();
        prop_assume!(to != from && to2 != to && !devs.contains(&to) && !devs.contains(&to2));
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("index");
        let g = ix.generation;
        let mut ix = ix;
        ix.save(&path).unwrap();
        let mut a = Index::load(&path, g);
        prop_assert!(a.remap_dev(from, to));
        a.save(&path).unwrap();
        let want = moved(&ix.dirs, from, to);
        let mut b = Index::load(&path, g);
        prop_assert_eq!(&*b.dirs, &want);

        let added = Arc::new(DirRecord { tree: Hash([9; 32]), ..DirRecord::default() });
        b.dirs.insert(b"zz".to_vec(), Arc::clone(&added));
        b.save(&path).unwrap();
        let mut want = want;
        want.insert(b"zz".to_vec(), added);
        let mut c = Index::load(&path, g);
        prop_assert_eq!(&*c.dirs, &want);

        prop_assert!(c.remap_dev(to, to2));
        c.save(&path).unwrap();
        let want = moved(&want, to, to2);
        let d = Index::load(&path, g);
        prop_assert_eq!(&*d.dirs, &want);

        let whole = Index::decode(&d.encode()).unwrap();
        prop_assert_eq!(&*whole.dirs, &want);
        prop_assert!(whole.base.as_ref().unwrap().dev_map.is_none());
    }
}

/// A change to the records of a loaded index.
#[derive(Clone, Debug)]
enum Change {
    /// A fresh record (tree seed) at path `d{n}`, which may be new.
    Put(u8, u8),
    /// Remove the record at `d{n}`.
    Remove(u8),
    /// Replace the records as a full scan does ([`Dirs::succeeding`]):
    /// per record, by bits of the mask, keep it (the same `Arc`), make
    /// it fresh or drop it; and add a fresh record at `d{n}`.
    Rebuild(u64, u8),
}

fn arb_change() -> impl Strategy<Value = Change> {
    prop_oneof![
        3 => (0u8..28, any::<u8>()).prop_map(|(n, t)| Change::Put(n, t)),
        2 => (0u8..28).prop_map(Change::Remove),
        1 => (any::<u64>(), 0u8..28).prop_map(|(m, n)| Change::Rebuild(m, n)),
    ]
}

fn fresh(seed: u8, unknown: bool) -> Arc<DirRecord> {
    Arc::new(DirRecord {
        tree: match unknown {
            true => UNKNOWN_TREE,
            false => Hash::of(&[seed]),
        },
        entries: Entries::default(),
        exact_names: seed.is_multiple_of(3),
    })
}

fn path(n: u8) -> Vec<u8> {
    format!("d{n}").into_bytes()
}

proptest! {
    /// Through any changes to a loaded index's records (set, removed,
    /// rebuilt as a full scan does), the delta built from what [`Dirs`]
    /// tracked has the bytes of the walk over every record and every
    /// path of the base, loads back as the index, and the unknown-tree
    /// set is exact.
    #[test]
    fn the_tracked_delta_is_the_walked_one(
        ix in arb_index(),
        more in proptest::collection::vec(arb_index(), 3),
        changes in proptest::collection::vec(arb_change(), 1..12),
    ) {
        // A base of up to 24 directories `d0`…
        let mut big = ix;
        for m in more {
            let n = big.dirs.len();
            for (i, (_, rec)) in m.dirs.iter().enumerate() {
                big.dirs.insert(path((n + i) as u8), Arc::clone(rec));
            }
        }
        let bytes = big.encode();
        let mut ix = Index::decode(&bytes).unwrap();
        let base = ix.base.clone().unwrap();
        for (i, c) in changes.iter().enumerate() {
            match *c {
                Change::Put(n, t) => {
                    ix.dirs.insert(path(n), fresh(t, t % 4 == 0));
                }
                Change::Remove(n) => {
                    ix.dirs.remove(&path(n));
                }
                Change::Rebuild(mask, n) => {
                    let mut records: Vec<(Vec<u8>, Arc<DirRecord>)> = Vec::new();
                    for (p, rec) in ix.dirs.iter() {
                        let k = p.len() as u32 * 7 + u32::from(p.last().copied().unwrap_or(0));
                        let bits = mask.rotate_right(k % 64);
                        match bits & 3 {
                            0 | 1 => records.push((p.clone(), Arc::clone(rec))),
                            2 => records.push((p.clone(), fresh(bits as u8, bits & 4 != 0))),
                            _ => {}
                        }
                    }
                    records.retain(|(p, _)| *p != path(n));
                    records.push((path(n), fresh(n, false)));
                    ix.dirs = Dirs::succeeding(&ix.dirs, records, true);
                }
            }
            prop_assert_eq!(ix.dirs.unknown_trees(), &unknown_trees(&ix.dirs));
            let delta = ix.encode_delta(&base);
            prop_assert_eq!(&delta, &ix.encode_delta_by_walk(&base).unwrap(), "change {}", i);
            if let Some(d) = delta {
                let mut back = Index::decode(&bytes).unwrap();
                back.apply_delta(d).unwrap();
                prop_assert_eq!(&back.dirs, &ix.dirs, "change {}: loaded", i);
            }
        }
    }
}

proptest! {
    /// `fork --count`'s delta for a copy ([`Index::save_snapshot_delta`])
    /// has the bytes of the general way (take the index at the copy's
    /// snapshot of the base, move it to the copy's device, save it)
    /// and is made exactly when that way writes a delta: from a base
    /// with or without a device map, after records were put (entries
    /// on the moved device among them) and removed.
    #[test]
    fn the_snapshot_delta_is_what_remap_and_save_write(
        ix in arb_index(),
        more in proptest::collection::vec(arb_index(), 2),
        puts in proptest::collection::vec((0u8..16, any::<prop::sample::Index>()), 0..5),
        removes in proptest::collection::vec(0u8..16, 0..3),
        mapped in any::<bool>(),
        to in 1u64 << 40..1u64 << 41,
    ) {
        // A base of up to 18 directories `d0`…
        let mut big = ix;
        let pool: Vec<Arc<DirRecord>> =
            more.iter().flat_map(|m| m.dirs.values().cloned()).collect();
        for (i, rec) in pool.iter().enumerate() {
            big.dirs.insert(path((big.dirs.len() + i) as u8), Arc::clone(rec));
        }
        let devs: HashSet<u64> = big.dirs.values().flat_map(|r| r.entries.iter().map(|e| e.meta.dev)).collect();
        prop_assume!(!devs.contains(&to) && !devs.contains(&8));
        let tmp = tempfile::tempdir().unwrap();
        let path_ = tmp.path().join("index");
        let g = big.generation;
        big.save(&path_).unwrap();
        let from = if mapped {
            let mut a = Index::load(&path_, g);
            prop_assert!(a.remap_dev(7, 8));
            a.save(&path_).unwrap();
            8
        } else {
            7
        };
        let mut ix = Index::load(&path_, g);
        for (n, pick) in &puts {
            ix.dirs.insert(path(*n), Arc::clone(pick.get(&pool)));
        }
        for n in &removes {
            ix.dirs.remove(&path(*n));
        }
        let (link, link2) = (tmp.path().join("link"), tmp.path().join("link2"));
        std::fs::hard_link(&path_, &link).unwrap();
        std::fs::hard_link(&path_, &link2).unwrap();
        let mut general = ix.at_snapshot(&link).unwrap();
        prop_assert!(general.remap_dev(from, to));
        general.save(&link).unwrap();
        let same_base = std::fs::metadata(&link).unwrap().ino() == std::fs::metadata(&path_).unwrap().ino();
        let delta = same_base.then(|| std::fs::read(delta_path(&link)).unwrap());
        let want = moved(&ix.dirs, from, to);
        prop_assert_eq!(&*Index::load(&link, g).dirs, &want);
        prop_assert_eq!(&ix.snapshot_delta(from, to), &delta);
        prop_assert_eq!(ix.save_snapshot_delta(&link2, from, to).unwrap(), delta.is_some());
        if delta.is_some() {
            prop_assert_eq!(&*Index::load(&link2, g).dirs, &want);
        }
    }
}
