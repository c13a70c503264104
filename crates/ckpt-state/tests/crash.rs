//! Crash and multi-process tests. The test binary re-executes itself as a child process
//! (test `child_process_entry`, inert unless `CKPT_STATE_CHILD` is set):
//! - crash: the child commits in strict mode from 4 threads (group commit) and prints each
//!   acknowledged version; the parent SIGKILLs it after a random number of acks, 30 times
//!   on the same store, then checks that every acknowledged commit is present and that no
//!   version shows a partial transaction;
//! - multi-process: two children concurrently open/commit/close the same store; both must
//!   succeed and every commit must be present;
//! - creation: the child creates a new store and commits once; the parent SIGKILLs it at a
//!   random moment of that, 40 times, and the store must open every time (with the commit
//!   if it was acknowledged).
//!
//! Correctness assertions never depend on timing: the kill moment is random, the checks
//! hold for any kill moment.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use ckpt_state::{Durability, Options, RetryPolicy, StateStore};

const CHILD_ENV: &str = "CKPT_STATE_CHILD";
const PATH_ENV: &str = "CKPT_STATE_PATH";
const ID_ENV: &str = "CKPT_STATE_ID";
const GROUPS: usize = 4;
const KEYS_PER_TXN: usize = 4;

fn num(v: &[u8]) -> u64 {
    std::str::from_utf8(v).unwrap().parse().unwrap()
}

fn open_strict(path: &Path) -> StateStore {
    let opts = Options {
        durability: Durability::Strict,
        lock_timeout: Duration::from_secs(60),
        ..Options::default()
    };
    StateStore::open(path, opts).unwrap()
}

/// One transaction: counter += 1 and every key of group `g` := tag. Returns the version.
fn commit_tagged(store: &StateStore, g: usize, tag: &str) -> u64 {
    let policy = RetryPolicy {
        max_attempts: 100_000,
        ..RetryPolicy::default()
    };
    store
        .transaction_with_retry(policy, |t| {
            let n = t.get(b"counter").map_or(0, |v| num(&v));
            t.put(b"counter", (n + 1).to_string().as_bytes());
            for i in 0..KEYS_PER_TXN {
                t.put(format!("g{g}/{i}").as_bytes(), tag.as_bytes());
            }
            Ok(())
        })
        .unwrap()
        .1
}

#[test]
fn child_process_entry() {
    let Ok(mode) = std::env::var(CHILD_ENV) else {
        return; // normal test run: nothing to do
    };
    let path = PathBuf::from(std::env::var(PATH_ENV).unwrap());
    let id: usize = std::env::var(ID_ENV).unwrap().parse().unwrap();
    match mode.as_str() {
        "crash" => {
            let store = std::sync::Arc::new(open_strict(&path));
            println!("OPEN");
            let handles: Vec<_> = (0..GROUPS)
                .map(|g| {
                    let store = store.clone();
                    std::thread::spawn(move || {
                        for i in 0..5000 {
                            let tag = format!("{id}-{g}-{i}");
                            let v = commit_tagged(&store, g, &tag);
                            println!("ACK {v} {g} {tag}");
                        }
                    })
                })
                .collect();
            for h in handles {
                h.join().unwrap();
            }
        }
        "multi" => {
            for round in 0..15 {
                let store = open_strict(&path);
                let tag = format!("p{id}-{round}");
                let v = commit_tagged(&store, id, &tag);
                store.close().unwrap();
                println!("ACK {v} {id} {tag}");
            }
        }
        "create" => {
            println!("READY");
            let store = open_strict(&path);
            let v = commit_tagged(&store, 0, "created");
            println!("ACK {v} 0 created");
            store.close().unwrap();
        }
        other => panic!("unknown child mode {other}"),
    }
}

fn child(mode: &str, path: &Path, id: usize) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "child_process_entry",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, mode)
        .env(PATH_ENV, path)
        .env(ID_ENV, id.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[derive(Debug)]
struct Ack {
    version: u64,
    group: usize,
    tag: String,
}

fn parse_ack(line: &str) -> Option<Ack> {
    // libtest may print "test child_process_entry ... " in front of the child's first line.
    let mut it = line[line.find("ACK ")? + 4..].split(' ');
    Some(Ack {
        version: it.next()?.parse().ok()?,
        group: it.next()?.parse().ok()?,
        tag: it.next()?.to_string(),
    })
}

/// Every acknowledged commit present; every version all-or-nothing and counter == version.
fn verify(path: &Path, acks: &[Ack]) {
    let store = open_strict(path);
    let latest = store.latest_version();
    for a in acks {
        assert!(
            a.version <= latest,
            "acknowledged version {} lost (latest {latest})",
            a.version
        );
        let s = store.snapshot(a.version).unwrap();
        for i in 0..KEYS_PER_TXN {
            assert_eq!(
                s.get(format!("g{}/{i}", a.group).as_bytes()).as_deref(),
                Some(a.tag.as_bytes()),
                "acknowledged commit {} ({}) not fully present",
                a.version,
                a.tag
            );
        }
    }
    for v in 1..=latest {
        let s = store.snapshot(v).unwrap();
        assert_eq!(
            s.get(b"counter").map(|c| num(&c)),
            Some(v),
            "counter at version {v}"
        );
        for g in 0..GROUPS {
            let vals: Vec<_> = (0..KEYS_PER_TXN)
                .map(|i| s.get(format!("g{g}/{i}").as_bytes()))
                .collect();
            assert!(
                vals.iter().all(|x| x == &vals[0]),
                "partial transaction visible at version {v}: group {g} = {vals:?}"
            );
        }
    }
    store.close().unwrap();
}

#[test]
fn sigkill_during_strict_commits_loses_no_acknowledged_commit() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.redb");
    let mut acks = Vec::new();
    let mut seed: u64 = 0x2545_F491_4F6C_DD1D ^ std::process::id() as u64;
    let mut rand = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let iterations = 30;
    for iter in 0..iterations {
        let mut c = child("crash", &path, iter);
        let stdout = c.stdout.take().unwrap();
        let mut lines = BufReader::new(stdout).lines();
        // Kill after a random number of acknowledgements (0 = possibly during open/recovery).
        let kill_after = rand() % 24;
        let mut seen = 0;
        let mut opened = false;
        if kill_after > 0 {
            for line in lines.by_ref() {
                let line = line.unwrap();
                // libtest prints "test child_process_entry ... " before the child's first line.
                if line.ends_with("OPEN") {
                    opened = true;
                }
                if let Some(a) = parse_ack(&line) {
                    acks.push(a);
                    seen += 1;
                    if seen >= kill_after {
                        break;
                    }
                }
            }
            if !(opened && seen >= kill_after) {
                let _ = c.kill();
                panic!("child ended early: {:?}", c.wait_with_output());
            }
        }
        // A random extra delay spreads the kill over the commit cycle (fsync in flight, etc.).
        std::thread::sleep(Duration::from_micros(rand() % 3000));
        c.kill().unwrap(); // SIGKILL
        c.wait().unwrap();
        // Acks already written to the pipe before the kill were acknowledged too.
        for line in lines {
            if let Some(a) = parse_ack(&line.unwrap()) {
                acks.push(a);
            }
        }
        if iter % 10 == 9 {
            verify(&path, &acks);
        }
    }
    assert!(
        acks.len() >= 30,
        "too few commits acknowledged: {}",
        acks.len()
    );
    eprintln!(
        "{iterations} SIGKILLs, {} acknowledged commits verified",
        acks.len()
    );
    verify(&path, &acks);
}

#[test]
fn two_processes_commit_concurrently_and_all_commits_are_present() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.redb");
    let children: Vec<_> = (0..2).map(|id| child("multi", &path, id)).collect();
    let mut acks = Vec::new();
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "child failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        for line in String::from_utf8(out.stdout).unwrap().lines() {
            if let Some(a) = parse_ack(line) {
                acks.push(a);
            }
        }
    }
    assert_eq!(acks.len(), 30);
    let mut versions: Vec<u64> = acks.iter().map(|a| a.version).collect();
    versions.sort();
    assert_eq!(versions, (1..=30).collect::<Vec<_>>());
    let store = open_strict(&path);
    assert_eq!(store.latest_version(), 30);
    assert_eq!(store.get(b"counter").map(|c| num(&c)), Some(30));
    drop(store);
    verify(&path, &acks);
}

#[test]
fn sigkill_while_a_store_is_created_never_leaves_an_unopenable_file() {
    let dir = tempfile::tempdir().unwrap();
    let mut seed: u64 = 0x9E37_79B9_7F4A_7C15 ^ std::process::id() as u64;
    let mut acknowledged = 0;
    for iter in 0..40 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let path = dir.path().join(format!("s{iter}/state.redb"));
        let mut c = child("create", &path, 0);
        let mut lines = BufReader::new(c.stdout.take().unwrap()).lines();
        let ready = lines.by_ref().any(|l| l.unwrap().ends_with("READY"));
        assert!(ready, "child ended early: {:?}", c.wait_with_output());
        // Creation and the first commit take a few milliseconds here (three fsyncs and
        // a directory fsync): spread the kills over them and a little beyond.
        std::thread::sleep(Duration::from_micros(seed % 6000));
        c.kill().unwrap(); // SIGKILL
        c.wait().unwrap();
        let acked = lines.any(|l| parse_ack(&l.unwrap()).is_some());
        let store = StateStore::open(&path, Options::default())
            .unwrap_or_else(|e| panic!("iteration {iter}: the store no longer opens: {e}"));
        if acked {
            acknowledged += 1;
            assert_eq!(store.get(b"g0/0").as_deref(), Some(&b"created"[..]));
        }
        drop(store);
        let leftover = path.with_file_name("state.redb.new");
        assert!(
            !leftover.exists(),
            "iteration {iter}: {leftover:?} left behind"
        );
    }
    eprintln!("40 SIGKILLs during creation, {acknowledged} after the first commit");
}

#[test]
fn a_creation_interrupted_before_its_rename_is_redone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.redb");
    // What a crash inside the first open leaves: a partial database under the temporary
    // name and nothing at the real path.
    std::fs::write(dir.path().join("state.redb.new"), [0u8; 4096]).unwrap();
    let store = open_strict(&path);
    assert_eq!(store.latest_version(), 0);
    let v = store.put(b"k", b"v").unwrap();
    store.close().unwrap();
    assert!(!dir.path().join("state.redb.new").exists());
    let store = open_strict(&path);
    assert_eq!(store.latest_version(), v);
    assert_eq!(store.get(b"k").as_deref(), Some(&b"v"[..]));
}
