//! [`PersistentWatcher`]: a persistent (optionally recursive) watch that stays set across
//! reconnects and session replacements (Curator's `PersistentWatcher`, ZooKeeper 3.6+
//! `addWatch`).
//!
//! As Curator's, it adds the watch again whenever the connection comes back (Curator resets on
//! every `isConnected()` state) and reports each (re-)add as [`WatchEvent::Reset`] (Curator's
//! "reset listeners"): events that happened while disconnected are not replayed to persistent
//! watches (ZOOKEEPER-4698), so after a `Reset` re-read whatever state you derive from the
//! events. Adding it again is harmless when the client has already re-armed it by itself (the
//! server keeps one watch per path and connection, the client one registration per watcher; the
//! old registration is dropped only after the new one is in place), so this works with clients
//! that re-register persistent watches on reconnect and with clients that do not.
//!
//! ```no_run
//! # async fn demo(session: zkit::Session) -> zkit::Result<()> {
//! use zkit::persistent_watcher::{PersistentWatcher, WatchEvent};
//! let mut watcher = PersistentWatcher::new(&session, "/config", true)?;
//! loop {
//!     match watcher.next().await? {
//!         WatchEvent::Reset => println!("(re)armed: re-read /config"),
//!         WatchEvent::Node(event) => println!("{:?} {}", event.event_type, event.path),
//!     }
//! }
//! # }
//! ```
//!
//! The reaction to each session state is the pure [`reaction`].

use tokio::sync::broadcast;
use zkit_client as zk;

use crate::error::{Error, Result};
use crate::session::{Session, SessionState};

/// What a [`PersistentWatcher`] reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchEvent {
    /// The watch was (re-)added on a connection: re-read the state you derive from events.
    Reset,
    /// A node event (`NodeCreated`, `NodeDeleted`, `NodeDataChanged`, and for non-recursive
    /// watches `NodeChildrenChanged`).
    Node(zk::WatchedEvent),
}

/// What a session state transition means for the watch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reaction {
    /// A new connection (`Connected`: a new session; `Reconnected`: the same session on a new
    /// connection): add the watch again.
    Readd,
    /// Nothing to do now (`Suspended`, `Lost`: wait for the next connection).
    Wait,
    /// The session layer was closed.
    Stop,
}

/// The reaction to one session state (Curator resets on every connected state).
pub fn reaction(state: SessionState) -> Reaction {
    match state {
        SessionState::Connected | SessionState::Reconnected => Reaction::Readd,
        SessionState::Suspended | SessionState::Lost => Reaction::Wait,
        SessionState::Closed => Reaction::Stop,
    }
}

/// A persistent watch kept in place. See the module docs.
pub struct PersistentWatcher {
    session: Session,
    path: String,
    mode: zk::AddWatchMode,
    events: broadcast::Receiver<crate::session::SessionEvent>,
    watcher: Option<zk::PersistentWatcher>,
    need_add: bool,
    closed: bool,
}

impl std::fmt::Debug for PersistentWatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PersistentWatcher")
            .field("path", &self.path)
            .field("mode", &self.mode)
            .field("armed", &self.watcher.is_some())
            .finish()
    }
}

impl PersistentWatcher {
    /// A watch on `path` (need not exist), recursive (all descendants) or not (the node and
    /// its children list). Nothing is sent before the first [`PersistentWatcher::next`].
    ///
    /// # Errors
    /// [`Error::BadArguments`] for an invalid path.
    pub fn new(session: &Session, path: &str, recursive: bool) -> Result<Self> {
        Ok(PersistentWatcher {
            session: session.clone(),
            path: crate::config::resolve_key("/", path)?,
            mode: if recursive {
                zk::AddWatchMode::PersistentRecursive
            } else {
                zk::AddWatchMode::Persistent
            },
            events: session.subscribe(),
            watcher: None,
            need_add: true,
            closed: false,
        })
    }

    /// The watched path.
    pub fn path(&self) -> &str {
        &self.path
    }

    fn on_state(&mut self, state: SessionState) {
        match reaction(state) {
            Reaction::Readd => self.need_add = true,
            Reaction::Wait => {}
            Reaction::Stop => self.closed = true,
        }
    }

    fn on_recv(
        &mut self,
        received: std::result::Result<crate::session::SessionEvent, broadcast::error::RecvError>,
    ) {
        match received {
            Ok(event) => self.on_state(event.state),
            // Transitions were missed: a reconnect may be among them.
            Err(broadcast::error::RecvError::Lagged(_)) => self.need_add = true,
            Err(broadcast::error::RecvError::Closed) => self.closed = true,
        }
    }

    /// The next event: [`WatchEvent::Reset`] after the watch has been added (first, and after
    /// every reconnect or new session), node events in between.
    ///
    /// # Errors
    /// [`Error::Closed`] once the session is closed; [`Error::Unimplemented`] from servers
    /// without `addWatch` (ZooKeeper before 3.6); other errors of `addWatch` that retrying on
    /// the next connection cannot help (e.g. [`Error::NoAuth`]).
    ///
    /// # Cancellation safety
    /// Cancel-safe: a pending re-add is remembered, and node events not yet received stay
    /// queued in the client.
    pub async fn next(&mut self) -> Result<WatchEvent> {
        loop {
            loop {
                match self.events.try_recv() {
                    Ok(event) => self.on_state(event.state),
                    Err(broadcast::error::TryRecvError::Empty) => break,
                    Err(broadcast::error::TryRecvError::Lagged(_)) => self.need_add = true,
                    Err(broadcast::error::TryRecvError::Closed) => {
                        self.closed = true;
                        break;
                    }
                }
            }
            if self.closed || self.session.is_closed() {
                self.closed = true;
                return Err(Error::Closed);
            }
            if self.need_add && self.session.state().state.is_connected() {
                let client = self.session.client();
                match client.watch(&self.path, self.mode).await {
                    Ok(added) => {
                        // The new registration first, then the old one goes (module docs).
                        let _old = self.watcher.replace(added);
                        self.need_add = false;
                        return Ok(WatchEvent::Reset);
                    }
                    Err(err) => {
                        let err = Error::from(err);
                        if !(err.is_recoverable() || err.is_unrecoverable()) {
                            return Err(err);
                        }
                        // The connection (or session) went again: wait for the next one.
                        let received = self.events.recv().await;
                        self.on_recv(received);
                        continue;
                    }
                }
            }
            let Some(watcher) = self.watcher.as_mut() else {
                let received = self.events.recv().await;
                self.on_recv(received);
                continue;
            };
            tokio::select! {
                received = self.events.recv() => self.on_recv(received),
                event = watcher.changed() => {
                    if event.event_type != zk::EventType::Session {
                        return Ok(WatchEvent::Node(event));
                    }
                    if event.session_state.is_terminated() {
                        // Expired or closed: this watcher must not be polled again (it would
                        // panic); the next session gets a new watch.
                        self.watcher = None;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn re_added_on_every_new_connection() {
        assert_eq!(reaction(SessionState::Connected), Reaction::Readd);
        assert_eq!(reaction(SessionState::Reconnected), Reaction::Readd);
        assert_eq!(reaction(SessionState::Suspended), Reaction::Wait);
        assert_eq!(reaction(SessionState::Lost), Reaction::Wait);
        assert_eq!(reaction(SessionState::Closed), Reaction::Stop);
    }
}
