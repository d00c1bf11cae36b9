//! Framing: the length prefix, the common body header, and a checked reader over a body.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use super::entry::{MasterKey, MASTER_KEY_LEN};
use super::{FrameError, VERSION};

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

pub(super) fn put_frame(buf: &mut BytesMut, body: impl FnOnce(&mut BytesMut)) {
    let start = buf.len();
    buf.put_u32(0);
    body(buf);
    let len = u32::try_from(buf.len() - start - 4).unwrap_or(u32::MAX);
    buf[start..start + 4].copy_from_slice(&len.to_be_bytes());
}

/// A checked reader over a frame body: every read says whether the bytes were there.
pub(super) struct Reader {
    pub(super) buf: Bytes,
}

impl Reader {
    pub(super) fn u8(&mut self) -> Option<u8> {
        (self.buf.remaining() >= 1).then(|| self.buf.get_u8())
    }
    pub(super) fn u16(&mut self) -> Option<u16> {
        (self.buf.remaining() >= 2).then(|| self.buf.get_u16())
    }
    pub(super) fn u32(&mut self) -> Option<u32> {
        (self.buf.remaining() >= 4).then(|| self.buf.get_u32())
    }
    pub(super) fn u64(&mut self) -> Option<u64> {
        (self.buf.remaining() >= 8).then(|| self.buf.get_u64())
    }
    pub(super) fn i64(&mut self) -> Option<i64> {
        (self.buf.remaining() >= 8).then(|| self.buf.get_i64())
    }
    pub(super) fn key(&mut self) -> Option<MasterKey> {
        if self.buf.remaining() < MASTER_KEY_LEN {
            return None;
        }
        let mut k = [0u8; MASTER_KEY_LEN];
        self.buf.copy_to_slice(&mut k);
        Some(k)
    }
    /// A u32-length-prefixed byte string.
    pub(super) fn bytes(&mut self) -> Option<Bytes> {
        let len = self.u32()? as usize;
        (self.buf.remaining() >= len).then(|| self.buf.split_to(len))
    }
    pub(super) fn done(&self) -> bool {
        self.buf.is_empty()
    }
}

/// Splits one complete frame off the front of `buf` and returns its body, after checking the
/// header; `Ok(None)` when the frame is not complete yet (nothing consumed).
pub(super) fn take_body(
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
