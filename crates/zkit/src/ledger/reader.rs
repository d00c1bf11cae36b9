//! [`LedgerReader`]: reads entries of a ledger (BookKeeper's `ReadOnlyLedgerHandle`).
//!
//! An entry is read from the replicas of its write set in turn: the first replica gets the
//! request; when it fails (error, no such entry, bad digest) the next one is asked at once,
//! and when it is slow the next one is asked after the speculative delay (BookKeeper's
//! `SequenceReadRequest` with a speculative read policy); the first verified answer wins.
//! Ranges are read with a window of entries in flight, delivered in order.
//!
//! A reader opened on a closed ledger (or after recovery) may read up to its last entry; a
//! reader opened without recovery may read up to the last-add-confirmed it learnt from the
//! bookies ([`LedgerReader::read_lac`], [`LedgerReader::wait_for_lac`]: the bookies'
//! long poll) and follows ensemble changes and the close by re-reading the metadata.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures::stream::{self, FuturesUnordered, Stream, StreamExt};
use zkit_bookie::protocol::entry::{Digester, EntryError, EntryHeader, MasterKey};
use zkit_bookie::protocol::Status;

use super::layout::LedgerMetadata;
use super::schedule::{write_set_bookies, Answer, Coverage};
use super::{ClientInner, LedgerError};

/// One entry as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerEntry {
    /// Ledger.
    pub ledger_id: i64,
    /// Entry id.
    pub entry_id: i64,
    /// Payload bytes of the ledger up to and including this entry.
    pub length: u64,
    /// The payload.
    pub payload: Bytes,
    /// The encoded entry as the bookie stored it (header, digest, payload).
    pub raw: Bytes,
}

/// How entries are checked: with the password the digest is verified; without it (a
/// replication worker on an HMAC ledger) only the header is.
#[derive(Debug, Clone)]
pub(crate) enum Verifier {
    Digest(Digester),
    HeaderOnly,
}

impl Verifier {
    pub(crate) fn verify(
        &self,
        raw: &Bytes,
        ledger_id: i64,
        entry_id: i64,
    ) -> Result<LedgerEntry, EntryError> {
        match self {
            Verifier::Digest(d) => {
                let e = d.verify(raw, ledger_id, entry_id)?;
                Ok(LedgerEntry {
                    ledger_id,
                    entry_id,
                    length: e.header.length.max(0) as u64,
                    payload: e.payload,
                    raw: raw.clone(),
                })
            }
            Verifier::HeaderOnly => {
                let h = EntryHeader::parse_expected(raw, ledger_id, entry_id)?;
                Ok(LedgerEntry {
                    ledger_id,
                    entry_id,
                    length: h.length.max(0) as u64,
                    payload: Bytes::new(),
                    raw: raw.clone(),
                })
            }
        }
    }
}

/// Why one replica did not give an entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ReplicaError {
    /// The bookie does not have it (or the ledger).
    Missing,
    /// It answered something that failed verification.
    Corrupt(String),
    /// Error, timeout, connection.
    Failed(String),
}

/// Reads entry `entry_id` from `replicas` (bookie ids in write-set order) with speculative
/// reads; `Err` carries every replica's failure.
pub(crate) async fn read_from_replicas(
    inner: &ClientInner,
    ledger_id: i64,
    entry_id: i64,
    replicas: &[String],
    verifier: &Verifier,
    fence: Option<MasterKey>,
) -> Result<LedgerEntry, Vec<(String, ReplicaError)>> {
    let delay = inner.options.speculative_read_delay;
    let mut next = 0usize;
    let mut errors = Vec::new();
    let mut running = FuturesUnordered::new();
    let read_one = |bookie: String| async move {
        let r = match inner.pool.get(&bookie).await {
            Ok(c) => c.read(ledger_id, entry_id, fence).await,
            Err(e) => Err(e),
        };
        let r = match r {
            Ok(raw) => verifier
                .verify(&raw, ledger_id, entry_id)
                .map_err(|e| ReplicaError::Corrupt(e.to_string())),
            Err(e) => match e.status() {
                Some(Status::NoEntry) | Some(Status::NoLedger) => Err(ReplicaError::Missing),
                _ => Err(ReplicaError::Failed(e.to_string())),
            },
        };
        (bookie, r)
    };
    loop {
        if running.is_empty() {
            let Some(b) = replicas.get(next) else {
                return Err(errors);
            };
            next += 1;
            running.push(read_one(b.clone()));
        }
        let more = next < replicas.len();
        tokio::select! {
            Some((bookie, r)) = running.next() => match r {
                Ok(e) => return Ok(e),
                Err(err) => {
                    if let ReplicaError::Corrupt(why) = &err {
                        tracing::warn!(ledger_id, entry_id, %bookie, %why, "entry failed verification; trying another replica");
                    }
                    errors.push((bookie, err));
                    if let Some(b) = replicas.get(next) {
                        next += 1;
                        running.push(read_one(b.clone()));
                    }
                }
            },
            () = tokio::time::sleep(delay), if more => {
                if let Some(b) = replicas.get(next) {
                    next += 1;
                    running.push(read_one(b.clone()));
                }
            }
        }
    }
}

/// The error for an entry no replica gave.
pub(crate) fn read_error(
    ledger_id: i64,
    entry_id: i64,
    errors: &[(String, ReplicaError)],
) -> LedgerError {
    if !errors.is_empty() && errors.iter().all(|(_, e)| *e == ReplicaError::Missing) {
        return LedgerError::NoSuchEntry {
            ledger: ledger_id,
            entry: entry_id,
        };
    }
    let detail = errors
        .iter()
        .map(|(b, e)| match e {
            ReplicaError::Missing => format!("{b}: no such entry"),
            ReplicaError::Corrupt(w) => format!("{b}: corrupt ({w})"),
            ReplicaError::Failed(w) => format!("{b}: {w}"),
        })
        .collect::<Vec<_>>()
        .join("; ");
    if errors
        .iter()
        .any(|(_, e)| matches!(e, ReplicaError::Corrupt(_)))
        && errors
            .iter()
            .all(|(_, e)| !matches!(e, ReplicaError::Failed(_)))
    {
        return LedgerError::Corrupt(format!(
            "ledger {ledger_id} entry {entry_id}: no intact replica: {detail}"
        ));
    }
    LedgerError::ReadFailed {
        ledger: ledger_id,
        entry: entry_id,
        reason: detail,
    }
}

struct View {
    metadata: LedgerMetadata,
    /// Highest entry known readable: the last entry once closed, else the LAC learnt.
    readable: i64,
}

/// A reader of one ledger. Clones share the reader.
#[derive(Clone)]
pub struct LedgerReader {
    inner: Arc<ClientInner>,
    ledger_id: i64,
    verifier: Verifier,
    view: Arc<Mutex<View>>,
}

impl std::fmt::Debug for LedgerReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LedgerReader")
            .field("ledger_id", &self.ledger_id)
            .field("readable", &self.last_add_confirmed())
            .finish()
    }
}

impl LedgerReader {
    pub(crate) fn new(
        inner: Arc<ClientInner>,
        ledger_id: i64,
        verifier: Verifier,
        metadata: LedgerMetadata,
    ) -> LedgerReader {
        let readable = if metadata.is_closed() {
            metadata.last_entry_id
        } else {
            metadata.last_ensemble().0 - 1
        };
        LedgerReader {
            inner,
            ledger_id,
            verifier,
            view: Arc::new(Mutex::new(View { metadata, readable })),
        }
    }

    fn view(&self) -> std::sync::MutexGuard<'_, View> {
        self.view.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The ledger id.
    pub fn id(&self) -> i64 {
        self.ledger_id
    }

    /// The metadata as last read.
    pub fn metadata(&self) -> LedgerMetadata {
        self.view().metadata.clone()
    }

    /// Closed (its last entry is final)?
    pub fn is_closed(&self) -> bool {
        self.view().metadata.is_closed()
    }

    /// The highest entry this reader may read now: the last entry of a closed ledger, else the
    /// last-add-confirmed learnt so far (-1: none).
    pub fn last_add_confirmed(&self) -> i64 {
        self.view().readable
    }

    fn learn(&self, lac: i64) {
        let mut v = self.view();
        if !v.metadata.is_closed() && lac > v.readable {
            v.readable = lac;
        }
    }

    /// Reads the metadata again (ensemble changes, the close).
    ///
    /// # Errors
    /// [`LedgerError::NoSuchLedger`] once deleted, ZooKeeper errors.
    pub async fn refresh_metadata(&self) -> Result<LedgerMetadata, LedgerError> {
        let (m, _) = self.inner.store.read(self.ledger_id).await?;
        let mut v = self.view();
        if m.is_closed() {
            v.readable = m.last_entry_id;
        } else {
            v.readable = v.readable.max(m.last_ensemble().0 - 1);
        }
        v.metadata = m.clone();
        Ok(m)
    }

    /// Asks the bookies of the last ensemble for their LAC (BookKeeper's
    /// `readLastAddConfirmed`) and returns the highest; waits until enough answered that no ack
    /// quorum went unheard. A closed ledger answers its last entry without asking.
    ///
    /// # Errors
    /// [`LedgerError::NotEnoughBookies`] when too few bookies answered.
    pub async fn read_lac(&self) -> Result<i64, LedgerError> {
        let m = self.metadata();
        if m.is_closed() {
            return Ok(m.last_entry_id);
        }
        let (first, ensemble) = m.last_ensemble();
        let ensemble = ensemble.to_vec();
        let mut cov = Coverage::new(ensemble.len(), m.write_quorum, m.ack_quorum);
        let mut asks: FuturesUnordered<_> = ensemble
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let inner = Arc::clone(&self.inner);
                let b = b.clone();
                let id = self.ledger_id;
                async move {
                    let r = match inner.pool.get(&b).await {
                        Ok(c) => c.read_lac(id).await.map(|(lac, _)| lac),
                        Err(e) => Err(e),
                    };
                    (i, r)
                }
            })
            .collect();
        let mut best = first - 1;
        let mut heard = 0;
        while let Some((i, r)) = asks.next().await {
            match r {
                Ok(lac) => {
                    best = best.max(lac);
                    cov.add(i, Answer::Heard);
                    heard += 1;
                }
                Err(e) if e.status() == Some(Status::NoLedger) => {
                    cov.add(i, Answer::Heard);
                    heard += 1;
                }
                Err(_) => {}
            }
            if cov.covered() {
                break;
            }
        }
        if !cov.covered() {
            return Err(LedgerError::NotEnoughBookies {
                needed: ensemble.len() - m.ack_quorum + 1,
                available: heard,
            });
        }
        self.learn(best);
        Ok(self.last_add_confirmed())
    }

    /// Long-polls the bookies of the last ensemble until the LAC passes `after` or `timeout`
    /// ends (BookKeeper's `ReadLastConfirmedAndEntry`); returns the LAC known then. A closed
    /// ledger returns at once.
    ///
    /// # Errors
    /// [`LedgerError::ReadFailed`] when every bookie failed.
    pub async fn wait_for_lac(&self, after: i64, timeout: Duration) -> Result<i64, LedgerError> {
        let m = self.metadata();
        if m.is_closed() || self.last_add_confirmed() > after {
            return Ok(self.last_add_confirmed());
        }
        let (_, ensemble) = m.last_ensemble();
        let mut polls: FuturesUnordered<_> = ensemble
            .iter()
            .map(|b| {
                let inner = Arc::clone(&self.inner);
                let b = b.clone();
                let id = self.ledger_id;
                async move {
                    match inner.pool.get(&b).await {
                        Ok(c) => c
                            .long_poll_lac(id, after, timeout)
                            .await
                            .map(|(lac, _)| lac),
                        Err(e) => Err(e),
                    }
                }
            })
            .collect();
        let mut failures = Vec::new();
        let mut answered = false;
        while let Some(r) = polls.next().await {
            match r {
                Ok(lac) if lac > after => {
                    self.learn(lac);
                    return Ok(self.last_add_confirmed());
                }
                Ok(_) => answered = true,
                Err(e) if e.status() == Some(Status::NoLedger) => answered = true,
                Err(e) => failures.push(e.to_string()),
            }
        }
        if answered {
            return Ok(self.last_add_confirmed());
        }
        Err(LedgerError::ReadFailed {
            ledger: self.ledger_id,
            entry: after + 1,
            reason: format!("long poll failed on every bookie: {}", failures.join("; ")),
        })
    }

    async fn read_one(&self, entry_id: i64) -> Result<LedgerEntry, LedgerError> {
        let replicas = {
            let v = self.view();
            write_set_bookies(
                entry_id,
                v.metadata.ensemble_for(entry_id),
                v.metadata.write_quorum,
            )
        };
        match self.read_replicas(entry_id, &replicas).await {
            Ok(e) => Ok(e),
            Err(errors) if !self.is_closed() => {
                // An ensemble change this reader has not seen may have moved the entry.
                let before = self.metadata();
                let now = self.refresh_metadata().await?;
                if now.ensembles == before.ensembles {
                    return Err(read_error(self.ledger_id, entry_id, &errors));
                }
                let replicas =
                    write_set_bookies(entry_id, now.ensemble_for(entry_id), now.write_quorum);
                self.read_replicas(entry_id, &replicas)
                    .await
                    .map_err(|e| read_error(self.ledger_id, entry_id, &e))
            }
            Err(errors) => Err(read_error(self.ledger_id, entry_id, &errors)),
        }
    }

    /// Reads `entry_id` of this ledger from `replicas`, in order (speculatively).
    async fn read_replicas(
        &self,
        entry_id: i64,
        replicas: &[String],
    ) -> Result<LedgerEntry, Vec<(String, ReplicaError)>> {
        read_from_replicas(
            &self.inner,
            self.ledger_id,
            entry_id,
            replicas,
            &self.verifier,
            None,
        )
        .await
    }

    /// Checks `first..=last` against what may be read now, refreshing the LAC once for an
    /// open ledger.
    async fn check_range(&self, first: i64, last: i64) -> Result<(), LedgerError> {
        if first < 0 || last < first {
            return Err(LedgerError::BadArguments(format!(
                "entry range {first}..={last}"
            )));
        }
        if last > self.last_add_confirmed() && !self.is_closed() {
            self.read_lac().await?;
        }
        let readable = self.last_add_confirmed();
        if last > readable {
            return Err(LedgerError::BeyondLastEntry {
                ledger: self.ledger_id,
                entry: last,
                last: readable,
            });
        }
        Ok(())
    }

    /// Reads entry `entry_id`.
    ///
    /// # Errors
    /// [`LedgerError::BeyondLastEntry`] past what may be read, [`LedgerError::Corrupt`] when
    /// every replica failed verification, [`LedgerError::ReadFailed`] otherwise.
    pub async fn read_entry(&self, entry_id: i64) -> Result<LedgerEntry, LedgerError> {
        self.check_range(entry_id, entry_id).await?;
        self.read_one(entry_id).await
    }

    /// Reads entries `first..=last`.
    ///
    /// # Errors
    /// As [`LedgerReader::read_entry`], for the first entry that fails.
    pub async fn read(&self, first: i64, last: i64) -> Result<Vec<LedgerEntry>, LedgerError> {
        self.check_range(first, last).await?;
        let mut out =
            Vec::with_capacity(usize::try_from(last - first + 1).unwrap_or(0).min(1 << 20));
        let mut s = std::pin::pin!(self.stream_unchecked(first, last));
        while let Some(e) = s.next().await {
            out.push(e?);
        }
        Ok(out)
    }

    /// Entries `first..=last` as a stream, in order, a window of them read at once.
    ///
    /// # Errors
    /// The stream yields the range check's error, then each entry's.
    pub fn entries(
        &self,
        first: i64,
        last: i64,
    ) -> impl Stream<Item = Result<LedgerEntry, LedgerError>> + Send + '_ {
        stream::once(self.check_range(first, last)).flat_map(move |checked| match checked {
            Ok(()) => self.stream_unchecked(first, last).left_stream(),
            Err(e) => stream::once(async move { Err(e) }).right_stream(),
        })
    }

    fn stream_unchecked(
        &self,
        first: i64,
        last: i64,
    ) -> impl Stream<Item = Result<LedgerEntry, LedgerError>> + Send + '_ {
        let window = self.inner.options.read_window.max(1);
        stream::iter(first..=last)
            .map(move |id| self.read_one(id))
            .buffered(window)
    }

    /// Follows the ledger from `from` on: yields each entry once it is confirmed, long-polling
    /// the bookies for more (each poll waits up to `poll`), and ends after the last entry once
    /// the ledger is closed.
    pub fn follow(
        &self,
        from: i64,
        poll: Duration,
    ) -> impl Stream<Item = Result<LedgerEntry, LedgerError>> + Send + '_ {
        stream::unfold((from.max(0), 0u32), move |(next, idle)| async move {
            loop {
                let readable = self.last_add_confirmed();
                if next <= readable {
                    let end = readable.min(next + self.inner.options.read_window as i64 - 1);
                    return Some((self.stream_unchecked(next, end).left_stream(), (end + 1, 0)));
                }
                if self.is_closed() {
                    return None;
                }
                match self.wait_for_lac(next - 1, poll).await {
                    Ok(lac) if lac >= next => continue,
                    Ok(_) => {}
                    Err(e) => {
                        tracing::debug!(ledger_id = self.ledger_id, error = %e, "long poll failed");
                        // Bookies are being replaced: back off a little before asking again.
                        let backoff = Duration::from_millis(20u64 << idle.min(5));
                        tokio::time::sleep(backoff).await;
                    }
                }
                // Nothing new: the ledger may have been closed or its ensemble changed.
                if let Err(e) = self.refresh_metadata().await {
                    return Some((
                        stream::once(async move { Err(e) }).right_stream(),
                        (next, idle),
                    ));
                }
                let _ = idle;
            }
        })
        .flatten()
    }
}
