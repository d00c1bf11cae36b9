//! The pure ZooKeeper server state machine: data tree, sessions, watches, request → txn → apply.
//!
//! No tokio, no `std::fs`, no `std::net`, no clocks: time is an argument (`now`, milliseconds
//! since the Unix epoch, supplied by the shell), and randomness (session passwords) is supplied
//! by the shell too. The shell drives it like raft-rs's `RawNode`:
//!
//! ```text
//! core.set_peer_ip(conn, "127.0.0.1".into());            // optional: ip identity (whoAmI)
//! core.connect(now, conn, connect_request, fresh_passwd); // handshake
//! core.handle(now, conn, xid, request);                   // a decoded request
//! core.tick(now);                                         // session expiry, container/TTL reaping
//! let ready = core.ready();                               // txns to log, messages, closes
//! wal.append(&ready.txns)?; wal.sync()?;                  // durable before any message is sent
//! send(ready.messages); close(ready.closes);              // in order
//! ```
//!
//! Every state change is a [`Txn`] applied by the one [`Core::apply`], used live and for
//! recovery (WAL replay). Requests are validated completely before anything changes. As in
//! Apache, a failed write is logged too (an error txn): it consumes a zxid and changes nothing
//! else. [`Core::snapshot`]/[`Core::restore`] checkpoint the state; [`Core::dump`] prints it.
//!
//! ZooKeeper 3.8 is the oracle, quirks included (each is commented where it is matched).
//!
//! # Layout
//! - [`path`]: `PathUtils.validatePath` and the parent/name split.
//! - [`tree`]: the data tree (compact shared node records, path index, interned ACLs), stats,
//!   ephemeral/container/TTL indexes, primitive mutations, copy-on-write captures.
//! - [`session`]: session ids, expiry rounding.
//! - [`watch`]: watch tables (one-shot, persistent, persistent-recursive).
//! - [`acl`]: ACL fix-up, digest ids, the permission check (ops and watch delivery).
//! - `prep`: request → [`TxnOp`] validation in Apache's check order, with a multi overlay.
//! - [`txn`]: [`Txn`]/[`TxnOp`] and their binary encoding.
//! - [`image`]: a core built from another server's persisted nodes and sessions (importing
//!   an Apache ZooKeeper data dir).
//! - `snapshot`: [`Core::snapshot_capture`] (cheap, then serialized off the caller's path),
//!   [`Core::snapshot`], [`Core::restore`], [`Core::dump`].
//! - `conn`: [`ConnId`] and what the core keeps per connection (session, auth ids, peer).
//! - `machine`: the `impl Core` blocks, one file per concern: `sessions` (handshake, expiry,
//!   disconnect), `reads`, `writes` (prep → txn, multi, failed writes), `watches` (addWatch,
//!   checkWatches, removeWatches, setWatches), `auth` (auth packets, sasl, whoAmI), `reaper`
//!   (containers and TTL nodes), `apply` (the one apply path and watch firing) and `snapshot`
//!   (capture, restore, dump). `machine/mod.rs` holds [`Core::handle`], a dispatch on the
//!   request type, and the helpers every file uses (replies, the live session).
//! - [`digest`]: Apache's tree digest (`DigestCalculator`), as the `hash` word reports it.
//! - this file: the public types ([`Core`], [`Config`], [`Outbound`], [`Ready`], [`Stats`]).
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod acl;
mod conn;
pub mod digest;
pub mod image;
mod machine;
pub mod path;
mod prep;
pub mod session;
mod snapshot;
pub mod tree;
pub mod txn;
pub mod watch;

use std::collections::BTreeMap;

use zkit_proto::{ConnectResponse, ReplyHeader, Response, WatcherEvent};

use crate::conn::Conn;
use crate::session::Session;
use crate::tree::DataTree;
use crate::watch::WatchTable;

pub use crate::conn::ConnId;
pub use crate::snapshot::{RestoreError, SnapshotCapture};
pub use crate::txn::{Txn, TxnOp};

/// Server settings the state machine needs.
#[derive(Debug, Clone)]
pub struct Config {
    /// tickTime in ms (default 2000). Session timeouts are clamped to [2, 20] ticks.
    pub tick_time_ms: u32,
    /// Override of the lower session-timeout bound (ms); `None` = 2 × tick.
    pub min_session_timeout_ms: Option<u32>,
    /// Override of the upper session-timeout bound (ms); `None` = 20 × tick.
    pub max_session_timeout_ms: Option<u32>,
    /// extendedTypesEnabled: TTL nodes allowed.
    pub extended_types: bool,
    /// znode.container.checkIntervalMs (default 60000).
    pub container_check_interval_ms: u64,
    /// Server id used in session-id generation (0 for standalone).
    pub server_id: u8,
    /// `zookeeper.DigestAuthenticationProvider.superDigest`: a digest id (`user:base64hash`,
    /// see [`acl::digest_id`]); a connection authenticating as it bypasses every ACL.
    pub super_digest: Option<String>,
    /// `X509AuthenticationProvider.superUser`: the `x509` id (a client certificate's subject,
    /// as the shell reports it) that bypasses every ACL, as `super` does.
    pub x509_super_user: Option<String>,
    /// Seed of the data tree's path hash (foldhash). The core is deterministic for a given
    /// seed, so tests and replays can fix it; a server draws it at random, as it draws session
    /// passwords, so that clients cannot choose paths that collide in the index (with a seed
    /// they know, a flood of crafted names would make every lookup a long probe).
    pub hash_seed: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            tick_time_ms: 2000,
            min_session_timeout_ms: None,
            max_session_timeout_ms: None,
            extended_types: false,
            container_check_interval_ms: 60_000,
            server_id: 0,
            super_digest: None,
            x509_super_user: None,
            hash_seed: 0,
        }
    }
}

/// One message the shell must write to a connection, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Outbound {
    /// The handshake reply. If `close_after` the shell closes the connection after sending it
    /// (expired/unknown session, bad password).
    Connect {
        /// The reply.
        response: ConnectResponse,
        /// Close the connection after sending.
        close_after: bool,
    },
    /// A reply: header, then `body` only when `header.err == 0`.
    Reply {
        /// Header.
        header: ReplyHeader,
        /// Body (ignored unless err == 0).
        body: Response,
    },
    /// A watch notification (xid -1), sent before the reply of the write that caused it.
    Event {
        /// zxid to put in the header (-1, as ZooKeeper up to 3.8).
        zxid: i64,
        /// The event.
        event: WatcherEvent,
    },
    /// Close the connection after everything before it is written (closeSession, AuthFailed).
    Close,
}

/// What the shell must do after feeding the core: persist `txns`, then write `messages`.
#[derive(Debug, Default)]
pub struct Ready {
    /// Txns to make durable before any of `messages` is sent. Already applied in memory.
    pub txns: Vec<Txn>,
    /// Messages per connection, in the order they must leave.
    pub messages: Vec<(ConnId, Outbound)>,
}

/// Counters for four-letter words and metrics.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    /// Number of znodes including the special ones, counted as Apache does (its root is
    /// stored under both "" and "/", so a fresh server reports 5).
    pub node_count: u64,
    /// Sum of path and data lengths (Apache's `approximateDataSize`).
    pub approximate_data_size: u64,
    /// Live sessions.
    pub sessions: u64,
    /// Ephemeral nodes.
    pub ephemerals: u64,
    /// Watch registrations (one-shot + persistent).
    pub watches: u64,
    /// Distinct watched paths.
    pub watched_paths: u64,
    /// Last applied zxid.
    pub last_zxid: i64,
}

/// The state machine.
#[derive(Debug)]
pub struct Core {
    config: Config,
    tree: DataTree,
    sessions: BTreeMap<i64, Session>,
    conns: BTreeMap<ConnId, Conn>,
    data_watches: WatchTable,
    child_watches: WatchTable,
    last_zxid: i64,
    next_session_id: i64,
    next_reap: i64,
    out: Ready,
}
