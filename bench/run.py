#!/usr/bin/env python3
"""ckpt benchmark harness: ckpt vs git vs rsync vs cp on the reference workspace.

Invoked through bench/run.sh; see bench/README.md for what each operation means per tool.
Python 3.11, standard library only.
"""
from __future__ import annotations

import argparse
import atexit
import datetime as _dt
import hashlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

# Operation keys, in execution order. The order matters: each op leaves the tool's
# workspace/store in the state the next one expects (see Tool.* and run_tool()).
OPS = [
    ("first-save", "first save (full capture)"),
    ("save-1", "save after 1-file edit"),
    ("save-100", "save after 100-file edit"),
    ("status", "status (1 file changed)"),
    ("restore-1", "restore after 1-file edit"),
    ("restore-1-nosave", "restore after 1-file edit, no pre-save"),
    ("restore-nm", "restore after rm -rf node_modules"),
    ("restore-empty", "full restore into empty dir"),
    # ckpt-watch only (figures about the watcher, not an operation of the others):
    ("watch-start", "watcher start-up until ready (`ckpt watch --daemon`)"),
    ("watch-rss", "watcher memory after the ops (RSS, MB — not ms)"),
]
OP_TITLES = dict(OPS)
TOOLS = ["ckpt", "ckpt-watch", "git", "rsync", "cp"]

EDIT1 = "app/src/mod1.ts"
CMD_TIMEOUT = 1800


class BenchError(RuntimeError):
    pass


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def run(argv, *, cwd=None, env=None, ok=(0,), capture=True, input_=None):
    """Run a command (untimed helper). Raises BenchError on an unexpected exit code."""
    p = subprocess.run(argv, cwd=cwd, env=env, input=input_,
                       stdout=subprocess.PIPE if capture else subprocess.DEVNULL,
                       stderr=subprocess.PIPE, timeout=CMD_TIMEOUT)
    if p.returncode not in ok:
        out = (p.stdout or b"").decode(errors="replace")[-2000:]
        err = (p.stderr or b"").decode(errors="replace")[-4000:]
        raise BenchError(f"command failed (exit {p.returncode}): {' '.join(map(str, argv))}"
                         f" [cwd={cwd}]\n--- stdout ---\n{out}\n--- stderr ---\n{err}")
    return p


class Stopwatch:
    """Accumulates wall-clock time spent inside timed subprocess calls only."""

    def __init__(self):
        self.ns = 0

    def run(self, argv, **kw):
        t0 = time.perf_counter_ns()
        try:
            return run(argv, **kw)
        finally:
            self.ns += time.perf_counter_ns() - t0

    @property
    def ms(self) -> float:
        return self.ns / 1e6


def rmtree(path: str) -> None:
    if os.path.lexists(path):
        # `rm -rf` copes with read-only dirs that shutil.rmtree trips over.
        run(["rm", "-rf", "--", path])


def append_line(path: str, n: int) -> None:
    with open(path, "ab") as f:
        f.write(f"// bench edit {n}\n".encode())


# ---------------------------------------------------------------------------------------
# Tree manifests for correctness checks (never inside a timed region).

def _hash_file(path: bytes) -> str:
    h = hashlib.blake2b(digest_size=20)
    with open(path, "rb") as f:
        while True:
            b = f.read(1 << 20)
            if not b:
                break
            h.update(b)
    return h.hexdigest()


def manifest(root: str, exclude_top=()) -> dict:
    """path(bytes, relative) -> (kind, mode, size, mtime_ns, digest_or_target)."""
    rootb = os.fsencode(root)
    excl = {os.fsencode(x) for x in exclude_top}
    out = {}
    files = []
    stack = [b""]
    while stack:
        rel = stack.pop()
        full = os.path.join(rootb, rel) if rel else rootb
        with os.scandir(full) as it:
            for e in it:
                r = os.path.join(rel, e.name) if rel else e.name
                if not rel and e.name in excl:
                    continue
                st = e.stat(follow_symlinks=False)
                if e.is_symlink():
                    out[r] = ("l", 0, 0, st.st_mtime_ns, os.readlink(e.path))
                elif e.is_dir(follow_symlinks=False):
                    out[r] = ("d", st.st_mode & 0o7777, 0, st.st_mtime_ns, None)
                    stack.append(r)
                elif e.is_file(follow_symlinks=False):
                    out[r] = ("f", st.st_mode & 0o7777, st.st_size, st.st_mtime_ns, None)
                    files.append(r)
                else:
                    out[r] = ("o", st.st_mode & 0o7777, 0, st.st_mtime_ns, None)
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as ex:
        for r, d in zip(files, ex.map(lambda r: _hash_file(os.path.join(rootb, r)), files,
                                      chunksize=64)):
            k, m, s, t, _ = out[r]
            out[r] = (k, m, s, t, d)
    return out


def subtree(root: str, rel: str) -> dict:
    """The manifest() entries of directory `rel` of the tree at `root` and of
    everything under it, keyed as manifest(root) keys them."""
    relb = os.fsencode(rel)
    st = os.lstat(os.path.join(root, rel))
    out = {relb: ("d", st.st_mode & 0o7777, 0, st.st_mtime_ns, None)}
    out.update({relb + b"/" + p: v for p, v in manifest(os.path.join(root, rel)).items()})
    return out


def compare(expected: dict, actual: dict, *, exec_bit_only=False, check_mtime=True,
            ignore_empty_dirs=False):
    """Returns (errors, warnings) as lists of strings."""
    errors, warnings = [], []
    if ignore_empty_dirs:
        def non_empty(m):
            parents = {os.path.dirname(p) for p in m}
            return {p: v for p, v in m.items() if v[0] != "d" or p in parents}
        expected, actual = non_empty(expected), non_empty(actual)
    for p in sorted(set(expected) | set(actual)):
        e, a = expected.get(p), actual.get(p)
        ps = p.decode(errors="backslashreplace")
        if a is None:
            errors.append(f"missing: {ps}")
            continue
        if e is None:
            errors.append(f"extra: {ps}")
            continue
        if e[0] != a[0]:
            errors.append(f"type {e[0]}->{a[0]}: {ps}")
            continue
        kind = e[0]
        if kind == "f":
            if e[2] != a[2] or e[4] != a[4]:
                errors.append(f"content differs: {ps}")
            em, am = (e[1] & 0o111, a[1] & 0o111) if exec_bit_only else (e[1], a[1])
            if em != am:
                errors.append(f"mode {oct(e[1])}->{oct(a[1])}: {ps}")
            if check_mtime and e[3] != a[3]:
                errors.append(f"mtime {e[3]}->{a[3]}: {ps}")
        elif kind == "l":
            if e[4] != a[4]:
                errors.append(f"symlink target differs: {ps}")
            if check_mtime and e[3] != a[3]:
                warnings.append(f"symlink mtime differs: {ps}")
        elif kind == "d":
            if not exec_bit_only and e[1] != a[1]:
                errors.append(f"dir mode {oct(e[1])}->{oct(a[1])}: {ps}")
            if check_mtime and e[3] != a[3]:
                warnings.append(f"dir mtime differs: {ps}")
    return errors, warnings


# ---------------------------------------------------------------------------------------
# Tools. Every method that is part of a measured operation takes a Stopwatch and runs the
# measured commands through it; everything else is untimed setup.

class Tool:
    name = "?"
    # correctness-check knobs (see compare())
    exec_bit_only = False
    check_mtime = True
    ignore_empty_dirs = False

    def __init__(self, root: str, ws: str, args):
        self.root = root      # this tool's scratch dir
        self.ws = ws          # the workspace (a copy of the corpus)
        self.args = args
        self.base = None      # id of the baseline save (== corpus)
        self.latest = None    # id of the latest save
        self.exclude_top = set()  # top-level names to ignore when comparing ws with corpus
        self.setup_wrote = {}     # manifest entries the tool's setup changed in ws

    def versions(self) -> str:
        return ""

    def reset_store(self):                 # untimed: fresh, empty store
        raise NotImplementedError

    def save(self, sw: Stopwatch, msg: str):   # timed; sets self.latest, returns id
        raise NotImplementedError

    def status(self, sw: Stopwatch) -> str:    # timed; returns output text
        raise NotImplementedError

    def restore(self, sw: Stopwatch, snap, *, nosave=False):  # timed, in place
        raise NotImplementedError

    def restore_into(self, sw: Stopwatch, snap, dest: str):   # timed; dest exists, empty
        raise NotImplementedError

    def cleanup_old(self):                 # untimed: drop snapshots no longer needed
        pass

    def supports(self, op: str) -> bool:
        return op != "restore-1-nosave"

    def notes(self) -> dict:
        return {}

    def finish(self, record):              # untimed: after the ops, before cleanup
        pass


class CkptTool(Tool):
    name = "ckpt"

    def __init__(self, root, ws, args):
        super().__init__(root, ws, args)
        self.bin = args.ckpt
        self.store = os.path.join(root, "store")
        self.marker = set()

    def versions(self):
        try:
            return run([self.bin, "--version"]).stdout.decode().strip()
        except Exception as e:  # noqa: BLE001
            return f"(--version failed: {str(e).splitlines()[0]})"

    def reset_store(self):
        rmtree(self.store)
        for m in self.marker:
            rmtree(os.path.join(self.ws, m))
        before = set(os.listdir(self.ws))
        run([self.bin, "init", "--store", self.store], cwd=self.ws)
        self.marker = set(os.listdir(self.ws)) - before
        self.exclude_top = set(self.marker)
        # In a git repository `ckpt init` adds its marker to .git/info/exclude
        # (docs/CLI.md): the tree every checkpoint holds is the corpus with it.
        info = os.path.join(".git", "info")
        self.setup_wrote = (subtree(self.ws, info)
                            if os.path.isdir(os.path.join(self.ws, info)) else {})

    def _id(self, p) -> str:
        out = p.stdout.decode(errors="replace").strip()
        try:
            return str(json.loads(out)["id"])
        except Exception:  # noqa: BLE001
            raise BenchError(f"ckpt save --json: no JSON 'id' in stdout: {out[:500]!r}")

    def save(self, sw, msg):
        p = sw.run([self.bin, "save", "-m", msg, "--json"], cwd=self.ws)
        self.latest = self._id(p)
        return self.latest

    def status(self, sw):
        return sw.run([self.bin, "status"], cwd=self.ws).stdout.decode(errors="replace")

    def restore(self, sw, snap, *, nosave=False):
        argv = [self.bin, "restore", snap] + (["--no-save"] if nosave else [])
        sw.run(argv, cwd=self.ws)

    def restore_into(self, sw, snap, dest):
        sw.run([self.bin, "restore", snap, "--to", dest], cwd=self.ws)

    def supports(self, op):
        return True

    def notes(self):
        return {
            "save": "ckpt save -m MSG --json (store made by ckpt init --store DIR, untimed)",
            "status": "ckpt status",
            "restore": "ckpt restore ID (default: saves the current state first); "
                       "'no pre-save' row: ckpt restore ID --no-save",
            "restore-empty": "ckpt restore ID --to EMPTY",
        }


class GitTool(Tool):
    name = "git"
    exec_bit_only = True       # git stores only the executable bit
    check_mtime = False        # git does not restore mtimes
    ignore_empty_dirs = True   # git does not track empty directories

    def __init__(self, root, ws, args):
        super().__init__(root, ws, args)
        self.gitdir = os.path.join(root, "repo.git")
        # A directory named .git is never tracked by git; the corpus's own .git (a small
        # history of app/) is therefore outside git's capture and outside its comparison.
        self.exclude_top = {".git"}
        self.env = dict(os.environ, GIT_AUTHOR_NAME="bench", GIT_AUTHOR_EMAIL="b@x.invalid",
                        GIT_COMMITTER_NAME="bench", GIT_COMMITTER_EMAIL="b@x.invalid",
                        GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL="/dev/null")

    def g(self, *a, work_tree=None):
        return ["git", f"--git-dir={self.gitdir}", f"--work-tree={work_tree or self.ws}", *a]

    def versions(self):
        return run(["git", "--version"]).stdout.decode().strip()

    def reset_store(self):
        rmtree(self.gitdir)
        run(["git", "init", "-q", "--bare", self.gitdir], env=self.env)
        for k, v in [("core.bare", "false"), ("gc.auto", "0"), ("commit.gpgsign", "false"),
                     ("core.excludesFile", "/dev/null")]:
            run(["git", f"--git-dir={self.gitdir}", "config", k, v], env=self.env)

    def save(self, sw, msg):
        # -f: also add files matched by .gitignore files shipped inside node_modules, so
        # git captures the same tree as the other tools.
        sw.run(self.g("add", "-A", "-f"), env=self.env)
        sw.run(self.g("commit", "-q", "--no-verify", "-m", msg), env=self.env)
        self.latest = run(self.g("rev-parse", "HEAD"), env=self.env).stdout.decode().strip()
        return self.latest

    def status(self, sw):
        return sw.run(self.g("status", "--porcelain"), env=self.env).stdout.decode(
            errors="replace")

    def restore(self, sw, snap, *, nosave=False):
        sw.run(self.g("reset", "-q", "--hard", snap), env=self.env)
        sw.run(self.g("clean", "-fdxq"), env=self.env)

    def restore_into(self, sw, snap, dest):
        # A throw-away index, so the repository's index (stat cache of the workspace)
        # stays valid for the other operations.
        env = dict(self.env, GIT_INDEX_FILE=os.path.join(self.root, "tmp-index"))
        rmtree(env["GIT_INDEX_FILE"])
        sw.run(self.g("checkout", "-f", snap, "--", ".", work_tree=dest), env=env)

    def notes(self):
        return {
            "save": "git add -A -f && git commit -q (separate --git-dir, --work-tree=WS; gc.auto=0)",
            "status": "git status --porcelain",
            "restore": "git reset -q --hard ID && git clean -fdxq",
            "restore-empty": "GIT_INDEX_FILE=tmp git --work-tree=EMPTY checkout -f ID -- .",
        }


class RsyncTool(Tool):
    name = "rsync"

    def __init__(self, root, ws, args):
        super().__init__(root, ws, args)
        self.snaps = os.path.join(root, "snaps")
        self.n = 0

    def versions(self):
        return run(["rsync", "--version"]).stdout.decode().splitlines()[0].strip()

    def reset_store(self):
        rmtree(self.snaps)
        os.makedirs(self.snaps)
        self.n = 0
        self.base = self.latest = None

    def save(self, sw, msg):
        self.n += 1
        dst = os.path.join(self.snaps, f"s{self.n}")
        if self.latest is None:
            sw.run(["rsync", "-a", self.ws + "/", dst + "/"])
        else:
            sw.run(["rsync", "-a", f"--link-dest={self.latest}", self.ws + "/", dst + "/"])
        self.latest = dst
        return dst

    def status(self, sw):
        return sw.run(["rsync", "-an", "--delete", "--itemize-changes",
                       self.ws + "/", self.latest + "/"]).stdout.decode(errors="replace")

    def restore(self, sw, snap, *, nosave=False):
        sw.run(["rsync", "-a", "--delete", snap + "/", self.ws + "/"])

    def restore_into(self, sw, snap, dest):
        sw.run(["rsync", "-a", snap + "/", dest + "/"])

    def cleanup_old(self):
        keep = {self.base, self.latest}
        for d in os.listdir(self.snaps):
            p = os.path.join(self.snaps, d)
            if p not in keep:
                rmtree(p)

    def notes(self):
        return {
            "save": "first: rsync -a WS/ SNAP1/; then rsync -a --link-dest=PREV WS/ SNAPn/",
            "status": "rsync -an --delete --itemize-changes WS/ LATEST/ (dry run, size+mtime)",
            "restore": "rsync -a --delete SNAP/ WS/",
            "restore-empty": "rsync -a SNAP/ EMPTY/",
        }


class CpTool(RsyncTool):
    name = "cp"

    def versions(self):
        return run(["cp", "--version"]).stdout.decode().splitlines()[0].strip()

    def save(self, sw, msg):
        self.n += 1
        dst = os.path.join(self.snaps, f"s{self.n}")
        sw.run(["cp", "-a", self.ws, dst])
        self.latest = dst
        return dst

    def status(self, sw):
        # diff exits 1 when trees differ. Reads file contents (no stat cache).
        return sw.run(["diff", "-rq", "--no-dereference", self.latest, self.ws],
                      ok=(0, 1)).stdout.decode(errors="replace")

    def restore(self, sw, snap, *, nosave=False):
        sw.run(["rm", "-rf", self.ws])
        sw.run(["cp", "-a", snap, self.ws])

    def restore_into(self, sw, snap, dest):
        sw.run(["cp", "-a", snap + "/.", dest + "/"])

    def notes(self):
        return {
            "save": "cp -a WS SNAPn (a full copy every time)",
            "status": "diff -rq --no-dereference LATEST WS (compares contents)",
            "restore": "rm -rf WS && cp -a SNAP WS",
            "restore-empty": "cp -a SNAP/. EMPTY/",
        }


class CkptWatchTool(CkptTool):
    """ckpt with a live watcher (`ckpt watch --daemon`) for the workspace: save,
    status and restore ask it for the dirty directories instead of scanning. Each
    fresh store gets a fresh watcher; its start-up (wall time until `--daemon`
    returns ready) is recorded as the watch-start row, its RSS at the end as
    watch-rss. The first save through a new watcher is a full scan by design."""
    name = "ckpt-watch"

    def __init__(self, root, ws, args):
        super().__init__(root, ws, args)
        self.watching = False
        self.starts = []
        atexit.register(self.stop_watch)   # never leave a watcher behind

    def stop_watch(self):
        if self.watching:
            run([self.bin, "watch", "--stop"], cwd=self.ws, ok=(0, 1, 2, 3))
            self.watching = False

    def reset_store(self):
        self.stop_watch()
        super().reset_store()
        t0 = time.perf_counter()
        run([self.bin, "watch", "--daemon", "-q"], cwd=self.ws)
        self.starts.append((time.perf_counter() - t0) * 1e3)
        self.watching = True

    def supports(self, op):
        return True

    def finish(self, record):
        for ms in self.starts:
            record("watch-start", ms)
        st = json.loads(run([self.bin, "watch", "--status", "--json"], cwd=self.ws).stdout)
        if not st.get("running") or not st.get("complete"):
            raise BenchError(f"ckpt-watch: the watcher is not running and complete: {st}")
        record("watch-rss", st["rss_bytes"] / 1e6)
        self.stop_watch()

    def notes(self):
        n = dict(super().notes())
        n["watch"] = ("ckpt watch --daemon before the ops (untimed except the watch-start "
                      "row); the same commands then use the watcher")
        return n


TOOL_CLASSES = {"ckpt": CkptTool, "ckpt-watch": CkptWatchTool, "git": GitTool, "rsync": RsyncTool, "cp": CpTool}


# ---------------------------------------------------------------------------------------

class Bench:
    def __init__(self, args):
        self.args = args
        self.corpus = args.corpus
        self.scratch = args.scratch
        self.results = {}   # tool -> op -> {"runs_ms": [...], ...}
        self.errors = {}    # tool -> message
        self.warnings = {}  # tool -> [..]
        self.expected = None
        self.edit_counter = 0
        self.edit100 = []

    # -- corpus-level preparation ------------------------------------------------------
    def prepare(self):
        log(f"warm-up read of {self.corpus} and reference manifest (content hashes)")
        t0 = time.time()
        self.expected = manifest(self.corpus)
        nfiles = sum(1 for v in self.expected.values() if v[0] == "f")
        nbytes = sum(v[2] for v in self.expected.values() if v[0] == "f")
        self.corpus_stats = {
            "files": nfiles,
            "dirs": sum(1 for v in self.expected.values() if v[0] == "d"),
            "symlinks": sum(1 for v in self.expected.values() if v[0] == "l"),
            "bytes": nbytes,
            "du_mb": int(run(["du", "-sm", self.corpus]).stdout.split()[0]),
        }
        log(f"corpus: {self.corpus_stats} ({time.time() - t0:.1f}s)")
        # 100 files to edit: 50 in app/, 50 .js files spread evenly across node_modules/.
        app = [f"app/src/mod{i}.ts" for i in range(4, 101, 4)] + \
              [f"app/components/C{i}.tsx" for i in range(2, 51, 2)]
        nm = sorted(p.decode() for p, v in self.expected.items()
                    if v[0] == "f" and p.startswith(b"node_modules/") and p.endswith(b".js"))
        step = len(nm) / 50
        nm_pick = [nm[int(i * step)] for i in range(50)]
        self.edit100 = app + nm_pick
        assert len(set(self.edit100)) == 100 and EDIT1 not in self.edit100
        for p in app:
            assert p.encode() in self.expected, p

    def edit(self, ws, paths):
        self.edit_counter += 1
        for p in paths:
            append_line(os.path.join(ws, p), self.edit_counter)

    def sync(self, level: str):
        """sync(2) so dirty data left by untimed setup is not written back during a timed
        run. level is 'op' (before each op's series of runs) or 'run' (before every run)."""
        if self.args.sync == "run" or (self.args.sync == "op" and level == "op"):
            t0 = time.time()
            os.sync()
            if time.time() - t0 > 2:
                log(f"  (sync took {time.time() - t0:.1f}s, untimed)")

    def verify(self, tool: Tool, tree: str, what: str, expected=None, exclude_top=None):
        if self.args.no_verify:
            return
        t0 = time.time()
        exp = expected if expected is not None else {**self.expected, **tool.setup_wrote}
        excl = tool.exclude_top if exclude_top is None else exclude_top
        if excl:
            exp = {p: v for p, v in exp.items()
                   if p.split(b"/", 1)[0] not in {os.fsencode(x) for x in excl}}
        act = manifest(tree, exclude_top=excl)
        errs, warns = compare(exp, act, exec_bit_only=tool.exec_bit_only,
                              check_mtime=tool.check_mtime,
                              ignore_empty_dirs=tool.ignore_empty_dirs)
        if warns:
            self.warnings.setdefault(tool.name, []).append(
                f"{what}: {len(warns)} warnings, e.g. {warns[:3]}")
        if errs:
            raise BenchError(f"VERIFY FAILED for {tool.name} after {what}: "
                             f"{len(errs)} differences, first: " + "; ".join(errs[:15]))
        log(f"  verified {tool.name} {what}: {len(act)} entries OK "
            f"({len(warns)} warnings, {time.time() - t0:.1f}s)")

    # -- one tool, all selected ops ----------------------------------------------------
    def run_tool(self, name: str):
        args = self.args
        root = os.path.join(self.scratch, name)
        rmtree(root)
        os.makedirs(root)
        ws = os.path.join(root, "ws")
        log(f"== {name}: copying corpus to {ws} (untimed)")
        run(["cp", "-a", self.corpus, ws])
        tool = TOOL_CLASSES[name](root, ws, args)
        res = self.results.setdefault(name, {})
        ops = [o for o, _ in OPS if o in args.ops and tool.supports(o)]
        res["_version"] = tool.versions()
        res["_notes"] = tool.notes()

        def record(op, ms):
            v = res.setdefault(op, {"runs_ms": []})
            v["runs_ms"].append(round(ms, 3))
            r = v["runs_ms"]
            v.update(median_ms=round(statistics.median(r), 3), min_ms=min(r), max_ms=max(r))

        def timed(fn, *a, **kw):
            self.sync("run")
            sw = Stopwatch()
            out = fn(sw, *a, **kw)
            return sw.ms, out

        # first save: fresh store every run; the last run's checkpoint is the baseline.
        n_first = args.runs if "first-save" in ops else 1
        self.sync("op")
        for i in range(n_first):
            tool.reset_store()
            ms, snap = timed(tool.save, "baseline")
            if "first-save" in ops:
                record("first-save", ms)
                log(f"  {name} first-save run {i + 1}: {ms:.1f} ms")
        tool.base = tool.latest
        if "first-save" in ops and "restore-empty" not in ops and not args.no_verify:
            # the baseline save must hold exactly the corpus (restore-empty checks the
            # same thing when it runs)
            d = os.path.join(root, "verify-base")
            rmtree(d)
            os.makedirs(d)
            tool.restore_into(Stopwatch(), tool.base, d)
            self.verify(tool, d, "first save (materialised into an empty dir)",
                        exclude_top=({".git"} if name == "git" else set()))
            rmtree(d)

        for op, paths in (("save-1", [EDIT1]), ("save-100", self.edit100)):
            if op not in ops:
                continue
            self.sync("op")
            for i in range(args.runs):
                self.edit(ws, paths)
                ms, _ = timed(tool.save, f"{op} run {i + 1}")
                record(op, ms)
                log(f"  {name} {op} run {i + 1}: {ms:.1f} ms")
                tool.cleanup_old()
            if not args.no_verify and not (op == "save-1" and "save-100" in ops):
                # the latest save must equal the edited workspace (after save-100 this
                # also covers save-1)
                d = os.path.join(root, "verify-latest")
                rmtree(d)
                os.makedirs(d)
                tool.restore_into(Stopwatch(), tool.latest, d)
                self.verify(tool, d, f"{op} (latest save vs workspace)",
                            expected=manifest(ws, exclude_top=tool.exclude_top),
                            exclude_top=set())
                rmtree(d)

        if "status" in ops:
            self.sync("op")
            for i in range(args.runs):
                self.edit(ws, [EDIT1])
                ms, out = timed(tool.status)
                record("status", ms)
                log(f"  {name} status run {i + 1}: {ms:.1f} ms")
                if i == 0 and "mod1.ts" not in out:
                    raise BenchError(f"{name} status output does not mention {EDIT1}:\n"
                                     f"{out[:2000]}")

        restore_ops = [o for o in ("restore-1", "restore-1-nosave", "restore-nm",
                                   "restore-empty") if o in ops]
        if restore_ops:
            # Back to the baseline (untimed) -- also checks a restore across all the
            # edits made above.
            tool.restore(Stopwatch(), tool.base)
            self.verify(tool, ws, "restore to baseline after the save/status ops")

        for op in ("restore-1", "restore-1-nosave", "restore-nm"):
            if op not in ops:
                continue
            self.sync("op")
            for i in range(args.runs):
                if op == "restore-nm":
                    rmtree(os.path.join(ws, "node_modules"))
                else:
                    self.edit(ws, [EDIT1])
                ms, _ = timed(tool.restore, tool.base, nosave=(op == "restore-1-nosave"))
                record(op, ms)
                log(f"  {name} {op} run {i + 1}: {ms:.1f} ms")
                if i == 0 or args.verify_all:
                    self.verify(tool, ws, f"{op} run {i + 1}")

        if "restore-empty" in ops:
            self.sync("op")
            for i in range(args.runs):
                d = os.path.join(root, "empty")
                rmtree(d)
                os.makedirs(d)
                ms, _ = timed(tool.restore_into, tool.base, d)
                record("restore-empty", ms)
                log(f"  {name} restore-empty run {i + 1}: {ms:.1f} ms")
                if i == 0 or args.verify_all:
                    self.verify(tool, d, f"restore-empty run {i + 1}",
                                exclude_top=({".git"} if name == "git" else set()))
                rmtree(d)

        tool.finish(record)
        if not args.keep:
            rmtree(root)

    # -- reporting -----------------------------------------------------------------------
    def machine(self) -> dict:
        def sh(cmd):
            try:
                return subprocess.run(cmd, shell=True, capture_output=True, text=True,
                                      timeout=30).stdout.strip()
            except Exception:  # noqa: BLE001
                return ""
        mem_kb = 0
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    mem_kb = int(line.split()[1])
        cpu = ""
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
        os.makedirs(self.scratch, exist_ok=True)
        return {
            "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "hostname": platform.node(),
            "nproc": os.cpu_count(),
            "memory_gib": round(mem_kb / 1048576, 1),
            "kernel": platform.release(),
            "cpu": cpu,
            "scratch": self.scratch,
            "scratch_fs": (sh(f"findmnt -n -o FSTYPE -T {self.scratch!r}")
                           or sh(f"df -PT {self.scratch!r} | awk 'NR==2{{print $2}}'")),
            "scratch_dev": sh(f"df -P {self.scratch!r} | awk 'NR==2{{print $1}}'"),
            "corpus": self.corpus,
            "loadavg_start": open("/proc/loadavg").read().split()[:3],
            "sync_mode": self.args.sync,
        }

    def report(self, machine: dict) -> str:
        tools = [t for t in TOOLS if t in self.args.only]
        ops = [o for o, _ in OPS if o in self.args.ops]

        def fmt(ms):
            if ms is None:
                return "—"
            return f"{ms:.1f}" if ms < 100 else f"{ms:,.0f}"

        def cell(t, o, key="median_ms"):
            v = self.results.get(t, {}).get(o)
            if not v or key not in v:
                return None
            return v[key]

        lines = []
        lines.append(f"## Benchmark: ckpt vs git vs rsync vs cp — median wall-clock ms of "
                     f"{self.args.runs} runs, warm cache")
        lines.append("")
        lines.append(f"- date: {machine['date']}")
        lines.append(f"- machine: {machine['nproc']} CPUs ({machine['cpu']}), "
                     f"{machine['memory_gib']} GiB RAM, Linux {machine['kernel']}, "
                     f"scratch {machine['scratch']} on {machine['scratch_fs']} "
                     f"({machine['scratch_dev']})")
        cs = self.corpus_stats
        lines.append(f"- corpus: {machine['corpus']}: {cs['files']:,} files, {cs['dirs']:,} dirs, "
                     f"{cs['symlinks']:,} symlinks, {cs['bytes'] / 1e6:,.0f} MB of file data "
                     f"(du {cs['du_mb']} MB)")
        vers = ", ".join(f"{t}: {self.results.get(t, {}).get('_version', '?')}" for t in tools)
        lines.append(f"- versions: {vers}")
        lines.append(f"- command: {self.args.command_line} (sync mode: {machine['sync_mode']}; "
                     f"load average at start {' '.join(machine['loadavg_start'])}, at end "
                     f"{' '.join(machine.get('loadavg_end', ['?']))} — other work on the "
                     f"machine inflates the figures)")
        lines.append("")
        head = "| operation | " + " | ".join(tools) + (" | ckpt vs git |" if
                                                       {"ckpt", "git"} <= set(tools) else " |")
        lines.append(head)
        lines.append("|" + "---|" * (head.count("|") - 1))
        for o in ops:
            row = [OP_TITLES[o]] + [fmt(cell(t, o)) for t in tools]
            if {"ckpt", "git"} <= set(tools):
                c, g = cell("ckpt", o), cell("git", o)
                row.append(f"{g / c:.1f}×" if c and g else "—")
            lines.append("| " + " | ".join(row) + " |")
        lines.append("")
        lines.append("min–max ms:")
        lines.append("")
        head = "| operation | " + " | ".join(tools) + " |"
        lines.append(head)
        lines.append("|" + "---|" * (len(tools) + 1))
        for o in ops:
            row = [OP_TITLES[o]]
            for t in tools:
                lo, hi = cell(t, o, "min_ms"), cell(t, o, "max_ms")
                row.append("—" if lo is None else f"{fmt(lo)}–{fmt(hi)}")
            lines.append("| " + " | ".join(row) + " |")
        lines.append("")
        lines.append("How each tool does each operation:")
        lines.append("")
        for t in tools:
            notes = self.results.get(t, {}).get("_notes", {})
            if notes:
                lines.append(f"- **{t}**: " + "; ".join(f"{k}: {v}" for k, v in notes.items()))
        for t, e in self.errors.items():
            lines.append("")
            lines.append(f"**{t} FAILED**: {e.splitlines()[0]}")
        for t, w in self.warnings.items():
            lines.append(f"- note ({t}): " + " | ".join(w))
        return "\n".join(lines)


def default_ckpt() -> str:
    """The release binary: .cargo/config.toml builds for the host triple, so it is
    target/<host>/release/ckpt (also used by hook.py and watch_compare.py, and by
    run.sh and copy.sh through --print-default-ckpt)."""
    out = subprocess.run(["rustc", "-vV"], stdout=subprocess.PIPE, text=True).stdout
    host = out.split("host: ")[1].split()[0]
    return os.path.join(REPO, "target", host, "release", "ckpt")


def main():
    if sys.argv[1:] == ["--print-default-ckpt"]:  # for run.sh and copy.sh
        print(default_ckpt())
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--corpus", default=os.environ.get("BENCH_CORPUS", "/work/corpus"))
    ap.add_argument("--ckpt", default=default_ckpt())
    ap.add_argument("--scratch", default=os.environ.get("BENCH_SCRATCH", "/work/bench-scratch"))
    ap.add_argument("--only", default=",".join(TOOLS), help="comma list of " + ",".join(TOOLS))
    ap.add_argument("--ops", default=",".join(o for o, _ in OPS),
                    help="comma list of " + ",".join(o for o, _ in OPS))
    ap.add_argument("--json-out", default=os.path.join(HERE, "results", "latest.json"))
    ap.add_argument("--no-verify", action="store_true", help="skip correctness checks")
    ap.add_argument("--verify-all", action="store_true", help="verify after every restore run")
    ap.add_argument("--sync", choices=["none", "op", "run"], default="run",
                    help="sync(2) before every timed run (run, default: fairest, since ckpt "
                         "calls syncfs and would otherwise flush the setup's dirty data inside "
                         "its timed region), before each op's series of runs (op), or never")
    ap.add_argument("--keep", action="store_true", help="keep the scratch dirs")
    ap.add_argument("--keep-going", action="store_true",
                    help="if one tool fails, report it and continue with the others")
    ap.add_argument("--command-line", default=" ".join(sys.argv), help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.only = [t.strip() for t in args.only.split(",") if t.strip()]
    args.ops = [o.strip() for o in args.ops.split(",") if o.strip()]
    for t in args.only:
        if t not in TOOLS:
            ap.error(f"unknown tool {t!r}")
    for o in args.ops:
        if o not in OP_TITLES:
            ap.error(f"unknown op {o!r}")
    if args.runs < 1:
        ap.error("--runs must be >= 1")
    args.corpus = os.path.abspath(args.corpus)
    args.scratch = os.path.abspath(args.scratch)
    args.ckpt = os.path.abspath(args.ckpt)
    if not os.path.isdir(args.corpus):
        ap.error(f"corpus {args.corpus} missing (bench/run.sh builds it)")
    if "ckpt" in args.only and not os.access(args.ckpt, os.X_OK):
        ap.error(f"ckpt binary {args.ckpt} missing (bench/run.sh builds it)")
    for t, exe in (("git", "git"), ("rsync", "rsync"), ("cp", "cp")):
        if t in args.only and not shutil.which(exe):
            ap.error(f"{exe} not installed")
    if os.path.realpath(args.scratch).startswith(os.path.realpath(args.corpus) + os.sep):
        ap.error("scratch dir must not be inside the corpus")
    os.makedirs(args.scratch, exist_ok=True)
    if os.stat(args.scratch).st_dev != os.stat(args.corpus).st_dev:
        log("warning: scratch and corpus are on different filesystems")

    b = Bench(args)
    machine = b.machine()
    b.prepare()
    def write_json(complete: bool) -> str:
        machine["loadavg_end"] = open("/proc/loadavg").read().split()[:3]
        text = b.report(machine)
        os.makedirs(os.path.dirname(args.json_out), exist_ok=True)
        doc = {"complete": complete, "machine": machine, "corpus": b.corpus_stats,
               "runs": args.runs, "command": args.command_line, "tools": b.results,
               "errors": b.errors, "warnings": b.warnings, "edit100_files": b.edit100,
               "markdown": text}
        with open(args.json_out + ".tmp", "w") as f:
            json.dump(doc, f, indent=1)
        os.replace(args.json_out + ".tmp", args.json_out)
        return text

    failed = False
    for t in [t for t in TOOLS if t in args.only]:
        try:
            b.run_tool(t)
        except (BenchError, subprocess.TimeoutExpired, OSError) as e:
            failed = True
            b.errors[t] = str(e)
            log(f"!!! {t} FAILED:\n{e}")
            if not args.keep_going:
                break
        finally:
            write_json(False)  # partial results survive an interrupted run
    text = write_json(True)
    print(text)
    log(f"wrote {args.json_out}")
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
