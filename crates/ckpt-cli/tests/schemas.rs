//! The published JSON Schemas (`docs/schemas`): every report's, local
//! (`ckpt_lib::ops::schema::all`) and remote
//! (`ckpt_remote::schema::all`), generated from the report types.
//!
//! `UPDATE_SCHEMAS=1 cargo test -p ckpt-cli --test schemas` rewrites the
//! files; without it a stale, missing or extra file fails.

use std::path::PathBuf;

use serde_json::Value;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/schemas")
}

/// Every report's schema, by file stem.
fn all() -> Vec<(&'static str, Value)> {
    let mut all = ckpt_lib::ops::schema::all();
    all.extend(ckpt_remote::schema::all());
    all
}

/// `docs/schemas` is what the types generate, file for file; with
/// `UPDATE_SCHEMAS=1` the files are rewritten instead.
#[test]
fn docs_schemas_are_current() {
    let update = std::env::var_os("UPDATE_SCHEMAS").is_some_and(|v| v != "0" && !v.is_empty());
    let dir = dir();
    let all = all();
    if update {
        std::fs::create_dir_all(&dir).unwrap();
        for e in std::fs::read_dir(&dir).unwrap() {
            std::fs::remove_file(e.unwrap().path()).unwrap();
        }
    }
    let mut stale = Vec::new();
    for (name, schema) in &all {
        let path = dir.join(format!("{name}.json"));
        let want = ckpt_lib::ops::schema::text(schema);
        if update {
            std::fs::write(&path, want).unwrap();
        } else if std::fs::read_to_string(&path).ok().as_deref() != Some(want.as_str()) {
            stale.push(path.display().to_string());
        }
    }
    for e in std::fs::read_dir(&dir).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        if !all.iter().any(|(n, _)| format!("{n}.json") == name) {
            stale.push(format!("{name} (no report has this name)"));
        }
    }
    assert!(
        stale.is_empty(),
        "docs/schemas is stale: {stale:?}; run \
         `UPDATE_SCHEMAS=1 cargo test -p ckpt-cli --test schemas` and commit the result"
    );
}

/// Every report is an object carrying `"schema": 1`; names are unique.
#[test]
fn every_schema_is_an_object_with_the_schema_field() {
    let all = all();
    for (i, (name, s)) in all.iter().enumerate() {
        assert!(
            !all[..i].iter().any(|(n, _)| n == name),
            "two schemas named {name}"
        );
        // A report that is one of several (verify) is `anyOf` them; a
        // report with a flattened choice has its own properties too.
        let objects: Vec<&Value> = match s.get("anyOf").and_then(Value::as_array) {
            Some(alts) if s.get("properties").is_none() => alts.iter().collect(),
            _ => vec![s],
        };
        for o in objects {
            let o = match o.get("$ref").and_then(Value::as_str) {
                Some(r) => &s["$defs"][r.trim_start_matches("#/$defs/")],
                None => o,
            };
            assert_eq!(o["type"], "object", "{name}: {o}");
            assert_eq!(o["properties"]["schema"]["const"], 1, "{name}: {o}");
        }
    }
}
