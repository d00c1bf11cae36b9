//! Background snapshots: every `snap_count` txns the pipeline hands over the core's image, a
//! blocking thread writes it through [`SnapshotStore`] (temp file, fsync, rename, directory
//! fsync) and prunes old snapshots; the WAL segments the oldest kept snapshot no longer needs are
//! then deleted on the commit thread, between groups.
//!
//! The pipeline pays only for `Core::snapshot_capture()`: a reference-count bump per node (the
//! tree copies a node it mutates while the capture still holds it), tens of milliseconds at a
//! million nodes. Serializing the capture and writing it, streamed through a buffered writer
//! rather than built in memory, run on the blocking thread while writes go on. At most one snapshot is in flight: if the previous one is
//! still being written when the next is due, the next waits for a later batch. A failed snapshot
//! is logged and retried at the next batch after another `snap_count` txns: the WAL still holds
//! everything, so it costs only a longer recovery. This module never decides what is durable.

use std::time::Instant;

use tokio::sync::oneshot;
use zkit_core::{Core, SnapshotCapture};

use super::commit::GroupCommit;
use super::error::{Result, StorageError};
use super::snapshot::SnapshotStore;

/// Default txns between snapshots (ZooKeeper's `snapCount`).
pub const DEFAULT_SNAP_COUNT: u64 = 100_000;

/// Takes and writes snapshots for one data dir.
#[derive(Debug)]
pub struct Snapshotter {
    store: SnapshotStore,
    snap_count: u64,
    keep: usize,
    /// zxid of the newest snapshot written (or being written).
    last_zxid: i64,
    in_flight: Option<oneshot::Receiver<Result<Option<i64>>>>,
}

impl Snapshotter {
    /// A snapshotter over `store`; `last_zxid` is the zxid of the newest snapshot on disk (or 0).
    pub fn new(store: SnapshotStore, snap_count: u64, keep: usize, last_zxid: i64) -> Self {
        Snapshotter {
            store,
            snap_count: snap_count.max(1),
            keep: keep.max(1),
            last_zxid,
            in_flight: None,
        }
    }

    /// The zxid of the newest snapshot taken.
    pub fn last_zxid(&self) -> i64 {
        self.last_zxid
    }

    /// Called after every durable batch, with the core holding exactly the durable state:
    /// starts a background snapshot when `snap_count` txns have passed since the last one.
    /// Must run inside a tokio runtime.
    pub fn after_batch(&mut self, core: &Core, commit: Option<&GroupCommit>) {
        self.reap(commit);
        let every = i64::try_from(self.snap_count).unwrap_or(i64::MAX);
        let due = core.last_zxid().saturating_sub(self.last_zxid) >= every;
        if due && self.in_flight.is_none() {
            self.start(core);
        }
    }

    fn start(&mut self, core: &Core) {
        let zxid = core.last_zxid();
        let taken = Instant::now();
        let capture = core.snapshot_capture();
        tracing::debug!(
            zxid = format_args!("{zxid:#x}"),
            nodes = capture.node_count(),
            took = ?taken.elapsed(),
            "snapshot captured; writing it in the background"
        );
        self.last_zxid = zxid;
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
        // A failure was logged; the next attempt comes after another snap_count txns.
        let _ = settle(result, commit);
    }

    /// Graceful stop: waits for the background write, then snapshots the current state if it
    /// moved since, waits for that one too, and prunes.
    ///
    /// # Errors
    /// The snapshot write failing.
    pub async fn finish(&mut self, core: &Core, commit: Option<&GroupCommit>) -> Result<()> {
        if let Some(rx) = self.in_flight.take() {
            settle(rx.await.unwrap_or_else(|_| Err(task_gone())), commit)?;
        }
        if core.last_zxid() > self.last_zxid {
            self.start(core);
            if let Some(rx) = self.in_flight.take() {
                settle(rx.await.unwrap_or_else(|_| Err(task_gone())), commit)?;
            }
        }
        Ok(())
    }
}

fn task_gone() -> StorageError {
    StorageError::io(
        "snapshot task",
        std::io::Error::other("the snapshot thread died"),
    )
}

/// Logs a finished snapshot write and queues the WAL prune it allows.
fn settle(result: Result<Option<i64>>, commit: Option<&GroupCommit>) -> Result<()> {
    match result {
        Ok(Some(oldest)) => {
            if let Some(commit) = commit {
                PruneHandle { commit }.prune_through(oldest);
            }
            Ok(())
        }
        Ok(None) => Ok(()),
        Err(e) => {
            // The WAL still holds everything: this costs a longer recovery, not data. The next
            // attempt comes after another snap_count txns.
            tracing::error!(error = %e, "writing a snapshot failed");
            Err(e)
        }
    }
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
) -> Result<Option<i64>> {
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
    store.prune(keep)
}
