//! `ckpt push`, `pull`, `clone`, `log --remote` and `gc --remote` against
//! two independent S3-protocol servers, each started once per test binary
//! on 127.0.0.1 from what `.ci/run` installs under `target/`:
//!
//! - moto (PyPI `moto[server]`, `target/moto-venv`, or
//!   `$CKPT_MOTO_SERVER`), which honours conditional writes
//!   (`If-None-Match: *` on PutObject);
//! - s3rver (npm `s3rver`, `target/s3rver`, or `$CKPT_S3RVER`), which
//!   ignores them: a second create-if-absent of a key overwrites the first
//!   and answers 200.
//!
//! Every scenario runs against `file://`, moto and s3rver
//! (`on_every_remote!`). Without a server its tests report a skip
//! (`common::skip`), which fails under `CI=true`; the `file://` tests
//! always run.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::*;

/// Which S3 implementation a [`Server`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// moto: honours conditional writes.
    Moto,
    /// s3rver: ignores them.
    S3rver,
}

/// An S3-protocol server for this test binary.
struct Server {
    kind: Kind,
    port: u16,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn repo_target() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target")
}

fn moto_bin() -> Option<PathBuf> {
    let mut c: Vec<PathBuf> = Vec::new();
    if let Some(p) = std::env::var_os("CKPT_MOTO_SERVER") {
        c.push(PathBuf::from(p));
    }
    c.push(repo_target().join("moto-venv/bin/moto_server"));
    c.into_iter().find(|p| p.is_file())
}

fn s3rver_bin() -> Option<PathBuf> {
    let mut c: Vec<PathBuf> = Vec::new();
    if let Some(p) = std::env::var_os("CKPT_S3RVER") {
        c.push(PathBuf::from(p));
    }
    c.push(repo_target().join("s3rver/node_modules/.bin/s3rver"));
    c.into_iter().find(|p| p.is_file())
}

fn wait_port(port: u16) -> bool {
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(60) {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// The child gets SIGKILL when the thread that spawned it exits
/// (PR_SET_PDEATHSIG): servers started here never outlive the tests.
fn die_with_this_process(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: prctl is async-signal-safe; it only sets the death signal.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
}

/// Starts `cmd` (killed when this process exits: the spawning thread lives
/// forever and the child has PDEATHSIG) and waits for `port` to listen.
fn start_server(mut cmd: Command, port: u16) -> Option<u16> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        cmd.stdout(Stdio::null()).stderr(Stdio::null());
        die_with_this_process(&mut cmd);
        let child = cmd.spawn();
        let _ = tx.send(child.is_ok());
        let _keep = child;
        loop {
            std::thread::park();
        }
    });
    if !rx.recv().unwrap_or(false) || !wait_port(port) {
        return None;
    }
    Some(port)
}

/// Starts a moto server.
fn start_moto(extra_env: &[(&str, &str)]) -> Option<u16> {
    let bin = moto_bin()?;
    let port = free_port();
    let mut cmd = Command::new(bin);
    cmd.args(["-H", "127.0.0.1", "-p", &port.to_string()]);
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    start_server(cmd, port)
}

/// Starts an s3rver, its data in a directory of its own.
fn start_s3rver() -> Option<u16> {
    let bin = s3rver_bin()?;
    let port = free_port();
    let dir = tempfile::tempdir_in(test_base()).ok()?.keep();
    let mut cmd = Command::new(bin);
    cmd.arg("-d")
        .arg(&dir)
        .args(["-a", "127.0.0.1", "-p", &port.to_string(), "--silent"]);
    start_server(cmd, port)
}

fn moto() -> Option<&'static Server> {
    static M: OnceLock<Option<Server>> = OnceLock::new();
    let m = M
        .get_or_init(|| {
            start_moto(&[]).map(|port| Server {
                kind: Kind::Moto,
                port,
            })
        })
        .as_ref();
    if m.is_none() {
        skip("moto_server not found (target/moto-venv: `python3 -m venv target/moto-venv && target/moto-venv/bin/pip install 'moto[server]'`)");
    }
    m
}

fn s3rver() -> Option<&'static Server> {
    static S: OnceLock<Option<Server>> = OnceLock::new();
    let s = S
        .get_or_init(|| {
            start_s3rver().map(|port| Server {
                kind: Kind::S3rver,
                port,
            })
        })
        .as_ref();
    if s.is_none() {
        skip("s3rver not found or did not start (target/s3rver: `npm install --prefix target/s3rver s3rver@3.7.1`)");
    }
    s
}

/// One raw HTTP/1.1 request (moto needs no signature by default).
fn http(port: u16, method: &str, path: &str, body: &[u8]) -> (u16, Vec<u8>) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .unwrap();
    s.write_all(body).unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    let head_end = out.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let head = String::from_utf8_lossy(&out[..head_end]).to_string();
    let code: u16 = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    let mut body = out[head_end..].to_vec();
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        let mut plain = Vec::new();
        let mut at = 0;
        loop {
            let nl = body[at..].windows(2).position(|w| w == b"\r\n").unwrap() + at;
            let n = usize::from_str_radix(std::str::from_utf8(&body[at..nl]).unwrap().trim(), 16)
                .unwrap();
            if n == 0 {
                break;
            }
            plain.extend_from_slice(&body[nl + 2..nl + 2 + n]);
            at = nl + 2 + n + 2;
        }
        body = plain;
    }
    (code, body)
}

impl Server {
    /// A new empty bucket; returns its name.
    fn bucket(&self) -> String {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let name = format!(
            "b{}-{}",
            std::process::id(),
            N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        let (code, body) = http(self.port, "PUT", &format!("/{name}"), b"");
        assert_eq!(
            code,
            200,
            "create bucket: {}",
            String::from_utf8_lossy(&body)
        );
        name
    }
}

/// The environment that points ckpt at a moto server on `port`.
fn s3_env(port: u16) -> Vec<(&'static str, String)> {
    vec![
        ("AWS_ENDPOINT", format!("http://127.0.0.1:{port}")),
        ("AWS_ACCESS_KEY_ID", "testing".into()),
        ("AWS_SECRET_ACCESS_KEY", "testing".into()),
        ("AWS_REGION", "us-east-1".into()),
        ("AWS_ALLOW_HTTP", "true".into()),
    ]
}

impl Server {
    /// The environment that points ckpt at this server (s3rver checks
    /// signatures against its built-in `S3RVER` key).
    fn env(&self) -> Vec<(&'static str, String)> {
        let mut e = s3_env(self.port);
        if self.kind == Kind::S3rver {
            for (k, v) in e.iter_mut() {
                if k.starts_with("AWS_ACCESS") || k.starts_with("AWS_SECRET") {
                    *v = "S3RVER".into();
                }
            }
        }
        e
    }

    /// A new bucket and a URL under it, with the environment to reach it.
    fn remote(&self, prefix: &str) -> (String, Vec<(&'static str, String)>) {
        (format!("s3://{}/{prefix}", self.bucket()), self.env())
    }
}

/// `ckpt ARGS` in `cwd` with extra environment.
fn run_env(cwd: &Path, env: &[(&str, String)], args: &[&str]) -> Run {
    let mut c = command(
        cwd,
        &args.iter().map(std::ffi::OsStr::new).collect::<Vec<_>>(),
    );
    for (k, v) in env {
        c.env(k, v);
    }
    let o = c.output().expect("spawn ckpt");
    Run {
        what: format!("ckpt {}", args.join(" ")),
        code: o.status.code(),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

fn spawn_env(cwd: &Path, env: &[(&str, String)], args: &[&str]) -> Child {
    let mut c = command(
        cwd,
        &args.iter().map(std::ffi::OsStr::new).collect::<Vec<_>>(),
    );
    for (k, v) in env {
        c.env(k, v);
    }
    c.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ckpt")
}

/// The tests `$file`, `$s3` and `$s3rver`: scenario `$scenario(url, env)`
/// against a `file://` remote, the moto server and the s3rver server.
macro_rules! on_every_remote {
    ($scenario:ident, $file:ident, $s3:ident, $s3rver:ident) => {
        #[test]
        fn $file() {
            let dir = tempfile::tempdir_in(test_base()).unwrap();
            $scenario(&format!("file://{}", dir.path().join("r").display()), &[]);
        }

        #[test]
        fn $s3() {
            let Some(m) = moto() else { return };
            let (url, env) = m.remote(stringify!($scenario));
            $scenario(&url, &env);
        }

        #[test]
        fn $s3rver() {
            let Some(m) = s3rver() else { return };
            let (url, env) = m.remote(stringify!($scenario));
            $scenario(&url, &env);
        }
    };
}

/// A workspace with every kind of entry: modes, a symlink, an empty
/// directory, nested files, distinct mtimes, and agent state.
fn rich_workspace(rng: &mut Rng) -> Ws {
    let ws = Ws::new();
    ws.init();
    write(&ws.root, "README.md", b"hello\n");
    write(&ws.root, "bin/run.sh", b"#!/bin/sh\necho hi\n");
    chmod(&ws.root.join("bin/run.sh"), 0o755);
    write(&ws.root, "secret.txt", b"s3cr3t");
    chmod(&ws.root.join("secret.txt"), 0o600);
    std::os::unix::fs::symlink("README.md", ws.root.join("link")).unwrap();
    std::fs::create_dir_all(ws.root.join("empty/inner")).unwrap();
    build_tree(&ws.root.join("src"), 4, 6, rng);
    write(&ws.root, "big.bin", &rng.bytes(300_000));
    ws.run(&["state", "put", "task", "refactor the parser"])
        .ok();
    ws.run(&["state", "put", "step", "3"]).ok();
    ws
}

fn state_get(dir: &Path, key: &str) -> String {
    ckpt(dir, &["state", "get", key])
        .ok()
        .stdout
        .trim_end()
        .to_string()
}

/// Push, then clone into a new directory: the same tree (content, modes,
/// symlinks, empty directories, mtimes), the same agent state, the same
/// checkpoint number; then a push from the clone sends no checkpoint twice.
fn round_trip(url: &str, env: &[(&str, String)]) {
    let mut rng = Rng::new("remote_round_trip", 21);
    let ws = rich_workspace(&mut rng);
    let (id, _) = ws.save();
    let want = ws.materialise(&id);
    run_env(
        &ws.root,
        env,
        &["remote", "add", "origin", url, "--workspace", "app"],
    )
    .ok();
    let p = run_env(&ws.root, env, &["push", "--json"]).ok().json();
    assert_eq!(p["pushed"].as_array().unwrap().len(), 1, "{p}");
    assert!(
        p["requests"].as_u64().unwrap() > 0 && p["bytes_sent"].as_u64().unwrap() > 0,
        "{p}"
    );
    let remote_id = p["pushed"][0]["remote_id"].as_str().unwrap().to_string();

    let dest = ws.tmp.path().join("clone");
    let c = run_env(
        ws.tmp.path(),
        env,
        &["clone", url, dest.to_str().unwrap(), "--json"],
    )
    .ok()
    .json();
    assert_eq!(
        c["cloned"],
        id.as_str(),
        "the clone keeps the checkpoint number: {c}"
    );
    assert_same(&want, &snapshot(&dest), "clone");
    assert_eq!(state_get(&dest, "task"), "refactor the parser");
    assert_eq!(state_get(&dest, "step"), "3");
    ckpt(&dest, &["verify"]).ok();
    ckpt(&dest, &["verify", "--store"]).ok();

    // The clone's source is its `origin`, with the workspace name: a bare
    // push works at once, and the clone's checkpoint has the same remote
    // id, so pushing it back adds nothing.
    let again = run_env(&dest, env, &["push", "--json"]).ok().json();
    assert_eq!(again["workspace"], "app", "{again}");
    assert_eq!(again["pushed"].as_array().unwrap().len(), 0, "{again}");
    assert_eq!(again["already"][0]["remote_id"], remote_id.as_str());

    // log --remote lists it; #ID clones it by remote id.
    let l = run_env(&ws.root, env, &["log", "--remote", "origin", "--json"])
        .ok()
        .json();
    assert_eq!(l["checkpoints"][0]["remote_id"], remote_id.as_str());
    let dest2 = ws.tmp.path().join("clone2");
    let src = format!("{url}#{}", &remote_id[..10]);
    run_env(
        ws.tmp.path(),
        env,
        &["clone", &src, dest2.to_str().unwrap()],
    )
    .ok();
    assert_same(&want, &snapshot(&dest2), "clone by id");

    // Second checkpoint; pull it into the clone, restore it there.
    write(&ws.root, "src/new.txt", b"new file\n");
    ws.run(&["state", "put", "step", "4"]).ok();
    let (id2, _) = ws.save();
    let want2 = ws.materialise(&id2);
    let p2 = run_env(&ws.root, env, &["push", "--json"]).ok().json();
    assert_eq!(p2["pushed"].as_array().unwrap().len(), 1);
    // One new file and a state change: the remote's config (encrypted or
    // not), the listing of the ref, the gc list (twice), the listings of
    // indexes and packs, a pack of contents and its index, the record, a
    // pack of trees and nodes and its index, the ref entry.
    assert_eq!(p2["requests"], 12, "{p2}");
    let pl = run_env(&dest, env, &["pull", "--json"]).ok().json();
    assert_eq!(pl["pulled"].as_array().unwrap().len(), 1, "{pl}");
    assert_eq!(
        state_get(&dest, "step"),
        "3",
        "a pull leaves the current agent state alone"
    );
    let local = pl["pulled"][0]["id"].as_str().unwrap().to_string();
    ckpt(&dest, &["restore", &local]).ok();
    assert_same(&want2, &snapshot(&dest), "pulled checkpoint restored");
    assert_eq!(state_get(&dest, "step"), "4");

    // A checkpoint made in the clone goes back with a bare push.
    write(&dest, "from_clone.txt", b"made in the clone\n");
    let r = ckpt(&dest, &["save", "--json"]).ok().json();
    let p3 = run_env(&dest, env, &["push", "--json"]).ok().json();
    assert_eq!(p3["pushed"][0]["id"], r["id"], "{p3}");
    let l = run_env(&ws.root, env, &["log", "--remote", "origin", "--json"])
        .ok()
        .json();
    assert_eq!(
        l["checkpoints"][0]["remote_id"], p3["pushed"][0]["remote_id"],
        "{l}"
    );
}

on_every_remote!(
    round_trip,
    round_trip_file_remote,
    round_trip_s3,
    round_trip_s3rver
);

/// Two pushes (the second after an edit), then a clone of the latest and a
/// pull of both into a third workspace, with a pull that commits what
/// arrived every 1000 bytes: an empty file sorted just before a non-empty
/// one (in a pack they share an offset), the same content in several files
/// and in both checkpoints, and enough files to cross the commit threshold
/// many times. Every checkpoint comes back byte-identical and verifies.
fn duplicates_and_commits(url: &str, env: &[(&str, String)]) {
    let mut rng = Rng::new("remote_duplicates", 5);
    let ws = Ws::new();
    ws.init();
    let shared = rng.text(3000);
    write(&ws.root, "a_empty", b"");
    write(&ws.root, "b.txt", b"right after the empty file\n");
    write(&ws.root, "copy1.txt", &shared);
    write(&ws.root, "dir/copy2.txt", &shared);
    write(&ws.root, "dir/empty_too", b"");
    write(&ws.root, "dir/next.txt", b"after another empty file\n");
    for i in 0..30 {
        write(&ws.root, &format!("many/{i:02}.txt"), &rng.text(2000));
    }
    let (v1, _) = ws.save();
    let mut env: Vec<(&str, String)> = env.to_vec();
    env.push(("CKPT_REMOTE_COMMIT_BYTES", "1000".into()));
    run_env(&ws.root, &env, &["push", url, "--workspace", "w"]).ok();
    write(&ws.root, "many/07.txt", b"edited\n");
    write(&ws.root, "again/copy3.txt", &shared);
    write(&ws.root, "again/old.txt", b"right after the empty file\n");
    let (v2, _) = ws.save();
    run_env(&ws.root, &env, &["push", url, "--workspace", "w"]).ok();

    let dest = ws.tmp.path().join("clone");
    let c = run_env(
        ws.tmp.path(),
        &env,
        &[
            "clone",
            url,
            dest.to_str().unwrap(),
            "--workspace",
            "w",
            "--json",
        ],
    )
    .ok()
    .json();
    assert_eq!(c["cloned"], v2.as_str(), "{c}");
    assert_same(
        &ws.materialise(&v2),
        &snapshot(&dest),
        "clone of the latest",
    );
    ckpt(&dest, &["verify"]).ok();
    ckpt(&dest, &["verify", "--store"]).ok();

    // A pull of both into an unrelated workspace, then each restored.
    pull_all_and_restore_each(url, &env, &[ws.materialise(&v1), ws.materialise(&v2)]);
}

/// Pulls every checkpoint of workspace `w` into a new workspace, restores
/// each there and checks it is `wants[i]` (oldest first); the store
/// verifies.
fn pull_all_and_restore_each(url: &str, env: &[(&str, String)], wants: &[Snapshot]) {
    let other = Ws::new();
    other.init();
    let pl = run_env(
        &other.root,
        env,
        &["pull", url, "--workspace", "w", "--json"],
    )
    .ok()
    .json();
    assert_eq!(pl["pulled"].as_array().unwrap().len(), wants.len(), "{pl}");
    for (i, want) in wants.iter().enumerate() {
        let local = pl["pulled"][i]["id"].as_str().unwrap().to_string();
        ckpt(&other.root, &["restore", &local]).ok();
        assert_same(want, &snapshot(&other.root), "pulled and restored");
    }
    ckpt(&other.root, &["verify", "--store"]).ok();
}

on_every_remote!(
    duplicates_and_commits,
    duplicates_and_commits_file_remote,
    duplicates_and_commits_s3,
    duplicates_and_commits_s3rver
);

/// Starts tests/fault_proxy.py (moto's venv Python) in front of the moto
/// server on `upstream`; returns its port.
fn start_fault_proxy(upstream: u16, seed: u64, rate: f64) -> Option<u16> {
    use std::io::BufRead;
    let python = moto_bin()?.with_file_name("python3");
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fault_proxy.py");
    let mut cmd = Command::new(python);
    cmd.arg(script)
        .args([upstream.to_string(), seed.to_string(), rate.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    die_with_this_process(&mut cmd);
    let mut child = cmd.spawn().ok()?;
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take()?)
        .read_line(&mut line)
        .ok()?;
    // The proxy is killed when this test's thread ends (PDEATHSIG).
    std::mem::forget(child);
    line.trim().parse().ok()
}

/// Runs a remote command through the faulty proxy until it succeeds (at
/// most four times). Every failure must be a clear one: exit 10 naming the
/// request that failed. Returns the successful run's JSON and adds the
/// failed requests it reports to `failed`.
fn until_ok(what: &str, failed: &mut u64, run: &dyn Fn() -> Run) -> serde_json::Value {
    for _ in 0..4 {
        let r = run();
        if r.code == Some(0) {
            let j = r.json();
            *failed += j["failed_requests"].as_u64().unwrap_or(0);
            return j;
        }
        assert_eq!(
            r.code,
            Some(10),
            "{what}: not a clear remote error: {}",
            r.dump()
        );
        assert!(
            r.stderr.contains("s3://") && r.stderr.contains("failed"),
            "{what}: the error names no request: {}",
            r.dump()
        );
        eprintln!("{what} failed clearly, re-running: {}", r.stderr.trim());
    }
    panic!("{what} did not complete in four runs through the faulty proxy");
}

/// A proxy between ckpt and moto resets connections, answers 503, delays
/// replies and cuts replies short, at random (seeded) on a quarter of the
/// requests. Pushes, a clone and a pull each complete with the right data
/// (retried with backoff) or fail clearly, and a re-run completes; the
/// retries are counted in `failed_requests`.
#[test]
fn faults_between_ckpt_and_the_server() {
    let Some(m) = moto() else { return };
    let mut rng = Rng::new("fault_proxy", 11);
    let Some(proxy) = start_fault_proxy(m.port, rng.next() % 1_000_000, 0.25) else {
        skip("the fault proxy (tests/fault_proxy.py, moto's venv Python) did not start");
        return;
    };
    let url = format!("s3://{}/faults", m.bucket());
    let mut env = s3_env(proxy);
    env.push(("CKPT_REMOTE_PACK_BYTES", "20000".into()));
    env.push(("CKPT_REMOTE_CONCURRENCY", "4".into()));
    let ws = Ws::new();
    ws.init();
    for i in 0..60 {
        write(&ws.root, &format!("src/{}/{i}.txt", i % 6), &rng.text(3000));
    }
    ws.run(&["state", "put", "task", "faults"]).ok();
    let (v1, _) = ws.save();
    let mut failed = 0;
    let push = || {
        run_env(
            &ws.root,
            &env,
            &["push", &url, "--workspace", "w", "--json"],
        )
    };
    until_ok("first push", &mut failed, &push);
    write(&ws.root, "src/0/0.txt", b"edited\n");
    let (v2, _) = ws.save();
    let p2 = until_ok("second push", &mut failed, &push);
    assert!(
        p2["pushed"].as_array().unwrap().len() + p2["already"].as_array().unwrap().len() >= 1,
        "{p2}"
    );

    let dest = ws.tmp.path().join("clone");
    let c = until_ok("clone", &mut failed, &|| {
        run_env(
            ws.tmp.path(),
            &env,
            &[
                "clone",
                &url,
                dest.to_str().unwrap(),
                "--workspace",
                "w",
                "--json",
            ],
        )
    });
    assert_eq!(c["cloned"], v2.as_str(), "{c}");
    assert_same(
        &ws.materialise(&v2),
        &snapshot(&dest),
        "clone through faults",
    );
    assert_eq!(state_get(&dest, "task"), "faults");
    ckpt(&dest, &["verify", "--store"]).ok();

    let other = Ws::new();
    other.init();
    let pl = until_ok("pull", &mut failed, &|| {
        run_env(
            &other.root,
            &env,
            &["pull", &url, "--workspace", "w", "--json"],
        )
    });
    assert!(!pl["pulled"].as_array().unwrap().is_empty(), "{pl}");
    let first = run_env(&other.root, &[], &["log", "--json"]).ok().json();
    let oldest = ids(&first).last().cloned().unwrap();
    ckpt(&other.root, &["restore", &oldest]).ok();
    assert_same(
        &ws.materialise(&v1),
        &snapshot(&other.root),
        "pulled through faults",
    );
    ckpt(&other.root, &["verify", "--store"]).ok();
    eprintln!("requests that failed and were retried: {failed}");
    assert!(
        failed > 0,
        "no fault reached ckpt: the proxy is not in the path"
    );
}

/// A package tree shaped like npm's: each package with package.json,
/// README.md, LICENSE (the same text everywhere), lib/ sources of varied
/// sizes, some with dist/ and a nested node_modules, and `.bin` symlinks.
fn node_modules(root: &Path, rng: &mut Rng) {
    for pkg in 0..40 {
        let p = format!("node_modules/pkg{pkg}");
        write(
            root,
            &format!("{p}/package.json"),
            format!("{{\"name\":\"pkg{pkg}\",\"version\":\"1.{pkg}.0\",\"main\":\"lib/f0.js\"}}\n")
                .as_bytes(),
        );
        write(root, &format!("{p}/README.md"), &rng.text(800));
        write(
            root,
            &format!("{p}/LICENSE"),
            b"MIT License\n\nPermission is hereby granted...\n",
        );
        for f in 0..10 + pkg % 20 {
            let len = 300 + rng.below(3000) as usize;
            write(root, &format!("{p}/lib/f{f}.js"), &rng.text(len));
        }
        if pkg % 3 == 0 {
            for f in 0..4 {
                write(root, &format!("{p}/dist/f{f}.min.js"), &rng.text(2500));
            }
        }
        if pkg % 5 == 0 {
            let d = format!("{p}/node_modules/dep{pkg}");
            write(root, &format!("{d}/package.json"), b"{\"name\":\"dep\"}\n");
            write(root, &format!("{d}/index.js"), &rng.text(1200));
        }
        if pkg % 4 == 0 {
            std::fs::create_dir_all(root.join("node_modules/.bin")).unwrap();
            std::os::unix::fs::symlink(
                format!("../pkg{pkg}/lib/f0.js"),
                root.join(format!("node_modules/.bin/pkg{pkg}")),
            )
            .unwrap();
        }
    }
}

/// Two workspaces holding the same `node_modules`, written at different
/// times (so every mtime differs), pushed to one bucket: the second push
/// sends neither file contents nor trees, only its mtimes, < 2 % of the
/// first push's bytes; and it clones back exactly.
fn same_node_modules(url: &str, env: &[(&str, String)]) {
    node_modules_twice(url, env, false);
}

/// [`same_node_modules`] on an encrypted remote both workspaces reach
/// with the same key: deduplication still works.
fn same_node_modules_encrypted(url: &str, env: &[(&str, String)]) {
    node_modules_twice(url, env, true);
}

fn node_modules_twice(url: &str, env: &[(&str, String)], encrypt: bool) {
    let real_url = url;
    let mut rng = Rng::new("dedupe", 7);
    let a = Ws::new();
    a.init();
    node_modules(&a.root, &mut rng.clone_seeded());
    write(&a.root, "app/main.js", b"console.log('a')\n");
    a.save();
    let b = Ws::new();
    b.init();
    node_modules(&b.root, &mut rng.clone_seeded());
    write(&b.root, "app/main.js", b"console.log('b')\n");
    let (bv, _) = b.save();
    let mut env: Vec<(&str, String)> = env.to_vec();
    let url = if encrypt {
        env.push(("CKPT_REMOTE_PASSPHRASE", "shared team passphrase".into()));
        for ws in [&a, &b] {
            run_env(
                &ws.root,
                &env,
                &["remote", "add", "--encrypt", "origin", url],
            )
            .ok();
        }
        "origin".to_string()
    } else {
        url.to_string()
    };
    let env = &env[..];
    let pa = run_env(&a.root, env, &["push", &url, "--workspace", "a", "--json"])
        .ok()
        .json();
    let pb = run_env(&b.root, env, &["push", &url, "--workspace", "b", "--json"])
        .ok()
        .json();
    let (sa, sb) = (
        pa["bytes_sent"].as_u64().unwrap(),
        pb["bytes_sent"].as_u64().unwrap(),
    );
    eprintln!(
        "first push {sa} bytes in {} requests ({} objects), second {sb} bytes ({:.2} %) in {} requests ({} objects)",
        pa["requests"],
        pa["objects"],
        sb as f64 * 100.0 / sa as f64,
        pb["requests"],
        pb["objects"]
    );
    let files = pa["objects"].as_u64().unwrap();
    assert!(files > 1000, "{pa}");
    // Sent again: app/main.js, the two trees that differ (the root and
    // app/), and mtimes nodes (about one per 1000 entries, and one per
    // package that does not fit in its parent's node).
    assert!(
        pb["objects"].as_u64().unwrap() < 40,
        "no file content or shared tree is sent again: {pb}"
    );
    assert!(
        sb * 50 < sa,
        "the second push sent {sb} bytes, not < 2 % of the first's {sa}: {pb}"
    );
    // Packs, not one request per file.
    assert!(pa["requests"].as_u64().unwrap() < 60, "{pa}");
    // Compression pays on text.
    assert!(sa * 2 < pa["raw_bytes"].as_u64().unwrap(), "{pa}");
    // The second workspace comes back exactly, mtimes included.
    let dest = b.tmp.path().join("clone");
    run_env(
        b.tmp.path(),
        env,
        &[
            "clone",
            real_url,
            dest.to_str().unwrap(),
            "--workspace",
            "b",
        ],
    )
    .ok();
    assert_same(&b.materialise(&bv), &snapshot(&dest), "clone of b");
}

on_every_remote!(
    same_node_modules_encrypted,
    encrypted_second_workspace_with_the_same_files_sends_little_file_remote,
    encrypted_second_workspace_with_the_same_files_sends_little_s3,
    encrypted_second_workspace_with_the_same_files_sends_little_s3rver
);

on_every_remote!(
    same_node_modules,
    second_workspace_with_the_same_node_modules_sends_no_content_again_file_remote,
    second_workspace_with_the_same_node_modules_sends_no_content_again,
    second_workspace_with_the_same_node_modules_sends_no_content_again_s3rver
);

/// Two checkpoints of one workspace that differ only in one file's mtime:
/// the second push sends no file content and no tree, only mtimes; both
/// come back exactly, by clone and by pull.
fn mtime_only_change(url: &str, env: &[(&str, String)]) {
    let mut rng = Rng::new("remote_mtime_only", 8);
    let ws = Ws::new();
    ws.init();
    build_tree(&ws.root.join("src"), 4, 6, &mut rng);
    write(&ws.root, "a/b/c.txt", b"the same bytes\n");
    let (v1, _) = ws.save();
    let p1 = run_env(&ws.root, env, &["push", url, "--workspace", "w", "--json"])
        .ok()
        .json();
    assert_eq!(p1["pushed"][0]["id"], v1.as_str(), "{p1}");
    let t = std::time::UNIX_EPOCH + Duration::new(1_234_567_890, 123_456_789);
    std::fs::File::options()
        .write(true)
        .open(ws.root.join("a/b/c.txt"))
        .unwrap()
        .set_modified(t)
        .unwrap();
    let (v2, saved) = ws.save();
    assert!(saved, "an mtime change is a new checkpoint");
    let (want1, want2) = (ws.materialise(&v1), ws.materialise(&v2));
    assert_ne!(want1, want2);
    let p2 = run_env(&ws.root, env, &["push", url, "--workspace", "w", "--json"])
        .ok()
        .json();
    assert_eq!(p2["pushed"][0]["id"], v2.as_str(), "{p2}");
    // The workspace fits in one mtimes node: that node is all it sends.
    assert_eq!(p2["objects"], 1, "only the mtimes node: {p2}");
    for (v, want) in [(&v1, &want1), (&v2, &want2)] {
        let dest = ws.fresh_dir();
        let src = format!("{url}#{v}");
        run_env(
            ws.tmp.path(),
            env,
            &["clone", &src, dest.to_str().unwrap(), "--workspace", "w"],
        )
        .ok();
        assert_same(want, &snapshot(&dest), &format!("clone of {v}"));
    }
    pull_all_and_restore_each(url, env, &[want1, want2]);
}

on_every_remote!(
    mtime_only_change,
    mtime_only_change_file_remote,
    mtime_only_change_s3,
    mtime_only_change_s3rver
);

/// An RNG that can be replayed.
trait CloneSeeded {
    fn clone_seeded(&mut self) -> Rng;
}
impl CloneSeeded for Rng {
    fn clone_seeded(&mut self) -> Rng {
        Rng::new("replay", 99)
    }
}

/// A push killed after its third pack, then re-run: the remote still reads
/// (the ref is unchanged), the re-run sends only what had not arrived, and
/// no blob is stored twice.
fn killed_push_resumes(url: &str, env: &[(&str, String)]) {
    let mut rng = Rng::new("killed_push", 3);
    let ws = Ws::new();
    ws.init();
    write(&ws.root, "first.txt", b"v1\n");
    let (v1, _) = ws.save();
    let mut env: Vec<(&str, String)> = env.to_vec();
    env.push(("CKPT_REMOTE_PACK_BYTES", "65536".into()));
    env.push(("CKPT_REMOTE_CONCURRENCY", "1".into()));
    run_env(&ws.root, &env, &["push", url, "--workspace", "w"]).ok();
    for i in 0..40 {
        write(&ws.root, &format!("data/{i}.bin"), &rng.bytes(40_000));
    }
    let (v2, _) = ws.save();
    let mut killed = env.clone();
    killed.push(("CKPT_FAULT", "remote.push.after_pack:3".into()));
    let r = run_env(&ws.root, &killed, &["push", url, "--workspace", "w"]);
    assert_eq!(r.code, None, "the push was killed: {}", r.dump());
    // The remote is readable and still lists v1 only.
    let l = run_env(
        &ws.root,
        &env,
        &["log", "--remote", url, "--workspace", "w", "--json"],
    )
    .ok()
    .json();
    assert_eq!(l["total"], 1, "{l}");
    let rerun = run_env(&ws.root, &env, &["push", url, "--workspace", "w", "--json"])
        .ok()
        .json();
    assert_eq!(rerun["pushed"][0]["id"], v2.as_str());
    let gc = run_env(
        &ws.root,
        &env,
        &["gc", "--remote", url, "--dry-run", "--json"],
    )
    .ok()
    .json();
    assert_eq!(
        gc["duplicate_objects"], 0,
        "a blob was uploaded twice: {gc} after {rerun}"
    );
    // v2 needs 43 blobs (40 files of 40 kB, one per 64 KiB pack, two trees
    // and one mtimes node); three packs arrived before the kill (one request
    // at a time), so the re-run sends exactly the other 40.
    assert_eq!(rerun["objects"], 40, "{rerun}");
    eprintln!(
        "re-run: {} objects, {} packs, {} requests",
        rerun["objects"], rerun["packs"], rerun["requests"]
    );
    let dest = ws.tmp.path().join("c");
    run_env(
        ws.tmp.path(),
        &env,
        &["clone", url, dest.to_str().unwrap(), "--workspace", "w"],
    )
    .ok();
    assert_same(
        &ws.materialise(&v2),
        &snapshot(&dest),
        "clone after resumed push",
    );
    let _ = v1;
}

on_every_remote!(
    killed_push_resumes,
    killed_push_resumes_file_remote,
    killed_push_resumes_s3,
    killed_push_resumes_s3rver
);

/// Four workspaces push to one workspace name at once, ten rounds (each
/// round a new checkpoint in every workspace, then four simultaneous
/// pushes). Every push that exited 0 is on the remote afterwards, by id:
/// `log --remote` lists every one, and a clone of each gives its files.
/// `latest` is the same checkpoint for every reader: clone picks the one
/// `log --remote` lists first. (On a server that ignores conditional
/// writes, a layout that relied on them lost a checkpoint in most rounds.)
fn concurrent_pushers(url: &str, env: &[(&str, String)]) {
    concurrent_pushers_with(url, env, false);
}

/// [`concurrent_pushers`] on an encrypted remote (sealed entries, written
/// with random nonces).
fn concurrent_pushers_encrypted(url: &str, env: &[(&str, String)]) {
    concurrent_pushers_with(url, env, true);
}

fn concurrent_pushers_with(url: &str, env: &[(&str, String)], encrypt: bool) {
    let mut env: Vec<(&str, String)> = env.to_vec();
    if encrypt {
        env.push(("CKPT_REMOTE_PASSPHRASE", "pushers".into()));
    }
    let env = &env[..];
    let mut rng = Rng::new("concurrent", 5);
    let (n, rounds) = (4, 10);
    let wss: Vec<Ws> = (0..n)
        .map(|_| {
            let ws = Ws::new();
            ws.init();
            fill_dir(&ws.root, "files", 20, &mut rng);
            if encrypt {
                run_env(
                    &ws.root,
                    env,
                    &["remote", "add", "--encrypt", "origin", url],
                )
                .ok();
            }
            ws
        })
        .collect();
    let mut acked: Vec<(String, usize, String)> = Vec::new();
    for round in 0..rounds {
        let mut local = Vec::new();
        for (i, ws) in wss.iter().enumerate() {
            write(
                &ws.root,
                "who.txt",
                format!("pusher {i} round {round}\n").as_bytes(),
            );
            local.push(ws.save().0);
        }
        let children: Vec<Child> = wss
            .iter()
            .map(|ws| {
                spawn_env(
                    &ws.root,
                    env,
                    &["push", url, "--workspace", "same", "--json"],
                )
            })
            .collect();
        for (i, c) in children.into_iter().enumerate() {
            let r = finish(c, "push");
            if r.code != Some(0) {
                // A push may fail (clearly); only those that exited 0 count.
                eprintln!("round {round}: push {i} failed: {}", r.dump());
                continue;
            }
            let v = r.json();
            assert_eq!(v["pushed"][0]["id"], local[i].as_str(), "{v}");
            let id = v["pushed"][0]["remote_id"].as_str().unwrap().to_string();
            acked.push((id, i, local[i].clone()));
        }
    }
    assert!(
        acked.len() >= n * rounds / 2,
        "most pushes succeed: {} of {}",
        acked.len(),
        n * rounds
    );
    let l = run_env(
        &wss[0].root,
        env,
        &["log", "--remote", url, "--workspace", "same", "--json"],
    )
    .ok()
    .json();
    let listed: Vec<String> = l["checkpoints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["remote_id"].as_str().unwrap().to_string())
        .collect();
    let lost: Vec<&String> = acked
        .iter()
        .map(|(id, _, _)| id)
        .filter(|id| !listed.contains(id))
        .collect();
    assert!(
        lost.is_empty(),
        "{} of {} acknowledged checkpoints are not on the remote: {lost:?}",
        lost.len(),
        acked.len()
    );
    assert_eq!(listed.len(), acked.len(), "{l}");
    // Each one is there by id, with its data.
    for (id, i, local) in acked.iter().step_by(7) {
        let dest = wss[*i].fresh_dir();
        let src = format!("{url}#{id}");
        run_env(
            wss[*i].tmp.path(),
            env,
            &["clone", &src, dest.to_str().unwrap(), "--workspace", "same"],
        )
        .ok();
        assert_same(&wss[*i].materialise(local), &snapshot(&dest), "clone by id");
    }
    // `latest` is deterministic: the first `log --remote` lists, every time.
    for _ in 0..2 {
        let other = Ws::new();
        let dest = other.fresh_dir();
        let c = run_env(
            other.tmp.path(),
            env,
            &[
                "clone",
                url,
                dest.to_str().unwrap(),
                "--workspace",
                "same",
                "--json",
            ],
        )
        .ok()
        .json();
        assert_eq!(c["checkpoint"]["remote_id"], listed[0].as_str(), "{c}");
    }
}

on_every_remote!(
    concurrent_pushers_encrypted,
    concurrent_pushers_encrypted_file_remote,
    concurrent_pushers_encrypted_s3,
    concurrent_pushers_encrypted_s3rver
);

on_every_remote!(
    concurrent_pushers,
    concurrent_pushers_file_remote,
    concurrent_pushers_s3,
    concurrent_pushers_s3rver
);

#[test]
fn bad_input_is_refused_clearly() {
    let ws = Ws::new();
    ws.init();
    write(&ws.root, "a", b"a");
    ws.save();
    let r = ws.run(&["remote", "add", "x", "ftp://host/path"]).code(2);
    assert!(
        r.stderr.contains("unknown scheme \"ftp\"") && r.stderr.contains("s3://bucket/prefix"),
        "{}",
        r.stderr
    );
    let r = ws.run(&["push", "gopher://x"]).code(2);
    assert!(r.stderr.contains("unknown scheme"), "{}", r.stderr);
    let r = ws.run(&["push"]).code(2);
    assert!(r.stderr.contains("ckpt remote add"), "{}", r.stderr);
    // A remote setting that does not parse is refused, not ignored, and
    // nothing reaches the remote.
    let dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}", dir.path().join("r").display());
    let bad = [("CKPT_REMOTE_CONCURRENCY", "eight".to_string())];
    let r = run_env(&ws.root, &bad, &["push", &url]).code(2);
    assert!(
        r.stderr.contains("CKPT_REMOTE_CONCURRENCY=\"eight\"")
            && r.stderr.contains("nothing was changed"),
        "{}",
        r.stderr
    );
    assert!(!dir.path().join("r").exists());
    let Some(m) = moto() else { return };
    let env = s3_env(m.port);
    let r = run_env(&ws.root, &env, &["push", "s3://no-such-bucket-here/p"]).code(10);
    assert!(
        r.stderr.contains("bucket does not exist")
            && r.stderr.contains("s3://no-such-bucket-here/p/"),
        "{}",
        r.stderr
    );
}

/// A ref written by the previous ckpt (format 2: numbered generations,
/// each listing every checkpoint) is read, not refused: log, clone and
/// pull see its checkpoints, and a push adds to it and writes the marker
/// that makes an older ckpt refuse the ref instead of missing the new
/// entries. A generation in format 1 (trees with their mtimes) is refused
/// by push, pull, clone, log and gc with an error that says what to do,
/// and nothing on the remote is changed.
#[test]
fn older_remote_formats_are_read_or_refused_clearly() {
    let dir = tempfile::tempdir_in(test_base()).unwrap();
    let remote = dir.path().join("r");
    let url = format!("file://{}", remote.display());
    let ws = Ws::new();
    ws.init();
    write(&ws.root, "a.txt", b"a");
    let (v1, _) = ws.save();
    let p = ws
        .run(&["push", &url, "--workspace", "w", "--json"])
        .ok()
        .json();
    let id1 = p["pushed"][0]["remote_id"].as_str().unwrap().to_string();
    // Rewrite the ref as the previous ckpt wrote it.
    let refs = remote.join("refs/w");
    std::fs::remove_dir_all(&refs).unwrap();
    std::fs::create_dir_all(&refs).unwrap();
    let generation = refs.join("00000000000000000003");
    let legacy = format!(
        "{{\"format\":2,\"workspace\":\"w\",\"generation\":3,\"checkpoints\":[\"{id1}\"]}}"
    );
    std::fs::write(&generation, &legacy).unwrap();
    let l = ws
        .run(&["log", "--remote", &url, "--workspace", "w", "--json"])
        .ok()
        .json();
    assert_eq!(l["checkpoints"][0]["remote_id"], id1.as_str(), "{l}");
    let dest = ws.fresh_dir();
    ckpt(ws.tmp.path(), &["clone", &url, dest.to_str().unwrap()]).ok();
    assert_same(
        &ws.materialise(&v1),
        &snapshot(&dest),
        "clone of a format-2 ref",
    );
    write(&ws.root, "b.txt", b"b");
    ws.save();
    let p2 = ws
        .run(&["push", &url, "--workspace", "w", "--json"])
        .ok()
        .json();
    let id2 = p2["pushed"][0]["remote_id"].as_str().unwrap().to_string();
    let l = ws
        .run(&["log", "--remote", &url, "--workspace", "w", "--json"])
        .ok()
        .json();
    let listed: Vec<&str> = l["checkpoints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["remote_id"].as_str().unwrap())
        .collect();
    assert_eq!(listed, [id2.as_str(), id1.as_str()], "{l}");
    assert_eq!(std::fs::read_to_string(&generation).unwrap(), legacy);
    let marker = std::fs::read_to_string(refs.join("18446744073709551615")).unwrap();
    assert!(
        marker.contains("\"format\":3") && marker.contains("\"checkpoints\":[]"),
        "{marker}"
    );

    // Format 1 is refused, and nothing is changed.
    let body = legacy.replace("\"format\":2", "\"format\":1");
    std::fs::write(&generation, &body).unwrap();
    let before: Vec<_> = std::fs::read_dir(&refs)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    write(&ws.root, "c.txt", b"c");
    ws.save();
    let dest = ws.tmp.path().join("c");
    let runs = [
        ws.run(&["push", &url, "--workspace", "w"]),
        ws.run(&["pull", &url, "--workspace", "w"]),
        ws.run(&["log", "--remote", &url, "--workspace", "w"]),
        ws.run(&["gc", "--remote", &url]),
        ckpt(ws.tmp.path(), &["clone", &url, dest.to_str().unwrap()]),
    ];
    for r in runs {
        let r = r.code(2);
        assert!(
            r.stderr.contains("remote format 1")
                && r.stderr.contains("new prefix")
                && r.stderr.contains("nothing was changed"),
            "{}",
            r.dump()
        );
    }
    assert!(!dest.exists());
    assert_eq!(std::fs::read_to_string(&generation).unwrap(), body);
    let after: Vec<_> = std::fs::read_dir(&refs)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(before, after);
}

/// A damaged pack on the remote is detected on pull, named, and nothing is
/// left behind. (On `file://`, where the test can rewrite the pack in place;
/// moto refused the unsigned rewrite with 403.)
#[test]
fn corrupted_pack_is_detected_on_pull_and_named() {
    let dir = tempfile::tempdir_in(test_base()).unwrap();
    let remote = dir.path().join("r");
    let url = format!("file://{}", remote.display());
    let ws = Ws::new();
    ws.init();
    write(
        &ws.root,
        "a.txt",
        &b"some text that compresses well ".repeat(100),
    );
    write(&ws.root, "b.txt", b"bee");
    ws.save();
    ws.run(&["push", &url]).ok();
    let mut n = 0;
    for e in std::fs::read_dir(remote.join("packs")).unwrap() {
        let p = e.unwrap().path();
        let mut b = std::fs::read(&p).unwrap();
        b[10] ^= 0x55;
        std::fs::write(&p, b).unwrap();
        n += 1;
    }
    assert!(n > 0);
    let dest = ws.tmp.path().join("c");
    let r = ckpt(ws.tmp.path(), &["clone", &url, dest.to_str().unwrap()]).code(5);
    assert!(
        r.stderr.contains(&format!("{url}/packs/")),
        "the pack is named: {}",
        r.stderr
    );
    assert!(
        r.stderr.contains("damaged") || r.stderr.contains("decompress"),
        "{}",
        r.stderr
    );
    assert!(!dest.exists(), "a failed clone leaves nothing");
}

#[test]
fn wrong_credentials_are_reported() {
    if moto().is_none() {
        return;
    }
    // A second server that checks signatures against its (empty) IAM.
    let Some(port) = start_moto(&[("INITIAL_NO_AUTH_ACTION_COUNT", "0")]) else {
        skip("could not start an authenticating moto server");
        return;
    };
    let ws = Ws::new();
    ws.init();
    write(&ws.root, "a", b"a");
    ws.save();
    let r = run_env(&ws.root, &s3_env(port), &["push", "s3://any/p"]).code(10);
    assert!(
        r.stderr.contains("credentials were refused") || r.stderr.contains("InvalidAccessKeyId"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("s3://any/p/"), "{}", r.stderr);
}

/// `gc --remote`: packs of a killed push are condemned, then deleted by the
/// next gc; a push running during the gc either completes (and its data
/// stays readable) or stops clearly without changing its ref, and a re-run
/// completes; nothing reachable is ever deleted.
fn gc_with_concurrent_push(url: &str, env: &[(&str, String)]) {
    let mut rng = Rng::new("remote_gc", 11);
    let mut env: Vec<(&str, String)> = env.to_vec();
    env.push(("CKPT_REMOTE_PACK_BYTES", "65536".into()));
    let a = Ws::new();
    a.init();
    fill_dir(&a.root, "keep", 30, &mut rng);
    let (v1, _) = a.save();
    run_env(&a.root, &env, &["push", url, "--workspace", "a"]).ok();
    for i in 0..10 {
        write(&a.root, &format!("lost/{i}.bin"), &rng.bytes(40_000));
    }
    let (v2, _) = a.save();
    let mut killed = env.clone();
    killed.push(("CKPT_FAULT", "remote.push.after_pack:4".into()));
    assert_eq!(
        run_env(&a.root, &killed, &["push", url, "--workspace", "a"]).code,
        None
    );

    let g1 = run_env(
        &a.root,
        &env,
        &["gc", "--remote", url, "--grace", "0s", "--json"],
    )
    .ok()
    .json();
    assert_eq!(g1["deleted_packs"], 0, "{g1}");
    assert!(
        g1["condemned_packs"].as_u64().unwrap() >= 4,
        "the killed push's packs: {g1}"
    );

    // Another workspace pushes while gc deletes the condemned packs.
    let b = Ws::new();
    b.init();
    for i in 0..12 {
        write(&b.root, &format!("b/{i}.bin"), &rng.bytes(30_000));
    }
    let (bv, _) = b.save();
    let pusher = spawn_env(&b.root, &env, &["push", url, "--workspace", "b", "--json"]);
    let g2 = run_env(
        &a.root,
        &env,
        &["gc", "--remote", url, "--grace", "0s", "--json"],
    )
    .ok()
    .json();
    assert!(g2["deleted_packs"].as_u64().unwrap() >= 4, "{g2}");
    let r = finish(pusher, "push b");
    if r.code != Some(0) {
        assert!(
            r.stderr.contains("condemned") && r.stderr.contains("run the push again"),
            "{}",
            r.dump()
        );
        run_env(&b.root, &env, &["push", url, "--workspace", "b"]).ok();
    }
    run_env(&a.root, &env, &["push", url, "--workspace", "a"]).ok();
    // Everything the refs name is intact.
    for (ws, name, id) in [(&a, "a", &v1), (&a, "a", &v2), (&b, "b", &bv)] {
        let dest = ws.fresh_dir();
        let src = format!("{url}#{id}");
        run_env(
            ws.tmp.path(),
            &env,
            &["clone", &src, dest.to_str().unwrap(), "--workspace", name],
        )
        .ok();
        assert_same(
            &ws.materialise(id),
            &snapshot(&dest),
            &format!("{name} {id} after gc"),
        );
    }
    assert_every_pack_live(&a.root, &env, url);
}

/// `gc --remote URL --dry-run` run in `cwd` finds every stored pack live.
#[track_caller]
fn assert_every_pack_live(cwd: &Path, env: &[(&str, String)], url: &str) {
    let g = run_env(cwd, env, &["gc", "--remote", url, "--dry-run", "--json"])
        .ok()
        .json();
    assert_eq!(g["live_packs"], g["stored_packs"], "{g}");
}

on_every_remote!(
    gc_with_concurrent_push,
    gc_with_concurrent_push_file_remote,
    gc_with_concurrent_push_s3,
    gc_with_concurrent_push_s3rver
);

/// A `ckpt` process stopped at fault points (`CKPT_FAULT_ACTION=stop`),
/// run on by SIGCONT; SIGKILLed if the test ends first.
struct Paused(Option<Child>);

impl Paused {
    /// Starts `ckpt ARGS` with `points` (`NAME[:N],…`) armed to stop, and
    /// waits until it stops at the first one reached.
    fn start(cwd: &Path, env: &[(&str, String)], args: &[&str], points: &str) -> Paused {
        let mut env = env.to_vec();
        env.push(("CKPT_FAULT", points.into()));
        env.push(("CKPT_FAULT_ACTION", "stop".into()));
        let mut p = Paused(Some(spawn_env(cwd, &env, args)));
        p.wait_stopped(&format!("ckpt {} ({points})", args.join(" ")));
        p
    }

    fn child(&mut self) -> &mut Child {
        self.0.as_mut().expect("running")
    }

    /// Waits until the process is stopped (state `T` in /proc/PID/stat).
    fn wait_stopped(&mut self, what: &str) {
        let t0 = Instant::now();
        loop {
            if self.child().try_wait().unwrap().is_some() {
                let r = finish(self.0.take().unwrap(), what);
                panic!("{what} ended before its fault point: {}", r.dump());
            }
            let stat =
                std::fs::read_to_string(format!("/proc/{}/stat", self.child().id())).unwrap();
            let state = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().next());
            if state == Some("T") {
                return;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(300),
                "{what} never stopped"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn signal(&mut self, sig: i32) {
        // SAFETY: a signal to our own child, which has not been reaped.
        unsafe {
            libc::kill(self.child().id() as i32, sig);
        }
    }

    /// Lets it run on to its next fault point.
    fn resume_to_next(&mut self, what: &str) {
        self.signal(libc::SIGCONT);
        self.wait_stopped(what);
    }

    /// Lets it run to the end.
    fn resume(mut self, what: &str) -> Run {
        self.signal(libc::SIGCONT);
        finish(self.0.take().unwrap(), what)
    }

    /// SIGKILL, like a crash.
    fn kill(mut self) {
        self.signal(libc::SIGKILL);
        let _ = self.0.take().unwrap().wait();
    }
}

impl Drop for Paused {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A push that finds a tree or mtimes node on the remote does not look
/// below it, so it relies on packs it never saw. Driven step by step
/// (processes stopped at fault points, no timing):
/// 1. a first push uploads its pack of file contents and stops;
/// 2. `gc --grace 0s` condemns that pack (nothing reaches it yet);
/// 3. the first push goes on, uploads its pack of trees and mtimes nodes
///    and is killed before its ref;
/// 4. a gc reads the refs (none) and stops before it writes anything: it
///    will delete the content pack (condemned a grace ago);
/// 5. a second push of the same checkpoint finds its root's mtimes node in
///    the tree pack (not condemned) and writes the ref;
/// 6. the gc goes on and deletes the content pack.
///
/// The checkpoint the ref names must still clone whole: the second push saw
/// a non-empty condemned list and checked everything its checkpoint
/// reaches, sending the contents again.
fn gc_below_a_found_tree(url: &str, env: &[(&str, String)]) {
    let mut rng = Rng::new("remote_gc_found_tree", 4);
    let ws = Ws::new();
    ws.init();
    fill_dir(&ws.root, "src", 20, &mut rng);
    write(&ws.root, "src/deeper/x.txt", b"below\n");
    write(&ws.root, "top.txt", b"top\n");
    let (v, _) = ws.save();
    let push = ["push", url, "--workspace", "w", "--json"];
    let gc = ["gc", "--remote", url, "--grace", "0s", "--json"];
    let mut first = Paused::start(
        &ws.root,
        env,
        &push,
        "remote.push.after_pack:1,remote.push.before_ref",
    );
    // The gcs run from another workspace: a stopped process keeps its
    // store locked.
    let admin = Ws::new();
    admin.init();
    let g1 = run_env(&admin.root, env, &gc).ok().json();
    assert_eq!(g1["condemned_packs"], 1, "the content pack: {g1}");
    first.resume_to_next("first push, to before its ref");
    first.kill();

    let g2 = Paused::start(&admin.root, env, &gc, "remote.gc.after_mark");
    let second = run_env(&ws.root, env, &push).ok().json();
    assert_eq!(second["pushed"][0]["id"], v.as_str(), "{second}");
    assert!(
        second["skipped_objects"].as_u64().unwrap() >= 1,
        "the second push found the root's node: {second}"
    );
    let g2 = g2.resume("gc").ok().json();
    assert_eq!(g2["deleted_packs"], 1, "the content pack: {g2}");
    eprintln!("second push: {second}\ngc: {g2}");

    let check = |what: &str| {
        let dest = ws.fresh_dir();
        run_env(
            ws.tmp.path(),
            env,
            &["clone", url, dest.to_str().unwrap(), "--workspace", "w"],
        )
        .ok();
        assert_same(&ws.materialise(&v), &snapshot(&dest), what);
    };
    check("clone after the gc");
    // Later gcs keep everything the ref reaches.
    let g3 = run_env(&admin.root, env, &gc).ok().json();
    assert_eq!(g3["deleted_packs"], 0, "{g3}");
    run_env(&admin.root, env, &gc).ok();
    check("clone after two more gcs");
    assert_every_pack_live(&ws.root, env, url);
}

on_every_remote!(
    gc_below_a_found_tree,
    gc_below_a_found_tree_file_remote,
    gc_below_a_found_tree_s3,
    gc_below_a_found_tree_s3rver
);

/// A workspace 1,800 directories deep (its deepest path about 3,600 bytes,
/// within PATH_MAX) round-trips: push, clone (byte-identical), then a
/// one-file edit at the bottom pushed and pulled. Push's walk and the
/// clone's rebuild keep explicit stacks, so depth costs no stack.
fn deep_tree(url: &str, env: &[(&str, String)]) {
    let ws = Ws::new();
    ws.init();
    let depth = 1800;
    let rel = vec!["d"; depth].join("/");
    for level in (0..depth).step_by(300) {
        let at = vec!["d"; level + 1].join("/");
        write(
            &ws.root,
            &format!("{at}/f{level}.txt"),
            b"on the way down\n",
        );
    }
    write(&ws.root, &format!("{rel}/bottom.txt"), b"deep\n");
    write(&ws.root, "top.txt", b"top\n");
    let (v1, _) = ws.save();
    let want1 = ws.materialise(&v1);
    let p = run_env(&ws.root, env, &["push", url, "--workspace", "w", "--json"])
        .ok()
        .json();
    assert_eq!(p["pushed"][0]["id"], v1.as_str(), "{p}");
    let dest = ws.tmp.path().join("clone");
    run_env(
        ws.tmp.path(),
        env,
        &["clone", url, dest.to_str().unwrap(), "--workspace", "w"],
    )
    .ok();
    assert_same(&want1, &snapshot(&dest), "clone of the deep tree");

    write(&ws.root, &format!("{rel}/bottom.txt"), b"deeper still\n");
    let (v2, _) = ws.save();
    let want2 = ws.materialise(&v2);
    let p2 = run_env(&ws.root, env, &["push", url, "--workspace", "w", "--json"])
        .ok()
        .json();
    assert_eq!(p2["pushed"][0]["id"], v2.as_str(), "{p2}");
    let pl = run_env(&dest, env, &["pull", url, "--workspace", "w", "--json"])
        .ok()
        .json();
    let local = pl["pulled"][0]["id"].as_str().unwrap().to_string();
    ckpt(&dest, &["restore", &local]).ok();
    assert_same(&want2, &snapshot(&dest), "pulled edit restored");
    ckpt(&dest, &["verify", "--store"]).ok();
}

on_every_remote!(
    deep_tree,
    deep_tree_file_remote,
    deep_tree_s3,
    deep_tree_s3rver
);

/// Every object of the remote at `url`, with its raw bytes: the files
/// below a `file://` remote's directory, or an S3 bucket's objects under
/// the prefix, listed and read with plain HTTP (s3rver answers unsigned
/// requests) or boto3 (moto).
fn raw_objects(url: &str, env: &[(&str, String)]) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    if let Some(dir) = url.strip_prefix("file://") {
        let mut stack = vec![PathBuf::from(dir)];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                } else {
                    out.push((p.display().to_string(), std::fs::read(&p).unwrap()));
                }
            }
        }
        return out;
    }
    let rest = url.strip_prefix("s3://").unwrap();
    let (bucket, prefix) = rest.split_once('/').unwrap();
    let endpoint = &env.iter().find(|(k, _)| *k == "AWS_ENDPOINT").unwrap().1;
    let key_id = &env
        .iter()
        .find(|(k, _)| *k == "AWS_ACCESS_KEY_ID")
        .unwrap()
        .1;
    if key_id == "testing" {
        // moto refuses unsigned reads of objects: boto3 (in moto's venv)
        // lists and reads them, as length-prefixed key and body pairs.
        let python = moto_bin().unwrap().with_file_name("python3");
        let script = format!(
            "import boto3,sys\n\
             s3=boto3.client('s3',endpoint_url='{endpoint}',aws_access_key_id='testing',\
             aws_secret_access_key='testing',region_name='us-east-1')\n\
             w=sys.stdout.buffer.write\n\
             for page in s3.get_paginator('list_objects_v2').paginate(Bucket='{bucket}',Prefix='{prefix}/'):\n\
             \x20for o in page.get('Contents',[]):\n\
             \x20\x20b=s3.get_object(Bucket='{bucket}',Key=o['Key'])['Body'].read()\n\
             \x20\x20k=o['Key'].encode()\n\
             \x20\x20w(len(k).to_bytes(4,'little')+k+len(b).to_bytes(8,'little')+b)\n"
        );
        let o = Command::new(python).arg("-c").arg(script).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let b = o.stdout;
        let mut at = 0;
        while at < b.len() {
            let kl = u32::from_le_bytes(b[at..at + 4].try_into().unwrap()) as usize;
            let key = String::from_utf8(b[at + 4..at + 4 + kl].to_vec()).unwrap();
            at += 4 + kl;
            let n = u64::from_le_bytes(b[at..at + 8].try_into().unwrap()) as usize;
            out.push((key, b[at + 8..at + 8 + n].to_vec()));
            at += 8 + n;
        }
        return out;
    }
    let port: u16 = endpoint.rsplit(':').next().unwrap().parse().unwrap();
    let mut token: Option<String> = None;
    loop {
        let mut q = format!("/{bucket}?list-type=2&prefix={prefix}/");
        if let Some(t) = &token {
            q.push_str(&format!("&continuation-token={t}"));
        }
        let (code, body) = http(port, "GET", &q, b"");
        assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
        let text = String::from_utf8_lossy(&body).to_string();
        for part in text.split("<Key>").skip(1) {
            let key = part.split("</Key>").next().unwrap().to_string();
            let (code, bytes) = http(port, "GET", &format!("/{bucket}/{key}"), b"");
            assert_eq!(code, 200, "GET {key}");
            out.push((key, bytes));
        }
        token = text.split("<NextContinuationToken>").nth(1).map(|t| {
            t.split("</NextContinuationToken>")
                .next()
                .unwrap()
                .to_string()
        });
        if token.is_none() {
            break;
        }
    }
    out
}

/// Which of `needles` occur in the bytes or names of `objects`.
fn found_in(objects: &[(String, Vec<u8>)], needles: &[&str]) -> Vec<String> {
    needles
        .iter()
        .filter(|n| {
            objects
                .iter()
                .any(|(k, b)| k.contains(*n) || b.windows(n.len()).any(|w| w == n.as_bytes()))
        })
        .map(|n| n.to_string())
        .collect()
}

/// An encrypted remote (`remote add --encrypt`, key in a key file):
/// - the bucket's bytes and names hold no path, file content, state value,
///   message or workspace name the test wrote (the same workspace pushed
///   in the clear shows them: the check can fail);
/// - a clone with the key is byte for byte the checkpoint, agent state
///   included, and pushes back at once;
/// - a wrong key and a missing key are refused clearly by push and clone,
///   and nothing is written to the remote or the destination;
/// - on `file://`, a tampered pack is detected on clone and named.
fn encrypted(url: &str, env: &[(&str, String)]) {
    let secrets = [
        "zebra-dir-7f3a",
        "quokka-file-2b9c",
        "ZEBRA-CONTENT-91c2",
        "QUOKKA-STATE-5e1d",
        "OKAPI-MESSAGE-33aa",
        "narwhal-ws-8d0e",
    ];
    let mut rng = Rng::new("encrypted", 9);
    let ws = Ws::new();
    ws.init();
    write(
        &ws.root,
        "zebra-dir-7f3a/quokka-file-2b9c.txt",
        b"ZEBRA-CONTENT-91c2\n",
    );
    fill_dir(&ws.root, "src", 30, &mut rng);
    write(&ws.root, "big.bin", &rng.bytes(200_000));
    ws.run(&["state", "put", "task", "QUOKKA-STATE-5e1d"]).ok();
    let r = ws
        .run(&["save", "-m", "OKAPI-MESSAGE-33aa", "--json"])
        .ok()
        .json();
    let id = r["id"].as_str().unwrap().to_string();
    let key_file = ws.tmp.path().join("remote.key");
    std::fs::write(&key_file, "correct horse battery staple\n").unwrap();
    let key = key_file.to_str().unwrap();
    run_env(
        &ws.root,
        env,
        &[
            "remote",
            "add",
            "--encrypt",
            "--key-file",
            key,
            "origin",
            url,
            "--workspace",
            "narwhal-ws-8d0e",
        ],
    )
    .ok();
    let p = run_env(&ws.root, env, &["push", "--json"]).ok().json();
    assert_eq!(p["pushed"][0]["id"], id.as_str(), "{p}");
    let objects = raw_objects(url, env);
    assert!(objects.len() >= 5, "{} objects", objects.len());
    assert_eq!(
        found_in(&objects, &secrets),
        Vec::<String>::new(),
        "plaintext on an encrypted remote"
    );
    if url.starts_with("file://") {
        // The control: in the clear, the same push shows them.
        let plain = format!("{url}-plain");
        run_env(
            &ws.root,
            env,
            &["push", &plain, "--workspace", "narwhal-ws-8d0e"],
        )
        .ok();
        let shown = found_in(&raw_objects(&plain, env), &secrets);
        for s in ["ZEBRA-CONTENT-91c2", "QUOKKA-STATE-5e1d", "narwhal-ws-8d0e"] {
            assert!(
                shown.iter().any(|x| x == s),
                "{s} not in the clear: {shown:?}"
            );
        }
    }

    // A push after a one-file edit costs what it costs on a plain remote
    // (the store knows its own sealed entry).
    write(&ws.root, "src/edited.txt", b"edited\n");
    let (id, _) = ws.save();
    let want = ws.materialise(&id);
    let pe = run_env(&ws.root, env, &["push", "--json"]).ok().json();
    assert_eq!(pe["requests"], 12, "{pe}");

    // Missing and wrong keys: refused, nothing written anywhere.
    let count = || raw_objects(url, env).len();
    let before = count();
    let other = Ws::new();
    other.init();
    write(&other.root, "x.txt", b"other\n");
    other.save();
    let mut wrong: Vec<(&str, String)> = env.to_vec();
    wrong.push(("CKPT_REMOTE_PASSPHRASE", "not the passphrase".into()));
    let dest = ws.fresh_dir();
    for (what, e) in [("missing", env.to_vec()), ("wrong", wrong)] {
        let r = run_env(
            &other.root,
            &e,
            &["push", url, "--workspace", "narwhal-ws-8d0e"],
        )
        .code(2);
        let r2 = run_env(ws.tmp.path(), &e, &["clone", url, dest.to_str().unwrap()]).code(2);
        for r in [&r, &r2] {
            let want_msg = if what == "missing" {
                "no key was given"
            } else {
                "wrong key"
            };
            assert!(
                r.stderr.contains(want_msg) && r.stderr.contains("nothing was changed"),
                "{what} key: {}",
                r.dump()
            );
        }
        assert!(
            !dest.exists(),
            "{what} key: the clone left {}",
            dest.display()
        );
        assert_eq!(count(), before, "{what} key: something was written");
    }

    // With the key: byte for byte, state included; a bare push works.
    let mut keyed: Vec<(&str, String)> = env.to_vec();
    keyed.push(("CKPT_REMOTE_KEY_FILE", key.to_string()));
    let c = run_env(
        ws.tmp.path(),
        &keyed,
        &["clone", url, dest.to_str().unwrap(), "--json"],
    )
    .ok()
    .json();
    assert_eq!(c["cloned"], id.as_str(), "{c}");
    assert_same(&want, &snapshot(&dest), "encrypted clone");
    assert_eq!(state_get(&dest, "task"), "QUOKKA-STATE-5e1d");
    ckpt(&dest, &["verify", "--store"]).ok();
    write(&dest, "more.txt", b"from the clone\n");
    ckpt(&dest, &["save"]).ok();
    let p2 = run_env(&dest, &keyed, &["push", "--json"]).ok().json();
    assert_eq!(p2["pushed"].as_array().unwrap().len(), 1, "{p2}");
    let l = run_env(&ws.root, env, &["log", "--remote", "origin", "--json"])
        .ok()
        .json();
    assert_eq!(l["total"], 3, "{l}");
    // gc reads the sealed refs, records and indexes: everything is live,
    // and a gc with no grace deletes nothing a ref reaches.
    assert_every_pack_live(&ws.root, &keyed, url);
    let g = run_env(
        &ws.root,
        &keyed,
        &["gc", "--remote", url, "--grace", "0s", "--json"],
    )
    .ok()
    .json();
    assert_eq!(g["deleted_packs"], 0, "{g}");
    assert_eq!(g["checkpoints"], 3, "{g}");
    let again = ws.fresh_dir();
    run_env(
        ws.tmp.path(),
        &keyed,
        &["clone", url, again.to_str().unwrap()],
    )
    .ok();
    assert_same(
        &snapshot(&dest),
        &snapshot(&again),
        "clone of the latest after gc",
    );

    if let Some(dir) = url.strip_prefix("file://") {
        // A tampered pack: one byte flipped in the middle of each.
        let mut n = 0;
        for e in std::fs::read_dir(Path::new(dir).join("packs")).unwrap() {
            let p = e.unwrap().path();
            let mut b = std::fs::read(&p).unwrap();
            let mid = b.len() / 2;
            b[mid] ^= 0x01;
            std::fs::write(&p, b).unwrap();
            n += 1;
        }
        assert!(n > 0);
        let dest = ws.fresh_dir();
        let r = run_env(
            ws.tmp.path(),
            &keyed,
            &["clone", url, dest.to_str().unwrap()],
        )
        .code(5);
        assert!(
            r.stderr.contains(&format!("{url}/packs/"))
                && r.stderr.contains("damaged")
                && r.stderr.contains("tampered"),
            "the pack is named: {}",
            r.dump()
        );
        assert!(!dest.exists(), "a failed clone leaves nothing");
    }
}

on_every_remote!(
    encrypted,
    encrypted_remote_file_remote,
    encrypted_remote_s3,
    encrypted_remote_s3rver
);
