//! [`Fleet`]: a workspace whose store and forks share one data home, so
//! forks find each other (the fork tests, forks.rs and fork_overlay.rs).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use super::*;

/// A data home shared by every command of a test (forks find each other
/// through its list of stores).
pub struct Fleet {
    /// The workspace (its store goes to the data home).
    pub ws: Ws,
    /// The data home.
    pub xdg: PathBuf,
}

impl Fleet {
    /// A fleet under the usual test directory.
    pub fn new() -> Fleet {
        Fleet::new_in(&test_base())
    }

    /// A fleet under `base` (its workspace initialised).
    pub fn new_in(base: &Path) -> Fleet {
        let ws = Ws::new_in(base);
        let xdg = ws.tmp.path().join("xdg");
        std::fs::create_dir(&xdg).unwrap();
        let f = Fleet { ws, xdg };
        let root = f.ws.root.to_str().unwrap().to_string();
        f.at(f.ws.tmp.path(), &["init", &root]).ok();
        f
    }

    /// `ckpt ARGS` in `cwd` with the fleet's data home.
    pub fn cmd(&self, cwd: &Path, args: &[&str]) -> std::process::Command {
        let a: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
        let mut c = command(cwd, &a);
        c.env("XDG_DATA_HOME", &self.xdg);
        c
    }

    /// Runs `ckpt ARGS` in `cwd`.
    pub fn at(&self, cwd: &Path, args: &[&str]) -> Run {
        run_command(self.cmd(cwd, args), format!("ckpt {}", args.join(" ")))
    }

    /// Runs `ckpt ARGS` in the workspace.
    pub fn run(&self, args: &[&str]) -> Run {
        self.at(&self.ws.root, args)
    }

    /// `ckpt save --json` in `dir`.
    pub fn save(&self, dir: &Path) -> serde_json::Value {
        self.at(dir, &["save", "--json"]).ok().json()
    }

    /// A path in the fleet's temporary directory.
    pub fn dir(&self, name: &str) -> PathBuf {
        self.ws.tmp.path().join(name)
    }

    /// `ckpt verify --store` in `dir` is clean.
    pub fn verify_store(&self, dir: &Path) {
        let r = self.at(dir, &["verify", "--store", "--json"]);
        assert_eq!(
            r.code,
            Some(0),
            "verify --store in {}:\n{}",
            dir.display(),
            r.dump()
        );
        assert_eq!(r.json()["ok"], true);
    }

    /// The store the workspace `dir` names.
    pub fn store_of(&self, dir: &Path) -> PathBuf {
        let m: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join(".ckpt")).unwrap()).unwrap();
        PathBuf::from(m["store"].as_str().unwrap())
    }

    /// Whether overlay mounts work beside the workspace (`namespace`: in a
    /// new namespace, for `fork … -- CMD`; else here, as root), as `ckpt
    /// doctor` says; when not, the caller is skipped with its reason.
    pub fn overlay_works(&self, namespace: bool) -> bool {
        let doc = self.run(&["doctor", "--json"]).ok().json();
        let p = &doc["overlay_mount"][if namespace { "namespace" } else { "mount" }];
        if p["works"] == true {
            return true;
        }
        skip_needs_root(&format!("overlay mounts: {}", p["why"]));
        false
    }
}

impl Default for Fleet {
    fn default() -> Self {
        Fleet::new()
    }
}

/// `at_least` to `at_least + 3` random edits below `root`, each a file of
/// the tree (never the `.ckpt` marker) modified, deleted or chmodded, or a
/// new file `new-TAG-I/fI.txt` added. The fork tests compare snapshots
/// afterwards, so nothing is returned.
pub fn random_edits(root: &Path, rng: &mut Rng, tag: &str, at_least: u64) {
    let snap = snapshot(root);
    let files: Vec<&Vec<u8>> = snap
        .iter()
        .filter(|(k, s)| matches!(s.what, What::File(_)) && k.as_slice() != b".ckpt")
        .map(|(k, _)| k)
        .collect();
    for i in 0..(at_least + rng.below(4)) {
        let pick = |rng: &mut Rng| {
            let f = files[rng.below(files.len() as u64) as usize];
            root.join(String::from_utf8_lossy(f).as_ref())
        };
        match rng.below(4) {
            0 => {
                let p = pick(rng);
                if p.exists() {
                    chmod(&p, 0o644);
                    let len = 50 + rng.below(3000) as usize;
                    std::fs::write(&p, rng.text(len)).unwrap();
                }
            }
            1 => write(root, &format!("new-{tag}-{i}/f{i}.txt"), &rng.bytes(100)),
            2 => {
                let _ = std::fs::remove_file(pick(rng));
            }
            _ => {
                let p = pick(rng);
                if p.exists() {
                    chmod(&p, if rng.below(2) == 0 { 0o600 } else { 0o755 });
                }
            }
        }
    }
}
