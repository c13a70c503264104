//! Every command's `--json` report, field for field, against golden files
//! (`tests/golden/json_reports/<name>.json`).
//!
//! One fixed workspace (files, one with a non-UTF-8 name, a symlink,
//! checkpoints with messages and tags, an annotation, agent state, harness
//! hook checkpoints, forks, a `file://` remote) is taken through every
//! command that has `--json`. What varies from run to run or machine to machine is normalised before comparing: the temporary
//! directory becomes `@TMP@`, and the values of times, durations, hashes
//! that cover times, process ids, inode-ish numbers and on-disk sizes become
//! a placeholder of the same JSON type, so a field that appears, vanishes,
//! is renamed or changes type still fails. Reports whose content is the
//! machine itself (`doctor`, `stores`) or one run's transfer (the remote
//! commands) keep only their shape: keys and
//! types.
//!
//! Parsed JSON values are compared, not text: key order is not part of the
//! schema (docs/CLI.md, "JSON output").
//!
//! Each report, as printed, is also checked against its published JSON
//! Schema (`docs/schemas`, generated from the types by
//! `ckpt_lib::ops::schema`) with a small validator for what schemars writes
//! (no validator crate: one would add some thirty crates to the build), which
//! also fails a key the schema does not name.
//!
//! `UPDATE_GOLDEN=1 cargo test -p ckpt-cli --test json_reports` rewrites
//! the golden files; the point of the files is that they are NOT rewritten
//! when the code that builds a report changes shape by accident.

mod common;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use common::*;
use serde_json::{Map, Value};

/// Keys whose values vary between runs or machines; their values become a
/// placeholder of the same type.
const VOLATILE: &[&str] = &[
    // Times and durations.
    "time",
    "time_ns",
    "mtime_ns",
    "duration_ms",
    "elapsed_ms",
    "scan_ms",
    "save_ms",
    "uptime_ms",
    "age",
    "saved_at",
    // Hashes over records or trees that hold times.
    "hash",
    "root",
    "tree",
    "digest",
    // Processes, inode-ish and on-disk numbers.
    "pid",
    "epoch",
    "dev",
    "ino",
    "inode",
    "fsid",
    "on_disk",
    "bytes_on_disk",
    "disk_bytes",
    "allocated",
    // Copy strategy and fork backend: what the filesystem offers.
    "strategy",
    "backend",
    "linked",
    "copied",
    "reflinked",
];

/// `true` when the golden files are to be rewritten.
fn update() -> bool {
    std::env::var_os("UPDATE_GOLDEN").is_some_and(|v| v != "0" && !v.is_empty())
}

fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden/json_reports")
}

/// The placeholder of a value's type.
fn placeholder(v: &Value) -> Value {
    match v {
        Value::Null => Value::Null,
        Value::Bool(_) => Value::Bool(false),
        Value::Number(_) => Value::from(0),
        Value::String(_) => Value::from("@"),
        Value::Array(a) => Value::Array(a.iter().map(placeholder).collect()),
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| (k.clone(), placeholder(v)))
                .collect::<Map<_, _>>(),
        ),
    }
}

/// Replaces what varies (see the module doc).
fn normalise(v: &mut Value, tmp: &str) {
    match v {
        Value::String(s) => {
            if s.contains(tmp) {
                *s = s.replace(tmp, "@TMP@");
            }
            *s = store_name(s);
        }
        Value::Array(a) => a.iter_mut().for_each(|x| normalise(x, tmp)),
        Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                if VOLATILE.contains(&k.as_str()) {
                    *x = placeholder(x);
                } else {
                    normalise(x, tmp);
                }
            }
        }
        _ => {}
    }
}

/// A store in the data directory is named for its workspace plus a hash
/// of the workspace's path (`…/ckpt/stores/NAME-0123456789`): the hash
/// becomes `@`.
fn store_name(s: &str) -> String {
    let Some(at) = s.find("/ckpt/stores/") else {
        return s.to_string();
    };
    let (head, name) = s.split_at(at + "/ckpt/stores/".len());
    let end = name.find('/').unwrap_or(name.len());
    let (seg, tail) = name.split_at(end);
    match seg.rsplit_once('-') {
        Some((base, h)) if h.len() == 10 && h.bytes().all(|b| b.is_ascii_hexdigit()) => {
            format!("{head}{base}-@{tail}")
        }
        _ => s.to_string(),
    }
}

/// The shape of a value: keys and the type of each scalar; an array by its
/// first element.
fn shape(v: &Value) -> Value {
    match v {
        Value::Array(a) => Value::Array(a.first().map(shape).into_iter().collect()),
        Value::Object(m) => Value::Object(m.iter().map(|(k, v)| (k.clone(), shape(v))).collect()),
        other => placeholder(other),
    }
}

/// Collects the reports and checks (or rewrites) each golden file.
struct Golden {
    tmp: String,
    seen: Vec<String>,
    failures: Vec<String>,
}

impl Golden {
    fn new(tmp: &Path) -> Golden {
        Golden {
            tmp: tmp.to_str().unwrap().to_string(),
            seen: Vec::new(),
            failures: Vec::new(),
        }
    }

    /// Checks the `--json` report `name` of a run that succeeded.
    #[track_caller]
    fn check(&mut self, name: &str, r: Run) {
        let mut v = r.ok().json();
        self.validate(name, &v);
        normalise(&mut v, &self.tmp);
        self.compare(name, v);
    }

    /// As [`Golden::check`], keeping only the report's shape.
    #[track_caller]
    fn check_shape(&mut self, name: &str, r: Run) {
        let v = r.ok().json();
        self.validate(name, &v);
        self.compare(name, shape(&v));
    }

    /// As [`Golden::check`] for a run that exits with `code`.
    #[track_caller]
    fn check_code(&mut self, name: &str, r: Run, code: i32) {
        let mut v = r.code(code).json();
        self.validate(name, &v);
        normalise(&mut v, &self.tmp);
        self.compare(name, v);
    }

    /// Checks a report, as printed, against its published schema
    /// (`docs/schemas`, see [`SCHEMAS`]).
    fn validate(&mut self, name: &str, v: &Value) {
        let Some(file) = schema_of(name) else {
            return;
        };
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../docs/schemas")
            .join(format!("{file}.json"));
        let schema: Value = match std::fs::read_to_string(&path) {
            Ok(t) => serde_json::from_str(&t).unwrap(),
            Err(e) => {
                self.failures
                    .push(format!("{name}: no schema {} ({e})", path.display()));
                return;
            }
        };
        let mut errors = Vec::new();
        conforms(&schema, &schema, v, "", &mut errors);
        if !errors.is_empty() {
            self.failures.push(format!(
                "{name}: the report does not conform to {}:\n  {}",
                path.display(),
                errors.join("\n  ")
            ));
        }
    }

    fn compare(&mut self, name: &str, got: Value) {
        assert!(
            !self.seen.contains(&name.to_string()),
            "two reports named {name}"
        );
        self.seen.push(name.to_string());
        let path = golden_dir().join(format!("{name}.json"));
        if update() {
            std::fs::create_dir_all(golden_dir()).unwrap();
            let text = serde_json::to_string_pretty(&got).unwrap() + "\n";
            std::fs::write(&path, text).unwrap();
            return;
        }
        let want: Value = match std::fs::read_to_string(&path) {
            Ok(t) => serde_json::from_str(&t).unwrap(),
            Err(e) => {
                self.failures.push(format!(
                    "{name}: no golden file {} ({e}); run with UPDATE_GOLDEN=1 once, \
                     with the code whose JSON is the reference",
                    path.display()
                ));
                return;
            }
        };
        if want != got {
            self.failures.push(format!(
                "{name}: the report differs from {}\n--- want\n{}\n--- got\n{}",
                path.display(),
                serde_json::to_string_pretty(&want).unwrap(),
                serde_json::to_string_pretty(&got).unwrap()
            ));
        }
    }

    fn finish(self) {
        if update() {
            return;
        }
        // A golden file no run checks is a report nobody compares.
        let mut stale = Vec::new();
        for e in std::fs::read_dir(golden_dir()).unwrap() {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            let stem = name.trim_end_matches(".json");
            if !self.seen.iter().any(|s| s == stem) {
                stale.push(name);
            }
        }
        assert!(stale.is_empty(), "golden files no run checks: {stale:?}");
        assert!(
            self.failures.is_empty(),
            "{} of {} reports differ:\n\n{}",
            self.failures.len(),
            self.seen.len(),
            self.failures.join("\n\n")
        );
    }
}

/// Which schema in `docs/schemas` each report conforms to, by the prefix
/// of its golden name (the longest prefix wins); reports still built by
/// hand have none yet.
const SCHEMAS: &[(&str, Option<&str>)] = &[
    ("init", Some("init")),
    ("init_agent", Some("init-agent")),
    ("save", Some("save")),
    ("state_put", Some("state-put")),
    ("state_del", Some("state-del")),
    ("state_get", Some("state-get")),
    ("state_cas", Some("state-cas")),
    ("state_ls", Some("state-ls")),
    ("state_history", Some("state-history")),
    ("status", Some("status")),
    ("diff", Some("diff")),
    ("annotate", Some("annotate")),
    ("hook", Some("hook")),
    ("log", Some("log")),
    ("show", Some("show")),
    ("cat", Some("cat")),
    ("verify", Some("verify")),
    ("hash", Some("hash")),
    ("undo", Some("undo")),
    ("restore", Some("restore")),
    ("restore_to", Some("restore-to")),
    ("cp", Some("cp")),
    ("adopt", Some("adopt")),
    ("fork_remove", Some("fork-remove")),
    ("delete", Some("delete")),
    ("gc", Some("gc")),
    ("du", Some("du")),
    ("fork", Some("fork")),
    ("forks", Some("forks")),
    ("fork_many", Some("fork-many")),
    ("watch_status", Some("watch-status")),
    ("watch_stop", Some("watch-stop")),
    ("doctor", Some("doctor")),
    ("stores", Some("stores")),
    ("remote_add", Some("remote")),
    ("push", Some("push")),
    ("log_remote", Some("log-remote")),
    ("clone", Some("clone")),
    ("pull", Some("pull")),
    ("gc_remote", Some("gc-remote")),
];

/// The schema file of golden report `name` ([`SCHEMAS`]); a name no
/// prefix covers fails, so a new report gets an entry.
fn schema_of(name: &str) -> Option<&'static str> {
    SCHEMAS
        .iter()
        .filter(|(p, _)| name == *p || name.starts_with(&format!("{p}_")))
        .max_by_key(|(p, _)| p.len())
        .unwrap_or_else(|| panic!("no entry in SCHEMAS for report {name}"))
        .1
}

/// Whether `v` conforms to `schema`, for the part of JSON Schema that
/// schemars writes: `$ref` (to `#/$defs/…`), `anyOf`, `oneOf`, `type`,
/// `const`, `enum`, `properties`, `required`, `items`,
/// `additionalProperties`, `minimum`. Stricter than JSON Schema in one way:
/// an object whose schema names properties may have no key that the schema
/// (with its alternatives) does not name, so a field missing from the
/// schema fails. Errors go to `errors`, with the JSON path.
fn conforms(root: &Value, schema: &Value, v: &Value, at: &str, errors: &mut Vec<String>) {
    check(root, schema, v, at, true, errors)
}

/// [`conforms`]; `strict`: unknown keys fail (not in an alternative, which
/// describes only part of the object: its keys are checked where the
/// object's own schema is).
fn check(
    root: &Value,
    schema: &Value,
    v: &Value,
    at: &str,
    strict: bool,
    errors: &mut Vec<String>,
) {
    let schema = resolve(root, schema);
    if let Some(Value::Bool(ok)) = Some(schema) {
        if !ok {
            errors.push(format!("{at}: no value allowed"));
        }
        return;
    }
    let fits = |s: &Value| {
        let mut e = Vec::new();
        check(root, s, v, at, false, &mut e);
        e.is_empty()
    };
    if let Some(alts) = schema.get("anyOf").and_then(Value::as_array) {
        if !alts.iter().any(fits) {
            errors.push(format!("{at}: matches no alternative of anyOf: {v}"));
        }
    }
    if let Some(alts) = schema.get("oneOf").and_then(Value::as_array) {
        let n = alts.iter().filter(|s| fits(s)).count();
        if n != 1 {
            errors.push(format!("{at}: matches {n} alternatives of oneOf: {v}"));
        }
    }
    if let Some(t) = schema.get("type") {
        let types: Vec<&str> = match t {
            Value::String(t) => vec![t.as_str()],
            Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
            _ => vec![],
        };
        let ok = types.iter().any(|t| match *t {
            "null" => v.is_null(),
            "boolean" => v.is_boolean(),
            "string" => v.is_string(),
            "number" => v.is_number(),
            "integer" => v.is_i64() || v.is_u64(),
            "array" => v.is_array(),
            "object" => v.is_object(),
            _ => false,
        });
        if !ok {
            errors.push(format!("{at}: {v} is not of type {t}"));
            return;
        }
    }
    if let Some(c) = schema.get("const") {
        if c != v {
            errors.push(format!("{at}: {v} is not {c}"));
        }
    }
    if let Some(Value::Array(e)) = schema.get("enum") {
        if !e.contains(v) {
            errors.push(format!("{at}: {v} is not one of {e:?}"));
        }
    }
    if let (Some(min), Some(n)) = (schema.get("minimum").and_then(Value::as_f64), v.as_f64()) {
        if n < min {
            errors.push(format!("{at}: {n} is below {min}"));
        }
    }
    if let (Some(items), Some(a)) = (schema.get("items"), v.as_array()) {
        for (i, x) in a.iter().enumerate() {
            check(root, items, x, &format!("{at}[{i}]"), true, errors);
        }
    }
    let Some(obj) = v.as_object() else {
        return;
    };
    let props = schema.get("properties").and_then(Value::as_object);
    if let Some(req) = schema.get("required").and_then(Value::as_array) {
        for k in req.iter().filter_map(Value::as_str) {
            if !obj.contains_key(k) {
                errors.push(format!("{at}: required key {k} is missing"));
            }
        }
    }
    for (k, x) in obj {
        let path = format!("{at}.{k}");
        match props.and_then(|p| p.get(k)) {
            Some(s) => check(root, s, x, &path, true, errors),
            None => match schema.get("additionalProperties") {
                Some(s) => check(root, s, x, &path, true, errors),
                None if strict && props.is_some() && !names(root, schema).contains(k) => {
                    errors.push(format!("{path}: the schema does not name this key"))
                }
                None => {}
            },
        }
    }
}

/// `schema`, or what its `$ref` points to.
fn resolve<'a>(root: &'a Value, schema: &'a Value) -> &'a Value {
    match schema.get("$ref").and_then(Value::as_str) {
        Some(r) => {
            let def = r.strip_prefix("#/$defs/").expect("a local $ref");
            &root["$defs"][def]
        }
        None => schema,
    }
}

/// The property names of an object schema and of its alternatives.
fn names(root: &Value, schema: &Value) -> Vec<String> {
    let schema = resolve(root, schema);
    let mut out: Vec<String> = schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default();
    for key in ["anyOf", "oneOf", "allOf"] {
        for alt in schema
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            out.extend(names(root, alt));
        }
    }
    out
}

fn hook_event(ws: &Ws, event: &str, extra: &str) -> Vec<u8> {
    format!(
        r#"{{"session_id":"golden-session","transcript_path":"/dev/null","cwd":{},
            "permission_mode":"default","hook_event_name":"{event}"{extra}}}"#,
        serde_json::to_string(ws.root.to_str().unwrap()).unwrap()
    )
    .into_bytes()
}

#[test]
fn every_local_json_report_matches_its_golden_file() {
    let ws = Ws::new();
    let tmp = ws.tmp.path().to_path_buf();
    let mut g = Golden::new(&tmp);
    let root = ws.root.to_str().unwrap().to_string();
    let store = ws.store.to_str().unwrap().to_string();

    g.check(
        "init",
        ckpt(&tmp, &["init", &root, "--store", &store, "--json"]),
    );

    // v1: a few files, a symlink, a name that is not UTF-8.
    write(&ws.root, "README.md", b"# golden\n");
    write(&ws.root, "src/main.rs", b"fn main() {}\n");
    write(&ws.root, "src/lib.rs", b"pub fn f() {}\n");
    write(&ws.root, "old/gone.txt", b"soon gone\n");
    std::os::unix::fs::symlink("README.md", ws.root.join("link")).unwrap();
    std::fs::write(ws.root.join(os(b"bad-\xff-name")), b"bytes\n").unwrap();
    g.check(
        "save_first",
        ws.run(&["save", "-m", "first", "--tag", "kind=base", "--json"]),
    );
    g.check("save_unchanged", ws.run(&["save", "--json"]));

    // Agent state, recorded with the next checkpoint.
    g.check(
        "state_put",
        ws.run(&["state", "put", "plan", "step one", "--json"]),
    );
    g.check(
        "state_put_json_value",
        ws.run(&[
            "state",
            "put",
            "--json-value",
            "cfg",
            r#"{"n":1}"#,
            "--json",
        ]),
    );
    g.check(
        "state_put_gone",
        ws.run(&["state", "put", "tmp", "x", "--json"]),
    );
    g.check("state_del", ws.run(&["state", "del", "tmp", "--json"]));
    g.check("state_get", ws.run(&["state", "get", "plan", "--json"]));
    g.check(
        "state_cas",
        ws.run(&["state", "cas", "plan", "1", "step two", "--json"]),
    );
    g.check_code(
        "state_cas_conflict",
        ws.run(&["state", "cas", "plan", "1", "step three", "--json"]),
        7,
    );
    g.check("state_ls", ws.run(&["state", "ls", "--json"]));
    g.check("state_ls_prefix", ws.run(&["state", "ls", "pl", "--json"]));
    g.check(
        "state_history",
        ws.run(&["state", "history", "plan", "--json"]),
    );
    g.check(
        "state_get_at",
        ws.run(&["state", "get", "--at", "1", "plan", "--json"]),
    );

    // v2: changes of every kind.
    write(
        &ws.root,
        "src/main.rs",
        b"fn main() { println!(\"v2\"); }\n",
    );
    write(&ws.root, "docs/new.md", b"new\n");
    std::fs::remove_dir_all(ws.root.join("old")).unwrap();
    g.check("status", ws.run(&["status", "--json"]));
    g.check("status_paths", ws.run(&["status", "--json", "--", "src"]));
    g.check("diff_worktree", ws.run(&["diff", "--json"]));
    g.check(
        "save_second",
        ws.run(&[
            "save",
            "-m",
            "second",
            "--tag",
            "kind=edit",
            "--tag",
            "n=2",
            "--json",
        ]),
    );
    g.check("status_clean", ws.run(&["status", "--json"]));

    g.check(
        "annotate",
        ws.run(&[
            "annotate",
            "v1",
            "reviewed=yes",
            "--note",
            "looks good",
            "--json",
        ]),
    );
    g.check(
        "annotate_remove",
        ws.run(&["annotate", "v1", "--remove", "reviewed", "--json"]),
    );
    g.check(
        "annotate_again",
        ws.run(&["annotate", "v1", "ok=1", "--json"]),
    );

    // Harness hooks: a prompt, a tool call that changes files, the stop.
    let hook = |g: &mut Golden, name: &str, event: &str, extra: &str| {
        let r = run_stdin(
            &ws.root,
            &["hook", "--agent", "claude", "--json"],
            &hook_event(&ws, event, extra),
            &[],
        );
        g.check(name, r);
    };
    hook(
        &mut g,
        "hook_prompt",
        "UserPromptSubmit",
        r#","prompt":"make it better""#,
    );
    hook(
        &mut g,
        "hook_pre_tool",
        "PreToolUse",
        r#","tool_name":"Write","tool_input":{"file_path":"src/lib.rs","content":"x"}"#,
    );
    write(&ws.root, "src/lib.rs", b"pub fn f() -> u8 { 1 }\n");
    hook(
        &mut g,
        "hook_post_tool",
        "PostToolUse",
        r#","tool_name":"Write","tool_input":{"file_path":"src/lib.rs","content":"x"},"tool_response":{}"#,
    );
    hook(&mut g, "hook_stop", "Stop", "");
    g.check(
        "hook_env",
        run_stdin(
            &ws.root,
            &["hook", "--json"],
            b"",
            &[
                ("CKPT_EVENT", "after-turn"),
                ("CKPT_SESSION", "env-session"),
                ("CKPT_TOOL", "shell"),
                ("CKPT_MESSAGE", "nothing changed"),
            ],
        ),
    );

    // Reading.
    g.check("log", ws.run(&["log", "--json"]));
    g.check("log_n", ws.run(&["log", "-n", "1", "--json"]));
    g.check("log_before", ws.run(&["log", "--before", "v2", "--json"]));
    g.check(
        "log_search",
        ws.run(&["log", "--search", "second", "--json"]),
    );
    g.check(
        "log_path",
        ws.run(&["log", "--path", "src/main.rs", "--json"]),
    );
    g.check(
        "log_session",
        ws.run(&["log", "--session", "golden-session", "--json"]),
    );
    g.check("show", ws.run(&["show", "v2", "--json"]));
    g.check("show_annotated", ws.run(&["show", "v1", "--json"]));
    g.check("cat", ws.run(&["cat", "v1", "src/main.rs", "--json"]));
    g.check(
        "cat_bad_name",
        ws.run_os(&[
            OsStr::new("cat"),
            OsStr::new("v1"),
            &os(b"bad-\xff-name"),
            OsStr::new("--json"),
        ]),
    );
    g.check("diff", ws.run(&["diff", "v1", "v2", "--json"]));
    g.check(
        "diff_name_status",
        ws.run(&["diff", "--name-status", "v1", "v2", "--json"]),
    );
    g.check(
        "diff_paths",
        ws.run(&["diff", "v1", "v2", "--json", "--", "src"]),
    );
    g.check("verify", ws.run(&["verify", "--json"]));
    g.check_code("verify_differs", ws.run(&["verify", "v1", "--json"]), 6);
    g.check("verify_store", ws.run(&["verify", "--store", "--json"]));
    g.check("hash", ws.run(&["hash", "src", "--json"]));
    g.check("hash_full", ws.run(&["hash", "--full", "src", "--json"]));
    g.check("du", ws.run(&["du", "--json"]));

    // Undo and restore.
    g.check("undo_dry_run", ws.run(&["undo", "--dry-run", "--json"]));
    g.check("undo", ws.run(&["undo", "--json"]));
    g.check(
        "restore_dry_run",
        ws.run(&["restore", "--dry-run", "v1", "--json"]),
    );
    g.check("restore", ws.run(&["restore", "v1", "--json"]));
    g.check("restore_unchanged", ws.run(&["restore", "v1", "--json"]));
    g.check(
        "restore_paths",
        ws.run(&["restore", "v2", "--json", "--", "src/main.rs"]),
    );
    g.check(
        "restore_state_only",
        ws.run(&["restore", "--state-only", "v2", "--json"]),
    );
    g.check(
        "restore_files_only",
        ws.run(&["restore", "--files-only", "v2", "--no-save", "--json"]),
    );
    let to = tmp.join("restored");
    g.check(
        "restore_to",
        ws.run(&["restore", "--to", to.to_str().unwrap(), "v2", "--json"]),
    );
    let to2 = tmp.join("restored-from-store");
    g.check(
        "restore_to_store",
        ckpt(
            &tmp,
            &[
                "restore",
                "--store",
                &store,
                "--to",
                to2.to_str().unwrap(),
                "v1",
                "--json",
            ],
        ),
    );
    g.check(
        "cp",
        ckpt(
            &tmp,
            &[
                "cp",
                to.to_str().unwrap(),
                tmp.join("copied").to_str().unwrap(),
                "--json",
            ],
        ),
    );

    // Forks (run from outside the workspace: their stores go to the data
    // directory below the current one, which a restore must not touch).
    let outside = |args: &[&str]| {
        let mut a = vec!["-C", root.as_str()];
        a.extend_from_slice(args);
        ckpt(&tmp, &a)
    };
    let fork = tmp.join("fork-a");
    g.check(
        "fork",
        outside(&[
            "fork",
            "--backend",
            "copy",
            "v2",
            fork.to_str().unwrap(),
            "--json",
        ]),
    );
    write(&fork, "src/forked.rs", b"// in the fork\n");
    ckpt(&fork, &["save", "-m", "in the fork"]).ok();
    g.check(
        "fork_many",
        outside(&[
            "fork",
            "--backend",
            "copy",
            "v1",
            "--count",
            "2",
            tmp.join("many-").to_str().unwrap(),
            "--json",
        ]),
    );
    g.check("forks", outside(&["forks", "--json"]));
    g.check(
        "diff_fork",
        outside(&["diff", "--fork", fork.to_str().unwrap(), "--json"]),
    );
    g.check(
        "adopt_dry_run",
        outside(&["adopt", "--dry-run", fork.to_str().unwrap(), "--json"]),
    );
    g.check(
        "adopt",
        outside(&["adopt", fork.to_str().unwrap(), "--json"]),
    );
    g.check(
        "fork_remove",
        outside(&["fork", "--remove", fork.to_str().unwrap(), "--json"]),
    );

    // Deleting and collecting.
    g.check("delete", ws.run(&["delete", "v3", "--json"]));
    g.check(
        "gc_dry_run",
        ws.run(&["gc", "--keep-last", "3", "--dry-run", "--json"]),
    );
    g.check("gc", ws.run(&["gc", "--json"]));
    g.check(
        "gc_policy",
        ws.run(&["gc", "--keep-last", "50", "--save-policy", "--json"]),
    );
    g.check("du_after_gc", ws.run(&["du", "--json"]));

    // The watcher (none runs here) and the agent setup.
    g.check("watch_status", ws.run(&["watch", "--status", "--json"]));
    g.check("watch_stop", ws.run(&["watch", "--stop", "--json"]));
    g.check(
        "init_agent",
        ws.run(&["init", "--agent", "claude", "--json"]),
    );

    // The machine.
    g.check_shape("doctor", ws.run(&["doctor", "--json"]));
    g.check_shape(
        "stores",
        ckpt(&tmp, &["stores", tmp.to_str().unwrap(), "--json"]),
    );

    // The remote commands, through a `file://` remote (after `stores`,
    // which would list the clone's store). Remote ids, byte and request
    // counts are this run's: shape only.
    let remote = format!("file://{}", tmp.join("remote").display());
    g.check_shape(
        "remote_add",
        ws.run(&[
            "remote",
            "add",
            "origin",
            &remote,
            "--workspace",
            "app",
            "--json",
        ]),
    );
    g.check_shape("push", ws.run(&["push", "--json"]));
    g.check_shape(
        "log_remote",
        ws.run(&["log", "--remote", "origin", "--json"]),
    );
    let cloned = tmp.join("cloned");
    g.check_shape(
        "clone",
        ckpt(
            &tmp,
            &[
                "clone",
                &remote,
                cloned.to_str().unwrap(),
                "--workspace",
                "app",
                "--json",
            ],
        ),
    );
    write(
        &ws.root,
        "src/after_clone.rs",
        b"// pushed after the clone\n",
    );
    ws.run(&["save", "-m", "after the clone"]).ok();
    ws.run(&["push"]).ok();
    g.check_shape("pull", ckpt(&cloned, &["pull", "--json"]));
    g.check_shape(
        "gc_remote",
        ws.run(&["gc", "--remote", "origin", "--dry-run", "--json"]),
    );

    g.finish();
}
