//! Apache's file formats, parsed: the snapshot with its seal, the txn log with its checksums,
//! and the session passwords Apache derives from session ids (see the parent module's docs).

use zkit_core::image::StoredStat;
use zkit_proto::{Acl, DecodeError, Id, Reader};

/// `FileSnap.SNAP_MAGIC`: "ZKSN".
const SNAP_MAGIC: i32 = i32::from_be_bytes(*b"ZKSN");
/// `FileTxnLog.TXNLOG_MAGIC`: "ZKLG".
const LOG_MAGIC: i32 = i32::from_be_bytes(*b"ZKLG");
/// `ReferenceCountedACLCache.OPEN_UNSAFE_ACL_ID`: a node with this ACL id is world:anyone:cdrwa.
const OPEN_UNSAFE_ACL_ID: i64 = -1;
/// `ZooKeeperServer.superSecret`.
const SUPER_SECRET: i64 = 0xB341_5C00;

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

pub(super) fn read_acls(r: &mut Reader<'_>) -> Result<Vec<Acl>, DecodeError> {
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
