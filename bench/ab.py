#!/usr/bin/env python3
"""Two `ckpt` binaries, alternated run by run, on the reference workspace.

Usage:
    python3 bench/ab.py OLD_BIN NEW_BIN [--runs N] [--corpus DIR] [--scratch DIR]

Two copies of the corpus, each with its own store (made once, untimed); half
the pairs run the old binary on one copy and the new on the other, then the
other way round, so a copy that happens to be faster favours neither. For
every operation the two binaries take turns (A B B A …), so drift in the
machine's speed hits both alike:

- scan mode: save-0 (`ckpt save` with nothing changed: what a hook that
  saves after every tool call mostly does), save-1 (append a line to one
  file, `ckpt save`), status (after such an edit), restore-1 (edit, then
  `ckpt restore BASE`, which saves first);
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


def edit(ws, i):  # noqa: D103
    with open(os.path.join(ws, EDIT), "a") as f:
        f.write(f"// edit {i} {time.time_ns()}\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--runs", type=int, default=10, help="pairs per op (even)")
    ap.add_argument("--first-save-runs", type=int, default=4)
    ap.add_argument("--corpus", default=os.environ.get("BENCH_CORPUS", "/work/corpus"))
    ap.add_argument("--scratch", default=os.environ.get("BENCH_SCRATCH", "/work/bench-ab"))
    a = ap.parse_args()
    bins = {"old": os.path.abspath(a.old), "new": os.path.abspath(a.new)}
    if os.path.exists(a.scratch):
        shutil.rmtree(a.scratch)
    os.makedirs(a.scratch)
    # Two copies, X and Y, each with its own store. Half the pairs run old on
    # X and new on Y, the other half the other way round, so that a copy
    # that happens to be faster (disk layout, cache) favours neither binary.
    copies = {}
    for c in ("X", "Y"):
        copies[c] = os.path.join(a.scratch, f"ws-{c}")
        print(f"ab: copying the corpus to {copies[c]}", file=sys.stderr)
        subprocess.run(["cp", "-a", a.corpus, copies[c]], check=True)
        run([bins["old"], "init", "-q", ".", "--store", os.path.join(a.scratch, f"store-{c}")],
            copies[c])
        run([bins["old"], "save", "-q", "-m", "base"], copies[c])
    base = {c: json.loads(run([bins["old"], "log", "-n", "1", "--json"], w).stdout)
            ["checkpoints"][0]["id"] for c, w in copies.items()}
    subprocess.run(["sync"])
    phases = [{"old": "X", "new": "Y"}, {"old": "Y", "new": "X"}]
    res = {}

    def series(name, phase, prep, argv_of, n):
        r = res.setdefault(name, {"old": [], "new": []})
        for i in range(n):
            for k in ("old", "new") if i % 2 == 0 else ("new", "old"):
                w = copies[phase[k]]
                prep(w, i)
                r[k].append(timed(argv_of(k, phase[k]), w))

    def ops(mode, phase, n):
        series(f"save-0 ({mode})", phase, lambda w, i: None,
               lambda k, c: [bins[k], "save", "-q"], n)
        series(f"save-1 ({mode})", phase, edit, lambda k, c: [bins[k], "save", "-q", "-m", "ab"], n)
        series(f"status ({mode})", phase, edit, lambda k, c: [bins[k], "status"], n)
        series(f"restore-1 ({mode})", phase, edit,
               lambda k, c: [bins[k], "restore", "-q", base[c]], n)

    half = max(1, a.runs // 2)
    for phase in phases:
        ops("scan", phase, half)
    for phase in phases:
        for k, c in phase.items():
            run([bins[k], "watch", "--daemon"], copies[c])
        try:
            ops("watch", phase, half)
        finally:
            for k, c in phase.items():
                run([bins[k], "watch", "--stop"], copies[c], check=False)
    if a.first_save_runs:
        res["first-save"] = {"old": [], "new": []}
    for i in range(a.first_save_runs):
        for k in ("old", "new") if i % 2 == 0 else ("new", "old"):
            w = os.path.join(a.scratch, f"fs-{k}-{i}")
            subprocess.run(["cp", "-a", a.corpus, w], check=True)
            subprocess.run(["sync"])
            store = os.path.join(a.scratch, f"fs-store-{k}-{i}")
            run([bins[k], "init", "-q", ".", "--store", store], w)
            res["first-save"][k].append(timed([bins[k], "save", "-q", "-m", "first"], w))
    print("| op | old ms, median (min-max) | new ms, median (min-max) | new/old, median of pairs |")
    print("|---|---|---|---|")
    for name, r in res.items():
        o, n = r["old"], r["new"]
        ratios = [y / x for x, y in zip(o, n)]
        cell = lambda v: f"{statistics.median(v):.1f} ({min(v):.1f}-{max(v):.1f})"
        print(f"| {name} | {cell(o)} | {cell(n)} | {statistics.median(ratios):.3f} |")
    print(f"\nruns: {2 * half} pairs per op, {a.first_save_runs} first saves each; "
          f"command: python3 bench/ab.py OLD NEW --runs {a.runs} "
          f"--first-save-runs {a.first_save_runs}")
    shutil.rmtree(a.scratch)


if __name__ == "__main__":
    main()
