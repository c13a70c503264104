//! A test-only FUSE filesystem that simulates power loss.
//!
//! Owns two copies of an in-memory filesystem: the *live* one that
//! processes see, and the *durable* one that would survive a power cut.
//! The model is the pessimistic POSIX one:
//! - `fsync`/`fdatasync` of a file makes its content, size, mode and mtime
//!   durable (not its name);
//! - `fsync` of a directory makes its entries durable: creations, renames
//!   into it and unlinks from it; a file that becomes reachable that way
//!   but was never synced is durable with the content it last had when
//!   synced (empty if never);
//! - nothing else is durable, ever (no background writeback).
//!
//! A [`Control`] lets a test [`freeze`](Control::freeze_at) the durable
//! copy just before the k-th sync request (so whatever the process does
//! afterwards is lost, as if the power went out there), then
//! [`cut`](Control::cut): the live filesystem becomes the durable one, as
//! after a reboot. Because the durable copy changes only at sync requests,
//! freezing before each of them (and after the last) enumerates every
//! distinct state a power cut could leave under this model.
//!
//! Invariants: inode numbers are never reused, so the kernel can never
//! confuse an inode from before a cut with one after; attribute and entry
//! caches have a zero TTL and files are opened with `FOPEN_DIRECT_IO`, so
//! every read and write reaches this model.
//!
//! `syncfs(2)` does not reach a FUSE filesystem; this model therefore treats
//! it as doing nothing (stricter than a real filesystem). Code that relies
//! on `syncfs` will be reported as losing data here, so tests keep under
//! the per-file `fsync` thresholds or account for it.

use std::collections::{BTreeMap, HashMap};
use std::ffi::{OsStr, OsString};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use fuser::{
    FileAttr, FileType, Filesystem, MountOption, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory,
    ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request, TimeOrNow,
};
use libc::{EEXIST, EINVAL, EISDIR, ENOENT, ENOTDIR, ENOTEMPTY};

const TTL: Duration = Duration::ZERO;
const ROOT: u64 = 1;
const FOPEN_DIRECT_IO: u32 = 1;

#[derive(Clone, Debug)]
enum Body {
    File(Arc<Vec<u8>>),
    Dir(BTreeMap<OsString, u64>),
    Symlink(OsString),
}

#[derive(Clone, Debug)]
struct Node {
    body: Body,
    perm: u16,
    mtime: SystemTime,
    ctime: SystemTime,
}

impl Node {
    fn kind(&self) -> FileType {
        match self.body {
            Body::File(_) => FileType::RegularFile,
            Body::Dir(_) => FileType::Directory,
            Body::Symlink(_) => FileType::Symlink,
        }
    }

    /// What the node is when it first becomes durable through its parent
    /// directory, without ever having been synced itself.
    fn skeleton(&self) -> Node {
        let body = match &self.body {
            Body::File(_) => Body::File(Arc::new(Vec::new())),
            Body::Dir(_) => Body::Dir(BTreeMap::new()),
            Body::Symlink(t) => Body::Symlink(t.clone()),
        };
        Node {
            body,
            ..self.clone()
        }
    }
}

type Nodes = HashMap<u64, Node>;

/// The shared state: live and durable filesystems and the freeze control.
#[derive(Debug)]
struct State {
    live: Nodes,
    durable: Nodes,
    next_ino: u64,
    syncs: u64,
    freeze_at: Option<u64>,
    frozen: bool,
}

fn new_root() -> Nodes {
    let now = SystemTime::now();
    let mut m = HashMap::new();
    m.insert(
        ROOT,
        Node {
            body: Body::Dir(BTreeMap::new()),
            perm: 0o755,
            mtime: now,
            ctime: now,
        },
    );
    m
}

impl State {
    /// Counts a sync request; false if the durable copy is frozen (the
    /// power is already out).
    fn sync_allowed(&mut self) -> bool {
        self.syncs += 1;
        if self.freeze_at.is_some_and(|k| self.syncs >= k) {
            self.frozen = true;
        }
        !self.frozen
    }

    fn sync_file(&mut self, ino: u64) {
        if !self.sync_allowed() {
            return;
        }
        if let Some(n) = self.live.get(&ino) {
            let mut n = n.clone();
            if let (Body::Dir(_), Some(d)) = (&n.body, self.durable.get(&ino)) {
                n.body = d.body.clone();
            }
            self.durable.insert(ino, n);
        }
    }

    fn sync_dir(&mut self, ino: u64) {
        if !self.sync_allowed() {
            return;
        }
        let Some(n) = self.live.get(&ino).cloned() else {
            return;
        };
        if let Body::Dir(entries) = &n.body {
            for child in entries.values() {
                if !self.durable.contains_key(child) {
                    let sk = self.live[child].skeleton();
                    self.durable.insert(*child, sk);
                }
            }
        }
        self.durable.insert(ino, n);
    }

    /// After a cut: the durable copy, without unreachable nodes.
    fn reachable(nodes: &Nodes) -> Nodes {
        let mut out = HashMap::new();
        let mut stack = vec![ROOT];
        while let Some(i) = stack.pop() {
            let Some(n) = nodes.get(&i) else { continue };
            if let Body::Dir(e) = &n.body {
                stack.extend(e.values().copied());
            }
            out.insert(i, n.clone());
        }
        out
    }

    fn attr(&self, ino: u64) -> Option<FileAttr> {
        let n = self.live.get(&ino)?;
        let size = match &n.body {
            Body::File(d) => d.len() as u64,
            Body::Dir(e) => e.len() as u64,
            Body::Symlink(t) => t.len() as u64,
        };
        Some(FileAttr {
            ino,
            size,
            blocks: size.div_ceil(512),
            atime: n.mtime,
            mtime: n.mtime,
            ctime: n.ctime,
            crtime: n.ctime,
            kind: n.kind(),
            perm: n.perm,
            nlink: if matches!(n.body, Body::Dir(_)) { 2 } else { 1 },
            uid: 0,
            gid: 0,
            rdev: 0,
            blksize: 4096,
            flags: 0,
        })
    }

    fn dir(&mut self, ino: u64) -> Result<&mut BTreeMap<OsString, u64>, i32> {
        match self.live.get_mut(&ino).map(|n| &mut n.body) {
            Some(Body::Dir(e)) => Ok(e),
            Some(_) => Err(ENOTDIR),
            None => Err(ENOENT),
        }
    }

    fn touch(&mut self, ino: u64) {
        if let Some(n) = self.live.get_mut(&ino) {
            let now = SystemTime::now();
            n.mtime = now;
            n.ctime = now;
        }
    }

    fn add(&mut self, parent: u64, name: &OsStr, body: Body, perm: u16) -> Result<u64, i32> {
        if self.dir(parent)?.contains_key(name) {
            return Err(EEXIST);
        }
        let ino = self.next_ino;
        self.next_ino += 1;
        let now = SystemTime::now();
        self.live.insert(
            ino,
            Node {
                body,
                perm,
                mtime: now,
                ctime: now,
            },
        );
        self.dir(parent)?.insert(name.to_os_string(), ino);
        self.touch(parent);
        Ok(ino)
    }

    fn remove(&mut self, parent: u64, name: &OsStr, want_dir: bool) -> Result<(), i32> {
        let ino = *self.dir(parent)?.get(name).ok_or(ENOENT)?;
        match (&self.live[&ino].body, want_dir) {
            (Body::Dir(e), true) if !e.is_empty() => return Err(ENOTEMPTY),
            (Body::Dir(_), false) => return Err(EISDIR),
            (Body::Dir(_), true) => {}
            (_, true) => return Err(ENOTDIR),
            _ => {}
        }
        self.dir(parent)?.remove(name);
        self.touch(parent);
        Ok(())
    }

    fn rename(
        &mut self,
        parent: u64,
        name: &OsStr,
        newparent: u64,
        newname: &OsStr,
        flags: u32,
    ) -> Result<(), i32> {
        let ino = *self.dir(parent)?.get(name).ok_or(ENOENT)?;
        if flags & !libc::RENAME_NOREPLACE != 0 {
            return Err(EINVAL);
        }
        if let Some(&old) = self.dir(newparent)?.get(newname) {
            if flags & libc::RENAME_NOREPLACE != 0 {
                return Err(EEXIST);
            }
            if old == ino {
                return Ok(());
            }
            match (&self.live[&old].body, &self.live[&ino].body) {
                (Body::Dir(e), Body::Dir(_)) if !e.is_empty() => return Err(ENOTEMPTY),
                (Body::Dir(_), Body::Dir(_)) => {}
                (Body::Dir(_), _) => return Err(EISDIR),
                (_, Body::Dir(_)) => return Err(ENOTDIR),
                _ => {}
            }
        }
        self.dir(parent)?.remove(name);
        self.dir(newparent)?.insert(newname.to_os_string(), ino);
        self.touch(parent);
        self.touch(newparent);
        Ok(())
    }
}

/// The FUSE side.
struct PowerFs(Arc<Mutex<State>>);

/// The test side: controls a mounted [`PowerFs`]. Unmounts on drop.
pub struct Control {
    state: Arc<Mutex<State>>,
    _session: fuser::BackgroundSession,
}

/// A saved pair of live and durable filesystems.
#[derive(Clone)]
pub struct Image {
    live: Nodes,
    durable: Nodes,
}

impl Control {
    /// Mounts an empty power-loss filesystem at `mountpoint`.
    pub fn mount(mountpoint: &Path) -> std::io::Result<Control> {
        let state = Arc::new(Mutex::new(State {
            live: new_root(),
            durable: new_root(),
            next_ino: ROOT + 1,
            syncs: 0,
            freeze_at: None,
            frozen: false,
        }));
        let session = fuser::spawn_mount2(
            PowerFs(Arc::clone(&state)),
            mountpoint,
            &[
                MountOption::FSName("ckpt-powerloss".into()),
                MountOption::DefaultPermissions,
            ],
        )?;
        Ok(Control {
            state,
            _session: session,
        })
    }

    /// Makes everything durable (a clean shutdown).
    pub fn sync_all(&self) {
        let mut s = self.state.lock().unwrap();
        s.durable = s.live.clone();
    }

    /// The current live and durable filesystems.
    pub fn image(&self) -> Image {
        let s = self.state.lock().unwrap();
        Image {
            live: s.live.clone(),
            durable: s.durable.clone(),
        }
    }

    /// Puts back an image, resets the sync counter and unfreezes. No
    /// process may have a file open on the mount.
    pub fn set_image(&self, img: &Image) {
        let mut s = self.state.lock().unwrap();
        s.live = img.live.clone();
        s.durable = img.durable.clone();
        s.syncs = 0;
        s.freeze_at = None;
        s.frozen = false;
    }

    /// Sync requests seen since the last [`set_image`](Self::set_image).
    pub fn syncs(&self) -> u64 {
        self.state.lock().unwrap().syncs
    }

    /// Freezes the durable copy just before the `k`-th sync request (1 =
    /// the first): the power goes out there.
    pub fn freeze_at(&self, k: u64) {
        self.state.lock().unwrap().freeze_at = Some(k);
    }

    /// Whether the freeze point was reached.
    pub fn frozen(&self) -> bool {
        self.state.lock().unwrap().frozen
    }

    /// The power cut: the live filesystem becomes what was durable. No
    /// process may have a file open on the mount.
    pub fn cut(&self) {
        let mut s = self.state.lock().unwrap();
        s.live = State::reachable(&s.durable);
        s.durable = s.live.clone();
        s.freeze_at = None;
        s.frozen = false;
    }
}

fn time(t: TimeOrNow) -> SystemTime {
    match t {
        TimeOrNow::SpecificTime(t) => t,
        TimeOrNow::Now => SystemTime::now(),
    }
}

impl Filesystem for PowerFs {
    fn lookup(&mut self, _req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEntry) {
        let mut s = self.0.lock().unwrap();
        let ino = match s.dir(parent) {
            Ok(e) => e.get(name).copied(),
            Err(e) => return reply.error(e),
        };
        match ino.and_then(|i| s.attr(i)) {
            Some(a) => reply.entry(&TTL, &a, 0),
            None => reply.error(ENOENT),
        }
    }

    fn getattr(&mut self, _req: &Request<'_>, ino: u64, _fh: Option<u64>, reply: ReplyAttr) {
        match self.0.lock().unwrap().attr(ino) {
            Some(a) => reply.attr(&TTL, &a),
            None => reply.error(ENOENT),
        }
    }

    fn setattr(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<u64>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<u32>,
        reply: ReplyAttr,
    ) {
        let mut s = self.0.lock().unwrap();
        let Some(n) = s.live.get_mut(&ino) else {
            return reply.error(ENOENT);
        };
        if let Some(m) = mode {
            n.perm = (m & 0o7777) as u16;
        }
        if let Some(len) = size {
            match &mut n.body {
                Body::File(d) => Arc::make_mut(d).resize(len as usize, 0),
                _ => return reply.error(EISDIR),
            }
            n.mtime = SystemTime::now();
        }
        if let Some(t) = mtime {
            n.mtime = time(t);
        }
        n.ctime = SystemTime::now();
        let a = s.attr(ino).unwrap();
        reply.attr(&TTL, &a);
    }

    fn readlink(&mut self, _req: &Request<'_>, ino: u64, reply: ReplyData) {
        use std::os::unix::ffi::OsStrExt;
        match self.0.lock().unwrap().live.get(&ino).map(|n| &n.body) {
            Some(Body::Symlink(t)) => reply.data(t.as_bytes()),
            Some(_) => reply.error(EINVAL),
            None => reply.error(ENOENT),
        }
    }

    fn mkdir(
        &mut self,
        _req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let mut s = self.0.lock().unwrap();
        let perm = (mode & !umask & 0o7777) as u16;
        match s.add(parent, name, Body::Dir(BTreeMap::new()), perm) {
            Ok(i) => reply.entry(&TTL, &s.attr(i).unwrap(), 0),
            Err(e) => reply.error(e),
        }
    }

    fn unlink(&mut self, _req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEmpty) {
        match self.0.lock().unwrap().remove(parent, name, false) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn rmdir(&mut self, _req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEmpty) {
        match self.0.lock().unwrap().remove(parent, name, true) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn symlink(
        &mut self,
        _req: &Request<'_>,
        parent: u64,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let mut s = self.0.lock().unwrap();
        let body = Body::Symlink(target.as_os_str().to_os_string());
        match s.add(parent, link_name, body, 0o777) {
            Ok(i) => reply.entry(&TTL, &s.attr(i).unwrap(), 0),
            Err(e) => reply.error(e),
        }
    }

    fn rename(
        &mut self,
        _req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        newparent: u64,
        newname: &OsStr,
        flags: u32,
        reply: ReplyEmpty,
    ) {
        match self
            .0
            .lock()
            .unwrap()
            .rename(parent, name, newparent, newname, flags)
        {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn open(&mut self, _req: &Request<'_>, ino: u64, flags: i32, reply: ReplyOpen) {
        let mut s = self.0.lock().unwrap();
        if !s.live.contains_key(&ino) {
            return reply.error(ENOENT);
        }
        if flags & libc::O_TRUNC != 0 {
            if let Some(Node {
                body: Body::File(d),
                ..
            }) = s.live.get_mut(&ino)
            {
                Arc::make_mut(d).clear();
            }
        }
        reply.opened(0, FOPEN_DIRECT_IO);
    }

    fn read(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        _fh: u64,
        offset: i64,
        size: u32,
        _flags: i32,
        _lock_owner: Option<u64>,
        reply: ReplyData,
    ) {
        match self.0.lock().unwrap().live.get(&ino).map(|n| &n.body) {
            Some(Body::File(d)) => {
                let start = (offset as usize).min(d.len());
                let end = (start + size as usize).min(d.len());
                reply.data(&d[start..end]);
            }
            Some(_) => reply.error(EISDIR),
            None => reply.error(ENOENT),
        }
    }

    fn write(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        _fh: u64,
        offset: i64,
        data: &[u8],
        _write_flags: u32,
        _flags: i32,
        _lock_owner: Option<u64>,
        reply: ReplyWrite,
    ) {
        let mut s = self.0.lock().unwrap();
        let Some(n) = s.live.get_mut(&ino) else {
            return reply.error(ENOENT);
        };
        let Body::File(d) = &mut n.body else {
            return reply.error(EISDIR);
        };
        let d = Arc::make_mut(d);
        let off = offset as usize;
        if d.len() < off + data.len() {
            d.resize(off + data.len(), 0);
        }
        d[off..off + data.len()].copy_from_slice(data);
        let now = SystemTime::now();
        n.mtime = now;
        n.ctime = now;
        reply.written(data.len() as u32);
    }

    fn flush(&mut self, _req: &Request<'_>, _ino: u64, _fh: u64, _lo: u64, reply: ReplyEmpty) {
        reply.ok();
    }

    fn fsync(&mut self, _req: &Request<'_>, ino: u64, _fh: u64, _ds: bool, reply: ReplyEmpty) {
        let mut s = self.0.lock().unwrap();
        if matches!(s.live.get(&ino).map(|n| &n.body), Some(Body::Dir(_))) {
            s.sync_dir(ino);
        } else {
            s.sync_file(ino);
        }
        reply.ok();
    }

    fn readdir(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        _fh: u64,
        offset: i64,
        mut reply: ReplyDirectory,
    ) {
        let s = self.0.lock().unwrap();
        let Some(Node {
            body: Body::Dir(e), ..
        }) = s.live.get(&ino)
        else {
            return reply.error(ENOTDIR);
        };
        let mut all: Vec<(u64, FileType, OsString)> = vec![
            (ino, FileType::Directory, ".".into()),
            (ino, FileType::Directory, "..".into()),
        ];
        for (name, &child) in e {
            if let Some(n) = s.live.get(&child) {
                all.push((child, n.kind(), name.clone()));
            }
        }
        for (i, (child, kind, name)) in all.into_iter().enumerate().skip(offset as usize) {
            if reply.add(child, (i + 1) as i64, kind, &name) {
                break;
            }
        }
        reply.ok();
    }

    fn fsyncdir(&mut self, _req: &Request<'_>, ino: u64, _fh: u64, _ds: bool, reply: ReplyEmpty) {
        self.0.lock().unwrap().sync_dir(ino);
        reply.ok();
    }

    fn statfs(&mut self, _req: &Request<'_>, _ino: u64, reply: ReplyStatfs) {
        reply.statfs(1 << 20, 1 << 19, 1 << 19, 1 << 20, 1 << 19, 4096, 255, 4096);
    }

    fn access(&mut self, _req: &Request<'_>, _ino: u64, _mask: i32, reply: ReplyEmpty) {
        reply.ok();
    }

    fn create(
        &mut self,
        _req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        mode: u32,
        umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        let mut s = self.0.lock().unwrap();
        let perm = (mode & !umask & 0o7777) as u16;
        match s.add(parent, name, Body::File(Arc::new(Vec::new())), perm) {
            Ok(i) => reply.created(&TTL, &s.attr(i).unwrap(), 0, 0, FOPEN_DIRECT_IO),
            Err(e) => reply.error(e),
        }
    }
}
