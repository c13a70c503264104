//! Retention: which checkpoints to keep, and dropping the rest.
//!
//! A [`Policy`] is a set of *keep* rules; a checkpoint survives if any rule
//! keeps it (restic/borg semantics, so adding a rule never deletes more):
//! - `keep_last: N` — the N newest checkpoints (by sequence number);
//! - `keep_within: D` — every checkpoint younger than D at time `now`;
//! - `keep_tagged: [K, K=V, …]` — every checkpoint with tag key K (or
//!   exactly K=V).
//!
//! Invariants, whatever the policy:
//! - an empty policy keeps everything (it is "no policy", not "keep none");
//! - the head is always kept, and so are the target and the undo point of an
//!   interrupted restore (the journal), so the workspace can always be
//!   repaired and the last state is never lost;
//! - selection ([`select`]) is a pure function of the records, the head and
//!   `now`, so it is tested without a clock; [`apply`] deletes the dropped
//!   records (one catalog transaction each, so a crash leaves a subset
//!   deleted — every deletion was intended) and then runs [`crate::store::gc`],
//!   which frees exactly the data no surviving checkpoint references.
//!
//! The persistent policy lives in the catalog's meta table
//! ([`crate::store::catalog::Catalog::set_retention`]: JSON, written in one
//! redb transaction, so crash-atomic), and
//! [`apply_due`] applies it after every save.

use std::collections::BTreeSet;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::store::catalog::Checkpoint;
use crate::store::gc::{self, SweepReport};
use crate::store::Store;
use crate::Result;

/// Keep rules. See the module doc for the semantics.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Policy {
    /// Keep the N newest checkpoints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_last: Option<usize>,
    /// Keep checkpoints younger than this many seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_within_secs: Option<u64>,
    /// Keep checkpoints carrying one of these tags (`KEY` or `KEY=VALUE`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub keep_tagged: Vec<String>,
}

impl Policy {
    /// True if the policy has no rule (it then keeps everything).
    pub fn is_empty(&self) -> bool {
        self.keep_last.is_none() && self.keep_within_secs.is_none() && self.keep_tagged.is_empty()
    }

    /// `keep_within` as a duration.
    pub fn keep_within(&self) -> Option<Duration> {
        self.keep_within_secs.map(Duration::from_secs)
    }

    fn tagged(&self, cp: &Checkpoint) -> bool {
        self.keep_tagged
            .iter()
            .any(|rule| match rule.split_once('=') {
                Some((k, v)) => cp.tags.get(k).is_some_and(|x| x == v),
                None => cp.tags.contains_key(rule),
            })
    }
}

/// The outcome of [`select`]: sequence numbers, oldest first.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Selection {
    /// Checkpoints that survive.
    pub keep: Vec<u64>,
    /// Checkpoints the policy drops.
    pub drop: Vec<u64>,
}

/// Decides which checkpoints survive `policy` at time `now_ns`.
/// `protected` are always kept (the head, a journal's target and undo).
pub fn select(
    checkpoints: &[Checkpoint],
    protected: &[u64],
    policy: &Policy,
    now_ns: i64,
) -> Selection {
    let mut sel = Selection::default();
    if policy.is_empty() {
        sel.keep = checkpoints.iter().map(|c| c.seq).collect();
        sel.keep.sort_unstable();
        return sel;
    }
    let mut newest: Vec<u64> = checkpoints.iter().map(|c| c.seq).collect();
    newest.sort_unstable_by(|a, b| b.cmp(a));
    newest.truncate(policy.keep_last.unwrap_or(0));
    let last: BTreeSet<u64> = newest.into_iter().collect();
    let within_ns = policy
        .keep_within()
        .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
    let mut all: Vec<&Checkpoint> = checkpoints.iter().collect();
    all.sort_unstable_by_key(|c| c.seq);
    for c in all {
        let young = within_ns.is_some_and(|w| now_ns.saturating_sub(c.time_ns) < w);
        if protected.contains(&c.seq) || last.contains(&c.seq) || young || policy.tagged(c) {
            sel.keep.push(c.seq);
        } else {
            sel.drop.push(c.seq);
        }
    }
    sel
}

/// What [`apply`] did.
#[derive(Debug, Default, Serialize, schemars::JsonSchema)]
pub struct RetentionReport {
    /// The policy applied.
    pub policy: Policy,
    /// Which checkpoints survived and which were (or would be) dropped.
    pub selection: Selection,
    /// The gc that followed (None when nothing was dropped and gc was not
    /// asked for).
    pub gc: Option<SweepReport>,
}

/// Checkpoints that must survive any policy: the head and an interrupted
/// restore's target and undo point.
pub fn protected(store: &Store) -> Result<Vec<u64>> {
    let r = store.catalog.reader()?;
    let mut p: Vec<u64> = r.head()?.into_iter().collect();
    if let Some(j) = r.journal()? {
        p.push(j.target);
        p.extend(j.undo);
    }
    Ok(p)
}

/// Applies `policy` at `now_ns`: deletes the dropped checkpoint records and
/// then collects garbage. With `dry_run` nothing changes and the gc figures
/// are exactly what deleting the dropped checkpoints would free.
pub fn apply(
    store: &Store,
    policy: &Policy,
    now_ns: i64,
    dry_run: bool,
) -> Result<RetentionReport> {
    let checkpoints = store.catalog.reader()?.checkpoints()?;
    let selection = select(&checkpoints, &protected(store)?, policy, now_ns);
    if !dry_run {
        for c in checkpoints
            .iter()
            .filter(|c| selection.drop.contains(&c.seq))
        {
            store.catalog.delete_checkpoint(c)?;
        }
    }
    let report = gc::gc_excluding(store, &selection.drop, dry_run)?;
    Ok(RetentionReport {
        policy: policy.clone(),
        selection,
        gc: Some(report),
    })
}

/// The persistent policy (empty if none was set).
pub fn configured(store: &Store) -> Result<Policy> {
    Ok(store
        .catalog
        .reader()?
        .retention::<Policy>()?
        .unwrap_or_default())
}

/// Stores `policy` as the persistent one (an empty policy removes it).
pub fn set_configured(store: &Store, policy: &Policy) -> Result<()> {
    store
        .catalog
        .set_retention((!policy.is_empty()).then_some(policy))
}

/// Applies `policy` (the persistent one, [`configured`], which a save reads
/// before it closes the catalog, see [`crate::ops::save`]) if it is not
/// empty and drops anything. Returns None when there was nothing to do, so
/// a save without a policy pays only the read of it.
pub fn apply_due(store: &Store, policy: &Policy, now_ns: i64) -> Result<Option<RetentionReport>> {
    if policy.is_empty() {
        return Ok(None);
    }
    let checkpoints = store.catalog.reader()?.checkpoints()?;
    if select(&checkpoints, &protected(store)?, policy, now_ns)
        .drop
        .is_empty()
    {
        return Ok(None);
    }
    apply(store, policy, now_ns, false).map(Some)
}
