//! Keeping `.ckpt` out of `git status`.
//!
//! Agents run `git status` all the time; an untracked `.ckpt` in every
//! repository ckpt is set up in is noise they may act on (commit it, or
//! delete it). So `ckpt init` inside a git work tree adds the marker's path
//! (and the store's, when the store is inside the work tree) to the
//! repository's `info/exclude`: ignored for this clone only, with no file
//! of the project's changed, unlike `.gitignore`.
//!
//! The repository is found as git finds it: the nearest ancestor holding
//! `.git`, a directory or (in a linked worktree or submodule) a file saying
//! `gitdir: PATH`. A linked worktree's `info/exclude` is its common
//! directory's (`commondir`), which is the one git reads. Nothing is done
//! outside a work tree, and an entry already present is not added twice.

use std::io::Write;
use std::path::{Path, PathBuf};

/// What [`exclude`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Excluded {
    /// The exclude file.
    pub file: PathBuf,
    /// The patterns added (empty: all were there already).
    pub added: Vec<String>,
}

/// The git directory of the work tree containing `dir`, and that work
/// tree's root.
fn repository(dir: &Path) -> Option<(PathBuf, PathBuf)> {
    let top = dir.ancestors().find(|a| a.join(".git").exists())?;
    let dotgit = top.join(".git");
    let git_dir = if dotgit.is_dir() {
        dotgit
    } else {
        let text = std::fs::read_to_string(&dotgit).ok()?;
        let rel = text.lines().find_map(|l| l.strip_prefix("gitdir:"))?.trim();
        top.join(rel)
    };
    // A linked worktree keeps `info/` in the common directory.
    let common = match std::fs::read_to_string(git_dir.join("commondir")) {
        Ok(c) => git_dir.join(c.trim()),
        Err(_) => git_dir,
    };
    Some((common, top.to_path_buf()))
}

/// The pattern that matches exactly `path` from the work tree's root.
fn anchored(top: &Path, path: &Path) -> Option<String> {
    let rel = path.strip_prefix(top).ok()?;
    let s = rel.to_str()?;
    // Patterns with wildcards or a leading `!`/`#` would need escaping;
    // such paths are left alone rather than excluded wrongly.
    if s.is_empty() || s.contains(['*', '?', '[', '\\', '\n']) {
        return None;
    }
    Some(format!("/{s}"))
}

/// Adds the workspace `root`'s marker (and `store`, when it is inside the
/// same work tree) to the repository's `info/exclude`. `None` when `root`
/// is not in a git work tree, or the file cannot be written (an
/// exclusion is a courtesy: its failure never fails `init`).
pub fn exclude(root: &Path, marker: &str, store: &Path) -> Option<Excluded> {
    let (git_dir, top) = repository(root)?;
    let mut wanted: Vec<String> = [root.join(marker), store.to_path_buf()]
        .iter()
        .filter_map(|p| anchored(&top, p))
        .collect();
    wanted.dedup();
    let file = git_dir.join("info").join("exclude");
    let existing = std::fs::read_to_string(&file).unwrap_or_default();
    let have: Vec<&str> = existing.lines().map(str::trim).collect();
    let added: Vec<String> = wanted
        .into_iter()
        .filter(|w| !have.contains(&w.as_str()))
        .collect();
    if !added.is_empty() {
        std::fs::create_dir_all(file.parent()?).ok()?;
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&file)
            .ok()?;
        let mut text = String::new();
        if !existing.is_empty() && !existing.ends_with('\n') {
            text.push('\n');
        }
        text.push_str("# added by `ckpt init`: its workspace marker (and store)\n");
        for a in &added {
            text.push_str(a);
            text.push('\n');
        }
        f.write_all(text.as_bytes()).ok()?;
    }
    Some(Excluded { file, added })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds_once_and_only_inside_a_work_tree() {
        let base = std::env::temp_dir().join(format!("ckpt-git-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let repo = base.join("repo");
        std::fs::create_dir_all(repo.join(".git/info")).unwrap();
        std::fs::write(repo.join(".git/info/exclude"), "# git's own\n*.o").unwrap();
        let ws = repo.join("app");
        std::fs::create_dir_all(&ws).unwrap();
        let store = base.join("elsewhere/store");
        let ex = exclude(&ws, ".ckpt", &store).unwrap();
        assert_eq!(ex.added, vec!["/app/.ckpt".to_string()]);
        let again = exclude(&ws, ".ckpt", &store).unwrap();
        assert!(again.added.is_empty());
        let text = std::fs::read_to_string(repo.join(".git/info/exclude")).unwrap();
        assert!(text.starts_with("# git's own\n*.o\n"), "{text}");
        assert_eq!(text.matches("/app/.ckpt").count(), 1);
        // A linked worktree: `.git` is a file, info/ is in the common dir.
        let wt = base.join("wt");
        let wt_git = repo.join(".git/worktrees/wt");
        std::fs::create_dir_all(&wt_git).unwrap();
        std::fs::create_dir_all(&wt).unwrap();
        std::fs::write(wt.join(".git"), format!("gitdir: {}\n", wt_git.display())).unwrap();
        std::fs::write(wt_git.join("commondir"), "../..\n").unwrap();
        let ex = exclude(&wt, ".ckpt", &wt.join("store")).unwrap();
        assert_eq!(ex.added, vec!["/.ckpt".to_string(), "/store".to_string()]);
        assert!(ex.file.starts_with(repo.join(".git/worktrees/wt/../..")));
        assert!(
            exclude(&base.join("elsewhere"), ".ckpt", &store).is_none()
                || base.ancestors().any(|a| a.join(".git").exists())
        );
        std::fs::remove_dir_all(&base).unwrap();
    }
}
