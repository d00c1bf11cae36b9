//! [`LeaderSelector`]: Curator's `LeaderSelector` on top of [`LeaderLatch`]: runs a task while we
//! lead, cancels it (drops its future) the moment leadership is lost, and optionally joins the
//! end of the line again when the task ends (Curator's `autoRequeue`).

use std::future::Future;

use tokio_util::sync::CancellationToken;

use super::latch::{LeaderLatch, Leadership};
use crate::error::Result;
use crate::session::Session;

/// What the leader task gets.
#[derive(Debug, Clone)]
pub struct LeaderContext {
    /// The leadership it runs under (fencing token included).
    pub leadership: Leadership,
    /// Cancelled when leadership is lost, just before the task's future is dropped; for work
    /// handed to other tasks.
    pub cancelled: CancellationToken,
}

/// Runs a task while leader. See the module docs.
#[derive(Debug, Clone)]
pub struct LeaderSelector {
    session: Session,
    path: String,
    id: String,
    requeue: bool,
}

impl LeaderSelector {
    /// A selector for the election at `path`, as participant `id`, without requeue.
    pub fn new(session: &Session, path: &str, id: &str) -> Self {
        LeaderSelector {
            session: session.clone(),
            path: path.to_string(),
            id: id.to_string(),
            requeue: false,
        }
    }

    /// After the task ends (or is cancelled by a loss), join the line again and run it again
    /// when leader.
    pub fn with_requeue(mut self, requeue: bool) -> Self {
        self.requeue = requeue;
        self
    }

    /// Waits for leadership and runs `task` while leading; leaves the election when it ends.
    /// With requeue, repeats forever (until the session is closed or this future dropped).
    /// Returns `Ok(true)` if the last run completed while still leader, `Ok(false)` if it was
    /// cancelled by a loss of leadership.
    ///
    /// # Errors
    /// As [`LeaderLatch::start`] and [`LeaderLatch::await_leadership`].
    ///
    /// # Cancellation safety
    /// Dropping it drops the task and leaves the election (the node is deleted in the
    /// background).
    pub async fn run<F, Fut>(&self, mut task: F) -> Result<bool>
    where
        F: FnMut(LeaderContext) -> Fut,
        Fut: Future<Output = ()>,
    {
        loop {
            let latch = LeaderLatch::start(&self.session, &self.path, &self.id)?;
            let leadership = latch.await_leadership().await?;
            let cancelled = CancellationToken::new();
            let ctx = LeaderContext {
                leadership,
                cancelled: cancelled.clone(),
            };
            let completed = tokio::select! {
                _ = task(ctx) => true,
                _ = latch.await_loss() => {
                    cancelled.cancel();
                    false
                }
            };
            latch.close().await;
            if !self.requeue {
                return Ok(completed);
            }
        }
    }
}
