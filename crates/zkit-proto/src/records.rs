//! The records of `zookeeper.jute` used by the client protocol, as plain data.
//!
//! Field names follow jute's, in snake case. Encoding and decoding are in [`crate::codec`]
//! via the [`crate::codec::Record`] trait, implemented for each record here.

/// An identity: `scheme:id` (e.g. `world:anyone`, `digest:user:hash`, `ip:10.0.0.0/8`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Id {
    /// Scheme.
    pub scheme: String,
    /// Id within the scheme.
    pub id: String,
}

/// One ACL entry.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Acl {
    /// Permission bits, see [`crate::op::perms`].
    pub perms: i32,
    /// Whom it applies to.
    pub id: Id,
}

/// Node metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
#[allow(missing_docs)]
pub struct Stat {
    pub czxid: i64,
    pub mzxid: i64,
    pub ctime: i64,
    pub mtime: i64,
    pub version: i32,
    pub cversion: i32,
    pub aversion: i32,
    pub ephemeral_owner: i64,
    pub data_length: i32,
    pub num_children: i32,
    pub pzxid: i64,
}

/// Handshake from the client. `read_only` is `None` when an old (<= 3.3) client omitted it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct ConnectRequest {
    pub protocol_version: i32,
    pub last_zxid_seen: i64,
    pub time_out: i32,
    pub session_id: i64,
    pub passwd: Vec<u8>,
    pub read_only: Option<bool>,
}

/// Handshake reply. `read_only` is omitted on the wire when `None`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct ConnectResponse {
    pub protocol_version: i32,
    pub time_out: i32,
    pub session_id: i64,
    pub passwd: Vec<u8>,
    pub read_only: Option<bool>,
}

/// Header of every request after the handshake.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestHeader {
    /// Client-chosen id, echoed in the reply; negative values are special ([`crate::op::xid`]).
    pub xid: i32,
    /// Op code as sent (may be unknown).
    pub op: i32,
}

/// Header of every reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplyHeader {
    /// The request's xid (or a special one).
    pub xid: i32,
    /// Last zxid processed by the server.
    pub zxid: i64,
    /// Error code; a body follows only when 0.
    pub err: i32,
}

/// A watch notification (sent with xid -1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatcherEvent {
    /// Event type, see [`crate::op::event_type`].
    pub event_type: i32,
    /// Keeper state, see [`crate::op::keeper_state`].
    pub state: i32,
    /// Path, relative to nothing (the server knows no chroot).
    pub path: String,
}

/// create (1), create2 (15), createContainer (19).
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct CreateRequest {
    pub path: String,
    pub data: Vec<u8>,
    pub acl: Vec<Acl>,
    pub flags: i32,
}

/// createTTL (21): a create request plus a TTL in ms.
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct CreateTtlRequest {
    pub path: String,
    pub data: Vec<u8>,
    pub acl: Vec<Acl>,
    pub flags: i32,
    pub ttl: i64,
}

/// delete (2).
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct DeleteRequest {
    pub path: String,
    pub version: i32,
}

/// exists (3), getData (4), getChildren (8), getChildren2 (12): a path and a watch flag.
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct PathWatchRequest {
    pub path: String,
    pub watch: bool,
}

/// setData (5).
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct SetDataRequest {
    pub path: String,
    pub data: Vec<u8>,
    pub version: i32,
}

/// setACL (7).
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct SetAclRequest {
    pub path: String,
    pub acl: Vec<Acl>,
    pub version: i32,
}

/// check (13).
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct CheckVersionRequest {
    pub path: String,
    pub version: i32,
}

/// checkWatches (17) and removeWatches (18).
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct WatchesRequest {
    pub path: String,
    /// See [`crate::op::watcher_type`].
    pub watcher_type: i32,
}

/// addWatch (106).
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct AddWatchRequest {
    pub path: String,
    /// See [`crate::op::add_watch_mode`].
    pub mode: i32,
}

/// setWatches (101).
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct SetWatches {
    pub relative_zxid: i64,
    pub data_watches: Vec<String>,
    pub exist_watches: Vec<String>,
    pub child_watches: Vec<String>,
}

/// setWatches2 (105).
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct SetWatches2 {
    pub relative_zxid: i64,
    pub data_watches: Vec<String>,
    pub exist_watches: Vec<String>,
    pub child_watches: Vec<String>,
    pub persistent_watches: Vec<String>,
    pub persistent_recursive_watches: Vec<String>,
}

/// auth (100), sent with xid -4.
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct AuthPacket {
    pub auth_type: i32,
    pub scheme: String,
    pub auth: Vec<u8>,
}

/// reconfig (16).
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct ReconfigRequest {
    pub joining_servers: Option<String>,
    pub leaving_servers: Option<String>,
    pub new_members: Option<String>,
    pub cur_config_id: i64,
}

/// sasl (102).
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct SaslRequest {
    pub token: Vec<u8>,
}

/// One sub-op of multi (14). The op code of each variant is its request's.
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum MultiOp {
    /// op 1
    Create(CreateRequest),
    /// op 15
    Create2(CreateRequest),
    /// op 19
    CreateContainer(CreateRequest),
    /// op 21
    CreateTtl(CreateTtlRequest),
    /// op 2
    Delete(DeleteRequest),
    /// op 5
    SetData(SetDataRequest),
    /// op 13
    Check(CheckVersionRequest),
}

/// One sub-op of multiRead (22).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MultiReadOp {
    /// op 8 (the watch flag is carried but a read in multiRead never sets a watch... see server)
    GetChildren(PathWatchRequest),
    /// op 4
    GetData(PathWatchRequest),
}

/// One result of multi (14).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MultiResult {
    /// type 1: CreateResponse{path}
    Create {
        /// Created path.
        path: String,
    },
    /// type 15: Create2Response{path, stat} (also for container and TTL creates)
    Create2 {
        /// Created path.
        path: String,
        /// Its stat.
        stat: Stat,
    },
    /// type 2, no body
    Delete,
    /// type 5: SetDataResponse{stat}
    SetData {
        /// New stat.
        stat: Stat,
    },
    /// type 13, no body
    Check,
    /// type -1: ErrorResponse{err}
    Error {
        /// Error code.
        err: i32,
    },
}

/// One result of multiRead (22).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MultiReadResult {
    /// type 8: GetChildrenResponse{children}
    GetChildren {
        /// Child names.
        children: Vec<String>,
    },
    /// type 4: GetDataResponse{data, stat}
    GetData {
        /// Data.
        data: Vec<u8>,
        /// Stat.
        stat: Stat,
    },
    /// type -1: ErrorResponse{err}
    Error {
        /// Error code.
        err: i32,
    },
}

/// whoAmI result entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientInfo {
    /// Auth scheme.
    pub auth_scheme: String,
    /// User within it.
    pub user: String,
}
