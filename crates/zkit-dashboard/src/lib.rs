//! zkit-dashboard: a web dashboard of a ZooKeeper server — its status, tree, live sessions and
//! the ephemerals each owns, and the coordination happening in it (who holds each lock and who
//! waits, who leads, queues, barriers, 2PC transactions, procedures, ledgers and bookies).
//!
//! The dashboard is a ZooKeeper **client** of the server it shows (a zkit [`zkit::Session`],
//! plus four-letter words for status and sessions), so it works for any ZooKeeper: `zkit ui
//! --server ZK` runs it on its own listener ([`Dashboard::serve`]), and `zkit serve
//! --admin-port A` mounts it into the server's admin endpoint ([`Mount`]).
//!
//! # Layout
//! - [`zk`]: every ZooKeeper call (the only module that names the client crate).
//! - [`four_letter`]: `srvr`/`mntr`/`cons`/`dump`/`wchc` over TCP, and pure parsers of them.
//! - [`admin_json`]: the same facts from the AdminServer's JSON commands (`/commands/…`).
//! - [`recipes`]: pure recognition of recipe layouts from node names, and their views.
//! - [`charts`]: pure chart points (rates, p50/p99) from consecutive metric samples.
//! - [`model`]: the data of one collection ([`model::Snapshot`] and its rows), plain data.
//! - [`model`]: the data of one collection ([`model::Snapshot`] and its rows), plain data.
//! - [`collect`]: the timer-driven collector that publishes one [`model::Snapshot`] per
//!   interval to every page and event stream.
//! - [`render`]: server-side HTML of the pages and of the live sections, and the event JSON.
//! - [`web`]: HTTP routes, server-sent events, sign-in, CSRF, the JSON API.
//! - `http_get`: a tiny HTTP client for zkit serve's `/metrics`.
//! - `assets/`: the page's hand-written script and style sheet, built into the binary.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod admin_json;
pub mod charts;
pub mod collect;
mod config;
pub mod four_letter;
mod http_get;
pub mod model;
pub mod recipes;
pub mod render;
pub mod web;
pub mod zk;

pub use config::DashboardConfig;
pub use web::Body;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// Errors of starting the dashboard.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The first ZooKeeper session could not be opened.
    #[error("cannot connect to ZooKeeper at {connect}: {source}")]
    Connect {
        /// The connect string.
        connect: String,
        /// Why.
        source: zkit::Error,
    },
    /// The HTTP listener could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
}

/// A running dashboard: the collector and the HTTP handler. Cheap to clone; [`Dashboard::close`],
/// or dropping the last clone, stops the collector and closes its sessions.
#[derive(Debug, Clone)]
pub struct Dashboard {
    web: Arc<web::Web>,
}

impl Dashboard {
    /// Connects to the server and starts collecting.
    ///
    /// # Errors
    /// [`Error::Connect`] when no ZooKeeper session can be opened.
    pub async fn start(config: DashboardConfig) -> Result<Dashboard, Error> {
        let zk = zk::Zk::connect(&config.connect, None, &config.session)
            .await
            .map_err(|source| Error::Connect {
                connect: config.connect.clone(),
                source,
            })?;
        let collector = Arc::new(collect::Collector::new());
        collector
            .own_sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(zk.session_id());
        let stop = CancellationToken::new();
        let web = Arc::new(web::Web::new(
            config.clone(),
            zk.clone(),
            collector.clone(),
            stop.clone(),
        ));
        tokio::spawn(collect::run(config, zk, collector, stop.clone()));
        let expiring = Arc::downgrade(&web);
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(Duration::from_secs(60)) => {}
                }
                match expiring.upgrade() {
                    Some(web) => web.expire_users(),
                    None => return,
                }
            }
        });
        Ok(Dashboard { web })
    }

    /// Answers one HTTP request (any path: `/`, `/tree`, `/events`, `/api/…`).
    pub async fn handle(&self, req: Request<Incoming>) -> Response<Body> {
        self.web.clone().handle(req).await
    }

    /// The latest snapshot (waiting for the first collection, at most 5 s).
    pub async fn snapshot(&self) -> Arc<model::Snapshot> {
        self.web
            .collector
            .fresh(Duration::from_secs(3600), Duration::from_secs(5))
            .await
    }

    /// Stops the collector and closes every ZooKeeper session the dashboard opened.
    pub fn close(&self) {
        self.web.stop.cancel();
        self.web.close_users();
        self.web.zk.close();
    }

    /// Serves HTTP on `listener` until `shutdown` (then closes the dashboard).
    pub async fn serve(&self, listener: TcpListener, shutdown: CancellationToken) {
        loop {
            let (stream, _) = tokio::select! {
                () = shutdown.cancelled() => break,
                accepted = listener.accept() => match accepted {
                    Ok(a) => a,
                    Err(err) => {
                        tracing::debug!(%err, "dashboard accept failed");
                        continue;
                    }
                },
            };
            let this = self.clone();
            let shutdown = shutdown.clone();
            tokio::spawn(async move {
                let service = service_fn(move |req| {
                    let this = this.clone();
                    async move { Ok::<_, Infallible>(this.handle(req).await) }
                });
                let conn = http1::Builder::new().serve_connection(TokioIo::new(stream), service);
                tokio::select! {
                    () = shutdown.cancelled() => {}
                    served = conn => if let Err(err) = served {
                        tracing::debug!(%err, "dashboard connection failed");
                    },
                }
            });
        }
        self.close();
    }
}

/// Binds `addr` for [`Dashboard::serve`]; returns the listener and its real address.
///
/// # Errors
/// [`Error::Bind`].
pub async fn bind(addr: SocketAddr) -> Result<(TcpListener, SocketAddr), Error> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| Error::Bind { addr, source })?;
    let bound = listener
        .local_addr()
        .map_err(|source| Error::Bind { addr, source })?;
    Ok((listener, bound))
}

/// A place for a dashboard that starts after its HTTP server does: zkit serve's admin endpoint
/// is configured before the server (and its client port, which the dashboard connects to)
/// exists. Until [`Mount::set`], requests get 503.
#[derive(Debug, Clone, Default)]
pub struct Mount {
    slot: Arc<OnceLock<Dashboard>>,
}

impl Mount {
    /// An empty mount.
    pub fn new() -> Mount {
        Mount::default()
    }

    /// Puts the dashboard in; a second call is ignored.
    pub fn set(&self, dashboard: Dashboard) {
        let _ = self.slot.set(dashboard);
    }

    /// The dashboard, once set.
    pub fn get(&self) -> Option<&Dashboard> {
        self.slot.get()
    }

    /// Answers one request (503 until the dashboard is set).
    pub async fn handle(&self, req: Request<Incoming>) -> Response<Body> {
        match self.slot.get() {
            Some(d) => d.handle(req).await,
            None => {
                use http_body_util::BodyExt as _;
                let mut r = Response::new(
                    http_body_util::Full::new(Bytes::from_static(b"the dashboard is starting\n"))
                        .boxed_unsync(),
                );
                *r.status_mut() = hyper::StatusCode::SERVICE_UNAVAILABLE;
                r
            }
        }
    }
}

#[cfg(feature = "admin-mount")]
impl zkit_server::AdminHandler for Mount {
    fn handle(
        &self,
        req: Request<Incoming>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Response<Body>> + Send>> {
        let this = self.clone();
        Box::pin(async move { this.handle(req).await })
    }
}
