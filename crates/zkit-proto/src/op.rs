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
