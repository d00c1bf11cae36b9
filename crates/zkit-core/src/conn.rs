//! Connections as the core sees them: an id the shell chose, the session attached to it, the
//! ids its auth packets added and its peer address. Runtime state only: none of it is logged,
//! snapshotted or replayed (a connection dies with the server, as in Apache).

use zkit_proto::Id;

/// A connection, named by the shell. Unique for the life of the server.
pub type ConnId = u64;

/// Per-connection state.
#[derive(Debug, Clone, Default)]
pub(crate) struct Conn {
    /// The attached session (None before the handshake or after close).
    pub(crate) session: Option<i64>,
    /// Timeout negotiated on this connection (Apache touches with the connection's timeout).
    pub(crate) timeout_ms: i32,
    /// Ids added by auth packets (digest, ip), in order, without duplicates.
    pub(crate) auth: Vec<Id>,
    /// The peer address, if the shell told us (`ip:<addr>` identity).
    pub(crate) peer_ip: Option<String>,
}
