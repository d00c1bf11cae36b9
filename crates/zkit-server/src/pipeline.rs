//! The pipeline: the one task that owns the [`Core`]. Like ZooKeeper's request processors in a
//! standalone server, every read and write passes through it in arrival order, so per
//! connection replies leave in request order and a watch event leaves before the reply of the
//! write that fired it (the core emits them in that order; this task keeps it).
//!
//! A batch is everything queued on the channel when the task wakes up (bounded by
//! [`MAX_BATCH`]). After the batch it takes `core.ready()` and hands the txns to
//! [`Storage::submit`], which writes and fsyncs them on the storage's own thread; the pipeline
//! does not wait for that but goes on with the next batch, so the CPU work of one batch overlaps
//! the fsync of the one before, and the writes that arrive during an fsync share the next one
//! (group commit). A small batch on an idle log is the exception: the WAL writes and fsyncs it
//! before `submit` returns, sparing a lone write two thread hand-offs. Each batch's messages wait in a queue of in-flight batches (at most
//! [`MAX_IN_FLIGHT`]) and are handed to the connections' writers strictly in order, once every
//! txn up to that batch is durable. A batch without txns waits behind earlier undurable ones too
//! — its reads may have seen their writes (Apache's SyncRequestProcessor holds reads behind
//! pending flushes the same way) — but when nothing is in flight it is answered at once,
//! without touching the disk. A ticker drives `core.tick(now)` for session expiry and the
//! container/TTL reaper. This task does no socket I/O.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rand::RngCore;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, trace, warn};
use zkit_core::{ConnId, Core, Outbound};

use crate::metrics::Metrics;
use crate::outbox::{Flushed, OutboxSender};
use crate::storage::error::StorageError;
use crate::storage::{Durable, Storage};
use crate::to_core::{Inspection, ToCore};

/// Most messages folded into one batch, so a flood cannot starve ticks or delay replies forever.
const MAX_BATCH: usize = 4096;

/// Most batches waiting for the disk; beyond it the pipeline stops taking messages (and the
/// bounded queue in front of it stops the readers) until the oldest is durable.
const MAX_IN_FLIGHT: usize = 32;

/// Milliseconds since the Unix epoch: the core's notion of `now`.
pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// A batch whose txns were submitted and whose messages wait for them to be durable.
struct InFlight {
    /// `None` once resolved `Ok` (or for a batch without txns).
    durable: Option<Durable>,
    submitted: Instant,
    last_zxid: i64,
    txns: usize,
    messages: Vec<(ConnId, Outbound)>,
    /// Receipt times of the batch's requests, for latency.
    received: Vec<Instant>,
}

pub(crate) struct Pipeline {
    core: Core,
    storage: Box<dyn Storage>,
    conns: HashMap<ConnId, OutboxSender>,
    metrics: Arc<Metrics>,
    /// Receipt times of the requests handled since the last `ready()`.
    batch_received: Vec<Instant>,
    /// Batches waiting for the disk, oldest first.
    in_flight: VecDeque<InFlight>,
    /// Connections with messages staged by the release in progress.
    touched: Vec<ConnId>,
    /// Connections closed by a storage failure whose queued messages must not reach the
    /// rebuilt core (removed when their `Closed` arrives).
    dropped: HashSet<ConnId>,
    /// The stale-read cache of the `STALE_READS` fail point (tests only).
    #[cfg(feature = "failpoints")]
    stale_reads: StaleReads,
}

impl Pipeline {
    pub fn new(core: Core, storage: Box<dyn Storage>, metrics: Arc<Metrics>) -> Self {
        Pipeline {
            core,
            storage,
            conns: HashMap::new(),
            metrics,
            batch_received: Vec::new(),
            in_flight: VecDeque::new(),
            touched: Vec::new(),
            dropped: HashSet::new(),
            #[cfg(feature = "failpoints")]
            stale_reads: StaleReads::default(),
        }
    }

    /// Runs until `shutdown` is cancelled (then drains what is queued, waits for it to be
    /// durable, releases it and closes the storage: a final snapshot) or the storage fails
    /// beyond repair (then cancels `shutdown` itself: acknowledging writes that are not durable
    /// would be worse than stopping). A failed batch the storage can rebuild from is handled in
    /// `rebuild_after`.
    pub async fn run(
        mut self,
        mut rx: mpsc::Receiver<ToCore>,
        tick_every: Duration,
        shutdown: CancellationToken,
    ) {
        let mut ticker = tokio::time::interval(tick_every);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let room = self.in_flight.len() < MAX_IN_FLIGHT;
            let waiting = self.in_flight.front().is_some_and(|b| b.durable.is_some());
            tokio::select! {
                biased;
                () = shutdown.cancelled() => break,
                // The oldest batch's fsync first: releasing replies beats taking more work.
                durable = front_durable(&mut self.in_flight), if waiting => {
                    if let Err(err) = durable {
                        if let Err(err) = self.rebuild_after(err).await {
                            error!(%err, "storage failed; stopping the server");
                            shutdown.cancel();
                            return;
                        }
                    } else {
                        self.durable_front();
                    }
                    continue;
                }
                // Before the requests, so a steady flood cannot starve session expiry.
                _ = ticker.tick() => self.core.tick(now_ms()),
                msg = rx.recv(), if room => {
                    let Some(msg) = msg else { break };
                    // One clock read per batch, not per message (the core's time has
                    // millisecond resolution; the batch takes far less).
                    let now = now_ms();
                    self.on_message(msg, now);
                    for _ in 1..MAX_BATCH {
                        match rx.try_recv() {
                            Ok(msg) => self.on_message(msg, now),
                            Err(_) => break,
                        }
                    }
                }
            }
            self.end_batch();
        }
        // Graceful stop: answer what was already received once it is durable, then drop every
        // writer's outbox so the writers flush and close their sockets.
        rx.close();
        while let Ok(msg) = rx.try_recv() {
            self.on_message(msg, now_ms());
        }
        self.end_batch();
        let mut failed = false;
        while self.in_flight.front().is_some_and(|b| b.durable.is_some()) {
            if let Err(err) = front_durable(&mut self.in_flight).await {
                // Nothing more is released: the writes may be lost.
                error!(%err, "storage failed during shutdown");
                failed = true;
                break;
            }
            self.durable_front();
        }
        if !failed {
            if let Err(err) = self.storage.close(&self.core).await {
                error!(%err, "closing the storage failed (the WAL still holds every write)");
            }
        }
        self.in_flight.clear();
        self.conns.clear();
    }

    fn on_message(&mut self, msg: ToCore, now: i64) {
        if !self.dropped.is_empty() {
            match &msg {
                ToCore::Closed { conn } if self.dropped.remove(conn) => return,
                ToCore::Connect { conn, .. } if self.dropped.contains(conn) => return,
                ToCore::Request { conn, received, .. } | ToCore::Reject { conn, received, .. }
                    if self.dropped.contains(conn) =>
                {
                    // Not answered (the socket is closed) but counted as done.
                    self.batch_received.push(*received);
                    return;
                }
                _ => {}
            }
        }
        match msg {
            ToCore::Open {
                conn,
                peer,
                x509,
                outbound,
            } => {
                // The connection's `ip:<addr>` identity (whoAmI, ip ACLs), and its `x509`
                // one when it presented a client certificate.
                self.core.set_peer_ip(conn, peer.to_string());
                if let Some(subject) = x509 {
                    self.core.set_x509_identity(conn, subject);
                }
                self.conns.insert(conn, outbound);
            }
            ToCore::Connect { conn, request } => {
                let mut passwd = [0u8; 16];
                rand::thread_rng().fill_bytes(&mut passwd);
                self.core.connect(now, conn, request, passwd);
            }
            ToCore::Request {
                conn,
                xid,
                request,
                received,
            } => {
                trace!(conn, xid, op = ?request.op_code(), "request");
                self.batch_received.push(received);
                self.core.handle(now, conn, xid, request);
            }
            ToCore::Reject {
                conn,
                xid,
                op,
                err,
                received,
            } => {
                self.batch_received.push(received);
                self.core.reject(now, conn, xid, op, err);
            }
            ToCore::Closed { conn } => {
                self.conns.remove(&conn);
                self.core.disconnect(now, conn);
            }
            ToCore::Stats { reply } => {
                // The asker may have gone; nothing to do then.
                let _ = reply.send(self.core.stats());
            }
            ToCore::Inspect(Inspection(f)) => f(&self.core),
        }
    }

    /// Takes the batch's txns and messages out of the core: the txns go to the storage (which
    /// starts writing them at once), the messages wait behind every batch still in flight — or
    /// leave now if there is none and the batch wrote nothing.
    fn end_batch(&mut self) {
        #[cfg_attr(not(feature = "failpoints"), allow(unused_mut))]
        let mut ready = self.core.ready();
        #[cfg(feature = "failpoints")]
        self.stale_reads.serve(&mut ready.messages);
        if ready.txns.is_empty() {
            if ready.messages.is_empty() && self.batch_received.is_empty() {
                return;
            }
            match self.in_flight.back_mut() {
                // Reads after undurable writes: they leave with the last of those writes.
                Some(last) => {
                    last.messages.extend(ready.messages);
                    last.received.append(&mut self.batch_received);
                }
                None => {
                    let mut received = std::mem::take(&mut self.batch_received);
                    self.release(ready.messages, &mut received);
                    self.batch_received = received;
                }
            }
            return;
        }
        // Taken before `submit`: a small batch on an idle log is written and fdatasynced
        // inside it, and that time is what the fsync histogram is for.
        let submitted = Instant::now();
        let durable = self.storage.submit(&ready.txns);
        let last_zxid = ready.txns.last().map_or(0, |t| t.zxid);
        // The core now holds the submitted txns; a snapshot taken from it may run ahead of
        // the fsync (see `Storage::committed`).
        self.storage.committed(&self.core);
        self.in_flight.push_back(InFlight {
            durable: Some(durable),
            submitted,
            last_zxid,
            txns: ready.txns.len(),
            messages: ready.messages,
            received: std::mem::take(&mut self.batch_received),
        });
    }

    /// The oldest batch is durable: release it and every batch after it that no longer waits
    /// (batches resolve in order, so a later one is never durable before an earlier one).
    fn durable_front(&mut self) {
        if let Some(front) = self.in_flight.front_mut() {
            front.durable = None;
            // Submit → durable, including the wait behind earlier fsyncs: the latency a write
            // pays for the disk, which is what /metrics' fsync histogram reports.
            self.metrics.record_fsync(front.submitted.elapsed());
            debug!(
                zxid = format_args!("{:#x}", front.last_zxid),
                txns = front.txns,
                "batch durable"
            );
        }
        while self.in_flight.front().is_some_and(|b| b.durable.is_none()) {
            if let Some(batch) = self.in_flight.pop_front() {
                let mut received = batch.received;
                self.release(batch.messages, &mut received);
            }
        }
    }

    /// Hands `messages` to the connections' writers, in order, one queue operation per
    /// connection, then records the latencies of `received` (and empties it).
    fn release(&mut self, messages: Vec<(ConnId, Outbound)>, received: &mut Vec<Instant>) {
        for (conn, message) in messages {
            let closes = matches!(
                message,
                Outbound::Close
                    | Outbound::Connect {
                        close_after: true,
                        ..
                    }
            );
            if let Some(tx) = self.conns.get_mut(&conn) {
                // A writer that has gone away already closed its socket; dropping is right.
                if tx.stage(message) {
                    self.touched.push(conn);
                }
            }
            if closes {
                // Nothing may follow a close; the writer ends after writing it (dropping the
                // sender flushes what is staged and closes the outbox).
                self.conns.remove(&conn);
            }
        }
        for conn in self.touched.drain(..) {
            let Some(tx) = self.conns.get_mut(&conn) else {
                continue;
            };
            if tx.flush() == Flushed::Overflowed {
                warn!(
                    conn,
                    "closing a connection that does not read its replies and events \
                     (outbound queue over max_outbound_bytes)"
                );
                self.metrics.outbound_overflows.fetch_add(1, Relaxed);
                self.conns.remove(&conn);
            }
        }
        self.finish(received);
    }

    /// A batch could not be made durable: none of its messages, nor those of any batch after
    /// it, may leave (a reply would acknowledge a write that may be lost, an event would
    /// announce one), and the core holds their txns although the disk may not. So every
    /// connection is closed — clients see a connection loss and reconnect, their sessions
    /// being on disk — and the core is rebuilt from what the storage really has. Only if that
    /// fails does the error stop the server.
    async fn rebuild_after(&mut self, err: StorageError) -> Result<(), StorageError> {
        error!(
            %err,
            batches = self.in_flight.len(),
            "storage failed; closing every connection and rebuilding from disk"
        );
        // Unanswered (their sockets close) but counted as done.
        let mut received = std::mem::take(&mut self.batch_received);
        for batch in self.in_flight.drain(..) {
            received.extend(batch.received);
        }
        self.dropped.extend(self.conns.keys().copied());
        // Dropping the outboxes closes them: writers finish what was released before the
        // failure and close their sockets.
        self.conns.clear();
        let config = self.core.config().clone();
        self.core = self.storage.rebuild(config, now_ms()).await?;
        tracing::info!(
            zxid = format_args!("{:#x}", self.core.last_zxid()),
            "state rebuilt from disk; serving again"
        );
        self.finish(&mut received);
        self.batch_received = received;
        Ok(())
    }

    /// Records the latencies of answered requests and takes them off the outstanding count.
    fn finish(&mut self, received: &mut Vec<Instant>) {
        if received.is_empty() {
            return;
        }
        let answered = received.len();
        self.metrics.record_latencies(received, Instant::now());
        received.clear();
        self.metrics
            .outstanding
            .fetch_sub(i64::try_from(answered).unwrap_or(i64::MAX), Relaxed);
    }
}

/// Broken on purpose (fail point `STALE_READS`, `return(MS)`; tests only): a getData reply is
/// replaced by the first reply for the same node (by czxid) given in the last MS, a read cache
/// that writes never invalidate. It proves that the verification checkers catch stale reads.
#[cfg(feature = "failpoints")]
#[derive(Default)]
struct StaleReads(HashMap<i64, (Instant, zkit_proto::Response)>);

#[cfg(feature = "failpoints")]
impl StaleReads {
    fn serve(&mut self, messages: &mut [(ConnId, Outbound)]) {
        use crate::storage::failpoint;
        let Some(max_age) = fail::eval(failpoint::STALE_READS, failpoint::millis_arg) else {
            self.0.clear();
            return;
        };
        let now = Instant::now();
        for (_, message) in messages {
            let Outbound::Reply { header, body } = message else {
                continue;
            };
            let zkit_proto::Response::GetData { stat, .. } = body else {
                continue;
            };
            if header.err != 0 {
                continue;
            }
            match self.0.get(&stat.czxid) {
                Some((at, cached)) if now.duration_since(*at) < max_age => *body = cached.clone(),
                _ => {
                    self.0.insert(stat.czxid, (now, body.clone()));
                }
            }
        }
    }
}

/// The oldest in-flight batch's durability (pending when there is none to wait for).
async fn front_durable(in_flight: &mut VecDeque<InFlight>) -> Result<(), StorageError> {
    match in_flight.front_mut().and_then(|b| b.durable.as_mut()) {
        Some(durable) => durable.await,
        None => std::future::pending().await,
    }
}
