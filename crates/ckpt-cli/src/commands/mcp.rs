//! `ckpt mcp`: a Model Context Protocol server on stdin/stdout, built on the
//! official Rust SDK (`rmcp`).
//!
//! Each tool runs this same `ckpt` binary (`std::env::current_exe`) with
//! `-C <workspace> … --json` and returns its JSON. So MCP results are exactly
//! the documented `--json` schema (one fact in one place: the CLI code that
//! prints it), every call takes and releases the store lock like any other
//! `ckpt` command (the server never holds it between calls, so hooks and
//! people can use the workspace at the same time), and a failing call
//! cannot take the server down. The price is one process start per call
//! (a few ms, measured in BENCHMARKS.md).
//!
//! Errors come back as MCP *tool* errors (`isError: true`) whose text is
//! ckpt's own error message and exit code, never as a crash or a protocol
//! error. `checkpoint_restore` is a dry run unless `dry_run: false` is
//! passed; `checkpoint_diff` caps the diff text it returns (`max_bytes`).
//! Nothing is ever written to stdout except MCP messages.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Command;

use ckpt_lib::{Error, Result};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, Implementation, ServerCapabilities, ServerConfig};
use rmcp::{tool, tool_handler, tool_router, ErrorData, ServerHandler, ServiceExt};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::context::Ctx;

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

/// The server: where the workspace is and how to run ckpt.
#[derive(Clone)]
pub struct CkptServer {
    exe: PathBuf,
    dir: PathBuf,
    lock_timeout: u64,
    tool_router: ToolRouter<Self>,
}

fn text_error(msg: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(msg)])
}

impl CkptServer {
    /// Runs `ckpt -C dir ARGS` and turns its JSON (or error) into a result.
    async fn ckpt(&self, args: Vec<OsString>) -> CallToolResult {
        let mut cmd = Command::new(&self.exe);
        cmd.arg("-C")
            .arg(&self.dir)
            .arg("--lock-timeout")
            .arg(self.lock_timeout.to_string())
            .args(args)
            .env("NO_COLOR", "1")
            .stdin(std::process::Stdio::null());
        let out = match tokio::task::spawn_blocking(move || cmd.output()).await {
            Ok(Ok(o)) => o,
            Ok(Err(e)) => return text_error(format!("could not run ckpt: {e}")),
            Err(e) => return text_error(format!("ckpt task failed: {e}")),
        };
        let stdout = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let msg = stderr.trim().trim_start_matches("ckpt: error: ");
            return CallToolResult::structured_error(json!({
                "error": msg,
                "exit_code": out.status.code(),
            }));
        }
        match serde_json::from_str::<Value>(&stdout) {
            Ok(v) => CallToolResult::structured(v),
            Err(e) => text_error(format!(
                "ckpt printed something that is not JSON ({e}): {stdout}"
            )),
        }
    }
}

fn os(s: impl Into<OsString>) -> OsString {
    s.into()
}

fn with_paths(mut args: Vec<OsString>, paths: &[String]) -> Vec<OsString> {
    if !paths.is_empty() {
        args.push(os("--"));
        args.extend(paths.iter().map(os));
    }
    args
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
    pub fn new(exe: PathBuf, dir: PathBuf, lock_timeout: u64) -> Self {
        Self {
            exe,
            dir,
            lock_timeout,
            tool_router: Self::tool_router(),
        }
    }

    #[tool(
        description = "Save a checkpoint of the whole workspace (every file, including ones changed by shell commands, plus the agent state). Cheap: call it before anything risky. Returns the new checkpoint id (e.g. \"v12\"), or saved=false when nothing changed."
    )]
    async fn checkpoint_save(
        &self,
        Parameters(a): Parameters<SaveArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let mut args = vec![os("save"), os("--json")];
        if let Some(m) = a.message {
            args.extend([os("-m"), os(m)]);
        }
        for (k, v) in a.tags {
            args.extend([os("--tag"), os(format!("{k}={v}"))]);
        }
        if a.allow_empty {
            args.push(os("--allow-empty"));
        }
        Ok(self.ckpt(args).await)
    }

    #[tool(
        description = "List checkpoints, newest first: id, time, message, tags, files added/modified/deleted, new bytes."
    )]
    async fn checkpoint_list(
        &self,
        Parameters(a): Parameters<ListArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let n = a.limit.unwrap_or(20).to_string();
        Ok(self
            .ckpt(vec![os("log"), os("--json"), os("-n"), os(n)])
            .await)
    }

    #[tool(description = "Show one checkpoint: its record and the paths it changed.")]
    async fn checkpoint_show(
        &self,
        Parameters(a): Parameters<ShowArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(self.ckpt(vec![os("show"), os("--json"), os(a.id)]).await)
    }

    #[tool(
        description = "Diff two checkpoints, or a checkpoint (default HEAD) and the current files. Returns each changed path with its status and a unified diff (text files), capped at max_bytes of diff text in total."
    )]
    async fn checkpoint_diff(
        &self,
        Parameters(a): Parameters<DiffArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let mut args = vec![os("diff"), os("--json")];
        if a.name_only {
            args.push(os("--name-status"));
        }
        match (a.from, a.to) {
            (f, Some(t)) => args.extend([os(f.unwrap_or_else(|| "HEAD".into())), os(t)]),
            (Some(f), None) => args.push(os(f)),
            (None, None) => {}
        }
        let mut r = self.ckpt(with_paths(args, &a.paths)).await;
        if r.is_error != Some(true) {
            if let Some(v) = r.structured_content.as_mut() {
                cap_diffs(v, a.max_bytes.unwrap_or(DEFAULT_DIFF_BYTES));
                r = CallToolResult::structured(v.clone());
            }
        }
        Ok(r)
    }

    #[tool(
        description = "Bring the workspace (or only `paths`) back to a checkpoint. DRY RUN BY DEFAULT: returns what would change; pass dry_run=false to really restore. A real restore first saves the current state, so it can itself be undone (the result's `undo` id)."
    )]
    async fn checkpoint_restore(
        &self,
        Parameters(a): Parameters<RestoreArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let mut args = vec![os("restore"), os("--json"), os(a.id)];
        if a.dry_run {
            args.push(os("--dry-run"));
        }
        Ok(self.ckpt(with_paths(args, &a.paths)).await)
    }

    #[tool(
        description = "What changed in the workspace since the last checkpoint (HEAD): changed paths and agent-state keys; clean=true when nothing did."
    )]
    async fn workspace_status(
        &self,
        Parameters(a): Parameters<StatusArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(self
            .ckpt(with_paths(vec![os("status"), os("--json")], &a.paths))
            .await)
    }

    #[tool(
        description = "Read a key from the agent-state store (a key-value store that rewinds with checkpoints). Error if the key does not exist."
    )]
    async fn state_get(
        &self,
        Parameters(a): Parameters<StateGetArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let mut args = vec![os("state"), os("get"), os("--json"), os(a.key)];
        if let Some(v) = a.at {
            args.extend([os("--at"), os(v.to_string())]);
        }
        Ok(self.ckpt(args).await)
    }

    #[tool(
        description = "Write a key in the agent-state store (one transaction). The state is captured by the next checkpoint and restored with it."
    )]
    async fn state_put(
        &self,
        Parameters(a): Parameters<StatePutArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(self
            .ckpt(vec![
                os("state"),
                os("put"),
                os("--json"),
                os("--"),
                os(a.key),
                os(a.value),
            ])
            .await)
    }

    #[tool(description = "List agent-state keys (optionally only those starting with `prefix`).")]
    async fn state_list(
        &self,
        Parameters(a): Parameters<StateListArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let mut args = vec![os("state"), os("ls"), os("--json")];
        if let Some(p) = a.prefix {
            args.extend([os("--"), os(p)]);
        }
        Ok(self.ckpt(args).await)
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
    let exe = std::env::current_exe().map_err(|e| Error::io("locate", "ckpt executable", e))?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::io("start", "async runtime", e))?;
    let server = CkptServer::new(
        exe,
        ctx.ops.cwd.clone(),
        ctx.ops.config.lock_timeout.as_secs(),
    );
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
