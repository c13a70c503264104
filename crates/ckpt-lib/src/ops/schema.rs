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
//! holds them with the remote reports' (`ckpt_remote::schema::all`;
//! `crates/ckpt-cli/tests/schemas.rs` fails when those files are stale,
//! and `UPDATE_SCHEMAS=1 cargo test -p ckpt-cli --test schemas` rewrites
//! them), and `ckpt mcp` gives each tool that returns a report its schema
//! as the tool's `outputSchema`.

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
