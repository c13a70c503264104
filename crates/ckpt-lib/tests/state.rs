//! Agent state and checkpoints, at the library level: a save records the
//! state version (and no `state.redb` means `None`, without creating one);
//! restore brings files and state back together, its undo id rewinds both,
//! `FilesOnly`/`StateOnly` restrict it; a checkpoint without state restores
//! to the empty state; a state-only change is a change for save, a restored
//! equal state is not; gc keeps every version a checkpoint pins and collects
//! the others; diff reports state keys.

use std::path::Path;
use std::time::Duration;

use ckpt_lib::engine::restore::{self, RestoreJob, Scope};
use ckpt_lib::engine::save::{self, SaveJob, SaveOutcome};
use ckpt_lib::engine::scanner::OnDisk;
use ckpt_lib::store::catalog::Checkpoint;
use ckpt_lib::store::state::{ChangeKind, STATE_FILE};
use ckpt_lib::store::Store;
use ckpt_lib::workspace::Workspace;
use ckpt_lib::Config;

const T: Duration = Duration::from_secs(10);

struct Fixture {
    _tmp: tempfile::TempDir,
    ws: Workspace,
}

fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("ws");
    std::fs::create_dir(&root).unwrap();
    let ws = Workspace::init(&root, Some(&tmp.path().join("store")), None).unwrap();
    Fixture { _tmp: tmp, ws }
}

impl Fixture {
    fn store(&self) -> Store {
        self.ws.open_store(&Config::locking(T)).unwrap()
    }

    fn write(&self, name: &str, content: &str) {
        std::fs::write(self.ws.root.join(name), content).unwrap();
    }

    fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.ws.root.join(name)).unwrap()
    }

    fn save(&self) -> SaveOutcome {
        save::save(&self.ws, &self.store(), &SaveJob::default()).unwrap()
    }

    #[track_caller]
    fn saved(&self) -> Checkpoint {
        match self.save() {
            SaveOutcome::Saved(cp) => cp,
            SaveOutcome::Unchanged(h) => panic!("expected a new checkpoint, head {h:?}"),
        }
    }

    fn put(&self, key: &str, value: &str) -> u64 {
        let store = self.store();
        let s = store.state.get_or_create().unwrap();
        s.put(key.as_bytes(), value.as_bytes()).unwrap()
    }

    fn del(&self, key: &str) -> u64 {
        let store = self.store();
        let s = store.state.get_or_create().unwrap();
        s.delete(key.as_bytes()).unwrap()
    }

    fn get(&self, key: &str) -> Option<String> {
        let store = self.store();
        let s = store.state.get().unwrap()?;
        s.get(key.as_bytes()).map(|v| String::from_utf8(v).unwrap())
    }

    fn latest(&self) -> u64 {
        self.store().state.current_version().unwrap().unwrap_or(0)
    }

    fn restore(&self, seq: u64, scope: Scope) -> restore::RestoreOutcome {
        restore::restore(
            &self.ws,
            &self.store(),
            &format!("v{seq}"),
            &RestoreJob {
                scope,
                ..Default::default()
            },
            &mut OnDisk::default(),
        )
        .unwrap()
    }

    fn state_file(&self) -> std::path::PathBuf {
        self.ws.store_path.join(STATE_FILE)
    }
}

fn exists(p: &Path) -> bool {
    p.exists()
}

#[test]
fn save_without_state_records_none_and_creates_nothing() {
    let f = fixture();
    f.write("a.txt", "one");
    let cp = f.saved();
    assert_eq!(cp.state_version, None);
    assert!(
        !exists(&f.state_file()),
        "a save must not create state.redb"
    );
    // The record's JSON (which its hash covers) has no state_version field.
    let json = serde_json::to_string(&cp).unwrap();
    assert!(!json.contains("state_version"), "{json}");
    // Restore and gc without a state store do not create one either.
    f.write("a.txt", "two");
    let rep = f.restore(cp.seq, Scope::All);
    assert!(rep.state.is_none());
    let gc = ckpt_lib::store::gc::gc(&f.store(), false).unwrap();
    assert!(gc.state.is_none());
    assert!(!exists(&f.state_file()));
}

#[test]
fn save_records_state_version_and_restore_brings_both_back() {
    let f = fixture();
    f.write("notes.md", "plan A");
    f.put("plan", "A");
    f.put("step", "1");
    let v_saved = f.latest();
    let cp = f.saved();
    assert_eq!(cp.state_version, Some(v_saved));
    let json = serde_json::to_string(&cp).unwrap();
    assert!(
        json.contains(&format!("\"state_version\":{v_saved}")),
        "{json}"
    );
    // The stored record reads back (its hash covers the new field).
    let back = f.store().catalog.reader().unwrap().resolve("HEAD").unwrap();
    assert_eq!(back.state_version, Some(v_saved));

    // Change files and state.
    f.write("notes.md", "plan B");
    f.put("plan", "B");
    f.del("step");
    f.put("new", "x");
    let v_changed = f.latest();

    let rep = f.restore(cp.seq, Scope::All);
    assert_eq!(f.read("notes.md"), "plan A");
    assert_eq!(f.get("plan").as_deref(), Some("A"));
    assert_eq!(f.get("step").as_deref(), Some("1"));
    assert_eq!(f.get("new"), None);
    let st = rep.state.expect("state restored");
    assert_eq!(st.target, v_saved);
    assert_eq!(st.before, v_changed);
    assert!(
        st.after > v_changed,
        "restore is a new commit, history is kept"
    );
    assert_eq!(st.changes.len(), 3);

    // The undo id rewinds both.
    let undo = rep.undo.expect("undo id");
    let pre = rep.pre_save.expect("pre-restore save");
    assert_eq!(pre.seq, undo);
    assert_eq!(pre.state_version, Some(v_changed));
    f.restore(undo, Scope::All);
    assert_eq!(f.read("notes.md"), "plan B");
    assert_eq!(f.get("plan").as_deref(), Some("B"));
    assert_eq!(f.get("step"), None);
    assert_eq!(f.get("new").as_deref(), Some("x"));
}

#[test]
fn state_only_change_is_saved_and_restored_equal_state_is_not() {
    let f = fixture();
    f.write("a", "1");
    f.put("k", "v1");
    let cp1 = f.saved();
    // Only the state changes: still a new checkpoint.
    f.put("k", "v2");
    let cp2 = f.saved();
    assert_ne!(cp2.state_version, cp1.state_version);
    assert_eq!(cp2.stats.files_modified, 0);
    // A rewrite with identical content is no change.
    f.put("k", "v2");
    assert!(matches!(f.save(), SaveOutcome::Unchanged(Some(h)) if h.seq == cp2.seq));
    // After restoring cp1 (state is a new commit equal to cp1's), nothing
    // changed relative to the head.
    f.restore(cp1.seq, Scope::All);
    assert!(f.latest() > cp2.state_version.unwrap());
    assert!(matches!(f.save(), SaveOutcome::Unchanged(Some(h)) if h.seq == cp1.seq));
}

#[test]
fn files_only_and_state_only() {
    let f = fixture();
    f.write("a", "old");
    f.put("k", "old");
    let cp = f.saved();
    f.write("a", "new");
    f.put("k", "new");

    let rep = f.restore(cp.seq, Scope::FilesOnly);
    assert!(rep.state.is_none());
    assert_eq!(f.read("a"), "old");
    assert_eq!(
        f.get("k").as_deref(),
        Some("new"),
        "--files-only left state"
    );

    f.write("a", "newer");
    let head_before = f.store().catalog.reader().unwrap().head().unwrap();
    let rep = f.restore(cp.seq, Scope::StateOnly);
    assert_eq!(f.get("k").as_deref(), Some("old"));
    assert_eq!(f.read("a"), "newer", "--state-only left files");
    assert!(rep.changes.is_empty());
    // The pre-restore save captured files + state; its id undoes.
    let undo = rep.undo.expect("undo");
    assert_ne!(Some(undo), head_before);
    let head_after = f.store().catalog.reader().unwrap().head().unwrap();
    assert_eq!(
        head_after,
        Some(undo),
        "--state-only does not move HEAD to the target"
    );
    f.restore(undo, Scope::All);
    assert_eq!(f.get("k").as_deref(), Some("new"));
    assert_eq!(f.read("a"), "newer");

    // --state-only with paths is refused.
    let err = restore::restore(
        &f.ws,
        &f.store(),
        &format!("v{}", cp.seq),
        &RestoreJob {
            scope: Scope::StateOnly,
            paths: vec![b"a".to_vec()],
            ..Default::default()
        },
        &mut OnDisk::default(),
    )
    .expect_err("refused");
    assert_eq!(err.exit_code(), 2);
    // Restoring only some paths leaves the state alone.
    f.put("k", "other");
    let rep = restore::restore(
        &f.ws,
        &f.store(),
        &format!("v{}", cp.seq),
        &RestoreJob {
            paths: vec![b"a".to_vec()],
            ..Default::default()
        },
        &mut OnDisk::default(),
    )
    .unwrap();
    assert!(rep.state.is_none());
    assert_eq!(f.read("a"), "old");
    assert_eq!(f.get("k").as_deref(), Some("other"));
}

#[test]
fn checkpoint_without_state_restores_the_empty_state() {
    let f = fixture();
    f.write("a", "1");
    let cp0 = f.saved();
    assert_eq!(cp0.state_version, None);
    f.put("k", "v");
    f.put("j", "w");
    let rep = f.restore(cp0.seq, Scope::All);
    let st = rep.state.expect("state restored");
    assert_eq!(st.target, 0);
    assert_eq!(st.changes.len(), 2);
    assert!(st.changes.iter().all(|c| c.kind == ChangeKind::Removed));
    assert_eq!(f.get("k"), None);
    assert_eq!(f.get("j"), None);
    // ... undoably.
    f.restore(rep.undo.unwrap(), Scope::All);
    assert_eq!(f.get("k").as_deref(), Some("v"));
}

#[test]
fn dry_run_changes_no_state() {
    let f = fixture();
    f.write("a", "1");
    f.put("k", "old");
    let cp = f.saved();
    f.put("k", "new");
    let before = f.latest();
    let rep = restore::restore(
        &f.ws,
        &f.store(),
        &format!("v{}", cp.seq),
        &RestoreJob {
            dry_run: true,
            ..Default::default()
        },
        &mut OnDisk::default(),
    )
    .unwrap();
    let st = rep.state.unwrap();
    assert_eq!(st.changes.len(), 1);
    assert_eq!(st.changes[0].kind, ChangeKind::Changed);
    assert_eq!(f.latest(), before);
    assert_eq!(f.get("k").as_deref(), Some("new"));
}

#[test]
fn gc_keeps_pinned_versions_and_collects_the_rest() {
    let f = fixture();
    f.write("a", "1");
    f.put("k", "pinned-1");
    let cp1 = f.saved();
    let v1 = cp1.state_version.unwrap();
    f.put("k", "unpinned");
    let v_unpinned = f.latest();
    f.put("k", "pinned-2");
    f.put("other", "o");
    let cp2 = f.saved();
    let v2 = cp2.state_version.unwrap();
    f.put("k", "latest");
    let latest = f.latest();

    let rep = ckpt_lib::store::gc::gc(&f.store(), false).unwrap();
    let st = rep.state.expect("state gc ran");
    assert!(st.versions_collected >= 1, "{st:?}");
    assert!(st.entries_removed >= 1, "{st:?}");

    let store = f.store();
    let s = store.state.get().unwrap().unwrap();
    assert!(!s.is_readable(v_unpinned), "unpinned version collected");
    assert!(s.snapshot(v_unpinned).is_err());
    for (v, want) in [(v1, "pinned-1"), (v2, "pinned-2"), (latest, "latest")] {
        assert!(s.is_readable(v), "version {v} must stay readable");
        assert_eq!(
            s.snapshot(v).unwrap().get(b"k").as_deref(),
            Some(want.as_bytes())
        );
    }
    let hist: Vec<Option<Vec<u8>>> = s.history(b"k").into_iter().map(|(_, v)| v).collect();
    assert!(!hist.contains(&Some(b"unpinned".to_vec())), "{hist:?}");
    assert!(hist.contains(&Some(b"pinned-1".to_vec())));
    drop(s);
    drop(store);

    // Restoring a pinned checkpoint still works after gc.
    f.restore(cp1.seq, Scope::All);
    assert_eq!(f.get("k").as_deref(), Some("pinned-1"));
    assert_eq!(f.get("other"), None);

    // Deleting a checkpoint unpins its version: the next gc collects it.
    {
        let store = f.store();
        let cp = store.catalog.reader().unwrap().resolve(&cp2.id()).unwrap();
        store.catalog.delete_checkpoint(&cp).unwrap();
    }
    ckpt_lib::store::gc::gc(&f.store(), false).unwrap();
    let store = f.store();
    let s = store.state.get().unwrap().unwrap();
    assert!(!s.is_readable(v2), "unpinned by delete, then collected");
    assert!(s.is_readable(v1));
}

#[test]
fn gc_dry_run_collects_nothing() {
    let f = fixture();
    f.write("a", "1");
    f.put("k", "1");
    f.saved();
    f.put("k", "2");
    let v = f.latest();
    f.put("k", "3");
    let rep = ckpt_lib::store::gc::gc(&f.store(), true).unwrap();
    assert_eq!(rep.state.unwrap().versions_collected, 0);
    let store = f.store();
    assert!(store.state.get().unwrap().unwrap().is_readable(v));
}

#[test]
fn diff_reports_state_keys() {
    let f = fixture();
    f.write("a", "1");
    f.put("same", "s");
    f.put("chg", "old");
    f.put("gone", "g");
    let cp1 = f.saved();
    f.put("chg", "new");
    f.del("gone");
    f.put("added", "a");
    let cp2 = f.saved();
    f.put("later", "l");

    let store = f.store();
    let d = ckpt_lib::store::state::diff(&store.state, &cp1, Some(&cp2))
        .unwrap()
        .unwrap();
    assert_eq!(d.from, cp1.state_version.unwrap());
    assert_eq!(d.to, cp2.state_version.unwrap());
    let got: Vec<(String, ChangeKind)> = d
        .changes
        .iter()
        .map(|c| (String::from_utf8(c.key.clone()).unwrap(), c.kind))
        .collect();
    assert_eq!(
        got,
        vec![
            ("added".into(), ChangeKind::Added),
            ("chg".into(), ChangeKind::Changed),
            ("gone".into(), ChangeKind::Removed),
        ]
    );
    // Working-directory side: the latest state.
    let d = ckpt_lib::store::state::diff(&store.state, &cp2, None)
        .unwrap()
        .unwrap();
    assert_eq!(d.changes.len(), 1);
    assert_eq!(d.changes[0].key, b"later");
    assert_eq!(d.changes[0].kind, ChangeKind::Added);
}
