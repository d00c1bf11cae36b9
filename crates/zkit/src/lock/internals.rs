//! The async driver shared by the sequential-node locks (Curator's `LockInternals`): create a
//! protected node, decide with [`super::decide_with`], watch only the node we wait for, verify
//! ownership, and hand out a [`LockGuard`] whose lost-signal is driven by a small monitor task.
//!
//! Invariants it keeps:
//! - A node is never left behind by a failed, timed-out or dropped acquisition: the attempt
//!   carries a drop guard that deletes the attempt's UUID-named node in the background.
//! - Ownership is declared only after checking that our node exists and, for ephemeral nodes,
//!   that its `ephemeralOwner` is our current session (CURATOR-696).
//! - A session lost (or replaced, or suspended when that counts as lost) under a waiting
//!   acquisition fails it with [`Error::SessionLost`]; under a holder it fires the holder's
//!   lost-signal. Neither silently continues on the next session.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use zkit_client as zk;

use super::decide::{decide_with, early_watch, holds_when_gone, Decision, Rule};
use crate::error::{Error, Result};
use crate::protected::{
    create_protected_and_list, join, spawn_orphan_cleanup, CreatedNode, ProtectedCreate,
};
use crate::retry::RetryPolicy;
use crate::session::{Session, SessionEvent, SessionState};

/// Data Curator's `LockInternals` writes to a revoke-able lock node to ask its holder to release.
pub const REVOKE_MESSAGE: &[u8] = b"__REVOKE__";

/// Options shared by the lock recipes.
#[derive(Debug, Clone)]
pub struct LockOptions {
    /// Whether `Suspended` fires the holder's lost-signal (default `true`, like Curator's
    /// `StandardConnectionStateErrorPolicy`): during a disconnect we cannot know whether the
    /// session (and so the lock) survives. With `false`, only `Lost` (and deletion of the node)
    /// fire it. The same choice applies to waiters: with `true`, an acquisition that sees its
    /// session suspended fails with [`Error::SessionLost`]; with `false` it waits for the
    /// reconnect and fails only on `Lost`.
    pub suspended_is_lost: bool,
    /// Retry policy for recoverable errors while connected.
    pub retry: RetryPolicy,
    /// Data stored in the lock node (diagnostics; Curator stores the host address).
    pub node_data: Vec<u8>,
}

impl Default for LockOptions {
    fn default() -> Self {
        LockOptions {
            suspended_is_lost: true,
            retry: RetryPolicy::default(),
            node_data: format!("zkit pid={}", std::process::id()).into_bytes(),
        }
    }
}

/// One acquisition request, filled in by each recipe.
pub(crate) struct Contend<'a> {
    pub session: &'a Session,
    pub parent: &'a str,
    /// Name part after the protected marker: `lock-`, `__READ__`, `__WRIT__`, `lease-`.
    pub name: &'a str,
    pub rule: Rule,
    /// A node that never blocks us (see [`super::decide_with`]).
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

/// A lock node released in the background and not deleted yet.
#[derive(Debug)]
struct PendingRelease {
    path: String,
    parent: String,
    uuid: String,
    generation: u64,
}

/// A background release waiting, for at most one scheduling turn, for the next acquisition of
/// the same lock by the same process, so that both travel as one transaction (delete the old
/// node, create the new one): one write instead of two. A task spawned at release time sends a
/// plain delete if no acquisition took the release first; whoever takes it out of the slot owns
/// the deletion. Shared by the clones of one lock object.
#[derive(Debug, Clone, Default)]
pub(crate) struct ReleaseSlot(Arc<std::sync::Mutex<Option<PendingRelease>>>);

impl ReleaseSlot {
    fn lock(&self) -> std::sync::MutexGuard<'_, Option<PendingRelease>> {
        // A panic while holding this lock cannot leave the Option half-written.
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Parks `pending`; gives it back when another release is already waiting.
    fn put(&self, pending: PendingRelease) -> std::result::Result<(), PendingRelease> {
        let mut slot = self.lock();
        if slot.is_some() {
            return Err(pending);
        }
        *slot = Some(pending);
        Ok(())
    }

    /// The waiting release, if it is the one made with `uuid`.
    fn take_if(&self, uuid: &str) -> Option<PendingRelease> {
        let mut slot = self.lock();
        if slot.as_ref().is_some_and(|p| p.uuid == uuid) {
            slot.take()
        } else {
            None
        }
    }

    fn take(&self) -> Option<PendingRelease> {
        self.lock().take()
    }
}

/// Owns the deletion of a release taken out of the slot: deletes the node in the background
/// when dropped armed (the fused transaction failed, or the attempt was cancelled).
struct TakenRelease<'a> {
    session: &'a Session,
    pending: PendingRelease,
    armed: bool,
}

impl Drop for TakenRelease<'_> {
    fn drop(&mut self) {
        if self.armed {
            let p = &self.pending;
            send_delete(self.session, &p.path, &p.parent, &p.uuid);
        }
    }
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
/// A session-bound (ephemeral) acquisition belongs to the session it starts on. If that session
/// is lost or replaced before the lock is held (or suspended, with
/// [`LockOptions::suspended_is_lost`]), it fails with [`Error::SessionLost`], as Curator's
/// `acquire` throws, instead of silently starting over on the next session: the caller learns
/// that everything tied to the old session is gone and decides whether to try again.
pub(crate) async fn acquire(c: Contend<'_>, timeout: Option<Duration>) -> Result<LockGuard> {
    let started = Instant::now();
    let deadline = timeout.map(|t| started + t);
    let bound = if c.mode == zk::CreateMode::EphemeralSequential {
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
            tokio::select! {
                result = attempt(&c, &cleanup.uuid, bound) => result,
                err = session_gone(&c, bound) => Err(err),
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
                    c.options,
                    bound.is_some(),
                    lease_deadline,
                );
                guard.release_slot = c.release_slot.cloned();
                return Ok(guard);
            }
            // Restart with a fresh node; the drop guard removes the old one.
            Some(Ok(None)) => continue,
            // The drop guard removes our node (if the session still has it) in the background.
            Some(Err(err)) => return Err(err),
        }
    }
}

/// `Err(SessionLost)` when a session-bound acquisition's session is gone (see [`acquire`]).
fn check_session(c: &Contend<'_>, bound: Option<u64>, event: &SessionEvent) -> Result<()> {
    let Some(bound) = bound else {
        return Ok(());
    };
    let gone = event.generation != bound
        || event.state == SessionState::Lost
        || (event.state == SessionState::Suspended && c.options.suspended_is_lost);
    if gone {
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
                // A connection loss while waiting is a Suspended the state stream may not have
                // shown yet; a waiter configured to treat it as lost gives up now.
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

/// How a guard removes its node.
#[derive(Debug, Clone)]
pub(crate) enum Cleanup {
    /// Protected node: delete the child of `parent` carrying `uuid`.
    ByUuid { parent: String, uuid: String },
    /// Fixed path (SimpleLock): delete only while its `ephemeralOwner` is `owner`, since after a
    /// session loss someone else may hold a node at the same path.
    ByPath { owner: i64 },
}

/// A held lock. Dropping it releases the lock in the background; [`LockGuard::release`] does it
/// now and reports errors. Check [`LockGuard::lost`] before acting on the protected resource,
/// and pass [`LockGuard::fencing_token`] to it.
pub struct LockGuard {
    session: Session,
    path: String,
    sequence: i64,
    generation: u64,
    cleanup: Cleanup,
    lost: CancellationToken,
    revoke: CancellationToken,
    stop_monitor: CancellationToken,
    released: bool,
    /// The node is ephemeral: it lives and dies with the session it was created on.
    session_bound: bool,
    on_release: Option<Box<dyn FnOnce() + Send + Sync>>,
    release_slot: Option<ReleaseSlot>,
}

impl std::fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockGuard")
            .field("path", &self.path)
            .field("fencing_token", &self.sequence)
            .field("generation", &self.generation)
            .field("lost", &self.lost.is_cancelled())
            .finish()
    }
}

impl LockGuard {
    pub(crate) fn start(
        session: &Session,
        node: CreatedNode,
        cleanup: Cleanup,
        options: &LockOptions,
        ephemeral: bool,
        lease_deadline: Option<Instant>,
    ) -> LockGuard {
        let lost = CancellationToken::new();
        let revoke = CancellationToken::new();
        let stop_monitor = CancellationToken::new();
        tokio::spawn(monitor(Monitor {
            session: session.clone(),
            path: node.path.clone(),
            generation: node.generation,
            session_bound: ephemeral,
            suspended_is_lost: options.suspended_is_lost,
            lease_deadline,
            lost: lost.clone(),
            revoke: revoke.clone(),
            stop: stop_monitor.clone(),
        }));
        LockGuard {
            session: session.clone(),
            path: node.path,
            sequence: node.sequence,
            generation: node.generation,
            cleanup,
            lost,
            revoke,
            stop_monitor,
            released: false,
            session_bound: ephemeral,
            on_release: None,
            release_slot: None,
        }
    }

    pub(crate) fn set_on_release(&mut self, f: impl FnOnce() + Send + Sync + 'static) {
        self.on_release = Some(Box::new(f));
    }

    /// The fencing token: the lock node's sequence number (for [`super::SimpleLock`], the node's
    /// `czxid`). It grows with every acquisition of the same lock, so a resource that remembers
    /// the highest token it has seen can refuse a stale holder.
    pub fn fencing_token(&self) -> i64 {
        self.sequence
    }

    /// Full path of the lock node.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Session generation the lock was taken in.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The lost-signal: cancelled when the lock can no longer be assumed held: session `Lost`
    /// (or replaced), `Suspended` when [`LockOptions::suspended_is_lost`], the node deleted, or
    /// (lease locks) the maximum locked time reached. It never un-fires; `token.cancelled()`
    /// is a future to `select!` on.
    pub fn lost(&self) -> CancellationToken {
        self.lost.clone()
    }

    /// True once the lost-signal fired.
    pub fn is_lost(&self) -> bool {
        self.lost.is_cancelled()
    }

    /// Cancelled when another process asked this holder to release (Curator's revocation:
    /// `__REVOKE__` written into the lock node). Only [`super::RevocableMutex`] users need it.
    pub fn revocation_requested(&self) -> CancellationToken {
        self.revoke.clone()
    }

    /// Releases the lock now: deletes the node, retrying recoverable errors per the default
    /// policy.
    ///
    /// # Errors
    /// The error that made the delete give up; the node is then deleted in the background (or
    /// goes with its session / TTL).
    pub async fn release(mut self) -> Result<()> {
        self.released = true;
        self.stop_monitor.cancel();
        if let Some(hook) = self.on_release.take() {
            hook();
        }
        let delete = delete_node(&self.session, &self.path, &self.cleanup);
        let result = if self.session_bound {
            // Once the node's session is lost (or replaced, or closed), the server deletes the
            // node with it. A delete sent on that session would wait for a reconnect that may
            // never come (the client keeps requests made while disconnected and sends them
            // after reconnecting, as Apache's ClientCnxn does), so it is not waited for.
            tokio::select! {
                result = delete => result,
                () = session_ended(&self.session, self.generation) => Ok(()),
            }
        } else {
            delete.await
        };
        if result.is_err() {
            self.spawn_cleanup();
        }
        result
    }

    /// Releases the lock without waiting for the server's reply. Another contender can take
    /// the lock as soon as the delete is applied, exactly as with [`LockGuard::release`]; stop
    /// using the protected resource before calling it.
    ///
    /// For a [`super::Mutex`], the delete waits at most one scheduling turn of the tokio runtime
    /// for the next `lock()` on the same mutex object (or a clone): if that comes first (a loop
    /// that takes the lock again at once), the delete and the next create travel as one
    /// transaction, one write instead of two; otherwise a spawned task sends the delete. For the
    /// other locks the delete is written to the connection before this returns, so any later
    /// request of this session is processed after it.
    ///
    /// If the delete fails (connection loss), a background task deletes the node by its
    /// protected UUID, retrying across reconnects until it is gone, the session is closed, or the
    /// session expires (which removes an ephemeral node anyway). Dropping the guard does the same.
    /// Use [`LockGuard::release`] to learn whether the delete succeeded.
    pub fn release_in_background(mut self) {
        self.released = true;
        self.stop_monitor.cancel();
        if let Some(hook) = self.on_release.take() {
            hook();
        }
        self.release_soon();
    }

    /// The background release of [`LockGuard::release_in_background`] and of `Drop`: parked in
    /// the lock's [`ReleaseSlot`] for the next acquisition when there is one, else sent now.
    fn release_soon(&self) {
        let Cleanup::ByUuid { parent, uuid } = &self.cleanup else {
            // SimpleLock checks the owner first: no blind delete.
            return self.spawn_cleanup();
        };
        let runtime = tokio::runtime::Handle::try_current();
        if let (Some(slot), Ok(runtime)) = (&self.release_slot, &runtime) {
            let pending = PendingRelease {
                path: self.path.clone(),
                parent: parent.clone(),
                uuid: uuid.clone(),
                generation: self.generation,
            };
            if slot.put(pending).is_ok() {
                let (slot, session, uuid) = (slot.clone(), self.session.clone(), uuid.clone());
                runtime.spawn(async move {
                    if let Some(p) = slot.take_if(&uuid) {
                        send_delete(&session, &p.path, &p.parent, &p.uuid);
                    }
                });
                return;
            }
        }
        send_delete(&self.session, &self.path, parent, uuid);
    }

    fn spawn_cleanup(&self) {
        match &self.cleanup {
            Cleanup::ByUuid { parent, uuid } => spawn_orphan_cleanup(&self.session, parent, uuid),
            Cleanup::ByPath { .. } => {
                let Ok(runtime) = tokio::runtime::Handle::try_current() else {
                    return;
                };
                let session = self.session.clone();
                let path = self.path.clone();
                let cleanup = self.cleanup.clone();
                runtime.spawn(async move {
                    let _ = delete_node(&session, &path, &cleanup).await;
                });
            }
        }
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if !self.released {
            self.stop_monitor.cancel();
            if let Some(hook) = self.on_release.take() {
                hook();
            }
            self.release_soon();
        }
    }
}

/// Sends the delete of a protected lock node now and, if it fails (connection loss), deletes
/// the node by its UUID in the background, across reconnects.
fn send_delete(session: &Session, path: &str, parent: &str, uuid: &str) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        tracing::warn!(%path, "no tokio runtime: lock node left to its session");
        return;
    };
    // zkit-client sends the request at call time; the returned future only waits for the
    // reply, so it may be awaited elsewhere.
    let reply = session.client().delete(path, None);
    let session = session.clone();
    let (parent, uuid, path) = (parent.to_string(), uuid.to_string(), path.to_string());
    runtime.spawn(async move {
        match reply.await {
            Ok(()) | Err(zk::Error::NoNode) => {}
            Err(err) => {
                tracing::debug!(%path, error = %err, "background release failed; cleaning up by uuid");
                spawn_orphan_cleanup(&session, &parent, &uuid);
            }
        }
    });
}

/// Deletes a guard's node (NoNode is success).
async fn delete_node(session: &Session, path: &str, cleanup: &Cleanup) -> Result<()> {
    let policy = RetryPolicy::default();
    match cleanup {
        Cleanup::ByUuid { .. } => {
            crate::retry(&policy, || async {
                match session.client().delete(path, None).await {
                    Ok(()) | Err(zk::Error::NoNode) => Ok(()),
                    Err(err) => Err(err),
                }
            })
            .await
        }
        Cleanup::ByPath { owner } => {
            crate::retry(&policy, || async {
                let client = session.client();
                match client.check_stat(path).await? {
                    Some(stat) if stat.ephemeral_owner == *owner => {
                        match client.delete(path, Some(stat.version)).await {
                            Ok(()) | Err(zk::Error::NoNode) => Ok(()),
                            Err(err) => Err(err),
                        }
                    }
                    // Gone, or someone else's now.
                    _ => Ok(()),
                }
            })
            .await
        }
    }
}

/// Resolves once the session of `generation` is gone: lost, replaced by a new one, or closed.
async fn session_ended(session: &Session, generation: u64) {
    let mut state = session.watch_state();
    loop {
        let event = *state.borrow_and_update();
        if event.generation != generation
            || matches!(event.state, SessionState::Lost | SessionState::Closed)
        {
            return;
        }
        if state.changed().await.is_err() {
            return;
        }
    }
}

struct Monitor {
    session: Session,
    path: String,
    generation: u64,
    /// Ephemeral node: the lock lives and dies with the session.
    session_bound: bool,
    suspended_is_lost: bool,
    lease_deadline: Option<Instant>,
    lost: CancellationToken,
    revoke: CancellationToken,
    stop: CancellationToken,
}

/// Fires the lost-signal (and the revocation request) of one guard; ends on release.
async fn monitor(m: Monitor) {
    let mut state_rx = m.session.watch_state();
    let far_future = Instant::now() + Duration::from_secs(86_400 * 365);
    let lease_deadline = m.lease_deadline.unwrap_or(far_future);
    let lost = |why: &str| {
        tracing::warn!(path = %m.path, why, "lock lost");
        m.lost.cancel();
    };
    loop {
        if m.stop.is_cancelled() {
            // Released before we armed anything (a short critical section): nothing to watch.
            return;
        }
        let event = *state_rx.borrow_and_update();
        if m.session_bound && event.generation != m.generation {
            return lost("session replaced");
        }
        match event.state {
            SessionState::Lost if m.session_bound => return lost("session lost"),
            SessionState::Suspended if m.session_bound && m.suspended_is_lost => {
                return lost("connection suspended")
            }
            SessionState::Closed => return lost("session closed"),
            _ => {}
        }
        let watched = if event.state.is_connected() {
            let client = m.session.client();
            match client.get_and_watch_data(&m.path).await {
                Ok((data, _, watcher)) => {
                    if data == REVOKE_MESSAGE {
                        m.revoke.cancel();
                    }
                    Some(watcher)
                }
                // Our own release may have raced the read; that is not a loss.
                Err(zk::Error::NoNode) if m.stop.is_cancelled() => return,
                Err(zk::Error::NoNode) => return lost("lock node deleted"),
                Err(_) => None,
            }
        } else {
            None
        };
        let connected = event.state.is_connected();
        let node_event = async {
            match watched {
                Some(watcher) => Some(watcher.changed().await),
                // A recoverable error while connected: try to re-arm the watch shortly.
                None if connected => {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    None
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = m.stop.cancelled() => return,
            _ = tokio::time::sleep_until(lease_deadline) => return lost("maximum locked time reached"),
            changed = state_rx.changed() => {
                if changed.is_err() {
                    return lost("session dropped");
                }
            }
            event = node_event => {
                if let Some(event) = event {
                    if event.event_type == zk::EventType::NodeDeleted {
                        return lost("lock node deleted");
                    }
                }
            }
        }
    }
}
