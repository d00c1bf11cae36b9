//! The library's error type and its three-way classification: *recoverable* errors
//! (the operation may be retried as is), *state* errors (the tree is not in the state the caller
//! assumed; retrying the same call gives the same answer) and *unrecoverable* errors (the session
//! or the client is gone; only a new session helps).
//!
//! It must not hide the underlying ZooKeeper code: every `zookeeper_client::Error` maps to a
//! variant with the same meaning, and the rare ones are kept verbatim in [`Error::Other`].

use std::time::Duration;

/// Errors of the zkit library.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// The connection to the server was lost before the reply came; the operation may or may not
    /// have been applied. Recoverable.
    #[error("connection to the server lost")]
    ConnectionLoss,
    /// The connection failed under the request (I/O error, no response within the connection
    /// timeout); `zookeeper_client` reports these as custom errors. Recoverable, with the same
    /// uncertainty as `ConnectionLoss`.
    #[error("connection failed: {0}")]
    ConnectionFailed(String),
    /// The operation got no reply in time. Recoverable (same uncertainty as `ConnectionLoss`).
    #[error("operation timed out")]
    OperationTimeout,
    /// The server is overloaded and throttled the request. Recoverable.
    #[error("request throttled by the server")]
    Throttled,

    /// The server expired the session: its ephemeral nodes and watches are gone. Unrecoverable.
    #[error("session expired")]
    SessionExpired,
    /// The session layer declared the session lost (no reconnect within the session timeout,
    /// measured locally, or expired) while the operation was in progress. Unrecoverable for the
    /// operation; the session layer builds a new session by itself.
    #[error("session lost")]
    SessionLost,
    /// Authentication failed. Unrecoverable.
    #[error("authentication failed")]
    AuthFailed,
    /// The session (or client) has been closed. Unrecoverable.
    #[error("session closed")]
    Closed,

    /// The node does not exist. State error.
    #[error("node does not exist")]
    NoNode,
    /// The node already exists. State error.
    #[error("node already exists")]
    NodeExists,
    /// The node's version is not the expected one. State error.
    #[error("version mismatch")]
    BadVersion,
    /// The node has children. State error.
    #[error("node has children")]
    NotEmpty,
    /// Ephemeral nodes cannot have children. State error.
    #[error("ephemeral nodes cannot have children")]
    NoChildrenForEphemerals,
    /// The caller is not allowed to do this (ACL). State error.
    #[error("not authorized")]
    NoAuth,
    /// The ACL is invalid. State error.
    #[error("invalid ACL")]
    InvalidAcl,

    /// The server does not implement the operation (e.g. TTL nodes on a server started without
    /// `zookeeper.extendedTypesEnabled=true`).
    #[error("operation not implemented by the server: {0}")]
    Unimplemented(String),
    /// A lock or other wait did not complete within the given time.
    #[error("timed out after {0:?}")]
    Timeout(Duration),
    /// A lock that was held has been lost (session lost, node deleted, or lease ran out).
    #[error("lock lost: {0}")]
    LockLost(String),
    /// The arguments are invalid (bad path, bad option).
    #[error("bad arguments: {0}")]
    BadArguments(String),
    /// The server or the tree answered something the recipe cannot make sense of.
    #[error("unexpected: {0}")]
    Unexpected(String),
    /// A typed node holds a value of another schema (name or version) than the reader's
    /// ([`crate::model::Model`]).
    #[error("schema mismatch at {path}: expected {expected}, found {found}")]
    SchemaMismatch {
        /// The node.
        path: String,
        /// The reader's schema, `name v<version>`.
        expected: String,
        /// What the node holds (`name v<version>`, or `no schema`).
        found: String,
    },
    /// Any other `zookeeper_client` error, kept verbatim.
    #[error(transparent)]
    Other(zookeeper_client::Error),
}

impl Error {
    /// True for errors after which the *same* operation may be retried on the same session:
    /// [`Error::ConnectionLoss`], [`Error::ConnectionFailed`], [`Error::OperationTimeout`],
    /// [`Error::Throttled`].
    ///
    /// Only idempotent operations should be retried blindly; a sequential create needs
    /// [`crate::Session::create_protected_sequential`].
    pub fn is_recoverable(&self) -> bool {
        matches!(
            self,
            Error::ConnectionLoss
                | Error::ConnectionFailed(_)
                | Error::OperationTimeout
                | Error::Throttled
        )
    }

    /// True for errors that describe the tree, not the connection: retrying the same call gives
    /// the same answer until someone changes the tree ([`Error::BadVersion`], [`Error::NodeExists`],
    /// [`Error::NoNode`], [`Error::NotEmpty`], ...).
    pub fn is_state(&self) -> bool {
        matches!(
            self,
            Error::NoNode
                | Error::NodeExists
                | Error::BadVersion
                | Error::NotEmpty
                | Error::NoChildrenForEphemerals
                | Error::NoAuth
                | Error::InvalidAcl
        )
    }

    /// True for errors after which the session (or the whole client) is gone: session expired or
    /// lost, authentication failed, closed.
    pub fn is_unrecoverable(&self) -> bool {
        matches!(
            self,
            Error::SessionExpired | Error::SessionLost | Error::AuthFailed | Error::Closed
        )
    }
}

impl From<zookeeper_client::Error> for Error {
    fn from(err: zookeeper_client::Error) -> Self {
        use zookeeper_client::Error as Zk;
        match err {
            Zk::ConnectionLoss => Error::ConnectionLoss,
            Zk::Timeout => Error::OperationTimeout,
            Zk::Throttled => Error::Throttled,
            Zk::SessionExpired => Error::SessionExpired,
            Zk::AuthFailed => Error::AuthFailed,
            Zk::ClientClosed => Error::Closed,
            Zk::NoNode => Error::NoNode,
            Zk::NodeExists => Error::NodeExists,
            Zk::BadVersion => Error::BadVersion,
            Zk::NotEmpty => Error::NotEmpty,
            Zk::NoChildrenForEphemerals => Error::NoChildrenForEphemerals,
            Zk::NoAuth => Error::NoAuth,
            Zk::InvalidAcl => Error::InvalidAcl,
            Zk::Unimplemented => Error::Unimplemented("server answered UNIMPLEMENTED".into()),
            Zk::BadArguments(what) => Error::BadArguments((*what).to_string()),
            // Connection-level failures (I/O errors, "no response from connection in N ms")
            // fail in-flight requests as custom errors.
            Zk::Custom(custom) => Error::ConnectionFailed(custom.to_string()),
            other => Error::Other(other),
        }
    }
}

/// The library's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification_is_disjoint_and_maps_zookeeper_codes() {
        let cases: Vec<(zookeeper_client::Error, Error)> = vec![
            (
                zookeeper_client::Error::ConnectionLoss,
                Error::ConnectionLoss,
            ),
            (zookeeper_client::Error::Timeout, Error::OperationTimeout),
            (
                zookeeper_client::Error::SessionExpired,
                Error::SessionExpired,
            ),
            (zookeeper_client::Error::AuthFailed, Error::AuthFailed),
            (zookeeper_client::Error::ClientClosed, Error::Closed),
            (zookeeper_client::Error::BadVersion, Error::BadVersion),
            (zookeeper_client::Error::NodeExists, Error::NodeExists),
            (zookeeper_client::Error::NoNode, Error::NoNode),
            (zookeeper_client::Error::NotEmpty, Error::NotEmpty),
        ];
        for (zk, ours) in cases {
            let mapped = Error::from(zk);
            assert_eq!(mapped, ours);
            let classes = [
                mapped.is_recoverable(),
                mapped.is_state(),
                mapped.is_unrecoverable(),
            ];
            assert_eq!(classes.iter().filter(|c| **c).count(), 1, "{mapped:?}");
        }
        assert!(Error::from(zookeeper_client::Error::ConnectionLoss).is_recoverable());
        assert!(Error::from(zookeeper_client::Error::BadVersion).is_state());
        assert!(Error::from(zookeeper_client::Error::SessionExpired).is_unrecoverable());
        assert!(matches!(
            Error::from(zookeeper_client::Error::Unimplemented),
            Error::Unimplemented(_)
        ));
    }
}
