//! `ckpt cp SRC DST`: the copy engine as a standalone `cp -a`
//! ([`ckpt_fs::copytree`] has what is preserved and how). No workspace and
//! no store: SRC and DST are plain paths, relative to the context's
//! directory. Unset options fall back to the configured copy options.
//!
//! Invariant: only new paths are created; nothing existing is overwritten.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ckpt_fs::copy::Strategy;
use ckpt_fs::copytree::{self, CpOptions, CpReport, Progress};
use serde::{Serialize, Serializer};

use super::json::{with, Schema};
use super::Context;
use crate::Result;

/// What [`cp`] copies, and how.
#[derive(Clone, Copy, Debug)]
pub struct CopyOptions<'a> {
    /// The file or directory to copy.
    pub src: &'a Path,
    /// A new path, or an existing directory to copy into.
    pub dst: &'a Path,
    /// A forced copy strategy; None: the configured one, else the best the
    /// kernel accepts.
    pub strategy: Option<Strategy>,
    /// Copy files of at least this many bytes as parallel ranges; None: the
    /// configured threshold, else the default.
    pub split_at: Option<u64>,
    /// Counters advanced as data is copied (for a progress bar).
    pub progress: Option<&'a Progress>,
}

/// What [`cp`] did.
#[derive(Debug)]
pub struct CopyReport {
    /// The source, absolute.
    pub src: PathBuf,
    /// The copy engine's report (`target`: the path created).
    pub report: CpReport,
    /// How long it took.
    pub elapsed: Duration,
}

/// The JSON form of a [`CopyReport`]: `to`, `files`, `dirs`, `symlinks`,
/// `hard_links`, `specials`, `skipped_sockets`, `skipped_xattrs`, `bytes`,
/// `reflinked`, `kernel_copied`, `user_copied`, `elapsed_ms`.
#[derive(Serialize, schemars::JsonSchema)]
struct CopyForm<'a> {
    schema: Schema,
    #[serde(serialize_with = "with::path")]
    #[schemars(with = "String")]
    to: &'a Path,
    files: u64,
    dirs: u64,
    symlinks: u64,
    hard_links: u64,
    specials: u64,
    skipped_sockets: u64,
    skipped_xattrs: u64,
    bytes: u64,
    reflinked: u64,
    kernel_copied: u64,
    user_copied: u64,
    #[serde(serialize_with = "with::ms")]
    #[schemars(with = "f64")]
    elapsed_ms: Duration,
}

super::json::schema_via!(CopyReport => CopyForm<'static>);

impl Serialize for CopyReport {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let rep = &self.report;
        CopyForm {
            schema: Schema,
            to: &rep.target,
            files: rep.files,
            dirs: rep.dirs,
            symlinks: rep.symlinks,
            hard_links: rep.hard_links,
            specials: rep.specials,
            skipped_sockets: rep.skipped_sockets,
            skipped_xattrs: rep.skipped_xattrs,
            bytes: rep.bytes,
            reflinked: rep.reflinked,
            kernel_copied: rep.kernel_copied,
            user_copied: rep.user_copied,
            elapsed_ms: self.elapsed,
        }
        .serialize(s)
    }
}

/// Copies `opts.src` to `opts.dst`.
pub fn cp(ctx: &Context, opts: &CopyOptions<'_>) -> Result<CopyReport> {
    let t0 = Instant::now();
    let src = ctx.abs(opts.src);
    let dst = ctx.abs(opts.dst);
    let copy = CpOptions {
        strategy: opts.strategy.or(ctx.config.copy.strategy),
        split_at: opts.split_at.or(ctx.config.copy.split_at),
    };
    let local = Progress::default();
    let progress = opts.progress.unwrap_or(&local);
    let report = copytree::copy_path(&src, &dst, &copy, progress)?;
    Ok(CopyReport {
        src,
        report,
        elapsed: t0.elapsed(),
    })
}
