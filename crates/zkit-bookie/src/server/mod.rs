//! The bookie's tokio shell around [`BookieCore`] and a [`Storage`]: the listener, pipelined
//! connections, the disk monitor (read-only mode), periodic checkpoints, the garbage collector
//! (`gc`), registration and `/metrics`, and a graceful stop.
//!
//! Per connection, requests are decided in arrival order under the core's lock and handed to
//! storage in that order, so adds to one ledger are journaled in arrival order; responses leave
//! as they complete (each carries its request id), so a read is not held behind an fsync. A
//! connection has at most `max_in_flight` requests outstanding: past that the bookie stops
//! reading from it. A frame that cannot be trusted (over the limit, unknown version) is
//! answered once and the connection closed; a malformed request inside a sound frame is
//! answered `BadRequest` and the connection kept. Neither touches any other connection.
//!
//! Read-only mode (BookKeeper's `BookieStateManager` + `LedgerDirsMonitor`): entered when a
//! write fails with ENOSPC, when free space drops under `min_free_bytes`, or when forced; left
//! when free space is back to `writable_free_bytes` (and it is not forced). The bookie
//! re-registers under `available/readonly/` and back as the mode changes. An fsync failure
//! makes it read-only until restarted (what the failed fsync covered may be lost; a restart
//! recovers from the journal).

mod gc;
mod shared;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{debug, info, warn};

use crate::cookie::{self, Cookie, CookieError};
use crate::core::BookieCore;
use crate::metrics::{self, Metrics};
use crate::protocol::entry::MasterKey;
use crate::protocol::{
    self, BookieInfo, Decoded, LongPollRequest, Op, ReadRequest, Request, RequestOp, Response,
    ResponseBody, Status,
};
use crate::registration::{RegistrationError, RegistrationManager};
use crate::storage::{FileStorage, FileStorageOptions, Storage, StorageError};

use shared::{Locked, Shared};

/// How to run a bookie.
#[derive(Debug, Clone)]
pub struct BookieConfig {
    /// Listen address (port 0 picks one).
    pub listen: SocketAddr,
    /// The id to register and put in the cookie; default: the bound address (`IP:PORT`).
    pub bookie_id: Option<String>,
    /// Ledger dir (entry logs, index, checkpoint). Required by [`Bookie::start`].
    pub data_dir: Option<PathBuf>,
    /// Journal dir; default: the ledger dir.
    pub journal_dir: Option<PathBuf>,
    /// File storage tuning.
    pub storage: FileStorageOptions,
    /// Where to serve `/metrics`, if anywhere.
    pub metrics: Option<SocketAddr>,
    /// Frame limit.
    pub max_frame: usize,
    /// Largest entry accepted.
    pub max_entry_size: usize,
    /// Go read-only when free space falls below this.
    pub min_free_bytes: u64,
    /// Back to writable once free space is at least this (≥ `min_free_bytes`).
    pub writable_free_bytes: u64,
    /// How often the disk monitor looks.
    pub disk_check_interval: Duration,
    /// How often to checkpoint (also by journal size; see [`FileStorageOptions`]).
    pub checkpoint_interval: Duration,
    /// Requests outstanding per connection before the bookie stops reading from it.
    pub max_in_flight: usize,
    /// How often the garbage collector asks the metadata store which of the bookie's ledgers
    /// still exist, deletes the others' data and reclaims their space; `None`: never.
    pub gc_interval: Option<Duration>,
}

impl BookieConfig {
    /// Defaults on `data_dir`, listening on `listen`.
    pub fn new(listen: SocketAddr, data_dir: impl Into<PathBuf>) -> BookieConfig {
        BookieConfig {
            data_dir: Some(data_dir.into()),
            ..BookieConfig::in_memory(listen)
        }
    }

    /// Defaults with no data dir, for [`Bookie::start_with_storage`].
    pub fn in_memory(listen: SocketAddr) -> BookieConfig {
        BookieConfig {
            listen,
            bookie_id: None,
            data_dir: None,
            journal_dir: None,
            storage: FileStorageOptions::default(),
            metrics: None,
            max_frame: protocol::DEFAULT_MAX_FRAME,
            max_entry_size: protocol::DEFAULT_MAX_FRAME - 1024,
            min_free_bytes: 64 << 20,
            writable_free_bytes: 128 << 20,
            disk_check_interval: Duration::from_secs(1),
            checkpoint_interval: Duration::from_secs(10),
            max_in_flight: 10_000,
            gc_interval: Some(Duration::from_secs(60)),
        }
    }
}

/// Why a bookie could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BookieError {
    /// Binding a listener failed.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// Address.
        addr: SocketAddr,
        /// Error.
        source: std::io::Error,
    },
    /// The cookie check refused the dirs.
    #[error(transparent)]
    Cookie(#[from] CookieError),
    /// Storage failed to open or recover.
    #[error("storage: {0}")]
    Storage(#[from] StorageError),
    /// Registration failed.
    #[error("registration: {0}")]
    Registration(#[from] RegistrationError),
    /// The configuration is unusable.
    #[error("configuration: {0}")]
    Config(String),
}

/// A running bookie. Dropping it without [`Bookie::stop`] stops serving (in the background)
/// but skips the final checkpoint and unregistration.
pub struct Bookie {
    shared: Arc<Shared>,
    addr: SocketAddr,
    metrics_addr: Option<SocketAddr>,
    bookie_id: String,
    registration: Arc<dyn RegistrationManager>,
    tasks: TaskTracker,
}

impl std::fmt::Debug for Bookie {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bookie")
            .field("bookie_id", &self.bookie_id)
            .field("addr", &self.addr)
            .finish()
    }
}

/// How long [`Bookie::stop`] tries to remove the registration.
const UNREGISTER_TIMEOUT: Duration = Duration::from_secs(2);

impl Bookie {
    /// Starts a bookie on its data dir: binds, checks the cookie, recovers storage, registers.
    ///
    /// # Errors
    /// [`BookieError`] naming what failed; nothing is registered then.
    pub async fn start(
        config: BookieConfig,
        registration: Arc<dyn RegistrationManager>,
    ) -> Result<Bookie, BookieError> {
        let data_dir = config
            .data_dir
            .clone()
            .ok_or_else(|| BookieError::Config("no data dir".into()))?;
        let (listener, bookie_id) = bind(&config).await?;
        let ledger_dir = cookie::canonical_dir(&data_dir)?;
        let journal_dir = match &config.journal_dir {
            Some(j) => cookie::canonical_dir(j)?,
            None => ledger_dir.clone(),
        };
        let instance_id = registration.cluster_instance_id().await?;
        let expected = Cookie {
            bookie_id: bookie_id.clone(),
            journal_dir: journal_dir.display().to_string(),
            ledger_dirs: vec![ledger_dir.display().to_string()],
            instance_id,
        };
        let mut dirs = vec![journal_dir.clone()];
        if ledger_dir != journal_dir {
            dirs.push(ledger_dir.clone());
        }
        cookie::check_environment(&*registration, &expected, &dirs).await?;
        let opts = config.storage.clone();
        let storage =
            tokio::task::spawn_blocking(move || FileStorage::open(&ledger_dir, &journal_dir, opts))
                .await
                .map_err(|e| BookieError::Config(format!("storage open task failed: {e}")))??;
        Bookie::start_on(listener, bookie_id, config, Arc::new(storage), registration).await
    }

    /// Starts a bookie on the given storage (e.g. [`crate::storage::MemoryStorage`]), without
    /// the cookie check (there are no dirs to check).
    ///
    /// # Errors
    /// [`BookieError`].
    pub async fn start_with_storage(
        config: BookieConfig,
        storage: Arc<dyn Storage>,
        registration: Arc<dyn RegistrationManager>,
    ) -> Result<Bookie, BookieError> {
        let (listener, bookie_id) = bind(&config).await?;
        Bookie::start_on(listener, bookie_id, config, storage, registration).await
    }

    async fn start_on(
        listener: TcpListener,
        bookie_id: String,
        config: BookieConfig,
        storage: Arc<dyn Storage>,
        registration: Arc<dyn RegistrationManager>,
    ) -> Result<Bookie, BookieError> {
        if config.writable_free_bytes < config.min_free_bytes {
            return Err(BookieError::Config(
                "writable_free_bytes must be at least min_free_bytes".into(),
            ));
        }
        let addr = listener.local_addr().map_err(|source| BookieError::Bind {
            addr: config.listen,
            source,
        })?;
        let core = BookieCore::new(storage.recovered(), config.max_entry_size);
        let (mode, _) = watch::channel(false);
        let shared = Arc::new(Shared {
            locked: Mutex::new(Locked {
                core,
                lac: HashMap::new(),
            }),
            storage,
            metrics: Metrics::default(),
            stop: CancellationToken::new(),
            max_frame: config.max_frame,
            max_in_flight: config.max_in_flight.max(1),
            min_free: config.min_free_bytes,
            writable_free: config.writable_free_bytes,
            forced_read_only: AtomicBool::new(false),
            disk_read_only: AtomicBool::new(false),
            poisoned: AtomicBool::new(false),
            mode,
        });
        check_disk(&shared);
        let read_only = *shared.mode.borrow();
        registration.register_bookie(&bookie_id, read_only).await?;
        info!(%bookie_id, %addr, read_only, "bookie serving");

        let tasks = TaskTracker::new();
        tasks.spawn(accept_loop(listener, Arc::clone(&shared), tasks.clone()));
        tasks.spawn(disk_monitor(
            Arc::clone(&shared),
            config.disk_check_interval,
        ));
        tasks.spawn(checkpointer(
            Arc::clone(&shared),
            config.checkpoint_interval,
        ));
        if let Some(every) = config.gc_interval {
            tasks.spawn(gc::garbage_collector(
                Arc::clone(&shared),
                Arc::clone(&registration),
                every,
            ));
        }
        tasks.spawn(registrar(
            Arc::clone(&shared),
            Arc::clone(&registration),
            bookie_id.clone(),
            read_only,
        ));
        let metrics_addr = match config.metrics {
            Some(a) => {
                let (l, bound) = metrics::bind(a)
                    .await
                    .map_err(|source| BookieError::Bind { addr: a, source })?;
                let s = Arc::clone(&shared);
                let render = Arc::new(move || {
                    let g = s.gauges();
                    s.metrics.render(&g, &s.storage.stats())
                });
                tasks.spawn(metrics::serve(l, render, shared.stop.clone()));
                Some(bound)
            }
            None => None,
        };
        Ok(Bookie {
            shared,
            addr,
            metrics_addr,
            bookie_id,
            registration,
            tasks,
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Its id (`HOST:PORT`).
    pub fn bookie_id(&self) -> &str {
        &self.bookie_id
    }

    /// Where `/metrics` is served.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_addr
    }

    /// Read-only now.
    pub fn is_read_only(&self) -> bool {
        *self.shared.mode.borrow()
    }

    /// Watches the read-only state.
    pub fn watch_read_only(&self) -> watch::Receiver<bool> {
        self.shared.mode.subscribe()
    }

    /// Forces read-only mode on or off (an operator's switch, like BookKeeper's bookie state
    /// admin API); disk conditions still apply when off.
    pub fn force_read_only(&self, read_only: bool) {
        self.shared.forced_read_only.store(read_only, Relaxed);
        self.shared.update_mode();
    }

    /// The storage it runs on.
    pub fn storage(&self) -> &Arc<dyn Storage> {
        &self.shared.storage
    }

    /// Prometheus text, as `/metrics` serves it.
    pub fn metrics_text(&self) -> String {
        let g = self.shared.gauges();
        self.shared.metrics.render(&g, &self.shared.storage.stats())
    }

    async fn stop_serving(&self) {
        self.shared.stop.cancel();
        self.tasks.close();
        if tokio::time::timeout(Duration::from_secs(10), self.tasks.wait())
            .await
            .is_err()
        {
            warn!("bookie tasks did not finish within 10 s");
        }
    }

    /// Stops serving and closes storage without the final checkpoint or unregistering: the
    /// files are left as a crash leaves them (minus a lost page cache), and the registration
    /// stays until the registration's session ends. For tests of recovery.
    pub async fn halt(self) {
        self.stop_serving().await;
        let storage = Arc::clone(&self.shared.storage);
        let _ = tokio::task::spawn_blocking(move || storage.shutdown()).await;
    }

    /// Stops: closes connections, waits for in-flight work, checkpoints, stops storage and
    /// unregisters.
    pub async fn stop(self) {
        self.stop_serving().await;
        if let Err(e) = self.shared.storage.checkpoint().await {
            warn!(error = %e, "final checkpoint failed; the journal is kept");
        }
        let storage = Arc::clone(&self.shared.storage);
        let _ = tokio::task::spawn_blocking(move || storage.shutdown()).await;
        // Bounded: with ZooKeeper unreachable the registration cannot be removed, and need not
        // be: it is an ephemeral node, gone with the session when the process exits.
        for ro in [false, true] {
            let unregister = self.registration.unregister_bookie(&self.bookie_id, ro);
            match tokio::time::timeout(UNREGISTER_TIMEOUT, unregister).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => warn!(error = %e, "unregister failed"),
                Err(_) => warn!(
                    "unregister did not finish within {UNREGISTER_TIMEOUT:?} (ZooKeeper \
                     unreachable?); the registration goes with the session"
                ),
            }
        }
        info!(bookie_id = %self.bookie_id, "bookie stopped");
    }
}

impl Drop for Bookie {
    fn drop(&mut self) {
        self.shared.stop.cancel();
    }
}

/// Binds the configured address; the bookie id is the configured one or the bound address.
async fn bind(config: &BookieConfig) -> Result<(TcpListener, String), BookieError> {
    let addr = config.listen;
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| BookieError::Bind { addr, source })?;
    let bound = listener
        .local_addr()
        .map_err(|source| BookieError::Bind { addr, source })?;
    let bookie_id = config
        .bookie_id
        .clone()
        .unwrap_or_else(|| bound.to_string());
    Ok((listener, bookie_id))
}

fn check_disk(shared: &Shared) {
    let usage = shared.storage.disk_usage();
    let was = shared.disk_read_only.load(Relaxed);
    let now = if usage.free_bytes < shared.min_free {
        true
    } else if usage.free_bytes >= shared.writable_free {
        false
    } else {
        was
    };
    if now != was {
        info!(free = usage.free_bytes, read_only = now, "disk monitor");
        shared.disk_read_only.store(now, Relaxed);
    }
    shared.update_mode();
}

async fn disk_monitor(shared: Arc<Shared>, every: Duration) {
    loop {
        tokio::select! {
            () = shared.stop.cancelled() => return,
            () = tokio::time::sleep(every) => {}
        }
        let s = Arc::clone(&shared);
        let _ = tokio::task::spawn_blocking(move || check_disk(&s)).await;
    }
}

async fn checkpointer(shared: Arc<Shared>, every: Duration) {
    loop {
        tokio::select! {
            () = shared.stop.cancelled() => return,
            () = tokio::time::sleep(every) => {}
        }
        if let Err(e) = shared.storage.checkpoint().await {
            debug!(error = %e, "periodic checkpoint failed");
        }
    }
}

/// Keeps the registration in step with the mode.
async fn registrar(
    shared: Arc<Shared>,
    registration: Arc<dyn RegistrationManager>,
    bookie_id: String,
    mut registered: bool,
) {
    let mut mode = shared.mode.subscribe();
    loop {
        let want = *mode.borrow_and_update();
        if want != registered {
            match registration.register_bookie(&bookie_id, want).await {
                Ok(()) => registered = want,
                Err(e) => {
                    warn!(error = %e, "re-registration failed; retrying");
                    tokio::select! {
                        () = shared.stop.cancelled() => return,
                        () = tokio::time::sleep(Duration::from_millis(200)) => {}
                    }
                    continue;
                }
            }
        }
        tokio::select! {
            () = shared.stop.cancelled() => return,
            r = mode.changed() => if r.is_err() { return },
        }
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>, tasks: TaskTracker) {
    loop {
        let (stream, peer) = tokio::select! {
            () = shared.stop.cancelled() => return,
            a = listener.accept() => match a {
                Ok(a) => a,
                Err(err) => {
                    debug!(%err, "accept failed");
                    continue;
                }
            },
        };
        shared.metrics.connections.fetch_add(1, Relaxed);
        let s = Arc::clone(&shared);
        tasks.spawn(async move {
            debug!(%peer, "connection");
            connection(s, stream).await;
            debug!(%peer, "connection closed");
        });
    }
}

type Permit = mpsc::OwnedPermit<Response>;

async fn connection(shared: Arc<Shared>, stream: TcpStream) {
    let _ = stream.set_nodelay(true);
    let (mut rd, wr) = stream.into_split();
    let (tx, rx) = mpsc::channel::<Response>(shared.max_in_flight);
    let writer = tokio::spawn(write_loop(wr, rx));
    let mut buf = BytesMut::with_capacity(64 * 1024);
    'conn: loop {
        loop {
            let decoded = match protocol::decode_request(&mut buf, shared.max_frame) {
                Ok(None) => break,
                Ok(Some(d)) => d,
                Err(e) => {
                    shared.metrics.bad_requests.fetch_add(1, Relaxed);
                    debug!(error = %e, "bad frame; closing the connection");
                    let _ = tx
                        .send(Response::error(e.request_id(), 0, e.status()))
                        .await;
                    break 'conn;
                }
            };
            let permit = tokio::select! {
                () = shared.stop.cancelled() => break 'conn,
                p = tx.clone().reserve_owned() => match p {
                    Ok(p) => p,
                    Err(_) => break 'conn,
                },
            };
            match decoded {
                Decoded::Ok(req) => dispatch(&shared, req, permit),
                Decoded::Bad {
                    request_id,
                    op,
                    status,
                    reason,
                } => {
                    shared.metrics.bad_requests.fetch_add(1, Relaxed);
                    debug!(request_id, op, reason, "bad request");
                    permit.send(Response::error(request_id, op, status));
                }
            }
        }
        tokio::select! {
            () = shared.stop.cancelled() => break,
            r = rd.read_buf(&mut buf) => match r {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            },
        }
    }
    drop(tx);
    // In-flight requests hold permits (senders): the writer ends once they have answered.
    let _ = writer.await;
}

async fn write_loop(mut wr: OwnedWriteHalf, mut rx: mpsc::Receiver<Response>) {
    let mut out = BytesMut::with_capacity(64 * 1024);
    while let Some(first) = rx.recv().await {
        protocol::encode_response(&first, &mut out);
        while out.len() < 256 * 1024 {
            match rx.try_recv() {
                Ok(r) => protocol::encode_response(&r, &mut out),
                Err(_) => break,
            }
        }
        if wr.write_all(&out).await.is_err() {
            return;
        }
        out.clear();
    }
    let _ = wr.shutdown().await;
}

fn dispatch(shared: &Arc<Shared>, req: Request, permit: Permit) {
    let id = req.id;
    match req.op {
        RequestOp::Add(add) => {
            let started = Instant::now();
            let decided = {
                let mut l = shared.lock();
                // Submitted under the lock: journal order is decision order.
                l.core
                    .add(&add)
                    .map(|p| (shared.storage.submit(p.records), p.ack))
            };
            match decided {
                Err(status) => {
                    shared.metrics.add_errors.fetch_add(1, Relaxed);
                    permit.send(Response::error(id, Op::Add as u8, status));
                }
                Ok((commit, ack)) => {
                    let shared = Arc::clone(shared);
                    tokio::spawn(async move {
                        let resp = match commit.await {
                            Ok(()) => {
                                shared.committed(&ack);
                                shared.metrics.record_add(started.elapsed());
                                Response::ok(
                                    id,
                                    ResponseBody::Add {
                                        ledger_id: add.ledger_id,
                                        entry_id: add.entry_id,
                                    },
                                )
                            }
                            Err(e) => {
                                shared.metrics.add_errors.fetch_add(1, Relaxed);
                                shared.storage_failed(&e);
                                Response::error(id, Op::Add as u8, Status::IoError)
                            }
                        };
                        permit.send(resp);
                    });
                }
            }
        }
        RequestOp::ReadLac { ledger_id } => {
            let resp = match shared.lock().core.check_read(ledger_id) {
                Ok(l) => Response::ok(
                    id,
                    ResponseBody::Lac {
                        ledger_id,
                        lac: l.lac,
                        last_entry: l.last_entry,
                    },
                ),
                Err(s) => Response::error(id, Op::ReadLac as u8, s),
            };
            permit.send(resp);
        }
        RequestOp::ListLedgers { start_after, max } => {
            let (ids, more) = shared.lock().core.list(start_after, max);
            permit.send(Response::ok(id, ResponseBody::Ledgers { ids, more }));
        }
        RequestOp::BookieInfo => {
            let g = shared.gauges();
            let usage = shared.storage.disk_usage();
            permit.send(Response::ok(
                id,
                ResponseBody::Info(BookieInfo {
                    free_bytes: usage.free_bytes,
                    total_bytes: usage.total_bytes,
                    read_only: g.read_only,
                    ledgers: g.ledgers,
                    entries: g.entries,
                }),
            ));
        }
        RequestOp::Read(r) => {
            let shared = Arc::clone(shared);
            tokio::spawn(async move {
                let resp = read(&shared, id, r).await;
                permit.send(resp);
            });
        }
        RequestOp::Fence {
            ledger_id,
            master_key,
        } => {
            let shared = Arc::clone(shared);
            tokio::spawn(async move {
                let resp = match fence(&shared, ledger_id, &master_key).await {
                    Ok(()) => Response::ok(id, ResponseBody::Fence { ledger_id }),
                    Err(s) => Response::error(id, Op::Fence as u8, s),
                };
                permit.send(resp);
            });
        }
        RequestOp::LongPollLac(p) => {
            let shared = Arc::clone(shared);
            tokio::spawn(async move {
                let resp = long_poll(&shared, id, p).await;
                permit.send(resp);
            });
        }
    }
}

/// Fences durably (answers once the fence record is synced).
async fn fence(shared: &Shared, ledger_id: i64, key: &MasterKey) -> Result<(), Status> {
    let pending = {
        let mut l = shared.lock();
        l.core
            .fence(ledger_id, key)?
            .map(|p| (shared.storage.submit(p.records), p.ack))
    };
    if let Some((commit, ack)) = pending {
        if let Err(e) = commit.await {
            shared.storage_failed(&e);
            return Err(Status::IoError);
        }
        shared.committed(&ack);
    }
    Ok(())
}

async fn read_entry(
    shared: &Arc<Shared>,
    ledger_id: i64,
    entry_id: i64,
) -> Result<Option<bytes::Bytes>, Status> {
    let s = Arc::clone(shared);
    let r = tokio::task::spawn_blocking(move || s.storage.read(ledger_id, entry_id))
        .await
        .map_err(|_| Status::IoError)?;
    r.map_err(|e| {
        warn!(error = %e, ledger_id, entry_id, "read failed");
        Status::IoError
    })
}

async fn read(shared: &Arc<Shared>, id: u64, r: ReadRequest) -> Response {
    shared.metrics.reads.fetch_add(1, Relaxed);
    let err = |s| Response::error(id, Op::Read as u8, s);
    if let Some(key) = &r.fence {
        if let Err(s) = fence(shared, r.ledger_id, key).await {
            return err(s);
        }
    }
    if let Err(s) = shared.lock().core.check_read(r.ledger_id) {
        return err(s);
    }
    match read_entry(shared, r.ledger_id, r.entry_id).await {
        Ok(Some(entry)) => Response::ok(
            id,
            ResponseBody::Read {
                ledger_id: r.ledger_id,
                entry_id: r.entry_id,
                entry,
            },
        ),
        Ok(None) => err(Status::NoEntry),
        Err(s) => err(s),
    }
}

/// BookKeeper's `ReadLastConfirmedAndEntry`: wait (bounded) until the LAC passes
/// `previous_lac`, then answer the LAC and entry `previous_lac + 1` if stored.
async fn long_poll(shared: &Arc<Shared>, id: u64, p: LongPollRequest) -> Response {
    let err = |s| Response::error(id, Op::LongPollLac as u8, s);
    let waiter = {
        let mut l = shared.lock();
        let lac = match l.core.check_read(p.ledger_id) {
            Ok(s) => s.lac,
            Err(s) => return err(s),
        };
        (lac <= p.previous_lac).then(|| {
            l.lac
                .entry(p.ledger_id)
                .or_insert_with(|| watch::channel(lac).0)
                .subscribe()
        })
    };
    if let Some(mut rx) = waiter {
        let wait = Duration::from_millis(u64::from(p.timeout_ms));
        tokio::select! {
            () = shared.stop.cancelled() => return err(Status::ShuttingDown),
            _ = tokio::time::timeout(wait, rx.wait_for(|lac| *lac > p.previous_lac)) => {}
        }
        drop(rx);
        let mut l = shared.lock();
        if l.lac
            .get(&p.ledger_id)
            .is_some_and(|tx| tx.receiver_count() == 0)
        {
            l.lac.remove(&p.ledger_id);
        }
    }
    let lac = match shared.lock().core.check_read(p.ledger_id) {
        Ok(s) => s.lac,
        Err(s) => return err(s),
    };
    let entry = if lac > p.previous_lac {
        match read_entry(shared, p.ledger_id, p.previous_lac + 1).await {
            Ok(e) => e,
            Err(s) => return err(s),
        }
    } else {
        None
    };
    Response::ok(
        id,
        ResponseBody::LongPoll {
            ledger_id: p.ledger_id,
            lac,
            entry,
        },
    )
}
