//! Remote URLs and the object store each one opens.
//!
//! | URL | backend |
//! |---|---|
//! | `s3://bucket[/prefix]` | S3 and compatible servers (R2, MinIO, Ceph): endpoint, region and credentials from [`Settings::options`] (`aws_*` keys) |
//! | `gs://bucket[/prefix]` | Google Cloud Storage (`google_*` keys) |
//! | `az://container[/prefix]` | Azure Blob Storage (`azure_*` keys) |
//! | `file:///path` | a directory (a shared filesystem) |
//!
//! Anything else is refused before any request, naming the schemes that
//! work. Conditional writes (create-if-absent), which the refs need, are
//! supported by all four (S3 through `If-None-Match`).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use object_store::client::{
    HttpClient, HttpConnector, HttpError, HttpRequest, HttpResponse, HttpService, ReqwestConnector,
};
use object_store::path::Path as ObjPath;
use object_store::{BackoffConfig, ClientOptions, ObjectStore, RetryConfig};

use crate::report::Counters;
use crate::{usage, Result, Settings};

/// A parsed remote URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemoteUrl {
    /// The URL as given.
    pub url: String,
    /// `s3`, `gs`, `az` or `file`.
    pub scheme: String,
    /// Bucket or container (empty for `file`).
    pub bucket: String,
    /// Key prefix inside the bucket (for `file`, the directory).
    pub prefix: String,
}

const SCHEMES: &str =
    "s3://bucket/prefix, gs://bucket/prefix, az://container/prefix or file:///path";

impl RemoteUrl {
    /// Parses `s3://bucket/prefix` and friends.
    pub fn parse(url: &str) -> Result<RemoteUrl> {
        let bad = |why: &str| {
            usage(format!(
                "remote URL {url:?}: {why}; use {SCHEMES} (nothing was changed)"
            ))
        };
        let (scheme, rest) = url.split_once("://").ok_or_else(|| bad("no scheme"))?;
        match scheme {
            "s3" | "gs" | "az" => {
                let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
                if bucket.is_empty() {
                    return Err(bad("no bucket"));
                }
                Ok(RemoteUrl {
                    url: url.to_string(),
                    scheme: scheme.into(),
                    bucket: bucket.into(),
                    prefix: prefix.trim_matches('/').into(),
                })
            }
            "file" => {
                if !rest.starts_with('/') {
                    return Err(bad("a file URL needs an absolute path (file:///path)"));
                }
                Ok(RemoteUrl {
                    url: url.to_string(),
                    scheme: scheme.into(),
                    bucket: String::new(),
                    prefix: rest.trim_end_matches('/').into(),
                })
            }
            other => Err(bad(&format!("unknown scheme {other:?}"))),
        }
    }

    /// Opens the object store and the key prefix everything lives under.
    /// Over HTTP every request, each retry included, is counted in
    /// `counted` (see [`crate::client`]); returns whether that is so.
    pub fn open(
        &self,
        s: &Settings,
        counted: &Arc<Counters>,
    ) -> Result<(Arc<dyn ObjectStore>, ObjPath, bool)> {
        // object_store retries transient failures (5xx, resets, timeouts)
        // with exponential backoff and jitter, starting at `s.backoff`.
        let retry = RetryConfig {
            max_retries: s.attempts.saturating_sub(1) as usize,
            retry_timeout: s.timeout * 2,
            backoff: BackoffConfig {
                init_backoff: s.backoff,
                max_backoff: Duration::from_secs(10),
                base: 2.0,
            },
        };
        let connector = || CountingConnector(counted.clone());
        let client = |endpoint_http: bool| {
            ClientOptions::new()
                .with_timeout(s.timeout)
                .with_connect_timeout(std::time::Duration::from_secs(10))
                .with_allow_http(endpoint_http)
        };
        let err = |e: object_store::Error| {
            usage(format!(
                "remote {}: cannot configure the client: {e} (nothing was changed)",
                self.url
            ))
        };
        let opt = |k: &str| {
            s.options
                .iter()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v.clone())
        };
        let store: Arc<dyn ObjectStore> = match self.scheme.as_str() {
            "s3" => {
                let mut b = object_store::aws::AmazonS3Builder::new();
                for (k, v) in &s.options {
                    if let Ok(key) = k.parse::<object_store::aws::AmazonS3ConfigKey>() {
                        b = b.with_config(key, v);
                    }
                }
                let http = opt("aws_endpoint")
                    .or_else(|| opt("aws_endpoint_url"))
                    .is_some_and(|e| e.starts_with("http://"));
                b = b
                    .with_bucket_name(&self.bucket)
                    .with_retry(retry)
                    .with_http_connector(connector())
                    .with_client_options(client(http));
                if opt("aws_region").is_none() && opt("aws_default_region").is_none() {
                    b = b.with_region("us-east-1");
                }
                Arc::new(b.build().map_err(err)?)
            }
            "gs" => {
                let mut b = object_store::gcp::GoogleCloudStorageBuilder::new();
                for (k, v) in &s.options {
                    if let Ok(key) = k.parse::<object_store::gcp::GoogleConfigKey>() {
                        b = b.with_config(key, v);
                    }
                }
                Arc::new(
                    b.with_bucket_name(&self.bucket)
                        .with_retry(retry)
                        .with_http_connector(connector())
                        .with_client_options(client(false))
                        .build()
                        .map_err(err)?,
                )
            }
            "az" => {
                let mut b = object_store::azure::MicrosoftAzureBuilder::new();
                for (k, v) in &s.options {
                    if let Ok(key) = k.parse::<object_store::azure::AzureConfigKey>() {
                        b = b.with_config(key, v);
                    }
                }
                Arc::new(
                    b.with_container_name(&self.bucket)
                        .with_retry(retry)
                        .with_http_connector(connector())
                        .with_client_options(client(false))
                        .build()
                        .map_err(err)?,
                )
            }
            _ => {
                std::fs::create_dir_all(&self.prefix).map_err(|e| {
                    crate::Error::io("create the remote directory", &self.prefix, e)
                })?;
                let fs = object_store::local::LocalFileSystem::new_with_prefix(&self.prefix)
                    .map_err(err)?;
                return Ok((Arc::new(fs), ObjPath::default(), false));
            }
        };
        Ok((store, ObjPath::from(self.prefix.as_str()), true))
    }
}

/// object_store's own HTTP client (reqwest), with every request it makes
/// (retries included) counted.
#[derive(Debug)]
struct CountingConnector(Arc<Counters>);

#[derive(Debug)]
struct Counting {
    inner: HttpClient,
    counters: Arc<Counters>,
}

impl HttpConnector for CountingConnector {
    fn connect(&self, options: &ClientOptions) -> object_store::Result<HttpClient> {
        Ok(HttpClient::new(Counting {
            inner: ReqwestConnector::default().connect(options)?,
            counters: self.0.clone(),
        }))
    }
}

#[async_trait::async_trait]
impl HttpService for Counting {
    async fn call(&self, req: HttpRequest) -> std::result::Result<HttpResponse, HttpError> {
        self.counters.requests.fetch_add(1, Ordering::Relaxed);
        let r = self.inner.execute(req).await;
        let transient = match &r {
            Ok(resp) => resp.status().is_server_error() || resp.status().as_u16() == 429,
            Err(_) => true,
        };
        if transient {
            self.counters.failed.fetch_add(1, Ordering::Relaxed);
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_schemes_and_refuses_others() {
        let u = RemoteUrl::parse("s3://b/some/prefix/").unwrap();
        assert_eq!((u.bucket.as_str(), u.prefix.as_str()), ("b", "some/prefix"));
        let u = RemoteUrl::parse("gs://b").unwrap();
        assert_eq!((u.scheme.as_str(), u.prefix.as_str()), ("gs", ""));
        assert_eq!(RemoteUrl::parse("az://c/p").unwrap().bucket, "c");
        assert_eq!(
            RemoteUrl::parse("file:///srv/ckpt").unwrap().prefix,
            "/srv/ckpt"
        );
        for bad in ["ftp://x/y", "s3://", "file://rel", "nothing"] {
            let e = RemoteUrl::parse(bad).unwrap_err().to_string();
            assert!(e.contains("s3://bucket/prefix"), "{bad}: {e}");
        }
        assert!(RemoteUrl::parse("ftp://x")
            .unwrap_err()
            .to_string()
            .contains("unknown scheme \"ftp\""));
    }
}
