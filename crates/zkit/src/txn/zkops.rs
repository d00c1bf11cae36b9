//! ZooKeeper plumbing shared by the coordinator, participants and recoverer: retrying an
//! operation across connection and session loss, waiting on a watch (or a session change, a
//! deadline or a stop), reading a transaction, and garbage-collecting it.
//!
//! Nothing here decides anything: the rules are in [`super::decide`].

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use zkit_client as zk;

use super::decide::{Decision, Vote};
use super::layout::{self, Layout, PrepareHeader};
use super::TxnError;
use crate::error::Error;
use crate::session::Session;

/// Runs `op` on the session's current client until it succeeds, fails with a state error
/// (`NoNode`, `NodeExists`, …), the session is closed, or `stop` fires. Connection loss and
/// session replacement are waited out: the operation runs again on the new connection/session.
/// Callers of non-idempotent operations handle the `NodeExists`/`NoNode` a retry may produce.
pub(crate) async fn retrying<T, F, Fut>(
    session: &Session,
    stop: &CancellationToken,
    mut op: F,
) -> Result<T, TxnError>
where
    F: FnMut(zk::Client) -> Fut,
    Fut: Future<Output = Result<T, zk::Error>>,
{
    let mut attempt = 0u32;
    loop {
        if stop.is_cancelled() {
            return Err(TxnError::Stopped);
        }
        let result = tokio::select! {
            _ = stop.cancelled() => return Err(TxnError::Stopped),
            result = op(session.client()) => result,
        };
        let err = match result {
            Ok(value) => return Ok(value),
            Err(err) => Error::from(err),
        };
        if session.is_closed() {
            return Err(TxnError::Zk(Error::Closed));
        }
        if !(err.is_recoverable() || err.is_unrecoverable()) {
            return Err(TxnError::Zk(err));
        }
        tracing::debug!(attempt, error = %err, "txn: retrying after connection/session trouble");
        // Back off a little so that a client whose session just expired (before the session
        // layer replaced it) is not hammered; then wait for a usable connection.
        let backoff = Duration::from_millis(5u64 << attempt.min(7));
        attempt += 1;
        tokio::select! {
            _ = stop.cancelled() => return Err(TxnError::Stopped),
            _ = tokio::time::sleep(backoff) => {}
        }
        tokio::select! {
            _ = stop.cancelled() => return Err(TxnError::Stopped),
            connected = session.wait_connected() => { connected?; }
        }
    }
}

/// Why [`wait_for`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Woken {
    /// The watch fired or the session changed state: read again.
    Changed,
    /// The deadline passed.
    Deadline,
}

/// Waits for `watcher` to fire, the session to change state (a lost session loses its watches),
/// `deadline`, or `stop`.
pub(crate) async fn wait_for(
    session: &Session,
    stop: &CancellationToken,
    watcher: zk::OneshotWatcher,
    deadline: Option<Instant>,
) -> Result<Woken, TxnError> {
    let mut state = session.watch_state();
    state.borrow_and_update();
    let deadline = async move {
        match deadline {
            Some(at) => tokio::time::sleep_until(at).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = stop.cancelled() => Err(TxnError::Stopped),
        _ = watcher.changed() => Ok(Woken::Changed),
        _ = state.changed() => Ok(Woken::Changed),
        _ = deadline => Ok(Woken::Deadline),
    }
}

/// The tokio instant of a wall-clock time in Unix ms.
pub(crate) fn instant_of(at_ms: u64) -> Instant {
    let now = super::now_ms();
    Instant::now() + Duration::from_millis(at_ms.saturating_sub(now))
}

/// Persistent nodes with open ACLs.
pub(crate) fn persistent() -> zk::CreateOptions<'static> {
    zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all())
}

/// Ephemeral nodes with open ACLs.
pub(crate) fn ephemeral() -> zk::CreateOptions<'static> {
    zk::CreateMode::Ephemeral.with_acls(zk::Acls::anyone_all())
}

/// `mkdir -p` of `path`, retried.
pub(crate) async fn ensure_dir(
    session: &Session,
    stop: &CancellationToken,
    path: &str,
) -> Result<(), TxnError> {
    let options = persistent();
    retrying(session, stop, |client| async move {
        client.mkdir(path, &options).await
    })
    .await
}

/// Creates the ephemeral `path` for this session. A node left by a previous incarnation (a
/// crashed process whose session has not expired yet) is replaced instead of waited out, so
/// that a restarted process does not stall for a session timeout: names are unique per process
/// by contract.
pub(crate) async fn claim_ephemeral(
    session: &Session,
    stop: &CancellationToken,
    path: &str,
) -> Result<(), TxnError> {
    let options = ephemeral();
    loop {
        let created = retrying(session, stop, |client| {
            async move {
                match client.create(path, &[], &options).await {
                    Ok(_) => Ok(None),
                    Err(zk::Error::NodeExists) => match client.check_stat(path).await? {
                        Some(stat) if stat.ephemeral_owner == client.session_id().0 => Ok(None),
                        Some(stat) => Ok(Some(stat.version)),
                        None => Err(zk::Error::ConnectionLoss), // gone meanwhile: create again
                    },
                    Err(err) => Err(err),
                }
            }
        })
        .await?;
        match created {
            None => return Ok(()),
            Some(version) => {
                let _ = retrying(session, stop, |client| async move {
                    match client.delete(path, Some(version)).await {
                        Ok(()) | Err(zk::Error::NoNode) | Err(zk::Error::BadVersion) => Ok(()),
                        Err(err) => Err(err),
                    }
                })
                .await;
            }
        }
    }
}

/// Everything ZooKeeper holds about one transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnState {
    /// The transaction id.
    pub txid: String,
    /// The prepare header.
    pub header: PrepareHeader,
    /// The payload.
    pub payload: Vec<u8>,
    /// Votes so far.
    pub votes: BTreeMap<String, Vote>,
    /// The decision and its writer, if decided.
    pub decision: Option<(Decision, String)>,
    /// Participants that acknowledged the decision.
    pub acks: BTreeSet<String>,
}

/// Reads the decision of `txid`, if any.
pub(crate) async fn read_decision(
    client: &zk::Client,
    layout: &Layout,
    txid: &str,
) -> Result<Option<(Decision, String)>, zk::Error> {
    match client.get_data(&layout.decision(txid)).await {
        Ok((data, _)) => Ok(Some(layout::decode_decision(&data))),
        Err(zk::Error::NoNode) => Ok(None),
        Err(err) => Err(err),
    }
}

/// Reads the votes among `names` (children of `votes/`), in one multi-read.
pub(crate) async fn read_votes(
    client: &zk::Client,
    layout: &Layout,
    txid: &str,
    names: &[String],
) -> Result<BTreeMap<String, Vote>, zk::Error> {
    let mut votes = BTreeMap::new();
    if names.is_empty() {
        return Ok(votes);
    }
    let mut reader = client.new_multi_reader();
    for name in names {
        reader.add_get_data(&layout.vote(txid, name))?;
    }
    let results = reader.commit().await?;
    for (name, result) in names.iter().zip(results) {
        if let zk::MultiReadResult::Data { data, .. } = result {
            votes.insert(name.clone(), layout::decode_vote(&data));
        }
    }
    Ok(votes)
}

/// Reads the whole state of `txid`; `None` when it does not exist (or is being collected).
pub(crate) async fn read_txn(
    client: &zk::Client,
    layout: &Layout,
    txid: &str,
) -> Result<Option<TxnState>, TxnError> {
    let prepare = match client.get_data(&layout.prepare(txid)).await {
        Ok((data, _)) => data,
        Err(zk::Error::NoNode) => return Ok(None),
        Err(err) => return Err(Error::from(err).into()),
    };
    let (header, payload) = layout::decode_prepare(&prepare)?;
    let names = match client.list_children(&layout.votes(txid)).await {
        Ok(names) => names,
        Err(zk::Error::NoNode) => return Ok(None),
        Err(err) => return Err(Error::from(err).into()),
    };
    let votes = read_votes(client, layout, txid, &names)
        .await
        .map_err(Error::from)?;
    let decision = read_decision(client, layout, txid)
        .await
        .map_err(Error::from)?;
    let acks = match client.list_children(&layout.acks(txid)).await {
        Ok(names) => names.into_iter().collect(),
        Err(zk::Error::NoNode) => return Ok(None),
        Err(err) => return Err(Error::from(err).into()),
    };
    Ok(Some(TxnState {
        txid: txid.to_string(),
        header,
        payload,
        votes,
        decision,
        acks,
    }))
}

/// Deletes the tree of a decided, fully acknowledged transaction in one `multi`. Returns
/// whether it is gone. A concurrent collector or a child added meanwhile makes the multi fail
/// harmlessly (`NoNode`/`NotEmpty`): the other collector finished, or the next ack collects.
///
/// # Errors
/// Connection or session trouble (see [`race_or_trouble`]): nobody else may collect it, so the
/// caller runs this under [`retrying`]; a retry after a lost reply finds the tree gone.
pub(crate) async fn collect(
    client: &zk::Client,
    layout: &Layout,
    txid: &str,
) -> Result<bool, zk::Error> {
    let votes = match client.list_children(&layout.votes(txid)).await {
        Ok(names) => names,
        Err(err) => return race_or_trouble(err),
    };
    let acks = match client.list_children(&layout.acks(txid)).await {
        Ok(names) => names,
        Err(err) => return race_or_trouble(err),
    };
    let mut multi = client.new_multi_writer();
    let mut paths: Vec<String> = votes.iter().map(|v| layout.vote(txid, v)).collect();
    paths.push(layout.votes(txid));
    paths.extend(acks.iter().map(|a| layout.ack(txid, a)));
    paths.push(layout.acks(txid));
    paths.push(layout.decision(txid));
    paths.push(layout.prepare(txid));
    paths.push(layout.txn(txid));
    for path in &paths {
        if multi.add_delete(path, None).is_err() {
            return Ok(false);
        }
    }
    match multi.commit().await {
        Ok(_) => {
            tracing::debug!(txid, "txn: collected");
            Ok(true)
        }
        Err(err) => {
            tracing::debug!(txid, error = %err, "txn: collect lost a race");
            race_or_trouble(err.into())
        }
    }
}

/// `Ok(false)` for an answer about the tree (someone else changed it: a lost race, nothing to
/// do), `Err` for connection or session trouble, after which the operation must be tried again
/// ([`retrying`] waits it out).
fn race_or_trouble(err: zk::Error) -> Result<bool, zk::Error> {
    let e = Error::from(err.clone());
    if e.is_recoverable() || e.is_unrecoverable() {
        Err(err)
    } else {
        Ok(false)
    }
}

/// Deletes the tree of a decided transaction whose children are exactly known (`voters` under
/// `votes/`, `ackers` under `acks/`), including its `owner` node, in one `multi` without
/// listing anything: the coordinator's fast path after seeing every ack. Returns whether it
/// is gone; any other child (a late vote) makes the whole `multi` fail and nothing changes.
pub(crate) async fn collect_known(
    client: &zk::Client,
    layout: &Layout,
    txid: &str,
    voters: &BTreeSet<String>,
    ackers: &BTreeSet<String>,
) -> bool {
    let mut paths: Vec<String> = voters.iter().map(|v| layout.vote(txid, v)).collect();
    paths.push(layout.votes(txid));
    paths.extend(ackers.iter().map(|a| layout.ack(txid, a)));
    paths.push(layout.acks(txid));
    paths.push(layout.decision(txid));
    paths.push(layout.prepare(txid));
    paths.push(layout.owner(txid));
    paths.push(layout.txn(txid));
    let mut multi = client.new_multi_writer();
    for path in &paths {
        if multi.add_delete(path, None).is_err() {
            return false;
        }
    }
    match multi.commit().await {
        Ok(_) => {
            tracing::debug!(txid, "txn: collected (one multi)");
            true
        }
        Err(err) => {
            tracing::debug!(txid, error = %err, "txn: fast collect failed; listing");
            false
        }
    }
}

/// Collects `txid` if every one of `participants` acknowledged (and nobody owns it).
///
/// # Errors
/// As [`collect`]: run it under [`retrying`].
pub(crate) async fn collect_if_acked(
    client: &zk::Client,
    layout: &Layout,
    txid: &str,
    participants: &BTreeSet<String>,
) -> Result<bool, zk::Error> {
    match client.list_children(&layout.acks(txid)).await {
        Ok(acks) => {
            let acks: BTreeSet<String> = acks.into_iter().collect();
            if !all_acked(participants, &acks) {
                return Ok(false);
            }
            collect(client, layout, txid).await
        }
        Err(err) => race_or_trouble(err),
    }
}

/// Whether every participant in `participants` acknowledged.
pub(crate) fn all_acked(participants: &BTreeSet<String>, acks: &BTreeSet<String>) -> bool {
    participants.iter().all(|p| acks.contains(p))
}
