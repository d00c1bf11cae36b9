//! [`WalStorage`]: the durable [`Storage`], txns in a write-ahead log under a locked data dir.
//!
//! It is the adapter between the pipeline's txn-level trait and the byte-level log: each
//! [`Txn`] is encoded with `Txn::encode` as one WAL record under its own zxid, a pipeline batch is
//! one group-commit submission, and its [`Durable`] resolves only after the fdatasync that
//! covers it.
//! [`Storage::recover_core`] starts from the newest valid snapshot and replays the records
//! after it (see `recovery`); [`Storage::committed`] drives background snapshots as their
//! [`SnapshotPolicy`] says and the pruning that follows them (see `snapshotter`); [`Storage::rebuild`]
//! stops the poisoned commit thread, reopens the log (re-reading what is really on disk) and
//! recovers again; [`Storage::close`] writes a final snapshot on a graceful stop.
//! [`WalStorage::recover`] (the whole log as txns) remains for callers without snapshots.

use std::path::Path;

use bytes::BytesMut;
use zkit_core::Txn;

use zkit_core::{Config, Core};

use super::api::{Durable, Storage, StorageFuture};
use super::commit::GroupCommit;
use super::datadir::DataDir;
use super::error::{Result, StorageError};
use super::recovery::{self, RecoveryStats};
use super::snapshot::{SnapshotStore, DEFAULT_KEEP_SNAPSHOTS};
use super::snapshotter::{SnapshotPolicy, Snapshotter};
use super::wal::{RecoveryReport, Wal, WalOptions, RECORD_HEADER_LEN};

/// How a [`WalStorage`] is set up.
#[derive(Debug, Clone)]
pub struct DurableOptions {
    /// The log's options (segment size, fsync, `--truncate-corrupt`).
    pub wal: WalOptions,
    /// When background snapshots are taken (`snapCount`, the log's share of the snapshot,
    /// `snapSizeLimitInKb`).
    pub snapshots: SnapshotPolicy,
    /// Snapshots kept (and the WAL segments the oldest of them needs), default 3.
    pub keep_snapshots: usize,
}

impl Default for DurableOptions {
    fn default() -> Self {
        DurableOptions {
            wal: WalOptions::default(),
            snapshots: SnapshotPolicy::default(),
            keep_snapshots: DEFAULT_KEEP_SNAPSHOTS,
        }
    }
}

/// Durable [`Storage`]: a [`DataDir`] lock plus a [`Wal`] driven by a [`GroupCommit`] thread,
/// and snapshots beside it.
#[derive(Debug)]
pub struct WalStorage {
    dir: DataDir,
    opts: DurableOptions,
    /// The log until `recover` has read it; then it moves to the commit thread.
    wal: Option<Wal>,
    commit: Option<GroupCommit>,
    report: RecoveryReport,
    snapshots: SnapshotStore,
    /// Set by `recover_core` (which knows the newest snapshot).
    snapshotter: Option<Snapshotter>,
    /// WAL bytes (records with their headers) since the newest snapshot found at recovery:
    /// the replayed records plus every one submitted since.
    log_bytes: u64,
    stats: RecoveryStats,
}

impl WalStorage {
    /// Locks `data_dir` and opens (validating and repairing) its WAL.
    ///
    /// # Errors
    /// [`StorageError::DataDirInUse`] if another server holds the dir; [`StorageError::Corruption`]
    /// for a damaged log (unless `opts.truncate_corrupt`); [`StorageError::Io`] otherwise.
    pub fn open(data_dir: impl AsRef<Path>, opts: WalOptions) -> Result<WalStorage> {
        WalStorage::open_with(
            data_dir,
            DurableOptions {
                wal: opts,
                ..DurableOptions::default()
            },
        )
    }

    /// Locks `data_dir`, opens its WAL and its snapshot directory. Blocking file I/O.
    ///
    /// # Errors
    /// As [`WalStorage::open`].
    pub fn open_with(data_dir: impl AsRef<Path>, opts: DurableOptions) -> Result<WalStorage> {
        let dir = DataDir::open(data_dir)?;
        let (wal, report) = Wal::open(dir.wal_dir(), opts.wal.clone())?;
        let snapshots = SnapshotStore::open(dir.snap_dir(), opts.wal.fsync)?;
        Ok(WalStorage {
            dir,
            opts,
            wal: Some(wal),
            commit: None,
            report,
            snapshots,
            snapshotter: None,
            log_bytes: 0,
            stats: RecoveryStats::default(),
        })
    }

    /// What opening the log found and repaired.
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.report
    }

    /// What the last [`Storage::recover_core`] loaded (snapshot, records replayed, time).
    pub fn recovery_stats(&self) -> &RecoveryStats {
        &self.stats
    }

    /// Recovers from the snapshot store and the (open, not yet committing) log.
    async fn load(&mut self, config: Config, now: i64) -> Result<Core> {
        let Some(wal) = self.wal.take() else {
            return Err(StorageError::RecoverAfterWrite);
        };
        let snapshots = self.snapshots.clone();
        // Reading the snapshot and the log is blocking I/O; it happens before serving.
        let (wal, loaded) = tokio::task::spawn_blocking(move || {
            let loaded = recovery::recover(&snapshots, &wal, config, now);
            (wal, loaded)
        })
        .await
        .map_err(|e| StorageError::task_lost("recovery", e))?;
        self.wal = Some(wal);
        let (core, stats) = loaded?;
        self.snapshotter = Some(Snapshotter::new(
            self.snapshots.clone(),
            self.opts.snapshots,
            self.opts.keep_snapshots,
            stats.snapshot_zxid.unwrap_or(0),
            stats.snapshot_bytes,
        ));
        self.log_bytes = stats.replayed_bytes;
        self.stats = stats;
        self.commit_thread()?;
        Ok(core)
    }

    /// Waits for the background snapshot being written, if any (and queues the WAL prune it
    /// allows): e.g. for a test or tool that inspects the snapshot directory.
    ///
    /// # Errors
    /// That snapshot's write failing.
    pub async fn wait_for_snapshot(&mut self) -> Result<()> {
        match &mut self.snapshotter {
            Some(snapshotter) => snapshotter.wait(self.commit.as_ref()).await,
            None => Ok(()),
        }
    }

    /// The locked data dir.
    pub fn data_dir(&self) -> &DataDir {
        &self.dir
    }

    fn read_all(wal: &Wal) -> Result<Vec<Txn>> {
        let mut txns = Vec::new();
        for record in wal.read_from(i64::MIN) {
            let record = record?;
            let txn = Txn::decode(&record.payload).map_err(|e| {
                recovery::corrupt_record(wal, record.zxid, format!("does not decode as a txn: {e}"))
            })?;
            if txn.zxid != record.zxid {
                return Err(recovery::corrupt_record(
                    wal,
                    record.zxid,
                    format!("holds txn {:#x}", txn.zxid),
                ));
            }
            txns.push(txn);
        }
        Ok(txns)
    }

    /// The whole log as txns, oldest first, for callers that replay it themselves (no
    /// snapshots); writing starts after it. Blocking file I/O on a blocking thread.
    ///
    /// # Errors
    /// [`StorageError::RecoverAfterWrite`] once writing started; [`StorageError::Corruption`]
    /// for a record that is not a txn of its zxid; I/O errors.
    pub async fn recover(&mut self) -> Result<Vec<Txn>> {
        let Some(wal) = self.wal.take() else {
            return Err(StorageError::RecoverAfterWrite);
        };
        // Reading the log is blocking file I/O; it happens once, before serving.
        let (wal, txns) = tokio::task::spawn_blocking(move || {
            let txns = Self::read_all(&wal);
            (wal, txns)
        })
        .await
        .map_err(|e| StorageError::task_lost("reading the log", e))?;
        self.wal = Some(wal);
        let txns = txns?;
        self.commit_thread()?;
        Ok(txns)
    }

    fn commit_thread(&mut self) -> Result<&GroupCommit> {
        if self.commit.is_none() {
            let wal = self.wal.take().ok_or(StorageError::CommitThreadGone)?;
            self.commit = Some(GroupCommit::start(wal)?);
        }
        self.commit.as_ref().ok_or(StorageError::CommitThreadGone)
    }
}

impl Storage for WalStorage {
    fn recover_core(&mut self, config: Config, now: i64) -> StorageFuture<'_, Core> {
        Box::pin(self.load(config, now))
    }

    fn committed(&mut self, core: &Core) {
        if let Some(snapshotter) = &mut self.snapshotter {
            snapshotter.after_batch(core, self.log_bytes, self.commit.as_ref());
        }
    }

    fn rebuild(&mut self, config: Config, now: i64) -> StorageFuture<'_, Core> {
        Box::pin(async move {
            // The poisoned log is handed back by its thread and dropped: after a failed fsync
            // only a fresh open, which re-reads the files, tells what is really on disk.
            if let Some(commit) = self.commit.take() {
                let stopped = tokio::task::spawn_blocking(move || commit.shutdown()).await;
                if let Ok(Err(e)) | Err(e) =
                    stopped.map_err(|e| StorageError::task_lost("stopping the WAL thread", e))
                {
                    tracing::warn!(error = %e, "stopping the failed WAL thread");
                }
            }
            // A background snapshot may be writing a core that holds txns whose records just
            // failed. Wait for it, so the recovery below starts from it if it landed: were it
            // to land after the rebuilt core had reused its zxids for new txns, the next start
            // would load it and skip those new, acknowledged records. An empty core (zxid 0)
            // makes `finish` only wait, never take another snapshot.
            if let Some(mut snapshotter) = self.snapshotter.take() {
                let empty = Core::new(config.clone(), now);
                if let Err(e) = snapshotter.finish(&empty, None).await {
                    tracing::warn!(error = %e, "the snapshot in flight during the failure failed");
                }
            }
            self.wal = None;
            let dir = self.dir.wal_dir();
            let opts = self.opts.wal.clone();
            let (wal, report) = tokio::task::spawn_blocking(move || Wal::open(dir, opts))
                .await
                .map_err(|e| StorageError::task_lost("reopening the log", e))??;
            self.wal = Some(wal);
            self.report = report;
            self.load(config, now).await
        })
    }

    fn close<'a>(&'a mut self, core: &'a Core) -> StorageFuture<'a, ()> {
        Box::pin(async move {
            let snapshot = match &mut self.snapshotter {
                Some(snapshotter) => snapshotter.finish(core, self.commit.as_ref()).await,
                None => Ok(()),
            };
            if let Some(commit) = self.commit.take() {
                tokio::task::spawn_blocking(move || commit.shutdown())
                    .await
                    .map_err(|e| StorageError::task_lost("stopping the WAL thread", e))??;
            }
            snapshot
        })
    }

    fn submit(&mut self, txns: &[Txn]) -> Durable {
        if txns.is_empty() {
            return Box::pin(std::future::ready(Ok(())));
        }
        // One buffer for the whole batch; each record is a (non-allocating) slice of it.
        let mut buf = BytesMut::with_capacity(txns.len() * 128);
        let batch: Vec<(i64, bytes::Bytes)> = txns
            .iter()
            .map(|txn| {
                txn.encode(&mut buf);
                (txn.zxid, buf.split().freeze())
            })
            .collect();
        self.log_bytes += batch
            .iter()
            .map(|(_, p)| (RECORD_HEADER_LEN + p.len()) as u64)
            .sum::<u64>();
        // Queued on the commit thread now, so submission order is call order; the commit
        // thread resolves written commits in that order and fails every one after a failure.
        match self.commit_thread() {
            Ok(commit) => Box::pin(commit.submit(batch)),
            Err(e) => Box::pin(std::future::ready(Err(e))),
        }
    }
}
