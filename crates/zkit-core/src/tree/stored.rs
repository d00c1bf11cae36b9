//! [`StoredStat`]: a node's stat as a snapshot stores it, the unit of a restored or imported
//! node. A leaf, so that the tree can take it without depending on the image builder.

/// A node's persisted stat (Apache's `StatPersisted`): what a snapshot stores; the data length
/// and the number of children follow from the node.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoredStat {
    /// Creating zxid.
    pub czxid: i64,
    /// Last data-modifying zxid.
    pub mzxid: i64,
    /// Creation time (ms since the epoch).
    pub ctime: i64,
    /// Last data modification time.
    pub mtime: i64,
    /// Data version.
    pub version: i32,
    /// Child version (creates and deletes of children; sequential names come from it).
    pub cversion: i32,
    /// ACL version.
    pub aversion: i32,
    /// Raw ephemeralOwner: 0, a session id, the container marker or a TTL encoding.
    pub ephemeral_owner: i64,
    /// Last child create/delete zxid.
    pub pzxid: i64,
}
