//! [`WalStorage`]: the durable [`Storage`], txns in a write-ahead log under a locked data dir.
//!
//! It is the adapter between the pipeline's txn-level trait and the byte-level log: each
//! [`Txn`] is encoded with `Txn::encode` as one WAL record under its own zxid, a pipeline batch is
//! one group-commit submission, and `persist` returns only after the fdatasync that covers it.
//! Recovery decodes every record back into a `Txn` (the whole log: snapshots, and with them
//! pruning, are not wired into the `Storage` trait yet). It does not interpret txns beyond
//! checking that each decodes and carries its record's zxid.

use std::io;
use std::path::Path;

use bytes::BytesMut;
use zkit_core::Txn;

use super::commit::GroupCommit;
use super::datadir::DataDir;
use super::error::{Result, StorageError};
use super::wal::{RecoveryReport, Wal, WalOptions};
use super::{Storage, StorageFuture};

/// Durable [`Storage`]: a [`DataDir`] lock plus a [`Wal`] driven by a [`GroupCommit`] thread.
#[derive(Debug)]
pub struct WalStorage {
    dir: DataDir,
    /// The log until `recover` has read it; then it moves to the commit thread.
    wal: Option<Wal>,
    commit: Option<GroupCommit>,
    report: RecoveryReport,
}

impl WalStorage {
    /// Locks `data_dir` and opens (validating and repairing) its WAL.
    ///
    /// # Errors
    /// [`StorageError::DataDirInUse`] if another server holds the dir; [`StorageError::Corruption`]
    /// for a damaged log (unless `opts.truncate_corrupt`); [`StorageError::Io`] otherwise.
    pub fn open(data_dir: impl AsRef<Path>, opts: WalOptions) -> Result<WalStorage> {
        let dir = DataDir::open(data_dir)?;
        let (wal, report) = Wal::open(dir.wal_dir(), opts)?;
        Ok(WalStorage {
            dir,
            wal: Some(wal),
            commit: None,
            report,
        })
    }

    /// What opening the log found and repaired.
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.report
    }

    /// The locked data dir.
    pub fn data_dir(&self) -> &DataDir {
        &self.dir
    }

    fn read_all(wal: &Wal) -> io::Result<Vec<Txn>> {
        let mut txns = Vec::new();
        for record in wal.read_from(i64::MIN) {
            let record = record?;
            let txn = Txn::decode(&record.payload).map_err(|e| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "WAL record {:#x} does not decode as a txn: {e}",
                        record.zxid
                    ),
                )
            })?;
            if txn.zxid != record.zxid {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("WAL record {:#x} holds txn {:#x}", record.zxid, txn.zxid),
                ));
            }
            txns.push(txn);
        }
        Ok(txns)
    }

    fn commit_thread(&mut self) -> io::Result<&GroupCommit> {
        if self.commit.is_none() {
            let wal = self.wal.take().ok_or(StorageError::CommitThreadGone)?;
            self.commit = Some(GroupCommit::start(wal)?);
        }
        self.commit
            .as_ref()
            .ok_or_else(|| StorageError::CommitThreadGone.into())
    }
}

impl Storage for WalStorage {
    fn recover(&mut self) -> StorageFuture<'_, Vec<Txn>> {
        Box::pin(async move {
            let Some(wal) = self.wal.take() else {
                return Err(io::Error::other("recover called after writing started"));
            };
            // Reading the log is blocking file I/O; it happens once, before serving.
            let (wal, txns) = tokio::task::spawn_blocking(move || {
                let txns = Self::read_all(&wal);
                (wal, txns)
            })
            .await
            .map_err(io::Error::other)?;
            self.wal = Some(wal);
            let txns = txns?;
            self.commit_thread()?;
            Ok(txns)
        })
    }

    fn persist<'a>(&'a mut self, txns: &'a [Txn]) -> StorageFuture<'a, ()> {
        Box::pin(async move {
            if txns.is_empty() {
                return Ok(());
            }
            let mut buf = BytesMut::new();
            let batch = txns
                .iter()
                .map(|txn| {
                    buf.clear();
                    txn.encode(&mut buf);
                    (txn.zxid, buf.to_vec())
                })
                .collect();
            let commit = self.commit_thread()?.submit(batch);
            commit.await.map_err(io::Error::from)
        })
    }
}
