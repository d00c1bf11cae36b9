//! The small value types of the API: sessions ([`SessionId`], [`SessionInfo`],
//! [`SessionState`]), events ([`WatchedEvent`], [`EventType`]), create options
//! ([`CreateMode`], [`CreateOptions`], [`CreateSequence`]) and watch kinds ([`AddWatchMode`],
//! [`WatchType`]).

use std::time::Duration;

use crate::acl::Acls;
use crate::error::{Error, Result};
use zkit_proto::op::{create_mode, event_type};

/// A ZooKeeper session id; prints in hex (`0x...`) as ZooKeeper's logs do.
#[derive(Copy, Clone, PartialEq, Eq, Hash)]
pub struct SessionId(pub i64);

impl std::fmt::Display for SessionId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

impl std::fmt::Debug for SessionId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

/// What it takes to re-attach to a session from another client or process
/// ([`crate::Connector::with_session`]): its id and password.
#[derive(Clone, PartialEq, Eq)]
pub struct SessionInfo {
    pub(crate) id: SessionId,
    pub(crate) password: Vec<u8>,
    pub(crate) readonly: bool,
}

impl std::fmt::Debug for SessionInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The password is a secret: never in logs.
        f.debug_struct("SessionInfo")
            .field("id", &self.id)
            .field("readonly", &self.readonly)
            .finish_non_exhaustive()
    }
}

impl SessionInfo {
    /// A session known by id and password (e.g. saved by another process).
    pub fn new(id: SessionId, password: Vec<u8>) -> SessionInfo {
        SessionInfo {
            id,
            password,
            readonly: false,
        }
    }

    /// The session id.
    pub fn id(&self) -> SessionId {
        self.id
    }

    /// The session password (16 bytes from the server).
    pub fn password(&self) -> &[u8] {
        &self.password
    }

    /// Whether this is a read-only server's local session, which cannot be re-attached
    /// elsewhere.
    pub fn is_readonly(&self) -> bool {
        self.readonly
    }
}

/// A client's session state.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum SessionState {
    /// The connection is down; the client is reconnecting and the session may still live.
    Disconnected,
    /// Connected to a server that serves reads and writes.
    SyncConnected,
    /// Terminal: the server refused an `auth` packet.
    AuthFailed,
    /// Connected to a read-only server ([`crate::Connector::with_readonly`]).
    ConnectedReadOnly,
    /// Terminal: the server expired the session.
    Expired,
    /// Terminal: the client was closed.
    Closed,
}

impl SessionState {
    /// Whether no further state can follow (`AuthFailed`, `Expired`, `Closed`).
    pub fn is_terminated(self) -> bool {
        matches!(
            self,
            SessionState::AuthFailed | SessionState::Expired | SessionState::Closed
        )
    }

    /// Whether requests are being served (`SyncConnected`, `ConnectedReadOnly`).
    pub fn is_connected(self) -> bool {
        matches!(
            self,
            SessionState::SyncConnected | SessionState::ConnectedReadOnly
        )
    }

    /// The error a request fails with in this (terminal or disconnected) state.
    pub(crate) fn to_error(self) -> Error {
        match self {
            SessionState::AuthFailed => Error::AuthFailed,
            SessionState::Expired => Error::SessionExpired,
            SessionState::Closed => Error::ClientClosed,
            SessionState::Disconnected
            | SessionState::SyncConnected
            | SessionState::ConnectedReadOnly => Error::ConnectionLoss,
        }
    }
}

/// What a client's session state channel holds: the state, and how many times the connection
/// has dropped so far, so that a watcher can tell a drop it did not see happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StateCell {
    pub(crate) state: SessionState,
    /// Transitions into `Disconnected` so far.
    pub(crate) disconnects: u64,
}

impl StateCell {
    /// A new client's cell: `Disconnected`, before its first connection.
    pub(crate) fn new() -> StateCell {
        StateCell {
            state: SessionState::Disconnected,
            disconnects: 0,
        }
    }

    /// Moves to `state`; `false` (nothing changed) when it is the current state or the
    /// current one is terminal.
    pub(crate) fn set(&mut self, state: SessionState) -> bool {
        if self.state == state || self.state.is_terminated() {
            return false;
        }
        self.state = state;
        if state == SessionState::Disconnected {
            self.disconnects += 1;
        }
        true
    }
}

impl std::fmt::Display for SessionState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self, f)
    }
}

/// What a [`WatchedEvent`] reports.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum EventType {
    /// A session state change ([`WatchedEvent::session_state`]); `path` is empty.
    Session,
    /// The node was created.
    NodeCreated,
    /// The node was deleted.
    NodeDeleted,
    /// The node's data changed.
    NodeDataChanged,
    /// A child was created or deleted.
    NodeChildrenChanged,
    /// A data (or exist) watch was removed by [`crate::Client::remove_watches`].
    DataWatchRemoved,
    /// A child watch was removed by [`crate::Client::remove_watches`].
    ChildWatchRemoved,
    /// A persistent watch was removed by [`crate::Client::remove_watches`].
    PersistentWatchRemoved,
}

impl EventType {
    pub(crate) fn from_server(code: i32) -> Option<EventType> {
        Some(match code {
            event_type::NODE_CREATED => EventType::NodeCreated,
            event_type::NODE_DELETED => EventType::NodeDeleted,
            event_type::NODE_DATA_CHANGED => EventType::NodeDataChanged,
            event_type::NODE_CHILDREN_CHANGED => EventType::NodeChildrenChanged,
            event_type::DATA_WATCH_REMOVED => EventType::DataWatchRemoved,
            event_type::CHILD_WATCH_REMOVED => EventType::ChildWatchRemoved,
            event_type::PERSISTENT_WATCH_REMOVED => EventType::PersistentWatchRemoved,
            _ => return None,
        })
    }
}

impl std::fmt::Display for EventType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self, f)
    }
}

/// A watch notification, or a session state change delivered to a watcher.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct WatchedEvent {
    /// What happened.
    pub event_type: EventType,
    /// The session state: the new state for [`EventType::Session`], `SyncConnected` for node
    /// events.
    pub session_state: SessionState,
    /// The node, relative to the watcher's client's chroot; empty for session events.
    pub path: String,
    /// The zxid of the change, when the server sends it (ZooKeeper 3.9+); otherwise
    /// [`WatchedEvent::NO_ZXID`].
    pub zxid: i64,
}

impl WatchedEvent {
    /// The zxid of events from servers that do not send one (up to ZooKeeper 3.8).
    pub const NO_ZXID: i64 = -1;

    /// A node event.
    pub fn new(event_type: EventType, path: impl Into<String>) -> WatchedEvent {
        WatchedEvent {
            event_type,
            session_state: SessionState::SyncConnected,
            path: path.into(),
            zxid: WatchedEvent::NO_ZXID,
        }
    }

    /// The same event with `zxid`.
    pub fn with_zxid(self, zxid: i64) -> WatchedEvent {
        WatchedEvent { zxid, ..self }
    }

    /// A session event.
    pub fn new_session(state: SessionState) -> WatchedEvent {
        WatchedEvent {
            event_type: EventType::Session,
            session_state: state,
            path: String::new(),
            zxid: WatchedEvent::NO_ZXID,
        }
    }
}

/// The kind of node to create. TTLs come from [`CreateOptions::with_ttl`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CreateMode {
    /// Lives until deleted.
    Persistent,
    /// Persistent, with a server-assigned 10-digit suffix.
    PersistentSequential,
    /// Deleted when the session ends.
    Ephemeral,
    /// Ephemeral, with a server-assigned suffix.
    EphemeralSequential,
    /// Deleted by the server once it had children and has none left.
    Container,
}

impl CreateMode {
    /// [`CreateOptions`] with this mode and `acls`.
    pub const fn with_acls(self, acls: Acls<'_>) -> CreateOptions<'_> {
        CreateOptions {
            mode: self,
            acls,
            ttl: None,
        }
    }

    /// Whether the server appends a sequence number.
    pub fn is_sequential(self) -> bool {
        matches!(
            self,
            CreateMode::PersistentSequential | CreateMode::EphemeralSequential
        )
    }

    /// Whether the node dies with the session.
    pub fn is_ephemeral(self) -> bool {
        matches!(
            self,
            CreateMode::Ephemeral | CreateMode::EphemeralSequential
        )
    }

    fn is_persistent(self) -> bool {
        matches!(
            self,
            CreateMode::Persistent | CreateMode::PersistentSequential
        )
    }

    /// The wire flags (`CreateMode.toFlag`).
    pub(crate) fn flags(self, ttl: bool) -> i32 {
        match (self, ttl) {
            (CreateMode::Persistent, false) => create_mode::PERSISTENT,
            (CreateMode::Persistent, true) => create_mode::PERSISTENT_WITH_TTL,
            (CreateMode::PersistentSequential, false) => create_mode::PERSISTENT_SEQUENTIAL,
            (CreateMode::PersistentSequential, true) => create_mode::PERSISTENT_SEQUENTIAL_WITH_TTL,
            (CreateMode::Ephemeral, _) => create_mode::EPHEMERAL,
            (CreateMode::EphemeralSequential, _) => create_mode::EPHEMERAL_SEQUENTIAL,
            (CreateMode::Container, _) => create_mode::CONTAINER,
        }
    }
}

/// The largest TTL ZooKeeper accepts: 40 bits of milliseconds (`EphemeralType.MAX_TTL`).
pub const MAX_TTL: Duration = Duration::from_millis(0x00FF_FFFF_FFFF);

/// How to create a node: [`CreateMode`], ACLs, and an optional TTL. Build with
/// [`CreateMode::with_acls`].
#[derive(Clone, Copy, Debug)]
pub struct CreateOptions<'a> {
    pub(crate) mode: CreateMode,
    pub(crate) acls: Acls<'a>,
    pub(crate) ttl: Option<Duration>,
}

impl CreateOptions<'_> {
    /// A TTL for a persistent (sequential or not) node: the server deletes it once it has had no
    /// child and no change for that long. Needs `extendedTypesEnabled` on the server
    /// (otherwise [`Error::Unimplemented`]).
    pub const fn with_ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }

    /// The mode.
    pub fn mode(&self) -> CreateMode {
        self.mode
    }

    /// Checks what the Java client checks before sending (`CreateMode`/`EphemeralType`):
    /// a TTL only with a persistent mode and within 1 ms ..= [`MAX_TTL`]; a non-empty ACL.
    pub(crate) fn validate(&self) -> Result<()> {
        if let Some(ttl) = self.ttl {
            if !self.mode.is_persistent() {
                return Err(Error::bad_arguments(
                    "ttl can only be specified with persistent node",
                ));
            }
            if ttl.as_millis() == 0 {
                return Err(Error::bad_arguments("ttl must be at least 1 ms"));
            }
            if ttl > MAX_TTL {
                return Err(Error::bad_arguments("ttl exceeds 0xFFFFFFFFFF ms"));
            }
        }
        if self.acls.is_empty() {
            return Err(Error::InvalidAcl);
        }
        Ok(())
    }

    /// The TTL in ms (0 for none).
    pub(crate) fn ttl_millis(&self) -> i64 {
        self.ttl
            .map_or(0, |t| i64::try_from(t.as_millis()).unwrap_or(i64::MAX))
    }
}

/// The sequence number the server gave a sequential node; `-1` for other nodes. Prints as the
/// server formats it (`%010d`, 19 digits past `i32::MAX` as ZOOKEEPER-4706 discusses).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CreateSequence(pub(crate) i64);

impl CreateSequence {
    /// The number.
    pub fn into_i64(self) -> i64 {
        self.0
    }
}

impl std::fmt::Display for CreateSequence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0 <= i64::from(i32::MAX) {
            write!(f, "{:010}", self.0)
        } else {
            write!(f, "{:019}", self.0)
        }
    }
}

/// The mode of [`crate::Client::watch`] (`AddWatchMode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AddWatchMode {
    /// Data and child changes of the node itself, until removed.
    Persistent,
    /// Creations, deletions and data changes of the node and every descendant, until removed
    /// (never `NodeChildrenChanged`).
    PersistentRecursive,
}

/// Which watches [`crate::Client::remove_watches`] / [`crate::Client::check_watches`] mean
/// (`Watcher.WatcherType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WatchType {
    /// Child watches (getChildren).
    Children,
    /// Data watches (getData) and exist watches (exists).
    Data,
    /// Every watch on the path, persistent ones included.
    Any,
}

impl WatchType {
    pub(crate) fn code(self) -> i32 {
        use zkit_proto::op::watcher_type;
        match self {
            WatchType::Children => watcher_type::CHILDREN,
            WatchType::Data => watcher_type::DATA,
            WatchType::Any => watcher_type::ANY,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_options_validate_like_java() {
        let acls = Acls::anyone_all();
        assert_eq!(
            CreateMode::Persistent.with_acls(Acls::new(&[])).validate(),
            Err(Error::InvalidAcl)
        );
        assert!(CreateMode::Ephemeral
            .with_acls(acls)
            .with_ttl(Duration::from_secs(1))
            .validate()
            .is_err());
        assert!(CreateMode::Persistent
            .with_acls(acls)
            .with_ttl(Duration::ZERO)
            .validate()
            .is_err());
        assert!(CreateMode::Persistent
            .with_acls(acls)
            .with_ttl(MAX_TTL + Duration::from_millis(1))
            .validate()
            .is_err());
        assert_eq!(
            CreateMode::PersistentSequential
                .with_acls(acls)
                .with_ttl(MAX_TTL)
                .validate(),
            Ok(())
        );
    }

    #[test]
    fn flags_match_create_mode() {
        assert_eq!(CreateMode::Persistent.flags(false), 0);
        assert_eq!(CreateMode::Ephemeral.flags(false), 1);
        assert_eq!(CreateMode::PersistentSequential.flags(false), 2);
        assert_eq!(CreateMode::EphemeralSequential.flags(false), 3);
        assert_eq!(CreateMode::Container.flags(false), 4);
        assert_eq!(CreateMode::Persistent.flags(true), 5);
        assert_eq!(CreateMode::PersistentSequential.flags(true), 6);
    }

    #[test]
    fn sequence_and_session_id_display() {
        assert_eq!(CreateSequence(7).to_string(), "0000000007");
        assert_eq!(
            CreateSequence(i64::from(i32::MAX) + 1).to_string(),
            "0000000002147483648"
        );
        assert_eq!(SessionId(255).to_string(), "0xff");
        let info = SessionInfo::new(SessionId(1), vec![1; 16]);
        assert!(!format!("{info:?}").contains("password"));
    }
}
