//! `.ckptignore`: paths the user does not want captured, in gitignore
//! syntax, matched with the `ignore` crate's gitignore matcher.
//!
//! Only the file at the workspace root is read. Ignored paths are neither
//! captured by save nor touched by restore. When there is no `.ckptignore`
//! the matcher is absent and costs nothing per entry.

use std::path::Path;

use ignore::gitignore::{Gitignore, GitignoreBuilder};

use crate::{Error, Result};
use ckpt_fs::fs::as_path;

/// The name of the ignore file at the workspace root.
pub const IGNORE_FILE: &str = ".ckptignore";

/// A compiled `.ckptignore`.
#[derive(Debug, Default)]
pub struct Ignore {
    matcher: Option<Gitignore>,
}

impl Ignore {
    /// Reads `<root>/.ckptignore` if it exists.
    pub fn load(root: &Path) -> Result<Ignore> {
        let file = root.join(IGNORE_FILE);
        if !file.exists() {
            return Ok(Ignore::default());
        }
        let mut b = GitignoreBuilder::new(root);
        if let Some(e) = b.add(&file) {
            return Err(Error::Usage(format!("{}: {e}", file.display())));
        }
        let gi = b
            .build()
            .map_err(|e| Error::Usage(format!("{}: {e}", file.display())))?;
        Ok(Ignore {
            matcher: (!gi.is_empty()).then_some(gi),
        })
    }

    /// Whether the workspace-relative path is ignored.
    pub fn is_ignored(&self, rel: &[u8], is_dir: bool) -> bool {
        match &self.matcher {
            None => false,
            Some(m) => m
                .matched_path_or_any_parents(as_path(rel), is_dir)
                .is_ignore(),
        }
    }

    /// Whether any patterns are active.
    pub fn is_active(&self) -> bool {
        self.matcher.is_some()
    }
}
