//! The catalog's two special ways of being open, each against a model:
//! random sequences of writes (`start_fork`, head moves, journals,
//! workspace), then a close, and the catalog reopened the usual way must
//! hold exactly the model's last values.
//! - `Catalog::open_unsynced` (the store of a fork that is not published
//!   yet): the backend that skips `fdatasync` must pass every read, write
//!   and length change through, and `close` must leave a cleanly closed
//!   file (redb's read-only open refuses one that needs a repair). Closing
//!   without `close` (the error path, which removes the store) must leave a
//!   file that still opens. An empty file is refused, not made a new
//!   catalog.
//! - `Catalog::open_lazily` (a save's), with `close_in_background` and
//!   `open_writable_in_background` between the writes: every read and
//!   write after a background close or open must see what came before it
//!   (the handle is opened again), a reader alive when a background open
//!   is asked for must go on reading its snapshot (the open must not close
//!   the handle under it), and dropping or closing the catalog must wait
//!   for a close or open still running, leaving a cleanly closed file.
//!   Checkpoints committed `Durable::AtClose` between them must be seen by
//!   every later read, and once `wait_durable` returns, the file must be
//!   cleanly closed and hold them (the close made them durable).

mod common;

use std::path::{Path, PathBuf};

use ckpt_lib::store::catalog::{Catalog, Durable, Journal, Origin};
use ckpt_lib::{Error, Hash};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Write {
    StartFork(u8, u64),
    Head(Option<u64>),
    Journal(Option<u64>),
    Workspace(u8),
}

fn write() -> impl Strategy<Value = Write> {
    prop_oneof![
        (any::<u8>(), 1u64..50).prop_map(|(w, h)| Write::StartFork(w, h)),
        proptest::option::of(1u64..50).prop_map(Write::Head),
        proptest::option::of(1u64..50).prop_map(Write::Journal),
        any::<u8>().prop_map(Write::Workspace),
    ]
}

/// What the catalog must hold after the writes.
#[derive(Debug, Default, PartialEq)]
struct Model {
    head: Option<u64>,
    journal: Option<u64>,
    workspace: Option<PathBuf>,
    origin: Option<u64>,
}

fn ws(w: u8) -> PathBuf {
    PathBuf::from(format!("/forks/f{w}"))
}

fn origin(h: u64) -> Origin {
    Origin {
        workspace: "/origin".into(),
        store: "/origin-store".into(),
        checkpoint: h,
        root: Hash::of(&h.to_le_bytes()),
    }
}

fn apply(cat: &Catalog, w: &Write, m: &mut Model) {
    match w {
        Write::StartFork(r, h) => {
            cat.start_fork(&ws(*r), &origin(*h), *h).unwrap();
            m.workspace = Some(ws(*r));
            m.origin = Some(*h);
            m.head = Some(*h);
            m.journal = None;
        }
        Write::Head(h) => {
            cat.set_head(*h).unwrap();
            m.head = *h;
        }
        Write::Journal(j) => {
            let journal = j.map(|t| Journal {
                target: t,
                paths: vec![b"a/b".to_vec()],
                undo: None,
            });
            cat.set_journal(journal.as_ref()).unwrap();
            m.journal = *j;
        }
        Write::Workspace(r) => {
            cat.set_workspace(&ws(*r)).unwrap();
            m.workspace = Some(ws(*r));
        }
    }
}

fn read(cat: &Catalog) -> Model {
    let r = cat.reader().unwrap();
    Model {
        head: r.head().unwrap(),
        journal: r.journal().unwrap().map(|j| j.target),
        workspace: r.workspace().unwrap(),
        origin: r.origin().unwrap().map(|o| o.checkpoint),
    }
}

/// The message of the checkpoint every catalog here starts with (number
/// 1): read only by a reader beside a background open, so that its page
/// is not one the handle holds in memory already.
const FIRST: &str = "first";

/// A catalog with a checkpoint and a few writes made the usual way (the
/// origin's, as a fork's snapshot holds it), and the model of it.
fn made(dir: &Path, before: &[Write]) -> (PathBuf, Model) {
    let path = dir.join("catalog.redb");
    let cat = Catalog::create(&path).unwrap();
    let first = common::record(0, 1, FIRST, &[]);
    let cp = cat.commit_checkpoint(&[], first, None, Durable::AtCommit);
    assert_eq!(cp.unwrap().seq, 1);
    let mut m = Model {
        head: Some(1),
        ..Model::default()
    };
    for w in before {
        apply(&cat, w, &mut m);
    }
    cat.close().unwrap();
    (path, m)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn unsynced_writes_are_all_there_once_closed(
        before in prop::collection::vec(write(), 0..4),
        writes in prop::collection::vec(write(), 1..12),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let (path, mut m) = made(dir.path(), &before);
        let cat = Catalog::open_unsynced(&path).unwrap();
        prop_assert_eq!(&read(&cat), &m, "what was there before");
        for w in &writes {
            apply(&cat, w, &mut m);
            prop_assert_eq!(&read(&cat), &m, "after {:?}", w);
        }
        cat.close().unwrap();
        let again = Catalog::open(&path).unwrap();
        prop_assert_eq!(&read(&again), &m, "reopened");
        again.close().unwrap();
        // redb opens read-only only a cleanly closed file (one that needs
        // no repair).
        prop_assert!(redb::Database::builder().open_read_only(&path).is_ok());
    }
}

#[derive(Clone, Debug)]
enum Step {
    Write(Write),
    CloseInBackground,
    OpenInBackground,
    /// A background open asked for while a reader is alive.
    OpenBesideReader,
    /// A checkpoint committed so, made the head.
    Commit(Durable),
    /// `wait_durable`, after which the file must be cleanly closed if the
    /// last commit was made `Durable::AtClose`.
    WaitDurable,
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn lazy_writes_are_all_there_across_background_closes(
        before in prop::collection::vec(write(), 0..4),
        steps in prop::collection::vec(
            prop_oneof![
                3 => write().prop_map(Step::Write),
                1 => Just(Step::CloseInBackground),
                1 => Just(Step::OpenInBackground),
                1 => Just(Step::OpenBesideReader),
                1 => prop_oneof![Just(Durable::AtClose), Just(Durable::AtCommit)]
                    .prop_map(Step::Commit),
                1 => Just(Step::WaitDurable),
            ],
            1..12,
        ),
        close: bool,
        end_opening: bool,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let (path, mut m) = made(dir.path(), &before);
        let cat = Catalog::open_lazily(&path).unwrap();
        prop_assert_eq!(&read(&cat), &m, "what was there before");
        // The last commit was `Durable::AtClose`, and nothing written since.
        let mut at_close = false;
        for s in &steps {
            if !matches!(s, Step::WaitDurable) {
                at_close = false;
            }
            match s {
                Step::Commit(d) => {
                    let rec = common::record(0, 2, "next", &[]);
                    m.head = Some(cat.commit_checkpoint(&[], rec, None, *d).unwrap().seq);
                    at_close = *d == Durable::AtClose;
                    continue;
                }
                Step::WaitDurable => {
                    cat.wait_durable().unwrap();
                    if at_close {
                        // Closed cleanly, with the commit in it: redb
                        // opens read-only only a file that needs no repair.
                        let ro = redb::Database::builder().open_read_only(&path);
                        prop_assert!(ro.is_ok(), "not cleanly closed after wait_durable");
                        drop(ro);
                        let again = Catalog::open_read_only(&path).unwrap();
                        prop_assert_eq!(&read(&again), &m, "durable at the close");
                    }
                }
                Step::Write(w) => apply(&cat, w, &mut m),
                Step::CloseInBackground => cat.close_in_background(),
                Step::OpenInBackground => cat.open_writable_in_background(),
                Step::OpenBesideReader => {
                    let r = cat.reader().unwrap();
                    cat.open_writable_in_background();
                    // A second reader waits for an open under way.
                    prop_assert_eq!(&read(&cat), &m, "a second reader");
                    // (DatabaseClosed if the handle was closed under it)
                    let cp = r.checkpoint(1).unwrap().map(|c| c.message);
                    prop_assert_eq!(cp.as_deref(), Some(FIRST), "a reader beside an open");
                }
            }
            prop_assert_eq!(&read(&cat), &m, "after {:?}", s);
        }
        // A close or open still running when the catalog goes: dropping
        // it, or closing it, must wait for it.
        if let Some(Step::Write(w)) = steps.last() {
            apply(&cat, w, &mut m);
        }
        match end_opening {
            true => cat.open_writable_in_background(),
            false => cat.close_in_background(),
        }
        if close {
            cat.close().unwrap();
        } else {
            drop(cat);
        }
        prop_assert!(redb::Database::builder().open_read_only(&path).is_ok());
        let again = Catalog::open(&path).unwrap();
        prop_assert_eq!(&read(&again), &m, "reopened");
    }
}

#[test]
fn dropped_without_close_still_opens() {
    let dir = tempfile::tempdir().unwrap();
    let (path, mut m) = made(dir.path(), &[Write::Head(Some(3))]);
    {
        let cat = Catalog::open_unsynced(&path).unwrap();
        apply(&cat, &Write::StartFork(7, 9), &mut m);
    }
    let again = Catalog::open(&path).unwrap();
    assert_eq!(read(&again), m);
}

#[test]
fn an_empty_file_is_refused_and_left_empty() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("catalog.redb");
    std::fs::write(&path, b"").unwrap();
    match Catalog::open_unsynced(&path) {
        Err(Error::Corrupt(msg)) => assert!(msg.contains("empty"), "{msg}"),
        Err(e) => panic!("not refused as corrupt: {e}"),
        Ok(_) => panic!("an empty file was opened as a catalog"),
    }
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);
    assert!(Catalog::open_unsynced(&dir.path().join("missing.redb")).is_err());
}
