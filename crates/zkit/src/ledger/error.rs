//! [`LedgerError`]: the errors of the ledger client.

use super::layout;
use super::schedule::NotEnoughBookies;

/// Errors of the ledger client.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum LedgerError {
    /// E ≥ Qw ≥ Qa ≥ 1 does not hold.
    #[error("invalid quorums: {0}")]
    InvalidQuorum(String),
    /// Other bad arguments.
    #[error("bad arguments: {0}")]
    BadArguments(String),
    /// No such ledger in the metadata.
    #[error("no such ledger: {0}")]
    NoSuchLedger(i64),
    /// The password does not match the ledger's.
    #[error("wrong password for ledger {0}")]
    WrongPassword(i64),
    /// The ledger (or this writer) is closed.
    #[error("ledger {0} is closed")]
    LedgerClosed(i64),
    /// The ledger was fenced by a recovery: this writer's adds are refused.
    #[error("ledger {0} is fenced: another process recovered it")]
    Fenced(i64),
    /// Too few writable bookies.
    #[error("not enough bookies: need {needed}, {available} available")]
    NotEnoughBookies {
        /// How many were needed.
        needed: usize,
        /// How many could be used.
        available: usize,
    },
    /// An entry over the limit.
    #[error("entry of {size} bytes is larger than the limit of {max}")]
    EntryTooLarge {
        /// Its size.
        size: usize,
        /// The limit.
        max: usize,
    },
    /// A read past the last entry that may be read.
    #[error("ledger {ledger}: entry {entry} is past the last readable entry {last}")]
    BeyondLastEntry {
        /// Ledger.
        ledger: i64,
        /// Entry asked for.
        entry: i64,
        /// Last readable.
        last: i64,
    },
    /// No replica has the entry.
    #[error("ledger {ledger}: no bookie has entry {entry}")]
    NoSuchEntry {
        /// Ledger.
        ledger: i64,
        /// Entry.
        entry: i64,
    },
    /// No replica could give the entry.
    #[error("ledger {ledger}: reading entry {entry} failed: {reason}")]
    ReadFailed {
        /// Ledger.
        ledger: i64,
        /// Entry.
        entry: i64,
        /// Every replica's failure.
        reason: String,
    },
    /// Recovery could not finish.
    #[error("recovering ledger {ledger} failed: {reason}")]
    RecoveryFailed {
        /// Ledger.
        ledger: i64,
        /// Why.
        reason: String,
    },
    /// Corrupt metadata or entries.
    #[error("{0}")]
    Corrupt(String),
    /// A ZooKeeper / session error retrying did not cure.
    #[error(transparent)]
    Zk(#[from] crate::Error),
}

impl From<layout::LayoutError> for LedgerError {
    fn from(e: layout::LayoutError) -> Self {
        match e {
            layout::LayoutError::BadLedgerId(id) => LedgerError::NoSuchLedger(id),
            layout::LayoutError::BadRoot(r) => LedgerError::BadArguments(format!("root {r:?}")),
            other => LedgerError::Corrupt(other.to_string()),
        }
    }
}

impl From<NotEnoughBookies> for LedgerError {
    fn from(e: NotEnoughBookies) -> Self {
        LedgerError::NotEnoughBookies {
            needed: e.needed,
            available: e.available,
        }
    }
}
