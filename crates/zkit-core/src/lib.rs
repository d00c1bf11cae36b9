//! The pure ZooKeeper server state machine: data tree, sessions, watches, request → txn → apply.
//!
//! No tokio, no `std::fs`, no `std::net`, no clocks: time is an argument (`now`, milliseconds
//! since the Unix epoch, supplied by the shell), and randomness (session passwords) is supplied
//! by the shell too. The shell drives it like raft-rs's `RawNode`:
//!
//! ```text
//! core.connect(now, conn, connect_request, fresh_passwd); // handshake
//! core.handle(now, conn, xid, request);                   // a decoded request
//! core.tick(now);                                         // session expiry, container/TTL reaping
//! let ready = core.ready();                               // txns to log, messages, closes
//! wal.append(&ready.txns)?; wal.sync()?;                  // durable before any message is sent
//! send(ready.messages); close(ready.closes);              // in order
//! ```
//!
//! Every state change is a [`Txn`] applied by the one [`Core::apply`], used live and for
//! recovery (WAL replay). Requests are validated completely before anything changes.
//!
//! # Layout
//! (filled in by the implementation: tree, session, watch, prep, apply, txn modules.)
#![forbid(unsafe_code)]
#![deny(missing_docs)]

use zkit_proto::{ConnectRequest, ConnectResponse, ReplyHeader, Response, Request, WatcherEvent};

/// A connection, named by the shell. Unique for the life of the server.
pub type ConnId = u64;

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
    /// Number of znodes including the special ones.
    pub node_count: u64,
    /// Sum of data lengths.
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

/// A state change, as logged in the WAL and replayed through [`Core::apply`].
///
/// The concrete operation set and its binary encoding (`Txn::encode`/`Txn::decode`, using the
/// jute codec) are defined by the implementation.
#[derive(Debug, Clone, PartialEq)]
pub struct Txn {
    /// The zxid this txn creates.
    pub zxid: i64,
    /// Session that caused it (0 for internal txns such as reaping).
    pub session: i64,
    /// Time (ms since epoch) of the request; becomes ctime/mtime.
    pub time: i64,
    /// What it does.
    pub op: TxnOp,
}

/// The operation of a [`Txn`]. Filled in by the implementation.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum TxnOp {
    /// A new session.
    CreateSession {
        /// Negotiated timeout (ms).
        timeout_ms: i32,
        /// Password.
        passwd: Vec<u8>,
    },
    /// Session closed or expired; its ephemerals are deleted in the same txn.
    CloseSession,
}

/// The state machine.
#[derive(Debug)]
pub struct Core {
    _private: (),
}

impl Core {
    /// A fresh server state at `now` (ms since epoch; seeds session-id generation).
    pub fn new(_config: Config, _now: i64) -> Core {
        todo!()
    }

    /// A handshake arrived on `conn`. `fresh_passwd` is 16 random bytes the shell drew, used if
    /// a new session is created. The reply comes out of [`Core::ready`] (after the session's txn).
    pub fn connect(&mut self, _now: i64, _conn: ConnId, _req: ConnectRequest, _fresh_passwd: [u8; 16]) {
        todo!()
    }

    /// A decoded request on an established connection.
    pub fn handle(&mut self, _now: i64, _conn: ConnId, _xid: i32, _req: Request) {
        todo!()
    }

    /// A request whose op code is unknown or whose body did not decode: answered with the
    /// given error code (ZooKeeper answers Unimplemented / MarshallingError...).
    pub fn reject(&mut self, _now: i64, _conn: ConnId, _xid: i32, _err: zkit_proto::ErrorCode) {
        todo!()
    }

    /// The connection closed (by the client or the shell). Its watches die; its session lives on
    /// until it expires or a new connection reattaches to it.
    pub fn disconnect(&mut self, _now: i64, _conn: ConnId) {
        todo!()
    }

    /// Time passes: expire sessions, run the container/TTL reaper when due.
    pub fn tick(&mut self, _now: i64) {
        todo!()
    }

    /// Takes what the shell must do now.
    pub fn ready(&mut self) -> Ready {
        todo!()
    }

    /// Applies a txn (recovery: WAL replay). Live traffic goes through the same function.
    pub fn apply(&mut self, _txn: &Txn) {
        todo!()
    }

    /// Counters.
    pub fn stats(&self) -> Stats {
        todo!()
    }
}
