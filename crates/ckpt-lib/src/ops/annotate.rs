//! `ckpt annotate ID [KEY=VALUE]… [--remove KEY]… [--note TEXT]`: tags and
//! a note added to a checkpoint after it was saved.
//!
//! A checkpoint's record (save-time tags included) is covered by its hash
//! and never changes; annotations live beside it in the catalog's
//! `annotations` table ([`crate::store::catalog`], `docs/FORMAT.md`), go
//! when the checkpoint is deleted, and are listed by `log`/`show` as the
//! checkpoint's `annotations`, apart from its `tags`. `log --search`
//! matches them like save-time tags.
//!
//! Rules, checked before anything is written (an edit that breaks one
//! changes nothing): a tag key is non-empty and has no `=`; a key cannot be
//! both set and removed; a save-time tag's key can be neither set nor
//! removed here (it is part of the record); an empty note removes the note;
//! removing a key the annotation lacks is not an error (the result is the
//! same). The edit, the check that the checkpoint still exists and the
//! write are one catalog transaction under the store lock.

use std::collections::BTreeMap;

use serde::Serialize;

use super::json::{with, Schema};
use super::Context;
use crate::store::catalog::{Annotation, Checkpoint};
use crate::{Error, Result};

/// What [`annotate`] changes.
#[derive(Clone, Debug, Default)]
pub struct AnnotateOptions {
    /// The checkpoint (`v12`, a hash prefix, `HEAD`, …).
    pub rev: String,
    /// Tags to add or change.
    pub set: BTreeMap<String, String>,
    /// Tag keys to remove.
    pub remove: Vec<String>,
    /// The new note (`Some("")` removes it; `None` leaves it).
    pub note: Option<String>,
}

/// What [`annotate`] did. JSON: `id`, `tags` (save-time), `annotations`.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct AnnotateReport {
    /// `"schema": 1`.
    pub schema: Schema,
    /// The checkpoint annotated (`id`, and its save-time `tags`).
    #[serde(flatten, serialize_with = "id_and_tags")]
    #[schemars(with = "IdAndTags<'static>")]
    pub checkpoint: Checkpoint,
    /// Its annotation now (`None`: none left).
    #[serde(rename = "annotations", serialize_with = "with::annotation")]
    #[schemars(with = "Option<super::json::AnnotationForm<'static>>")]
    pub annotation: Option<Annotation>,
}

/// Applies the edit to the checkpoint's annotation.
pub fn annotate(ctx: &Context, opts: &AnnotateOptions) -> Result<AnnotateReport> {
    let nothing = " (nothing was changed)";
    if opts.set.is_empty() && opts.remove.is_empty() && opts.note.is_none() {
        return Err(Error::Usage(format!(
            "nothing to annotate: give KEY=VALUE tags, --remove KEY or --note TEXT{nothing}"
        )));
    }
    for k in opts.set.keys().chain(&opts.remove) {
        if k.is_empty() || k.contains('=') {
            return Err(Error::Usage(format!(
                "tag key {k:?} must be non-empty and without `=`{nothing}"
            )));
        }
    }
    if let Some(k) = opts.remove.iter().find(|k| opts.set.contains_key(*k)) {
        return Err(Error::Usage(format!(
            "tag {k:?} is both set and removed{nothing}"
        )));
    }
    let ws = ctx.workspace()?;
    let store = ws.open_store(&ctx.config)?;
    let target = store.catalog.reader()?.resolve(&opts.rev)?;
    let now = ckpt_fs::fs::now_ns();
    let mut record = None;
    let annotation = store.catalog.annotate(target.seq, |cp, old| {
        record = Some(cp.clone());
        if let Some(k) = opts
            .set
            .keys()
            .chain(&opts.remove)
            .find(|k| cp.tags.contains_key(*k))
        {
            return Err(Error::Usage(format!(
                "{} was saved with tag {k}={}, which is part of its record and cannot change; \
                 annotate with another key{nothing}",
                cp.id(),
                cp.tags[k]
            )));
        }
        let mut a = old.unwrap_or_default();
        a.tags.extend(opts.set.clone());
        for k in &opts.remove {
            a.tags.remove(k);
        }
        if let Some(n) = &opts.note {
            a.note = (!n.is_empty()).then(|| n.clone());
        }
        a.time_ns = now;
        Ok(a)
    })?;
    Ok(AnnotateReport {
        schema: Schema,
        checkpoint: record.expect("annotate read the record"),
        annotation,
    })
}

/// A checkpoint's `id` and save-time `tags` (flattened into the report).
#[derive(Serialize, schemars::JsonSchema)]
struct IdAndTags<'a> {
    id: String,
    tags: &'a BTreeMap<String, String>,
}

/// A checkpoint as `id` and its save-time `tags`.
fn id_and_tags<S: serde::Serializer>(
    cp: &Checkpoint,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    IdAndTags {
        id: cp.id(),
        tags: &cp.tags,
    }
    .serialize(s)
}
