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
