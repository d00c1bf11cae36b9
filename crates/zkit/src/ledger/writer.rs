//! [`LedgerWriter`]: the async shell around [`PipelineCore`]. One task per ledger owns the
//! core, the in-flight bookie requests and the ledger's metadata copy; handles send it
//! commands. Appends are pipelined up to a window; each batch's reply leaves when its last
//! entry is acknowledged, so replies come in entry order.
//!
//! The task also runs the two metadata changes a writer makes, both by versioned CAS with a
//! re-read on conflict: the ensemble change (replacement bookies chosen at random from the
//! writable ones, never one of the ensemble or one that failed before; `LedgerHandle
//! .ensembleChangeLoop`) and the close. Either finding the ledger IN_RECOVERY or CLOSED by
//! someone else means a recovery fenced this writer.
//!
//! The same shell, in recovery mode, re-replicates the entries a recovery found: entries are
//! copied verbatim with the recovery flag (accepted on fenced bookies) and each needs all `Qw`
//! copies; its ensemble changes expect the ledger IN_RECOVERY.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicI64, Ordering::Relaxed};
use std::sync::Arc;

use bytes::Bytes;
use futures::future::BoxFuture;
use futures::stream::{FuturesUnordered, StreamExt};
use futures::FutureExt;
use tokio::sync::{mpsc, oneshot, watch};
use zkit_bookie::protocol::entry::{Digester, MasterKey};
use zkit_bookie::protocol::Status;
use zkit_bookie::ClientError;

use super::bookies::BookiePool;
use super::layout::{LedgerMetadata, LedgerState};
use super::metadata::{Cas, MetadataStore, Version};
use super::pipeline::{AddOutcome, EnsembleChange, PipelineCore, Send, Stop};
use super::schedule::choose_replacement;
use super::LedgerError;

/// Whether the shell writes for an owner or for a recovery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// The ledger's writer: metadata must be OPEN.
    Owner,
    /// Recovery adds: metadata must be IN_RECOVERY.
    Recovery,
}

enum Cmd {
    Add {
        entries: Vec<Bytes>,
        reply: oneshot::Sender<Result<i64, LedgerError>>,
    },
    AddEncoded {
        entry: Bytes,
        length: u64,
        reply: oneshot::Sender<Result<i64, LedgerError>>,
    },
    /// Wait until nothing is in flight, then close by CAS (owner) or just report (recovery).
    Close {
        reply: oneshot::Sender<Result<Closed, LedgerError>>,
    },
}

/// What a drained writer reports.
pub(crate) struct Closed {
    pub metadata: LedgerMetadata,
    pub version: Version,
    pub lac: i64,
    pub length: u64,
}

struct Shared {
    ledger_id: i64,
    lac: AtomicI64,
    metadata: watch::Receiver<LedgerMetadata>,
    /// Why the writer task ended, for commands sent after it did.
    ended: std::sync::OnceLock<LedgerError>,
}

/// A writer of one ledger (BookKeeper's `LedgerHandle`, write side). Clones share the writer.
/// Dropping every clone without [`LedgerWriter::close`] leaves the ledger open, as a crashed
/// writer does (appends already submitted still complete).
#[derive(Clone)]
pub struct LedgerWriter {
    tx: mpsc::Sender<Cmd>,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for LedgerWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LedgerWriter")
            .field("ledger_id", &self.shared.ledger_id)
            .field("lac", &self.last_add_confirmed())
            .finish()
    }
}

/// An append in flight: resolves to the entry id (for a batch, the last one) once it is
/// acknowledged. Entries are acknowledged in order.
#[must_use = "an append is only known durable once this resolves"]
pub struct PendingAdd {
    rx: oneshot::Receiver<Result<i64, LedgerError>>,
    ledger_id: i64,
}

impl std::future::Future for PendingAdd {
    type Output = Result<i64, LedgerError>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let id = self.ledger_id;
        self.rx
            .poll_unpin(cx)
            .map(|r| r.unwrap_or(Err(LedgerError::LedgerClosed(id))))
    }
}

impl LedgerWriter {
    /// The ledger id.
    pub fn id(&self) -> i64 {
        self.shared.ledger_id
    }

    /// The last entry acknowledged (-1: none).
    pub fn last_add_confirmed(&self) -> i64 {
        self.shared.lac.load(Relaxed)
    }

    /// The writer's copy of the metadata (ensembles as changed so far).
    pub fn metadata(&self) -> LedgerMetadata {
        self.shared.metadata.borrow().clone()
    }

    async fn send(&self, cmd: Cmd) -> Result<(), LedgerError> {
        self.tx.send(cmd).await.map_err(|_| {
            self.shared
                .ended
                .get()
                .cloned()
                .unwrap_or(LedgerError::LedgerClosed(self.shared.ledger_id))
        })
    }

    /// Submits one entry and returns at once (after waiting for room in the pipeline); the
    /// [`PendingAdd`] resolves when it is acknowledged. Entries submitted from one task get
    /// consecutive ids in submission order.
    ///
    /// # Errors
    /// [`LedgerError::LedgerClosed`] when the writer is closed or gone; later failures
    /// (fenced, not enough bookies) come through the [`PendingAdd`].
    ///
    /// # Cancellation safety
    /// Dropping the future before it returns may or may not have submitted the entry.
    pub async fn submit(&self, data: impl Into<Bytes>) -> Result<PendingAdd, LedgerError> {
        self.submit_batch(vec![data.into()]).await
    }

    /// Submits several entries at once (consecutive ids); the [`PendingAdd`] resolves to the
    /// last id when all are acknowledged.
    ///
    /// # Errors
    /// As [`LedgerWriter::submit`]; an empty batch is [`LedgerError::BadArguments`].
    pub async fn submit_batch(&self, entries: Vec<Bytes>) -> Result<PendingAdd, LedgerError> {
        if entries.is_empty() {
            return Err(LedgerError::BadArguments("empty batch".into()));
        }
        let (reply, rx) = oneshot::channel();
        self.send(Cmd::Add { entries, reply }).await?;
        Ok(PendingAdd {
            rx,
            ledger_id: self.shared.ledger_id,
        })
    }

    /// Appends one entry and waits until it is acknowledged; returns its id.
    ///
    /// # Errors
    /// [`LedgerError::Fenced`] (a recovery closed the ledger under this writer),
    /// [`LedgerError::LedgerClosed`], [`LedgerError::NotEnoughBookies`] (a bookie failed and
    /// none can replace it), [`LedgerError::EntryTooLarge`], ZooKeeper errors of an ensemble
    /// change.
    pub async fn append(&self, data: impl Into<Bytes>) -> Result<i64, LedgerError> {
        self.submit(data).await?.await
    }

    /// Appends entries and waits until all are acknowledged; returns their ids.
    ///
    /// # Errors
    /// As [`LedgerWriter::append`].
    pub async fn append_batch(
        &self,
        entries: Vec<Bytes>,
    ) -> Result<std::ops::RangeInclusive<i64>, LedgerError> {
        let n = entries.len() as i64;
        let last = self.submit_batch(entries).await?.await?;
        Ok(last - n + 1..=last)
    }

    /// Waits for every submitted entry, then closes the ledger: its metadata becomes CLOSED
    /// with the last entry and length, by CAS. Returns the closed metadata.
    ///
    /// # Errors
    /// [`LedgerError::Fenced`] when a recovery got there first (its close stands),
    /// [`LedgerError::LedgerClosed`] when already closed by this writer, the failure that
    /// stopped the writer, ZooKeeper errors.
    pub async fn close(&self) -> Result<LedgerMetadata, LedgerError> {
        let (reply, rx) = oneshot::channel();
        self.send(Cmd::Close { reply }).await?;
        rx.await
            .unwrap_or(Err(LedgerError::LedgerClosed(self.shared.ledger_id)))
            .map(|c| c.metadata)
    }

    /// Recovery mode: appends an encoded entry (verbatim) with the next id.
    pub(crate) async fn submit_encoded(
        &self,
        entry: Bytes,
        length: u64,
    ) -> Result<PendingAdd, LedgerError> {
        let (reply, rx) = oneshot::channel();
        self.send(Cmd::AddEncoded {
            entry,
            length,
            reply,
        })
        .await?;
        Ok(PendingAdd {
            rx,
            ledger_id: self.shared.ledger_id,
        })
    }

    /// Recovery mode: waits until nothing is in flight; reports the metadata and LAC.
    pub(crate) async fn drain(&self) -> Result<Closed, LedgerError> {
        let (reply, rx) = oneshot::channel();
        self.send(Cmd::Close { reply }).await?;
        rx.await
            .unwrap_or(Err(LedgerError::LedgerClosed(self.shared.ledger_id)))
    }
}

/// What a writer task needs.
pub(crate) struct WriterParams {
    pub ledger_id: i64,
    pub metadata: LedgerMetadata,
    pub version: Version,
    pub master_key: MasterKey,
    pub digester: Digester,
    pub mode: Mode,
    /// Last acknowledged entry and the ledger length there.
    pub lac: i64,
    pub length: u64,
    pub store: MetadataStore,
    pub pool: BookiePool,
    pub window: usize,
    pub max_entry_size: usize,
}

/// Starts a writer task.
pub(crate) fn start(p: WriterParams) -> LedgerWriter {
    let (tx, rx) = mpsc::channel(p.window.clamp(16, 4096));
    let (meta_tx, meta_rx) = watch::channel(p.metadata.clone());
    let shared = Arc::new(Shared {
        ledger_id: p.ledger_id,
        lac: AtomicI64::new(p.lac),
        metadata: meta_rx,
        ended: std::sync::OnceLock::new(),
    });
    let (_, ensemble) = p.metadata.last_ensemble();
    let ack_quorum = match p.mode {
        Mode::Owner => p.metadata.ack_quorum,
        // Recovery re-replicates every entry to all of its write set.
        Mode::Recovery => p.metadata.write_quorum,
    };
    let core = PipelineCore::new(
        p.ledger_id,
        ensemble.to_vec(),
        p.metadata.write_quorum,
        ack_quorum,
        p.lac,
        p.length,
    );
    let task = Task {
        core,
        shared: Arc::clone(&shared),
        meta_tx,
        version: p.version,
        metadata: p.metadata,
        master_key: p.master_key,
        digester: p.digester,
        mode: p.mode,
        store: p.store,
        pool: p.pool,
        window: p.window.max(1),
        max_entry_size: p.max_entry_size,
        waiters: VecDeque::new(),
        excluded: Vec::new(),
        stop_error: None,
    };
    tokio::spawn(task.run(rx));
    LedgerWriter { tx, shared }
}

type SendResult = (i64, usize, u64, AddOutcome);

struct Task {
    core: PipelineCore,
    shared: Arc<Shared>,
    meta_tx: watch::Sender<LedgerMetadata>,
    metadata: LedgerMetadata,
    version: Version,
    master_key: MasterKey,
    digester: Digester,
    mode: Mode,
    store: MetadataStore,
    pool: BookiePool,
    window: usize,
    max_entry_size: usize,
    /// (last entry id of a batch, its reply), in order.
    waiters: VecDeque<(i64, oneshot::Sender<Result<i64, LedgerError>>)>,
    /// Bookies that failed under this writer: never chosen again.
    excluded: Vec<String>,
    stop_error: Option<LedgerError>,
}

fn classify(r: &Result<(), ClientError>) -> AddOutcome {
    match r {
        Ok(()) => AddOutcome::Ok,
        Err(e) => match e.status() {
            Some(Status::Fenced) => AddOutcome::Fenced,
            Some(Status::Unauthorized) => AddOutcome::Unauthorized,
            _ => AddOutcome::Failed,
        },
    }
}

impl Task {
    fn error(&self) -> LedgerError {
        let id = self.shared.ledger_id;
        if let Some(e) = &self.stop_error {
            return e.clone();
        }
        match self.core.stopped() {
            Some(Stop::Fenced) => LedgerError::Fenced(id),
            Some(Stop::Unauthorized) => LedgerError::WrongPassword(id),
            _ => LedgerError::LedgerClosed(id),
        }
    }

    fn send_future(&self, s: Send) -> BoxFuture<'static, SendResult> {
        let pool = self.pool.clone();
        let ledger_id = self.shared.ledger_id;
        let key = self.master_key;
        let recovery = self.mode == Mode::Recovery;
        Box::pin(async move {
            let r = match pool.get(&s.bookie).await {
                Ok(c) => c.add(ledger_id, s.entry_id, key, recovery, s.entry).await,
                Err(e) => Err(e),
            };
            if let Err(e) = &r {
                tracing::debug!(ledger_id, entry = s.entry_id, bookie = %s.bookie, error = %e, "add failed");
            }
            (s.entry_id, s.index, s.epoch, classify(&r))
        })
    }

    /// Starts the core's sends: to each bookie with a live connection in one write, to the
    /// others one by one (connecting first).
    fn dispatch(&mut self, inflight: &mut FuturesUnordered<BoxFuture<'static, SendResult>>) {
        let sends = self.core.take_sends();
        if sends.is_empty() {
            return;
        }
        let mut by_bookie: Vec<(String, zkit_bookie::BookieClient, Vec<Send>)> = Vec::new();
        for s in sends {
            if let Some(group) = by_bookie.iter_mut().find(|(b, _, _)| *b == s.bookie) {
                group.2.push(s);
                continue;
            }
            match self.pool.get_now(&s.bookie) {
                Some(c) => by_bookie.push((s.bookie.clone(), c, vec![s])),
                None => inflight.push(self.send_future(s)),
            }
        }
        let ledger_id = self.shared.ledger_id;
        let recovery = self.mode == Mode::Recovery;
        for (bookie, client, group) in by_bookie {
            let tags: Vec<(i64, usize, u64)> = group
                .iter()
                .map(|s| (s.entry_id, s.index, s.epoch))
                .collect();
            let entries = group.into_iter().map(|s| (s.entry_id, s.entry)).collect();
            let futures = client.add_many(ledger_id, self.master_key, recovery, entries);
            for (f, (entry_id, index, epoch)) in futures.into_iter().zip(tags) {
                let bookie = bookie.clone();
                inflight.push(Box::pin(async move {
                    let r = f.await;
                    if let Err(e) = &r {
                        tracing::debug!(ledger_id, entry = entry_id, %bookie, error = %e, "add failed");
                    }
                    (entry_id, index, epoch, classify(&r))
                }));
            }
        }
    }

    fn deliver(&mut self) {
        let acks = self.core.take_acks();
        if let Some(&last) = acks.last() {
            self.shared.lac.store(last, Relaxed);
            while self.waiters.front().is_some_and(|(id, _)| *id <= last) {
                if let Some((id, w)) = self.waiters.pop_front() {
                    let _ = w.send(Ok(id));
                }
            }
        }
        if self.core.stopped().is_some() {
            let e = self.error();
            for (_, w) in self.waiters.drain(..) {
                let _ = w.send(Err(e.clone()));
            }
        }
    }

    async fn run(mut self, mut rx: mpsc::Receiver<Cmd>) {
        let mut inflight: FuturesUnordered<BoxFuture<'static, SendResult>> =
            FuturesUnordered::new();
        let mut change: Option<BoxFuture<'static, ChangeResult>> = None;
        let mut closing: Option<oneshot::Sender<Result<Closed, LedgerError>>> = None;
        let mut open = true;
        loop {
            self.dispatch(&mut inflight);
            self.deliver();
            if change.is_none() {
                if let Some(c) = self.core.begin_ensemble_change() {
                    change = Some(Box::pin(ensemble_change(
                        self.store.clone(),
                        self.shared.ledger_id,
                        self.mode,
                        self.metadata.clone(),
                        self.version,
                        c,
                        self.excluded.clone(),
                    )));
                }
            }
            let drained = self.core.in_flight() == 0 && change.is_none();
            if drained && (closing.is_some() || (!open && self.waiters.is_empty())) {
                if let Some(reply) = closing.take() {
                    let r = self.finish().await;
                    let _ = reply.send(r);
                }
                // Closed (or nobody left to write): later commands are refused.
                self.core.stop(Stop::Closed);
                drop(inflight);
                self.refuse_rest(rx).await;
                return;
            }
            if self.core.stopped().is_some() && inflight.is_empty() && change.is_none() {
                self.refuse_rest(rx).await;
                return;
            }
            let accepting = open
                && closing.is_none()
                && self.core.stopped().is_none()
                && self.core.in_flight() < self.window;
            tokio::select! {
                biased;
                Some(r) = inflight.next(), if !inflight.is_empty() => {
                    self.on_result(r);
                    // Take every answer already there before deciding anything.
                    while let Some(Some(r)) = inflight.next().now_or_never() {
                        self.on_result(r);
                    }
                }
                r = async { change.as_mut().expect("guarded").await }, if change.is_some() => {
                    change = None;
                    match r {
                        Ok((metadata, version, failed)) => {
                            self.excluded.extend(failed);
                            let (_, ens) = metadata.last_ensemble();
                            let ens = ens.to_vec();
                            self.metadata = metadata.clone();
                            self.version = version;
                            self.meta_tx.send_replace(metadata);
                            self.core.ensemble_changed(ens);
                        }
                        Err(e) => {
                            tracing::warn!(ledger_id = self.shared.ledger_id, error = %e, "ensemble change failed");
                            self.stop_error = Some(e);
                            self.core.ensemble_change_failed();
                        }
                    }
                }
                cmd = rx.recv(), if accepting => match cmd {
                    None => open = false,
                    Some(cmd) => {
                        self.on_cmd(cmd, &mut closing);
                        // Take what else is queued (up to the window) so its sends leave
                        // together: fewer, larger writes to each bookie.
                        while closing.is_none()
                            && self.core.stopped().is_none()
                            && self.core.in_flight() < self.window
                        {
                            match rx.try_recv() {
                                Ok(cmd) => self.on_cmd(cmd, &mut closing),
                                Err(_) => break,
                            }
                        }
                    }
                },
            }
        }
    }

    fn on_result(&mut self, (entry_id, index, epoch, outcome): SendResult) {
        // A broken connection is made again for the next user. Only the slot's current
        // bookie's: a late failure from the bookie an ensemble change replaced must not close
        // the connection to its replacement (whose adds in flight would fail with it).
        if outcome == AddOutcome::Failed && self.core.is_current(index, epoch) {
            if let Some(b) = self.core.ensemble().get(index) {
                self.pool.forget(b);
            }
        }
        self.core.on_response(entry_id, index, epoch, outcome);
    }

    fn on_cmd(
        &mut self,
        cmd: Cmd,
        closing: &mut Option<oneshot::Sender<Result<Closed, LedgerError>>>,
    ) {
        match cmd {
            Cmd::Add { entries, reply } => {
                if self.mode != Mode::Owner {
                    let _ = reply.send(Err(LedgerError::BadArguments("recovery writer".into())));
                    return;
                }
                if let Some(big) = entries.iter().find(|e| e.len() > self.max_entry_size) {
                    let _ = reply.send(Err(LedgerError::EntryTooLarge {
                        size: big.len(),
                        max: self.max_entry_size,
                    }));
                    return;
                }
                let mut last = None;
                for e in &entries {
                    match self.core.append(&self.digester, e) {
                        Ok(id) => last = Some(id),
                        Err(_) => break,
                    }
                }
                match last {
                    Some(id) if self.core.stopped().is_none() => {
                        self.waiters.push_back((id, reply))
                    }
                    _ => {
                        let _ = reply.send(Err(self.error()));
                    }
                }
            }
            Cmd::AddEncoded {
                entry,
                length,
                reply,
            } => match self.core.append_encoded(entry, length) {
                Ok(id) => self.waiters.push_back((id, reply)),
                Err(_) => {
                    let _ = reply.send(Err(self.error()));
                }
            },
            Cmd::Close { reply } => {
                if let Some(s) = self.core.stopped() {
                    let _ = reply.send(Err(match s {
                        Stop::Closed => LedgerError::LedgerClosed(self.shared.ledger_id),
                        _ => self.error(),
                    }));
                } else if closing.is_some() {
                    let _ = reply.send(Err(LedgerError::LedgerClosed(self.shared.ledger_id)));
                } else {
                    *closing = Some(reply);
                }
            }
        }
    }

    /// Everything is acknowledged: close by CAS (owner) or report (recovery).
    async fn finish(&mut self) -> Result<Closed, LedgerError> {
        if self.core.stopped().is_some() {
            return Err(self.error());
        }
        let id = self.shared.ledger_id;
        let lac = self.core.lac();
        let length = self.core.lac_length();
        if self.mode == Mode::Recovery {
            return Ok(Closed {
                metadata: self.metadata.clone(),
                version: self.version,
                lac,
                length,
            });
        }
        loop {
            match self.metadata.state {
                LedgerState::Open => {}
                LedgerState::Closed if self.metadata.last_entry_id == lac => {
                    return Ok(Closed {
                        metadata: self.metadata.clone(),
                        version: self.version,
                        lac,
                        length,
                    })
                }
                _ => return Err(LedgerError::Fenced(id)),
            }
            let closed = self.metadata.closed(lac, length)?;
            match self.store.write(id, &closed, self.version).await? {
                Cas::Written(v) => {
                    self.metadata = closed.clone();
                    self.version = v;
                    self.meta_tx.send_replace(closed.clone());
                    return Ok(Closed {
                        metadata: closed,
                        version: v,
                        lac,
                        length,
                    });
                }
                Cas::Conflict => {
                    let (m, v) = self.store.read(id).await?;
                    self.metadata = m;
                    self.version = v;
                }
            }
        }
    }

    /// After the end: answer every further command with the reason.
    async fn refuse_rest(self, mut rx: mpsc::Receiver<Cmd>) {
        let e = match self.core.stopped() {
            Some(Stop::Closed) | None => LedgerError::LedgerClosed(self.shared.ledger_id),
            Some(_) => self.error(),
        };
        let _ = self.shared.ended.set(e.clone());
        for (_, w) in self.waiters {
            let _ = w.send(Err(e.clone()));
        }
        rx.close();
        while let Some(cmd) = rx.recv().await {
            match cmd {
                Cmd::Add { reply, .. } | Cmd::AddEncoded { reply, .. } => {
                    let _ = reply.send(Err(e.clone()));
                }
                Cmd::Close { reply } => {
                    let _ = reply.send(Err(e.clone()));
                }
            }
        }
    }
}

/// New metadata and version, and the bookies that were replaced.
type ChangeResult = Result<(LedgerMetadata, Version, Vec<String>), LedgerError>;

/// Chooses replacements for the failed slots and records the new fragment by CAS; on a
/// conflict re-reads and re-decides (`LedgerHandle.ensembleChangeLoop`).
async fn ensemble_change(
    store: MetadataStore,
    ledger_id: i64,
    mode: Mode,
    mut metadata: LedgerMetadata,
    mut version: Version,
    change: EnsembleChange,
    mut excluded: Vec<String>,
) -> ChangeResult {
    let failed: Vec<String> = change
        .replace
        .iter()
        .filter_map(|i| change.ensemble.get(*i).cloned())
        .collect();
    excluded.extend(failed.iter().cloned());
    let (writable, _) = store.bookies().await?;
    let mut ensemble = change.ensemble.clone();
    {
        let mut rng = rand::thread_rng();
        for &i in &change.replace {
            let b = choose_replacement(&writable, &ensemble, &excluded, &mut rng)?;
            ensemble[i] = b;
        }
    }
    tracing::info!(ledger_id, first_entry = change.first_entry, old = ?change.ensemble, new = ?ensemble, "ensemble change");
    loop {
        let expected = match mode {
            Mode::Owner => LedgerState::Open,
            Mode::Recovery => LedgerState::InRecovery,
        };
        if metadata.state != expected {
            return Err(match (mode, metadata.state) {
                (Mode::Recovery, LedgerState::Closed) => LedgerError::LedgerClosed(ledger_id),
                _ => LedgerError::Fenced(ledger_id),
            });
        }
        if metadata.ensembles.get(&change.first_entry) == Some(&ensemble) {
            // Our write landed before its answer was lost.
            return Ok((metadata, version, failed));
        }
        let next = metadata.with_ensemble_change(change.first_entry, ensemble.clone())?;
        match store.write(ledger_id, &next, version).await? {
            Cas::Written(v) => return Ok((next, v, failed)),
            Cas::Conflict => {
                let (m, v) = store.read(ledger_id).await?;
                metadata = m;
                version = v;
            }
        }
    }
}
