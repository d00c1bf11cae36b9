//! Requests: encoding (the client) and check-then-parse decoding (the bookie).

use bytes::{BufMut, BytesMut};

use super::entry::{EntryHeader, ENTRY_HEADER_LEN, MIN_DIGEST_LEN};
use super::framing::{put_frame, take_body, Reader};
use super::{
    AddRequest, Decoded, FrameError, LongPollRequest, Op, ReadRequest, Request, RequestOp, Status,
    FLAG_DO_FENCING, FLAG_RECOVERY_ADD, MAX_LIST, MAX_LONG_POLL_MS, REQUEST_HEADER_LEN, VERSION,
};

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
