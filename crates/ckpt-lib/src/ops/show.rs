//! `ckpt show ID`: one checkpoint's record and what it changed from its
//! parent (everything, for the first). Reads only.

use schemars::JsonSchema;
use serde::{Serialize, Serializer};

use super::json::{schema_via, AnnotatedForm, ChangeForm, Schema};
use super::Context;
use crate::engine::diff::{self, Change, PathFilter, TreeSource};
use crate::store::catalog::{Annotation, CatalogReader, Checkpoint};
use crate::Result;

/// What [`show`] shows.
#[derive(Clone, Debug, Default)]
pub struct ShowOptions {
    /// The checkpoint (`v12`, a hash prefix, `HEAD`, `HEAD~1`, `latest`).
    pub rev: String,
}

/// One checkpoint and its changes. JSON: the checkpoint's record, its
/// `annotations` and `changes`.
#[derive(Debug)]
pub struct ShowReport {
    /// The checkpoint.
    pub checkpoint: Checkpoint,
    /// Its annotations (tags and note added after the save).
    pub annotation: Option<Annotation>,
    /// The head's sequence number.
    pub head: Option<u64>,
    /// The changes from its parent that matter (see
    /// [`Change::is_interesting`]).
    pub changes: Vec<Change>,
}

impl ShowReport {
    /// Whether the checkpoint is the head.
    pub fn is_head(&self) -> bool {
        self.head == Some(self.checkpoint.seq)
    }
}

/// The JSON form of a [`ShowReport`]: the record needs the head.
#[derive(Serialize, JsonSchema)]
struct ShowForm<'a> {
    schema: Schema,
    #[serde(flatten)]
    checkpoint: AnnotatedForm<'a>,
    changes: Vec<ChangeForm<'a>>,
}

schema_via!(ShowReport => ShowForm<'static>);

impl Serialize for ShowReport {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        ShowForm {
            schema: Schema,
            checkpoint: AnnotatedForm::new(&self.checkpoint, self.head, self.annotation.as_ref()),
            changes: self
                .changes
                .iter()
                .filter(|c| c.is_interesting())
                .map(ChangeForm::from)
                .collect(),
        }
        .serialize(s)
    }
}

/// Reads one checkpoint and diffs it against its parent.
pub fn show(ctx: &Context, opts: &ShowOptions) -> Result<ShowReport> {
    let ws = ctx.workspace()?;
    let store = ws.open_store_read_only(&ctx.config)?;
    let r = store.catalog.reader()?;
    let checkpoint = r.resolve(&opts.rev)?;
    let head = r.head()?;
    let annotation = r.annotations()?.get(checkpoint.seq)?;
    let changes = changes_from_parent(&r, &checkpoint, &PathFilter::default())?;
    Ok(ShowReport {
        checkpoint,
        annotation,
        head,
        changes,
    })
}

/// What `cp` changed from its parent (from the empty tree for the first)
/// that matters (see [`Change::is_interesting`]), restricted by `filter`.
pub(crate) fn changes_from_parent(
    r: &CatalogReader<'_>,
    cp: &Checkpoint,
    filter: &PathFilter,
) -> Result<Vec<Change>> {
    let parent_root = match cp.parent {
        Some(p) => r.checkpoint(p)?.map(|c| c.root),
        None => None,
    };
    let src = TreeSource {
        fresh: None,
        catalog: r,
    };
    Ok(diff::diff_trees(&src, parent_root, Some(cp.root), filter)?
        .into_iter()
        .filter(Change::is_interesting)
        .collect())
}
