//! The connection task: one tokio task per client that owns the socket, the session, the
//! pending requests and the watch registrations. [`crate::Client`] handles talk to it through
//! an unbounded channel of [`Command`]s; the task talks back through per-request oneshots,
//! watcher channels and the shared [`Shared`] state.
//!
//! What it does, as `ClientCnxn` does:
//! - **Connect**: hosts round-robin ([`crate::hosts::HostProvider`]), each attempt (TCP connect,
//!   TLS, ConnectRequest, ConnectResponse) bounded by the connect timeout; a random pause before
//!   each reconnect and a back-off after a full round. Only the ConnectRequest is written before
//!   its response (`ClientCnxnSocketNIO` holds the rest back, so that an expired session's
//!   close cannot race a write into an RST). Then auth packets, SetWatches and the requests that
//!   waited.
//! - **Serve**: requests are written as they arrive (pipelined); replies must come back in xid
//!   order (`Xid out of order` drops the connection); frames are processed strictly in arrival
//!   order on this one task, so a watch event reaches its watcher before any later reply
//!   completes. Pings after idle sending, the read timeout on idle receiving.
//! - **Lose the connection**: requests in flight (and those waiting for it) fail with
//!   ConnectionLoss, persistent watchers hear `Disconnected`, one-shot registrations are kept
//!   and re-registered, with the last zxid seen, on the next connection.
//! - **End**: on expiry (ConnectResponse timeOut ≤ 0), AuthFailed, or close, every request fails
//!   with the state's error and every watcher gets the terminal session event.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use rand::Rng;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;
use tracing::{debug, info, warn};
use zkit_proto::codec::{put_i32, put_string_vec, put_ustring};
use zkit_proto::op::xid;
use zkit_proto::{
    ConnectRequest, ConnectResponse, ErrorCode, OpCode, Record, ReplyHeader, WatcherEvent,
};

use crate::error::{Error, Result};
use crate::hosts::{Host, HostProvider};
use crate::path::Chroot;
use crate::timing;
use crate::transport::{ReadBuffer, Transport};
use crate::types::{EventType, SessionId, SessionInfo, SessionState, WatchType, WatchedEvent};
use crate::watch::{WatchKind, WatchManager, WatcherId};

/// `SET_WATCHES_MAX_LENGTH` in `ClientCnxn`: paths per SetWatches batch, in bytes.
const SET_WATCHES_MAX_LENGTH: usize = 128 * 1024;
/// Read-only mode: first and largest pause between probes for a read-write server
/// (`minPingRwTimeout`, `maxPingRwTimeout`).
const MIN_PING_RW: Duration = Duration::from_millis(100);
const MAX_PING_RW: Duration = Duration::from_secs(60);
/// A write buffer above this is given back once flushed.
const KEEP_WRITE_CAPACITY: usize = 64 * 1024;

/// State the task publishes for [`crate::Client`]'s synchronous accessors.
#[derive(Debug)]
pub(crate) struct Shared {
    pub state: watch::Sender<SessionState>,
    pub info: Mutex<SessionInfo>,
    /// Negotiated session timeout in ms.
    pub timeout_ms: AtomicU64,
    /// zxid of the last reply (`ClientCnxn.lastZxid`).
    pub last_zxid: AtomicI64,
    /// Send instant of the latest request a server answered on this session.
    pub last_ack: Mutex<Option<Instant>>,
    /// `host:port` of the server of the live connection; `None` while there is none.
    pub server: Mutex<Option<String>>,
}

impl Shared {
    pub(crate) fn session_info(&self) -> SessionInfo {
        lock(&self.info).clone()
    }

    fn set_ack(&self, sent: Instant) {
        let mut ack = lock(&self.last_ack);
        if ack.map_or(true, |a| a < sent) {
            *ack = Some(sent);
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Critical sections are single assignments: a poisoned lock holds consistent data.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What a watch-setting request registers when it succeeds.
#[derive(Debug)]
pub(crate) struct WatchIntent {
    /// Server path.
    pub path: String,
    pub kind: WatchKind,
    /// exists: a missing node registers an exist watch.
    pub exists: bool,
    /// The requesting client's root, to strip from event paths.
    pub chroot: Chroot,
}

/// A server's answer to one request.
#[derive(Debug)]
pub(crate) struct Reply {
    /// The reply header's error code (0: success, and `body` holds the response).
    pub err: i32,
    pub body: Bytes,
    /// The registered watcher, when the request set one and the server's answer registers it.
    pub watcher: Option<WatcherReceiver>,
}

/// One encoded request: `[len][xid][op][body]`, `len` and `xid` patched by the task.
#[derive(Debug)]
pub(crate) struct Submit {
    pub frame: BytesMut,
    pub watch: Option<WatchIntent>,
    /// checkWatches: fail with NoWatcher without asking the server unless a local registration
    /// of this type exists (`ZKWatchManager.containsWatcher`).
    pub precheck: Option<(String, WatchType)>,
    pub reply: oneshot::Sender<Result<Reply>>,
}

/// What a client handle asks the task.
#[derive(Debug)]
pub(crate) enum Command {
    Request(Submit),
    Auth {
        scheme: String,
        auth: Vec<u8>,
        reply: oneshot::Sender<Result<()>>,
    },
    /// A watcher was dropped before it fired.
    Unwatch {
        kind: WatchKind,
        path: String,
        id: WatcherId,
    },
    RemoveWatches {
        path: String,
        watch_type: WatchType,
        frame: BytesMut,
        reply: oneshot::Sender<Result<()>>,
    },
    Close {
        reply: oneshot::Sender<()>,
    },
}

/// Where a registration's events go.
#[derive(Debug)]
pub(crate) enum Sink {
    Oneshot(oneshot::Sender<WatchedEvent>),
    Persistent(mpsc::UnboundedSender<WatchedEvent>),
}

impl Sink {
    fn send(self, event: WatchedEvent) {
        match self {
            Sink::Oneshot(tx) => {
                let _ = tx.send(event);
            }
            Sink::Persistent(tx) => {
                let _ = tx.send(event);
            }
        }
    }

    fn send_ref(&self, event: WatchedEvent) {
        if let Sink::Persistent(tx) = self {
            let _ = tx.send(event);
        }
    }
}

/// The receiving end of a registration, handed to the client with the reply.
#[derive(Debug)]
pub(crate) struct WatcherReceiver {
    pub events: WatcherEvents,
    pub unwatch: Unwatch,
    pub chroot: Chroot,
}

/// Receiving channel of a registration.
#[derive(Debug)]
pub(crate) enum WatcherEvents {
    Oneshot(oneshot::Receiver<WatchedEvent>),
    Persistent(mpsc::UnboundedReceiver<WatchedEvent>),
}

/// Tells the task a watcher is gone (on drop), unless disarmed.
#[derive(Debug)]
pub(crate) struct Unwatch {
    tx: mpsc::WeakUnboundedSender<Command>,
    kind: WatchKind,
    path: String,
    id: WatcherId,
    armed: bool,
}

impl Unwatch {
    /// The registration is already gone (it fired): nothing to tell.
    pub(crate) fn disarm(&mut self) {
        self.armed = false;
    }
}

impl Drop for Unwatch {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        if let Some(tx) = self.tx.upgrade() {
            let _ = tx.send(Command::Unwatch {
                kind: self.kind,
                path: std::mem::take(&mut self.path),
                id: self.id,
            });
        }
    }
}

/// How the task is set up.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub session_timeout: Duration,
    pub read_timeout: Option<Duration>,
    pub readonly: bool,
    pub detached: bool,
    pub fail_eagerly: bool,
    pub max_frame: usize,
    #[cfg(feature = "tls")]
    pub tls: Option<Arc<crate::tls::TlsConnector>>,
}

/// Whom `connect` tells when the first session is established or cannot be.
pub(crate) type Ready = oneshot::Sender<Result<()>>;

enum PendingKind {
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

struct Pending {
    xid: i32,
    sent: Instant,
    kind: PendingKind,
}

/// One live connection's protocol state.
struct Conn {
    transport: Transport,
    rbuf: ReadBuffer,
    wbuf: BytesMut,
    pending: VecDeque<Pending>,
    pings: VecDeque<Instant>,
    auths: VecDeque<usize>,
    last_send: Instant,
    last_recv: Instant,
    host: Host,
}

/// Why serving a connection stopped.
enum Stop {
    /// The connection is lost; reconnect.
    Disconnected(String),
    /// The session is over.
    Terminal(SessionState),
}

/// A command waiting for a connection.
enum Queued {
    Request(Submit),
    RemoveWatches {
        path: String,
        watch_type: WatchType,
        frame: BytesMut,
        reply: oneshot::Sender<Result<()>>,
    },
}

pub(crate) struct Task {
    shared: Arc<Shared>,
    rx: mpsc::UnboundedReceiver<Command>,
    weak_tx: mpsc::WeakUnboundedSender<Command>,
    config: Config,
    hosts: HostProvider,
    session_id: i64,
    passwd: Vec<u8>,
    negotiated: Duration,
    /// `seenRwServerBefore`: a read-only server's session is local; re-attach only sessions a
    /// read-write server made.
    seen_rw: bool,
    last_zxid: i64,
    auths: Vec<(String, Vec<u8>)>,
    /// Auth callers waiting for the answer to their packet (index into `auths`).
    auth_waiters: Vec<(usize, oneshot::Sender<Result<()>>)>,
    watches: WatchManager<Sink>,
    /// Watch-setting requests in flight per server path: no removeWatches for a path while one
    /// may still register.
    inflight_watch: HashMap<String, u32>,
    next_watcher_id: WatcherId,
    next_xid: i32,
    queued: VecDeque<Queued>,
    /// All handles are gone or `close` was called.
    closing: Option<Option<oneshot::Sender<()>>>,
    ready: Option<Ready>,
    started: Instant,
    /// Read-only mode: a read-write server found by probing, tried first next time.
    rw_host: Option<Host>,
    connected_once: bool,
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
        state: watch::Sender::new(SessionState::Disconnected),
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

    // ---- connecting ---------------------------------------------------------------------------

    /// Tries hosts until a session is established (returns its connection) or the session ends.
    async fn establish(&mut self) -> std::result::Result<Conn, SessionState> {
        let mut first_attempt = !self.connected_once;
        let mut tried = 0usize;
        loop {
            if let Some(state) = self.closing_state() {
                return Err(state);
            }
            let (host, back_off) = match self.rw_host.take() {
                Some(host) => (host, false),
                None => self.hosts.next(),
            };
            tried += 1;
            if !self.connected_once {
                if self.config.fail_eagerly && back_off {
                    self.fail_ready(Error::NoHosts);
                    return Err(SessionState::Closed);
                }
                if self.started.elapsed() >= self.config.session_timeout {
                    self.fail_ready(Error::Timeout);
                    return Err(SessionState::Closed);
                }
            }
            // ClientCnxn.startConnect sleeps up to 1 s before every attempt but the first;
            // StaticHostProvider.next sleeps after a full round.
            let spin = timing::spin_delay(self.negotiated);
            let mut pause = Duration::ZERO;
            if !first_attempt && !spin.is_zero() {
                pause += rand::thread_rng().gen_range(Duration::ZERO..spin);
            }
            if back_off {
                pause += spin;
            }
            first_attempt = false;
            if !pause.is_zero() {
                let sleep = tokio::time::sleep(pause);
                if self.queue_while(sleep).await.is_none() {
                    continue;
                }
            }
            let timeout = timing::connect_timeout(self.negotiated, self.hosts.len());
            let request = ConnectRequest {
                protocol_version: 0,
                last_zxid_seen: self.last_zxid,
                time_out: i32::try_from(self.config.session_timeout.as_millis())
                    .unwrap_or(i32::MAX),
                session_id: if self.seen_rw { self.session_id } else { 0 },
                passwd: if self.seen_rw {
                    self.passwd.clone()
                } else {
                    vec![0; 16]
                },
                read_only: Some(self.config.readonly),
            };
            let attempt = attempt(
                host.clone(),
                request,
                self.config.max_frame,
                #[cfg(feature = "tls")]
                self.config.tls.clone(),
            );
            let sent = Instant::now();
            let outcome = match self
                .queue_while(tokio::time::timeout(timeout, attempt))
                .await
            {
                None => continue,
                Some(Err(_)) => Err(format!("no session within the connect timeout {timeout:?}")),
                Some(Ok(result)) => result,
            };
            match outcome {
                Err(why) => {
                    debug!(%host, reason = %why, tried, "connection attempt failed");
                    // ClientCnxn.cleanup: what waited for this attempt fails with it.
                    self.fail_queued(Error::ConnectionLoss);
                }
                Ok((transport, response, rbuf)) => {
                    if response.time_out <= 0 {
                        warn!(session = %SessionId(self.session_id), "session expired");
                        self.fail_ready(Error::SessionExpired);
                        return Err(SessionState::Expired);
                    }
                    return Ok(self.on_connected(transport, response, rbuf, host, sent));
                }
            }
        }
    }

    /// Runs `fut` while queueing commands; `None` when a close request interrupted it.
    async fn queue_while<F: Future>(&mut self, fut: F) -> Option<F::Output> {
        tokio::pin!(fut);
        loop {
            if self.closing.is_some() {
                return None;
            }
            tokio::select! {
                out = &mut fut => return Some(out),
                cmd = self.rx.recv() => self.queue_command(cmd),
            }
        }
    }

    /// Handles a command while there is no connection.
    fn queue_command(&mut self, cmd: Option<Command>) {
        match cmd {
            None => self.closing = Some(None),
            Some(Command::Request(submit)) => self.queued.push_back(Queued::Request(submit)),
            Some(Command::RemoveWatches {
                path,
                watch_type,
                frame,
                reply,
            }) => self.queued.push_back(Queued::RemoveWatches {
                path,
                watch_type,
                frame,
                reply,
            }),
            Some(Command::Auth {
                scheme,
                auth,
                reply,
            }) => {
                self.auths.push((scheme, auth));
                self.auth_waiters.push((self.auths.len() - 1, reply));
            }
            // The server forgets a connection's watches with it: only the local side remains.
            Some(Command::Unwatch { kind, path, id }) => {
                self.watches.remove(kind, &path, id);
            }
            Some(Command::Close { reply }) => self.closing = Some(Some(reply)),
        }
    }

    fn closing_state(&mut self) -> Option<SessionState> {
        // Without a connection there is nothing to close on the server: the session expires.
        let reply = self.closing.as_mut()?.take();
        if let Some(reply) = reply {
            let _ = reply.send(());
        }
        self.fail_ready(Error::ClientClosed);
        Some(SessionState::Closed)
    }

    fn on_connected(
        &mut self,
        transport: Transport,
        response: ConnectResponse,
        rbuf: ReadBuffer,
        host: Host,
        sent: Instant,
    ) -> Conn {
        let readonly = response.read_only == Some(true);
        if !self.config.readonly && readonly {
            warn!(%host, "read/write client got connected to read-only server");
        }
        self.negotiated = Duration::from_millis(u64::try_from(response.time_out).unwrap_or(0));
        self.session_id = response.session_id;
        self.passwd = response.passwd;
        self.seen_rw |= !readonly;
        self.hosts.on_connected();
        self.connected_once = true;
        self.shared.timeout_ms.store(
            u64::try_from(response.time_out).unwrap_or(0),
            Ordering::Relaxed,
        );
        *lock(&self.shared.info) = SessionInfo {
            id: SessionId(self.session_id),
            password: self.passwd.clone(),
            readonly,
        };
        self.shared.set_ack(sent);
        *lock(&self.shared.server) = Some(host.address());
        info!(
            session = %SessionId(self.session_id),
            %host,
            timeout_ms = response.time_out,
            readonly,
            "session established"
        );
        let now = Instant::now();
        let mut conn = Conn {
            transport,
            rbuf,
            wbuf: BytesMut::new(),
            pending: VecDeque::new(),
            pings: VecDeque::new(),
            auths: VecDeque::new(),
            last_send: now,
            last_recv: now,
            host,
        };
        // primeConnection: auth packets, then the watches, then what waited.
        for (i, (scheme, auth)) in self.auths.iter().enumerate() {
            write_frame(&mut conn.wbuf, |b| {
                put_i32(b, xid::AUTH);
                put_i32(b, OpCode::Auth.code());
                put_i32(b, 0);
                put_ustring(b, scheme);
                zkit_proto::codec::put_buffer(b, auth);
            });
            conn.auths.push_back(i);
        }
        self.write_set_watches(&mut conn, now);
        let state = if readonly {
            SessionState::ConnectedReadOnly
        } else {
            SessionState::SyncConnected
        };
        self.set_state(state);
        if let Some(ready) = self.ready.take() {
            let _ = ready.send(Ok(()));
        }
        for queued in std::mem::take(&mut self.queued) {
            match queued {
                Queued::Request(submit) => self.write_submit(&mut conn, submit, now),
                Queued::RemoveWatches {
                    path,
                    watch_type,
                    frame,
                    reply,
                } => self.write_remove_watches(&mut conn, path, watch_type, frame, reply, now),
            }
        }
        conn
    }

    /// SetWatches (or SetWatches2 when persistent watches exist), in batches of at most
    /// `SET_WATCHES_MAX_LENGTH` bytes of paths, as `primeConnection` does.
    fn write_set_watches(&mut self, conn: &mut Conn, now: Instant) {
        if self.watches.is_empty() {
            return;
        }
        let lists = self.watches.set_watches();
        let mut iters = lists
            .iter()
            .map(|l| l.iter().peekable())
            .collect::<Vec<_>>();
        loop {
            let mut batch: [Vec<&String>; 5] = Default::default();
            let mut len = 0;
            'fill: while len < SET_WATCHES_MAX_LENGTH {
                for (i, it) in iters.iter_mut().enumerate() {
                    if let Some(path) = it.next() {
                        len += path.len();
                        batch[i].push(path);
                        continue 'fill;
                    }
                }
                break;
            }
            if batch.iter().all(Vec::is_empty) {
                return;
            }
            let v2 = !batch[3].is_empty() || !batch[4].is_empty();
            let op = if v2 {
                OpCode::SetWatches2
            } else {
                OpCode::SetWatches
            };
            let zxid = self.last_zxid;
            write_frame(&mut conn.wbuf, |b| {
                put_i32(b, xid::SET_WATCHES);
                put_i32(b, op.code());
                b.put_i64(zxid);
                for list in &batch[..if v2 { 5 } else { 3 }] {
                    put_string_vec(b, list);
                }
            });
            conn.pending.push_back(Pending {
                xid: xid::SET_WATCHES,
                sent: now,
                kind: PendingKind::SetWatches,
            });
        }
    }

    // ---- serving ------------------------------------------------------------------------------

    async fn serve(&mut self, mut conn: Conn) -> Stop {
        let read_timeout = self
            .config
            .read_timeout
            .unwrap_or_else(|| timing::read_timeout(self.negotiated));
        let ping_every = timing::ping_interval(read_timeout);
        let mut rw_probe: Option<RwProbe> = None;
        let mut ping_rw = MIN_PING_RW;
        let mut next_rw_probe = Instant::now() + ping_rw;
        debug!(host = %conn.host, ?read_timeout, ?ping_every, "serving");
        let sleep = tokio::time::sleep_until(Instant::now() + ping_every);
        tokio::pin!(sleep);
        let stop = loop {
            let readonly = *self.shared.state.borrow() == SessionState::ConnectedReadOnly;
            let mut deadline = (conn.last_recv + read_timeout).min(conn.last_send + ping_every);
            if readonly && rw_probe.is_none() {
                deadline = deadline.min(next_rw_probe);
            }
            // Activity only moves the deadline later: let the timer fire at the old one and
            // re-arm then (the checks below are against the real clocks), instead of touching
            // the timer wheel on every frame.
            if deadline < sleep.deadline() || sleep.is_elapsed() {
                sleep.as_mut().reset(deadline);
            }
            let accept = self.closing.is_none();
            let event = std::future::poll_fn(|cx| {
                if !conn.wbuf.is_empty() {
                    match conn.transport.poll_write(cx, &conn.wbuf) {
                        Poll::Ready(Ok(n)) => return Poll::Ready(Event::Wrote(Ok(n))),
                        Poll::Ready(Err(e)) => return Poll::Ready(Event::Wrote(Err(e))),
                        Poll::Pending => {}
                    }
                }
                if let Poll::Ready(r) = conn.rbuf.poll_read_from(&mut conn.transport, cx) {
                    return Poll::Ready(Event::Read(r));
                }
                if accept {
                    if let Poll::Ready(cmd) = self.rx.poll_recv(cx) {
                        return Poll::Ready(Event::Command(cmd));
                    }
                }
                if let Some(probe) = rw_probe.as_mut() {
                    if let Poll::Ready(found) = probe.as_mut().poll(cx) {
                        return Poll::Ready(Event::RwProbe(found));
                    }
                }
                if sleep.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(Event::Timer);
                }
                Poll::Pending
            })
            .await;
            let now = Instant::now();
            match event {
                Event::Wrote(Ok(n)) => {
                    bytes::Buf::advance(&mut conn.wbuf, n);
                    conn.last_send = now;
                    if conn.wbuf.is_empty() && conn.wbuf.capacity() > KEEP_WRITE_CAPACITY {
                        conn.wbuf = BytesMut::new();
                    }
                }
                Event::Wrote(Err(e)) => break Stop::Disconnected(format!("write: {e}")),
                Event::Read(Ok(0)) => {
                    break Stop::Disconnected("server closed the connection".into())
                }
                Event::Read(Ok(_)) => {
                    conn.last_recv = now;
                    if let Some(stop) = self.process_frames(&mut conn, now) {
                        break stop;
                    }
                    if conn.pending.is_empty() && conn.pings.is_empty() {
                        conn.rbuf.shrink_if_idle();
                    }
                    // Take what is queued meanwhile in one go: fewer wakeups under load.
                    for _ in 0..64 {
                        match self.rx.try_recv() {
                            Ok(cmd) => self.handle_command(&mut conn, Some(cmd), now),
                            Err(_) => break,
                        }
                    }
                }
                Event::Read(Err(e)) => break Stop::Disconnected(format!("read: {e}")),
                Event::Command(cmd) => {
                    self.handle_command(&mut conn, cmd, now);
                    for _ in 0..64 {
                        match self.rx.try_recv() {
                            Ok(cmd) => self.handle_command(&mut conn, Some(cmd), now),
                            Err(_) => break,
                        }
                    }
                }
                Event::RwProbe(found) => {
                    rw_probe = None;
                    if let Some(host) = found {
                        info!(%host, "found a read-write server");
                        self.rw_host = Some(host);
                        break Stop::Disconnected("switching to a read-write server".into());
                    }
                }
                Event::Timer => {
                    if now >= conn.last_recv + read_timeout {
                        break Stop::Disconnected(format!(
                            "no answer from the server for {} ms",
                            now.duration_since(conn.last_recv).as_millis()
                        ));
                    }
                    if now >= conn.last_send + ping_every && conn.wbuf.is_empty() {
                        write_frame(&mut conn.wbuf, |b| {
                            put_i32(b, xid::PING);
                            put_i32(b, OpCode::Ping.code());
                        });
                        conn.pings.push_back(now);
                        // Counts as sending from now on, as `clientCnxnSocket.updateLastSend()`.
                        conn.last_send = now;
                    }
                    if readonly && rw_probe.is_none() && now >= next_rw_probe {
                        // ClientCnxn.pingRwServer, with its doubling pause.
                        let (host, _) = self.hosts.next();
                        rw_probe = Some(Box::pin(probe_rw(host)));
                        ping_rw = (ping_rw * 2).min(MAX_PING_RW);
                        next_rw_probe = now + ping_rw;
                    }
                }
            }
            if let Some(stop) = self.closing_done(&conn) {
                break stop;
            }
        };
        self.end_connection(conn, stop).await
    }

    /// The close is complete when its reply came (or there was no session to close).
    fn closing_done(&self, conn: &Conn) -> Option<Stop> {
        match &self.closing {
            Some(_)
                if !conn
                    .pending
                    .iter()
                    .any(|p| matches!(p.kind, PendingKind::Close { .. })) =>
            {
                Some(Stop::Terminal(SessionState::Closed))
            }
            _ => None,
        }
    }

    /// Flushes what is buffered (a best effort, bounded) before a terminal stop.
    async fn end_connection(&mut self, mut conn: Conn, stop: Stop) -> Stop {
        if let Stop::Terminal(_) = stop {
            let flush = async {
                while !conn.wbuf.is_empty() {
                    match std::future::poll_fn(|cx| conn.transport.poll_write(cx, &conn.wbuf)).await
                    {
                        Ok(0) | Err(_) => break,
                        Ok(n) => bytes::Buf::advance(&mut conn.wbuf, n),
                    }
                }
                let _ = std::future::poll_fn(|cx| conn.transport.poll_flush(cx)).await;
            };
            let _ = tokio::time::timeout(Duration::from_secs(1), flush).await;
        }
        self.fail_pending(conn, &stop);
        stop
    }

    fn handle_command(&mut self, conn: &mut Conn, cmd: Option<Command>, now: Instant) {
        match cmd {
            None => {
                // Every handle is gone: close the session unless it is detached.
                if self.config.detached {
                    self.closing = Some(None);
                } else {
                    self.write_close(conn, None, now);
                }
            }
            Some(Command::Close { reply }) => self.write_close(conn, Some(reply), now),
            Some(Command::Request(submit)) => self.write_submit(conn, submit, now),
            Some(Command::Auth {
                scheme,
                auth,
                reply,
            }) => {
                write_frame(&mut conn.wbuf, |b| {
                    put_i32(b, xid::AUTH);
                    put_i32(b, OpCode::Auth.code());
                    put_i32(b, 0);
                    put_ustring(b, &scheme);
                    zkit_proto::codec::put_buffer(b, &auth);
                });
                self.auths.push((scheme, auth));
                let index = self.auths.len() - 1;
                conn.auths.push_back(index);
                self.auth_waiters.push((index, reply));
            }
            Some(Command::Unwatch { kind, path, id }) => {
                if self.watches.remove(kind, &path, id).is_some() {
                    self.maybe_remove_server_watch(conn, kind, &path, now);
                }
            }
            Some(Command::RemoveWatches {
                path,
                watch_type,
                frame,
                reply,
            }) => self.write_remove_watches(conn, path, watch_type, frame, reply, now),
        }
    }

    fn write_close(&mut self, conn: &mut Conn, reply: Option<oneshot::Sender<()>>, now: Instant) {
        if self.closing.is_some() {
            if let Some(reply) = reply {
                let _ = reply.send(());
            }
            return;
        }
        let xid = self.xid();
        write_frame(&mut conn.wbuf, |b| {
            put_i32(b, xid);
            put_i32(b, OpCode::CloseSession.code());
        });
        conn.pending.push_back(Pending {
            xid,
            sent: now,
            kind: PendingKind::Close { reply },
        });
        self.closing = Some(None);
    }

    /// After a watcher dropped: remove the server's watch if nothing local needs it any more
    /// and no request in flight may register it again.
    fn maybe_remove_server_watch(
        &mut self,
        conn: &mut Conn,
        kind: WatchKind,
        path: &str,
        now: Instant,
    ) {
        if self.inflight_watch.get(path).copied().unwrap_or(0) > 0 {
            return;
        }
        let Some(watch_type) = self.watches.server_removal(kind, path) else {
            return;
        };
        let xid = self.xid();
        write_frame(&mut conn.wbuf, |b| {
            put_i32(b, xid);
            put_i32(b, OpCode::RemoveWatches.code());
            put_ustring(b, path);
            put_i32(b, watch_type.code());
        });
        conn.pending.push_back(Pending {
            xid,
            sent: now,
            kind: PendingKind::InternalRemove,
        });
    }

    fn write_remove_watches(
        &mut self,
        conn: &mut Conn,
        path: String,
        watch_type: WatchType,
        frame: BytesMut,
        reply: oneshot::Sender<Result<()>>,
        now: Instant,
    ) {
        if !self.watches.contains(&path, watch_type) {
            let _ = reply.send(Err(Error::NoWatcher));
            return;
        }
        let xid = self.write_user_frame(conn, frame);
        conn.pending.push_back(Pending {
            xid,
            sent: now,
            kind: PendingKind::RemoveWatches {
                path,
                watch_type,
                reply,
            },
        });
    }

    fn write_submit(&mut self, conn: &mut Conn, submit: Submit, now: Instant) {
        let Submit {
            frame,
            watch,
            precheck,
            reply,
        } = submit;
        if let Some((path, watch_type)) = precheck {
            if !self.watches.contains(&path, watch_type) {
                let _ = reply.send(Err(Error::NoWatcher));
                return;
            }
        }
        if reply.is_closed() {
            // Dropped before it was sent (it waited for a connection): nobody wants it.
            return;
        }
        if let Some(intent) = &watch {
            *self.inflight_watch.entry(intent.path.clone()).or_default() += 1;
        }
        let xid = self.write_user_frame(conn, frame);
        conn.pending.push_back(Pending {
            xid,
            sent: now,
            kind: PendingKind::User { watch, reply },
        });
    }

    /// Patches length and xid into a client-encoded frame and appends it.
    fn write_user_frame(&mut self, conn: &mut Conn, mut frame: BytesMut) -> i32 {
        let xid = self.xid();
        let len = i32::try_from(frame.len() - 4).unwrap_or(i32::MAX);
        frame[..4].copy_from_slice(&len.to_be_bytes());
        frame[4..8].copy_from_slice(&xid.to_be_bytes());
        conn.wbuf.extend_from_slice(&frame);
        xid
    }

    fn xid(&mut self) -> i32 {
        let xid = self.next_xid;
        // Negative xids are special (notification, ping, auth, setWatches): wrap to 1.
        self.next_xid = if xid == i32::MAX { 1 } else { xid + 1 };
        xid
    }

    // ---- incoming frames ----------------------------------------------------------------------

    /// Handles every complete frame in the read buffer, in order.
    fn process_frames(&mut self, conn: &mut Conn, now: Instant) -> Option<Stop> {
        loop {
            let (consumed, frame) =
                match zkit_proto::decode_frame(conn.rbuf.data(), self.config.max_frame) {
                    Ok(Some((consumed, payload))) => (consumed, Bytes::copy_from_slice(payload)),
                    Ok(None) => {
                        // Make room for the rest of a large frame in one go.
                        if let Some(len) = conn.rbuf.data().first_chunk::<4>() {
                            let want = usize::try_from(i32::from_be_bytes(*len)).unwrap_or(0) + 4;
                            let have = conn.rbuf.data().len();
                            conn.rbuf.reserve(want.saturating_sub(have));
                        }
                        return None;
                    }
                    Err(e) => {
                        return Some(Stop::Disconnected(format!("bad frame from server: {e}")))
                    }
                };
            conn.rbuf.consume(consumed);
            if let Err(stop) = self.process_frame(conn, frame, now) {
                return Some(stop);
            }
        }
    }

    fn process_frame(
        &mut self,
        conn: &mut Conn,
        frame: Bytes,
        now: Instant,
    ) -> std::result::Result<(), Stop> {
        let header = ReplyHeader::decode_from(&frame)
            .map_err(|e| Stop::Disconnected(format!("bad reply header: {e}")))?;
        let body = frame.slice(16..);
        match header.xid {
            xid::NOTIFICATION => {
                let event = WatcherEvent::decode_from(&body)
                    .map_err(|e| Stop::Disconnected(format!("bad notification: {e}")))?;
                self.dispatch_event(&event, header.zxid);
                Ok(())
            }
            xid::PING => {
                let sent = conn
                    .pings
                    .pop_front()
                    .ok_or_else(|| Stop::Disconnected("ping reply without a ping".into()))?;
                self.shared.set_ack(sent);
                Ok(())
            }
            xid::AUTH => {
                let index = conn
                    .auths
                    .pop_front()
                    .ok_or_else(|| Stop::Disconnected("auth reply without an auth".into()))?;
                if header.err == ErrorCode::AuthFailed.code() {
                    warn!(session = %SessionId(self.session_id), "authentication failed");
                    return Err(Stop::Terminal(SessionState::AuthFailed));
                }
                let result = match Error::from_code(header.err) {
                    None => Ok(()),
                    Some(err) => Err(err),
                };
                let mut waiting = Vec::new();
                for (i, waiter) in std::mem::take(&mut self.auth_waiters) {
                    if i == index {
                        let _ = waiter.send(result.clone());
                    } else {
                        waiting.push((i, waiter));
                    }
                }
                self.auth_waiters = waiting;
                Ok(())
            }
            _ => {
                let Some(pending) = conn.pending.pop_front() else {
                    return Err(Stop::Disconnected(format!(
                        "reply for xid {} with nothing pending",
                        header.xid
                    )));
                };
                if pending.xid != header.xid {
                    // ClientCnxn.SendThread.readResponse: "Xid out of order".
                    let stop = Stop::Disconnected(format!(
                        "xid out of order: got {} expected {}",
                        header.xid, pending.xid
                    ));
                    conn.pending.push_front(pending);
                    return Err(stop);
                }
                if header.zxid > 0 && header.zxid > self.last_zxid {
                    self.last_zxid = header.zxid;
                    self.shared.last_zxid.store(header.zxid, Ordering::Relaxed);
                }
                self.shared.set_ack(pending.sent);
                self.complete(conn, pending.kind, header.err, body, now)
            }
        }
    }

    fn complete(
        &mut self,
        conn: &mut Conn,
        kind: PendingKind,
        err: i32,
        body: Bytes,
        now: Instant,
    ) -> std::result::Result<(), Stop> {
        match kind {
            PendingKind::User { watch, reply } => {
                let watcher = watch
                    .and_then(|intent| self.register(conn, intent, err, reply.is_closed(), now));
                let _ = reply.send(Ok(Reply { err, body, watcher }));
            }
            PendingKind::SetWatches => {
                if err != 0 {
                    warn!(err, "the server refused to re-register watches");
                }
            }
            PendingKind::InternalRemove => {}
            PendingKind::RemoveWatches {
                path,
                watch_type,
                reply,
            } => {
                let result = if err == 0 || err == ErrorCode::NoWatcher.code() {
                    let removed = self.watches.remove_all(&path, watch_type);
                    if removed.is_empty() {
                        Err(Error::NoWatcher)
                    } else {
                        for (sink, event_type) in removed {
                            sink.send(WatchedEvent::new(event_type, path.clone()));
                        }
                        Ok(())
                    }
                } else {
                    Err(Error::from_code(err).unwrap_or(Error::NoWatcher))
                };
                let _ = reply.send(result);
            }
            PendingKind::Close { reply } => {
                if let Some(reply) = reply {
                    let _ = reply.send(());
                }
                return Err(Stop::Terminal(SessionState::Closed));
            }
        }
        Ok(())
    }

    /// Registers the watch a successful request set (`WatchRegistration.register`), unless the
    /// caller is gone, in which case the server's watch is removed if nothing else needs it.
    fn register(
        &mut self,
        conn: &mut Conn,
        intent: WatchIntent,
        err: i32,
        caller_gone: bool,
        now: Instant,
    ) -> Option<WatcherReceiver> {
        if let Some(n) = self.inflight_watch.get_mut(&intent.path) {
            *n -= 1;
            if *n == 0 {
                self.inflight_watch.remove(&intent.path);
            }
        }
        let kind = match (intent.kind, err) {
            (kind, 0) => kind,
            // ExistsWatchRegistration: a missing node gets an exist watch.
            (WatchKind::Data, e) if e == ErrorCode::NoNode.code() && intent.exists => {
                WatchKind::Exist
            }
            _ => return None,
        };
        if caller_gone {
            self.maybe_remove_server_watch(conn, kind, &intent.path, now);
            return None;
        }
        let id = self.next_watcher_id;
        self.next_watcher_id += 1;
        let (sink, events) = if kind.is_persistent() {
            let (tx, rx) = mpsc::unbounded_channel();
            (Sink::Persistent(tx), WatcherEvents::Persistent(rx))
        } else {
            let (tx, rx) = oneshot::channel();
            (Sink::Oneshot(tx), WatcherEvents::Oneshot(rx))
        };
        self.watches.add(kind, &intent.path, id, sink);
        Some(WatcherReceiver {
            events,
            unwatch: Unwatch {
                tx: self.weak_tx.clone(),
                kind,
                path: intent.path,
                id,
                armed: true,
            },
            chroot: intent.chroot,
        })
    }

    fn dispatch_event(&mut self, event: &WatcherEvent, zxid: i64) {
        let Some(event_type) = EventType::from_server(event.event_type) else {
            warn!(event.event_type, "unknown watch event type");
            return;
        };
        let watched = WatchedEvent::new(event_type, event.path.clone()).with_zxid(zxid);
        let fired = self.watches.fire(event_type, &event.path);
        for sink in fired.persistent {
            sink.send_ref(watched.clone());
        }
        for sink in fired.oneshot {
            sink.send(watched.clone());
        }
    }

    // ---- ending -------------------------------------------------------------------------------

    fn set_state(&mut self, state: SessionState) {
        let changed = self.shared.state.send_if_modified(|s| {
            if *s == state || s.is_terminated() {
                return false;
            }
            *s = state;
            true
        });
        if changed && !state.is_terminated() {
            for sink in self.watches.persistent() {
                sink.send_ref(WatchedEvent::new_session(state));
            }
        }
    }

    /// Fails what was in flight on a connection that ends.
    fn fail_pending(&mut self, conn: Conn, stop: &Stop) {
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

    fn fail_queued(&mut self, err: Error) {
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

    fn fail_ready(&mut self, err: Error) {
        if let Some(ready) = self.ready.take() {
            let _ = ready.send(Err(err));
        }
    }

    /// The session is over: every watcher hears the terminal state, every request fails.
    fn finish(mut self, state: SessionState) {
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
                Command::Close { reply } => {
                    let _ = reply.send(());
                }
                Command::Unwatch { .. } => {}
            }
        }
    }
}

enum Event {
    Wrote(std::io::Result<usize>),
    Read(std::io::Result<usize>),
    Command(Option<Command>),
    RwProbe(Option<Host>),
    Timer,
}

type RwProbe = Pin<Box<dyn Future<Output = Option<Host>> + Send>>;

/// Appends one frame written by `payload`.
fn write_frame(buf: &mut BytesMut, payload: impl FnOnce(&mut BytesMut)) {
    zkit_proto::encode_frame(buf, payload);
}

/// One connection attempt: resolve, connect, (TLS), ConnectRequest, ConnectResponse.
async fn attempt(
    host: Host,
    request: ConnectRequest,
    max_frame: usize,
    #[cfg(feature = "tls")] tls: Option<Arc<crate::tls::TlsConnector>>,
) -> std::result::Result<(Transport, ConnectResponse, ReadBuffer), String> {
    let tcp = connect_tcp(&host).await?;
    #[allow(unused_mut)]
    let mut transport = Transport::Tcp(tcp);
    if host.tls {
        #[cfg(feature = "tls")]
        {
            let Some(tls) = tls else {
                return Err(format!("{host} asks for TLS but no TLS options were given"));
            };
            let Transport::Tcp(tcp) = transport else {
                unreachable!("plain TCP was just made")
            };
            transport = Transport::Tls(Box::new(tls.connect(&host.host, tcp).await?));
        }
        #[cfg(not(feature = "tls"))]
        return Err(format!(
            "{host} asks for TLS but zkit-client was built without the `tls` feature"
        ));
    }
    let mut out = BytesMut::new();
    write_frame(&mut out, |b| request.encode(b));
    write_all(&mut transport, &out)
        .await
        .map_err(|e| format!("write: {e}"))?;
    let mut rbuf = ReadBuffer::default();
    loop {
        match zkit_proto::decode_frame(rbuf.data(), max_frame) {
            Ok(Some((consumed, payload))) => {
                let response = ConnectResponse::decode_from(payload)
                    .map_err(|e| format!("bad ConnectResponse: {e}"))?;
                rbuf.consume(consumed);
                return Ok((transport, response, rbuf));
            }
            Ok(None) => {}
            Err(e) => return Err(format!("bad frame: {e}")),
        }
        let n = std::future::poll_fn(|cx| rbuf.poll_read_from(&mut transport, cx))
            .await
            .map_err(|e| format!("read: {e}"))?;
        if n == 0 {
            return Err("closed before the ConnectResponse".into());
        }
    }
}

async fn write_all(transport: &mut Transport, mut bytes: &[u8]) -> std::io::Result<()> {
    while !bytes.is_empty() {
        let n = std::future::poll_fn(|cx| transport.poll_write(cx, bytes)).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        bytes = &bytes[n..];
    }
    std::future::poll_fn(|cx| transport.poll_flush(cx)).await
}

/// Resolves `host` (every attempt, as `StaticHostProvider.resolve`; one of its addresses at
/// random) and connects with `TCP_NODELAY`.
async fn connect_tcp(host: &Host) -> std::result::Result<TcpStream, String> {
    let mut addrs: Vec<_> = tokio::net::lookup_host(host.address())
        .await
        .map_err(|e| format!("resolve {host}: {e}"))?
        .collect();
    if addrs.is_empty() {
        return Err(format!("{host} resolves to no address"));
    }
    let pick = rand::thread_rng().gen_range(0..addrs.len());
    let addr = addrs.swap_remove(pick);
    let tcp = TcpStream::connect(addr)
        .await
        .map_err(|e| format!("connect {addr}: {e}"))?;
    tcp.set_nodelay(true)
        .map_err(|e| format!("TCP_NODELAY: {e}"))?;
    Ok(tcp)
}

/// `ClientCnxn.SendThread.pingRwServer`: asks `host` `isro`; `Some(host)` when it answers `rw`.
async fn probe_rw(host: Host) -> Option<Host> {
    let probe = async {
        let mut tcp = connect_tcp(&host).await.ok()?;
        tcp.write_all(b"isro").await.ok()?;
        let _ = tcp.shutdown().await;
        let mut answer = Vec::new();
        tcp.read_to_end(&mut answer).await.ok()?;
        (answer.starts_with(b"rw")).then_some(())
    };
    match tokio::time::timeout(Duration::from_secs(1), probe).await {
        Ok(Some(())) => Some(host),
        _ => None,
    }
}
