//! What connections (and the four-letter words, and the admin endpoint) send the pipeline:
//! [`ToCore`], one queue for everything that reads or changes the core, in order.

use std::time::Instant;

use tokio::sync::oneshot;
use zkit_core::{ConnId, Core, Stats};
use zkit_proto::{ConnectRequest, ErrorCode, Request};

use crate::outbox::OutboxSender;

/// What connections ask of the pipeline.
#[derive(Debug)]
pub(crate) enum ToCore {
    /// A connection exists; this is where its messages go.
    Open {
        conn: ConnId,
        peer: std::net::IpAddr,
        /// The subject of a verified TLS client certificate: the `x509` identity.
        x509: Option<String>,
        outbound: OutboxSender,
    },
    /// The handshake.
    Connect {
        conn: ConnId,
        request: ConnectRequest,
    },
    /// A decoded request.
    Request {
        conn: ConnId,
        xid: i32,
        request: Request,
        received: Instant,
    },
    /// A request the shell could not decode; answered with `err` (a write, by `op`, is
    /// logged as an error txn first, as Apache does).
    Reject {
        conn: ConnId,
        xid: i32,
        op: i32,
        err: ErrorCode,
        received: Instant,
    },
    /// The connection is gone.
    Closed { conn: ConnId },
    /// A snapshot of the core's counters (four-letter words).
    Stats { reply: oneshot::Sender<Stats> },
    /// A read-only look at the core between batches (four-letter words, admin endpoint): the
    /// closure answers through its own channel.
    Inspect(Inspection),
}

/// A closure run on the core by [`ToCore::Inspect`].
pub(crate) struct Inspection(pub Box<dyn FnOnce(&Core) + Send>);

impl std::fmt::Debug for Inspection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Inspection")
    }
}
