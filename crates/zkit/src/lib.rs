//! zkit: Curator-grade coordination recipes on ZooKeeper, on zkit's own client
//! ([`zkit_client`], re-exported).
//!
//! # Layout
//! - [`error`]: [`Error`], classified as recoverable / state / unrecoverable.
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
//! - [`discovery`]: service discovery in curator-x-discovery's layout and JSON
//!   ([`discovery::ServiceDiscovery`], [`discovery::ServiceCache`], providers).
//! - More locks in [`lock`]: [`lock::MultiLock`] (all or none), [`lock::SemaphoreMutex`]
//!   (Curator's `InterProcessSemaphoreMutex`), [`lock::KazooLock`], kazoo's
//!   [`lock::NonBlockingLease`] and [`lock::MultiNonBlockingLease`].
//! - [`distributed_queue`]: Curator's `DistributedQueue` with its priority, delay and id
//!   variants and [`distributed_queue::QueueSharder`]; [`locking_queue`]: kazoo's
//!   `LockingQueue`.
//! - [`party`], [`partitioner`]: kazoo's `Party`/`ShallowParty` and `SetPartitioner`.
//! - [`ttl_node`], [`persistent_watcher`], [`atomic`]: Curator's `PersistentTtlNode`,
//!   `PersistentWatcher` and `DistributedAtomicLong`/`Value` (optimistic, then promoted to a
//!   lock).
//! - [`model`]: typed nodes ([`model::Model`], like Curator's `ModeledFramework`) with a
//!   version-checked schema.
//! - [`circuit_breaker`]: Curator's circuit-breaking connection-state listener.
//! - [`ledger`]: the replicated ledger's client (BookKeeper-style): [`ledger::LedgerClient`]
//!   creates, writes, recovers and reads ledgers on `zkit_bookie` bookies, with the metadata
//!   in ZooKeeper; auto-recovery re-replicates the ledgers of a lost bookie;
//!   [`ledger::ZkRegistrationManager`] registers bookies.
//!
//! Every recipe takes a [`Session`] (not a raw client), fetches the current client for each
//! operation, and reports session loss instead of silently carrying on.
#![deny(missing_docs)]

pub mod atomic;
pub mod barrier;
pub mod cache;
pub mod circuit_breaker;
pub mod config;
pub mod counter;
pub mod discovery;
pub mod distributed_queue;
pub mod election;
pub mod error;
pub mod group;
pub mod ledger;
pub mod lock;
pub mod locking_queue;
pub mod model;
pub mod partitioner;
pub mod party;
pub mod persistent_node;
pub mod persistent_watcher;
pub mod procedure;
pub mod protected;
pub mod queue;
pub mod retry;
pub mod session;
pub mod ttl_node;
pub mod txn;

pub use error::{Error, Result};
pub use protected::{create_protected_sequential_with, CreatedNode, ProtectedCreate};
pub use retry::{retry, RetryPolicy};
pub use session::{Session, SessionEvent, SessionOptions, SessionState};
/// The ZooKeeper client the library runs on, re-exported for raw operations on
/// [`Session::client`] (`use zkit::zkit_client as zk;`).
pub use zkit_client;
