//! `ckpt save`: record a checkpoint of the whole workspace.

use ckpt_lib::ops;
use ckpt_lib::ops::parts::SaveOutcome;
use ckpt_lib::ops::save::SaveOptions;
use ckpt_lib::ops::save::SaveReport;
use ckpt_lib::Result;

use super::gc;
use crate::context::Ctx;
use crate::progress;
use crate::render::{self, parse_tags, print_report};

// Arguments of `ckpt save`.
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
    let opts = SaveOptions {
        message: args.message.clone(),
        tags: parse_tags(&args.tags)?,
        allow_empty: args.allow_empty,
    };
    let spinner = progress::Spinner::start("saving", ctx.quiet || args.json);
    let saved = ops::save::save(&ctx.ops, &opts)?;
    drop(spinner);
    if let Some(rep) = &saved.retention {
        gc::report_retention(ctx, rep);
    }
    if args.json {
        print_report(&saved);
    } else {
        print_save(ctx, &saved);
    }
    Ok(())
}

/// Prints a save's outcome for people, and under `--verbose` what it cost.
fn print_save(ctx: &Ctx, saved: &SaveReport) {
    let elapsed = saved.elapsed;
    match &saved.outcome {
        SaveOutcome::Saved(cp) if ctx.quiet => println!("{}", cp.id()),
        SaveOutcome::Saved(cp) => {
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
            for line in render::skipped_lines(&cp.skipped) {
                eprintln!("{line}");
            }
        }
        SaveOutcome::Unchanged(_) if ctx.quiet => {}
        SaveOutcome::Unchanged(Some(h)) => {
            println!("nothing changed since {} ({})", h.id(), render::ms(elapsed))
        }
        SaveOutcome::Unchanged(None) => println!(
            "nothing to save: the workspace is empty ({})",
            render::ms(elapsed)
        ),
    }
    render::warn_unreadable("", &saved.unreadable);
    if ctx.verbose {
        let c = saved.counts;
        eprintln!(
            "scanned {} entries, read {} files, {} new objects ({})",
            c.entries,
            c.files_read,
            c.new_objects,
            render::bytes(c.new_bytes)
        );
    }
}
