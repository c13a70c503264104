//! `ckpt cat ID PATH`: one file's bytes as a checkpoint saved them. Reads
//! only. The UI shows images before and after with it.
//!
//! The path is looked up component by component in the checkpoint's trees
//! (so it cannot leave the checkpoint); a directory, a symlink or a missing
//! path is a [`Error::Usage`] naming the path.

use std::path::PathBuf;

use serde::{Serialize, Serializer};

use super::json::{self, PathField, Schema};
use super::Context;
use crate::store::tree::Node;
use crate::{Error, Hash, Result};

/// What [`cat`] reads.
#[derive(Clone, Debug, Default)]
pub struct CatOptions {
    /// The checkpoint (`v12`, `HEAD`, a hash prefix, …).
    pub rev: String,
    /// The file (relative to the context's directory).
    pub path: PathBuf,
}

/// One file of a checkpoint.
#[derive(Debug)]
pub struct CatReport {
    /// The checkpoint's id.
    pub id: String,
    /// The workspace-relative path.
    pub path: Vec<u8>,
    /// Its content hash.
    pub hash: Hash,
    /// Its bytes.
    pub bytes: Vec<u8>,
}

impl CatReport {}

/// The JSON form of a [`CatReport`]: `id`, `path`, `size`, `hash`, and
/// `content` (UTF-8) or `content_hex`.
#[derive(Serialize, schemars::JsonSchema)]
struct CatForm<'a> {
    schema: Schema,
    id: &'a str,
    #[serde(flatten)]
    path: PathField<'a>,
    size: usize,
    hash: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    content: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    content_hex: Option<String>,
}

super::json::schema_via!(CatReport => CatForm<'static>);

impl Serialize for CatReport {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let text = std::str::from_utf8(&self.bytes).ok();
        CatForm {
            schema: Schema,
            id: &self.id,
            path: PathField(&self.path),
            size: self.bytes.len(),
            hash: self.hash.to_hex(),
            content: text,
            content_hex: text.is_none().then(|| json::hex(&self.bytes)),
        }
        .serialize(s)
    }
}

/// Reads one file of a checkpoint from the store.
pub fn cat(ctx: &Context, opts: &CatOptions) -> Result<CatReport> {
    let ws = ctx.workspace()?;
    let path = ctx
        .rel_paths(&ws, std::slice::from_ref(&opts.path))?
        .remove(0);
    let store = ws.open_store_read_only(&ctx.config)?;
    let r = store.catalog.reader()?;
    let cp = r.resolve(&opts.rev)?;
    let not_file = |what: &str| {
        Error::Usage(format!(
            "{} in {} {what}: `ckpt show {}` lists its files",
            opts.path.display(),
            cp.id(),
            cp.id()
        ))
    };
    let mut cur = cp.root;
    let comps: Vec<&[u8]> = path.split(|&b| b == b'/').collect();
    for (i, comp) in comps.iter().enumerate() {
        let last = i + 1 == comps.len();
        match r.tree(&cur)?.get(comp).map(|e| e.node.clone()) {
            Some(Node::Dir { tree }) if !last => cur = tree,
            Some(Node::File { hash, .. }) if last => {
                return Ok(CatReport {
                    id: cp.id(),
                    bytes: store.objects.read_object(&hash)?,
                    path,
                    hash,
                });
            }
            Some(Node::Dir { .. }) => return Err(not_file("is a directory")),
            Some(Node::Symlink { .. }) => return Err(not_file("is a symlink")),
            _ => return Err(not_file("does not exist")),
        }
    }
    Err(not_file("is not a file"))
}
