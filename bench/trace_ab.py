#!/usr/bin/env python3
"""Old vs new `ckpt` binary, side by side, with per-phase times.

Usage: python3 bench/trace_ab.py [RUNS] [save|status]

Alternates two binaries, each on its own initialised copy of the reference
workspace (with its own store, already saved once): before every run it
appends a line to package.json, then runs `ckpt save` (or `ckpt status`)
with CKPT_TRACE=1 and prints the median/min/max wall time and the median of
each traced phase. Set AB_OLD=BIN:WORKSPACE and AB_NEW=BIN:WORKSPACE
(defaults: /work/scratch-index/ckpt-base:/work/scratch-index/ws and
/work/scratch-index/ckpt-new:/work/scratch-index/ws2).
"""
import subprocess, time, sys, statistics, os, re, collections

def pair(var, name, default):
    b, ws = os.environ.get(var, default).split(":", 1)
    return (name, b, ws)

pairs = [pair("AB_OLD", "base", "/work/scratch-index/ckpt-base:/work/scratch-index/ws"),
         pair("AB_NEW", "new", "/work/scratch-index/ckpt-new:/work/scratch-index/ws2")]
n = int(sys.argv[1]) if len(sys.argv) > 1 else 10
op = sys.argv[2] if len(sys.argv) > 2 else "save"
wall = {k: [] for k, _, _ in pairs}
phases = {k: collections.defaultdict(list) for k, _, _ in pairs}
env = dict(os.environ, CKPT_TRACE="1")
for i in range(n):
    for name, b, ws in pairs:
        with open(os.path.join(ws, "package.json"), "a") as f:
            f.write(f"edit {i} {time.time_ns()}\n")
        args = [b, "save", "-m", f"e{i}"] if op == "save" else [b] + op.split()
        t = time.perf_counter()
        r = subprocess.run(args, cwd=ws, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, text=True)
        wall[name].append((time.perf_counter() - t) * 1e3)
        acc = collections.defaultdict(float)
        for line in r.stderr.splitlines():
            m = re.match(r"trace: (.+?)\s+([\d.]+) ms", line)
            if m:
                acc[m.group(1)] += float(m.group(2))
        for k, v in acc.items():
            phases[name][k].append(v)
for k in wall:
    v = wall[k]
    print(f"{op} {k}: wall median {statistics.median(v):.1f} ms (min {min(v):.1f}, max {max(v):.1f}, n={len(v)})")
    for ph in ["open store", "load index", "index read", "index check", "index parse", "index delta", "scan", "objects commit", "catalog commit", "index encode", "index write", "index write delta", "index save"]:
        if ph in phases[k]:
            p = phases[k][ph]
            print(f"   {ph:18} median {statistics.median(p):7.2f}  min {min(p):7.2f}  max {max(p):7.2f}  (n={len(p)})")
