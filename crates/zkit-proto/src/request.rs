//! A decoded client request: [`Request`], one variant per op code.
//!
//! [`Request::decode`] turns a header's op code and the body after it into a variant; it returns
//! [`DecodeError::UnknownOp`] for op codes that are not client requests, so the server can answer
//! them the way Apache ZooKeeper does (`Unimplemented`). Like Apache's `ByteBufferInputStream`,
//! it ignores bytes after the record. [`Request::encode`] is the inverse, for test clients.
//! Nothing here checks paths, versions or ACLs: that is `zkit-core`'s job.

use bytes::BytesMut;

use crate::codec::{put_ustring, DecodeError, Reader, Record};
use crate::op::OpCode;
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
    DeleteContainer {
        path: String,
    },
    Exists(PathWatchRequest),
    GetData(PathWatchRequest),
    SetData(SetDataRequest),
    /// getACL (6): the path only.
    GetAcl {
        path: String,
    },
    SetAcl(SetAclRequest),
    GetChildren(PathWatchRequest),
    GetChildren2(PathWatchRequest),
    /// sync (9)
    Sync {
        path: String,
    },
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
    GetEphemerals {
        prefix_path: String,
    },
    /// getAllChildrenNumber (104)
    GetAllChildrenNumber {
        path: String,
    },
    AddWatch(AddWatchRequest),
    /// whoAmI (107), no body
    WhoAmI,
    /// closeSession (-11), no body
    CloseSession,
}

impl Request {
    /// The op code this request is sent with.
    pub fn op_code(&self) -> OpCode {
        match self {
            Request::Create(_) => OpCode::Create,
            Request::Create2(_) => OpCode::Create2,
            Request::CreateContainer(_) => OpCode::CreateContainer,
            Request::CreateTtl(_) => OpCode::CreateTtl,
            Request::Delete(_) => OpCode::Delete,
            Request::DeleteContainer { .. } => OpCode::DeleteContainer,
            Request::Exists(_) => OpCode::Exists,
            Request::GetData(_) => OpCode::GetData,
            Request::SetData(_) => OpCode::SetData,
            Request::GetAcl { .. } => OpCode::GetAcl,
            Request::SetAcl(_) => OpCode::SetAcl,
            Request::GetChildren(_) => OpCode::GetChildren,
            Request::GetChildren2(_) => OpCode::GetChildren2,
            Request::Sync { .. } => OpCode::Sync,
            Request::Ping => OpCode::Ping,
            Request::Check(_) => OpCode::Check,
            Request::Multi(_) => OpCode::Multi,
            Request::MultiRead(_) => OpCode::MultiRead,
            Request::Reconfig(_) => OpCode::Reconfig,
            Request::CheckWatches(_) => OpCode::CheckWatches,
            Request::RemoveWatches(_) => OpCode::RemoveWatches,
            Request::Auth(_) => OpCode::Auth,
            Request::SetWatches(_) => OpCode::SetWatches,
            Request::SetWatches2(_) => OpCode::SetWatches2,
            Request::Sasl(_) => OpCode::Sasl,
            Request::GetEphemerals { .. } => OpCode::GetEphemerals,
            Request::GetAllChildrenNumber { .. } => OpCode::GetAllChildrenNumber,
            Request::AddWatch(_) => OpCode::AddWatch,
            Request::WhoAmI => OpCode::WhoAmI,
            Request::CloseSession => OpCode::CloseSession,
        }
    }

    /// Decodes the body that followed `header`. Trailing bytes are ignored, as Apache does.
    ///
    /// # Errors
    /// [`DecodeError::UnknownOp`] when `header.op` is not a client request op (including
    /// notification 0, error -1 and createSession -10, which only appear server-side); any other
    /// variant when the body is malformed.
    pub fn decode(header: &RequestHeader, body: &[u8]) -> Result<Request, DecodeError> {
        let op = OpCode::from_i32(header.op).ok_or(DecodeError::UnknownOp(header.op))?;
        let r = &mut Reader::new(body);
        Ok(match op {
            OpCode::Create => Request::Create(Record::decode(r)?),
            OpCode::Create2 => Request::Create2(Record::decode(r)?),
            OpCode::CreateContainer => Request::CreateContainer(Record::decode(r)?),
            OpCode::CreateTtl => Request::CreateTtl(Record::decode(r)?),
            OpCode::Delete => Request::Delete(Record::decode(r)?),
            OpCode::DeleteContainer => Request::DeleteContainer {
                path: r.read_ustring()?,
            },
            OpCode::Exists => Request::Exists(Record::decode(r)?),
            OpCode::GetData => Request::GetData(Record::decode(r)?),
            OpCode::SetData => Request::SetData(Record::decode(r)?),
            OpCode::GetAcl => Request::GetAcl {
                path: r.read_path()?,
            },
            OpCode::SetAcl => Request::SetAcl(Record::decode(r)?),
            OpCode::GetChildren => Request::GetChildren(Record::decode(r)?),
            OpCode::GetChildren2 => Request::GetChildren2(Record::decode(r)?),
            OpCode::Sync => Request::Sync {
                path: r.read_ustring()?,
            },
            OpCode::Ping => Request::Ping,
            OpCode::Check => Request::Check(Record::decode(r)?),
            OpCode::Multi => Request::Multi(decode_multi(r)?),
            OpCode::MultiRead => Request::MultiRead(decode_multi_read(r)?),
            OpCode::Reconfig => Request::Reconfig(Record::decode(r)?),
            OpCode::CheckWatches => Request::CheckWatches(Record::decode(r)?),
            OpCode::RemoveWatches => Request::RemoveWatches(Record::decode(r)?),
            OpCode::Auth => Request::Auth(Record::decode(r)?),
            OpCode::SetWatches => Request::SetWatches(Record::decode(r)?),
            OpCode::SetWatches2 => Request::SetWatches2(Record::decode(r)?),
            OpCode::Sasl => Request::Sasl(Record::decode(r)?),
            OpCode::GetEphemerals => Request::GetEphemerals {
                prefix_path: r.read_ustring()?,
            },
            OpCode::GetAllChildrenNumber => Request::GetAllChildrenNumber {
                path: r.read_path()?,
            },
            OpCode::AddWatch => Request::AddWatch(Record::decode(r)?),
            OpCode::WhoAmI => Request::WhoAmI,
            OpCode::CloseSession => Request::CloseSession,
            OpCode::Notification | OpCode::Error | OpCode::CreateSession => {
                return Err(DecodeError::UnknownOp(header.op))
            }
        })
    }

    /// Writes `RequestHeader{xid, op}` then the body (no frame length; see [`crate::frame`]).
    pub fn encode(&self, xid: i32, buf: &mut BytesMut) {
        RequestHeader {
            xid,
            op: self.op_code().code(),
        }
        .encode(buf);
        self.encode_body(buf);
    }

    /// Writes the body only.
    pub fn encode_body(&self, buf: &mut BytesMut) {
        match self {
            Request::Create(x) | Request::Create2(x) | Request::CreateContainer(x) => x.encode(buf),
            Request::CreateTtl(x) => x.encode(buf),
            Request::Delete(x) => x.encode(buf),
            Request::DeleteContainer { path }
            | Request::GetAcl { path }
            | Request::Sync { path }
            | Request::GetAllChildrenNumber { path }
            | Request::GetEphemerals { prefix_path: path } => put_ustring(buf, path),
            Request::Exists(x)
            | Request::GetData(x)
            | Request::GetChildren(x)
            | Request::GetChildren2(x) => x.encode(buf),
            Request::SetData(x) => x.encode(buf),
            Request::SetAcl(x) => x.encode(buf),
            Request::Ping | Request::WhoAmI | Request::CloseSession => {}
            Request::Check(x) => x.encode(buf),
            Request::Multi(ops) => {
                for op in ops {
                    op.encode(buf);
                }
                MultiHeader::END.encode(buf);
            }
            Request::MultiRead(ops) => {
                for op in ops {
                    op.encode(buf);
                }
                MultiHeader::END.encode(buf);
            }
            Request::Reconfig(x) => x.encode(buf),
            Request::CheckWatches(x) | Request::RemoveWatches(x) => x.encode(buf),
            Request::Auth(x) => x.encode(buf),
            Request::SetWatches(x) => x.encode(buf),
            Request::SetWatches2(x) => x.encode(buf),
            Request::Sasl(x) => x.encode(buf),
            Request::AddWatch(x) => x.encode(buf),
        }
    }
}

impl MultiOp {
    /// The sub-op's type in its [`MultiHeader`].
    pub fn op_code(&self) -> OpCode {
        match self {
            MultiOp::Create(_) => OpCode::Create,
            MultiOp::Create2(_) => OpCode::Create2,
            MultiOp::CreateContainer(_) => OpCode::CreateContainer,
            MultiOp::CreateTtl(_) => OpCode::CreateTtl,
            MultiOp::Delete(_) => OpCode::Delete,
            MultiOp::SetData(_) => OpCode::SetData,
            MultiOp::Check(_) => OpCode::Check,
        }
    }

    /// Writes `MultiHeader{type, false, -1}` and the sub-op's record, as `MultiOperationRecord`.
    pub fn encode(&self, buf: &mut BytesMut) {
        sub_header(self.op_code()).encode(buf);
        match self {
            MultiOp::Create(x) | MultiOp::Create2(x) | MultiOp::CreateContainer(x) => x.encode(buf),
            MultiOp::CreateTtl(x) => x.encode(buf),
            MultiOp::Delete(x) => x.encode(buf),
            MultiOp::SetData(x) => x.encode(buf),
            MultiOp::Check(x) => x.encode(buf),
        }
    }
}

impl MultiReadOp {
    /// The sub-op's type in its [`MultiHeader`].
    pub fn op_code(&self) -> OpCode {
        match self {
            MultiReadOp::GetChildren(_) => OpCode::GetChildren,
            MultiReadOp::GetData(_) => OpCode::GetData,
        }
    }

    /// Writes `MultiHeader{type, false, -1}` and the sub-op's record.
    pub fn encode(&self, buf: &mut BytesMut) {
        sub_header(self.op_code()).encode(buf);
        match self {
            MultiReadOp::GetChildren(x) | MultiReadOp::GetData(x) => x.encode(buf),
        }
    }
}

fn sub_header(op: OpCode) -> MultiHeader {
    MultiHeader {
        op_type: op.code(),
        done: false,
        err: -1,
    }
}

/// Reads sub-ops until a header with `done` set, as `MultiOperationRecord.deserialize` does (it
/// looks only at `done`, not at the terminator's type or err). Each sub-op takes at least a
/// 9-byte header, so the loop ends with `Truncated` on input that never says done. `sub_op`
/// decodes the body of an allowed op code and returns `None` for any other.
fn decode_sub_ops<T>(
    r: &mut Reader<'_>,
    container: &'static str,
    sub_op: impl Fn(OpCode, &mut Reader<'_>) -> Option<Result<T, DecodeError>>,
) -> Result<Vec<T>, DecodeError> {
    let mut ops = Vec::new();
    loop {
        let h = MultiHeader::decode(r)?;
        if h.done {
            return Ok(ops);
        }
        let op = OpCode::from_i32(h.op_type)
            .and_then(|op| sub_op(op, r))
            .ok_or(DecodeError::InvalidMultiOp {
                op: h.op_type,
                container,
            })??;
        ops.push(op);
    }
}

/// multi's sub-ops: create, create2, createContainer, createTTL, delete, setData, check.
fn decode_multi(r: &mut Reader<'_>) -> Result<Vec<MultiOp>, DecodeError> {
    decode_sub_ops(r, "multi", |op, r| {
        Some(match op {
            OpCode::Create => Record::decode(r).map(MultiOp::Create),
            OpCode::Create2 => Record::decode(r).map(MultiOp::Create2),
            OpCode::CreateContainer => Record::decode(r).map(MultiOp::CreateContainer),
            OpCode::CreateTtl => Record::decode(r).map(MultiOp::CreateTtl),
            OpCode::Delete => Record::decode(r).map(MultiOp::Delete),
            OpCode::SetData => Record::decode(r).map(MultiOp::SetData),
            OpCode::Check => Record::decode(r).map(MultiOp::Check),
            _ => return None,
        })
    })
}

/// multiRead's sub-ops: getChildren (8) and getData (4) only.
fn decode_multi_read(r: &mut Reader<'_>) -> Result<Vec<MultiReadOp>, DecodeError> {
    decode_sub_ops(r, "multiRead", |op, r| {
        Some(match op {
            OpCode::GetChildren => Record::decode(r).map(MultiReadOp::GetChildren),
            OpCode::GetData => Record::decode(r).map(MultiReadOp::GetData),
            _ => return None,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::op::create_mode;

    fn create(path: &str) -> CreateRequest {
        CreateRequest {
            path: path.into(),
            data: Some(b"d".to_vec()),
            acl: vec![Acl {
                perms: 31,
                id: Id {
                    scheme: "world".into(),
                    id: "anyone".into(),
                },
            }],
            flags: create_mode::PERSISTENT,
        }
    }

    fn pw(path: &str) -> PathWatchRequest {
        PathWatchRequest {
            path: path.into(),
            watch: true,
        }
    }

    /// One request per variant.
    fn samples() -> Vec<Request> {
        vec![
            Request::Create(create("/a")),
            Request::Create2(create("/b")),
            Request::CreateContainer(create("/c")),
            Request::CreateTtl(CreateTtlRequest {
                path: "/t".into(),
                data: None,
                acl: vec![],
                flags: create_mode::PERSISTENT_WITH_TTL,
                ttl: 1000,
            }),
            Request::Delete(DeleteRequest {
                path: "/a".into(),
                version: -1,
            }),
            Request::DeleteContainer { path: "/c".into() },
            Request::Exists(pw("/e")),
            Request::GetData(pw("/g")),
            Request::SetData(SetDataRequest {
                path: "/s".into(),
                data: Some(vec![1]),
                version: 2,
            }),
            Request::GetAcl {
                path: "/acl".into(),
            },
            Request::SetAcl(SetAclRequest {
                path: "/acl".into(),
                acl: vec![],
                version: 0,
            }),
            Request::GetChildren(pw("/")),
            Request::GetChildren2(pw("/")),
            Request::Sync { path: "/".into() },
            Request::Ping,
            Request::Check(CheckVersionRequest {
                path: "/k".into(),
                version: 1,
            }),
            Request::Multi(vec![
                MultiOp::Create(create("/m1")),
                MultiOp::Create2(create("/m2")),
                MultiOp::CreateContainer(create("/m3")),
                MultiOp::CreateTtl(CreateTtlRequest {
                    path: "/m4".into(),
                    data: Some(vec![]),
                    acl: vec![],
                    flags: create_mode::PERSISTENT_SEQUENTIAL_WITH_TTL,
                    ttl: 5,
                }),
                MultiOp::Delete(DeleteRequest {
                    path: "/m1".into(),
                    version: 0,
                }),
                MultiOp::SetData(SetDataRequest {
                    path: "/m2".into(),
                    data: None,
                    version: -1,
                }),
                MultiOp::Check(CheckVersionRequest {
                    path: "/m2".into(),
                    version: 1,
                }),
            ]),
            Request::Multi(vec![]),
            Request::MultiRead(vec![
                MultiReadOp::GetChildren(pw("/")),
                MultiReadOp::GetData(pw("/x")),
            ]),
            Request::Reconfig(ReconfigRequest {
                joining_servers: Some("server.2=127.0.0.1:2888:3888".into()),
                leaving_servers: None,
                new_members: None,
                cur_config_id: -1,
            }),
            Request::CheckWatches(WatchesRequest {
                path: "/w".into(),
                watcher_type: 1,
            }),
            Request::RemoveWatches(WatchesRequest {
                path: "/w".into(),
                watcher_type: 3,
            }),
            Request::Auth(AuthPacket {
                auth_type: 0,
                scheme: "digest".into(),
                auth: b"u:p".to_vec(),
            }),
            Request::SetWatches(SetWatches {
                relative_zxid: 5,
                data_watches: vec!["/d".into()],
                exist_watches: vec!["/e".into()],
                child_watches: vec![],
            }),
            Request::SetWatches2(SetWatches2 {
                relative_zxid: 5,
                data_watches: vec![],
                exist_watches: vec![],
                child_watches: vec!["/c".into()],
                persistent_watches: vec!["/p".into()],
                persistent_recursive_watches: vec!["/r".into()],
            }),
            Request::Sasl(SaslRequest { token: vec![9; 3] }),
            Request::GetEphemerals {
                prefix_path: "/".into(),
            },
            Request::GetAllChildrenNumber { path: "/".into() },
            Request::AddWatch(AddWatchRequest {
                path: "/aw".into(),
                mode: 1,
            }),
            Request::WhoAmI,
            Request::CloseSession,
        ]
    }

    fn split(bytes: &[u8]) -> (RequestHeader, &[u8]) {
        let mut r = Reader::new(bytes);
        let h = RequestHeader::decode(&mut r).expect("header");
        (h, r.rest())
    }

    #[test]
    fn every_request_round_trips_and_every_truncation_fails() {
        for req in samples() {
            let mut buf = BytesMut::new();
            req.encode(7, &mut buf);
            let (h, body) = split(&buf);
            assert_eq!(h.xid, 7);
            assert_eq!(h.op, req.op_code().code());
            assert_eq!(Request::decode(&h, body).as_ref(), Ok(&req));
            for n in 0..body.len() {
                assert!(
                    Request::decode(&h, &body[..n]).is_err(),
                    "{n}-byte prefix of {req:?} decoded"
                );
            }
        }
    }

    #[test]
    fn trailing_bytes_are_ignored_like_apache() {
        let req = Request::Sync { path: "/".into() };
        let mut buf = BytesMut::new();
        req.encode(1, &mut buf);
        buf.extend_from_slice(b"junk");
        let (h, body) = split(&buf);
        assert_eq!(Request::decode(&h, body), Ok(req));
    }

    #[test]
    fn unknown_and_server_only_ops_are_unknown() {
        for op in [10, 23, 99, 108, 0, -1, -10, i32::MIN] {
            let h = RequestHeader { xid: 1, op };
            assert_eq!(Request::decode(&h, &[]), Err(DecodeError::UnknownOp(op)));
        }
    }

    #[test]
    fn multi_request_golden_bytes() {
        let req = Request::Multi(vec![
            MultiOp::Delete(DeleteRequest {
                path: "/a".into(),
                version: -1,
            }),
            MultiOp::Check(CheckVersionRequest {
                path: "/b".into(),
                version: 2,
            }),
        ]);
        let mut buf = BytesMut::new();
        req.encode_body(&mut buf);
        #[rustfmt::skip]
        let expected: &[u8] = &[
            0, 0, 0, 2, 0, 0xff, 0xff, 0xff, 0xff,          // MultiHeader{delete, false, -1}
            0, 0, 0, 2, b'/', b'a', 0xff, 0xff, 0xff, 0xff, // DeleteRequest{"/a", -1}
            0, 0, 0, 13, 0, 0xff, 0xff, 0xff, 0xff,         // MultiHeader{check, false, -1}
            0, 0, 0, 2, b'/', b'b', 0, 0, 0, 2,             // CheckVersionRequest{"/b", 2}
            0xff, 0xff, 0xff, 0xff, 1, 0xff, 0xff, 0xff, 0xff, // MultiHeader{-1, true, -1}
        ];
        assert_eq!(&buf[..], expected);
        let h = RequestHeader { xid: 1, op: 14 };
        assert_eq!(Request::decode(&h, expected), Ok(req));
    }

    #[test]
    fn multi_rejects_ops_it_does_not_allow() {
        // getData (4) inside multi.
        let mut body = BytesMut::new();
        MultiReadOp::GetData(pw("/x")).encode(&mut body);
        MultiHeader::END.encode(&mut body);
        let h = RequestHeader { xid: 1, op: 14 };
        assert_eq!(
            Request::decode(&h, &body),
            Err(DecodeError::InvalidMultiOp {
                op: 4,
                container: "multi"
            })
        );
        // create (1) inside multiRead.
        let mut body = BytesMut::new();
        MultiOp::Create(create("/a")).encode(&mut body);
        MultiHeader::END.encode(&mut body);
        let h = RequestHeader { xid: 1, op: 22 };
        assert_eq!(
            Request::decode(&h, &body),
            Err(DecodeError::InvalidMultiOp {
                op: 1,
                container: "multiRead"
            })
        );
        // A nested multi is not allowed either.
        let body = [0, 0, 0, 14, 0, 0xff, 0xff, 0xff, 0xff];
        let h = RequestHeader { xid: 1, op: 14 };
        assert!(Request::decode(&h, &body).is_err());
    }
}
