//! `ckpt diff [A [B]]`: compare two checkpoints, or a checkpoint and the working directory.

use std::io::Write;
use std::path::PathBuf;

use ckpt_lib::ops;
use ckpt_lib::ops::parts::{ChangeKind, ContentDiff};
use ckpt_lib::Result;

use crate::context::Ctx;
use crate::render::{self, print_report};

// Arguments of `ckpt diff`.
#[derive(clap::Args)]
pub struct DiffArgs {
    /// From (default: HEAD).
    a: Option<String>,
    /// To (default: the working directory).
    b: Option<String>,
    /// Compare this workspace's HEAD with a fork's checkpoint: `ckpt diff
    /// --fork DIR [ID]` (ID in the fork's store, default its head).
    #[arg(long, value_name = "DIR", conflicts_with = "b")]
    fork: Option<PathBuf>,
    /// Only the name-status summary, no content diffs.
    #[arg(long)]
    name_status: bool,
    /// JSON output.
    #[arg(long)]
    json: bool,
    /// Limit to paths.
    #[arg(last = true)]
    paths: Vec<PathBuf>,
}

/// Runs `ckpt diff`.
pub fn run(ctx: &Ctx, args: &DiffArgs) -> Result<()> {
    let name_status = args.name_status;
    let opts = ops::diff::DiffOptions {
        from: if args.fork.is_some() {
            None
        } else {
            args.a.clone()
        },
        to: if args.fork.is_some() {
            args.a.clone()
        } else {
            args.b.clone()
        },
        paths: args.paths.clone(),
        content: !name_status,
        fork: args.fork.clone(),
    };
    let d = ops::diff::diff(&ctx.ops, &opts)?;
    if args.json {
        print_report(&d);
        return Ok(());
    }
    let state_changes = d.state.as_ref().map_or(&[][..], |s| &s.changes[..]);
    let mut out = std::io::stdout().lock();
    for c in &d.changes {
        let _ = writeln!(out, "{}", render::change_line(&c.change));
    }
    for c in state_changes {
        let _ = writeln!(out, "state {}", render::state_change_line(c));
        if !name_status {
            if let Some(o) = &c.old {
                let _ = writeln!(out, "  - {}", render::preview(&o.value, 200));
            }
            if let Some(n) = &c.new {
                let _ = writeln!(out, "  + {}", render::preview(&n.value, 200));
            }
        }
    }
    for c in &d.changes {
        if !matches!(
            c.change.kind,
            ChangeKind::Added
                | ChangeKind::Deleted
                | ChangeKind::Modified
                | ChangeKind::TypeChanged
        ) {
            continue;
        }
        match &c.content {
            Some(ContentDiff::Text(t)) if !t.is_empty() => {
                let _ = write!(out, "\n{}", render::paint_diff(t));
            }
            Some(ContentDiff::Binary { old_size, new_size }) => {
                let _ = writeln!(
                    out,
                    "\nbinary file {} differs ({} → {})",
                    render::quote(&c.change.path),
                    render::bytes(*old_size),
                    render::bytes(*new_size)
                );
            }
            _ => {}
        }
    }
    Ok(())
}
