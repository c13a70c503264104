//! # `ckpt ui`: the checkpoint timeline in a browser
//!
//! An HTTP server (axum on tokio) for one workspace. It owns no logic of
//! ckpt's: every answer is a report of the operations layer
//! ([`ckpt_lib::ops`]) serialised as `--json` prints it, and every action is
//! an operation call. This crate only maps HTTP requests to operation
//! options ([`api`]), guards the door ([`guard`]), tells open pages when the
//! catalog changed ([`live`]) and serves the page itself ([`assets`]: plain
//! hand-written HTML, CSS and JS embedded in the binary; nothing is fetched
//! from anywhere else).
//!
//! Security (why a hostile page or file name cannot use it; details in
//! [`guard`] and `docs/UI.md`):
//! - it listens on loopback only unless the caller asks for another address;
//! - every request carries the per-run random token ([`Token`]);
//! - a `Host` other than a loopback name (or the explicit bind address) is
//!   refused, against DNS rebinding;
//! - a state-changing request is a `POST` with the token, a JSON body and a
//!   same-origin `Origin`; with `--read-only` it is refused whatever it
//!   carries;
//! - the page runs under a strict Content-Security-Policy with no inline
//!   script, and its script renders every name, message and content with
//!   `textContent`;
//! - a path parameter must be relative with no `..` ([`api`]), and the
//!   operations then check it lies inside the workspace.

pub mod api;
pub mod assets;
pub mod guard;
pub mod live;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use ckpt_lib::ops::Context;
use ckpt_lib::{Config, Error, Result};

pub use guard::Token;

/// How to serve.
#[derive(Clone, Debug)]
pub struct Options {
    /// The addresses to listen on (loopback unless the user asked).
    pub addrs: Vec<SocketAddr>,
    /// Also listen on `[::1]` at the first address's port (ignored when the
    /// machine has no IPv6).
    pub also_v6_loopback: bool,
    /// Refuse every action that changes something; the page hides them.
    pub read_only: bool,
}

/// A running server's address, for the caller to print or open.
#[derive(Clone, Debug)]
pub struct Ready {
    /// The page's URL, token included.
    pub url: String,
    /// Every address listened on.
    pub addrs: Vec<SocketAddr>,
}

/// What every handler shares.
pub struct Shared {
    /// The workspace root (operations run there).
    pub root: PathBuf,
    /// The configuration of every operation.
    pub config: Config,
    /// The run's token.
    pub token: Token,
    /// Actions are refused.
    pub read_only: bool,
    /// Host header values accepted (`127.0.0.1:PORT`, `localhost:PORT`, …).
    pub hosts: Vec<String>,
    /// Catalog change notifications.
    pub live: live::Live,
}

impl Shared {
    /// A fresh operations context at the workspace root.
    pub fn context(&self) -> Context {
        Context::new(self.root.clone(), self.config.clone())
    }
}

/// Serves the workspace found from `cwd` until the process is interrupted.
/// `ready` is called once every listener is bound.
pub fn serve(
    cwd: PathBuf,
    config: Config,
    opts: Options,
    ready: impl FnOnce(&Ready),
) -> Result<()> {
    let ws = Context::new(cwd, config.clone()).workspace()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_stack_size(ckpt_lib::ops::parts::WALK_STACK)
        .enable_all()
        .build()
        .map_err(|e| Error::io("start the UI server's runtime", ".", e))?;
    rt.block_on(async move {
        let mut listeners = Vec::new();
        for a in &opts.addrs {
            let l = tokio::net::TcpListener::bind(a).await.map_err(|e| {
                Error::io(
                    "listen (is the port in use? pick another with --port)",
                    a.to_string(),
                    e,
                )
            })?;
            listeners.push(l);
        }
        if opts.also_v6_loopback {
            let port = listeners[0]
                .local_addr()
                .map_err(|e| Error::io("listen", "socket", e))?
                .port();
            let v6 = SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, port));
            if let Ok(l) = tokio::net::TcpListener::bind(v6).await {
                listeners.push(l);
            }
        }
        let addrs: Vec<SocketAddr> = listeners
            .iter()
            .map(|l| l.local_addr())
            .collect::<std::io::Result<_>>()
            .map_err(|e| Error::io("listen", "socket", e))?;
        let token = Token::random().map_err(|e| Error::io("make the token", "getrandom", e))?;
        let shared = Arc::new(Shared {
            hosts: guard::allowed_hosts(&addrs),
            root: ws.root.clone(),
            config,
            read_only: opts.read_only,
            live: live::Live::start(ws.store_path.clone()),
            token,
        });
        let first = addrs[0];
        let host = match first {
            SocketAddr::V4(a) => a.ip().to_string(),
            SocketAddr::V6(a) => format!("[{}]", a.ip()),
        };
        ready(&Ready {
            url: format!(
                "http://{host}:{}/?token={}",
                first.port(),
                shared.token.as_str()
            ),
            addrs: addrs.clone(),
        });
        let app = api::router(shared);
        let mut tasks = Vec::new();
        for l in listeners {
            let app = app.clone();
            tasks.push(tokio::spawn(async move { axum::serve(l, app).await }));
        }
        tokio::select! {
            _ = tokio::signal::ctrl_c() => Ok(()),
            r = serve_all(tasks) => r,
        }
    })
}

/// Waits on the listener tasks in turn; they serve until an error, which
/// ends the server.
async fn serve_all(tasks: Vec<tokio::task::JoinHandle<std::io::Result<()>>>) -> Result<()> {
    for t in tasks {
        match t.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(Error::io("serve", "socket", e)),
            Err(e) => {
                return Err(Error::io(
                    "serve",
                    "socket",
                    std::io::Error::other(e.to_string()),
                ))
            }
        }
    }
    Ok(())
}
