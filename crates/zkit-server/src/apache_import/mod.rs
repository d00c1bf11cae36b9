//! Importing an Apache ZooKeeper data dir (`zkit serve --import-apache DIR`): the newest valid
//! snapshot and every txn logged after it become a fresh zkit data dir, so a standalone Apache
//! server moves to zkit in one step with its tree, ACLs, sessions (with their timeouts and
//! passwords: a client may even resume its session on zkit), ephemerals, TTL and container
//! nodes, and sequence counters.
//!
//! The parsing is pure ([`parse_snapshot`], [`parse_txn_log`], [`to_txn`], [`build_core`]);
//! [`import_data_dir`] is the I/O around it: list files, read them, write one zkit snapshot.
//! It never writes to the Apache dir.
//!
//! # The formats (ZooKeeper 3.8; jute, big-endian)
//!
//! Both kinds of file sit in `dataDir/version-2/` (or `dataLogDir/version-2/` for logs) and
//! start with a 16-byte `FileHeader`: magic `int` (`"ZKSN"` or `"ZKLG"`), version `int` (2),
//! dbid `long`.
//!
//! `snapshot.<zxid hex>` (`FileSnap.serialize`): the sessions (`int` count, then `long id`,
//! `int timeout` each; `SerializeUtils.serializeSnapshot`); the ACL cache
//! (`ReferenceCountedACLCache.serialize`: `int` count, then `long` id and `vector<ACL>`); the
//! nodes in pre-order (`DataTree.serializeNode`: `ustring path`, the root as `""`, then
//! `DataNode`: `buffer data`, `long acl` id, `StatPersisted`), ended by the path `"/"`; then the
//! seal (`SnapStream.sealStream`): the Adler-32 of every byte before it as a `long`, and `"/"`.
//! A digest section may follow; it is not needed. The snapshot is fuzzy: it was written while
//! txns after `<zxid>` applied, so some of them may already show in it; replaying them is
//! harmless, as it is for Apache (`FileTxnSnapLog.processTransaction` ignores their errors),
//! because every txn carries absolute values (versions, the parent's cversion).
//!
//! `log.<first zxid hex>` (`FileTxnLog`): records of `long` Adler-32 of the entry, `buffer`
//! entry, the byte `'B'`; pre-allocated zeros after the last (a zero length ends the file; a
//! record cut short, the tail of a crash, too). An entry is a `TxnHeader` (`long clientId`,
//! `int cxid`, `long zxid`, `long time`, `int type`), the txn record of that type
//! (`zookeeper.jute`), and possibly a `TxnDigest`, which is ignored.
//!
//! Session passwords are not stored: Apache derives them from the session id
//! (`ZooKeeperServer.generatePasswd`: `java.util.Random(id ^ 0xB3415C00)`, 16 bytes), and so
//! does [`apache_session_password`].

use std::path::{Path, PathBuf};

use zkit_core::image::{ImageBuilder, StoredStat};
use zkit_core::tree::{ttl_owner, CONTAINER_OWNER};
use zkit_core::{Config, Core, RestoreError, Txn, TxnOp};
use zkit_proto::{Acl, DecodeError, Id, Reader};

use crate::storage::datadir::DataDir;
use crate::storage::error::StorageError;
use crate::storage::snapshot::SnapshotStore;
use crate::storage::wal::FsyncMode;

/// `FileSnap.SNAP_MAGIC`: "ZKSN".
const SNAP_MAGIC: i32 = i32::from_be_bytes(*b"ZKSN");
/// `FileTxnLog.TXNLOG_MAGIC`: "ZKLG".
const LOG_MAGIC: i32 = i32::from_be_bytes(*b"ZKLG");
/// `ReferenceCountedACLCache.OPEN_UNSAFE_ACL_ID`: a node with this ACL id is world:anyone:cdrwa.
const OPEN_UNSAFE_ACL_ID: i64 = -1;
/// `ZooKeeperServer.superSecret`.
const SUPER_SECRET: i64 = 0xB341_5C00;

/// Op codes of logged txns (`ZooDefs.OpCode`).
mod op {
    pub const CREATE: i32 = 1;
    pub const DELETE: i32 = 2;
    pub const SET_DATA: i32 = 5;
    pub const SET_ACL: i32 = 7;
    pub const CHECK: i32 = 13;
    pub const MULTI: i32 = 14;
    pub const CREATE2: i32 = 15;
    pub const RECONFIG: i32 = 16;
    pub const CREATE_CONTAINER: i32 = 19;
    pub const DELETE_CONTAINER: i32 = 20;
    pub const CREATE_TTL: i32 = 21;
    pub const CREATE_SESSION: i32 = -10;
    pub const CLOSE_SESSION: i32 = -11;
    pub const ERROR: i32 = -1;
}

/// Why an import failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ImportError {
    /// Reading the Apache dir or writing the zkit dir failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// A file does not parse or fails its checksum.
    #[error("{}: {reason} (at byte {offset})", file.display())]
    Corrupt {
        /// The file.
        file: PathBuf,
        /// Where the problem starts.
        offset: usize,
        /// What is wrong.
        reason: String,
    },
    /// A logged txn does not decode.
    #[error("txn {zxid:#x}: {reason}")]
    BadTxn {
        /// Its zxid.
        zxid: i64,
        /// What is wrong.
        reason: String,
    },
    /// Snapshots exist but none is valid.
    #[error("no valid snapshot in {}: {reason}", dir.display())]
    NoValidSnapshot {
        /// The `version-2` dir.
        dir: PathBuf,
        /// Why the newest one failed.
        reason: String,
    },
    /// No `version-2` dir with snapshots or logs.
    #[error("{} holds no Apache ZooKeeper data (no version-2/snapshot.* or log.*)", .0.display())]
    NoData(PathBuf),
    /// The zkit data dir is not empty.
    #[error("the zkit data dir {} is not empty: an import needs a fresh one", .0.display())]
    NotEmpty(PathBuf),
    /// The image does not make a consistent tree.
    #[error("the imported state is inconsistent: {0}")]
    Inconsistent(#[from] RestoreError),
    /// Writing the zkit data dir failed.
    #[error(transparent)]
    Storage(#[from] StorageError),
}

/// A parsed Apache snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApacheSnapshot {
    /// Sessions: id and negotiated timeout (ms).
    pub sessions: Vec<(i64, i32)>,
    /// Nodes in the file's order (pre-order), the root as `/`.
    pub nodes: Vec<ApacheNode>,
}

/// One node of an Apache snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApacheNode {
    /// Absolute path (`/` for the root).
    pub path: String,
    /// Data (`None`: null).
    pub data: Option<Vec<u8>>,
    /// The ACL, resolved from the snapshot's ACL cache.
    pub acl: Vec<Acl>,
    /// The persisted stat.
    pub stat: StoredStat,
}

/// One logged txn: header fields and the record, undecoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoggedTxn {
    /// The session that sent it (`TxnHeader.clientId`).
    pub session: i64,
    /// Its zxid.
    pub zxid: i64,
    /// Time of the request (ms since the epoch).
    pub time: i64,
    /// Op code.
    pub op_type: i32,
    /// The txn record and whatever follows it (a digest), as logged.
    pub body: Vec<u8>,
}

/// What [`parse_txn_log`] found in one log file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnLog {
    /// The complete, checksummed records, in file order.
    pub txns: Vec<LoggedTxn>,
    /// Bytes of a record cut short at the end (a crash while writing), if any.
    pub torn_tail: Option<usize>,
}

/// The Adler-32 checksum of `bytes` (`java.util.zip.Adler32`).
pub fn adler32(bytes: &[u8]) -> u32 {
    const MOD: u32 = 65_521;
    let (mut a, mut b) = (1u32, 0u32);
    // 5552 bytes is the longest run whose sums cannot overflow u32 before the modulo.
    for chunk in bytes.chunks(5552) {
        for &byte in chunk {
            a += u32::from(byte);
            b += a;
        }
        a %= MOD;
        b %= MOD;
    }
    (b << 16) | a
}

/// The password Apache ZooKeeper gives session `id` (`ZooKeeperServer.generatePasswd`): 16 bytes
/// of `java.util.Random` seeded with `id ^ superSecret`.
pub fn apache_session_password(id: i64) -> Vec<u8> {
    const MULTIPLIER: i64 = 0x5_DEEC_E66D;
    const MASK: i64 = (1 << 48) - 1;
    let mut seed = ((id ^ SUPER_SECRET) ^ MULTIPLIER) & MASK;
    let mut next_int = || {
        seed = (seed.wrapping_mul(MULTIPLIER).wrapping_add(0xB)) & MASK;
        (seed >> 16) as i32
    };
    let mut out = Vec::with_capacity(16);
    while out.len() < 16 {
        let mut rnd = next_int();
        for _ in 0..(16 - out.len()).min(4) {
            out.push(rnd as u8);
            rnd >>= 8;
        }
    }
    out
}

fn read_acl(r: &mut Reader<'_>) -> Result<Acl, DecodeError> {
    let perms = r.read_i32()?;
    let scheme = r.read_ustring()?;
    let id = r.read_ustring()?;
    Ok(Acl {
        perms,
        id: Id { scheme, id },
    })
}

fn read_acls(r: &mut Reader<'_>) -> Result<Vec<Acl>, DecodeError> {
    let n = r.read_i32()?;
    if n < 0 {
        return Ok(Vec::new());
    }
    // Never reserve more than the input could hold (an ACL takes at least 12 bytes).
    let mut acls = Vec::with_capacity((n as usize).min(r.remaining() / 12));
    for _ in 0..n {
        acls.push(read_acl(r)?);
    }
    Ok(acls)
}

fn read_header(r: &mut Reader<'_>, magic: i32) -> Result<(), String> {
    let (got, version) = (
        r.read_i32().map_err(|e| e.to_string())?,
        r.read_i32().map_err(|e| e.to_string())?,
    );
    r.read_i64().map_err(|e| e.to_string())?;
    if got != magic {
        return Err(format!("bad magic {got:#x}"));
    }
    if version != 2 {
        return Err(format!("unsupported version {version}"));
    }
    Ok(())
}

/// Parses an Apache snapshot file and checks its seal (see the module docs).
///
/// # Errors
/// `(offset, reason)` for anything that does not parse or a checksum mismatch.
pub fn parse_snapshot(bytes: &[u8]) -> Result<ApacheSnapshot, (usize, String)> {
    let mut r = Reader::new(bytes);
    let at = |r: &Reader<'_>, e: &dyn std::fmt::Display| (r.position(), e.to_string());
    read_header(&mut r, SNAP_MAGIC).map_err(|e| (0, e))?;
    let count = r.read_i32().map_err(|e| at(&r, &e))?;
    let mut sessions = Vec::new();
    for _ in 0..count.max(0) {
        let id = r.read_i64().map_err(|e| at(&r, &e))?;
        let timeout = r.read_i32().map_err(|e| at(&r, &e))?;
        sessions.push((id, timeout));
    }
    let lists = r.read_i32().map_err(|e| at(&r, &e))?;
    let mut acl_cache = std::collections::HashMap::new();
    for _ in 0..lists.max(0) {
        let id = r.read_i64().map_err(|e| at(&r, &e))?;
        let acls = read_acls(&mut r).map_err(|e| at(&r, &e))?;
        acl_cache.insert(id, acls);
    }
    let mut nodes = Vec::new();
    loop {
        let path = r.read_ustring().map_err(|e| at(&r, &e))?;
        if path == "/" {
            break;
        }
        let data = r.read_opt_buffer().map_err(|e| at(&r, &e))?;
        let acl_id = r.read_i64().map_err(|e| at(&r, &e))?;
        let mut field = || r.read_i64();
        let (czxid, mzxid, ctime, mtime) = (field(), field(), field(), field());
        let (czxid, mzxid, ctime, mtime) = (
            czxid.map_err(|e| at(&r, &e))?,
            mzxid.map_err(|e| at(&r, &e))?,
            ctime.map_err(|e| at(&r, &e))?,
            mtime.map_err(|e| at(&r, &e))?,
        );
        let version = r.read_i32().map_err(|e| at(&r, &e))?;
        let cversion = r.read_i32().map_err(|e| at(&r, &e))?;
        let aversion = r.read_i32().map_err(|e| at(&r, &e))?;
        let ephemeral_owner = r.read_i64().map_err(|e| at(&r, &e))?;
        let pzxid = r.read_i64().map_err(|e| at(&r, &e))?;
        let acl = if acl_id == OPEN_UNSAFE_ACL_ID {
            zkit_core::tree::open_acl()
        } else {
            acl_cache
                .get(&acl_id)
                .cloned()
                .ok_or_else(|| (r.position(), format!("{path}: unknown ACL id {acl_id}")))?
        };
        nodes.push(ApacheNode {
            // The root is written as "" (DataTree.serializeNode starts from an empty path).
            path: if path.is_empty() {
                "/".to_owned()
            } else {
                path
            },
            data,
            acl,
            stat: StoredStat {
                czxid,
                mzxid,
                ctime,
                mtime,
                version,
                cversion,
                aversion,
                ephemeral_owner,
                pzxid,
            },
        });
    }
    let sealed = r.position();
    let checksum = r.read_i64().map_err(|e| at(&r, &e))?;
    let want = i64::from(adler32(&bytes[..sealed]));
    if checksum != want {
        return Err((
            sealed,
            format!("checksum {checksum:#x} does not match the content ({want:#x})"),
        ));
    }
    if r.read_ustring().map_err(|e| at(&r, &e))? != "/" {
        return Err((r.position(), "the seal does not end with \"/\"".to_owned()));
    }
    Ok(ApacheSnapshot { sessions, nodes })
}

/// Parses an Apache txn log file (see the module docs): every complete, checksummed record up
/// to the zero padding or a record cut short at the end.
///
/// # Errors
/// `(offset, reason)` for a bad header, a checksum mismatch or an entry whose header does not
/// parse (damage, not a crash's torn tail: Apache refuses to start on it too).
pub fn parse_txn_log(bytes: &[u8]) -> Result<TxnLog, (usize, String)> {
    let mut r = Reader::new(bytes);
    read_header(&mut r, LOG_MAGIC).map_err(|e| (0, e))?;
    let mut txns = Vec::new();
    loop {
        let start = r.position();
        if r.remaining() == 0 {
            return Ok(TxnLog {
                txns,
                torn_tail: None,
            });
        }
        let torn = |r: &Reader<'_>| {
            Ok(TxnLog {
                txns: txns.clone(),
                torn_tail: Some(r.remaining()),
            })
        };
        let Ok(crc) = r.read_i64() else {
            return torn(&Reader::new(&bytes[start..]));
        };
        let Ok(len) = r.read_i32() else {
            return torn(&Reader::new(&bytes[start..]));
        };
        if len == 0 {
            // Pre-allocated zeros: the end of the log (FileTxnIterator reads a 0-length entry
            // as end of file).
            return Ok(TxnLog {
                txns,
                torn_tail: None,
            });
        }
        let Ok(len) = usize::try_from(len) else {
            return Err((start, format!("negative entry length {len}")));
        };
        let (Ok(entry), Ok(eor)) = (r.read_bytes(len), r.read_bytes(1)) else {
            return torn(&Reader::new(&bytes[start..]));
        };
        if eor != b"B" {
            // Util.readTxnBytes: "Last transaction was partial".
            return torn(&Reader::new(&bytes[start..]));
        }
        let want = i64::from(adler32(entry));
        if crc != want {
            return Err((
                start,
                format!("checksum {crc:#x} does not match the entry ({want:#x})"),
            ));
        }
        let mut e = Reader::new(entry);
        let header = (|| {
            let session = e.read_i64()?;
            let _cxid = e.read_i32()?;
            let zxid = e.read_i64()?;
            let time = e.read_i64()?;
            let op_type = e.read_i32()?;
            Ok::<_, DecodeError>((session, zxid, time, op_type))
        })();
        let (session, zxid, time, op_type) =
            header.map_err(|err| (start, format!("txn header: {err}")))?;
        txns.push(LoggedTxn {
            session,
            zxid,
            time,
            op_type,
            body: e.rest().to_vec(),
        });
    }
}

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
    Ok(match op_type {
        op::CREATE | op::CREATE2 => create(&mut r, &|r| {
            let ephemeral = r.read_bool()?;
            // CreateTxnV0 has no parentCVersion (SerializeUtils.deserializeTxn's fallback).
            let pcv = if r.is_empty() { -1 } else { r.read_i32()? };
            Ok((if ephemeral { session } else { 0 }, pcv))
        })?,
        op::CREATE_CONTAINER => create(&mut r, &|r| Ok((CONTAINER_OWNER, r.read_i32()?)))?,
        op::CREATE_TTL => create(&mut r, &|r| {
            let pcv = r.read_i32()?;
            let ttl = r.read_i64()?;
            Ok((ttl_owner(ttl), pcv))
        })?,
        op::DELETE => TxnOp::Delete {
            path: r.read_ustring().map_err(e)?,
        },
        op::DELETE_CONTAINER => TxnOp::DeleteContainer {
            path: r.read_ustring().map_err(e)?,
        },
        op::SET_DATA | op::RECONFIG => TxnOp::SetData {
            path: r.read_ustring().map_err(e)?,
            data: r.read_opt_buffer().map_err(e)?,
            version: r.read_i32().map_err(e)?,
        },
        op::SET_ACL => TxnOp::SetAcl {
            path: r.read_ustring().map_err(e)?,
            acl: read_acls(&mut r).map_err(e)?,
            version: r.read_i32().map_err(e)?,
        },
        op::CHECK => TxnOp::Check {
            path: r.read_ustring().map_err(e)?,
            version: r.read_i32().map_err(e)?,
        },
        op::CREATE_SESSION => TxnOp::CreateSession {
            timeout_ms: r.read_i32().map_err(e)?,
            passwd: apache_session_password(session),
        },
        // The record (paths to delete, when logged) repeats what the session's ephemerals are.
        op::CLOSE_SESSION => TxnOp::CloseSession,
        op::ERROR => TxnOp::Error {
            err: r.read_i32().map_err(e)?,
        },
        op::MULTI => {
            let n = r.read_i32().map_err(e)?;
            let mut subs = Vec::new();
            for _ in 0..n.max(0) {
                let sub_type = r.read_i32().map_err(e)?;
                let sub_body = r.read_buffer().map_err(e)?;
                subs.push((sub_type, sub_body));
            }
            // DataTree.processTxn: a multi with an error sub-txn failed as a whole and changes
            // nothing.
            if subs.iter().any(|(t, _)| *t == op::ERROR) {
                let errors = subs
                    .iter()
                    .map(|(t, body)| match *t {
                        op::ERROR => to_txn_op(op::ERROR, body, session, parent_cversion),
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
        other => return Err(format!("unknown txn type {other}")),
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

/// What [`import_data_dir`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportReport {
    /// The `version-2` dir read.
    pub source: PathBuf,
    /// The snapshot it started from (its zxid), if any.
    pub snapshot_zxid: Option<i64>,
    /// Txns applied after the snapshot.
    pub replayed: usize,
    /// Log files that ended in a record cut short.
    pub torn_logs: Vec<PathBuf>,
    /// The zxid of the imported state.
    pub last_zxid: i64,
    /// Nodes, and sessions, in the imported state.
    pub nodes: usize,
    /// Sessions in the imported state.
    pub sessions: usize,
}

fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> ImportError {
    let context = context.into();
    move |source| ImportError::Io { context, source }
}

/// `version-2` files of `dir` named `<prefix>.<hex zxid>`, sorted by zxid.
fn zxid_files(dir: &Path, prefix: &str) -> Result<Vec<(i64, PathBuf)>, ImportError> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io(format!("list {}", dir.display())))? {
        let entry = entry.map_err(io(format!("list {}", dir.display())))?;
        let name = entry.file_name();
        let Some(hex) = name.to_str().and_then(|n| n.strip_prefix(prefix)) else {
            continue;
        };
        // Compressed snapshots (.gz, .snappy) are not read.
        if let Ok(zxid) = u64::from_str_radix(hex, 16) {
            files.push((zxid as i64, entry.path()));
        }
    }
    files.sort();
    Ok(files)
}

/// Reads the Apache data dir `apache` (its `version-2/` dir, or that dir itself) into a core:
/// the newest valid snapshot, then the txns logged after it.
///
/// # Errors
/// See [`ImportError`].
pub fn read_data_dir(
    apache: &Path,
    config: Config,
    now: i64,
) -> Result<(Core, ImportReport), ImportError> {
    let dir = if apache.join("version-2").is_dir() {
        apache.join("version-2")
    } else {
        apache.to_path_buf()
    };
    if !dir.is_dir() {
        return Err(ImportError::NoData(apache.to_path_buf()));
    }
    let snapshots = zxid_files(&dir, "snapshot.")?;
    let logs = zxid_files(&dir, "log.")?;
    if snapshots.is_empty() && logs.is_empty() {
        return Err(ImportError::NoData(apache.to_path_buf()));
    }
    // FileSnap.deserialize: the newest snapshot that parses and checks, else the one before.
    let mut snapshot = None;
    let mut newest_error = None;
    for (zxid, path) in snapshots.iter().rev() {
        let bytes = std::fs::read(path).map_err(io(format!("read {}", path.display())))?;
        match parse_snapshot(&bytes) {
            Ok(snap) => {
                snapshot = Some((*zxid, snap));
                break;
            }
            Err((offset, reason)) => {
                tracing::warn!(file = %path.display(), offset, %reason, "skipping an invalid snapshot");
                newest_error
                    .get_or_insert(format!("{}: {reason} at byte {offset}", path.display()));
            }
        }
    }
    if snapshot.is_none() && !snapshots.is_empty() {
        return Err(ImportError::NoValidSnapshot {
            dir,
            reason: newest_error.unwrap_or_default(),
        });
    }
    let from = snapshot.as_ref().map_or(0, |(zxid, _)| *zxid);
    // FileTxnLog.getLogFiles: the newest log starting at or before the snapshot, and all later.
    let first = logs
        .iter()
        .rposition(|(start, _)| *start <= from)
        .unwrap_or(0);
    let mut txns = Vec::new();
    let mut torn_logs = Vec::new();
    for (_, path) in &logs[first.min(logs.len())..] {
        let bytes = std::fs::read(path).map_err(io(format!("read {}", path.display())))?;
        let log = parse_txn_log(&bytes).map_err(|(offset, reason)| ImportError::Corrupt {
            file: path.clone(),
            offset,
            reason,
        })?;
        if log.torn_tail.is_some() {
            torn_logs.push(path.clone());
        }
        txns.extend(log.txns);
    }
    let replayed = txns.iter().filter(|t| t.zxid > from).count();
    let core = build_core(config, now, snapshot.as_ref().map(|(z, s)| (*z, s)), &txns)?;
    let report = ImportReport {
        source: dir,
        snapshot_zxid: snapshot.as_ref().map(|(z, _)| *z),
        replayed,
        torn_logs,
        last_zxid: core.last_zxid(),
        nodes: core.tree().len(),
        sessions: core.sessions().count(),
    };
    Ok((core, report))
}

/// Imports the Apache data dir `apache` into the fresh zkit data dir `zkit` (created if
/// missing; refused when not empty) as one zkit snapshot, which `zkit serve` then starts from.
///
/// # Errors
/// See [`ImportError`].
pub fn import_data_dir(
    apache: &Path,
    zkit: &Path,
    config: Config,
    now: i64,
) -> Result<ImportReport, ImportError> {
    if zkit.exists() {
        let mut entries =
            std::fs::read_dir(zkit).map_err(io(format!("list {}", zkit.display())))?;
        if entries.next().is_some() {
            return Err(ImportError::NotEmpty(zkit.to_path_buf()));
        }
    }
    let (core, report) = read_data_dir(apache, config, now)?;
    let dir = DataDir::open(zkit)?;
    let store = SnapshotStore::open(dir.snap_dir(), FsyncMode::Always)?;
    store.write_snapshot(core.last_zxid(), &core.snapshot())?;
    Ok(report)
}

/// [`import_data_dir`] into `config`'s data dir, with the state machine settings `config`
/// gives the server (extended types decide what a TTL owner means), at the current time.
///
/// # Errors
/// See [`ImportError`]; [`ImportError::NoData`] names the zkit side when `config` has no data
/// dir (an in-memory server cannot be imported into).
pub fn import_for_server(
    apache: &Path,
    config: &crate::ServerConfig,
) -> Result<ImportReport, ImportError> {
    let Some(zkit) = config.data_dir.as_deref() else {
        return Err(ImportError::Io {
            context: "an import needs a data dir (not --in-memory)".to_owned(),
            source: std::io::Error::from(std::io::ErrorKind::InvalidInput),
        });
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    import_data_dir(apache, zkit, config.core_config(), now)
}

#[cfg(test)]
mod tests {
    use bytes::BytesMut;
    use zkit_proto::codec::{put_buffer, put_i32, put_i64, put_ustring};

    use super::*;

    #[test]
    fn adler32_and_passwords_match_java() {
        // Values printed by java.util.zip.Adler32 and ZooKeeperServer.generatePasswd's Random.
        assert_eq!(adler32(b"Wikipedia"), 0x11e6_0398);
        assert_eq!(adler32(&[0u8; 100_000]), {
            // a = 1, b = 100000 mod 65521.
            (100_000u32 % 65_521) << 16 | 1
        });
        let hex = |b: Vec<u8>| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
        assert_eq!(
            hex(apache_session_password(0)),
            "f22acd4a97e69d6d20a49bb638eadb38"
        );
        assert_eq!(
            hex(apache_session_password(0x1000_00a1_b2c3_0000)),
            "1f00d00ac018d54595d5f8280917d5b2"
        );
        assert_eq!(
            hex(apache_session_password(-5)),
            "d47144b5e45e45c49c3b7fdcd66257ba"
        );
    }

    fn header(buf: &mut BytesMut, magic: &[u8; 4]) {
        buf.extend_from_slice(magic);
        put_i32(buf, 2);
        put_i64(buf, -1);
    }

    fn node(buf: &mut BytesMut, path: &str, data: &[u8], acl: i64, czxid: i64, owner: i64) {
        put_ustring(buf, path);
        put_buffer(buf, data);
        put_i64(buf, acl);
        for v in [czxid, czxid, 100, 100] {
            put_i64(buf, v);
        }
        for v in [0, 0, 0] {
            put_i32(buf, v);
        }
        put_i64(buf, owner);
        put_i64(buf, czxid);
    }

    fn snapshot_bytes(seal_ok: bool) -> Vec<u8> {
        let mut b = BytesMut::new();
        header(&mut b, b"ZKSN");
        put_i32(&mut b, 1); // sessions
        put_i64(&mut b, 0x77);
        put_i32(&mut b, 4000);
        put_i32(&mut b, 1); // ACL lists
        put_i64(&mut b, 1);
        put_i32(&mut b, 1);
        put_i32(&mut b, 1); // READ
        put_ustring(&mut b, "world");
        put_ustring(&mut b, "anyone");
        node(&mut b, "", b"", -1, 0, 0);
        node(&mut b, "/a", b"x", 1, 2, 0);
        node(&mut b, "/a/e", b"", -1, 3, 0x77);
        put_ustring(&mut b, "/");
        let sum = adler32(&b) ^ u32::from(!seal_ok);
        put_i64(&mut b, i64::from(sum));
        put_ustring(&mut b, "/");
        b.to_vec()
    }

    #[test]
    fn snapshot_parses_and_checks_its_seal() {
        let snap = parse_snapshot(&snapshot_bytes(true)).unwrap();
        assert_eq!(snap.sessions, [(0x77, 4000)]);
        let paths: Vec<&str> = snap.nodes.iter().map(|n| n.path.as_str()).collect();
        assert_eq!(paths, ["/", "/a", "/a/e"]);
        assert_eq!(snap.nodes[1].acl[0].perms, 1);
        assert_eq!(snap.nodes[2].stat.ephemeral_owner, 0x77);
        let err = parse_snapshot(&snapshot_bytes(false)).unwrap_err();
        assert!(err.1.contains("checksum"), "{err:?}");
        // Truncated anywhere: an error, never a panic.
        let full = snapshot_bytes(true);
        for cut in 0..full.len() {
            assert!(parse_snapshot(&full[..cut]).is_err(), "cut at {cut}");
        }
    }

    fn log_record(buf: &mut BytesMut, zxid: i64, op_type: i32, body: &[u8]) {
        let mut e = BytesMut::new();
        put_i64(&mut e, 0x77);
        put_i32(&mut e, 1);
        put_i64(&mut e, zxid);
        put_i64(&mut e, 1000 + zxid);
        put_i32(&mut e, op_type);
        e.extend_from_slice(body);
        put_i64(buf, i64::from(adler32(&e)));
        put_buffer(buf, &e);
        buf.extend_from_slice(b"B");
    }

    #[test]
    fn log_records_apply_on_the_snapshot() {
        let mut log = BytesMut::new();
        header(&mut log, b"ZKLG");
        // zxid 3 is in the (fuzzy) snapshot already; its replay must change nothing.
        let mut create = BytesMut::new();
        put_ustring(&mut create, "/a/e");
        put_buffer(&mut create, b"");
        put_i32(&mut create, 0);
        create.extend_from_slice(&[1]);
        put_i32(&mut create, 2);
        log_record(&mut log, 3, op::CREATE, &create);
        let mut set = BytesMut::new();
        put_ustring(&mut set, "/a");
        put_buffer(&mut set, b"y");
        put_i32(&mut set, 1);
        log_record(&mut log, 5, op::SET_DATA, &set);
        log_record(&mut log, 6, op::CLOSE_SESSION, &[]);
        let mut torn = log.clone();
        torn.extend_from_slice(&[0, 0, 0]);
        log.extend_from_slice(&[0u8; 64]); // pre-allocated zeros
        let parsed = parse_txn_log(&log).unwrap();
        assert_eq!(parsed.txns.len(), 3);
        assert_eq!(parsed.torn_tail, None);
        assert_eq!(parse_txn_log(&torn).unwrap().torn_tail, Some(3));
        let mut bad = log.clone();
        bad[16 + 20] ^= 1; // inside the first entry
        assert!(parse_txn_log(&bad).unwrap_err().1.contains("checksum"));

        let snap = parse_snapshot(&snapshot_bytes(true)).unwrap();
        let core = build_core(Config::default(), 0, Some((2, &snap)), &parsed.txns).unwrap();
        assert_eq!(core.last_zxid(), 6);
        let a = core.tree().get("/a").unwrap();
        assert_eq!((a.data(), a.version, a.mzxid), (Some(&b"y"[..]), 1, 5));
        // The session closed: its ephemeral went with it, and so did the session.
        assert!(core.tree().get("/a/e").is_none());
        assert_eq!(core.sessions().count(), 0);
    }

    #[test]
    fn records_decode_by_type() {
        let cv = |_: &str| 4;
        let mut ttl = BytesMut::new();
        put_ustring(&mut ttl, "/t");
        put_buffer(&mut ttl, b"d");
        put_i32(&mut ttl, 0);
        put_i32(&mut ttl, 9);
        put_i64(&mut ttl, 5000);
        match to_txn_op(op::CREATE_TTL, &ttl, 1, &cv).unwrap() {
            TxnOp::Create {
                ephemeral_owner,
                parent_cversion,
                ..
            } => assert_eq!((ephemeral_owner, parent_cversion), (ttl_owner(5000), 9)),
            other => panic!("{other:?}"),
        }
        // An old CreateTxn without parentCVersion: the parent's current one + 1.
        let mut v0 = BytesMut::new();
        put_ustring(&mut v0, "/p/c");
        put_buffer(&mut v0, b"");
        put_i32(&mut v0, 0);
        v0.extend_from_slice(&[0]);
        match to_txn_op(op::CREATE, &v0, 1, &cv).unwrap() {
            TxnOp::Create {
                parent_cversion, ..
            } => assert_eq!(parent_cversion, 5),
            other => panic!("{other:?}"),
        }
        // A failed multi changes nothing.
        let mut multi = BytesMut::new();
        put_i32(&mut multi, 2);
        put_i32(&mut multi, op::DELETE);
        let mut del = BytesMut::new();
        put_ustring(&mut del, "/x");
        put_buffer(&mut multi, &del);
        put_i32(&mut multi, op::ERROR);
        let mut err = BytesMut::new();
        put_i32(&mut err, -101);
        put_buffer(&mut multi, &err);
        assert_eq!(
            to_txn_op(op::MULTI, &multi, 1, &cv).unwrap(),
            TxnOp::Multi(vec![TxnOp::Error { err: 0 }, TxnOp::Error { err: -101 }])
        );
        assert!(to_txn_op(99, &[], 1, &cv).is_err());
        assert!(to_txn_op(op::SET_DATA, &[0, 0], 1, &cv).is_err());
    }
}
