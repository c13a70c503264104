//! Criterion benchmarks of the state store, named like the seed's (003) so the figures
//! compare directly, plus the raw fsync latency of the disk under test.
//!
//! Durability per group: engine_get/snapshot read from memory (mode irrelevant);
//! engine_put/*/strict and group_commit/strict fsync every commit (group); the others use
//! `Batched { window_ms: 10 }`. Run: `cargo bench -p ckpt-state --bench state`.

mod harness;

use std::collections::BTreeSet;
use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use ckpt_state::{Durability, Options, RetryPolicy, StateStore};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

const BATCHED: Durability = Durability::Batched { window_ms: 10 };

fn store(d: Durability) -> (tempfile::TempDir, StateStore) {
    let dir = tempfile::tempdir().unwrap();
    let s = StateStore::open(&dir.path().join("state.redb"), Options::with_durability(d)).unwrap();
    (dir, s)
}

fn key(i: u64) -> Vec<u8> {
    format!("key/{i:08}").into_bytes()
}

fn populate(s: &StateStore, n: u64) {
    for chunk in (0..n).collect::<Vec<_>>().chunks(1000) {
        let mut t = s.begin();
        for &i in chunk {
            t.put(&key(i), &[7u8; 64]);
        }
        t.commit().unwrap();
    }
}

fn fsync(c: &mut Criterion) {
    let mut g = c.benchmark_group("fsync");
    g.sample_size(10).measurement_time(Duration::from_secs(2));
    let dir = tempfile::tempdir().unwrap();
    let mut f = std::fs::File::create(dir.path().join("f")).unwrap();
    g.throughput(Throughput::Elements(1));
    g.bench_function("write_4k_fdatasync", |b| {
        b.iter(|| harness::write_4k_fdatasync(&mut f))
    });
    g.finish();
}

fn engine_get(c: &mut Criterion) {
    let (_d, s) = store(Durability::None);
    populate(&s, 10_000);
    let mut g = c.benchmark_group("engine_get");
    g.throughput(Throughput::Elements(1));
    g.measurement_time(Duration::from_secs(2));
    let hot = key(4242);
    g.bench_function("hot_key", |b| b.iter(|| black_box(s.get(black_box(&hot)))));
    let miss = b"key/absent".to_vec();
    g.bench_function("miss", |b| b.iter(|| black_box(s.get(black_box(&miss)))));
    let keys: Vec<Vec<u8>> = (0..10_000u64)
        .map(|i| key(i.wrapping_mul(7919) % 10_000))
        .collect();
    let mut i = 0usize;
    g.bench_function("uniform", |b| {
        b.iter(|| {
            i = (i + 1) % keys.len();
            black_box(s.get(&keys[i]))
        })
    });
    let ws: Vec<Vec<u8>> = (0..100u64).map(|i| key(i * 97)).collect();
    let mut j = 0usize;
    g.bench_function("working_set_100", |b| {
        b.iter(|| {
            j = (j + 1) % ws.len();
            black_box(s.get(&ws[j]))
        })
    });
    g.finish();
}

fn engine_put(c: &mut Criterion) {
    let mut g = c.benchmark_group("engine_put");
    g.throughput(Throughput::Elements(1));
    for (name, d) in [("strict", Durability::Strict), ("batched", BATCHED)] {
        if name == "strict" {
            g.sample_size(10).measurement_time(Duration::from_secs(3));
        } else {
            g.sample_size(30).measurement_time(Duration::from_secs(2));
        }
        let (_d, s) = store(d);
        let mut n = 0u64;
        g.bench_function(BenchmarkId::new("insert", name), |b| {
            b.iter(|| {
                n += 1;
                s.put(&key(n), &[1u8; 64]).unwrap()
            })
        });
        g.bench_function(BenchmarkId::new("overwrite", name), |b| {
            b.iter(|| s.put(b"hot", &[2u8; 64]).unwrap())
        });
    }
    g.finish();
}

fn txn_commit(c: &mut Criterion) {
    let mut g = c.benchmark_group("txn_commit");
    g.throughput(Throughput::Elements(1));
    g.sample_size(30).measurement_time(Duration::from_secs(2));
    let (_d, s) = store(BATCHED);
    populate(&s, 1000);
    g.bench_function("single_put", |b| {
        b.iter(|| {
            let mut t = s.begin();
            t.put(b"k", b"v");
            t.commit().unwrap()
        })
    });
    for n in [3u64, 10] {
        g.bench_function(BenchmarkId::new("multi_put", n), |b| {
            b.iter(|| {
                let mut t = s.begin();
                for i in 0..n {
                    t.put(&key(i), b"v");
                }
                t.commit().unwrap()
            })
        });
    }
    g.bench_function("read_modify_write", |b| {
        b.iter(|| {
            let mut t = s.begin();
            let v = t.get(b"counter").map_or(0, |v| v[0]);
            t.put(b"counter", &[v.wrapping_add(1)]);
            t.commit().unwrap()
        })
    });
    for n in [1u64, 10, 100] {
        g.bench_function(BenchmarkId::new("readN_write1", n), |b| {
            b.iter(|| {
                let mut t = s.begin();
                for i in 0..n {
                    black_box(t.get(&key(i * 7)));
                }
                t.put(b"out", b"v");
                t.commit().unwrap()
            })
        });
    }
    g.finish();
    let mut g = c.benchmark_group("txn_commit_strict");
    g.throughput(Throughput::Elements(1));
    g.sample_size(10).measurement_time(Duration::from_secs(3));
    let (_d2, s2) = store(Durability::Strict);
    g.bench_function("single_put", |b| {
        b.iter(|| {
            let mut t = s2.begin();
            t.put(b"k", b"v");
            t.commit().unwrap()
        })
    });
    g.finish();
}

fn txn_cas(c: &mut Criterion) {
    let mut g = c.benchmark_group("txn_cas");
    g.throughput(Throughput::Elements(1));
    g.sample_size(30).measurement_time(Duration::from_secs(2));
    let (_d, s) = store(BATCHED);
    let mut v = s.put(b"cas", b"0").unwrap();
    g.bench_function("success_sequential", |b| {
        b.iter(|| {
            v = s.cas(b"cas", v, b"x").unwrap();
        })
    });
    g.bench_function("failure_version_mismatch", |b| {
        b.iter(|| black_box(s.cas(b"cas", 1, b"y").unwrap_err()))
    });
    g.finish();
}

fn snapshot(c: &mut Criterion) {
    let mut g = c.benchmark_group("snapshot");
    g.throughput(Throughput::Elements(1));
    g.measurement_time(Duration::from_secs(2));
    let (_d, s) = store(Durability::None);
    populate(&s, 1000);
    g.bench_function("single_read", |b| {
        b.iter(|| {
            let snap = s.snapshot(s.latest_version()).unwrap();
            black_box(snap.get(&key(500)))
        })
    });
    let first = s.latest_version() + 1;
    for i in 0..1000u64 {
        s.put(b"versioned", &i.to_le_bytes()).unwrap();
    }
    let mid = first + 500;
    g.bench_function("after_versions/1000", |b| {
        b.iter(|| {
            let snap = s.snapshot(mid).unwrap();
            black_box(snap.get(b"versioned"))
        })
    });
    g.finish();
    // keep the store from growing across runs
    s.gc(&BTreeSet::new()).unwrap();
}

/// `threads` threads each commit `per` read-modify-write transactions (with retry) on
/// their own key (disjoint) or one shared key; returns elapsed wall time.
fn run_conflict(s: &Arc<StateStore>, threads: usize, per: usize, same: bool) -> Duration {
    let s = s.clone();
    harness::run_threads(threads, move |id| {
        let s = s.clone();
        let k = if same {
            b"shared".to_vec()
        } else {
            format!("own/{id}").into_bytes()
        };
        move || {
            for _ in 0..per {
                s.transaction_with_retry(
                    RetryPolicy {
                        max_attempts: 1_000_000,
                        ..RetryPolicy::default()
                    },
                    |t| {
                        let v = t.get(&k).map_or(0, |v| v[0]);
                        t.put(&k, &[v.wrapping_add(1)]);
                        Ok(())
                    },
                )
                .unwrap();
            }
        }
    })
}

fn conflict(c: &mut Criterion) {
    let mut g = c.benchmark_group("conflict");
    g.sample_size(10).measurement_time(Duration::from_secs(2));
    let (_d, s) = store(BATCHED);
    let s = Arc::new(s);
    let per = 2000;
    for (name, same) in [("disjoint_keys", false), ("same_key", true)] {
        for threads in [2usize, 4, 8] {
            g.throughput(Throughput::Elements((threads * per) as u64));
            g.bench_function(BenchmarkId::new(name, threads), |b| {
                b.iter_custom(|iters| {
                    (0..iters)
                        .map(|_| run_conflict(&s, threads, per, same))
                        .sum()
                })
            });
        }
    }
    g.finish();
}

fn group_commit(c: &mut Criterion) {
    let mut g = c.benchmark_group("group_commit");
    g.sample_size(10).measurement_time(Duration::from_secs(4));
    let (_d, s) = store(Durability::Strict);
    let s = Arc::new(s);
    for writers in [1usize, 2, 4, 8, 16] {
        let per = 160 / writers.min(8);
        g.throughput(Throughput::Elements((writers * per) as u64));
        g.bench_function(BenchmarkId::new("strict", writers), |b| {
            b.iter_custom(|iters| {
                (0..iters)
                    .map(|_| harness::run_writers(&s, writers, per))
                    .sum()
            })
        });
    }
    g.finish();
}

criterion_group!(
    benches,
    fsync,
    engine_get,
    engine_put,
    txn_commit,
    txn_cas,
    snapshot,
    conflict,
    group_commit
);
criterion_main!(benches);
