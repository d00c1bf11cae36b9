//! The resilient session layer: one [`Session`] wraps a [`zkit_client::Client`] and turns its
//! raw states into Curator's connection states ([`SessionState`]), and replaces the ZooKeeper
//! session by itself after it is lost.
//!
//! The meaning of the states is Curator's (`ConnectionState`):
//! - `Connected`: a (new) ZooKeeper session is established. Emitted once per generation.
//! - `Suspended`: the connection dropped; the session may still be alive on the server. Anything
//!   that depends on the session (locks, leadership) must be treated as uncertain.
//! - `Reconnected`: the connection is back and the *same* session survived.
//! - `Lost`: the session expired, or no reconnect happened within the negotiated session timeout
//!   measured locally from the moment of `Suspended` (Curator 3+'s behaviour; the server may not
//!   have expired it yet, but after that long it may have, so we must assume it has).
//! - `Closed`: [`Session::close`] was called or the last handle dropped. Terminal.
//!
//! After `Lost` a background task connects a new ZooKeeper session (with backoff, forever until
//! closed) and emits `Connected` with a new [`SessionEvent::generation`] and session id. Recipes
//! compare generations to know that what they owned in the old session is gone.
//!
//! This module must not retry user operations: that is [`crate::retry()`]'s job.

use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use tokio::sync::{broadcast, watch};
use tokio_util::sync::CancellationToken;
use zkit_client as zk;

use crate::error::{Error, Result};
use crate::retry::RetryPolicy;

/// Curator-style connection state of a [`Session`]. See the module docs for the exact meaning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SessionState {
    /// A new ZooKeeper session is established (first connect, or after `Lost`).
    Connected,
    /// Connection dropped; the session may still be alive.
    Suspended,
    /// Connection back; the same session survived.
    Reconnected,
    /// The session is gone (expired, or not reconnected within the session timeout).
    Lost,
    /// The session layer was closed. Terminal.
    Closed,
}

impl SessionState {
    /// True for `Connected` and `Reconnected`: requests can be served.
    pub fn is_connected(self) -> bool {
        matches!(self, SessionState::Connected | SessionState::Reconnected)
    }
}

/// One state transition of a [`Session`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionEvent {
    /// The new state.
    pub state: SessionState,
    /// Which ZooKeeper session this is about: 1 for the first, +1 for each replacement after
    /// `Lost`.
    pub generation: u64,
    /// The ZooKeeper session id of that generation.
    pub session_id: i64,
}

/// Options of [`Session::connect`].
#[derive(Debug, Clone)]
pub struct SessionOptions {
    /// Requested session timeout (the server may negotiate it within its bounds). Default 10 s.
    pub session_timeout: Duration,
    /// Idle time after which a connection is considered dead; `None` leaves the client's default
    /// (2/3 of the negotiated session timeout, `ClientCnxn`'s read timeout).
    pub connection_timeout: Option<Duration>,
    /// Authentication data added to every connection: `(scheme, auth)`, e.g.
    /// `("digest", b"user:password")`.
    pub auth: Vec<(String, Vec<u8>)>,
    /// Backoff between attempts to build a new session after `Lost`. Only the sleeps are used:
    /// attempts go on until the session is closed. Default: exponential from 100 ms to 5 s.
    pub reconnect_backoff: RetryPolicy,
    /// TLS for the hosts of the connect string that ask for it (`tcp+tls://host:port`).
    #[cfg(feature = "tls")]
    pub tls: Option<zk::TlsOptions>,
}

impl Default for SessionOptions {
    fn default() -> Self {
        SessionOptions {
            session_timeout: Duration::from_secs(10),
            connection_timeout: None,
            auth: Vec::new(),
            reconnect_backoff: RetryPolicy::ExponentialBackoff {
                base: Duration::from_millis(100),
                max_sleep: Duration::from_secs(5),
                max_retries: u32::MAX,
            },
            #[cfg(feature = "tls")]
            tls: None,
        }
    }
}

impl SessionOptions {
    /// Sets the requested session timeout.
    pub fn with_session_timeout(mut self, timeout: Duration) -> Self {
        self.session_timeout = timeout;
        self
    }

    /// Sets the connection (idle) timeout.
    pub fn with_connection_timeout(mut self, timeout: Duration) -> Self {
        self.connection_timeout = Some(timeout);
        self
    }

    /// Adds `digest` authentication with `user:password`.
    pub fn with_digest_auth(mut self, user_password: &str) -> Self {
        self.auth
            .push(("digest".to_string(), user_password.as_bytes().to_vec()));
        self
    }
}

struct Current {
    client: zk::Client,
    generation: u64,
}

struct Shared {
    connect_string: String,
    options: SessionOptions,
    current: StdMutex<Current>,
    state_tx: watch::Sender<SessionEvent>,
    events_tx: broadcast::Sender<SessionEvent>,
    closed: CancellationToken,
}

impl Shared {
    fn emit(&self, state: SessionState, generation: u64, session_id: i64) {
        let event = SessionEvent {
            state,
            generation,
            session_id,
        };
        tracing::info!(
            session = format_args!("{session_id:#x}"),
            generation,
            ?state,
            "session state"
        );
        self.state_tx.send_replace(event);
        // No receivers is fine: nobody subscribed yet.
        let _ = self.events_tx.send(event);
    }

    fn current(&self) -> (zk::Client, u64) {
        let current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        (current.client.clone(), current.generation)
    }
}

/// Closes the session when the last [`Session`] handle is dropped.
struct Handle {
    shared: Arc<Shared>,
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.shared.closed.cancel();
    }
}

/// A resilient ZooKeeper session: connection states with Curator's meaning, automatic
/// replacement of a lost session. Cheap to clone; the last clone dropped closes it.
#[derive(Clone)]
pub struct Session {
    handle: Arc<Handle>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let event = self.state();
        f.debug_struct("Session")
            .field("connect_string", &self.handle.shared.connect_string)
            .field("state", &event.state)
            .field("generation", &event.generation)
            .field("session_id", &format_args!("{:#x}", event.session_id))
            .finish()
    }
}

async fn connect_client(connect_string: &str, options: &SessionOptions) -> Result<zk::Client> {
    let mut connector = zk::Client::connector().with_session_timeout(options.session_timeout);
    if let Some(timeout) = options.connection_timeout {
        connector = connector.with_connection_timeout(timeout);
    }
    for (scheme, auth) in &options.auth {
        connector = connector.with_auth(scheme, auth);
    }
    #[cfg(feature = "tls")]
    if let Some(tls) = &options.tls {
        connector = connector.with_tls(tls.clone());
    }
    Ok(connector.connect(connect_string).await?)
}

impl Session {
    /// Connects to `connect_string` (`"h1:2181,h2:2181/chroot"`) and returns once the first
    /// ZooKeeper session is established, with state `Connected` and generation 1.
    ///
    /// # Errors
    /// Whatever the first connect fails with: [`Error::ConnectTimeout`] when no server answered
    /// within the session timeout, [`Error::AuthFailed`], [`Error::BadArguments`] for a bad
    /// connect string. Later failures are reported through the state stream, not as errors.
    pub async fn connect(connect_string: &str, options: SessionOptions) -> Result<Session> {
        let client = connect_client(connect_string, &options).await?;
        let session_id = client.session_id().0;
        let initial = SessionEvent {
            state: SessionState::Connected,
            generation: 1,
            session_id,
        };
        let (state_tx, _) = watch::channel(initial);
        let (events_tx, _) = broadcast::channel(64);
        let shared = Arc::new(Shared {
            connect_string: connect_string.to_string(),
            options,
            current: StdMutex::new(Current {
                client,
                generation: 1,
            }),
            state_tx,
            events_tx,
            closed: CancellationToken::new(),
        });
        tokio::spawn(supervise(Arc::clone(&shared)));
        Ok(Session {
            handle: Arc::new(Handle { shared }),
        })
    }

    fn shared(&self) -> &Shared {
        &self.handle.shared
    }

    /// The current ZooKeeper client, for raw operations. After `Lost` and a new `Connected`, call
    /// again: the old client belongs to the old (gone) session. Do not keep clones for long; a
    /// clone keeps its ZooKeeper session open.
    pub fn client(&self) -> zk::Client {
        self.shared().current().0
    }

    /// The current client together with its generation, read atomically.
    pub fn client_and_generation(&self) -> (zk::Client, u64) {
        self.shared().current()
    }

    /// The ZooKeeper session id of the current generation.
    pub fn session_id(&self) -> i64 {
        self.client().session_id().0
    }

    /// The current generation: 1 for the first ZooKeeper session, +1 per replacement.
    pub fn generation(&self) -> u64 {
        self.shared().current().1
    }

    /// The latest state event.
    pub fn state(&self) -> SessionEvent {
        *self.shared().state_tx.borrow()
    }

    /// Every state transition from now on, in order. A receiver that falls more than 64 events
    /// behind gets `RecvError::Lagged`; use [`Session::watch_state`] when only the latest matters.
    pub fn subscribe(&self) -> broadcast::Receiver<SessionEvent> {
        self.shared().events_tx.subscribe()
    }

    /// A receiver of the latest state (intermediate states may be skipped).
    pub fn watch_state(&self) -> watch::Receiver<SessionEvent> {
        self.shared().state_tx.subscribe()
    }

    /// The negotiated session timeout of the current ZooKeeper session.
    pub fn session_timeout(&self) -> Duration {
        self.client().session_timeout()
    }

    /// Waits until the session is `Connected` or `Reconnected` (returns at once if it is).
    ///
    /// # Errors
    /// [`Error::Closed`] if the session is or gets closed.
    pub async fn wait_connected(&self) -> Result<SessionEvent> {
        let mut rx = self.watch_state();
        loop {
            let event = *rx.borrow_and_update();
            if event.state.is_connected() {
                return Ok(event);
            }
            if event.state == SessionState::Closed {
                return Err(Error::Closed);
            }
            if rx.changed().await.is_err() {
                return Err(Error::Closed);
            }
        }
    }

    /// True once [`Session::close`] was called.
    pub fn is_closed(&self) -> bool {
        self.shared().closed.is_cancelled()
    }

    /// A token cancelled when the session is closed.
    pub fn closed_token(&self) -> CancellationToken {
        self.shared().closed.clone()
    }

    /// Closes the session: the background task stops, `Closed` is emitted, and the ZooKeeper
    /// session closes once no client clone is left (its ephemeral nodes are then deleted).
    pub fn close(&self) {
        self.shared().closed.cancel();
    }
}

/// The background task: follows the raw client states, emits Curator states, rebuilds after Lost.
async fn supervise(shared: Arc<Shared>) {
    loop {
        let (client, generation) = shared.current();
        let session_id = client.session_id().0;
        let timeout = client.session_timeout();
        let mut watcher = client.state_watcher();
        // Do not keep a client clone while watching: the user's clones decide its lifetime, and
        // after Lost we replace the one in `current`, which closes the old session.
        drop(client);
        let lost = follow_one_session(&shared, &mut watcher, generation, session_id, timeout).await;
        if !lost {
            shared.emit(SessionState::Closed, generation, session_id);
            return;
        }
        shared.emit(SessionState::Lost, generation, session_id);
        if !rebuild(&shared, generation).await {
            shared.emit(SessionState::Closed, generation, session_id);
            return;
        }
    }
}

/// Follows one ZooKeeper session until it is lost (`true`) or the layer is closed (`false`).
async fn follow_one_session(
    shared: &Shared,
    watcher: &mut zk::StateWatcher,
    generation: u64,
    session_id: i64,
    session_timeout: Duration,
) -> bool {
    use zk::SessionState as Raw;
    // The watcher may already have moved on between connect and now; `state()` consumes it so
    // the same transition is not seen twice.
    let mut raw = watcher.state();
    loop {
        match raw {
            Raw::SyncConnected | Raw::ConnectedReadOnly => {}
            Raw::Expired | Raw::AuthFailed | Raw::Closed => return true,
            Raw::Disconnected => {
                shared.emit(SessionState::Suspended, generation, session_id);
                // Curator measures the session timeout locally from the disconnect: past it, the
                // server may have expired us, so we must assume it has.
                let deadline = tokio::time::Instant::now() + session_timeout;
                loop {
                    tokio::select! {
                        _ = shared.closed.cancelled() => return false,
                        _ = tokio::time::sleep_until(deadline) => return true,
                        state = watcher.changed() => match state {
                            Raw::SyncConnected | Raw::ConnectedReadOnly => {
                                shared.emit(SessionState::Reconnected, generation, session_id);
                                break;
                            }
                            Raw::Disconnected => {}
                            Raw::Expired | Raw::AuthFailed | Raw::Closed => return true,
                        }
                    }
                }
            }
        }
        raw = tokio::select! {
            _ = shared.closed.cancelled() => return false,
            state = watcher.changed() => state,
        };
    }
}

/// Builds a new ZooKeeper session after `Lost`; `false` if closed meanwhile.
async fn rebuild(shared: &Shared, old_generation: u64) -> bool {
    let start = tokio::time::Instant::now();
    let mut attempt = 0u32;
    loop {
        let result = tokio::select! {
            _ = shared.closed.cancelled() => return false,
            result = connect_client(&shared.connect_string, &shared.options) => result,
        };
        match result {
            Ok(client) => {
                let session_id = client.session_id().0;
                let generation = old_generation + 1;
                {
                    let mut current = shared.current.lock().unwrap_or_else(|e| e.into_inner());
                    // Replacing drops our clone of the old client; once user clones are gone
                    // the old ZooKeeper session is closed (ephemeral nodes deleted).
                    *current = Current { client, generation };
                }
                shared.emit(SessionState::Connected, generation, session_id);
                return true;
            }
            Err(err) => {
                let sleep = shared
                    .options
                    .reconnect_backoff
                    .next_sleep(attempt.min(30), start.elapsed())
                    .unwrap_or(Duration::from_secs(1));
                tracing::warn!(error = %err, ?sleep, "building a new session failed");
                attempt = attempt.saturating_add(1);
                tokio::select! {
                    _ = shared.closed.cancelled() => return false,
                    _ = tokio::time::sleep(sleep) => {}
                }
            }
        }
    }
}
