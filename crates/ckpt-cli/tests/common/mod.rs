//! Test support for the end-to-end tests: running the real `ckpt` binary,
//! exact snapshots of a directory (kind, content, mode, mtime, symlink
//! target), a small deterministic RNG, and tree builders.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use serde_json::Value;

pub mod fleet;
pub mod harness;
pub mod loopfs;
#[path = "../../../ckpt-lib/tests/common/walk.rs"]
mod walk;

pub use walk::at;

/// The `ckpt` binary under test.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_ckpt")
}

/// A `ckpt` command run in `cwd`, with an environment that cannot leak into
/// the user's data directory or force a copy strategy.
pub fn command(cwd: &Path, args: &[&OsStr]) -> Command {
    let mut c = Command::new(bin());
    c.current_dir(cwd)
        .args(args)
        .env_remove("CKPT_COPY_STRATEGY")
        .env_remove("CKPT_FAULT")
        .env("HOME", cwd)
        .env("XDG_DATA_HOME", cwd.join(".no-such-xdg"))
        // `ckpt hook` would start a watcher that outlives the test; the
        // tests of that start set the variable themselves.
        .env("CKPT_HOOK_WATCH", "off")
        .stdin(Stdio::null());
    c
}

/// The result of one `ckpt` run.
#[derive(Debug)]
pub struct Run {
    /// What was run, for messages.
    pub what: String,
    /// Exit code (None if killed by a signal).
    pub code: Option<i32>,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

/// Runs `ckpt ARGS` in `cwd` with `stdin` piped in and extra environment
/// variables (`ckpt hook`, which reads an event on stdin).
pub fn run_stdin(cwd: &Path, args: &[&str], stdin: &[u8], env: &[(&str, &str)]) -> Run {
    use std::io::Write;
    let mut c = command(cwd, &args.iter().map(|a| a.as_ref()).collect::<Vec<_>>());
    c.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        c.env(k, v);
    }
    let mut child = c.spawn().unwrap();
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    Run::from_output(
        describe(&args.iter().map(|a| a.as_ref()).collect::<Vec<_>>()),
        child.wait_with_output().unwrap(),
    )
}

/// Runs a prepared command (e.g. [`command`] with extra environment) to
/// completion; `what` names it in messages.
pub fn run_command(mut c: Command, what: String) -> Run {
    let out = c.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    Run::from_output(what, out)
}

impl Run {
    fn from_output(what: String, o: Output) -> Run {
        Run {
            what,
            code: o.status.code(),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }

    /// Asserts exit 0 and returns self.
    #[track_caller]
    pub fn ok(self) -> Run {
        assert_eq!(
            self.code,
            Some(0),
            "`{}` failed:\n{}",
            self.what,
            self.dump()
        );
        self
    }

    /// Asserts a given exit code and returns self.
    #[track_caller]
    pub fn code(self, code: i32) -> Run {
        assert_eq!(
            self.code,
            Some(code),
            "`{}`: expected exit {code}:\n{}",
            self.what,
            self.dump()
        );
        self
    }

    /// Parses stdout as JSON and checks `"schema": 1`.
    #[track_caller]
    pub fn json(&self) -> Value {
        let v: Value = serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "`{}`: stdout is not JSON ({e}):\n{}",
                self.what,
                self.dump()
            )
        });
        assert_eq!(v["schema"], 1, "`{}`: no \"schema\": 1 in {v}", self.what);
        v
    }

    /// Stdout and stderr, for messages.
    pub fn dump(&self) -> String {
        format!(
            "exit: {:?}\n--- stdout\n{}\n--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

fn describe(args: &[&OsStr]) -> String {
    let a: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    format!("ckpt {}", a.join(" "))
}

/// Runs `ckpt ARGS` in `cwd` to completion.
pub fn ckpt_os(cwd: &Path, args: &[&OsStr]) -> Run {
    let o = command(cwd, args).output().expect("spawn ckpt");
    Run::from_output(describe(args), o)
}

/// Runs `ckpt ARGS` (string arguments) in `cwd` to completion.
pub fn ckpt(cwd: &Path, args: &[&str]) -> Run {
    let a: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
    ckpt_os(cwd, &a)
}

/// Starts `ckpt ARGS` in `cwd` with piped output.
pub fn spawn(cwd: &Path, args: &[&str]) -> Child {
    let a: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
    command(cwd, &a)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ckpt")
}

/// Waits for a spawned child and collects its output.
pub fn finish(child: Child, what: &str) -> Run {
    let o = child.wait_with_output().expect("wait for ckpt");
    Run::from_output(what.to_string(), o)
}

/// Where test workspaces go: `$CKPT_TEST_DIR` if set, else `/dev/shm` when
/// it is a writable directory (a tmpfs: thousands of small files and many
/// `syncfs` calls stay fast on a shared machine; SIGKILL semantics do not
/// depend on the disk, the page cache survives the process), else the
/// system temp directory.
pub fn test_base() -> PathBuf {
    if let Some(d) = std::env::var_os("CKPT_TEST_DIR") {
        return PathBuf::from(d);
    }
    let shm = Path::new("/dev/shm");
    let writable = shm.is_dir()
        && tempfile::Builder::new()
            .prefix("ckpt-probe-")
            .tempdir_in(shm)
            .is_ok();
    if writable {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

/// A workspace and its store, in a temporary directory that also has room
/// for `restore --to` targets.
pub struct Ws {
    /// Keeps the temporary directory alive.
    pub tmp: tempfile::TempDir,
    /// The workspace root.
    pub root: PathBuf,
    /// The store directory.
    pub store: PathBuf,
    forks: std::sync::atomic::AtomicU32,
}

impl Ws {
    /// A workspace directory (not yet initialised) in [`test_base`].
    pub fn new() -> Ws {
        Ws::new_in(&test_base())
    }

    /// A workspace directory below `parent` (not yet initialised).
    pub fn new_in(parent: &Path) -> Ws {
        let tmp = tempfile::Builder::new()
            .prefix("ckpt-itest-")
            .tempdir_in(parent)
            .unwrap();
        let root = tmp.path().join("ws");
        std::fs::create_dir(&root).unwrap();
        let store = tmp.path().join("store");
        Ws {
            tmp,
            root,
            store,
            forks: std::sync::atomic::AtomicU32::new(0),
        }
    }

    /// `ckpt init ROOT --store STORE` (absolute paths).
    pub fn init(&self) -> Run {
        let root = self.root.to_str().unwrap();
        let store = self.store.to_str().unwrap();
        ckpt(self.tmp.path(), &["init", root, "--store", store]).ok()
    }

    /// Runs ckpt in the workspace root.
    pub fn run(&self, args: &[&str]) -> Run {
        ckpt(&self.root, args)
    }

    /// Runs ckpt in the workspace root with byte-string arguments.
    pub fn run_os(&self, args: &[&OsStr]) -> Run {
        ckpt_os(&self.root, args)
    }

    /// `ckpt save --json`; returns the id saved (or the unchanged head).
    #[track_caller]
    pub fn save(&self) -> (String, bool) {
        let r = self.run(&["save", "--json"]).ok();
        let v = r.json();
        let id = v["id"]
            .as_str()
            .unwrap_or_else(|| panic!("save gave no id: {v}"))
            .to_string();
        (id, v["saved"].as_bool().unwrap())
    }

    /// A fresh path (not existing) for `restore --to`.
    pub fn fresh_dir(&self) -> PathBuf {
        let n = self
            .forks
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.tmp.path().join(format!("fork{n}"))
    }

    /// Materialises `id` into a new directory and returns its snapshot; the
    /// directory is removed again.
    #[track_caller]
    pub fn materialise(&self, id: &str) -> Snapshot {
        let dest = self.fresh_dir();
        self.run(&["restore", id, "--to", dest.to_str().unwrap()])
            .ok();
        let s = snapshot(&dest);
        remove_tree(&dest);
        s
    }

    /// Asserts that `id` restores (into another directory) to exactly `want`.
    #[track_caller]
    pub fn assert_restores(&self, id: &str, want: &Snapshot) {
        let got = self.materialise(id);
        assert_same(want, &got, &format!("restore {id} --to"));
    }

    /// Files in the store's `tmp/`.
    pub fn store_temps(&self) -> Vec<PathBuf> {
        std::fs::read_dir(self.store.join("tmp"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect()
    }

    /// Number of object files in the store.
    pub fn object_count(&self) -> usize {
        let mut n = 0;
        for shard in std::fs::read_dir(self.store.join("objects")).unwrap() {
            n += std::fs::read_dir(shard.unwrap().path()).unwrap().count();
        }
        n
    }

    /// Ids of all checkpoints in `ckpt log --json`, newest first.
    #[track_caller]
    pub fn log_ids(&self) -> Vec<String> {
        ids(&self.run(&["log", "--json"]).ok().json())
    }

    /// The checkpoint records of `log --json`, oldest first.
    pub fn checkpoints(&self) -> Vec<Value> {
        let mut v = self.run(&["log", "--json"]).ok().json()["checkpoints"]
            .as_array()
            .unwrap()
            .clone();
        v.reverse();
        v
    }
}

/// The checkpoint ids of a `log --json` report, in its order.
pub fn ids(log: &Value) -> Vec<String> {
    log["checkpoints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap().to_string())
        .collect()
}

/// A Python that can `import MODULE`: `$ENV_VAR`, else the venv
/// `scripts/test` makes at `target/VENV`, else `python3`; the error lists what was tried.
pub fn python_with(env_var: &str, venv: &str, module: &str) -> Result<PathBuf, String> {
    let mut candidates = Vec::new();
    if let Some(p) = std::env::var_os(env_var) {
        candidates.push(PathBuf::from(p));
    }
    candidates.push(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../target")
            .join(venv)
            .join("bin/python"),
    );
    candidates.push(PathBuf::from("python3"));
    for c in &candidates {
        let ok = Command::new(c)
            .args(["-c", &format!("import {module}")])
            .output()
            .is_ok_and(|o| o.status.success());
        if ok {
            return Ok(c.clone());
        }
    }
    Err(format!(
        "no Python with `{module}` (tried {candidates:?}); `scripts/test` installs it into target/{venv}"
    ))
}

impl Default for Ws {
    fn default() -> Self {
        Ws::new()
    }
}

/// Removes a directory tree even if some directories are read-only.
pub fn remove_tree(p: &Path) {
    if std::fs::remove_dir_all(p).is_err() {
        let _ = Command::new("chmod").arg("-R").arg("u+rwx").arg(p).status();
        std::fs::remove_dir_all(p).unwrap();
    }
}

/// What a path is, exactly.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum What {
    /// A regular file and its bytes.
    File(Vec<u8>),
    /// A directory.
    Dir,
    /// A symlink and its target.
    Symlink(Vec<u8>),
}

/// Kind + content, permission bits and mtime of one path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snap {
    /// Kind and content.
    pub what: What,
    /// Permission bits (0 for symlinks).
    pub mode: u32,
    /// mtime in ns.
    pub mtime_ns: i64,
}

/// An exact picture of a directory below its root (root metadata and the
/// workspace marker `.ckpt` excluded).
pub type Snapshot = BTreeMap<Vec<u8>, Snap>;

/// Takes an exact snapshot of `root`.
pub fn snapshot(root: &Path) -> Snapshot {
    walk::walk(root)
        .into_iter()
        .map(|(rel, m)| {
            let full = at(root, &rel);
            let is_link = m.file_type().is_symlink();
            let what = if is_link {
                What::Symlink(
                    std::fs::read_link(&full)
                        .unwrap()
                        .as_os_str()
                        .as_bytes()
                        .to_vec(),
                )
            } else if m.is_dir() {
                What::Dir
            } else {
                What::File(
                    std::fs::read(&full).unwrap_or_else(|e| panic!("read {}: {e}", full.display())),
                )
            };
            let snap = Snap {
                what,
                mode: if is_link { 0 } else { m.mode() & 0o7777 },
                mtime_ns: m.mtime() * 1_000_000_000 + m.mtime_nsec(),
            };
            (rel, snap)
        })
        .collect()
}

/// Panics with the first difference between two snapshots.
#[track_caller]
pub fn assert_same(want: &Snapshot, got: &Snapshot, what: &str) {
    if want == got {
        return;
    }
    let keys: BTreeSet<&Vec<u8>> = want.keys().chain(got.keys()).collect();
    let mut diffs = Vec::new();
    for k in keys {
        if want.get(k) != got.get(k) {
            let brief = |s: Option<&Snap>| match s {
                None => "absent".to_string(),
                Some(Snap {
                    what: What::File(c),
                    mode,
                    mtime_ns,
                }) => {
                    format!(
                        "file {} bytes (blake-ish {:x}) mode {mode:o} mtime {mtime_ns}",
                        c.len(),
                        fnv(c)
                    )
                }
                Some(s) => format!("{s:?}"),
            };
            diffs.push(format!(
                "  {:?}:\n    want {}\n    got  {}",
                String::from_utf8_lossy(k),
                brief(want.get(k)),
                brief(got.get(k))
            ));
        }
    }
    let n = diffs.len();
    diffs.truncate(10);
    panic!(
        "{what}: {n} paths differ (want {} entries, got {}):\n{}",
        want.len(),
        got.len(),
        diffs.join("\n")
    );
}

fn fnv(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf29ce484222325u64, |h, &x| {
        (h ^ x as u64).wrapping_mul(0x100000001b3)
    })
}

/// Every `.ckpt-tmp.*` entry below `root`.
pub fn workspace_temps(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        for e in rd {
            let e = e.unwrap();
            let p = e.path();
            if e.file_name().as_bytes().starts_with(b".ckpt-tmp.") {
                out.push(p.clone());
            }
            if e.file_type().unwrap().is_dir() {
                walk(&p, out);
            }
        }
    }
    walk(root, &mut out);
    out
}

/// A small deterministic PRNG (xorshift64*), so failures can be replayed
/// from the printed seed.
pub struct Rng(u64);

impl Rng {
    /// From a seed; `CKPT_TEST_SEED` overrides it, and it is printed.
    pub fn new(name: &str, default_seed: u64) -> Rng {
        let seed = std::env::var("CKPT_TEST_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(default_seed);
        eprintln!("{name}: seed {seed} (set CKPT_TEST_SEED to replay)");
        Rng(seed.wrapping_mul(0x9E3779B97F4A7C15) | 1)
    }

    /// A seed that differs per run (the time), for varying kill points.
    pub fn time_seed() -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
    }

    /// Next value.
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545F4914F6CDD1D)
    }

    /// Uniform in 0..n (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// `len` random bytes.
    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        let mut v = Vec::with_capacity(len + 8);
        while v.len() < len {
            v.extend_from_slice(&self.next().to_le_bytes());
        }
        v.truncate(len);
        v
    }

    /// Printable text of about `len` bytes.
    pub fn text(&mut self, len: usize) -> Vec<u8> {
        let words = [
            "alpha", "beta", "gamma", "delta", "const", "fn", "let", "return", "{", "}", ";", "\n",
        ];
        let mut v = Vec::new();
        while v.len() < len {
            v.extend_from_slice(words[self.below(words.len() as u64) as usize].as_bytes());
            v.push(b' ');
        }
        v
    }
}

/// Writes a file, creating parents.
pub fn write(root: &Path, rel: &str, content: &[u8]) {
    let p = root.join(rel);
    if let Some(d) = p.parent() {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(&p, content).unwrap();
}

/// Sets permission bits.
pub fn chmod(p: &Path, mode: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Fills `root/dir` with `n` small files of random content (10–400 bytes).
pub fn fill_dir(root: &Path, dir: &str, n: usize, rng: &mut Rng) {
    let d = root.join(dir);
    std::fs::create_dir_all(&d).unwrap();
    for i in 0..n {
        let len = 10 + rng.below(390) as usize;
        let mut content = format!("{dir}/f{i:04}\n").into_bytes();
        content.extend(rng.text(len));
        std::fs::write(d.join(format!("f{i:04}.txt")), content).unwrap();
    }
}

/// A workspace with `dirs` × `per_dir` small files plus some variety: two
/// files above 64 KiB, a symlink, an empty directory, an executable, and
/// names with a newline and with non-UTF-8 bytes.
pub fn build_tree(root: &Path, dirs: usize, per_dir: usize, rng: &mut Rng) {
    for d in 0..dirs {
        fill_dir(root, &format!("d{d:02}"), per_dir, rng);
    }
    write(root, "big/blob1.bin", &rng.bytes(200_000));
    write(root, "big/blob2.bin", &rng.bytes(90_000));
    std::os::unix::fs::symlink("big/blob1.bin", root.join("link-to-blob")).unwrap();
    std::fs::create_dir_all(root.join("empty/inner")).unwrap();
    write(root, "bin/run.sh", b"#!/bin/sh\necho hi\n");
    chmod(&root.join("bin/run.sh"), 0o755);
    std::fs::write(
        root.join(OsStr::from_bytes(b"new\nline")),
        b"newline name\n",
    )
    .unwrap();
    std::fs::write(
        root.join(OsStr::from_bytes(b"latin1-\xe9t\xe9")),
        b"not utf-8 name\n",
    )
    .unwrap();
}

/// `OsString` from bytes.
pub fn os(b: &[u8]) -> OsString {
    OsStr::from_bytes(b).to_os_string()
}

/// Names allowed at the top of a store directory (docs/FORMAT.md). Anything
/// else there is a leftover temporary file.
pub const STORE_NAMES: &[&str] = &[
    "CKPT_STORE",
    "lock",
    "catalog.redb",
    "index",
    "index.delta",
    "objects",
    "tmp",
    "state.redb",
    "state.redb.lock",
    "reserve",
    "lowers",
];

/// Leftover temporaries anywhere in a store: unknown names at its top, and
/// anything in `tmp/`.
pub fn store_leftovers(store: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(store)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| !STORE_NAMES.contains(&e.file_name().to_string_lossy().as_ref()))
        .map(|e| e.path())
        .collect();
    out.extend(
        std::fs::read_dir(store.join("tmp"))
            .unwrap()
            .map(|e| e.unwrap().path()),
    );
    out
}

/// `ckpt verify --store --json` must report no problem.
#[track_caller]
pub fn assert_store_verifies(ws: &Ws, ctx: &str) {
    let r = ws.run(&["verify", "--store", "--json"]);
    assert_eq!(
        r.code,
        Some(0),
        "{ctx}: verify --store is not clean:\n{}",
        r.dump()
    );
    let v = r.json();
    assert_eq!(v["ok"], true, "{ctx}: verify --store: {v}");
}

/// Runs `ckpt ARGS` in `cwd` with the crash point `fault` (`NAME[:N]`) armed.
pub fn ckpt_with_fault(cwd: &Path, args: &[&str], fault: &str) -> Run {
    let a: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
    let o = command(cwd, &a)
        .env("CKPT_FAULT", fault)
        .output()
        .expect("spawn ckpt");
    Run::from_output(format!("CKPT_FAULT={fault} {}", describe(&a)), o)
}

/// Reads an agent-state key (None if absent).
#[track_caller]
pub fn state_get(ws: &Ws, key: &str) -> Option<String> {
    let r = ws.run(&["state", "get", key]);
    match r.code {
        Some(0) => Some(r.stdout.clone()),
        Some(8) => None,
        _ => panic!("state get {key}:\n{}", r.dump()),
    }
}

/// Length of one [`line`].
pub const LINE: usize = 64;

/// One fixed-length, self-checking line for `rel`: a file is a whole
/// version exactly when it is a sequence of such lines.
pub fn line(rel: &str, gen: u64) -> Vec<u8> {
    let head = format!("{rel:>30}|{gen:>12}|");
    let sum = head.bytes().fold(0xcbf29ce484222325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100000001b3)
    });
    let l = format!("{head}{sum:016x}   \n");
    assert_eq!(l.len(), LINE);
    l.into_bytes()
}

/// Checks that `content` is whole lines written for `rel` (never torn).
pub fn check_lines(rel: &str, content: &[u8]) -> Result<(), String> {
    if !content.len().is_multiple_of(LINE) {
        return Err(format!(
            "{rel}: {} bytes, not whole lines (torn)",
            content.len()
        ));
    }
    for chunk in content.chunks(LINE) {
        let gen: u64 = String::from_utf8_lossy(&chunk[31..43])
            .trim()
            .parse()
            .map_err(|_| format!("{rel}: bad line {chunk:?}"))?;
        if chunk != line(rel, gen).as_slice() {
            return Err(format!(
                "{rel}: damaged line {:?}",
                String::from_utf8_lossy(chunk)
            ));
        }
    }
    Ok(())
}

/// `CKPT_SOAK=N` multiplies the iterations of the long reliability tests.
pub fn soak() -> usize {
    std::env::var("CKPT_SOAK")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1usize)
        .max(1)
}

/// Every checkpoint in `ids` is in `log`, and each file it holds is a version
/// the writer really wrote ([`check_lines`]): no lost and no torn checkpoint.
pub fn assert_untorn(ws: &Ws, ids: &[String], log: &[String]) {
    for id in ids {
        assert!(
            log.contains(id),
            "acknowledged checkpoint {id} missing from the log"
        );
        let snap = ws.materialise(id);
        for (rel, s) in &snap {
            if let What::File(c) = &s.what {
                let rel = String::from_utf8(rel.clone()).unwrap();
                if let Err(e) = check_lines(&rel, c) {
                    panic!("checkpoint {id}: {e}");
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Skipped tests.
//
// libtest has no "skipped" outcome decided at run time, and it hides what a
// passing test prints with `println!`/`eprintln!`. So a test that cannot run
// calls [`skip`] or [`skip_env`], which write `SKIPPED <test>: <why>`
// straight to file descriptor 2 (not captured, so `cargo test` shows it) and,
// when the test binary exits, repeat every skip of that binary below its
// `test result:` line (`scripts/test` lists them all at the end). Under
// `CI=true`, [`skip`] panics instead: CI (`.ci/run`, which runs
// `scripts/test` as root) provides those prerequisites, so missing one is a
// failure.

/// Skips recorded in this test binary, printed when it exits.
static SKIPS: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
static SKIP_SUMMARY: std::sync::Once = std::sync::Once::new();

/// Writes all of `s` to stderr without going through libtest's capture.
fn raw_stderr(s: &str) {
    let mut b = s.as_bytes();
    while !b.is_empty() {
        // SAFETY: a valid buffer and length; fd 2 is stderr.
        let n = unsafe { libc::write(2, b.as_ptr().cast(), b.len()) };
        if n <= 0 {
            return;
        }
        b = &b[n as usize..];
    }
}

extern "C" fn print_skip_summary() {
    let skips = match SKIPS.lock() {
        Ok(s) => s,
        Err(p) => p.into_inner(),
    };
    if skips.is_empty() {
        return;
    }
    let mut out = format!(
        "\nSKIPPED: {} check(s) in this test binary did not run (their tests passed without them):\n",
        skips.len()
    );
    for s in skips.iter() {
        out.push_str("  ");
        out.push_str(s);
        out.push('\n');
    }
    out.push('\n');
    raw_stderr(&out);
}

/// Whether a skip of a prerequisite CI provides must fail: `CI` is `true`.
pub fn skip_fails(ci: Option<&str>) -> bool {
    ci == Some("true")
}

fn record_skip(why: &str, loc: &std::panic::Location<'_>) {
    let test = std::thread::current().name().unwrap_or("?").to_string();
    let line = format!("{test} ({}:{}): {why}", loc.file(), loc.line());
    raw_stderr(&format!("SKIPPED {line}\n"));
    match SKIPS.lock() {
        Ok(mut s) => s.push(line),
        Err(p) => p.into_inner().push(line),
    }
    SKIP_SUMMARY.call_once(|| {
        // SAFETY: registers a plain extern "C" function with no arguments.
        unsafe { libc::atexit(print_skip_summary) };
    });
}

/// The calling test (or a part of it) cannot run because a prerequisite
/// that `.ci/run` provides is missing: a package it installs (xfsprogs,
/// btrfs-progs, fuse3, rsync, e2fsprogs), a venv `scripts/test` makes, or
/// root. Under
/// `CI=true` this panics; otherwise it reports the skip (see above) and the
/// caller returns.
#[track_caller]
pub fn skip(why: &str) {
    if skip_fails(std::env::var("CI").ok().as_deref()) {
        panic!("CI=true but this test cannot run: {why} (.ci/run should provide it)");
    }
    record_skip(why, std::panic::Location::caller());
}

/// The calling test (or a part of it) cannot run because of the machine,
/// not a missing package (a filesystem without user xattrs, a container
/// that refuses a mount): reported like [`skip`], never a failure.
#[track_caller]
pub fn skip_env(why: &str) {
    record_skip(why, std::panic::Location::caller());
}

/// Whether the tests run as root.
pub fn is_root() -> bool {
    // SAFETY: no arguments, cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// A skip for something only root may do: [`skip`] ("needs root") when not
/// root (CI runs as root), else [`skip_env`] (root, but the machine refused).
#[track_caller]
pub fn skip_needs_root(why: &str) {
    if is_root() {
        skip_env(why);
    } else {
        skip(&format!("{why} (needs root)"));
    }
}

/// A tmpfs of a given size mounted on a fresh directory, unmounted on drop
/// (root only: [`Tmpfs::mount`] is `None` when the mount is refused).
pub struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    /// Mounts a tmpfs of `size` (`5m`); `None` if that is not allowed.
    pub fn mount(size: &str) -> Option<Tmpfs> {
        let dir = tempfile::Builder::new()
            .prefix("ckpt-tmpfs-")
            .tempdir()
            .unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "ckpt-test"])
            .arg(dir.path())
            .status()
            .is_ok_and(|s| s.success());
        ok.then_some(Tmpfs { dir })
    }

    /// [`Tmpfs::mount`], or a reported skip when the mount is refused
    /// ([`skip_needs_root`]: a failure under `CI=true` as root).
    pub fn mount_or_skip(size: &str) -> Option<Tmpfs> {
        let fs = Tmpfs::mount(size);
        if fs.is_none() {
            skip_needs_root("cannot mount a tmpfs here");
        }
        fs
    }

    /// The mount point.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Remounts it with `opts` (`ro`, `rw`).
    pub fn remount(&self, opts: &str) {
        let st = Command::new("mount")
            .args(["-o", &format!("remount,{opts}")])
            .arg(self.path())
            .status()
            .unwrap();
        assert!(st.success(), "remount {opts} failed");
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}

/// Free bytes on the filesystem holding `p` (for an unprivileged user).
pub fn free_bytes(p: &Path) -> u64 {
    let c = std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap();
    // SAFETY: zeroed statvfs is a valid out-parameter.
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: valid path and out-parameter.
    assert_eq!(unsafe { libc::statvfs(c.as_ptr(), &mut s) }, 0);
    s.f_bavail * s.f_frsize
}
