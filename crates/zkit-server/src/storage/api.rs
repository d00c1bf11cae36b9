//! The interface between the pipeline and the disk: exactly what the pipeline (and the server's
//! start-up) calls. Every error is a [`StorageError`].

use std::future::Future;
use std::pin::Pin;

use zkit_core::{Config, Core, Txn};

use super::error::StorageError;

/// A future returned by [`Storage`] methods (boxed so the trait stays object-safe).
pub type StorageFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StorageError>> + Send + 'a>>;

/// Resolves once the txns handed to one [`Storage::submit`] are durable (or failed to become so).
pub type Durable = Pin<Box<dyn Future<Output = Result<(), StorageError>> + Send + 'static>>;

/// Durable storage of the txn stream.
pub trait Storage: Send + 'static {
    /// The state to start serving from: what the storage holds (a snapshot and the log after
    /// it, or a replay of the whole log), applied to a fresh core. Called once, before the
    /// first [`Storage::submit`].
    fn recover_core(&mut self, config: Config, now: i64) -> StorageFuture<'_, Core>;

    /// Starts making `txns` durable (written and synced), in order after every earlier
    /// submission, and returns at once: the pipeline goes on handling requests while the write
    /// and fsync run, and awaits the returned [`Durable`]s in submission order. (An
    /// implementation may instead finish a small batch before returning, when nothing earlier
    /// is pending, and return a resolved `Durable`: the WAL does, see `GroupCommit::submit`.)
    /// Nothing of a
    /// batch is sent to clients before its `Durable` resolved `Ok`. Implementations must
    /// resolve them in that order, and once one fails every later one must fail too (a write
    /// after a failed fsync proves nothing about the ones before it).
    fn submit(&mut self, txns: &[Txn]) -> Durable;

    /// Called after each batch was submitted, with `core` holding every submitted txn — the
    /// last ones possibly not durable yet (e.g. to start a background snapshot: a snapshot may
    /// so contain txns whose log records are then lost, which recovery handles because it
    /// replays only the records after the snapshot's zxid). Must not block for long.
    fn committed(&mut self, _core: &Core) {}

    /// After a [`Durable`] failed: reopens what is on disk and rebuilds the state from it. The
    /// default (a storage that cannot do that) is [`StorageError::RebuildUnsupported`], which
    /// stops the server.
    fn rebuild(&mut self, _config: Config, _now: i64) -> StorageFuture<'_, Core> {
        Box::pin(async { Err(StorageError::RebuildUnsupported) })
    }

    /// Graceful stop, after the last batch: e.g. a final snapshot, then release the files.
    fn close<'a>(&'a mut self, _core: &'a Core) -> StorageFuture<'a, ()> {
        Box::pin(async { Ok(()) })
    }
}
