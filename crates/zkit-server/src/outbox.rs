//! A connection's outbound queue between the pipeline and the connection's writer: one lock
//! and one wake-up per connection per batch (not per message), bounded by
//! `max_outbound_bytes` — a client that stops reading is closed instead of growing the
//! server's memory. No I/O here: the writer (in `connection`) takes what is queued.

use std::sync::{Arc, Mutex};

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use zkit_core::Outbound;

/// A connection's outbound queue, shared by the pipeline (through its [`OutboxSender`]) and
/// the connection's writer, which takes everything queued at once.
#[derive(Debug)]
pub(crate) struct Outbox {
    state: Mutex<OutboxState>,
    wake: Notify,
    limit: usize,
    /// Cancelled on overflow: interrupts a writer blocked on a socket nobody reads.
    overflow: CancellationToken,
}

/// What [`Outbox::take`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Taken {
    /// The queue passed its bound: write nothing more, close.
    Overflowed,
    /// The messages queued so far (maybe none), and whether the pipeline will send more.
    Messages {
        /// The pipeline dropped its sender: nothing follows what was taken.
        closed: bool,
    },
}

impl Outbox {
    /// The writer's side: moves everything queued into `into` (which must be empty).
    pub(crate) fn take(&self, into: &mut Vec<Outbound>) -> Taken {
        let mut state = lock(&self.state);
        if state.overflowed {
            return Taken::Overflowed;
        }
        std::mem::swap(&mut state.queue, into);
        state.bytes = 0;
        Taken::Messages {
            closed: state.closed,
        }
    }

    /// Resolves once something was queued (or the outbox closed) after the last [`Outbox::take`]:
    /// a wake-up sent in between is stored as a permit, so none is missed.
    pub(crate) async fn queued(&self) {
        self.wake.notified().await;
    }

    /// Resolves when the queue overflows.
    pub(crate) async fn overflowed(&self) {
        self.overflow.cancelled().await;
    }
}

#[derive(Debug, Default)]
struct OutboxState {
    queue: Vec<Outbound>,
    /// Estimated bytes of `queue`.
    bytes: usize,
    /// The pipeline will queue nothing more: the writer ends once the queue is written.
    closed: bool,
    /// Over the bound: the writer ends at once, writing nothing more.
    overflowed: bool,
}

/// What [`OutboxSender::flush`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flushed {
    /// Queued for the writer.
    Queued,
    /// The queue passed the bound: it was dropped and the connection is closing.
    Overflowed,
}

/// The pipeline's end of an [`Outbox`]: stages one batch's messages for the connection and
/// queues them with one lock. Dropping it closes the outbox (the writer finishes what is
/// queued, then closes the socket).
#[derive(Debug)]
pub(crate) struct OutboxSender {
    outbox: Arc<Outbox>,
    staged: Vec<Outbound>,
    staged_bytes: usize,
}

impl OutboxSender {
    /// Adds `message` to what the next [`OutboxSender::flush`] queues; returns whether it is
    /// the first one staged since the last flush.
    pub fn stage(&mut self, message: Outbound) -> bool {
        self.staged_bytes += approx_bytes(&message);
        self.staged.push(message);
        self.staged.len() == 1
    }

    /// Queues the staged messages for the writer and wakes it.
    pub fn flush(&mut self) -> Flushed {
        if self.staged.is_empty() {
            return Flushed::Queued;
        }
        let outbox = &self.outbox;
        let mut state = lock(&outbox.state);
        if state.overflowed {
            self.staged.clear();
            self.staged_bytes = 0;
            return Flushed::Overflowed;
        }
        state.bytes += self.staged_bytes;
        self.staged_bytes = 0;
        if state.bytes > outbox.limit {
            // Free the backlog now; the writer stops without writing it.
            state.overflowed = true;
            state.queue = Vec::new();
            state.bytes = 0;
            self.staged.clear();
            drop(state);
            outbox.overflow.cancel();
            return Flushed::Overflowed;
        }
        if state.queue.is_empty() {
            // Hand over the staged vector itself; keep the (empty, sized) one for next time.
            std::mem::swap(&mut state.queue, &mut self.staged);
        } else {
            state.queue.append(&mut self.staged);
        }
        drop(state);
        outbox.wake.notify_one();
        Flushed::Queued
    }
}

impl Drop for OutboxSender {
    fn drop(&mut self) {
        self.flush();
        lock(&self.outbox.state).closed = true;
        self.outbox.wake.notify_one();
    }
}

/// A new outbox bounded by `limit` bytes: the pipeline's end and the writer's.
pub(crate) fn outbox(limit: usize) -> (OutboxSender, Arc<Outbox>) {
    let outbox = Arc::new(Outbox {
        state: Mutex::new(OutboxState::default()),
        wake: Notify::new(),
        limit,
        overflow: CancellationToken::new(),
    });
    (
        OutboxSender {
            outbox: outbox.clone(),
            staged: Vec::new(),
            staged_bytes: 0,
        },
        outbox,
    )
}

fn lock(state: &Mutex<OutboxState>) -> std::sync::MutexGuard<'_, OutboxState> {
    // The critical sections cannot panic; a poisoned lock still holds a consistent queue.
    state
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// What a queued message costs in memory, roughly: its size plus the heap data it carries.
/// The bound is about a client that does not read, not about exact accounting.
fn approx_bytes(message: &Outbound) -> usize {
    use zkit_proto::Response;
    let heap = match message {
        Outbound::Reply { body, .. } => match body {
            Response::Create { path }
            | Response::Sync { path }
            | Response::Create2 { path, .. } => path.len(),
            Response::GetData { data, .. } => data.as_ref().map_or(0, Vec::len),
            Response::GetChildren { children }
            | Response::GetChildren2 { children, .. }
            | Response::Ephemerals(children) => children.iter().map(|c| c.len() + 24).sum(),
            Response::GetAcl { acl, .. } => acl.len() * 64,
            Response::Multi(results) => results.len() * 128,
            Response::MultiRead(results) => results.len() * 128,
            Response::WhoAmI(infos) => infos.len() * 64,
            _ => 0,
        },
        Outbound::Event { event, .. } => event.path.len(),
        Outbound::Connect { .. } | Outbound::Close => 0,
    };
    std::mem::size_of::<Outbound>() + heap
}
