//! The gates a harness puts between its configuration and ckpt's hooks,
//! checked from outside so that a user learns why nothing is recorded.
//!
//! ckpt never passes a gate itself (approving its own hooks would take the
//! decision from the user). It only reads what the harness keeps:
//!
//! - **Codex** reads a project's `.codex/` only when the project is
//!   trusted: a `[projects."DIR"]` table with `trust_level = "trusted"` in
//!   `$CODEX_HOME/config.toml` (default `~/.codex`), for the directory or
//!   an ancestor. Each hook must then be approved by its hash in the TUI;
//!   that second gate is not checked (the hash is Codex's own), so the
//!   warning for the first says to approve the hooks too.
//!
//! Each check costs a `stat` when the harness's hooks file is absent, so
//! `ckpt status` can afford it.

use std::path::{Path, PathBuf};

use crate::setup;
use crate::Harness;

/// Where the harnesses keep their user-level state.
#[derive(Clone, Debug, Default)]
pub struct Homes {
    /// `$CODEX_HOME`, else `~/.codex`.
    pub codex: Option<PathBuf>,
}

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
        if let Some(problem) = codex_untrusted(root, homes.codex.as_deref()) {
            out.push(Closed {
                harness: Harness::Codex,
                problem,
            });
        }
    }
    out
}

/// Why Codex will not read `root/.codex/`, or `None` when the project is
/// trusted.
fn codex_untrusted(root: &Path, home: Option<&Path>) -> Option<String> {
    let Some(home) = home else {
        return Some(
            "Codex: cannot tell whether this project is trusted (no $CODEX_HOME or $HOME); \
             Codex ignores .codex/hooks.json in an untrusted project"
                .into(),
        );
    };
    let config = home.join("config.toml");
    let text = std::fs::read_to_string(&config).unwrap_or_default();
    let trusted = text.parse::<toml::Table>().ok().is_some_and(|t| {
        let projects = t.get("projects").and_then(toml::Value::as_table);
        root.ancestors().any(|dir| {
            projects
                .and_then(|p| p.get(dir.to_str().unwrap_or_default()))
                .and_then(|p| p.get("trust_level"))
                .and_then(toml::Value::as_str)
                == Some("trusted")
        })
    });
    (!trusted).then(|| {
        format!(
            "Codex ignores {} because the project is not trusted in {}: nothing is recorded \
             from Codex until you start `codex` here, trust the project and approve the hooks \
             (`/hooks`)",
            root.join(Harness::Codex.spec().path).display(),
            config.display()
        )
    })
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
        // Trusting an ancestor (Codex's project root) opens the gate.
        std::fs::write(
            home.join("config.toml"),
            format!(
                "model = \"x\"\n[projects.\"{}\"]\ntrust_level = \"trusted\"\n",
                base.join("proj").display()
            ),
        )
        .unwrap();
        assert!(closed(&root, &homes).is_empty());
        std::fs::write(home.join("config.toml"), "not = [toml").unwrap();
        assert_eq!(closed(&root, &homes).len(), 1);
        std::fs::remove_dir_all(&base).unwrap();
    }
}
