//! The one configuration value the library takes, built by the caller.
//!
//! The library reads no environment variable: the CLI builds a [`Config`]
//! from its flags and the environment (`crates/ckpt-cli/src/context.rs`,
//! documented in `docs/CLI.md`, "Environment") and passes it to every
//! operation. Tests and other front ends build one directly.

use std::path::PathBuf;
use std::time::Duration;

pub use ckpt_fs::copy::CopyConfig;

/// How ckpt runs: everything a user can tune, in one value.
#[derive(Clone, Debug)]
pub struct Config {
    /// How long to wait for another ckpt process's store lock
    /// (`--lock-timeout`).
    pub lock_timeout: Duration,
    /// Never ask a watcher what changed: scan the whole workspace
    /// (`--full-scan`, `CKPT_FULL_SCAN`).
    pub full_scan: bool,
    /// The copy engine's forced strategy and split threshold
    /// (`CKPT_COPY_STRATEGY`, `CKPT_SPLIT_BYTES`).
    pub copy: CopyConfig,
    /// Files at least this large are stored in bands (`CKPT_BAND_MIN`;
    /// default [`crate::store::bands::DEFAULT_BAND_MIN`]).
    pub band_min: Option<u64>,
    /// Where `ckpt init` puts stores by default: `<data_home>/ckpt/stores`
    /// (`$XDG_DATA_HOME`, else `$HOME/.local/share` when `$HOME` exists).
    /// `None` (no usable home), or a place that cannot be created: beside
    /// the workspace (see [`crate::workspace`], "Where the store lives").
    pub data_home: Option<PathBuf>,
    /// Whether `ckpt hook` starts the workspace's watcher when none runs,
    /// and how long such a watcher waits without a request before it
    /// stops itself (`CKPT_HOOK_WATCH`: seconds, or `off`; default
    /// [`HOOK_WATCH_IDLE`]). `None`: hooks start no watcher.
    pub hook_watch: Option<Duration>,
    /// Where agent harnesses keep their user-level state, for the checks of
    /// their gates and the sessions they ran (`ckpt doctor`, `ckpt
    /// status`): `$CODEX_HOME`, else `~/.codex`; `$CLAUDE_CONFIG_DIR`, else
    /// `~/.claude`; `~/.gemini`; `~/.copilot`.
    pub harness_homes: ckpt_harness::Homes,
}

/// How long a watcher started by a hook stays up without a request: long
/// enough to outlast a pause between two agent turns, short enough that
/// watchers of abandoned workspaces do not pile up.
pub const HOOK_WATCH_IDLE: Duration = Duration::from_secs(30 * 60);

impl Default for Config {
    fn default() -> Self {
        Config {
            lock_timeout: Duration::from_secs(60),
            full_scan: false,
            copy: CopyConfig::default(),
            band_min: None,
            data_home: None,
            hook_watch: Some(HOOK_WATCH_IDLE),
            harness_homes: Default::default(),
        }
    }
}

impl Config {
    /// The defaults, waiting at most `lock_timeout` for the store lock.
    pub fn locking(lock_timeout: Duration) -> Config {
        Config {
            lock_timeout,
            ..Config::default()
        }
    }
}
