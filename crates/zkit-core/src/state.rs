//! The public types of the state machine: [`Core`] itself (its fields; the `impl Core` blocks
//! live in `machine`), [`Config`], [`Outbound`], [`Ready`] and [`Stats`].

use std::collections::BTreeMap;

use zkit_proto::{ConnectResponse, ReplyHeader, Response, WatcherEvent};

use crate::conn::{Conn, ConnId};
use crate::session::Session;
use crate::tree::DataTree;
use crate::txn::Txn;
use crate::watch::WatchTable;

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
    /// see [`crate::acl::digest_id`]); a connection authenticating as it bypasses every ACL.
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
    pub(crate) config: Config,
    pub(crate) tree: DataTree,
    pub(crate) sessions: BTreeMap<i64, Session>,
    pub(crate) conns: BTreeMap<ConnId, Conn>,
    pub(crate) data_watches: WatchTable,
    pub(crate) child_watches: WatchTable,
    pub(crate) last_zxid: i64,
    pub(crate) next_session_id: i64,
    pub(crate) next_reap: i64,
    pub(crate) out: Ready,
}
