//! Apache's logged txns as zkit txns, and the core they build on top of a snapshot.

use zkit_core::image::ImageBuilder;
use zkit_core::tree::{ttl_owner, CONTAINER_OWNER};
use zkit_core::{Config, Core, Txn, TxnOp};
use zkit_proto::{DecodeError, OpCode, Reader};

use super::error::ImportError;
use super::format::{apache_session_password, read_acls, ApacheSnapshot, LoggedTxn};

/// Reads the end of a create record: the raw ephemeralOwner and the parent's new cversion.
type OwnerOf<'a> = dyn Fn(&mut Reader<'_>) -> Result<(i64, i32), DecodeError> + 'a;

/// Decodes one txn record of type `op_type` into a zkit txn op. `parent_cversion` gives the
/// stored cversion of a path's parent now, for records that leave it to replay (`-1`).
///
/// # Errors
/// An unknown type or a record that does not decode.
pub fn to_txn_op(
    op_type: i32,
    body: &[u8],
    session: i64,
    parent_cversion: &dyn Fn(&str) -> i32,
) -> Result<TxnOp, String> {
    let mut r = Reader::new(body);
    let e = |err: DecodeError| format!("op {op_type}: {err}");
    let create = |r: &mut Reader<'_>, owner_of: &OwnerOf<'_>| -> Result<TxnOp, String> {
        let path = r.read_ustring().map_err(e)?;
        let data = r.read_opt_buffer().map_err(e)?;
        let acl = read_acls(r).map_err(e)?;
        let (ephemeral_owner, mut pcv) = owner_of(r).map_err(e)?;
        if pcv == -1 {
            // DataTree.createNode: an old log leaves the parent's new cversion to replay.
            pcv = parent_cversion(&path).saturating_add(1);
        }
        Ok(TxnOp::Create {
            path,
            data,
            acl,
            ephemeral_owner,
            parent_cversion: pcv,
        })
    };
    Ok(match OpCode::from_i32(op_type) {
        Some(OpCode::Create | OpCode::Create2) => create(&mut r, &|r| {
            let ephemeral = r.read_bool()?;
            // CreateTxnV0 has no parentCVersion (SerializeUtils.deserializeTxn's fallback).
            let pcv = if r.is_empty() { -1 } else { r.read_i32()? };
            Ok((if ephemeral { session } else { 0 }, pcv))
        })?,
        Some(OpCode::CreateContainer) => create(&mut r, &|r| Ok((CONTAINER_OWNER, r.read_i32()?)))?,
        Some(OpCode::CreateTtl) => create(&mut r, &|r| {
            let pcv = r.read_i32()?;
            let ttl = r.read_i64()?;
            Ok((ttl_owner(ttl), pcv))
        })?,
        Some(OpCode::Delete) => TxnOp::Delete {
            path: r.read_ustring().map_err(e)?,
        },
        Some(OpCode::DeleteContainer) => TxnOp::DeleteContainer {
            path: r.read_ustring().map_err(e)?,
        },
        Some(OpCode::SetData | OpCode::Reconfig) => TxnOp::SetData {
            path: r.read_ustring().map_err(e)?,
            data: r.read_opt_buffer().map_err(e)?,
            version: r.read_i32().map_err(e)?,
        },
        Some(OpCode::SetAcl) => TxnOp::SetAcl {
            path: r.read_ustring().map_err(e)?,
            acl: read_acls(&mut r).map_err(e)?,
            version: r.read_i32().map_err(e)?,
        },
        Some(OpCode::Check) => TxnOp::Check {
            path: r.read_ustring().map_err(e)?,
            version: r.read_i32().map_err(e)?,
        },
        Some(OpCode::CreateSession) => TxnOp::CreateSession {
            timeout_ms: r.read_i32().map_err(e)?,
            passwd: apache_session_password(session),
        },
        // The record (paths to delete, when logged) repeats what the session's ephemerals are.
        Some(OpCode::CloseSession) => TxnOp::CloseSession,
        Some(OpCode::Error) => TxnOp::Error {
            err: r.read_i32().map_err(e)?,
        },
        Some(OpCode::Multi) => {
            let n = r.read_i32().map_err(e)?;
            let mut subs = Vec::new();
            for _ in 0..n.max(0) {
                let sub_type = r.read_i32().map_err(e)?;
                let sub_body = r.read_buffer().map_err(e)?;
                subs.push((sub_type, sub_body));
            }
            // DataTree.processTxn: a multi with an error sub-txn failed as a whole and changes
            // nothing.
            if subs.iter().any(|(t, _)| *t == i32::from(OpCode::Error)) {
                let errors = subs
                    .iter()
                    .map(|(t, body)| match OpCode::from_i32(*t) {
                        Some(OpCode::Error) => to_txn_op(*t, body, session, parent_cversion),
                        _ => Ok(TxnOp::Error { err: 0 }),
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                TxnOp::Multi(errors)
            } else {
                // Sub-txns see the parents' cversions of before the multi; only the old-log
                // case (-1) reads them, and multi came after parentCVersion was logged.
                TxnOp::Multi(
                    subs.iter()
                        .map(|(t, body)| to_txn_op(*t, body, session, parent_cversion))
                        .collect::<Result<Vec<_>, _>>()?,
                )
            }
        }
        _ => return Err(format!("unknown txn type {op_type}")),
    })
}

/// The zkit core holding `snapshot` (taken at `snapshot_zxid`; `None`: start from an empty
/// tree, as Apache does without one) and then every txn of `txns` after it, applied in zxid
/// order through [`Core::apply`].
///
/// # Errors
/// An inconsistent snapshot, or a txn that does not decode (with its zxid).
pub fn build_core(
    config: Config,
    now: i64,
    snapshot: Option<(i64, &ApacheSnapshot)>,
    txns: &[LoggedTxn],
) -> Result<Core, ImportError> {
    let mut core = match snapshot {
        Some((zxid, snap)) => {
            let mut image = ImageBuilder::new(config, now);
            for node in &snap.nodes {
                image.node(&node.path, node.data.as_deref(), &node.acl, &node.stat)?;
            }
            for &(id, timeout) in &snap.sessions {
                image.session(id, timeout, apache_session_password(id));
            }
            image.finish(zxid)?
        }
        None => Core::new(config, now),
    };
    let mut sorted: Vec<&LoggedTxn> = txns.iter().filter(|t| t.zxid > core.last_zxid()).collect();
    sorted.sort_by_key(|t| t.zxid);
    sorted.dedup_by_key(|t| t.zxid);
    for logged in sorted {
        let op = {
            let tree = core.tree();
            let parent_cversion = |path: &str| {
                zkit_core::path::parent_of(path)
                    .and_then(|p| tree.get(p))
                    .map_or(0, |n| n.cversion)
            };
            to_txn_op(
                logged.op_type,
                &logged.body,
                logged.session,
                &parent_cversion,
            )
        }
        .map_err(|reason| ImportError::BadTxn {
            zxid: logged.zxid,
            reason,
        })?;
        core.apply(&Txn {
            zxid: logged.zxid,
            session: logged.session,
            time: logged.time,
            op,
        });
    }
    // Replay queued watch events for connections that do not exist.
    drop(core.ready());
    Ok(core)
}
