//! A server response body: [`Response`], and its encoding (after a `ReplyHeader` with err 0).

use crate::records::*;

/// The body of a successful reply. Encoded after a [`ReplyHeader`] whose `err` is 0.
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum Response {
    /// No body (delete, check, setWatches, sync-less ops, ping, closeSession, removeWatches…).
    Empty,
    /// CreateResponse{path} (op 1).
    Create { path: String },
    /// Create2Response{path, stat} (ops 15, 19, 21).
    Create2 { path: String, stat: Stat },
    /// ExistsResponse / SetDataResponse / SetACLResponse: {stat}.
    Stat(Stat),
    /// GetDataResponse{data, stat}.
    GetData { data: Vec<u8>, stat: Stat },
    /// GetACLResponse{acl, stat}.
    GetAcl { acl: Vec<Acl>, stat: Stat },
    /// GetChildrenResponse{children} (op 8).
    GetChildren { children: Vec<String> },
    /// GetChildren2Response{children, stat} (op 12).
    GetChildren2 { children: Vec<String>, stat: Stat },
    /// SyncResponse{path}.
    Sync { path: String },
    /// MultiResponse.
    Multi(Vec<MultiResult>),
    /// MultiRead response.
    MultiRead(Vec<MultiReadResult>),
    /// GetEphemeralsResponse{ephemerals}.
    Ephemerals(Vec<String>),
    /// GetAllChildrenNumberResponse{totalNumber}.
    AllChildrenNumber(i32),
    /// WhoAmIResponse{clientInfo}.
    WhoAmI(Vec<ClientInfo>),
    /// ErrorResponse{err} (addWatch answers with this, err 0).
    Error(i32),
}
