//! The JSON Schema of every remote report, generated from the report types
//! as `ckpt_lib::ops::schema` makes the local reports' (the remote reports
//! derive `schemars::JsonSchema` beside `Serialize`).

/// The JSON Schema of every remote report, by name: the file stem in
/// `docs/schemas` (beside the local reports' of
/// `ckpt_lib::ops::schema::all`) and the command.
pub fn all() -> Vec<(&'static str, serde_json::Value)> {
    use ckpt_lib::ops::schema::of;
    vec![
        ("push", of::<crate::push::PushReport>("push")),
        ("pull", of::<crate::pull::PullReport>("pull")),
        ("clone", of::<crate::pull::CloneReport>("clone")),
        ("log-remote", of::<crate::log::LogReport>("log --remote")),
        ("gc-remote", of::<crate::gc::GcReport>("gc --remote")),
        ("remote", of::<crate::remotes::RemotesReport>("remote")),
    ]
}
