//! [`Server`]: binds the listener, starts the pipeline and the accept loop, and stops them.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{info, warn};
use zkit_core::ConnId;

use crate::config::ServerConfig;
use crate::connection;
use crate::error::Error;
use crate::metrics::Metrics;
use crate::pipeline::{now_ms, Pipeline};
use crate::shared::Shared;
use crate::storage::error::StorageError;
use crate::storage::{MemoryStorage, Storage, WalStorage};

/// Requests queued for the pipeline before readers wait (back-pressure on fast clients).
const PIPELINE_QUEUE: usize = 8192;

/// A running server. Dropping it without [`Server::stop`] also stops it, without waiting.
#[derive(Debug)]
pub struct Server {
    addr: SocketAddr,
    secure_addr: Option<SocketAddr>,
    config: ServerConfig,
    shutdown: CancellationToken,
    tasks: TaskTracker,
}

impl Server {
    /// Starts a server: durable in `config.data_dir` (locked, recovered from its snapshot and
    /// WAL first), or in memory when that is `None` (state is lost when it stops).
    ///
    /// # Errors
    /// [`Error::Config`] for inconsistent settings, [`Error::Bind`] if the address is taken,
    /// [`Error::Storage`] when the data dir is in use by another server (the message says so
    /// and names its pid), corrupt, or unreadable.
    pub async fn start(config: ServerConfig) -> Result<Server, Error> {
        let storage: Box<dyn Storage> = match &config.data_dir {
            None => Box::new(MemoryStorage),
            Some(dir) => {
                let (dir, opts) = (dir.clone(), config.durable_options());
                let opened = tokio::task::spawn_blocking(move || WalStorage::open_with(dir, opts))
                    .await
                    .map_err(|e| StorageError::task_lost("opening the data dir", e))?;
                Box::new(opened?)
            }
        };
        Server::start_with_storage(config, storage).await
    }

    /// Starts a server whose txns go through `storage`: what it recovers is replayed first.
    ///
    /// # Errors
    /// As [`Server::start`], and [`Error::Storage`] when recovery fails.
    pub async fn start_with_storage(
        config: ServerConfig,
        mut storage: Box<dyn Storage>,
    ) -> Result<Server, Error> {
        config.validate()?;
        let core = storage.recover_core(config.core_config(), now_ms()).await?;
        let listener = TcpListener::bind(config.listen)
            .await
            .map_err(|source| Error::Bind {
                addr: config.listen,
                source,
            })?;
        let addr = listener.local_addr().map_err(|source| Error::Bind {
            addr: config.listen,
            source,
        })?;
        let mut config = config;
        config.listen = addr;
        // The TLS port: its key material is read (and refused if unusable) before anything
        // is served, so a bad key never leaves a plaintext-only server running.
        let secure = match (config.secure_listen, &config.tls) {
            (Some(asked), Some(tls)) => {
                let acceptor = tls_acceptor(tls)?;
                let taken = |source| Error::BindPort {
                    what: "secure client port",
                    addr: asked,
                    source,
                };
                let listener = TcpListener::bind(asked).await.map_err(taken)?;
                let bound = listener.local_addr().map_err(taken)?;
                config.secure_listen = Some(bound);
                Some((listener, acceptor))
            }
            _ => None,
        };
        let secure_addr = config.secure_listen;
        // The HTTP admin endpoint (optional); its bound address replaces the asked-for one.
        let admin = match config.admin_listen {
            Some(asked) => {
                let (listener, bound) = crate::admin_http::bind(asked).await?;
                config.admin_listen = Some(bound);
                Some(listener)
            }
            None => None,
        };

        let shutdown = CancellationToken::new();
        let tasks = TaskTracker::new();
        let metrics = Arc::new(Metrics::new());
        let (to_core, from_conns) = mpsc::channel(PIPELINE_QUEUE);
        let pipeline = Pipeline::new(core, storage, metrics.clone());
        tasks.spawn(pipeline.run(from_conns, tick_interval(&config), shutdown.clone()));
        let shared = Arc::new(Shared {
            config: config.clone(),
            metrics,
            to_core,
            shutdown: shutdown.clone(),
            conn_counts: Arc::default(),
        });
        if let Some(listener) = admin {
            tasks.spawn(crate::admin_http::serve(listener, shared.clone()));
        }
        let conn_ids = Arc::new(AtomicU64::new(1));
        if let Some((listener, acceptor)) = secure {
            let tls = Some(acceptor);
            let accept = accept_loop(
                listener,
                shared.clone(),
                tasks.clone(),
                conn_ids.clone(),
                tls,
            );
            tasks.spawn(accept);
        }
        tasks.spawn(accept_loop(listener, shared, tasks.clone(), conn_ids, None));
        log_start(&config);
        Ok(Server {
            addr,
            secure_addr,
            config,
            shutdown,
            tasks,
        })
    }

    /// The address clients connect to (the real port when the config asked for port 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The address TLS clients connect to (`secureClientPort`), if one is configured.
    pub fn secure_addr(&self) -> Option<SocketAddr> {
        self.secure_addr
    }

    /// The configuration in force (with the bound address in `listen`).
    pub fn config(&self) -> &ServerConfig {
        &self.config
    }

    /// Stops gracefully: stops accepting, answers the requests already received, writes out
    /// every queued reply and event, closes the connections, and waits for all of it.
    /// Sessions are not closed (as when a ZooKeeper server stops): clients see a disconnect.
    pub async fn stop(self) {
        self.shutdown.cancel();
        self.tasks.close();
        self.tasks.wait().await;
        info!(addr = %self.addr, "zkit server stopped");
    }

    /// Resolves when the server stops by itself (storage failure) or is stopped.
    pub async fn stopped(&self) {
        self.shutdown.cancelled().await;
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// The start-up lines: where the data lives, how it is synced, the ports, and the limits (as
/// Apache's `ZooKeeperServer` logs its tickTime, session bounds and data dirs at start).
fn log_start(config: &ServerConfig) {
    let data_dir = match &config.data_dir {
        Some(dir) => dir.display().to_string(),
        None => "(in memory: nothing is kept)".to_string(),
    };
    let fsync = match (&config.data_dir, config.fsync) {
        (None, _) => "none (in memory)",
        (Some(_), crate::config::FsyncMode::Always) => "always (fdatasync before each reply)",
        (Some(_), crate::config::FsyncMode::Never) => "never (not power-loss safe)",
    };
    info!(data_dir = %data_dir, fsync = %fsync, "zkit server storage");
    let (min, max) = config.session_timeout_bounds_ms();
    let show = |a: Option<SocketAddr>| a.map_or_else(|| "off".to_string(), |a| a.to_string());
    info!(
        client = %config.listen,
        secure = %show(config.secure_listen),
        admin = %show(config.admin_listen),
        "zkit server listening"
    );
    info!(
        max_client_cnxns = config.limits.max_client_cnxns,
        jute_maxbuffer = config.max_frame,
        tick_time_ms = u64::try_from(config.tick_time.as_millis()).unwrap_or(u64::MAX),
        min_session_timeout_ms = min,
        max_session_timeout_ms = max,
        "zkit server limits"
    );
}

/// How often the core's clock advances: half a tick (ZooKeeper's expiry granularity is one
/// tick), finer when the reaper interval is shorter, never below 10 ms.
fn tick_interval(config: &ServerConfig) -> Duration {
    (config.tick_time / 2)
        .min(config.container_check_interval / 2)
        .max(Duration::from_millis(10))
}

#[cfg(feature = "tls")]
type TlsAcceptor = tokio_rustls::TlsAcceptor;
/// Without the `tls` feature there is no acceptor (and `ServerConfig::validate` refuses a
/// secure port).
#[cfg(not(feature = "tls"))]
type TlsAcceptor = std::convert::Infallible;

#[cfg(feature = "tls")]
fn tls_acceptor(tls: &crate::tls::TlsConfig) -> Result<TlsAcceptor, Error> {
    crate::tls::acceptor(tls)
}

#[cfg(not(feature = "tls"))]
fn tls_acceptor(_: &crate::tls::TlsConfig) -> Result<TlsAcceptor, Error> {
    Err(Error::Tls("built without the `tls` feature".into()))
}

/// Accepts connections on one port (plain, or TLS with `tls`); connection ids come from
/// `conn_ids`, shared by both ports.
async fn accept_loop(
    listener: TcpListener,
    shared: Arc<Shared>,
    tasks: TaskTracker,
    conn_ids: Arc<AtomicU64>,
    tls: Option<TlsAcceptor>,
) {
    loop {
        let accepted = tokio::select! {
            () = shared.shutdown.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, peer)) => {
                let conn: ConnId = conn_ids.fetch_add(1, Ordering::Relaxed);
                match &tls {
                    None => {
                        tasks.spawn(connection::serve(stream, peer, conn, shared.clone()));
                    }
                    #[cfg(feature = "tls")]
                    Some(acceptor) => {
                        let serve = connection::serve_tls(
                            stream,
                            peer,
                            conn,
                            shared.clone(),
                            acceptor.clone(),
                        );
                        tasks.spawn(serve);
                    }
                    #[cfg(not(feature = "tls"))]
                    Some(never) => match *never {},
                }
            }
            Err(err) => {
                // Out of file descriptors and the like: back off instead of spinning.
                warn!(%err, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}
