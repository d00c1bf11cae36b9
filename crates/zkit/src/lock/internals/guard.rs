//! The held lock ([`LockGuard`]) and the monitor task that drives its lost-signal.

use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use zkit_client as zk;

use super::release::{
    delete_node, send_delete, session_ended, Cleanup, PendingRelease, ReleaseSlot,
};
use super::REVOKE_MESSAGE;
use crate::error::Result;
use crate::protected::{spawn_orphan_cleanup, CreatedNode};
use crate::session::{Session, SessionState};

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
    pub(super) release_slot: Option<ReleaseSlot>,
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

    /// The fencing token: the lock node's sequence number (for [`crate::lock::SimpleLock`], the node's
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
    /// (or replaced), the node deleted, or (lease locks) the maximum locked time reached. A
    /// `Suspended` session does not fire it: the session layer declares `Lost` when the
    /// session's validity deadline ([`LockGuard::valid_until`]) passes without a reconnect. It never un-fires; `token.cancelled()`
    /// is a future to `select!` on.
    pub fn lost(&self) -> CancellationToken {
        self.lost.clone()
    }

    /// Until when this lock provably stays ours, for a lock on an ephemeral node: the validity
    /// deadline of the session it was taken in ([`Session::valid_until_for`]). `None` once the
    /// lost-signal fired or that session is gone, and for locks not bound to a session (TTL
    /// leases).
    pub fn valid_until(&self) -> Option<Instant> {
        if !self.session_bound || self.lost.is_cancelled() {
            return None;
        }
        self.session.valid_until_for(self.generation)
    }

    /// True once the lost-signal fired.
    pub fn is_lost(&self) -> bool {
        self.lost.is_cancelled()
    }

    /// Cancelled when another process asked this holder to release (Curator's revocation:
    /// `__REVOKE__` written into the lock node). Only [`crate::lock::RevocableMutex`] users need it.
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
            // Checked first: the session layer ends a lost session's client as expired, and the
            // delete on it then fails at once with `SessionExpired`, which is no failure of the
            // release.
            tokio::select! {
                biased;
                () = session_ended(&self.session, self.generation) => Ok(()),
                result = delete => result,
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
    /// For a [`crate::lock::Mutex`], the delete waits at most one scheduling turn of the tokio runtime
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

struct Monitor {
    session: Session,
    path: String,
    generation: u64,
    /// Ephemeral node: the lock lives and dies with the session.
    session_bound: bool,
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
        // Suspended keeps the lock: the session layer declares Lost when the session's
        // validity deadline passes (see `crate::session`), which is when it may end.
        if m.session_bound && event.generation != m.generation {
            return lost("session replaced");
        }
        match event.state {
            SessionState::Lost if m.session_bound => return lost("session lost"),
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
