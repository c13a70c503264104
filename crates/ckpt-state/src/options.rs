//! Configuration: durability modes, open options and retry policy.
//!
//! Owns [`Durability`], [`Options`] and [`RetryPolicy`]. Invariants: defaults are the safe
//! choice (strict durability, a lock timeout long enough for another ckpt command to
//! finish), and every knob documents its failure/loss semantics.

use std::time::Duration;

/// When a commit's data reaches stable storage relative to `commit()` returning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// `commit()` returns only after the commit is in a redb transaction that has been
    /// fsync'd. Concurrent commits share one redb transaction and one fsync (group commit).
    /// A crash loses nothing that was acknowledged. Readers never observe a commit before it
    /// is durable.
    #[default]
    Strict,
    /// `commit()` returns once the commit is validated and visible in memory; a background
    /// flusher writes all pending commits in one fsync'd redb transaction at most
    /// `window_ms` after the oldest of them was acknowledged. A crash loses at most the
    /// commits acknowledged during the last `window_ms` plus the duration of one flush
    /// (one redb commit + fsync). What is lost is always a suffix of the history: never a
    /// partial transaction, never a commit without the commits before it.
    Batched {
        /// Upper bound (milliseconds) between acknowledgement and the start of the flush
        /// that makes a commit durable. Must be ≥ 1.
        window_ms: u64,
    },
    /// For tests and benchmarks: commits are kept in memory and written to redb (with an
    /// fsync) only when 4096 of them are pending, on `flush()`, `gc()` or when the store is
    /// closed/dropped. A crash may lose every commit since the last such write (again only
    /// ever a suffix, never a partial transaction).
    None,
}

/// Options for [`crate::StateStore::open`].
#[derive(Debug, Clone)]
pub struct Options {
    /// Durability of commits. Default: [`Durability::Strict`].
    pub durability: Durability,
    /// How long `open` waits for another process that holds the store. Default: 30 s.
    pub lock_timeout: Duration,
    /// redb page-cache budget in bytes. Reads are served from memory, so the cache only
    /// matters for writes and opening. Default: 64 MiB.
    pub cache_size: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            durability: Durability::Strict,
            lock_timeout: Duration::from_secs(30),
            cache_size: 64 << 20,
        }
    }
}

impl Options {
    /// Default options with the given durability.
    pub fn with_durability(durability: Durability) -> Self {
        Options {
            durability,
            ..Options::default()
        }
    }
}

/// How `transaction_with_retry` retries on conflict: up to `max_attempts` runs of the
/// closure, sleeping an exponentially growing, jittered backoff between runs.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    /// Total runs of the closure (≥ 1). Default 64.
    pub max_attempts: u32,
    /// Backoff before the second attempt; doubles each retry. Default 50 µs.
    pub initial_backoff: Duration,
    /// Cap on one backoff. Default 20 ms.
    pub max_backoff: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 64,
            initial_backoff: Duration::from_micros(50),
            max_backoff: Duration::from_millis(20),
        }
    }
}

impl RetryPolicy {
    /// Run the closure once, never retry.
    pub fn no_retry() -> Self {
        RetryPolicy {
            max_attempts: 1,
            ..RetryPolicy::default()
        }
    }

    /// Backoff before attempt `attempt + 1` (attempt counts from 1), with ±50 % jitter
    /// drawn from `seed`.
    pub(crate) fn backoff(&self, attempt: u32, seed: u64) -> Duration {
        let base = self
            .initial_backoff
            .saturating_mul(1u32 << attempt.saturating_sub(1).min(20));
        let base = base.min(self.max_backoff);
        // jitter in [0.5, 1.5)
        let r = splitmix(seed) % 1000;
        base.mul_f64(0.5 + r as f64 / 1000.0)
    }
}

pub(crate) fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
