//! The coordinator group's recoverer: every member contends for a [`crate::lock::Mutex`] on
//! `coordinators/leader` (holder = leader); the leader watches the transactions and the live
//! coordinators, and resumes every undecided transaction whose coordinator died (at once) or is
//! stuck past its deadline plus grace: all yes → commit, any no → abort, votes missing at the
//! deadline → abort (presumed abort). It decides with the same `create` as coordinators, so an
//! old coordinator racing the leader yields exactly one decision.
//!
//! It must not decide on its own: the when is [`super::decide::recovery_step`], the what is
//! [`super::decide::tally`].

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use zkit_client as zk;

use super::coordinator::{collect_votes, decide_with};
use super::decide::{expiry_at, recovery_step, Decision, RecoveryStep, Undecided};
use super::layout::{self, check_name, Layout, PrepareHeader, RESERVED};
use super::zkops::{self, retrying};
use super::{now_ms, TxnError, TxnOptions};
use crate::lock::Mutex;
use crate::session::Session;

/// What a recoverer did, for logs and demos (the `RECOVER_*` lines).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecoveryEvent {
    /// This member became the leader.
    Leading,
    /// Took over an undecided transaction.
    Resuming {
        /// The transaction.
        txid: String,
        /// The coordinator that began it.
        coordinator: String,
    },
    /// A resumed transaction's decision stands (`by` says who wrote it: us, or a racer).
    Decided {
        /// The transaction.
        txid: String,
        /// The decision that stands.
        decision: Decision,
        /// Its writer.
        by: String,
    },
}

/// Receives [`RecoveryEvent`]s (called inline; keep it quick).
pub type RecoveryObserver = Arc<dyn Fn(&RecoveryEvent) + Send + Sync>;

/// A running member of the coordinator group (see the module docs). Dropping it stops it.
pub struct Recoverer {
    stop: CancellationToken,
    task: Option<JoinHandle<Result<(), TxnError>>>,
}

impl std::fmt::Debug for Recoverer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recoverer").finish_non_exhaustive()
    }
}

struct Ctx {
    session: Session,
    options: TxnOptions,
    layout: Layout,
    id: String,
    stop: CancellationToken,
    observer: Option<RecoveryObserver>,
}

impl Ctx {
    fn emit(&self, event: RecoveryEvent) {
        tracing::info!(recoverer = %self.id, ?event, "txn recovery");
        if let Some(observer) = &self.observer {
            observer(&event);
        }
    }
}

impl Recoverer {
    /// Joins the coordinator group as `id` and recovers while leader, until stopped.
    ///
    /// # Errors
    /// [`TxnError::BadArguments`] for a bad id or root.
    pub fn start(
        session: &Session,
        options: &TxnOptions,
        id: &str,
        observer: Option<RecoveryObserver>,
    ) -> Result<Recoverer, TxnError> {
        check_name("recoverer id", id)?;
        let ctx = Arc::new(Ctx {
            session: session.clone(),
            options: options.clone(),
            layout: Layout::new(&options.root)?,
            id: id.to_string(),
            stop: CancellationToken::new(),
            observer,
        });
        let stop = ctx.stop.clone();
        Ok(Recoverer {
            stop,
            task: Some(tokio::spawn(run(ctx))),
        })
    }

    /// Stops it (leadership is released with the lock).
    pub fn stop(&self) {
        self.stop.cancel();
    }
}

impl Drop for Recoverer {
    fn drop(&mut self) {
        self.stop.cancel();
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

async fn run(ctx: Arc<Ctx>) -> Result<(), TxnError> {
    for dir in [ctx.layout.leader_dir(), ctx.layout.live_dir()] {
        zkops::ensure_dir(&ctx.session, &ctx.stop, &dir).await?;
    }
    let mutex = Mutex::new(&ctx.session, &ctx.layout.leader_dir());
    loop {
        let guard = tokio::select! {
            _ = ctx.stop.cancelled() => return Err(TxnError::Stopped),
            guard = mutex.lock() => guard,
        };
        let guard = match guard {
            Ok(guard) => guard,
            Err(crate::Error::Closed) => return Err(TxnError::Zk(crate::Error::Closed)),
            Err(err) => {
                tracing::warn!(error = %err, "txn recovery: leader lock failed; retrying");
                tokio::select! {
                    _ = ctx.stop.cancelled() => return Err(TxnError::Stopped),
                    _ = tokio::time::sleep(std::time::Duration::from_millis(200)) => {}
                }
                continue;
            }
        };
        ctx.emit(RecoveryEvent::Leading);
        let lost = guard.lost();
        // Leadership ends with the lock: stop every resumption with it (a new leader redoes
        // them; deciding is idempotent by `create`).
        let lead = ctx.stop.child_token();
        let result = tokio::select! {
            _ = lost.cancelled() => Ok(()),
            result = lead_loop(&ctx, &lead) => result,
        };
        lead.cancel();
        let _ = guard.release().await;
        match result {
            Err(TxnError::Stopped) => return Err(TxnError::Stopped),
            Err(TxnError::Zk(crate::Error::Closed)) => {
                return Err(TxnError::Zk(crate::Error::Closed))
            }
            Err(err) => tracing::warn!(error = %err, "txn recovery: leader loop failed"),
            Ok(()) => {}
        }
    }
}

struct Known {
    header: PrepareHeader,
    decided: bool,
    resuming: bool,
    /// Whether collecting it was tried after its coordinator died.
    collect_tried: bool,
    /// When to try expiring it (Unix ms; see [`TxnOptions::retention`]), and failed attempts.
    expire_at: u64,
    expire_failed: u32,
}

async fn lead_loop(ctx: &Arc<Ctx>, stop: &CancellationToken) -> Result<(), TxnError> {
    let layout = &ctx.layout;
    let mut known: HashMap<String, Known> = HashMap::new();
    let mut resumptions: JoinSet<(String, Result<(), TxnError>)> = JoinSet::new();
    loop {
        let root = layout.root().to_string();
        let (txids, root_watch) = retrying(&ctx.session, stop, |client| {
            let root = &root;
            async move { client.list_and_watch_children(root).await }
        })
        .await?;
        let live_dir = layout.live_dir();
        let (live, live_watch) = retrying(&ctx.session, stop, |client| {
            let live_dir = &live_dir;
            async move { client.list_and_watch_children(live_dir).await }
        })
        .await?;
        let live: BTreeSet<String> = live.into_iter().collect();
        let txids: BTreeSet<String> = txids
            .into_iter()
            .filter(|t| !RESERVED.contains(&t.as_str()))
            .collect();
        known.retain(|txid, _| txids.contains(txid));
        let retention_ms = u64::try_from(ctx.options.retention.as_millis()).unwrap_or(u64::MAX);
        for txid in &txids {
            if known.contains_key(txid) {
                continue;
            }
            if let Some((header, decided)) = read_prepare(ctx, stop, txid).await? {
                let header_created = header.created_ms;
                known.insert(
                    txid.clone(),
                    Known {
                        header,
                        decided,
                        resuming: false,
                        collect_tried: false,
                        expire_at: expiry_at(header_created, retention_ms, 0, 0),
                        expire_failed: 0,
                    },
                );
            }
        }
        let now = now_ms();
        let mut look_again: Option<u64> = None;
        for (txid, txn) in known.iter_mut() {
            if txn.decided && !txn.collect_tried && !live.contains(&txn.header.coordinator) {
                // Everyone may have acked while the coordinator still owned it, and nobody
                // acks again: the dead coordinator's leftovers are ours to collect.
                txn.collect_tried = true;
                let participants = &txn.header.participants;
                retrying(&ctx.session, stop, |client| async move {
                    zkops::collect_if_acked(&client, layout, txid, participants).await
                })
                .await?;
            }
            if txn.decided {
                // Acks that never all arrive: expire it once its retention is up.
                if now >= txn.expire_at {
                    if expire(&ctx.session.client(), layout, txid, &txn.header).await {
                        continue;
                    }
                    txn.expire_failed += 1;
                    txn.expire_at =
                        expiry_at(txn.header.created_ms, retention_ms, txn.expire_failed, now);
                }
                look_again = Some(look_again.map_or(txn.expire_at, |t| t.min(txn.expire_at)));
                continue;
            }
            if txn.resuming {
                continue;
            }
            let undecided = Undecided {
                deadline_ms: txn.header.deadline_ms,
                coordinator_alive: live.contains(&txn.header.coordinator),
            };
            let grace = u64::try_from(ctx.options.recovery_grace.as_millis()).unwrap_or(u64::MAX);
            match recovery_step(&undecided, grace, now) {
                RecoveryStep::Resume => {
                    txn.resuming = true;
                    let ctx = Arc::clone(ctx);
                    let stop = stop.clone();
                    let txid = txid.clone();
                    let header = txn.header.clone();
                    resumptions.spawn(async move {
                        let result = resume(&ctx, &stop, &txid, &header).await;
                        (txid, result)
                    });
                }
                RecoveryStep::LookAgain { at_ms } => {
                    look_again = Some(look_again.map_or(at_ms, |t| t.min(at_ms)));
                }
            }
        }
        let timer = async move {
            match look_again {
                Some(at) => tokio::time::sleep_until(zkops::instant_of(at)).await,
                None => std::future::pending().await,
            }
        };
        let mut state = ctx.session.watch_state();
        state.borrow_and_update();
        tokio::select! {
            _ = stop.cancelled() => return Err(TxnError::Stopped),
            _ = root_watch.changed() => {}
            _ = live_watch.changed() => {}
            _ = state.changed() => {}
            _ = timer => {}
            Some(joined) = resumptions.join_next() => {
                if let Ok((txid, result)) = joined {
                    if let Some(txn) = known.get_mut(&txid) {
                        // Transient ZooKeeper errors were retried inside; what is left (a
                        // vanished or unreadable transaction) would fail again: leave it.
                        txn.resuming = false;
                        txn.decided = true;
                    }
                    if let Err(err) = result {
                        if err == TxnError::Stopped {
                            return Err(err);
                        }
                        tracing::warn!(txid, error = %err, "txn recovery: resume failed");
                    }
                }
            }
        }
    }
}

/// Reads the prepare header of `txid` and whether it is decided; `None` if it is gone or not
/// (yet, or no longer) a complete transaction.
async fn read_prepare(
    ctx: &Ctx,
    stop: &CancellationToken,
    txid: &str,
) -> Result<Option<(PrepareHeader, bool)>, TxnError> {
    let layout = &ctx.layout;
    let results = retrying(&ctx.session, stop, |client| async move {
        let mut reader = client.new_multi_reader();
        reader.add_get_data(&layout.prepare(txid))?;
        reader.add_get_data(&layout.decision(txid))?;
        reader.commit().await
    })
    .await?;
    let mut it = results.into_iter();
    let header = match it.next() {
        Some(zk::MultiReadResult::Data { data, .. }) => match layout::decode_prepare(&data) {
            Ok((header, _)) => header,
            Err(err) => {
                tracing::warn!(txid, error = %err, "txn recovery: unreadable prepare, skipped");
                return Ok(None);
            }
        },
        _ => return Ok(None),
    };
    let decided = matches!(it.next(), Some(zk::MultiReadResult::Data { .. }));
    Ok(Some((header, decided)))
}

/// Expires the decided `txid` whose acks did not all arrive: in one `multi`, the decision is
/// written into the inbox entry of every participant that has not acked (so a straggler still
/// applies it, see [`super::participant`]) and the tree is deleted. Fails harmlessly (returns
/// `false`, nothing changed) while the coordinator still owns it (`owner` makes the tree
/// `NotEmpty`) or when something changed meanwhile (an ack, a late vote): tried again later.
async fn expire(client: &zk::Client, layout: &Layout, txid: &str, header: &PrepareHeader) -> bool {
    let participants: Vec<&String> = header.participants.iter().collect();
    let read = async {
        let mut reader = client.new_multi_reader();
        reader.add_get_data(&layout.decision(txid))?;
        reader.add_get_children(&layout.votes(txid))?;
        reader.add_get_children(&layout.acks(txid))?;
        for p in &participants {
            reader.add_get_data(&layout.inbox_entry(p, txid))?;
        }
        reader.commit().await
    };
    let Ok(results) = read.await else {
        return false;
    };
    let mut it = results.into_iter();
    let Some(zk::MultiReadResult::Data { data: decision, .. }) = it.next() else {
        return false;
    };
    let Some(zk::MultiReadResult::Children { children: votes }) = it.next() else {
        return false;
    };
    let Some(zk::MultiReadResult::Children { children: acks }) = it.next() else {
        return false;
    };
    let acks: BTreeSet<String> = acks.into_iter().collect();
    // A participant that acked has deleted its entry; one whose entry is missing has nothing
    // to receive the decision in (it never got the transaction).
    let stragglers: Vec<&String> = participants
        .iter()
        .zip(it)
        .filter(|(p, entry)| {
            !acks.contains(**p) && matches!(entry, zk::MultiReadResult::Data { .. })
        })
        .map(|(p, _)| *p)
        .collect();
    let mut multi = client.new_multi_writer();
    let built = expiry_ops(
        &mut multi,
        layout,
        txid,
        &decision,
        &stragglers,
        &votes,
        &acks,
    );
    if built.is_err() {
        return false;
    }
    match multi.commit().await {
        Ok(_) => {
            tracing::info!(
                txid,
                "txn recovery: expired with acks missing; decision left in inboxes"
            );
            true
        }
        Err(err) => {
            tracing::debug!(txid, error = %err, "txn recovery: expiring failed; trying later");
            false
        }
    }
}

/// The writes of [`expire`]: the decision into the stragglers' inbox entries, then the tree.
fn expiry_ops(
    multi: &mut zk::MultiWriter<'_>,
    layout: &Layout,
    txid: &str,
    decision: &[u8],
    stragglers: &[&String],
    votes: &[String],
    acks: &BTreeSet<String>,
) -> Result<(), zk::Error> {
    for p in stragglers {
        multi.add_set_data(&layout.inbox_entry(p, txid), decision, None)?;
    }
    for v in votes {
        multi.add_delete(&layout.vote(txid, v), None)?;
    }
    multi.add_delete(&layout.votes(txid), None)?;
    for a in acks {
        multi.add_delete(&layout.ack(txid, a), None)?;
    }
    multi.add_delete(&layout.acks(txid), None)?;
    multi.add_delete(&layout.decision(txid), None)?;
    multi.add_delete(&layout.prepare(txid), None)?;
    multi.add_delete(&layout.txn(txid), None)
}

/// Takes over `txid`: collect the votes (watching, until the deadline), then decide by create.
async fn resume(
    ctx: &Ctx,
    stop: &CancellationToken,
    txid: &str,
    header: &PrepareHeader,
) -> Result<(), TxnError> {
    ctx.emit(RecoveryEvent::Resuming {
        txid: txid.to_string(),
        coordinator: header.coordinator.clone(),
    });
    let started = Instant::now();
    let (proposal, _, _) = collect_votes(&ctx.session, stop, &ctx.layout, txid, header).await?;
    let (decision, by) =
        decide_with(&ctx.session, stop, &ctx.layout, txid, &proposal, &ctx.id).await?;
    tracing::debug!(txid, elapsed = ?started.elapsed(), "txn recovery: resumed");
    ctx.emit(RecoveryEvent::Decided {
        txid: txid.to_string(),
        decision,
        by,
    });
    Ok(())
}
