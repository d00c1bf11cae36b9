//! Txns: every state change, as logged in the WAL and replayed by `Core::apply`, and their
//! binary encoding (jute primitives from `zkit_proto::codec`).
//!
//! A txn carries everything replay needs to be deterministic: the resolved sequential path,
//! the parent's new cversion, the raw ephemeralOwner (session, container marker or TTL), the
//! new versions. Failed writes are logged too ([`TxnOp::Error`]): as in Apache, they consume a
//! zxid. Encoding: `long zxid, long session, long time` then the op as `int type` (ZooKeeper's
//! op code) and its fields.

use bytes::BytesMut;
use zkit_proto::codec::{put_buffer, put_i32, put_i64, put_opt_buffer, put_ustring, put_vec};
use zkit_proto::{Acl, DecodeError, OpCode, Reader};

/// A state change, as logged in the WAL and replayed through [`crate::Core::apply`].
#[derive(Debug, Clone, PartialEq)]
pub struct Txn {
    /// The zxid this txn creates.
    pub zxid: i64,
    /// Session that caused it (0 for internal txns such as reaping).
    pub session: i64,
    /// Time (ms since epoch) of the request; becomes ctime/mtime.
    pub time: i64,
    /// What it does.
    pub op: TxnOp,
}

/// The operation of a [`Txn`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum TxnOp {
    /// A new session.
    CreateSession {
        /// Negotiated timeout (ms).
        timeout_ms: i32,
        /// Password.
        passwd: Vec<u8>,
    },
    /// Session closed or expired; its ephemerals are deleted in the same txn.
    CloseSession,
    /// A node is created (any create op, any mode).
    Create {
        /// Final path (sequential suffix included).
        path: String,
        /// Data; `None` is null (kept, as Apache's CreateTxn keeps it).
        data: Option<Vec<u8>>,
        /// ACL after fix-up.
        acl: Vec<Acl>,
        /// Raw ephemeralOwner: 0, a session id, the container marker or a TTL encoding.
        ephemeral_owner: i64,
        /// The parent's stored cversion after this create.
        parent_cversion: i32,
    },
    /// A node is deleted by a client.
    Delete {
        /// Path.
        path: String,
    },
    /// A container or expired TTL node is deleted (reaper, or op 20).
    DeleteContainer {
        /// Path.
        path: String,
    },
    /// Data is replaced.
    SetData {
        /// Path.
        path: String,
        /// New data; `None` is null.
        data: Option<Vec<u8>>,
        /// New version.
        version: i32,
    },
    /// ACL is replaced.
    SetAcl {
        /// Path.
        path: String,
        /// New ACL (after fix-up).
        acl: Vec<Acl>,
        /// New aversion.
        version: i32,
    },
    /// A version check that passed (changes nothing; kept for multi fidelity).
    Check {
        /// Path.
        path: String,
        /// The node's version + 1, as Apache's CheckVersionTxn records it.
        version: i32,
    },
    /// All sub-ops of a successful multi, under one zxid.
    Multi(Vec<TxnOp>),
    /// A write that failed (changes nothing but the last zxid).
    Error {
        /// The error code returned to the client.
        err: i32,
    },
}

/// Nesting limit for decoding: multi contains plain ops only, so depth 2 is plenty.
const MAX_DEPTH: usize = 2;

impl TxnOp {
    fn encode(&self, buf: &mut BytesMut) {
        match self {
            TxnOp::CreateSession { timeout_ms, passwd } => {
                put_i32(buf, OpCode::CreateSession.into());
                put_i32(buf, *timeout_ms);
                put_buffer(buf, passwd);
            }
            TxnOp::CloseSession => put_i32(buf, OpCode::CloseSession.into()),
            TxnOp::Create {
                path,
                data,
                acl,
                ephemeral_owner,
                parent_cversion,
            } => {
                put_i32(buf, OpCode::Create.into());
                put_ustring(buf, path);
                put_opt_buffer(buf, data.as_deref());
                put_vec(buf, acl);
                put_i64(buf, *ephemeral_owner);
                put_i32(buf, *parent_cversion);
            }
            TxnOp::Delete { path } => {
                put_i32(buf, OpCode::Delete.into());
                put_ustring(buf, path);
            }
            TxnOp::DeleteContainer { path } => {
                put_i32(buf, OpCode::DeleteContainer.into());
                put_ustring(buf, path);
            }
            TxnOp::SetData {
                path,
                data,
                version,
            } => {
                put_i32(buf, OpCode::SetData.into());
                put_ustring(buf, path);
                put_opt_buffer(buf, data.as_deref());
                put_i32(buf, *version);
            }
            TxnOp::SetAcl { path, acl, version } => {
                put_i32(buf, OpCode::SetAcl.into());
                put_ustring(buf, path);
                put_vec(buf, acl);
                put_i32(buf, *version);
            }
            TxnOp::Check { path, version } => {
                put_i32(buf, OpCode::Check.into());
                put_ustring(buf, path);
                put_i32(buf, *version);
            }
            TxnOp::Multi(ops) => {
                put_i32(buf, OpCode::Multi.into());
                put_i32(buf, i32::try_from(ops.len()).unwrap_or(i32::MAX));
                for op in ops {
                    op.encode(buf);
                }
            }
            TxnOp::Error { err } => {
                put_i32(buf, OpCode::Error.into());
                put_i32(buf, *err);
            }
        }
    }

    fn decode(r: &mut Reader<'_>, depth: usize) -> Result<TxnOp, DecodeError> {
        let t = r.read_i32()?;
        Ok(match OpCode::from_i32(t) {
            Some(OpCode::CreateSession) => TxnOp::CreateSession {
                timeout_ms: r.read_i32()?,
                passwd: r.read_buffer()?,
            },
            Some(OpCode::CloseSession) => TxnOp::CloseSession,
            Some(OpCode::Create) => TxnOp::Create {
                path: r.read_ustring()?,
                data: r.read_opt_buffer()?,
                acl: r.read_vec()?,
                ephemeral_owner: r.read_i64()?,
                parent_cversion: r.read_i32()?,
            },
            Some(OpCode::Delete) => TxnOp::Delete {
                path: r.read_ustring()?,
            },
            Some(OpCode::DeleteContainer) => TxnOp::DeleteContainer {
                path: r.read_ustring()?,
            },
            Some(OpCode::SetData) => TxnOp::SetData {
                path: r.read_ustring()?,
                data: r.read_opt_buffer()?,
                version: r.read_i32()?,
            },
            Some(OpCode::SetAcl) => TxnOp::SetAcl {
                path: r.read_ustring()?,
                acl: r.read_vec()?,
                version: r.read_i32()?,
            },
            Some(OpCode::Check) => TxnOp::Check {
                path: r.read_ustring()?,
                version: r.read_i32()?,
            },
            Some(OpCode::Multi) if depth < MAX_DEPTH => {
                let n = r.read_i32()?;
                // Each sub-op takes at least its 4-byte tag: reject absurd counts up front.
                let n = usize::try_from(n)
                    .ok()
                    .filter(|n| n.saturating_mul(4) <= r.remaining())
                    .ok_or(DecodeError::InvalidLength(n.into()))?;
                let mut ops = Vec::with_capacity(n);
                for _ in 0..n {
                    ops.push(TxnOp::decode(r, depth + 1)?);
                }
                TxnOp::Multi(ops)
            }
            Some(OpCode::Error) => TxnOp::Error { err: r.read_i32()? },
            _ => return Err(DecodeError::UnknownOp(t)),
        })
    }
}

impl Txn {
    /// Appends the binary encoding.
    pub fn encode(&self, buf: &mut BytesMut) {
        put_i64(buf, self.zxid);
        put_i64(buf, self.session);
        put_i64(buf, self.time);
        self.op.encode(buf);
    }

    /// Decodes one txn that fills `bytes` exactly.
    ///
    /// # Errors
    /// Truncated input, bad lengths, unknown op types, or trailing bytes.
    pub fn decode(bytes: &[u8]) -> Result<Txn, DecodeError> {
        let mut r = Reader::new(bytes);
        let txn = Txn {
            zxid: r.read_i64()?,
            session: r.read_i64()?,
            time: r.read_i64()?,
            op: TxnOp::decode(&mut r, 0)?,
        };
        match r.remaining() {
            0 => Ok(txn),
            n => Err(DecodeError::TrailingBytes(n)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zkit_proto::Id;

    fn all_ops() -> Vec<TxnOp> {
        let acl = vec![Acl {
            perms: 31,
            id: Id {
                scheme: "world".into(),
                id: "anyone".into(),
            },
        }];
        let create = TxnOp::Create {
            path: "/a/b0000000001".into(),
            data: Some(b"x".to_vec()),
            acl: acl.clone(),
            ephemeral_owner: i64::MIN,
            parent_cversion: 2,
        };
        vec![
            TxnOp::CreateSession {
                timeout_ms: 4000,
                passwd: vec![7; 16],
            },
            TxnOp::CloseSession,
            create.clone(),
            TxnOp::Delete { path: "/a".into() },
            TxnOp::DeleteContainer { path: "/c".into() },
            TxnOp::SetData {
                path: "/a".into(),
                data: None,
                version: 3,
            },
            TxnOp::SetAcl {
                path: "/a".into(),
                acl,
                version: 1,
            },
            TxnOp::Check {
                path: "/a".into(),
                version: 1,
            },
            TxnOp::Multi(vec![create, TxnOp::Delete { path: "/x".into() }]),
            TxnOp::Multi(vec![]),
            TxnOp::Error { err: -110 },
        ]
    }

    #[test]
    fn round_trip_and_truncation() {
        for op in all_ops() {
            let txn = Txn {
                zxid: 0x1_0000_0002,
                session: 0x1234,
                time: 1_700_000_000_000,
                op,
            };
            let mut buf = BytesMut::new();
            txn.encode(&mut buf);
            assert_eq!(Txn::decode(&buf), Ok(txn.clone()));
            for n in 0..buf.len() {
                assert!(Txn::decode(&buf[..n]).is_err(), "prefix {n} of {txn:?}");
            }
            buf.extend_from_slice(&[0]);
            assert!(Txn::decode(&buf).is_err());
        }
    }

    #[test]
    fn garbage_does_not_panic() {
        let mut buf = BytesMut::new();
        put_i64(&mut buf, 1);
        put_i64(&mut buf, 1);
        put_i64(&mut buf, 1);
        put_i32(&mut buf, OpCode::Multi.into());
        put_i32(&mut buf, i32::MAX);
        assert!(Txn::decode(&buf).is_err());
        assert!(Txn::decode(&[0xff; 40]).is_err());
    }
}
