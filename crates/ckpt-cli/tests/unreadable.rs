//! Issue 19 item 2: one unreadable entry (a file or directory the user
//! running ckpt may not read, e.g. after `chmod 000`) must not block `save`,
//! `status`, `hook` or `restore`. What a checkpoint records of it is
//! `crates/ckpt-lib/src/workspace/scan.rs`'s rule (docs/FORMAT.md): the
//! content the stat index proves unchanged, with the current mode; else the
//! entry is left out and reported.
//!
//! Every `ckpt` runs as an unprivileged user, for whom `chmod 000` really
//! means unreadable: `nobody` when the tests run as root (as in CI; the
//! workspace, store and HOME are handed to it), else the current user. The
//! test process itself only writes, chmods and inspects files.

mod common;

use std::ffi::OsStr;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use common::*;
use serde_json::Value;

/// uid and gid of `nobody`.
const NOBODY: u32 = 65534;

/// A workspace whose files and store belong to the user `ckpt` runs as.
struct Unpriv {
    ws: Ws,
    /// Files written so far.
    writes: std::sync::atomic::AtomicU64,
}

impl Unpriv {
    /// A workspace (not initialised) holding `files` (path, content).
    fn with(files: &[(&str, &[u8])]) -> Unpriv {
        let u = Unpriv {
            ws: Ws::new(),
            writes: Default::default(),
        };
        for (rel, content) in files {
            u.write(rel, content);
        }
        u
    }

    /// Gives `p` to the unprivileged user (when running as root).
    fn own(&self, p: &Path) {
        if is_root() {
            std::os::unix::fs::chown(p, Some(NOBODY), Some(NOBODY)).unwrap();
        }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.ws.root.join(rel)
    }

    /// Writes a file (and its parents) owned by the unprivileged user. Its
    /// mtime is set well in the past (a new one each time), so no save
    /// finds it racy (too recent to vouch for its content; that case is
    /// `left out`, and would make the tests depend on timing).
    fn write(&self, rel: &str, content: &[u8]) {
        write(&self.ws.root, rel, content);
        let n = self
            .writes
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let t = SystemTime::now() - Duration::from_secs(100_000) + Duration::from_secs(n);
        let f = std::fs::File::options()
            .write(true)
            .open(self.path(rel))
            .unwrap();
        f.set_modified(t).unwrap();
        let mut p = self.path(rel);
        while p != self.ws.root {
            self.own(&p);
            p.pop();
        }
    }

    /// `ckpt init` as the unprivileged user.
    fn init(&self) {
        chmod(self.ws.tmp.path(), 0o755);
        self.own(self.ws.tmp.path());
        self.own(&self.ws.root);
        let (root, store) = (
            self.ws.root.to_str().unwrap(),
            self.ws.store.to_str().unwrap(),
        );
        self.run(&["init", root, "--store", store]).ok();
    }

    /// Runs `ckpt ARGS` in the workspace as the unprivileged user.
    fn run(&self, args: &[&str]) -> Run {
        self.run_env(args, &[])
    }

    /// [`Self::run`] with extra environment variables.
    fn run_env(&self, args: &[&str], env: &[(&str, &str)]) -> Run {
        let a: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
        let mut c = command(&self.ws.root, &a);
        c.envs(env.iter().copied());
        if is_root() {
            c.uid(NOBODY).gid(NOBODY);
        }
        let o = c.output().expect("spawn ckpt");
        Run {
            what: format!("(unprivileged) ckpt {}", args.join(" ")),
            code: o.status.code(),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }

    /// `ckpt save --json`: the report.
    #[track_caller]
    fn save(&self) -> Value {
        self.run(&["save", "--json"]).ok().json()
    }

    /// `restore ID --to` a fresh directory, as the unprivileged user: the
    /// snapshot of what it wrote.
    #[track_caller]
    fn materialise(&self, id: &str) -> Snapshot {
        let dest = self.ws.fresh_dir();
        self.run(&["restore", id, "--to", dest.to_str().unwrap()])
            .ok();
        let s = snapshot(&dest);
        remove_tree(&dest);
        s
    }
}

impl Drop for Unpriv {
    fn drop(&mut self) {
        // Directories left at mode 000 would stop the temp dir's removal.
        remove_tree(self.ws.tmp.path());
    }
}

/// A file's content and permission bits, read as the test process.
fn file(p: &Path) -> (Vec<u8>, u32) {
    let m = std::fs::symlink_metadata(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    (std::fs::read(p).unwrap(), m.mode() & 0o7777)
}

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().mode() & 0o7777
}

/// The `unreadable` list of a report, as `(path, kind, content)`.
fn unreadable(v: &Value) -> Vec<(String, String, String)> {
    v["unreadable"]
        .as_array()
        .unwrap_or_else(|| panic!("no unreadable list in {v}"))
        .iter()
        .map(|u| {
            let s = |k: &str| u[k].as_str().unwrap().to_string();
            (s("path"), s("kind"), s("content"))
        })
        .collect()
}

fn entry(path: &str, kind: &str, content: &str) -> (String, String, String) {
    (path.into(), kind.into(), content.into())
}

/// The paths a checkpoint report lists as skipped because unreadable.
fn skipped_unreadable(v: &Value) -> Vec<String> {
    v["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["kind"] == "unreadable")
        .map(|s| s["path"].as_str().unwrap().to_string())
        .collect()
}

fn id(v: &Value) -> String {
    v["id"]
        .as_str()
        .unwrap_or_else(|| panic!("no id in {v}"))
        .to_string()
}

/// The sequence: after `chmod 000 ok.txt`, save, status, hook,
/// `restore HEAD` and `restore --no-save HEAD -- ok.txt` all work; the
/// checkpoint holds ok.txt's content (unchanged since read) with mode 000;
/// restoring a checkpoint from before the chmod brings back content and 644.
#[test]
fn chmod_000_file_is_saved_with_its_mode_and_undone_by_restore() {
    let u = Unpriv::with(&[("ok.txt", b"hello\n"), ("other.txt", b"one\n")]);
    chmod(&u.path("ok.txt"), 0o644);
    u.init();
    let v1 = id(&u.save());
    chmod(&u.path("ok.txt"), 0o000);

    let st = u.run(&["status", "--json"]).ok().json();
    assert_eq!(
        unreadable(&st),
        [entry("ok.txt", "file", "unchanged")],
        "{st}"
    );
    let changes = st["changes"].as_array().unwrap();
    assert_eq!(changes.len(), 1, "{st}");
    assert_eq!(changes[0]["path"], "ok.txt");
    assert_eq!(changes[0]["status"], "mode_changed", "{st}");
    assert_eq!(changes[0]["new"]["mode"], "0", "{st}");

    let saved = u.save();
    assert_eq!(saved["saved"], true, "{saved}");
    assert_eq!(unreadable(&saved), [entry("ok.txt", "file", "unchanged")]);
    assert!(skipped_unreadable(&saved).is_empty(), "{saved}");
    let v2 = id(&saved);
    let snap = u.materialise(&v2);
    assert_eq!(
        snap[&b"ok.txt".to_vec()].what,
        What::File(b"hello\n".to_vec()),
        "{v2} keeps the content"
    );
    assert_eq!(
        snap[&b"ok.txt".to_vec()].mode,
        0o000,
        "{v2} records mode 000"
    );

    // The text form warns, naming the path and the .ckptignore way out.
    let r = u.run(&["save"]).ok();
    assert!(
        r.stderr.contains("ok.txt") && r.stderr.contains(".ckptignore"),
        "{}",
        r.dump()
    );
    let st = u.run(&["status", "--json"]).ok().json();
    assert_eq!(st["clean"], true, "{st}");

    // The hook checkpoints everything else and lists what it could not read.
    u.write("other.txt", b"two\n");
    let env = [("CKPT_EVENT", "PostToolUse"), ("CKPT_TOOL", "Bash")];
    let h = u.run_env(&["hook", "--json"], &env).ok().json();
    assert_eq!(h["saved"], true, "{h}");
    assert_eq!(unreadable(&h), [entry("ok.txt", "file", "unchanged")]);
    let r = u.run_env(&["hook"], &env).ok();
    assert!(r.stderr.contains("ok.txt"), "{}", r.dump());
    let st = u.run(&["status", "--json"]).ok().json();
    assert_eq!(st["clean"], true, "the hook saved other.txt: {st}");

    u.run(&["restore", "HEAD"]).ok();
    assert_eq!(mode(&u.path("ok.txt")), 0o000, "HEAD has mode 000");

    u.run(&["restore", &v1]).ok();
    assert_eq!(file(&u.path("ok.txt")), (b"hello\n".to_vec(), 0o644));
    assert_eq!(file(&u.path("other.txt")), (b"one\n".to_vec(), 0o644));

    for args in [
        &["restore", "--no-save", "HEAD", "--", "ok.txt"][..],
        &["restore", "HEAD"][..],
        &["restore", &v1, "--", "ok.txt"][..],
    ] {
        chmod(&u.path("ok.txt"), 0o000);
        u.run(args).ok();
        assert_eq!(
            file(&u.path("ok.txt")),
            (b"hello\n".to_vec(), 0o644),
            "after {args:?}"
        );
        let st = u.run(&["status", "--json"]).ok().json();
        assert!(unreadable(&st).is_empty(), "after {args:?}: {st}");
    }
}

/// A file changed after it was last read and then made unreadable cannot be
/// vouched for: it is left out (reported, skipped), and a restore of a
/// checkpoint without it leaves it alone, while one with it replaces it.
#[test]
fn unreadable_file_changed_since_read_is_left_out_and_left_alone() {
    let u = Unpriv::with(&[("ok.txt", b"hello\n")]);
    chmod(&u.path("ok.txt"), 0o644);
    u.init();
    let v1 = id(&u.save());
    u.write("ok.txt", b"changed, longer\n");
    u.write("new.txt", b"never read\n");
    chmod(&u.path("ok.txt"), 0o000);
    chmod(&u.path("new.txt"), 0o000);

    let saved = u.save();
    assert_eq!(
        unreadable(&saved),
        [
            entry("new.txt", "file", "unknown"),
            entry("ok.txt", "file", "unknown")
        ],
        "{saved}"
    );
    let mut skipped = skipped_unreadable(&saved);
    skipped.sort();
    assert_eq!(skipped, ["new.txt", "ok.txt"], "{saved}");
    let v2 = id(&saved);
    let snap = u.materialise(&v2);
    assert!(
        snap.is_empty(),
        "{v2} holds nothing it could not read: {snap:?}"
    );
    let r = u.run(&["status"]).ok();
    assert!(r.stdout.contains("nothing changed"), "{}", r.dump());
    assert!(
        r.stderr.contains("new.txt") && r.stderr.contains("left out"),
        "{}",
        r.dump()
    );

    u.run(&["restore", &v1]).ok();
    assert_eq!(file(&u.path("ok.txt")), (b"hello\n".to_vec(), 0o644));
    assert_eq!(
        file(&u.path("new.txt")),
        (b"never read\n".to_vec(), 0o000),
        "never captured, so left alone"
    );
}

/// An unreadable directory: save, status and hook leave it out and list it;
/// `restore HEAD` leaves it alone; restoring a checkpoint that has it gives
/// it back its mode and content (entries never captured stay).
#[test]
fn chmod_000_directory_is_left_out_and_restored() {
    let u = Unpriv::with(&[
        ("d/a.txt", b"a\n"),
        ("d/e/b.txt", b"b\n"),
        ("top.txt", b"1\n"),
    ]);
    chmod(&u.path("d"), 0o755);
    u.init();
    let v1 = id(&u.save());
    let s1 = snapshot(&u.ws.root);

    for m in [0o000, 0o600, 0o300] {
        chmod(&u.path("d"), m);
        let st = u.run(&["status", "--json"]).ok().json();
        assert_eq!(
            unreadable(&st),
            [entry("d", "dir", "unknown")],
            "mode {m:o}: {st}"
        );
    }
    chmod(&u.path("d"), 0o000);
    u.write("top.txt", b"2\n");
    let saved = u.save();
    assert_eq!(saved["saved"], true, "{saved}");
    assert_eq!(skipped_unreadable(&saved), ["d"], "{saved}");
    let snap = u.materialise(&id(&saved));
    assert_eq!(
        snap.keys().cloned().collect::<Vec<_>>(),
        [b"top.txt".to_vec()],
        "only what could be read"
    );

    u.write("top.txt", b"3\n");
    let h = u
        .run_env(&["hook", "--json"], &[("CKPT_EVENT", "Stop")])
        .ok()
        .json();
    assert_eq!(h["saved"], true, "{h}");
    assert_eq!(unreadable(&h), [entry("d", "dir", "unknown")], "{h}");

    u.run(&["restore", "HEAD"]).ok();
    assert_eq!(mode(&u.path("d")), 0o000, "HEAD has no d: left alone");

    u.run(&["restore", "--no-save", &v1, "--", "d"]).ok();
    chmod(&u.path("top.txt"), 0o644);
    u.write("top.txt", b"1\n");
    let mut now = snapshot(&u.ws.root);
    // top.txt was rewritten by the test: compare it by content and mode.
    now.get_mut(b"top.txt".as_slice()).unwrap().mtime_ns = s1[&b"top.txt".to_vec()].mtime_ns;
    assert_same(&s1, &now, "restore --no-save v1 -- d");

    // A file added inside before the chmod was never captured: it stays.
    u.write("d/extra.txt", b"extra\n");
    chmod(&u.path("d"), 0o000);
    chmod(&u.path("d/e"), 0o000);
    u.run(&["restore", &v1]).ok();
    let mut want = s1.clone();
    let extra = snapshot(&u.ws.root)[&b"d/extra.txt".to_vec()].clone();
    want.insert(b"d/extra.txt".to_vec(), extra);
    let mut now = snapshot(&u.ws.root);
    now.get_mut(b"d".as_slice()).unwrap().mtime_ns = want[&b"d".to_vec()].mtime_ns;
    assert_same(&want, &now, "restore v1 over an unreadable d");
    assert_eq!(mode(&u.path("d")), 0o755);
}

/// `verify` re-reads every file, so it refuses to vouch for one it may not
/// read: it fails naming it, instead of calling it deleted.
#[test]
fn verify_names_the_file_it_cannot_read() {
    let u = Unpriv::with(&[("ok.txt", b"hello\n")]);
    u.init();
    u.save();
    chmod(&u.path("ok.txt"), 0o000);
    u.save();
    let r = u.run(&["verify"]);
    assert_eq!(r.code, Some(1), "{}", r.dump());
    assert!(
        r.stderr.contains("ok.txt")
            && r.stderr.contains("ermission denied")
            && r.stderr.contains(".ckptignore"),
        "{}",
        r.dump()
    );
}

/// With a watcher running, saves through it and status list unreadable
/// entries too, every time (not only on the scan that first met them).
#[test]
fn watcher_saves_and_reports_unreadable_entries() {
    let u = Unpriv::with(&[("ok.txt", b"hello\n"), ("d/a.txt", b"a\n")]);
    u.init();
    u.save();
    let v = u.run(&["watch", "--daemon", "--json"]).ok().json();
    assert_eq!(v["running"], true, "{v}");
    struct Stop<'a>(&'a Unpriv);
    impl Drop for Stop<'_> {
        fn drop(&mut self) {
            let _ = self.0.run(&["watch", "--stop"]);
        }
    }
    let _stop = Stop(&u);
    chmod(&u.path("ok.txt"), 0o000);
    chmod(&u.path("d"), 0o000);
    let want = [
        entry("d", "dir", "unknown"),
        entry("ok.txt", "file", "unchanged"),
    ];
    for round in 0..2 {
        u.write("x.txt", format!("{round}\n").as_bytes());
        let r = u.run(&["-v", "save", "--json"]).ok();
        let saved = r.json();
        assert_eq!(
            unreadable(&saved),
            want,
            "round {round}: {saved}\n{}",
            r.stderr
        );
        let st = u.run(&["status", "--json"]).ok().json();
        assert_eq!(unreadable(&st), want, "round {round}: {st}");
        assert_eq!(st["clean"], true, "round {round}: {st}");
        assert!(
            r.stderr.contains("saved by the watcher"),
            "round {round}: {}",
            r.stderr
        );
        // After the first, the watcher lists only what may have changed,
        // yet still reports both.
        assert!(round == 0 || r.stderr.contains("partial"), "{}", r.stderr);
    }
    let r = u.run(&["--full-scan", "save", "--json"]).ok();
    assert_eq!(
        r.json()["saved"],
        false,
        "the watcher's saves missed something"
    );
}

/// Random text of 10 to 50 bytes.
fn text(rng: &mut Rng) -> Vec<u8> {
    let len = 10 + rng.below(40) as usize;
    rng.text(len)
}

/// One modelled file: what is on disk, and what the stat index last read.
#[derive(Clone, Debug)]
struct Model {
    content: Vec<u8>,
    readable: bool,
    /// mtime (s) set by the test: every write gets a new one in the past,
    /// so no entry is ever racy.
    mtime: u64,
    /// Content and mtime when a save last read it (the index entry that
    /// can vouch for it); none once a save left it out.
    read: Option<(Vec<u8>, u64)>,
}

impl Model {
    /// What a save records: `Some((content, readable))` or left out; and
    /// what the index then holds.
    fn save(&mut self) -> Option<Vec<u8>> {
        if self.readable {
            self.read = Some((self.content.clone(), self.mtime));
        } else if !self
            .read
            .as_ref()
            .is_some_and(|(c, t)| c.len() == self.content.len() && *t == self.mtime)
        {
            self.read = None;
        }
        self.read.as_ref().map(|(c, _)| c.clone())
    }
}

/// Random writes, chmods (000/644) and saves of a few files, against a
/// model of the rule: after each save, the checkpoint holds exactly the
/// readable files, plus the unreadable ones whose size and mtime are as last
/// read (with that content and mode 000), and the report lists the
/// unreadable ones as `unchanged` or `unknown`. Finally a restore of a random
/// earlier checkpoint puts back exactly what it holds and leaves alone the
/// unreadable files it could not vouch for.
#[test]
fn random_chmods_and_writes_match_the_model() {
    let names = ["a.txt", "b.txt", "s/c.txt"];
    let seeds = std::env::var("CKPT_TEST_SEED")
        .ok()
        .map_or(vec![1, 2, 3], |_| vec![0]);
    for seed in seeds {
        let mut rng = Rng::new("random_chmods_and_writes_match_the_model", seed);
        let u = Unpriv::with(&[]);
        let t0 = SystemTime::now() - Duration::from_secs(1_000_000);
        let mut clock = 0u64;
        let mut files: Vec<Model> = Vec::new();
        let set = |u: &Unpriv, rel: &str, m: &Model| {
            let p = u.path(rel);
            if p.exists() {
                chmod(&p, 0o644);
            }
            u.write(rel, &m.content);
            let f = std::fs::File::options().write(true).open(&p).unwrap();
            f.set_modified(t0 + Duration::from_secs(m.mtime)).unwrap();
            chmod(&p, if m.readable { 0o644 } else { 0o000 });
        };
        for name in names {
            clock += 1;
            let m = Model {
                content: text(&mut rng),
                readable: true,
                mtime: clock,
                read: None,
            };
            set(&u, name, &m);
            files.push(m);
        }
        chmod(&u.path("s"), 0o755);
        u.init();
        let mut saved: Vec<(String, Vec<Option<Vec<u8>>>)> = Vec::new();
        for step in 0..24 {
            let i = rng.below(names.len() as u64) as usize;
            match rng.below(4) {
                0 => {
                    clock += 1;
                    files[i].mtime = clock;
                    files[i].content = text(&mut rng);
                    set(&u, names[i], &files[i]);
                }
                1 => {
                    files[i].readable = !files[i].readable;
                    let m = if files[i].readable { 0o644 } else { 0o000 };
                    chmod(&u.path(names[i]), m);
                }
                _ => {
                    let v = u.run(&["save", "--json", "--allow-empty"]).ok().json();
                    let want: Vec<Option<Vec<u8>>> = files.iter_mut().map(Model::save).collect();
                    let listed: Vec<_> = names
                        .iter()
                        .zip(&files)
                        .zip(&want)
                        .filter(|((_, m), _)| !m.readable)
                        .map(|((n, _), w)| {
                            entry(n, "file", if w.is_some() { "unchanged" } else { "unknown" })
                        })
                        .collect();
                    assert_eq!(unreadable(&v), listed, "seed {seed} step {step}: {v}");
                    let id = id(&v);
                    let snap = u.materialise(&id);
                    for ((n, m), w) in names.iter().zip(&files).zip(&want) {
                        let got = snap.get(n.as_bytes());
                        match w {
                            None => assert!(got.is_none(), "seed {seed} step {step}: {n} in {id}"),
                            Some(c) => {
                                let got = got.unwrap_or_else(|| {
                                    panic!("seed {seed} step {step}: {n} missing from {id}")
                                });
                                assert_eq!(
                                    got.what,
                                    What::File(c.clone()),
                                    "seed {seed} step {step}: {n}"
                                );
                                let want_mode = if m.readable { 0o644 } else { 0o000 };
                                assert_eq!(got.mode, want_mode, "seed {seed} step {step}: {n}");
                            }
                        }
                    }
                    saved.push((id, want));
                }
            }
        }
        let Some((id, held)) = saved
            .get(rng.below(saved.len().max(1) as u64) as usize)
            .cloned()
        else {
            continue;
        };
        // The restore's own pre-save reads what it can first.
        let before: Vec<Option<Vec<u8>>> = files.iter_mut().map(Model::save).collect();
        u.run(&["restore", &id]).ok();
        for (((n, m), h), b) in names.iter().zip(&files).zip(&held).zip(&before) {
            let p = u.path(n);
            match (h, b) {
                (Some(c), _) => assert_eq!(file(&p).0, *c, "seed {seed}: {n} after restore {id}"),
                // Left out now and absent from the target: left alone.
                (None, None) => assert_eq!(
                    file(&p),
                    (m.content.clone(), 0o000),
                    "seed {seed}: {n} left alone by restore {id}"
                ),
                (None, Some(_)) => assert!(
                    !p.exists(),
                    "seed {seed}: {n} is not in {id}, so restore removes it"
                ),
            }
        }
        let st = u.run(&["status", "--json"]).ok().json();
        assert_eq!(st["clean"], true, "seed {seed}: after restore {id}: {st}");
    }
}
