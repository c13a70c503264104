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
