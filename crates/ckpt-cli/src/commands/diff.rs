//! `ckpt diff [A [B]]`: compare two checkpoints, or a checkpoint and the working directory.

use std::io::Write;
use std::path::PathBuf;

use ckpt_lib::engine::diff::{self, ContentDiff};
use ckpt_lib::ops;
use ckpt_lib::Result;
use serde_json::json;

use crate::context::Ctx;
use crate::render::{self, print_json, SCHEMA};

/// Arguments of `ckpt diff`.
#[derive(clap::Args)]
pub struct DiffArgs {
    /// From (default: HEAD).
    a: Option<String>,
    /// To (default: the working directory).
    b: Option<String>,
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
    cmd_diff(
        ctx,
        args.a.as_deref(),
        args.b.as_deref(),
        &args.paths,
        args.name_status,
        args.json,
    )
}

fn cmd_diff(
    ctx: &Ctx,
    a: Option<&str>,
    b: Option<&str>,
    paths: &[PathBuf],
    name_status: bool,
    json: bool,
) -> Result<()> {
    let opts = ops::diff::DiffOptions {
        from: a.map(str::to_string),
        to: b.map(str::to_string),
        paths: paths.to_vec(),
        content: !name_status,
    };
    let d = ops::diff::diff(&ctx.ops, &opts)?;
    let state_changes = d.state.as_ref().map_or(&[][..], |s| &s.changes[..]);
    if json {
        let list: Vec<_> = d
            .changes
            .iter()
            .map(|c| {
                let mut v = render::change_json(&c.change);
                match &c.content {
                    Some(ContentDiff::Text(t)) => v["diff"] = json!(t),
                    Some(ContentDiff::Binary { old_size, new_size }) => {
                        v["binary"] = json!(true);
                        v["old_size"] = json!(old_size);
                        v["new_size"] = json!(new_size);
                    }
                    None => {}
                }
                v
            })
            .collect();
        print_json(&json!({
            "schema": SCHEMA, "from": d.from.id(), "to": d.to_label(), "changes": list,
            "state_from": d.state.as_ref().map(|s| s.from),
            "state_to": d.state.as_ref().map(|s| s.to),
            "state_changes": state_changes.iter().map(render::state_change_json).collect::<Vec<_>>(),
        }));
        return Ok(());
    }
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
            diff::ChangeKind::Added
                | diff::ChangeKind::Deleted
                | diff::ChangeKind::Modified
                | diff::ChangeKind::TypeChanged
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
