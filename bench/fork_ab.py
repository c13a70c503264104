#!/usr/bin/env python3
"""Two `ckpt` binaries alternated on `ckpt fork HEAD --count 8` through the
parent's watcher, on a btrfs where the workspace and its store are
subvolumes (what bench/fork.sh sets up on its loop btrfs).

Usage: python3 bench/fork_ab.py ROUNDS OLD NEW [--base DIR]

DIR (default /mnt/lb) is the root of that btrfs and holds `ws`, the
workspace, with HOME and XDG_DATA_HOME under DIR. Set it up once, as root:

    truncate -s 4G lb.img && mkfs.btrfs -q lb.img && mount -o loop lb.img DIR
    cp -a CORPUS DIR/ws && cd DIR/ws
    export HOME=DIR XDG_DATA_HOME=DIR/xdg
    ckpt init --store DIR/store . && ckpt init --subvolume . && cd DIR/ws
    ckpt save && ckpt watch --daemon

Each round, for each binary in turn (the order alternates): a 1-file edit
and a save, then the btrfs cleaner and a `sync` waited for (untimed), then
the timed fork; the 8 forks are removed after it. Prints every round, the
medians and the median of the per-round ratios new/old.
"""
import argparse
import os
import statistics
import subprocess
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("rounds", type=int)
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--base", default="/mnt/lb")
    a = ap.parse_args()
    base, ws = a.base, os.path.join(a.base, "ws")
    env = dict(os.environ, HOME=base, XDG_DATA_HOME=os.path.join(base, "xdg"))

    def sh(*argv):
        subprocess.run(argv, check=True, env=env, cwd=ws, stdout=subprocess.DEVNULL)

    def settled():
        sh("btrfs", "filesystem", "sync", base)
        sh("btrfs", "subvolume", "sync", base)
        sh("sync")

    edited = os.path.join(ws, "app/src/index.js")
    if not os.path.exists(edited):
        edited = subprocess.run(["find", os.path.join(ws, "app"), "-type", "f", "-print", "-quit"],
                                capture_output=True, text=True, check=True).stdout.strip()
    res = {"old": [], "new": []}
    bins = {"old": a.old, "new": a.new}
    for i in range(a.rounds):
        for k in ("old", "new") if i % 2 == 0 else ("new", "old"):
            with open(edited, "a") as f:
                f.write(f"// v{i}{k}\n")
            sh(bins[k], "save", "-q")
            settled()
            t = time.perf_counter()
            sh(bins[k], "fork", "HEAD", "--count", "8", f"{base}/g{i}{k}-")
            res[k].append((time.perf_counter() - t) * 1e3)
            for n in range(1, 9):
                sh(bins[k], "fork", "-q", "--remove", f"{base}/g{i}{k}-{n}")
            settled()
        print(f"round {i}: old {res['old'][-1]:.1f} new {res['new'][-1]:.1f} ms", flush=True)
    for k, v in res.items():
        print(f"{k}: median {statistics.median(v):.1f} ms (min {min(v):.1f}, max {max(v):.1f})")
    ratios = [n / o for o, n in zip(res["old"], res["new"])]
    print(f"pair ratio new/old, median: {statistics.median(ratios):.3f}")


if __name__ == "__main__":
    main()
