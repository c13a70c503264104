//! Group commit: the queue that turns concurrent [`GroupQueue::submit`] calls into ordered
//! batches, run one at a time by a leader.
//!
//! Owns the commit queue (queued intents, delivered results, ticket numbers, leadership)
//! and nothing else: what a batch does (validate, write one redb transaction, apply) is the
//! function the caller passes to `submit` (`Shared::process_batch`, module `shared`), so
//! this module knows neither the store nor its durability beyond "gather or not".
//!
//! A committer enqueues its intents under consecutive tickets and waits. The first waiter
//! to find no leader and a non-empty queue becomes the leader: in strict mode it may first
//! *gather* ([`GroupQueue::gather`]), then takes every queued intent (all of `pending`, in
//! arrival order), runs the batch function on them without holding the queue lock, stores
//! every result under its ticket, releases leadership and wakes everybody.
//!
//! Why it is correct:
//! - **one leader**: `Queue::leader` is true while a thread leads a batch or holds
//!   [`GroupQueue::exclusive`] (`gc`); it is only set under the queue lock after seeing it
//!   false, so batches run one at a time, in queue order, and never overlap a `gc`. Only
//!   the leader assigns versions, mutates the in-memory chains and writes commit rows, so
//!   versions are assigned, validated, written and applied in the same strictly
//!   increasing order;
//! - **every caller gets its own results**: results are keyed by ticket, tickets are
//!   handed out under the lock and never reused, and a caller returns only once every one
//!   of its tickets has a result; a batch is all of `pending`, so its tickets are
//!   consecutive;
//! - **liveness**: results are stored and `leader` cleared under the same lock, followed by
//!   `notify_all`; a waiter re-checks its results and the queue after every wake-up, so a
//!   caller whose intents are still queued when leadership is free leads them itself;
//! - **panic safety**: if a leader panics while running a batch (a bug), every other
//!   caller of that batch gets `CommitFailed` and leadership is released (`BatchGuard`),
//!   so no committer waits forever.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::error::{Error, Result};
use crate::mvcc::Intent;

#[derive(Default)]
struct Queue {
    pending: Vec<(u64, Intent)>,
    results: HashMap<u64, Result<u64>, foldhash::fast::RandomState>,
    leader: bool,
    next_ticket: u64,
    /// Size of the last strict group and how long writing it took (for gathering).
    last_group: usize,
    last_write: Duration,
}

/// The group-commit queue of one store. See the module documentation.
pub(crate) struct GroupQueue {
    queue: Mutex<Queue>,
    queue_cv: Condvar,
    /// Signalled when a commit is queued (a gathering leader waits on it).
    gather_cv: Condvar,
    /// Strict mode: a leader gathers before taking a batch ([`GroupQueue::gather`]).
    gather: bool,
}

/// Releases leadership on drop.
pub(crate) struct LeaderGuard<'a>(&'a GroupQueue);

/// Armed while a leader runs a batch. If the leader unwinds instead of delivering (a panic
/// in `process_batch`, which is a bug), it gives every other caller of the batch a failed
/// result and releases leadership, so no caller waits forever.
struct BatchGuard<'a> {
    queue: &'a GroupQueue,
    /// The batch's tickets (a batch is all of `pending`, whose tickets are consecutive).
    batch: std::ops::Range<u64>,
    /// The leader's own tickets: nobody will wait for them.
    own: std::ops::Range<u64>,
    armed: bool,
}

impl Drop for BatchGuard<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let mut q = self.queue.queue.lock();
        for t in self.batch.clone().filter(|t| !self.own.contains(t)) {
            q.results.insert(
                t,
                Err(Error::CommitFailed(
                    "the thread committing this group panicked (a bug in ckpt-state); the \
                     commit may or may not be on disk: reopen the store to see"
                        .into(),
                )),
            );
        }
        q.leader = false;
        self.queue.queue_cv.notify_all();
    }
}

impl Drop for LeaderGuard<'_> {
    fn drop(&mut self) {
        let mut q = self.0.queue.lock();
        q.leader = false;
        self.0.queue_cv.notify_all();
    }
}

impl GroupQueue {
    /// `gather`: let leaders wait for the previous group's size before taking a batch
    /// (strict mode, where a batch costs an fsync).
    pub(crate) fn new(gather: bool) -> Self {
        GroupQueue {
            queue: Mutex::new(Queue::default()),
            queue_cv: Condvar::new(),
            gather_cv: Condvar::new(),
            gather,
        }
    }

    /// Become leader, waiting for the current one (used by gc).
    pub(crate) fn exclusive(&self) -> LeaderGuard<'_> {
        let mut q = self.queue.lock();
        while q.leader {
            self.queue_cv.wait(&mut q);
        }
        q.leader = true;
        LeaderGuard(self)
    }

    /// Submit intents as one group (in order) and wait for their results. A caller that
    /// becomes leader runs `process` on the whole batch (`(ticket, intent)` in queue order),
    /// which returns one `(ticket, result)` per intent.
    pub(crate) fn submit(
        &self,
        intents: Vec<Intent>,
        process: impl Fn(Vec<(u64, Intent)>) -> Vec<(u64, Result<u64>)>,
    ) -> Vec<Result<u64>> {
        let mut q = self.queue.lock();
        let first = q.next_ticket;
        let n = intents.len() as u64;
        q.next_ticket += n;
        for (i, intent) in intents.into_iter().enumerate() {
            q.pending.push((first + i as u64, intent));
        }
        self.gather_cv.notify_one();
        let mut out: Vec<Option<Result<u64>>> = (0..n).map(|_| None).collect();
        let mut missing = n;
        loop {
            for t in first..first + n {
                let slot = &mut out[(t - first) as usize];
                if slot.is_none() {
                    if let Some(r) = q.results.remove(&t) {
                        *slot = Some(r);
                        missing -= 1;
                    }
                }
            }
            if missing == 0 {
                return out.into_iter().map(|r| r.expect("result")).collect();
            }
            if !q.leader && !q.pending.is_empty() {
                q.leader = true;
                if self.gather {
                    self.gather(&mut q);
                }
                let batch = std::mem::take(&mut q.pending);
                let group = batch.len();
                let mut guard = BatchGuard {
                    queue: self,
                    batch: batch[0].0..batch[group - 1].0 + 1,
                    own: first..first + n,
                    armed: true,
                };
                debug_assert_eq!(guard.batch.end - guard.batch.start, group as u64);
                drop(q);
                let started = Instant::now();
                let results = process(batch);
                let took = started.elapsed();
                guard.armed = false;
                q = self.queue.lock();
                q.last_group = group;
                q.last_write = took;
                q.results.extend(results);
                q.leader = false;
                self.queue_cv.notify_all();
                continue;
            }
            self.queue_cv.wait(&mut q);
        }
    }

    /// Strict-mode group forming: when the previous group had several members, the leader
    /// waits (at most the previous write's duration, capped at 4 ms) until as many
    /// commits are queued as were in that group. Without this, closed-loop writers fall
    /// into alternating groups of 1 and N-1 (the first to come back leads alone while the
    /// others are still waking up). The wait ends as soon as the group is full, and costs
    /// nothing for a lone writer (previous group of 1).
    fn gather(&self, q: &mut parking_lot::MutexGuard<'_, Queue>) {
        if q.last_group <= 1 || q.pending.len() >= q.last_group {
            return;
        }
        let max = q.last_write.min(Duration::from_millis(4));
        let deadline = Instant::now() + max;
        while q.pending.len() < q.last_group {
            if self.gather_cv.wait_until(q, deadline).timed_out() {
                break;
            }
        }
    }

    /// Number of queued intents not yet taken by a leader (tests wait for a batch to form).
    #[cfg(test)]
    pub(crate) fn pending_len(&self) -> usize {
        self.queue.lock().pending.len()
    }
}
