//! Two-phase commit over ZooKeeper with crash recovery:
//! a [`Coordinator`] runs transactions across [`Participant`]s, each backed by a [`Resource`]
//! (a file directory, [`FileResource`], or PostgreSQL prepared transactions,
//! `PostgresResource`), and a [`Recoverer`] group finishes what crashed coordinators left.
//!
//! # Layout
//! - [`decide`]: the pure decision core (votes → decision, leader and participant steps).
//! - [`layout`]: znode paths and data formats (pure).
//! - [`coordinator`]: [`Coordinator::begin`] → [`Transaction::commit`] → [`Outcome`];
//!   deciding by `create` ([`decide_by_create`]) and garbage collection.
//! - [`participant`]: [`Participant::start`] and the [`Resource`] trait.
//! - [`recovery`]: [`Recoverer`], the leader-elected coordinator group that resumes unfinished
//!   transactions.
//! - [`file`]: [`FileResource`], a durable directory of prepared/committed/aborted records.
//! - [`memory`]: [`MemoryResource`], in memory and always yes (benchmarks, tests; not durable).
//! - `postgres` (feature `postgres`): `PostgresResource` on `PREPARE TRANSACTION`.
//! - [`inspect`]: listing and showing transactions (for `zkit txn list|show`).
//!
//! # Znodes
//! Under the root (default `/zkit/txn`):
//!
//! | path | kind | data |
//! |---|---|---|
//! | `members/<participant>` | ephemeral, one per live participant | empty |
//! | `inbox/<participant>/<txid>` | persistent; created with the transaction, deleted with the ack | empty; the decision record if the transaction expired before this participant acked |
//! | `coordinators/live/<id>` | ephemeral, one per live coordinator | empty |
//! | `coordinators/leader/…` | the recovering leader's lock ([`crate::lock::Mutex`]) | |
//! | `<txid>/prepare` | persistent | JSON header (participants, deadline, coordinator), `\n`, payload |
//! | `<txid>/votes/<participant>` | persistent | `yes` or `no: <reason>` |
//! | `<txid>/decision` | persistent, **created once** (first writer wins) | JSON `{"decision","reason","by"}` |
//! | `<txid>/acks/<participant>` | persistent | empty |
//! | `<txid>/owner` | ephemeral, the coordinator while `commit()` runs | empty |
//!
//! The whole `<txid>` tree and the inbox entries are created in one `multi`, so a participant
//! never sees half a transaction. The inbox lets a participant watch only its
//! own work instead of every transaction.
//!
//! # Guarantees
//! - One decision per transaction, visible to all: every writer (coordinator, recoverer) uses
//!   `create`, and a loser reads and adopts the winner's decision.
//! - Commit only if every participant's `yes` is in ZooKeeper; a `yes` is written only after the
//!   resource prepared durably.
//! - Presumed abort: votes missing at the prepare deadline → abort.
//! - A restarted participant resolves its in-doubt transactions (prepared, outcome not applied)
//!   from `decision` before it takes new work.
//! - Finished transactions are garbage-collected once every participant acknowledged and the
//!   coordinator is done with it (its ephemeral `owner` node is gone: a collecting `multi`
//!   fails with `NotEmpty` while it exists), by whoever sees that last: the coordinator (one
//!   `multi` deleting `owner` and the tree), the last participant to ack after the coordinator
//!   let go, or the recovering leader for a dead coordinator's transaction. Nothing is deleted
//!   while someone still needs to read it.
//! - A decided transaction whose acks never all arrive (a participant gone for good) is
//!   expired by the recovering leader [`TxnOptions::retention`] after it began: one `multi`
//!   writes the decision into the inbox entry `inbox/<p>/<txid>` of every participant that
//!   has not acked and deletes the tree. A straggler that comes back finds the decision there
//!   and applies it (never presumed abort for a commit), then deletes the entry.
//!
//! All waiting is on watches (children of `votes/`, `acks/`, `inbox/<p>`, `coordinators/live`,
//! existence of `decision`) and session state changes, never on polling.

pub mod coordinator;
pub mod decide;
pub mod file;
pub mod inspect;
pub mod layout;
pub mod memory;
pub mod participant;
#[cfg(feature = "postgres")]
pub mod postgres;
pub mod recovery;
mod zkops;

use std::time::Duration;

pub use coordinator::{decide_by_create, Coordinator, Outcome, Transaction};
pub use decide::{Decision, Vote};
pub use file::FileResource;
pub use memory::MemoryResource;
pub use participant::{Participant, ParticipantEvent, Resource};
#[cfg(feature = "postgres")]
pub use postgres::PostgresResource;
pub use recovery::Recoverer;

/// The default root of transaction znodes.
pub const DEFAULT_ROOT: &str = "/zkit/txn";

/// Errors of the transaction coordinator and participants.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum TxnError {
    /// A ZooKeeper/session error that retrying did not cure (e.g. the session was closed).
    #[error(transparent)]
    Zk(#[from] crate::Error),
    /// A resource failed (its message).
    #[error("resource: {0}")]
    Resource(String),
    /// Bad names, empty participant lists, bad roots.
    #[error("bad arguments: {0}")]
    BadArguments(String),
    /// Data in ZooKeeper that zkit cannot read.
    #[error("corrupt transaction data: {0}")]
    Corrupt(String),
    /// The transaction does not exist (never written, or already garbage-collected).
    #[error("no such transaction: {0}")]
    NoSuchTransaction(String),
    /// Stopped by its owner.
    #[error("stopped")]
    Stopped,
}

/// Options shared by coordinators, participants and recoverers. All of a group must use the
/// same `root`.
#[derive(Debug, Clone)]
pub struct TxnOptions {
    /// The root znode (default [`DEFAULT_ROOT`]).
    pub root: String,
    /// How long a coordinator waits for votes; a vote missing then means abort. Default 3 s.
    pub vote_timeout: Duration,
    /// How long [`Transaction::commit`] waits for acknowledgements after deciding. The decision
    /// stands either way; a missing ack only means that participant applies it later. Default 5 s.
    pub ack_timeout: Duration,
    /// How long past the deadline a recoverer leaves an undecided transaction to its still-live
    /// coordinator. Default 2 s.
    pub recovery_grace: Duration,
    /// Fault injection for tests and demos: time between seeing the votes and writing the
    /// decision, the window in which a "coordinator crash" happens. Zero in production.
    pub decision_delay: Duration,
    /// How long after it began a decided transaction may wait for acknowledgements that never
    /// come (a participant gone for good) before the recovering leader expires it: the decision
    /// is copied into the inbox entry of every participant that has not acked (so a straggler
    /// that comes back still applies it) and the transaction tree is deleted. Default 10 min.
    pub retention: Duration,
}

impl Default for TxnOptions {
    fn default() -> Self {
        TxnOptions {
            root: DEFAULT_ROOT.to_string(),
            vote_timeout: Duration::from_secs(3),
            ack_timeout: Duration::from_secs(5),
            recovery_grace: Duration::from_secs(2),
            decision_delay: Duration::ZERO,
            retention: Duration::from_secs(600),
        }
    }
}

impl TxnOptions {
    /// Options with `root` and the other defaults.
    pub fn with_root(root: &str) -> TxnOptions {
        TxnOptions {
            root: root.to_string(),
            ..TxnOptions::default()
        }
    }
}

/// Wall-clock now in Unix milliseconds: deadlines are shared between processes, so they are
/// wall-clock times in the prepare node (hosts are assumed to have synchronized clocks, within
/// a fraction of the vote timeout).
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}
