//! Barriers: [`Barrier`] (Curator's `DistributedBarrier`: everyone waits while a node exists)
//! and [`DoubleBarrier`] (Curator's `DistributedDoubleBarrier`: `n` members enter together and
//! leave together).
//!
//! Every wait re-reads the tree after waking up, whatever woke it: a watch can fire for a
//! change that is already undone, or a session event can wake it (Curator GH-1290, where the
//! double barrier returned early on such a spurious wake-up). The decisions are pure functions
//! ([`enter_ready`], [`leave_step`]) unit-tested without a server.

use tokio::sync::watch;
use zkit_client as zk;

use crate::error::{Error, Result};
use crate::protected::join;
use crate::session::{Session, SessionEvent};

/// The node whose existence releases the members of a double barrier (Curator's name).
pub const READY_NODE: &str = "ready";

fn persistent() -> zk::CreateOptions<'static> {
    zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all())
}

/// Waits for `watcher` or a session state change (after which the caller re-reads).
async fn wait_wakeup(
    watcher: zk::OneshotWatcher,
    state: &mut watch::Receiver<SessionEvent>,
) -> Result<()> {
    tokio::select! {
        _ = watcher.changed() => Ok(()),
        changed = state.changed() => changed.map_err(|_| Error::Closed),
    }
}

/// Curator's `DistributedBarrier`: [`Barrier::set`] raises it, [`Barrier::wait`] blocks while it
/// is up, [`Barrier::remove`] lowers it.
#[derive(Debug, Clone)]
pub struct Barrier {
    session: Session,
    path: String,
}

impl Barrier {
    /// A barrier at `path`.
    ///
    /// # Errors
    /// [`Error::BadArguments`] for an invalid path.
    pub fn new(session: &Session, path: &str) -> Result<Self> {
        Ok(Barrier {
            session: session.clone(),
            path: crate::config::resolve_key("/", path)?,
        })
    }

    /// Raises the barrier (creates the node; already raised is fine).
    ///
    /// # Errors
    /// ZooKeeper errors.
    pub async fn set(&self) -> Result<()> {
        let client = self.session.client();
        match client.create(&self.path, b"", &persistent()).await {
            Ok(_) | Err(zk::Error::NodeExists) => Ok(()),
            Err(zk::Error::NoNode) => {
                client.mkdir(&self.path, &persistent()).await?;
                Ok(())
            }
            Err(err) => Err(err.into()),
        }
    }

    /// Lowers the barrier (deletes the node; already lowered is fine).
    ///
    /// # Errors
    /// ZooKeeper errors.
    pub async fn remove(&self) -> Result<()> {
        match self.session.client().delete(&self.path, None).await {
            Ok(()) | Err(zk::Error::NoNode) => Ok(()),
            Err(err) => Err(err.into()),
        }
    }

    /// Waits while the barrier is up.
    ///
    /// # Errors
    /// ZooKeeper errors, [`Error::Closed`].
    ///
    /// # Cancellation safety
    /// Cancel-safe.
    pub async fn wait(&self) -> Result<()> {
        let mut state = self.session.watch_state();
        loop {
            self.session.wait_connected().await?;
            let (stat, watcher) = match self.session.client().check_and_watch_stat(&self.path).await
            {
                Ok(r) => r,
                Err(err) if Error::from(err.clone()).is_recoverable() => continue,
                Err(err) => return Err(err.into()),
            };
            if stat.is_none() {
                return Ok(());
            }
            wait_wakeup(watcher, &mut state).await?;
        }
    }
}

/// Enter rule: the members present (children other than [`READY_NODE`]) reach `n`.
pub fn enter_ready<S: AsRef<str>>(children: &[S], n: usize) -> bool {
    children.iter().filter(|c| c.as_ref() != READY_NODE).count() >= n
}

/// One step of leaving a double barrier (Curator's `internalLeave`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaveStep {
    /// Nobody is left (our node included): done.
    Done,
    /// Only our node is left: delete it, done.
    DeleteMineAndDone,
    /// We are the lowest: wait until the highest member leaves, then decide again.
    WaitFor(String),
    /// We are not the lowest: delete our node and wait until the lowest leaves.
    DeleteMineAndWaitFor(String),
}

/// Decides one step of leaving for `mine` among `children` (names sort as Curator sorts them).
pub fn leave_step<S: AsRef<str>>(mine: &str, children: &[S]) -> LeaveStep {
    let mut members: Vec<&str> = children
        .iter()
        .map(AsRef::as_ref)
        .filter(|c| *c != READY_NODE)
        .collect();
    members.sort_unstable();
    let Some(lowest) = members.first().copied() else {
        return LeaveStep::Done;
    };
    let present = members.contains(&mine);
    if members.len() == 1 && present {
        return LeaveStep::DeleteMineAndDone;
    }
    if !present {
        // Already deleted ours: wait for the others to go (the lowest is enough).
        return LeaveStep::WaitFor(lowest.to_string());
    }
    if lowest == mine {
        let highest = members.last().copied().unwrap_or(mine);
        LeaveStep::WaitFor(highest.to_string())
    } else {
        LeaveStep::DeleteMineAndWaitFor(lowest.to_string())
    }
}

/// Curator's `DistributedDoubleBarrier` for `n` members.
#[derive(Debug, Clone)]
pub struct DoubleBarrier {
    session: Session,
    path: String,
    n: usize,
    name: String,
}

impl DoubleBarrier {
    /// A double barrier at `path` for `n` members; this member's node is a fresh UUID.
    ///
    /// # Errors
    /// [`Error::BadArguments`] for an invalid path or `n == 0`.
    pub fn new(session: &Session, path: &str, n: usize) -> Result<Self> {
        if n == 0 {
            return Err(Error::BadArguments("a double barrier needs n >= 1".into()));
        }
        Ok(DoubleBarrier {
            session: session.clone(),
            path: crate::config::resolve_key("/", path)?,
            n,
            name: uuid::Uuid::new_v4().to_string(),
        })
    }

    fn my_path(&self) -> String {
        join(&self.path, &self.name)
    }

    /// Enters: registers this member (ephemeral node) and waits until `n` members are in.
    ///
    /// # Errors
    /// ZooKeeper errors; [`Error::SessionLost`] if the session is replaced while waiting (our
    /// ephemeral node went with it).
    pub async fn enter(&self) -> Result<()> {
        let client = self.session.client();
        let generation = self.session.generation();
        client.mkdir(&self.path, &persistent()).await?;
        match client
            .create(
                &self.my_path(),
                b"",
                &zk::CreateMode::Ephemeral.with_acls(zk::Acls::anyone_all()),
            )
            .await
        {
            Ok(_) | Err(zk::Error::NodeExists) => {}
            Err(err) => return Err(err.into()),
        }
        let ready = join(&self.path, READY_NODE);
        let mut state = self.session.watch_state();
        loop {
            if self.session.generation() != generation {
                return Err(Error::SessionLost);
            }
            let (stat, watcher) = client.check_and_watch_stat(&ready).await?;
            if stat.is_some() {
                return Ok(());
            }
            let children = client.list_children(&self.path).await?;
            if enter_ready(&children, self.n) {
                match client.create(&ready, b"", &persistent()).await {
                    Ok(_) | Err(zk::Error::NodeExists) => return Ok(()),
                    Err(err) => return Err(err.into()),
                }
            }
            wait_wakeup(watcher, &mut state).await?;
        }
    }

    /// Leaves: waits until every member has left (Curator's algorithm; see [`leave_step`]).
    /// The last one out deletes the ready node.
    ///
    /// # Errors
    /// ZooKeeper errors.
    pub async fn leave(&self) -> Result<()> {
        let client = self.session.client();
        let mut state = self.session.watch_state();
        loop {
            let children = match client.list_children(&self.path).await {
                Ok(c) => c,
                Err(zk::Error::NoNode) => return Ok(()),
                Err(err) => return Err(err.into()),
            };
            let step = leave_step(&self.name, &children);
            let wait_for = match step {
                LeaveStep::Done => None,
                LeaveStep::DeleteMineAndDone => {
                    delete_if_exists(&client, &self.my_path()).await?;
                    None
                }
                LeaveStep::WaitFor(other) => Some(other),
                LeaveStep::DeleteMineAndWaitFor(other) => {
                    delete_if_exists(&client, &self.my_path()).await?;
                    Some(other)
                }
            };
            let Some(other) = wait_for else {
                delete_if_exists(&client, &join(&self.path, READY_NODE)).await?;
                return Ok(());
            };
            let (stat, watcher) = client
                .check_and_watch_stat(&join(&self.path, &other))
                .await?;
            if stat.is_some() {
                wait_wakeup(watcher, &mut state).await?;
            }
        }
    }
}

async fn delete_if_exists(client: &zk::Client, path: &str) -> Result<()> {
    match client.delete(path, None).await {
        Ok(()) | Err(zk::Error::NoNode) => Ok(()),
        Err(err) => Err(err.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enter_counts_members_not_the_ready_node() {
        assert!(!enter_ready(&["a", "ready"], 2));
        assert!(enter_ready(&["a", "b"], 2));
        assert!(enter_ready(&["a", "b", "c"], 2));
    }

    #[test]
    fn leave_follows_curators_lowest_highest_rule() {
        assert_eq!(leave_step("a", &[] as &[&str]), LeaveStep::Done);
        assert_eq!(leave_step("a", &["ready"]), LeaveStep::Done);
        assert_eq!(
            leave_step("a", &["a", "ready"]),
            LeaveStep::DeleteMineAndDone
        );
        assert_eq!(
            leave_step("a", &["c", "a", "b"]),
            LeaveStep::WaitFor("c".into())
        );
        assert_eq!(
            leave_step("b", &["c", "a", "b"]),
            LeaveStep::DeleteMineAndWaitFor("a".into())
        );
        // Ours already gone but others remain: not done yet (no early return, GH-1290).
        assert_eq!(leave_step("b", &["a", "c"]), LeaveStep::WaitFor("a".into()));
    }
}
