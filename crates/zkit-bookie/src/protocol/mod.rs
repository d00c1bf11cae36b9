//! The bookie wire protocol: framing, requests, responses, status codes. Pure: no I/O, no
//! clock; the server and the client only move bytes. `docs/BOOKIE-PROTOCOL.md` describes every
//! byte; this module is its implementation.
//!
//! Every message, both ways, is a frame: a 4-byte big-endian length, then that many bytes. The
//! body starts with a version byte ([`VERSION`]), an op byte and an 8-byte request id; a
//! response adds a 2-byte [`Status`] and, when the status is `Ok`, the op's result.
//!
//! Decoding is check-then-parse: "not enough bytes yet" is `Ok(None)`. A frame that cannot be
//! trusted (length over the limit, body too short for its header, unknown version) is a
//! [`FrameError`]: the server answers once and closes the connection. A well-framed request that
//! is wrong inside (unknown op, negative id, bad flags, trailing bytes, entry header naming
//! another entry) decodes to [`Decoded::Bad`]: the server answers `BadRequest` and keeps the
//! connection, because the framing is intact.

pub mod entry;

use bytes::{Buf, BufMut, Bytes, BytesMut};

use entry::{EntryHeader, MasterKey, ENTRY_HEADER_LEN, MASTER_KEY_LEN, MIN_DIGEST_LEN};

/// The protocol version this code speaks. A peer that sends another is answered `BadVersion`
/// and disconnected; a later version may add ops and fields, never change existing ones.
pub const VERSION: u8 = 1;

/// Default frame limit: 5 MiB, BookKeeper's `nettyMaxFrameSizeBytes` default.
pub const DEFAULT_MAX_FRAME: usize = 5 * 1024 * 1024;

/// Bytes of the body header: version, op, request id.
pub const REQUEST_HEADER_LEN: usize = 1 + 1 + 8;
/// Bytes of a response body header: version, op, request id, status.
pub const RESPONSE_HEADER_LEN: usize = REQUEST_HEADER_LEN + 2;

/// Add flag: a recovery add, accepted on a fenced ledger (BookKeeper's `FLAG_RECOVERY_ADD`).
pub const FLAG_RECOVERY_ADD: u16 = 0x0002;
/// Read flag: fence the ledger before reading (BookKeeper's `FLAG_DO_FENCING`).
pub const FLAG_DO_FENCING: u16 = 0x0001;

/// Longest long-poll wait a request may ask for.
pub const MAX_LONG_POLL_MS: u32 = 60_000;
/// Most ledger ids one list request may ask for.
pub const MAX_LIST: u32 = 10_000;

/// Operation codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Op {
    /// Add an entry.
    Add = 1,
    /// Read an entry (optionally fencing first).
    Read = 2,
    /// Read the last-add-confirmed and last entry id the bookie has.
    ReadLac = 3,
    /// Wait until the bookie's LAC passes a given value, then return it and the next entry
    /// (BookKeeper's `ReadLastConfirmedAndEntry` long poll).
    LongPollLac = 4,
    /// Fence a ledger.
    Fence = 5,
    /// List the ledger ids this bookie holds.
    ListLedgers = 6,
    /// Free space, read-only state and counts.
    BookieInfo = 7,
}

impl Op {
    /// The op for a code, if known.
    pub fn from_code(code: u8) -> Option<Op> {
        Some(match code {
            1 => Op::Add,
            2 => Op::Read,
            3 => Op::ReadLac,
            4 => Op::LongPollLac,
            5 => Op::Fence,
            6 => Op::ListLedgers,
            7 => Op::BookieInfo,
            _ => return None,
        })
    }
}

/// Response status codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u16)]
pub enum Status {
    /// Success.
    Ok = 0,
    /// The bookie has no such ledger.
    NoLedger = 1,
    /// The ledger has no such entry on this bookie.
    NoEntry = 2,
    /// The ledger is fenced: only recovery adds are accepted.
    Fenced = 3,
    /// The master key does not match the ledger's.
    Unauthorized = 4,
    /// The bookie is read-only (disk full): adds are rejected, reads served.
    ReadOnly = 5,
    /// The frame or entry is over the limit.
    TooLarge = 6,
    /// The request is malformed.
    BadRequest = 7,
    /// The protocol version is not supported.
    BadVersion = 8,
    /// The bookie failed to store or read (disk error).
    IoError = 9,
    /// The bookie is stopping.
    ShuttingDown = 10,
}

impl Status {
    /// The status for a code, if known.
    pub fn from_code(code: u16) -> Option<Status> {
        Some(match code {
            0 => Status::Ok,
            1 => Status::NoLedger,
            2 => Status::NoEntry,
            3 => Status::Fenced,
            4 => Status::Unauthorized,
            5 => Status::ReadOnly,
            6 => Status::TooLarge,
            7 => Status::BadRequest,
            8 => Status::BadVersion,
            9 => Status::IoError,
            10 => Status::ShuttingDown,
            _ => return None,
        })
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self, f)
    }
}

/// A frame that cannot be trusted: answer once (if possible) and close the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// The length prefix exceeds the limit.
    #[error("frame length {len} exceeds the limit of {max} bytes")]
    TooLarge {
        /// Announced length.
        len: usize,
        /// Limit.
        max: usize,
    },
    /// The body is shorter than its fixed header.
    #[error("frame body of {0} bytes is shorter than the message header")]
    TooShort(usize),
    /// The version byte is not [`VERSION`].
    #[error("unsupported protocol version {version}")]
    BadVersion {
        /// The version sent.
        version: u8,
        /// The request id, for the answer.
        request_id: u64,
    },
}

impl FrameError {
    /// The status to answer with.
    pub fn status(&self) -> Status {
        match self {
            FrameError::TooLarge { .. } => Status::TooLarge,
            FrameError::TooShort(_) => Status::BadRequest,
            FrameError::BadVersion { .. } => Status::BadVersion,
        }
    }

    /// The request id to answer with (0 when it could not be read).
    pub fn request_id(&self) -> u64 {
        match self {
            FrameError::BadVersion { request_id, .. } => *request_id,
            _ => 0,
        }
    }
}

/// A request decoded from a sound frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decoded<T> {
    /// Well formed.
    Ok(T),
    /// Framed correctly but wrong inside; answer `status` to `request_id` and go on.
    Bad {
        /// Request id from the header.
        request_id: u64,
        /// Op code from the header (may be unknown).
        op: u8,
        /// Status to answer.
        status: Status,
        /// What was wrong (for logs).
        reason: &'static str,
    },
}

/// Add an entry to a ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddRequest {
    /// Ledger id (≥ 0).
    pub ledger_id: i64,
    /// Entry id (≥ 0); equal to the id in the entry's header.
    pub entry_id: i64,
    /// [`FLAG_RECOVERY_ADD`] or 0.
    pub flags: u16,
    /// The ledger's master key.
    pub master_key: MasterKey,
    /// The encoded entry (header, digest, payload), stored as is.
    pub entry: Bytes,
}

impl AddRequest {
    /// A recovery add (accepted on a fenced ledger).
    pub fn is_recovery(&self) -> bool {
        self.flags & FLAG_RECOVERY_ADD != 0
    }

    /// The LAC carried in the entry's header.
    pub fn lac(&self) -> i64 {
        EntryHeader::parse(&self.entry).map_or(-1, |h| h.lac)
    }
}

/// Read an entry, optionally fencing the ledger first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadRequest {
    /// Ledger id (≥ 0).
    pub ledger_id: i64,
    /// Entry id (≥ 0).
    pub entry_id: i64,
    /// With fencing: the master key; the ledger is fenced (durably) before the read answers.
    pub fence: Option<MasterKey>,
}

/// Wait until the LAC passes `previous_lac`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LongPollRequest {
    /// Ledger id (≥ 0).
    pub ledger_id: i64,
    /// Answer once the bookie's LAC is above this (≥ -1).
    pub previous_lac: i64,
    /// Longest wait, in milliseconds (≤ [`MAX_LONG_POLL_MS`]).
    pub timeout_ms: u32,
}

/// A request's operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestOp {
    /// Add an entry.
    Add(AddRequest),
    /// Read an entry.
    Read(ReadRequest),
    /// Read the LAC.
    ReadLac {
        /// Ledger id.
        ledger_id: i64,
    },
    /// Long-poll the LAC.
    LongPollLac(LongPollRequest),
    /// Fence a ledger.
    Fence {
        /// Ledger id.
        ledger_id: i64,
        /// Its master key.
        master_key: MasterKey,
    },
    /// List ledger ids above `start_after`, at most `max`.
    ListLedgers {
        /// Ids greater than this (-1: from the start).
        start_after: i64,
        /// Most ids to return (1..=[`MAX_LIST`]).
        max: u32,
    },
    /// Bookie information.
    BookieInfo,
}

impl RequestOp {
    /// The op code.
    pub fn op(&self) -> Op {
        match self {
            RequestOp::Add(_) => Op::Add,
            RequestOp::Read(_) => Op::Read,
            RequestOp::ReadLac { .. } => Op::ReadLac,
            RequestOp::LongPollLac(_) => Op::LongPollLac,
            RequestOp::Fence { .. } => Op::Fence,
            RequestOp::ListLedgers { .. } => Op::ListLedgers,
            RequestOp::BookieInfo => Op::BookieInfo,
        }
    }
}

/// A request: id and operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// Chosen by the client; echoed in the response.
    pub id: u64,
    /// The operation.
    pub op: RequestOp,
}

/// What a bookie reports about itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BookieInfo {
    /// Free bytes on the ledger dir's filesystem.
    pub free_bytes: u64,
    /// Total bytes of that filesystem.
    pub total_bytes: u64,
    /// Read-only (adds rejected).
    pub read_only: bool,
    /// Ledgers held.
    pub ledgers: u64,
    /// Entries held.
    pub entries: u64,
}

/// The result of a successful request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResponseBody {
    /// Entry stored durably.
    Add {
        /// Ledger.
        ledger_id: i64,
        /// Entry.
        entry_id: i64,
    },
    /// The entry as stored.
    Read {
        /// Ledger.
        ledger_id: i64,
        /// Entry.
        entry_id: i64,
        /// Encoded entry.
        entry: Bytes,
    },
    /// LAC and last entry id (-1: none).
    Lac {
        /// Ledger.
        ledger_id: i64,
        /// Highest LAC seen in the ledger's stored entries.
        lac: i64,
        /// Highest entry id stored.
        last_entry: i64,
    },
    /// Long poll answer: the LAC now, and entry `previous_lac + 1` if stored.
    LongPoll {
        /// Ledger.
        ledger_id: i64,
        /// LAC now (may still be `previous_lac` after a timeout).
        lac: i64,
        /// Entry `previous_lac + 1`, when the bookie has it.
        entry: Option<Bytes>,
    },
    /// Fenced durably.
    Fence {
        /// Ledger.
        ledger_id: i64,
    },
    /// Ledger ids, ascending.
    Ledgers {
        /// Ids.
        ids: Vec<i64>,
        /// More ids follow the last one.
        more: bool,
    },
    /// Bookie information.
    Info(BookieInfo),
}

impl ResponseBody {
    /// The op this answers.
    pub fn op(&self) -> Op {
        match self {
            ResponseBody::Add { .. } => Op::Add,
            ResponseBody::Read { .. } => Op::Read,
            ResponseBody::Lac { .. } => Op::ReadLac,
            ResponseBody::LongPoll { .. } => Op::LongPollLac,
            ResponseBody::Fence { .. } => Op::Fence,
            ResponseBody::Ledgers { .. } => Op::ListLedgers,
            ResponseBody::Info(_) => Op::BookieInfo,
        }
    }
}

/// A response: the request id, the op, and a body or an error status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// The request's id.
    pub id: u64,
    /// The request's op code (raw: the answer to an unknown op echoes it).
    pub op: u8,
    /// Body on success, status otherwise (never `Status::Ok`).
    pub result: Result<ResponseBody, Status>,
}

impl Response {
    /// A success.
    pub fn ok(id: u64, body: ResponseBody) -> Response {
        Response {
            id,
            op: body.op() as u8,
            result: Ok(body),
        }
    }

    /// An error answer.
    pub fn error(id: u64, op: u8, status: Status) -> Response {
        Response {
            id,
            op,
            result: Err(status),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Framing

/// Looks for one complete frame at the start of `buf`: `Ok(None)` when more bytes are needed,
/// else the total length (4 + body).
///
/// # Errors
/// [`FrameError::TooLarge`] as soon as the prefix is there and exceeds `max_frame`.
pub fn frame_len(buf: &[u8], max_frame: usize) -> Result<Option<usize>, FrameError> {
    let Some(prefix) = buf.first_chunk::<4>() else {
        return Ok(None);
    };
    let len = u32::from_be_bytes(*prefix) as usize;
    if len > max_frame {
        return Err(FrameError::TooLarge {
            len,
            max: max_frame,
        });
    }
    Ok((buf.len() >= 4 + len).then_some(4 + len))
}

fn put_frame(buf: &mut BytesMut, body: impl FnOnce(&mut BytesMut)) {
    let start = buf.len();
    buf.put_u32(0);
    body(buf);
    let len = u32::try_from(buf.len() - start - 4).unwrap_or(u32::MAX);
    buf[start..start + 4].copy_from_slice(&len.to_be_bytes());
}

/// A checked reader over a frame body: every read says whether the bytes were there.
struct Reader {
    buf: Bytes,
}

impl Reader {
    fn u8(&mut self) -> Option<u8> {
        (self.buf.remaining() >= 1).then(|| self.buf.get_u8())
    }
    fn u16(&mut self) -> Option<u16> {
        (self.buf.remaining() >= 2).then(|| self.buf.get_u16())
    }
    fn u32(&mut self) -> Option<u32> {
        (self.buf.remaining() >= 4).then(|| self.buf.get_u32())
    }
    fn u64(&mut self) -> Option<u64> {
        (self.buf.remaining() >= 8).then(|| self.buf.get_u64())
    }
    fn i64(&mut self) -> Option<i64> {
        (self.buf.remaining() >= 8).then(|| self.buf.get_i64())
    }
    fn key(&mut self) -> Option<MasterKey> {
        if self.buf.remaining() < MASTER_KEY_LEN {
            return None;
        }
        let mut k = [0u8; MASTER_KEY_LEN];
        self.buf.copy_to_slice(&mut k);
        Some(k)
    }
    /// A u32-length-prefixed byte string.
    fn bytes(&mut self) -> Option<Bytes> {
        let len = self.u32()? as usize;
        (self.buf.remaining() >= len).then(|| self.buf.split_to(len))
    }
    fn done(&self) -> bool {
        self.buf.is_empty()
    }
}

/// Splits one complete frame off the front of `buf` and returns its body, after checking the
/// header; `Ok(None)` when the frame is not complete yet (nothing consumed).
fn take_body(
    buf: &mut BytesMut,
    max_frame: usize,
    header_len: usize,
) -> Result<Option<(u8, u64, Reader)>, FrameError> {
    let Some(total) = frame_len(buf, max_frame)? else {
        return Ok(None);
    };
    let frame = buf.split_to(total).freeze();
    let body = frame.slice(4..);
    if body.len() < header_len {
        return Err(FrameError::TooShort(body.len()));
    }
    let mut r = Reader { buf: body };
    // Lengths were checked just above: these reads cannot come up short.
    let version = r.u8().unwrap_or(0);
    let op = r.u8().unwrap_or(0);
    let request_id = r.u64().unwrap_or(0);
    if version != VERSION {
        return Err(FrameError::BadVersion {
            version,
            request_id,
        });
    }
    Ok(Some((op, request_id, r)))
}

// ---------------------------------------------------------------------------------------------
// Requests

/// Encodes `req` as one frame at the end of `buf`.
pub fn encode_request(req: &Request, buf: &mut BytesMut) {
    put_frame(buf, |b| {
        b.put_u8(VERSION);
        b.put_u8(req.op.op() as u8);
        b.put_u64(req.id);
        match &req.op {
            RequestOp::Add(a) => {
                b.put_i64(a.ledger_id);
                b.put_i64(a.entry_id);
                b.put_u16(a.flags);
                b.put_slice(&a.master_key);
                b.put_u32(u32::try_from(a.entry.len()).unwrap_or(u32::MAX));
                b.put_slice(&a.entry);
            }
            RequestOp::Read(r) => {
                b.put_i64(r.ledger_id);
                b.put_i64(r.entry_id);
                match &r.fence {
                    None => b.put_u16(0),
                    Some(key) => {
                        b.put_u16(FLAG_DO_FENCING);
                        b.put_slice(key);
                    }
                }
            }
            RequestOp::ReadLac { ledger_id } => b.put_i64(*ledger_id),
            RequestOp::LongPollLac(p) => {
                b.put_i64(p.ledger_id);
                b.put_i64(p.previous_lac);
                b.put_u32(p.timeout_ms);
            }
            RequestOp::Fence {
                ledger_id,
                master_key,
            } => {
                b.put_i64(*ledger_id);
                b.put_slice(master_key);
            }
            RequestOp::ListLedgers { start_after, max } => {
                b.put_i64(*start_after);
                b.put_u32(*max);
            }
            RequestOp::BookieInfo => {}
        }
    });
}

/// Decodes one request frame off the front of `buf` (consuming it).
///
/// `Ok(None)`: the frame is not complete yet; nothing was consumed.
///
/// # Errors
/// [`FrameError`] when the frame cannot be trusted; the connection must be closed.
pub fn decode_request(
    buf: &mut BytesMut,
    max_frame: usize,
) -> Result<Option<Decoded<Request>>, FrameError> {
    let Some((op, request_id, mut r)) = take_body(buf, max_frame, REQUEST_HEADER_LEN)? else {
        return Ok(None);
    };
    let bad = |status, reason| Decoded::Bad {
        request_id,
        op,
        status,
        reason,
    };
    let Some(code) = Op::from_code(op) else {
        return Ok(Some(bad(Status::BadRequest, "unknown op")));
    };
    let parsed = match parse_request(code, &mut r) {
        Ok(op) => op,
        Err(reason) => return Ok(Some(bad(Status::BadRequest, reason))),
    };
    if !r.done() {
        return Ok(Some(bad(Status::BadRequest, "trailing bytes")));
    }
    Ok(Some(Decoded::Ok(Request {
        id: request_id,
        op: parsed,
    })))
}

fn ledger_id(r: &mut Reader) -> Result<i64, &'static str> {
    match r.i64() {
        Some(id) if id >= 0 => Ok(id),
        Some(_) => Err("negative ledger id"),
        None => Err("short body"),
    }
}

fn entry_id(r: &mut Reader) -> Result<i64, &'static str> {
    match r.i64() {
        Some(id) if id >= 0 => Ok(id),
        Some(_) => Err("negative entry id"),
        None => Err("short body"),
    }
}

fn parse_request(op: Op, r: &mut Reader) -> Result<RequestOp, &'static str> {
    const SHORT: &str = "short body";
    Ok(match op {
        Op::Add => {
            let ledger_id = ledger_id(r)?;
            let entry_id = entry_id(r)?;
            let flags = r.u16().ok_or(SHORT)?;
            if flags & !FLAG_RECOVERY_ADD != 0 {
                return Err("unknown add flags");
            }
            let master_key = r.key().ok_or(SHORT)?;
            let entry = r.bytes().ok_or(SHORT)?;
            let header = EntryHeader::parse(&entry).ok_or("entry shorter than header + digest")?;
            if header.ledger_id != ledger_id || header.entry_id != entry_id {
                return Err("entry header names another ledger or entry");
            }
            if header.lac < -1 || header.lac >= entry_id || header.length < 0 {
                return Err("entry header has a bad LAC or length");
            }
            debug_assert!(entry.len() >= ENTRY_HEADER_LEN + MIN_DIGEST_LEN);
            RequestOp::Add(AddRequest {
                ledger_id,
                entry_id,
                flags,
                master_key,
                entry,
            })
        }
        Op::Read => {
            let ledger_id = ledger_id(r)?;
            let entry_id = entry_id(r)?;
            let flags = r.u16().ok_or(SHORT)?;
            let fence = match flags {
                0 => None,
                FLAG_DO_FENCING => Some(r.key().ok_or(SHORT)?),
                _ => return Err("unknown read flags"),
            };
            RequestOp::Read(ReadRequest {
                ledger_id,
                entry_id,
                fence,
            })
        }
        Op::ReadLac => RequestOp::ReadLac {
            ledger_id: ledger_id(r)?,
        },
        Op::LongPollLac => {
            let ledger_id = ledger_id(r)?;
            let previous_lac = r.i64().ok_or(SHORT)?;
            if previous_lac < -1 {
                return Err("previous LAC below -1");
            }
            let timeout_ms = r.u32().ok_or(SHORT)?;
            if timeout_ms > MAX_LONG_POLL_MS {
                return Err("long-poll timeout over the limit");
            }
            RequestOp::LongPollLac(LongPollRequest {
                ledger_id,
                previous_lac,
                timeout_ms,
            })
        }
        Op::Fence => RequestOp::Fence {
            ledger_id: ledger_id(r)?,
            master_key: r.key().ok_or(SHORT)?,
        },
        Op::ListLedgers => {
            let start_after = r.i64().ok_or(SHORT)?;
            if start_after < -1 {
                return Err("start_after below -1");
            }
            let max = r.u32().ok_or(SHORT)?;
            if max == 0 || max > MAX_LIST {
                return Err("list size out of range");
            }
            RequestOp::ListLedgers { start_after, max }
        }
        Op::BookieInfo => RequestOp::BookieInfo,
    })
}

// ---------------------------------------------------------------------------------------------
// Responses

/// Encodes `resp` as one frame at the end of `buf`.
pub fn encode_response(resp: &Response, buf: &mut BytesMut) {
    put_frame(buf, |b| {
        b.put_u8(VERSION);
        b.put_u8(resp.op);
        b.put_u64(resp.id);
        let body = match &resp.result {
            Err(status) => {
                b.put_u16(*status as u16);
                return;
            }
            Ok(body) => body,
        };
        b.put_u16(Status::Ok as u16);
        match body {
            ResponseBody::Add {
                ledger_id,
                entry_id,
            } => {
                b.put_i64(*ledger_id);
                b.put_i64(*entry_id);
            }
            ResponseBody::Read {
                ledger_id,
                entry_id,
                entry,
            } => {
                b.put_i64(*ledger_id);
                b.put_i64(*entry_id);
                b.put_u32(u32::try_from(entry.len()).unwrap_or(u32::MAX));
                b.put_slice(entry);
            }
            ResponseBody::Lac {
                ledger_id,
                lac,
                last_entry,
            } => {
                b.put_i64(*ledger_id);
                b.put_i64(*lac);
                b.put_i64(*last_entry);
            }
            ResponseBody::LongPoll {
                ledger_id,
                lac,
                entry,
            } => {
                b.put_i64(*ledger_id);
                b.put_i64(*lac);
                match entry {
                    None => b.put_u8(0),
                    Some(e) => {
                        b.put_u8(1);
                        b.put_u32(u32::try_from(e.len()).unwrap_or(u32::MAX));
                        b.put_slice(e);
                    }
                }
            }
            ResponseBody::Fence { ledger_id } => b.put_i64(*ledger_id),
            ResponseBody::Ledgers { ids, more } => {
                b.put_u8(u8::from(*more));
                b.put_u32(u32::try_from(ids.len()).unwrap_or(u32::MAX));
                for id in ids {
                    b.put_i64(*id);
                }
            }
            ResponseBody::Info(i) => {
                b.put_u64(i.free_bytes);
                b.put_u64(i.total_bytes);
                b.put_u8(u8::from(i.read_only));
                b.put_u64(i.ledgers);
                b.put_u64(i.entries);
            }
        }
    });
}

/// Why a response could not be decoded (the client closes the connection: the bookie does not
/// speak this protocol, or the stream is corrupt).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ResponseError {
    /// The frame itself is bad.
    #[error(transparent)]
    Frame(#[from] FrameError),
    /// The body does not parse.
    #[error("malformed {op:?} response to request {request_id}: {reason}")]
    Malformed {
        /// Request id.
        request_id: u64,
        /// Op code.
        op: u8,
        /// What is wrong.
        reason: &'static str,
    },
}

/// Decodes one response frame off the front of `buf` (consuming it).
///
/// # Errors
/// [`ResponseError`] when the frame or body is malformed.
pub fn decode_response(
    buf: &mut BytesMut,
    max_frame: usize,
) -> Result<Option<Response>, ResponseError> {
    let Some((op, id, mut r)) = take_body(buf, max_frame, RESPONSE_HEADER_LEN)? else {
        return Ok(None);
    };
    let malformed = |reason| ResponseError::Malformed {
        request_id: id,
        op,
        reason,
    };
    let status = r.u16().ok_or_else(|| malformed("short body"))?;
    let status = Status::from_code(status).ok_or_else(|| malformed("unknown status"))?;
    if status != Status::Ok {
        if !r.done() {
            return Err(malformed("trailing bytes"));
        }
        return Ok(Some(Response::error(id, op, status)));
    }
    let code = Op::from_code(op).ok_or_else(|| malformed("unknown op"))?;
    let body = parse_response(code, &mut r).ok_or_else(|| malformed("short body"))?;
    if !r.done() {
        return Err(malformed("trailing bytes"));
    }
    Ok(Some(Response::ok(id, body)))
}

fn parse_response(op: Op, r: &mut Reader) -> Option<ResponseBody> {
    Some(match op {
        Op::Add => ResponseBody::Add {
            ledger_id: r.i64()?,
            entry_id: r.i64()?,
        },
        Op::Read => ResponseBody::Read {
            ledger_id: r.i64()?,
            entry_id: r.i64()?,
            entry: r.bytes()?,
        },
        Op::ReadLac => ResponseBody::Lac {
            ledger_id: r.i64()?,
            lac: r.i64()?,
            last_entry: r.i64()?,
        },
        Op::LongPollLac => {
            let ledger_id = r.i64()?;
            let lac = r.i64()?;
            let entry = match r.u8()? {
                0 => None,
                1 => Some(r.bytes()?),
                _ => return None,
            };
            ResponseBody::LongPoll {
                ledger_id,
                lac,
                entry,
            }
        }
        Op::Fence => ResponseBody::Fence {
            ledger_id: r.i64()?,
        },
        Op::ListLedgers => {
            let more = match r.u8()? {
                0 => false,
                1 => true,
                _ => return None,
            };
            let n = r.u32()? as usize;
            // Check the length against what is there before allocating.
            if r.buf.remaining() < n.checked_mul(8)? {
                return None;
            }
            let ids = (0..n).map(|_| r.buf.get_i64()).collect();
            ResponseBody::Ledgers { ids, more }
        }
        Op::BookieInfo => {
            let free_bytes = r.u64()?;
            let total_bytes = r.u64()?;
            let read_only = match r.u8()? {
                0 => false,
                1 => true,
                _ => return None,
            };
            ResponseBody::Info(BookieInfo {
                free_bytes,
                total_bytes,
                read_only,
                ledgers: r.u64()?,
                entries: r.u64()?,
            })
        }
    })
}

#[cfg(test)]
mod tests {
    use super::entry::{DigestType, Digester};
    use super::*;

    fn add(id: u64) -> Request {
        let d = Digester::new(DigestType::Crc32c, b"");
        let entry = d.encode(
            EntryHeader {
                ledger_id: 1,
                entry_id: 0,
                lac: -1,
                length: 3,
            },
            b"abc",
        );
        Request {
            id,
            op: RequestOp::Add(AddRequest {
                ledger_id: 1,
                entry_id: 0,
                flags: 0,
                master_key: entry::master_key(b""),
                entry,
            }),
        }
    }

    #[test]
    fn every_prefix_of_a_frame_is_incomplete_and_nothing_is_consumed() {
        let mut full = BytesMut::new();
        encode_request(&add(9), &mut full);
        for cut in 0..full.len() {
            let mut part = BytesMut::from(&full[..cut]);
            assert_eq!(decode_request(&mut part, DEFAULT_MAX_FRAME), Ok(None));
            assert_eq!(part.len(), cut);
        }
        let got = decode_request(&mut full, DEFAULT_MAX_FRAME).unwrap();
        assert_eq!(got, Some(Decoded::Ok(add(9))));
        assert!(full.is_empty());
    }

    #[test]
    fn oversized_short_and_wrong_version_frames_are_frame_errors() {
        let mut big = BytesMut::from(&(1_000_001u32).to_be_bytes()[..]);
        assert_eq!(
            decode_request(&mut big, 1_000_000),
            Err(FrameError::TooLarge {
                len: 1_000_001,
                max: 1_000_000
            })
        );
        let mut short = BytesMut::from(&[0, 0, 0, 2, 1, 1][..]);
        assert_eq!(
            decode_request(&mut short, DEFAULT_MAX_FRAME),
            Err(FrameError::TooShort(2))
        );
        let mut v2 = BytesMut::new();
        encode_request(&add(5), &mut v2);
        v2[4] = 2;
        assert_eq!(
            decode_request(&mut v2, DEFAULT_MAX_FRAME),
            Err(FrameError::BadVersion {
                version: 2,
                request_id: 5
            })
        );
    }

    fn bad_reason(bytes: &mut BytesMut) -> &'static str {
        match decode_request(bytes, DEFAULT_MAX_FRAME) {
            Ok(Some(Decoded::Bad {
                reason, request_id, ..
            })) => {
                assert_eq!(request_id, 3);
                reason
            }
            other => panic!("expected a bad request, got {other:?}"),
        }
    }

    #[test]
    fn bad_contents_are_bad_requests_with_the_request_id() {
        // Unknown op.
        let mut b = BytesMut::new();
        put_frame(&mut b, |b| {
            b.put_u8(VERSION);
            b.put_u8(99);
            b.put_u64(3);
        });
        assert_eq!(bad_reason(&mut b), "unknown op");

        // Negative ledger id.
        let mut b = BytesMut::new();
        encode_request(
            &Request {
                id: 3,
                op: RequestOp::ReadLac { ledger_id: -5 },
            },
            &mut b,
        );
        assert_eq!(bad_reason(&mut b), "negative ledger id");

        // Entry header naming another entry.
        let mut req = add(3);
        if let RequestOp::Add(a) = &mut req.op {
            a.entry_id = 1;
        }
        let mut b = BytesMut::new();
        encode_request(&req, &mut b);
        assert_eq!(
            bad_reason(&mut b),
            "entry header names another ledger or entry"
        );

        // Trailing bytes after a complete body.
        let mut b = BytesMut::new();
        put_frame(&mut b, |b| {
            b.put_u8(VERSION);
            b.put_u8(Op::BookieInfo as u8);
            b.put_u64(3);
            b.put_u8(0);
        });
        assert_eq!(bad_reason(&mut b), "trailing bytes");

        // An entry length that runs past the frame.
        let mut b = BytesMut::new();
        put_frame(&mut b, |b| {
            b.put_u8(VERSION);
            b.put_u8(Op::Add as u8);
            b.put_u64(3);
            b.put_i64(1);
            b.put_i64(0);
            b.put_u16(0);
            b.put_slice(&[0; 32]);
            b.put_u32(u32::MAX);
        });
        assert_eq!(bad_reason(&mut b), "short body");

        // Unknown flags.
        let mut b = BytesMut::new();
        put_frame(&mut b, |b| {
            b.put_u8(VERSION);
            b.put_u8(Op::Read as u8);
            b.put_u64(3);
            b.put_i64(1);
            b.put_i64(0);
            b.put_u16(0x80);
        });
        assert_eq!(bad_reason(&mut b), "unknown read flags");
    }

    #[test]
    fn a_response_list_longer_than_its_frame_is_malformed() {
        let mut b = BytesMut::new();
        put_frame(&mut b, |b| {
            b.put_u8(VERSION);
            b.put_u8(Op::ListLedgers as u8);
            b.put_u64(1);
            b.put_u16(0);
            b.put_u8(0);
            b.put_u32(u32::MAX);
        });
        assert!(matches!(
            decode_response(&mut b, DEFAULT_MAX_FRAME),
            Err(ResponseError::Malformed { .. })
        ));
    }
}
