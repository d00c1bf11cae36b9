//! Writes: every write request is prepped against an [`Overlay`] (Apache's
//! `PrepRequestProcessor`, in its check order), turned into one txn, applied and logged; the
//! reply is shaped by the op. A write that fails prep is logged too, as an error txn: it
//! consumes a zxid and changes nothing else, as in Apache. multi preps every sub-op before
//! anything is applied: all of them commit under one zxid, or none.

use zkit_proto::{
    CheckVersionRequest, CreateRequest, CreateTtlRequest, DeleteRequest, ErrorCode, MultiOp,
    MultiResult, Response, SetAclRequest, SetDataRequest,
};

use super::apply::OpOutcome;
use crate::conn::ConnId;
use crate::prep::{CreateOp, Overlay};
use crate::{Core, Txn, TxnOp};

/// The reply shape of a write that succeeds (a failed write has none: see
/// `Core::failed_write`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WriteKind {
    Create,
    Create2,
    Delete,
    SetData,
    SetAcl,
    Check,
}

/// The create flavour of a multi sub-op. Apache's `MultiOperationRecord` rebuilds every create
/// sub-op with `Op.create(path, data, acl, flags[, ttl])`, whose op code comes from the flags
/// alone: TTL modes → createTTL, CONTAINER → createContainer, anything else → create. So the
/// wire op code (1, 15, 19, 21) is ignored: a create2 inside a multi answers a plain
/// CreateResult without stat (observed on 3.8), and a create with the CONTAINER flag makes a
/// container.
fn multi_create_kind(flags: i32, ttl: i64) -> CreateOp {
    use zkit_proto::op::create_mode as cm;
    match flags {
        cm::CONTAINER => CreateOp::Container,
        cm::PERSISTENT_WITH_TTL | cm::PERSISTENT_SEQUENTIAL_WITH_TTL => CreateOp::Ttl(ttl),
        _ => CreateOp::Create,
    }
}

impl Core {
    /// Preps with `f`; logs and applies the txn it yields, or, when prep fails, the error txn
    /// of a failed write. Returns the outcome of the op or the error code.
    fn prep_commit(
        &mut self,
        now: i64,
        conn: ConnId,
        session: i64,
        f: impl FnOnce(&mut Overlay<'_>) -> Result<TxnOp, ErrorCode>,
    ) -> Result<OpOutcome, i32> {
        let auth = self.auth_info(conn);
        let op = match f(&mut Overlay::lone(&self.tree, session, &auth)) {
            Ok(op) => op,
            Err(e) => {
                self.commit_failed(now, session, e);
                return Err(e as i32);
            }
        };
        let outcomes = self.commit(Txn {
            zxid: self.next_zxid(),
            session,
            time: now,
            op,
        });
        match outcomes.last() {
            Some(o) if o.err == 0 => Ok(o),
            Some(o) => Err(o.err),
            None => Err(ErrorCode::SystemError as i32),
        }
    }

    /// Logs the error txn of a failed write (Apache's `ErrorTxn`): it consumes a zxid and
    /// changes nothing else.
    fn commit_failed(&mut self, now: i64, session: i64, err: ErrorCode) {
        self.commit(Txn {
            zxid: self.next_zxid(),
            session,
            time: now,
            op: TxnOp::Error { err: err as i32 },
        });
    }

    /// A write that fails whatever it asks for (reconfig on a standalone server, a client's
    /// deleteContainer, a write whose body did not decode): its error txn, then the error
    /// reply. It has no `WriteKind`: there is no successful reply to shape.
    pub(super) fn failed_write(
        &mut self,
        now: i64,
        conn: ConnId,
        xid: i32,
        session: i64,
        err: ErrorCode,
    ) {
        self.commit_failed(now, session, err);
        self.reply_err(conn, xid, err);
    }

    fn write(
        &mut self,
        now: i64,
        conn: ConnId,
        xid: i32,
        session: i64,
        kind: WriteKind,
        f: impl FnOnce(&mut Overlay<'_>) -> Result<TxnOp, ErrorCode>,
    ) {
        match self.prep_commit(now, conn, session, f) {
            Err(e) => self.reply(conn, xid, e, Response::Empty),
            Ok(o) => {
                let stat = o.stat.unwrap_or_default();
                let body = match kind {
                    WriteKind::Create => Response::Create { path: o.path },
                    WriteKind::Create2 => Response::Create2 { path: o.path, stat },
                    WriteKind::Delete | WriteKind::Check => Response::Empty,
                    WriteKind::SetData | WriteKind::SetAcl => Response::Stat(stat),
                };
                self.reply(conn, xid, 0, body);
            }
        }
    }

    /// create (1), create2 (15), createContainer (19); createTTL (21) comes through
    /// [`Core::create_ttl`].
    pub(super) fn create(
        &mut self,
        now: i64,
        conn: ConnId,
        xid: i32,
        session: i64,
        op: CreateOp,
        r: CreateRequest,
    ) {
        let kind = if op == CreateOp::Create {
            WriteKind::Create
        } else {
            WriteKind::Create2
        };
        self.write(now, conn, xid, session, kind, |o| {
            o.create(op, &r.path, r.data, r.acl, r.flags)
        });
    }

    /// createTTL (21): a create whose op carries the ttl.
    pub(super) fn create_ttl(
        &mut self,
        now: i64,
        conn: ConnId,
        xid: i32,
        session: i64,
        r: CreateTtlRequest,
    ) {
        let op = CreateOp::Ttl(r.ttl);
        let r = CreateRequest {
            path: r.path,
            data: r.data,
            acl: r.acl,
            flags: r.flags,
        };
        self.create(now, conn, xid, session, op, r);
    }

    /// delete (2).
    pub(super) fn delete(
        &mut self,
        now: i64,
        conn: ConnId,
        xid: i32,
        session: i64,
        r: DeleteRequest,
    ) {
        self.write(now, conn, xid, session, WriteKind::Delete, |o| {
            o.delete(&r.path, r.version)
        });
    }

    /// deleteContainer (20) from a client. Apache 3.8 reads its path from the raw request
    /// buffer (`new String(request.request.array())`), which starts with the request header,
    /// so the "path" always holds NUL bytes: BadArguments, as a failed write. Only the reaper
    /// really deletes containers.
    pub(super) fn delete_container(&mut self, now: i64, conn: ConnId, xid: i32, session: i64) {
        self.failed_write(now, conn, xid, session, ErrorCode::BadArguments);
    }

    /// setData (5).
    pub(super) fn set_data(
        &mut self,
        now: i64,
        conn: ConnId,
        xid: i32,
        session: i64,
        r: SetDataRequest,
    ) {
        self.write(now, conn, xid, session, WriteKind::SetData, |o| {
            o.set_data(r.path, r.data, r.version)
        });
    }

    /// setACL (7).
    pub(super) fn set_acl(
        &mut self,
        now: i64,
        conn: ConnId,
        xid: i32,
        session: i64,
        r: SetAclRequest,
    ) {
        self.write(now, conn, xid, session, WriteKind::SetAcl, |o| {
            o.set_acl(&r.path, &r.acl, r.version)
        });
    }

    /// check (13) outside a multi. Apache 3.8 logs a CheckVersionTxn and then sends no reply
    /// at all when the check passes (FinalRequestProcessor has no `case check`, so the client
    /// waits forever). We answer err 0 with no body, like check inside a multi (the
    /// conformance suite records the difference).
    pub(super) fn check(
        &mut self,
        now: i64,
        conn: ConnId,
        xid: i32,
        session: i64,
        r: CheckVersionRequest,
    ) {
        self.write(now, conn, xid, session, WriteKind::Check, |o| {
            o.check(&r.path, r.version)
        });
    }

    /// reconfig (16). Standalone 3.8 has reconfigEnabled false → ReconfigDisabled, as a failed
    /// write (it consumes a zxid, like every failed write in Apache).
    pub(super) fn reconfig(&mut self, now: i64, conn: ConnId, xid: i32, session: i64) {
        self.failed_write(now, conn, xid, session, ErrorCode::ReconfigDisabled);
    }

    /// multi (14): every sub-op prepped against the overlay first; all or nothing; one zxid.
    pub(super) fn multi(
        &mut self,
        now: i64,
        conn: ConnId,
        xid: i32,
        session: i64,
        ops: Vec<MultiOp>,
    ) {
        let auth = self.auth_info(conn);
        let mut failed = None;
        let mut txn_ops = Vec::with_capacity(ops.len());
        {
            let mut overlay = Overlay::new(&self.tree, session, &auth);
            for (i, op) in ops.iter().enumerate() {
                let r = match op {
                    MultiOp::Create(r) | MultiOp::Create2(r) | MultiOp::CreateContainer(r) => {
                        let kind = multi_create_kind(r.flags, -1);
                        overlay.create(kind, &r.path, r.data.clone(), r.acl.clone(), r.flags)
                    }
                    MultiOp::CreateTtl(r) => {
                        let kind = multi_create_kind(r.flags, r.ttl);
                        overlay.create(kind, &r.path, r.data.clone(), r.acl.clone(), r.flags)
                    }
                    MultiOp::Delete(r) => overlay.delete(&r.path, r.version),
                    MultiOp::SetData(r) => {
                        overlay.set_data(r.path.clone(), r.data.clone(), r.version)
                    }
                    MultiOp::Check(r) => overlay.check(&r.path, r.version),
                };
                match r {
                    Ok(t) => txn_ops.push(t),
                    Err(e) => {
                        failed = Some((i, e));
                        break;
                    }
                }
            }
        }
        let results = if let Some((at, e)) = failed {
            self.commit_failed(now, session, e);
            (0..ops.len())
                .map(|i| MultiResult::Error {
                    err: match i.cmp(&at) {
                        std::cmp::Ordering::Less => 0,
                        std::cmp::Ordering::Equal => e as i32,
                        std::cmp::Ordering::Greater => ErrorCode::RuntimeInconsistency as i32,
                    },
                })
                .collect()
        } else {
            let outcomes = self.commit(Txn {
                zxid: self.next_zxid(),
                session,
                time: now,
                op: TxnOp::Multi(txn_ops),
            });
            ops.iter()
                .zip(outcomes.into_vec())
                .map(|(op, o)| {
                    if o.err != 0 {
                        return MultiResult::Error { err: o.err };
                    }
                    let stat = o.stat.unwrap_or_default();
                    match op {
                        MultiOp::Create(r) | MultiOp::Create2(r) | MultiOp::CreateContainer(r)
                            if multi_create_kind(r.flags, -1) == CreateOp::Create =>
                        {
                            MultiResult::Create { path: o.path }
                        }
                        MultiOp::CreateTtl(r)
                            if multi_create_kind(r.flags, r.ttl) == CreateOp::Create =>
                        {
                            MultiResult::Create { path: o.path }
                        }
                        MultiOp::Create(_)
                        | MultiOp::Create2(_)
                        | MultiOp::CreateContainer(_)
                        | MultiOp::CreateTtl(_) => MultiResult::Create2 { path: o.path, stat },
                        MultiOp::Delete(_) => MultiResult::Delete,
                        MultiOp::SetData(_) => MultiResult::SetData { stat },
                        MultiOp::Check(_) => MultiResult::Check,
                    }
                })
                .collect()
        };
        self.reply(conn, xid, 0, Response::Multi(results));
    }
}
