//! `ckpt cat ID PATH`: one file's bytes as a checkpoint saved them. Reads
//! only. The UI shows images before and after with it.
//!
//! The path is looked up component by component in the checkpoint's trees
//! (so it cannot leave the checkpoint); a directory, a symlink or a missing
//! path is a [`Error::Usage`] naming the path.

use std::path::PathBuf;

use serde_json::{json, Value};

use super::json::{self, serialize_via_to_json, SCHEMA};
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

impl CatReport {
    /// The JSON form: `id`, `path`, `size`, `hash`, and `content` (UTF-8)
    /// or `content_hex`.
    pub fn to_json(&self) -> Value {
        let mut m = serde_json::Map::new();
        m.insert("schema".into(), json!(SCHEMA));
        m.insert("id".into(), json!(self.id));
        json::path_fields(&mut m, "path", &self.path);
        m.insert("size".into(), json!(self.bytes.len()));
        m.insert("hash".into(), json!(self.hash.to_hex()));
        json::path_fields(&mut m, "content", &self.bytes);
        if m.contains_key("content_hex") {
            m.remove("content");
        }
        Value::Object(m)
    }
}

serialize_via_to_json!(CatReport);

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
