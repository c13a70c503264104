//! overlayfs mounts for overlay forks (docs/FORK.md, "overlayfs"): one
//! mount of a read-only lower layer, a per-fork upper layer and its work
//! directory, made with the new mount API (`fsopen`, `fsconfig`,
//! `fsmount`, `move_mount`: each layer's path is one `fsconfig` string, so
//! no mount-option string is ever parsed), either in this mount namespace
//! (root: the mount lasts until it is unmounted or the machine reboots), or
//! in a new mount namespace of a child that then runs a command
//! ([`spawn_in_namespace`]: the mount lasts as long as that command, and
//! an unprivileged user gets a user namespace mapping only itself, with
//! the overlay's `userxattr` option).
//!
//! Why the child is safe to set up between `fork` and `exec`: everything
//! it does is a raw system call on strings prepared before the fork
//! ([`Prepared`]), with no allocation and no lock, so the state of the
//! parent's other threads at the fork does not matter.

use std::ffi::{CStr, CString};
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};

use rustix::mount::{
    fsconfig_create, fsconfig_set_flag, fsconfig_set_string, fsmount, fsopen, move_mount, unmount,
    FsMountFlags, FsOpenFlags, MountAttrFlags, MountPropagationFlags, MoveMountFlags, UnmountFlags,
};

/// `OVERLAYFS_SUPER_MAGIC`, the `statfs` type of an overlay mount.
const OVERLAY_MAGIC: u64 = 0x794c_7630;

/// The directories of one overlay mount.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layers {
    /// The read-only lower layer.
    pub lower: PathBuf,
    /// The writable upper layer (every change lands here).
    pub upper: PathBuf,
    /// overlayfs's work directory (same filesystem as `upper`).
    pub work: PathBuf,
}

/// A mount of [`Layers`] at a target, its strings made in advance.
pub struct Prepared {
    lower: CString,
    upper: CString,
    work: CString,
    target: CString,
    userxattr: bool,
}

/// `p` as an overlayfs layer string: `\`, `:` and `,` escaped with `\`
/// (overlayfs splits lower layers at `:` and unescapes every layer path).
fn escaped(p: &Path) -> io::Result<CString> {
    let mut v = Vec::new();
    for &b in p.as_os_str().as_bytes() {
        if matches!(b, b'\\' | b':' | b',') {
            v.push(b'\\');
        }
        v.push(b);
    }
    CString::new(v).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte in a path"))
}

impl Prepared {
    /// The mount of `layers` at `target`; `userxattr`: keep overlayfs's
    /// own attributes in `user.overlay.*` (needed in a user namespace).
    pub fn new(layers: &Layers, target: &Path, userxattr: bool) -> io::Result<Prepared> {
        Ok(Prepared {
            lower: escaped(&layers.lower)?,
            upper: escaped(&layers.upper)?,
            work: escaped(&layers.work)?,
            target: CString::new(target.as_os_str().as_bytes())
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte in a path"))?,
            userxattr,
        })
    }

    /// Mounts it (no allocation: safe in a child before `exec`).
    pub fn mount(&self) -> io::Result<()> {
        let fs = fsopen(c"overlay", FsOpenFlags::FSOPEN_CLOEXEC)?;
        fsconfig_set_string(&fs, c"lowerdir", self.lower.as_c_str())?;
        fsconfig_set_string(&fs, c"upperdir", self.upper.as_c_str())?;
        fsconfig_set_string(&fs, c"workdir", self.work.as_c_str())?;
        if self.userxattr {
            fsconfig_set_flag(&fs, c"userxattr")?;
        }
        fsconfig_create(&fs)?;
        let m = fsmount(&fs, FsMountFlags::FSMOUNT_CLOEXEC, MountAttrFlags::empty())?;
        move_mount(
            &m,
            c"",
            rustix::fs::CWD,
            self.target.as_c_str(),
            MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH,
        )?;
        Ok(())
    }
}

/// Unmounts the overlay at `target` (fails with `EBUSY` while a process
/// uses it).
pub fn unmount_at(target: &Path) -> io::Result<()> {
    Ok(unmount(target, UnmountFlags::empty())?)
}

/// Whether an overlay is mounted at `path` (in this mount namespace).
pub fn is_overlay(path: &Path) -> bool {
    rustix::fs::statfs(path).is_ok_and(|s| s.f_type as u64 == OVERLAY_MAGIC)
}

/// Whether this process runs as root.
pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// Writes `bytes` to the file `path` (in a child before `exec`).
fn write_file(path: &CStr, bytes: &[u8]) -> io::Result<()> {
    let fd = rustix::fs::open(path, rustix::fs::OFlags::WRONLY, rustix::fs::Mode::empty())?;
    rustix::io::write(&fd, bytes)?;
    Ok(())
}

/// What the child of [`spawn_in_namespace`] does before `exec`.
struct ChildSetup {
    mount: Prepared,
    /// `Some((uid_map, gid_map))`: unshare a user namespace too.
    maps: Option<(CString, CString)>,
    /// Where to write the mount's device number.
    ready: RawFd,
    /// Where the parent says go (one byte) or stop (end of file).
    go: RawFd,
    /// The parent's ends of both pipes, closed in the child.
    close: [RawFd; 2],
}

impl ChildSetup {
    fn run(&self) -> io::Result<()> {
        // SAFETY: the parent's pipe ends, inherited by this child only;
        // nothing else in the child uses them.
        unsafe {
            libc::close(self.close[0]);
            libc::close(self.close[1]);
        }
        let mut flags = rustix::thread::UnshareFlags::NEWNS;
        if self.maps.is_some() {
            flags |= rustix::thread::UnshareFlags::NEWUSER;
        }
        // SAFETY: no FILES flag; this child has one thread.
        unsafe { rustix::thread::unshare_unsafe(flags)? };
        if let Some((uid_map, gid_map)) = &self.maps {
            write_file(c"/proc/self/setgroups", b"deny")?;
            write_file(c"/proc/self/uid_map", uid_map.as_bytes())?;
            write_file(c"/proc/self/gid_map", gid_map.as_bytes())?;
        }
        // Nothing mounted here reaches the parent's namespace.
        rustix::mount::mount_change(
            c"/",
            MountPropagationFlags::PRIVATE | MountPropagationFlags::REC,
        )?;
        self.mount.mount()?;
        // The command starts in the merged view, not the mount point below.
        rustix::process::chdir(self.mount.target.as_c_str())?;
        let st = rustix::fs::stat(c".")?;
        // SAFETY: `ready` and `go` are this child's pipe ends.
        let (ready, go) = unsafe {
            (
                rustix::fd::BorrowedFd::borrow_raw(self.ready),
                rustix::fd::BorrowedFd::borrow_raw(self.go),
            )
        };
        let dev = st.st_dev.to_le_bytes();
        if rustix::io::write(ready, &dev)? != dev.len() {
            return Err(io::Error::from_raw_os_error(libc::EPIPE));
        }
        let mut b = [0u8; 1];
        if rustix::io::read(go, &mut b)? != 1 {
            return Err(io::Error::from_raw_os_error(libc::ECANCELED));
        }
        Ok(())
    }
}

/// Starts `cmd` in a new mount namespace (and, unless this process is
/// root, a new user namespace mapping only this user's uid and gid, so the
/// command runs as this user) in which `mount` is mounted, with the mount
/// as its current directory; `before_start`
/// gets the mount's device number after the mount and before the command
/// starts (an error there stops the command from starting). The mount
/// disappears when the last process of the namespace exits.
pub fn spawn_in_namespace(
    mount: Prepared,
    cmd: &mut Command,
    before_start: &mut (dyn FnMut(u64) -> Result<(), String> + Send),
) -> io::Result<Child> {
    let maps = if is_root() {
        None
    } else {
        let (uid, gid) = (
            rustix::process::geteuid().as_raw(),
            rustix::process::getegid().as_raw(),
        );
        let m = |id: u32| CString::new(format!("{id} {id} 1")).expect("no NUL");
        Some((m(uid), m(gid)))
    };
    let (mut ready_r, ready_w) = io::pipe()?;
    let (go_r, go_w) = io::pipe()?;
    let setup = ChildSetup {
        mount,
        maps,
        ready: ready_w.as_raw_fd(),
        go: go_r.as_raw_fd(),
        close: [ready_r.as_raw_fd(), go_w.as_raw_fd()],
    };
    // SAFETY: ChildSetup::run only makes system calls on memory prepared
    // before the fork (see the module doc).
    unsafe {
        cmd.pre_exec(move || setup.run());
    }
    let mut why = None;
    let spawned = std::thread::scope(|s| {
        // Owns `go_w`: when it returns, the child's read of `go` ends.
        let waiter = s.spawn(move || -> Option<String> {
            let mut go_w = go_w;
            let mut b = [0u8; 8];
            // End of file: the child failed before mounting (spawn says why).
            ready_r.read_exact(&mut b).ok()?;
            match before_start(u64::from_le_bytes(b)) {
                Ok(()) => go_w.write_all(&[1]).err().map(|e| e.to_string()),
                // go_w is dropped: the child reads end of file and stops.
                Err(e) => Some(e),
            }
        });
        let spawned = cmd.spawn();
        // The child has exec'd or failed: our copies of its ends can go, so
        // the waiter sees end of file if it never wrote.
        drop(ready_w);
        drop(go_r);
        why = waiter
            .join()
            .unwrap_or(Some("the mount helper thread panicked".into()));
        spawned
    });
    match (spawned, why) {
        (Ok(child), None) => Ok(child),
        (Ok(mut child), Some(why)) => {
            let _ = child.kill();
            let _ = child.wait();
            Err(io::Error::other(why))
        }
        (Err(e), Some(why)) => Err(io::Error::other(format!("{why} ({e})"))),
        (Err(e), None) => Err(e),
    }
}

/// Mounts an overlay of empty layers in a scratch directory `scratch`
/// (made and removed here): in this namespace, or with `namespace` in a
/// child's new namespace as [`spawn_in_namespace`] makes it (running
/// `true`). What is probed is exactly what a fork does.
pub fn probe(scratch: &Path, namespace: bool) -> Result<(), String> {
    let layers = Layers {
        lower: scratch.join("lower"),
        upper: scratch.join("upper"),
        work: scratch.join("work"),
    };
    let target = scratch.join("merged");
    let run = || -> Result<(), String> {
        for d in [&layers.lower, &layers.upper, &layers.work, &target] {
            std::fs::create_dir_all(d)
                .map_err(|e| format!("cannot create {}: {e}", d.display()))?;
        }
        let p =
            Prepared::new(&layers, &target, namespace && !is_root()).map_err(|e| e.to_string())?;
        if namespace {
            let mut cmd = Command::new("true");
            cmd.stdin(std::process::Stdio::null());
            let mut child = spawn_in_namespace(p, &mut cmd, &mut |_| Ok(()))
                .map_err(|e| format!("a new mount namespace with an overlay mount failed: {e}"))?;
            let st = child.wait().map_err(|e| e.to_string())?;
            if !st.success() {
                return Err(format!("`true` in the namespace exited with {st}"));
            }
            Ok(())
        } else {
            p.mount().map_err(|e| format!("mount failed: {e}"))?;
            unmount_at(&target).map_err(|e| format!("unmount failed: {e}"))
        }
    };
    let r = run();
    // overlayfs leaves `work/work` with mode 000.
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::set_permissions(
        layers.work.join("work"),
        std::fs::Permissions::from_mode(0o700),
    );
    let _ = std::fs::remove_dir_all(scratch);
    r
}
