//! `ckpt gc --keep-last N --keep-within 24h --keep-tagged KEY [--save-policy]`:
//! flag parsing and printing for retention; the rules and their invariants
//! live in [`ckpt_lib::store::retention`]. Without keep flags and without a saved
//! policy, `ckpt gc` is the plain unreferenced-data sweep (`sweep`).

use std::time::Duration;

use ckpt_lib::store::retention::{self, Policy, RetentionReport};
use ckpt_lib::{Error, Result};
use clap::Args;
use serde_json::json;

use crate::context::Ctx;
use crate::render::{self, print_json, SCHEMA};

/// Arguments of `ckpt gc`.
#[derive(Args)]
pub struct GcArgs {
    /// Only report what would be removed.
    #[arg(long)]
    dry_run: bool,
    /// JSON output.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    keep: KeepArgs,
}

/// Retention flags of `ckpt gc`.
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
pub fn run(ctx: &Ctx, args: &GcArgs) -> Result<()> {
    let (keep, dry_run, json_out) = (&args.keep, args.dry_run, args.json);
    let given = keep.policy();
    if given.keep_last == Some(0) {
        return Err(Error::Usage(
            "--keep-last 0 would keep nothing but HEAD; use `ckpt delete` for that (nothing was changed)"
                .into(),
        ));
    }
    let ws = ctx.ops.workspace()?;
    let store = ws.open_store(&ctx.ops.config)?;
    if keep.save_policy {
        retention::set_configured(&store, &given)?;
        if !ctx.quiet && !json_out {
            println!("saved retention policy: {}", describe(&given));
        }
    }
    let policy = if given.is_empty() {
        retention::configured(&store)?
    } else {
        given
    };
    if policy.is_empty() {
        drop(store);
        return sweep(ctx, dry_run, json_out);
    }
    let rep = retention::apply(&store, &policy, ckpt_copy::fs::now_ns(), dry_run)?;
    print_report(ctx, &rep, dry_run, json_out);
    Ok(())
}

fn print_report(ctx: &Ctx, rep: &RetentionReport, dry_run: bool, json_out: bool) {
    if json_out {
        let mut v = serde_json::to_value(rep).expect("json");
        v["schema"] = json!(SCHEMA);
        v["dry_run"] = json!(dry_run);
        print_json(&v);
        return;
    }
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
pub fn gc_summary(g: &ckpt_lib::store::gc::GcReport, dry_run: bool) -> String {
    format!(
        "{} {} objects ({}) and {} trees; {} objects live in {} checkpoints",
        if dry_run { "would remove" } else { "removed" },
        g.objects_removed,
        render::bytes(g.bytes_freed),
        g.trees_removed,
        g.objects_live,
        g.checkpoints
    )
}

/// Applies the saved policy after a save (`ckpt save`, `ckpt hook`).
pub fn report_retention(ctx: &Ctx, rep: &retention::RetentionReport) {
    if ctx.verbose {
        let freed = rep.gc.as_ref().map_or(0, |g| g.bytes_freed);
        eprintln!(
            "retention: dropped {} checkpoints, freed {}",
            rep.selection.drop.len(),
            render::bytes(freed)
        );
    }
}

/// The plain sweep: removes stored data that no checkpoint references.
fn sweep(ctx: &Ctx, dry_run: bool, json: bool) -> Result<()> {
    let ws = ctx.ops.workspace()?;
    let store = ws.open_store(&ctx.ops.config)?;
    let rep = ckpt_lib::store::gc::gc(&store, dry_run)?;
    if json {
        let mut v = serde_json::to_value(&rep).expect("json");
        v["schema"] = json!(SCHEMA);
        v["dry_run"] = json!(dry_run);
        print_json(&v);
    } else if !ctx.quiet {
        println!("{}", gc_summary(&rep, dry_run));
        for s in &rep.strays {
            println!("warning: unexpected file in the object store: {s}");
        }
    }
    Ok(())
}
