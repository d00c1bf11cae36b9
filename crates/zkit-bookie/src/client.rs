//! [`BookieClient`]: an async connection to one bookie. Requests are pipelined: each gets a
//! fresh request id, and responses are matched to their requests by id, in whatever order the
//! bookie sends them. Every request has a timeout; a failed connection fails every request in
//! flight with the same error and the client stays failed (make a new one to reconnect; the
//! ledger client decides when).
//!
//! The response stream is decoded with the same checked decoder as requests; a response that
//! does not parse, or answers with another op than was asked, closes the connection.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::protocol::entry::MasterKey;
use crate::protocol::{
    self, AddRequest, BookieInfo, LongPollRequest, ReadRequest, Request, RequestOp, Response,
    ResponseBody, Status, FLAG_RECOVERY_ADD,
};

/// Client tuning.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// Connecting gives up after this.
    pub connect_timeout: Duration,
    /// A request gives up after this (a long poll: after its own wait plus this).
    pub request_timeout: Duration,
    /// Frame limit for responses.
    pub max_frame: usize,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(10),
            max_frame: protocol::DEFAULT_MAX_FRAME,
        }
    }
}

/// Client failures.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// Could not connect.
    #[error("cannot connect to {addr}: {reason}")]
    Connect {
        /// Bookie address.
        addr: SocketAddr,
        /// Why.
        reason: String,
    },
    /// The connection failed or was closed; requests in flight may or may not have been done.
    #[error("connection to the bookie lost: {0}")]
    ConnectionLost(String),
    /// No response in time; the request may or may not have been done.
    #[error("request timed out after {0:?}")]
    Timeout(Duration),
    /// The bookie answered with an error status.
    #[error("bookie answered {0}")]
    Status(Status),
    /// The bookie's response did not parse or did not fit the request.
    #[error("protocol error: {0}")]
    Protocol(String),
}

impl ClientError {
    /// The bookie's status, when it answered one.
    pub fn status(&self) -> Option<Status> {
        match self {
            ClientError::Status(s) => Some(*s),
            _ => None,
        }
    }
}

type Waiter = oneshot::Sender<Result<Response, ClientError>>;

struct Inner {
    addr: SocketAddr,
    opts: ClientOptions,
    next_id: AtomicU64,
    pending: Mutex<Pending>,
    out: mpsc::UnboundedSender<BytesMut>,
    closed: CancellationToken,
}

#[derive(Default)]
struct Pending {
    waiters: HashMap<u64, Waiter>,
    /// Set once the connection failed: later requests fail at once with it.
    failed: Option<ClientError>,
}

impl Inner {
    fn fail(&self, e: ClientError) {
        let waiters = {
            let mut p = self.pending.lock().unwrap_or_else(|x| x.into_inner());
            if p.failed.is_none() {
                p.failed = Some(e.clone());
            }
            std::mem::take(&mut p.waiters)
        };
        for (_, w) in waiters {
            let _ = w.send(Err(e.clone()));
        }
        self.closed.cancel();
    }
}

/// A pipelined connection to one bookie. Cheap to clone (clones share the connection).
#[derive(Clone)]
pub struct BookieClient {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for BookieClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BookieClient")
            .field("addr", &self.inner.addr)
            .finish()
    }
}

impl BookieClient {
    /// Connects.
    ///
    /// # Errors
    /// [`ClientError::Connect`].
    pub async fn connect(
        addr: SocketAddr,
        opts: ClientOptions,
    ) -> Result<BookieClient, ClientError> {
        let connect_err = |reason: String| ClientError::Connect { addr, reason };
        let stream = tokio::time::timeout(opts.connect_timeout, TcpStream::connect(addr))
            .await
            .map_err(|_| connect_err("timed out".into()))?
            .map_err(|e| connect_err(e.to_string()))?;
        let _ = stream.set_nodelay(true);
        let (rd, wr) = stream.into_split();
        let (out, out_rx) = mpsc::unbounded_channel();
        let inner = Arc::new(Inner {
            addr,
            opts,
            next_id: AtomicU64::new(1),
            pending: Mutex::default(),
            out,
            closed: CancellationToken::new(),
        });
        tokio::spawn(write_loop(Arc::clone(&inner), wr, out_rx));
        tokio::spawn(read_loop(Arc::clone(&inner), rd));
        Ok(BookieClient { inner })
    }

    /// The bookie's address.
    pub fn addr(&self) -> SocketAddr {
        self.inner.addr
    }

    /// True once the connection failed or was closed.
    pub fn is_closed(&self) -> bool {
        self.inner.closed.is_cancelled()
    }

    /// Closes the connection; requests in flight fail with `ConnectionLost`.
    pub fn close(&self) {
        self.inner
            .fail(ClientError::ConnectionLost("closed by the client".into()));
    }

    /// Sends one request and waits for its answer.
    ///
    /// # Errors
    /// [`ClientError`]; an error status is [`ClientError::Status`].
    ///
    /// # Cancellation safety
    /// Dropping the future forgets the request (its response is discarded); the bookie may
    /// still carry it out.
    pub async fn request(&self, op: RequestOp) -> Result<ResponseBody, ClientError> {
        let mut frame = BytesMut::new();
        let sent = self.register(op, &mut frame);
        self.send_frames(frame);
        sent.await
    }

    /// Sends several requests in one write to the socket (one frame each, in order) and
    /// returns one future per request, in the same order. The requests are sent when this
    /// returns, whether or not the futures are polled.
    pub fn request_many(
        &self,
        ops: Vec<RequestOp>,
    ) -> Vec<impl std::future::Future<Output = Result<ResponseBody, ClientError>> + Send + 'static>
    {
        let mut frames = BytesMut::new();
        let futures = ops
            .into_iter()
            .map(|op| self.register(op, &mut frames))
            .collect();
        self.send_frames(frames);
        futures
    }

    /// Adds several encoded entries of one ledger in one write; one future per entry, in
    /// order (see [`BookieClient::add`]).
    pub fn add_many(
        &self,
        ledger_id: i64,
        master_key: MasterKey,
        recovery: bool,
        entries: Vec<(i64, Bytes)>,
    ) -> Vec<impl std::future::Future<Output = Result<(), ClientError>> + Send + 'static> {
        let flags = if recovery { FLAG_RECOVERY_ADD } else { 0 };
        let ids: Vec<i64> = entries.iter().map(|(e, _)| *e).collect();
        let ops = entries
            .into_iter()
            .map(|(entry_id, entry)| {
                RequestOp::Add(AddRequest {
                    ledger_id,
                    entry_id,
                    flags,
                    master_key,
                    entry,
                })
            })
            .collect();
        self.request_many(ops)
            .into_iter()
            .zip(ids)
            .map(|(f, entry_id)| {
                let me = self.clone();
                async move {
                    match f.await? {
                        ResponseBody::Add {
                            ledger_id: l,
                            entry_id: e,
                        } if l == ledger_id && e == entry_id => Ok(()),
                        other => Err(me.unexpected(&other)),
                    }
                }
            })
            .collect()
    }

    fn send_frames(&self, frames: BytesMut) {
        if !frames.is_empty() && self.inner.out.send(frames).is_err() {
            self.inner
                .fail(ClientError::ConnectionLost("writer stopped".into()));
        }
    }

    /// Registers a request's waiter and encodes it at the end of `frames`; the future waits
    /// for its answer once the frames are sent.
    fn register(
        &self,
        op: RequestOp,
        frames: &mut BytesMut,
    ) -> impl std::future::Future<Output = Result<ResponseBody, ClientError>> + Send + 'static {
        let timeout = match &op {
            RequestOp::LongPollLac(p) => {
                self.inner.opts.request_timeout + Duration::from_millis(u64::from(p.timeout_ms))
            }
            _ => self.inner.opts.request_timeout,
        };
        let expect = op.op() as u8;
        let id = self.inner.next_id.fetch_add(1, Relaxed);
        let (tx, rx) = oneshot::channel();
        let failed = {
            let mut p = self.inner.pending.lock().unwrap_or_else(|x| x.into_inner());
            match &p.failed {
                Some(e) => Some(e.clone()),
                None => {
                    p.waiters.insert(id, tx);
                    None
                }
            }
        };
        if failed.is_none() {
            protocol::encode_request(&Request { id, op }, frames);
        }
        let inner = Arc::clone(&self.inner);
        async move {
            if let Some(e) = failed {
                return Err(e);
            }
            let resp = match tokio::time::timeout(timeout, rx).await {
                Ok(Ok(r)) => r?,
                Ok(Err(_)) => return Err(ClientError::ConnectionLost("connection dropped".into())),
                Err(_) => {
                    inner
                        .pending
                        .lock()
                        .unwrap_or_else(|x| x.into_inner())
                        .waiters
                        .remove(&id);
                    return Err(ClientError::Timeout(timeout));
                }
            };
            if resp.op != expect {
                let e = ClientError::Protocol(format!(
                    "response to request {id} is for op {}, asked op {expect}",
                    resp.op
                ));
                inner.fail(e.clone());
                return Err(e);
            }
            resp.result.map_err(ClientError::Status)
        }
    }

    fn unexpected(&self, body: &ResponseBody) -> ClientError {
        let e = ClientError::Protocol(format!("unexpected response body {body:?}"));
        self.inner.fail(e.clone());
        e
    }

    /// Adds an encoded entry (see [`protocol::entry::Digester::encode`]); returns once the
    /// bookie has it durably. `recovery`: a recovery add, accepted on a fenced ledger.
    ///
    /// # Errors
    /// [`ClientError`]: e.g. `Status(Fenced)`, `Status(Unauthorized)`, `Status(ReadOnly)`.
    pub async fn add(
        &self,
        ledger_id: i64,
        entry_id: i64,
        master_key: MasterKey,
        recovery: bool,
        entry: Bytes,
    ) -> Result<(), ClientError> {
        let flags = if recovery { FLAG_RECOVERY_ADD } else { 0 };
        match self
            .request(RequestOp::Add(AddRequest {
                ledger_id,
                entry_id,
                flags,
                master_key,
                entry,
            }))
            .await?
        {
            ResponseBody::Add {
                ledger_id: l,
                entry_id: e,
            } if l == ledger_id && e == entry_id => Ok(()),
            other => Err(self.unexpected(&other)),
        }
    }

    /// Reads an entry; with `fence`, fences the ledger (durably) first, as a recovery read.
    ///
    /// # Errors
    /// [`ClientError`]: `Status(NoLedger)`, `Status(NoEntry)`, …
    pub async fn read(
        &self,
        ledger_id: i64,
        entry_id: i64,
        fence: Option<MasterKey>,
    ) -> Result<Bytes, ClientError> {
        match self
            .request(RequestOp::Read(ReadRequest {
                ledger_id,
                entry_id,
                fence,
            }))
            .await?
        {
            ResponseBody::Read {
                ledger_id: l,
                entry_id: e,
                entry,
            } if l == ledger_id && e == entry_id => Ok(entry),
            other => Err(self.unexpected(&other)),
        }
    }

    /// The bookie's LAC and last entry id for a ledger.
    ///
    /// # Errors
    /// [`ClientError`].
    pub async fn read_lac(&self, ledger_id: i64) -> Result<(i64, i64), ClientError> {
        match self.request(RequestOp::ReadLac { ledger_id }).await? {
            ResponseBody::Lac {
                ledger_id: l,
                lac,
                last_entry,
            } if l == ledger_id => Ok((lac, last_entry)),
            other => Err(self.unexpected(&other)),
        }
    }

    /// Waits up to `timeout` for the LAC to pass `previous_lac`; returns the LAC and entry
    /// `previous_lac + 1` if the bookie has it.
    ///
    /// # Errors
    /// [`ClientError`].
    pub async fn long_poll_lac(
        &self,
        ledger_id: i64,
        previous_lac: i64,
        timeout: Duration,
    ) -> Result<(i64, Option<Bytes>), ClientError> {
        let timeout_ms = u32::try_from(timeout.as_millis())
            .unwrap_or(u32::MAX)
            .min(protocol::MAX_LONG_POLL_MS);
        match self
            .request(RequestOp::LongPollLac(LongPollRequest {
                ledger_id,
                previous_lac,
                timeout_ms,
            }))
            .await?
        {
            ResponseBody::LongPoll {
                ledger_id: l,
                lac,
                entry,
            } if l == ledger_id => Ok((lac, entry)),
            other => Err(self.unexpected(&other)),
        }
    }

    /// Fences a ledger; returns once the fence is durable.
    ///
    /// # Errors
    /// [`ClientError`].
    pub async fn fence(&self, ledger_id: i64, master_key: MasterKey) -> Result<(), ClientError> {
        match self
            .request(RequestOp::Fence {
                ledger_id,
                master_key,
            })
            .await?
        {
            ResponseBody::Fence { ledger_id: l } if l == ledger_id => Ok(()),
            other => Err(self.unexpected(&other)),
        }
    }

    /// Every ledger id on the bookie (paged under the hood).
    ///
    /// # Errors
    /// [`ClientError`].
    pub async fn list_ledgers(&self) -> Result<Vec<i64>, ClientError> {
        let mut all = Vec::new();
        let mut after = -1;
        loop {
            match self
                .request(RequestOp::ListLedgers {
                    start_after: after,
                    max: protocol::MAX_LIST,
                })
                .await?
            {
                ResponseBody::Ledgers { ids, more } => {
                    if ids.iter().any(|id| *id <= after) {
                        return Err(self.unexpected(&ResponseBody::Ledgers { ids, more }));
                    }
                    after = ids.last().copied().unwrap_or(after);
                    all.extend(ids);
                    if !more {
                        return Ok(all);
                    }
                }
                other => return Err(self.unexpected(&other)),
            }
        }
    }

    /// Free space, read-only state and counts.
    ///
    /// # Errors
    /// [`ClientError`].
    pub async fn info(&self) -> Result<BookieInfo, ClientError> {
        match self.request(RequestOp::BookieInfo).await? {
            ResponseBody::Info(i) => Ok(i),
            other => Err(self.unexpected(&other)),
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.closed.cancel();
    }
}

async fn write_loop(
    inner: Arc<Inner>,
    mut wr: tokio::net::tcp::OwnedWriteHalf,
    mut rx: mpsc::UnboundedReceiver<BytesMut>,
) {
    let closed = inner.closed.clone();
    // Hold only a weak interest: the loop ends when every client handle is gone.
    let weak = Arc::downgrade(&inner);
    drop(inner);
    loop {
        let first = tokio::select! {
            () = closed.cancelled() => break,
            f = rx.recv() => match f { Some(f) => f, None => break },
        };
        let mut buf = first;
        while buf.len() < 256 * 1024 {
            match rx.try_recv() {
                Ok(more) => buf.extend_from_slice(&more),
                Err(_) => break,
            }
        }
        if let Err(e) = wr.write_all(&buf).await {
            if let Some(inner) = weak.upgrade() {
                inner.fail(ClientError::ConnectionLost(e.to_string()));
            }
            break;
        }
    }
    let _ = wr.shutdown().await;
}

async fn read_loop(inner: Arc<Inner>, mut rd: tokio::net::tcp::OwnedReadHalf) {
    let closed = inner.closed.clone();
    let weak = Arc::downgrade(&inner);
    let max = inner.opts.max_frame;
    drop(inner);
    let mut buf = BytesMut::with_capacity(64 * 1024);
    let err = loop {
        loop {
            match protocol::decode_response(&mut buf, max) {
                Ok(None) => break,
                Ok(Some(resp)) => {
                    let Some(inner) = weak.upgrade() else { return };
                    let waiter = inner
                        .pending
                        .lock()
                        .unwrap_or_else(|x| x.into_inner())
                        .waiters
                        .remove(&resp.id);
                    // An unknown id is the answer to a request that timed out: dropped.
                    if let Some(w) = waiter {
                        let _ = w.send(Ok(resp));
                    }
                }
                Err(e) => {
                    if let Some(inner) = weak.upgrade() {
                        inner.fail(ClientError::Protocol(e.to_string()));
                    }
                    return;
                }
            }
        }
        tokio::select! {
            () = closed.cancelled() => return,
            r = rd.read_buf(&mut buf) => match r {
                Ok(0) => break "closed by the bookie".to_string(),
                Ok(_) => {}
                Err(e) => break e.to_string(),
            },
        }
    };
    if let Some(inner) = weak.upgrade() {
        inner.fail(ClientError::ConnectionLost(err));
    }
}
