//! Releasing a lock node: at once, or parked for one scheduling turn so that the next
//! acquisition deletes it in the same transaction, and in the background across reconnects.

use std::sync::Arc;

use zkit_client as zk;

use crate::error::Result;
use crate::protected::spawn_orphan_cleanup;
use crate::retry::RetryPolicy;
use crate::session::{Session, SessionState};

/// A lock node released in the background and not deleted yet.
#[derive(Debug)]
pub(super) struct PendingRelease {
    pub(super) path: String,
    pub(super) parent: String,
    pub(super) uuid: String,
    pub(super) generation: u64,
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
    pub(super) fn put(&self, pending: PendingRelease) -> std::result::Result<(), PendingRelease> {
        let mut slot = self.lock();
        if slot.is_some() {
            return Err(pending);
        }
        *slot = Some(pending);
        Ok(())
    }

    /// The waiting release, if it is the one made with `uuid`.
    pub(super) fn take_if(&self, uuid: &str) -> Option<PendingRelease> {
        let mut slot = self.lock();
        if slot.as_ref().is_some_and(|p| p.uuid == uuid) {
            slot.take()
        } else {
            None
        }
    }

    pub(super) fn take(&self) -> Option<PendingRelease> {
        self.lock().take()
    }
}

/// Owns the deletion of a release taken out of the slot: deletes the node in the background
/// when dropped armed (the fused transaction failed, or the attempt was cancelled).
pub(super) struct TakenRelease<'a> {
    pub(super) session: &'a Session,
    pub(super) pending: PendingRelease,
    pub(super) armed: bool,
}

impl Drop for TakenRelease<'_> {
    fn drop(&mut self) {
        if self.armed {
            let p = &self.pending;
            send_delete(self.session, &p.path, &p.parent, &p.uuid);
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

/// Sends the delete of a protected lock node now and, if it fails (connection loss), deletes
/// the node by its UUID in the background, across reconnects.
pub(super) fn send_delete(session: &Session, path: &str, parent: &str, uuid: &str) {
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
pub(super) async fn delete_node(session: &Session, path: &str, cleanup: &Cleanup) -> Result<()> {
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
pub(super) async fn session_ended(session: &Session, generation: u64) {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn pending(uuid: &str) -> PendingRelease {
        PendingRelease {
            path: format!("/l/_c_{uuid}-lock-0000000001"),
            parent: "/l".to_string(),
            uuid: uuid.to_string(),
            generation: 1,
        }
    }

    #[test]
    fn release_slot_holds_one_release_and_gives_back_a_second() {
        let slot = ReleaseSlot::default();
        assert!(slot.put(pending("a")).is_ok());
        let refused = slot.put(pending("b")).expect_err("slot is taken");
        assert_eq!(refused.uuid, "b");
        // Only the release that was parked can be taken by its own uuid.
        assert!(slot.take_if("b").is_none());
        assert_eq!(slot.take_if("a").map(|p| p.uuid).as_deref(), Some("a"));
        assert!(slot.take().is_none());
    }

    #[test]
    fn release_slot_take_empties_it_for_the_next_release() {
        let slot = ReleaseSlot::default();
        slot.put(pending("a")).expect("empty slot");
        let clone = slot.clone();
        assert_eq!(clone.take().map(|p| p.uuid).as_deref(), Some("a"));
        // The spawned deleter of "a" finds nothing: the acquisition owns the delete now.
        assert!(slot.take_if("a").is_none());
        assert!(slot.put(pending("b")).is_ok());
    }
}
