//! The real agent-harness CLIs for the tests that run them (harnesses.rs,
//! plugins.rs): where `tests/harness/install.sh` put them, and the PATH
//! that puts the `ckpt` under test first.

use std::path::{Path, PathBuf};

use super::*;

/// `tests/harness` (the CLIs' pins, install.sh, drive.py, the model
/// stand-in); `$CKPT_HARNESS_DIR` overrides.
pub fn harness_dir() -> PathBuf {
    std::env::var_os("CKPT_HARNESS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/harness"))
}

/// Where `install.sh` put the CLIs (`$CKPT_HARNESS_BIN` overrides).
pub fn clis() -> PathBuf {
    std::env::var_os("CKPT_HARNESS_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../../target/harness-clis/node_modules/.bin")
        })
}

/// Whether `name`'s CLI is installed; a reported skip if not.
pub fn have(name: &str) -> bool {
    let ok = clis().join(name).exists();
    if !ok {
        skip(&format!(
            "the {name} CLI is not installed in {} (run crates/ckpt-cli/tests/harness/install.sh target/harness-clis)",
            clis().display()
        ));
    }
    ok
}

/// The directory holding the `ckpt` under test.
pub fn ckpt_dir() -> PathBuf {
    Path::new(bin()).parent().unwrap().to_path_buf()
}

/// PATH for a harness: the `ckpt` under test first, then the test's own.
pub fn path_with_ckpt() -> String {
    format!(
        "{}:{}",
        ckpt_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    )
}
