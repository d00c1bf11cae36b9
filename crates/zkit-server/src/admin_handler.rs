//! The hook of the HTTP admin endpoint: [`AdminHandler`] serves the paths zkit-server does not
//! serve itself, with [`AdminBody`] responses. A leaf: the configuration names it and the
//! endpoint (`admin_http`) calls it.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;

use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;
use hyper::body::Incoming;
use hyper::{Request, Response};

/// The body of an admin response: a whole buffer, or a stream (server-sent events).
pub type AdminBody = UnsyncBoxBody<Bytes, Infallible>;

/// Serves the admin paths zkit-server does not serve itself (everything but `/metrics`,
/// `/commands` and `/commands/<name>`), for any method: set it in
/// [`crate::ServerConfig::admin_extra`]. zkit-server knows nothing of what it serves.
pub trait AdminHandler: Send + Sync + std::fmt::Debug {
    /// Answers one request. Called on the admin connection's task; it may take its time
    /// (a long-lived stream is fine: the connection ends when the server shuts down).
    fn handle(
        &self,
        req: Request<Incoming>,
    ) -> Pin<Box<dyn Future<Output = Response<AdminBody>> + Send>>;
}
