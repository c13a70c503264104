//! The summary every remote operation reports (objects, bytes sent and
//! received, requests, time), and the serde helpers the reports' JSON
//! forms share.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Serialize, Serializer};

/// Requests and bytes of one operation.
#[derive(Debug, Default)]
pub struct Counters {
    /// Requests made (each attempt, each page of a listing).
    pub requests: AtomicU64,
    /// Bytes sent in request bodies.
    pub bytes_sent: AtomicU64,
    /// Bytes received in response bodies.
    pub bytes_received: AtomicU64,
    /// Requests that failed transiently (a 5xx or 429 answer, a reset, a
    /// timeout) and were retried or reported.
    pub failed: AtomicU64,
}

/// What went over the wire. Its JSON fields (`elapsed` as `elapsed_ms`)
/// are part of every report's.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Transfer {
    /// Blobs (file contents, trees, mtimes nodes, state snapshots) sent or
    /// received.
    pub objects: u64,
    /// Their raw (uncompressed) bytes.
    pub raw_bytes: u64,
    /// Bytes sent in request bodies.
    pub bytes_sent: u64,
    /// Bytes received in response bodies.
    pub bytes_received: u64,
    /// Requests made (each retry and each listing page counts).
    pub requests: u64,
    /// Of those, requests that failed transiently (5xx, reset, timeout)
    /// and were retried.
    pub failed_requests: u64,
    /// Packs uploaded or downloaded.
    pub packs: u64,
    /// Wall time.
    #[serde(
        rename = "elapsed_ms",
        serialize_with = "ckpt_lib::ops::json::with::ms"
    )]
    #[schemars(with = "f64")]
    pub elapsed: Duration,
}

/// A checkpoint's id here and on the remote.
#[derive(Serialize, JsonSchema)]
pub(crate) struct IdPair<'a> {
    /// Its id in the local store (`v12`).
    id: &'a str,
    /// Its id on the remote.
    remote_id: &'a str,
}

/// (local id, remote id) pairs as `[{id, remote_id}]`.
pub(crate) fn local_remote<S: Serializer>(v: &[(String, String)], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(v.iter().map(|(l, r)| IdPair {
        id: l,
        remote_id: r,
    }))
}

/// A checkpoint's id on the remote and here (what `pull` lists: the
/// remote's first).
#[derive(Serialize, JsonSchema)]
pub(crate) struct RemoteIdPair<'a> {
    /// Its id on the remote.
    remote_id: &'a str,
    /// Its id in the local store (`v12`).
    id: &'a str,
}

/// (remote id, local id) pairs as `[{remote_id, id}]`.
pub(crate) fn remote_local<S: Serializer>(v: &[(String, String)], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(v.iter().map(|(r, l)| RemoteIdPair {
        remote_id: r,
        id: l,
    }))
}

impl Transfer {
    /// Fills the counters from a client.
    pub fn counted(mut self, c: &Counters, elapsed: Duration) -> Transfer {
        self.bytes_sent = c.bytes_sent.load(Ordering::Relaxed);
        self.bytes_received = c.bytes_received.load(Ordering::Relaxed);
        self.requests = c.requests.load(Ordering::Relaxed);
        self.failed_requests = c.failed.load(Ordering::Relaxed);
        self.elapsed = elapsed;
        self
    }
}
