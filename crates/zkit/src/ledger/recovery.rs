//! Ledger recovery (BookKeeper's `LedgerHandle.recover` + `LedgerRecoveryOp`): what the next
//! opener does when a ledger's writer died without closing it. Every step is safe to repeat
//! and to run in two processes at once; their closes are one CAS, and the loser adopts the
//! winner's result.
//!
//! 1. Mark the metadata IN_RECOVERY by CAS: the writer's next ensemble change or close fails.
//! 2. Fence the ledger on every bookie of the last ensemble and read each one's LAC
//!    (`ReadLastConfirmedOp` with fencing), until the answers cover every ack quorum
//!    ([`super::schedule::Coverage`]): then no set of `Qa` unfenced bookies remains that
//!    could still acknowledge an add. The old writer's later adds fail with `Fenced`.
//! 3. Start from the highest LAC (at least the last fragment's first entry − 1: earlier
//!    fragments are complete) and read forward with recovery reads
//!    ([`super::schedule::RecoveryReadState`]) until an entry is missing on enough replicas
//!    that no ack quorum can hold it. Every acknowledged entry is before that point; so is
//!    every entry after an acknowledged one, because acknowledgements are in order.
//! 4. Re-replicate each recovered entry to all of its write set (recovery adds, accepted on
//!    fenced bookies; a failed bookie is replaced by an ensemble change as a writer would).
//! 5. Close by CAS at the last recovered entry with its length. On a conflict, re-read: a
//!    ledger closed by someone else is their result; otherwise start again.

use std::sync::Arc;

use futures::stream::{FuturesUnordered, StreamExt};
use zkit_bookie::protocol::entry::{Digester, MasterKey};
use zkit_bookie::protocol::Status;

use super::layout::{LedgerMetadata, LedgerState};
use super::metadata::{Cas, Version};
use super::reader::{read_error, read_from_replicas, LedgerEntry, ReplicaError, Verifier};
use super::schedule::{write_set_bookies, Answer, Coverage, RecoveryRead, RecoveryReadState};
use super::writer::{self, Mode, WriterParams};
use super::{ClientInner, LedgerError};

/// Rounds before giving up when other recoverers keep changing the metadata.
const MAX_ROUNDS: usize = 20;

/// Entries read ahead in recovery.
const RECOVERY_BATCH: i64 = 256;

/// Recovers `ledger_id` (no-op when closed) and returns its closed metadata and version.
pub(crate) async fn recover(
    inner: &Arc<ClientInner>,
    ledger_id: i64,
    verifier: &Verifier,
    digester: &Digester,
    master_key: MasterKey,
) -> Result<(LedgerMetadata, Version), LedgerError> {
    let mut last_err = None;
    for round in 0..MAX_ROUNDS {
        let (mut m, mut v) = inner.store.read(ledger_id).await?;
        if m.is_closed() {
            return Ok((m, v));
        }
        if m.master_key != master_key {
            return Err(LedgerError::WrongPassword(ledger_id));
        }
        if m.state == LedgerState::Open {
            let marked = m.in_recovery()?;
            match inner.store.write(ledger_id, &marked, v).await? {
                Cas::Written(nv) => {
                    m = marked;
                    v = nv;
                }
                Cas::Conflict => continue,
            }
        }
        tracing::info!(ledger_id, round, "recovering ledger");
        match recover_round(inner, ledger_id, m, v, verifier, digester, master_key).await {
            Ok(Some(done)) => return Ok(done),
            // Someone else changed the metadata under us: look again.
            Ok(None) => continue,
            Err(e @ (LedgerError::Fenced(_) | LedgerError::LedgerClosed(_))) => {
                last_err = Some(e);
                continue;
            }
            Err(e) => return Err(e),
        }
    }
    Err(LedgerError::RecoveryFailed {
        ledger: ledger_id,
        reason: format!(
            "the metadata kept changing under {MAX_ROUNDS} rounds of recovery ({})",
            last_err.map(|e| e.to_string()).unwrap_or_default()
        ),
    })
}

/// Fences the last ensemble and returns the highest LAC heard, once covered.
async fn fence_and_read_lac(
    inner: &Arc<ClientInner>,
    ledger_id: i64,
    m: &LedgerMetadata,
    key: MasterKey,
) -> Result<i64, LedgerError> {
    let (_, ensemble) = m.last_ensemble();
    let mut cov = Coverage::new(ensemble.len(), m.write_quorum, m.ack_quorum);
    let mut asks: FuturesUnordered<_> = ensemble
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let inner = Arc::clone(inner);
            let b = b.clone();
            async move {
                let r = async {
                    let c = inner.pool.get(&b).await?;
                    c.fence(ledger_id, key).await?;
                    c.read_lac(ledger_id).await
                }
                .await;
                (i, b, r)
            }
        })
        .collect();
    let mut lac = -1;
    let mut failures = Vec::new();
    while let Some((i, b, r)) = asks.next().await {
        match r {
            Ok((l, _)) => {
                lac = lac.max(l);
                cov.add(i, Answer::Heard);
            }
            Err(e) if e.status() == Some(Status::Unauthorized) => {
                return Err(LedgerError::WrongPassword(ledger_id))
            }
            Err(e) => failures.push(format!("{b}: {e}")),
        }
        if cov.covered() {
            return Ok(lac);
        }
    }
    Err(LedgerError::RecoveryFailed {
        ledger: ledger_id,
        reason: format!(
            "could not fence enough bookies of the last ensemble {ensemble:?}: {}",
            failures.join("; ")
        ),
    })
}

/// One entry's recovery read: every replica asked at once.
async fn recovery_read(
    inner: &Arc<ClientInner>,
    ledger_id: i64,
    entry_id: i64,
    m: &LedgerMetadata,
    verifier: &Verifier,
) -> RecoveryRead<LedgerEntry> {
    let mut state = RecoveryReadState::new(m.write_quorum, m.ack_quorum);
    let mut reads: FuturesUnordered<_> =
        write_set_bookies(entry_id, m.ensemble_for(entry_id), m.write_quorum)
            .into_iter()
            .map(|b| async move {
                let one = [b];
                read_from_replicas(inner, ledger_id, entry_id, &one, verifier, None).await
            })
            .collect();
    while let Some(r) = reads.next().await {
        match r {
            Ok(e) => state.found(e),
            Err(errs) => match errs.first().map(|(_, e)| e) {
                Some(ReplicaError::Missing) => state.missing(),
                _ => state.failed(),
            },
        }
        match state.decision() {
            RecoveryRead::Pending => {}
            d => return d,
        }
    }
    state.decision()
}

async fn recover_round(
    inner: &Arc<ClientInner>,
    ledger_id: i64,
    m: LedgerMetadata,
    v: Version,
    verifier: &Verifier,
    digester: &Digester,
    key: MasterKey,
) -> Result<Option<(LedgerMetadata, Version)>, LedgerError> {
    let (first_key, _) = m.last_ensemble();
    let lac = fence_and_read_lac(inner, ledger_id, &m, key).await?;
    let start = lac.max(first_key - 1);
    let start_length = if start < 0 {
        0
    } else {
        let replicas = write_set_bookies(start, m.ensemble_for(start), m.write_quorum);
        read_from_replicas(inner, ledger_id, start, &replicas, verifier, None)
            .await
            .map_err(|e| read_error(ledger_id, start, &e))?
            .length
    };
    tracing::debug!(ledger_id, lac, start, "recovery reads from the LAC");
    let w = writer::start(WriterParams {
        ledger_id,
        metadata: m.clone(),
        version: v,
        master_key: key,
        digester: digester.clone(),
        mode: Mode::Recovery,
        lac: start,
        length: start_length,
        store: inner.store.clone(),
        pool: inner.pool.clone(),
        window: inner.options.max_in_flight,
        max_entry_size: usize::MAX,
    });
    let mut next = start + 1;
    let mut adds = Vec::new();
    'reading: loop {
        let batch: Vec<_> = (next..next + RECOVERY_BATCH)
            .map(|e| recovery_read(inner, ledger_id, e, &m, verifier))
            .collect();
        let mut results = futures::stream::iter(batch).buffered(RECOVERY_BATCH as usize);
        while let Some(r) = results.next().await {
            match r {
                RecoveryRead::Found(e) => {
                    adds.push(w.submit_encoded(e.raw, e.length).await?);
                    next += 1;
                }
                RecoveryRead::Missing => break 'reading,
                RecoveryRead::Unknown | RecoveryRead::Pending => {
                    return Err(LedgerError::RecoveryFailed {
                        ledger: ledger_id,
                        reason: format!(
                            "entry {next}: too few replicas answered to tell whether it exists"
                        ),
                    })
                }
            }
        }
    }
    for a in adds {
        a.await?;
    }
    let drained = w.drain().await?;
    let last = next - 1;
    debug_assert_eq!(drained.lac, last);
    let closed = drained.metadata.closed(last, drained.length)?;
    match inner
        .store
        .write(ledger_id, &closed, drained.version)
        .await?
    {
        Cas::Written(nv) => {
            tracing::info!(
                ledger_id,
                last_entry = last,
                length = drained.length,
                "ledger recovered and closed"
            );
            Ok(Some((closed, nv)))
        }
        Cas::Conflict => Ok(None),
    }
}
