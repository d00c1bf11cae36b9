//! The connection task's state machine: [`Task`] establishes a session, serves connections
//! until one is lost (then reconnects) or the session ends, and then fails what is left.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicI64, AtomicU64};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::BytesMut;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;
use tracing::info;

use crate::error::{Error, Result};
use crate::hosts::{Host, HostProvider};
use crate::transport::{ReadBuffer, Transport};
use crate::types::{SessionId, SessionInfo, SessionState, StateCell, WatchType, WatchedEvent};
use crate::watch::{WatchManager, WatcherId};

use super::handle::{lock, Command, Config, Ready, Reply, Shared, Sink, Submit, WatchIntent};

pub(super) enum PendingKind {
    User {
        watch: Option<WatchIntent>,
        reply: oneshot::Sender<Result<Reply>>,
    },
    SetWatches,
    /// removeWatches for a dropped watcher; the answer does not matter.
    InternalRemove,
    RemoveWatches {
        path: String,
        watch_type: WatchType,
        reply: oneshot::Sender<Result<()>>,
    },
    Close {
        reply: Option<oneshot::Sender<()>>,
    },
}

pub(super) struct Pending {
    pub(super) xid: i32,
    pub(super) sent: Instant,
    pub(super) kind: PendingKind,
}

/// One live connection's protocol state.
pub(super) struct Conn {
    pub(super) transport: Transport,
    pub(super) rbuf: ReadBuffer,
    pub(super) wbuf: BytesMut,
    pub(super) pending: VecDeque<Pending>,
    pub(super) pings: VecDeque<Instant>,
    pub(super) auths: VecDeque<usize>,
    pub(super) last_send: Instant,
    pub(super) last_recv: Instant,
    pub(super) host: Host,
}

/// Why serving a connection stopped.
pub(super) enum Stop {
    /// The connection is lost; reconnect.
    Disconnected(String),
    /// The session is over.
    Terminal(SessionState),
}

/// A command waiting for a connection.
pub(super) enum Queued {
    Request(Submit),
    RemoveWatches {
        path: String,
        watch_type: WatchType,
        frame: BytesMut,
        reply: oneshot::Sender<Result<()>>,
    },
}

pub(crate) struct Task {
    pub(super) shared: Arc<Shared>,
    pub(super) rx: mpsc::UnboundedReceiver<Command>,
    pub(super) weak_tx: mpsc::WeakUnboundedSender<Command>,
    pub(super) config: Config,
    pub(super) hosts: HostProvider,
    pub(super) session_id: i64,
    pub(super) passwd: Vec<u8>,
    pub(super) negotiated: Duration,
    /// `seenRwServerBefore`: a read-only server's session is local; re-attach only sessions a
    /// read-write server made.
    pub(super) seen_rw: bool,
    pub(super) last_zxid: i64,
    pub(super) auths: Vec<(String, Vec<u8>)>,
    /// Auth callers waiting for the answer to their packet (index into `auths`).
    pub(super) auth_waiters: Vec<(usize, oneshot::Sender<Result<()>>)>,
    pub(super) watches: WatchManager<Sink>,
    /// Watch-setting requests in flight per server path: no removeWatches for a path while one
    /// may still register.
    pub(super) inflight_watch: HashMap<String, u32>,
    pub(super) next_watcher_id: WatcherId,
    pub(super) next_xid: i32,
    pub(super) queued: VecDeque<Queued>,
    /// All handles are gone or `close` was called.
    pub(super) closing: Option<Option<oneshot::Sender<()>>>,
    /// The terminal state a close ends the session in (`Closed` unless the first close asked
    /// for `Expired`).
    pub(super) close_as: SessionState,
    pub(super) ready: Option<Ready>,
    pub(super) started: Instant,
    /// Read-only mode: a read-write server found by probing, tried first next time.
    pub(super) rw_host: Option<Host>,
    pub(super) connected_once: bool,
}

/// Creates the task and its channel; `run` must be spawned.
pub(crate) fn new_task(
    config: Config,
    hosts: HostProvider,
    session: Option<SessionInfo>,
    auths: Vec<(String, Vec<u8>)>,
    ready: Ready,
) -> (Task, mpsc::UnboundedSender<Command>, Arc<Shared>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let (session_id, passwd, seen_rw) = match session {
        Some(s) => (s.id.0, s.password, !s.readonly),
        None => (0, vec![0; 16], false),
    };
    let shared = Arc::new(Shared {
        state: watch::Sender::new(StateCell::new()),
        info: Mutex::new(SessionInfo {
            id: SessionId(session_id),
            password: passwd.clone(),
            readonly: false,
        }),
        timeout_ms: AtomicU64::new(
            u64::try_from(config.session_timeout.as_millis()).unwrap_or(u64::MAX),
        ),
        last_zxid: AtomicI64::new(0),
        last_ack: Mutex::new(None),
        server: Mutex::new(None),
    });
    let task = Task {
        shared: shared.clone(),
        rx,
        weak_tx: tx.downgrade(),
        negotiated: config.session_timeout,
        config,
        hosts,
        session_id,
        passwd,
        seen_rw,
        last_zxid: 0,
        auths,
        auth_waiters: Vec::new(),
        watches: WatchManager::default(),
        inflight_watch: HashMap::new(),
        next_watcher_id: 0,
        next_xid: 1,
        queued: VecDeque::new(),
        closing: None,
        close_as: SessionState::Closed,
        ready: Some(ready),
        started: Instant::now(),
        rw_host: None,
        connected_once: false,
    };
    (task, tx, shared)
}

impl Task {
    /// Runs the session until it ends.
    pub(crate) async fn run(mut self) {
        let end = loop {
            let conn = match self.establish().await {
                Ok(conn) => conn,
                Err(state) => break state,
            };
            match self.serve(conn).await {
                Stop::Terminal(state) => break state,
                Stop::Disconnected(why) => {
                    info!(session = %SessionId(self.session_id), reason = %why, "disconnected");
                    *lock(&self.shared.server) = None;
                    self.set_state(SessionState::Disconnected);
                }
            }
        };
        self.finish(end);
    }

    pub(super) fn set_state(&mut self, state: SessionState) {
        let changed = self.shared.state.send_if_modified(|cell| cell.set(state));
        if changed && !state.is_terminated() {
            for sink in self.watches.persistent() {
                sink.send_ref(WatchedEvent::new_session(state));
            }
        }
    }

    /// Fails what was in flight on a connection that ends.
    pub(super) fn fail_pending(&mut self, conn: Conn, stop: &Stop) {
        let err = match stop {
            Stop::Disconnected(_) => Error::ConnectionLoss,
            Stop::Terminal(state) => state.to_error(),
        };
        for pending in conn.pending {
            match pending.kind {
                PendingKind::User { reply, .. } => {
                    let _ = reply.send(Err(err.clone()));
                }
                PendingKind::RemoveWatches { reply, .. } => {
                    let _ = reply.send(Err(err.clone()));
                }
                PendingKind::Close { reply } => {
                    if let Some(reply) = reply {
                        let _ = reply.send(());
                    }
                }
                PendingKind::SetWatches | PendingKind::InternalRemove => {}
            }
        }
        self.inflight_watch.clear();
    }

    pub(super) fn fail_queued(&mut self, err: Error) {
        for queued in std::mem::take(&mut self.queued) {
            match queued {
                Queued::Request(submit) => {
                    let _ = submit.reply.send(Err(err.clone()));
                }
                Queued::RemoveWatches { reply, .. } => {
                    let _ = reply.send(Err(err.clone()));
                }
            }
        }
    }

    /// Records how a close ends the session, unless one is already under way (the first
    /// close's end stands).
    pub(super) fn close_as_first(&mut self, end: SessionState) {
        if self.closing.is_none() {
            self.close_as = end;
        }
    }

    pub(super) fn fail_ready(&mut self, err: Error) {
        if let Some(ready) = self.ready.take() {
            let _ = ready.send(Err(err));
        }
    }

    /// The session is over: every watcher hears the terminal state, every request fails.
    pub(super) fn finish(mut self, state: SessionState) {
        info!(session = %SessionId(self.session_id), ?state, "session ended");
        *lock(&self.shared.server) = None;
        self.set_state(state);
        let err = state.to_error();
        self.fail_ready(err.clone());
        self.fail_queued(err.clone());
        for (_, waiter) in std::mem::take(&mut self.auth_waiters) {
            let _ = waiter.send(Err(err.clone()));
        }
        for sink in self.watches.drain() {
            sink.send(WatchedEvent::new_session(state));
        }
        // Later commands fail too: close the channel and answer what is in it.
        self.rx.close();
        while let Ok(cmd) = self.rx.try_recv() {
            match cmd {
                Command::Request(submit) => {
                    let _ = submit.reply.send(Err(err.clone()));
                }
                Command::Auth { reply, .. } | Command::RemoveWatches { reply, .. } => {
                    let _ = reply.send(Err(err.clone()));
                }
                Command::Close { reply, .. } => {
                    let _ = reply.send(());
                }
                Command::Unwatch { .. } => {}
            }
        }
    }
}

/// Appends one frame written by `payload`.
pub(super) fn write_frame(buf: &mut BytesMut, payload: impl FnOnce(&mut BytesMut)) {
    zkit_proto::encode_frame(buf, payload);
}
