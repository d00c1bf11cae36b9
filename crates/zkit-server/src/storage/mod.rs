//! Where txns become durable: the [`Storage`] trait the pipeline calls before any reply to a
//! write leaves the server.
//!
//! ZooKeeper fsyncs its txn log before replying (forceSync=yes) and batches many txns into one
//! fsync (group commit). The pipeline mirrors that: it hands [`Storage::persist`] every txn of a
//! batch at once and releases that batch's replies and watch events only when it returns `Ok`.
//! On `Err` the server stops serving rather than acknowledge writes it could not keep.
//!
//! This module holds only the trait and the in-memory implementation; the write-ahead log and
//! snapshots belong to the durability work, which adds its implementation beside [`memory`].

use std::future::Future;
use std::io;
use std::pin::Pin;

use zkit_core::Txn;

pub mod memory;

pub use memory::MemoryStorage;

/// A future returned by [`Storage`] methods (boxed so the trait stays object-safe).
pub type StorageFuture<'a, T> = Pin<Box<dyn Future<Output = io::Result<T>> + Send + 'a>>;

/// Durable storage of the txn stream.
pub trait Storage: Send + 'static {
    /// The txns to replay through `Core::apply` at start-up, oldest first.
    fn recover(&mut self) -> StorageFuture<'_, Vec<Txn>>;

    /// Makes `txns` durable (written and synced), in order. Called once per pipeline batch;
    /// nothing of the batch is sent to clients before it returns `Ok`.
    fn persist<'a>(&'a mut self, txns: &'a [Txn]) -> StorageFuture<'a, ()>;
}
