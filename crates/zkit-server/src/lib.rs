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
//! - `pipeline`: the one task that owns the `Core` — like ZooKeeper's request-processor pipeline,
//!   everything that changes state goes through it, in order. It drains every queued request
//!   before taking `ready()` (so writes share one storage flush: group commit), persists the txns
//!   through [`storage::Storage`], then releases the replies and watch events.
//! - `connection`: one task pair per TCP connection: the reader turns frames into decoded
//!   requests for the pipeline; the writer encodes what the pipeline sends back, in order.
//! - `four_letter`: every ZooKeeper 3.8 four-letter word (`ruok`, `srvr`, `stat`, `mntr`,
//!   `cons`, `dump`, `hash`, ...) in ZooKeeper's output formats, behind the whitelist.
//! - `metrics`: counters shared by connections, the pipeline and the four-letter words, and
//!   their Prometheus rendering.
//! - [`limits`]: connections per client IP, requests in flight per connection.
//! - `admin_http`: the optional HTTP admin endpoint (`/metrics`, `/commands/<name>`).
//! - [`zoo_cfg`]: reads `zoo.cfg` (and its TOML form) into a [`ServerConfig`].
//! - [`apache_import`]: an Apache ZooKeeper data dir (snapshot + txn logs) into a fresh zkit
//!   data dir (`zkit serve --import-apache`).
//! - [`storage`]: where txns become durable before replies leave: in memory, or with a data
//!   dir a write-ahead log with group commit, background snapshots and crash recovery.
//!
//! The server never panics on client input: a malformed frame or handshake closes that one
//! connection; a request whose body does not decode gets ZooKeeper's error code. Other sessions
//! are unaffected.
#![deny(missing_docs)]

mod admin_http;
pub mod apache_import;
pub mod config;
mod connection;
mod four_letter;
pub mod limits;
mod metrics;
mod pipeline;
pub mod server;
pub mod storage;

pub mod zoo_cfg;

pub use config::{FourLetterWhitelist, FsyncMode, ServerConfig};
pub use limits::Limits;
pub use server::Server;

/// Errors of starting or running a server.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Binding the listening socket failed.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: std::net::SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The storage failed to recover or persist state.
    #[error("storage: {0}")]
    Storage(#[from] std::io::Error),
    /// The configuration is inconsistent.
    #[error("invalid configuration: {0}")]
    Config(String),
}
