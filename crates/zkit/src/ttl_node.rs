//! [`PersistentTtlNode`]: a node that lives while its owner lives, without depending on one
//! session (Curator's `PersistentTtlNode`): a TTL node that the owner keeps alive by touching a
//! TTL child, and that the server deletes once the owner has been gone for the TTL.
//!
//! The layout is Curator's: the node `path` is a `PERSISTENT_WITH_TTL` node holding the data;
//! its child `path/touch` (Curator's `DEFAULT_CHILD_NODE_NAME`) is a TTL node too, written every
//! `ttl / 2` (`DEFAULT_TOUCH_SCHEDULE_FACTOR`). ZooKeeper's TTL reaper deletes a TTL node only
//! when it has no children and has not been modified for its TTL, so while the child is touched
//! the parent stays; when the owner stops (crash, partition, [`PersistentTtlNode::close`]), the
//! child expires after the TTL and then the parent. Unlike an ephemeral node, it survives the
//! owner's session loss and reconnects (the touching continues on the next session), so it
//! suits "registered for as long as I am running" across flaky connections.
//!
//! Starting on an existing node (another owner's, a zkit or a Curator one) takes it over: its
//! data is set to this owner's, as Curator's `PersistentNode` does when its create finds the
//! node there (and again on every reconnection or re-creation), and both owners' touches of
//! the shared child keep it alive.
//!
//! As in Curator, closing does not delete the node: it expires. The node is created again when
//! it is missing (a reaper that ran during a long partition, someone deleting it).
//!
//! Needs TTL support: Apache ZooKeeper with `zookeeper.extendedTypesEnabled=true`; otherwise
//! the first create fails with [`Error::Unimplemented`] saying so. The reaper runs every
//! `znode.container.checkIntervalMs` (Apache default 60 s), which adds to the expiry time.
//!
//! ```no_run
//! # async fn demo(session: zkit::Session) -> zkit::Result<()> {
//! use std::time::Duration;
//! use zkit::ttl_node::PersistentTtlNode;
//! let node = PersistentTtlNode::start(&session, "/live/host-7", Duration::from_secs(30), b"up")?;
//! node.wait_for_initial_create(Duration::from_secs(5)).await?;
//! // ... gone ~30 s (plus a reaper interval) after this process stops touching it ...
//! node.close().await;
//! # Ok(()) }
//! ```

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use zkit_client as zk;

use crate::error::{Error, Result};
use crate::protected::join;
use crate::session::Session;

/// Curator's `PersistentTtlNode.DEFAULT_CHILD_NODE_NAME`.
pub const DEFAULT_CHILD_NODE_NAME: &str = "touch";
/// Curator's `PersistentTtlNode.DEFAULT_TOUCH_SCHEDULE_FACTOR`: touches per TTL.
pub const DEFAULT_TOUCH_SCHEDULE_FACTOR: u32 = 2;

struct Inner {
    session: Session,
    path: String,
    child: String,
    ttl: Duration,
    interval: Duration,
    data: watch::Sender<Vec<u8>>,
    present: watch::Sender<bool>,
    cancel: CancellationToken,
}

/// A TTL node kept alive by touching a child. See the module docs.
pub struct PersistentTtlNode {
    inner: Arc<Inner>,
    task: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for PersistentTtlNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PersistentTtlNode")
            .field("path", &self.inner.path)
            .field("ttl", &self.inner.ttl)
            .field("present", &*self.inner.present.borrow())
            .finish()
    }
}

impl PersistentTtlNode {
    /// Keeps `path` alive with `data` and Curator's defaults (child `touch`, two touches per
    /// TTL).
    ///
    /// # Errors
    /// [`Error::BadArguments`] for an invalid path or a TTL under 2 ms.
    pub fn start(session: &Session, path: &str, ttl: Duration, data: &[u8]) -> Result<Self> {
        PersistentTtlNode::with_options(
            session,
            path,
            ttl,
            data,
            DEFAULT_CHILD_NODE_NAME,
            DEFAULT_TOUCH_SCHEDULE_FACTOR,
        )
    }

    /// As [`PersistentTtlNode::start`] with Curator's `childNodeName` and
    /// `touchScheduleFactor`.
    ///
    /// # Errors
    /// [`Error::BadArguments`] for an invalid path or child name, a factor of 0, or a touch
    /// interval (`ttl / factor`) under 1 ms.
    pub fn with_options(
        session: &Session,
        path: &str,
        ttl: Duration,
        data: &[u8],
        child_name: &str,
        touch_factor: u32,
    ) -> Result<Self> {
        let path = crate::config::resolve_key("/", path)?;
        if child_name.is_empty() || child_name.contains('/') {
            return Err(Error::BadArguments(format!(
                "invalid child name {child_name:?}"
            )));
        }
        let interval = ttl
            .checked_div(touch_factor)
            .filter(|i| *i >= Duration::from_millis(1))
            .ok_or_else(|| {
                Error::BadArguments("touch interval (ttl / factor) under 1 ms".into())
            })?;
        let (data, _) = watch::channel(data.to_vec());
        let (present, _) = watch::channel(false);
        let inner = Arc::new(Inner {
            session: session.clone(),
            child: join(&path, child_name),
            path,
            ttl,
            interval,
            data,
            present,
            cancel: CancellationToken::new(),
        });
        let task = tokio::spawn(run(Arc::clone(&inner)));
        Ok(PersistentTtlNode {
            inner,
            task: Some(task),
        })
    }

    /// The node's path.
    pub fn path(&self) -> &str {
        &self.inner.path
    }

    /// Waits until the node has been created (or found), at most `timeout` (Curator's
    /// `waitForInitialCreate`).
    ///
    /// # Errors
    /// [`Error::Timeout`].
    pub async fn wait_for_initial_create(&self, timeout: Duration) -> Result<()> {
        let mut present = self.inner.present.subscribe();
        let waited = tokio::time::timeout(timeout, present.wait_for(|p| *p)).await;
        match waited {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(_)) => Err(Error::Closed),
            Err(_) => Err(Error::Timeout(timeout)),
        }
    }

    /// True while the node is known to be in place.
    pub fn is_present(&self) -> bool {
        *self.inner.present.borrow()
    }

    /// The data kept in the node.
    pub fn data(&self) -> Vec<u8> {
        self.inner.data.borrow().clone()
    }

    /// Sets the node's data (now, and when it is created again).
    ///
    /// # Errors
    /// ZooKeeper errors of the write ([`Error::NoNode`] is not one: the task creates it with
    /// the new data).
    pub async fn set_data(&self, data: &[u8]) -> Result<()> {
        self.inner.data.send_replace(data.to_vec());
        match self
            .inner
            .session
            .client()
            .set_data(&self.inner.path, data, None)
            .await
        {
            Ok(_) | Err(zk::Error::NoNode) => Ok(()),
            Err(err) => Err(err.into()),
        }
    }

    /// Stops touching. The node is not deleted: it expires a TTL later (Curator's `close`).
    pub async fn close(mut self) {
        self.inner.cancel.cancel();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for PersistentTtlNode {
    fn drop(&mut self) {
        self.inner.cancel.cancel();
    }
}

fn ttl_options(ttl: Duration) -> zk::CreateOptions<'static> {
    zk::CreateMode::Persistent
        .with_acls(zk::Acls::anyone_all())
        .with_ttl(ttl)
}

fn unimplemented_explained(err: zk::Error) -> Error {
    match err {
        zk::Error::Unimplemented => Error::Unimplemented(
            "TTL nodes are disabled on this server (zookeeper.extendedTypesEnabled=true)".into(),
        ),
        other => other.into(),
    }
}

/// Makes sure the node exists (creating it and its parents), then touches the child.
/// One pass: create the node when missing; on a node this owner did not create (or has not
/// yet claimed since it started or reconnected), set its data first, as Curator's
/// `PersistentNode` does when its create finds the node existing; then touch the child.
async fn round(inner: &Inner, claimed: &mut bool) -> Result<Option<zk::OneshotWatcher>> {
    let client = inner.session.client();
    let (stat, watcher) = client.check_and_watch_stat(&inner.path).await?;
    if stat.is_none() {
        *claimed = false;
        let data = inner.data.borrow().clone();
        match client
            .create(&inner.path, &data, &ttl_options(inner.ttl))
            .await
        {
            Ok(_) => *claimed = true,
            Err(zk::Error::NodeExists) => {}
            Err(zk::Error::NoNode) => {
                if let Some((parent, _)) = inner.path.rsplit_once('/') {
                    crate::discovery::make_parents(&client, parent).await?;
                }
                return Ok(None);
            }
            Err(err) => return Err(unimplemented_explained(err)),
        }
        // Decide again with a watch on the node now in place.
        return Ok(None);
    }
    if !*claimed {
        let data = inner.data.borrow().clone();
        match client.set_data(&inner.path, &data, None).await {
            Ok(_) => *claimed = true,
            // Gone since the check: the watch tells, and the next round creates it.
            Err(zk::Error::NoNode) => return Ok(Some(watcher)),
            Err(err) => return Err(err.into()),
        }
    }
    // Curator's `touch`: set the child's data; create it (a TTL node) when missing.
    match client.set_data(&inner.child, &[], None).await {
        Ok(_) => {}
        Err(zk::Error::NoNode) => match client
            .create(&inner.child, &[], &ttl_options(inner.ttl))
            .await
        {
            // NoNode: the parent went between the two calls; the watch tells.
            Ok(_) | Err(zk::Error::NodeExists | zk::Error::NoNode) => {}
            Err(err) => return Err(unimplemented_explained(err)),
        },
        Err(err) => return Err(err.into()),
    }
    inner.present.send_replace(true);
    Ok(Some(watcher))
}

async fn run(inner: Arc<Inner>) {
    let mut state = inner.session.watch_state();
    let mut next_touch = tokio::time::Instant::now();
    // Whether the node holds this owner's data: it created the node, or set its data on the
    // one it found. Cleared on every session change, as Curator's `PersistentNode` creates
    // (or, finding it, sets) the node again on reconnection.
    let mut claimed = false;
    loop {
        let connected = tokio::select! {
            () = inner.cancel.cancelled() => return,
            c = inner.session.wait_connected() => c,
        };
        if connected.is_err() {
            return;
        }
        state.mark_unchanged();
        let outcome = tokio::select! {
            () = inner.cancel.cancelled() => return,
            r = round(&inner, &mut claimed) => r,
        };
        match outcome {
            Ok(Some(watcher)) => {
                next_touch += inner.interval;
                let now = tokio::time::Instant::now();
                if next_touch < now {
                    next_touch = now + inner.interval;
                }
                tokio::select! {
                    () = inner.cancel.cancelled() => return,
                    () = tokio::time::sleep_until(next_touch) => {}
                    // Deleted (or data changed): look now rather than at the next touch.
                    _ = watcher.changed() => {}
                    _ = state.changed() => claimed = false,
                }
            }
            Ok(None) => {}
            Err(Error::Closed) => return,
            Err(err) => {
                inner.present.send_replace(false);
                tracing::debug!(path = %inner.path, error = %err, "ttl node retrying");
                tokio::select! {
                    () = inner.cancel.cancelled() => return,
                    () = tokio::time::sleep(Duration::from_millis(200).min(inner.interval)) => {}
                    _ = state.changed() => claimed = false,
                }
            }
        }
    }
}
