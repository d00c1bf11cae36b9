//! Group commit: a dedicated thread that owns the [`Wal`], writes batches and fdatasyncs them.
//!
//! The async server task calls [`GroupCommit::submit`] with each batch of records and awaits the
//! returned [`Commit`]; it may keep submitting while earlier commits are pending. The thread takes
//! every batch that queued up while it was busy, writes them all, and runs one fdatasync for the
//! lot: all writes that arrive while an fsync runs share the next one. A commit resolves `Ok` only
//! after the fsync covering it returned; if a write or fsync fails, every commit in that group and
//! every later one resolves `Err` (the WAL is poisoned; see `wal`). Written commits resolve in
//! submission order; a batch rejected before writing (zxid not increasing, too large) resolves at
//! once with its error and does not poison the log. The channel is unbounded: the single writer
//! is expected to bound its own in-flight batches. This module holds no policy about what to do
//! after an error; the shell decides.
//!
//! When the log is idle (no earlier batch queued or being written) a small batch is written and
//! fdatasynced by the caller itself ([`GroupCommit::submit`] returns an already resolved
//! [`Commit`]): a lone synchronous write, the common case of a lock hand-off, then pays for no
//! thread hand-off there and back (a futex wake of the commit thread, then the wake of the
//! caller's task), which on a small VM cost about as much as the fdatasync itself. Under load the
//! commit thread still overlaps the fsync with the caller's work. The [`Wal`] is behind a mutex
//! that either side holds only while writing, and the caller takes the inline path only when
//! every earlier batch has resolved, so records still reach the log in submission order.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex, MutexGuard, TryLockError};
use std::task::{Context, Poll};
use std::thread::JoinHandle;

use tokio::sync::oneshot;

use super::error::{Result, StorageError};
use super::wal::{Pruned, Wal};

/// Records of one batch: `(zxid, payload)`. `Bytes`, so a batch's payloads can be slices of
/// one buffer (one allocation per batch, not one per record).
pub type Batch = Vec<(i64, bytes::Bytes)>;

enum Job {
    Append {
        records: Batch,
        done: oneshot::Sender<Result<()>>,
    },
    Prune {
        zxid: i64,
        done: oneshot::Sender<Result<Pruned>>,
    },
}

/// A batch of at most this many records may be written by the caller when the log is idle.
pub const INLINE_MAX_RECORDS: usize = 4;

/// What the caller and the commit thread share.
#[derive(Debug)]
struct Shared {
    wal: Mutex<Wal>,
    /// Append jobs sent to the thread and not yet resolved.
    queued: AtomicUsize,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Wal> {
        // A panic while writing leaves the Wal as consistent as the write it interrupted: the
        // log poisons itself on a failed write, so the guard's poison flag adds nothing.
        self.wal
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Handle to the commit thread. Dropping it without [`GroupCommit::shutdown`] lets the thread
/// finish the queued work and exit.
#[derive(Debug)]
pub struct GroupCommit {
    tx: Option<mpsc::Sender<Job>>,
    thread: JoinHandle<()>,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Job::Append { records, .. } => write!(f, "Append({} records)", records.len()),
            Job::Prune { zxid, .. } => write!(f, "Prune({zxid:#x})"),
        }
    }
}

impl GroupCommit {
    /// Moves `wal` to a new thread named `zkit-wal`.
    ///
    /// # Errors
    /// [`StorageError::Io`] when the thread cannot be spawned.
    pub fn start(wal: Wal) -> Result<GroupCommit> {
        let (tx, rx) = mpsc::channel();
        let shared = Arc::new(Shared {
            wal: Mutex::new(wal),
            queued: AtomicUsize::new(0),
        });
        let thread_shared = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("zkit-wal".into())
            .spawn(move || run(&thread_shared, rx))
            .map_err(|e| StorageError::io("spawn WAL thread", e))?;
        Ok(GroupCommit {
            tx: Some(tx),
            thread,
            shared,
        })
    }

    /// Queues `records` (zxids increasing across all submissions) and returns a future that
    /// resolves once they are durable. The records are queued when this returns, so submission
    /// order is call order even if the futures are awaited later or not at all.
    ///
    /// A batch of at most [`INLINE_MAX_RECORDS`] records submitted while every earlier one has
    /// resolved is written and fdatasynced before this returns, on the calling thread (which it
    /// blocks for that long), and its `Commit` is already resolved.
    pub fn submit<P: Into<bytes::Bytes>>(&self, records: Vec<(i64, P)>) -> Commit {
        let records: Batch = records.into_iter().map(|(z, p)| (z, p.into())).collect();
        let (done, rx) = oneshot::channel();
        if records.len() <= INLINE_MAX_RECORDS && !ack_before_write_configured() {
            // Every earlier append resolved (the thread decrements only after answering), so
            // nothing written later can overtake it; a prune holding the lock sends us the
            // thread's way instead of waiting for it.
            if self.shared.queued.load(Ordering::Acquire) == 0 {
                let wal = match self.shared.wal.try_lock() {
                    Ok(wal) => Some(wal),
                    // As in `Shared::lock`: the log's own poisoning is what counts.
                    Err(TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
                    Err(TryLockError::WouldBlock) => None,
                };
                if let Some(mut wal) = wal {
                    commit_group(&mut wal, &mut vec![(records, done)]);
                    return Commit(rx);
                }
            }
        }
        self.shared.queued.fetch_add(1, Ordering::AcqRel);
        self.send(Job::Append { records, done });
        Commit(rx)
    }

    /// Deletes WAL segments whose records are all `<= zxid`. The commit thread detaches them
    /// from the log between groups ([`Wal::detach_through`]: a rename each); the files are then
    /// deleted on a blocking thread of the runtime, so the commit thread never waits for an
    /// unlink (tens of milliseconds for a 64 MiB segment, during which no write was
    /// acknowledged). Resolves to how many segments went.
    pub fn prune_through(&self, zxid: i64) -> impl Future<Output = Result<usize>> {
        let (done, rx) = oneshot::channel();
        self.send(Job::Prune { zxid, done });
        async move {
            let pruned = rx.await.unwrap_or(Err(StorageError::CommitThreadGone))?;
            if pruned.is_empty() {
                return Ok(0);
            }
            tokio::task::spawn_blocking(move || pruned.remove())
                .await
                .unwrap_or_else(|_| {
                    Err(StorageError::io(
                        "delete pruned WAL segments",
                        std::io::Error::other("the deleting thread panicked"),
                    ))
                })
        }
    }

    fn send(&self, job: Job) {
        // If the thread is gone the job (and its sender) is dropped here, and the receiver
        // reports CommitThreadGone.
        if let Some(tx) = &self.tx {
            let _ = tx.send(job);
        }
    }

    /// Finishes queued work, stops the thread and hands the WAL back (e.g. to reopen it).
    ///
    /// # Errors
    /// [`StorageError::CommitThreadGone`] if the thread panicked.
    pub fn shutdown(self) -> Result<Wal> {
        let GroupCommit { tx, thread, shared } = self;
        drop(tx);
        thread.join().map_err(|_| StorageError::CommitThreadGone)?;
        // The thread has exited, so this handle held the only other reference.
        let shared = Arc::try_unwrap(shared).map_err(|_| StorageError::CommitThreadGone)?;
        Ok(shared
            .wal
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner))
    }
}

/// Whether the broken-on-purpose `ACK_BEFORE_WRITE` fail point is on: its acknowledge-then-write
/// lives on the commit thread, so while it is on every batch goes there.
fn ack_before_write_configured() -> bool {
    #[cfg(feature = "failpoints")]
    {
        fail::list()
            .iter()
            .any(|(name, _)| name == super::failpoint::ACK_BEFORE_WRITE)
    }
    #[cfg(not(feature = "failpoints"))]
    {
        false
    }
}

/// A pending commit; resolves when its records are durable, or with the error that stopped them.
#[derive(Debug)]
#[must_use = "a write may be acknowledged only after its Commit resolves Ok"]
pub struct Commit(oneshot::Receiver<Result<()>>);

impl Commit {
    /// Blocks the current thread until the commit resolves. Must not be called from async code.
    pub fn wait_blocking(self) -> Result<()> {
        self.0
            .blocking_recv()
            .unwrap_or(Err(StorageError::CommitThreadGone))
    }
}

impl Future for Commit {
    type Output = Result<()>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        Pin::new(&mut self.0)
            .poll(cx)
            .map(|r| r.unwrap_or(Err(StorageError::CommitThreadGone)))
    }
}

fn run(shared: &Shared, rx: mpsc::Receiver<Job>) {
    let mut group = Vec::new();
    let mut prunes = Vec::new();
    while let Ok(first) = rx.recv() {
        // Everything queued while the previous fsync ran joins this group.
        let mut next = Some(first);
        while let Some(job) = next.take().or_else(|| rx.try_recv().ok()) {
            match job {
                Job::Append { records, done } => group.push((records, done)),
                Job::Prune { zxid, done } => prunes.push((zxid, done)),
            }
        }
        let mut wal = shared.lock();
        let appends = group.len();
        commit_group(&mut wal, &mut group);
        // Only now may the caller write inline: every append it handed over is answered.
        shared.queued.fetch_sub(appends, Ordering::AcqRel);
        for (zxid, done) in prunes.drain(..) {
            let started = std::time::Instant::now();
            let detached = wal.detach_through(zxid);
            let took = started.elapsed();
            if took >= SLOW_GROUP {
                tracing::debug!(?took, "slow WAL prune on the commit thread");
            }
            let _ = done.send(detached);
        }
    }
}

/// A group (writes plus fdatasync) at least this long is logged at debug, with its parts.
const SLOW_GROUP: std::time::Duration = std::time::Duration::from_millis(20);

fn commit_group(wal: &mut Wal, group: &mut Vec<(Batch, oneshot::Sender<Result<()>>)>) {
    #[cfg(feature = "failpoints")]
    if let Some(lag) = fail::eval(
        super::failpoint::ACK_BEFORE_WRITE,
        super::failpoint::millis_arg,
    ) {
        return ack_before_write(wal, group, lag);
    }
    // Written batches wait here for the fsync; rejected ones (bad zxid, too large) are answered
    // at once and do not hold up the rest.
    let started = std::time::Instant::now();
    let batches = group.len();
    let records: usize = group.iter().map(|(r, _)| r.len()).sum();
    let mut written = Vec::with_capacity(group.len());
    let mut failure: Option<StorageError> = None;
    for (records, done) in group.drain(..) {
        if let Some(e) = &failure {
            let _ = done.send(Err(e.clone()));
            continue;
        }
        match wal.append_batch(&records) {
            Ok(()) => written.push(done),
            Err(e) if !wal.is_poisoned() => {
                let _ = done.send(Err(e));
            }
            Err(e) => {
                let _ = done.send(Err(e.clone()));
                failure = Some(e);
            }
        }
    }
    let wrote = started.elapsed();
    let result = match failure {
        Some(e) => Err(e),
        None => wal.sync(),
    };
    let took = started.elapsed();
    if took >= SLOW_GROUP {
        tracing::debug!(batches, records, ?wrote, ?took, "slow WAL group");
    }
    for done in written {
        let _ = done.send(result.clone());
    }
}

/// Broken on purpose (fail point `ACK_BEFORE_WRITE`, tests only): acknowledges the group, waits
/// `lag`, then writes and fsyncs it; errors are dropped, since the writes were acknowledged.
#[cfg(feature = "failpoints")]
fn ack_before_write(
    wal: &mut Wal,
    group: &mut Vec<(Batch, oneshot::Sender<Result<()>>)>,
    lag: std::time::Duration,
) {
    let batches: Vec<Batch> = group
        .drain(..)
        .map(|(records, done)| {
            let _ = done.send(Ok(()));
            records
        })
        .collect();
    std::thread::sleep(lag);
    for records in &batches {
        if wal.append_batch(records).is_err() {
            return;
        }
    }
    let _ = wal.sync();
}
