//! `ckpt doctor`: the facts behind the copy strategy — filesystems, copy
//! capabilities probed now and cached in the store at init, store location
//! and free space, inotify limits (and whether the workspace's directories
//! fit them), and the strategy ckpt will use and why
//! ([`crate::platform::doctor`]), and the fork backend a fork beside the
//! workspace gets ([`crate::engine::fork::backend`]). Changes nothing (the
//! reflink probe's temporary files are removed).

use schemars::JsonSchema;
use serde::Serialize;

use super::json::Schema;
use super::Context;
use crate::engine::fork::backend::{self, Backend, Choice, OverlayProbes};
use crate::platform::doctor::{self, Report};
use crate::Result;

/// What [`doctor()`] is told beyond the configuration.
#[derive(Clone, Debug, Default)]
pub struct DoctorOptions {
    /// Why the requested forced strategy (`CKPT_COPY_STRATEGY`) names no
    /// strategy, when it does not: reported instead of the configured one.
    pub bad_strategy: Option<String>,
}

/// What [`doctor()`] found. JSON: the [`Report`] fields, `fork_backend`
/// (`backend`, `why`, `probes`: each `backend`, `works`, `why`),
/// `overlay_mount` (`mount` (here, as root) and `namespace` (a new user and
/// mount namespace, for `fork … -- CMD`): each `works`, `why`) and
/// `harnesses`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct DoctorReport {
    /// `"schema": 1`.
    pub schema: Schema,
    /// The diagnosis.
    #[serde(flatten)]
    pub report: Report,
    /// The backend a fork beside the workspace (`../NAME-fork`) gets, and
    /// every backend's probe (overlay's: either of `overlay`'s works).
    #[serde(rename = "fork_backend")]
    pub fork: Choice,
    /// Whether overlay mounts work there: as root, and in a namespace.
    #[serde(rename = "overlay_mount")]
    pub overlay: OverlayProbes,
    /// The agent harnesses whose hooks call ckpt here, each with the
    /// reason it will not run them or records nothing, if any
    /// ([`super::harness_health`]).
    pub harnesses: Vec<HarnessHooks>,
}

/// One harness configured to call `ckpt hook` in the workspace.
#[derive(Debug, Serialize, JsonSchema)]
pub struct HarnessHooks {
    /// The harness's name.
    pub harness: &'static str,
    /// Why the harness will not run the hooks yet (`null`: nothing known).
    pub warning: Option<String>,
}

/// Diagnoses the workspace's filesystems and copy strategy.
pub fn doctor(ctx: &Context, opts: &DoctorOptions) -> Result<DoctorReport> {
    let ws = ctx.workspace()?;
    let (cached, dirs) = {
        let store = ws.open_store_read_only(&ctx.config)?;
        let caps = store.catalog.reader()?.caps()?;
        let index = store.load_index()?;
        (
            caps,
            (!index.dirs.is_empty()).then_some(index.dirs.len() as u64),
        )
    };
    let forced = match &opts.bad_strategy {
        Some(e) => Err(e.clone()),
        None => Ok(ctx.config.copy.strategy),
    };
    let report = doctor::diagnose(&ws.root, &ws.store_path, cached, forced, dirs)?;
    let mut beside = ws.root.as_os_str().to_owned();
    beside.push("-fork");
    let beside = std::path::Path::new(&beside);
    let mut fork = backend::choose(&ws.root, &ws.store_path, beside, None, false, true)?;
    let overlay = backend::probe_overlay(beside);
    if let Some(p) = fork
        .probes
        .iter_mut()
        .find(|p| p.backend == Backend::Overlay)
    {
        p.works = overlay.mount.works || overlay.namespace.works;
        p.why = format!(
            "{}; in a namespace (`-- CMD`): {} (used only when asked for: `--backend overlay` or `-- CMD`)",
            overlay.mount.why, overlay.namespace.why
        );
    }
    let closed = {
        let store = ws.open_store_read_only(&ctx.config)?;
        let r = store.catalog.reader()?;
        super::harness_health::warnings(&ws.root, &ctx.config.harness_homes, &r)?
    };
    let harnesses = ckpt_harness::Harness::ALL
        .into_iter()
        .filter(|h| ckpt_harness::setup::installed(&ws.root, *h))
        .map(|h| HarnessHooks {
            harness: h.name(),
            warning: closed
                .iter()
                .find(|c| c.harness == h)
                .map(|c| c.problem.clone()),
        })
        .collect();
    Ok(DoctorReport {
        schema: Schema,
        harnesses,
        report,
        fork,
        overlay,
    })
}
