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
//! - The fleet: a fork made on the page into a directory with a hostile
//!   name is listed in Forks (rendered as text); edited and saved there
//!   with the CLI, its divergence shows after Refresh; Compare shows the
//!   fork's change in the diff view; Adopt's dry run changes nothing, its
//!   confirm makes the workspace the fork's files and Undo puts them back;
//!   Remove deletes the directory. Over raw HTTP, `--read-only` refuses
//!   adopt and remove, and a fork directory with path tricks (`..`, a
//!   relative path, NUL, the workspace itself, a directory that is no
//!   fork) is refused with the workspace, the fork and the log unchanged.
//!
//! - Agent sessions: a session recorded by `ckpt hook` from the Claude
//!   Code fixture payloads (`tests/fixtures/hooks/`), interleaved with a
//!   second session, is grouped on the page under its harness and short
//!   session id, each turn under its prompt's text; the session filter
//!   keeps only its checkpoints; "Undo this step" on the latest tool call
//!   (the Write that created a file) shows the dry run, and its confirm
//!   takes the file away leaving the rest byte for byte, and Undo brings
//!   it back. A `--read-only` page offers no "Undo this step".
//!
//! Python is `$CKPT_UI_PYTHON`, else `target/ui-venv/bin/python` (what
//! `.ci/run` creates), else `python3`; it must `import playwright`. The
//! browser is `$CKPT_CHROMIUM`, else `/usr/bin/chromium`. Without them the
//! browser tests report a skip (`common::skip`), which fails under
//! `CI=true`.

mod common;

use std::ffi::OsStr;
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
        Server::start_in(ws, extra, None)
    }

    /// With `xdg`: the data home the server shares with [`fleet`]
    /// commands, so it finds their forks.
    fn start_in(ws: &Ws, extra: &[&str], xdg: Option<&Path>) -> Server {
        let mut args = vec!["ui", "--port", "0"];
        args.extend_from_slice(extra);
        let args: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
        let mut cmd = command(&ws.root, &args);
        if let Some(x) = xdg {
            cmd.env("XDG_DATA_HOME", x);
        }
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn ckpt ui");
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

    /// A GET of `path_and_query` with the token.
    fn get(&self, path_and_query: &str) -> (u16, String) {
        let sep = if path_and_query.contains('?') {
            '&'
        } else {
            '?'
        };
        self.raw(&format!(
            "GET {path_and_query}{sep}token={} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            self.token,
            self.host()
        ))
    }

    /// A POST done right (token, Host, Origin) of a JSON body.
    fn action(&self, path: &str, body: &serde_json::Value) -> (u16, String) {
        let (host, origin) = (self.host(), self.origin());
        self.post(
            path,
            &host,
            Some(&origin),
            Some(&self.token),
            &body.to_string(),
        )
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

/// `ckpt ARGS` in `cwd` with the data home `xdg` (forks are found through
/// its list of stores).
fn fleet(xdg: &Path, cwd: &Path, args: &[&str]) -> Run {
    let a: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
    let mut c = command(cwd, &a);
    c.env("XDG_DATA_HOME", xdg);
    run_command(c, format!("ckpt {}", args.join(" ")))
}

/// A fork `name` of `ws`'s v2 next to it, with `a.txt` changed and saved
/// there; returns the data home and the fork's directory.
fn forked(ws: &Ws, name: &str) -> (PathBuf, PathBuf) {
    let xdg = ws.tmp.path().join("xdg");
    let dir = ws.tmp.path().join(name);
    fleet(&xdg, &ws.root, &["fork", "v2", dir.to_str().unwrap()]).ok();
    write(&dir, "a.txt", b"fork edit\n");
    fleet(&xdg, &dir, &["save", "-m", "in the fork"]).ok();
    (xdg, dir)
}

#[test]
fn fork_actions_refused_read_only_and_for_bad_dirs() {
    use serde_json::json;
    let ws = workspace_with_history();
    let (xdg, fork) = forked(&ws, "f1");
    let other = ws.tmp.path().join("other");
    std::fs::create_dir(&other).unwrap();
    fleet(&xdg, ws.tmp.path(), &["init", other.to_str().unwrap()]).ok();
    let plain = ws.tmp.path().join("plain");
    std::fs::create_dir(&plain).unwrap();
    let before_log = ws.log_ids();
    let (before, fork_before) = (snapshot(&ws.root), snapshot(&fork));
    let unchanged = |what: &str| {
        assert_eq!(ws.log_ids(), before_log, "{what}: the log changed");
        assert_same(&before, &snapshot(&ws.root), what);
        assert_same(&fork_before, &snapshot(&fork), what);
        assert!(other.is_dir() && plain.is_dir(), "{what}");
    };
    let f = fork.to_str().unwrap();
    {
        let srv = Server::start_in(&ws, &["--read-only"], Some(&xdg));
        for (path, body) in [
            ("/api/adopt", json!({"dir": f, "dry_run": false})),
            ("/api/adopt", json!({"dir": "f1", "dry_run": true})),
            ("/api/fork/remove", json!({"dir": f})),
        ] {
            let (s, resp) = srv.action(path, &body);
            assert_eq!(s, 403, "{path} {body}: {resp}");
            assert!(resp.contains("--read-only"), "{resp}");
            unchanged(path);
        }
        // Reading the fleet still works.
        let (s, resp) = srv.get("/api/forks");
        assert_eq!(s, 200, "{resp}");
        assert!(resp.contains(&format!(r#""dir":"{f}""#)), "{resp}");
    }
    let srv = Server::start_in(&ws, &[], Some(&xdg));
    let root = ws.root.to_str().unwrap().to_string();
    let tricks = [
        "../f1".to_string(),
        "f1/".to_string(),
        "./f1".to_string(),
        "ws/../f1".to_string(),
        format!("{root}/../f1"),
        format!("{f}/."),
        "f1\0".to_string(),
        String::new(),
    ];
    for dir in &tricks {
        for (path, body) in [
            ("/api/adopt", json!({"dir": dir, "dry_run": false})),
            ("/api/fork/remove", json!({"dir": dir})),
        ] {
            let (s, resp) = srv.action(path, &body);
            assert_eq!(s, 400, "{path} {body}: {resp}");
            assert!(resp.contains("nothing was done"), "{path} {body}: {resp}");
            unchanged(path);
        }
        // (An empty `fork` is no fork: the ordinary diff.)
        if !dir.is_empty() {
            let q = format!("/api/diff?fork={}", url_escape(dir));
            let (s, resp) = srv.get(&q);
            assert_eq!(s, 400, "{q}: {resp}");
        }
    }
    // Well-formed, but not a fork: the workspace itself (by name and by
    // path), a directory that is no workspace, another workspace (remove
    // only removes forks of this one), a checkpoint id that would change
    // the path.
    let refused = [
        ("/api/adopt", json!({"dir": "ws", "dry_run": false})),
        ("/api/fork/remove", json!({"dir": root})),
        ("/api/adopt", json!({"dir": "plain", "dry_run": false})),
        ("/api/fork/remove", json!({"dir": "plain"})),
        ("/api/fork/remove", json!({"dir": "other"})),
        (
            "/api/adopt",
            json!({"dir": "f1", "id": "../ws", "dry_run": false}),
        ),
        ("/api/fork/remove", json!({"dir": "no-such-fork"})),
    ];
    for (path, body) in refused {
        let (s, resp) = srv.action(path, &body);
        assert!((400..500).contains(&s), "{path} {body}: {s} {resp}");
        assert!(resp.contains("\"error\""), "{path} {body}: {resp}");
        unchanged(path);
    }
    // The same done right: a dry run changes nothing, the comparison
    // shows the fork's change.
    let (s, resp) = srv.action("/api/adopt", &json!({"dir": f, "dry_run": true}));
    assert_eq!(s, 200, "{resp}");
    assert!(resp.contains(r#""path":"a.txt""#), "{resp}");
    unchanged("adopt dry run");
    let (s, resp) = srv.get(&format!("/api/diff?fork={}&content=true", url_escape(f)));
    assert_eq!(s, 200, "{resp}");
    assert!(resp.contains("+fork edit"), "{resp}");
    let (s, resp) = srv.action("/api/fork/remove", &json!({"dir": "f1"}));
    assert_eq!(s, 200, "{resp}");
    assert!(!fork.exists(), "{resp}");
}

/// Percent-encodes a query value.
fn url_escape(v: &str) -> String {
    v.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[test]
fn browser_fleet_fork_compare_adopt_undo_remove() {
    let ws = workspace_with_history();
    let xdg = ws.tmp.path().join("xdg");
    std::fs::create_dir(&xdg).unwrap();
    let saved = std::fs::read(ws.root.join("a.txt")).unwrap();
    let srv = Server::start_in(&ws, &[], Some(&xdg));
    if browser_in("fleet", &ws, &srv, Some(&xdg)).is_none() {
        return;
    }
    // The script adopted the fork, checked the files, pressed Undo and
    // removed the fork.
    assert_eq!(std::fs::read(ws.root.join("a.txt")).unwrap(), saved);
    let forks = fleet(&xdg, &ws.root, &["forks", "--json"]).ok().json();
    assert_eq!(forks["forks"], serde_json::json!([]), "{forks}");
    let left: Vec<_> = std::fs::read_dir(ws.tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().starts_with("fork"))
        .collect();
    assert!(left.is_empty(), "fork directories left: {left:?}");
}

/// Feeds the hook payload `tests/fixtures/hooks/NAME` (its `@WORKSPACE@`
/// made the workspace root, then changed by `edit`) to `ckpt hook`, run
/// from outside the workspace as a harness runs it. Hooks start no watcher
/// here (`CKPT_HOOK_WATCH=off`): none would outlive the test.
fn hook(ws: &Ws, name: &str, edit: impl FnOnce(&mut serde_json::Value)) {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/hooks")
        .join(name);
    let text = std::fs::read_to_string(&p)
        .unwrap()
        .replace("@WORKSPACE@", ws.root.to_str().unwrap());
    let mut payload: serde_json::Value = serde_json::from_str(&text).unwrap();
    edit(&mut payload);
    let mut child = command(ws.tmp.path(), &[OsStr::new("hook")])
        .env("CKPT_HOOK_WATCH", "off")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(payload.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "ckpt hook {name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A workspace with two agent sessions recorded by `ckpt hook`: session
/// A's first turn (a prompt, then a Bash call that replaced `old/` with
/// `gen/`), session B's prompt, then A's second turn (a prompt, then a
/// Write that created `src/greeting.js`).
fn workspace_with_sessions() -> Ws {
    let ws = Ws::new();
    ws.init();
    write(&ws.root, "README.md", b"# demo\n");
    write(&ws.root, "old/a.txt", b"old a\n");
    write(&ws.root, "old/b.txt", b"old b\n");
    hook(&ws, "1_user_prompt_submit.json", |_| {});
    hook(&ws, "2_pre_tool_use_bash.json", |_| {});
    std::fs::remove_dir_all(ws.root.join("old")).unwrap();
    write(&ws.root, "gen/out1.txt", b"1\n");
    write(&ws.root, "gen/out2.txt", b"2\n");
    hook(&ws, "3_post_tool_use_bash.json", |_| {});
    write(&ws.root, "notes.txt", b"session b\n");
    hook(&ws, "1_user_prompt_submit.json", |p| {
        p["session_id"] = "other-session-b".into();
        p["prompt"] = "Write some notes".into();
    });
    hook(&ws, "1_user_prompt_submit.json", |p| {
        p["prompt"] = "Now add the greeting module".into();
    });
    write(
        &ws.root,
        "src/greeting.js",
        b"export const hi = () => 'hello';\n",
    );
    hook(&ws, "4_post_tool_use_write.json", |_| {});
    hook(&ws, "5_stop.json", |_| {});
    ws
}

/// Every path below `root` and what it is (file bytes, link target or a
/// directory), without times and modes.
fn contents(root: &Path) -> std::collections::BTreeMap<Vec<u8>, What> {
    snapshot(root)
        .into_iter()
        .map(|(k, s)| (k, s.what))
        .collect()
}

#[test]
fn browser_agent_sessions_grouped_filtered_and_undo_this_step() {
    let ws = workspace_with_sessions();
    let log = ws.run(&["log", "--json"]).ok().json();
    let messages: Vec<_> = log["checkpoints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["message"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        messages,
        [
            "after Write: src/greeting.js",
            "prompt: Now add the greeting module",
            "prompt: Write some notes",
            "after Bash: rm -rf old && npm run gen",
            "prompt: Replace the greeting module and clean up old files",
        ],
        "{log}"
    );
    let before = contents(&ws.root);
    let srv = Server::start(&ws, &[]);
    if browser("agent", &ws, &srv).is_none() {
        return;
    }
    // The script undid the Write (checked there: the file gone, the rest
    // unchanged) and pressed Undo: the workspace is as it was, byte for
    // byte.
    assert_eq!(contents(&ws.root), before);
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
    browser_in(mode, ws, srv, None)
}

/// [`browser`], the script's `ckpt` commands using the data home `xdg`.
fn browser_in(mode: &str, ws: &Ws, srv: &Server, xdg: Option<&Path>) -> Option<String> {
    let (py, chromium) = match python() {
        Ok(p) => p,
        Err(why) => {
            skip(&why);
            return None;
        }
    };
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ui_browser.py");
    let mut cmd = Command::new(py);
    cmd.arg(script)
        .args([mode, &srv.url])
        .arg(&ws.root)
        .arg(bin())
        .env("CKPT_CHROMIUM", chromium)
        .stdin(Stdio::null());
    if let Some(x) = xdg {
        cmd.env("XDG_DATA_HOME", x);
    }
    let out = cmd.output().unwrap();
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
    let (xdg, fork) = forked(&ws, "f1");
    let fork_before = snapshot(&fork);
    let srv = Server::start_in(&ws, &["--read-only"], Some(&xdg));
    let before = ws.log_ids();
    if browser_in("readonly", &ws, &srv, Some(&xdg)).is_none() {
        return;
    }
    assert_eq!(ws.log_ids(), before);
    assert_same(&fork_before, &snapshot(&fork), "the fork");
}
