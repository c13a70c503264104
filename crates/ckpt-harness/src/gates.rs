//! The gates a harness puts between its configuration and ckpt's hooks,
//! checked from outside so that a user learns why nothing is recorded.
//!
//! ckpt never passes a gate itself (approving its own hooks would take the
//! decision from the user). It only reads what the harness keeps:
//!
//! - **Codex** reads a project's `.codex/` only when the project is
//!   trusted, and runs each hook only once the user approved it by its
//!   hash; both are read from `$CODEX_HOME/config.toml` (default
//!   `~/.codex`), see `harness/codex.rs`.
//!
//! Each check costs a `stat` when the harness's hooks file is absent, and
//! two small file reads when it is there, so `ckpt status` can afford it.

use std::path::Path;

use crate::setup;
use crate::{Harness, Homes};

/// A gate that stops a harness from running ckpt's hooks here.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Closed {
    /// The harness.
    pub harness: Harness,
    /// What is wrong and what to do.
    pub problem: String,
}

/// The closed gates for the workspace `root`.
pub fn closed(root: &Path, homes: &Homes) -> Vec<Closed> {
    let mut out = Vec::new();
    if root.join(Harness::Codex.spec().path).exists() && setup::installed(root, Harness::Codex) {
        if let Some(problem) = crate::harness::codex::untrusted(root, homes.codex.as_deref()) {
            out.push(Closed {
                harness: Harness::Codex,
                problem,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codex_trust_is_read_from_its_config() {
        let base = std::env::temp_dir().join(format!("ckpt-gates-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let root = base.join("proj/app");
        let home = base.join("codex-home");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        let homes = Homes {
            codex: Some(home.clone()),
            ..Homes::default()
        };
        // No hooks installed: no gate to report.
        assert!(closed(&root, &homes).is_empty());
        setup::plan(&root, Harness::Codex, setup::Action::Install)
            .unwrap()
            .apply()
            .unwrap();
        let c = closed(&root, &homes);
        assert_eq!(c.len(), 1);
        assert!(c[0].problem.contains("not trusted"), "{c:?}");
        // Trusting an ancestor (Codex's project root) opens the first gate;
        // the hooks themselves are not approved yet.
        let project = format!(
            "model = \"x\"\n[projects.\"{}\"]\ntrust_level = \"trusted\"\n",
            base.join("proj").display()
        );
        std::fs::write(home.join("config.toml"), &project).unwrap();
        let c = closed(&root, &homes);
        assert_eq!(c.len(), 1);
        assert!(
            c[0].problem
                .contains("not approved yet: UserPromptSubmit, PreToolUse, PostToolUse, Stop"),
            "{c:?}"
        );
        // Approving each hook as Codex's TUI records it opens the second.
        let hooks_file = std::fs::canonicalize(&root)
            .unwrap()
            .join(".codex/hooks.json");
        let approve = |skip: &str, hash_of_stop: &str| {
            let mut t = project.clone();
            for (event, label, hash) in crate::harness::codex::tests::CODEX_HASHES {
                let hash = if *event == "Stop" { hash_of_stop } else { hash };
                if *event != skip {
                    t.push_str(&format!(
                        "[hooks.state.\"{}:{label}:0:0\"]\ntrusted_hash = \"{hash}\"\n",
                        hooks_file.display()
                    ));
                }
            }
            std::fs::write(home.join("config.toml"), t).unwrap();
        };
        let stop = crate::harness::codex::tests::CODEX_HASHES[3].2;
        approve("", stop);
        assert_eq!(closed(&root, &homes), vec![], "every hook approved");
        approve("PreToolUse", stop);
        let c = closed(&root, &homes);
        assert!(
            c[0].problem.contains("not approved yet: PreToolUse)"),
            "{c:?}"
        );
        approve("", "sha256:0000");
        let c = closed(&root, &homes);
        assert!(
            c[0].problem
                .contains("changed since you approved them: Stop"),
            "{c:?}"
        );
        approve("", stop);
        let mut t = std::fs::read_to_string(home.join("config.toml")).unwrap();
        t = t.replacen("trusted_hash", "enabled = false\ntrusted_hash", 1);
        std::fs::write(home.join("config.toml"), t).unwrap();
        let c = closed(&root, &homes);
        assert!(
            c[0].problem
                .contains("turned off in /hooks: UserPromptSubmit"),
            "{c:?}"
        );
        std::fs::write(home.join("config.toml"), "not = [toml").unwrap();
        assert_eq!(closed(&root, &homes).len(), 1);
        std::fs::remove_dir_all(&base).unwrap();
    }
}
