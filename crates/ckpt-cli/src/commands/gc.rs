//! `ckpt gc --keep-last N --keep-within 24h --keep-tagged KEY [--save-policy]`:
//! flag parsing and printing for [`ckpt_lib::ops::gc`]; the rules and their
//! invariants live in ckpt-lib's `store/retention.rs`. Without keep flags and
//! without a saved policy, `ckpt gc` is the plain unreferenced-data sweep.

use std::time::Duration;

use ckpt_lib::ops;
use ckpt_lib::ops::gc::{GcOptions, GcRun};
use ckpt_lib::ops::parts::{Policy, RetentionReport, SweepReport};
use clap::Args;

use crate::context::Ctx;
use crate::render::{self, print_report};

// Arguments of `ckpt gc`.
#[derive(Args)]
pub struct GcArgs {
    /// Only report what would be removed.
    #[arg(long)]
    dry_run: bool,
    /// JSON output.
    #[arg(long)]
    json: bool,
    /// Collect a remote instead (a name or URL): delete packs no ref reaches,
    /// after they stayed unreachable for --grace (safe with concurrent pushers).
    #[arg(long, value_name = "REMOTE", conflicts_with_all = ["keep_last", "keep_within", "keep_tagged", "save_policy"])]
    remote: Option<String>,
    /// With --remote: how long a pack stays condemned before it is deleted.
    #[arg(long, value_name = "AGE", value_parser = parse_age, default_value = "1h", requires = "remote")]
    grace: Duration,
    #[command(flatten)]
    keep: KeepArgs,
}

// Retention flags of `ckpt gc`.
#[derive(Args, Debug, Default)]
pub struct KeepArgs {
    /// Keep the N newest checkpoints.
    #[arg(long, value_name = "N")]
    keep_last: Option<usize>,
    /// Keep checkpoints younger than this (e.g. 90m, 24h, 7d).
    #[arg(long, value_name = "AGE", value_parser = parse_age)]
    keep_within: Option<Duration>,
    /// Keep checkpoints with this tag key, or exactly KEY=VALUE (repeatable).
    #[arg(long, value_name = "KEY[=VALUE]")]
    keep_tagged: Vec<String>,
    /// Save these keep rules as the workspace's policy, applied after every
    /// save (no keep flags: remove the saved policy).
    #[arg(long, conflicts_with = "dry_run")]
    save_policy: bool,
}

fn parse_age(s: &str) -> std::result::Result<Duration, String> {
    humantime::parse_duration(s).map_err(|e| format!("{s:?}: {e} (try 30m, 24h, 7d)"))
}

impl KeepArgs {
    fn policy(&self) -> Policy {
        Policy {
            keep_last: self.keep_last,
            keep_within_secs: self.keep_within.map(|d| d.as_secs()),
            keep_tagged: self.keep_tagged.clone(),
        }
    }
}

/// Describes a policy in words.
pub fn describe(p: &Policy) -> String {
    if p.is_empty() {
        return "none (keep every checkpoint)".into();
    }
    let mut parts = Vec::new();
    if let Some(n) = p.keep_last {
        parts.push(format!("the last {n}"));
    }
    if let Some(d) = p.keep_within() {
        parts.push(format!("those within {}", humantime::format_duration(d)));
    }
    if !p.keep_tagged.is_empty() {
        parts.push(format!("those tagged {}", p.keep_tagged.join(" or ")));
    }
    format!("keep {} (and HEAD)", parts.join(", "))
}

/// `ckpt gc` with its retention flags.
pub fn run(ctx: &Ctx, args: &GcArgs) -> std::result::Result<(), crate::exit::Error> {
    if let Some(remote) = &args.remote {
        return Ok(remote_gc(ctx, args, remote)?);
    }
    let opts = GcOptions {
        dry_run: args.dry_run,
        keep: args.keep.policy(),
        save_policy: args.keep.save_policy,
    };
    let out = ops::gc::gc(&ctx.ops, &opts)?;
    if args.json {
        print_report(&out);
        return Ok(());
    }
    if let (Some(p), false) = (&out.saved_policy, ctx.quiet) {
        println!("saved retention policy: {}", describe(p));
    }
    match &out.run {
        GcRun::Sweep(rep) => print_sweep(ctx, rep, out.dry_run),
        GcRun::Retention(rep) => print_retention(ctx, rep, out.dry_run),
    }
    Ok(())
}

fn print_retention(ctx: &Ctx, rep: &RetentionReport, dry_run: bool) {
    if ctx.quiet {
        return;
    }
    let ids = |s: &[u64]| {
        s.iter()
            .map(|q| format!("v{q}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    println!("policy: {}", describe(&rep.policy));
    if rep.selection.drop.is_empty() {
        println!("all {} checkpoints are kept", rep.selection.keep.len());
    } else {
        println!(
            "{} {} checkpoints: {}; keeping {}",
            if dry_run { "would drop" } else { "dropped" },
            rep.selection.drop.len(),
            ids(&rep.selection.drop),
            rep.selection.keep.len()
        );
    }
    if let Some(g) = &rep.gc {
        println!("{}", gc_summary(g, dry_run));
    }
}

/// The one-line summary of a gc (`ckpt gc`, and the gc after a retention run).
pub fn gc_summary(g: &SweepReport, dry_run: bool) -> String {
    format!(
        "{} {} objects ({} on disk) and {} trees; {} objects live in {} checkpoints",
        if dry_run { "would remove" } else { "removed" },
        g.objects_removed,
        render::bytes(g.bytes_freed),
        g.trees_removed,
        g.objects_live,
        g.checkpoints
    )
}

/// Applies the saved policy after a save (`ckpt save`, `ckpt hook`).
pub fn report_retention(ctx: &Ctx, rep: &RetentionReport) {
    if ctx.verbose {
        let freed = rep.gc.as_ref().map_or(0, |g| g.bytes_freed);
        eprintln!(
            "retention: dropped {} checkpoints, freed {}",
            rep.selection.drop.len(),
            render::bytes(freed)
        );
    }
}

/// The plain sweep's summary, and the stray files it left alone.
fn print_sweep(ctx: &Ctx, rep: &SweepReport, dry_run: bool) {
    if ctx.quiet {
        return;
    }
    println!("{}", gc_summary(rep, dry_run));
    for s in &rep.strays {
        println!("warning: unexpected file in the object store: {s}");
    }
}

/// `ckpt gc --remote`.
fn remote_gc(ctx: &Ctx, args: &GcArgs, remote: &str) -> ckpt_remote::Result<()> {
    let opts = ckpt_remote::gc::GcOptions {
        remote: Some(remote),
        grace: args.grace,
        dry_run: args.dry_run,
        settings: ctx.remote()?,
    };
    let rep = ckpt_remote::gc::gc(&ctx.ops, &opts)?;
    if args.json {
        print_report(&rep);
    } else if !ctx.quiet {
        println!(
            "{} {} packs ({}); condemned {} (deleted by a gc after {}); {} of {} packs live, {} checkpoints in {} workspaces",
            if rep.dry_run { "would delete" } else { "deleted" },
            rep.deleted_packs,
            render::bytes(rep.deleted_bytes),
            rep.condemned_packs,
            humantime::format_duration(args.grace),
            rep.live_packs,
            rep.packs,
            rep.checkpoints,
            rep.workspaces
        );
        println!("{}", render::transfer(&rep.transfer));
    }
    Ok(())
}
