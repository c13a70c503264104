//! `ckpt ui` end to end: the real binary serving a real workspace.
//!
//! - The door, over raw HTTP (no browser needed): a POST without the
//!   token, with a foreign `Origin`, with `Host: evil.example`, or to a
//!   `--read-only` server is refused and changes nothing (the checkpoint
//!   list and the files are compared before and after), while the same
//!   request done right succeeds; every answer carries the CSP.
//! - The page, in headless Chromium driven by Playwright
//!   (`tests/fixtures/ui_browser.py`, which asserts each step): the
//!   timeline shows the checkpoints; a `ckpt save` from the CLI appears
//!   within 1 s without a reload; a note and a tag added on the page are
//!   in `ckpt log --json` (and one added by the CLI appears on the page);
//!   clicking a file shows its diff; restoring
//!   one path through the confirm dialog puts it back byte for byte and
//!   Undo reverses it; comparing with the working directory shows a file
//!   created meanwhile without a reload; a 6,000-line diff keeps only a
//!   window of rows in the DOM and reaches its last line by scrolling; a
//!   hostile file name, message and note render as text with no dialog
//!   firing; `--read-only` hides the actions and the server
//!   refuses them. With `CKPT_UI_SCREENSHOTS=DIR` the script saves the
//!   screenshots `docs/UI.md` shows.
//!
//! Python is `$CKPT_UI_PYTHON`, else `target/ui-venv/bin/python` (what
//! `.ci/run` creates), else `python3`; it must `import playwright`. The
//! browser is `$CKPT_CHROMIUM`, else `/usr/bin/chromium`. Without them the
//! browser tests report a skip (`common::skip`), which fails under
//! `CI=true`.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use common::*;

/// A running `ckpt ui`, killed when dropped.
struct Server {
    child: Child,
    url: String,
    port: u16,
    token: String,
}

impl Server {
    fn start(ws: &Ws, extra: &[&str]) -> Server {
        let mut args = vec!["ui", "--port", "0"];
        args.extend_from_slice(extra);
        let mut child = spawn(&ws.root, &args);
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut url = String::new();
        out.read_line(&mut url).unwrap();
        let url = url.trim().to_string();
        assert!(
            url.starts_with("http://127.0.0.1:"),
            "no URL printed: {url:?}"
        );
        let port = url["http://127.0.0.1:".len()..]
            .split('/')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let token = url.split("token=").nth(1).unwrap().to_string();
        assert_eq!(token.len(), 64, "token {token:?}");
        Server {
            child,
            url,
            port,
            token,
        }
    }

    /// One raw HTTP/1.1 request; returns (status, headers+body text).
    fn raw(&self, req: &str) -> (u16, String) {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        s.write_all(req.as_bytes()).unwrap();
        let mut resp = String::new();
        s.read_to_string(&mut resp).unwrap();
        let status = resp
            .split(' ')
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        (status, resp)
    }

    /// A POST of `body` to `path` with the given Host, Origin and token.
    fn post(
        &self,
        path: &str,
        host: &str,
        origin: Option<&str>,
        token: Option<&str>,
        body: &str,
    ) -> (u16, String) {
        let mut req = format!("POST {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n");
        if let Some(o) = origin {
            req += &format!("Origin: {o}\r\n");
        }
        if let Some(t) = token {
            req += &format!("X-Ckpt-Token: {t}\r\n");
        }
        req += &format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        self.raw(&req)
    }

    fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn origin(&self) -> String {
        format!("http://{}", self.host())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn workspace_with_history() -> Ws {
    let ws = Ws::new();
    ws.init();
    write(&ws.root, "a.txt", b"one\ntwo\nthree\n");
    write(&ws.root, "src/lib.rs", b"fn main() {}\n");
    ws.run(&["save", "-m", "first"]).ok();
    write(&ws.root, "a.txt", b"one\nTWO\nthree\nfour\n");
    let tags = [
        "--tag",
        "session=5f0c2a",
        "--tag",
        "event=PostToolUse",
        "--tag",
        "tool=Edit",
    ];
    ws.run(&[&["save", "-m", "second"][..], &tags].concat())
        .ok();
    ws
}

#[test]
fn refuses_requests_without_token_from_foreign_origin_or_host() {
    let ws = workspace_with_history();
    let srv = Server::start(&ws, &[]);
    let before_log = ws.log_ids();
    let before = snapshot(&ws.root);
    let (host, origin, token) = (srv.host(), srv.origin(), srv.token.clone());
    let body = r#"{"id":"v1","paths":["a.txt"],"dry_run":false}"#;
    let bad = [
        (
            "no token",
            srv.post("/api/restore", &host, Some(&origin), None, body),
        ),
        (
            "wrong token",
            srv.post(
                "/api/restore",
                &host,
                Some(&origin),
                Some(&"0".repeat(64)),
                body,
            ),
        ),
        (
            "foreign Origin",
            srv.post(
                "/api/restore",
                &host,
                Some("http://evil.example"),
                Some(&token),
                body,
            ),
        ),
        (
            "no Origin",
            srv.post("/api/restore", &host, None, Some(&token), body),
        ),
        (
            "Host evil.example",
            srv.post(
                "/api/restore",
                "evil.example",
                Some("http://evil.example"),
                Some(&token),
                body,
            ),
        ),
        (
            "Host evil.example with port",
            srv.post(
                "/api/restore",
                &format!("evil.example:{}", srv.port),
                Some(&origin),
                Some(&token),
                body,
            ),
        ),
        (
            "delete without token",
            srv.post("/api/delete", &host, Some(&origin), None, r#"{"id":"v1"}"#),
        ),
    ];
    for (what, (status, resp)) in &bad {
        assert!(
            [403, 421].contains(status),
            "{what}: expected a refusal, got {status}:\n{resp}"
        );
        assert!(resp.contains("refused"), "{what}: {resp}");
    }
    // A GET with a rebinding Host, or without the token, reads nothing.
    let (s, resp) = srv.raw(&format!(
        "GET /api/log?token={token} HTTP/1.1\r\nHost: evil.example:{}\r\nConnection: close\r\n\r\n",
        srv.port
    ));
    assert_eq!(s, 421, "{resp}");
    assert!(!resp.contains("\"checkpoints\""), "{resp}");
    let (s, resp) = srv.raw(&format!(
        "GET /api/log HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    ));
    assert_eq!(s, 403, "{resp}");
    // A form-encoded POST (what a cross-site form can send) is refused.
    let (s, resp) = srv.raw(&format!(
        "POST /api/delete HTTP/1.1\r\nHost: {host}\r\nOrigin: {origin}\r\nX-Ckpt-Token: {token}\r\n\
         Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 5\r\nConnection: close\r\n\r\nid=v1"
    ));
    assert_eq!(s, 415, "{resp}");
    assert_eq!(
        ws.log_ids(),
        before_log,
        "a refused request changed the history"
    );
    assert_same(&before, &snapshot(&ws.root), "files after refused requests");
    // The page itself carries the CSP and no inline script.
    let (s, resp) = srv.raw(&format!(
        "GET /?token={token} HTTP/1.1\r\nHost: localhost:{}\r\nConnection: close\r\n\r\n",
        srv.port
    ));
    assert_eq!(s, 200, "{resp}");
    let lower = resp.to_lowercase();
    assert!(
        lower.contains("content-security-policy: default-src 'none'; script-src 'self'"),
        "{resp}"
    );
    assert!(
        !lower.contains("unsafe-inline\r\n") && lower.contains("x-content-type-options: nosniff")
    );
    // The same request done right goes through: the guard, not a broken
    // route, refused the others.
    let (s, resp) = srv.post(
        "/api/delete",
        &host,
        Some(&origin),
        Some(&token),
        r#"{"id":"v1"}"#,
    );
    assert_eq!(s, 200, "{resp}");
    assert!(resp.contains(r#""deleted":"v1""#), "{resp}");
    assert_eq!(ws.log_ids().len(), before_log.len() - 1);
    // A path parameter that leaves the workspace is refused by the server.
    let (s, resp) = srv.post(
        "/api/restore",
        &host,
        Some(&origin),
        Some(&token),
        r#"{"id":"v2","paths":["../x"],"dry_run":true}"#,
    );
    assert_eq!(s, 400, "{resp}");
    assert!(resp.contains("without `..`"), "{resp}");
}

#[test]
fn read_only_refuses_actions_over_http() {
    let ws = workspace_with_history();
    let srv = Server::start(&ws, &["--read-only"]);
    let before_log = ws.log_ids();
    let (host, origin, token) = (srv.host(), srv.origin(), srv.token.clone());
    for (path, body) in [
        ("/api/delete", r#"{"id":"v1"}"#),
        ("/api/restore", r#"{"id":"v1","paths":[],"dry_run":false}"#),
        ("/api/gc", r#"{"dry_run":false}"#),
        ("/api/fork", r#"{"id":"v1","name":"forked"}"#),
        ("/api/annotate", r#"{"id":"v1","note":"x"}"#),
    ] {
        let (s, resp) = srv.post(path, &host, Some(&origin), Some(&token), body);
        assert_eq!(s, 403, "{path}: {resp}");
        assert!(resp.contains("--read-only"), "{resp}");
    }
    assert_eq!(ws.log_ids(), before_log);
    assert!(!ws.tmp.path().join("forked").exists());
    let log = ws.run(&["log", "--json"]).ok().json();
    assert!(log["checkpoints"]
        .as_array()
        .unwrap()
        .iter()
        .all(|c| c["annotations"].is_null()));
    // Reading still works.
    let (s, resp) = srv.raw(&format!(
        "GET /api/log?token={token} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    ));
    assert_eq!(s, 200, "{resp}");
    assert!(resp.contains(r#""total":2"#), "{resp}");
}

fn python() -> Result<(PathBuf, PathBuf), String> {
    let chromium = std::env::var_os("CKPT_CHROMIUM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"));
    if !chromium.exists() {
        return Err(format!(
            "no Chromium at {} (apt-get install chromium; `.ci/run` installs it)",
            chromium.display()
        ));
    }
    let py = python_with("CKPT_UI_PYTHON", "ui-venv", "playwright.sync_api")?;
    Ok((py, chromium))
}

/// Runs the browser script in `mode` against `srv`; returns its stdout.
fn browser(mode: &str, ws: &Ws, srv: &Server) -> Option<String> {
    let (py, chromium) = match python() {
        Ok(p) => p,
        Err(why) => {
            skip(&why);
            return None;
        }
    };
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ui_browser.py");
    let out = Command::new(py)
        .arg(script)
        .args([mode, &srv.url])
        .arg(&ws.root)
        .arg(bin())
        .env("CKPT_CHROMIUM", chromium)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "browser script ({mode}) failed:\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    println!("{mode}: {stdout}");
    Some(stdout)
}

#[test]
fn browser_timeline_live_diff_restore_undo_and_hostile_names() {
    let ws = workspace_with_history();
    // Hostile names and messages: they must render as text.
    write(&ws.root, "<img src=x onerror=alert(1)>.js", b"alert(1)\n");
    ws.run(&[
        "save",
        "-m",
        "<script>alert(2)</script> msg",
        "--tag",
        "tool=<b>Bash</b>",
    ])
    .ok();
    // An image changed between two checkpoints (before/after view).
    write(&ws.root, "logo.svg", b"<svg xmlns='http://www.w3.org/2000/svg' width='8' height='8'><rect width='8' height='8' fill='red'/></svg>");
    ws.run(&["save", "-m", "logo"]).ok();
    let saved = std::fs::read(ws.root.join("a.txt")).unwrap();
    let srv = Server::start(&ws, &[]);
    if browser("main", &ws, &srv).is_none() {
        return;
    }
    // The script restored a.txt to v1, checked it, pressed Undo: the file
    // is back to what it was before the restore, byte for byte.
    assert_eq!(std::fs::read(ws.root.join("a.txt")).unwrap(), saved);
}

#[test]
fn browser_read_only_hides_actions() {
    let ws = workspace_with_history();
    let srv = Server::start(&ws, &["--read-only"]);
    let before = ws.log_ids();
    if browser("readonly", &ws, &srv).is_none() {
        return;
    }
    assert_eq!(ws.log_ids(), before);
}
