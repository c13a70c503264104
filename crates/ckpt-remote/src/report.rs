//! The summary every remote operation reports: objects, bytes sent and
//! received, requests, time.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::{json, Value};

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

/// What went over the wire.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
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
    pub elapsed: Duration,
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

    /// The JSON fields (merged into a report object).
    pub fn to_json(&self) -> Value {
        json!({
            "objects": self.objects,
            "raw_bytes": self.raw_bytes,
            "bytes_sent": self.bytes_sent,
            "bytes_received": self.bytes_received,
            "requests": self.requests,
            "failed_requests": self.failed_requests,
            "packs": self.packs,
            "elapsed_ms": ckpt_lib::ops::json::ms(self.elapsed),
        })
    }
}

/// `obj` with the transfer fields added.
pub fn with_transfer(mut obj: Value, t: &Transfer) -> Value {
    if let (Some(m), Value::Object(t)) = (obj.as_object_mut(), t.to_json()) {
        m.extend(t);
    }
    obj
}
