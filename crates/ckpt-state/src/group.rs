//! Group commit: the queue that turns concurrent [`GroupQueue::submit`] calls into
//! ordered batches, run one at a time by a leader.
//!
//! A caller queues its items and waits. The first caller to find no leader becomes the
//! leader: it may first *gather* (wait briefly until as many callers have queued as were
//! active around the recent batches), then takes every queued item in arrival order, runs the batch
//! function on them without holding the queue lock, writes each caller's results into
//! that caller's slot, and releases leadership. If callers queued meanwhile, the first of
//! them is offered it: it claims it unless another caller already has (a caller that is
//! running claims at once, instead of waiting for a sleeping one to be woken; handing
//! leadership to the sleeper made 8 CPU-bound batched committers 2× slower). The store
//! uses it with a batch function that validates, writes one redb transaction (one fsync
//! in strict mode) and applies.
//!
//! **Waiting.** A waiting caller first yield-spins on its own slot for twice the last
//! batch's duration, if that batch took at most [`SPIN_IF_BATCH_UNDER`] (a wake-up delay
//! matters next to a 0.2 ms fsync, not next to a 4 ms one). Then it marks the slot
//! `SLEEPING` and sleeps on the slot's state word (a futex, see `wake`). The leader
//! stores `DONE` or `OFFER` and makes a wake-up system call only for a slot that was
//! `SLEEPING`, so a spinning caller costs it nothing and no caller is woken for a slot
//! that did not change. Why not a condition variable: waking N callers through one takes
//! N hand-offs of its lock in a row, one scheduling delay each (≈ 9 µs on a 2-vCPU VM),
//! and with 8 writers that chain cost a quarter of the group's cycle (BENCHMARKS.md,
//! session 7). The spin fills time in which the leader is blocked in fsync, and yields
//! the CPU on every turn.
//!
//! Invariants:
//! - **one leader**: `State::leader` is true while a thread leads (or holds
//!   [`GroupQueue::exclusive`]); only the leader runs a batch, so batches run one at a
//!   time and in queue order;
//! - **liveness**: whenever items are queued, `leader` is true, or the first queued caller
//!   has been offered leadership (slot `OFFER`), or an `exclusive` waiter has been told
//!   it is free (and offers it on when done); a caller whose offer finds another leader
//!   waits again, and that leader offers again when it finishes;
//! - **no lost wake-up**: a slot's results are stored before its state becomes `DONE`;
//!   a caller sleeps only after its own compare-exchange `WAITING → SLEEPING` succeeded,
//!   and only while the state is still `SLEEPING`; the leader's swap to `DONE`/`OFFER`
//!   returns `SLEEPING` exactly when it must wake the caller;
//! - **panic safety**: if the batch function panics, every caller of that batch gets the
//!   `failed` result and leadership is released (no caller waits forever).

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, MutexGuard};

use crate::wake;

/// Waiters spin (for twice the last batch's duration) only if it took at most this long.
const SPIN_IF_BATCH_UNDER: Duration = Duration::from_micros(500);
/// Upper bound of a gathering leader's wait.
const MAX_GATHER: Duration = Duration::from_millis(4);
/// Of which at most this much is spent spinning (callers that come back from a delivery
/// queue again within a few µs each); the rest sleeps on `arrived`.
const GATHER_SPIN: Duration = Duration::from_micros(100);
/// Number of recent batches whose largest count of active callers is the gathering
/// target.
const RECENT: usize = 8;

const WAITING: u32 = 0;
/// Waiting and asleep on the state word: whoever changes it must wake the caller.
const SLEEPING: u32 = 1;
const DONE: u32 = 2;
/// Leadership was released while this caller was first in the queue: claim it.
const OFFER: u32 = 3;

/// One caller's mailbox.
struct Slot<R> {
    state: AtomicU32,
    results: Mutex<Vec<R>>,
}

impl<R> Slot<R> {
    /// Set `DONE` or `OFFER`, waking the caller if it sleeps.
    fn signal(&self, to: u32) {
        if self.state.swap(to, SeqCst) == SLEEPING {
            wake::wake(&self.state);
        }
    }
}

struct Entry<T, R> {
    items: Vec<T>,
    slot: Arc<Slot<R>>,
}

struct State<T, R> {
    pending: Vec<Entry<T, R>>,
    leader: bool,
    exclusive_waiting: usize,
    /// Active callers at the end of each of the last [`RECENT`] batches (ring): the
    /// batch's own callers (which, committing in a loop, come back) plus those that queued
    /// while it ran. Cleared when a gather times out.
    recent: [usize; RECENT],
    recent_at: usize,
    /// How long the last batch function took.
    last_batch: Duration,
}

/// See the module documentation. `T`: an item (a commit intent); `R`: its result.
pub(crate) struct GroupQueue<T, R> {
    state: Mutex<State<T, R>>,
    /// `pending.len()`, readable without the lock (a gathering leader polls it).
    queued: AtomicUsize,
    /// Signalled when a caller queues while a leader exists (a gathering leader sleeps on it).
    arrived: Condvar,
    /// Signalled when leadership is released while an `exclusive` caller waits.
    released: Condvar,
    /// Current spin budget of a waiter, in ns.
    spin_ns: AtomicU64,
    gather: bool,
}

impl<T, R> GroupQueue<T, R> {
    /// `gather`: let leaders wait for the recently active callers before running a batch
    /// (worth it only when a batch costs much more than forming one, e.g. an fsync).
    pub(crate) fn new(gather: bool) -> Self {
        GroupQueue {
            state: Mutex::new(State {
                pending: Vec::new(),
                leader: false,
                exclusive_waiting: 0,
                recent: [0; RECENT],
                recent_at: 0,
                last_batch: Duration::ZERO,
            }),
            queued: AtomicUsize::new(0),
            arrived: Condvar::new(),
            released: Condvar::new(),
            spin_ns: AtomicU64::new(0),
            gather,
        }
    }

    /// Queue `items` as one unit (they stay together and in order within a batch) and
    /// wait until a leader ran them; returns their results in order. If this caller
    /// becomes the leader it runs `run` on the whole batch, which must return one result
    /// per item in order. `failed` makes the result given to callers whose batch
    /// panicked.
    pub(crate) fn submit(
        &self,
        items: Vec<T>,
        run: impl FnOnce(Vec<T>) -> Vec<R>,
        failed: impl Fn() -> R,
    ) -> Vec<R> {
        let slot = Arc::new(Slot {
            state: AtomicU32::new(WAITING),
            results: Mutex::new(Vec::new()),
        });
        let lead = {
            let mut st = self.state.lock();
            st.pending.push(Entry {
                items,
                slot: slot.clone(),
            });
            self.queued.store(st.pending.len(), SeqCst);
            if st.leader {
                self.arrived.notify_one();
                false
            } else {
                st.leader = true;
                true
            }
        };
        if lead || self.wait(&slot) {
            self.lead(run, failed);
        }
        debug_assert_eq!(slot.state.load(SeqCst), DONE);
        let results = std::mem::take(&mut *slot.results.lock());
        results
    }

    /// Become the leader without queueing anything (for work that must not overlap a
    /// batch, e.g. garbage collection); leadership is released when the guard drops.
    pub(crate) fn exclusive(&self) -> Exclusive<'_, T, R> {
        let mut st = self.state.lock();
        st.exclusive_waiting += 1;
        while st.leader {
            self.released.wait(&mut st);
        }
        st.exclusive_waiting -= 1;
        st.leader = true;
        Exclusive(self)
    }

    /// Wait until the slot is `DONE` (returns false) or this caller has claimed the
    /// leadership offered to it (returns true).
    fn wait(&self, slot: &Slot<R>) -> bool {
        loop {
            if self.wait_for_change(slot) == DONE {
                return false;
            }
            let mut st = self.state.lock();
            if slot.state.load(SeqCst) == DONE {
                return false; // a leader that claimed first ran our items and finished
            }
            if !st.leader {
                st.leader = true;
                return true;
            }
            // Another caller claimed it first; it runs or re-offers our items.
            if slot
                .state
                .compare_exchange(OFFER, WAITING, SeqCst, SeqCst)
                .is_err()
            {
                return false; // DONE meanwhile
            }
        }
    }

    /// Spin, then sleep, until the slot is `DONE` or `OFFER`; returns which.
    fn wait_for_change(&self, slot: &Slot<R>) -> u32 {
        let spin = Duration::from_nanos(self.spin_ns.load(SeqCst));
        let started = Instant::now();
        loop {
            let s = slot.state.load(SeqCst);
            if s != WAITING {
                return s;
            }
            if started.elapsed() >= spin {
                break;
            }
            std::thread::yield_now();
        }
        if let Err(s) = slot
            .state
            .compare_exchange(WAITING, SLEEPING, SeqCst, SeqCst)
        {
            return s;
        }
        loop {
            wake::wait(&slot.state, SLEEPING);
            let s = slot.state.load(SeqCst);
            if s != SLEEPING {
                return s;
            }
        }
    }

    /// Run one batch as the leader, deliver its results, pass leadership on.
    fn lead(&self, run: impl FnOnce(Vec<T>) -> Vec<R>, failed: impl Fn() -> R) {
        let batch = {
            let mut st = self.state.lock();
            if self.gather {
                self.gather(&mut st);
            }
            self.queued.store(0, SeqCst);
            std::mem::take(&mut st.pending)
        };
        let mut items = Vec::new();
        let mut delivery = Delivery {
            queue: self,
            slots: Vec::with_capacity(batch.len()),
            callers: batch.len(),
            failed: &failed,
            took: None,
        };
        for entry in batch {
            delivery.slots.push((entry.slot, entry.items.len()));
            items.extend(entry.items);
        }
        let started = Instant::now();
        let results = run(items);
        delivery.took = Some(started.elapsed());
        delivery.deliver(results);
    }

    /// Wait (bounded) until as many callers have queued as were active at the end of the
    /// recent batches (the largest count). Without this, closed-loop writers fall into
    /// groups that never merge: the first to come back leads alone while the others are
    /// still waking up, and two writers alternate in groups of one, each writing while the
    /// other queues. Costs nothing for a lone writer.
    fn gather(&self, st: &mut MutexGuard<'_, State<T, R>>) {
        let target = st.recent.iter().copied().max().unwrap_or(0);
        if target <= 1 || st.pending.len() >= target {
            return;
        }
        let now = Instant::now();
        let deadline = now + st.last_batch.min(MAX_GATHER);
        let spin_until = now + st.last_batch.min(GATHER_SPIN);
        MutexGuard::unlocked(st, || {
            while self.queued.load(SeqCst) < target && Instant::now() < spin_until {
                std::thread::yield_now();
            }
        });
        while st.pending.len() < target {
            if self.arrived.wait_until(st, deadline).timed_out() {
                // Fewer callers than before: forget the old sizes, so that only this
                // group's size (recorded next) sets the next target.
                st.recent = [0; RECENT];
                break;
            }
        }
    }

    /// Release leadership; offer it to the first queued caller unless an `exclusive`
    /// caller waits (which then offers it when done).
    fn pass_on(&self, st: &mut State<T, R>) {
        st.leader = false;
        if st.exclusive_waiting > 0 {
            self.released.notify_all();
        } else if let Some(first) = st.pending.first() {
            first.slot.signal(OFFER);
        }
    }
}

/// How long a waiter spins, given how long the last batch took.
fn spin_budget(last_batch: Duration) -> Duration {
    if last_batch <= SPIN_IF_BATCH_UNDER {
        2 * last_batch
    } else {
        Duration::ZERO
    }
}

/// The callers of one running batch: delivers their results, or `failed` ones if the
/// batch function panics, and passes leadership on either way.
struct Delivery<'q, T, R, F: Fn() -> R> {
    queue: &'q GroupQueue<T, R>,
    /// Each caller's slot and number of items, in batch order.
    slots: Vec<(Arc<Slot<R>>, usize)>,
    /// Number of callers in the batch.
    callers: usize,
    failed: &'q F,
    /// How long the batch function took; `None` if it panicked.
    took: Option<Duration>,
}

impl<T, R, F: Fn() -> R> Delivery<'_, T, R, F> {
    fn deliver(mut self, results: Vec<R>) {
        let mut results = results.into_iter();
        for (slot, n) in std::mem::take(&mut self.slots) {
            let mut mine: Vec<R> = results.by_ref().take(n).collect();
            // A batch function that returned too few results fails the rest.
            mine.extend((mine.len()..n).map(|_| (self.failed)()));
            *slot.results.lock() = mine;
            slot.signal(DONE);
        }
        // `self` drops here: leadership is passed on.
    }
}

impl<T, R, F: Fn() -> R> Drop for Delivery<'_, T, R, F> {
    fn drop(&mut self) {
        // Non-empty only if the batch function panicked before `deliver`.
        for (slot, n) in self.slots.drain(..) {
            *slot.results.lock() = (0..n).map(|_| (self.failed)()).collect();
            slot.signal(DONE);
        }
        let q = self.queue;
        if let Some(took) = self.took {
            q.spin_ns.store(spin_budget(took).as_nanos() as u64, SeqCst);
        }
        {
            let mut st = q.state.lock();
            if let Some(took) = self.took {
                st.last_batch = took;
            }
            let at = st.recent_at;
            st.recent[at] = self.callers + st.pending.len();
            st.recent_at = (at + 1) % RECENT;
            q.pass_on(&mut st);
        }
    }
}

/// Leadership held by [`GroupQueue::exclusive`]; passed on when dropped.
pub(crate) struct Exclusive<'q, T, R>(&'q GroupQueue<T, R>);

impl<T, R> Drop for Exclusive<'_, T, R> {
    fn drop(&mut self) {
        self.0.pass_on(&mut self.0.state.lock());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::panic::{catch_unwind, AssertUnwindSafe};
    use std::sync::atomic::AtomicBool;
    use std::sync::mpsc;

    type Q = GroupQueue<(usize, usize, usize), Result<(usize, usize, usize), ()>>;

    /// Run `f` on a thread; fail (instead of hanging) if it has not finished in a minute:
    /// a lost wake-up or a leaked leadership shows up as a hang.
    fn within_a_minute(f: impl FnOnce() + Send + 'static) {
        let (tx, rx) = mpsc::channel();
        let h = std::thread::spawn(move || {
            f();
            let _ = tx.send(());
        });
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(()) => h.join().unwrap(),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                if let Err(p) = h.join() {
                    std::panic::resume_unwind(p)
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => panic!("group queue hung (deadlock)"),
        }
    }

    fn wait_until_queued(q: &Q, n: usize) {
        while q.queued.load(SeqCst) != n {
            std::thread::yield_now();
        }
    }

    /// Many threads, random unit sizes, slow and fast batches (so waiters both spin and
    /// sleep): batches never overlap, every caller gets exactly its own items back in
    /// order, every item runs exactly once, and a thread's submissions run in its order.
    fn stress(gather: bool, threads: usize, rounds: usize, slow_every: usize) {
        let q = Arc::new(Q::new(gather));
        let running = Arc::new(AtomicBool::new(false));
        let log = Arc::new(Mutex::new(Vec::new()));
        let hs: Vec<_> = (0..threads)
            .map(|t| {
                let (q, running, log) = (q.clone(), running.clone(), log.clone());
                std::thread::spawn(move || {
                    for r in 0..rounds {
                        let items: Vec<_> = (0..1 + (t + r) % 3).map(|i| (t, r, i)).collect();
                        let expect: Vec<_> = items.iter().map(|&x| Ok(x)).collect();
                        let got = q.submit(
                            items,
                            |batch| {
                                assert!(!running.swap(true, SeqCst), "two batches overlapped");
                                if slow_every > 0 && r % slow_every == 0 {
                                    std::thread::sleep(Duration::from_millis(3));
                                }
                                log.lock().extend(batch.iter().copied());
                                running.store(false, SeqCst);
                                batch.into_iter().map(Ok).collect()
                            },
                            || Err(()),
                        );
                        assert_eq!(
                            got, expect,
                            "thread {t} round {r} got another caller's results"
                        );
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        let log = log.lock();
        let total: usize = (0..threads)
            .map(|t| (0..rounds).map(|r| 1 + (t + r) % 3).sum::<usize>())
            .sum();
        assert_eq!(log.len(), total, "some item ran twice or never");
        for t in 0..threads {
            let mine: Vec<_> = log.iter().filter(|x| x.0 == t).collect();
            let mut sorted = mine.clone();
            sorted.sort();
            assert_eq!(mine, sorted, "thread {t}'s items ran out of order");
        }
    }

    #[test]
    fn batches_are_serial_complete_and_ordered_with_gathering() {
        within_a_minute(|| stress(true, 8, 200, 0));
    }

    #[test]
    fn batches_are_serial_complete_and_ordered_without_gathering() {
        within_a_minute(|| stress(false, 8, 200, 0));
    }

    #[test]
    fn waiters_that_fell_asleep_are_woken() {
        // 3 ms batches exceed the 1 ms spin cap, so waiters go to sleep on the futex.
        within_a_minute(|| stress(true, 6, 30, 1));
    }

    #[test]
    fn a_panicking_batch_fails_its_callers_and_releases_leadership() {
        within_a_minute(|| {
            let q = Arc::new(Q::new(false));
            // A leads a batch that waits until B and C are queued behind it.
            let a = {
                let q = q.clone();
                std::thread::spawn(move || {
                    let q2 = q.clone();
                    q.submit(
                        vec![(0, 0, 0)],
                        move |b| {
                            wait_until_queued(&q2, 2);
                            b.into_iter().map(Ok).collect()
                        },
                        || Err(()),
                    )
                })
            };
            while !q.state.lock().leader {
                std::thread::yield_now();
            }
            // B and C queue together; whichever leads their batch panics in it.
            let bc: Vec<_> = (1..3)
                .map(|t| {
                    let q = q.clone();
                    std::thread::spawn(move || {
                        catch_unwind(AssertUnwindSafe(|| {
                            q.submit(
                                vec![(t, 0, 0)],
                                |_| panic!("batch function failed"),
                                || Err(()),
                            )
                        }))
                    })
                })
                .collect();
            assert_eq!(a.join().unwrap(), vec![Ok((0, 0, 0))]);
            let outcomes: Vec<_> = bc.into_iter().map(|h| h.join().unwrap()).collect();
            let panicked = outcomes.iter().filter(|o| o.is_err()).count();
            assert_eq!(panicked, 1, "exactly the leader of the batch panics");
            for o in outcomes.iter().filter_map(|o| o.as_ref().ok()) {
                assert_eq!(o, &vec![Err(())], "the other caller gets the failed result");
            }
            // Leadership was released: a later caller runs.
            let later = q.submit(
                vec![(3, 0, 0)],
                |b| b.into_iter().map(Ok).collect(),
                || Err(()),
            );
            assert_eq!(later, vec![Ok((3, 0, 0))]);
        });
    }

    #[test]
    fn exclusive_holds_back_batches_until_it_is_dropped() {
        within_a_minute(|| {
            let q = Arc::new(Q::new(true));
            let ran = Arc::new(AtomicUsize::new(0));
            let guard = q.exclusive();
            let hs: Vec<_> = (0..4)
                .map(|t| {
                    let (q, ran) = (q.clone(), ran.clone());
                    std::thread::spawn(move || {
                        q.submit(
                            vec![(t, 0, 0)],
                            |b| {
                                ran.fetch_add(1, SeqCst);
                                b.into_iter().map(Ok).collect()
                            },
                            || Err(()),
                        )
                    })
                })
                .collect();
            // All four queue, and none may run while the guard is held (a caller that led
            // anyway would have emptied the queue, and this would never return).
            wait_until_queued(&q, 4);
            assert_eq!(ran.load(SeqCst), 0);
            drop(guard);
            for (t, h) in hs.into_iter().enumerate() {
                assert_eq!(h.join().unwrap(), vec![Ok((t, 0, 0))]);
            }
            assert!(ran.load(SeqCst) >= 1);
            // And exclusive can be taken again once they are done.
            drop(q.exclusive());
        });
    }
}
