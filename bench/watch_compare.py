"""Scan mode vs watch mode, interleaved on one workspace (issue 6).

Usage: bench/watch_compare.py WS STORE [ROUNDS] [CKPT]

WS must be a scratch copy of the reference workspace (cp -a /work/corpus WS);
it is initialised with its store at STORE if needed and edited (app/src/mod1.ts
gets a line per edit). Each round runs, for scan mode (--full-scan) and then
watch mode, on the same state: save after a 1-file edit, save with nothing
changed, status after a 1-file edit, restore of the first checkpoint after a
1-file edit. Prints the median/min/max per row, the watcher's start-up time
(wall, until `ckpt watch --daemon` returns ready) and its RSS at the end.
"""
import subprocess, time, statistics, os, sys, json
WS = os.path.abspath(sys.argv[1])
STORE = os.path.abspath(sys.argv[2])
N = int(sys.argv[3]) if len(sys.argv) > 3 else 7
from run import default_ckpt
B = sys.argv[4] if len(sys.argv) > 4 else default_ckpt()
F = os.path.join(WS, "app/src/mod1.ts")
def run(args, check=True):
    return subprocess.run([B] + args, cwd=WS, check=check, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
def t(args):
    t0 = time.perf_counter(); run(args); return (time.perf_counter() - t0) * 1e3
k = [0]
def edit():
    k[0] += 1
    with open(F, "a") as f: f.write(f"// edit {k[0]}\n")
res = {}
def rec(name, ms): res.setdefault(name, []).append(ms)
if not os.path.exists(os.path.join(WS, ".ckpt")):
    subprocess.run([B, "init", WS, "--store", STORE], check=True, stdout=subprocess.DEVNULL)
    run(["save", "-q", "-m", "base"])
base = json.loads(run(["log", "--json", "-n", "1"]).stdout)["checkpoints"][0]["id"]
run(["watch", "--stop"], check=False)
t0 = time.perf_counter(); run(["watch", "--daemon", "-q"]); rec("watch start-up (until ready)", (time.perf_counter()-t0)*1e3)
run(["save", "-q"])  # first save through a new watcher: full scan by design
for i in range(N):
    for mode, pre in (("scan", ["--full-scan"]), ("watch", [])):
        edit(); rec(f"save-1 {mode}", t(pre + ["save", "-q"]))
        rec(f"save-0 (nothing changed) {mode}", t(pre + ["save", "-q"]))
        edit(); rec(f"status {mode}", t(pre + ["status"]))
        run(["save", "-q"])
        edit(); rec(f"restore-1 {mode}", t(pre + ["restore", "-q", base]))
        run(["save", "-q"])
st = json.loads(run(["watch", "--status", "--json"]).stdout)
run(["watch", "--stop"])
for k_, v in res.items():
    print(f"{k_:40s} median {statistics.median(v):8.1f} ms  min {min(v):8.1f}  max {max(v):8.1f}  n={len(v)}")
print(f"watcher: {st['watches']} watches, startup_ms {st['startup_ms']:.0f}, RSS {st['rss_bytes']/1e6:.1f} MB")
