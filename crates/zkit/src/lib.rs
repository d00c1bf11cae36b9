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
//!
//! # Failover
//!
//! One rule, decided in one place ([`session`], "The validity rule"): a session provably lives
//! until [`Session::valid_until`] = the send time of the last request a server answered (pings
//! included) + the negotiated session timeout − a tenth of it (a margin for clock rate, local
//! monotonic clock). No server can expire the session before then, whichever member the client
//! talks to and whatever leader the ensemble elects meanwhile. The session layer declares
//! [`SessionState::Lost`] when that deadline passes without a newer answered request, or when
//! the expiry is observed; it then ends the old client as expired (a request still using it
//! fails with [`Error::SessionExpired`]) and builds a new session.
//!
//! | | `Suspended` (connection dropped, session provably alive) | `Lost` (expired, or past `valid_until`) |
//! |---|---|---|
//! | Lock holder ([`lock::Mutex`], [`lock::ReadWriteLock`], [`lock::Semaphore`] leases, [`lock::KazooLock`], [`lock::MultiLock`]) | keeps holding; [`lock::LockGuard::lost`] does not fire; a reconnect to another member changes nothing | lost-signal fires |
//! | Lock waiter | keeps waiting, keeps its place in the line | enters the line again on the new session (default), or fails with [`Error::SessionLost`] with [`lock::LockOptions::fail_waiters_on_lost`] |
//! | [`lock::LeaseLock`] (TTL node) | keeps holding | keeps holding: the node is not tied to a session; only the lease end or deletion end it |
//! | [`election::LeaderLatch`], [`election::LeaderSelector`] leader | keeps leadership | withdraws (the selector cancels its task); contends again on the new session |
//! | Election follower | keeps its place | joins again on the new session |
//! | `zkit lock -- CMD` holder | CMD keeps running | CMD gets SIGTERM (SIGKILL after `--grace`); exit 76 |
//! | `zkit lock` waiter | keeps waiting | waits again on a new session (`--fail-on-session-loss`: exit 76) |
//! | `zkit elect -- CMD` | CMD keeps running | CMD is stopped; contends again |
//! | [`txn`] coordinator, participant, recoverer | every ZooKeeper step (votes, decision, acks, garbage collection) is retried on the same session | the coordinator's [`txn::Transaction::commit`] fails and a recoverer finishes the transaction; a participant resolves what it holds from the decision on its new session |
//! | [`procedure`] member and coordinator | a running procedure goes on: its steps are retried on the same session | a member's node goes with the session and the coordinator aborts the procedure; the member cleans up |
//! | [`config::ConfigWatcher`] | re-reads the whole tree on reconnect: the last value is never missed | sets its watch again on the new session and re-reads the tree |
//!
//! Tested on a private Apache ensemble with kill -9 of the leader and of the member a client is
//! connected to, and SIGSTOP of the leader and of two and three of five members
//! (`crates/zkit/tests/failover_*.rs`).
//!
//! The library's waiter default is to enter the line again because a waiter holds nothing:
//! starting over on a new session cannot break exclusion, and an ensemble's leader election
//! (every rolling restart) then never fails a waiting caller. Curator's `acquire` throws
//! instead; [`lock::LockOptions::fail_waiters_on_lost`] gives that behaviour to callers who must
//! learn that everything tied to the old session is gone. There is no strict mode that takes
//! `Suspended` for a loss: during `Suspended` the session provably lives, so giving up then only
//! makes every leader election of the ensemble stop every holder (Curator leaves that guess to
//! its users, Curator tech note 10).
//!
//! What no local rule covers: a holder that keeps using its resource for longer than the margin
//! after `Lost` (a CMD that ignores SIGTERM for its `--grace`, a paused process), and a holder
//! killed with SIGKILL (its session lives on for a session timeout, its children die only by
//! `PR_SET_PDEATHSIG`). Pass the fencing token ([`lock::LockGuard::fencing_token`]) to the
//! resource and have it refuse tokens lower than the highest it has seen.
#![deny(missing_docs)]

pub mod atomic;
pub mod barrier;
pub mod cache;
pub mod circuit_breaker;
mod claimed;
pub mod config;
pub mod counter;
pub mod discovery;
pub mod distributed_queue;
pub mod election;
pub mod error;
mod format;
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
