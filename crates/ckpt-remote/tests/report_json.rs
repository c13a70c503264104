//! The reports' JSON forms, key for key and in order: `--json` output is
//! an interface (docs/CLI.md), and the reports serialise through derived
//! `Serialize` with serde attributes, where a renamed or reordered field
//! would change it silently.

use std::collections::BTreeMap;
use std::time::Duration;

use ckpt_lib::ops::json::{time, Schema};
use ckpt_lib::ops::parts::ChangeStats;
use ckpt_remote::gc::GcReport;
use ckpt_remote::layout::{Identity, Record};
use ckpt_remote::pull::{CloneReport, PullReport};
use ckpt_remote::push::PushReport;
use ckpt_remote::remotes::{RemoteEntry, Remotes, RemotesReport};
use ckpt_remote::report::Transfer;

fn transfer() -> Transfer {
    Transfer {
        objects: 1,
        raw_bytes: 2,
        bytes_sent: 3,
        bytes_received: 4,
        requests: 5,
        failed_requests: 6,
        packs: 7,
        elapsed: Duration::from_micros(1500),
    }
}

const TRANSFER: &str = r#""objects":1,"raw_bytes":2,"bytes_sent":3,"bytes_received":4,"requests":5,"failed_requests":6,"packs":7,"elapsed_ms":1.5"#;

fn record() -> Record {
    Record {
        format: 2,
        id: "ab12".into(),
        identity: Identity {
            root: "r00t".into(),
            digest: Some("d".into()),
            time_ns: 1_700_000_000_000_000_000,
            message: "m".into(),
            tags: BTreeMap::from([("k".to_string(), "v".to_string())]),
            state: Some("s7".into()),
        },
        mtimes: Some("n0de".into()),
        parent: None,
        seq: 3,
        workspace: "app".into(),
        stats: ChangeStats {
            files_added: 1,
            ..ChangeStats::default()
        },
        skipped: Vec::new(),
        duration_us: 9,
    }
}

#[test]
fn push_report() {
    let r = PushReport {
        schema: Schema,
        url: "s3://b/p".into(),
        workspace: "app".into(),
        pushed: vec![("v2".into(), "ab".into())],
        already: vec![("v1".into(), "cd".into())],
        recovered_packs: 8,
        skipped_objects: 9,
        transfer: transfer(),
    };
    assert_eq!(
        serde_json::to_string(&r).unwrap(),
        format!(
            r#"{{"schema":1,"remote":"s3://b/p","workspace":"app","pushed":[{{"id":"v2","remote_id":"ab"}}],"already":[{{"id":"v1","remote_id":"cd"}}],"recovered_packs":8,"skipped_objects":9,{TRANSFER}}}"#
        )
    );
}

#[test]
fn pull_report() {
    let r = PullReport {
        schema: Schema,
        url: "s3://b/p".into(),
        workspace: "app".into(),
        pulled: vec![("ab".into(), "v4".into())],
        already: 2,
        transfer: transfer(),
    };
    assert_eq!(
        serde_json::to_string(&r).unwrap(),
        format!(
            r#"{{"schema":1,"remote":"s3://b/p","workspace":"app","pulled":[{{"remote_id":"ab","id":"v4"}}],"already":2,{TRANSFER}}}"#
        )
    );
}

#[test]
fn clone_report_and_record() {
    let r = CloneReport {
        schema: Schema,
        url: "s3://b/p".into(),
        workspace: "app".into(),
        id: "v3".into(),
        record: record(),
        to: "/w/app".into(),
        store: "/s/app".into(),
        files: 10,
        dirs: 11,
        bytes: 12,
        transfer: transfer(),
    };
    let t = time(1_700_000_000_000_000_000);
    assert_eq!(
        serde_json::to_string(&r).unwrap(),
        format!(
            r#"{{"schema":1,"remote":"s3://b/p","workspace":"app","cloned":"v3","checkpoint":{{"remote_id":"ab12","seq":3,"parent":null,"time":"{t}","time_ns":1700000000000000000,"message":"m","tags":{{"k":"v"}},"root":"r00t","stats":{{"files_added":1,"files_modified":0,"files_deleted":0,"bytes_added":0,"bytes_modified":0,"bytes_deleted":0,"new_objects":0,"new_bytes":0}},"workspace":"app","has_state":true}},"to":"/w/app","store":"/s/app","files":10,"dirs":11,"bytes":12,{TRANSFER}}}"#
        )
    );
}

#[test]
fn gc_report() {
    let r = GcReport {
        url: "s3://b/p".into(),
        workspaces: 1,
        checkpoints: 2,
        packs: 3,
        live_packs: 4,
        live_objects: 5,
        duplicate_objects: 6,
        deleted_packs: 7,
        deleted_bytes: 8,
        condemned_packs: 9,
        stored_bytes: 10,
        dry_run: true,
        transfer: transfer(),
        ..GcReport::default()
    };
    assert_eq!(
        serde_json::to_string(&r).unwrap(),
        format!(
            r#"{{"schema":1,"remote":"s3://b/p","workspaces":1,"checkpoints":2,"stored_packs":3,"live_packs":4,"live_objects":5,"duplicate_objects":6,"deleted_packs":7,"deleted_bytes":8,"condemned_packs":9,"stored_bytes":10,"dry_run":true,{TRANSFER}}}"#
        )
    );
}

#[test]
fn remotes_report() {
    let remotes = Remotes {
        remotes: BTreeMap::from([(
            "origin".to_string(),
            RemoteEntry {
                url: "s3://b/p".into(),
                workspace: Some("app".into()),
                encrypt: false,
                key_file: None,
            },
        )]),
    };
    let mut r = RemotesReport {
        schema: Schema,
        remotes,
        added: None,
        removed: None,
    };
    let listed = r#"{"schema":1,"remotes":{"origin":{"url":"s3://b/p","workspace":"app"}}"#;
    assert_eq!(serde_json::to_string(&r).unwrap(), format!("{listed}}}"));
    r.added = Some("origin".into());
    assert_eq!(
        serde_json::to_string(&r).unwrap(),
        format!(r#"{listed},"added":"origin"}}"#)
    );
    r.added = None;
    r.removed = Some("old".into());
    assert_eq!(
        serde_json::to_string(&r).unwrap(),
        format!(r#"{listed},"removed":"old"}}"#)
    );
}
