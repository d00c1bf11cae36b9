//! The pipeline: the one task that owns the [`Core`]. Like ZooKeeper's request processors in a
//! standalone server, every read and write passes through it in arrival order, so per
//! connection replies leave in request order and a watch event leaves before the reply of the
//! write that fired it (the core emits them in that order; this task keeps it).
//!
//! A batch is everything queued on the channel when the task wakes up (bounded by
//! [`MAX_BATCH`]). After the batch it takes `core.ready()`, persists the txns through
//! [`Storage`] — one call for the whole batch, which is group commit — and only then hands the
//! messages to the connections' writers. A ticker drives `core.tick(now)` for session expiry and
//! the container/TTL reaper. This task does no socket I/O.

use std::collections::HashMap;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rand::RngCore;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, trace};
use zkit_core::{ConnId, Core, Outbound, Stats};
use zkit_proto::{ConnectRequest, ErrorCode, Request};

use crate::metrics::Metrics;
use crate::storage::Storage;

/// Most messages folded into one batch, so a flood cannot starve ticks or delay replies forever.
const MAX_BATCH: usize = 4096;

/// What connections ask of the pipeline.
#[derive(Debug)]
pub(crate) enum ToCore {
    /// A connection exists; this is where its messages go.
    Open {
        conn: ConnId,
        peer: std::net::IpAddr,
        outbound: mpsc::UnboundedSender<Outbound>,
    },
    /// The handshake.
    Connect {
        conn: ConnId,
        request: ConnectRequest,
    },
    /// A decoded request.
    Request {
        conn: ConnId,
        xid: i32,
        request: Request,
        received: Instant,
    },
    /// A request the shell could not decode; answered with `err` (a write, by `op`, is
    /// logged as an error txn first, as Apache does).
    Reject {
        conn: ConnId,
        xid: i32,
        op: i32,
        err: ErrorCode,
        received: Instant,
    },
    /// The connection is gone.
    Closed { conn: ConnId },
    /// A snapshot of the core's counters (four-letter words).
    Stats { reply: oneshot::Sender<Stats> },
    /// A read-only look at the core between batches (four-letter words, admin endpoint): the
    /// closure answers through its own channel.
    Inspect(Inspection),
}

/// A closure run on the core by [`ToCore::Inspect`].
pub(crate) struct Inspection(pub Box<dyn FnOnce(&Core) + Send>);

impl std::fmt::Debug for Inspection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Inspection")
    }
}

/// Milliseconds since the Unix epoch: the core's notion of `now`.
pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

pub(crate) struct Pipeline {
    core: Core,
    storage: Box<dyn Storage>,
    conns: HashMap<ConnId, mpsc::UnboundedSender<Outbound>>,
    metrics: Arc<Metrics>,
    /// Receipt times of the requests in the current batch, for latency.
    batch_received: Vec<Instant>,
    /// Connections closed by a storage failure whose queued messages must not reach the
    /// rebuilt core (removed when their `Closed` arrives).
    dropped: std::collections::HashSet<ConnId>,
}

impl Pipeline {
    pub fn new(core: Core, storage: Box<dyn Storage>, metrics: Arc<Metrics>) -> Self {
        Pipeline {
            core,
            storage,
            conns: HashMap::new(),
            metrics,
            batch_received: Vec::new(),
            dropped: std::collections::HashSet::new(),
        }
    }

    /// Runs until `shutdown` is cancelled (then drains what is queued, flushes it and closes
    /// the storage: a final snapshot) or the storage fails beyond repair (then cancels
    /// `shutdown` itself: acknowledging writes that are not durable would be worse than
    /// stopping). A failed batch the storage can rebuild from is handled in `flush`.
    pub async fn run(
        mut self,
        mut rx: mpsc::Receiver<ToCore>,
        tick_every: Duration,
        shutdown: CancellationToken,
    ) {
        let mut ticker = tokio::time::interval(tick_every);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                biased;
                () = shutdown.cancelled() => break,
                msg = rx.recv() => {
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
                _ = ticker.tick() => self.core.tick(now_ms()),
            }
            if let Err(err) = self.flush().await {
                error!(%err, "storage failed; stopping the server");
                shutdown.cancel();
                return;
            }
        }
        // Graceful stop: answer what was already received, then drop every writer's sender so
        // the writers flush and close their sockets.
        rx.close();
        while let Ok(msg) = rx.try_recv() {
            self.on_message(msg, now_ms());
        }
        if let Err(err) = self.flush().await {
            error!(%err, "storage failed during shutdown");
        } else if let Err(err) = self.storage.close(&self.core).await {
            error!(%err, "closing the storage failed (the WAL still holds every write)");
        }
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
                outbound,
            } => {
                // The connection's `ip:<addr>` identity (whoAmI, ip ACLs).
                self.core.set_peer_ip(conn, peer.to_string());
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

    /// The batch could not be made durable: none of its messages may leave (a reply would
    /// acknowledge a write that may be lost, an event would announce one), and the core holds
    /// its txns although the disk may not. So every connection is closed — clients see a
    /// connection loss and reconnect, their sessions being on disk — and the core is rebuilt
    /// from what the storage really has. Only if that fails does the error stop the server.
    async fn rebuild_after(&mut self, err: std::io::Error) -> std::io::Result<()> {
        error!(%err, "storage failed; closing every connection and rebuilding from disk");
        self.dropped
            .extend(self.conns.drain().map(|(conn, _)| conn));
        let config = self.core.config().clone();
        self.core = self.storage.rebuild(config, now_ms()).await?;
        tracing::info!(
            zxid = format_args!("{:#x}", self.core.last_zxid()),
            "state rebuilt from disk; serving again"
        );
        self.finish_batch();
        Ok(())
    }

    /// Persists the batch's txns, then releases its messages.
    async fn flush(&mut self) -> std::io::Result<()> {
        let ready = self.core.ready();
        if !ready.txns.is_empty() {
            // One persist = one append + fsync of the batch (group commit): its time is the
            // fsync latency /metrics reports.
            let started = Instant::now();
            if let Err(err) = self.storage.persist(&ready.txns).await {
                return self.rebuild_after(err).await;
            }
            self.metrics.record_fsync(started.elapsed());
            if let Some(last) = ready.txns.last() {
                debug!(
                    zxid = format_args!("{:#x}", last.zxid),
                    txns = ready.txns.len(),
                    "batch persisted"
                );
            }
        }
        for (conn, message) in ready.messages {
            let closes = matches!(
                message,
                Outbound::Close
                    | Outbound::Connect {
                        close_after: true,
                        ..
                    }
            );
            if let Some(tx) = self.conns.get(&conn) {
                // A writer that has gone away already closed its socket; dropping is right.
                let _ = tx.send(message);
            }
            if closes {
                // Nothing may follow a close; the writer ends after writing it.
                self.conns.remove(&conn);
            }
        }
        // After the replies are out, so a due snapshot does not delay this batch: the core
        // holds exactly the durable state here (a snapshot is due every `snap_count` txns).
        self.storage.committed(&self.core);
        self.finish_batch();
        Ok(())
    }

    /// Records the batch's latencies and takes its requests off the outstanding count.
    fn finish_batch(&mut self) {
        let now = Instant::now();
        let answered = self.batch_received.len();
        for received in self.batch_received.drain(..) {
            self.metrics
                .record_latency(now.saturating_duration_since(received));
        }
        self.metrics
            .outstanding
            .fetch_sub(i64::try_from(answered).unwrap_or(i64::MAX), Relaxed);
    }
}
