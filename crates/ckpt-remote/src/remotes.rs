//! `ckpt remote add NAME URL`, `remote list`, `remote remove NAME`: the
//! named remotes of a workspace.
//!
//! They are kept with the workspace's store, in `<store>/remotes.json`:
//! `{"remotes":{"origin":{"url":"s3://bucket/prefix","workspace":"app"}}}`
//! (`workspace`, optional, is the name this workspace pushes as and pulls
//! from; default: the workspace directory's name). Written temp + rename
//! under the store lock, so a crash leaves the old file or the new one.
//! A command that takes a remote accepts a name from this file or a URL.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ckpt_lib::ops::exchange::Local;
use ckpt_lib::ops::json::Schema;
use ckpt_lib::ops::Context;
use serde::{Deserialize, Serialize};

use crate::client::Client;
use crate::layout::check_name;
use crate::url::RemoteUrl;
use crate::{usage, Error, Result, Settings};

/// One configured remote.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RemoteEntry {
    /// Its URL.
    pub url: String,
    /// The workspace name used on it (None: the directory's name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    /// Whether it must be encrypted (crate::crypt): a remote without an
    /// encryption config is then refused, not used in the clear.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub encrypt: bool,
    /// The key file of an encrypted remote (its bytes are the secret).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_file: Option<PathBuf>,
}

/// `remotes.json`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Remotes {
    /// Name → remote.
    pub remotes: BTreeMap<String, RemoteEntry>,
}

fn file(store: &Path) -> PathBuf {
    store.join("remotes.json")
}

/// Reads a store's remotes (none when the file is absent).
pub fn read(store: &Path) -> Result<Remotes> {
    let p = file(store);
    match std::fs::read(&p) {
        Ok(b) => {
            serde_json::from_slice(&b).map_err(|e| Error::corrupt(format!("{}: {e}", p.display())))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Remotes::default()),
        Err(e) => Err(Error::io("read", p, e)),
    }
}

fn write(store: &Path, r: &Remotes) -> Result<()> {
    let p = file(store);
    let tmp = store.join("remotes.json.tmp");
    let bytes = serde_json::to_vec_pretty(r).expect("remotes serialise");
    std::fs::write(&tmp, bytes).map_err(|e| Error::io("write", &tmp, e))?;
    std::fs::rename(&tmp, &p).map_err(|e| Error::io("rename", &p, e))
}

/// A remote resolved from a name or URL, with the workspace name to use.
#[derive(Clone, Debug)]
pub struct Target {
    /// The configured name, if it came from the file.
    pub name: Option<String>,
    /// The URL.
    pub url: RemoteUrl,
    /// The workspace name on the remote.
    pub workspace: String,
    /// It must be encrypted ([`RemoteEntry::encrypt`]).
    pub encrypt: bool,
    /// Its configured key file.
    pub key_file: Option<PathBuf>,
}

impl Target {
    /// Opens the remote, unlocking it if it is encrypted
    /// ([`Client::connect`]); `cache`: the store's cache of it.
    pub async fn connect(&self, settings: &Settings, cache: Option<&Path>) -> Result<Client> {
        Client::connect(
            &self.url,
            settings,
            self.encrypt,
            self.key_file.as_deref(),
            cache,
        )
        .await
    }
}

/// The default workspace name: the name of the workspace directory
/// `root`, made usable.
pub fn default_name(root: &Path) -> String {
    let n: String = root
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '-'
            }
        })
        .collect();
    let n = n.trim_start_matches('.').to_string();
    if n.is_empty() {
        "workspace".into()
    } else {
        n
    }
}

/// Resolves `remote` (a configured name, a URL, or None: the only
/// configured remote, or `origin`) for the workspace of `local`;
/// `workspace` overrides the name used on the remote.
pub fn resolve(local: &Local, remote: Option<&str>, workspace: Option<&str>) -> Result<Target> {
    let remotes = read(local.store_dir())?;
    let (name, entry) = match remote {
        Some(r) if r.contains("://") => (
            None,
            RemoteEntry {
                url: r.to_string(),
                workspace: None,
                encrypt: false,
                key_file: None,
            },
        ),
        Some(r) => match remotes.remotes.get(r) {
            Some(e) => (Some(r.to_string()), e.clone()),
            None => {
                return Err(usage(format!(
                    "no remote named {r:?} (see `ckpt remote list`; add one with `ckpt remote add {r} URL`)"
                )))
            }
        },
        None => {
            let pick = remotes
                .remotes
                .get_key_value("origin")
                .or_else(|| (remotes.remotes.len() == 1).then(|| remotes.remotes.iter().next()).flatten());
            match pick {
                Some((n, e)) => (Some(n.clone()), e.clone()),
                None => {
                    return Err(usage(
                        "which remote? name one, or add one with `ckpt remote add origin URL`".into(),
                    ))
                }
            }
        }
    };
    let url = RemoteUrl::parse(&entry.url)?;
    let workspace = workspace
        .map(str::to_string)
        .or(entry.workspace)
        .unwrap_or_else(|| default_name(local.root()));
    check_name(&workspace)?;
    Ok(Target {
        name,
        url,
        workspace,
        encrypt: entry.encrypt,
        key_file: entry.key_file,
    })
}

/// What `remote add/remove/list` did and what is configured now;
/// serialises as its `--json` form: `remotes` (name → {url, workspace,
/// …}), and `added` or `removed` (a name) when one was.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct RemotesReport {
    /// `schema`.
    pub schema: Schema,
    /// The remotes now.
    #[serde(flatten)]
    pub remotes: Remotes,
    /// The remote added.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub added: Option<String>,
    /// The remote removed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub removed: Option<String>,
}

fn locked<T>(ctx: &Context, f: impl FnOnce(&Path) -> Result<T>) -> Result<T> {
    let local = Local::open(ctx)?;
    f(local.store_dir())
}

/// What [`add`] adds.
#[derive(Clone, Copy, Debug)]
pub struct AddOptions<'a> {
    /// Its name.
    pub name: &'a str,
    /// Its URL.
    pub url: &'a str,
    /// The workspace name used on it.
    pub workspace: Option<&'a str>,
    /// Encrypt it (crate::crypt): a new remote is made encrypted with the
    /// secret; an encrypted one must open with it; one holding
    /// unencrypted data is refused.
    pub encrypt: bool,
    /// The key file whose bytes are the secret (recorded with the remote);
    /// [`Settings::secret`] comes first.
    pub key_file: Option<&'a Path>,
    /// How to reach the remote (only with `encrypt`).
    pub settings: &'a Settings,
}

/// Adds remote `name` → `url` (replacing nothing: an existing name is an
/// error). With `encrypt`, the remote is reached first (nothing is
/// recorded if that fails).
pub fn add(ctx: &Context, opts: &AddOptions<'_>) -> Result<RemotesReport> {
    let name = opts.name;
    check_name(name)?;
    let url = RemoteUrl::parse(opts.url)?;
    if let Some(w) = opts.workspace {
        check_name(w)?;
    }
    let key_file = opts.key_file.map(|k| ckpt_lib::ops::normalize(&ctx.abs(k)));
    locked(ctx, |store| {
        let mut r = read(store)?;
        if r.remotes.contains_key(name) {
            return Err(usage(format!(
                "a remote named {name:?} already exists ({}); remove it first (nothing was changed)",
                r.remotes[name].url
            )));
        }
        if opts.encrypt {
            let cache = crate::known::cache_dir(store, &url.url);
            make_encrypted(&url, opts.settings, key_file.as_deref(), &cache)?;
        }
        r.remotes.insert(
            name.to_string(),
            RemoteEntry {
                url: opts.url.to_string(),
                workspace: opts.workspace.map(str::to_string),
                encrypt: opts.encrypt,
                key_file: key_file.clone(),
            },
        );
        write(store, &r)?;
        Ok(RemotesReport {
            schema: Schema,
            remotes: r,
            added: Some(name.to_string()),
            removed: None,
        })
    })
}

/// Makes the remote at `url` encrypted, or checks that it is and that the
/// secret opens it.
fn make_encrypted(
    url: &RemoteUrl,
    settings: &Settings,
    key_file: Option<&Path>,
    cache: &Path,
) -> Result<()> {
    let secret = settings
        .secret
        .clone()
        .or_else(|| key_file.map(|p| crate::crypt::Secret::KeyFile(p.to_path_buf())))
        .ok_or_else(|| {
            Error::Key(format!(
                "`--encrypt` needs a key: set CKPT_REMOTE_PASSPHRASE, or give --key-file PATH \
                 (or CKPT_REMOTE_KEY_FILE); nothing was changed ({})",
                url.url
            ))
        })?;
    let mut settings = settings.clone();
    settings.secret = Some(secret.clone());
    let rt = crate::runtime()?;
    rt.block_on(async {
        // An encrypted remote: the secret must open it.
        let client = Client::connect(url, &settings, false, None, Some(cache)).await?;
        if client.keys().is_some() {
            return Ok(());
        }
        for dir in ["refs", "packs"] {
            if !client.list(dir).await?.is_empty() {
                return Err(usage(format!(
                    "{} holds checkpoints that are not encrypted; an encrypted remote needs a \
                     prefix of its own (nothing was changed)",
                    url.url
                )));
            }
        }
        let (config, _) = crate::crypt::create(&secret.bytes()?)?;
        let config = bytes::Bytes::from(config);
        client.create(crate::crypt::CONFIG, config).await?;
        // Read back: if another `remote add --encrypt` made it first (or,
        // on a server that ignores conditional writes, replaced it), the
        // config there must open with this secret too.
        Client::connect(url, &settings, true, None, Some(cache)).await?;
        Ok(())
    })
}

/// Records remote `origin` → `entry` in a new store (a clone's: nothing
/// else can hold its lock yet, and it has no remotes).
pub fn set_origin(store: &Path, entry: RemoteEntry) -> Result<()> {
    let mut r = read(store)?;
    r.remotes.insert("origin".to_string(), entry);
    write(store, &r)
}

/// Removes remote `name` (its data on the remote is untouched).
pub fn remove(ctx: &Context, name: &str) -> Result<RemotesReport> {
    locked(ctx, |store| {
        let mut r = read(store)?;
        if r.remotes.remove(name).is_none() {
            return Err(usage(format!(
                "no remote named {name:?} (see `ckpt remote list`)"
            )));
        }
        write(store, &r)?;
        Ok(RemotesReport {
            schema: Schema,
            remotes: r,
            added: None,
            removed: Some(name.to_string()),
        })
    })
}

/// Lists the remotes.
pub fn list(ctx: &Context) -> Result<RemotesReport> {
    locked(ctx, |store| {
        Ok(RemotesReport {
            schema: Schema,
            remotes: read(store)?,
            added: None,
            removed: None,
        })
    })
}
