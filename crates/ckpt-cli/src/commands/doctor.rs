//! `ckpt doctor`: filesystems, probed copy capabilities, store location and
//! free space, inotify limits, and the copy strategy ckpt will use and why
//! (the facts come from [`ckpt_lib::ops::doctor`]).

use ckpt_fs::copy::Caps;
use ckpt_lib::ops;
use ckpt_lib::ops::doctor::DoctorOptions;
use ckpt_lib::ops::parts::PlatformReport as Report;
use ckpt_lib::Result;

use crate::context::Ctx;
use crate::render::{self, print_report};

// Arguments of `ckpt doctor`.
#[derive(clap::Args)]
pub struct DoctorArgs {
    /// JSON output.
    #[arg(long)]
    json: bool,
}

/// Runs `ckpt doctor`.
pub fn run(ctx: &Ctx, args: &DoctorArgs) -> Result<()> {
    let opts = DoctorOptions {
        bad_strategy: ctx.bad_copy_strategy.clone(),
    };
    let rep = ops::doctor::doctor(&ctx.ops, &opts)?;
    if args.json {
        print_report(&rep);
        return Ok(());
    }
    print_text(&rep.report);
    let f = &rep.fork;
    println!("fork backend: {} ({})", f.backend.name(), f.why);
    for p in f.probes.iter().filter(|p| !p.works) {
        println!("  not {}: {}", p.backend.name(), p.why);
    }
    let yn = |w: bool| if w { "works" } else { "does not work" };
    let o = &rep.overlay;
    println!(
        "overlay mount here (root): {} — {}",
        yn(o.mount.works),
        o.mount.why
    );
    println!(
        "overlay mount in a namespace (`fork … -- CMD`): {} — {}",
        yn(o.namespace.works),
        o.namespace.why
    );
    for h in &rep.harnesses {
        match &h.warning {
            None => println!("agent hooks: {} calls `ckpt hook` here", h.harness),
            Some(w) => println!("agent hooks: {}: warning: {w}", h.harness),
        }
    }
    match ops::watch::status(&ctx.ops, &Default::default())
        .ok()
        .and_then(|r| r.status)
    {
        Some(s) => println!(
            "watcher: running (pid {}){}",
            s.facts.pid,
            s.facts.idle_stop_secs.map_or(String::new(), |i| format!(
                ", stops itself after {i} s without a request"
            ))
        ),
        None => println!(
            "watcher: not running (the first `ckpt hook` starts one, or `ckpt watch --daemon`)"
        ),
    }
    Ok(())
}

fn caps_line(c: &Caps) -> String {
    let yn = |b: bool| if b { "yes" } else { "no" };
    format!(
        "reflink {}, copy_file_range {}, hard links {}, fallocate {}, SEEK_HOLE {}",
        yn(c.reflink),
        yn(c.copy_file_range),
        yn(c.hard_link),
        yn(c.fallocate),
        yn(c.seek_hole)
    )
}

fn print_text(rep: &Report) {
    let opt = |v: Option<u64>| v.map_or("unknown".to_string(), |n| n.to_string());
    println!(
        "workspace: {} ({})",
        rep.workspace.path.display(),
        rep.workspace.fs_type
    );
    println!(
        "store:     {} ({}), {} free of {}",
        rep.store.path.display(),
        rep.store.fs_type,
        render::bytes(rep.store.free_bytes),
        render::bytes(rep.store.total_bytes)
    );
    println!("probed workspace → store: {}", caps_line(&rep.save_caps));
    println!("probed within the store:  {}", caps_line(&rep.store_caps));
    match &rep.cached_caps {
        Some(c) if *c != rep.save_caps => println!(
            "cached at init (differs from the live probe; re-create the store to refresh): {}",
            caps_line(c)
        ),
        Some(_) => println!("cached at init: same as the live probe"),
        None => println!("cached at init: none (old store; userspace copies until re-created)"),
    }
    println!(
        "inotify: max_user_watches {}, max_user_instances {}, max_queued_events {}",
        opt(rep.inotify.max_user_watches),
        opt(rep.inotify.max_user_instances),
        opt(rep.inotify.max_queued_events)
    );
    if let Some(d) = rep.workspace_dirs {
        println!(
            "watch mode: {} to watch (at the last save): {}",
            render::count(d, "directory", "directories"),
            rep.watch_advice.as_deref().unwrap_or("within the limit")
        );
    }
    println!("copy strategy: {} — {}", rep.strategy.name(), rep.why);
}
