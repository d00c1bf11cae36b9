//! Contending for a lock: create a protected node, decide, watch only the node we wait for,
//! verify ownership.

use std::time::Duration;

use tokio::time::Instant;
use zkit_client as zk;

use super::guard::LockGuard;
use super::release::{Cleanup, ReleaseSlot, TakenRelease};
use super::LockOptions;
use crate::error::{Error, Result};
use crate::lock::decide::{decide_with, early_watch, holds_when_gone, Decision, Rule};
use crate::protected::{
    create_protected_and_list, join, spawn_orphan_cleanup, CreatedNode, ProtectedCreate,
};
use crate::retry::RetryPolicy;
use crate::session::{Session, SessionEvent, SessionState};

/// One acquisition request, filled in by each recipe.
pub(crate) struct Contend<'a> {
    pub session: &'a Session,
    pub parent: &'a str,
    /// Name part after the protected marker: `lock-`, `__READ__`, `__WRIT__`, `lease-`.
    pub name: &'a str,
    pub rule: Rule,
    /// A node that never blocks us (see [`crate::lock::decide_with`]).
    pub exempt: Option<String>,
    pub mode: zk::CreateMode,
    pub ttl: Option<Duration>,
    pub options: &'a LockOptions,
    /// The holder's lease ends this long after the acquisition started (lease locks).
    pub max_locked_time: Option<Duration>,
    /// Where this lock's background releases wait for the next acquisition (see
    /// [`ReleaseSlot`]); `None` releases at once.
    pub release_slot: Option<&'a ReleaseSlot>,
}

/// Deletes an attempt's node in the background unless disarmed.
struct AttemptCleanup<'a> {
    session: &'a Session,
    parent: &'a str,
    uuid: String,
    armed: bool,
}

impl Drop for AttemptCleanup<'_> {
    fn drop(&mut self) {
        if self.armed {
            spawn_orphan_cleanup(self.session, self.parent, &self.uuid);
        }
    }
}

/// Waits for `fut`, or until `deadline` (`None` when it passed first).
pub(crate) async fn until<T>(
    deadline: Option<Instant>,
    fut: impl std::future::Future<Output = T>,
) -> Option<T> {
    match deadline {
        None => Some(fut.await),
        Some(deadline) => tokio::time::timeout_at(deadline, fut).await.ok(),
    }
}

/// What to do after a recoverable error: wait for the connection if it is down, else back off
/// per the policy. `Err` when the policy gives up (or the session is closed).
pub(crate) async fn recover(
    session: &Session,
    err: Error,
    policy: &RetryPolicy,
    retries: &mut u32,
    start: Instant,
) -> Result<()> {
    if !session.state().state.is_connected() {
        // Not a retry in the policy's sense: nothing can succeed before the reconnect.
        session.wait_connected().await?;
        return Ok(());
    }
    match policy.next_sleep(*retries, start.elapsed()) {
        Some(sleep) => {
            *retries += 1;
            tokio::time::sleep(sleep).await;
            Ok(())
        }
        None => Err(err),
    }
}

/// Runs the acquisition; `timeout` bounds it as a whole.
///
/// A session-bound (ephemeral) acquisition belongs to the session it starts on. A `Suspended`
/// session changes nothing: a waiter holds nothing and keeps waiting. If the session is lost or
/// replaced before the lock is held, the waiter's node is gone with it: by default
/// ([`LockOptions::fail_waiters_on_lost`] `false`) it enters the line again on the next session
/// (a new node, at the back of the line); with `true` it fails with [`Error::SessionLost`], as
/// Curator's `acquire` throws.
pub(crate) async fn acquire(c: Contend<'_>, timeout: Option<Duration>) -> Result<LockGuard> {
    let started = Instant::now();
    let deadline = timeout.map(|t| started + t);
    let mut bound = if c.mode == zk::CreateMode::EphemeralSequential {
        // Bind to the session we are connected to now (waiting for one if none is).
        match until(deadline, c.session.wait_connected()).await {
            None => return Err(Error::Timeout(timeout.unwrap_or_default())),
            Some(event) => Some(event?.generation),
        }
    } else {
        None
    };
    loop {
        let mut cleanup = AttemptCleanup {
            session: c.session,
            parent: c.parent,
            uuid: uuid::Uuid::new_v4().to_string(),
            armed: true,
        };
        // The attempt may hang on a dead connection (a request to a black-holed server): watch
        // the session beside it so that a lost waiter fails when the loss is known, not when
        // the connection comes back. Dropping the attempt is safe (the drop guard below).
        let contended = async {
            let result = tokio::select! {
                result = attempt(&c, &cleanup.uuid, bound) => result,
                err = session_gone(&c, bound) => Err(err),
            };
            // The session layer ends a lost session's client as expired, so a request of a
            // session-bound attempt can fail with `SessionExpired` just before the loss is
            // published: that is the loss.
            match result {
                Err(Error::SessionExpired) if bound.is_some() => Err(Error::SessionLost),
                other => other,
            }
        };
        match until(deadline, contended).await {
            None => {
                // Delete our node now if we can, so that a caller who sees the timeout also sees
                // the directory as it was; otherwise the drop guard finishes in the background.
                let quick = Duration::from_secs(2);
                let deleted = tokio::time::timeout(
                    quick,
                    crate::protected::delete_by_uuid(c.session, c.parent, &cleanup.uuid),
                )
                .await;
                if matches!(deleted, Ok(Ok(()))) {
                    cleanup.armed = false;
                }
                return Err(Error::Timeout(timeout.unwrap_or_default()));
            }
            Some(Ok(Some(node))) => {
                cleanup.armed = false;
                let lease_deadline = c.max_locked_time.map(|t| started + t);
                let mut guard = LockGuard::start(
                    c.session,
                    node,
                    Cleanup::ByUuid {
                        parent: c.parent.to_string(),
                        uuid: cleanup.uuid.clone(),
                    },
                    bound.is_some(),
                    lease_deadline,
                );
                guard.release_slot = c.release_slot.cloned();
                return Ok(guard);
            }
            // Restart with a fresh node; the drop guard removes the old one.
            Some(Ok(None)) => continue,
            Some(Err(Error::SessionLost)) if !c.options.fail_waiters_on_lost => {
                let Some(old) = bound else {
                    return Err(Error::SessionLost);
                };
                // The drop guard removes the old node (if the old session still has it) from the
                // new session; join the line again there.
                tracing::debug!(
                    parent = c.parent,
                    "lock waiter: session lost, entering again"
                );
                match until(deadline, next_session(c.session, old)).await {
                    None => return Err(Error::Timeout(timeout.unwrap_or_default())),
                    Some(event) => bound = Some(event?.generation),
                }
            }
            // The drop guard removes our node (if the session still has it) in the background.
            Some(Err(err)) => return Err(err),
        }
    }
}

/// Waits for a connected session of a generation other than `old` (the client may report an
/// expiry before the session layer has declared `Lost` and built the next one).
async fn next_session(session: &Session, old: u64) -> Result<SessionEvent> {
    let mut state_rx = session.watch_state();
    loop {
        let event = *state_rx.borrow_and_update();
        if event.state == SessionState::Closed {
            return Err(Error::Closed);
        }
        if event.state.is_connected() && event.generation != old {
            return Ok(event);
        }
        if state_rx.changed().await.is_err() {
            return Err(Error::Closed);
        }
    }
}

/// `Err(SessionLost)` when a session-bound acquisition's session is gone (see [`acquire`]).
fn check_session(c: &Contend<'_>, bound: Option<u64>, event: &SessionEvent) -> Result<()> {
    let Some(bound) = bound else {
        return Ok(());
    };
    if !event.keeps(bound) && event.state != SessionState::Closed {
        tracing::debug!(parent = c.parent, state = ?event.state, "lock waiter: session lost");
        return Err(Error::SessionLost);
    }
    Ok(())
}

/// Resolves with the error once a session-bound acquisition's session is gone (never for one
/// that is not bound to its session).
async fn session_gone(c: &Contend<'_>, bound: Option<u64>) -> Error {
    if bound.is_none() {
        return std::future::pending().await;
    }
    let mut state_rx = c.session.watch_state();
    loop {
        let event = *state_rx.borrow_and_update();
        if let Err(err) = check_session(c, bound, &event) {
            return err;
        }
        if event.state == SessionState::Closed || state_rx.changed().await.is_err() {
            return Error::Closed;
        }
    }
}

/// One node's life: `Ok(Some(node))` acquired, `Ok(None)` restart with a new node.
///
/// The uncontended path costs one round trip: the create and the listing are pipelined
/// ([`create_protected_and_list`]), and create2's stat tells the node's `ephemeralOwner`, so
/// neither an extra listing nor an `exists` is needed to declare ownership.
async fn attempt(c: &Contend<'_>, uuid: &str, bound: Option<u64>) -> Result<Option<CreatedNode>> {
    let mut state_rx = c.session.watch_state();
    let event = *state_rx.borrow_and_update();
    check_session(c, bound, &event)?;
    if !event.state.is_connected() {
        c.session.wait_connected().await?;
        let event = *state_rx.borrow_and_update();
        check_session(c, bound, &event)?;
    }
    let create = ProtectedCreate {
        uuid: uuid.to_string(),
        mode: c.mode,
        ttl: c.ttl,
        create_parents: true,
        policy: c.options.retry.clone(),
    };
    let prefix = join(c.parent, c.name);
    // A release of ours waiting in the slot goes into the same transaction as our create.
    let mut taken = c
        .release_slot
        .and_then(ReleaseSlot::take)
        .map(|pending| TakenRelease {
            session: c.session,
            pending,
            armed: true,
        });
    let release_first = taken
        .as_ref()
        .filter(|t| t.pending.generation == c.session.generation())
        .map(|t| t.pending.path.clone());
    let created = create_protected_and_list(
        c.session,
        &prefix,
        &c.options.node_data,
        &create,
        release_first.as_deref(),
    )
    .await;
    if let (Some(taken), Ok(created)) = (taken.as_mut(), &created) {
        taken.armed = !created.released;
    }
    drop(taken);
    let created = match created {
        Ok(created) => created,
        Err(Error::SessionExpired | Error::SessionLost) if bound.is_some() => {
            return Err(Error::SessionLost)
        }
        Err(Error::SessionExpired | Error::SessionLost) => return Ok(None),
        Err(err) if err.is_recoverable() => return Ok(None),
        Err(err) => return Err(err),
    };
    let node = created.node;
    let mut prefetched = created.children;
    let ephemeral = bound.is_some();
    let start = Instant::now();
    let mut retries = 0u32;
    loop {
        let (client, generation) = c.session.client_and_generation();
        let event = *state_rx.borrow_and_update();
        check_session(c, bound, &event)?;
        if ephemeral && generation != node.generation {
            // Our ephemeral node went with the old session.
            return Err(Error::SessionLost);
        }
        // A listing taken by the previous step (or pipelined with the create) decides once.
        let listed = prefetched.take();
        let step: Result<Next> = async {
            let children = match listed {
                Some(children) => children,
                None => client.list_children(c.parent).await?,
            };
            match decide_with(&node.name, &children, c.rule, c.exempt.as_deref()) {
                Decision::NodeGone => Ok(Next::NodeGone),
                Decision::Acquired => {
                    // CURATOR-696: never declare ownership of a node that is gone or that
                    // belongs to a dead session. The listing just showed the node; the server
                    // recorded its owner at create time (or when the protected create found it
                    // after a retry), so a second read is only needed when that owner is not
                    // the session we are on now.
                    if !ephemeral || node.ephemeral_owner == client.session_id().0 {
                        return Ok(Next::Held);
                    }
                    let stat = client.check_stat(&node.path).await?;
                    Ok(match stat {
                        Some(stat)
                            if !ephemeral || stat.ephemeral_owner == client.session_id().0 =>
                        {
                            Next::Held
                        }
                        _ => Next::NodeGone,
                    })
                }
                Decision::WatchPredecessor(predecessor) => {
                    // Keep no client clone while waiting: after Lost it would keep the old
                    // ZooKeeper session (and our old node) alive.
                    drop(client);
                    wait_for_predecessor(c, bound, &node, &children, predecessor, &mut state_rx)
                        .await
                }
            }
        }
        .await;
        match step {
            Ok(Next::Held) => return Ok(Some(node)),
            Ok(Next::NodeGone) => return Ok(None),
            Ok(Next::Again(listing)) => {
                prefetched = listing;
                retries = 0;
            }
            Err(Error::SessionExpired | Error::SessionLost) if ephemeral => {
                return Err(Error::SessionLost)
            }
            Err(Error::SessionExpired | Error::SessionLost) => return Ok(None),
            Err(err) if err.is_recoverable() => {
                // A connection loss while waiting: keep waiting (on the same node) for the
                // reconnect, unless the session is gone meanwhile.
                check_session(c, bound, &c.session.state())?;
                recover(c.session, err, &c.options.retry, &mut retries, start).await?
            }
            Err(err) => return Err(err),
        }
    }
}

/// A listing of `parent` on the session's current client, holding that client only while the
/// request is in flight (sent when first polled).
fn list_children(
    session: &Session,
    parent: &str,
) -> std::pin::Pin<
    Box<impl std::future::Future<Output = std::result::Result<Vec<String>, zk::Error>>>,
> {
    let client = session.client();
    let parent = parent.to_string();
    Box::pin(async move { client.list_children(&parent).await })
}

/// What one decision step of [`attempt`] leads to.
enum Next {
    /// We hold the lock.
    Held,
    /// Our node is gone: start over with a new one.
    NodeGone,
    /// Decide again, from this listing when there is one (else from a new one).
    Again(Option<Vec<String>>),
}

/// Waits, after `children` told us to watch `predecessor`, until something needs a new decision.
///
/// The hand-off costs no listing when we are next in line ([`holds_when_gone`]): the
/// predecessor's deletion alone makes us the holder. Further back, we also watch the contender
/// ahead of our predecessor ([`early_watch`]); when it goes, a listing is taken right away, while
/// our predecessor typically still holds the lock, so that by the time our predecessor's
/// deletion arrives we already know whether we are next in line, and the listing Curator takes
/// after that deletion is off the hand-off's critical path. Every decision to hold still comes
/// from a listing (through [`holds_when_gone`]); the early watch only takes that listing sooner.
async fn wait_for_predecessor(
    c: &Contend<'_>,
    bound: Option<u64>,
    node: &CreatedNode,
    children: &[String],
    predecessor: String,
    state_rx: &mut tokio::sync::watch::Receiver<SessionEvent>,
) -> Result<Next> {
    let exempt = c.exempt.as_deref();
    let mut next_in_line = holds_when_gone(&node.name, children, c.rule, exempt);
    let early = if next_in_line {
        None
    } else {
        early_watch(&node.name, children, c.rule, exempt)
    };
    // Keep no client clone while waiting (after Lost it would keep the old ZooKeeper session,
    // and our old node, alive): each request below takes one for its own duration.
    let (watcher, early_stat) = {
        let client = c.session.client();
        // Both watches leave back to back (zkit-client sends at call time).
        let predecessor_watch = client.check_and_watch_stat(&join(c.parent, &predecessor));
        let early_watch_request = early
            .as_ref()
            .map(|early| client.check_and_watch_stat(&join(c.parent, early)));
        let (stat, watcher) = predecessor_watch.await?;
        if stat.is_none() {
            return Ok(Next::Again(None));
        }
        let early_stat = match early_watch_request {
            Some(request) => Some(request.await?),
            None => None,
        };
        (watcher, early_stat)
    };
    let mut early_watcher = None;
    let mut relist = None;
    match early_stat {
        Some((Some(_), watcher)) => early_watcher = Some(Box::pin(watcher.changed())),
        // Already gone: list now.
        Some((None, _)) => relist = Some(list_children(c.session, c.parent)),
        None => {}
    }
    let mut predecessor_gone = std::pin::pin!(watcher.changed());
    loop {
        tokio::select! {
            event = &mut predecessor_gone => {
                if event.event_type != zk::EventType::NodeDeleted {
                    // Data written (a revocation request) or the like: decide again.
                    return Ok(Next::Again(None));
                }
                if next_in_line {
                    // The same ownership check as `Decision::Acquired` (CURATOR-696), on the
                    // session the node was created on; otherwise decide again from a listing.
                    let (client, generation) = c.session.client_and_generation();
                    check_session(c, bound, &c.session.state())?;
                    if bound.is_none()
                        || (generation == node.generation
                            && node.ephemeral_owner == client.session_id().0)
                    {
                        return Ok(Next::Held);
                    }
                    return Ok(Next::Again(None));
                }
                // A listing in flight was sent after our predecessor's own predecessor went;
                // deciding from it (or from a new one when it failed) is always sound.
                return Ok(Next::Again(match relist.take() {
                    Some(listing) => listing.await.ok(),
                    None => None,
                }));
            }
            event = async { early_watcher.as_mut().expect("guarded").await }, if early_watcher.is_some() => {
                early_watcher = None;
                if event.event_type == zk::EventType::NodeDeleted && relist.is_none() {
                    relist = Some(list_children(c.session, c.parent));
                }
            }
            listing = async { relist.as_mut().expect("guarded").await }, if relist.is_some() => {
                relist = None;
                let listing = listing?;
                match decide_with(&node.name, &listing, c.rule, exempt) {
                    Decision::WatchPredecessor(p) if p == predecessor => {
                        // Still waiting for the same node; maybe next in line now.
                        next_in_line = holds_when_gone(&node.name, &listing, c.rule, exempt);
                        if !next_in_line {
                            if let Some(early) = early_watch(&node.name, &listing, c.rule, exempt) {
                                let client = c.session.client();
                                match client.check_and_watch_stat(&join(c.parent, &early)).await? {
                                    (Some(_), watcher) => {
                                        early_watcher = Some(Box::pin(watcher.changed()));
                                    }
                                    (None, _) => relist = Some(list_children(c.session, c.parent)),
                                }
                            }
                        }
                    }
                    // Held, gone, or a different predecessor: decide from this listing.
                    _ => return Ok(Next::Again(Some(listing))),
                }
            }
            // Checked at the top of `attempt`'s loop (lost-signal for waiters).
            _ = state_rx.changed() => return Ok(Next::Again(None)),
        }
    }
}
