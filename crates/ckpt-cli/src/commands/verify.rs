//! `ckpt verify [ID]` / `ckpt verify --store`: the workspace against a checkpoint, or the store's integrity.

use std::process::ExitCode;

use ckpt_lib::ops;
use ckpt_lib::ops::verify::{
    StoreCheck, VerifyOptions, VerifyReport, VerifyTarget, WorkspaceCheck,
};
use ckpt_lib::Result;

use crate::context::Ctx;
use crate::exit::{EXIT_DIFFERS, EXIT_STORE_DAMAGED};
use crate::progress;
use crate::render::{self, print_report};

// Arguments of `ckpt verify`.
#[derive(clap::Args)]
pub struct VerifyArgs {
    /// Checkpoint id.
    id: Option<String>,
    /// Check the store instead of the workspace.
    #[arg(long)]
    store: bool,
    /// JSON output.
    #[arg(long)]
    json: bool,
}

/// Runs `ckpt verify`; the exit code says whether it matched.
pub fn run(ctx: &Ctx, args: &VerifyArgs) -> Result<ExitCode> {
    let target = if args.store {
        VerifyTarget::Store
    } else {
        VerifyTarget::Workspace {
            rev: args.id.clone(),
        }
    };
    let spinner = match target {
        VerifyTarget::Workspace { .. } => Some(progress::Spinner::start(
            "verifying",
            ctx.quiet || args.json,
        )),
        VerifyTarget::Store => None,
    };
    let rep = ops::verify::verify(&ctx.ops, &VerifyOptions { target })?;
    drop(spinner);
    if args.json {
        print_report(&rep);
    }
    Ok(match &rep {
        VerifyReport::Store(s) => {
            if !args.json {
                print_store(ctx, s);
            }
            if s.ok() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(EXIT_STORE_DAMAGED)
            }
        }
        VerifyReport::Workspace(w) => {
            if !args.json {
                print_workspace(ctx, w);
            }
            if w.matches() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(EXIT_DIFFERS)
            }
        }
    })
}

/// `verify --store` for people: each problem, then a summary.
fn print_store(ctx: &Ctx, s: &StoreCheck) {
    let rep = &s.report;
    for p in &rep.problems {
        println!(
            "{} {}: {} (used by {})",
            p.what,
            p.id,
            p.error,
            p.checkpoints.join(", ")
        );
    }
    if !ctx.quiet {
        println!(
            "{}: {} checkpoints, {} trees, {} objects ({}) checked in {}",
            if s.ok() {
                "store is intact"
            } else {
                "STORE IS DAMAGED"
            },
            rep.checkpoints,
            rep.trees,
            rep.objects,
            render::bytes(rep.bytes),
            render::ms(s.elapsed)
        );
    }
}

/// `verify [ID]` for people: the match, or the differences.
fn print_workspace(ctx: &Ctx, w: &WorkspaceCheck) {
    let rep = &w.report;
    if w.matches() {
        if !ctx.quiet {
            let rate = rep.bytes as f64 / w.elapsed.as_secs_f64().max(1e-9);
            println!(
                "matches {} (digest {}); {} files, {} read in {} ({}/s)",
                rep.checkpoint.id(),
                &w.expected_hex()[..16],
                rep.files,
                render::bytes(rep.bytes),
                render::ms(w.elapsed),
                render::bytes(rate as u64)
            );
        }
    } else {
        println!("differs from {}:", rep.checkpoint.id());
        for c in w.differences() {
            println!("{}", render::change_line(c));
        }
    }
}
