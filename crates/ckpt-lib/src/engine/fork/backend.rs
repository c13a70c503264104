//! How a fork's files are made ([`Backend`]), and which one a given fork
//! gets ([`choose`]): the fastest one proven to work between this
//! workspace, its store and the fork's directory, or the one `--backend`
//! forces (refused, with nothing changed, when it cannot work there).
//!
//! Each backend is proven, not guessed from a filesystem name:
//! - **subvolume**: the workspace root is a btrfs subvolume root (inode
//!   256 on btrfs), the fork's directory is on the same btrfs filesystem
//!   (`BTRFS_IOC_FS_INFO` fsid; `st_dev` differs per subvolume), and the
//!   store is not inside the workspace (a snapshot would copy it). The
//!   snapshot ioctl itself is the final proof: when it fails in automatic
//!   mode nothing was created and the fork falls back to the next backend
//!   ([`crate::engine::fork`]);
//! - **reflink**: a real `FICLONE` between temporary files in the store and
//!   in the fork's parent directory ([`probe_pair`]);
//! - **overlay**: a real overlayfs mount of empty layers in a scratch
//!   directory beside the fork's directory ([`overlay::probe`]), in this
//!   mount namespace (root) or, for a fork that runs a command (`-- CMD`),
//!   in a child's new user and mount namespace, exactly as the fork will.
//!   Never chosen automatically: a fork's directory stays an ordinary
//!   directory unless `--backend overlay` or `-- CMD` asks for a mount
//!   (which does not survive a reboot);
//! - **copy**: always works.

use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::platform::btrfs;
use crate::platform::overlay;
use crate::{Error, Result};
use ckpt_fs::copy::probe_pair;
use ckpt_fs::fs;

/// How a fork's files are made (docs/FORK.md, "Backends").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Backend {
    /// A btrfs snapshot of the workspace subvolume, then a restore of the
    /// paths that differ from the checkpoint.
    BtrfsSubvolume,
    /// An overlayfs mount of a shared read-only materialised checkpoint
    /// and the fork's own upper layer.
    Overlay,
    /// Every file a `FICLONE` of its store object.
    Reflink,
    /// Every file copied from its store object.
    Copy,
}

impl Backend {
    /// Every backend, in the order [`choose`] tries them (overlay only
    /// when asked for).
    pub const ALL: [Backend; 4] = [
        Backend::BtrfsSubvolume,
        Backend::Reflink,
        Backend::Overlay,
        Backend::Copy,
    ];

    /// The name used by `--backend`, `doctor` and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Backend::BtrfsSubvolume => "btrfs-subvolume",
            Backend::Overlay => "overlay",
            Backend::Reflink => "reflink",
            Backend::Copy => "copy",
        }
    }

    /// Parses a `--backend` value, or says which values there are.
    pub fn parse(s: &str) -> std::result::Result<Backend, String> {
        Backend::ALL
            .into_iter()
            .find(|b| b.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Backend::ALL.iter().map(|b| b.name()).collect();
                format!("unknown fork backend {s:?}; one of: {}", names.join(", "))
            })
    }
}

/// One backend's probe: whether it works here, and why (not).
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct Probe {
    /// The backend probed.
    pub backend: Backend,
    /// It works for this workspace, store and destination.
    pub works: bool,
    /// Why, in a sentence.
    pub why: String,
    /// The probe was made (false: left for later because a backend before
    /// it works, [`NOT_PROBED`], or an overlay not asked for).
    #[serde(skip)]
    pub probed: bool,
}

/// The backend a fork gets.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct Choice {
    /// The one chosen.
    pub backend: Backend,
    /// Why it was chosen.
    pub why: String,
    /// Every backend's probe, in [`Backend::ALL`] order.
    pub probes: Vec<Probe>,
    /// It was forced (`--backend`): no fallback if it fails after all.
    pub forced: bool,
    /// The store and the directory probed, for the probes left for later
    /// ([`NOT_PROBED`]).
    #[serde(skip)]
    pub at: Option<(PathBuf, PathBuf)>,
}

/// The reason of a probe not made because a backend before it works (a
/// fork does not pay for probes it will not use; [`Choice::after`] makes
/// it when it is needed).
pub const NOT_PROBED: &str = "not probed: a backend before it works";

impl Choice {
    /// The next backend that works after `b` (the fallback when a
    /// subvolume snapshot is refused in automatic mode), probing now what
    /// was left for later.
    pub fn after(&self, b: Backend) -> Backend {
        self.probes
            .iter()
            .skip_while(|p| p.backend != b)
            .skip(1)
            .find(|p| {
                p.works
                    || (!p.probed
                        && p.backend == Backend::Reflink
                        && self
                            .at
                            .as_ref()
                            .is_some_and(|(s, d)| probe_reflink(s, d).is_ok()))
            })
            .map_or(Backend::Copy, |p| p.backend)
    }
}

/// The nearest existing ancestor of `p` (or `p` itself): where a fork into
/// `p` creates its staging directory.
pub fn existing_ancestor(p: &Path) -> PathBuf {
    let mut cur = p.to_path_buf();
    loop {
        if cur.is_dir() {
            return cur;
        }
        if !cur.pop() {
            return PathBuf::from("/");
        }
    }
}

fn probe_subvolume(
    ws_root: &Path,
    store_root: &Path,
    dest_dir: &Path,
) -> std::result::Result<String, String> {
    let ws = fs::open_dir_path(ws_root)
        .map_err(|e| format!("cannot open {}: {e}", ws_root.display()))?;
    if !btrfs::is_btrfs(ws.as_fd()) {
        return Err(format!(
            "the workspace {} is not on btrfs",
            ws_root.display()
        ));
    }
    if !btrfs::is_subvolume(ws.as_fd()) {
        return Err(format!(
            "the workspace {} is not a btrfs subvolume (`ckpt init --subvolume` makes it one, see docs/FORK.md)",
            ws_root.display()
        ));
    }
    if store_root.starts_with(ws_root) {
        return Err(format!(
            "the store {} is inside the workspace, and a snapshot would copy it",
            store_root.display()
        ));
    }
    let dest = fs::open_dir_path(dest_dir)
        .map_err(|e| format!("cannot open {}: {e}", dest_dir.display()))?;
    let same = match (btrfs::fsid(ws.as_fd()), btrfs::fsid(dest.as_fd())) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    if !same {
        return Err(format!(
            "{} is not on the workspace's btrfs filesystem (a snapshot stays on its filesystem)",
            dest_dir.display()
        ));
    }
    let store = match fs::open_dir_path(store_root) {
        Ok(s) if btrfs::is_subvolume(s.as_fd()) && btrfs::fsid(s.as_fd()).ok() == btrfs::fsid(ws.as_fd()).ok() => {
            "the store is a subvolume too, so the fork's store is its snapshot"
        }
        _ => "the store is not a subvolume on this filesystem (`ckpt init --subvolume` makes it one), so the fork's store links the checkpoint's objects",
    };
    Ok(format!("the workspace is a btrfs subvolume and the fork's directory is on the same filesystem: a snapshot, then a restore of only the paths that differ from the checkpoint; {store}"))
}

fn probe_reflink(store_root: &Path, dest_dir: &Path) -> std::result::Result<String, String> {
    let s = fs::open_dir_path(store_root)
        .map_err(|e| format!("cannot open {}: {e}", store_root.display()))?;
    let d = fs::open_dir_path(dest_dir)
        .map_err(|e| format!("cannot open {}: {e}", dest_dir.display()))?;
    match probe_pair(s.as_fd(), d.as_fd()) {
        Ok(c) if c.reflink => Ok(format!(
            "FICLONE works from the store {} into {}: every file shares its store object's blocks",
            store_root.display(),
            dest_dir.display()
        )),
        Ok(_) => Err(format!(
            "FICLONE does not work from the store {} into {} (another filesystem, or one without reflinks)",
            store_root.display(),
            dest_dir.display()
        )),
        Err(e) => Err(format!("probing {} failed: {e}", dest_dir.display())),
    }
}

/// Whether overlay mounts work beside `dir` (the fork's parent
/// directory): in this mount namespace (root), and in a new user and mount
/// namespace of a child (what `ckpt fork … -- CMD` does).
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct OverlayProbes {
    /// A mount here, which lasts until unmounted (root only).
    pub mount: OverlayCheck,
    /// A mount in a child's new namespace, for `-- CMD`.
    pub namespace: OverlayCheck,
}

/// One overlay probe.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct OverlayCheck {
    /// It works.
    pub works: bool,
    /// Why (not), in a sentence.
    pub why: String,
}

/// One overlay probe beside `dir`: `namespace`: in a child's new namespace.
fn probe_overlay_one(dir: &Path, namespace: bool) -> std::result::Result<String, String> {
    if !namespace && !overlay::is_root() {
        return Err("mounting outside a namespace needs root; as this user `ckpt fork ID DIR -- CMD` mounts the fork in a user namespace for CMD".into());
    }
    let scratch = dir.join(format!(".ckpt-overlay-probe.{}", std::process::id()));
    overlay::probe(&scratch, namespace).map(|()| {
        if namespace {
            format!(
                "an overlay mounts in a new {}mount namespace beside {}: `ckpt fork ID DIR -- CMD` runs CMD in it",
                if overlay::is_root() { "" } else { "user and " },
                dir.display()
            )
        } else {
            format!("an overlay mounts beside {} (as root)", dir.display())
        }
    })
}

/// Both overlay probes beside the fork `dest` (see [`OverlayProbes`]).
pub fn probe_overlay(dest: &Path) -> OverlayProbes {
    let dir = existing_ancestor(dest);
    let check = |namespace| match probe_overlay_one(&dir, namespace) {
        Ok(why) => OverlayCheck { works: true, why },
        Err(why) => OverlayCheck { works: false, why },
    };
    OverlayProbes {
        mount: check(false),
        namespace: check(true),
    }
}

/// Probes every backend for a fork of the workspace `ws_root` (store
/// `store_root`) into `dest` (a new or empty directory; its nearest
/// existing ancestor is probed). `overlay`: probe an overlay mount as the
/// fork would make it (`Some(true)`: in a namespace, for `-- CMD`); None:
/// not probed (never chosen automatically).
/// `every`: else, once a backend works, the reflink probe after it is left
/// for later ([`NOT_PROBED`]).
pub fn probe_all(
    ws_root: &Path,
    store_root: &Path,
    dest: &Path,
    overlay_ns: Option<bool>,
    every: bool,
) -> Vec<Probe> {
    let dir = existing_ancestor(dest);
    let mut found = false;
    Backend::ALL
        .into_iter()
        .map(|backend| {
            let probed = match backend {
                Backend::Reflink => !found || every,
                Backend::Overlay => overlay_ns.is_some(),
                Backend::BtrfsSubvolume | Backend::Copy => true,
            };
            let r = match backend {
                Backend::Reflink if !probed => Err(NOT_PROBED.into()),
                Backend::BtrfsSubvolume => probe_subvolume(ws_root, store_root, &dir),
                Backend::Overlay => match overlay_ns {
                    Some(ns) => probe_overlay_one(&dir, ns),
                    None => Err("not probed: an overlay fork is made only when asked for (`--backend overlay`, or `-- CMD`), as its mount does not survive a reboot".into()),
                },
                Backend::Reflink => probe_reflink(store_root, &dir),
                Backend::Copy => Ok(
                    "copies work everywhere: every file is written from its verified store object"
                        .into(),
                ),
            };
            let (works, why) = match r {
                Ok(w) => (true, w),
                Err(w) => (false, w),
            };
            found |= works && backend != Backend::Overlay;
            Probe {
                backend,
                works,
                why,
                probed,
            }
        })
        .collect()
}

/// The backend for a fork into `dest`: `forced` if it works here (else a
/// usage error, nothing changed), otherwise the first that works, never
/// overlay. `namespace`: the fork runs a command in a namespace (`--
/// CMD`), which is how its overlay mount is probed. `every`: probe every
/// backend (`ckpt doctor`), else only up to the one chosen ([`probe_all`]).
pub fn choose(
    ws_root: &Path,
    store_root: &Path,
    dest: &Path,
    forced: Option<Backend>,
    namespace: bool,
    every: bool,
) -> Result<Choice> {
    let ovl = (forced == Some(Backend::Overlay)).then_some(namespace);
    let every = every || forced.is_some();
    let probes = probe_all(ws_root, store_root, dest, ovl, every);
    let at = Some((store_root.to_path_buf(), existing_ancestor(dest)));
    let pick = |b: Backend| {
        probes
            .iter()
            .find(|p| p.backend == b)
            .expect("every backend is probed")
    };
    match forced {
        Some(b) => {
            let p = pick(b);
            if !p.works {
                return Err(Error::Usage(format!(
                    "--backend {} cannot fork into {}: {} (nothing was changed)\n  drop --backend to use the best one that works (`ckpt doctor` shows them)",
                    b.name(),
                    dest.display(),
                    p.why
                )));
            }
            Ok(Choice {
                backend: b,
                why: format!("forced by --backend: {}", p.why),
                forced: true,
                probes,
                at,
            })
        }
        None => {
            let p = probes
                .iter()
                .find(|p| p.works && p.backend != Backend::Overlay)
                .expect("copy always works")
                .clone();
            Ok(Choice {
                backend: p.backend,
                why: p.why,
                forced: false,
                probes,
                at,
            })
        }
    }
}
