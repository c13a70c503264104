#!/usr/bin/env python3
"""Two `ckpt` binaries, alternated run by run, on the reference workspace.

Usage:
    python3 bench/ab.py OLD_BIN NEW_BIN [--runs N] [--corpus DIR] [--scratch DIR]

Each binary gets its own copy of the corpus and its own store (made once,
untimed). Then, for every operation, the two binaries take turns (A B A B …),
so drift in the machine's speed hits both alike:

- scan mode: save-1 (append a line to one file, `ckpt save`), status (after
  such an edit), restore-1 (edit, then `ckpt restore BASE`, which saves first);
- watch mode: the same three with a live `ckpt watch --daemon` in each copy;
- first-save: `ckpt init --store NEW && ckpt save` of the whole copy into a
  fresh store. Stores are removed only at the end, never just before a timed
  run (ext4 creates files slowly for a while after a mass deletion).

Prints one markdown table: median (min-max) ms per binary and the median of
the per-pair ratios new/old. Wall time of the whole `ckpt` process, measured
here with time.perf_counter around subprocess.run.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

EDIT = "app/src/mod1.ts"


def run(argv, cwd, check=True):
    return subprocess.run(argv, cwd=cwd, check=check, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE)


def timed(argv, cwd):
    t = time.perf_counter()
    run(argv, cwd)
    return (time.perf_counter() - t) * 1e3


def edit(ws, i):
    with open(os.path.join(ws, EDIT), "a") as f:
        f.write(f"// edit {i} {time.time_ns()}\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--first-save-runs", type=int, default=3)
    ap.add_argument("--corpus", default=os.environ.get("BENCH_CORPUS", "/work/corpus"))
    ap.add_argument("--scratch", default=os.environ.get("BENCH_SCRATCH", "/work/bench-ab"))
    a = ap.parse_args()
    bins = {"old": os.path.abspath(a.old), "new": os.path.abspath(a.new)}
    if os.path.exists(a.scratch):
        shutil.rmtree(a.scratch)
    os.makedirs(a.scratch)
    ws, base = {}, {}
    for k, b in bins.items():
        ws[k] = os.path.join(a.scratch, f"ws-{k}")
        print(f"ab: copying the corpus for {k}", file=sys.stderr)
        subprocess.run(["cp", "-a", a.corpus, ws[k]], check=True)
        run([b, "init", "-q", ".", "--store", os.path.join(a.scratch, f"store-{k}")], ws[k])
        run([b, "save", "-q", "-m", "base"], ws[k])
        base[k] = run([b, "log", "-n", "1", "--json"], ws[k]).stdout.decode()
        base[k] = json.loads(base[k])["checkpoints"][0]["id"]
    subprocess.run(["sync"])
    res = {}

    def series(name, prep, argv_of):
        res[name] = {"old": [], "new": []}
        for i in range(a.runs):
            for k in ("old", "new") if i % 2 == 0 else ("new", "old"):
                prep(k, i)
                res[name][k].append(timed(argv_of(k), ws[k]))

    def ops(mode):
        series(f"save-1 ({mode})", lambda k, i: edit(ws[k], i),
               lambda k: [bins[k], "save", "-q", "-m", "ab"])
        series(f"status ({mode})", lambda k, i: edit(ws[k], i),
               lambda k: [bins[k], "status"])
        series(f"restore-1 ({mode})", lambda k, i: edit(ws[k], i),
               lambda k: [bins[k], "restore", "-q", base[k]])

    ops("scan")
    for k, b in bins.items():
        run([b, "watch", "--daemon"], ws[k])
    try:
        ops("watch")
    finally:
        for k, b in bins.items():
            run([b, "watch", "--stop"], ws[k], check=False)
    res["first-save"] = {"old": [], "new": []}
    for i in range(a.first_save_runs):
        for k in ("old", "new") if i % 2 == 0 else ("new", "old"):
            w = os.path.join(a.scratch, f"fs-{k}-{i}")
            subprocess.run(["cp", "-a", a.corpus, w], check=True)
            subprocess.run(["sync"])
            store = os.path.join(a.scratch, f"fs-store-{k}-{i}")
            run([bins[k], "init", "-q", ".", "--store", store], w)
            res["first-save"][k].append(timed([bins[k], "save", "-q", "-m", "first"], w))
    print(f"| op | old ms, median (min-max) | new ms, median (min-max) | new/old, median of pairs |")
    print("|---|---|---|---|")
    for name, r in res.items():
        o, n = r["old"], r["new"]
        ratios = [y / x for x, y in zip(o, n)]
        cell = lambda v: f"{statistics.median(v):.1f} ({min(v):.1f}-{max(v):.1f})"
        print(f"| {name} | {cell(o)} | {cell(n)} | {statistics.median(ratios):.3f} |")
    print(f"\nruns: {a.runs} per op, {a.first_save_runs} first saves; "
          f"command: python3 bench/ab.py {a.old} {a.new} --runs {a.runs}")
    shutil.rmtree(a.scratch)


if __name__ == "__main__":
    main()
