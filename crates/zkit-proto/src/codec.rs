//! Jute primitives: checked big-endian reads from `&[u8]` and writes into `BytesMut`.
//!
//! [`Reader`] never panics and never allocates more than the bytes it was given can justify: a
//! length or count larger than the remaining input is rejected *before* any allocation, so a
//! 12-byte frame cannot make the server reserve gigabytes. The [`Record`] trait is what every
//! record in [`crate::records`] implements. This module knows nothing about op codes or framing.
//!
//! Null handling follows jute's `BinaryInputArchive`: a buffer or string of length -1 and a
//! vector of count -1 are "null". The `Option`-returning reads expose that; the plain reads
//! turn null into empty. Records keep a null where ZooKeeper keeps one (znode data) and reject
//! it where ZooKeeper would dereference it ([`Reader::read_path`]).
//!
//! Strings decode like Java's `new String(bytes, UTF_8)` in `BinaryInputArchive.readString`:
//! invalid UTF-8 is replaced by U+FFFD, never an error.

use bytes::{BufMut, BytesMut};

/// Why bytes could not be decoded. The server answers any of these by closing the connection
/// (Apache ZooKeeper logs the `IOException` and drops the client), except [`DecodeError::UnknownOp`],
/// which it answers with `Unimplemented`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The input ended inside a field.
    #[error("truncated: needed {needed} more bytes, {remaining} remain")]
    Truncated {
        /// Bytes the field needed.
        needed: usize,
        /// Bytes that were left.
        remaining: usize,
    },
    /// A length or count is below -1 or larger than the bytes that remain.
    #[error("invalid length or count {0}")]
    InvalidLength(i64),
    /// A request path is null (length -1). Apache ZooKeeper dereferences it and answers the
    /// resulting `NullPointerException` with MarshallingError; see [`Reader::read_path`].
    #[error("null path")]
    NullPath,
    /// The request header names an op code that is not a client request.
    #[error("unknown op code {0}")]
    UnknownOp(i32),
    /// A multi/multiRead carries a sub-op type it does not allow (Apache: "Invalid type of op").
    #[error("op type {op} is not allowed inside {container}")]
    InvalidMultiOp {
        /// The offending sub-op type.
        op: i32,
        /// `"multi"` or `"multiRead"`.
        container: &'static str,
    },
    /// Bytes remain after a record decoded with [`Record::decode_exact`]. Requests never use
    /// this: ZooKeeper ignores trailing bytes in a request body.
    #[error("{0} trailing bytes after the record")]
    TrailingBytes(usize),
}

/// A checked cursor over a byte slice.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// A reader at the start of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    /// Bytes not yet read.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// Whether every byte has been read.
    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    /// Bytes read so far.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// The unread bytes, without consuming them.
    pub fn rest(&self) -> &'a [u8] {
        &self.buf[self.pos..]
    }

    /// Consumes exactly `n` bytes.
    pub fn read_bytes(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let remaining = self.remaining();
        if n > remaining {
            return Err(DecodeError::Truncated {
                needed: n,
                remaining,
            });
        }
        let out = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    fn read_array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.read_bytes(N)?);
        Ok(out)
    }

    /// jute `int`.
    pub fn read_i32(&mut self) -> Result<i32, DecodeError> {
        Ok(i32::from_be_bytes(self.read_array()?))
    }

    /// jute `long`.
    pub fn read_i64(&mut self) -> Result<i64, DecodeError> {
        Ok(i64::from_be_bytes(self.read_array()?))
    }

    /// jute `boolean`. Like Java's `DataInput.readBoolean`, any non-zero byte is `true`.
    pub fn read_bool(&mut self) -> Result<bool, DecodeError> {
        Ok(self.read_array::<1>()?[0] != 0)
    }

    /// A length or count prefix: `None` for -1, an error below -1 or when `min_item_len * n`
    /// exceeds what remains (checked before anyone allocates).
    fn read_len(&mut self, min_item_len: usize) -> Result<Option<usize>, DecodeError> {
        let n = self.read_i32()?;
        match n {
            -1 => Ok(None),
            n if n < -1 => Err(DecodeError::InvalidLength(n.into())),
            n => {
                // n >= 0 here, so the cast is lossless.
                let n = n as usize;
                if n.saturating_mul(min_item_len) > self.remaining() {
                    return Err(DecodeError::InvalidLength(n as i64));
                }
                Ok(Some(n))
            }
        }
    }

    /// jute `buffer` as a borrowed slice; `None` when null (length -1).
    pub fn read_opt_buffer_ref(&mut self) -> Result<Option<&'a [u8]>, DecodeError> {
        match self.read_len(1)? {
            None => Ok(None),
            Some(n) => self.read_bytes(n).map(Some),
        }
    }

    /// jute `buffer`; `None` when null (length -1).
    pub fn read_opt_buffer(&mut self) -> Result<Option<Vec<u8>>, DecodeError> {
        Ok(self.read_opt_buffer_ref()?.map(<[u8]>::to_vec))
    }

    /// jute `buffer`; null reads as empty.
    pub fn read_buffer(&mut self) -> Result<Vec<u8>, DecodeError> {
        Ok(self.read_opt_buffer()?.unwrap_or_default())
    }

    /// jute `ustring`; `None` when null (length -1). Invalid UTF-8 becomes U+FFFD, as Java's
    /// `new String(bytes, UTF_8)` does: Apache ZooKeeper answers a path holding byte 0xff with
    /// NoNode (the node `/\u{FFFD}` does not exist), not with an error.
    pub fn read_opt_ustring(&mut self) -> Result<Option<String>, DecodeError> {
        // The strict check first: it has an ASCII fast path, and paths are nearly always valid.
        Ok(self
            .read_opt_buffer_ref()?
            .map(|b| match std::str::from_utf8(b) {
                Ok(s) => s.to_owned(),
                Err(_) => String::from_utf8_lossy(b).into_owned(),
            }))
    }

    /// jute `ustring`; null reads as the empty string (path validation then rejects it, as
    /// Apache's `PathUtils.validatePath(null)` does).
    pub fn read_ustring(&mut self) -> Result<String, DecodeError> {
        Ok(self.read_opt_ustring()?.unwrap_or_default())
    }

    /// A `ustring` holding a request path that ZooKeeper uses before validating it: null is
    /// [`DecodeError::NullPath`]. Apache 3.8 answers a null path in create, delete, exists,
    /// getData, getChildren(2), getACL, getAllChildrenNumber, checkWatches and removeWatches
    /// with MarshallingError (a `NullPointerException` caught by the request processor).
    /// setData, setACL and check validate first (BadArguments), so they use
    /// [`Reader::read_ustring`], whose empty string the path validation rejects the same way.
    pub fn read_path(&mut self) -> Result<String, DecodeError> {
        self.read_opt_ustring()?.ok_or(DecodeError::NullPath)
    }

    /// jute `vector<T>`; `None` when null (count -1). `min_item_len` is the smallest encoding of
    /// one element, used to reject absurd counts before allocating.
    pub fn read_opt_vec<T>(
        &mut self,
        min_item_len: usize,
        mut item: impl FnMut(&mut Self) -> Result<T, DecodeError>,
    ) -> Result<Option<Vec<T>>, DecodeError> {
        let Some(n) = self.read_len(min_item_len.max(1))? else {
            return Ok(None);
        };
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            out.push(item(self)?);
        }
        Ok(Some(out))
    }

    /// jute `vector<T>` of records; null reads as empty.
    pub fn read_vec<T: Record>(&mut self) -> Result<Vec<T>, DecodeError> {
        Ok(self
            .read_opt_vec(T::MIN_ENCODED_LEN, T::decode)?
            .unwrap_or_default())
    }

    /// jute `vector<ustring>`; null reads as empty.
    pub fn read_string_vec(&mut self) -> Result<Vec<String>, DecodeError> {
        Ok(self
            .read_opt_vec(4, Self::read_ustring)?
            .unwrap_or_default())
    }
}

/// Writes a jute `int`.
pub fn put_i32(buf: &mut BytesMut, v: i32) {
    buf.put_i32(v);
}

/// Writes a jute `long`.
pub fn put_i64(buf: &mut BytesMut, v: i64) {
    buf.put_i64(v);
}

/// Writes a jute `boolean` (0 or 1).
pub fn put_bool(buf: &mut BytesMut, v: bool) {
    buf.put_u8(u8::from(v));
}

/// Length prefix for a slice. Lengths above `i32::MAX` cannot be framed anyway (the frame limit
/// is far below), so they saturate rather than wrap into a negative "null".
fn put_len(buf: &mut BytesMut, n: usize) {
    buf.put_i32(i32::try_from(n).unwrap_or(i32::MAX));
}

/// Writes a jute `buffer`.
pub fn put_buffer(buf: &mut BytesMut, v: &[u8]) {
    put_len(buf, v.len());
    buf.put_slice(v);
}

/// Writes a jute `buffer` that may be null (length -1).
pub fn put_opt_buffer(buf: &mut BytesMut, v: Option<&[u8]>) {
    match v {
        Some(v) => put_buffer(buf, v),
        None => buf.put_i32(-1),
    }
}

/// Writes a jute `ustring`.
pub fn put_ustring(buf: &mut BytesMut, v: &str) {
    put_buffer(buf, v.as_bytes());
}

/// Writes a jute `ustring` that may be null (length -1).
pub fn put_opt_ustring(buf: &mut BytesMut, v: Option<&str>) {
    put_opt_buffer(buf, v.map(str::as_bytes));
}

/// Writes a jute `vector<T>` of records.
pub fn put_vec<T: Record>(buf: &mut BytesMut, v: &[T]) {
    put_len(buf, v.len());
    for item in v {
        item.encode(buf);
    }
}

/// Writes a jute `vector<ustring>`.
pub fn put_string_vec<S: AsRef<str>>(buf: &mut BytesMut, v: &[S]) {
    put_len(buf, v.len());
    for s in v {
        put_ustring(buf, s.as_ref());
    }
}

/// A jute record: fields concatenated in declaration order, no tags.
pub trait Record: Sized {
    /// The fewest bytes one encoded value takes; vector counts are checked against it.
    const MIN_ENCODED_LEN: usize = 1;

    /// Appends the encoding.
    fn encode(&self, buf: &mut BytesMut);

    /// Reads one value, leaving the reader after it.
    fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError>;

    /// The encoding as a fresh buffer.
    fn to_bytes(&self) -> BytesMut {
        let mut buf = BytesMut::new();
        self.encode(&mut buf);
        buf
    }

    /// Decodes from `bytes`, ignoring anything after the record.
    fn decode_from(bytes: &[u8]) -> Result<Self, DecodeError> {
        Self::decode(&mut Reader::new(bytes))
    }

    /// Decodes from `bytes`, which must hold exactly one record.
    fn decode_exact(bytes: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(bytes);
        let v = Self::decode(&mut r)?;
        match r.remaining() {
            0 => Ok(v),
            n => Err(DecodeError::TrailingBytes(n)),
        }
    }
}

/// Test support: encodes `v`, checks it decodes back exactly, returns the bytes.
#[cfg(test)]
pub(crate) fn assert_round_trip<T: Record + PartialEq + std::fmt::Debug>(v: &T) -> BytesMut {
    let bytes = v.to_bytes();
    assert_eq!(
        T::decode_exact(&bytes).as_ref(),
        Ok(v),
        "bytes {bytes:02x?}"
    );
    bytes
}

/// Test support: every strict prefix of `v`'s encoding fails to decode.
#[cfg(test)]
pub(crate) fn assert_truncations_fail<T: Record + std::fmt::Debug>(v: &T) {
    let bytes = v.to_bytes();
    for n in 0..bytes.len() {
        assert!(
            T::decode_from(&bytes[..n]).is_err(),
            "prefix of {n}/{} bytes decoded: {v:?}",
            bytes.len()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn primitives_round_trip_big_endian() {
        let mut buf = BytesMut::new();
        put_i32(&mut buf, -2);
        put_i64(&mut buf, 0x0102_0304_0506_0708);
        put_bool(&mut buf, true);
        put_buffer(&mut buf, b"ab");
        put_opt_buffer(&mut buf, None);
        put_ustring(&mut buf, "é");
        put_opt_ustring(&mut buf, None);
        put_string_vec(&mut buf, &["x", "yz"]);
        assert_eq!(&buf[..4], &[0xff, 0xff, 0xff, 0xfe]);
        assert_eq!(&buf[4..12], &[1, 2, 3, 4, 5, 6, 7, 8]);

        let mut r = Reader::new(&buf);
        assert_eq!(r.read_i32(), Ok(-2));
        assert_eq!(r.read_i64(), Ok(0x0102_0304_0506_0708));
        assert_eq!(r.read_bool(), Ok(true));
        assert_eq!(r.read_buffer(), Ok(b"ab".to_vec()));
        assert_eq!(r.read_opt_buffer(), Ok(None));
        assert_eq!(r.read_ustring(), Ok("é".to_owned()));
        assert_eq!(r.read_opt_ustring(), Ok(None));
        assert_eq!(
            r.read_string_vec(),
            Ok(vec!["x".to_owned(), "yz".to_owned()])
        );
        assert!(r.is_empty());
    }

    #[test]
    fn truncated_reads_are_errors() {
        let mut r = Reader::new(&[0, 0, 0]);
        assert_eq!(
            r.read_i32(),
            Err(DecodeError::Truncated {
                needed: 4,
                remaining: 3
            })
        );
        assert!(Reader::new(&[]).read_bool().is_err());
        assert!(Reader::new(&[0, 0, 0, 0, 0, 0, 0]).read_i64().is_err());
    }

    #[test]
    fn absurd_lengths_are_rejected_before_allocating() {
        // A 2 GiB buffer claim in 4 bytes.
        let mut r = Reader::new(&[0x7f, 0xff, 0xff, 0xff]);
        assert_eq!(
            r.read_buffer(),
            Err(DecodeError::InvalidLength(0x7fff_ffff))
        );
        // A vector count far beyond what the remaining bytes could hold.
        let mut r = Reader::new(&[0x00, 0x10, 0x00, 0x00, 0, 0, 0, 0]);
        assert!(matches!(
            r.read_string_vec(),
            Err(DecodeError::InvalidLength(_))
        ));
        // Below -1.
        let mut r = Reader::new(&[0xff, 0xff, 0xff, 0xfe]);
        assert_eq!(r.read_buffer(), Err(DecodeError::InvalidLength(-2)));
        // Exactly as long as what remains is fine.
        let mut r = Reader::new(&[0, 0, 0, 2, b'h', b'i']);
        assert_eq!(r.read_ustring(), Ok("hi".to_owned()));
    }

    #[test]
    fn invalid_utf8_decodes_lossily_like_java() {
        let mut r = Reader::new(&[0, 0, 0, 2, 0xc3, 0x28]);
        assert_eq!(r.read_ustring(), Ok("\u{FFFD}(".to_owned()));
        let mut r = Reader::new(&[0, 0, 0, 2, b'/', 0xff]);
        assert_eq!(r.read_opt_ustring(), Ok(Some("/\u{FFFD}".to_owned())));
    }

    #[test]
    fn null_path_is_an_error_only_through_read_path() {
        let bytes = [0xff; 4];
        assert_eq!(Reader::new(&bytes).read_path(), Err(DecodeError::NullPath));
        assert_eq!(Reader::new(&bytes).read_ustring(), Ok(String::new()));
        assert_eq!(
            Reader::new(&[0, 0, 0, 1, b'/']).read_path(),
            Ok("/".to_owned())
        );
    }

    #[test]
    fn null_reads_as_empty_in_plain_reads() {
        let bytes = [0xff; 12];
        let mut r = Reader::new(&bytes);
        assert_eq!(r.read_buffer(), Ok(vec![]));
        assert_eq!(r.read_ustring(), Ok(String::new()));
        assert_eq!(r.read_string_vec(), Ok(vec![]));
    }

    #[test]
    fn any_nonzero_byte_is_true() {
        assert_eq!(Reader::new(&[2]).read_bool(), Ok(true));
        assert_eq!(Reader::new(&[0]).read_bool(), Ok(false));
    }
}
