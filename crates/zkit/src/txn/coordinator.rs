//! The coordinator: [`Coordinator::begin`] a transaction, [`Transaction::commit`] it. Writes the
//! transaction tree in one `multi`, collects votes with a children watch on `votes/`, decides by
//! `create` of `decision` (first writer wins, a loser adopts the winner's decision), and waits a
//! bounded time for acknowledgements. Must not decide anything itself: the rules are
//! [`super::decide::tally`].

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::{Arc, Mutex as StdMutex};

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use zkit_client as zk;

use super::decide::{tally, Decision, Tally};
use super::layout::{self, check_name, Layout, PrepareHeader};
use super::zkops::{self, retrying, wait_for, Woken};
use super::{now_ms, TxnError, TxnOptions};
use crate::session::Session;

/// The outcome of [`Transaction::commit`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Every participant voted yes; the decision is commit.
    Committed,
    /// The decision is abort, with the reason (a `no` vote, a vote timeout, …).
    Aborted(String),
}

impl From<Decision> for Outcome {
    fn from(decision: Decision) -> Self {
        match decision {
            Decision::Commit => Outcome::Committed,
            Decision::Abort(reason) => Outcome::Aborted(reason),
        }
    }
}

struct Inner {
    session: Session,
    options: TxnOptions,
    layout: Layout,
    id: String,
    stop: CancellationToken,
    /// The session generation for which `coordinators/live/<id>` and the directories exist.
    registered: tokio::sync::Mutex<u64>,
    /// Participants whose `inbox/<p>` directory is known to exist.
    inboxes: StdMutex<HashSet<String>>,
}

/// Begins and commits transactions. Cheap to clone. While it lives it holds the ephemeral
/// `coordinators/live/<id>`, which tells recoverers to leave its transactions alone until
/// their deadline (plus grace).
#[derive(Clone)]
pub struct Coordinator {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Coordinator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Coordinator")
            .field("id", &self.inner.id)
            .field("root", &self.inner.layout.root())
            .finish()
    }
}

impl Coordinator {
    /// A coordinator with a fresh id (`c-<uuid>`).
    ///
    /// # Errors
    /// [`TxnError::BadArguments`] for a bad root.
    pub fn new(session: &Session, options: TxnOptions) -> Result<Coordinator, TxnError> {
        let id = format!("c-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
        Coordinator::with_id(session, options, &id)
    }

    /// A coordinator with the given id (unique among live coordinators).
    ///
    /// # Errors
    /// [`TxnError::BadArguments`] for a bad root or id.
    pub fn with_id(
        session: &Session,
        options: TxnOptions,
        id: &str,
    ) -> Result<Coordinator, TxnError> {
        check_name("coordinator id", id)?;
        let layout = Layout::new(&options.root)?;
        Ok(Coordinator {
            inner: Arc::new(Inner {
                session: session.clone(),
                options,
                layout,
                id: id.to_string(),
                stop: CancellationToken::new(),
                registered: tokio::sync::Mutex::new(0),
                inboxes: StdMutex::new(HashSet::new()),
            }),
        })
    }

    /// This coordinator's id (written into each transaction's prepare node).
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// The znode layout.
    pub fn layout(&self) -> &Layout {
        &self.inner.layout
    }

    /// Stops every running [`Transaction::commit`] of this coordinator (they return
    /// [`TxnError::Stopped`]; their transactions are left to a [`super::Recoverer`]).
    pub fn stop(&self) {
        self.inner.stop.cancel();
    }

    /// Begins a transaction across `participants` with `payload` (given to every participant's
    /// [`super::Resource::prepare`]). Nothing is written until [`Transaction::commit`].
    ///
    /// # Errors
    /// [`TxnError::BadArguments`] for no participants or a bad name.
    pub fn begin<S: AsRef<str>>(
        &self,
        participants: &[S],
        payload: &[u8],
    ) -> Result<Transaction, TxnError> {
        let txid = format!("tx-{}", uuid::Uuid::new_v4().simple());
        self.begin_with_id(&txid, participants, payload)
    }

    /// As [`Coordinator::begin`] with a chosen transaction id (unique under the root).
    ///
    /// # Errors
    /// As [`Coordinator::begin`], and for a bad id.
    pub fn begin_with_id<S: AsRef<str>>(
        &self,
        txid: &str,
        participants: &[S],
        payload: &[u8],
    ) -> Result<Transaction, TxnError> {
        check_name("transaction id", txid)?;
        let participants: BTreeSet<String> = participants
            .iter()
            .map(|p| p.as_ref().to_string())
            .collect();
        if participants.is_empty() {
            return Err(TxnError::BadArguments("no participants".into()));
        }
        for p in &participants {
            check_name("participant", p)?;
        }
        Ok(Transaction {
            coordinator: self.clone(),
            txid: txid.to_string(),
            participants,
            payload: payload.to_vec(),
        })
    }

    /// Makes sure the directories and `coordinators/live/<id>` exist for the current session.
    async fn register(&self) -> Result<(), TxnError> {
        let inner = &self.inner;
        let mut registered = inner.registered.lock().await;
        let generation = inner.session.generation();
        if *registered == generation {
            return Ok(());
        }
        for dir in [
            inner.layout.members_dir(),
            inner.layout.inbox_root(),
            inner.layout.live_dir(),
            inner.layout.leader_dir(),
        ] {
            zkops::ensure_dir(&inner.session, &inner.stop, &dir).await?;
        }
        zkops::claim_ephemeral(&inner.session, &inner.stop, &inner.layout.live(&inner.id)).await?;
        *registered = generation;
        Ok(())
    }

    async fn ensure_inboxes(&self, participants: &BTreeSet<String>) -> Result<(), TxnError> {
        let missing: Vec<String> = {
            let known = self.inner.inboxes.lock().unwrap_or_else(|e| e.into_inner());
            participants
                .iter()
                .filter(|p| !known.contains(*p))
                .cloned()
                .collect()
        };
        for p in missing {
            let path = self.inner.layout.inbox(&p);
            zkops::ensure_dir(&self.inner.session, &self.inner.stop, &path).await?;
            self.inner
                .inboxes
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(p);
        }
        Ok(())
    }
}

/// One transaction, begun by [`Coordinator::begin`].
#[derive(Debug)]
pub struct Transaction {
    coordinator: Coordinator,
    txid: String,
    participants: BTreeSet<String>,
    payload: Vec<u8>,
}

impl Transaction {
    /// The transaction id.
    pub fn txid(&self) -> &str {
        &self.txid
    }

    /// Runs two-phase commit: writes the transaction (prepare, inbox entries), waits for the
    /// votes with a watch until the vote timeout, decides (commit iff all voted yes; first
    /// `create` of `decision` wins), then waits up to the ack timeout for acknowledgements.
    ///
    /// # Errors
    /// [`TxnError::Stopped`] after [`Coordinator::stop`]; [`TxnError::Zk`] when the session is
    /// closed; [`TxnError::NoSuchTransaction`] if the tree vanished (someone deleted it). A
    /// transaction whose commit returned an error is finished by a [`super::Recoverer`].
    ///
    /// # Cancellation safety
    /// Dropping the future leaves the transaction to a recoverer, exactly like a crash.
    pub async fn commit(self) -> Result<Outcome, TxnError> {
        let c = &self.coordinator;
        let inner = &c.inner;
        let layout = &inner.layout;
        let txid = self.txid.as_str();
        c.register().await?;
        c.ensure_inboxes(&self.participants).await?;

        let created_ms = now_ms();
        let vote_timeout_ms =
            u64::try_from(inner.options.vote_timeout.as_millis()).unwrap_or(u64::MAX);
        let header = PrepareHeader {
            v: 1,
            participants: self.participants.clone(),
            deadline_ms: created_ms.saturating_add(vote_timeout_ms),
            coordinator: inner.id.clone(),
            created_ms,
        };
        let prepare = layout::encode_prepare(&header, &self.payload);
        write_tree(c, txid, &header, &prepare).await?;
        tracing::debug!(txid, coordinator = %inner.id, "txn: prepare written");

        let (proposal, voters, votes_watch) =
            collect_votes(&inner.session, &inner.stop, layout, txid, &header).await?;
        if !inner.options.decision_delay.is_zero() {
            tokio::select! {
                _ = inner.stop.cancelled() => return Err(TxnError::Stopped),
                _ = tokio::time::sleep(inner.options.decision_delay) => {}
            }
        }
        let (decision, by) = decide_with(
            &inner.session,
            &inner.stop,
            layout,
            txid,
            &proposal,
            &inner.id,
        )
        .await?;
        tracing::debug!(txid, decision = decision.word(), by, "txn: decided");
        let (all_acked, acks_watch) = await_acks(
            &inner.session,
            &inner.stop,
            layout,
            txid,
            &self.participants,
            Instant::now() + inner.options.ack_timeout,
        )
        .await?;
        // Done with it: let it be collected. In the background: the outcome is settled, and a
        // crash here only leaves the ephemeral `owner` to go with the session.
        let session = inner.session.clone();
        let stop = inner.stop.clone();
        let layout = layout.clone();
        let txid = txid.to_string();
        let participants = self.participants;
        tokio::spawn(async move {
            // Everyone acked: the owner node and the whole tree go in one `multi` (one write,
            // no listing: the children are the votes we read and the acks we saw). It fails
            // as a whole if the tree holds anything else (a late vote); then the slow path.
            // The last child watches on `votes/` and `acks/` live until the tree is gone: its
            // deletion fires them, whereas dropping an armed watch costs a removeWatches request.
            let _watches = (votes_watch, acks_watch);
            if all_acked
                && zkops::collect_known(&session.client(), &layout, &txid, &voters, &participants)
                    .await
            {
                return;
            }
            let owner = layout.owner(&txid);
            let deleted = retrying(&session, &stop, |client| {
                let owner = &owner;
                async move {
                    match client.delete(owner, None).await {
                        Ok(()) | Err(zk::Error::NoNode) => Ok(()),
                        Err(err) => Err(err),
                    }
                }
            })
            .await;
            // Look at the acks again *after* giving up ownership: a participant whose ack
            // `multi` still found `owner` left the collecting to us, and its ack is visible
            // now; one that acks later finds `owner` gone and collects itself.
            // Retried through connection loss: once `owner` is gone, only the last acker (who
            // may have acked already) or we collect it.
            if deleted.is_ok() {
                let _ = retrying(&session, &stop, |client| {
                    let (layout, txid, participants) = (&layout, &txid, &participants);
                    async move {
                        zkops::collect_if_acked(&client, layout, txid, participants).await
                    }
                })
                .await;
            }
        });
        Ok(decision.into())
    }
}

/// Creates `<txid>`, `prepare`, `votes`, `acks` and the inbox entries in one `multi`. A retry
/// after connection loss may find its own earlier attempt succeeded: that is recognised by the
/// prepare data.
async fn write_tree(
    c: &Coordinator,
    txid: &str,
    header: &PrepareHeader,
    prepare: &[u8],
) -> Result<(), TxnError> {
    let inner = &c.inner;
    let layout = &inner.layout;
    let options = zkops::persistent();
    let ephemeral = zkops::ephemeral();
    let mut paths = vec![
        (layout.txn(txid), Vec::new()),
        (layout.votes(txid), Vec::new()),
        (layout.acks(txid), Vec::new()),
        (layout.prepare(txid), prepare.to_vec()),
    ];
    for p in &header.participants {
        paths.push((layout.inbox_entry(p, txid), Vec::new()));
    }
    let written = retrying(&inner.session, &inner.stop, |client| {
        let paths = &paths;
        let options = &options;
        let ephemeral = &ephemeral;
        async move {
            let mut multi = client.new_multi_writer();
            for (path, data) in paths {
                multi.add_create(path, data, options)?;
            }
            multi.add_create(&layout.owner(txid), &[], ephemeral)?;
            match multi.commit().await {
                Ok(_) => Ok(true),
                Err(err) => match zk::Error::from(err) {
                    zk::Error::NodeExists => Ok(false),
                    other => Err(other),
                },
            }
        }
    })
    .await?;
    if written {
        return Ok(());
    }
    // NodeExists: ours from an attempt whose reply was lost, or a duplicate txid.
    let existing = retrying(&inner.session, &inner.stop, |client| async move {
        match client.get_data(&layout.prepare(txid)).await {
            Ok((data, _)) => Ok(Some(data)),
            Err(zk::Error::NoNode) => Ok(None),
            Err(err) => Err(err),
        }
    })
    .await?;
    match existing {
        Some(data) if data == prepare => Ok(()),
        _ => Err(TxnError::BadArguments(format!(
            "transaction {txid} already exists"
        ))),
    }
}

/// Collects votes of `txid` with a children watch on `votes/` until [`tally`] decides: all yes,
/// a no, or the deadline. Returns the decision to propose, the names of the votes read (the
/// children of `votes/` as last seen) and the child watch still armed on `votes/` (see
/// [`Transaction::commit`] for why it is kept). Shared by coordinator and recoverer.
pub(crate) async fn collect_votes(
    session: &Session,
    stop: &CancellationToken,
    layout: &Layout,
    txid: &str,
    header: &PrepareHeader,
) -> Result<(Decision, BTreeSet<String>, zk::OneshotWatcher), TxnError> {
    let mut votes = BTreeMap::new();
    let mut names = BTreeSet::new();
    loop {
        let missing: Vec<String> = header
            .participants
            .iter()
            .filter(|p| !votes.contains_key(*p))
            .cloned()
            .collect();
        // One round trip per change: the child watch for what comes next, and (pipelined right
        // behind it) the votes not read yet, by name, in one multi-read (a vote not written yet
        // is a per-op NoNode). A vote landing between the two is read now and fires the watch,
        // which costs one empty round later, never a lost vote.
        let listed = retrying(session, stop, |client| {
            let missing = &missing;
            async move {
                let (listed, read) = tokio::join!(
                    client.list_and_watch_children(&layout.votes(txid)),
                    zkops::read_votes(&client, layout, txid, missing),
                );
                match listed {
                    Ok((names, watcher)) => Ok(Some((names, watcher, read?))),
                    Err(zk::Error::NoNode) => Ok(None),
                    Err(err) => Err(err),
                }
            }
        })
        .await?;
        let Some((listed, watcher, read)) = listed else {
            return Err(TxnError::NoSuchTransaction(txid.to_string()));
        };
        names.extend(listed);
        names.extend(read.keys().cloned());
        votes.extend(read);
        match tally(&header.participants, &votes, header.deadline_ms, now_ms()) {
            Tally::Decide(decision) => return Ok((decision, names, watcher)),
            Tally::Wait { until_ms, .. } => {
                match wait_for(session, stop, watcher, Some(zkops::instant_of(until_ms))).await? {
                    Woken::Changed | Woken::Deadline => {}
                }
            }
        }
    }
}

/// Writes `proposal` as the decision of `txid` unless one exists; returns the decision that
/// stands and who wrote it. Exactly one `create` of `decision` succeeds; everyone else reads it.
pub(crate) async fn decide_with(
    session: &Session,
    stop: &CancellationToken,
    layout: &Layout,
    txid: &str,
    proposal: &Decision,
    by: &str,
) -> Result<(Decision, String), TxnError> {
    let data = layout::encode_decision(proposal, by);
    let options = zkops::persistent();
    let result = retrying(session, stop, |client| {
        let data = &data;
        let options = &options;
        async move {
            match client.create(&layout.decision(txid), data, options).await {
                Ok(_) => Ok(Ok(())),
                Err(zk::Error::NodeExists) => {
                    match zkops::read_decision(&client, layout, txid).await? {
                        Some(existing) => Ok(Err(Some(existing))),
                        None => Err(zk::Error::ConnectionLoss), // deleted meanwhile: impossible unless collected
                    }
                }
                Err(zk::Error::NoNode) => Ok(Err(None)),
                Err(err) => Err(err),
            }
        }
    })
    .await?;
    match result {
        Ok(()) => Ok((proposal.clone(), by.to_string())),
        Err(Some(existing)) => Ok(existing),
        Err(None) => Err(TxnError::NoSuchTransaction(txid.to_string())),
    }
}

/// Writes `proposal` as the decision of `txid` under `layout` unless a decision exists, and
/// returns the one that stands with its writer: the building block that makes "old coordinator
/// vs recoverer" safe, since exactly one `create` succeeds and the loser adopts the winner's.
///
/// # Errors
/// [`TxnError::NoSuchTransaction`] when `txid` does not exist; [`TxnError::Zk`] when the
/// session is closed.
pub async fn decide_by_create(
    session: &Session,
    layout: &Layout,
    txid: &str,
    proposal: &Decision,
    by: &str,
) -> Result<(Decision, String), TxnError> {
    decide_with(
        session,
        &CancellationToken::new(),
        layout,
        txid,
        proposal,
        by,
    )
    .await
}

/// Waits (watching `acks/`) until every participant acknowledged or `deadline`. The tree being
/// gone means it was collected, which happens only after all acks. Also returns the child watch
/// still armed on `acks/`, if any (kept until the tree is gone, see [`Transaction::commit`]).
async fn await_acks(
    session: &Session,
    stop: &CancellationToken,
    layout: &Layout,
    txid: &str,
    participants: &BTreeSet<String>,
    deadline: Instant,
) -> Result<(bool, Option<zk::OneshotWatcher>), TxnError> {
    loop {
        let listed = retrying(session, stop, |client| async move {
            match client.list_and_watch_children(&layout.acks(txid)).await {
                Ok(listed) => Ok(Some(listed)),
                Err(zk::Error::NoNode) => Ok(None),
                Err(err) => Err(err),
            }
        })
        .await?;
        let Some((acks, watcher)) = listed else {
            return Ok((true, None));
        };
        let acks: BTreeSet<String> = acks.into_iter().collect();
        if zkops::all_acked(participants, &acks) {
            return Ok((true, Some(watcher)));
        }
        if wait_for(session, stop, watcher, Some(deadline)).await? == Woken::Deadline {
            tracing::info!(
                txid,
                "txn: ack timeout; stragglers apply the decision when back"
            );
            return Ok((false, None));
        }
    }
}
