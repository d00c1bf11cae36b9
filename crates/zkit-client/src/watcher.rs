//! What callers hold to hear about changes: [`OneshotWatcher`] (one node event, or the end of
//! the session), [`PersistentWatcher`] (node events and session changes until dropped) and
//! [`StateWatcher`] (session states).
//!
//! Dropping a node watcher before it fired unregisters it; the server's watch is removed too
//! once no other registration on the path needs it.

use tokio::sync::watch;

use crate::path::Chroot;
use crate::session::{Unwatch, WatcherEvents, WatcherReceiver};
use crate::types::{EventType, SessionState, WatchedEvent};

fn localize(mut event: WatchedEvent, chroot: &Chroot) -> WatchedEvent {
    if event.event_type != EventType::Session {
        event.path = chroot.client_path_or_same(std::mem::take(&mut event.path));
    }
    event
}

/// A one-shot watch from `get_and_watch_data`, `check_and_watch_stat`,
/// `list_and_watch_children`, `get_and_watch_children` or `get_and_watch_config`.
#[derive(Debug)]
pub struct OneshotWatcher {
    events: tokio::sync::oneshot::Receiver<WatchedEvent>,
    unwatch: Unwatch,
    chroot: Chroot,
}

impl OneshotWatcher {
    pub(crate) fn new(receiver: WatcherReceiver) -> OneshotWatcher {
        let WatcherReceiver {
            events,
            unwatch,
            chroot,
        } = receiver;
        let WatcherEvents::Oneshot(events) = events else {
            unreachable!("one-shot requests register one-shot watches")
        };
        OneshotWatcher {
            events,
            unwatch,
            chroot,
        }
    }

    /// Waits for the watch to fire: the node event (path relative to the client's chroot), or
    /// a terminal session event (`Expired`, `AuthFailed`, `Closed`).
    ///
    /// No `Disconnected` event: the watch is re-registered on reconnect, and a change missed
    /// while disconnected fires it then (the server compares with the last zxid seen,
    /// ZOOKEEPER-43's auto watch reset).
    ///
    /// # Cancellation safety
    /// Dropping the future drops the watcher, which unregisters it.
    pub async fn changed(mut self) -> WatchedEvent {
        let event = match (&mut self.events).await {
            Ok(event) => event,
            // The task is gone without a word: only when the runtime shut down under it.
            Err(_) => WatchedEvent::new_session(SessionState::Closed),
        };
        // It fired: the registration is gone already.
        self.unwatch.disarm();
        localize(event, &self.chroot)
    }
}

/// A persistent (or persistent recursive) watch from [`crate::Client::watch`].
#[derive(Debug)]
pub struct PersistentWatcher {
    events: tokio::sync::mpsc::UnboundedReceiver<WatchedEvent>,
    _unwatch: Unwatch,
    chroot: Chroot,
    last: Option<WatchedEvent>,
}

impl PersistentWatcher {
    pub(crate) fn new(receiver: WatcherReceiver) -> PersistentWatcher {
        let WatcherReceiver {
            events,
            unwatch,
            chroot,
        } = receiver;
        let WatcherEvents::Persistent(events) = events else {
            unreachable!("addWatch registers persistent watches")
        };
        PersistentWatcher {
            events,
            _unwatch: unwatch,
            chroot,
            last: None,
        }
    }

    /// The next event: a node event, or a session event — `Disconnected`, then
    /// `SyncConnected` / `ConnectedReadOnly` once the watch is registered again on the new
    /// connection, or a terminal state.
    ///
    /// A server does not replay to a persistent watch the changes made while this client was
    /// disconnected (ZOOKEEPER-4698; zkit's server behaves the same): after `SyncConnected`,
    /// re-read what you watch. Events after the reconnection are all delivered.
    ///
    /// After the last event (a terminal session event, or `PersistentWatchRemoved` from
    /// [`crate::Client::remove_watches`]) every call returns that event again at once.
    ///
    /// # Cancellation safety
    /// Cancellation safe: an event is never lost by dropping the future.
    pub async fn changed(&mut self) -> WatchedEvent {
        if let Some(last) = &self.last {
            return last.clone();
        }
        let event = match self.events.recv().await {
            Some(event) => localize(event, &self.chroot),
            None => WatchedEvent::new_session(SessionState::Closed),
        };
        let ends = (event.event_type == EventType::Session && event.session_state.is_terminated())
            || event.event_type == EventType::PersistentWatchRemoved;
        if ends {
            self.last = Some(event.clone());
        }
        event
    }
}

/// Session state changes of a client, from [`crate::Client::state_watcher`].
///
/// Backed by a `tokio::sync::watch`: a state that is replaced before it was looked at is not
/// seen (a short `Disconnected` may be followed straight by `SyncConnected`).
#[derive(Debug, Clone)]
pub struct StateWatcher {
    receiver: watch::Receiver<SessionState>,
}

impl StateWatcher {
    pub(crate) fn new(mut receiver: watch::Receiver<SessionState>) -> StateWatcher {
        receiver.borrow_and_update();
        StateWatcher { receiver }
    }

    /// The latest state, marking it seen.
    pub fn state(&mut self) -> SessionState {
        *self.receiver.borrow_and_update()
    }

    /// The latest state, without marking it seen.
    pub fn peek_state(&self) -> SessionState {
        *self.receiver.borrow()
    }

    /// Waits for a state not seen yet and returns it.
    ///
    /// After a terminal state was returned, it waits forever: no state follows.
    ///
    /// # Cancellation safety
    /// Cancellation safe.
    pub async fn changed(&mut self) -> SessionState {
        match self.receiver.changed().await {
            Ok(()) => *self.receiver.borrow_and_update(),
            Err(_) => std::future::pending().await,
        }
    }
}
