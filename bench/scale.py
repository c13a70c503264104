#!/usr/bin/env python3
"""ckpt at scale: the same operations on 1x, 10x and (opt-in) 25x replicas of the
reference workspace, in one run (issue 23).

Invoked through bench/scale.sh; see bench/README.md ("Scale") for the method.
Python 3.11, standard library only.

The generator. A *template* is made once from the corpus (never modified): the same
directories, symlinks and files, each file holding the first 2 KiB of its original,
with the original's permission bits and mtimes. The K-times workspace is K copies of
the template under one root (`ws/r00 ... ws/rNN`, `cp -a`). The replicas' contents are
identical, so the store deduplicates them: a first save stores one replica's objects
and hashes all of them. With `--distinct` each replica is made from the corpus with
its own salt in each file's first bytes instead, so a first save stores them all.
"""
from __future__ import annotations

import argparse
import atexit
import datetime as _dt
import json
import os
import platform
import re
import signal
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
EDIT1 = "r00/app/src/mod1.ts"
CMD_TIMEOUT = 3600
HEAD_BYTES = 2048

# (key, title, unit): unit "ms" rows get per-entry and growth columns.
ROWS = [
    ("stat_floor", "`stat_floor`, 2 threads (lstat only)", "ms"),
    ("scan_save1", "scan-mode save after a 1-file edit", "ms"),
    ("scan_status", "scan-mode status (1 file changed)", "ms"),
    ("scan_restore1", "scan-mode restore after a 1-file edit", "ms"),
    ("scan_save_floor", "scan save ÷ floor", "x"),
    ("scan_status_floor", "scan status ÷ floor", "x"),
    ("fixed_save1", "the same save in a 1-file workspace (cost that no tree size changes)", "ms"),
    ("fixed_status", "the same status in a 1-file workspace", "ms"),
    ("scan_save_floor_fixed", "scan save ÷ (floor + 1-file save)", "x"),
    ("scan_status_floor_fixed", "scan status ÷ (floor + 1-file status)", "x"),
    ("watch_start", "watcher start (`watch --daemon` until ready)", "ms"),
    ("watch_startup_ms", "watcher's own initial walk (`startup_ms`)", "ms"),
    ("watch_floor", "`watch_floor`, 1 thread (walk + inotify_add_watch only)", "ms"),
    ("watch_start_floor", "watcher's walk ÷ watch floor", "x"),
    ("watch_save1", "watch-mode save after a 1-file edit", "ms"),
    ("watch_status", "watch-mode status (1 file changed)", "ms"),
    ("watch_restore1", "watch-mode restore after a 1-file edit", "ms"),
    ("watch_save1_ref", "the same save in the 1× reference, alternated with it", "ms"),
    ("watch_status_ref", "the same status in the 1× reference, alternated", "ms"),
    ("watch_restore1_ref", "the same restore in the 1× reference, alternated", "ms"),
    ("watch_save1_paired", "watch save ÷ the 1× reference's, same minutes", "x"),
    ("watch_status_paired", "watch status ÷ the 1× reference's, same minutes", "x"),
    ("watch_restore1_paired", "watch restore ÷ the 1× reference's, same minutes", "x"),
    ("watch_rss", "watcher RSS right after the ops (MiB)", "MiB"),
    ("watch_rss_idle", "watcher RSS after 2 s idle (index written) (MiB)", "MiB"),
    ("watch_hwm", "watcher peak RSS, VmHWM (MiB)", "MiB"),
    ("first_save", "first save (init untimed)", "ms"),
    ("cp_sync", "`ckpt cp` + `sync` of the same tree", "ms"),
    ("first_save_ratio", "first save ÷ (cp + sync), median of rounds", "x"),
    ("first_save_rss", "first save peak RSS (MiB)", "MiB"),
    ("scan_save_rss", "scan save peak RSS (MiB)", "MiB"),
    ("index_bytes", "stat index on disk (MB)", "MB"),
    ("verify", "`ckpt verify` (re-reads every file)", "ms"),
    ("du", "`ckpt du`", "ms"),
    ("gc", "`ckpt gc` (nothing to free)", "ms"),
]
TITLES = {k: t for k, t, _ in ROWS}
UNITS = {k: u for k, _, u in ROWS}
# Rows whose per-entry cost is shown (time or bytes that should follow the tree).
PER_ENTRY = {"stat_floor", "watch_floor", "scan_save1", "scan_status", "scan_restore1", "watch_start",
             "watch_startup_ms", "first_save", "cp_sync", "verify", "du", "gc", "watch_rss",
             "watch_rss_idle", "watch_hwm", "first_save_rss", "scan_save_rss", "index_bytes"}


class BenchError(RuntimeError):
    pass


def log(msg: str) -> None:
    print(f"[scale {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def run(argv, *, cwd=None, env=None, ok=(0,), timeout=CMD_TIMEOUT):
    """Runs a command; returns (stdout, stderr, ms, peak RSS KiB of the child).

    The child is reaped with a blocking wait4(2), so its own ru_maxrss is known
    (not the maximum over all children, which getrusage(RUSAGE_CHILDREN) would
    give), and this process sleeps until the child exits: a loop polling with
    WNOHANG every 0.5 ms took CPU from the child on this 2-core host and added
    about 0.8 ms to a 34 ms status (--version: 0.1 ms). A timer kills a child
    that runs past `timeout`."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter_ns()
        p = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out,
                             stderr=err)
        timed_out = threading.Event()

        def kill():
            timed_out.set()
            p.kill()
        timer = threading.Timer(timeout, kill)
        timer.start()
        try:
            _, status, ru = os.wait4(p.pid, 0)
        finally:
            timer.cancel()
        ms = (time.perf_counter_ns() - t0) / 1e6
        if timed_out.is_set():
            raise BenchError(f"timeout after {timeout}s: {' '.join(map(str, argv))}")
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        o, e = out.read(), err.read()
    if p.returncode not in ok:
        raise BenchError(f"command failed (exit {p.returncode}): {' '.join(map(str, argv))} "
                         f"[cwd={cwd}]\n--- stdout ---\n{o[-2000:].decode(errors='replace')}"
                         f"\n--- stderr ---\n{e[-4000:].decode(errors='replace')}")
    return o, e, ms, ru.ru_maxrss


def sh(cmd: str) -> str:
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True,
                              timeout=60).stdout.strip()
    except Exception:  # noqa: BLE001
        return ""


def rmtree(path: str) -> None:
    if os.path.lexists(path):
        subprocess.run(["rm", "-rf", "--", path], check=True)


def loadavg():
    return open("/proc/loadavg").read().split()[:3]


def du_bytes(path: str) -> int:
    out = sh(f"du -sB1 {path!r}")
    return int(out.split()[0]) if out else 0


def append_line(path: str, n: int) -> None:
    with open(path, "ab") as f:
        f.write(f"// scale edit {n} {time.time_ns()}\n".encode())


# ---------------------------------------------------------------------------------------
# The generator.

def make_template(corpus: str, dest: str, salt: bytes = b"") -> dict:
    """A copy of `corpus` at `dest` whose files hold the first 2 KiB of their
    originals (permission bits and mtimes kept; directory mtimes set last).
    A `salt` replaces each file's first bytes (its size stays), so copies made
    with different salts share no content but empty files."""
    part = dest + ".partial"
    rmtree(part)
    counts = {"files": 0, "dirs": 0, "symlinks": 0, "other": 0}
    dirs = []  # (path, mode, atime_ns, mtime_ns), set after their contents
    stack = [("", os.lstat(corpus))]
    while stack:
        rel, st = stack.pop()
        src = os.path.join(corpus, rel) if rel else corpus
        dst = os.path.join(part, rel) if rel else part
        os.mkdir(dst)
        dirs.append((dst, st.st_mode & 0o7777, st.st_atime_ns, st.st_mtime_ns))
        if rel:
            counts["dirs"] += 1
        with os.scandir(src) as it:
            for e in it:
                r = os.path.join(rel, e.name) if rel else e.name
                s = e.stat(follow_symlinks=False)
                d = os.path.join(part, r)
                if e.is_symlink():
                    os.symlink(os.readlink(e.path), d)
                    os.utime(d, ns=(s.st_atime_ns, s.st_mtime_ns), follow_symlinks=False)
                    counts["symlinks"] += 1
                elif e.is_dir(follow_symlinks=False):
                    stack.append((r, s))
                elif e.is_file(follow_symlinks=False):
                    with open(e.path, "rb") as f:
                        head = f.read(HEAD_BYTES)
                    if salt:
                        head = (salt + head)[:len(head)]
                    with open(d, "wb") as f:
                        f.write(head)
                    os.chmod(d, s.st_mode & 0o7777)
                    os.utime(d, ns=(s.st_atime_ns, s.st_mtime_ns))
                    counts["files"] += 1
                else:
                    counts["other"] += 1  # sockets, fifos: not replicated
    for d, mode, at, mt in reversed(dirs):
        os.chmod(d, mode)
        os.utime(d, ns=(at, mt))
    os.rename(part, dest)
    return counts


def make_workspace(template: str, ws: str, k: int, distinct_from: str = "") -> None:
    """K replicas of `template`; with `distinct_from` (the corpus), each is made
    from it with its own salt instead, so no two replicas share content."""
    rmtree(ws)
    os.makedirs(ws)
    for i in range(k):
        dest = os.path.join(ws, f"r{i:02d}")
        if distinct_from:
            make_template(distinct_from, dest, salt=f"r{i:02d} ".encode())
        else:
            subprocess.run(["cp", "-a", template, dest], check=True)


def count_entries(root: str) -> dict:
    c = {"entries": 0, "dirs": 0, "files": 0, "symlinks": 0}
    for dirpath, dirnames, filenames in os.walk(root):
        c["dirs"] += len(dirnames)
        for n in filenames:
            if os.path.islink(os.path.join(dirpath, n)):
                c["symlinks"] += 1
            else:
                c["files"] += 1
        # symlinks to directories are listed in dirnames by os.walk
        for n in list(dirnames):
            if os.path.islink(os.path.join(dirpath, n)):
                c["dirs"] -= 1
                c["symlinks"] += 1
    c["entries"] = c["dirs"] + c["files"] + c["symlinks"]
    return c


# ---------------------------------------------------------------------------------------
# Watchers we started: stopped on exit, on SIGINT/SIGTERM, and on errors.

WATCHERS: dict[str, int] = {}  # workspace -> pid


def stop_watcher(ckpt: str, ws: str) -> None:
    pid = WATCHERS.pop(ws, None)
    try:
        subprocess.run([ckpt, "watch", "--stop"], cwd=ws, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=120)
    except Exception:  # noqa: BLE001
        pass
    if pid and os.path.exists(f"/proc/{pid}"):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                mine = b"watch" in f.read()
        except OSError:
            mine = False
        if mine:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def proc_status_kib(pid: int, field: str) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


# ---------------------------------------------------------------------------------------

class Scale:
    def __init__(self, args):
        self.a = args
        self.results: dict[int, dict] = {}
        self.n = 0
        self.ref_ws = None  # the 1× reference (start_reference)
        self.ref_base = None

    def ck(self, ws, *argv, env=None, ok=(0,)):
        return run([self.a.ckpt, *argv], cwd=ws, env=env, ok=ok)

    def sync(self):
        subprocess.run(["sync"])

    def settle(self):
        self.sync()
        time.sleep(self.a.settle)

    def edit(self, ws):
        self.n += 1
        append_line(os.path.join(ws, EDIT1), self.n)

    def head_id(self, ws) -> str:
        return json.loads(self.ck(ws, "log", "-n", "1", "--json")[0])["checkpoints"][0]["id"]

    def start_watcher(self, ws) -> float:
        """`ckpt watch --daemon` in `ws`, stopped at exit; then the one save whose
        full scan a new watcher needs. Returns the start's ms (until ready). A
        watcher that cannot vouch for completeness would make every save a full
        scan, so the run stops."""
        o, _, ms, _ = self.ck(ws, "watch", "--daemon", "--json")
        st = json.loads(o)
        WATCHERS[ws] = int(st["pid"])
        if not st.get("complete", False):
            raise BenchError(f"the watcher cannot vouch for completeness: {st}")
        self.ck(ws, "save", "-q", "-m", "after watcher start")  # full scan by design
        return ms

    def start_reference(self):
        """A 1× workspace with its own watcher, kept for the whole run. Every size's
        watch-mode series alternate with the same operation there, so that k× ÷ 1×
        is measured in the same minutes: the host's speed drifts between sizes, and
        a 1-file change costs a few milliseconds, so the growth column (1× measured
        minutes earlier) swings by more than the goal's margin."""
        root = os.path.join(self.a.scratch, "ref1")
        rmtree(root)
        os.makedirs(root)
        ws = os.path.join(root, "ws")
        make_workspace(self.template, ws, 1)
        self.ck(ws, "init", "-q", "--store", os.path.join(root, "store"), ".")
        self.ck(ws, "save", "-q", "-m", "first")
        self.start_watcher(ws)
        self.ref_ws = ws
        self.ref_base = self.head_id(ws)
        log(f"the 1× reference for watch mode, with its watcher: {ws}")

    def stop_reference(self):
        if self.ref_ws:
            stop_watcher(self.a.ckpt, self.ref_ws)
            if not self.a.keep:
                rmtree(os.path.dirname(self.ref_ws))
            self.ref_ws = None

    def paired_series(self, rec, key, sides, runs):
        """`series` for two workspaces, alternated run by run (which goes first
        alternates too): `sides` is [(ws, argv_of, prep)] for this size, then for the
        1× reference. Records `key` (this size), `key_ref` and `key_paired`, the
        ratio of the two medians."""
        v = {0: [], 1: []}
        for i in range(runs):
            for side in ((0, 1) if i % 2 == 0 else (1, 0)):
                ws, argv_of, prep = sides[side]
                prep()
                self.sync()
                _, _, ms, _ = self.ck(ws, *argv_of())
                v[side].append(ms)
            log(f"  {key} run {i + 1}: {v[0][-1]:.1f} ms, 1× reference {v[1][-1]:.1f} ms")
        rec[key + "_runs"] = [round(x, 3) for x in v[0]]
        rec[key + "_ref_runs"] = [round(x, 3) for x in v[1]]
        rec[key] = statistics.median(v[0])
        rec[key + "_ref"] = statistics.median(v[1])
        rec[key + "_paired"] = rec[key] / rec[key + "_ref"]

    def series(self, rec, key, ws, argv_of, runs, prep=None, rss_key=None):
        v = []
        for i in range(runs):
            if prep:
                prep()
            self.sync()
            _, _, ms, rss = self.ck(ws, *argv_of())
            v.append(ms)
            if rss_key:
                rec.setdefault(rss_key + "_runs", []).append(rss / 1024)
            log(f"  {key} run {i + 1}: {ms:.1f} ms")
        rec[key + "_runs"] = [round(x, 3) for x in v]
        rec[key] = statistics.median(v)
        if rss_key:
            rec[rss_key] = max(rec[rss_key + "_runs"])

    @staticmethod
    def floor(binary, ws, threads) -> float:
        """The median a floor example (stat_floor, watch_floor) prints."""
        o, _, _, _ = run([binary, ws, threads])
        m = re.search(rb"in ([\d.]+) ms median", o)
        if not m:
            raise BenchError(f"{os.path.basename(binary)}: unexpected output {o!r}")
        return float(m.group(1))

    def stat_floor(self, ws) -> float:
        return self.floor(self.a.stat_floor, ws, "2")

    def watch_floor(self, ws) -> float:
        return self.floor(self.a.watch_floor, ws, "1")

    def fixed_cost(self, rec, scratch):
        """The same scan-mode save and status in a workspace of one file, in the
        same minutes: what those commands cost whatever the tree (process start and
        exit, opening the store, the durable commit of a save). The scan-mode
        figures divided by it plus the `lstat` floor leave what the tree's own
        scan adds to its `lstat`s."""
        tiny = os.path.join(scratch, "one-file")
        rmtree(tiny)
        os.makedirs(tiny)
        f = os.path.join(tiny, "a.ts")
        append_line(f, 0)
        self.ck(tiny, "init", "-q", "--store", os.path.join(scratch, "one-file-store"), ".")
        self.ck(tiny, "save", "-q", "-m", "first")
        edit = lambda: append_line(f, 0)  # noqa: E731
        self.series(rec, "fixed_save1", tiny, lambda: ["save", "-q", "-m", "s"], self.a.runs,
                    prep=edit)
        self.series(rec, "fixed_status", tiny, lambda: ["status"], self.a.runs, prep=edit)

    def first_saves_and_copies(self, rec, ws, scratch):
        """Order-fair: rounds alternate which goes first; nothing is deleted until the
        size is done, so no timed run follows a mass deletion."""
        fs, cps, ratios, rss = [], [], [], []
        for i in range(self.a.fair_rounds):
            order = ("save", "cp") if i % 2 == 0 else ("cp", "save")
            got = {}
            for what in order:
                if what == "save":
                    rmtree(os.path.join(ws, ".ckpt"))
                    store = os.path.join(scratch, f"store-{i}")
                    self.ck(ws, "init", "-q", "--store", store, ".")
                    self.settle()
                    _, _, ms, r = self.ck(ws, "save", "-q", "-m", "first")
                    rss.append(r / 1024)
                    self.store = store
                else:
                    dest = os.path.join(scratch, f"copy-{i}")
                    self.settle()
                    t0 = time.perf_counter_ns()
                    run([self.a.ckpt, "cp", ws, dest])
                    subprocess.run(["sync"], check=True)
                    ms = (time.perf_counter_ns() - t0) / 1e6
                got[what] = ms
                log(f"  round {i + 1} {what}: {ms:,.0f} ms")
            if self.a.drop_copies:
                # Disk: the copy goes now, and the next timed run waits out the
                # slow inode allocation that follows a mass deletion on ext4.
                rmtree(os.path.join(scratch, f"copy-{i}"))
                if i + 1 < self.a.fair_rounds:
                    log(f"  waiting {self.a.after_delete:.0f} s after deleting the copy")
                    self.sync()
                    time.sleep(self.a.after_delete)
            fs.append(got["save"])
            cps.append(got["cp"])
            ratios.append(got["save"] / got["cp"])
        rec["first_save_runs"], rec["cp_sync_runs"] = fs, cps
        rec["first_save_ratio_runs"] = ratios
        rec["first_save"] = statistics.median(fs)
        rec["cp_sync"] = statistics.median(cps)
        rec["first_save_ratio"] = statistics.median(ratios)
        rec["first_save_rss"] = max(rss)

    def run_size(self, k: int):
        a = self.a
        scratch = os.path.join(a.scratch, f"x{k}")
        rmtree(scratch)
        os.makedirs(scratch)
        ws = os.path.join(scratch, "ws")
        rec = self.results.setdefault(k, {})
        rec["loadavg_start"] = loadavg()
        try:
            log(f"== {k}x: making the workspace (untimed)")
            make_workspace(self.template, ws, k, a.corpus if a.distinct else "")
            rec.update(count_entries(ws))
            rec["ws_du_bytes"] = du_bytes(ws)
            log(f"  {rec['entries']:,} entries, {rec['dirs']:,} dirs, "
                f"{rec['ws_du_bytes'] / 1e9:.2f} GB on disk")
            self.settle()

            log(f"== {k}x: first save vs ckpt cp + sync, {a.fair_rounds} rounds")
            self.first_saves_and_copies(rec, ws, scratch)
            base = self.head_id(ws)
            rec["index_bytes"] = sum(os.path.getsize(os.path.join(self.store, n))
                                     for n in ("index", "index.delta")
                                     if os.path.exists(os.path.join(self.store, n))) / 1e6

            log(f"== {k}x: stat_floor and scan mode")
            edit = lambda: self.edit(ws)  # noqa: E731
            # Each timed save and status follows its own `stat_floor` (untimed by the
            # series, just before the edit), so each ratio divides medians taken in the
            # same minutes: the host's speed drifts by more than the goal's margin.
            floors = {"scan_save1": [], "scan_status": []}

            def floor_then_edit(key):
                def prep():
                    floors[key].append(self.stat_floor(ws))
                    edit()
                return prep
            self.series(rec, "scan_save1", ws, lambda: ["save", "-q", "-m", "s"], a.runs,
                        prep=floor_then_edit("scan_save1"), rss_key="scan_save_rss")
            self.series(rec, "scan_status", ws, lambda: ["status"], a.runs,
                        prep=floor_then_edit("scan_status"))
            self.ck(ws, "restore", "-q", base)
            self.series(rec, "scan_restore1", ws, lambda: ["restore", "-q", base], a.runs,
                        prep=edit)
            self.fixed_cost(rec, scratch)
            for key, fl in floors.items():
                rec[key + "_floor_runs"] = fl
            rec["stat_floor"] = statistics.median(floors["scan_save1"] + floors["scan_status"])
            save_floor = statistics.median(floors["scan_save1"])
            status_floor = statistics.median(floors["scan_status"])
            rec["scan_save_floor"] = rec["scan_save1"] / save_floor
            rec["scan_status_floor"] = rec["scan_status"] / status_floor
            rec["scan_save_floor_fixed"] = rec["scan_save1"] / (save_floor + rec["fixed_save1"])
            rec["scan_status_floor_fixed"] = (rec["scan_status"]
                                              / (status_floor + rec["fixed_status"]))

            log(f"== {k}x: watch mode")
            rec["watch_floor"] = self.watch_floor(ws)
            rec["watch_start"] = self.start_watcher(ws)
            # Every run alternates with the same command in the 1× reference, at 1× too
            # (there the ratio shows what the method itself reads as growth).
            ref, ref_base = self.ref_ws, self.ref_base
            log(f"   (alternated with the 1× reference {ref})")
            ref_edit = lambda: self.edit(ref)  # noqa: E731

            def pair(key, argv_of, ref_argv_of):
                self.paired_series(rec, key, [(ws, argv_of, edit),
                                              (ref, ref_argv_of, ref_edit)], a.runs)
            save = lambda: ["save", "-q", "-m", "w"]  # noqa: E731
            pair("watch_save1", save, save)
            pair("watch_status", lambda: ["status"], lambda: ["status"])
            self.ck(ws, "restore", "-q", base)
            self.ck(ref, "restore", "-q", ref_base)
            pair("watch_restore1", lambda: ["restore", "-q", base],
                 lambda: ["restore", "-q", ref_base])
            st = json.loads(self.ck(ws, "watch", "--status", "--json")[0])
            s = st.get("status", st)
            rec["watch_startup_ms"] = s.get("startup_ms")
            if rec["watch_startup_ms"]:
                rec["watch_start_floor"] = rec["watch_startup_ms"] / rec["watch_floor"]
            rec["watch_rss"] = s.get("rss_bytes", 0) / 1048576
            # The watcher writes its in-memory index after 1 s without requests.
            time.sleep(2)
            rec["watch_rss_idle"] = proc_status_kib(WATCHERS[ws], "VmRSS") / 1024
            rec["watch_hwm"] = proc_status_kib(WATCHERS[ws], "VmHWM") / 1024
            rec["watches"] = s.get("watches")
            stop_watcher(a.ckpt, ws)

            log(f"== {k}x: verify, du, gc")
            for key, argv in (("verify", ["verify"]), ("du", ["du"]), ("gc", ["gc"])):
                _, _, ms, _ = self.ck(ws, *argv)
                rec[key] = ms
                log(f"  {key}: {ms:,.0f} ms")
            rec["store_du_bytes"] = du_bytes(self.store)
        finally:
            stop_watcher(a.ckpt, ws)
            rec["loadavg_end"] = loadavg()
            rec["scratch_du_bytes"] = du_bytes(scratch)
            if not a.keep:
                rmtree(scratch)

    # -- report -----------------------------------------------------------------------
    def report(self, machine) -> str:
        sizes = sorted(self.results)
        base = self.results.get(1, {})

        def fmt(v, unit):
            if v is None:
                return "—"
            if unit == "x":
                return f"{v:.2f}×"
            if unit in ("MiB", "MB"):
                return f"{v:,.1f}"
            return f"{v:.1f}" if v < 100 else f"{v:,.0f}"

        L = [f"## ckpt at scale — median of {self.a.runs} runs (first save / cp: "
             f"{self.a.fair_rounds} order-alternated rounds)", ""]
        L.append(f"- date: {machine['date']}; machine: {machine['nproc']} CPUs "
                 f"({machine['cpu']}), {machine['memory_gib']} GiB RAM, Linux "
                 f"{machine['kernel']}, scratch on {machine['scratch_fs']}")
        L.append(f"- ckpt: {machine['ckpt_version']} ({self.a.ckpt})")
        L.append("- replicas: " + ("distinct (no shared content)" if self.a.distinct
                                   else "identical (a first save stores one)"))
        L.append(f"- command: `{self.a.command_line}`")
        L.append("- load average: " + "; ".join(
            f"{k}×: start {' '.join(self.results[k].get('loadavg_start', []))}, end "
            f"{' '.join(self.results[k].get('loadavg_end', []))}" for k in sizes))
        L.append("")
        head = "| | " + " | ".join(
            f"{k}× ({self.results[k].get('entries', 0):,} entries)" for k in sizes) + " |"
        if len(sizes) > 1:
            head += " " + " | ".join(f"growth {k}×/1×" for k in sizes if k != 1) + " |"
        L.append(head)
        L.append("|" + "---|" * (head.count("|") - 1))
        for key, title, unit in ROWS:
            vals = [self.results[k].get(key) for k in sizes]
            if all(v is None for v in vals):
                continue
            cells = [fmt(v, unit) for v in vals]
            row = f"| {title} | " + " | ".join(cells) + " |"
            if len(sizes) > 1:
                g = []
                for k in sizes:
                    if k == 1:
                        continue
                    b, v = base.get(key), self.results[k].get(key)
                    g.append(f"{v / b:.2f}×" if b and v is not None else "—")
                row += " " + " | ".join(g) + " |"
            L.append(row)
        L.append("")
        L.append("Per entry (ms rows in µs/entry, memory and index in bytes/entry):")
        L.append("")
        head = "| | " + " | ".join(f"{k}×" for k in sizes) + " |"
        if len(sizes) > 1:
            head += " " + " | ".join(f"growth {k}×/1×" for k in sizes if k != 1) + " |"
        L.append(head)
        L.append("|" + "---|" * (head.count("|") - 1))
        for key, title, unit in ROWS:
            if key not in PER_ENTRY:
                continue
            title = title.replace(" (MiB)", "").replace(" (MB)", "")
            mult = {"ms": 1e3, "MiB": 1048576, "MB": 1e6}[unit]
            per = {}
            for k in sizes:
                v, n = self.results[k].get(key), self.results[k].get("entries")
                per[k] = v * mult / n if v is not None and n else None
            if all(v is None for v in per.values()):
                continue
            u = "µs" if unit == "ms" else "B"
            row = f"| {title} | " + " | ".join(
                "—" if per[k] is None else f"{per[k]:.3g} {u}" for k in sizes) + " |"
            if len(sizes) > 1:
                g = []
                for k in sizes:
                    if k == 1:
                        continue
                    b, v = per.get(1), per[k]
                    g.append(f"{v / b:.2f}×" if b and v is not None else "—")
                row += " " + " | ".join(g) + " |"
            L.append(row)
        L.append("")
        for k in sizes:
            r = self.results[k]
            L.append(f"- {k}×: {r.get('files', 0):,} files, {r.get('dirs', 0):,} dirs, "
                     f"{r.get('symlinks', 0):,} symlinks; workspace "
                     f"{r.get('ws_du_bytes', 0) / 1e9:.2f} GB, store "
                     f"{r.get('store_du_bytes', 0) / 1e6:,.0f} MB, scratch at most "
                     f"{r.get('scratch_du_bytes', 0) / 1e9:.2f} GB; "
                     f"{r.get('watches', '?')} inotify watches; first save ÷ cp per round: "
                     + ", ".join(f"{x:.2f}" for x in r.get("first_save_ratio_runs", [])))
        return "\n".join(L)


def host_triple() -> str:
    out = subprocess.run(["rustc", "-vV"], stdout=subprocess.PIPE, text=True).stdout
    return out.split("host: ")[1].split()[0]


def default_release_dir() -> str:
    target = os.environ.get("CARGO_TARGET_DIR") or os.path.join(REPO, "target")
    return os.path.join(target, host_triple(), "release")


def main():
    if sys.argv[1:] == ["--print-release-dir"]:  # for scale.sh
        print(default_release_dir())
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1,10",
                    help="comma list of replica counts (default 1,10; 25 is opt-in: slow)")
    ap.add_argument("--25x", dest="x25", action="store_true", help="also run 25x (≈1M entries)")
    ap.add_argument("--runs", type=int, default=7, help="timed runs per op (median)")
    ap.add_argument("--fair-rounds", type=int, default=2,
                    help="first save vs cp rounds, alternating which goes first (even)")
    ap.add_argument("--settle", type=float, default=2.0,
                    help="seconds to wait after sync before a first save or a copy")
    ap.add_argument("--corpus", default=os.environ.get("BENCH_CORPUS", "/work/corpus"))
    ap.add_argument("--scratch", default=os.environ.get("BENCH_SCRATCH", "/work/bench-scale"))
    ap.add_argument("--ckpt", default=None)
    ap.add_argument("--stat-floor", default=None)
    ap.add_argument("--max-disk-gb", type=float, default=12.0,
                    help="refuse a size whose estimated scratch use exceeds this")
    ap.add_argument("--drop-copies", action="store_true",
                    help="delete each round's copy after it (then wait --after-delete s); "
                         "chosen by itself when keeping them would exceed --max-disk-gb")
    ap.add_argument("--after-delete", type=float, default=360.0,
                    help="seconds to wait after deleting a copy before the next timed round")
    ap.add_argument("--distinct", action="store_true",
                    help="replicas share no content (each file's first bytes name its "
                         "replica), so a first save stores every replica's objects")
    ap.add_argument("--keep", action="store_true", help="keep the scratch dirs")
    ap.add_argument("--json-out", default=os.path.join(HERE, "results", "scale.json"))
    ap.add_argument("--command-line", default=" ".join(sys.argv), help=argparse.SUPPRESS)
    a = ap.parse_args()
    a.drop_copies_flag = a.drop_copies
    rel = default_release_dir() if (a.ckpt is None or a.stat_floor is None) else ""
    a.ckpt = os.path.abspath(a.ckpt or os.path.join(rel, "ckpt"))
    a.stat_floor = os.path.abspath(a.stat_floor or os.path.join(rel, "examples", "stat_floor"))
    a.watch_floor = os.path.join(os.path.dirname(a.stat_floor), "watch_floor")
    sizes = sorted({int(s) for s in a.sizes.split(",") if s.strip()} | ({25} if a.x25 else set()))
    if not sizes or min(sizes) < 1:
        ap.error("--sizes: positive replica counts")
    if 1 not in sizes:
        log("warning: no 1x size: growth columns are empty")
    if a.fair_rounds < 1 or a.runs < 1:
        ap.error("--runs and --fair-rounds must be >= 1")
    for p, what in ((a.ckpt, "ckpt"), (a.stat_floor, "stat_floor"), (a.watch_floor, "watch_floor")):
        if not os.access(p, os.X_OK):
            ap.error(f"{what} binary {p} missing (bench/scale.sh builds it)")
    a.corpus = os.path.abspath(a.corpus)
    a.scratch = os.path.abspath(a.scratch)
    if not os.path.isdir(a.corpus):
        ap.error(f"corpus {a.corpus} missing (bench/make-corpus.sh builds it)")
    if os.path.realpath(a.scratch).startswith(os.path.realpath(a.corpus) + os.sep):
        ap.error("scratch dir must not be inside the corpus")
    os.makedirs(a.scratch, exist_ok=True)

    def on_signal(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")
    signal.signal(signal.SIGTERM, on_signal)
    atexit.register(lambda: [stop_watcher(a.ckpt, ws) for ws in list(WATCHERS)])

    machine = {
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "nproc": os.cpu_count(), "kernel": platform.release(),
        "cpu": sh("grep -m1 'model name' /proc/cpuinfo | cut -d: -f2").strip(),
        "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "scratch_fs": sh(f"findmnt -n -o FSTYPE -T {a.scratch!r}"),
        "ckpt_version": sh(f"{a.ckpt!r} --version"),
        "loadavg_start": loadavg(),
    }
    s = Scale(a)
    template = os.path.join(a.scratch, "template")
    rmtree(template)
    log(f"making the template from {a.corpus} (first {HEAD_BYTES} bytes of each file)")
    machine["template"] = make_template(a.corpus, template)
    s.template = template
    tdu = du_bytes(template)
    machine["template_du_bytes"] = tdu

    def write_json(complete):
        machine["loadavg_end"] = loadavg()
        text = s.report(machine)
        os.makedirs(os.path.dirname(a.json_out), exist_ok=True)
        with open(a.json_out + ".tmp", "w") as f:
            json.dump({"complete": complete, "machine": machine, "command": a.command_line,
                       "runs": a.runs, "sizes": {str(k): v for k, v in s.results.items()},
                       "markdown": text}, f, indent=1)
        os.replace(a.json_out + ".tmp", a.json_out)
        return text

    failed = False
    try:
        s.start_reference()
        for k in sizes:
            # workspace + one copy per round + a store per round (one replica's
            # objects, or every replica's with --distinct)
            stores = tdu * (k if a.distinct else 1) * a.fair_rounds
            est = lambda copies: tdu * k * (1 + copies) * 1.1 + stores  # noqa
            a.drop_copies = a.drop_copies_flag
            if not a.drop_copies and est(a.fair_rounds) > a.max_disk_gb * 1e9:
                log(f"{k}x: keeping {a.fair_rounds} copies would need "
                    f"{est(a.fair_rounds) / 1e9:.1f} GB: deleting each after its round")
                a.drop_copies = True
            est = est(1 if a.drop_copies else a.fair_rounds)
            if est > a.max_disk_gb * 1e9:
                raise BenchError(f"{k}x needs about {est / 1e9:.1f} GB of scratch "
                                 f"(> --max-disk-gb {a.max_disk_gb}); lower --fair-rounds "
                                 f"or raise the limit")
            free = shutil.disk_usage(a.scratch).free
            if est > free * 0.9:
                raise BenchError(f"{k}x needs about {est / 1e9:.1f} GB, "
                                 f"{free / 1e9:.1f} GB free")
            s.run_size(k)
            write_json(False)
    except (BenchError, subprocess.CalledProcessError, OSError, KeyboardInterrupt) as e:
        failed = True
        log(f"!!! FAILED: {e}")
    finally:
        s.stop_reference()
        rmtree(template)
        if not a.keep:
            try:
                os.rmdir(a.scratch)
            except OSError:
                pass
    text = write_json(not failed)
    print(text)
    log(f"wrote {a.json_out}")
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
