//! What zkit-core's examples and benchmarks share: a fixed clock, one connection, and requests
//! and a core built the way the server's pipeline builds them.

// Each example and benchmark uses part of this.
#![allow(dead_code)]

use zkit_core::tree::open_acl;
use zkit_core::{Config, ConnId, Core};
use zkit_proto::op::create_mode;
use zkit_proto::{ConnectRequest, CreateRequest, Request};

/// The core's `now` throughout (ms since the epoch).
pub const NOW: i64 = 1_700_000_000_000;
/// The one connection.
pub const CONN: ConnId = 1;

/// A create2 of a persistent node of 100 bytes, open to all.
pub fn create(path: String) -> Request {
    Request::Create2(CreateRequest {
        path,
        data: Some(vec![b'x'; 100]),
        acl: open_acl(),
        flags: create_mode::PERSISTENT,
    })
}

/// A core with one connected session and the node `parent` (for the nodes to go under).
pub fn session_core(parent: &str) -> Core {
    let mut core = Core::new(Config::default(), NOW);
    core.connect(NOW, CONN, ConnectRequest::new_session(30_000), [7; 16]);
    core.handle(NOW, CONN, 1, create(parent.into()));
    core.ready();
    core
}
