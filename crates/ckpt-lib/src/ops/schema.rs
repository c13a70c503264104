//! The JSON Schema of every report, generated from the report types.
//!
//! The reports derive `Serialize` and `schemars::JsonSchema` side by side
//! (fields encoded by a `serialize_with` helper of [`super::json::with`]
//! carry `#[schemars(with = …)]`, the type of what the helper writes), so a
//! schema describes what `--json` prints and cannot drift from it by hand.
//! Schemas are made for the serialise contract (JSON Schema 2020-12, as
//! rmcp makes MCP output schemas): a field that is always written is
//! `required`. Key order is not part of a schema.
//!
//! [`all`] names each report by its command; `docs/schemas/<name>.json`
//! holds them (a test below fails when those files are stale:
//! `UPDATE_SCHEMAS=1 cargo test -p ckpt-lib --lib schema` rewrites them),
//! and `ckpt mcp` gives each tool that returns a report its schema as the
//! tool's `outputSchema`.

use schemars::generate::SchemaSettings;
use schemars::JsonSchema;
use serde_json::Value;

use super::{
    adopt, agent, annotate, cat, cp, delete, diff, doctor, du, fork, forks, gc, hash, hook, init,
    log, restore, save, show, state, status, stores, undo, verify, watch,
};

/// The JSON Schema of report type `T`, titled for `command`.
pub fn of<T: JsonSchema>(command: &str) -> Value {
    let schema = SchemaSettings::draft2020_12()
        .for_serialize()
        .into_generator()
        .into_root_schema_for::<T>();
    let mut v = serde_json::to_value(schema).expect("a schema serialises");
    if let Some(m) = v.as_object_mut() {
        m.insert(
            "title".into(),
            Value::String(format!("ckpt {command} --json")),
        );
    }
    v
}

/// Every report's schema, by name: the file stem in `docs/schemas` and
/// the command (`state-get` is `ckpt state get`).
pub fn all() -> Vec<(&'static str, Value)> {
    vec![
        ("init", of::<init::InitReport>("init")),
        ("init-agent", of::<agent::AgentReport>("init --agent")),
        ("save", of::<save::SaveReport>("save")),
        ("hook", of::<hook::HookReport>("hook")),
        ("status", of::<status::StatusReport>("status")),
        ("log", of::<log::LogReport>("log")),
        ("show", of::<show::ShowReport>("show")),
        ("annotate", of::<annotate::AnnotateReport>("annotate")),
        ("diff", of::<diff::DiffReport>("diff")),
        ("cat", of::<cat::CatReport>("cat")),
        ("restore", of::<restore::RestoreReport>("restore")),
        ("restore-to", of::<restore::RestoreToReport>("restore --to")),
        ("undo", of::<undo::UndoReport>("undo")),
        ("adopt", of::<adopt::AdoptReport>("adopt")),
        ("fork", of::<fork::ForkReport>("fork")),
        ("fork-many", of::<fork::ForkManyReport>("fork --count")),
        ("fork-mount", of::<forks::MountReport>("fork --mount")),
        ("fork-remove", of::<forks::RemoveReport>("fork --remove")),
        ("forks", of::<forks::ForksReport>("forks")),
        ("delete", of::<delete::DeleteReport>("delete")),
        ("gc", of::<gc::GcReport>("gc")),
        ("verify", of::<verify::VerifyReport>("verify")),
        ("hash", of::<hash::HashReport>("hash")),
        ("du", of::<du::DuReport>("du")),
        (
            "watch-status",
            of::<watch::WatchStatusReport>("watch --status"),
        ),
        ("watch-stop", of::<watch::StopReport>("watch --stop")),
        ("doctor", of::<doctor::DoctorReport>("doctor")),
        ("stores", of::<stores::StoresReport>("stores")),
        ("cp", of::<cp::CopyReport>("cp")),
        ("state-get", of::<state::GetReport>("state get")),
        ("state-put", of::<state::PutReport>("state put")),
        ("state-del", of::<state::DelReport>("state del")),
        ("state-ls", of::<state::LsReport>("state ls")),
        ("state-history", of::<state::HistoryReport>("state history")),
        ("state-cas", of::<state::CasReport>("state cas")),
    ]
}

/// A schema as the text of its file (pretty, with a final newline).
pub fn text(schema: &Value) -> String {
    serde_json::to_string_pretty(schema).expect("a schema serialises") + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn dir() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/schemas")
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
            let want = text(schema);
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
             `UPDATE_SCHEMAS=1 cargo test -p ckpt-lib --lib schema` and commit the result"
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
}
