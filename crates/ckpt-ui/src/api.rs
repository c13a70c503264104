//! The routes: each maps its query or JSON body to the options of one
//! operation of [`ckpt_lib::ops`], runs it on a blocking thread (a fresh
//! [`Context`] at the workspace root, like one `ckpt` command: the store
//! is opened and its lock taken and released per request, so the CLI,
//! hooks and the watcher keep working while a page is open), and answers
//! with the operation's report serialised exactly as `--json` prints it,
//! plus one field for the page: each checkpoint record that has an `event`
//! tag (made by `ckpt hook`) gets `kind`, what that event means
//! ([`step_kind`]), so the page never keeps its own list of the harnesses'
//! event names. A failed operation answers `{error, exit_code}`
//! (`ops::json::error`).
//!
//! | route | operation |
//! |---|---|
//! | `GET /` `/app.js` `/app.css` | the page ([`crate::assets`]) |
//! | `GET /api/info` | the workspace root and whether actions are allowed |
//! | `GET /api/log?limit&before&search&session&path` | `ops::log::log` |
//! | `GET /api/show?id` | `ops::show::show` |
//! | `GET /api/diff?from&to&path&content&fork` | `ops::diff::diff` (`to` absent: the working directory; with `fork`, `to` is the fork's checkpoint, default its head) |
//! | `GET /api/status` | `ops::status::status` |
//! | `GET /api/du` | `ops::du::du` |
//! | `GET /api/file?id&path` | `ops::cat::cat`, the raw bytes (images before/after) |
//! | `GET /api/forks` | `ops::forks::forks` |
//! | `GET /api/events` | Server-Sent Events from [`crate::live`] |
//! | `POST /api/restore {id, paths, dry_run}` | `ops::restore::restore` |
//! | `POST /api/fork {id, name}` | `ops::fork::fork` into the sibling directory `name` |
//! | `POST /api/fork/remove {dir}` | `ops::forks::remove` |
//! | `POST /api/adopt {dir, id, dry_run}` | `ops::adopt::adopt` of `dir#id` (`id` absent: the fork's head) |
//! | `POST /api/delete {id}` | `ops::delete::delete` |
//! | `POST /api/annotate {id, set, remove, note}` | `ops::annotate::annotate` |
//! | `POST /api/gc {dry_run}` | `ops::gc::gc` (no retention rules: only unreferenced data) |
//!
//! Every path parameter goes through [`rel_path`] (relative, no `..`, no
//! NUL; non-UTF-8 names arrive as `path_hex`) before the operation checks
//! it against the workspace; a fork target is a single directory name next
//! to the workspace. A fork to compare, adopt or remove ([`fork_dir`]) is
//! such a name or an absolute path made of plain names (what `ckpt forks`
//! reports); the operation then checks it is another workspace's root
//! ([`ops::adopt::fork_workspace`]) and, to remove it, a fork of this one.

use std::convert::Infallible;
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::{header, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{middleware, Json, Router};
use ckpt_harness::Kind;
use ckpt_lib::ops::parts::Scope;
use ckpt_lib::ops::{self, Context};
use ckpt_lib::{Error, Result};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tokio_stream::wrappers::BroadcastStream;
use tokio_stream::{Stream, StreamExt};

use crate::{assets, guard, Shared};

type S = State<Arc<Shared>>;

/// The routes, behind [`guard::guard`].
pub fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/", get(index))
        .route("/app.js", get(js))
        .route("/app.css", get(css))
        .route("/api/info", get(info))
        .route("/api/log", get(log))
        .route("/api/show", get(show))
        .route("/api/diff", get(diff))
        .route("/api/status", get(status))
        .route("/api/du", get(du))
        .route("/api/file", get(file))
        .route("/api/forks", get(forks))
        .route("/api/events", get(events))
        .route("/api/restore", post(restore))
        .route("/api/fork", post(fork))
        .route("/api/fork/remove", post(fork_remove))
        .route("/api/adopt", post(adopt))
        .route("/api/delete", post(delete))
        .route("/api/annotate", post(annotate))
        .route("/api/gc", post(gc))
        .fallback(|| async { (StatusCode::NOT_FOUND, "ckpt ui: no such page\n") })
        .layer(middleware::from_fn_with_state(shared.clone(), guard::guard))
        .with_state(shared)
}

/// Runs an operation on a blocking thread and answers with its report.
async fn run<R: Serialize + Send + 'static>(
    s: &Shared,
    op: impl FnOnce(&Context) -> Result<R> + Send + 'static,
) -> Response {
    let ctx = s.context();
    match tokio::task::spawn_blocking(move || op(&ctx)).await {
        Ok(Ok(r)) => Json(r).into_response(),
        Ok(Err(e)) => error(&e),
        Err(e) => failed(e),
    }
}

/// [`run`] for a report holding checkpoint records: each gets its `kind`
/// ([`with_kinds`]).
async fn run_records<R: Serialize + Send + 'static>(
    s: &Shared,
    op: impl FnOnce(&Context) -> Result<R> + Send + 'static,
) -> Response {
    let ctx = s.context();
    let job = move || op(&ctx).map(serde_json::to_value);
    match tokio::task::spawn_blocking(job).await {
        Ok(Ok(Ok(mut v))) => {
            with_kinds(&mut v);
            Json(v).into_response()
        }
        Ok(Ok(Err(e))) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            Json(json!({ "error": format!("ckpt ui: the report did not serialise: {e}"), "exit_code": 1 })),
        )
            .into_response(),
        Ok(Err(e)) => error(&e),
        Err(e) => failed(e),
    }
}

/// The blocking thread running an operation panicked or was cancelled.
fn failed(e: tokio::task::JoinError) -> Response {
    (
        StatusCode::INTERNAL_SERVER_ERROR,
        Json(json!({ "error": format!("ckpt task failed: {e}"), "exit_code": 1 })),
    )
        .into_response()
}

/// What a hook event means to the page, by [`Kind::of`] (the one list of
/// every harness's event names): `prompt` (a turn's first checkpoint; its
/// message is `prompt: TEXT`), `before_tool`, `after_tool` (a tool call
/// that changed files; the state before it is the checkpoint's `parent`),
/// `turn_end`, `other`.
pub fn step_kind(event: &str) -> &'static str {
    match Kind::of(event) {
        Kind::Prompt => "prompt",
        Kind::BeforeTool => "before_tool",
        Kind::AfterTool => "after_tool",
        Kind::TurnEnd => "turn_end",
        Kind::Other => "other",
    }
}

/// Adds `kind` ([`step_kind`]) to the checkpoint record `v` (a `show`
/// report) or to each of `v.checkpoints` (a `log` report), when it has an
/// `event` tag.
fn with_kinds(v: &mut Value) {
    fn one(cp: &mut Value) {
        if let Some(k) = cp["tags"]["event"].as_str().map(step_kind) {
            cp["kind"] = k.into();
        }
    }
    if let Some(cps) = v.get_mut("checkpoints").and_then(Value::as_array_mut) {
        cps.iter_mut().for_each(one);
    } else if v.get("tags").is_some() {
        one(v);
    }
}

/// An operation's error: 400 for what the request got wrong, 503 when the
/// store is busy, 500 otherwise.
fn error(e: &Error) -> Response {
    let status = match e.exit_code() {
        2 | 3 => StatusCode::BAD_REQUEST,
        4 => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    (status, Json(ops::json::error(e))).into_response()
}

/// A path parameter: relative to the workspace root, made of plain names
/// (no `..`, no root, no NUL). `hex` carries names that are not UTF-8.
pub fn rel_path(text: Option<&str>, hex: Option<&str>) -> Result<PathBuf> {
    let bytes = match (text, hex) {
        (_, Some(h)) => ops::json::from_hex(h)
            .ok_or_else(|| Error::Usage(format!("path_hex {h:?} is not hex (nothing was done)")))?,
        (Some(t), None) => t.as_bytes().to_vec(),
        (None, None) => return Err(Error::Usage("a path is required (nothing was done)".into())),
    };
    let p = PathBuf::from(OsString::from_vec(bytes));
    let plain = p
        .components()
        .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
    if p.as_os_str().is_empty() || !plain || p.as_os_str().as_encoded_bytes().contains(&0) {
        return Err(Error::Usage(format!(
            "path {:?} must be relative to the workspace root, without `..` (nothing was done)",
            p.display()
        )));
    }
    Ok(p)
}

/// A directory name next to the workspace: one plain name (no `/`, `.`,
/// `..` or NUL).
fn sibling(root: &Path, name: &str) -> Option<PathBuf> {
    let single = !matches!(name, "" | "." | "..") && !name.contains(['/', '\0']);
    root.parent().filter(|_| single).map(|p| p.join(name))
}

/// A fork to compare, adopt or remove: one directory name next to the
/// workspace `root`, or an absolute path of plain names (no `.`, `..` or
/// NUL), as `ckpt forks` reports it.
pub fn fork_dir(root: &Path, dir: &str) -> Result<PathBuf> {
    let plain = dir.strip_prefix('/').is_some_and(|rest| {
        rest.split('/')
            .all(|n| !matches!(n, "" | "." | "..") && !n.contains('\0'))
    });
    match sibling(root, dir) {
        Some(d) => Ok(d),
        None if plain => Ok(PathBuf::from(dir)),
        None => Err(Error::Usage(format!(
            "fork directory {dir:?} must be one directory name next to the workspace, or an absolute path without `..` as `ckpt forks` reports it (nothing was done)"
        ))),
    }
}

fn asset(ctype: &'static str, body: impl Into<axum::body::Body>) -> Response {
    ([(header::CONTENT_TYPE, ctype)], body.into()).into_response()
}

async fn index(State(s): S) -> Response {
    asset("text/html; charset=utf-8", assets::index(s.token.as_str()))
}

async fn js() -> Response {
    asset("text/javascript; charset=utf-8", assets::APP_JS)
}

async fn css() -> Response {
    asset("text/css; charset=utf-8", assets::APP_CSS)
}

async fn info(State(s): S) -> Response {
    Json(json!({
        "schema": ops::json::SCHEMA,
        "root": s.root.display().to_string(),
        "read_only": s.read_only,
    }))
    .into_response()
}

#[derive(Deserialize)]
struct LogQuery {
    limit: Option<usize>,
    before: Option<u64>,
    search: Option<String>,
    session: Option<String>,
    path: Option<String>,
    path_hex: Option<String>,
}

/// The most checkpoints one page returns.
const MAX_PAGE: usize = 1000;

async fn log(State(s): S, Query(q): Query<LogQuery>) -> Response {
    let path = match (&q.path, &q.path_hex) {
        (None, None) => None,
        (t, h) => match rel_path(t.as_deref(), h.as_deref()) {
            Ok(p) => Some(p),
            Err(e) => return error(&e),
        },
    };
    let opts = ops::log::LogOptions {
        limit: Some(q.limit.unwrap_or(100).min(MAX_PAGE)),
        before: q.before,
        search: q.search.filter(|s| !s.is_empty()),
        path,
        session: q.session.clone().filter(|s| !s.is_empty()),
    };
    run_records(&s, move |c| ops::log::log(c, &opts)).await
}

#[derive(Deserialize)]
struct IdQuery {
    id: String,
}

async fn show(State(s): S, Query(q): Query<IdQuery>) -> Response {
    let opts = ops::show::ShowOptions { rev: q.id };
    run_records(&s, move |c| ops::show::show(c, &opts)).await
}

#[derive(Deserialize)]
struct DiffQuery {
    from: Option<String>,
    to: Option<String>,
    path: Option<String>,
    path_hex: Option<String>,
    #[serde(default)]
    content: bool,
    fork: Option<String>,
}

async fn diff(State(s): S, Query(q): Query<DiffQuery>) -> Response {
    let paths = match (&q.path, &q.path_hex) {
        (None, None) => Vec::new(),
        (t, h) => match rel_path(t.as_deref(), h.as_deref()) {
            Ok(p) => vec![p],
            Err(e) => return error(&e),
        },
    };
    let fork = match q.fork.as_deref().filter(|f| !f.is_empty()) {
        None => None,
        Some(f) => match fork_dir(&s.root, f) {
            Ok(d) => Some(d),
            Err(e) => return error(&e),
        },
    };
    let opts = ops::diff::DiffOptions {
        from: q.from,
        to: q.to.filter(|t| !t.is_empty()),
        paths,
        content: q.content,
        fork,
    };
    run(&s, move |c| ops::diff::diff(c, &opts)).await
}

async fn status(State(s): S) -> Response {
    let opts = ops::status::StatusOptions::default();
    run(&s, move |c| ops::status::status(c, &opts)).await
}

async fn du(State(s): S) -> Response {
    run(&s, ops::du::du).await
}

async fn forks(State(s): S) -> Response {
    run(&s, ops::forks::forks).await
}

#[derive(Deserialize)]
struct FileQuery {
    id: String,
    path: Option<String>,
    path_hex: Option<String>,
}

/// The content type of an image the page shows inline; anything else is
/// served as opaque bytes.
fn image_type(p: &Path) -> &'static str {
    let ext = p
        .extension()
        .map(|e| e.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    match ext.as_str() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "svg" => "image/svg+xml",
        _ => "application/octet-stream",
    }
}

async fn file(State(s): S, Query(q): Query<FileQuery>) -> Response {
    let path = match rel_path(q.path.as_deref(), q.path_hex.as_deref()) {
        Ok(p) => p,
        Err(e) => return error(&e),
    };
    let ctype = image_type(&path);
    let opts = ops::cat::CatOptions { rev: q.id, path };
    let ctx = s.context();
    match tokio::task::spawn_blocking(move || ops::cat::cat(&ctx, &opts)).await {
        Ok(Ok(r)) => (
            [
                (header::CONTENT_TYPE, ctype),
                // Opened directly (not as an <img>), an SVG's scripts must
                // not run in this origin.
                (
                    header::CONTENT_SECURITY_POLICY,
                    "default-src 'none'; style-src 'unsafe-inline'; sandbox",
                ),
                (header::CONTENT_DISPOSITION, "attachment"),
            ],
            r.bytes,
        )
            .into_response(),
        Ok(Err(e)) => error(&e),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

async fn events(State(s): S) -> Sse<impl Stream<Item = std::result::Result<Event, Infallible>>> {
    let first = tokio_stream::once(Ok(Event::default().event("hello").data("0")));
    let changes = BroadcastStream::new(s.live.subscribe()).map(|n| {
        // A lagging receiver lost some counts; "changed" is all it needs.
        let n = n.unwrap_or(0);
        Ok(Event::default().event("changed").data(n.to_string()))
    });
    Sse::new(first.chain(changes)).keep_alive(KeepAlive::default())
}

#[derive(Deserialize)]
struct RestoreBody {
    id: String,
    #[serde(default)]
    paths: Vec<String>,
    #[serde(default)]
    paths_hex: Vec<String>,
    dry_run: bool,
}

async fn restore(State(s): S, Json(b): Json<RestoreBody>) -> Response {
    let paths = b
        .paths
        .iter()
        .map(|p| rel_path(Some(p), None))
        .chain(b.paths_hex.iter().map(|h| rel_path(None, Some(h))))
        .collect::<Result<Vec<_>>>();
    let paths = match paths {
        Ok(p) => p,
        Err(e) => return error(&e),
    };
    let req = ops::restore::RestoreOptions {
        rev: b.id,
        paths,
        dry_run: b.dry_run,
        no_save: false,
        scope: Scope::default(),
    };
    run(&s, move |c| ops::restore::restore(c, &req)).await
}

#[derive(Deserialize)]
struct ForkBody {
    id: String,
    name: String,
}

async fn fork(State(s): S, Json(b): Json<ForkBody>) -> Response {
    let Some(dir) = sibling(&s.root, &b.name) else {
        return error(&Error::Usage(format!(
            "fork target {:?} must be one directory name (it is made next to the workspace; nothing was done)",
            b.name
        )));
    };
    run(&s, move |c| {
        ops::fork::fork(
            c,
            &ops::fork::ForkOptions {
                rev: &b.id,
                dir: &dir,
                store: None,
                link: false,
                progress: None,
                backend: None,
                command: None,
            },
        )
    })
    .await
}

#[derive(Deserialize)]
struct ForkDirBody {
    dir: String,
}

async fn fork_remove(State(s): S, Json(b): Json<ForkDirBody>) -> Response {
    let dir = match fork_dir(&s.root, &b.dir) {
        Ok(d) => d,
        Err(e) => return error(&e),
    };
    run(&s, move |c| {
        ops::forks::remove(c, &ops::forks::RemoveOptions { dir })
    })
    .await
}

#[derive(Deserialize)]
struct AdoptBody {
    dir: String,
    id: Option<String>,
    dry_run: bool,
}

/// `dir#id` for `ops::adopt`, refused unless it splits back into exactly
/// `dir` and `id` (an id with `/` would make a different path).
fn adopt_arg(root: &Path, dir: &str, id: Option<&str>) -> Result<String> {
    let path = fork_dir(root, dir)?;
    let id = id.filter(|i| !i.is_empty()).unwrap_or("HEAD");
    let arg = format!("{}#{id}", path.display());
    let (d, i) = ops::adopt::split_fork_arg(&arg);
    if Path::new(d) != path || i != Some(id) {
        return Err(Error::Usage(format!(
            "checkpoint {id:?} of fork {dir:?} is not a checkpoint id (nothing was done)"
        )));
    }
    Ok(arg)
}

async fn adopt(State(s): S, Json(b): Json<AdoptBody>) -> Response {
    let fork = match adopt_arg(&s.root, &b.dir, b.id.as_deref()) {
        Ok(f) => f,
        Err(e) => return error(&e),
    };
    let opts = ops::adopt::AdoptOptions {
        fork,
        dry_run: b.dry_run,
    };
    run(&s, move |c| ops::adopt::adopt(c, &opts)).await
}

#[derive(Deserialize)]
struct DeleteBody {
    id: String,
}

async fn delete(State(s): S, Json(b): Json<DeleteBody>) -> Response {
    let opts = ops::delete::DeleteOptions { rev: b.id };
    run(&s, move |c| ops::delete::delete(c, &opts)).await
}

#[derive(Deserialize)]
struct AnnotateBody {
    id: String,
    #[serde(default)]
    set: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    remove: Vec<String>,
    #[serde(default)]
    note: Option<String>,
}

async fn annotate(State(s): S, Json(b): Json<AnnotateBody>) -> Response {
    let opts = ops::annotate::AnnotateOptions {
        rev: b.id,
        set: b.set,
        remove: b.remove,
        note: b.note,
    };
    run(&s, move |c| ops::annotate::annotate(c, &opts)).await
}

#[derive(Deserialize)]
struct GcBody {
    dry_run: bool,
}

async fn gc(State(s): S, Json(b): Json<GcBody>) -> Response {
    let opts = ops::gc::GcOptions {
        dry_run: b.dry_run,
        ..Default::default()
    };
    run(&s, move |c| ops::gc::gc(c, &opts)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_parameters_stay_relative() {
        for bad in ["", "/etc/passwd", "../x", "a/../../x", "a/..", "a\0b"] {
            assert!(rel_path(Some(bad), None).is_err(), "{bad:?} accepted");
        }
        for ok in ["a", "a/b.txt", "./a", "<img src=x onerror=alert(1)>.js"] {
            assert!(rel_path(Some(ok), None).is_ok(), "{ok:?} refused");
        }
        assert_eq!(
            rel_path(None, Some("ff2e6a73")).unwrap(),
            PathBuf::from(OsString::from_vec(b"\xff.js".to_vec()))
        );
        assert!(rel_path(None, Some("2e2e")).is_err(), "hex `..` accepted");
        assert!(rel_path(None, Some("zz")).is_err());
    }

    #[test]
    fn records_with_an_event_get_its_kind() {
        let mut log = json!({"checkpoints": [
            {"id": "v3", "tags": {"event": "PostToolUse", "tool": "Write"}},
            {"id": "v2", "tags": {"event": "afterShellExecution"}},
            {"id": "v1", "tags": {"event": "UserPromptSubmit"}},
            {"id": "v0", "tags": {}},
        ]});
        with_kinds(&mut log);
        let kinds: Vec<_> = log["checkpoints"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.get("kind").cloned())
            .collect();
        assert_eq!(
            kinds,
            [
                Some(json!("after_tool")),
                Some(json!("after_tool")),
                Some(json!("prompt")),
                None
            ]
        );
        let mut show = json!({"id": "v4", "tags": {"event": "tool.execute.before"}});
        with_kinds(&mut show);
        assert_eq!(show["kind"], "before_tool");
        let mut other = json!({"forks": []});
        with_kinds(&mut other);
        assert_eq!(other, json!({"forks": []}));
    }

    #[test]
    fn fork_directories_are_siblings_or_plain_absolute_paths() {
        let root = Path::new("/w/ws");
        for bad in [
            "",
            ".",
            "..",
            "a/",
            "a/b",
            "../x",
            "./x",
            "/",
            "/w/../etc",
            "/w/./x",
            "/w/x/",
            "a\0b",
            "/w/a\0b",
        ] {
            assert!(fork_dir(root, bad).is_err(), "{bad:?} accepted");
        }
        assert_eq!(fork_dir(root, "f1").unwrap(), Path::new("/w/f1"));
        assert_eq!(fork_dir(root, "/x/y#1").unwrap(), Path::new("/x/y#1"));
        assert_eq!(
            fork_dir(root, "<img src=x>").unwrap(),
            Path::new("/w/<img src=x>")
        );
        assert_eq!(adopt_arg(root, "f#1", None).unwrap(), "/w/f#1#HEAD");
        assert_eq!(adopt_arg(root, "/x/f", Some("v3")).unwrap(), "/x/f#v3");
        for bad_id in ["a/b", "/../../etc", "v1#"] {
            assert!(
                adopt_arg(root, "f", Some(bad_id)).is_err(),
                "{bad_id:?} accepted"
            );
        }
    }
}
