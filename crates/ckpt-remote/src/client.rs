//! Every request ckpt makes to object storage goes through [`Client`]:
//!
//! - **Retries.** object_store's `RetryConfig` (set in [`crate::url`])
//!   retries 5xx answers, refused connections and, for idempotent
//!   requests, resets and timeouts, [`Settings::attempts`] times in all
//!   with exponential backoff from [`Settings::backoff`]. What it gives up
//!   on or does not retry (a reset in the middle of a reply body, a
//!   create-if-absent whose reply was lost) is retried here, up to
//!   [`OUTER_ATTEMPTS`] times with doubling backoff, if it is transient.
//!   Definite answers (not found, exists, precondition failed, refused
//!   credentials) are not retried. Every request is idempotent
//!   (content-addressed puts, create-if-absent ref generations, gets,
//!   lists, deletes), so a retry after a reply that was lost is harmless.
//! - **Errors name the request.** A failure that retries did not cure says
//!   which request (`PUT s3://bucket/prefix/packs/ab…`) failed and why.
//! - **At most [`Settings::concurrency`] requests in flight**, however
//!   many an operation issues at once (a semaphore around each attempt).
//! - **Counting.** Requests and bytes sent and received are counted for the
//!   summary ([`Counters`]). Over HTTP each request object_store sends,
//!   every retry included, is counted where it is sent (a counting
//!   connector, [`crate::url`]); for `file://` each call is one request.

use std::ops::Range;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use futures::TryStreamExt;
use object_store::path::Path as ObjPath;
use object_store::{ObjectMeta, ObjectStore, PutMode, PutOptions, PutPayload};

use crate::crypt::{self, Keys};
use crate::layout;
use crate::report::Counters;
use crate::url::RemoteUrl;
use ckpt_lib::Hash;

use crate::{Error, Result, Settings};

/// The outcome of a create-if-absent write.
#[derive(Debug, PartialEq, Eq)]
pub enum Created {
    /// Written.
    Yes,
    /// Something was already there; nothing was written.
    AlreadyThere,
}

/// One remote, opened.
#[derive(Clone)]
pub struct Client {
    store: Arc<dyn ObjectStore>,
    prefix: ObjPath,
    /// The remote's URL (for messages).
    pub url: RemoteUrl,
    settings: Settings,
    /// What this client did.
    pub counters: Arc<Counters>,
    /// Whether `counters.requests` is counted by the HTTP connector.
    counted_by_http: bool,
    /// [`Settings::concurrency`] permits: one per request in flight.
    limit: Arc<tokio::sync::Semaphore>,
    /// The keys of an encrypted remote (crate::crypt), once unlocked.
    keys: Option<Arc<Keys>>,
}

/// Attempts of one operation here, around object_store's own retries.
pub const OUTER_ATTEMPTS: u32 = 3;

fn transient(e: &object_store::Error) -> bool {
    use object_store::Error as E;
    !matches!(
        e,
        E::NotFound { .. }
            | E::AlreadyExists { .. }
            | E::Precondition { .. }
            | E::NotModified { .. }
            | E::NotImplemented
            | E::NotSupported { .. }
            | E::PermissionDenied { .. }
            | E::Unauthenticated { .. }
            | E::InvalidPath { .. }
            | E::UnknownConfigurationKey { .. }
    ) && !e.to_string().contains("NoSuchBucket")
}

impl Client {
    /// Opens the remote at `url`.
    pub fn open(url: &RemoteUrl, settings: &Settings) -> Result<Client> {
        let counters = Arc::default();
        let (store, prefix, counted_by_http) = url.open(settings, &counters)?;
        Ok(Client {
            store,
            prefix,
            url: url.clone(),
            settings: settings.clone(),
            counters,
            counted_by_http,
            limit: Arc::new(tokio::sync::Semaphore::new(settings.concurrency.max(1))),
            keys: None,
        })
    }

    /// Opens the remote at `url` and reads its `config`: an encrypted
    /// remote is unlocked with the secret ([`Settings::secret`], else
    /// `key_file`), or refused when there is none or it does not open it;
    /// a remote configured as encrypted (`encrypt`) must be. Nothing is
    /// written. `cache`: the store's cache of this remote (for the key).
    pub async fn connect(
        url: &RemoteUrl,
        settings: &Settings,
        encrypt: bool,
        key_file: Option<&std::path::Path>,
        cache: Option<&std::path::Path>,
    ) -> Result<Client> {
        let mut c = Client::open(url, settings)?;
        match c.get(crypt::CONFIG).await? {
            Some(cfg) => {
                let secret = settings
                    .secret
                    .clone()
                    .or_else(|| key_file.map(|p| crypt::Secret::KeyFile(p.to_path_buf())));
                let keys =
                    crypt::unlock(url.url.trim_end_matches('/'), &cfg, secret.as_ref(), cache)?;
                c.keys = Some(Arc::new(keys));
            }
            None if encrypt => {
                return Err(Error::usage(format!(
                    "{} is configured as an encrypted remote but holds no encryption config \
                     ({}); nothing was changed: if it was deleted, the data on it cannot be read \
                     (see docs/REMOTE.md)",
                    url.url,
                    c.shown("GET", crypt::CONFIG)
                )))
            }
            None => {}
        }
        Ok(c)
    }

    /// Sets the keys (a remote just made encrypted).
    pub fn set_keys(&mut self, keys: Keys) {
        self.keys = Some(Arc::new(keys));
    }

    /// The keys, if the remote is encrypted.
    pub fn keys(&self) -> Option<&Keys> {
        self.keys.as_deref()
    }

    /// Key of the record of checkpoint `id`.
    pub fn record_key(&self, id: &Hash) -> String {
        match self.keys() {
            Some(k) => layout::record_key(&k.name("record", &id.0)),
            None => layout::record_key(id),
        }
    }

    /// The directory of workspace `name`'s ref.
    pub fn ref_dir(&self, name: &str) -> String {
        match self.keys() {
            Some(k) => format!("refs/{}", k.name("workspace", name.as_bytes()).to_hex()),
            None => layout::ref_dir(name),
        }
    }

    /// The name of checkpoint `id`'s entry in a ref directory.
    pub fn entry_name(&self, id: &Hash) -> String {
        match self.keys() {
            Some(k) => k.name("entry", &id.0).to_hex(),
            None => id.to_hex(),
        }
    }

    /// `plain` as stored at `key`: sealed, bound to `key`, on an encrypted
    /// remote; as it is otherwise.
    pub fn seal(&self, key: &str, plain: Vec<u8>) -> Bytes {
        match self.keys() {
            Some(k) => Bytes::from(k.seal(key.as_bytes(), &plain)),
            None => Bytes::from(plain),
        }
    }

    /// What [`Client::seal`] stored at `key`, opened.
    pub fn unseal(&self, key: &str, stored: Bytes) -> Result<Bytes> {
        match self.keys() {
            Some(k) => k
                .open(key.as_bytes(), &stored)
                .map(Bytes::from)
                .ok_or_else(|| {
                    Error::Tampered(format!(
                        "{}: the object does not open with this remote's key: it was damaged, \
                     replaced or moved (tampered with); nothing was changed",
                        self.shown("GET", key)
                    ))
                }),
            None => Ok(stored),
        }
    }

    /// `GET key`, opened ([`Client::unseal`]).
    pub async fn get_sealed(&self, key: &str) -> Result<Option<Bytes>> {
        match self.get(key).await? {
            Some(b) => Ok(Some(self.unseal(key, b)?)),
            None => Ok(None),
        }
    }

    /// `PUT key` of `plain`, sealed ([`Client::seal`]).
    pub async fn put_sealed(&self, key: &str, plain: Vec<u8>) -> Result<()> {
        self.put(key, self.seal(key, plain)).await
    }

    /// How this client reaches the remote.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Requests to run at once.
    pub fn concurrency(&self) -> usize {
        self.settings.concurrency.max(1)
    }

    fn path(&self, key: &str) -> ObjPath {
        if self.prefix.as_ref().is_empty() {
            ObjPath::from(key)
        } else {
            ObjPath::from(format!("{}/{key}", self.prefix))
        }
    }

    /// `PUT s3://bucket/prefix/key` (for messages).
    pub fn shown(&self, method: &str, key: &str) -> String {
        format!("{method} {}/{key}", self.url.url.trim_end_matches('/'))
    }

    fn fail(&self, method: &str, key: &str, e: &object_store::Error) -> Error {
        use object_store::Error as E;
        let what = self.shown(method, key);
        let hint = match e {
            E::PermissionDenied { .. } | E::Unauthenticated { .. } => {
                "; the credentials were refused: check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY \
                 (or the profile in ~/.aws/credentials)"
            }
            _ if e.to_string().contains("NoSuchBucket") => {
                "; the bucket does not exist: create it, or fix the remote URL"
            }
            _ => "",
        };
        Error::Request(format!("{what} failed: {e}{hint}"))
    }

    async fn retry<T, F, Fut>(
        &self,
        method: &str,
        key: &str,
        mut f: F,
    ) -> Result<T, object_store::Error>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, object_store::Error>>,
    {
        let mut delay = self.settings.backoff;
        let mut attempt = 1;
        loop {
            if !self.counted_by_http {
                self.counters.requests.fetch_add(1, Ordering::Relaxed);
            }
            let permit = self.limit.acquire().await.expect("never closed");
            let r = f().await;
            drop(permit);
            match r {
                Ok(v) => return Ok(v),
                Err(e) if attempt < OUTER_ATTEMPTS.min(self.settings.attempts) && transient(&e) => {
                    if !self.counted_by_http {
                        self.counters.failed.fetch_add(1, Ordering::Relaxed);
                    }
                    let _ = (method, key);
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(std::time::Duration::from_secs(10));
                    attempt += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// `GET key`: `None` when it does not exist.
    pub async fn get(&self, key: &str) -> Result<Option<Bytes>> {
        let p = self.path(key);
        let r = self
            .retry("GET", key, || async {
                self.store.get(&p).await?.bytes().await
            })
            .await;
        match r {
            Ok(b) => {
                self.received(b.len());
                Ok(Some(b))
            }
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(self.fail("GET", key, &e)),
        }
    }

    /// `GET key`, decoded by `decode`. An object that exists but does not
    /// decode is read again, up to [`OUTER_ATTEMPTS`] times with doubling
    /// backoff, before its error is returned: on a server whose PUT is not
    /// atomic (s3rver rewrites the file in place) a reader can catch an
    /// object half-written while another pusher writes the same bytes
    /// again (a record, a ref entry, an index). A damaged object fails
    /// every time and is reported.
    pub async fn get_decoded<T>(
        &self,
        key: &str,
        decode: impl Fn(Bytes) -> Result<T>,
    ) -> Result<Option<T>> {
        let mut delay = self.settings.backoff;
        let mut attempt = 1;
        loop {
            let Some(b) = self.get(key).await? else {
                return Ok(None);
            };
            match decode(b) {
                Ok(v) => return Ok(Some(v)),
                Err(e) if attempt >= OUTER_ATTEMPTS => return Err(e),
                Err(_) => {
                    tokio::time::sleep(delay).await;
                    delay *= 2;
                    attempt += 1;
                }
            }
        }
    }

    /// `GET key` that must exist.
    pub async fn get_existing(&self, key: &str) -> Result<Bytes> {
        self.get(key).await?.ok_or_else(|| {
            Error::corrupt(format!(
                "{}: the object is missing from the remote",
                self.shown("GET", key)
            ))
        })
    }

    /// `GET key` for a byte range.
    pub async fn get_range(&self, key: &str, range: Range<u64>) -> Result<Bytes> {
        let p = self.path(key);
        let b = self
            .retry("GET", key, || self.store.get_range(&p, range.clone()))
            .await
            .map_err(|e| self.fail("GET (range)", key, &e))?;
        self.received(b.len());
        Ok(b)
    }

    fn received(&self, n: usize) {
        self.counters
            .bytes_received
            .fetch_add(n as u64, Ordering::Relaxed);
    }

    /// `PUT key` (overwriting: content-addressed keys only).
    pub async fn put(&self, key: &str, body: Bytes) -> Result<()> {
        let p = self.path(key);
        let n = body.len() as u64;
        self.retry("PUT", key, || {
            self.store.put_opts(
                &p,
                PutPayload::from_bytes(body.clone()),
                PutOptions::default(),
            )
        })
        .await
        .map_err(|e| self.fail("PUT", key, &e))?;
        self.counters.bytes_sent.fetch_add(n, Ordering::Relaxed);
        Ok(())
    }

    /// `PUT key` only if nothing is there (a conditional write:
    /// `If-None-Match: *` on S3).
    pub async fn create(&self, key: &str, body: Bytes) -> Result<Created> {
        let p = self.path(key);
        let n = body.len() as u64;
        let opts = || PutOptions {
            mode: PutMode::Create,
            ..PutOptions::default()
        };
        let mut first = true;
        let r = self
            .retry("PUT", key, || {
                let retried = !std::mem::replace(&mut first, false);
                let store = self.store.clone();
                let p = p.clone();
                let body = body.clone();
                async move {
                    match store
                        .put_opts(&p, PutPayload::from_bytes(body.clone()), opts())
                        .await
                    {
                        // A retry after a lost reply finds its own write.
                        Err(
                            object_store::Error::AlreadyExists { .. }
                            | object_store::Error::Precondition { .. },
                        ) if retried => {
                            let there = store.get(&p).await?.bytes().await?;
                            if there == body {
                                Ok(())
                            } else {
                                Err(object_store::Error::AlreadyExists {
                                    path: p.to_string(),
                                    source: "written by another client".into(),
                                })
                            }
                        }
                        r => r.map(|_| ()),
                    }
                }
            })
            .await;
        match r {
            Ok(()) => {
                self.counters.bytes_sent.fetch_add(n, Ordering::Relaxed);
                Ok(Created::Yes)
            }
            Err(
                object_store::Error::AlreadyExists { .. }
                | object_store::Error::Precondition { .. },
            ) => Ok(Created::AlreadyThere),
            Err(e) => Err(self.fail("PUT (create-if-absent)", key, &e)),
        }
    }

    /// `DELETE key` (absent is fine).
    pub async fn delete(&self, key: &str) -> Result<()> {
        let p = self.path(key);
        match self.retry("DELETE", key, || self.store.delete(&p)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(self.fail("DELETE", key, &e)),
        }
    }

    /// `LIST dir/`: every object below it, with its key relative to `dir`.
    /// A listing counts one request per 1000 keys (one page).
    pub async fn list(&self, dir: &str) -> Result<Vec<(String, ObjectMeta)>> {
        let p = self.path(dir);
        let base = format!("{}/", p.as_ref());
        let metas: Vec<ObjectMeta> = self
            .retry("LIST", dir, || {
                self.store.list(Some(&p)).try_collect::<Vec<_>>()
            })
            .await
            .or_else(|e| match e {
                object_store::Error::NotFound { .. } if !e.to_string().contains("NoSuchBucket") => {
                    Ok(Vec::new())
                }
                e => Err(e),
            })
            .map_err(|e| self.fail("LIST", &format!("{dir}/"), &e))?;
        if !self.counted_by_http {
            let pages = metas.len() as u64 / 1000;
            self.counters.requests.fetch_add(pages, Ordering::Relaxed);
        }
        Ok(metas
            .into_iter()
            .filter_map(|m| {
                let rel = m.location.as_ref().strip_prefix(&base)?.to_string();
                Some((rel, m))
            })
            .collect())
    }
}
