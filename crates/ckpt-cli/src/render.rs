//! Turning model values into text for people and JSON for programs.
//!
//! JSON output is versioned: every top-level object carries `"schema": 1`.
//! Paths are bytes; in JSON they appear as `"path"` (UTF-8, lossy) plus
//! `"path_hex"` when the bytes are not valid UTF-8, so no name is lost.
//! Agent-state keys and values follow the same rule (`key`/`key_hex`,
//! `value`/`value_hex`).
//!
//! For people: times in local time plus a relative age ("3 min ago"); JSON
//! keeps UTC RFC 3339 (`time`) and nanoseconds (`time_ns`). Colour only when
//! stdout is a terminal, `NO_COLOR` is unset or empty and `TERM` is not
//! `dumb` (`CLICOLOR_FORCE=1` forces it), decided once per process.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use ckpt_lib::engine::diff::Change;
use ckpt_lib::store::catalog::{Checkpoint, Skipped};
use ckpt_lib::store::state::{ChangeKind as StateChangeKind, StateChange, Versioned};
use ckpt_lib::store::tree::{Entry, Node};
use ckpt_lib::{Error, Result};
use serde_json::{json, Value};

/// JSON schema version of all `--json` output.
pub const SCHEMA: u32 = 1;

/// Quotes a path for humans: as-is when it is printable UTF-8, else in
/// double quotes with C-style escapes (like git).
pub fn quote(path: &[u8]) -> String {
    match std::str::from_utf8(path) {
        Ok(s) if !s.chars().any(|c| c.is_control() || c == '"') => s.to_string(),
        _ => {
            let mut out = String::from("\"");
            for chunk in path.utf8_chunks() {
                for c in chunk.valid().chars() {
                    match c {
                        '\n' => out.push_str("\\n"),
                        '\t' => out.push_str("\\t"),
                        '"' => out.push_str("\\\""),
                        '\\' => out.push_str("\\\\"),
                        c if c.is_control() => {
                            let _ = write!(out, "\\x{:02x}", c as u32);
                        }
                        c => out.push(c),
                    }
                }
                for b in chunk.invalid() {
                    let _ = write!(out, "\\x{b:02x}");
                }
            }
            out.push('"');
            out
        }
    }
}

/// Adds `path` (and `path_hex` when needed) to a JSON object.
pub fn path_fields(obj: &mut serde_json::Map<String, Value>, key: &str, path: &[u8]) {
    obj.insert(
        key.into(),
        Value::String(String::from_utf8_lossy(path).into_owned()),
    );
    if std::str::from_utf8(path).is_err() {
        let hex: String = path.iter().map(|b| format!("{b:02x}")).collect();
        obj.insert(format!("{key}_hex"), Value::String(hex));
    }
}

/// Human-readable byte count.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// RFC 3339 time (UTC, seconds).
pub fn time(ns: i64) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_nanos(ns.max(0) as u64);
    humantime::format_rfc3339_seconds(t).to_string()
}

/// Local time, to the second, with the UTC offset: `2026-11-21 17:03:09 +0100`.
pub fn local_time(ns: i64) -> String {
    let secs = ns.div_euclid(1_000_000_000) as libc::time_t;
    // SAFETY: localtime_r writes only into `tm`, which we own; a zeroed tm
    // is a valid initial value.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    let ok = unsafe { !libc::localtime_r(&secs, &mut tm).is_null() };
    if !ok {
        return time(ns);
    }
    let off = tm.tm_gmtoff / 60;
    format!(
        "{:04}-{:02}-{:02} {:02}:{:02}:{:02} {}{:02}{:02}",
        tm.tm_year + 1900,
        tm.tm_mon + 1,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec,
        if off < 0 { '-' } else { '+' },
        off.abs() / 60,
        off.abs() % 60
    )
}

/// How long before `now_ns` a time was, for people: `just now`,
/// `42 s ago`, `5 min ago`, `3 h ago`, `2 days ago`, `in the future`.
pub fn age(ns: i64, now_ns: i64) -> String {
    let d = now_ns.saturating_sub(ns);
    if d < -5_000_000_000 {
        return "in the future".into();
    }
    let s = d.max(0) / 1_000_000_000;
    match s {
        0..=4 => "just now".into(),
        5..=59 => format!("{s} s ago"),
        60..=3599 => format!("{} min ago", s / 60),
        3600..=86_399 => format!("{} h ago", s / 3600),
        86_400..=172_799 => "1 day ago".into(),
        _ => format!("{} days ago", s / 86_400),
    }
}

/// Local time and age: `2026-11-21 17:03:09 +0100 (5 min ago)`.
pub fn when(ns: i64) -> String {
    format!("{} ({})", local_time(ns), age(ns, ckpt_copy::fs::now_ns()))
}

/// Whether to colour stdout (see the module doc).
pub fn colour() -> bool {
    use std::io::IsTerminal;
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| {
        let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
        if var("NO_COLOR").is_some() {
            return false;
        }
        if var("CLICOLOR_FORCE").is_some_and(|v| v != "0") {
            return true;
        }
        std::io::stdout().is_terminal() && var("TERM").is_none_or(|t| t != "dumb")
    })
}

/// Wraps `text` in an SGR colour code when colour is on.
pub fn paint(code: &str, text: &str) -> String {
    if colour() {
        format!("\x1b[{code}m{text}\x1b[0m")
    } else {
        text.to_string()
    }
}

/// Colours a unified diff line by line (+ green, - red, @@ cyan).
pub fn paint_diff(t: &str) -> String {
    if !colour() {
        return t.to_string();
    }
    let mut out = String::with_capacity(t.len() + 64);
    for line in t.split_inclusive('\n') {
        let (body, nl) = match line.strip_suffix('\n') {
            Some(b) => (b, "\n"),
            None => (line, ""),
        };
        let code = if body.starts_with("+++") || body.starts_with("---") {
            "1"
        } else if body.starts_with('+') {
            "32"
        } else if body.starts_with('-') {
            "31"
        } else if body.starts_with("@@") {
            "36"
        } else {
            ""
        };
        if code.is_empty() {
            out.push_str(line);
        } else {
            out.push_str(&paint(code, body));
            out.push_str(nl);
        }
    }
    out
}

/// Milliseconds with one decimal.
pub fn ms(d: std::time::Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

fn entry_json(e: &Entry) -> Value {
    let mut o = json!({
        "kind": e.node.kind().as_str(),
        "mode": format!("{:o}", e.mode),
        "mtime_ns": e.mtime_ns,
    });
    let m = o.as_object_mut().unwrap();
    match &e.node {
        Node::File { size, hash } => {
            m.insert("size".into(), json!(size));
            m.insert("hash".into(), json!(hash.to_hex()));
        }
        Node::Dir { tree } => {
            m.insert("tree".into(), json!(tree.to_hex()));
        }
        Node::Symlink { target } => path_fields(m, "target", target),
    }
    o
}

/// One change as JSON.
pub fn change_json(c: &Change) -> Value {
    let mut m = serde_json::Map::new();
    path_fields(&mut m, "path", &c.path);
    m.insert("status".into(), serde_json::to_value(c.kind).unwrap());
    m.insert("old".into(), c.old.as_ref().map_or(Value::Null, entry_json));
    m.insert("new".into(), c.new.as_ref().map_or(Value::Null, entry_json));
    Value::Object(m)
}

/// One change as a name-status line.
pub fn change_line(c: &Change) -> String {
    let is_dir = c
        .new
        .as_ref()
        .or(c.old.as_ref())
        .is_some_and(|e| matches!(e.node, Node::Dir { .. }));
    let letter = c.kind.letter().to_string();
    let code = match letter.as_str() {
        "A" => "32",
        "D" => "31",
        "M" => "33",
        _ => "36",
    };
    let mut line = format!("{} {}", paint(code, &letter), quote(&c.path));
    if is_dir {
        line.push('/');
    }
    if let (ckpt_lib::engine::diff::ChangeKind::ModeChanged, Some(o), Some(n)) =
        (c.kind, &c.old, &c.new)
    {
        let _ = write!(line, " ({:o} → {:o})", o.mode, n.mode);
    }
    line
}

fn skipped_json(s: &Skipped) -> Value {
    let mut m = serde_json::Map::new();
    path_fields(&mut m, "path", &s.path);
    m.insert("kind".into(), json!(s.kind));
    Value::Object(m)
}

/// A checkpoint record as JSON.
pub fn checkpoint_json(cp: &Checkpoint, head: Option<u64>) -> Value {
    json!({
        "id": cp.id(),
        "seq": cp.seq,
        "hash": cp.hash.to_hex(),
        "parent": cp.parent.map(|p| format!("v{p}")),
        "time": time(cp.time_ns),
        "time_ns": cp.time_ns,
        "message": cp.message,
        "tags": cp.tags,
        "root": cp.root.to_hex(),
        "stats": cp.stats,
        "skipped": cp.skipped.iter().map(skipped_json).collect::<Vec<_>>(),
        "duration_ms": cp.duration_us as f64 / 1e3,
        "head": head == Some(cp.seq),
        "state_version": cp.state_version,
    })
}

/// A stored value (or key) as JSON fields: `"{key}"` (UTF-8, lossy) plus
/// `"{key}_hex"` when the bytes are not UTF-8 — the same rule as paths.
#[allow(dead_code)]
pub fn bytes_fields(obj: &mut serde_json::Map<String, Value>, key: &str, bytes: &[u8]) {
    path_fields(obj, key, bytes)
}

/// `{version, value, value_hex?}`.
#[allow(dead_code)]
pub fn versioned_json(v: &Versioned) -> Value {
    let mut m = serde_json::Map::new();
    m.insert("version".into(), json!(v.version));
    bytes_fields(&mut m, "value", &v.value);
    Value::Object(m)
}

#[allow(dead_code)]
fn state_status(k: StateChangeKind) -> &'static str {
    match k {
        StateChangeKind::Added => "added",
        StateChangeKind::Changed => "changed",
        StateChangeKind::Removed => "removed",
    }
}

/// One agent-state change as JSON: `{key, key_hex?, status, old, new}`.
#[allow(dead_code)]
pub fn state_change_json(c: &StateChange) -> Value {
    let mut m = serde_json::Map::new();
    bytes_fields(&mut m, "key", &c.key);
    m.insert("status".into(), json!(state_status(c.kind)));
    m.insert(
        "old".into(),
        c.old.as_ref().map_or(Value::Null, versioned_json),
    );
    m.insert(
        "new".into(),
        c.new.as_ref().map_or(Value::Null, versioned_json),
    );
    Value::Object(m)
}

/// One agent-state change as a name-status line: `A|M|D key`.
pub fn state_change_line(c: &StateChange) -> String {
    let letter = match c.kind {
        StateChangeKind::Added => 'A',
        StateChangeKind::Changed => 'M',
        StateChangeKind::Removed => 'D',
    };
    format!("{letter} {}", quote(&c.key))
}

/// A value for humans, on one line: quoted like a path, cut after `max`
/// characters.
pub fn preview(value: &[u8], max: usize) -> String {
    let q = quote(value);
    if q.chars().count() <= max {
        q
    } else {
        let mut s: String = q.chars().take(max).collect();
        s.push('…');
        s
    }
}

/// One `ckpt log` line.
pub fn checkpoint_line(cp: &Checkpoint, head: Option<u64>) -> String {
    let s = &cp.stats;
    let mut line = format!(
        "{}{} {}  +{} ~{} -{}  {:>10} new  {}",
        if head == Some(cp.seq) { "* " } else { "  " },
        paint("33", &format!("{:<5}", cp.id())),
        when(cp.time_ns),
        s.files_added,
        s.files_modified,
        s.files_deleted,
        bytes(s.new_bytes),
        if cp.message.is_empty() {
            "(no message)"
        } else {
            &cp.message
        },
    );
    if !cp.tags.is_empty() {
        let tags: Vec<String> = cp.tags.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let _ = write!(line, "  [{}]", tags.join(" "));
    }
    line
}

/// Prints a JSON value, pretty, on one stdout write.
pub fn print_json(v: &Value) {
    println!("{}", serde_json::to_string_pretty(v).expect("json"));
}

/// Prints a report of the operations layer as its JSON form (`--json`).
pub fn print_report<T: serde::Serialize>(report: &T) {
    println!(
        "{}",
        serde_json::to_string_pretty(report).expect("reports serialise")
    );
}

/// Parses `--tag KEY=VALUE` arguments.
pub fn parse_tags(tags: &[String]) -> Result<BTreeMap<String, String>> {
    tags.iter()
        .map(|t| match t.split_once('=') {
            Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
            _ => Err(Error::Usage(format!("--tag {t:?}: expected KEY=VALUE"))),
        })
        .collect()
}

/// Lowercase hex of bytes.
pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting() {
        assert_eq!(quote(b"a/b.txt"), "a/b.txt");
        assert_eq!(quote(b"a\nb"), "\"a\\nb\"");
        assert_eq!(quote(b"x\xffy"), "\"x\\xffy\"");
        assert_eq!(bytes(1536), "1.5 KiB");
    }

    #[test]
    fn ages() {
        let s = 1_000_000_000i64;
        let now = 1_000_000 * s;
        assert_eq!(age(now, now), "just now");
        assert_eq!(age(now - 42 * s, now), "42 s ago");
        assert_eq!(age(now - 5 * 60 * s, now), "5 min ago");
        assert_eq!(age(now - 3 * 3600 * s, now), "3 h ago");
        assert_eq!(age(now - 30 * 3600 * s, now), "1 day ago");
        assert_eq!(age(now - 9 * 86_400 * s, now), "9 days ago");
        assert_eq!(age(now + 60 * s, now), "in the future");
        // Local time has a date, a time and an offset.
        let t = local_time(1_700_000_000 * s);
        assert_eq!(t.len(), "2023-11-14 22:13:20 +0000".len(), "{t}");
    }
}
