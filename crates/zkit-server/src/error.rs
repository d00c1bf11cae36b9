//! [`Error`]: why a server could not start or stopped.

use crate::storage::error::StorageError;

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
    /// Binding one of the other listening sockets failed: the admin endpoint or the secure
    /// client port, named so that the message says which port is taken.
    #[error("cannot listen on the {what} {addr}: {source}")]
    BindPort {
        /// Which port: "admin port", "secure client port".
        what: &'static str,
        /// The address asked for.
        addr: std::net::SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The storage failed to recover or persist state.
    #[error("storage: {0}")]
    Storage(#[from] StorageError),
    /// The configuration is inconsistent.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The TLS settings cannot be used (unreadable or malformed key material, a policy rustls
    /// cannot honour); the server does not start rather than serve without them.
    #[error("TLS: {0}")]
    Tls(String),
}
