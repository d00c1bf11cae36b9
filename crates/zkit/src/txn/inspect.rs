//! Read-only views of the transaction tree for operators (`zkit txn list|show`): which
//! transactions are in flight (undecided) or in doubt (decided, not yet acknowledged by every
//! participant), and everything about one. Never writes.

use std::collections::BTreeSet;

use zkit_client as zk;

use super::layout::{Layout, RESERVED};
use super::zkops::read_txn;
pub use super::zkops::TxnState;
use super::TxnError;
use crate::session::Session;

/// Where a transaction stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// No decision yet.
    InFlight,
    /// Decided; some participants have not acknowledged (they apply it when back).
    InDoubt,
    /// Decided and acknowledged by everyone (about to be collected).
    Done,
}

impl TxnState {
    /// The phase.
    pub fn phase(&self) -> Phase {
        match &self.decision {
            None => Phase::InFlight,
            Some(_)
                if self
                    .header
                    .participants
                    .iter()
                    .all(|p| self.acks.contains(p)) =>
            {
                Phase::Done
            }
            Some(_) => Phase::InDoubt,
        }
    }

    /// Participants that have not acknowledged.
    pub fn unacked(&self) -> BTreeSet<String> {
        self.header
            .participants
            .iter()
            .filter(|p| !self.acks.contains(*p))
            .cloned()
            .collect()
    }
}

fn zk_err(err: zk::Error) -> TxnError {
    TxnError::Zk(err.into())
}

/// Every transaction under `layout`'s root, by txid (those being collected are skipped).
///
/// # Errors
/// ZooKeeper errors; a missing root is an empty list.
pub async fn list(session: &Session, layout: &Layout) -> Result<Vec<TxnState>, TxnError> {
    let client = session.client();
    let mut txids = match client.list_children(layout.root()).await {
        Ok(children) => children,
        Err(zk::Error::NoNode) => return Ok(Vec::new()),
        Err(err) => return Err(zk_err(err)),
    };
    txids.retain(|t| !RESERVED.contains(&t.as_str()));
    txids.sort();
    let mut out = Vec::new();
    for txid in txids {
        if let Some(state) = read_txn(&client, layout, &txid).await? {
            out.push(state);
        }
    }
    Ok(out)
}

/// One transaction.
///
/// # Errors
/// [`TxnError::NoSuchTransaction`] when it does not exist; ZooKeeper errors.
pub async fn show(session: &Session, layout: &Layout, txid: &str) -> Result<TxnState, TxnError> {
    read_txn(&session.client(), layout, txid)
        .await?
        .ok_or_else(|| TxnError::NoSuchTransaction(txid.to_string()))
}

/// The live participants (`members/`), sorted.
///
/// # Errors
/// ZooKeeper errors; a missing directory is an empty list.
pub async fn members(session: &Session, layout: &Layout) -> Result<Vec<String>, TxnError> {
    match session.client().list_children(&layout.members_dir()).await {
        Ok(mut names) => {
            names.sort();
            Ok(names)
        }
        Err(zk::Error::NoNode) => Ok(Vec::new()),
        Err(err) => Err(zk_err(err)),
    }
}
