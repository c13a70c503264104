//! `ckpt verify [ID]` / `ckpt verify --store`: the workspace against a checkpoint, or the store's integrity.

use std::process::ExitCode;
use std::time::Instant;

use ckpt_lib::Result;
use serde_json::json;

use crate::context::Ctx;
use crate::exit::{EXIT_DIFFERS, EXIT_STORE_DAMAGED};
use crate::progress;
use crate::render::{self, hex, print_json, SCHEMA};

/// Arguments of `ckpt verify`.
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
    cmd_verify(ctx, args.id.as_deref(), args.store, args.json)
}

fn cmd_verify(ctx: &Ctx, id: Option<&str>, check_store: bool, json: bool) -> Result<ExitCode> {
    let t0 = Instant::now();
    let ws = ctx.ops.workspace()?;
    let store = ws.open_store_read_only(&ctx.ops.config)?;
    if check_store {
        let rep = ckpt_lib::engine::verify::verify_store(&store)?;
        let ok = rep.problems.is_empty();
        if json {
            let mut v = serde_json::to_value(&rep).expect("json");
            v["schema"] = json!(SCHEMA);
            v["ok"] = json!(ok);
            print_json(&v);
        } else {
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
                    if ok {
                        "store is intact"
                    } else {
                        "STORE IS DAMAGED"
                    },
                    rep.checkpoints,
                    rep.trees,
                    rep.objects,
                    render::bytes(rep.bytes),
                    render::ms(t0.elapsed())
                );
            }
        }
        return Ok(if ok {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(EXIT_STORE_DAMAGED)
        });
    }
    let spinner = progress::Spinner::start("verifying", ctx.quiet || json);
    let rep = ckpt_lib::engine::verify::verify_workspace(&ws, &store, id.unwrap_or("HEAD"))?;
    drop(spinner);
    let elapsed = t0.elapsed();
    let rate = rep.bytes as f64 / elapsed.as_secs_f64().max(1e-9);
    if json {
        print_json(&json!({
            "schema": SCHEMA,
            "checkpoint": rep.checkpoint.id(),
            "matches": rep.matches(),
            "expected": hex(&rep.expected),
            "actual": hex(&rep.actual),
            "differences": rep.differences.iter().filter(|c| c.is_interesting()).map(render::change_json).collect::<Vec<_>>(),
            "files": rep.files,
            "bytes": rep.bytes,
            "elapsed_ms": elapsed.as_secs_f64() * 1e3,
        }));
    } else if rep.matches() {
        if !ctx.quiet {
            println!(
                "matches {} (digest {}); {} files, {} read in {} ({}/s)",
                rep.checkpoint.id(),
                &hex(&rep.expected)[..16],
                rep.files,
                render::bytes(rep.bytes),
                render::ms(elapsed),
                render::bytes(rate as u64)
            );
        }
    } else {
        println!("differs from {}:", rep.checkpoint.id());
        for c in rep.differences.iter().filter(|c| c.is_interesting()) {
            println!("{}", render::change_line(c));
        }
    }
    Ok(if rep.matches() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_DIFFERS)
    })
}
