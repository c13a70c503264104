//! The architecture, checked: no import circle between the source files of
//! any crate in this workspace, in `ckpt-lib` every folder uses only
//! the layers below it (see the crate doc and `docs/ARCHITECTURE.md`), and
//! the crates above `ckpt-lib` listed in [`ABOVE`] reach it only through
//! its front door ([`FRONT_DOOR`]) and their documented exceptions.
//!
//! A file "uses" another when a line of code (not a comment or doc
//! comment) names `crate::a::b…` or `super::…` and that path resolves to the
//! other file's module.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// `ckpt-lib`'s layers, lowest first. A file may use its own layer and the
/// ones before it; the crate root files (`lib.rs`, `error.rs`, `config.rs`,
/// `trace.rs`) are below everything.
const LAYERS: &[&str] = &[
    "platform",
    "store",
    "workspace",
    "engine",
    "watch",
    "ops",
    "daemon",
];

/// What of `ckpt_lib` every crate above it may name: the front door
/// (`ckpt_lib::ops`, which alone opens a store) and the crate root's
/// re-exports.
const FRONT_DOOR: &[&str] = &["ops", "Config", "Error", "Result", "Hash"];

/// The crates above `ckpt-lib` held to [`FRONT_DOOR`], each with its
/// exceptions: a `ckpt_lib` path (and everything below it) it may name
/// besides, and why. To hold another crate to it, add a line.
const ABOVE: &[(&str, &[(&str, &str)])] = &[
    (
        "ckpt-remote",
        &[(
            "trace",
            "timing spans for `--verbose` traces of push and pull; they touch no store",
        )],
    ),
    (
        "ckpt-cli",
        &[
            (
                "config",
                "the one Config, built from the flags and the environment",
            ),
            (
                "error",
                "the exit codes the library's errors map to, in the one exit-code map",
            ),
            (
                "trace",
                "`--verbose` turns the timing spans on, once, at start-up",
            ),
            (
                "daemon",
                "`ckpt watch` runs the watcher process itself; its requests go through ops",
            ),
        ],
    ),
    ("ckpt-ui", &[]),
];

/// Module path (`["store", "objects"]`) → file, for one crate's `src/`.
fn modules(src: &Path) -> BTreeMap<Vec<String>, PathBuf> {
    let mut out = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            if p.extension().is_none_or(|x| x != "rs") {
                continue;
            }
            let rel = p.strip_prefix(src).unwrap();
            let mut parts: Vec<String> = rel
                .iter()
                .map(|c| c.to_string_lossy().trim_end_matches(".rs").to_string())
                .collect();
            if matches!(
                parts.last().map(String::as_str),
                Some("mod" | "lib" | "main")
            ) {
                parts.pop();
            }
            out.insert(parts, p);
        }
    }
    out
}

/// The module paths a file names: `crate::x::y` and `super::x`.
fn references(file: &Path, here: &[String]) -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(file).unwrap();
    let is_mod_file = file
        .file_name()
        .is_some_and(|n| n == "mod.rs" || n == "lib.rs" || n == "main.rs");
    let mut out = Vec::new();
    // Unit-test modules (`#[cfg(test)] mod tests { use super::*; }`) come
    // last in a file and are not part of the layering.
    let body = text.split("#[cfg(test)]").next().unwrap_or("");
    for line in body.lines() {
        let code = line.trim_start();
        if code.starts_with("//") {
            continue;
        }
        for (prefix, base) in [
            ("crate::", Vec::new()),
            ("super::", {
                // `super` of a mod.rs is its parent's parent module.
                let mut b = here.to_vec();
                if !is_mod_file || !b.is_empty() {
                    b.pop();
                }
                b
            }),
        ] {
            let mut rest = line;
            while let Some(i) = rest.find(prefix) {
                let before = rest[..i].chars().last();
                rest = &rest[i + prefix.len()..];
                if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                    continue;
                }
                let path: Vec<String> = rest
                    .split("::")
                    .map(|s| {
                        s.chars()
                            .take_while(|c| c.is_alphanumeric() || *c == '_')
                            .collect::<String>()
                    })
                    .take_while(|s| !s.is_empty())
                    .collect();
                let mut full = base.clone();
                full.extend(path);
                out.push(full);
            }
        }
    }
    out
}

/// File-level dependency graph of one crate.
fn graph(src: &Path) -> BTreeMap<PathBuf, BTreeSet<PathBuf>> {
    let mods = modules(src);
    let mut g = BTreeMap::new();
    for (here, file) in &mods {
        let mut deps = BTreeSet::new();
        for r in references(file, here) {
            // The longest module prefix of the path that is a file.
            let target = (0..=r.len())
                .rev()
                .find_map(|n| mods.get(&r[..n]).filter(|_| n > 0 || r.is_empty()));
            if let Some(t) = target {
                if t != file {
                    deps.insert(t.clone());
                }
            }
        }
        g.insert(file.clone(), deps);
    }
    g
}

/// A cycle in `g`, if there is one, as the files along it.
fn find_cycle(g: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> Option<Vec<PathBuf>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Active,
        Done,
    }
    fn visit(
        n: &PathBuf,
        g: &BTreeMap<PathBuf, BTreeSet<PathBuf>>,
        mark: &mut BTreeMap<PathBuf, Mark>,
        stack: &mut Vec<PathBuf>,
    ) -> Option<Vec<PathBuf>> {
        mark.insert(n.clone(), Mark::Active);
        stack.push(n.clone());
        for d in g.get(n).into_iter().flatten() {
            match mark.get(d).copied().unwrap_or(Mark::New) {
                Mark::Active => {
                    let i = stack.iter().position(|x| x == d).unwrap();
                    let mut c = stack[i..].to_vec();
                    c.push(d.clone());
                    return Some(c);
                }
                Mark::New => {
                    if let Some(c) = visit(d, g, mark, stack) {
                        return Some(c);
                    }
                }
                Mark::Done => {}
            }
        }
        stack.pop();
        mark.insert(n.clone(), Mark::Done);
        None
    }
    let mut mark = BTreeMap::new();
    for n in g.keys() {
        if mark.get(n).copied().unwrap_or(Mark::New) == Mark::New {
            if let Some(c) = visit(n, g, &mut mark, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

fn crates_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

#[test]
fn no_crate_has_an_import_circle() {
    let mut checked = 0;
    for e in std::fs::read_dir(crates_dir()).unwrap() {
        let src = e.unwrap().path().join("src");
        if !src.is_dir() {
            continue;
        }
        let g = graph(&src);
        checked += g.len();
        if let Some(c) = find_cycle(&g) {
            let shown: Vec<_> = c
                .iter()
                .map(|p| p.strip_prefix(crates_dir()).unwrap().display().to_string())
                .collect();
            panic!("import circle: {}", shown.join(" -> "));
        }
    }
    assert!(checked > 50, "only {checked} files found: wrong directory?");
}

#[test]
fn ckpt_lib_layers_use_only_lower_layers() {
    let src = crates_dir().join("ckpt-lib/src");
    let layer = |p: &Path| -> usize {
        let rel = p.strip_prefix(&src).unwrap();
        let first = rel.iter().next().unwrap().to_string_lossy();
        LAYERS
            .iter()
            .position(|l| first == *l || first == format!("{l}.rs"))
            .map_or(0, |i| i + 1)
    };
    let mut wrong = Vec::new();
    for (file, deps) in graph(&src) {
        if file.ends_with("lib.rs") {
            continue; // the crate doc names every layer
        }
        for d in deps {
            if layer(&d) > layer(&file) {
                wrong.push(format!(
                    "{} uses {}",
                    file.strip_prefix(&src).unwrap().display(),
                    d.strip_prefix(&src).unwrap().display()
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "a layer uses one above it:\n{}",
        wrong.join("\n")
    );
}

/// The code of a file: its lines without line comments and doc comments
/// (a doc may name anything it explains).
fn code_lines(text: &str) -> Vec<String> {
    text.lines()
        .map(|l| match l.find("//") {
            Some(i) => l[..i].to_string(),
            None => l.to_string(),
        })
        .collect()
}

/// The `ckpt_lib` paths named in `text`, as `a::b::c` (what follows
/// `ckpt_lib::`, with `use` groups `{a, b::c}` expanded); a bare
/// `ckpt_lib` (an alias, `use ckpt_lib;`) is reported as the empty path.
fn lib_paths(text: &str) -> Vec<String> {
    fn ident_char(c: char) -> bool {
        c.is_alphanumeric() || c == '_'
    }
    /// The paths of one group body or path at the start of `s`, with
    /// `prefix`; returns how many bytes were read.
    fn parse(s: &str, prefix: &str, out: &mut Vec<String>) -> usize {
        let mut i = 0;
        let b = s.as_bytes();
        let mut path = prefix.to_string();
        loop {
            while i < b.len() && (b[i] as char).is_whitespace() {
                i += 1;
            }
            if i < b.len() && b[i] == b'{' {
                i += 1;
                loop {
                    i += parse(&s[i..], &path, out);
                    while i < b.len() && (b[i] as char).is_whitespace() {
                        i += 1;
                    }
                    match b.get(i) {
                        Some(b',') => i += 1,
                        Some(b'}') => return i + 1,
                        _ => return i,
                    }
                    while i < b.len() && (b[i] as char).is_whitespace() {
                        i += 1;
                    }
                    if b.get(i) == Some(&b'}') {
                        return i + 1;
                    }
                }
            }
            let start = i;
            while i < b.len() && ident_char(b[i] as char) {
                i += 1;
            }
            let seg = &s[start..i];
            if !seg.is_empty() && seg != "self" {
                if !path.is_empty() {
                    path.push_str("::");
                }
                path.push_str(seg);
            }
            if s[i..].starts_with("::") {
                i += 2;
                continue;
            }
            out.push(path);
            return i;
        }
    }
    let code = code_lines(text).join("\n");
    let mut out = Vec::new();
    let mut rest = code.as_str();
    while let Some(i) = rest.find("ckpt_lib") {
        let before = rest[..i].chars().last();
        rest = &rest[i + "ckpt_lib".len()..];
        if before.is_some_and(ident_char) || rest.chars().next().is_some_and(ident_char) {
            continue;
        }
        match rest.strip_prefix("::") {
            Some(r) => {
                let n = parse(r, "", &mut out);
                rest = &r[n..];
            }
            None => out.push(String::new()),
        }
    }
    out
}

/// The `ckpt_lib` paths in the `.rs` files below `src` that neither the
/// front door nor `exceptions` allow, as `file: path`.
fn outside_the_front_door(src: &Path, exceptions: &[(&str, &str)]) -> Vec<String> {
    let allowed: Vec<&str> = FRONT_DOOR
        .iter()
        .copied()
        .chain(exceptions.iter().map(|e| e.0))
        .collect();
    let mut wrong = Vec::new();
    for file in modules(src).values() {
        for p in lib_paths(&std::fs::read_to_string(file).unwrap()) {
            let ok = allowed
                .iter()
                .any(|a| p == *a || p.starts_with(&format!("{a}::")));
            if !ok {
                wrong.push(format!(
                    "{}: ckpt_lib::{p}",
                    file.strip_prefix(src).unwrap().display()
                ));
            }
        }
    }
    wrong
}

#[test]
fn crates_above_ckpt_lib_use_only_its_front_door() {
    let mut wrong = Vec::new();
    for (krate, exceptions) in ABOVE {
        let src = crates_dir().join(krate).join("src");
        assert!(src.is_dir(), "{} is not a directory", src.display());
        for w in outside_the_front_door(&src, exceptions) {
            wrong.push(format!("{krate}/src/{w}"));
        }
    }
    assert!(
        wrong.is_empty(),
        "these name ckpt-lib outside its front door (`ckpt_lib::ops` and the root re-exports: \
         {FRONT_DOOR:?}) and their crate's exceptions (`ABOVE` in tests/layers.rs):\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_front_door_check_finds_a_forbidden_path() {
    // The check itself must be able to fail.
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::write(
        src.join("lib.rs"),
        "//! Docs may name ckpt_lib::store::Store.\n\
         use ckpt_lib::ops::exchange::{self, tree::Node, Local};\n\
         use ckpt_lib::{Error, Hash, trace};\n\
         fn f() -> ckpt_lib::Result<()> { Ok(()) }\n",
    )
    .unwrap();
    assert_eq!(
        outside_the_front_door(src, &[("trace", "spans")]),
        Vec::<String>::new()
    );
    assert_eq!(
        outside_the_front_door(src, &[]),
        vec!["lib.rs: ckpt_lib::trace".to_string()]
    );
    std::fs::write(
        src.join("a.rs"),
        "use ckpt_lib::{ops::Context, store::{Store, catalog::Checkpoint}};\n\
         use ckpt_lib as lib; // an alias would hide the rest\n\
         fn g() { let _ = ckpt_lib::workspace::Workspace::discover; }\n",
    )
    .unwrap();
    let mut found = outside_the_front_door(src, &[("trace", "spans")]);
    found.sort();
    assert_eq!(
        found,
        vec![
            "a.rs: ckpt_lib::".to_string(),
            "a.rs: ckpt_lib::store::Store".to_string(),
            "a.rs: ckpt_lib::store::catalog::Checkpoint".to_string(),
            "a.rs: ckpt_lib::workspace::Workspace::discover".to_string(),
        ]
    );
}

#[test]
fn the_checker_finds_a_circle() {
    // The checker itself must be able to fail: a two-file circle.
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::write(src.join("lib.rs"), "pub mod a;\npub mod b;\n").unwrap();
    std::fs::write(src.join("a.rs"), "use crate::b::B;\npub struct A;\n").unwrap();
    std::fs::write(src.join("b.rs"), "pub struct B(crate::a::A);\n").unwrap();
    let c = find_cycle(&graph(src)).expect("a -> b -> a is a circle");
    assert_eq!(c.len(), 3);
    std::fs::write(src.join("b.rs"), "pub struct B;\n").unwrap();
    assert!(find_cycle(&graph(src)).is_none());
}
