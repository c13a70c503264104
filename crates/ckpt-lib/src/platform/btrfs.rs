//! btrfs subvolumes through their ioctls (`linux/btrfs.h`), for the
//! subvolume fork backend ([`crate::engine::fork::backend`]): is a directory a
//! subvolume, which filesystem is it on, snapshot one, create and delete
//! one. Nothing here shells out to `btrfs`.
//!
//! Why these are sound: each ioctl is called with exactly the argument
//! structure the kernel's header defines (sizes are checked at compile
//! time below), on a descriptor we opened, with a NUL-terminated name no
//! longer than the kernel's limit (refused before the call otherwise). The
//! kernel does every check that matters (permissions, same filesystem, the
//! source being a subvolume) and answers with an errno, which callers turn
//! into a message.

use std::os::fd::{AsRawFd, BorrowedFd};

use rustix::io::Errno;
use rustix::ioctl::{ioctl, opcode, Getter, Setter};

/// `statfs` magic of btrfs.
pub const BTRFS_MAGIC: i64 = 0x9123_683E;
/// Inode number of a subvolume's root directory (`BTRFS_FIRST_FREE_OBJECTID`).
const SUBVOL_ROOT_INO: u64 = 256;
/// `BTRFS_SUBVOL_NAME_MAX`.
const NAME_MAX_V2: usize = 4039;
/// `BTRFS_PATH_NAME_MAX`.
const NAME_MAX_V1: usize = 4087;

/// `struct btrfs_ioctl_vol_args`.
#[repr(C)]
struct VolArgs {
    fd: i64,
    name: [u8; NAME_MAX_V1 + 1],
}

/// `struct btrfs_ioctl_vol_args_v2` (the union members we use: flags, name).
#[repr(C)]
struct VolArgsV2 {
    fd: i64,
    transid: u64,
    flags: u64,
    unused: [u64; 4],
    name: [u8; NAME_MAX_V2 + 1],
}

const _: () = assert!(std::mem::size_of::<VolArgs>() == 4096);
const _: () = assert!(std::mem::size_of::<VolArgsV2>() == 4096);

/// `struct btrfs_ioctl_fs_info_args` (1 KiB; the fsid is bytes 16..32).
type FsInfoArgs = [u64; 128];

const IOC_MAGIC: u8 = 0x94;
const SUBVOL_CREATE: rustix::ioctl::Opcode = opcode::write::<VolArgs>(IOC_MAGIC, 14);
const SNAP_CREATE_V2: rustix::ioctl::Opcode = opcode::write::<VolArgsV2>(IOC_MAGIC, 23);
const FS_INFO: rustix::ioctl::Opcode = opcode::read::<FsInfoArgs>(IOC_MAGIC, 31);
const SNAP_DESTROY_V2: rustix::ioctl::Opcode = opcode::write::<VolArgsV2>(IOC_MAGIC, 63);

fn name_into(dst: &mut [u8], name: &[u8]) -> Result<(), Errno> {
    if name.is_empty() || name.len() >= dst.len() || name.contains(&0) || name.contains(&b'/') {
        return Err(Errno::INVAL);
    }
    dst[..name.len()].copy_from_slice(name);
    Ok(())
}

/// Whether `fd` is on btrfs.
pub fn is_btrfs(fd: BorrowedFd<'_>) -> bool {
    #[allow(clippy::unnecessary_cast)]
    rustix::fs::fstatfs(fd).is_ok_and(|s| s.f_type as i64 == BTRFS_MAGIC)
}

/// Whether the directory `fd` is the root of a btrfs subvolume.
pub fn is_subvolume(fd: BorrowedFd<'_>) -> bool {
    is_btrfs(fd)
        && rustix::fs::fstat(fd).is_ok_and(|s| {
            s.st_ino == SUBVOL_ROOT_INO && rustix::fs::FileType::from_raw_mode(s.st_mode).is_dir()
        })
}

/// The id of the btrfs filesystem holding `fd` (the same for every
/// subvolume of it, unlike `st_dev`).
pub fn fsid(fd: BorrowedFd<'_>) -> Result<[u8; 16], Errno> {
    // SAFETY: FS_INFO fills a `btrfs_ioctl_fs_info_args`, 1 KiB, which is
    // the size of `FsInfoArgs`.
    let args: FsInfoArgs = unsafe { ioctl(fd, Getter::<FS_INFO, FsInfoArgs>::new()) }?;
    let mut id = [0u8; 16];
    id[..8].copy_from_slice(&args[2].to_ne_bytes());
    id[8..].copy_from_slice(&args[3].to_ne_bytes());
    Ok(id)
}

/// Makes `name` in the directory `dir` a writable snapshot of the
/// subvolume `src` (`BTRFS_IOC_SNAP_CREATE_V2`). Atomic: afterwards
/// `name` is the whole snapshot, or (on an error) does not exist.
pub fn snapshot(src: BorrowedFd<'_>, dir: BorrowedFd<'_>, name: &[u8]) -> Result<(), Errno> {
    let mut args = VolArgsV2 {
        fd: i64::from(src.as_raw_fd()),
        transid: 0,
        flags: 0,
        unused: [0; 4],
        name: [0; NAME_MAX_V2 + 1],
    };
    name_into(&mut args.name, name)?;
    // SAFETY: the argument is a `btrfs_ioctl_vol_args_v2` with a
    // NUL-terminated name and flags 0 (no qgroup inherit pointer is read).
    unsafe { ioctl(dir, Setter::<SNAP_CREATE_V2, VolArgsV2>::new(args)) }
}

/// Creates the empty subvolume `name` in the directory `dir`
/// (`BTRFS_IOC_SUBVOL_CREATE`).
pub fn create_subvolume(dir: BorrowedFd<'_>, name: &[u8]) -> Result<(), Errno> {
    let mut args = VolArgs {
        fd: 0,
        name: [0; NAME_MAX_V1 + 1],
    };
    name_into(&mut args.name, name)?;
    // SAFETY: the argument is a `btrfs_ioctl_vol_args` with a
    // NUL-terminated name.
    unsafe { ioctl(dir, Setter::<SUBVOL_CREATE, VolArgs>::new(args)) }
}

/// Deletes the subvolume `name` in the directory `dir` with everything in
/// it (`BTRFS_IOC_SNAP_DESTROY_V2`). Needs `CAP_SYS_ADMIN` or the
/// `user_subvol_rm_allowed` mount option (else `EPERM`).
pub fn delete_subvolume(dir: BorrowedFd<'_>, name: &[u8]) -> Result<(), Errno> {
    let mut args = VolArgsV2 {
        fd: 0,
        transid: 0,
        flags: 0,
        unused: [0; 4],
        name: [0; NAME_MAX_V2 + 1],
    };
    name_into(&mut args.name, name)?;
    // SAFETY: the argument is a `btrfs_ioctl_vol_args_v2` naming the
    // subvolume by a NUL-terminated name (flags 0: not by id).
    unsafe { ioctl(dir, Setter::<SNAP_DESTROY_V2, VolArgsV2>::new(args)) }
}
