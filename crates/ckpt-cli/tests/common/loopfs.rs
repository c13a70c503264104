//! Loop-mounted filesystems for tests (root only): `mount("xfs", &["-m",
//! "reflink=1"])` makes and mounts a 512 MiB image, unmounted on drop.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A mounted loop filesystem, unmounted and removed on drop.
pub struct LoopFs {
    /// Holds the image and the mount point; removed after the unmount.
    _dir: tempfile::TempDir,
    /// Where it is mounted.
    pub mnt: PathBuf,
    mounted: bool,
}

impl Drop for LoopFs {
    fn drop(&mut self) {
        if self.mounted {
            let ok = Command::new("umount")
                .arg(&self.mnt)
                .status()
                .is_ok_and(|s| s.success());
            if !ok {
                let _ = Command::new("umount").arg("-l").arg(&self.mnt).status();
            }
        }
    }
}

pub fn which(tool: &str) -> Option<PathBuf> {
    for dir in [
        "/usr/sbin",
        "/sbin",
        "/usr/bin",
        "/bin",
        "/usr/local/sbin",
        "/usr/local/bin",
    ] {
        let p = Path::new(dir).join(tool);
        if p.is_file() {
            return Some(p);
        }
    }
    None
}

/// Why a loop filesystem could not be made: something CI provides (root,
/// the mkfs tool), or the machine refused.
pub enum NoFs {
    /// Something CI provides is missing (root, the mkfs tool).
    Missing(String),
    /// The machine refused (mkfs or mount failed).
    Refused(String),
}

impl From<String> for NoFs {
    fn from(s: String) -> NoFs {
        NoFs::Refused(s)
    }
}

/// Makes and mounts a 512 MiB loop filesystem, or says why not.
pub fn mount(fs: &str, mkfs_args: &[&str]) -> Result<LoopFs, NoFs> {
    if unsafe { libc::geteuid() } != 0 {
        return Err(NoFs::Missing("not running as root".into()));
    }
    let mkfs = which(&format!("mkfs.{fs}"))
        .ok_or_else(|| NoFs::Missing(format!("mkfs.{fs} not found")))?;
    let dir = tempfile::Builder::new()
        .prefix("ckpt-reflink-")
        .tempdir_in(std::env::temp_dir())
        .map_err(|e| e.to_string())?;
    let img = dir.path().join("fs.img");
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).map_err(|e| e.to_string())?;
    std::fs::File::create(&img)
        .and_then(|f| f.set_len(512 << 20))
        .map_err(|e| e.to_string())?;
    let out = Command::new(&mkfs)
        .args(mkfs_args)
        .arg(&img)
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(NoFs::Refused(format!(
            "mkfs.{fs} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    let out = Command::new("mount")
        .args(["-o", "loop"])
        .arg(&img)
        .arg(&mnt)
        .output()
        .map_err(|e| format!("mount: {e}"))?;
    if !out.status.success() {
        return Err(NoFs::Refused(format!(
            "mount -o loop failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(LoopFs {
        _dir: dir,
        mnt,
        mounted: true,
    })
}
