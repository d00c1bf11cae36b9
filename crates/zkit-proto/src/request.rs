//! A decoded client request: [`Request`], one variant per op code.
//!
//! `Request::decode(header, body)` is implemented in this module by the codec work; it returns
//! `DecodeError::UnknownOp` for op codes the protocol does not define, so the server can answer
//! them the way Apache ZooKeeper does.

use crate::records::*;

/// A client request after the handshake, decoded from its header's op code and body.
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum Request {
    Create(CreateRequest),
    Create2(CreateRequest),
    CreateContainer(CreateRequest),
    CreateTtl(CreateTtlRequest),
    Delete(DeleteRequest),
    /// deleteContainer (20): the path only.
    DeleteContainer { path: String },
    Exists(PathWatchRequest),
    GetData(PathWatchRequest),
    SetData(SetDataRequest),
    /// getACL (6): the path only.
    GetAcl { path: String },
    SetAcl(SetAclRequest),
    GetChildren(PathWatchRequest),
    GetChildren2(PathWatchRequest),
    /// sync (9)
    Sync { path: String },
    /// ping (11), no body
    Ping,
    Check(CheckVersionRequest),
    Multi(Vec<MultiOp>),
    MultiRead(Vec<MultiReadOp>),
    Reconfig(ReconfigRequest),
    CheckWatches(WatchesRequest),
    RemoveWatches(WatchesRequest),
    Auth(AuthPacket),
    SetWatches(SetWatches),
    SetWatches2(SetWatches2),
    Sasl(SaslRequest),
    /// getEphemerals (103)
    GetEphemerals { prefix_path: String },
    /// getAllChildrenNumber (104)
    GetAllChildrenNumber { path: String },
    AddWatch(AddWatchRequest),
    /// whoAmI (107), no body
    WhoAmI,
    /// closeSession (-11), no body
    CloseSession,
}
