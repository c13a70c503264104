//! Criterion benches for LtHash16, named like the seed's (lthash-rs) so the
//! figures can be compared side by side in `BENCH_RESULTS.md`.
//!
//! Groups: `blake3` (XOF expansion only), `lthash_combine` (lane arithmetic
//! only), `lthash_add` (element XOF + add), `entry` (workspace entry element
//! into a `Digest`), `parallel` (rayon digest of many elements), `checksum`.
//! Inputs are fixed byte patterns; nothing depends on timing except the
//! measurements themselves. Measurement time is kept short (1 s) to fit a
//! shared 2-core machine.

use std::hint::black_box;
use std::time::Duration;

use ckpt_lthash::{par_digest, Digest, Entry, LtHash, STATE_BYTES};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rayon::prelude::*;

fn input(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 31 + 7) as u8).collect()
}

fn bench_xof(c: &mut Criterion) {
    let mut g = c.benchmark_group("blake3");
    for len in [64usize, 1024, 4096] {
        let data = input(len);
        g.throughput(Throughput::Bytes(len as u64));
        g.bench_function(format!("hash_{len}B_to_2048B"), |b| {
            let mut out = [0u8; STATE_BYTES];
            b.iter(|| {
                let mut h = blake3::Hasher::new();
                h.update(black_box(&data));
                h.finalize_xof().fill(&mut out);
                black_box(&out);
            })
        });
    }
    // The floor of every element: the 32 BLAKE3 output-block compressions
    // alone (the hasher is finalized once, outside the loop).
    let mut h = blake3::Hasher::new();
    h.update(&input(113));
    let reader = h.finalize_xof();
    g.bench_function("xof_fill_2048B_only", |b| {
        let mut out = [0u8; STATE_BYTES];
        b.iter(|| {
            black_box(&reader).clone().fill(&mut out);
            black_box(&out);
        })
    });
    // Everything of an element except the output: hasher, absorb, finalize.
    g.bench_function("absorb_113B_and_finalize_only", |b| {
        let data = input(113);
        b.iter(|| {
            let mut h = blake3::Hasher::new();
            h.update(black_box(&data));
            black_box(h.finalize_xof());
        })
    });
    g.finish();
}

fn bench_combine(c: &mut Criterion) {
    let mut g = c.benchmark_group("lthash_combine");
    let x = LtHash::of_element(b"x");
    let mut acc = LtHash::of_element(b"acc");
    g.bench_function("add_state", |b| {
        b.iter(|| {
            acc.add(black_box(&x));
        })
    });
    g.bench_function("sub_state", |b| {
        b.iter(|| {
            acc.sub(black_box(&x));
        })
    });
    black_box(&acc);
    g.finish();
}

fn bench_element_add(c: &mut Criterion) {
    let mut g = c.benchmark_group("lthash_add");
    for len in [32usize, 1024] {
        let data = input(len);
        g.throughput(Throughput::Bytes(len as u64));
        g.bench_function(format!("16_1024_add_{len}B"), |b| {
            let mut acc = LtHash::identity();
            b.iter(|| acc.add_element(black_box(&data)));
            black_box(&acc);
        });
    }
    g.finish();
}

fn bench_entry(c: &mut Criterion) {
    let mut g = c.benchmark_group("entry");
    let digest = *blake3::hash(b"file content").as_bytes();
    let path = b"node_modules/some-package/dist/index.js".to_vec();
    g.bench_function("insert_file_entry", |b| {
        let mut d = Digest::new();
        b.iter(|| d.insert_entry(black_box(&Entry::file(&path, 0o644, &digest))));
        black_box(&d);
    });
    let new_digest = *blake3::hash(b"file content 2").as_bytes();
    g.bench_function("replace_file_entry", |b| {
        let mut d = Digest::new();
        b.iter(|| {
            d.replace(
                black_box(&Entry::file(&path, 0o644, &digest)),
                black_box(&Entry::file(&path, 0o644, &new_digest)),
            )
        });
        black_box(&d);
    });
    g.finish();
}

fn bench_parallel(c: &mut Criterion) {
    let mut g = c.benchmark_group("parallel");
    for (n, len) in [(100usize, 1024usize), (16, 65536)] {
        let items: Vec<Vec<u8>> = (0..n)
            .map(|i| {
                let mut v = input(len);
                v[0] = i as u8;
                v
            })
            .collect();
        g.throughput(Throughput::Bytes((n * len) as u64));
        // Seed semantics: each buffer is one element (content-only LtHash).
        g.bench_with_input(
            BenchmarkId::new("elements", format!("{n}x{len}B")),
            &items,
            |b, items| {
                b.iter(|| {
                    items
                        .par_iter()
                        .fold(LtHash::identity, |mut acc, it| {
                            acc.add_element(it);
                            acc
                        })
                        .reduce(LtHash::identity, |mut a, b| {
                            a.add(&b);
                            a
                        })
                })
            },
        );
        // ckpt semantics: BLAKE3 of each file's content, then its entry element.
        let paths: Vec<Vec<u8>> = (0..n)
            .map(|i| format!("dir/file{i}").into_bytes())
            .collect();
        g.bench_with_input(
            BenchmarkId::new("entries", format!("{n}x{len}B")),
            &items,
            |b, items| {
                b.iter(|| {
                    ckpt_lthash::try_par_digest(
                        paths.par_iter().zip(items.par_iter()),
                        |acc, (p, data)| {
                            let h = blake3::hash(data);
                            acc.insert_entry(&Entry::file(p, 0o644, h.as_bytes()));
                            Ok::<_, ()>(())
                        },
                    )
                })
            },
        );
    }
    // Many tiny entries (shape of node_modules): 10,000 precomputed entries.
    let digests: Vec<[u8; 32]> = (0..10_000u32)
        .map(|i| *blake3::hash(&i.to_le_bytes()).as_bytes())
        .collect();
    let paths: Vec<Vec<u8>> = (0..10_000)
        .map(|i| format!("node_modules/pkg{}/lib/file{i}.js", i % 97).into_bytes())
        .collect();
    g.throughput(Throughput::Elements(10_000));
    g.bench_function("entries_10000_precomputed", |b| {
        b.iter(|| {
            par_digest(
                paths
                    .par_iter()
                    .zip(digests.par_iter())
                    .map(|(p, d)| Entry::file(p, 0o644, d)),
            )
        })
    });
    g.finish();
}

fn bench_checksum(c: &mut Criterion) {
    let s = LtHash::of_element(b"state");
    c.bench_function("checksum", |b| b.iter(|| black_box(&s).checksum()));
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(1))
        .sample_size(30);
    targets = bench_xof, bench_combine, bench_element_add, bench_entry, bench_parallel, bench_checksum
}
criterion_main!(benches);
