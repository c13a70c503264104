#!/usr/bin/env python3
"""Times `ckpt hook` per event (process start included), the issue-7 figures.

Usage: bench/hook.py WORKSPACE_COPY [--ckpt target/<host>/release/ckpt] [--runs 15]

WORKSPACE_COPY must be a scratch copy (it is made a workspace with its store
beside it, and one file in it is edited). Measures, alternating so both see
the same machine load:
  unchanged  - a PostToolUse event when nothing changed (no checkpoint)
  edit-1     - a PostToolUse event after a 1-file edit (one checkpoint)
Prints the median and min-max of each in ms. Standard library only.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

from run import default_ckpt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ws")
    ap.add_argument("--ckpt", default=default_ckpt())
    ap.add_argument("--runs", type=int, default=15)
    a = ap.parse_args()
    ws = os.path.abspath(a.ws)
    store = ws.rstrip("/") + ".ckpt-store"
    if not os.path.exists(os.path.join(ws, ".ckpt")):
        shutil.rmtree(store, ignore_errors=True)
        subprocess.run([a.ckpt, "init", ws, "--store", store], check=True, stdout=subprocess.DEVNULL)
        subprocess.run([a.ckpt, "-C", ws, "save", "-m", "first"], check=True, stdout=subprocess.DEVNULL)
    target = os.path.join(ws, "bench-hook-edit.txt")

    def event(i):
        return json.dumps({
            "session_id": "bench", "cwd": ws, "hook_event_name": "PostToolUse",
            "tool_name": "Edit", "tool_input": {"file_path": target, "old_string": "", "new_string": str(i)},
        }).encode()

    def hook(i):
        t = time.perf_counter()
        p = subprocess.run([a.ckpt, "hook", "--json"], input=event(i), capture_output=True)
        ms = (time.perf_counter() - t) * 1e3
        if p.returncode != 0:
            sys.exit(f"ckpt hook failed: {p.stderr.decode()}")
        return ms, json.loads(p.stdout)["saved"]

    hook(-1)  # settle: index and caches warm
    unchanged, edited = [], []
    for i in range(a.runs):
        ms, saved = hook(i)
        assert not saved, "nothing changed but a checkpoint was saved"
        unchanged.append(ms)
        with open(target, "w") as f:
            f.write(f"edit {i}\n")
        ms, saved = hook(i)
        assert saved, "a file changed but nothing was saved"
        edited.append(ms)
    for name, xs in (("unchanged", unchanged), ("edit-1", edited)):
        print(f"{name:10} median {statistics.median(xs):7.1f} ms  min {min(xs):7.1f}  max {max(xs):7.1f}  (n={len(xs)})")


if __name__ == "__main__":
    main()
