//! Length-prefixed framing: every message, both ways, is a 4-byte big-endian length and then
//! that many payload bytes.
//!
//! [`decode_frame`] is a pure check-then-parse: "not enough bytes yet" is `Ok(None)`, a length
//! below 0 or above the limit (Apache's `jute.maxbuffer`, default [`DEFAULT_MAX_FRAME`]) is a
//! [`FrameError`] after which the connection must be closed. It does no I/O and keeps no state;
//! the connection task owns the buffer.

use bytes::{BufMut, BytesMut};

/// Apache ZooKeeper's default `jute.maxbuffer`: 0xfffff bytes.
pub const DEFAULT_MAX_FRAME: usize = 1_048_575;

/// A frame the server must not accept; Apache closes the connection ("Len error").
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// The length prefix is negative.
    #[error("negative frame length {0}")]
    NegativeLength(i32),
    /// The length prefix exceeds the limit.
    #[error("frame length {len} exceeds the limit of {max} bytes")]
    TooLarge {
        /// Announced length.
        len: usize,
        /// Configured limit.
        max: usize,
    },
}

/// Looks for one complete frame at the start of `buf`.
///
/// Returns `Ok(None)` when more bytes are needed, or `Ok(Some((consumed, payload)))` where
/// `consumed` is 4 + the payload length.
///
/// # Errors
/// [`FrameError`] as soon as the 4 length bytes are there and announce a negative length or one
/// above `max_len`, without waiting for the payload.
pub fn decode_frame(buf: &[u8], max_len: usize) -> Result<Option<(usize, &[u8])>, FrameError> {
    let Some(prefix) = buf.first_chunk::<4>() else {
        return Ok(None);
    };
    let len = i32::from_be_bytes(*prefix);
    let len = usize::try_from(len).map_err(|_| FrameError::NegativeLength(len))?;
    if len > max_len {
        return Err(FrameError::TooLarge { len, max: max_len });
    }
    let total = 4 + len;
    Ok(buf.get(4..total).map(|payload| (total, payload)))
}

/// Appends one frame to `buf`: a 4-byte length placeholder, whatever `payload` writes, then
/// patches the length. Returns the payload length.
///
/// The writer never exceeds `i32::MAX` bytes in practice (replies are bounded by the data tree's
/// own limits); a larger payload saturates the prefix rather than wrapping negative.
pub fn encode_frame(buf: &mut BytesMut, payload: impl FnOnce(&mut BytesMut)) -> usize {
    let start = buf.len();
    buf.put_i32(0);
    payload(buf);
    let len = buf.len() - start - 4;
    let prefix = i32::try_from(len).unwrap_or(i32::MAX).to_be_bytes();
    buf[start..start + 4].copy_from_slice(&prefix);
    len
}

/// The four-letter words ZooKeeper answers on a fresh connection instead of a ConnectRequest.
pub const FOUR_LETTER_WORDS: [&str; 18] = [
    "conf", "cons", "crst", "dirs", "dump", "envi", "gtmk", "hash", "isro", "mntr", "ruok", "srst",
    "srvr", "stat", "stmk", "wchc", "wchp", "wchs",
];

/// If the first 4 bytes of a fresh connection are a four-letter word, returns it.
///
/// Read as a frame length these are all > 1 GB (`ruok` = 0x72756f6b), so they can never be a
/// valid ConnectRequest length: checking them first is unambiguous.
pub fn is_four_letter_word(first4: [u8; 4]) -> Option<&'static str> {
    FOUR_LETTER_WORDS
        .into_iter()
        .find(|w| w.as_bytes() == first4)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn needs_more_bytes_until_complete() {
        let frame = [0, 0, 0, 3, b'a', b'b', b'c', 0xee];
        for n in 0..7 {
            assert_eq!(decode_frame(&frame[..n], 10), Ok(None), "prefix {n}");
        }
        assert_eq!(decode_frame(&frame, 10), Ok(Some((7, &b"abc"[..]))));
    }

    #[test]
    fn bad_lengths_fail_before_payload_arrives() {
        assert_eq!(
            decode_frame(&[0xff, 0xff, 0xff, 0xff], 10),
            Err(FrameError::NegativeLength(-1))
        );
        assert_eq!(
            decode_frame(&[0, 0, 0, 11], 10),
            Err(FrameError::TooLarge { len: 11, max: 10 })
        );
        assert_eq!(decode_frame(&[0, 0, 0, 10], 10), Ok(None));
        assert_eq!(decode_frame(&[0, 0, 0, 0], 10), Ok(Some((4, &[][..]))));
    }

    #[test]
    fn encode_frame_patches_the_length() {
        let mut buf = BytesMut::from(&b"xx"[..]);
        let n = encode_frame(&mut buf, |b| b.put_slice(b"hello"));
        assert_eq!(n, 5);
        assert_eq!(&buf[..], b"xx\x00\x00\x00\x05hello");
        assert_eq!(
            decode_frame(&buf[2..], DEFAULT_MAX_FRAME),
            Ok(Some((9, &b"hello"[..])))
        );
    }

    #[test]
    fn four_letter_words() {
        assert_eq!(is_four_letter_word(*b"ruok"), Some("ruok"));
        assert_eq!(
            is_four_letter_word(0x7275_6f6b_u32.to_be_bytes()),
            Some("ruok")
        );
        assert_eq!(is_four_letter_word(*b"mntr"), Some("mntr"));
        assert_eq!(is_four_letter_word(*b"RUOK"), None);
        assert_eq!(is_four_letter_word([0, 0, 0, 44]), None);
        for w in FOUR_LETTER_WORDS {
            let bytes: [u8; 4] = w.as_bytes().try_into().unwrap_or_default();
            assert_eq!(is_four_letter_word(bytes), Some(w));
        }
    }
}
