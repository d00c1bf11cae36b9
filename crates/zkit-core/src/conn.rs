//! Connections as the core sees them: an id the shell chose, the session attached to it, the
//! ids its auth packets added and its peer address. Runtime state only: none of it is logged,
//! snapshotted or replayed (a connection dies with the server, as in Apache).

use std::collections::BTreeSet;
use std::sync::Arc;

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
    auth: Vec<Id>,
    /// The peer address, if the shell told us (`ip:<addr>` identity).
    peer_ip: Option<String>,
    /// Everything the connection is authenticated as (see [`Conn::identities`]), computed
    /// when `auth` or `peer_ip` change rather than for every request and every watch event.
    identities: Arc<[Id]>,
}

impl Conn {
    /// The ids auth packets (and a TLS client certificate) added, in order.
    pub(crate) fn auth(&self) -> &[Id] {
        &self.auth
    }

    /// The peer address the shell gave, if any.
    pub(crate) fn peer_ip(&self) -> Option<&str> {
        self.peer_ip.as_deref()
    }

    /// Adds `id` unless the connection already has it.
    pub(crate) fn add_auth(&mut self, id: Id) {
        if !self.auth.contains(&id) {
            self.auth.push(id);
            self.refresh();
        }
    }

    /// Sets the peer address (the `ip:<addr>` identity).
    pub(crate) fn set_peer_ip(&mut self, ip: String) {
        self.peer_ip = Some(ip);
        self.refresh();
    }

    /// Everything the connection is authenticated as: its `ip:<addr>` and the auth-packet ids,
    /// without duplicates, sorted by (scheme, id). Apache keeps them in a hash set, so its
    /// order is unspecified; sorting matches what a 3.8 server was seen to return for whoAmI
    /// (digest ids before ip). Shared, so a request's ACL check does not copy it.
    pub(crate) fn identities(&self) -> Arc<[Id]> {
        Arc::clone(&self.identities)
    }

    fn refresh(&mut self) {
        let mut ids: BTreeSet<Id> = self.auth.iter().cloned().collect();
        if let Some(ip) = &self.peer_ip {
            ids.insert(Id {
                scheme: "ip".into(),
                id: ip.clone(),
            });
        }
        self.identities = ids.into_iter().collect();
    }
}
