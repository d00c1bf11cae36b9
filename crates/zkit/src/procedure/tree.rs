//! Small tree operations the coordinator and members share: creating the directories, deleting
//! an instance subtree (retrying `NotEmpty`), and waiting on a set of one-shot watches.
//!
//! It must not decide anything: decisions are in [`super::decide`].

use std::collections::HashMap;
use std::time::Duration;

use futures::future::{select_all, BoxFuture, FutureExt};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use zkit_client as zk;

use super::layout::Layout;

/// How often a subtree delete re-lists after `NotEmpty` before giving up. Each retry means a
/// member created a child in between; members never create parents, so this converges fast.
const DELETE_ATTEMPTS: usize = 64;

/// Creates `acquired`, `reached`, `abort`, `members` and `running` (and their ancestors).
pub async fn ensure_dirs(client: &zk::Client, layout: &Layout) -> Result<(), zk::Error> {
    let options = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
    for dir in layout.dirs() {
        match client.mkdir(&dir, &options).await {
            Ok(()) | Err(zk::Error::NodeExists) => {}
            Err(err) => return Err(err),
        }
    }
    Ok(())
}

/// Deletes `path` and everything below it; a missing node is fine. `NotEmpty` (someone added a
/// child meanwhile) re-lists and tries again.
pub fn delete_tree<'a>(
    client: &'a zk::Client,
    path: &'a str,
) -> BoxFuture<'a, Result<(), zk::Error>> {
    async move {
        for _ in 0..DELETE_ATTEMPTS {
            let children = match client.list_children(path).await {
                Ok(children) => children,
                Err(zk::Error::NoNode) => return Ok(()),
                Err(err) => return Err(err),
            };
            for child in children {
                delete_tree(client, &format!("{path}/{child}")).await?;
            }
            match client.delete(path, None).await {
                Ok(()) | Err(zk::Error::NoNode) => return Ok(()),
                Err(zk::Error::NotEmpty) => continue,
                Err(err) => return Err(err),
            }
        }
        Err(zk::Error::NotEmpty)
    }
    .boxed()
}

/// Why [`wait_any`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wake {
    /// A watch fired (or the session state changed under it).
    Watch,
    /// The deadline passed.
    Deadline,
    /// The token was cancelled.
    Cancelled,
}

/// Waits until one of `watchers` fires, `deadline` passes or `cancel` is cancelled.
pub async fn wait_any(
    watchers: Vec<zk::OneshotWatcher>,
    deadline: Option<Instant>,
    cancel: &CancellationToken,
) -> Wake {
    let deadline_sleep = async {
        match deadline {
            Some(deadline) => tokio::time::sleep_until(deadline).await,
            None => std::future::pending().await,
        }
    };
    if watchers.is_empty() {
        return tokio::select! {
            _ = cancel.cancelled() => Wake::Cancelled,
            _ = deadline_sleep => Wake::Deadline,
        };
    }
    let fired = select_all(watchers.into_iter().map(|w| w.changed().boxed()));
    tokio::select! {
        _ = cancel.cancelled() => Wake::Cancelled,
        _ = deadline_sleep => Wake::Deadline,
        _ = fired => Wake::Watch,
    }
}

/// Sleep before re-reading after a recoverable error (connection loss): short, because the
/// session layer reconnects by itself and the next read waits for it.
pub const RECOVERABLE_PAUSE: Duration = Duration::from_millis(50);

/// Whether `err` is connection trouble on a session that may still live (connection loss, a
/// request or operation timeout, as on every member while an ensemble elects a new leader):
/// the operation is tried again, as Curator's `RetryLoop` does for `CONNECTIONLOSS`. Anything
/// else (the session expired or closed, an answer about the tree) ends it.
pub fn connection_trouble(err: &zk::Error) -> bool {
    crate::Error::from(err.clone()).is_recoverable()
}

/// Runs `op` until it ends with anything but [`connection_trouble`], [`RECOVERABLE_PAUSE`]
/// apart (the client queues requests while it reconnects, so an attempt waits for the next
/// connection rather than spinning). Only for operations that are idempotent or recognise their
/// own earlier success after a lost reply (`NodeExists` for a create, `NoNode` for a delete).
pub async fn retry_connection<T, F, Fut>(mut op: F) -> Result<T, zk::Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, zk::Error>>,
{
    loop {
        match op().await {
            Err(err) if connection_trouble(&err) => {
                tracing::debug!(error = %err, "procedure: retrying after connection trouble");
                tokio::time::sleep(RECOVERABLE_PAUSE).await;
            }
            other => return other,
        }
    }
}

/// One-shot watches kept armed across observation rounds, keyed by what they watch
/// (`"children:<path>"`, `"exists:<path>"`). A round re-reads an armed path without setting a
/// new watch; only fired watches are set again. Dropping an unfired watch would make the client
/// send a RemoveWatches request, and re-setting it every round doubles the traffic.
#[derive(Default)]
pub struct WatchSet {
    pending: HashMap<String, BoxFuture<'static, zk::WatchedEvent>>,
}

impl WatchSet {
    /// True when a watch for `key` is armed.
    pub fn armed(&self, key: &str) -> bool {
        self.pending.contains_key(key)
    }

    /// Keeps `watcher` as the watch for `key`.
    pub fn arm(&mut self, key: String, watcher: zk::OneshotWatcher) {
        self.pending.insert(key, watcher.changed().boxed());
    }

    /// Keeps `watcher`, when there is one, as the watch for `key`.
    pub fn arm_some(&mut self, key: String, watcher: Option<zk::OneshotWatcher>) {
        if let Some(watcher) = watcher {
            self.arm(key, watcher);
        }
    }

    /// The value of a read that was made (`Some`, see [`when`]), keeping its watch for `key`;
    /// `Ok(None)` for a read that was skipped.
    ///
    /// # Errors
    /// The read's error.
    pub fn keep<T>(
        &mut self,
        key: String,
        read: Option<Result<(T, Option<zk::OneshotWatcher>), zk::Error>>,
    ) -> Result<Option<T>, zk::Error> {
        let Some(read) = read else {
            return Ok(None);
        };
        let (value, watcher) = read?;
        self.arm_some(key, watcher);
        Ok(Some(value))
    }

    /// Removes every watch that has fired already, without waiting: afterwards, a key still
    /// armed means its node has not changed since it was read (ZooKeeper delivers a watch event
    /// before the reply to any later request), so a cached read of it is still current.
    pub fn drop_fired(&mut self) {
        let mut cx = std::task::Context::from_waker(futures::task::noop_waker_ref());
        self.pending
            .retain(|_, watch| watch.as_mut().poll(&mut cx).is_pending());
    }

    /// Whether a cached read of `key` must be redone: never read (`cached` false), or its watch
    /// is not armed (it fired, or could not be set).
    pub fn stale(&self, key: &str, cached: bool) -> bool {
        !cached || !self.armed(key)
    }

    /// Waits until at least one armed watch fires (removing every fired one), the deadline
    /// passes or `cancel` is cancelled.
    pub async fn wait(&mut self, deadline: Option<Instant>, cancel: &CancellationToken) -> Wake {
        let deadline_sleep = async {
            match deadline {
                Some(deadline) => tokio::time::sleep_until(deadline).await,
                None => std::future::pending().await,
            }
        };
        let pending = &mut self.pending;
        let fired = std::future::poll_fn(|cx| {
            let before = pending.len();
            pending.retain(|_, watch| watch.as_mut().poll(cx).is_pending());
            if pending.len() < before {
                std::task::Poll::Ready(())
            } else {
                std::task::Poll::Pending
            }
        });
        tokio::select! {
            _ = cancel.cancelled() => Wake::Cancelled,
            _ = deadline_sleep => Wake::Deadline,
            _ = fired => Wake::Watch,
        }
    }
}

/// The [`WatchSet`] key of a child watch on `path`.
pub fn children_key(path: &str) -> String {
    format!("children:{path}")
}

/// The [`WatchSet`] key of an exists watch on `path`.
pub fn exists_key(path: &str) -> String {
    format!("exists:{path}")
}

/// Children of `path` (`None` when it does not exist), setting a child watch when `watch`.
pub async fn list(
    client: &zk::Client,
    path: &str,
    watch: bool,
) -> Result<(Option<Vec<String>>, Option<zk::OneshotWatcher>), zk::Error> {
    let result = if watch {
        client
            .list_and_watch_children(path)
            .await
            .map(|(children, watcher)| (Some(children), Some(watcher)))
    } else {
        client
            .list_children(path)
            .await
            .map(|children| (Some(children), None))
    };
    match result {
        Err(zk::Error::NoNode) => Ok((None, None)),
        other => other,
    }
}

/// Runs `read` only when `needed` (a read whose watch has not fired is answered from the
/// cache); used inside `tokio::join!` so the reads that are needed go out pipelined.
pub async fn when<F: std::future::Future>(needed: bool, read: F) -> Option<F::Output> {
    if needed {
        Some(read.await)
    } else {
        None
    }
}

/// Whether `path` exists as the node created at `czxid`, setting an exists watch when `watch`.
/// A node deleted and created again under the same name is another node: it reads as absent.
pub async fn exists_created_at(
    client: &zk::Client,
    path: &str,
    czxid: i64,
    watch: bool,
) -> Result<(bool, Option<zk::OneshotWatcher>), zk::Error> {
    let is_it = |stat: Option<zk::Stat>| stat.is_some_and(|s| s.czxid == czxid);
    if watch {
        let (stat, watcher) = client.check_and_watch_stat(path).await?;
        Ok((is_it(stat), Some(watcher)))
    } else {
        Ok((is_it(client.check_stat(path).await?), None))
    }
}

/// Whether `path` exists, setting an exists watch when `watch`.
pub async fn exists(
    client: &zk::Client,
    path: &str,
    watch: bool,
) -> Result<(bool, Option<zk::OneshotWatcher>), zk::Error> {
    if watch {
        let (stat, watcher) = client.check_and_watch_stat(path).await?;
        Ok((stat.is_some(), Some(watcher)))
    } else {
        Ok((client.check_stat(path).await?.is_some(), None))
    }
}
