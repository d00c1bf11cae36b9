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
//! - [`api`]: the [`Storage`] trait and its futures (re-exported here).
//! - [`memory`]: [`MemoryStorage`], keeps nothing (tests, demos).
//! - [`durable`]: [`WalStorage`], the `--data-dir` implementation, built from:
//!   [`datadir`] (layout and lock), [`wal`] (segments, records, torn-tail repair), [`commit`]
//!   (the group-commit thread), [`snapshot`] (snapshot files, pruning), [`snapshotter`]
//!   (background snapshots and when they are due), [`recovery`] (snapshot + WAL replay),
//!   [`error`], [`failpoint`] (crash-safety points for tests), and `delete` (pruned files
//!   deleted in cuts, so that freeing their blocks does not hold up the log).

pub mod api;
pub mod commit;
pub mod datadir;
mod delete;
pub mod durable;
pub mod error;
pub mod failpoint;
pub mod memory;
pub mod recovery;
pub mod snapshot;
pub mod snapshotter;
pub mod wal;

pub use api::{Durable, Storage, StorageFuture};
pub use durable::WalStorage;
pub use memory::MemoryStorage;
