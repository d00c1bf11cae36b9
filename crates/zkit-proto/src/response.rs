//! A server response body: [`Response`], and its encoding (after a `ReplyHeader` with err 0).
//!
//! [`Response::encode`] writes the body only; the server writes the [`ReplyHeader`] and the
//! frame. [`Response::decode`] exists for test clients: the body's shape depends on the request's
//! op code, which the wire does not repeat. Multi and multiRead follow Apache's `MultiResponse`
//! byte for byte: each result is `MultiHeader{type, false, err}` plus its body, then
//! `MultiHeader{-1, true, -1}`.

use bytes::BytesMut;

use crate::codec::{
    put_i32, put_opt_buffer, put_string_vec, put_ustring, put_vec, DecodeError, Reader, Record,
};
use crate::op::OpCode;
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
    /// GetDataResponse{data, stat}; `data` is `None` for a node created or set with null data
    /// (sent as buffer length -1, as Apache does).
    GetData { data: Option<Vec<u8>>, stat: Stat },
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

impl Response {
    /// Writes the body (nothing for [`Response::Empty`]).
    pub fn encode(&self, buf: &mut BytesMut) {
        match self {
            Response::Empty => {}
            Response::Create { path } | Response::Sync { path } => put_ustring(buf, path),
            Response::Create2 { path, stat } => {
                put_ustring(buf, path);
                stat.encode(buf);
            }
            Response::Stat(stat) => stat.encode(buf),
            Response::GetData { data, stat } => {
                put_opt_buffer(buf, data.as_deref());
                stat.encode(buf);
            }
            Response::GetAcl { acl, stat } => {
                put_vec(buf, acl);
                stat.encode(buf);
            }
            Response::GetChildren { children } => put_string_vec(buf, children),
            Response::GetChildren2 { children, stat } => {
                put_string_vec(buf, children);
                stat.encode(buf);
            }
            Response::Multi(results) => {
                for result in results {
                    result.encode(buf);
                }
                MultiHeader::END.encode(buf);
            }
            Response::MultiRead(results) => {
                for result in results {
                    result.encode(buf);
                }
                MultiHeader::END.encode(buf);
            }
            Response::Ephemerals(paths) => put_string_vec(buf, paths),
            Response::AllChildrenNumber(n) => put_i32(buf, *n),
            Response::WhoAmI(infos) => put_vec(buf, infos),
            Response::Error(err) => put_i32(buf, *err),
        }
    }

    /// Decodes the body of a successful (err 0) reply to a request with op code `op`.
    /// Trailing bytes are ignored.
    ///
    /// # Errors
    /// A malformed body, or [`DecodeError::UnknownOp`] for ops whose reply has no [`Response`]
    /// shape (sasl, notification, error, createSession).
    pub fn decode(op: OpCode, body: &[u8]) -> Result<Response, DecodeError> {
        let r = &mut Reader::new(body);
        Ok(match op {
            OpCode::Create => Response::Create {
                path: r.read_ustring()?,
            },
            OpCode::Create2 | OpCode::CreateContainer | OpCode::CreateTtl => Response::Create2 {
                path: r.read_ustring()?,
                stat: Stat::decode(r)?,
            },
            OpCode::Delete
            | OpCode::DeleteContainer
            | OpCode::Ping
            | OpCode::Check
            | OpCode::CheckWatches
            | OpCode::RemoveWatches
            | OpCode::Auth
            | OpCode::SetWatches
            | OpCode::SetWatches2
            | OpCode::CloseSession => Response::Empty,
            OpCode::Exists | OpCode::SetData | OpCode::SetAcl => Response::Stat(Stat::decode(r)?),
            // reconfig answers with the new config as a GetDataResponse.
            OpCode::GetData | OpCode::Reconfig => Response::GetData {
                data: r.read_opt_buffer()?,
                stat: Stat::decode(r)?,
            },
            OpCode::GetAcl => Response::GetAcl {
                acl: r.read_vec()?,
                stat: Stat::decode(r)?,
            },
            OpCode::GetChildren => Response::GetChildren {
                children: r.read_string_vec()?,
            },
            OpCode::GetChildren2 => Response::GetChildren2 {
                children: r.read_string_vec()?,
                stat: Stat::decode(r)?,
            },
            OpCode::Sync => Response::Sync {
                path: r.read_ustring()?,
            },
            OpCode::Multi => Response::Multi(decode_results(r, MultiResult::decode_one)?),
            OpCode::MultiRead => {
                Response::MultiRead(decode_results(r, MultiReadResult::decode_one)?)
            }
            OpCode::GetEphemerals => Response::Ephemerals(r.read_string_vec()?),
            OpCode::GetAllChildrenNumber => Response::AllChildrenNumber(r.read_i32()?),
            OpCode::WhoAmI => Response::WhoAmI(r.read_vec()?),
            OpCode::AddWatch => Response::Error(r.read_i32()?),
            OpCode::Sasl | OpCode::Notification | OpCode::Error | OpCode::CreateSession => {
                return Err(DecodeError::UnknownOp(op.code()))
            }
        })
    }
}

/// Appends one framed reply: `ReplyHeader`, then `body` only when `header.err` is 0 (ZooKeeper
/// sends no body with an error). Returns the payload length.
pub fn encode_reply(buf: &mut BytesMut, header: &ReplyHeader, body: &Response) -> usize {
    crate::frame::encode_frame(buf, |b| {
        header.encode(b);
        if header.err == 0 {
            body.encode(b);
        }
    })
}

/// Appends one framed watch notification: `ReplyHeader{xid: -1, zxid, err: 0}` + the event.
/// Apache up to 3.8 sends zxid -1 here; 3.9 sends the triggering zxid.
pub fn encode_notification(buf: &mut BytesMut, zxid: i64, event: &WatcherEvent) -> usize {
    crate::frame::encode_frame(buf, |b| {
        ReplyHeader {
            xid: crate::op::xid::NOTIFICATION,
            zxid,
            err: 0,
        }
        .encode(b);
        event.encode(b);
    })
}

/// Reads results until a header with `done` set (only `done` is looked at, as in Apache).
fn decode_results<T>(
    r: &mut Reader<'_>,
    one: fn(MultiHeader, &mut Reader<'_>) -> Result<T, DecodeError>,
) -> Result<Vec<T>, DecodeError> {
    let mut out = Vec::new();
    loop {
        let h = MultiHeader::decode(r)?;
        if h.done {
            return Ok(out);
        }
        out.push(one(h, r)?);
    }
}

fn result_header(op_type: i32, err: i32) -> MultiHeader {
    MultiHeader {
        op_type,
        done: false,
        err,
    }
}

impl MultiResult {
    /// Writes `MultiHeader{type, false, err}` and the result's body.
    pub fn encode(&self, buf: &mut BytesMut) {
        match self {
            MultiResult::Create { path } => {
                result_header(OpCode::Create.code(), 0).encode(buf);
                put_ustring(buf, path);
            }
            MultiResult::Create2 { path, stat } => {
                result_header(OpCode::Create2.code(), 0).encode(buf);
                put_ustring(buf, path);
                stat.encode(buf);
            }
            MultiResult::Delete => result_header(OpCode::Delete.code(), 0).encode(buf),
            MultiResult::SetData { stat } => {
                result_header(OpCode::SetData.code(), 0).encode(buf);
                stat.encode(buf);
            }
            MultiResult::Check => result_header(OpCode::Check.code(), 0).encode(buf),
            MultiResult::Error { err } => {
                result_header(OpCode::Error.code(), *err).encode(buf);
                put_i32(buf, *err);
            }
        }
    }

    fn decode_one(h: MultiHeader, r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(match OpCode::from_i32(h.op_type) {
            Some(OpCode::Create) => MultiResult::Create {
                path: r.read_ustring()?,
            },
            Some(OpCode::Create2) => MultiResult::Create2 {
                path: r.read_ustring()?,
                stat: Stat::decode(r)?,
            },
            Some(OpCode::Delete) => MultiResult::Delete,
            Some(OpCode::SetData) => MultiResult::SetData {
                stat: Stat::decode(r)?,
            },
            Some(OpCode::Check) => MultiResult::Check,
            // The body's err is authoritative; Apache reads only ErrorResponse here.
            Some(OpCode::Error) => MultiResult::Error { err: r.read_i32()? },
            _ => {
                return Err(DecodeError::InvalidMultiOp {
                    op: h.op_type,
                    container: "multi response",
                })
            }
        })
    }
}

impl MultiReadResult {
    /// Writes `MultiHeader{type, false, err}` and the result's body.
    pub fn encode(&self, buf: &mut BytesMut) {
        match self {
            MultiReadResult::GetChildren { children } => {
                result_header(OpCode::GetChildren.code(), 0).encode(buf);
                put_string_vec(buf, children);
            }
            MultiReadResult::GetData { data, stat } => {
                result_header(OpCode::GetData.code(), 0).encode(buf);
                put_opt_buffer(buf, data.as_deref());
                stat.encode(buf);
            }
            MultiReadResult::Error { err } => {
                result_header(OpCode::Error.code(), *err).encode(buf);
                put_i32(buf, *err);
            }
        }
    }

    fn decode_one(h: MultiHeader, r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(match OpCode::from_i32(h.op_type) {
            Some(OpCode::GetChildren) => MultiReadResult::GetChildren {
                children: r.read_string_vec()?,
            },
            Some(OpCode::GetData) => MultiReadResult::GetData {
                data: r.read_opt_buffer()?,
                stat: Stat::decode(r)?,
            },
            Some(OpCode::Error) => MultiReadResult::Error { err: r.read_i32()? },
            _ => {
                return Err(DecodeError::InvalidMultiOp {
                    op: h.op_type,
                    container: "multiRead response",
                })
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(n: i64) -> Stat {
        Stat {
            czxid: n,
            mzxid: n,
            pzxid: n,
            num_children: 1,
            ..Stat::default()
        }
    }

    /// One response per shape, with the op it answers.
    fn samples() -> Vec<(OpCode, Response)> {
        vec![
            (OpCode::Delete, Response::Empty),
            (OpCode::Create, Response::Create { path: "/a".into() }),
            (
                OpCode::CreateTtl,
                Response::Create2 {
                    path: "/t".into(),
                    stat: stat(3),
                },
            ),
            (OpCode::SetData, Response::Stat(stat(4))),
            (
                OpCode::GetData,
                Response::GetData {
                    data: Some(b"v".to_vec()),
                    stat: stat(5),
                },
            ),
            (
                OpCode::GetAcl,
                Response::GetAcl {
                    acl: vec![Acl {
                        perms: 1,
                        id: Id {
                            scheme: "ip".into(),
                            id: "127.0.0.1".into(),
                        },
                    }],
                    stat: stat(6),
                },
            ),
            (
                OpCode::GetChildren,
                Response::GetChildren {
                    children: vec!["x".into(), "y".into()],
                },
            ),
            (
                OpCode::GetChildren2,
                Response::GetChildren2 {
                    children: vec![],
                    stat: stat(7),
                },
            ),
            (OpCode::Sync, Response::Sync { path: "/".into() }),
            (
                OpCode::Multi,
                Response::Multi(vec![
                    MultiResult::Create { path: "/a".into() },
                    MultiResult::Create2 {
                        path: "/b0000000001".into(),
                        stat: stat(8),
                    },
                    MultiResult::Delete,
                    MultiResult::SetData { stat: stat(8) },
                    MultiResult::Check,
                ]),
            ),
            (
                OpCode::MultiRead,
                Response::MultiRead(vec![
                    MultiReadResult::GetChildren {
                        children: vec!["c".into()],
                    },
                    MultiReadResult::GetData {
                        data: None,
                        stat: stat(9),
                    },
                    MultiReadResult::Error { err: -101 },
                ]),
            ),
            (
                OpCode::GetEphemerals,
                Response::Ephemerals(vec!["/e1".into()]),
            ),
            (
                OpCode::GetAllChildrenNumber,
                Response::AllChildrenNumber(42),
            ),
            (
                OpCode::WhoAmI,
                Response::WhoAmI(vec![ClientInfo {
                    auth_scheme: "ip".into(),
                    user: "127.0.0.1".into(),
                }]),
            ),
            (OpCode::AddWatch, Response::Error(0)),
        ]
    }

    #[test]
    fn every_response_round_trips_and_every_truncation_fails() {
        for (op, resp) in samples() {
            let mut buf = BytesMut::new();
            resp.encode(&mut buf);
            assert_eq!(Response::decode(op, &buf).as_ref(), Ok(&resp), "{op:?}");
            for n in 0..buf.len() {
                assert!(
                    Response::decode(op, &buf[..n]).is_err(),
                    "{n}-byte prefix of {resp:?} decoded"
                );
            }
        }
    }

    /// A failed multi as Apache sends it: ops before the failure ErrorResult(0), the failing
    /// one its code (NoNode -101), later ones RuntimeInconsistency (-2); header err = code.
    #[test]
    fn failed_multi_golden_bytes() {
        let resp = Response::Multi(vec![
            MultiResult::Error { err: 0 },
            MultiResult::Error { err: -101 },
            MultiResult::Error { err: -2 },
        ]);
        let mut buf = BytesMut::new();
        resp.encode(&mut buf);
        #[rustfmt::skip]
        let expected: &[u8] = &[
            0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, /* ErrorResponse */ 0, 0, 0, 0,
            0xff, 0xff, 0xff, 0xff, 0, 0xff, 0xff, 0xff, 0x9b, /* ErrorResponse */ 0xff, 0xff, 0xff, 0x9b,
            0xff, 0xff, 0xff, 0xff, 0, 0xff, 0xff, 0xff, 0xfe, /* ErrorResponse */ 0xff, 0xff, 0xff, 0xfe,
            0xff, 0xff, 0xff, 0xff, 1, 0xff, 0xff, 0xff, 0xff,
        ];
        assert_eq!(&buf[..], expected);
        assert_eq!(Response::decode(OpCode::Multi, expected), Ok(resp));
    }

    #[test]
    fn successful_multi_golden_bytes() {
        let resp = Response::Multi(vec![
            MultiResult::Create { path: "/a".into() },
            MultiResult::Delete,
        ]);
        let mut buf = BytesMut::new();
        resp.encode(&mut buf);
        #[rustfmt::skip]
        let expected: &[u8] = &[
            0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 2, b'/', b'a',
            0, 0, 0, 2, 0, 0, 0, 0, 0,
            0xff, 0xff, 0xff, 0xff, 1, 0xff, 0xff, 0xff, 0xff,
        ];
        assert_eq!(&buf[..], expected);
    }

    #[test]
    fn replies_carry_a_body_only_without_error() {
        let body = Response::Sync { path: "/".into() };
        let mut buf = BytesMut::new();
        let ok = ReplyHeader {
            xid: 3,
            zxid: 9,
            err: 0,
        };
        assert_eq!(encode_reply(&mut buf, &ok, &body), 16 + 5);
        let failed = ReplyHeader { err: -101, ..ok };
        assert_eq!(encode_reply(&mut buf, &failed, &body), 16);
        assert_eq!(&buf[..4], &[0, 0, 0, 21]);
        assert_eq!(&buf[25..29], &[0, 0, 0, 16]);

        let mut buf = BytesMut::new();
        let event = WatcherEvent {
            event_type: 1,
            state: 3,
            path: "/a".into(),
        };
        encode_notification(&mut buf, -1, &event);
        #[rustfmt::skip]
        let expected: &[u8] = &[
            0, 0, 0, 30,
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0,
            0, 0, 0, 1, 0, 0, 0, 3, 0, 0, 0, 2, b'/', b'a',
        ];
        assert_eq!(&buf[..], expected);
    }

    #[test]
    fn unknown_multi_result_type_is_an_error() {
        let body = [0, 0, 0, 4, 0, 0, 0, 0, 0];
        assert!(matches!(
            Response::decode(OpCode::Multi, &body),
            Err(DecodeError::InvalidMultiOp { op: 4, .. })
        ));
    }
}
