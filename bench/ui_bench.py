#!/usr/bin/env python3
"""`ckpt ui` with 10,000 checkpoints, timed in headless Chromium.

Usage: target/ui-venv/bin/python bench/ui_bench.py CKPT_BIN [--dir DIR] [--n N] [--runs R]

Builds (once; reused when DIR already holds N checkpoints) a workspace with
N checkpoints, each a `ckpt save` of a one-line edit, plus a 10,000-line
file changed in every 10th line between two checkpoints. Then starts
`ckpt ui` and measures, R times each, medians and min-max:

- first_page_http_ms: GET /api/log (the first page of 200) over HTTP;
- first_page_browser_ms: navigation start to the first page rendered
  (the page's `data-ready`), from the browser's own clock;
- live_ms: `ckpt save` returning (Python's wall clock) to the new
  checkpoint's row in the DOM (a MutationObserver's wall clock in the page;
  negative when the row appeared before the saving process had exited);
- diff_10k_first_rows_ms, diff_10k_ms: fetching the 10,000-line file's
  diff and drawing its first rows, and until the table is complete
  (`data-done`: every row drawn, or for a windowed diff every row
  reachable by scrolling), in the page's clock (`showDiff`);
- diff_10k_scroll_end_ms: a windowed diff scrolled to its end until its
  last rows are drawn (none for a diff drawn whole).

Needs Playwright (target/ui-venv, see .ci/run) and /usr/bin/chromium.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request

from playwright.sync_api import sync_playwright

ap = argparse.ArgumentParser()
ap.add_argument("ckpt")
ap.add_argument("--dir", default="/tmp/ckpt-ui-bench")
ap.add_argument("--n", type=int, default=10000)
ap.add_argument("--runs", type=int, default=10)
a = ap.parse_args()
ckpt = os.path.abspath(a.ckpt)
root = os.path.join(a.dir, "ws")


def run(*args):
    r = subprocess.run([ckpt, *args], cwd=root, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"ckpt {args}: {r.stderr}")
    return r.stdout


def total():
    return json.loads(run("log", "-n", "0", "--json"))["total"]


def build():
    os.makedirs(root, exist_ok=True)
    if not os.path.exists(os.path.join(a.dir, "store")):
        subprocess.run([ckpt, "init", root, "--store", os.path.join(a.dir, "store")], check=True, capture_output=True)
    have = total()
    big = os.path.join(root, "big.txt")
    t0 = time.monotonic()
    while have < a.n:
        if have == a.n - 2:
            with open(big, "w") as f:
                f.writelines(f"line {i} of the big file\n" for i in range(10000))
        elif have == a.n - 1:
            with open(big, "w") as f:
                f.writelines(
                    (f"line {i} CHANGED\n" if i % 10 == 0 else f"line {i} of the big file\n") for i in range(10000)
                )
        else:
            with open(os.path.join(root, "f.txt"), "w") as f:
                f.write(f"edit {have}\n")
        run("save", "-m", f"step {have}", "--tag", f"session=s{have // 500}")
        have += 1
        if have % 1000 == 0:
            print(f"  {have} checkpoints ({time.monotonic() - t0:.0f} s)", file=sys.stderr)


def stats(xs):
    return {"median": round(statistics.median(xs), 1), "min": round(min(xs), 1), "max": round(max(xs), 1), "n": len(xs)}


build()
n = total()
server = subprocess.Popen([ckpt, "ui", "--port", "0"], cwd=root, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
try:
    url = server.stdout.readline().strip()
    token = url.split("token=")[1]
    base = url.split("/?")[0]
    http = []
    for _ in range(a.runs):
        req = urllib.request.Request(base + "/api/log?limit=200", headers={"X-Ckpt-Token": token})
        t0 = time.perf_counter()
        body = urllib.request.urlopen(req).read()
        http.append((time.perf_counter() - t0) * 1000)
    assert json.loads(body)["total"] == n
    res = {"checkpoints": n, "first_page_http_ms": stats(http)}
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=os.environ.get("CKPT_CHROMIUM", "/usr/bin/chromium"), args=["--no-sandbox"])
        page = b.new_page(viewport={"width": 1400, "height": 860})
        first, live, diff, diff_first, scroll = [], [], [], [], []
        # navigation start (the page's time origin) → first page rendered
        for _ in range(a.runs):
            page.goto(url)
            page.wait_for_selector("body[data-ready='1']")
            first.append(page.evaluate("() => Number(document.body.dataset.readyMs)"))
        for i in range(a.runs):
            page.evaluate("""() => { window.__seen = null; const top = document.querySelector('#timeline li.cp').dataset.seq;
              new MutationObserver((m, o) => { const f = document.querySelector('#timeline li.cp');
                if (f && f.dataset.seq !== top) { window.__seen = performance.timeOrigin + performance.now(); o.disconnect(); } })
              .observe(document.getElementById('timeline'), {childList: true}); }""")
            with open(os.path.join(root, "f.txt"), "w") as f:
                f.write(f"live {i} {time.time()}\n")
            run("save", "-m", f"live {i}")
            returned = time.time() * 1000
            page.wait_for_function("() => window.__seen !== null", timeout=5000)
            live.append(page.evaluate("() => window.__seen") - returned)
        big = json.loads(run("log", "--path", "big.txt", "-n", "2", "--json"))["checkpoints"]
        page.locator("#timeline li.cp").first.click()
        page.wait_for_selector("#diff", state="attached")
        for _ in range(a.runs):
            ms = page.evaluate("""async () => { document.getElementById('detail').scrollTop = 0; const t = performance.now();
              await showDiff('%s', '%s', {path: 'big.txt', status: 'modified'});
              await new Promise((res) => { const w = () => document.querySelector('table.diff[data-done]') ? res() : requestAnimationFrame(w); w(); });
              const first = Number(document.querySelector('table.diff').dataset.first);
              return [first - t, performance.now() - t]; }""" % (big[1]["id"], big[0]["id"]))
            diff_first.append(ms[0])
            diff.append(ms[1])
            end = page.evaluate("""async () => { const tb = document.querySelector('table.diff[data-done]');
              if (!tb.dataset.hi) return null;
              const t = performance.now();
              document.getElementById('detail').scrollTop = 1e9;
              await new Promise((res) => { const w = () => tb.dataset.hi === tb.dataset.done ? res() : requestAnimationFrame(w); w(); });
              return performance.now() - t; }""")
            if end is not None:
                scroll.append(end)
        rows = page.evaluate("() => Number(document.querySelector('table.diff[data-done]').dataset.done)")
        b.close()
    res.update({"first_page_browser_ms": stats(first), "live_ms": stats(live), "diff_10k_first_rows_ms": stats(diff_first), "diff_10k_ms": stats(diff), "diff_rows": rows})
    if scroll:
        res["diff_10k_scroll_end_ms"] = stats(scroll)
    print(json.dumps(res, indent=1))
finally:
    server.kill()
