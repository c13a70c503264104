//! `ckpt save`: record a checkpoint of the whole workspace.

use std::time::Duration;

use ckpt_lib::engine::save::{SaveOptions, SaveOutcome, ScanCounts};
use ckpt_lib::ops;
use ckpt_lib::Result;
use serde_json::json;

use super::gc;
use crate::context::Ctx;
use crate::progress;
use crate::render::{self, parse_tags, print_json, SCHEMA};

/// Arguments of `ckpt save`.
#[derive(clap::Args)]
pub struct SaveArgs {
    /// Message.
    #[arg(short, long, default_value = "")]
    message: String,
    /// Tag KEY=VALUE (repeatable).
    #[arg(long = "tag", value_name = "KEY=VALUE")]
    tags: Vec<String>,
    /// Record a checkpoint even if nothing changed.
    #[arg(long)]
    allow_empty: bool,
    /// JSON output.
    #[arg(long)]
    json: bool,
}

/// Runs `ckpt save`.
pub fn run(ctx: &Ctx, args: &SaveArgs) -> Result<()> {
    cmd_save(ctx, &args.message, &args.tags, args.allow_empty, args.json)
}

fn cmd_save(
    ctx: &Ctx,
    message: &str,
    tags: &[String],
    allow_empty: bool,
    json: bool,
) -> Result<()> {
    let opts = SaveOptions {
        message: message.to_string(),
        tags: parse_tags(tags)?,
        allow_empty,
        journal: None,
    };
    let spinner = progress::Spinner::start("saving", ctx.quiet || json);
    let saved = ops::save::save(&ctx.ops, &opts)?;
    drop(spinner);
    if let Some(rep) = &saved.retention {
        gc::report_retention(ctx, rep);
    }
    print_save(ctx, &saved.outcome, saved.elapsed, json, saved.counts);
    Ok(())
}

/// Prints a save's outcome, and under `--verbose` what it cost.
fn print_save(ctx: &Ctx, outcome: &SaveOutcome, elapsed: Duration, json: bool, counts: ScanCounts) {
    match outcome {
        SaveOutcome::Saved(cp) => {
            if json {
                let mut v = render::checkpoint_json(cp, Some(cp.seq));
                v["schema"] = json!(SCHEMA);
                v["saved"] = json!(true);
                v["elapsed_ms"] = json!(elapsed.as_secs_f64() * 1e3);
                print_json(&v);
            } else if ctx.quiet {
                println!("{}", cp.id());
            } else {
                let s = &cp.stats;
                println!(
                    "saved {}  +{} ~{} -{} files, {} new in store  ({})",
                    cp.id(),
                    s.files_added,
                    s.files_modified,
                    s.files_deleted,
                    render::bytes(s.new_bytes),
                    render::ms(elapsed)
                );
                for sk in &cp.skipped {
                    eprintln!("skipped {} ({})", render::quote(&sk.path), sk.kind);
                }
            }
        }
        SaveOutcome::Unchanged(head) => {
            if json {
                print_json(&json!({
                    "schema": SCHEMA,
                    "saved": false,
                    "id": head.as_ref().map(|h| h.id()),
                    "elapsed_ms": elapsed.as_secs_f64() * 1e3,
                }));
            } else if !ctx.quiet {
                match head {
                    Some(h) => {
                        println!("nothing changed since {} ({})", h.id(), render::ms(elapsed))
                    }
                    None => println!(
                        "nothing to save: the workspace is empty ({})",
                        render::ms(elapsed)
                    ),
                }
            }
        }
    }
    if ctx.verbose {
        eprintln!(
            "scanned {} entries, read {} files, {} new objects ({})",
            counts.entries,
            counts.files_read,
            counts.new_objects,
            render::bytes(counts.new_bytes)
        );
    }
}
