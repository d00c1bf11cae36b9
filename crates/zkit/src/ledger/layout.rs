//! Znode paths and data formats of the ledger metadata, in BookKeeper's layout (pure: no I/O).
//!
//! Under the root (default [`super::DEFAULT_ROOT`], `/ledgers`):
//!
//! | path | kind | data |
//! |---|---|---|
//! | `NN/NNNN/LNNNN` | persistent, one per ledger | [`LedgerMetadata`], JSON (below) |
//! | `idgen/ID-<seq>` | ephemeral sequential, deleted at once | empty: the sequence is the new ledger id |
//! | `available/HOST:PORT` | ephemeral, one per writable bookie | (the bookie's registration) |
//! | `available/readonly/HOST:PORT` | ephemeral, one per read-only bookie | |
//! | `underreplication/ledgers/XXXX/XXXX/XXXX/XXXX/urL<id>` | persistent, one per under-replicated ledger | [`UnderReplicated`], protobuf text |
//! | `underreplication/locks/urL<id>` | ephemeral: a replication worker is on it | empty |
//! | `underreplication/auditorelection/…` | the auditor's [`crate::election::LeaderLatch`] | |
//!
//! The ledger node path is BookKeeper's `HierarchicalLedgerManager` path for ids below
//! `i32::MAX` (`StringUtils.getShortHierarchicalLedgerPath`): the id as 10 digits, split 2-4-4,
//! so ledger 1 is `/ledgers/00/0000/L0001` and ledger 1234567890 is `/ledgers/12/3456/L7890`.
//! Ids come from ZooKeeper sequence numbers (`ZkLedgerIdGenerator`), which are below
//! `i32::MAX`, so the long (3-4-4-4-4) layout is never needed. The under-replication paths are
//! `ZkLedgerUnderreplicationManager`'s.
//!
//! # Metadata encoding
//! A ledger node holds one JSON object, format 1:
//!
//! ```json
//! {"format":1,"ensembleSize":3,"writeQuorumSize":2,"ackQuorumSize":2,"state":"CLOSED",
//!  "lastEntryId":9,"length":1000,"digestType":"CRC32C","passwordDigest":"9f86…",
//!  "ctime":1700000000000,
//!  "ensembles":[{"firstEntryId":0,"bookies":["10.0.0.1:3181","10.0.0.2:3181","10.0.0.3:3181"]}]}
//! ```
//!
//! JSON rather than BookKeeper's binary protobuf: metadata is small (a few hundred bytes) and
//! written a handful of times per ledger (create, ensemble changes, close), so size and speed
//! do not matter, while a readable node (`zkit get /ledgers/00/0000/L0001`) does, and serde is
//! already a dependency. `format` is checked on read: a reader refuses a format it does not
//! know instead of misreading it; a later format may add fields (readers of format 1 ignore
//! unknown fields) but must bump `format` to change the meaning of one. The fields follow
//! BookKeeper's `LedgerMetadataFormat`; `passwordDigest` is the ledger's master key (hex
//! SHA-256 of `"ledger"` and the password, [`zkit_bookie::protocol::entry::master_key`]) in
//! place of BookKeeper's stored password: `open` checks a password against it before touching
//! a bookie, and the replication worker presents it to the bookies it copies entries to. The
//! HMAC key of entry digests is derived differently, so a reader of the metadata cannot forge
//! HMAC-digested entries.
//!
//! Decoding is check-then-trust: quorum sizes, ensemble sizes, increasing fragment keys
//! starting at 0, distinct bookies within an ensemble and a consistent close are verified, and
//! anything else is [`LayoutError`]; a corrupt node never panics a reader.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use zkit_bookie::protocol::entry::{DigestType, MasterKey, MASTER_KEY_LEN};

/// The metadata format this code writes and reads.
pub const FORMAT: u32 = 1;

/// Largest ledger id (exclusive): ZooKeeper sequence numbers and the short hierarchical layout.
pub const MAX_LEDGER_ID: i64 = i32::MAX as i64;

/// Children of the root that are not ledger directories (BookKeeper's
/// `AbstractZkLedgerManager.isSpecialZnode`).
pub const SPECIAL_ZNODES: [&str; 8] = [
    "available",
    "cookies",
    "idgen",
    "idgen-long",
    "underreplication",
    "INSTANCEID",
    "LAYOUT",
    "readonly",
];

/// Why metadata or a path could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LayoutError {
    /// The node's data is not valid metadata.
    #[error("corrupt ledger metadata: {0}")]
    Corrupt(String),
    /// The metadata is of a format this code does not know.
    #[error("ledger metadata format {0} is not supported (this zkit reads format {FORMAT})")]
    UnknownFormat(u32),
    /// A ledger id outside `0..MAX_LEDGER_ID`.
    #[error("ledger id {0} is outside 0..{MAX_LEDGER_ID}")]
    BadLedgerId(i64),
    /// The root is not an absolute path.
    #[error("bad metadata root {0:?}: must be an absolute path below /")]
    BadRoot(String),
}

/// A ledger's state (BookKeeper's `LedgerMetadataFormat.State`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum LedgerState {
    /// A writer may be adding entries.
    Open,
    /// A reader is recovering it: the writer is fenced out.
    InRecovery,
    /// Closed: `last_entry_id` and `length` are final.
    Closed,
}

impl std::fmt::Display for LedgerState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LedgerState::Open => "OPEN",
            LedgerState::InRecovery => "IN_RECOVERY",
            LedgerState::Closed => "CLOSED",
        })
    }
}

/// A ledger's metadata (BookKeeper's `LedgerMetadata`). Changed only through the checked
/// builders below, and stored only by versioned CAS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerMetadata {
    /// E: bookies per fragment.
    pub ensemble_size: usize,
    /// Qw: copies of each entry.
    pub write_quorum: usize,
    /// Qa: acknowledgements that make an entry durable.
    pub ack_quorum: usize,
    /// OPEN / IN_RECOVERY / CLOSED.
    pub state: LedgerState,
    /// The last entry (-1: none); final once closed, -1 while open.
    pub last_entry_id: i64,
    /// Total payload bytes; final once closed, 0 while open.
    pub length: u64,
    /// How entries are digested.
    pub digest_type: DigestType,
    /// The master key (a digest of the password, not the password).
    pub master_key: MasterKey,
    /// Creation time, Unix ms.
    pub ctime_ms: u64,
    /// Fragments: first entry id → the ensemble writing from there on (bookie ids).
    pub ensembles: BTreeMap<i64, Vec<String>>,
}

impl LedgerMetadata {
    /// The metadata of a new, open ledger with one fragment from entry 0. Quorums are checked
    /// with [`check_quorums`].
    ///
    /// # Errors
    /// [`LayoutError::Corrupt`] when the quorums or the ensemble are inconsistent.
    pub fn new_open(
        write_quorum: usize,
        ack_quorum: usize,
        ensemble: Vec<String>,
        digest_type: DigestType,
        master_key: MasterKey,
        ctime_ms: u64,
    ) -> Result<LedgerMetadata, LayoutError> {
        let m = LedgerMetadata {
            ensemble_size: ensemble.len(),
            write_quorum,
            ack_quorum,
            state: LedgerState::Open,
            last_entry_id: -1,
            length: 0,
            digest_type,
            master_key,
            ctime_ms,
            ensembles: BTreeMap::from([(0, ensemble)]),
        };
        m.validate()?;
        Ok(m)
    }

    /// True once closed.
    pub fn is_closed(&self) -> bool {
        self.state == LedgerState::Closed
    }

    /// The last fragment: its first entry and its ensemble.
    pub fn last_ensemble(&self) -> (i64, &[String]) {
        self.ensembles
            .iter()
            .next_back()
            .map(|(k, v)| (*k, v.as_slice()))
            .unwrap_or((0, &[]))
    }

    /// The ensemble that holds `entry_id`: the fragment with the greatest first entry ≤ it.
    pub fn ensemble_for(&self, entry_id: i64) -> &[String] {
        self.ensembles
            .range(..=entry_id)
            .next_back()
            .map(|(_, v)| v.as_slice())
            .unwrap_or(&[])
    }

    /// Fragments as `(first, last, ensemble)`; `last` is `None` for the open end of an
    /// unclosed ledger. Fragments with no entries (first > last) are left out.
    pub fn fragments(&self) -> Vec<(i64, Option<i64>, &[String])> {
        let keys: Vec<i64> = self.ensembles.keys().copied().collect();
        let mut out = Vec::with_capacity(keys.len());
        for (i, (first, ens)) in self.ensembles.iter().enumerate() {
            let last = match keys.get(i + 1) {
                Some(next) => Some(next - 1),
                None if self.is_closed() => Some(self.last_entry_id),
                None => None,
            };
            if last.is_some_and(|l| l < *first) {
                continue;
            }
            out.push((*first, last, ens.as_slice()));
        }
        out
    }

    /// Every bookie that appears in any fragment.
    pub fn bookies(&self) -> std::collections::BTreeSet<&str> {
        self.ensembles
            .values()
            .flat_map(|e| e.iter().map(String::as_str))
            .collect()
    }

    /// This metadata with a new ensemble from `first_entry` on (BookKeeper's ensemble change:
    /// the key is the first entry not yet acknowledged). A key equal to the last fragment's
    /// replaces that fragment's ensemble (nothing was acknowledged in it).
    ///
    /// # Errors
    /// [`LayoutError::Corrupt`] when the key is before the last fragment, the ensemble has the
    /// wrong size or repeats a bookie, or the ledger is closed.
    pub fn with_ensemble_change(
        &self,
        first_entry: i64,
        ensemble: Vec<String>,
    ) -> Result<LedgerMetadata, LayoutError> {
        if self.is_closed() {
            return Err(LayoutError::Corrupt(
                "ensemble change on a closed ledger".into(),
            ));
        }
        let (last_key, _) = self.last_ensemble();
        if first_entry < last_key {
            return Err(LayoutError::Corrupt(format!(
                "ensemble change at entry {first_entry} before the last fragment ({last_key})"
            )));
        }
        let mut m = self.clone();
        m.ensembles.insert(first_entry, ensemble);
        m.validate()?;
        Ok(m)
    }

    /// This metadata with bookie `index` of the fragment starting at `first_entry` replaced by
    /// `bookie` (the replication worker's update, as `LedgerFragmentReplicator` does it).
    ///
    /// # Errors
    /// [`LayoutError::Corrupt`] when there is no such fragment or index, or the result would
    /// repeat a bookie.
    pub fn with_replaced_bookie(
        &self,
        first_entry: i64,
        index: usize,
        bookie: &str,
    ) -> Result<LedgerMetadata, LayoutError> {
        let mut m = self.clone();
        let slot = m
            .ensembles
            .get_mut(&first_entry)
            .and_then(|e| e.get_mut(index))
            .ok_or_else(|| {
                LayoutError::Corrupt(format!("no bookie {index} in fragment {first_entry}"))
            })?;
        *slot = bookie.to_string();
        m.validate()?;
        Ok(m)
    }

    /// This metadata in state IN_RECOVERY (a no-op when already so).
    ///
    /// # Errors
    /// [`LayoutError::Corrupt`] when closed.
    pub fn in_recovery(&self) -> Result<LedgerMetadata, LayoutError> {
        if self.is_closed() {
            return Err(LayoutError::Corrupt("recovering a closed ledger".into()));
        }
        let mut m = self.clone();
        m.state = LedgerState::InRecovery;
        Ok(m)
    }

    /// This metadata closed at `last_entry_id` with `length` payload bytes.
    ///
    /// # Errors
    /// [`LayoutError::Corrupt`] when already closed or the last entry is before the last
    /// fragment's first entry minus one (a fragment cannot start past the end).
    pub fn closed(&self, last_entry_id: i64, length: u64) -> Result<LedgerMetadata, LayoutError> {
        if self.is_closed() {
            return Err(LayoutError::Corrupt("closing a closed ledger".into()));
        }
        let mut m = self.clone();
        m.state = LedgerState::Closed;
        m.last_entry_id = last_entry_id;
        m.length = length;
        // A last fragment that starts past the end holds nothing: drop it, as BookKeeper's
        // close does not keep an ensemble no entry was written to.
        while m.ensembles.len() > 1 {
            let (k, _) = m.last_ensemble();
            if k > last_entry_id + 1 {
                m.ensembles.remove(&k);
            } else {
                break;
            }
        }
        m.validate()?;
        Ok(m)
    }

    /// Checks every invariant a stored node must hold.
    ///
    /// # Errors
    /// [`LayoutError::Corrupt`] naming the first violation.
    pub fn validate(&self) -> Result<(), LayoutError> {
        let bad = |s: String| Err(LayoutError::Corrupt(s));
        if let Err(e) = check_quorums(self.ensemble_size, self.write_quorum, self.ack_quorum) {
            return bad(e);
        }
        let Some((&first, _)) = self.ensembles.iter().next() else {
            return bad("no ensembles".into());
        };
        if first != 0 {
            return bad(format!("the first fragment starts at {first}, not 0"));
        }
        for (k, e) in &self.ensembles {
            if e.len() != self.ensemble_size {
                return bad(format!(
                    "fragment {k} has {} bookies, ensemble size is {}",
                    e.len(),
                    self.ensemble_size
                ));
            }
            let mut seen = std::collections::BTreeSet::new();
            for b in e {
                if b.is_empty() || !seen.insert(b.as_str()) {
                    return bad(format!(
                        "fragment {k} has an empty or repeated bookie {b:?}"
                    ));
                }
            }
        }
        if self.last_entry_id < -1 {
            return bad(format!("last entry id {}", self.last_entry_id));
        }
        if self.is_closed() {
            let (k, _) = self.last_ensemble();
            if k > self.last_entry_id + 1 {
                return bad(format!(
                    "closed at {} but a fragment starts at {k}",
                    self.last_entry_id
                ));
            }
        } else if self.last_entry_id != -1 || self.length != 0 {
            return bad("an unclosed ledger has a last entry or length".into());
        }
        Ok(())
    }
}

/// Checks `E ≥ Qw ≥ Qa ≥ 1`; the error says which inequality fails.
///
/// # Errors
/// A message naming the violated bound.
pub fn check_quorums(
    ensemble: usize,
    write_quorum: usize,
    ack_quorum: usize,
) -> Result<(), String> {
    if ack_quorum < 1 {
        return Err(format!("ack quorum {ack_quorum} must be at least 1"));
    }
    if write_quorum < ack_quorum {
        return Err(format!(
            "write quorum {write_quorum} is smaller than ack quorum {ack_quorum} (need Qw >= Qa)"
        ));
    }
    if ensemble < write_quorum {
        return Err(format!(
            "ensemble {ensemble} is smaller than write quorum {write_quorum} (need E >= Qw)"
        ));
    }
    if ensemble > 64 {
        return Err(format!("ensemble {ensemble} is larger than 64 bookies"));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// JSON

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Fragment {
    first_entry_id: i64,
    bookies: Vec<String>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Stored {
    format: u32,
    ensemble_size: usize,
    write_quorum_size: usize,
    ack_quorum_size: usize,
    state: LedgerState,
    last_entry_id: i64,
    length: u64,
    digest_type: String,
    password_digest: String,
    ctime: u64,
    ensembles: Vec<Fragment>,
}

/// The name of a digest type in the metadata (BookKeeper's `DigestType` names).
pub fn digest_name(d: DigestType) -> &'static str {
    match d {
        DigestType::Crc32c => "CRC32C",
        DigestType::HmacSha256 => "HMAC",
    }
}

/// The digest type for a name ([`digest_name`]; case-insensitive, `hmac-sha256` accepted).
pub fn parse_digest(name: &str) -> Option<DigestType> {
    match name.to_ascii_uppercase().as_str() {
        "CRC32C" => Some(DigestType::Crc32c),
        "HMAC" | "HMAC-SHA256" | "HMACSHA256" => Some(DigestType::HmacSha256),
        _ => None,
    }
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

fn unhex(s: &str) -> Option<MasterKey> {
    if s.len() != MASTER_KEY_LEN * 2 || !s.is_ascii() {
        return None;
    }
    let mut key = [0u8; MASTER_KEY_LEN];
    for (i, k) in key.iter_mut().enumerate() {
        *k = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(key)
}

/// Encodes metadata as the node's data.
pub fn encode_metadata(m: &LedgerMetadata) -> Vec<u8> {
    let stored = Stored {
        format: FORMAT,
        ensemble_size: m.ensemble_size,
        write_quorum_size: m.write_quorum,
        ack_quorum_size: m.ack_quorum,
        state: m.state,
        last_entry_id: m.last_entry_id,
        length: m.length,
        digest_type: digest_name(m.digest_type).to_string(),
        password_digest: hex(&m.master_key),
        ctime: m.ctime_ms,
        ensembles: m
            .ensembles
            .iter()
            .map(|(k, v)| Fragment {
                first_entry_id: *k,
                bookies: v.clone(),
            })
            .collect(),
    };
    // Serializing plain structs of strings and numbers cannot fail.
    serde_json::to_vec(&stored).unwrap_or_default()
}

/// Decodes and validates a node's data.
///
/// # Errors
/// [`LayoutError::UnknownFormat`] or [`LayoutError::Corrupt`].
pub fn decode_metadata(data: &[u8]) -> Result<LedgerMetadata, LayoutError> {
    #[derive(Deserialize)]
    struct Probe {
        format: u32,
    }
    let probe: Probe = serde_json::from_slice(data)
        .map_err(|e| LayoutError::Corrupt(format!("not ledger metadata JSON: {e}")))?;
    if probe.format != FORMAT {
        return Err(LayoutError::UnknownFormat(probe.format));
    }
    let s: Stored =
        serde_json::from_slice(data).map_err(|e| LayoutError::Corrupt(e.to_string()))?;
    let digest_type = parse_digest(&s.digest_type)
        .ok_or_else(|| LayoutError::Corrupt(format!("unknown digest type {:?}", s.digest_type)))?;
    let master_key = unhex(&s.password_digest)
        .ok_or_else(|| LayoutError::Corrupt("password digest is not 64 hex digits".into()))?;
    let mut ensembles = BTreeMap::new();
    for f in s.ensembles {
        if ensembles.insert(f.first_entry_id, f.bookies).is_some() {
            return Err(LayoutError::Corrupt(format!(
                "two fragments start at {}",
                f.first_entry_id
            )));
        }
    }
    let m = LedgerMetadata {
        ensemble_size: s.ensemble_size,
        write_quorum: s.write_quorum_size,
        ack_quorum: s.ack_quorum_size,
        state: s.state,
        last_entry_id: s.last_entry_id,
        length: s.length,
        digest_type,
        master_key,
        ctime_ms: s.ctime,
        ensembles,
    };
    m.validate()?;
    Ok(m)
}

// ---------------------------------------------------------------------------------------------
// Paths

/// The znode paths under one metadata root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    root: String,
}

impl Layout {
    /// The layout under `root` (absolute, no trailing `/`).
    ///
    /// # Errors
    /// [`LayoutError::BadRoot`].
    pub fn new(root: &str) -> Result<Layout, LayoutError> {
        let trimmed = root.trim_end_matches('/');
        if !trimmed.starts_with('/') || trimmed.len() < 2 {
            return Err(LayoutError::BadRoot(root.to_string()));
        }
        Ok(Layout {
            root: trimmed.to_string(),
        })
    }

    /// The root.
    pub fn root(&self) -> &str {
        &self.root
    }

    /// The ledger's node: `NN/NNNN/LNNNN`.
    ///
    /// # Errors
    /// [`LayoutError::BadLedgerId`] outside `0..MAX_LEDGER_ID`.
    pub fn ledger(&self, ledger_id: i64) -> Result<String, LayoutError> {
        if !(0..MAX_LEDGER_ID).contains(&ledger_id) {
            return Err(LayoutError::BadLedgerId(ledger_id));
        }
        let s = format!("{ledger_id:010}");
        Ok(format!(
            "{}/{}/{}/L{}",
            self.root,
            &s[..2],
            &s[2..6],
            &s[6..]
        ))
    }

    /// The prefix of id-generation nodes (`idgen/ID-`).
    pub fn idgen_prefix(&self) -> String {
        format!("{}/idgen/ID-", self.root)
    }

    /// `available/`: writable bookies.
    pub fn available(&self) -> String {
        format!("{}/available", self.root)
    }

    /// `available/readonly/`: read-only bookies.
    pub fn readonly(&self) -> String {
        format!("{}/available/readonly", self.root)
    }

    /// `underreplication/ledgers`.
    pub fn ur_ledgers(&self) -> String {
        format!("{}/underreplication/ledgers", self.root)
    }

    /// The under-replication mark of a ledger (`ZkLedgerUnderreplicationManager
    /// .getUrLedgerZnode`: four 16-bit hex levels, then `urL` and the id in 10 digits).
    pub fn ur_ledger(&self, ledger_id: i64) -> String {
        let id = ledger_id as u64;
        format!(
            "{}/{:04x}/{:04x}/{:04x}/{:04x}/urL{ledger_id:010}",
            self.ur_ledgers(),
            id >> 48 & 0xffff,
            id >> 32 & 0xffff,
            id >> 16 & 0xffff,
            id & 0xffff
        )
    }

    /// `underreplication/locks`.
    pub fn ur_locks(&self) -> String {
        format!("{}/underreplication/locks", self.root)
    }

    /// The replication lock of a ledger (ephemeral).
    pub fn ur_lock(&self, ledger_id: i64) -> String {
        format!("{}/urL{ledger_id:010}", self.ur_locks())
    }

    /// Where auditor candidates elect one auditor.
    pub fn auditor_election(&self) -> String {
        format!("{}/underreplication/auditorelection", self.root)
    }
}

/// Is `name` a first-level ledger directory (2 digits)?
pub fn is_ledger_dir(name: &str) -> bool {
    name.len() == 2 && name.bytes().all(|b| b.is_ascii_digit())
}

/// Is `name` a second-level ledger directory (4 digits)?
pub fn is_ledger_subdir(name: &str) -> bool {
    name.len() == 4 && name.bytes().all(|b| b.is_ascii_digit())
}

/// The ledger id of a node `L<4 digits>` under directories `top`/`mid`, if it is one.
pub fn ledger_id_of(top: &str, mid: &str, leaf: &str) -> Option<i64> {
    let digits = leaf.strip_prefix('L')?;
    if !is_ledger_dir(top)
        || !is_ledger_subdir(mid)
        || digits.len() != 4
        || !digits.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    format!("{top}{mid}{digits}").parse().ok()
}

/// The ledger id of an id-generation node name `ID-<seq>` (`ZkLedgerIdGenerator
/// .getLedgerIdFromGenPath`).
pub fn ledger_id_of_idgen(name: &str) -> Option<i64> {
    let digits = name.rsplit('/').next()?.strip_prefix("ID-")?;
    let id: i64 = digits.parse().ok()?;
    (0..MAX_LEDGER_ID).contains(&id).then_some(id)
}

/// The ledger id of an under-replication node name `urL<10 digits>`.
pub fn ledger_id_of_ur(name: &str) -> Option<i64> {
    let digits = name.strip_prefix("urL")?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

// ---------------------------------------------------------------------------------------------
// Under-replication marks

/// What an under-replication mark says (BookKeeper's `UnderreplicatedLedgerFormat`): the
/// missing bookies and when it was marked.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UnderReplicated {
    /// Bookies of the ledger's ensembles that were gone.
    pub replicas: Vec<String>,
    /// Unix ms of the (last) mark.
    pub ctime_ms: u64,
}

impl UnderReplicated {
    /// Protobuf text format, as `ZkLedgerUnderreplicationManager` writes it:
    /// `replica: "HOST:PORT"` lines, then `ctime: N`.
    pub fn encode(&self) -> Vec<u8> {
        let mut s = String::new();
        for r in &self.replicas {
            s.push_str("replica: \"");
            for c in r.chars() {
                if c == '"' || c == '\\' {
                    s.push('\\');
                }
                s.push(c);
            }
            s.push_str("\"\n");
        }
        s.push_str(&format!("ctime: {}\n", self.ctime_ms));
        s.into_bytes()
    }

    /// Parses [`UnderReplicated::encode`]'s format; unknown lines are skipped.
    ///
    /// # Errors
    /// [`LayoutError::Corrupt`] when it is not UTF-8 or a `replica` value is not quoted.
    pub fn decode(data: &[u8]) -> Result<UnderReplicated, LayoutError> {
        let text = std::str::from_utf8(data)
            .map_err(|_| LayoutError::Corrupt("under-replication mark is not UTF-8".into()))?;
        let mut out = UnderReplicated::default();
        for line in text.lines() {
            let line = line.trim();
            if let Some(v) = line.strip_prefix("replica:") {
                let v = v.trim();
                let inner = v
                    .strip_prefix('"')
                    .and_then(|v| v.strip_suffix('"'))
                    .ok_or_else(|| LayoutError::Corrupt(format!("replica value {v:?}")))?;
                let mut r = String::new();
                let mut esc = false;
                for c in inner.chars() {
                    if esc || c != '\\' {
                        r.push(c);
                        esc = false;
                    } else {
                        esc = true;
                    }
                }
                out.replicas.push(r);
            } else if let Some(v) = line.strip_prefix("ctime:") {
                out.ctime_ms = v.trim().parse().unwrap_or(0);
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zkit_bookie::protocol::entry::master_key;

    fn ens(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    fn open() -> LedgerMetadata {
        LedgerMetadata::new_open(
            2,
            2,
            ens(&["a:1", "b:1", "c:1"]),
            DigestType::Crc32c,
            master_key(b"pw"),
            42,
        )
        .unwrap()
    }

    #[test]
    fn paths_are_bookkeepers() {
        let l = Layout::new("/ledgers/").unwrap();
        assert_eq!(l.ledger(1).unwrap(), "/ledgers/00/0000/L0001");
        assert_eq!(l.ledger(1234567890).unwrap(), "/ledgers/12/3456/L7890");
        assert_eq!(l.ledger(0).unwrap(), "/ledgers/00/0000/L0000");
        assert!(l.ledger(-1).is_err());
        assert!(l.ledger(MAX_LEDGER_ID).is_err());
        assert_eq!(ledger_id_of("12", "3456", "L7890"), Some(1234567890));
        assert_eq!(ledger_id_of("12", "3456", "L789"), None);
        assert_eq!(ledger_id_of("ab", "3456", "L7890"), None);
        assert_eq!(ledger_id_of_idgen("/ledgers/idgen/ID-0000000042"), Some(42));
        assert_eq!(ledger_id_of_idgen("ID-x"), None);
        assert_eq!(
            l.ur_ledger(0xcafe_beef_0000_feed_u64 as i64 & i64::MAX),
            format!(
                "/ledgers/underreplication/ledgers/4afe/beef/0000/feed/urL{:010}",
                0xcafe_beef_0000_feed_u64 as i64 & i64::MAX
            )
        );
        assert_eq!(
            l.ur_ledger(7),
            "/ledgers/underreplication/ledgers/0000/0000/0000/0007/urL0000000007"
        );
        assert_eq!(ledger_id_of_ur("urL0000000007"), Some(7));
        assert_eq!(
            l.ur_lock(7),
            "/ledgers/underreplication/locks/urL0000000007"
        );
        assert!(Layout::new("ledgers").is_err());
        assert!(Layout::new("/").is_err());
    }

    #[test]
    fn metadata_round_trips_and_is_validated() {
        let m = open()
            .with_ensemble_change(5, ens(&["a:1", "d:1", "c:1"]))
            .unwrap()
            .closed(9, 1000)
            .unwrap();
        let bytes = encode_metadata(&m);
        assert_eq!(decode_metadata(&bytes).unwrap(), m);
        let text = String::from_utf8(bytes).unwrap();
        assert!(text.contains("\"state\":\"CLOSED\""), "{text}");
        assert!(text.contains("\"format\":1"), "{text}");

        // Unknown format, garbage, broken invariants: errors, never panics.
        let v2 = text.replace("\"format\":1", "\"format\":2");
        assert_eq!(
            decode_metadata(v2.as_bytes()),
            Err(LayoutError::UnknownFormat(2))
        );
        assert!(decode_metadata(b"\xff\x00garbage").is_err());
        let short = text.replace("\"ensembleSize\":3", "\"ensembleSize\":4");
        assert!(matches!(
            decode_metadata(short.as_bytes()),
            Err(LayoutError::Corrupt(_))
        ));
        let qa = text.replace("\"ackQuorumSize\":2", "\"ackQuorumSize\":3");
        assert!(decode_metadata(qa.as_bytes()).is_err());
        let key = text.replace("\"passwordDigest\":\"", "\"passwordDigest\":\"zz");
        assert!(decode_metadata(key.as_bytes()).is_err());
        // Unknown extra fields are ignored (a later format may add some).
        let extra = text.replacen('{', "{\"future\":true,", 1);
        assert_eq!(decode_metadata(extra.as_bytes()).unwrap(), m);
    }

    #[test]
    fn builders_enforce_the_rules() {
        let m = open();
        assert!(m
            .with_ensemble_change(0, ens(&["a:1", "a:1", "c:1"]))
            .is_err());
        assert!(m.with_ensemble_change(0, ens(&["a:1", "c:1"])).is_err());
        let m2 = m
            .with_ensemble_change(3, ens(&["d:1", "b:1", "c:1"]))
            .unwrap();
        assert!(m2
            .with_ensemble_change(2, ens(&["e:1", "b:1", "c:1"]))
            .is_err());
        // Same key again: replaces that fragment's ensemble.
        let m3 = m2
            .with_ensemble_change(3, ens(&["e:1", "b:1", "c:1"]))
            .unwrap();
        assert_eq!(m3.ensembles.len(), 2);
        assert_eq!(m3.ensemble_for(7)[0], "e:1");
        assert_eq!(m3.ensemble_for(2)[0], "a:1");
        // Closing drops fragments that start past the end.
        let c = m3.closed(1, 10).unwrap();
        assert_eq!(c.ensembles.len(), 1);
        assert!(c.closed(1, 10).is_err());
        assert!(c
            .with_ensemble_change(9, ens(&["a:1", "b:1", "c:1"]))
            .is_err());
        assert!(c.in_recovery().is_err());
        let c2 = m3.closed(2, 10).unwrap();
        assert_eq!(
            c2.ensembles.len(),
            2,
            "fragment at 3 = last + 1 kept (empty)"
        );
        assert_eq!(c2.fragments().len(), 1, "but it has no entries");
        let r = m3.with_replaced_bookie(0, 1, "z:1").unwrap();
        assert_eq!(r.ensembles[&0], ens(&["a:1", "z:1", "c:1"]));
        assert!(m3.with_replaced_bookie(0, 1, "c:1").is_err());
        assert!(m3.with_replaced_bookie(1, 0, "z:1").is_err());
        assert_eq!(
            m3.fragments()
                .iter()
                .map(|(f, l, _)| (*f, *l))
                .collect::<Vec<_>>(),
            vec![(0, Some(2)), (3, None)]
        );
    }

    #[test]
    fn quorum_checks_name_the_bound() {
        assert!(check_quorums(3, 2, 2).is_ok());
        assert!(check_quorums(1, 1, 1).is_ok());
        assert!(check_quorums(2, 3, 2).unwrap_err().contains("E >= Qw"));
        assert!(check_quorums(3, 2, 3).unwrap_err().contains("Qw >= Qa"));
        assert!(check_quorums(3, 2, 0).unwrap_err().contains("at least 1"));
    }

    #[test]
    fn underreplication_mark_round_trips() {
        let u = UnderReplicated {
            replicas: vec!["127.0.0.1:3181".into(), "we\"ird\\".into()],
            ctime_ms: 17,
        };
        let text = String::from_utf8(u.encode()).unwrap();
        assert!(text.starts_with("replica: \"127.0.0.1:3181\"\n"), "{text}");
        assert_eq!(UnderReplicated::decode(text.as_bytes()).unwrap(), u);
        assert!(UnderReplicated::decode(b"replica: unquoted").is_err());
        assert_eq!(
            UnderReplicated::decode(b"").unwrap(),
            UnderReplicated::default()
        );
    }
}
