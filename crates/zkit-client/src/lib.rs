//! An async ZooKeeper client for tokio, on zkit's own jute codec (`zkit-proto`, the one
//! `zkit-server` uses), as Apache ZooKeeper's client and server share one jute.
//!
//! ```no_run
//! # async fn demo() -> zkit_client::Result<()> {
//! use zkit_client::{Acls, Client, CreateMode};
//! let client = Client::connect("127.0.0.1:2181,127.0.0.1:2182/app").await?;
//! let options = CreateMode::Ephemeral.with_acls(Acls::anyone_all());
//! client.create("/worker", b"up", &options).await?;
//! let (data, stat, watcher) = client.get_and_watch_data("/worker").await?;
//! client.set_data("/worker", b"busy", Some(stat.version)).await?;
//! let event = watcher.changed().await; // NodeDataChanged /worker
//! # let _ = (data, event); Ok(()) }
//! ```
//!
//! The API is zookeeper-client 0.11's (kezhuw/zookeeper-client-rust), so code written for it
//! mostly needs `use zkit_client as zk;`; see the crate README for the differences.
//!
//! # Layout
//! - [`client`](Client): every operation. Each method validates and *sends* its request when
//!   called and returns a `'static` future of the reply: requests are pipelined in call order.
//! - `connector`: [`Connector`], the options, and `connect`.
//! - `session`: the one task per client that owns the connection: connecting (hosts
//!   round-robin, session create/re-attach, read-only mode), pipelining with replies matched in
//!   xid order, pings and the read timeout, watch re-registration (SetWatches2) on reconnect,
//!   expiry. The timing rules are in `timing`, the host order in `hosts`, the socket and its
//!   buffers in `transport`.
//! - `watch`: the watch registrations as Apache's `ZKWatchManager` keeps them (pure);
//!   `watcher`: what callers hold ([`OneshotWatcher`], [`PersistentWatcher`],
//!   [`StateWatcher`]).
//! - `multi`: [`MultiWriter`] and [`MultiReader`].
//! - [`Error`], `types` (sessions, events, create options), `acl`, `path` (validation, chroot).
//! - `tls` (feature `tls`): [`TlsOptions`], rustls with PEM keys, certificates and CAs.
//!
//! # Feature flags
//! - `tls`: TLS connections ([`Connector::with_tls`], `tcp+tls://` hosts).
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod acl;
mod client;
mod connector;
mod error;
mod hosts;
mod multi;
mod path;
mod session;
mod timing;
#[cfg(feature = "tls")]
mod tls;
mod transport;
mod types;
mod watch;
mod watcher;

pub use acl::{Acl, Acls, AuthId, AuthUser, Permission};
pub use client::Client;
pub use connector::Connector;
pub use error::{Error, Result};
pub use hosts::DEFAULT_PORT;
pub use multi::{MultiReadResult, MultiReader, MultiWriteError, MultiWriteResult, MultiWriter};
pub use path::validate_path;
#[cfg(feature = "tls")]
pub use tls::TlsOptions;
pub use types::{
    AddWatchMode, CreateMode, CreateOptions, CreateSequence, EventType, SessionId, SessionInfo,
    SessionState, WatchType, WatchedEvent, MAX_TTL,
};
pub use watcher::{OneshotWatcher, PersistentWatcher, StateWatcher};
/// Node metadata, zkit-proto's record (the same fields as zookeeper-client's `Stat`).
pub use zkit_proto::Stat;
