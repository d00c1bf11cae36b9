//! The resilient session layer: one [`Session`] wraps a [`zkit_client::Client`] and turns its
//! raw states into Curator's connection states ([`SessionState`]), decides how long the session
//! provably lives ([`Session::valid_until`]), and replaces the ZooKeeper session by itself after
//! it is lost.
//!
//! The meaning of the states:
//! - `Connected`: a (new) ZooKeeper session is established. Emitted once per generation.
//! - `Suspended`: the connection dropped; the session is still *provably* alive until
//!   [`Session::valid_until`], and the client is trying the other servers. Holders keep
//!   holding, waiters keep waiting: a reconnect to any member inside that window changes
//!   nothing.
//! - `Reconnected`: the connection is back and the *same* session survived.
//! - `Lost`: the session expired, or its validity deadline passed without a reconnect: the
//!   server may have expired it by now, so everything tied to it must be assumed gone.
//! - `Closed`: [`Session::close`] was called or the last handle dropped. Terminal.
//!
//! # The validity rule
//!
//! A ZooKeeper server expires a session only after a full negotiated session timeout without
//! hearing from its client (and rounds that up to its next tick; a new leader restarts every
//! session's timeout when it takes over). The client knows the *send* time `s` of the last
//! request that a server answered ([`zkit_client::Client::last_acknowledged_send`], pings
//! included): that server heard from the session after `s`, so the session lives at least
//! until `s + timeout` on the server's clock. The session layer uses
//!
//! `valid_until = s + timeout − margin`, with `margin = timeout / 10`
//!
//! on the local monotonic clock ([`valid_until`], [`validity_margin`]). The margin covers a
//! difference in clock *rate* between this host and the servers (quartz drift is below
//! 100 ppm and NTP slews at most 500 ppm, so a 10 % margin is 200 times the worst rate error)
//! and leaves the rest for the delay between the deadline and the holder's reaction (a timer
//! wake-up, a signal to a child process). It does not cover a holder that takes longer than
//! the margin to stop using its resource: that is what fencing tokens are for.
//!
//! This goes beyond Curator, whose `SUSPENDED` leaves the user to guess (Curator tech note 10)
//! and whose `LOST` comes a full session timeout after the disconnect, later than a server may
//! already have expired the session. Here `Lost` is declared when `valid_until` passes in any
//! state without a newer acknowledged request, or when the client observes the expiry. The old
//! client is then ended as expired ([`zkit_client::Client::expire`]: it cannot revive the old
//! session behind the recipes' backs, and a request still using it fails with
//! [`Error::SessionExpired`], never [`Error::Closed`], which only a closed [`Session`] gives)
//! and a background task connects a new ZooKeeper session (with backoff, forever until closed),
//! which emits `Connected` with a new [`SessionEvent::generation`] and session id. Recipes
//! compare generations to know that what they owned in the old session is gone.
//!
//! A new ZooKeeper session counts from the send of its ConnectRequest. When the answer came
//! late (a link that held the request, then let it through), little or none of that validity
//! may be left; one answered request renews it before the session is handed out, so that a
//! healthy new session is not declared `Lost` the moment it appears.
//!
//! This module must not retry user operations: that is [`crate::retry()`]'s job.

use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use tokio::sync::{broadcast, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use zkit_client as zk;

use crate::error::{Error, Result};
use crate::retry::RetryPolicy;

/// The part of a session timeout not counted on (see the module docs, "The validity rule").
pub fn validity_margin(session_timeout: Duration) -> Duration {
    session_timeout / 10
}

/// The validity rule, in one place: a session whose last answered request was sent at
/// `last_acknowledged_send` (local monotonic clock) and whose negotiated timeout is
/// `session_timeout` provably lives until the returned instant.
pub fn valid_until(last_acknowledged_send: Instant, session_timeout: Duration) -> Instant {
    last_acknowledged_send + session_timeout - validity_margin(session_timeout)
}

/// The supervisor's verdict on one session at `now`: its validity deadline while it is still
/// provably alive, `None` once it is not (or when nothing was ever acknowledged).
fn still_valid(
    last_acknowledged_send: Option<Instant>,
    session_timeout: Duration,
    now: Instant,
) -> Option<Instant> {
    let deadline = valid_until(last_acknowledged_send?, session_timeout);
    (now < deadline).then_some(deadline)
}

/// Curator-style connection state of a [`Session`]. See the module docs for the exact meaning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SessionState {
    /// A new ZooKeeper session is established (first connect, or after `Lost`).
    Connected,
    /// Connection dropped; the session is still alive until [`Session::valid_until`].
    Suspended,
    /// Connection back; the same session survived.
    Reconnected,
    /// The session is gone (expired, or its validity deadline passed without a reconnect).
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

impl SessionEvent {
    /// Whether what was taken in session `generation` (a lock, leadership, an ephemeral node)
    /// is still held according to this event: the same session, and not `Lost` or `Closed`.
    /// `Suspended` keeps it: the session layer declares `Lost` once the session's validity
    /// deadline passes (see the module docs), so until then the session provably lives.
    pub fn keeps(&self, generation: u64) -> bool {
        self.generation == generation
            && matches!(
                self.state,
                SessionState::Connected | SessionState::Suspended | SessionState::Reconnected
            )
    }
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

    /// The validity deadline of session `generation`, when it is the current one and still
    /// provably alive.
    fn valid_until(&self, generation: u64) -> Option<Instant> {
        let current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        if current.generation != generation {
            return None;
        }
        still_valid(
            current.client.last_acknowledged_send(),
            current.client.session_timeout(),
            Instant::now(),
        )
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
    let client = connector.connect(connect_string).await?;
    renew_late_validity(&client).await;
    Ok(client)
}

/// When the ConnectRequest was answered late, so that more than half of the new session's
/// validity was spent before it could be used, renews it with one answered request (any
/// answer, even an error code, proves that the server heard from the session after its
/// send). Best effort: without an answer the session keeps the validity it has, and the
/// supervisor judges it as any other.
async fn renew_late_validity(client: &zk::Client) {
    let timeout = client.session_timeout();
    let left = still_valid(client.last_acknowledged_send(), timeout, Instant::now())
        .map_or(Duration::ZERO, |deadline| {
            deadline.saturating_duration_since(Instant::now())
        });
    if left >= timeout / 2 {
        return;
    }
    tracing::debug!(
        ?left,
        "the new session's validity was mostly spent in its connect; renewing it"
    );
    if let Err(err) = client.check_stat("/").await {
        tracing::debug!(error = %err, "renewing the new session's validity");
    }
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

    /// Until when the current ZooKeeper session provably lives (see the module docs, "The
    /// validity rule"): `None` once it is `Lost` or `Closed`. While connected it moves forward
    /// with every answered request (pings included); while `Suspended` it stands still, and
    /// the session layer declares `Lost` when it passes.
    pub fn valid_until(&self) -> Option<Instant> {
        self.valid_until_for(self.state().generation)
    }

    /// [`Session::valid_until`] for the session of `generation`: `None` when that session is
    /// not the current one any more, or is `Lost` or `Closed`. What a lock guard or a leader
    /// taken in `generation` can rely on.
    pub fn valid_until_for(&self, generation: u64) -> Option<Instant> {
        let event = self.state();
        if event.generation != generation
            || matches!(event.state, SessionState::Lost | SessionState::Closed)
        {
            return None;
        }
        self.shared().valid_until(generation)
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

/// The background task: follows the raw client states, emits Curator states, declares `Lost`
/// past the validity deadline, rebuilds after Lost.
async fn supervise(shared: Arc<Shared>) {
    loop {
        let (client, generation) = shared.current();
        let session_id = client.session_id().0;
        let mut watcher = client.state_watcher();
        // Do not keep a client clone while watching: the user's clones decide its lifetime, and
        // after Lost we replace the one in `current`, which closes the old session.
        drop(client);
        let lost = follow_one_session(&shared, &mut watcher, generation, session_id).await;
        if !lost {
            shared.emit(SessionState::Closed, generation, session_id);
            return;
        }
        // The old client must not revive the old session (reconnecting after we declared it
        // lost would keep its ephemeral nodes alive behind the recipes' backs): end it, and
        // before `Lost` is announced, so that whatever a listener does on `Lost` (let the link
        // come back, say) finds the close already queued ahead of any reconnect. Without a
        // connection the close is local and immediate. It ends as expired, not closed: a
        // recipe's request still in flight on it (or made with it before the next session is
        // in place) fails as a lost session would, and the recipe retries on the next one
        // instead of taking the error for the closing of the whole `Session`.
        let (old, old_generation) = shared.current();
        if old_generation == generation {
            tokio::spawn(old.expire());
        }
        drop(old);
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
) -> bool {
    use zk::SessionState as Raw;
    // The watcher may already have moved on between connect and now; `state()` consumes it so
    // the same transition is not seen twice.
    let mut raw = watcher.state();
    let mut suspended = false;
    loop {
        match raw {
            Raw::SyncConnected | Raw::ConnectedReadOnly => {
                if suspended {
                    suspended = false;
                    shared.emit(SessionState::Reconnected, generation, session_id);
                }
            }
            Raw::Disconnected => {
                if !suspended {
                    suspended = true;
                    shared.emit(SessionState::Suspended, generation, session_id);
                }
            }
            Raw::Expired | Raw::AuthFailed | Raw::Closed => return true,
        }
        // Connected or not, the session counts only while it provably lives: a connection that
        // stays up but gets no answers is as good as none.
        let Some(deadline) = shared.valid_until(generation) else {
            tracing::warn!(
                session = format_args!("{session_id:#x}"),
                "session validity passed without a reconnect"
            );
            return true;
        };
        tokio::select! {
            _ = shared.closed.cancelled() => return false,
            state = watcher.changed() => raw = state,
            // Judged again at the top: a request answered meanwhile moved the deadline.
            _ = tokio::time::sleep_until(deadline) => {}
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    const TIMEOUT: Duration = Duration::from_secs(10);

    #[tokio::test(start_paused = true)]
    async fn valid_until_is_last_acknowledged_send_plus_timeout_minus_margin() {
        let sent = Instant::now();
        assert_eq!(validity_margin(TIMEOUT), Duration::from_secs(1));
        assert_eq!(valid_until(sent, TIMEOUT), sent + Duration::from_secs(9));
        // Measured from the send, not from when the reply arrived or the link dropped.
        tokio::time::advance(Duration::from_secs(3)).await;
        assert_eq!(
            still_valid(Some(sent), TIMEOUT, Instant::now()),
            Some(sent + Duration::from_secs(9))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn validity_ends_at_the_deadline_not_a_full_timeout_after_a_disconnect() {
        let sent = Instant::now();
        // The link drops 4 s after the last answered ping; a disconnect-based rule (Curator's)
        // would wait until 14 s, five seconds after a server may have expired the session.
        tokio::time::advance(Duration::from_secs(4)).await;
        let deadline = still_valid(Some(sent), TIMEOUT, Instant::now()).expect("valid at 4 s");
        tokio::time::advance(Duration::from_millis(4_999)).await;
        assert_eq!(
            still_valid(Some(sent), TIMEOUT, Instant::now()),
            Some(deadline),
            "still valid 1 ms before the deadline"
        );
        tokio::time::advance(Duration::from_millis(1)).await;
        assert_eq!(still_valid(Some(sent), TIMEOUT, Instant::now()), None);
        // A request answered meanwhile (a reconnect's ConnectRequest, a ping) moves it on.
        let resent = Instant::now();
        assert_eq!(
            still_valid(Some(resent), TIMEOUT, Instant::now()),
            Some(resent + Duration::from_secs(9))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn nothing_acknowledged_is_never_valid() {
        assert_eq!(still_valid(None, TIMEOUT, Instant::now()), None);
    }

    #[test]
    fn what_a_session_held_survives_suspended_but_not_lost_or_a_new_generation() {
        let at = |state, generation| SessionEvent {
            state,
            generation,
            session_id: 7,
        };
        for state in [
            SessionState::Connected,
            SessionState::Suspended,
            SessionState::Reconnected,
        ] {
            assert!(at(state, 3).keeps(3), "{state:?}");
            assert!(!at(state, 4).keeps(3), "{state:?} of the next session");
        }
        assert!(!at(SessionState::Lost, 3).keeps(3));
        assert!(!at(SessionState::Closed, 3).keeps(3));
    }

    #[test]
    fn margin_scales_with_the_timeout() {
        for ms in [200u64, 4_000, 30_000, 40_000] {
            let timeout = Duration::from_millis(ms);
            let margin = validity_margin(timeout);
            assert_eq!(margin, timeout / 10);
            // 200 times the worst clock-rate error NTP allows (500 ppm).
            assert!(margin >= timeout * 500 / 1_000_000 * 200);
        }
    }
}
