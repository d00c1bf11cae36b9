//! Where txns become durable: the [`Storage`] trait the pipeline calls before any reply to a
//! write leaves the server.
//!
//! ZooKeeper fsyncs its txn log before replying (forceSync=yes) and batches many txns into one
//! fsync (group commit). The pipeline mirrors that: it hands [`Storage::submit`] every txn of a
//! batch at once, keeps handling later batches while the fsync runs, and releases each batch's
//! replies and watch events, in order, only when its [`Durable`] and every earlier one resolved
//! `Ok`. On `Err` nothing more is acknowledged: the pipeline closes every connection (clients see
//! a connection loss, as when a ZooKeeper server dies) and asks [`Storage::rebuild`] for the
//! state that really is on disk; if that fails too, the server stops.
//!
//! # Layout
//! - [`memory`]: [`MemoryStorage`], keeps nothing (tests, demos).
//! - [`durable`]: [`WalStorage`], the `--data-dir` implementation, built from:
//!   [`datadir`] (layout and lock), [`wal`] (segments, records, torn-tail repair), [`commit`]
//!   (the group-commit thread), [`snapshot`] (snapshot files, pruning), [`snapshotter`]
//!   (background snapshots every `snap_count` txns), [`recovery`] (snapshot + WAL replay),
//!   [`error`], [`failpoint`] (crash-safety points for tests).

use std::future::Future;
use std::io;
use std::pin::Pin;

use zkit_core::{Config, Core, Txn};

pub mod commit;
pub mod datadir;
pub mod durable;
pub mod error;
pub mod failpoint;
pub mod memory;
pub mod recovery;
pub mod snapshot;
pub mod snapshotter;
pub mod wal;

pub use durable::WalStorage;
pub use memory::MemoryStorage;

/// A future returned by [`Storage`] methods (boxed so the trait stays object-safe).
pub type StorageFuture<'a, T> = Pin<Box<dyn Future<Output = io::Result<T>> + Send + 'a>>;

/// Resolves once the txns handed to one [`Storage::submit`] are durable (or failed to become so).
pub type Durable = Pin<Box<dyn Future<Output = io::Result<()>> + Send + 'static>>;

/// Durable storage of the txn stream.
pub trait Storage: Send + 'static {
    /// The txns to replay through `Core::apply` at start-up, oldest first.
    fn recover(&mut self) -> StorageFuture<'_, Vec<Txn>>;

    /// Makes `txns` durable (written and synced), in order. Called once per pipeline batch;
    /// nothing of the batch is sent to clients before it returns `Ok`.
    fn persist<'a>(&'a mut self, txns: &'a [Txn]) -> StorageFuture<'a, ()>;

    /// Starts making `txns` durable, in order after every earlier submission, and returns at
    /// once: the pipeline goes on handling requests while the write and fsync run, and awaits
    /// the returned [`Durable`]s in submission order. Implementations must resolve them in that
    /// order, and once one fails every later one must fail too (a write after a failed fsync
    /// proves nothing about the ones before it).
    fn submit(&mut self, txns: &[Txn]) -> Durable;

    /// The state to start serving from. The default replays [`Storage::recover`] onto an empty
    /// core; a storage with snapshots starts from the newest one instead.
    fn recover_core(&mut self, config: Config, now: i64) -> StorageFuture<'_, Core> {
        Box::pin(async move {
            let mut core = Core::new(config, now);
            for txn in self.recover().await? {
                core.apply(&txn);
            }
            // Replay fires watch events for connections that do not exist yet; drop them.
            drop(core.ready());
            Ok(core)
        })
    }

    /// Called after each batch was submitted, with `core` holding every submitted txn — the
    /// last ones possibly not durable yet (e.g. to start a background snapshot: a snapshot may
    /// so contain txns whose log records are then lost, which recovery handles because it
    /// replays only the records after the snapshot's zxid). Must not block for long.
    fn committed(&mut self, _core: &Core) {}

    /// After `persist` or a [`Durable`] failed: reopens what is on disk and rebuilds the state from it. The
    /// default (a storage that cannot do that) is an error, which stops the server.
    fn rebuild(&mut self, _config: Config, _now: i64) -> StorageFuture<'_, Core> {
        Box::pin(async { Err(io::Error::other("this storage cannot rebuild its state")) })
    }

    /// Graceful stop, after the last batch: e.g. a final snapshot, then release the files.
    fn close<'a>(&'a mut self, _core: &'a Core) -> StorageFuture<'a, ()> {
        Box::pin(async { Ok(()) })
    }
}
