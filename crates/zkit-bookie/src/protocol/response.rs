//! Responses: encoding (the bookie) and decoding (the client).

use bytes::{Buf, BufMut, BytesMut};

use super::framing::{put_frame, take_body, Reader};
use super::{
    BookieInfo, FrameError, Op, Response, ResponseBody, Status, RESPONSE_HEADER_LEN, VERSION,
};

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
