#!/usr/bin/env python3
"""What ckpt's hooks add to a real agent harness's tool calls (issue 58).

Usage: bench/harness.py [--harness claude,codex] [--corpus DIR] [--rounds 5]
                        [--calls 20] [--ckpt PATH] [--scratch DIR]

Runs the real harness CLI (tests/harness/install.sh puts them in
target/harness-clis) through one scripted turn of CALLS shell tool calls,
each of which changes one file, against the scripted model stand-in
(crates/ckpt-cli/tests/harness/drive.py), on a copy of the reference
workspace. Three setups, alternated in every round (order rotated) so all
see the same machine:
  none   no hooks;
  noop   the hooks `ckpt init --agent NAME --write` writes (same events,
         same matchers), each command replaced by `cat >/dev/null`: the
         cost of the harness's hook mechanism itself;
  ckpt   the hooks as `ckpt init --agent NAME --write` writes them, nothing
         else done by hand (the first hook starts the watcher).
Prints, per harness, the median wall time of the turn per setup, the added
cost per tool call ((setup - none) / CALLS) and ckpt's added cost divided by
the no-op hooks'. The goal (issue 58): that ratio <= 1.5. Standard library
only.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "crates/ckpt-cli/tests/harness"))
import drive  # noqa: E402

HOOK_KEYS = ("command", "bash")


def default_ckpt():
    for p in ("target/x86_64-unknown-linux-gnu/release/ckpt", "target/release/ckpt",
              "target/x86_64-unknown-linux-gnu/debug/ckpt", "target/debug/ckpt"):
        if os.path.exists(os.path.join(REPO, p)):
            return os.path.join(REPO, p)
    sys.exit("no ckpt binary: cargo build --release -p ckpt-cli")


def ckpt(binary, ws, *args, check=True):
    p = subprocess.run([binary, "-C", ws, *args], capture_output=True, text=True,
                       env=dict(os.environ, HOME=ws + ".home"))
    if check and p.returncode != 0:
        sys.exit("ckpt %s failed: %s%s" % (" ".join(args), p.stdout, p.stderr))
    return p


def config_files(ws):
    """Project files a hook set-up may write (removed between setups)."""
    return [os.path.join(ws, p) for p in (".claude/settings.json", ".codex/hooks.json", ".gemini/settings.json",
                                          ".github/hooks/ckpt.json", ".cursor/hooks.json")]


def clear_hooks(ws):
    for f in config_files(ws):
        if os.path.exists(f):
            os.remove(f)
    shutil.rmtree(os.path.join(ws, ".opencode/plugins"), ignore_errors=True)


def noop_of(v):
    """The same JSON with every ckpt hook command replaced by `cat >/dev/null`."""
    if isinstance(v, dict):
        return {k: ("cat >/dev/null" if k in HOOK_KEYS and isinstance(x, str) and x.startswith("ckpt ")
                    else noop_of(x)) for k, x in v.items()}
    if isinstance(v, list):
        return [noop_of(x) for x in v]
    return v


def setup(kind, name, ws, binary):
    clear_hooks(ws)
    if kind == "none":
        return
    ckpt(binary, ws, "init", "--agent", name, "--write")
    if kind == "noop":
        for f in config_files(ws):
            if os.path.exists(f):
                with open(f) as fh:
                    doc = json.load(fh)
                with open(f, "w") as fh:
                    json.dump(noop_of(doc), fh, indent=2)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--harness", default="claude,codex")
    ap.add_argument("--corpus", default=os.environ.get("BENCH_CORPUS", "/work/corpus"))
    ap.add_argument("--scratch", default=os.environ.get("BENCH_SCRATCH", "/work/bench-scratch"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--ckpt", default=None)
    ap.add_argument("--json-out", default=os.path.join(HERE, "results/harness.json"))
    a = ap.parse_args()
    binary = os.path.abspath(a.ckpt or default_ckpt())
    if not os.path.isdir(a.corpus):
        sys.exit("no corpus at %s: bench/make-corpus.sh %s" % (a.corpus, a.corpus))
    os.makedirs(a.scratch, exist_ok=True)
    results = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "corpus": a.corpus,
               "ckpt": binary, "calls": a.calls, "rounds": a.rounds, "harnesses": {}}
    path = os.path.dirname(binary) + ":" + os.environ.get("PATH", "/usr/bin:/bin")
    for name in a.harness.split(","):
        ver = drive.version(name)
        ws = os.path.join(a.scratch, "harness-%s" % name)
        for d in (ws, ws + ".store", ws + ".home", ws + ".agent-home"):
            shutil.rmtree(d, ignore_errors=True)
        print("%s %s: copying %s" % (name, ver, a.corpus), file=sys.stderr)
        subprocess.run(["cp", "-a", a.corpus, ws], check=True)
        os.makedirs(ws + ".home")
        ckpt(binary, os.path.dirname(ws), "init", ws, "--store", ws + ".store")
        ckpt(binary, ws, "save", "-m", "bench start")
        edits = os.path.join(ws, "bench-harness")
        script = {"steps": [{"shell": "mkdir -p bench-harness && echo %d > bench-harness/f%02d.txt" % (i, i)}
                            for i in range(a.calls)], "final": "Done."}
        times = {"none": [], "noop": [], "ckpt": []}
        kinds = list(times)
        for r in range(a.rounds + 1):
            order = kinds[r % 3:] + kinds[:r % 3]
            for kind in order:
                shutil.rmtree(edits, ignore_errors=True)
                setup(kind, name, ws, binary)
                res = drive.run(name, ws, ws + ".agent-home", script, path=path)
                if res["exit"] != 0 or len(os.listdir(edits)) != a.calls:
                    sys.exit("%s/%s: the turn failed:\n%s\n%s" % (name, kind, res["stdout"][-2000:], res["stderr"][-2000:]))
                if r > 0:  # round 0 warms caches (and starts the watcher)
                    times[kind].append(res["seconds"])
                print("%s round %d %-4s %.3f s" % (name, r, kind, res["seconds"]), file=sys.stderr)
        ckpt(binary, ws, "watch", "--stop", check=False)
        clear_hooks(ws)
        cps = json.loads(ckpt(binary, ws, "log", "--json").stdout)["checkpoints"]
        med = {k: statistics.median(v) for k, v in times.items()}
        added = {k: (med[k] - med["none"]) / a.calls * 1e3 for k in ("noop", "ckpt")}
        ratio = added["ckpt"] / added["noop"] if added["noop"] > 0 else float("nan")
        results["harnesses"][name] = {"version": ver, "seconds": times, "median_s": med,
                                      "added_ms_per_call": added, "ratio": ratio, "checkpoints": len(cps)}
        print("| %s %s | %.2f s | %.2f s (+%.1f ms/call) | %.2f s (+%.1f ms/call) | %.2f |" % (
            name, ver, med["none"], med["noop"], added["noop"], med["ckpt"], added["ckpt"], ratio))
        for d in (ws, ws + ".store", ws + ".home", ws + ".agent-home"):
            shutil.rmtree(d, ignore_errors=True)
    os.makedirs(os.path.dirname(a.json_out), exist_ok=True)
    with open(a.json_out, "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
