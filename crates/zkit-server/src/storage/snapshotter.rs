//! Background snapshots: when the [`SnapshotPolicy`] says one is due, the pipeline hands over the
//! core's image, a blocking thread writes it through [`SnapshotStore`] (temp file, fsync, rename,
//! directory fsync) and prunes old snapshots; the WAL segments the oldest kept snapshot no longer
//! needs are then detached from the log on the commit thread, between groups, and deleted on a
//! blocking thread (see [`GroupCommit::prune_through`]).
//!
//! The pipeline pays only for `Core::snapshot_capture()`: a reference-count bump per chunk of
//! 1,024 nodes (the tree copies a chunk and a node it mutates while the capture still holds
//! them), under a millisecond at a million nodes. Serializing the capture and writing it,
//! streamed through a buffered writer rather than built in memory, run on the blocking thread
//! while writes go on. At most one
//! snapshot is in flight: if the previous one is still being written when the next is due, the
//! next waits for a later batch. A failed snapshot is logged and retried when the policy is due
//! again, counting from the failed attempt: the WAL still holds everything, so it costs only a
//! longer recovery. This module never decides what is durable.
//!
//! # When a snapshot is due
//! A snapshot costs a write of the whole tree; the log it makes unnecessary is what recovery
//! would otherwise replay. Snapshotting every `snap_count` txns regardless of the tree's size
//! (what Apache's `snapCount` alone does) rewrites a large tree over and over: at millions of
//! nodes the server would do little else. So the policy also waits until the WAL written since
//! the last snapshot has reached a share (`log_percent`, default 50 %) of that snapshot's size:
//! the disk then writes at most about 1 / share times as much snapshot as log, whatever the size
//! of the tree, and a small tree still snapshots every `snap_count` txns. Apache's
//! `snapSizeLimitInKb` (`zookeeper.snapSizeLimitInKb`, default 4 GiB of log, as
//! `SyncRequestProcessor.shouldSnapshot` reads it) stays a trigger of its own, whatever the txn
//! count, so a log of huge txns is bounded too. Apache randomizes both thresholds so that an
//! ensemble's members do not snapshot at once; a standalone server has nobody to avoid.
//!
//! Recovery replays the log since the newest snapshot: at most the trigger's amount — the
//! larger of `snap_count` txns and `log_percent` of the snapshot, capped by the size limit —
//! plus what was written while that snapshot was being written (and, if a snapshot failed, the
//! log since the last one that did not).

use std::time::Instant;

use tokio::sync::oneshot;
use zkit_core::{Core, SnapshotCapture};

use super::commit::GroupCommit;
use super::error::{Result, StorageError};
use super::snapshot::SnapshotStore;

/// Default txns between snapshots (ZooKeeper's `snapCount`).
pub const DEFAULT_SNAP_COUNT: u64 = 100_000;

/// Default share of the last snapshot's size, in percent, that the log since it must reach
/// before the next snapshot.
pub const DEFAULT_SNAP_LOG_PERCENT: u32 = 50;

/// Default log size since the last snapshot that triggers one whatever the txn count: 4 GiB,
/// Apache's `zookeeper.snapSizeLimitInKb` default (4,194,304 KiB).
pub const DEFAULT_SNAP_SIZE_LIMIT: u64 = 4 << 30;

/// When a snapshot is due: a pure decision over what was logged since the last one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotPolicy {
    /// `snapCount`: txns since the last snapshot before another may be taken (at least 1).
    pub snap_count: u64,
    /// The log since the last snapshot must also reach this share of that snapshot's size, in
    /// percent; 0 turns the size condition off (a snapshot every `snap_count` txns).
    pub log_percent: u32,
    /// `snapSizeLimitInKb` in bytes: a log this large since the last snapshot makes one due
    /// whatever the txn count or share; 0 turns it off.
    pub size_limit: u64,
}

impl Default for SnapshotPolicy {
    fn default() -> Self {
        SnapshotPolicy {
            snap_count: DEFAULT_SNAP_COUNT,
            log_percent: DEFAULT_SNAP_LOG_PERCENT,
            size_limit: DEFAULT_SNAP_SIZE_LIMIT,
        }
    }
}

impl SnapshotPolicy {
    /// Whether a snapshot is due after `txns` txns and `log_bytes` bytes of WAL records since
    /// the last snapshot, whose body was `snapshot_bytes` long (0 when there is none yet: then
    /// `snap_count` alone decides).
    pub fn due(&self, txns: u64, log_bytes: u64, snapshot_bytes: u64) -> bool {
        if self.size_limit > 0 && log_bytes >= self.size_limit {
            return true;
        }
        if txns < self.snap_count.max(1) {
            return false;
        }
        u128::from(log_bytes) * 100 >= u128::from(snapshot_bytes) * u128::from(self.log_percent)
    }
}

/// What a finished background write reports: the body's size and the oldest kept snapshot's
/// zxid after pruning (the WAL before it may go).
#[derive(Debug)]
struct Written {
    bytes: u64,
    oldest_kept: Option<i64>,
}

/// Takes and writes snapshots for one data dir.
#[derive(Debug)]
pub struct Snapshotter {
    store: SnapshotStore,
    policy: SnapshotPolicy,
    keep: usize,
    /// zxid of the newest snapshot written (or being written).
    last_zxid: i64,
    /// The caller's WAL byte count when that snapshot was taken.
    log_bytes_at_last: u64,
    /// Body size of the newest snapshot written (0: none yet).
    last_bytes: u64,
    in_flight: Option<oneshot::Receiver<Result<Written>>>,
}

impl Snapshotter {
    /// A snapshotter over `store`. `last_zxid` and `last_bytes` describe the newest snapshot on
    /// disk (0 and 0 if none); the byte count later passed to [`Snapshotter::after_batch`]
    /// counts the WAL from that snapshot on (the records recovery replayed included).
    pub fn new(
        store: SnapshotStore,
        policy: SnapshotPolicy,
        keep: usize,
        last_zxid: i64,
        last_bytes: u64,
    ) -> Self {
        Snapshotter {
            store,
            policy,
            keep: keep.max(1),
            last_zxid,
            log_bytes_at_last: 0,
            last_bytes,
            in_flight: None,
        }
    }

    /// The zxid of the newest snapshot taken.
    pub fn last_zxid(&self) -> i64 {
        self.last_zxid
    }

    /// Called after every submitted batch, with the core holding every submitted txn and
    /// `log_bytes` the WAL bytes (records, headers included) submitted so far, counted as
    /// [`Snapshotter::new`] says: starts a background snapshot when the policy says one is due.
    /// Must run inside a tokio runtime.
    pub fn after_batch(&mut self, core: &Core, log_bytes: u64, commit: Option<&GroupCommit>) {
        self.reap(commit);
        if self.in_flight.is_some() {
            return;
        }
        let txns = u64::try_from(core.last_zxid().saturating_sub(self.last_zxid)).unwrap_or(0);
        let logged = log_bytes.wrapping_sub(self.log_bytes_at_last);
        if self.policy.due(txns, logged, self.last_bytes) {
            self.start(core, log_bytes);
        }
    }

    fn start(&mut self, core: &Core, log_bytes: u64) {
        let zxid = core.last_zxid();
        let taken = Instant::now();
        let capture = core.snapshot_capture();
        tracing::debug!(
            zxid = format_args!("{zxid:#x}"),
            nodes = capture.node_count(),
            log_bytes_since = log_bytes.wrapping_sub(self.log_bytes_at_last),
            last_snapshot_bytes = self.last_bytes,
            took = ?taken.elapsed(),
            "snapshot captured; writing it in the background"
        );
        self.last_zxid = zxid;
        self.log_bytes_at_last = log_bytes;
        let store = self.store.clone();
        let keep = self.keep;
        let (tx, rx) = oneshot::channel();
        tokio::task::spawn_blocking(move || {
            // The receiver is gone only when the server is being torn down.
            let _ = tx.send(write_and_prune(&store, capture, keep));
        });
        self.in_flight = Some(rx);
    }

    /// If the background write finished: log it and prune the WAL it made unnecessary.
    fn reap(&mut self, commit: Option<&GroupCommit>) {
        let Some(rx) = self.in_flight.as_mut() else {
            return;
        };
        let result = match rx.try_recv() {
            Err(oneshot::error::TryRecvError::Empty) => return,
            Ok(result) => result,
            Err(oneshot::error::TryRecvError::Closed) => Err(task_gone()),
        };
        self.in_flight = None;
        // A failure was logged; the next attempt comes when the policy is due again.
        let _ = self.settle(result, commit);
    }

    /// Waits for the background write in flight, if any, and prunes after it.
    ///
    /// # Errors
    /// That snapshot's write failing.
    pub async fn wait(&mut self, commit: Option<&GroupCommit>) -> Result<()> {
        match self.in_flight.take() {
            Some(rx) => self.settle(rx.await.unwrap_or_else(|_| Err(task_gone())), commit),
            None => Ok(()),
        }
    }

    /// Graceful stop: waits for the background write, then snapshots the current state if it
    /// moved since, waits for that one too, and prunes.
    ///
    /// # Errors
    /// The snapshot write failing.
    pub async fn finish(&mut self, core: &Core, commit: Option<&GroupCommit>) -> Result<()> {
        self.wait(commit).await?;
        if core.last_zxid() > self.last_zxid {
            self.start(core, self.log_bytes_at_last);
            self.wait(commit).await?;
        }
        Ok(())
    }

    /// Logs a finished snapshot write, remembers its size and queues the WAL prune it allows.
    fn settle(&mut self, result: Result<Written>, commit: Option<&GroupCommit>) -> Result<()> {
        match result {
            Ok(written) => {
                self.last_bytes = written.bytes;
                if let (Some(oldest), Some(commit)) = (written.oldest_kept, commit) {
                    PruneHandle { commit }.prune_through(oldest);
                }
                Ok(())
            }
            Err(e) => {
                // The WAL still holds everything: this costs a longer recovery, not data. The
                // next attempt comes when the policy is due again.
                tracing::error!(error = %e, "writing a snapshot failed");
                Err(e)
            }
        }
    }
}

fn task_gone() -> StorageError {
    StorageError::io(
        "snapshot task",
        std::io::Error::other("the snapshot thread died"),
    )
}

struct PruneHandle<'a> {
    commit: &'a GroupCommit,
}

impl PruneHandle<'_> {
    /// Queues the prune on the commit thread now (the job is sent when `prune_through` is
    /// called) and logs its outcome from a small task.
    fn prune_through(self, zxid: i64) {
        let done = self.commit.prune_through(zxid);
        tokio::spawn(async move {
            match done.await {
                Ok(0) => {}
                Ok(n) => tracing::debug!(segments = n, "pruned WAL segments"),
                Err(e) => tracing::warn!(error = %e, "pruning WAL segments failed"),
            }
        });
    }
}

/// Serializes `capture` straight into the snapshot file, then prunes. Dropping the capture at
/// the end (here, off the pipeline) releases the records the tree has replaced since.
fn write_and_prune(
    store: &SnapshotStore,
    capture: SnapshotCapture,
    keep: usize,
) -> Result<Written> {
    let started = Instant::now();
    let mut bytes = 0;
    let path = store.write_with(capture.last_zxid(), |w| {
        bytes = capture.write_to(w)?;
        Ok(())
    })?;
    tracing::info!(
        file = %path.display(),
        bytes,
        took = ?started.elapsed(),
        "snapshot written"
    );
    drop(capture);
    let oldest_kept = store.prune(keep)?;
    Ok(Written { bytes, oldest_kept })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MB: u64 = 1 << 20;

    fn policy(snap_count: u64, log_percent: u32, size_limit: u64) -> SnapshotPolicy {
        SnapshotPolicy {
            snap_count,
            log_percent,
            size_limit,
        }
    }

    #[test]
    fn a_small_tree_snapshots_every_snap_count_txns() {
        let p = policy(100_000, 50, 0);
        // 100,000 txns of ~150 bytes against a 1 MB snapshot: far past half of it.
        assert!(!p.due(99_999, 15 * MB, MB));
        assert!(p.due(100_000, 15 * MB, MB));
        // No snapshot yet: snap_count alone decides.
        assert!(p.due(100_000, 1, 0));
        assert!(!p.due(99_999, 100 * MB, 0));
    }

    #[test]
    fn a_large_tree_waits_for_the_log_to_reach_its_share() {
        let p = policy(100_000, 50, 0);
        let snapshot = 800 * MB;
        assert!(!p.due(100_000, 15 * MB, snapshot));
        assert!(!p.due(2_000_000, 400 * MB - 1, snapshot));
        assert!(p.due(2_000_000, 400 * MB, snapshot));
        // The txn count stays a lower bound even when the log is large.
        assert!(!p.due(99_999, 400 * MB, snapshot));
        // Other shares.
        assert!(policy(1, 100, 0).due(1, snapshot, snapshot));
        assert!(!policy(1, 100, 0).due(1, snapshot - 1, snapshot));
        assert!(policy(1, 200, 0).due(1, 2 * snapshot, snapshot));
    }

    #[test]
    fn zero_percent_is_the_txn_count_alone() {
        let p = policy(100_000, 0, 0);
        assert!(p.due(100_000, 0, u64::MAX));
        assert!(!p.due(99_999, u64::MAX - 1, u64::MAX));
    }

    #[test]
    fn the_size_limit_triggers_whatever_the_count() {
        let p = policy(100_000, 50, 64 * MB);
        assert!(p.due(10, 64 * MB, 10_000 * MB));
        assert!(!p.due(10, 64 * MB - 1, 10_000 * MB));
        // Off when 0.
        assert!(!policy(100_000, 50, 0).due(10, u64::MAX, 10_000 * MB));
        // No overflow at the extremes.
        assert!(policy(1, 100, 0).due(1, u64::MAX, u64::MAX));
        assert!(policy(1, u32::MAX, 0).due(1, u64::MAX, 1));
        assert!(!policy(1, u32::MAX, 0).due(1, u64::MAX, u64::MAX));
    }

    #[test]
    fn snap_count_zero_means_one() {
        assert!(!policy(0, 0, 0).due(0, 0, 0));
        assert!(policy(0, 0, 0).due(1, 0, 0));
    }
}
