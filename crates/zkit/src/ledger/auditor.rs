//! Auto-recovery (BookKeeper's `AutoRecoveryMain`: an `Auditor` elected among candidates and a
//! `ReplicationWorker` in every process that runs it).
//!
//! - The **auditor** (one per cluster, elected with [`LeaderLatch`] under
//!   `underreplication/auditorelection`) watches `available/`. A bookie named in some
//!   ledger's ensembles that is neither writable nor read-only is *gone*; once it has been
//!   gone for the lost-bookie delay (`lostBookieRecoveryDelay`), every ledger with a fragment
//!   on it is marked under-replicated with the missing bookies. It looks again whenever the
//!   bookie list changes, when a delay runs out, and every check interval.
//! - Every audit also runs a **replicas check** (BookKeeper's `Auditor.checkAllLedgers` with
//!   its `LedgerChecker`): for each fragment of each closed ledger, every bookie of the
//!   fragment that is up is asked for the first and the last entry of its share of the
//!   fragment ([`ReplicasCheck::Ends`], the default), or for every entry of its share
//!   ([`ReplicasCheck::All`], as `auditorLedgerVerificationPercentage = 100` does); a bookie
//!   that answers "no such entry" or "no such ledger" (it came back with data missing: a
//!   replaced disk, a restored cookie, a partial copy) is marked missing for that ledger. An
//!   unanswered read is no evidence and marks nothing. The ends check cannot see a bookie
//!   missing only entries in the middle of its share; the full check reads every entry.
//! - A **replication worker** takes the lock of a marked ledger (an ephemeral node), and for
//!   every fragment on a missing bookie copies the entries that bookie held from a surviving
//!   replica to a new bookie (recovery adds, as `LedgerFragmentReplicator` does), then records
//!   the new bookie in that fragment by CAS. A bookie the mark names that is up is checked
//!   fragment by fragment, every entry of its share (whatever check marked it), and replaced
//!   only in the fragments it is short of. When no fragment names a missing bookie any more
//!   it clears the mark (only if it is the version it locked: a mark renewed meanwhile stays).
//!   The open last fragment of a ledger still being written is left to its writer for a grace
//!   period (its own ensemble change replaces the bookie); after that the ledger is recovered,
//!   which fences a writer that is in fact dead (`openLedgerRereplicationGracePeriod`).
//!
//! The pure part is [`AuditorCore`]; the rest are the two loops around it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use futures::stream::{self, FuturesUnordered, StreamExt};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::layout::LedgerMetadata;
use super::metadata::Cas;
use super::reader::{read_error, read_from_replicas};
use super::schedule::{choose_replacement, in_write_set, write_set};
use super::{admin_verifier, now_ms, LedgerClient, LedgerError};
use crate::election::LeaderLatch;
use crate::session::Session;

/// Options of [`AutoRecovery`].
#[derive(Debug, Clone)]
pub struct AutoRecoveryOptions {
    /// This process's id (lock data, election id).
    pub id: String,
    /// Contend to be the auditor.
    pub auditor: bool,
    /// Run a replication worker.
    pub worker: bool,
    /// How long a bookie must be gone before its ledgers are marked.
    pub lost_bookie_delay: Duration,
    /// The auditor re-checks every ledger this often even without a bookie change.
    pub check_interval: Duration,
    /// How long an open ledger's last fragment is left to its writer.
    pub open_ledger_grace: Duration,
    /// The worker looks for marks at least this often (it also watches for them).
    pub worker_poll: Duration,
    /// Entries a fragment copy keeps in flight (also the reads a full replicas check keeps
    /// in flight per bookie).
    pub copy_window: usize,
    /// How much of each bookie's share of each fragment the auditor's replicas check reads.
    pub replicas_check: ReplicasCheck,
}

/// How much of a bookie's share of a fragment a replicas check reads (BookKeeper's
/// `LedgerChecker`, by default the first and last entry of each fragment's share; with
/// `auditorLedgerVerificationPercentage` at 100 every entry).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReplicasCheck {
    /// The first and the last entry of the share: two reads per bookie and fragment. A
    /// bookie missing only entries in the middle of its share is not found.
    #[default]
    Ends,
    /// Every entry of the share: one read per entry and bookie (the entry is transferred),
    /// so a bookie missing any entry is found.
    All,
}

impl Default for AutoRecoveryOptions {
    fn default() -> Self {
        AutoRecoveryOptions {
            id: format!("autorecovery-{}", uuid::Uuid::new_v4().simple()),
            auditor: true,
            worker: true,
            lost_bookie_delay: Duration::from_secs(30),
            check_interval: Duration::from_secs(300),
            open_ledger_grace: Duration::from_secs(30),
            worker_poll: Duration::from_secs(30),
            copy_window: 256,
            replicas_check: ReplicasCheck::Ends,
        }
    }
}

/// The auditor's decisions (pure): which bookies are lost, which ledgers to mark.
#[derive(Debug, Clone, Default)]
pub struct AuditorCore {
    gone_since: BTreeMap<String, Instant>,
}

impl AuditorCore {
    /// An auditor that has seen nothing yet.
    pub fn new() -> AuditorCore {
        AuditorCore::default()
    }

    /// Looks at the bookies now `present` (writable or read-only) and the ones the metadata
    /// names; returns those gone for at least `delay`, and the earliest time another one will
    /// be (to wake up then).
    pub fn observe(
        &mut self,
        now: Instant,
        present: &BTreeSet<String>,
        named: &BTreeSet<String>,
        delay: Duration,
    ) -> (BTreeSet<String>, Option<Instant>) {
        self.gone_since
            .retain(|b, _| named.contains(b) && !present.contains(b));
        for b in named {
            if !present.contains(b) {
                self.gone_since.entry(b.clone()).or_insert(now);
            }
        }
        let mut lost = BTreeSet::new();
        let mut next = None::<Instant>;
        for (b, since) in &self.gone_since {
            let due = *since + delay;
            if due <= now {
                lost.insert(b.clone());
            } else {
                next = Some(next.map_or(due, |n| n.min(due)));
            }
        }
        (lost, next)
    }

    /// The ledgers to mark: each with a fragment on a lost bookie, and those bookies.
    pub fn to_mark<'a>(
        ledgers: impl IntoIterator<Item = (i64, &'a LedgerMetadata)>,
        lost: &BTreeSet<String>,
    ) -> Vec<(i64, Vec<String>)> {
        let mut out = Vec::new();
        if lost.is_empty() {
            return out;
        }
        for (id, m) in ledgers {
            let missing: Vec<String> = m
                .bookies()
                .into_iter()
                .filter(|b| lost.contains(*b))
                .map(str::to_string)
                .collect();
            if !missing.is_empty() {
                out.push((id, missing));
            }
        }
        out
    }
}

/// What the worker did with one marked ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Replicated {
    /// No fragment names a missing bookie any more: the mark may go.
    Done {
        /// Fragments copied.
        fragments: usize,
        /// Entries copied.
        entries: u64,
    },
    /// The open last fragment is left to its writer for now.
    Deferred,
}

/// Runs the auditor candidate and/or a replication worker until stopped.
pub struct AutoRecovery {
    stop: CancellationToken,
    tasks: Vec<JoinHandle<()>>,
    latch: Option<Arc<LeaderLatch>>,
}

impl std::fmt::Debug for AutoRecovery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AutoRecovery")
            .field("is_auditor", &self.is_auditor())
            .finish()
    }
}

impl AutoRecovery {
    /// Starts what `options` asks for on `client`'s metadata root.
    ///
    /// # Errors
    /// ZooKeeper errors creating the directories and joining the election.
    pub async fn start(
        session: &Session,
        client: &LedgerClient,
        options: AutoRecoveryOptions,
    ) -> Result<AutoRecovery, LedgerError> {
        client.store().ensure_dirs().await?;
        let stop = CancellationToken::new();
        let mut tasks = Vec::new();
        let mut latch = None;
        if options.auditor {
            let l = Arc::new(LeaderLatch::start(
                session,
                &client.store().layout().auditor_election(),
                &options.id,
            )?);
            latch = Some(Arc::clone(&l));
            tasks.push(tokio::spawn(auditor_loop(
                client.clone(),
                l,
                options.clone(),
                stop.clone(),
            )));
        }
        if options.worker {
            tasks.push(tokio::spawn(worker_loop(
                client.clone(),
                options.clone(),
                stop.clone(),
            )));
        }
        Ok(AutoRecovery { stop, tasks, latch })
    }

    /// True while this process is the auditor.
    pub fn is_auditor(&self) -> bool {
        self.latch.as_ref().is_some_and(|l| l.has_leadership())
    }

    /// Waits until this process is the auditor.
    ///
    /// # Errors
    /// [`LedgerError::BadArguments`] when it is not an auditor candidate; ZooKeeper errors.
    pub async fn await_auditor(&self) -> Result<(), LedgerError> {
        match &self.latch {
            Some(l) => Ok(l.await_leadership().await.map(|_| ())?),
            None => Err(LedgerError::BadArguments("not an auditor candidate".into())),
        }
    }

    /// Stops both loops (a worker finishes the ledger it is on first).
    pub async fn stop(self) {
        self.stop.cancel();
        for t in self.tasks {
            let _ = t.await;
        }
        if let Some(l) = self.latch {
            if let Ok(l) = Arc::try_unwrap(l) {
                l.close().await;
            }
        }
    }
}

/// Every ledger's metadata (ledgers deleted meanwhile are skipped).
async fn all_metadata(client: &LedgerClient) -> Result<Vec<(i64, LedgerMetadata)>, LedgerError> {
    let ids = client.list().await?;
    let reads = stream::iter(ids)
        .map(|id| async move { (id, client.store().read(id).await) })
        .buffer_unordered(32)
        .collect::<Vec<_>>()
        .await;
    let mut out = Vec::new();
    for (id, r) in reads {
        match r {
            Ok((m, _)) => out.push((id, m)),
            Err(LedgerError::NoSuchLedger(_)) => {}
            Err(LedgerError::Corrupt(e)) => {
                tracing::warn!(ledger_id = id, error = %e, "auditor: corrupt metadata skipped")
            }
            Err(e) => return Err(e),
        }
    }
    out.sort_by_key(|(id, _)| *id);
    Ok(out)
}

async fn auditor_loop(
    client: LedgerClient,
    latch: Arc<LeaderLatch>,
    options: AutoRecoveryOptions,
    stop: CancellationToken,
) {
    let mut leadership = latch.subscribe();
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            r = leadership.wait_for(|l| l.is_leader || l.closed) => match r {
                Ok(l) if l.closed => return,
                Ok(_) => {}
                Err(_) => return,
            },
        }
        tracing::info!(id = %options.id, "auditor elected");
        let mut core = AuditorCore::new();
        loop {
            if !latch.has_leadership() {
                tracing::info!(id = %options.id, "auditor leadership lost");
                break;
            }
            let round = audit_once(&client, &mut core, &options).await;
            let (next_due, watcher) = match round {
                Ok(v) => v,
                Err(e) => {
                    tracing::warn!(error = %e, "audit failed; retrying");
                    (Some(Instant::now() + Duration::from_millis(500)), None)
                }
            };
            let deadline = next_due
                .unwrap_or_else(|| Instant::now() + options.check_interval)
                .min(Instant::now() + options.check_interval);
            let fired = async {
                match watcher {
                    Some(w) => {
                        w.changed().await;
                    }
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = stop.cancelled() => return,
                () = fired => {}
                () = tokio::time::sleep_until(deadline) => {}
                _ = leadership.wait_for(|l| !l.is_leader) => {}
            }
        }
    }
}

/// One audit: bookies, metadata, marks. Returns when to look again and a watch on the
/// bookie list.
async fn audit_once(
    client: &LedgerClient,
    core: &mut AuditorCore,
    options: &AutoRecoveryOptions,
) -> Result<(Option<Instant>, Option<zkit_client::OneshotWatcher>), LedgerError> {
    let (writable, readonly, watcher) = client.store().watch_bookies().await?;
    let present: BTreeSet<String> = writable.into_iter().chain(readonly).collect();
    let ledgers = all_metadata(client).await?;
    let named: BTreeSet<String> = ledgers
        .iter()
        .flat_map(|(_, m)| m.bookies().into_iter().map(str::to_string))
        .collect();
    let (lost, next) = core.observe(Instant::now(), &present, &named, options.lost_bookie_delay);
    let mut marks = AuditorCore::to_mark(ledgers.iter().map(|(id, m)| (*id, m)), &lost);
    for (id, m) in &ledgers {
        let short = short_bookies(
            client,
            *id,
            m,
            &present,
            options.replicas_check,
            options.copy_window,
        )
        .await;
        if short.is_empty() {
            continue;
        }
        match marks.iter_mut().find(|(l, _)| l == id) {
            Some((_, missing)) => {
                for b in short {
                    if !missing.contains(&b) {
                        missing.push(b);
                    }
                }
            }
            None => marks.push((*id, short.into_iter().collect())),
        }
    }
    for (id, missing) in marks {
        tracing::info!(
            ledger_id = id,
            ?missing,
            "auditor: marking ledger under-replicated"
        );
        client
            .store()
            .mark_underreplicated(id, &missing, now_ms())
            .await?;
    }
    Ok((next, Some(watcher)))
}

/// The bookies of closed ledger `m` among `present` that miss entries of a fragment they
/// hold, as far as `check` reads (empty for an open ledger: its end belongs to the writer).
/// `window` reads are kept in flight per bookie by [`ReplicasCheck::All`]. A bookie that
/// does not answer is not counted: only a definite "no such entry/ledger" is.
pub async fn short_bookies(
    client: &LedgerClient,
    ledger_id: i64,
    m: &LedgerMetadata,
    present: &BTreeSet<String>,
    check: ReplicasCheck,
    window: usize,
) -> BTreeSet<String> {
    let mut short = BTreeSet::new();
    if !m.is_closed() {
        return short;
    }
    for (first, last, ensemble) in m.fragments() {
        let last = last.unwrap_or(m.last_entry_id);
        for (index, bookie) in ensemble.iter().enumerate() {
            if short.contains(bookie) || !present.contains(bookie) {
                continue;
            }
            let frag = Share { first, last, index };
            if fragment_short(client, ledger_id, m, frag, bookie, check, window).await {
                short.insert(bookie.clone());
            }
        }
    }
    short
}

/// Slot `index` of the fragment `first..=last`.
#[derive(Debug, Clone, Copy)]
struct Share {
    first: i64,
    last: i64,
    index: usize,
}

/// Whether `bookie`, at a slot of a fragment, says it lacks an entry of its share: the first
/// or the last with [`ReplicasCheck::Ends`] (as `LedgerChecker.verifyLedgerFragment` checks by
/// default), any with [`ReplicasCheck::All`] (`window` reads in flight; the first definite
/// miss ends it). Only a definite answer counts: a bookie that cannot be reached is the
/// lost-bookie path's.
async fn fragment_short(
    client: &LedgerClient,
    ledger_id: i64,
    m: &LedgerMetadata,
    frag: Share,
    bookie: &str,
    check: ReplicasCheck,
    window: usize,
) -> bool {
    use zkit_bookie::protocol::Status;
    use zkit_bookie::ClientError;
    let Share { first, last, index } = frag;
    let e = m.ensembles.get(&first).map_or(0, Vec::len);
    let share =
        move || (first..=last).filter(move |id| in_write_set(*id, index, e, m.write_quorum));
    let (Some(lo), Some(hi)) = (share().next(), share().next_back()) else {
        return false;
    };
    let Ok(bc) = client.inner().pool.get(bookie).await else {
        return false;
    };
    let ids: Vec<i64> = match check {
        ReplicasCheck::Ends if lo == hi => vec![lo],
        ReplicasCheck::Ends => vec![lo, hi],
        ReplicasCheck::All => share().collect(),
    };
    let reads = stream::iter(ids)
        .map(|id| {
            let bc = bc.clone();
            async move { bc.read(ledger_id, id, None).await }
        })
        .buffer_unordered(window.max(1));
    let mut reads = std::pin::pin!(reads);
    while let Some(r) = reads.next().await {
        if let Err(ClientError::Status(Status::NoEntry | Status::NoLedger)) = r {
            return true;
        }
    }
    false
}

async fn worker_loop(client: LedgerClient, options: AutoRecoveryOptions, stop: CancellationToken) {
    loop {
        let (ids, watchers) = match client.store().watch_underreplicated().await {
            Ok(v) => v,
            Err(e) => {
                tracing::warn!(error = %e, "replication worker: listing marks failed");
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(Duration::from_millis(500)) => continue,
                }
            }
        };
        let mut deferred = false;
        for id in ids {
            if stop.is_cancelled() {
                return;
            }
            match work_on(&client, id, &options).await {
                Ok(Some(Replicated::Deferred)) => deferred = true,
                Ok(_) => {}
                Err(e) => {
                    deferred = true;
                    tracing::warn!(ledger_id = id, error = %e, "replication worker: ledger not replicated yet");
                }
            }
        }
        // A deferred or failed ledger is looked at again soon; otherwise wait for a mark.
        let wait = if deferred {
            Duration::from_millis(500).min(options.worker_poll)
        } else {
            options.worker_poll
        };
        let mut any: FuturesUnordered<_> = watchers
            .into_iter()
            .map(|w| async move { w.changed().await })
            .collect();
        let fired = async {
            if any.is_empty() {
                std::future::pending::<()>().await;
            }
            any.next().await;
        };
        tokio::select! {
            () = stop.cancelled() => return,
            () = fired => {}
            () = tokio::time::sleep(wait) => {}
        }
    }
}

/// Locks, replicates and clears one marked ledger; `Ok(None)` when someone else has it.
async fn work_on(
    client: &LedgerClient,
    ledger_id: i64,
    options: &AutoRecoveryOptions,
) -> Result<Option<Replicated>, LedgerError> {
    let store = client.store();
    let Some(version) = store.lock_underreplicated(ledger_id, &options.id).await? else {
        return Ok(None);
    };
    let (mark_age, marked) = match store.read_mark(ledger_id).await? {
        Some((mark, _)) => (
            Duration::from_millis(now_ms().saturating_sub(mark.ctime_ms)),
            mark.replicas.into_iter().collect(),
        ),
        None => (Duration::ZERO, BTreeSet::new()),
    };
    let result = replicate_ledger_marked(client, ledger_id, mark_age, &marked, options).await;
    let out = match result {
        Ok(r @ Replicated::Done { .. }) => {
            if store.clear_underreplicated(ledger_id, version).await? {
                tracing::info!(ledger_id, ?r, "ledger re-replicated; mark cleared");
            }
            Ok(Some(r))
        }
        Ok(Replicated::Deferred) => Ok(Some(Replicated::Deferred)),
        Err(LedgerError::NoSuchLedger(_)) => {
            store.clear_underreplicated(ledger_id, version).await?;
            Ok(Some(Replicated::Done {
                fragments: 0,
                entries: 0,
            }))
        }
        Err(e) => Err(e),
    };
    store.unlock_underreplicated(ledger_id).await?;
    out
}

/// Copies every fragment of `ledger_id` held by a missing bookie to a new bookie.
pub async fn replicate_ledger(
    client: &LedgerClient,
    ledger_id: i64,
    mark_age: Duration,
    options: &AutoRecoveryOptions,
) -> Result<Replicated, LedgerError> {
    replicate_ledger_marked(client, ledger_id, mark_age, &BTreeSet::new(), options).await
}

/// [`replicate_ledger`], and also the fragments that the bookies in `marked` (up, but named
/// by the mark) are short of.
pub async fn replicate_ledger_marked(
    client: &LedgerClient,
    ledger_id: i64,
    mark_age: Duration,
    marked: &BTreeSet<String>,
    options: &AutoRecoveryOptions,
) -> Result<Replicated, LedgerError> {
    let store = client.store();
    let (mut m, _) = store.read(ledger_id).await?;
    let (writable, readonly) = store.bookies().await?;
    let present: BTreeSet<&String> = writable.iter().chain(readonly.iter()).collect();
    let missing = |m: &LedgerMetadata| -> BTreeSet<String> {
        m.bookies()
            .into_iter()
            .filter(|b| !present.contains(&b.to_string()))
            .map(str::to_string)
            .collect()
    };
    let checked: BTreeSet<String> = marked
        .iter()
        .filter(|b| present.contains(b))
        .cloned()
        .collect();
    if missing(&m).is_empty() && checked.is_empty() {
        return Ok(Replicated::Done {
            fragments: 0,
            entries: 0,
        });
    }
    if !m.is_closed() {
        let (_, last) = m.last_ensemble();
        if last.iter().any(|b| !present.contains(b)) {
            if mark_age < options.open_ledger_grace {
                return Ok(Replicated::Deferred);
            }
            tracing::info!(
                ledger_id,
                "open ledger's last fragment lost a bookie; recovering it"
            );
            m = client.recover_as_admin(ledger_id).await?.0;
        }
    }
    let lost = missing(&m);
    let mut fragments = 0;
    let mut entries = 0;
    let keys: Vec<i64> = m.ensembles.keys().copied().collect();
    for (k, first) in keys.iter().enumerate() {
        let last = match keys.get(k + 1) {
            Some(next) => next - 1,
            None if m.is_closed() => m.last_entry_id,
            // The open end belongs to the writer.
            None => continue,
        };
        let ensemble = m.ensembles[first].clone();
        for (index, bookie) in ensemble.iter().enumerate() {
            let frag = Share {
                first: *first,
                last,
                index,
            };
            // A marked bookie that is up gets the full check, whichever check marked it.
            let short = lost.contains(bookie)
                || (checked.contains(bookie)
                    && fragment_short(
                        client,
                        ledger_id,
                        &m,
                        frag,
                        bookie,
                        ReplicasCheck::All,
                        options.copy_window,
                    )
                    .await);
            if !short {
                continue;
            }
            let mut lost_list: Vec<String> = lost.iter().cloned().collect();
            lost_list.push(bookie.clone());
            let current = m.ensembles[first].clone();
            let target =
                choose_replacement(&writable, &current, &lost_list, &mut rand::thread_rng())?;
            let n =
                copy_fragment(client, ledger_id, &m, *first, last, index, &target, options).await?;
            entries += n;
            fragments += 1;
            m = record_replacement(client, ledger_id, *first, index, bookie, &target).await?;
            tracing::info!(ledger_id, first, last, %bookie, %target, copied = n, "fragment re-replicated");
        }
    }
    Ok(Replicated::Done { fragments, entries })
}

/// Copies the entries of fragment `first..=last` that ensemble slot `index` held to `target`.
#[allow(clippy::too_many_arguments)]
async fn copy_fragment(
    client: &LedgerClient,
    ledger_id: i64,
    m: &LedgerMetadata,
    first: i64,
    last: i64,
    index: usize,
    target: &str,
    options: &AutoRecoveryOptions,
) -> Result<u64, LedgerError> {
    let inner = client.inner();
    let ensemble = m.ensembles[&first].clone();
    let (verifier, _) = admin_verifier(m);
    let e = ensemble.len();
    let key = m.master_key;
    let target_client = inner
        .pool
        .get(target)
        .await
        .map_err(|e| LedgerError::ReadFailed {
            ledger: ledger_id,
            entry: first,
            reason: format!("replacement bookie {target}: {e}"),
        })?;
    let ids: Vec<i64> = (first..=last)
        .filter(|id| in_write_set(*id, index, e, m.write_quorum))
        .collect();
    let n = ids.len() as u64;
    let lost = &ensemble[index];
    let results = stream::iter(ids)
        .map(|entry_id| {
            let replicas: Vec<String> = write_set(entry_id, e, m.write_quorum)
                .into_iter()
                .filter(|i| *i != index)
                .filter_map(|i| ensemble.get(i).cloned())
                .filter(|b| b != lost)
                .collect();
            let verifier = verifier.clone();
            let target_client = target_client.clone();
            async move {
                let entry =
                    read_from_replicas(inner, ledger_id, entry_id, &replicas, &verifier, None)
                        .await
                        .map_err(|errs| read_error(ledger_id, entry_id, &errs))?;
                target_client
                    .add(ledger_id, entry_id, key, true, entry.raw)
                    .await
                    .map_err(|err| LedgerError::ReadFailed {
                        ledger: ledger_id,
                        entry: entry_id,
                        reason: format!("copying to {target}: {err}"),
                    })
            }
        })
        .buffer_unordered(options.copy_window.max(1));
    let mut results = std::pin::pin!(results);
    while let Some(r) = results.next().await {
        r?;
    }
    Ok(n)
}

/// Records `target` in place of `lost` at `index` of fragment `first`, by CAS; a fragment
/// that no longer names `lost` there is left as it is.
async fn record_replacement(
    client: &LedgerClient,
    ledger_id: i64,
    first: i64,
    index: usize,
    lost: &str,
    target: &str,
) -> Result<LedgerMetadata, LedgerError> {
    loop {
        let (m, v) = client.store().read(ledger_id).await?;
        if m.ensembles
            .get(&first)
            .and_then(|e| e.get(index))
            .map(String::as_str)
            != Some(lost)
        {
            return Ok(m);
        }
        let next = m.with_replaced_bookie(first, index, target)?;
        match client.store().write(ledger_id, &next, v).await? {
            Cas::Written(_) => return Ok(next),
            Cas::Conflict => continue,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zkit_bookie::protocol::entry::{master_key, DigestType};

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_bookie_is_lost_only_after_the_delay_and_forgiven_when_back() {
        let mut c = AuditorCore::new();
        let t0 = Instant::now();
        let d = Duration::from_secs(10);
        let named = set(&["a", "b", "c"]);
        let (lost, next) = c.observe(t0, &set(&["a", "b"]), &named, d);
        assert!(lost.is_empty());
        assert_eq!(next, Some(t0 + d));
        let (lost, _) = c.observe(t0 + Duration::from_secs(5), &set(&["a", "b"]), &named, d);
        assert!(lost.is_empty());
        let (lost, next) = c.observe(t0 + d, &set(&["a", "b"]), &named, d);
        assert_eq!(lost, set(&["c"]));
        assert_eq!(next, None);
        // Back: forgotten; gone again: the delay starts over.
        c.observe(t0 + d, &set(&["a", "b", "c"]), &named, d);
        let (lost, next) = c.observe(t0 + 2 * d, &set(&["a", "b"]), &named, d);
        assert!(lost.is_empty());
        assert_eq!(next, Some(t0 + 3 * d));
        // A bookie no ledger names is never lost; one first seen gone now waits the delay.
        let (lost, _) = c.observe(t0 + 5 * d, &set(&[]), &set(&[]), d);
        assert!(lost.is_empty());
        let (lost, _) = c.observe(t0 + 5 * d, &set(&[]), &set(&["a"]), d);
        assert!(lost.is_empty());
        let (lost, _) = c.observe(t0 + 6 * d, &set(&[]), &set(&["a"]), d);
        assert_eq!(lost, set(&["a"]));
    }

    #[test]
    fn ledgers_with_a_fragment_on_a_lost_bookie_are_marked() {
        let e = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let m1 = LedgerMetadata::new_open(
            2,
            2,
            e(&["a", "b", "c"]),
            DigestType::Crc32c,
            master_key(b""),
            0,
        )
        .unwrap();
        let m2 = LedgerMetadata::new_open(
            2,
            2,
            e(&["a", "b", "d"]),
            DigestType::Crc32c,
            master_key(b""),
            0,
        )
        .unwrap()
        .with_ensemble_change(4, e(&["a", "b", "e"]))
        .unwrap();
        let marks = AuditorCore::to_mark([(1, &m1), (2, &m2)], &set(&["d"]));
        assert_eq!(marks, vec![(2, vec!["d".to_string()])]);
        let marks = AuditorCore::to_mark([(1, &m1), (2, &m2)], &set(&["a", "c"]));
        assert_eq!(
            marks,
            vec![
                (1, vec!["a".to_string(), "c".to_string()]),
                (2, vec!["a".to_string()])
            ]
        );
        assert!(AuditorCore::to_mark([(1, &m1)], &set(&[])).is_empty());
    }
}
