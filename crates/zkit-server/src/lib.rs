//! zkit's ZooKeeper-compatible server: the tokio I/O shell around the pure [`zkit_core::Core`].
//!
//! Real ZooKeeper clients (Java, Curator, kazoo, the Rust `zookeeper-client` crate) talk to it
//! unchanged. It embeds in a test or an application the way Curator's `TestingServer` does:
//!
//! ```no_run
//! # async fn demo() -> Result<(), zkit_server::Error> {
//! use zkit_server::{Server, ServerConfig};
//! let server = Server::start(ServerConfig::ephemeral()).await?; // 127.0.0.1, port 0
//! let connect_string = server.addr().to_string();
//! // ... point clients at `connect_string` ...
//! server.stop().await;
//! # Ok(()) }
//! ```
//!
//! # Layout
//! - [`config`]: [`ServerConfig`] (listen address, tickTime, session bounds, extended types,
//!   container check interval, frame limit, four-letter-word whitelist).
//! - [`server`]: [`Server`]: binds, accepts, and stops gracefully.
//! - [`tls`]: [`TlsConfig`] for the secure client port (`secureClientPort`, PEM keys as
//!   Apache's PEM key store reads them, client certificates); the rustls acceptor (feature
//!   `tls`). `x509_name`: a client certificate's subject as Apache's `x509` id.
//! - `pipeline`: the one task that owns the `Core` — like ZooKeeper's request-processor pipeline,
//!   everything that changes state goes through it, in order. It drains every queued request
//!   before taking `ready()` (so writes share one storage flush: group commit), persists the txns
//!   through [`storage::Storage`], then releases the replies and watch events.
//! - `connection`: one task pair per TCP connection: the reader turns frames into decoded
//!   requests for the pipeline; the writer encodes what the pipeline sends back, in order.
//! - `to_core`: the messages connections (and the four-letter words, and the admin endpoint)
//!   queue for the pipeline; `outbox`: the bounded queue the pipeline fills for each
//!   connection's writer; `shared`: what all of them hold (config, metrics, the queue).
//! - `four_letter`: every ZooKeeper 3.8 four-letter word (`ruok`, `srvr`, `stat`, `mntr`,
//!   `cons`, `dump`, `hash`, ...) in ZooKeeper's output formats, behind the whitelist.
//! - `metrics`: counters shared by connections, the pipeline and the four-letter words, and
//!   their Prometheus rendering.
//! - [`limits`]: connections per client IP, requests in flight per connection.
//! - `admin_http`: the optional HTTP admin endpoint (`/metrics`, `/commands/<name>`);
//!   `admin_handler`: the [`AdminHandler`] hook that serves its other paths (the dashboard).
//! - `error`: [`Error`], why a server could not start or stopped.
//! - [`zoo_cfg`]: reads `zoo.cfg` (and its TOML form) into a [`ServerConfig`].
//! - [`apache_import`]: an Apache ZooKeeper data dir (snapshot + txn logs) into a fresh zkit
//!   data dir (`zkit serve --import-apache`).
//! - [`storage`]: where txns become durable before replies leave: in memory, or with a data
//!   dir a write-ahead log with group commit, background snapshots and crash recovery.
//! - [`testing`]: [`testing::TestingCluster`], N independent embedded servers behind fixed
//!   ports (stop, restart, pause, drop connections) for testing client failover, like
//!   Curator's `TestingCluster` — not a replicated ensemble.
//!
//! The server never panics on client input: a malformed frame or handshake closes that one
//! connection; a request whose body does not decode gets ZooKeeper's error code. Other sessions
//! are unaffected.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod admin_handler;
mod admin_http;
pub mod apache_import;
pub mod config;
mod connection;
mod error;
mod four_letter;
pub mod limits;
mod metrics;
mod outbox;
mod pipeline;
pub mod server;
mod shared;
pub mod storage;
pub mod testing;
pub mod tls;
mod to_core;
#[cfg(feature = "tls")]
mod x509_name;
pub mod zoo_cfg;

pub use admin_handler::{AdminBody, AdminHandler};
pub use config::{FourLetterWhitelist, FsyncMode, ServerConfig};
pub use error::Error;
pub use limits::Limits;
pub use server::Server;
pub use tls::{ClientAuth, TlsConfig, TlsVersion};
