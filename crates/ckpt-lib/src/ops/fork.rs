//! `ckpt fork ID DIR`: a checkpoint materialised as a new, independent
//! workspace with its own store ([`crate::engine::fork`] has the store
//! decision and the `link` caveat).
//!
//! The backend is chosen here, once per `fork` or `fork --count` call
//! ([`crate::engine::fork::backend::choose`]: forced by `--backend` or the
//! fastest proven to work). Invariant: the fork is never inside the source
//! workspace (refused before anything is written). Its store goes where `store` says, else by the
//! usual rule under the configured data home.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ckpt_fs::copytree::Progress;
use rayon::prelude::*;
use schemars::JsonSchema;
use serde::{Serialize, Serializer};

use super::json::{self, Schema};
use super::{normalize, Context};
use crate::engine::fork::backend::{self, Backend, Choice};
use crate::engine::fork::overlay;
use crate::engine::fork::{self, SnapshotRestore};
use crate::engine::materialize::{MaterializeOptions, MaterializeReport, Verified};
use crate::engine::scanner::ScanPlan;
use crate::store::objects::Imported;
use crate::watch::client::Plan;
use crate::workspace::Workspace;
use crate::{Error, Result};

/// What [`fork()`] makes.
#[derive(Clone, Copy, Debug)]
pub struct ForkOptions<'a> {
    /// The checkpoint (`v12`, `HEAD~1`, a hash prefix, …).
    pub rev: &'a str,
    /// The new workspace (relative to the context's directory): a new or
    /// empty directory outside this workspace.
    pub dir: &'a std::path::Path,
    /// Where to keep the fork's store (relative to the context's
    /// directory); None: the usual rule.
    pub store: Option<&'a std::path::Path>,
    /// Hard-link files to the store's objects instead of copying them.
    pub link: bool,
    /// Counters advanced as files are written (for a progress bar).
    pub progress: Option<&'a Progress>,
    /// Use this backend or fail (`--backend`); None: the best that works.
    pub backend: Option<Backend>,
    /// `-- CMD ARGS…`: an overlay fork mounted in a new namespace where
    /// this command runs; the fork returns when it exits (the mount is then
    /// gone, the fork's layers and store stay).
    pub command: Option<&'a [std::ffi::OsString]>,
}

/// What [`fork()`] did. JSON: `forked`, `to`, `store`, `backend`,
/// `backend_why`, `files`, `dirs`, `bytes` (what was written: a subvolume
/// fork writes only the differences), `restored` (subvolume: `written`,
/// `removed`, `watcher`; else null), `link`, `objects`, `store_snapshot`
/// (the fork's store is a snapshot of ours: `objects` then moved none),
/// `overlay` (an overlay fork: `lower`, `lower_made`, `upper`, `work`,
/// `mount` (`persistent` or `namespace`), `index_mapped`,
/// `command_status`; else null), `elapsed_ms`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ForkReport {
    /// `"schema": 1` (also on each fork of a [`ForkManyReport`]).
    pub schema: Schema,
    /// What was written.
    #[serde(flatten, serialize_with = "forked")]
    #[schemars(with = "ForkedForm")]
    pub report: MaterializeReport,
    /// The new workspace's root.
    #[serde(serialize_with = "json::with::path")]
    #[schemars(with = "String")]
    pub to: PathBuf,
    /// The new workspace's store.
    #[serde(serialize_with = "json::with::path")]
    #[schemars(with = "String")]
    pub store: PathBuf,
    /// Files were hard-linked to the source store's objects.
    pub link: bool,
    /// How the fork's store got the checkpoint's objects.
    #[serde(serialize_with = "json::with::imported")]
    #[schemars(with = "json::ImportedForm")]
    pub objects: Imported,
    /// The fork's store is a btrfs snapshot of this workspace's store.
    pub store_snapshot: bool,
    /// The backend that made it.
    pub backend: Backend,
    /// Why that backend (or why another than the chosen one was used).
    #[serde(rename = "backend_why")]
    pub why: String,
    /// A subvolume fork: what the restore after the snapshot changed.
    pub restored: Option<SnapshotRestore>,
    /// An overlay fork: its layers and mount.
    pub overlay: Option<OverlayInfo>,
    /// How long it took.
    #[serde(rename = "elapsed_ms", serialize_with = "json::with::ms")]
    #[schemars(with = "f64")]
    pub elapsed: Duration,
}

/// The fields of [`ForkReport`] that come from the engine's report.
#[derive(Serialize, JsonSchema)]
struct ForkedForm {
    forked: String,
    files: u64,
    dirs: u64,
    bytes: u64,
}

fn forked<S: Serializer>(rep: &MaterializeReport, s: S) -> std::result::Result<S::Ok, S::Error> {
    ForkedForm {
        forked: rep.target.id(),
        files: rep.files,
        dirs: rep.dirs,
        bytes: rep.bytes,
    }
    .serialize(s)
}

/// An overlay fork's layers and how it was mounted.
#[derive(Debug, Serialize, JsonSchema)]
pub struct OverlayInfo {
    /// The shared lower directory (in this workspace's store).
    #[serde(serialize_with = "json::with::path")]
    #[schemars(with = "String")]
    pub lower: PathBuf,
    /// This fork wrote the lower (else an earlier fork of the checkpoint).
    pub lower_made: bool,
    /// The mount.
    #[serde(flatten, serialize_with = "super::forks::mounted")]
    #[schemars(with = "super::forks::MountedForm<'static>")]
    pub mounted: overlay::Mounted,
}

/// The fork's directory, refused when it is the workspace or inside it.
fn outside(ctx: &Context, ws: &Workspace, dir: &Path) -> Result<PathBuf> {
    let dest = normalize(&ctx.abs(dir));
    if dest.starts_with(&ws.root) {
        return Err(Error::Usage(format!(
            "{} is inside the workspace {}; fork into a directory outside it (nothing was changed)",
            dest.display(),
            ws.root.display()
        )));
    }
    Ok(dest)
}

/// The backend for a fork of `ws` into `dest` (see
/// [`crate::engine::fork::backend::choose`]); `--link` always writes files
/// (hard links), so it takes the reflink/copy path.
fn choose(ws: &Workspace, dest: &Path, opts: &ForkOptions<'_>) -> Result<Choice> {
    let forced = match (opts.command, opts.backend) {
        (None, b) => b,
        (Some(_), None | Some(Backend::Overlay)) => Some(Backend::Overlay),
        (Some(_), Some(b)) => {
            return Err(Error::Usage(format!(
                "`-- CMD` runs CMD over an overlay fork; it cannot be used with --backend {} (nothing was changed)",
                b.name()
            )))
        }
    };
    if opts.link && forced.is_some_and(|b| b != Backend::Reflink && b != Backend::Copy) {
        return Err(Error::Usage(
            "--link hard-links files to the store's objects, which only the reflink and copy backends write (nothing was changed)".into(),
        ));
    }
    let mut choice = backend::choose(
        &ws.root,
        &ws.store_path,
        dest,
        forced,
        opts.command.is_some(),
        false,
    )?;
    if opts.command.is_some() && opts.backend.is_none() {
        choice.why = choice
            .why
            .replacen("forced by --backend", "asked for by `-- CMD`", 1);
    }
    if opts.link && choice.backend == Backend::BtrfsSubvolume {
        choice.backend = choice.after(Backend::BtrfsSubvolume);
        choice.why = "--link writes every file as a hard link to its store object".into();
    }
    Ok(choice)
}

/// Forks checkpoint `opts.rev` of the workspace into `opts.dir`.
pub fn fork(ctx: &Context, opts: &ForkOptions<'_>) -> Result<ForkReport> {
    let ws = ctx.workspace()?;
    let dest = outside(ctx, &ws, opts.dir)?;
    let t = crate::trace::span("choose backend");
    let choice = choose(&ws, &dest, opts)?;
    drop(t);
    fork_with(ctx, &ws, opts, &dest, &choice, None)
}

fn fork_with(
    ctx: &Context,
    ws: &Workspace,
    opts: &ForkOptions<'_>,
    dest: &Path,
    choice: &Choice,
    verified: Option<&Verified>,
) -> Result<ForkReport> {
    let t0 = Instant::now();
    // A watcher's index and token on disk, before the lock is ours.
    let t = crate::trace::span("watcher persist");
    ctx.client().persist(&ws.store_path);
    drop(t);
    let store = open_origin(ctx, ws, choice)?;
    let new_store = opts.store.map(|s| ctx.abs(s));
    let mopts = MaterializeOptions {
        link: opts.link,
        progress: opts.progress,
        verified,
        ..MaterializeOptions::default()
    };
    let (forked, lower) = if choice.backend == Backend::Overlay {
        let (f, l) = overlay::fork(
            &store,
            &ws.root,
            opts.rev,
            dest,
            new_store.as_deref(),
            &ctx.config,
            mopts,
        )?;
        (f, Some(l))
    } else {
        let f = fork::fork(
            &store,
            &ws.root,
            opts.rev,
            dest,
            new_store.as_deref(),
            &ctx.config,
            choice,
            mopts,
            &|| watcher_plan(ctx, ws, &store),
            true,
        )?;
        (f, None)
    };
    drop(store);
    let mut rep = ForkReport {
        link: opts.link,
        ..report(ctx, forked, choice, t0)
    };
    if let Some(l) = lower {
        let mounted = mount_new(ctx, ws, &rep, opts.command)?;
        rep.overlay = Some(OverlayInfo {
            lower: l.lower,
            lower_made: l.lower_made,
            mounted,
        });
        rep.elapsed = t0.elapsed();
    }
    // The watcher spared the fork its scan: its inodes are cold.
    if rep.restored.is_some_and(|r| r.watcher) {
        let _t = crate::trace::span("watcher warm");
        ctx.client()
            .warm(&ws.store_path, std::slice::from_ref(&rep.to));
    }
    Ok(rep)
}

/// Opens (and locks) this workspace's store for a fork. A subvolume fork
/// only reads it, so it is opened read-only: the catalog is then never
/// open for writing while its snapshot is taken, and the fork's store
/// opens without a repair (a catalog snapshotted while open for writing
/// looks like one whose writer crashed).
fn open_origin(ctx: &Context, ws: &Workspace, choice: &Choice) -> Result<crate::store::Store> {
    match choice.backend {
        Backend::BtrfsSubvolume => ws.open_store_read_only(&ctx.config),
        _ => ws.open_store(&ctx.config),
    }
}

/// Mounts the overlay fork just made (`rep`), running `command` in it if
/// given; when the mount fails the fork is removed again, so nothing was
/// changed (beyond a lower it made, which the next fork uses).
fn mount_new(
    ctx: &Context,
    ws: &Workspace,
    rep: &ForkReport,
    command: Option<&[std::ffi::OsString]>,
) -> Result<overlay::Mounted> {
    let mut cmd = command.map(super::forks::command);
    match overlay::mount(&rep.to, &rep.store, &ctx.config, cmd.as_mut()) {
        Ok(m) => Ok(m),
        Err(e) => {
            let _ = super::forks::remove_overlay(ctx, ws, &rep.to, &rep.store);
            Err(e)
        }
    }
}

/// The report of the fork `forked`, started at `t0`, whose store is
/// recorded in the data home's list.
fn report(ctx: &Context, forked: fork::Forked, choice: &Choice, t0: Instant) -> ForkReport {
    // Not waited for: freeing an index of many directories takes a while.
    if let Some(ix) = forked.index {
        crate::platform::drop_later(ix);
    }
    let store_path = forked.workspace.store_path;
    crate::workspace::known::record(ctx.config.data_home.as_deref(), &store_path);
    ForkReport {
        schema: Schema,
        report: forked.report,
        to: forked.workspace.root,
        store: store_path,
        link: false,
        objects: forked.objects,
        store_snapshot: forked.store_snapshot,
        backend: forked.backend,
        why: forked.note.unwrap_or_else(|| choice.why.clone()),
        restored: forked.restored,
        overlay: None,
        elapsed: t0.elapsed(),
    }
}

/// What [`fork_many`] made. JSON: `forks` (each as `ckpt fork --json`),
/// `elapsed_ms`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ForkManyReport {
    /// `"schema": 1`.
    pub schema: Schema,
    /// One report per fork, in order.
    pub forks: Vec<ForkReport>,
    /// How long all of it took.
    #[serde(rename = "elapsed_ms", serialize_with = "json::with::ms")]
    #[schemars(with = "f64")]
    pub elapsed: Duration,
}

/// The directories of [`fork_many`]: `PREFIX1` … `PREFIXn`.
pub fn numbered(prefix: &std::path::Path, n: usize) -> Vec<PathBuf> {
    (1..=n)
        .map(|i| {
            let mut p = prefix.as_os_str().to_owned();
            p.push(i.to_string());
            PathBuf::from(p)
        })
        .collect()
}

/// Makes `n` forks of `opts.rev` into `opts.dir` + `1` … `n` (`ckpt fork
/// --count`). Every directory is checked (new or empty, outside the
/// workspace) before the first fork is made; if one fork fails, the
/// others made stay (each is complete and independent) and the error says
/// which were made. On the btrfs-subvolume backend, when this
/// workspace's store is a subvolume, one hidden template fork is made and
/// each fork copies it by two snapshots, without a scan ([`make_template`]),
/// several at once ([`clone_all`]).
pub fn fork_many(ctx: &Context, opts: &ForkOptions<'_>, n: usize) -> Result<ForkManyReport> {
    let t0 = Instant::now();
    if n == 0 {
        return Err(Error::Usage(
            "--count must be at least 1 (nothing was changed)".into(),
        ));
    }
    if opts.command.is_some() {
        return Err(Error::Usage(
            "`-- CMD` runs one command over one overlay fork: drop --count (nothing was changed)"
                .into(),
        ));
    }
    if opts.store.is_some() && n > 1 {
        return Err(Error::Usage(
            "--store names one store, and each fork needs its own: drop --store with --count (nothing was changed)".into(),
        ));
    }
    let ws = ctx.workspace()?;
    let mut dests = Vec::with_capacity(n);
    for d in numbered(opts.dir, n) {
        let dest = outside(ctx, &ws, &d)?;
        crate::engine::materialize::check_fresh(&dest, "a fork")?;
        dests.push(dest);
    }
    let choice = choose(&ws, &dests[0], opts)?;
    let cloned = n > 1 && choice.backend == Backend::BtrfsSubvolume && fork::can_clone(&ws);
    let template = if cloned {
        make_template(ctx, &ws, opts, &dests[0], &choice)?
    } else {
        None
    };
    if let Some(t) = &template {
        let made = clone_all(ctx, t, &dests, &choice);
        drop_template(template.as_ref());
        if let Some(ix) = template.and_then(|t| t.index) {
            crate::platform::drop_later(ix);
        }
        return made.map(|forks| {
            let elapsed = t0.elapsed();
            // Copies of a template are never scanned: their inodes are cold.
            let dirs: Vec<PathBuf> = forks.iter().map(|f| f.to.clone()).collect();
            ctx.client().warm(&ws.store_path, &dirs);
            ForkManyReport {
                schema: Schema,
                forks,
                elapsed,
            }
        });
    }
    // Each object is hashed once for all the forks.
    let verified = Verified::default();
    let mut forks = Vec::with_capacity(n);
    for d in &dests {
        let one = ForkOptions { dir: d, ..*opts };
        match fork_with(ctx, &ws, &one, d, &choice, Some(&verified)) {
            Ok(r) => forks.push(r),
            Err(e) => return Err(partly_made(&forks, d, e)),
        }
    }
    Ok(ForkManyReport {
        schema: Schema,
        forks,
        elapsed: t0.elapsed(),
    })
}

/// The error of a `fork --count` whose fork into `failed` failed with `e`
/// after `made` were made (they stay: each is complete and independent).
fn partly_made(made: &[ForkReport], failed: &Path, e: Error) -> Error {
    if made.is_empty() {
        return e;
    }
    let made: Vec<String> = made.iter().map(|f| f.to.display().to_string()).collect();
    Error::Partly {
        message: format!(
            "fork into {} failed (nothing of it is left): {e}; the forks made stay: {}\n  remove them with `ckpt fork --remove DIR`, or keep them",
            failed.display(),
            made.join(", ")
        ),
        cause: Box::new(e),
    }
}

/// How many copies of a `fork --count` template are made at once. Each is
/// two btrfs snapshots and a few small commits: the time goes to waiting
/// for btrfs transaction commits, which concurrent snapshots share.
const CLONES_AT_ONCE: usize = 8;

/// One copy of [`clone_all`], and how long it took.
type Made = Result<(fork::Forked, Duration)>;

/// Makes every directory of `dests` a copy of the template `t`
/// ([`fork::clone_fork`]), [`CLONES_AT_ONCE`] at a time; the reports in
/// the order of `dests`. Each copy is all or nothing and independent of
/// the others, so those made stay when one fails (the error names them).
fn clone_all(
    ctx: &Context,
    t: &fork::Forked,
    dests: &[PathBuf],
    choice: &Choice,
) -> Result<Vec<ForkReport>> {
    // Held (locked) while the copies are made; read-only, so that each
    // snapshot of it holds a cleanly closed catalog (see [`open_origin`]).
    let tstore = t.workspace.open_store_read_only(&ctx.config)?;
    let (head, origin) = {
        let r = tstore.catalog.reader()?;
        match (r.head_checkpoint()?, r.origin()?) {
            (Some(h), Some(o)) => (h, o),
            _ => {
                return Err(Error::Corrupt(format!(
                    "the fork template {} has no head or origin",
                    t.workspace.store_path.display()
                )))
            }
        }
    };
    // Every copy's store is a snapshot of the template's, whose index its
    // restore left in memory; read (once) only when that is not the
    // template store's base file.
    let read;
    let known = match t
        .index
        .as_ref()
        .filter(|ix| ix.snapshot_base(&tstore.index_path()).is_some())
    {
        Some(ix) => Some(ix),
        None => {
            read = tstore.load_index().ok();
            read.as_ref()
        }
    };
    // Every copy's store first, then every publish ([`fork::clone_fork`]).
    let all = || -> Vec<Made> {
        let started: Vec<Result<(fork::StagedCopy, Instant)>> = dests
            .par_iter()
            .map(|d| {
                let t0 = Instant::now();
                fork::clone_fork(&t.workspace, &head, &origin, d, &ctx.config, known)
                    .map(|c| (c, t0))
            })
            .collect();
        // The renames one after another: each is a small metadata change.
        let _t = crate::trace::span("publish copies");
        started
            .into_iter()
            .map(|r| r.and_then(|(c, t0)| c.publish().map(|f| (f, t0.elapsed()))))
            .collect()
    };
    // A pool of its own: these threads mostly wait on the filesystem.
    let made: Vec<Made> = match rayon::ThreadPoolBuilder::new()
        .num_threads(CLONES_AT_ONCE.min(dests.len()))
        .stack_size(crate::store::tree::WALK_STACK)
        .build()
    {
        Ok(pool) => pool.install(all),
        Err(_) => all(),
    };
    drop(tstore);
    // One fsync of each directory that received a fork or a store, after
    // all the renames ([`fork::StagedCopy::publish`]).
    let t1 = Instant::now();
    let sync_span = crate::trace::span("sync forks");
    let parents: BTreeSet<&Path> = made
        .iter()
        .flatten()
        .flat_map(|(f, _)| [&f.workspace.root, &f.workspace.store_path])
        .filter_map(|p| p.parent())
        .collect();
    if let Err(e) = parents.into_iter().try_for_each(fork::sync_dir) {
        let placed: Vec<String> = made
            .iter()
            .flatten()
            .map(|(f, _)| f.workspace.root.display().to_string())
            .collect();
        return Err(Error::Partly {
            message: format!(
                "{e}: the forks {} are in place but may not survive a power cut; run `sync`",
                placed.join(", ")
            ),
            cause: Box::new(e),
        });
    }
    let synced = t1.elapsed();
    drop(sync_span);
    let mut forks = Vec::with_capacity(dests.len());
    let mut failed = None;
    for (d, r) in dests.iter().zip(made) {
        match r {
            Ok((f, elapsed)) => {
                // What the template's restore wrote is this fork's too.
                let f = fork::Forked {
                    report: t.report.clone(),
                    restored: t.restored,
                    ..f
                };
                let mut rep = report(ctx, f, choice, Instant::now());
                rep.elapsed = elapsed + synced;
                forks.push(rep);
            }
            Err(e) => {
                failed.get_or_insert((d, e));
            }
        }
    }
    match failed {
        Some((d, e)) => Err(partly_made(&forks, d, e)),
        None => Ok(forks),
    }
}

/// What a live watcher of this workspace vouches for (a subvolume fork then
/// scans only what it names in the snapshot: [`fork::fork`]).
fn watcher_plan(ctx: &Context, ws: &Workspace, store: &crate::store::Store) -> ScanPlan {
    match ctx.client().plan(ws, store) {
        Plan::Partial { dirs, .. } => ScanPlan::Partial(dirs),
        Plan::Full { .. } => ScanPlan::Full,
    }
}

/// The template of `fork --count` on the btrfs-subvolume backend: one
/// ordinary fork into a hidden sibling of the first directory
/// (`.<name>.ckpt-template.<pid>`), which every fork then copies by
/// snapshots without a scan ([`fork::clone_fork`]). None when its store is
/// not a subvolume (the origin's store is not one): then each fork is made
/// on its own.
fn make_template(
    ctx: &Context,
    ws: &Workspace,
    opts: &ForkOptions<'_>,
    first: &Path,
    choice: &Choice,
) -> Result<Option<fork::Forked>> {
    remove_dead_templates(first);
    let pid = std::process::id();
    let dir = fork::hidden_sibling(first, TEMPLATE, pid)?;
    // The store in a directory of its own: snapshots made at once into one
    // directory commit one by one (see [`fork::clone_fork`]).
    let tstore_dir = fork::hidden_sibling(first, TEMPLATE_STORE, pid)?;
    let tstore = tstore_dir.join("store");
    ctx.client().persist(&ws.store_path);
    let store = open_origin(ctx, ws, choice)?;
    let t = fork::fork(
        &store,
        &ws.root,
        opts.rev,
        &dir,
        Some(&tstore),
        &ctx.config,
        choice,
        MaterializeOptions::default(),
        &|| watcher_plan(ctx, ws, &store),
        false,
    )
    .inspect_err(|_| {
        let _ = std::fs::remove_dir(&tstore_dir);
    })?;
    drop(store);
    if fork::can_clone(&t.workspace) {
        return Ok(Some(t));
    }
    drop_template(Some(&t));
    Ok(None)
}

/// The tags of [`make_template`]'s directory and of its store, both
/// beside the first fork's directory.
const TEMPLATE: &str = "ckpt-template";
const TEMPLATE_STORE: &str = "ckpt-template-store";

/// Removes what a `fork --count` that died left beside `first`: its
/// template, its template's staging directory
/// (`..<name>.ckpt-template.<pid>.ckpt-fork.<pid>`) and its template's
/// store.
fn remove_dead_templates(first: &Path) {
    let (Some(parent), Some(name)) = (first.parent(), first.file_name()) else {
        return;
    };
    let name = name.to_string_lossy();
    let Ok(rd) = std::fs::read_dir(parent) else {
        return;
    };
    for e in rd.flatten() {
        let n = e.file_name().to_string_lossy().into_owned();
        let Some(rest) = n
            .strip_prefix('.')
            .map(|r| r.strip_prefix('.').unwrap_or(r))
        else {
            continue;
        };
        let Some(rest) = rest.strip_prefix(&*name) else {
            continue;
        };
        let pid = [TEMPLATE_STORE, TEMPLATE].iter().find_map(|tag| {
            let digits = rest.strip_prefix(&format!(".{tag}."))?;
            let end = digits.find('.').unwrap_or(digits.len());
            digits[..end].parse::<u32>().ok()
        });
        if pid.is_some_and(|p| !Path::new(&format!("/proc/{p}")).exists()) {
            fork::remove_tree(&e.path());
        }
    }
}

/// Removes the template and its store (best effort: what a crash leaves
/// is removed by the next `fork --count` into the same prefix).
fn drop_template(t: Option<&fork::Forked>) {
    if let Some(t) = t {
        fork::remove_tree(&t.workspace.store_path);
        if let Some(dir) = t.workspace.store_path.parent() {
            let _ = std::fs::remove_dir(dir);
        }
        fork::remove_tree(&t.workspace.root);
    }
}
