//! Op codes, error codes and the protocol's small constants (ZooDefs, KeeperException.Code).

/// Request op codes (`ZooDefs.OpCode`). There is no 10.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i32)]
#[allow(missing_docs)]
pub enum OpCode {
    Notification = 0,
    Create = 1,
    Delete = 2,
    Exists = 3,
    GetData = 4,
    SetData = 5,
    GetAcl = 6,
    SetAcl = 7,
    GetChildren = 8,
    Sync = 9,
    Ping = 11,
    GetChildren2 = 12,
    Check = 13,
    Multi = 14,
    Create2 = 15,
    Reconfig = 16,
    CheckWatches = 17,
    RemoveWatches = 18,
    CreateContainer = 19,
    DeleteContainer = 20,
    CreateTtl = 21,
    MultiRead = 22,
    Auth = 100,
    SetWatches = 101,
    Sasl = 102,
    GetEphemerals = 103,
    GetAllChildrenNumber = 104,
    SetWatches2 = 105,
    AddWatch = 106,
    WhoAmI = 107,
    CreateSession = -10,
    CloseSession = -11,
    Error = -1,
}

/// `KeeperException.Code`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i32)]
#[allow(missing_docs)]
pub enum ErrorCode {
    Ok = 0,
    SystemError = -1,
    RuntimeInconsistency = -2,
    DataInconsistency = -3,
    ConnectionLoss = -4,
    MarshallingError = -5,
    Unimplemented = -6,
    OperationTimeout = -7,
    BadArguments = -8,
    UnknownSession = -12,
    NewConfigNoQuorum = -13,
    ReconfigInProgress = -14,
    ApiError = -100,
    NoNode = -101,
    NoAuth = -102,
    BadVersion = -103,
    NoChildrenForEphemerals = -108,
    NodeExists = -110,
    NotEmpty = -111,
    SessionExpired = -112,
    InvalidCallback = -113,
    InvalidAcl = -114,
    AuthFailed = -115,
    SessionMoved = -118,
    NotReadOnly = -119,
    EphemeralOnLocalSession = -120,
    NoWatcher = -121,
    RequestTimeout = -122,
    ReconfigDisabled = -123,
    SessionClosedRequireSaslAuth = -124,
    QuotaExceeded = -125,
    ThrottledOp = -127,
}

impl OpCode {
    /// Every op code, in declaration order.
    pub const ALL: [OpCode; 33] = [
        OpCode::Notification,
        OpCode::Create,
        OpCode::Delete,
        OpCode::Exists,
        OpCode::GetData,
        OpCode::SetData,
        OpCode::GetAcl,
        OpCode::SetAcl,
        OpCode::GetChildren,
        OpCode::Sync,
        OpCode::Ping,
        OpCode::GetChildren2,
        OpCode::Check,
        OpCode::Multi,
        OpCode::Create2,
        OpCode::Reconfig,
        OpCode::CheckWatches,
        OpCode::RemoveWatches,
        OpCode::CreateContainer,
        OpCode::DeleteContainer,
        OpCode::CreateTtl,
        OpCode::MultiRead,
        OpCode::Auth,
        OpCode::SetWatches,
        OpCode::Sasl,
        OpCode::GetEphemerals,
        OpCode::GetAllChildrenNumber,
        OpCode::SetWatches2,
        OpCode::AddWatch,
        OpCode::WhoAmI,
        OpCode::CreateSession,
        OpCode::CloseSession,
        OpCode::Error,
    ];

    /// The op code for a wire value; `None` for values ZooKeeper does not define (e.g. 10).
    pub fn from_i32(v: i32) -> Option<OpCode> {
        Some(match v {
            0 => OpCode::Notification,
            1 => OpCode::Create,
            2 => OpCode::Delete,
            3 => OpCode::Exists,
            4 => OpCode::GetData,
            5 => OpCode::SetData,
            6 => OpCode::GetAcl,
            7 => OpCode::SetAcl,
            8 => OpCode::GetChildren,
            9 => OpCode::Sync,
            11 => OpCode::Ping,
            12 => OpCode::GetChildren2,
            13 => OpCode::Check,
            14 => OpCode::Multi,
            15 => OpCode::Create2,
            16 => OpCode::Reconfig,
            17 => OpCode::CheckWatches,
            18 => OpCode::RemoveWatches,
            19 => OpCode::CreateContainer,
            20 => OpCode::DeleteContainer,
            21 => OpCode::CreateTtl,
            22 => OpCode::MultiRead,
            100 => OpCode::Auth,
            101 => OpCode::SetWatches,
            102 => OpCode::Sasl,
            103 => OpCode::GetEphemerals,
            104 => OpCode::GetAllChildrenNumber,
            105 => OpCode::SetWatches2,
            106 => OpCode::AddWatch,
            107 => OpCode::WhoAmI,
            -10 => OpCode::CreateSession,
            -11 => OpCode::CloseSession,
            -1 => OpCode::Error,
            _ => return None,
        })
    }

    /// The wire value.
    pub fn code(self) -> i32 {
        self as i32
    }

    /// Whether a request with this op is a write: Apache's `PrepRequestProcessor` turns it into
    /// a txn with its own zxid, so even a failed one (an error txn) consumes a zxid. That holds
    /// for a body that does not decode too: the txn header is set before the body is read.
    pub fn is_write(self) -> bool {
        matches!(
            self,
            OpCode::Create
                | OpCode::Create2
                | OpCode::CreateContainer
                | OpCode::CreateTtl
                | OpCode::Delete
                | OpCode::DeleteContainer
                | OpCode::SetData
                | OpCode::SetAcl
                | OpCode::Check
                | OpCode::Multi
                | OpCode::Reconfig
                | OpCode::CloseSession
        )
    }
}

impl ErrorCode {
    /// Every error code, in declaration order.
    pub const ALL: [ErrorCode; 32] = [
        ErrorCode::Ok,
        ErrorCode::SystemError,
        ErrorCode::RuntimeInconsistency,
        ErrorCode::DataInconsistency,
        ErrorCode::ConnectionLoss,
        ErrorCode::MarshallingError,
        ErrorCode::Unimplemented,
        ErrorCode::OperationTimeout,
        ErrorCode::BadArguments,
        ErrorCode::UnknownSession,
        ErrorCode::NewConfigNoQuorum,
        ErrorCode::ReconfigInProgress,
        ErrorCode::ApiError,
        ErrorCode::NoNode,
        ErrorCode::NoAuth,
        ErrorCode::BadVersion,
        ErrorCode::NoChildrenForEphemerals,
        ErrorCode::NodeExists,
        ErrorCode::NotEmpty,
        ErrorCode::SessionExpired,
        ErrorCode::InvalidCallback,
        ErrorCode::InvalidAcl,
        ErrorCode::AuthFailed,
        ErrorCode::SessionMoved,
        ErrorCode::NotReadOnly,
        ErrorCode::EphemeralOnLocalSession,
        ErrorCode::NoWatcher,
        ErrorCode::RequestTimeout,
        ErrorCode::ReconfigDisabled,
        ErrorCode::SessionClosedRequireSaslAuth,
        ErrorCode::QuotaExceeded,
        ErrorCode::ThrottledOp,
    ];

    /// The error code for a wire value; `None` for values ZooKeeper does not define.
    pub fn from_i32(v: i32) -> Option<ErrorCode> {
        Some(match v {
            0 => ErrorCode::Ok,
            -1 => ErrorCode::SystemError,
            -2 => ErrorCode::RuntimeInconsistency,
            -3 => ErrorCode::DataInconsistency,
            -4 => ErrorCode::ConnectionLoss,
            -5 => ErrorCode::MarshallingError,
            -6 => ErrorCode::Unimplemented,
            -7 => ErrorCode::OperationTimeout,
            -8 => ErrorCode::BadArguments,
            -12 => ErrorCode::UnknownSession,
            -13 => ErrorCode::NewConfigNoQuorum,
            -14 => ErrorCode::ReconfigInProgress,
            -100 => ErrorCode::ApiError,
            -101 => ErrorCode::NoNode,
            -102 => ErrorCode::NoAuth,
            -103 => ErrorCode::BadVersion,
            -108 => ErrorCode::NoChildrenForEphemerals,
            -110 => ErrorCode::NodeExists,
            -111 => ErrorCode::NotEmpty,
            -112 => ErrorCode::SessionExpired,
            -113 => ErrorCode::InvalidCallback,
            -114 => ErrorCode::InvalidAcl,
            -115 => ErrorCode::AuthFailed,
            -118 => ErrorCode::SessionMoved,
            -119 => ErrorCode::NotReadOnly,
            -120 => ErrorCode::EphemeralOnLocalSession,
            -121 => ErrorCode::NoWatcher,
            -122 => ErrorCode::RequestTimeout,
            -123 => ErrorCode::ReconfigDisabled,
            -124 => ErrorCode::SessionClosedRequireSaslAuth,
            -125 => ErrorCode::QuotaExceeded,
            -127 => ErrorCode::ThrottledOp,
            _ => return None,
        })
    }

    /// The wire value.
    pub fn code(self) -> i32 {
        self as i32
    }

    /// ZooKeeper's message for the code (`KeeperException.getCodeMessage`), as shown after
    /// "KeeperErrorCode = " by the Java client.
    pub fn message(self) -> &'static str {
        match self {
            ErrorCode::Ok => "ok",
            ErrorCode::SystemError => "SystemError",
            ErrorCode::RuntimeInconsistency => "RuntimeInconsistency",
            ErrorCode::DataInconsistency => "DataInconsistency",
            ErrorCode::ConnectionLoss => "ConnectionLoss",
            ErrorCode::MarshallingError => "MarshallingError",
            ErrorCode::Unimplemented => "Unimplemented",
            ErrorCode::OperationTimeout => "OperationTimeout",
            ErrorCode::BadArguments => "BadArguments",
            ErrorCode::UnknownSession => "Unknown session",
            ErrorCode::NewConfigNoQuorum => "NewConfigNoQuorum",
            ErrorCode::ReconfigInProgress => "ReconfigInProgress",
            ErrorCode::ApiError => "APIError",
            ErrorCode::NoNode => "NoNode",
            ErrorCode::NoAuth => "NoAuth",
            ErrorCode::BadVersion => "BadVersion",
            ErrorCode::NoChildrenForEphemerals => "NoChildrenForEphemerals",
            ErrorCode::NodeExists => "NodeExists",
            ErrorCode::NotEmpty => "Directory not empty",
            ErrorCode::SessionExpired => "Session expired",
            ErrorCode::InvalidCallback => "Invalid callback",
            ErrorCode::InvalidAcl => "InvalidACL",
            ErrorCode::AuthFailed => "AuthFailed",
            ErrorCode::SessionMoved => "Session moved",
            ErrorCode::NotReadOnly => "Not a read-only call",
            ErrorCode::EphemeralOnLocalSession => "Ephemeral node on local session",
            ErrorCode::NoWatcher => "No such watcher",
            ErrorCode::RequestTimeout => "Request timeout",
            ErrorCode::ReconfigDisabled => "Reconfig is disabled",
            ErrorCode::SessionClosedRequireSaslAuth => {
                "Session closed because client failed to authenticate"
            }
            ErrorCode::QuotaExceeded => "Quota has exceeded",
            ErrorCode::ThrottledOp => "Op throttled due to high load",
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.message())
    }
}

impl From<ErrorCode> for i32 {
    fn from(e: ErrorCode) -> i32 {
        e.code()
    }
}

impl From<OpCode> for i32 {
    fn from(o: OpCode) -> i32 {
        o.code()
    }
}

/// Special xids.
pub mod xid {
    /// Watch notification.
    pub const NOTIFICATION: i32 = -1;
    /// Ping.
    pub const PING: i32 = -2;
    /// Auth packet.
    pub const AUTH: i32 = -4;
    /// SetWatches / SetWatches2.
    pub const SET_WATCHES: i32 = -8;
}

/// Create flags (`CreateMode`).
pub mod create_mode {
    /// Persistent.
    pub const PERSISTENT: i32 = 0;
    /// Ephemeral.
    pub const EPHEMERAL: i32 = 1;
    /// Persistent sequential.
    pub const PERSISTENT_SEQUENTIAL: i32 = 2;
    /// Ephemeral sequential.
    pub const EPHEMERAL_SEQUENTIAL: i32 = 3;
    /// Container.
    pub const CONTAINER: i32 = 4;
    /// Persistent with TTL.
    pub const PERSISTENT_WITH_TTL: i32 = 5;
    /// Persistent sequential with TTL.
    pub const PERSISTENT_SEQUENTIAL_WITH_TTL: i32 = 6;
}

/// ACL permission bits (`ZooDefs.Perms`).
pub mod perms {
    /// Read.
    pub const READ: i32 = 1;
    /// Write.
    pub const WRITE: i32 = 2;
    /// Create children.
    pub const CREATE: i32 = 4;
    /// Delete children.
    pub const DELETE: i32 = 8;
    /// Admin (setACL).
    pub const ADMIN: i32 = 16;
    /// All.
    pub const ALL: i32 = 31;
}

/// Watcher event types (`Watcher.Event.EventType`).
pub mod event_type {
    /// None (session events).
    pub const NONE: i32 = -1;
    /// Node created.
    pub const NODE_CREATED: i32 = 1;
    /// Node deleted.
    pub const NODE_DELETED: i32 = 2;
    /// Node data changed.
    pub const NODE_DATA_CHANGED: i32 = 3;
    /// Node children changed.
    pub const NODE_CHILDREN_CHANGED: i32 = 4;
    /// Data watch removed.
    pub const DATA_WATCH_REMOVED: i32 = 5;
    /// Child watch removed.
    pub const CHILD_WATCH_REMOVED: i32 = 6;
    /// Persistent watch removed.
    pub const PERSISTENT_WATCH_REMOVED: i32 = 7;
}

/// Keeper states a server sends (`Watcher.Event.KeeperState`).
pub mod keeper_state {
    /// SyncConnected.
    pub const SYNC_CONNECTED: i32 = 3;
}

/// `WatcherType` for checkWatches/removeWatches: Children 1, Data 2, Any 3; Persistent 4,
/// PersistentRecursive 5.
pub mod watcher_type {
    /// Child watches.
    pub const CHILDREN: i32 = 1;
    /// Data (and exist) watches.
    pub const DATA: i32 = 2;
    /// Any watch.
    pub const ANY: i32 = 3;
    /// Persistent watch.
    pub const PERSISTENT: i32 = 4;
    /// Persistent recursive watch.
    pub const PERSISTENT_RECURSIVE: i32 = 5;
}

/// `AddWatchMode`.
pub mod add_watch_mode {
    /// Persistent.
    pub const PERSISTENT: i32 = 0;
    /// Persistent recursive.
    pub const PERSISTENT_RECURSIVE: i32 = 1;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn op_codes_round_trip_and_ten_is_unknown() {
        for op in OpCode::ALL {
            assert_eq!(OpCode::from_i32(op.code()), Some(op));
        }
        assert_eq!(OpCode::from_i32(10), None);
        assert_eq!(OpCode::from_i32(108), None);
        assert_eq!(OpCode::Multi.code(), 14);
        assert_eq!(OpCode::CloseSession.code(), -11);
    }

    #[test]
    fn writes_are_the_ops_prep_request_processor_logs() {
        let writes: Vec<i32> = OpCode::ALL
            .iter()
            .filter(|op| op.is_write())
            .map(|op| op.code())
            .collect();
        assert_eq!(writes, [1, 2, 5, 7, 13, 14, 15, 16, 19, 20, 21, -11]);
    }

    #[test]
    fn error_codes_round_trip_and_display_zookeeper_messages() {
        for e in ErrorCode::ALL {
            assert_eq!(ErrorCode::from_i32(e.code()), Some(e));
        }
        assert_eq!(ErrorCode::from_i32(-109), None);
        assert_eq!(ErrorCode::NoNode.code(), -101);
        assert_eq!(ErrorCode::NoNode.to_string(), "NoNode");
        assert_eq!(ErrorCode::NotEmpty.to_string(), "Directory not empty");
        assert_eq!(ErrorCode::InvalidAcl.to_string(), "InvalidACL");
    }
}
