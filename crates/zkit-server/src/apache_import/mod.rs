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

mod error;
mod format;
mod replay;

use std::path::{Path, PathBuf};

use zkit_core::{Config, Core};

pub use self::error::ImportError;
pub use self::format::{
    adler32, apache_session_password, parse_snapshot, parse_txn_log, ApacheNode, ApacheSnapshot,
    LoggedTxn, TxnLog,
};
pub use self::replay::{build_core, to_txn_op};
use crate::storage::datadir::DataDir;
use crate::storage::snapshot::SnapshotStore;
use crate::storage::wal::FsyncMode;

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
    use zkit_core::tree::ttl_owner;
    use zkit_core::TxnOp;
    use zkit_proto::codec::{put_buffer, put_i32, put_i64, put_ustring};

    use super::*;
    use zkit_proto::OpCode;

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
        log_record(&mut log, 3, i32::from(OpCode::Create), &create);
        let mut set = BytesMut::new();
        put_ustring(&mut set, "/a");
        put_buffer(&mut set, b"y");
        put_i32(&mut set, 1);
        log_record(&mut log, 5, i32::from(OpCode::SetData), &set);
        log_record(&mut log, 6, i32::from(OpCode::CloseSession), &[]);
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
        match to_txn_op(i32::from(OpCode::CreateTtl), &ttl, 1, &cv).unwrap() {
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
        match to_txn_op(i32::from(OpCode::Create), &v0, 1, &cv).unwrap() {
            TxnOp::Create {
                parent_cversion, ..
            } => assert_eq!(parent_cversion, 5),
            other => panic!("{other:?}"),
        }
        // A failed multi changes nothing.
        let mut multi = BytesMut::new();
        put_i32(&mut multi, 2);
        put_i32(&mut multi, i32::from(OpCode::Delete));
        let mut del = BytesMut::new();
        put_ustring(&mut del, "/x");
        put_buffer(&mut multi, &del);
        put_i32(&mut multi, i32::from(OpCode::Error));
        let mut err = BytesMut::new();
        put_i32(&mut err, -101);
        put_buffer(&mut multi, &err);
        assert_eq!(
            to_txn_op(i32::from(OpCode::Multi), &multi, 1, &cv).unwrap(),
            TxnOp::Multi(vec![TxnOp::Error { err: 0 }, TxnOp::Error { err: -101 }])
        );
        assert!(to_txn_op(99, &[], 1, &cv).is_err());
        assert!(to_txn_op(i32::from(OpCode::SetData), &[0, 0], 1, &cv).is_err());
    }
}
