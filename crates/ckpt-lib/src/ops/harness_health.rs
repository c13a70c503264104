//! Why an agent harness configured here records nothing: the warnings
//! `ckpt doctor` and `ckpt status` add for the harnesses whose hooks call
//! ckpt in the workspace.
//!
//! - a gate of the harness is closed ([`ckpt_harness::gates`]: Codex's
//!   project trust and per-hook approval);
//! - the harness ran a session here after ckpt's hooks were written, and no
//!   checkpoint carries that session's tag ([`ckpt_harness::sessions`]).
//!   Every harness's prompt event records a checkpoint even when nothing
//!   changed (see [`super::hook`]), so a session whose hooks ran has one.
//!
//! Reads the catalog only: the checkpoints since the hooks were written,
//! newest first, stopping at the session's first match.

use std::time::UNIX_EPOCH;

use ckpt_harness::Harness;

use crate::store::catalog::CatalogReader;
use crate::Result;

/// One warning about one harness.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HarnessWarning {
    /// The harness.
    pub harness: Harness,
    /// What is wrong and what to do.
    pub problem: String,
}

/// The warnings for the workspace `root` whose catalog `r` is.
pub(crate) fn warnings(
    root: &std::path::Path,
    homes: &ckpt_harness::Homes,
    r: &CatalogReader<'_>,
) -> Result<Vec<HarnessWarning>> {
    let mut out: Vec<HarnessWarning> = ckpt_harness::gates::closed(root, homes)
        .into_iter()
        .map(|c| HarnessWarning {
            harness: c.harness,
            problem: c.problem,
        })
        .collect();
    for s in ckpt_harness::sessions::latest(root, homes) {
        if out.iter().any(|w| w.harness == s.harness) {
            // A closed gate already says why nothing was recorded.
            continue;
        }
        let since_ns = s
            .since
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as i64);
        let mut seen = false;
        r.for_each_newest(None, |cp| {
            if cp.time_ns < since_ns {
                return Ok(false);
            }
            seen = cp.tags.get("session").is_some_and(|t| s.matches(t));
            Ok(!seen)
        })?;
        if seen {
            continue;
        }
        let when = s
            .modified
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as i64);
        out.push(HarnessWarning {
            harness: s.harness,
            problem: format!(
                "{} ran a session here (session {}{}, last active {}, {}) after ckpt's hooks were \
                 written, and no hook recorded anything for it: check that `ckpt` is on the PATH \
                 {} runs hooks with, and that the session started after `ckpt init --agent {} \
                 --write` (a running session keeps the hooks it started with)",
                s.harness.title(),
                s.id,
                if s.prefix { "…" } else { "" },
                super::json::time(when),
                s.file.display(),
                s.harness.title(),
                s.harness.name(),
            ),
        });
    }
    Ok(out)
}
