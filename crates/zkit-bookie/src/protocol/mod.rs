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
mod framing;
mod request;
mod response;
#[cfg(test)]
mod tests;

use bytes::Bytes;

use entry::{EntryHeader, MasterKey};

pub use framing::frame_len;
pub use request::{decode_request, encode_request};
pub use response::{decode_response, encode_response, ResponseError};

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
