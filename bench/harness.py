#!/usr/bin/env python3
"""What ckpt's hooks add to a real agent harness's tool calls (issue 58).

Usage: bench/harness.py [--harness claude,codex] [--corpus DIR] [--rounds 5]
                        [--calls 20] [--ckpt PATH] [--scratch DIR] [--fork]
                        [--replicas K]

Runs the real harness CLI (tests/harness/install.sh puts them in
target/harness-clis) through one scripted turn of CALLS shell tool calls,
each of which changes one file, against the scripted model stand-in
(crates/ckpt-cli/tests/harness/drive.py), on a copy of the reference
workspace (with --replicas 25, on the 25x replica). Three setups, alternated in every round (order rotated) so all
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

--fork: the same scripted turn, with ckpt's hooks, in the parent and in a
fork made by `ckpt fork` (nothing started by hand: the first hook in each
starts its watcher), alternated per round, each also without hooks. Prints
per setup the added cost per call ((ckpt - none) / CALLS) and the median
duration of the hook-driven saves after the workspace's first (from `ckpt
log --json`), and the fork's ratio to the parent's for each. The goal
(issue 58): saves in the fork <= 2x the parent's.
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


def turn_script(calls):
    return {"steps": [{"shell": "mkdir -p bench-harness && echo %d > bench-harness/f%02d.txt" % (i, i)}
                      for i in range(calls)], "final": "Done."}


def hook_save_ms(binary, ws, harness):
    """Durations (ms) of the hook-driven saves that recorded a tool call,
    oldest first."""
    cps = json.loads(ckpt(binary, ws, "log", "--json").stdout)["checkpoints"]
    cps = [c for c in reversed(cps) if c.get("tags", {}).get("harness") == harness
           and c.get("tags", {}).get("tool")]
    return [c["duration_ms"] for c in cps if "duration_ms" in c]


def fork_bench(a, binary, name, path):
    """Parent vs fork (see --fork in the module doc)."""
    ver = drive.version(name)
    ws = os.path.join(a.scratch, "harness-fork-%s" % name)
    fork = ws + "-fork"
    for d in (ws, ws + ".store", ws + ".home", ws + ".agent-home", fork, fork + ".home", fork + ".agent-home"):
        shutil.rmtree(d, ignore_errors=True)
    print("%s %s: copying %s" % (name, ver, a.corpus), file=sys.stderr)
    subprocess.run(["cp", "-a", a.corpus, ws], check=True)
    os.makedirs(ws + ".home")
    ckpt(binary, os.path.dirname(ws), "init", ws, "--store", ws + ".store")
    ckpt(binary, ws, "init", "--agent", name, "--write")
    ckpt(binary, ws, "save", "-m", "bench start")
    t0 = time.monotonic()
    out = ckpt(binary, ws, "fork", "HEAD", fork).stdout
    fork_s = time.monotonic() - t0
    print("fork made in %.3f s: %s" % (fork_s, out.strip()), file=sys.stderr)
    os.makedirs(fork + ".home", exist_ok=True)
    script = turn_script(a.calls)
    sites = {"parent": ws, "fork": fork}
    times = {(site, kind): [] for site in sites for kind in ("none", "ckpt")}
    saves = {site: [] for site in sites}
    keys = list(times)
    for r in range(a.rounds + 1):
        order = keys[r % len(keys):] + keys[:r % len(keys)]
        for site, kind in order:
            root = sites[site]
            edits = os.path.join(root, "bench-harness")
            shutil.rmtree(edits, ignore_errors=True)
            if kind == "none":
                clear_hooks(root)
            else:
                ckpt(binary, root, "init", "--agent", name, "--write")
            before = len(hook_save_ms(binary, root, name))
            res = drive.run(name, root, root + ".agent-home", script, path=path)
            if res["exit"] != 0 or len(os.listdir(edits)) != a.calls:
                sys.exit("%s/%s/%s: the turn failed:\n%s\n%s" % (name, site, kind, res["stdout"][-2000:],
                                                                  res["stderr"][-2000:]))
            if kind == "ckpt":
                got = hook_save_ms(binary, root, name)
                # The saves after the workspace's first hook-driven one.
                saves[site].extend(got[max(before, 1):])
            if r > 0:  # round 0 warms caches (and starts the watchers)
                times[(site, kind)].append(res["seconds"])
            print("%s round %d %-6s %-4s %.3f s" % (name, r, site, kind, res["seconds"]), file=sys.stderr)
    for root in sites.values():
        ckpt(binary, root, "watch", "--stop", check=False)
    med = {k: statistics.median(v) for k, v in times.items()}
    added = {site: (med[(site, "ckpt")] - med[(site, "none")]) / a.calls * 1e3 for site in sites}
    save_med = {site: statistics.median(v) if v else float("nan") for site, v in saves.items()}
    out = {"version": ver, "fork_s": fork_s, "seconds": {"%s/%s" % k: v for k, v in times.items()},
           "added_ms_per_call": added, "save_ms_median": save_med, "saves": saves,
           "ratio_added": added["fork"] / added["parent"] if added["parent"] > 0 else float("nan"),
           "ratio_saves": save_med["fork"] / save_med["parent"] if save_med["parent"] > 0 else float("nan"),
           "loadavg": os.getloadavg()}
    print("| %s %s | parent +%.1f ms/call, saves %.1f ms | fork +%.1f ms/call, saves %.1f ms | "
          "fork/parent: added %.2f, saves %.2f |" % (
              name, ver, added["parent"], save_med["parent"], added["fork"], save_med["fork"],
              out["ratio_added"], out["ratio_saves"]))
    for d in (ws, ws + ".store", ws + ".home", ws + ".agent-home", fork, fork + ".home", fork + ".agent-home"):
        shutil.rmtree(d, ignore_errors=True)
    return out


def make_workspace(corpus, ws, replicas):
    """`ws` as a copy of `corpus`, or with `replicas` > 1 as that many copies
    side by side (`ws/r00`, `ws/r01`, ...), as bench/scale.py builds them."""
    if replicas == 1:
        subprocess.run(["cp", "-a", corpus, ws], check=True)
        return
    os.makedirs(ws)
    for i in range(replicas):
        subprocess.run(["cp", "-a", corpus, os.path.join(ws, "r%02d" % i)], check=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--harness", default="claude,codex")
    ap.add_argument("--corpus", default=os.environ.get("BENCH_CORPUS", "/work/corpus"))
    ap.add_argument("--scratch", default=os.environ.get("BENCH_SCRATCH", "/work/bench-scratch"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--ckpt", default=None)
    ap.add_argument("--json-out", default=None)
    ap.add_argument("--fork", action="store_true", help="parent vs a fork made by `ckpt fork`")
    ap.add_argument("--replicas", type=int, default=1,
                    help="the workspace holds this many copies of the corpus (r00, r01, ...; 25: the 25x replica)")
    a = ap.parse_args()
    if a.json_out is None:
        a.json_out = os.path.join(HERE, "results/harness-fork.json" if a.fork else "results/harness.json")
    binary = os.path.abspath(a.ckpt or default_ckpt())
    if not os.path.isdir(a.corpus):
        sys.exit("no corpus at %s: bench/make-corpus.sh %s" % (a.corpus, a.corpus))
    os.makedirs(a.scratch, exist_ok=True)
    results = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "corpus": a.corpus,
               "replicas": a.replicas,
               "ckpt": binary, "calls": a.calls, "rounds": a.rounds, "harnesses": {}}
    # The hooks run `ckpt` from PATH: first on it, a directory holding only
    # `ckpt`, a link to the binary measured (whatever that file is called).
    bindir = os.path.join(a.scratch, "bin")
    os.makedirs(bindir, exist_ok=True)
    link = os.path.join(bindir, "ckpt")
    if os.path.lexists(link):
        os.remove(link)
    os.symlink(binary, link)
    path = bindir + ":" + os.environ.get("PATH", "/usr/bin:/bin")
    if a.fork:
        for name in a.harness.split(","):
            results["harnesses"][name] = fork_bench(a, binary, name, path)
        os.makedirs(os.path.dirname(a.json_out), exist_ok=True)
        with open(a.json_out, "w") as f:
            json.dump(results, f, indent=1)
        return
    for name in a.harness.split(","):
        ver = drive.version(name)
        ws = os.path.join(a.scratch, "harness-%s" % name)
        for d in (ws, ws + ".store", ws + ".home", ws + ".agent-home"):
            shutil.rmtree(d, ignore_errors=True)
        print("%s %s: copying %s (%dx)" % (name, ver, a.corpus, a.replicas), file=sys.stderr)
        make_workspace(a.corpus, ws, a.replicas)
        os.makedirs(ws + ".home")
        ckpt(binary, os.path.dirname(ws), "init", ws, "--store", ws + ".store")
        ckpt(binary, ws, "save", "-m", "bench start")
        edits = os.path.join(ws, "bench-harness")
        script = turn_script(a.calls)
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
        cps = json.loads(ckpt(binary, ws, "log", "--json", "--limit", "100000").stdout)["checkpoints"]
        recorded = sum(1 for c in cps if c.get("tags", {}).get("harness") == name
                       and c.get("tags", {}).get("tool"))
        # Every call of every round changes a file, so the ckpt setup's hooks
        # recorded one checkpoint each; fewer means they did not run ckpt.
        if recorded < a.calls * (a.rounds + 1):
            sys.exit("%s: the ckpt hooks recorded %d tool-call checkpoints, expected %d: the "
                     "figures would not measure ckpt" % (name, recorded, a.calls * (a.rounds + 1)))
        med = {k: statistics.median(v) for k, v in times.items()}
        added = {k: (med[k] - med["none"]) / a.calls * 1e3 for k in ("noop", "ckpt")}
        ratio = added["ckpt"] / added["noop"] if added["noop"] > 0 else float("nan")
        results["harnesses"][name] = {"version": ver, "seconds": times, "median_s": med,
                                      "added_ms_per_call": added, "ratio": ratio, "checkpoints": len(cps), "tool_checkpoints": recorded}
        print("| %s %s | %.2f s | %.2f s (+%.1f ms/call) | %.2f s (+%.1f ms/call) | %.2f |" % (
            name, ver, med["none"], med["noop"], added["noop"], med["ckpt"], added["ckpt"], ratio))
        for d in (ws, ws + ".store", ws + ".home", ws + ".agent-home"):
            shutil.rmtree(d, ignore_errors=True)
    os.makedirs(os.path.dirname(a.json_out), exist_ok=True)
    with open(a.json_out, "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
