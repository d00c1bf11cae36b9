//! The client's and a new ledger's options.

use std::time::Duration;

use zkit_bookie::protocol::entry::DigestType;

/// BookKeeper's default metadata root.
pub const DEFAULT_ROOT: &str = "/ledgers";

/// Client-wide options.
#[derive(Debug, Clone)]
pub struct LedgerOptions {
    /// Metadata root (default [`DEFAULT_ROOT`]).
    pub root: String,
    /// How long a metadata call retries across connection trouble.
    pub metadata_timeout: Duration,
    /// Connecting to a bookie gives up after this.
    pub connect_timeout: Duration,
    /// A bookie request gives up after this (an add that times out counts as a failed bookie).
    pub request_timeout: Duration,
    /// A read is sent to the next replica when the current one has not answered in this long.
    pub speculative_read_delay: Duration,
    /// Entries a writer keeps in flight (not yet acknowledged).
    pub max_in_flight: usize,
    /// Entries a range read keeps in flight.
    pub read_window: usize,
    /// Largest payload accepted.
    pub max_entry_size: usize,
}

impl Default for LedgerOptions {
    fn default() -> Self {
        LedgerOptions {
            root: DEFAULT_ROOT.to_string(),
            metadata_timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(5),
            speculative_read_delay: Duration::from_millis(100),
            max_in_flight: 1000,
            read_window: 256,
            max_entry_size: zkit_bookie::protocol::DEFAULT_MAX_FRAME - 64 * 1024,
        }
    }
}

/// How to create a ledger.
#[derive(Debug, Clone)]
pub struct CreateOptions {
    /// E: bookies per fragment.
    pub ensemble: usize,
    /// Qw: copies of each entry.
    pub write_quorum: usize,
    /// Qa: acknowledgements per entry.
    pub ack_quorum: usize,
    /// The ledger's password.
    pub password: Vec<u8>,
    /// How entries are digested.
    pub digest: DigestType,
}

impl Default for CreateOptions {
    /// E3 Qw2 Qa2, empty password, CRC32C.
    fn default() -> Self {
        CreateOptions {
            ensemble: 3,
            write_quorum: 2,
            ack_quorum: 2,
            password: Vec::new(),
            digest: DigestType::Crc32c,
        }
    }
}
