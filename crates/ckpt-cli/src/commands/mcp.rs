//! `ckpt mcp`: a Model Context Protocol server on stdin/stdout, built on the
//! official Rust SDK (`rmcp`).
//!
//! Each tool maps its arguments to the options of one operation of the
//! front door (`ckpt_lib::ops`), runs it on a blocking thread, and returns
//! the operation's report: the same typed report, serialised the same way,
//! as `ckpt … --json` prints (one schema, `ckpt_lib::ops::json`). Every call
//! opens the store and takes and releases its lock like any `ckpt` command
//! (the server never holds it between calls, so hooks and people can use the
//! workspace at the same time). A call that fails, or panics, becomes a tool
//! error; it cannot take the server down.
//!
//! Errors come back as MCP *tool* errors (`isError: true`) whose text is
//! ckpt's own error message and exit code, never as a crash or a protocol
//! error. `checkpoint_restore` is a dry run unless `dry_run: false` is
//! passed; `checkpoint_diff` caps the diff text it returns (`max_bytes`).
//! Nothing is ever written to stdout except MCP messages.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use ckpt_lib::ops::parts::{Backend, Scope};
use ckpt_lib::ops::save::SaveOptions;
use ckpt_lib::ops::{self, Context};
use ckpt_lib::{Config, Error, Result};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResult, ContentBlock, Implementation, JsonObject, ServerCapabilities, ServerConfig,
};
use rmcp::{tool, tool_handler, tool_router, ErrorData, ServerHandler, ServiceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::context::Ctx;
use crate::exit::EXIT_NOT_FOUND;

/// Default cap on diff text returned by `checkpoint_diff`.
const DEFAULT_DIFF_BYTES: usize = 20_000;

/// Arguments of `checkpoint_save`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct SaveArgs {
    /// What this checkpoint is (shown in the history).
    #[serde(default)]
    pub message: Option<String>,
    /// Tags to record, e.g. {"task": "refactor-auth"}.
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
    /// Record a checkpoint even if nothing changed (default false).
    #[serde(default)]
    pub allow_empty: bool,
}

/// Arguments of `checkpoint_list`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct ListArgs {
    /// Return at most this many checkpoints, newest first (default 20).
    #[serde(default)]
    pub limit: Option<usize>,
}

/// Arguments of `checkpoint_show`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ShowArgs {
    /// Checkpoint id: "v12", "HEAD", "HEAD~1", or a hash prefix.
    pub id: String,
}

/// Arguments of `checkpoint_annotate`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct AnnotateArgs {
    /// Checkpoint id: "v12", "HEAD", "HEAD~1", or a hash prefix.
    pub id: String,
    /// Tags to add or change, e.g. {"verdict": "broke the tests"}.
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
    /// Annotation tag keys to remove.
    #[serde(default)]
    pub remove: Vec<String>,
    /// The new note ("" removes it; absent leaves it as it is).
    #[serde(default)]
    pub note: Option<String>,
}

/// Arguments of `checkpoint_diff`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct DiffArgs {
    /// From this checkpoint (default "HEAD").
    #[serde(default)]
    pub from: Option<String>,
    /// To this checkpoint (default: the current files).
    #[serde(default)]
    pub to: Option<String>,
    /// Only these paths (relative to the workspace root; directories include
    /// everything below).
    #[serde(default)]
    pub paths: Vec<String>,
    /// Only list changed paths, no content diffs (default false).
    #[serde(default)]
    pub name_only: bool,
    /// Compare `from` (default "HEAD") with a checkpoint of this fork
    /// directory instead: `to` then names the fork's checkpoint (default
    /// its head).
    #[serde(default)]
    pub fork: Option<String>,
    /// Cap on the total diff text returned, in bytes (default 20000); diffs
    /// beyond it are dropped and `truncated` is set.
    #[serde(default)]
    pub max_bytes: Option<usize>,
}

/// Arguments of `checkpoint_restore`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct RestoreArgs {
    /// Checkpoint to bring back: "v12", "HEAD~1", …
    pub id: String,
    /// Only these paths (relative to the workspace root).
    #[serde(default)]
    pub paths: Vec<String>,
    /// Only report what would change (default TRUE: pass false to restore).
    #[serde(default = "yes")]
    pub dry_run: bool,
}

/// Arguments of `fork_create`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ForkArgs {
    /// Checkpoint to fork: "v12", "HEAD", …
    pub id: String,
    /// The new workspace directory (new or empty, outside this workspace);
    /// with `count`, the prefix of DIR1 … DIRn.
    pub dir: String,
    /// How many forks (default 1).
    #[serde(default)]
    pub count: Option<usize>,
    /// Force a backend: "btrfs-subvolume", "reflink", "overlay" (root: a
    /// mount that lasts until fork_remove or a reboot) or "copy" (default:
    /// the fastest that works, never overlay, as `ckpt doctor` shows).
    #[serde(default)]
    pub backend: Option<String>,
}

/// Arguments of `fork_adopt`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct AdoptArgs {
    /// The fork: "DIR" (its head) or "DIR#v7".
    pub fork: String,
    /// Only report what would change (default TRUE: pass false to adopt).
    #[serde(default = "yes")]
    pub dry_run: bool,
}

/// Arguments of `fork_remove`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ForkRemoveArgs {
    /// The fork's directory.
    pub dir: String,
}

fn yes() -> bool {
    true
}

/// Arguments of `workspace_status`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct StatusArgs {
    /// Only these paths (relative to the workspace root).
    #[serde(default)]
    pub paths: Vec<String>,
}

/// Arguments of `state_get`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct StateGetArgs {
    /// The key.
    pub key: String,
    /// Read at this state version (a checkpoint's state_version).
    #[serde(default)]
    pub at: Option<u64>,
}

/// Arguments of `state_put`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct StatePutArgs {
    /// The key.
    pub key: String,
    /// The value (text; JSON is stored as given).
    pub value: String,
}

/// Arguments of `state_list`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct StateListArgs {
    /// Only keys starting with this.
    #[serde(default)]
    pub prefix: Option<String>,
}

/// The server: where the workspace is and how ckpt runs.
#[derive(Clone)]
pub struct CkptServer {
    dir: PathBuf,
    config: Config,
    tool_router: ToolRouter<Self>,
}

fn text_error(msg: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(msg)])
}

/// A tool error carrying ckpt's message and the exit code `ckpt` would
/// have returned.
fn ckpt_error(msg: String, exit_code: i32) -> CallToolResult {
    CallToolResult::structured_error(json!({ "error": msg, "exit_code": exit_code }))
}

impl CkptServer {
    /// Runs one operation on a blocking thread and turns its report (or
    /// error) into a tool result; `refine` may turn a report into an error
    /// (a missing key) or adjust its JSON (capped diffs).
    async fn call<R: Serialize + Send + 'static>(
        &self,
        op: impl FnOnce(&Context) -> Result<R> + Send + 'static,
        refine: impl FnOnce(&R, Value) -> CallToolResult + Send + 'static,
    ) -> CallToolResult {
        let ctx = Context::new(self.dir.clone(), self.config.clone());
        let done = tokio::task::spawn_blocking(move || {
            op(&ctx).map(|r| {
                let v = serde_json::to_value(&r).expect("reports serialise");
                refine(&r, v)
            })
        })
        .await;
        match done {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => CallToolResult::structured_error(ops::json::error(&e)),
            Err(e) => text_error(format!("ckpt task failed: {e}")),
        }
    }
}

/// A report's JSON Schema (`ckpt_lib::ops::schema`, the one in
/// `docs/schemas`) as a tool's `outputSchema`.
fn report<T: JsonSchema>(command: &str) -> Arc<JsonObject> {
    match ops::schema::of::<T>(command) {
        Value::Object(m) => Arc::new(m),
        other => unreachable!("a report's schema is an object: {other}"),
    }
}

/// `checkpoint_diff`'s `outputSchema`: the diff report, plus what
/// [`cap_diffs`] adds.
fn diff_report() -> Arc<JsonObject> {
    let mut m = Arc::unwrap_or_clone(report::<ops::diff::DiffReport>("diff"));
    let props = m
        .get_mut("properties")
        .and_then(Value::as_object_mut)
        .expect("the diff report has properties");
    props.insert(
        "truncated".into(),
        json!({"description": "Diff text was dropped to keep within max_bytes.", "type": "boolean"}),
    );
    props.insert(
        "diff_bytes".into(),
        json!({"description": "Bytes of diff text returned.", "type": "integer", "minimum": 0}),
    );
    if let Some(Value::Array(req)) = m.get_mut("required") {
        req.extend([json!("truncated"), json!("diff_bytes")]);
    }
    Arc::new(m)
}

fn as_is<R>(_: &R, v: Value) -> CallToolResult {
    CallToolResult::structured(v)
}

fn paths(p: Vec<String>) -> Vec<PathBuf> {
    p.into_iter().map(PathBuf::from).collect()
}

/// Drops diff text beyond `cap` bytes (whole diffs, in order), marking the
/// result `truncated` and each dropped diff `diff_omitted`.
fn cap_diffs(v: &mut Value, cap: usize) {
    let mut used = 0usize;
    let mut truncated = false;
    if let Some(changes) = v.get_mut("changes").and_then(Value::as_array_mut) {
        for c in changes {
            let Some(len) = c.get("diff").and_then(Value::as_str).map(str::len) else {
                continue;
            };
            if used + len > cap {
                c.as_object_mut().expect("object").remove("diff");
                c["diff_omitted_bytes"] = json!(len);
                truncated = true;
            } else {
                used += len;
            }
        }
    }
    v["truncated"] = json!(truncated);
    v["diff_bytes"] = json!(used);
}

#[tool_router(router = tool_router)]
impl CkptServer {
    /// Creates the server for the workspace containing `dir`.
    pub fn new(dir: PathBuf, config: Config) -> Self {
        Self {
            dir,
            config,
            tool_router: Self::tool_router(),
        }
    }

    #[tool(
        output_schema = report::<ops::save::SaveReport>("save"),
        description = "Save a checkpoint of the whole workspace (every file, including ones changed by shell commands, plus the agent state). Cheap: call it before anything risky. Returns the new checkpoint id (e.g. \"v12\"), or saved=false when nothing changed."
    )]
    async fn checkpoint_save(
        &self,
        Parameters(a): Parameters<SaveArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let opts = SaveOptions {
            message: a.message.unwrap_or_default(),
            tags: a.tags,
            allow_empty: a.allow_empty,
        };
        Ok(self.call(move |c| ops::save::save(c, &opts), as_is).await)
    }

    #[tool(
        output_schema = report::<ops::log::LogReport>("log"),
        description = "List checkpoints, newest first: id, time, message, tags, files added/modified/deleted, new bytes."
    )]
    async fn checkpoint_list(
        &self,
        Parameters(a): Parameters<ListArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let opts = ops::log::LogOptions {
            limit: Some(a.limit.unwrap_or(20)),
            ..Default::default()
        };
        Ok(self.call(move |c| ops::log::log(c, &opts), as_is).await)
    }

    #[tool(
        output_schema = report::<ops::show::ShowReport>("show"),
        description = "Show one checkpoint: its record and the paths it changed."
    )]
    async fn checkpoint_show(
        &self,
        Parameters(a): Parameters<ShowArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let opts = ops::show::ShowOptions { rev: a.id };
        Ok(self.call(move |c| ops::show::show(c, &opts), as_is).await)
    }

    #[tool(
        output_schema = report::<ops::annotate::AnnotateReport>("annotate"),
        description = "Annotate an existing checkpoint: add or change tags, remove tags, set or clear (\"\") a note. Annotations are kept apart from the tags the checkpoint was saved with (those cannot change), show in checkpoint_list/checkpoint_show as `annotations`, and go when the checkpoint is deleted."
    )]
    async fn checkpoint_annotate(
        &self,
        Parameters(a): Parameters<AnnotateArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let opts = ops::annotate::AnnotateOptions {
            rev: a.id,
            set: a.tags,
            remove: a.remove,
            note: a.note,
        };
        Ok(self
            .call(move |c| ops::annotate::annotate(c, &opts), as_is)
            .await)
    }

    #[tool(
        output_schema = diff_report(),
        description = "Diff two checkpoints, or a checkpoint (default HEAD) and the current files. Returns each changed path with its status and a unified diff (text files), capped at max_bytes of diff text in total."
    )]
    async fn checkpoint_diff(
        &self,
        Parameters(a): Parameters<DiffArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let opts = ops::diff::DiffOptions {
            from: a.from,
            to: a.to,
            paths: paths(a.paths),
            content: !a.name_only,
            fork: a.fork.map(PathBuf::from),
        };
        let cap = a.max_bytes.unwrap_or(DEFAULT_DIFF_BYTES);
        let refine = move |_: &ops::diff::DiffReport, mut v: Value| {
            cap_diffs(&mut v, cap);
            CallToolResult::structured(v)
        };
        Ok(self.call(move |c| ops::diff::diff(c, &opts), refine).await)
    }

    #[tool(
        output_schema = report::<ops::restore::RestoreReport>("restore"),
        description = "Bring the workspace (or only `paths`) back to a checkpoint. DRY RUN BY DEFAULT: returns what would change; pass dry_run=false to really restore. A real restore first saves the current state, so it can itself be undone (the result's `undo` id)."
    )]
    async fn checkpoint_restore(
        &self,
        Parameters(a): Parameters<RestoreArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let req = ops::restore::RestoreOptions {
            rev: a.id,
            paths: paths(a.paths),
            dry_run: a.dry_run,
            no_save: false,
            scope: Scope::All,
        };
        Ok(self
            .call(move |c| ops::restore::restore(c, &req), as_is)
            .await)
    }

    #[tool(
        output_schema = report::<ops::fork::ForkManyReport>("fork --count"),
        description = "Fork a checkpoint into `count` (default 1) new, independent, runnable workspaces (every file, node_modules included; each with its own history starting at that checkpoint), for parallel agents. dir is the new directory, or with count the prefix of dir1..dirN."
    )]
    async fn fork_create(
        &self,
        Parameters(a): Parameters<ForkArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let n = a.count.unwrap_or(1);
        Ok(self
            .call(
                move |c| {
                    let dir = PathBuf::from(&a.dir);
                    let backend = match a.backend.as_deref().map(Backend::parse) {
                        Some(Err(e)) => return Err(Error::Usage(e)),
                        Some(Ok(b)) => Some(b),
                        None => None,
                    };
                    let opts = ops::fork::ForkOptions {
                        rev: &a.id,
                        dir: &dir,
                        store: None,
                        link: false,
                        progress: None,
                        backend,
                        command: None,
                    };
                    ops::fork::fork_many(c, &opts, n)
                },
                as_is,
            )
            .await)
    }

    #[tool(
        output_schema = report::<ops::forks::ForksReport>("forks"),
        description = "List this workspace's forks: directory, the checkpoint it was forked from, its latest checkpoint, and how far it diverged (files added/modified/deleted, bytes)."
    )]
    async fn fork_list(&self) -> Result<CallToolResult, ErrorData> {
        Ok(self.call(ops::forks::forks, as_is).await)
    }

    #[tool(
        output_schema = report::<ops::adopt::AdoptReport>("adopt"),
        description = "Adopt a fork: make this workspace exactly the fork's checkpoint (\"DIR\" = its head, or \"DIR#v7\"), files and agent state. DRY RUN BY DEFAULT: pass dry_run=false to adopt. It is an ordinary restore: the current state is saved first (the result's restore.pre_save / restore.undo id undoes it)."
    )]
    async fn fork_adopt(
        &self,
        Parameters(a): Parameters<AdoptArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let opts = ops::adopt::AdoptOptions {
            fork: a.fork,
            dry_run: a.dry_run,
        };
        Ok(self.call(move |c| ops::adopt::adopt(c, &opts), as_is).await)
    }

    #[tool(
        output_schema = report::<ops::forks::RemoveReport>("fork --remove"),
        description = "Remove a fork of this workspace: its directory and its store."
    )]
    async fn fork_remove(
        &self,
        Parameters(a): Parameters<ForkRemoveArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let opts = ops::forks::RemoveOptions {
            dir: PathBuf::from(a.dir),
        };
        Ok(self
            .call(move |c| ops::forks::remove(c, &opts), as_is)
            .await)
    }

    #[tool(
        output_schema = report::<ops::status::StatusReport>("status"),
        description = "What changed in the workspace since the last checkpoint (HEAD): changed paths and agent-state keys; clean=true when nothing did."
    )]
    async fn workspace_status(
        &self,
        Parameters(a): Parameters<StatusArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let opts = ops::status::StatusOptions {
            paths: paths(a.paths),
        };
        Ok(self
            .call(move |c| ops::status::status(c, &opts), as_is)
            .await)
    }

    #[tool(
        output_schema = report::<ops::state::GetReport>("state get"),
        description = "Read a key from the agent-state store (a key-value store that rewinds with checkpoints). Error if the key does not exist."
    )]
    async fn state_get(
        &self,
        Parameters(a): Parameters<StateGetArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let opts = ops::state::GetOptions {
            key: a.key.into_bytes(),
            at: a.at,
        };
        // A missing key is an error, with the exit code of `ckpt state get`.
        let refine = |r: &ops::state::GetReport, v: Value| match r.found {
            Some(_) => CallToolResult::structured(v),
            None => ckpt_error(
                format!(
                    "no key {} in the agent state (version {})",
                    String::from_utf8_lossy(&r.key),
                    r.at
                ),
                i32::from(EXIT_NOT_FOUND),
            ),
        };
        Ok(self.call(move |c| ops::state::get(c, &opts), refine).await)
    }

    #[tool(
        output_schema = report::<ops::state::PutReport>("state put"),
        description = "Write a key in the agent-state store (one transaction). The state is captured by the next checkpoint and restored with it."
    )]
    async fn state_put(
        &self,
        Parameters(a): Parameters<StatePutArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let key = a.key.into_bytes();
        let value = a.value.into_bytes();
        let op = move |c: &Context| {
            ops::state::put(
                c,
                ops::state::PutOptions {
                    key,
                    value: ops::state::NewValue {
                        source: ops::state::ValueSource::Bytes(value),
                        json_value: false,
                    },
                },
            )
        };
        Ok(self.call(op, as_is).await)
    }

    #[tool(
        output_schema = report::<ops::state::LsReport>("state ls"),
        description = "List agent-state keys (optionally only those starting with `prefix`)."
    )]
    async fn state_list(
        &self,
        Parameters(a): Parameters<StateListArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let opts = ops::state::LsOptions {
            prefix: a.prefix.map(String::into_bytes).unwrap_or_default(),
            at: None,
        };
        Ok(self.call(move |c| ops::state::ls(c, &opts), as_is).await)
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for CkptServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("ckpt", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "ckpt checkpoints this workspace: every file (including changes made by shell \
                 commands) and the agent state. Call checkpoint_save before risky steps, \
                 checkpoint_diff / workspace_status to see what changed, and checkpoint_restore \
                 (dry run first) to undo.",
            )
    }
}

/// `ckpt mcp`: serves until stdin closes.
pub fn run(ctx: &Ctx) -> Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .thread_stack_size(ckpt_lib::ops::parts::WALK_STACK)
        .enable_all()
        .build()
        .map_err(|e| Error::io("start", "async runtime", e))?;
    let server = CkptServer::new(ctx.ops.cwd.clone(), ctx.ops.config.clone());
    rt.block_on(async move {
        let service = server
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|e| Error::Usage(format!("mcp: initialisation failed: {e}")))?;
        service
            .waiting()
            .await
            .map_err(|e| Error::Usage(format!("mcp: server stopped: {e}")))?;
        Ok(())
    })
}
