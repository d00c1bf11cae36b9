//! Why an import failed.

use std::path::PathBuf;

use zkit_core::RestoreError;

use crate::storage::error::StorageError;

/// Why an import failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ImportError {
    /// Reading the Apache dir or writing the zkit dir failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// A file does not parse or fails its checksum.
    #[error("{}: {reason} (at byte {offset})", file.display())]
    Corrupt {
        /// The file.
        file: PathBuf,
        /// Where the problem starts.
        offset: usize,
        /// What is wrong.
        reason: String,
    },
    /// A logged txn does not decode.
    #[error("txn {zxid:#x}: {reason}")]
    BadTxn {
        /// Its zxid.
        zxid: i64,
        /// What is wrong.
        reason: String,
    },
    /// Snapshots exist but none is valid.
    #[error("no valid snapshot in {}: {reason}", dir.display())]
    NoValidSnapshot {
        /// The `version-2` dir.
        dir: PathBuf,
        /// Why the newest one failed.
        reason: String,
    },
    /// No `version-2` dir with snapshots or logs.
    #[error("{} holds no Apache ZooKeeper data (no version-2/snapshot.* or log.*)", .0.display())]
    NoData(PathBuf),
    /// The zkit data dir is not empty.
    #[error("the zkit data dir {} is not empty: an import needs a fresh one", .0.display())]
    NotEmpty(PathBuf),
    /// The image does not make a consistent tree.
    #[error("the imported state is inconsistent: {0}")]
    Inconsistent(#[from] RestoreError),
    /// Writing the zkit data dir failed.
    #[error(transparent)]
    Storage(#[from] StorageError),
}
