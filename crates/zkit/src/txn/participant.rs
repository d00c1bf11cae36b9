//! The participant: registers `members/<name>`, resolves its in-doubt transactions (prepared
//! before a crash, outcome not applied) from `decision` before anything else, then serves its
//! inbox: prepare → vote → (watch) decision → apply → ack. The [`Resource`] does the real work;
//! this module must not decide: the steps come from [`super::decide::participant_step`].

use std::collections::HashSet;
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use zkit_client as zk;

use super::decide::{participant_step, Decision, Local, ParticipantStep, Vote};
use super::layout::{self, check_name, Layout};
use super::zkops::{self, retrying, wait_for};
use super::{TxnError, TxnOptions};
use crate::session::Session;

/// A transactional resource behind a participant (a database, a directory of files, …).
///
/// Contract:
/// - [`Resource::prepare`] returning [`Vote::Yes`] means the work is durable and can still be
///   committed or rolled back after a crash; [`Vote::No`] means nothing is held.
/// - [`Resource::commit`] and [`Resource::abort`] are idempotent: applying the same outcome
///   again is `Ok`. Applying the opposite outcome of one already applied is an error.
/// - [`Resource::in_doubt`] lists transactions prepared (yes) whose outcome is not applied.
pub trait Resource: Send + Sync + 'static {
    /// Prepares `txid` with `payload`; durable before returning `Yes`.
    fn prepare<'a>(
        &'a self,
        txid: &'a str,
        payload: &'a [u8],
    ) -> BoxFuture<'a, Result<Vote, TxnError>>;
    /// Commits a prepared `txid` (idempotent).
    fn commit<'a>(&'a self, txid: &'a str) -> BoxFuture<'a, Result<(), TxnError>>;
    /// Rolls back `txid`, prepared or not (idempotent).
    fn abort<'a>(&'a self, txid: &'a str) -> BoxFuture<'a, Result<(), TxnError>>;
    /// The transactions prepared but not yet committed or aborted.
    fn in_doubt(&self) -> BoxFuture<'_, Result<Vec<String>, TxnError>>;
}

/// What a participant did, for logs and demos (the `PREPARE`/`VOTE`/`APPLIED` lines).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParticipantEvent {
    /// Registered; about to resolve `in_doubt` transactions.
    Started {
        /// Transactions prepared before a restart, outcome unknown.
        in_doubt: Vec<String>,
    },
    /// In-doubt transactions resolved; now taking new work.
    Ready,
    /// A transaction arrived and is being prepared.
    Prepare {
        /// The transaction.
        txid: String,
    },
    /// The vote was written.
    Voted {
        /// The transaction.
        txid: String,
        /// The vote.
        vote: Vote,
    },
    /// The decision was applied to the resource and acknowledged.
    Applied {
        /// The transaction.
        txid: String,
        /// The decision.
        decision: Decision,
    },
    /// Something failed and is retried.
    Trouble {
        /// The transaction, if any.
        txid: Option<String>,
        /// What failed.
        error: String,
    },
}

/// Receives [`ParticipantEvent`]s (called inline; keep it quick).
pub type Observer = Arc<dyn Fn(&str, &ParticipantEvent) + Send + Sync>;

struct Ctx {
    session: Session,
    layout: Layout,
    name: String,
    resource: Arc<dyn Resource>,
    stop: CancellationToken,
    observer: Option<Observer>,
    inflight: StdMutex<HashSet<String>>,
}

impl Ctx {
    fn emit(&self, event: ParticipantEvent) {
        tracing::debug!(participant = %self.name, ?event, "txn participant");
        if let Some(observer) = &self.observer {
            observer(&self.name, &event);
        }
    }
}

/// A running participant. Dropping it (or [`Participant::stop`]) stops it; it holds nothing
/// that needs a clean shutdown, so a crash at any point is recovered on the next start.
pub struct Participant {
    name: String,
    stop: CancellationToken,
    task: Option<JoinHandle<Result<(), TxnError>>>,
}

impl std::fmt::Debug for Participant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Participant")
            .field("name", &self.name)
            .finish()
    }
}

impl Participant {
    /// Starts participant `name` on `session` with `resource`. It registers, resolves its
    /// in-doubt transactions (waiting for their decisions), emits [`ParticipantEvent::Ready`] and
    /// then serves its inbox until stopped.
    ///
    /// # Errors
    /// [`TxnError::BadArguments`] for a bad name or root. Later failures are retried; the task's
    /// final error (session closed) is returned by [`Participant::join`].
    pub fn start(
        session: &Session,
        options: &TxnOptions,
        name: &str,
        resource: Arc<dyn Resource>,
        observer: Option<Observer>,
    ) -> Result<Participant, TxnError> {
        check_name("participant", name)?;
        let ctx = Arc::new(Ctx {
            session: session.clone(),
            layout: Layout::new(&options.root)?,
            name: name.to_string(),
            resource,
            stop: CancellationToken::new(),
            observer,
            inflight: StdMutex::new(HashSet::new()),
        });
        let stop = ctx.stop.clone();
        let task = tokio::spawn(run(ctx));
        Ok(Participant {
            name: name.to_string(),
            stop,
            task: Some(task),
        })
    }

    /// The participant's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Stops serving (abruptly: in-flight work is dropped where it is, like a crash, and
    /// resumed by the next start).
    pub fn stop(&self) {
        self.stop.cancel();
    }

    /// Waits for the participant task to end (after [`Participant::stop`] or a fatal error).
    ///
    /// # Errors
    /// The task's error; [`TxnError::Stopped`] after `stop`.
    pub async fn join(mut self) -> Result<(), TxnError> {
        match self.task.take() {
            Some(task) => task
                .await
                .unwrap_or_else(|e| Err(TxnError::Resource(format!("participant task: {e}")))),
            None => Ok(()),
        }
    }
}

impl Drop for Participant {
    fn drop(&mut self) {
        self.stop.cancel();
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

async fn run(ctx: Arc<Ctx>) -> Result<(), TxnError> {
    let layout = &ctx.layout;
    for dir in [layout.members_dir(), layout.inbox(&ctx.name)] {
        zkops::ensure_dir(&ctx.session, &ctx.stop, &dir).await?;
    }
    zkops::claim_ephemeral(&ctx.session, &ctx.stop, &layout.member(&ctx.name)).await?;
    let mut generation = ctx.session.generation();

    // In-doubt resolution before new work: each is resolved from `decision`, waiting for it if
    // needed (a recoverer decides at the deadline at the latest).
    let in_doubt = resource_call(&ctx, None, || ctx.resource.in_doubt()).await?;
    ctx.emit(ParticipantEvent::Started {
        in_doubt: in_doubt.clone(),
    });
    let resolutions = in_doubt.iter().map(|txid| {
        let ctx = Arc::clone(&ctx);
        let txid = txid.clone();
        async move { handle(&ctx, &txid, Local::Prepared).await }
    });
    for result in futures::future::join_all(resolutions).await {
        result?;
    }
    ctx.emit(ParticipantEvent::Ready);

    let inbox = layout.inbox(&ctx.name);
    loop {
        if ctx.session.generation() != generation {
            // A new session: the old one's ephemeral member node is gone.
            zkops::claim_ephemeral(&ctx.session, &ctx.stop, &layout.member(&ctx.name)).await?;
            generation = ctx.session.generation();
        }
        let (entries, watcher) = retrying(&ctx.session, &ctx.stop, |client| {
            let inbox = &inbox;
            async move { client.list_and_watch_children(inbox).await }
        })
        .await?;
        for txid in entries {
            let fresh = ctx
                .inflight
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(txid.clone());
            if fresh {
                let ctx = Arc::clone(&ctx);
                tokio::spawn(async move {
                    let result = handle(&ctx, &txid, Local::Unknown).await;
                    if let Err(err) = &result {
                        if *err != TxnError::Stopped {
                            ctx.emit(ParticipantEvent::Trouble {
                                txid: Some(txid.clone()),
                                error: err.to_string(),
                            });
                        }
                    }
                    ctx.inflight
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .remove(&txid);
                });
            }
        }
        wait_for(&ctx.session, &ctx.stop, watcher, None).await?;
    }
}

/// Calls the resource, retrying failures with backoff (a database restarting, a full disk
/// being cleaned) until it works or the participant stops.
async fn resource_call<'a, T, F>(
    ctx: &'a Ctx,
    txid: Option<&str>,
    mut call: F,
) -> Result<T, TxnError>
where
    F: FnMut() -> BoxFuture<'a, Result<T, TxnError>>,
{
    let mut attempt = 0u32;
    loop {
        let result = tokio::select! {
            _ = ctx.stop.cancelled() => return Err(TxnError::Stopped),
            result = call() => result,
        };
        match result {
            Ok(value) => return Ok(value),
            Err(err) => {
                ctx.emit(ParticipantEvent::Trouble {
                    txid: txid.map(str::to_string),
                    error: err.to_string(),
                });
                let backoff = Duration::from_millis(20u64 << attempt.min(6));
                attempt += 1;
                tokio::select! {
                    _ = ctx.stop.cancelled() => return Err(TxnError::Stopped),
                    _ = tokio::time::sleep(backoff) => {}
                }
            }
        }
    }
}

/// What one multi-read of a transaction found.
struct Seen {
    payload: Option<Vec<u8>>,
    my_vote: Option<Vote>,
    decision: Option<Decision>,
    /// The decision left in our inbox entry when the transaction was expired before we acked
    /// (see [`super::recovery`]); `None` while the entry is empty or gone.
    tombstone: Option<Decision>,
}

async fn read_seen(ctx: &Ctx, txid: &str) -> Result<Seen, TxnError> {
    let layout = &ctx.layout;
    let name = &ctx.name;
    let results = retrying(&ctx.session, &ctx.stop, |client| async move {
        let mut reader = client.new_multi_reader();
        reader.add_get_data(&layout.prepare(txid))?;
        reader.add_get_data(&layout.vote(txid, name))?;
        reader.add_get_data(&layout.decision(txid))?;
        reader.add_get_data(&layout.inbox_entry(name, txid))?;
        reader.commit().await
    })
    .await?;
    let mut data = results.into_iter().map(|r| match r {
        zk::MultiReadResult::Data { data, .. } => Some(data),
        _ => None,
    });
    let prepare = data.next().flatten();
    let vote = data.next().flatten();
    let decision = data.next().flatten();
    let inbox_entry = data.next().flatten();
    let payload = match prepare {
        Some(bytes) => Some(layout::decode_prepare(&bytes)?.1),
        None => None,
    };
    Ok(Seen {
        payload,
        my_vote: vote.map(|v| layout::decode_vote(&v)),
        decision: decision.map(|d| layout::decode_decision(&d).0),
        tombstone: inbox_entry
            .filter(|d| !d.is_empty())
            .map(|d| layout::decode_decision(&d).0),
    })
}

/// Drives one transaction to its end for this participant (applied and acknowledged).
async fn handle(ctx: &Ctx, txid: &str, mut local: Local) -> Result<(), TxnError> {
    let layout = &ctx.layout;
    let mut seen = read_seen(ctx, txid).await?;
    loop {
        let Some(payload) = seen.payload.clone() else {
            if let Some(decision) = seen.tombstone.take() {
                // Expired before we acked: the recoverer left the decision in our inbox entry.
                // A commit means we voted yes (durably prepared), so applying it is right even
                // if this run does not remember preparing.
                match &decision {
                    Decision::Commit => {
                        resource_call(ctx, Some(txid), || ctx.resource.commit(txid)).await?
                    }
                    Decision::Abort(_) => {
                        resource_call(ctx, Some(txid), || ctx.resource.abort(txid)).await?
                    }
                }
                remove_inbox_entry(ctx, txid).await?;
                ctx.emit(ParticipantEvent::Applied {
                    txid: txid.to_string(),
                    decision,
                });
                return Ok(());
            }
            // No prepare node: the transaction was collected, which happens only after every
            // participant (us included) acknowledged, or expired with the decision left in our
            // inbox entry (handled above); or it never existed. Either way there is nothing to
            // decide; presumed abort for anything we hold, then drop the inbox entry.
            if local == Local::Prepared {
                tracing::warn!(txid, participant = %ctx.name, "txn: in doubt but gone; aborting");
                resource_call(ctx, Some(txid), || ctx.resource.abort(txid)).await?;
            }
            remove_inbox_entry(ctx, txid).await?;
            return Ok(());
        };
        match participant_step(local, seen.my_vote.as_ref(), seen.decision.as_ref()) {
            ParticipantStep::Prepare => {
                ctx.emit(ParticipantEvent::Prepare {
                    txid: txid.to_string(),
                });
                let vote =
                    resource_call(ctx, Some(txid), || ctx.resource.prepare(txid, &payload)).await?;
                if vote == Vote::Yes {
                    local = Local::Prepared;
                }
                seen.my_vote = Some(write_vote(ctx, txid, &vote).await?);
            }
            ParticipantStep::VoteYes => {
                seen.my_vote = Some(write_vote(ctx, txid, &Vote::Yes).await?);
            }
            ParticipantStep::AwaitDecision => {
                let watched = retrying(&ctx.session, &ctx.stop, |client| async move {
                    client.check_and_watch_stat(&layout.decision(txid)).await
                })
                .await?;
                match watched {
                    (Some(_), _) => seen = read_seen(ctx, txid).await?,
                    (None, watcher) => {
                        wait_for(&ctx.session, &ctx.stop, watcher, None).await?;
                        seen = read_seen(ctx, txid).await?;
                    }
                }
            }
            ParticipantStep::Apply(decision) => {
                match &decision {
                    Decision::Commit => {
                        resource_call(ctx, Some(txid), || ctx.resource.commit(txid)).await?
                    }
                    Decision::Abort(_) => {
                        resource_call(ctx, Some(txid), || ctx.resource.abort(txid)).await?
                    }
                }
                acknowledge(ctx, txid).await?;
                ctx.emit(ParticipantEvent::Applied {
                    txid: txid.to_string(),
                    decision,
                });
                return Ok(());
            }
        }
    }
}

/// Writes our vote; if one exists already (our own, from before a crash or a retried create),
/// that one stands: a vote is never changed.
async fn write_vote(ctx: &Ctx, txid: &str, vote: &Vote) -> Result<Vote, TxnError> {
    let layout = &ctx.layout;
    let name = &ctx.name;
    let data = layout::encode_vote(vote);
    let options = zkops::persistent();
    let written = retrying(&ctx.session, &ctx.stop, |client| {
        let data = &data;
        let options = &options;
        async move {
            match client.create(&layout.vote(txid, name), data, options).await {
                Ok(_) => Ok(None),
                Err(zk::Error::NodeExists) => {
                    let (existing, _) = client.get_data(&layout.vote(txid, name)).await?;
                    Ok(Some(layout::decode_vote(&existing)))
                }
                // The transaction is gone (collected after a decision we will read next).
                Err(zk::Error::NoNode) => Ok(Some(vote.clone())),
                Err(err) => Err(err),
            }
        }
    })
    .await?;
    let stands = written.unwrap_or_else(|| vote.clone());
    ctx.emit(ParticipantEvent::Voted {
        txid: txid.to_string(),
        vote: stands.clone(),
    });
    Ok(stands)
}

/// `acks/<name>` and the removal of `inbox/<name>/<txid>` in one `multi`; then, if every
/// participant has acknowledged, collects the transaction (the last to ack cleans up, so the
/// tree lives exactly as long as someone may still need it).
///
/// Fast path (one write, no reads): the same `multi` also checks that the coordinator's `owner`
/// node exists. If it does, the coordinator collects: it either sees this ack while waiting, or
/// looks at the acks again after deleting `owner`. Only when `owner` is gone (the coordinator
/// finished waiting, or died) does the acking participant read the acks and collect.
async fn acknowledge(ctx: &Ctx, txid: &str) -> Result<(), TxnError> {
    let layout = &ctx.layout;
    let name = &ctx.name;
    let options = zkops::persistent();
    let owned = retrying(&ctx.session, &ctx.stop, |client| {
        let options = &options;
        async move {
            let mut multi = client.new_multi_writer();
            multi.add_create(&layout.ack(txid, name), &[], options)?;
            multi.add_delete(&layout.inbox_entry(name, txid), None)?;
            multi.add_check_version(&layout.owner(txid), -1)?;
            match multi.commit().await {
                Ok(_) => Ok(true),
                // No owner, acked before, or collected: nothing was written; the slow path
                // below sorts it out.
                Err(err) => match zk::Error::from(err) {
                    zk::Error::NodeExists | zk::Error::NoNode => Ok(false),
                    other => Err(other),
                },
            }
        }
    })
    .await?;
    if owned {
        return Ok(());
    }
    retrying(&ctx.session, &ctx.stop, |client| {
        let options = &options;
        async move {
            let mut multi = client.new_multi_writer();
            multi.add_create(&layout.ack(txid, name), &[], options)?;
            multi.add_delete(&layout.inbox_entry(name, txid), None)?;
            match multi.commit().await {
                Ok(_) => Ok(()),
                // Acked before (a retry, or a crash after the ack): just drop the inbox entry.
                Err(err) => match zk::Error::from(err) {
                    zk::Error::NodeExists | zk::Error::NoNode => {
                        match client.delete(&layout.inbox_entry(name, txid), None).await {
                            Ok(()) | Err(zk::Error::NoNode) => Ok(()),
                            Err(err) => Err(err),
                        }
                    }
                    other => Err(other),
                },
            }
        }
    })
    .await?;
    let state = retrying(&ctx.session, &ctx.stop, |client| async move {
        let mut reader = client.new_multi_reader();
        reader.add_get_data(&layout.prepare(txid))?;
        reader.add_get_children(&layout.acks(txid))?;
        reader.commit().await
    })
    .await?;
    let mut it = state.into_iter();
    let participants = match it.next() {
        Some(zk::MultiReadResult::Data { data, .. }) => {
            layout::decode_prepare(&data)?.0.participants
        }
        _ => return Ok(()),
    };
    let acks = match it.next() {
        Some(zk::MultiReadResult::Children { children }) => children.into_iter().collect(),
        _ => return Ok(()),
    };
    if zkops::all_acked(&participants, &acks) {
        // Retried through connection loss: nobody else collects once the last ack is in.
        retrying(&ctx.session, &ctx.stop, |client| async move {
            zkops::collect(&client, layout, txid).await
        })
        .await?;
    }
    Ok(())
}

async fn remove_inbox_entry(ctx: &Ctx, txid: &str) -> Result<(), TxnError> {
    let path = ctx.layout.inbox_entry(&ctx.name, txid);
    retrying(&ctx.session, &ctx.stop, |client| {
        let path = &path;
        async move {
            match client.delete(path, None).await {
                Ok(()) | Err(zk::Error::NoNode) => Ok(()),
                Err(err) => Err(err),
            }
        }
    })
    .await
}
