//! [`Error`]: one flat enum for everything a client call can fail with — ZooKeeper's own codes
//! (`KeeperException.Code`, one variant each), the client's own conditions (connection lost,
//! timed out, closed, bad arguments, a reply that does not decode) — and the two predicates
//! callers decide on: [`Error::is_retryable`] and [`Error::is_session_ending`].
//!
//! Multi errors by position live in [`crate::MultiWriteError`], which flattens into this enum.

use std::borrow::Cow;

use zkit_proto::ErrorCode;

/// The result type of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a ZooKeeper operation failed.
///
/// The variants named after ZooKeeper codes mean what the server's code means; the others are
/// raised by the client itself (documented on each).
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    // ---- ZooKeeper codes (KeeperException.Code), in code order -----------------------------
    /// SystemError (-1).
    #[error("system error")]
    SystemError,
    /// RuntimeInconsistency (-2): what a multi answers for the operations after the failing
    /// one.
    #[error("runtime condition mismatch")]
    RuntimeInconsistent,
    /// DataInconsistency (-3).
    #[error("data inconsistency")]
    DataInconsistency,
    /// ConnectionLoss (-4): the connection the request was sent on (or was waiting for) was
    /// lost before its reply came. The operation may or may not have been applied; the session
    /// may still live.
    #[error("connection to server has lost")]
    ConnectionLoss,
    /// MarshallingError (-5): the server could not decode the request.
    #[error("server fail to marshal client request")]
    MarshallingError,
    /// Unimplemented (-6): e.g. a TTL node on a server without `extendedTypesEnabled`.
    #[error("unimplemented operation")]
    Unimplemented,
    /// OperationTimeout (-7).
    #[error("operation timeout")]
    OperationTimeout,
    /// BadArguments (-8), from the server, or raised by the client before sending (invalid
    /// path, bad option); the text says which.
    #[error("bad arguments: {0}")]
    BadArguments(Cow<'static, str>),
    /// UnknownSession (-12).
    #[error("unknown session")]
    UnknownSession,
    /// NewConfigNoQuorum (-13).
    #[error("new config has no quorum")]
    NewConfigNoQuorum,
    /// ReconfigInProgress (-14).
    #[error("reconfig in progress")]
    ReconfigInProgress,
    /// APIError (-100).
    #[error("API error")]
    ApiError,
    /// NoNode (-101).
    #[error("node not exists")]
    NoNode,
    /// NoAuth (-102).
    #[error("not authorized")]
    NoAuth,
    /// BadVersion (-103).
    #[error("mismatch version")]
    BadVersion,
    /// NoChildrenForEphemerals (-108).
    #[error("ephemeral node can not have children")]
    NoChildrenForEphemerals,
    /// NodeExists (-110).
    #[error("node already exists")]
    NodeExists,
    /// NotEmpty (-111).
    #[error("node has not empty children")]
    NotEmpty,
    /// SessionExpired (-112): the server expired the session; this client is dead.
    #[error("session expired")]
    SessionExpired,
    /// InvalidCallback (-113).
    #[error("invalid callback")]
    InvalidCallback,
    /// InvalidACL (-114), from the server, or an empty ACL list refused by the client.
    #[error("invalid acls")]
    InvalidAcl,
    /// AuthFailed (-115): the server refused an `auth` packet; this client is dead.
    #[error("authentication failed")]
    AuthFailed,
    /// SessionMoved (-118).
    #[error("session moved")]
    SessionMoved,
    /// NotReadOnly (-119): a write sent to a read-only server.
    #[error("write request is sent to read only server")]
    NotReadOnly,
    /// EphemeralOnLocalSession (-120).
    #[error("ephemeral node on local session")]
    EphemeralOnLocalSession,
    /// NoWatcher (-121): no such watch (removeWatches/checkWatches).
    #[error("no watcher")]
    NoWatcher,
    /// RequestTimeout (-122).
    #[error("request timeout")]
    RequestTimeout,
    /// ReconfigDisabled (-123).
    #[error("ZooKeeper reconfiguration disabled")]
    ReconfigDisabled,
    /// SessionClosedRequireSaslAuth (-124).
    #[error("session closed because client failed to authenticate")]
    SessionClosedRequireSaslAuth,
    /// QuotaExceeded (-125).
    #[error("exceed path quota")]
    QuotaExceeded,
    /// ThrottledOp (-127).
    #[error("request was throttled due to server heavy loading")]
    Throttled,
    /// A code this client does not know.
    #[error("unexpected error code: {0}")]
    UnexpectedErrorCode(i32),

    // ---- raised by the client ---------------------------------------------------------------
    /// [`crate::Connector::connect`] found no session within the session timeout.
    #[error("timeout")]
    Timeout,
    /// [`crate::Connector::with_fail_eagerly`]: every host was tried once and none answered.
    #[error("no available hosts")]
    NoHosts,
    /// The client was closed ([`crate::Client::close`], or every handle dropped).
    #[error("client has been closed")]
    ClientClosed,
    /// The server answered something this client cannot decode (the connection is dropped
    /// and re-established when it happens on a live connection).
    #[error("unexpected error: {0}")]
    UnexpectedError(String),
}

impl Error {
    /// The error for a server code (`None` for 0, which is not an error).
    pub fn from_code(code: i32) -> Option<Error> {
        let Some(known) = ErrorCode::from_i32(code) else {
            return Some(Error::UnexpectedErrorCode(code));
        };
        Some(match known {
            ErrorCode::Ok => return None,
            ErrorCode::SystemError => Error::SystemError,
            ErrorCode::RuntimeInconsistency => Error::RuntimeInconsistent,
            ErrorCode::DataInconsistency => Error::DataInconsistency,
            ErrorCode::ConnectionLoss => Error::ConnectionLoss,
            ErrorCode::MarshallingError => Error::MarshallingError,
            ErrorCode::Unimplemented => Error::Unimplemented,
            ErrorCode::OperationTimeout => Error::OperationTimeout,
            ErrorCode::BadArguments => Error::BadArguments(Cow::Borrowed("rejected by the server")),
            ErrorCode::UnknownSession => Error::UnknownSession,
            ErrorCode::NewConfigNoQuorum => Error::NewConfigNoQuorum,
            ErrorCode::ReconfigInProgress => Error::ReconfigInProgress,
            ErrorCode::ApiError => Error::ApiError,
            ErrorCode::NoNode => Error::NoNode,
            ErrorCode::NoAuth => Error::NoAuth,
            ErrorCode::BadVersion => Error::BadVersion,
            ErrorCode::NoChildrenForEphemerals => Error::NoChildrenForEphemerals,
            ErrorCode::NodeExists => Error::NodeExists,
            ErrorCode::NotEmpty => Error::NotEmpty,
            ErrorCode::SessionExpired => Error::SessionExpired,
            ErrorCode::InvalidCallback => Error::InvalidCallback,
            ErrorCode::InvalidAcl => Error::InvalidAcl,
            ErrorCode::AuthFailed => Error::AuthFailed,
            ErrorCode::SessionMoved => Error::SessionMoved,
            ErrorCode::NotReadOnly => Error::NotReadOnly,
            ErrorCode::EphemeralOnLocalSession => Error::EphemeralOnLocalSession,
            ErrorCode::NoWatcher => Error::NoWatcher,
            ErrorCode::RequestTimeout => Error::RequestTimeout,
            ErrorCode::ReconfigDisabled => Error::ReconfigDisabled,
            ErrorCode::SessionClosedRequireSaslAuth => Error::SessionClosedRequireSaslAuth,
            ErrorCode::QuotaExceeded => Error::QuotaExceeded,
            ErrorCode::ThrottledOp => Error::Throttled,
        })
    }

    /// The ZooKeeper code this error stands for; `None` for errors only the client raises
    /// (a client-side [`Error::BadArguments`] reports the code too).
    pub fn code(&self) -> Option<i32> {
        Some(match self {
            Error::SystemError => -1,
            Error::RuntimeInconsistent => -2,
            Error::DataInconsistency => -3,
            Error::ConnectionLoss => -4,
            Error::MarshallingError => -5,
            Error::Unimplemented => -6,
            Error::OperationTimeout => -7,
            Error::BadArguments(_) => -8,
            Error::UnknownSession => -12,
            Error::NewConfigNoQuorum => -13,
            Error::ReconfigInProgress => -14,
            Error::ApiError => -100,
            Error::NoNode => -101,
            Error::NoAuth => -102,
            Error::BadVersion => -103,
            Error::NoChildrenForEphemerals => -108,
            Error::NodeExists => -110,
            Error::NotEmpty => -111,
            Error::SessionExpired => -112,
            Error::InvalidCallback => -113,
            Error::InvalidAcl => -114,
            Error::AuthFailed => -115,
            Error::SessionMoved => -118,
            Error::NotReadOnly => -119,
            Error::EphemeralOnLocalSession => -120,
            Error::NoWatcher => -121,
            Error::RequestTimeout => -122,
            Error::ReconfigDisabled => -123,
            Error::SessionClosedRequireSaslAuth => -124,
            Error::QuotaExceeded => -125,
            Error::Throttled => -127,
            Error::UnexpectedErrorCode(code) => *code,
            Error::Timeout | Error::NoHosts | Error::ClientClosed | Error::UnexpectedError(_) => {
                return None
            }
        })
    }

    /// True when the *same* call may be retried on the *same* client: the connection was lost
    /// or the server was busy ([`Error::ConnectionLoss`], [`Error::OperationTimeout`],
    /// [`Error::RequestTimeout`], [`Error::Throttled`]) — the session may well live on. Only
    /// idempotent calls should be retried blindly: after a `ConnectionLoss` a create may have
    /// been applied.
    #[doc(alias = "is_recoverable")]
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Error::ConnectionLoss
                | Error::OperationTimeout
                | Error::RequestTimeout
                | Error::Throttled
        )
    }

    /// True when the client is dead and only a new session helps: [`Error::SessionExpired`],
    /// [`Error::AuthFailed`], [`Error::ClientClosed`], [`Error::SessionClosedRequireSaslAuth`],
    /// and [`Error::NoHosts`] / [`Error::Timeout`] from connecting.
    #[doc(alias = "is_terminated")]
    pub fn is_session_ending(&self) -> bool {
        matches!(
            self,
            Error::SessionExpired
                | Error::AuthFailed
                | Error::ClientClosed
                | Error::SessionClosedRequireSaslAuth
                | Error::NoHosts
                | Error::Timeout
        )
    }

    pub(crate) fn bad_arguments(what: &'static str) -> Error {
        Error::BadArguments(Cow::Borrowed(what))
    }

    pub(crate) fn unexpected(what: impl std::fmt::Display) -> Error {
        Error::UnexpectedError(what.to_string())
    }
}

impl From<zkit_proto::DecodeError> for Error {
    fn from(err: zkit_proto::DecodeError) -> Error {
        Error::UnexpectedError(format!("malformed reply: {err}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_zookeeper_code_maps_and_back() {
        for code in ErrorCode::ALL {
            let Some(err) = Error::from_code(code.code()) else {
                assert_eq!(code, ErrorCode::Ok);
                continue;
            };
            assert_eq!(err.code(), Some(code.code()), "{err:?}");
            assert!(
                !matches!(err, Error::UnexpectedErrorCode(_)),
                "{code:?} has no variant"
            );
        }
        assert_eq!(
            Error::from_code(-109),
            Some(Error::UnexpectedErrorCode(-109))
        );
        assert_eq!(Error::from_code(0), None);
    }

    #[test]
    fn predicates() {
        assert!(Error::ConnectionLoss.is_retryable());
        assert!(Error::Throttled.is_retryable());
        assert!(!Error::NoNode.is_retryable());
        assert!(!Error::SessionExpired.is_retryable());
        assert!(Error::SessionExpired.is_session_ending());
        assert!(Error::AuthFailed.is_session_ending());
        assert!(Error::ClientClosed.is_session_ending());
        assert!(!Error::ConnectionLoss.is_session_ending());
        assert!(!Error::NodeExists.is_session_ending());
    }
}
