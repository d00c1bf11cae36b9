//! The error type of the storage layer.
//!
//! One flat enum shared by the data-dir lock, the WAL and the snapshot store. It is `Clone` (I/O
//! errors are behind an `Arc`) because one failed group commit has to be reported to every writer
//! whose records were in it. This module holds no logic beyond constructors.

use std::io;
use std::path::PathBuf;
use std::sync::Arc;

/// Everything that can go wrong in `storage`.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum StorageError {
    /// An operating-system I/O error, with what was being done when it happened.
    #[error("{context}: {source}")]
    Io {
        /// What the storage layer was doing, e.g. "fdatasync /data/wal/wal-….log".
        context: String,
        /// The underlying error.
        #[source]
        source: Arc<io::Error>,
    },
    /// Another process holds the data dir's `LOCK` file.
    #[error("data dir {} is in use by another zkit server (pid {})", dir.display(), pid_text(*pid))]
    DataDirInUse {
        /// The data dir.
        dir: PathBuf,
        /// The pid written in the lock file by its holder, if it could be read.
        pid: Option<u32>,
    },
    /// A record or file failed its checksum or structure check somewhere other than the torn tail
    /// of the log. Recovery refuses to go on unless told to truncate there.
    #[error("corrupt data in {} at offset {offset}: {reason}", file.display())]
    Corruption {
        /// The damaged file.
        file: PathBuf,
        /// Byte offset of the first bad record (or header) in `file`.
        offset: u64,
        /// What check failed.
        reason: String,
    },
    /// An append whose zxid is not greater than the last one in the log.
    #[error("zxid {zxid:#x} is not greater than the last logged zxid {last:#x}")]
    ZxidNotIncreasing {
        /// The rejected zxid.
        zxid: i64,
        /// The last zxid in the log.
        last: i64,
    },
    /// A record larger than the configured maximum.
    #[error("record of {len} bytes exceeds the maximum of {max} bytes")]
    RecordTooLarge {
        /// Payload length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// An earlier write or fsync failed; nothing more is accepted until the WAL is reopened,
    /// because after a failed fsync the page cache can no longer be trusted.
    #[error("write-ahead log refuses writes after an earlier I/O error; reopen it")]
    Poisoned,
    /// The group-commit thread is gone (it panicked or was shut down).
    #[error("write-ahead log commit thread has stopped")]
    CommitThreadGone,
    /// Recovery was asked for after writing started: the log belongs to the commit thread.
    #[error("recover called after writing started")]
    RecoverAfterWrite,
    /// A blocking storage task (reading the log, opening it, stopping the commit thread)
    /// panicked or was cancelled.
    #[error("storage task {task} did not finish: {source}")]
    TaskLost {
        /// What the task was doing.
        task: &'static str,
        /// Why it did not finish.
        #[source]
        source: Arc<tokio::task::JoinError>,
    },
    /// The storage cannot rebuild its state after a failure (it keeps nothing to rebuild from).
    #[error("this storage cannot rebuild its state")]
    RebuildUnsupported,
}

fn pid_text(pid: Option<u32>) -> String {
    match pid {
        Some(pid) => pid.to_string(),
        None => "unknown".to_owned(),
    }
}

impl StorageError {
    /// Wraps an I/O error with what was being done.
    pub fn io(context: impl Into<String>, source: io::Error) -> Self {
        StorageError::Io {
            context: context.into(),
            source: Arc::new(source),
        }
    }

    /// A blocking task that did not finish.
    pub(crate) fn task_lost(task: &'static str, source: tokio::task::JoinError) -> Self {
        StorageError::TaskLost {
            task,
            source: Arc::new(source),
        }
    }

    /// True for errors caused by damaged data on disk (as opposed to the disk failing now).
    pub fn is_corruption(&self) -> bool {
        matches!(self, StorageError::Corruption { .. })
    }
}

/// `Result` with [`StorageError`].
pub type Result<T, E = StorageError> = std::result::Result<T, E>;

/// Adds a context string to an `io::Result`.
pub(crate) trait IoContext<T> {
    /// Maps the error to [`StorageError::Io`] with a lazily built context.
    fn ctx<F: FnOnce() -> String>(self, f: F) -> Result<T>;
}

impl<T> IoContext<T> for io::Result<T> {
    fn ctx<F: FnOnce() -> String>(self, f: F) -> Result<T> {
        self.map_err(|e| StorageError::io(f(), e))
    }
}

impl From<StorageError> for std::io::Error {
    /// Keeps the kind of an underlying I/O error (e.g. `StorageFull`) and the full message, for
    /// callers whose interface is `io::Result`.
    fn from(e: StorageError) -> Self {
        let kind = match &e {
            StorageError::Io { source, .. } => source.kind(),
            StorageError::Corruption { .. } => io::ErrorKind::InvalidData,
            StorageError::DataDirInUse { .. } => io::ErrorKind::WouldBlock,
            StorageError::ZxidNotIncreasing { .. } | StorageError::RecordTooLarge { .. } => {
                io::ErrorKind::InvalidInput
            }
            StorageError::Poisoned
            | StorageError::CommitThreadGone
            | StorageError::RecoverAfterWrite
            | StorageError::TaskLost { .. }
            | StorageError::RebuildUnsupported => io::ErrorKind::Other,
        };
        io::Error::new(kind, e)
    }
}
