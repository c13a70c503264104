//! `ckpt annotate ID [KEY=VALUE]… [--remove KEY]… [--note TEXT]`: add or
//! change tags and a note on an existing checkpoint (kept apart from its
//! save-time tags, which are part of its record).

use ckpt_lib::ops;
use ckpt_lib::Result;

use crate::context::Ctx;
use crate::render::{self, parse_tags, print_report};

// Arguments of `ckpt annotate`.
#[derive(clap::Args)]
pub struct AnnotateArgs {
    /// Checkpoint id (v12, a hash prefix, HEAD, HEAD~1, latest).
    id: String,
    /// Tags to add or change, KEY=VALUE.
    #[arg(value_name = "KEY=VALUE")]
    tags: Vec<String>,
    /// Remove this annotation tag (repeatable).
    #[arg(long, value_name = "KEY")]
    remove: Vec<String>,
    /// Set the note (an empty TEXT removes it).
    #[arg(long, value_name = "TEXT")]
    note: Option<String>,
    /// JSON output.
    #[arg(long)]
    json: bool,
}

/// Runs `ckpt annotate`.
pub fn run(ctx: &Ctx, args: &AnnotateArgs) -> Result<()> {
    let opts = ops::annotate::AnnotateOptions {
        rev: args.id.clone(),
        set: parse_tags(&args.tags)?,
        remove: args.remove.clone(),
        note: args.note.clone(),
    };
    let rep = ops::annotate::annotate(&ctx.ops, &opts)?;
    if args.json {
        print_report(&rep);
    } else if !ctx.quiet {
        match &rep.annotation {
            Some(a) => println!(
                "annotated {}:{}",
                rep.checkpoint.id(),
                render::annotation(a)
            ),
            None => println!("{} has no annotations now", rep.checkpoint.id()),
        }
    }
    Ok(())
}
