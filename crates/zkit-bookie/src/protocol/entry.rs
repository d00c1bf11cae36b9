//! The entry format and its digests, shared by the bookie and the ledger client.
//!
//! An entry, as BookKeeper's `DigestManager` lays it out, is a 32-byte header, a digest and the
//! payload:
//!
//! ```text
//! ledger id  i64 BE
//! entry id   i64 BE
//! LAC        i64 BE   last-add-confirmed the writer knew when it sent this entry (-1: none)
//! length     i64 BE   total payload bytes of the ledger up to and including this entry
//! digest     4 bytes (CRC32C) or 32 bytes (HMAC-SHA256), over the header and the payload
//! payload
//! ```
//!
//! The bookie stores entries opaque: it checks only that the header names the ledger and entry
//! the request names ([`EntryHeader::parse`]). Readers verify the digest with a [`Digester`].
//! Pure code: no I/O.

use bytes::{BufMut, Bytes, BytesMut};
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

/// Bytes of the header before the digest.
pub const ENTRY_HEADER_LEN: usize = 32;
/// The shortest digest (CRC32C); an entry is at least `ENTRY_HEADER_LEN + MIN_DIGEST_LEN` bytes.
pub const MIN_DIGEST_LEN: usize = 4;
/// Length of a master key ([`master_key`]).
pub const MASTER_KEY_LEN: usize = 32;

/// A ledger's master key: what writers and fencing readers prove they know the ledger's
/// password with. SHA-256 of `"ledger"` followed by the password, as BookKeeper's
/// `DigestManager.generateMasterKey` derives it (with SHA-1 there).
pub type MasterKey = [u8; MASTER_KEY_LEN];

/// Derives the master key from a ledger password.
pub fn master_key(password: &[u8]) -> MasterKey {
    let mut h = Sha256::new();
    h.update(b"ledger");
    h.update(password);
    h.finalize().into()
}

/// How entries of a ledger are digested (chosen at ledger creation, kept in its metadata).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DigestType {
    /// CRC32C: catches corruption, not forgery.
    Crc32c,
    /// HMAC-SHA256 keyed by the ledger password: a reader without the password cannot forge
    /// or alter entries.
    HmacSha256,
}

impl DigestType {
    /// Digest length in bytes.
    pub fn digest_len(self) -> usize {
        match self {
            DigestType::Crc32c => 4,
            DigestType::HmacSha256 => 32,
        }
    }
}

/// The fixed header of an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryHeader {
    /// Ledger the entry belongs to.
    pub ledger_id: i64,
    /// Its position in the ledger, from 0.
    pub entry_id: i64,
    /// Last-add-confirmed the writer knew when it sent the entry (-1: none).
    pub lac: i64,
    /// Total payload length of the ledger up to and including this entry.
    pub length: i64,
}

impl EntryHeader {
    /// Reads the header of an encoded entry; `None` when it is shorter than a header plus the
    /// shortest digest.
    pub fn parse(entry: &[u8]) -> Option<EntryHeader> {
        if entry.len() < ENTRY_HEADER_LEN + MIN_DIGEST_LEN {
            return None;
        }
        let at = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&entry[i..i + 8]);
            i64::from_be_bytes(b)
        };
        Some(EntryHeader {
            ledger_id: at(0),
            entry_id: at(8),
            lac: at(16),
            length: at(24),
        })
    }

    /// Reads the header of an encoded entry that should be entry `entry_id` of `ledger_id`.
    ///
    /// # Errors
    /// [`EntryError::Short`] for an entry shorter than a header and the shortest digest,
    /// [`EntryError::WrongId`] for another entry's header.
    pub fn parse_expected(
        entry: &[u8],
        ledger_id: i64,
        entry_id: i64,
    ) -> Result<EntryHeader, EntryError> {
        let header = EntryHeader::parse(entry).ok_or(EntryError::Short(entry.len()))?;
        if header.ledger_id != ledger_id || header.entry_id != entry_id {
            return Err(EntryError::WrongId {
                ledger: ledger_id,
                entry: entry_id,
                got_ledger: header.ledger_id,
                got_entry: header.entry_id,
            });
        }
        Ok(header)
    }

    fn put(&self, buf: &mut BytesMut) {
        buf.put_i64(self.ledger_id);
        buf.put_i64(self.entry_id);
        buf.put_i64(self.lac);
        buf.put_i64(self.length);
    }
}

/// Why an entry failed verification.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EntryError {
    /// Shorter than header + digest.
    #[error("entry of {0} bytes is shorter than its header and digest")]
    Short(usize),
    /// The header names another ledger or entry than the one asked for.
    #[error("entry header names ledger {got_ledger} entry {got_entry}, expected ledger {ledger} entry {entry}")]
    WrongId {
        /// Expected ledger.
        ledger: i64,
        /// Expected entry.
        entry: i64,
        /// Ledger in the header.
        got_ledger: i64,
        /// Entry in the header.
        got_entry: i64,
    },
    /// The digest does not match: corrupt, or written with another password or digest type.
    #[error("digest mismatch on ledger {ledger} entry {entry}")]
    BadDigest {
        /// Ledger.
        ledger: i64,
        /// Entry.
        entry: i64,
    },
}

/// A verified entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Its header.
    pub header: EntryHeader,
    /// The payload (a slice of the encoded entry).
    pub payload: Bytes,
}

type HmacSha256 = Hmac<Sha256>;

/// Computes and checks entry digests for one ledger.
#[derive(Clone)]
pub struct Digester {
    kind: DigestType,
    /// For HMAC: SHA-256 of `"mac"` and the password, as BookKeeper's `MacDigestManager`
    /// derives its MAC key (with SHA-1 there).
    mac: Option<HmacSha256>,
}

impl std::fmt::Debug for Digester {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Digester")
            .field("kind", &self.kind)
            .finish()
    }
}

impl Digester {
    /// A digester for `kind`; `password` keys the HMAC (ignored for CRC32C).
    pub fn new(kind: DigestType, password: &[u8]) -> Digester {
        let mac = match kind {
            DigestType::Crc32c => None,
            DigestType::HmacSha256 => {
                let mut h = Sha256::new();
                h.update(b"mac");
                h.update(password);
                let key: [u8; 32] = h.finalize().into();
                // HMAC takes a key of any length; 32 bytes cannot fail.
                HmacSha256::new_from_slice(&key).ok()
            }
        };
        Digester { kind, mac }
    }

    /// The digest type.
    pub fn kind(&self) -> DigestType {
        self.kind
    }

    fn digest(&self, header: &[u8], payload: &[u8], out: &mut BytesMut) {
        match &self.mac {
            None => {
                let crc = crc32c::crc32c_append(crc32c::crc32c(header), payload);
                out.put_u32(crc);
            }
            Some(mac) => {
                let mut m = mac.clone();
                m.update(header);
                m.update(payload);
                out.put_slice(&m.finalize().into_bytes());
            }
        }
    }

    /// Encodes an entry: header, digest, payload.
    pub fn encode(&self, header: EntryHeader, payload: &[u8]) -> Bytes {
        let mut buf =
            BytesMut::with_capacity(ENTRY_HEADER_LEN + self.kind.digest_len() + payload.len());
        header.put(&mut buf);
        let mut digest = BytesMut::with_capacity(self.kind.digest_len());
        self.digest(&buf[..ENTRY_HEADER_LEN], payload, &mut digest);
        buf.put_slice(&digest);
        buf.put_slice(payload);
        buf.freeze()
    }

    /// Checks that `entry` is entry `entry_id` of `ledger_id` and that its digest matches.
    ///
    /// # Errors
    /// [`EntryError`] naming what is wrong.
    pub fn verify(
        &self,
        entry: &Bytes,
        ledger_id: i64,
        entry_id: i64,
    ) -> Result<Entry, EntryError> {
        let dlen = self.kind.digest_len();
        if entry.len() < ENTRY_HEADER_LEN + dlen {
            return Err(EntryError::Short(entry.len()));
        }
        let header = EntryHeader::parse_expected(entry, ledger_id, entry_id)?;
        let payload = entry.slice(ENTRY_HEADER_LEN + dlen..);
        let mut digest = BytesMut::with_capacity(dlen);
        self.digest(&entry[..ENTRY_HEADER_LEN], &payload, &mut digest);
        if digest[..] != entry[ENTRY_HEADER_LEN..ENTRY_HEADER_LEN + dlen] {
            return Err(EntryError::BadDigest {
                ledger: ledger_id,
                entry: entry_id,
            });
        }
        Ok(Entry { header, payload })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(entry_id: i64) -> EntryHeader {
        EntryHeader {
            ledger_id: 7,
            entry_id,
            lac: entry_id - 1,
            length: 100 * (entry_id + 1),
        }
    }

    #[test]
    fn round_trip_both_digests_and_every_flipped_byte_is_caught() {
        for kind in [DigestType::Crc32c, DigestType::HmacSha256] {
            let d = Digester::new(kind, b"secret");
            let e = d.encode(header(3), b"hello world");
            let got = d.verify(&e, 7, 3).unwrap();
            assert_eq!(got.header, header(3));
            assert_eq!(&got.payload[..], b"hello world");
            for i in 0..e.len() {
                let mut bad = e.to_vec();
                bad[i] ^= 0x40;
                let bad = Bytes::from(bad);
                assert!(
                    d.verify(&bad, 7, 3).is_err(),
                    "{kind:?}: flip at {i} passed"
                );
            }
        }
    }

    #[test]
    fn hmac_depends_on_the_password_and_ids_are_checked() {
        let d = Digester::new(DigestType::HmacSha256, b"secret");
        let e = d.encode(header(0), b"x");
        let other = Digester::new(DigestType::HmacSha256, b"other");
        assert_eq!(
            other.verify(&e, 7, 0),
            Err(EntryError::BadDigest {
                ledger: 7,
                entry: 0
            })
        );
        assert!(matches!(
            d.verify(&e, 7, 1),
            Err(EntryError::WrongId { .. })
        ));
        assert!(matches!(
            d.verify(&e, 8, 0),
            Err(EntryError::WrongId { .. })
        ));
        assert_eq!(d.verify(&e.slice(..40), 7, 0), Err(EntryError::Short(40)));
        assert_ne!(master_key(b"secret"), master_key(b"other"));
    }
}
