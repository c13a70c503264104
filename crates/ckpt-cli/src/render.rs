//! Turning reports into text for people; `--json` prints the report itself
//! ([`print_report`]; its encoding and schema are `ckpt_lib::ops::json`).
//!
//! For people: paths quoted like git's when they are not printable UTF-8;
//! times in local time plus a relative age ("3 min ago"). Colour only when
//! stdout is a terminal, `NO_COLOR` is unset or empty and `TERM` is not
//! `dumb` (`CLICOLOR_FORCE=1` forces it), decided once per process.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use ckpt_lib::ops::parts::{
    Annotation, Change, Checkpoint, Node, Skipped, StateChange, StateChangeKind, Unreadable,
    UNREADABLE,
};
use ckpt_lib::{Error, Result};

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

/// Warns on stderr, prefixed with `who`, about each entry a scan was not
/// allowed to read and what a checkpoint holds of it, then says how to stop
/// the warning (see [`UNREADABLE`]).
pub fn warn_unreadable(who: &str, list: &[Unreadable]) {
    for u in list {
        let p = quote(&u.path);
        match (u.dir, u.kept) {
            (true, _) => eprintln!(
                "{who}warning: cannot list directory {p} (permission denied): it is left out \
                 of checkpoints, with everything in it"
            ),
            (false, true) => eprintln!(
                "{who}warning: cannot read {p} (permission denied): its content is kept as \
                 last read (size and mtime unchanged), with its current mode"
            ),
            (false, false) => eprintln!(
                "{who}warning: cannot read {p} (permission denied): it is left out of \
                 checkpoints"
            ),
        }
    }
    if !list.is_empty() {
        eprintln!(
            "{who}  make it readable (chmod u+r, or u+rx for a directory), or add it to \
             .ckptignore to stop checking it"
        );
    }
}

/// The skipped entries worth a line of their own: those not already
/// warned about as unreadable ([`warn_unreadable`]).
pub fn skipped_lines(skipped: &[Skipped]) -> impl Iterator<Item = String> + '_ {
    skipped
        .iter()
        .filter(|s| s.kind != UNREADABLE)
        .map(|s| format!("skipped {} ({})", quote(&s.path), s.kind))
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

/// Local time, to the second, with the UTC offset: `2026-11-21 17:03:09 +0100`.
pub fn local_time(ns: i64) -> String {
    let secs = ns.div_euclid(1_000_000_000) as libc::time_t;
    // SAFETY: localtime_r writes only into `tm`, which we own; a zeroed tm
    // is a valid initial value.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    let ok = unsafe { !libc::localtime_r(&secs, &mut tm).is_null() };
    if !ok {
        return ckpt_lib::ops::json::time(ns);
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
    format!("{} ({})", local_time(ns), age(ns, ckpt_fs::fs::now_ns()))
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

/// `n` and the noun, singular or plural: "1 file", "2 files".
pub fn count(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Milliseconds with one decimal.
pub fn ms(d: std::time::Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
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
    if let (ckpt_lib::ops::parts::ChangeKind::ModeChanged, Some(o), Some(n)) =
        (c.kind, &c.old, &c.new)
    {
        let _ = write!(line, " ({:o} → {:o})", o.mode, n.mode);
    }
    line
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

/// A checkpoint's annotations on one line: ` k=v …; note: "…"` (the note
/// quoted and cut like a value preview).
pub fn annotation(a: &Annotation) -> String {
    let mut out = String::new();
    for (k, v) in &a.tags {
        let _ = write!(out, " {k}={v}");
    }
    if let Some(n) = &a.note {
        let sep = if a.tags.is_empty() { "" } else { ";" };
        let _ = write!(out, "{sep} note: {}", preview(n.as_bytes(), 60));
    }
    out
}

/// One `ckpt log` line: save-time tags in `[…]`, annotations (added
/// later) in `(annotated: …)`.
pub fn checkpoint_line(cp: &Checkpoint, head: Option<u64>, a: Option<&Annotation>) -> String {
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
    if let Some(a) = a {
        let _ = write!(line, "  (annotated:{})", annotation(a));
    }
    line
}

/// Prints a report of the operations layer as its JSON form (`--json`).
pub fn print_report<T: serde::Serialize>(report: &T) {
    println!(
        "{}",
        serde_json::to_string_pretty(report).expect("reports serialise")
    );
}

/// Parses `KEY=VALUE` tag arguments (`save --tag`, `annotate`).
pub fn parse_tags(tags: &[String]) -> Result<BTreeMap<String, String>> {
    tags.iter()
        .map(|t| match t.split_once('=') {
            Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
            _ => Err(Error::Usage(format!(
                "tag {t:?}: expected KEY=VALUE (nothing was changed)"
            ))),
        })
        .collect()
}

/// The summary line of a remote operation: objects, bytes sent and
/// received, requests, time.
pub fn transfer(t: &ckpt_remote::report::Transfer) -> String {
    format!(
        "{} ({} raw) in {}, sent {}, received {}, {}, {}",
        count(t.objects, "object", "objects"),
        bytes(t.raw_bytes),
        count(t.packs, "pack", "packs"),
        bytes(t.bytes_sent),
        bytes(t.bytes_received),
        count(t.requests, "request", "requests"),
        ms(t.elapsed)
    ) + &if t.failed_requests > 0 {
        format!(" ({} failed and retried)", t.failed_requests)
    } else {
        String::new()
    }
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
