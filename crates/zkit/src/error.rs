//! The library's error type and its three-way classification: *recoverable* errors
//! (the operation may be retried as is), *state* errors (the tree is not in the state the caller
//! assumed; retrying the same call gives the same answer) and *unrecoverable* errors (the session
//! or the client is gone; only a new session helps).
//!
//! It must not hide the underlying ZooKeeper code: every [`zkit_client::Error`] maps to a
//! variant with the same meaning, and the codes no recipe acts on (`SessionMoved`,
//! `NotReadOnly`, `QuotaExceeded`, ...) are kept as the client reported them in
//! [`Error::Zookeeper`].

use std::time::Duration;

/// Errors of the zkit library.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// The connection to the server was lost before the reply came; the operation may or may not
    /// have been applied. Recoverable.
    #[error("connection to the server lost")]
    ConnectionLoss,
    /// The server answered `OperationTimeout`. Recoverable (same uncertainty as
    /// `ConnectionLoss`).
    #[error("operation timed out")]
    OperationTimeout,
    /// The server answered `RequestTimeout`. Recoverable (same uncertainty as `ConnectionLoss`).
    #[error("request timed out")]
    RequestTimeout,
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
    /// Connecting found no session within the session timeout (no server answered, or none
    /// accepted the session). Unrecoverable for this attempt.
    #[error("no session established within the session timeout")]
    ConnectTimeout,
    /// Connecting with `fail eagerly` tried every host once and none answered. Unrecoverable
    /// for this attempt.
    #[error("no server answered")]
    NoHosts,

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
    /// A ZooKeeper error no recipe acts on (`SessionMoved`, `NotReadOnly`, `QuotaExceeded`,
    /// `SystemError`, an unknown code, ...), exactly as the client reported it.
    #[error("zookeeper: {0}")]
    Zookeeper(zkit_client::Error),
}

impl Error {
    /// True for errors after which the *same* operation may be retried on the same session:
    /// [`Error::ConnectionLoss`], [`Error::OperationTimeout`], [`Error::RequestTimeout`],
    /// [`Error::Throttled`].
    ///
    /// Only idempotent operations should be retried blindly; a sequential create needs
    /// [`crate::Session::create_protected_sequential`].
    pub fn is_recoverable(&self) -> bool {
        match self {
            Error::ConnectionLoss
            | Error::OperationTimeout
            | Error::RequestTimeout
            | Error::Throttled => true,
            Error::Zookeeper(err) => err.is_retryable(),
            _ => false,
        }
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
    /// lost, authentication failed, closed, or no session could be established.
    pub fn is_unrecoverable(&self) -> bool {
        match self {
            Error::SessionExpired
            | Error::SessionLost
            | Error::AuthFailed
            | Error::Closed
            | Error::ConnectTimeout
            | Error::NoHosts => true,
            Error::Zookeeper(err) => err.is_session_ending(),
            _ => false,
        }
    }

    /// The ZooKeeper code (`KeeperException.Code`) this error stands for, when it is one;
    /// `None` for the library's and the client's own conditions.
    pub fn code(&self) -> Option<i32> {
        use zkit_client::Error as Zk;
        let client = match self {
            Error::ConnectionLoss => Zk::ConnectionLoss,
            Error::OperationTimeout => Zk::OperationTimeout,
            Error::RequestTimeout => Zk::RequestTimeout,
            Error::Throttled => Zk::Throttled,
            Error::SessionExpired => Zk::SessionExpired,
            Error::AuthFailed => Zk::AuthFailed,
            Error::NoNode => Zk::NoNode,
            Error::NodeExists => Zk::NodeExists,
            Error::BadVersion => Zk::BadVersion,
            Error::NotEmpty => Zk::NotEmpty,
            Error::NoChildrenForEphemerals => Zk::NoChildrenForEphemerals,
            Error::NoAuth => Zk::NoAuth,
            Error::InvalidAcl => Zk::InvalidAcl,
            Error::Unimplemented(_) => Zk::Unimplemented,
            Error::BadArguments(_) => Zk::BadArguments("".into()),
            Error::Zookeeper(err) => return err.code(),
            _ => return None,
        };
        client.code()
    }
}

impl From<zkit_client::Error> for Error {
    fn from(err: zkit_client::Error) -> Self {
        use zkit_client::Error as Zk;
        match err {
            Zk::ConnectionLoss => Error::ConnectionLoss,
            Zk::OperationTimeout => Error::OperationTimeout,
            Zk::RequestTimeout => Error::RequestTimeout,
            Zk::Throttled => Error::Throttled,
            Zk::SessionExpired => Error::SessionExpired,
            Zk::AuthFailed => Error::AuthFailed,
            Zk::ClientClosed => Error::Closed,
            Zk::Timeout => Error::ConnectTimeout,
            Zk::NoHosts => Error::NoHosts,
            Zk::NoNode => Error::NoNode,
            Zk::NodeExists => Error::NodeExists,
            Zk::BadVersion => Error::BadVersion,
            Zk::NotEmpty => Error::NotEmpty,
            Zk::NoChildrenForEphemerals => Error::NoChildrenForEphemerals,
            Zk::NoAuth => Error::NoAuth,
            Zk::InvalidAcl => Error::InvalidAcl,
            Zk::Unimplemented => Error::Unimplemented("server answered UNIMPLEMENTED".into()),
            Zk::BadArguments(what) => Error::BadArguments(what.into_owned()),
            Zk::UnexpectedError(what) => Error::Unexpected(what),
            other => Error::Zookeeper(other),
        }
    }
}

impl From<zkit_client::MultiWriteError> for Error {
    fn from(err: zkit_client::MultiWriteError) -> Self {
        Error::from(zkit_client::Error::from(err))
    }
}

/// The library's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;
    use zkit_client::Error as Zk;

    #[test]
    fn classification_is_disjoint_and_maps_zookeeper_codes() {
        let cases: Vec<(Zk, Error)> = vec![
            (Zk::ConnectionLoss, Error::ConnectionLoss),
            (Zk::OperationTimeout, Error::OperationTimeout),
            (Zk::RequestTimeout, Error::RequestTimeout),
            (Zk::Throttled, Error::Throttled),
            (Zk::SessionExpired, Error::SessionExpired),
            (Zk::AuthFailed, Error::AuthFailed),
            (Zk::ClientClosed, Error::Closed),
            (Zk::Timeout, Error::ConnectTimeout),
            (Zk::NoHosts, Error::NoHosts),
            (Zk::BadVersion, Error::BadVersion),
            (Zk::NodeExists, Error::NodeExists),
            (Zk::NoNode, Error::NoNode),
            (Zk::NotEmpty, Error::NotEmpty),
            (Zk::NoAuth, Error::NoAuth),
            (Zk::InvalidAcl, Error::InvalidAcl),
            (Zk::NoChildrenForEphemerals, Error::NoChildrenForEphemerals),
            (
                Zk::SessionClosedRequireSaslAuth,
                Error::Zookeeper(Zk::SessionClosedRequireSaslAuth),
            ),
        ];
        for (zk, ours) in cases {
            let mapped = Error::from(zk.clone());
            assert_eq!(mapped, ours);
            assert_eq!(mapped.code(), zk.code(), "{mapped:?}");
            let classes = [
                mapped.is_recoverable(),
                mapped.is_state(),
                mapped.is_unrecoverable(),
            ];
            assert_eq!(classes.iter().filter(|c| **c).count(), 1, "{mapped:?}");
            // The library's predicates agree with the client's.
            assert_eq!(mapped.is_recoverable(), zk.is_retryable(), "{mapped:?}");
            assert_eq!(
                mapped.is_unrecoverable(),
                zk.is_session_ending(),
                "{mapped:?}"
            );
        }
        assert!(matches!(
            Error::from(Zk::Unimplemented),
            Error::Unimplemented(_)
        ));
        assert_eq!(
            Error::from(Zk::BadArguments("empty path".into())),
            Error::BadArguments("empty path".into())
        );
        assert_eq!(
            Error::from(Zk::UnexpectedError("short reply".into())),
            Error::Unexpected("short reply".into())
        );
    }

    #[test]
    fn every_zookeeper_code_keeps_its_code() {
        // No code is lost on the way: each one the client knows comes out with the same
        // code, in a named variant or verbatim in `Zookeeper`.
        for code in -130..=0 {
            let Some(client) = Zk::from_code(code) else {
                continue;
            };
            let ours = Error::from(client.clone());
            assert_eq!(ours.code(), client.code(), "{client:?} -> {ours:?}");
        }
    }
}
