//! What callers hold to hear about changes: [`OneshotWatcher`] (one node event, or the end of
//! the session), [`PersistentWatcher`] (node events and session changes until dropped) and
//! [`StateWatcher`] (session states).
//!
//! Dropping a node watcher before it fired unregisters it; the server's watch is removed too
//! once no other registration on the path needs it.

use tokio::sync::watch;

use crate::path::Chroot;
use crate::session::{Unwatch, WatcherEvents, WatcherReceiver};
use crate::types::{EventType, SessionState, StateCell, WatchedEvent};

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
/// States that follow each other faster than the watcher looks are merged into the latest,
/// except that a dropped connection is never hidden: when the connection dropped (and came
/// back, or the session ended) between two looks, the watcher reports `Disconnected` first,
/// then the state after it. A `Disconnected` → `SyncConnected` flap therefore always shows as
/// both, as a session layer needs to tell its users that the connection was suspended.
#[derive(Debug, Clone)]
pub struct StateWatcher {
    receiver: watch::Receiver<StateCell>,
    /// The drops reported so far.
    disconnects_seen: u64,
    /// The state to report after a `Disconnected` reported in its place.
    after_disconnect: Option<SessionState>,
}

impl StateWatcher {
    pub(crate) fn new(mut receiver: watch::Receiver<StateCell>) -> StateWatcher {
        let disconnects_seen = receiver.borrow_and_update().disconnects;
        StateWatcher {
            receiver,
            disconnects_seen,
            after_disconnect: None,
        }
    }

    /// What to report for `cell`: `Disconnected` first when a drop was not reported yet.
    fn look(&mut self, cell: StateCell) -> SessionState {
        if cell.disconnects != self.disconnects_seen {
            self.disconnects_seen = cell.disconnects;
            if cell.state != SessionState::Disconnected {
                self.after_disconnect = Some(cell.state);
                return SessionState::Disconnected;
            }
        }
        cell.state
    }

    /// The latest state, marking it seen (`Disconnected` if the connection dropped since the
    /// last look and that was not reported; the latest state then comes from
    /// [`StateWatcher::changed`] at once).
    pub fn state(&mut self) -> SessionState {
        self.after_disconnect = None;
        let cell = *self.receiver.borrow_and_update();
        self.look(cell)
    }

    /// The latest state, without marking it seen.
    pub fn peek_state(&self) -> SessionState {
        self.receiver.borrow().state
    }

    /// Waits for a state not reported yet and returns it.
    ///
    /// After a terminal state was returned, it waits forever: no state follows.
    ///
    /// # Cancellation safety
    /// Cancellation safe.
    pub async fn changed(&mut self) -> SessionState {
        if let Some(state) = self.after_disconnect.take() {
            return state;
        }
        match self.receiver.changed().await {
            Ok(()) => {
                let cell = *self.receiver.borrow_and_update();
                self.look(cell)
            }
            Err(_) => std::future::pending().await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::StateWatcher;
    use crate::types::SessionState::{self, *};
    use crate::types::StateCell;
    use tokio::sync::watch;

    /// A client's state channel, moved by `StateCell::set` as the session task moves it.
    fn channel() -> (watch::Sender<StateCell>, StateWatcher) {
        let tx = watch::Sender::new(StateCell::new());
        tx.send_if_modified(|cell| cell.set(SyncConnected));
        let watcher = StateWatcher::new(tx.subscribe());
        (tx, watcher)
    }

    fn set(tx: &watch::Sender<StateCell>, state: SessionState) {
        tx.send_if_modified(|cell| cell.set(state));
    }

    #[tokio::test]
    async fn a_flap_the_watcher_did_not_look_at_still_shows_as_a_drop_then_the_reconnect() {
        let (tx, mut watcher) = channel();
        assert_eq!(watcher.state(), SyncConnected);
        // Dropped and back before the watcher looked.
        set(&tx, Disconnected);
        set(&tx, SyncConnected);
        assert_eq!(watcher.changed().await, Disconnected);
        assert_eq!(watcher.changed().await, SyncConnected);
        // Nothing more happened: nothing more is reported.
        let more = tokio::time::timeout(std::time::Duration::from_millis(50), watcher.changed());
        assert!(more.await.is_err(), "a state reported twice");
        // A drop seen as it happens is reported once, not twice.
        set(&tx, Disconnected);
        assert_eq!(watcher.changed().await, Disconnected);
        set(&tx, ConnectedReadOnly);
        assert_eq!(watcher.changed().await, ConnectedReadOnly);
    }

    #[tokio::test]
    async fn state_reports_an_unseen_drop_and_changed_gives_the_state_after_it() {
        let (tx, mut watcher) = channel();
        set(&tx, Disconnected);
        set(&tx, SyncConnected);
        assert_eq!(watcher.state(), Disconnected);
        assert_eq!(watcher.changed().await, SyncConnected);
        assert_eq!(watcher.peek_state(), SyncConnected);
    }

    #[tokio::test]
    async fn a_drop_before_the_session_ended_is_reported_before_the_end() {
        let (tx, mut watcher) = channel();
        set(&tx, Disconnected);
        set(&tx, Expired);
        // A terminal state is final: later states are refused.
        set(&tx, SyncConnected);
        assert_eq!(watcher.changed().await, Disconnected);
        assert_eq!(watcher.changed().await, Expired);
        assert_eq!(watcher.peek_state(), Expired);
    }
}
