//! zkit: Curator-grade coordination recipes on ZooKeeper, on the `zookeeper-client` crate.
//!
//! # Layout
//! - [`error`]: [`Error`], classified as recoverable / state / unrecoverable (seed 003).
//! - [`session`]: [`Session`], the resilient session layer: Curator connection states
//!   ([`SessionState`]: Connected, Suspended, Reconnected, Lost, Closed) and automatic
//!   replacement of a lost ZooKeeper session (a new [`SessionEvent::generation`]).
//! - [`mod@retry`]: [`RetryPolicy`] and [`retry()`], re-running idempotent operations after
//!   `ConnectionLoss`/`OperationTimeout`.
//! - [`protected`]: protected sequential creates (`_c_<uuid>-…`) that survive connection loss
//!   without double creates or orphans, and the UUID-based orphan cleanup.
//! - [`lock`]: the lock recipes: a pure decision core ([`lock::decide`]) and the async drivers
//!   [`lock::Mutex`], [`lock::ReadWriteLock`], [`lock::Semaphore`], [`lock::RevocableMutex`],
//!   [`lock::LeaseLock`], [`lock::SimpleLock`].
//! - [`config`]: the watched configuration store ([`config::ConfigStore`],
//!   [`config::ConfigWatcher`] on persistent recursive watches).
//! - [`cache`]: [`cache::NodeCache`] and [`cache::TreeCache`] (CuratorCache-like).
//! - [`election`]: [`election::LeaderLatch`] and [`election::LeaderSelector`].
//! - [`barrier`], [`queue`], [`counter`], [`group`], [`persistent_node`]: barriers and double
//!   barriers, the ZooKeeper queue recipe, shared and atomic counters, group membership, and a
//!   node recreated after session loss.
//! - [`procedure`]: HBase-style two-phase distributed procedures (coordinator and members).
//! - [`txn`]: a two-phase-commit coordinator with crash recovery, and participants.
//! - [`ledger`]: the replicated ledger's client (BookKeeper-style): [`ledger::LedgerClient`]
//!   creates, writes, recovers and reads ledgers on `zkit_bookie` bookies, with the metadata
//!   in ZooKeeper; auto-recovery re-replicates the ledgers of a lost bookie;
//!   [`ledger::ZkRegistrationManager`] registers bookies.
//!
//! Every recipe takes a [`Session`] (not a raw client), fetches the current client for each
//! operation, and reports session loss instead of silently carrying on.
#![deny(missing_docs)]

pub mod barrier;
pub mod cache;
pub mod config;
pub mod counter;
pub mod election;
pub mod error;
pub mod group;
pub mod ledger;
pub mod lock;
pub mod persistent_node;
pub mod procedure;
pub mod protected;
pub mod queue;
pub mod retry;
pub mod session;
pub mod txn;

pub use error::{Error, Result};
pub use protected::{create_protected_sequential_with, CreatedNode, ProtectedCreate};
pub use retry::{retry, RetryPolicy};
pub use session::{Session, SessionEvent, SessionOptions, SessionState};
/// The underlying client crate, re-exported for raw operations on [`Session::client`].
pub use zookeeper_client;
