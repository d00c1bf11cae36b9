//! Circuit breaking for connection states (Curator's `CircuitBreakingConnectionStateListener`):
//! a flapping connection must not make recipes thrash. Recipes react to `Suspended` and `Lost`
//! by dropping what they hold and starting over (a leader latch deletes its node and contends
//! again); during a network outage the raw states can flip many times a second.
//!
//! The rule, Curator's:
//! - While the circuit is **closed**, every state passes through. The first state that is not
//!   connected (`Suspended` or `Lost`) passes through *and opens the circuit*, if the retry
//!   policy allows one retry; the policy's sleep is how long it stays open.
//! - While **open**, states are swallowed (only the latest is remembered), except that the first
//!   `Lost` after a `Suspended` is passed through once: losing the session is never hidden.
//! - When the sleep ends: if the latest state is connected, the circuit closes and that state is
//!   passed through when it differs from the one that opened the circuit; otherwise the policy
//!   is asked again (retries so far, time since opening) and the circuit stays open for the next
//!   sleep, or, once the policy gives up, closes and passes the latest state through (if it
//!   differs from the opening one).
//! - `Closed` (the session layer was closed) always passes through and closes the circuit.
//!
//! [`CircuitBreaker`] is the pure state machine (time is an argument), unit-tested with paused
//! time; [`CircuitBreakingListener`] is the thin async driver over [`Session::subscribe`].
//!
//! ```no_run
//! # async fn demo(session: zkit::Session) -> zkit::Result<()> {
//! use std::time::Duration;
//! use zkit::circuit_breaker::CircuitBreakingListener;
//! use zkit::RetryPolicy;
//! // Stay deaf to flaps for 5 s after the first Suspended, at most 3 times in a row.
//! let policy = RetryPolicy::NTimes { n: 3, sleep: Duration::from_secs(5) };
//! let mut states = CircuitBreakingListener::new(&session, policy);
//! loop {
//!     let event = states.next().await?;
//!     println!("react to {:?}", event.state); // rarely, even when the network flaps
//! }
//! # }
//! ```

use tokio::sync::broadcast;
use tokio::time::Instant;

use crate::error::{Error, Result};
use crate::retry::RetryPolicy;
use crate::session::{Session, SessionEvent, SessionState};

/// What the breaker says after an input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    /// The state to pass on to the listener, if any.
    pub forward: Option<SessionState>,
    /// When to call [`CircuitBreaker::on_check`] next (`None`: no check pending).
    pub check_at: Option<Instant>,
}

#[derive(Debug, Clone, Copy)]
struct Open {
    since: Instant,
    retries: u32,
    initial: SessionState,
    last: SessionState,
    lost_sent: bool,
    check_at: Instant,
}

/// The pure circuit-breaking state machine. See the module docs for the rules.
#[derive(Debug, Clone)]
pub struct CircuitBreaker {
    policy: RetryPolicy,
    open: Option<Open>,
}

impl CircuitBreaker {
    /// A closed breaker whose open periods come from `policy`.
    pub fn new(policy: RetryPolicy) -> Self {
        CircuitBreaker { policy, open: None }
    }

    /// True while the circuit is open (states are being swallowed).
    pub fn is_open(&self) -> bool {
        self.open.is_some()
    }

    /// The retries the policy granted since the circuit opened (0 when closed).
    pub fn retry_count(&self) -> u32 {
        self.open.map_or(0, |o| o.retries)
    }

    fn step(&self, forward: Option<SessionState>) -> Step {
        Step {
            forward,
            check_at: self.open.map(|o| o.check_at),
        }
    }

    /// A new state from the session at `now`.
    pub fn on_state(&mut self, state: SessionState, now: Instant) -> Step {
        if state == SessionState::Closed {
            self.open = None;
            return self.step(Some(state));
        }
        match self.open.as_mut() {
            None => {
                if !state.is_connected() {
                    if let Some(sleep) = self.policy.next_sleep(0, std::time::Duration::ZERO) {
                        self.open = Some(Open {
                            since: now,
                            retries: 1,
                            initial: state,
                            last: state,
                            lost_sent: state == SessionState::Lost,
                            check_at: now + sleep,
                        });
                    }
                }
                self.step(Some(state))
            }
            Some(open) => {
                if open.lost_sent || state != SessionState::Lost {
                    open.last = state;
                    self.step(None)
                } else {
                    open.lost_sent = true;
                    open.last = SessionState::Lost;
                    open.initial = SessionState::Lost;
                    self.step(Some(SessionState::Lost))
                }
            }
        }
    }

    /// The open period ended (call at the [`Step::check_at`] time; earlier calls do nothing).
    pub fn on_check(&mut self, now: Instant) -> Step {
        let Some(open) = self.open.as_mut() else {
            return self.step(None);
        };
        if now < open.check_at {
            return self.step(None);
        }
        if !open.last.is_connected() {
            if let Some(sleep) = self.policy.next_sleep(open.retries, now - open.since) {
                open.retries += 1;
                open.check_at = now + sleep;
                return self.step(None);
            }
        }
        let (initial, last) = (open.initial, open.last);
        self.open = None;
        self.step((last != initial).then_some(last))
    }
}

/// Session states through a [`CircuitBreaker`]: a pull-based stream of the states a recipe
/// should react to. Each forwarded state carries the generation and session id of the latest
/// raw event.
#[derive(Debug)]
pub struct CircuitBreakingListener {
    events: broadcast::Receiver<SessionEvent>,
    breaker: CircuitBreaker,
    latest: SessionEvent,
    check_at: Option<Instant>,
    closed: bool,
}

impl CircuitBreakingListener {
    /// Listens to `session`'s state transitions from now on, through a breaker with `policy`.
    pub fn new(session: &Session, policy: RetryPolicy) -> Self {
        CircuitBreakingListener {
            events: session.subscribe(),
            breaker: CircuitBreaker::new(policy),
            latest: session.state(),
            check_at: None,
            closed: false,
        }
    }

    /// Whether the circuit is open now.
    pub fn is_open(&self) -> bool {
        self.breaker.is_open()
    }

    /// The next state to react to.
    ///
    /// # Errors
    /// [`Error::Closed`] after `Closed` was returned (or the session went away).
    ///
    /// # Cancellation safety
    /// Cancel-safe: raw events not yet read stay queued in the subscription, and a pending
    /// check is remembered.
    pub async fn next(&mut self) -> Result<SessionEvent> {
        loop {
            if self.closed {
                // `Closed` was returned (it always passes through): nothing follows it.
                return Err(Error::Closed);
            }
            let check = async {
                match self.check_at {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            let step = tokio::select! {
                () = check => self.breaker.on_check(Instant::now()),
                event = self.events.recv() => match event {
                    Ok(event) => {
                        self.latest = event;
                        self.breaker.on_state(event.state, Instant::now())
                    }
                    // Missed transitions: what matters is the latest state.
                    Err(broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(broadcast::error::RecvError::Closed) => return Err(Error::Closed),
                },
            };
            self.check_at = step.check_at;
            if let Some(state) = step.forward {
                self.closed = state == SessionState::Closed;
                return Ok(SessionEvent {
                    state,
                    ..self.latest
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use SessionState::*;

    fn policy(n: u32, ms: u64) -> RetryPolicy {
        RetryPolicy::NTimes {
            n,
            sleep: Duration::from_millis(ms),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn first_suspended_passes_and_further_flaps_are_swallowed() {
        let mut b = CircuitBreaker::new(policy(3, 1000));
        let t0 = Instant::now();
        assert_eq!(b.on_state(Connected, t0).forward, Some(Connected));
        let step = b.on_state(Suspended, t0);
        assert_eq!(step.forward, Some(Suspended));
        assert_eq!(step.check_at, Some(t0 + Duration::from_millis(1000)));
        assert!(b.is_open());
        // The flapping: nothing passes.
        for (i, s) in [Reconnected, Suspended, Reconnected, Suspended, Reconnected]
            .into_iter()
            .enumerate()
        {
            let at = t0 + Duration::from_millis(100 * (i as u64 + 1));
            assert_eq!(b.on_state(s, at).forward, None, "{s:?}");
        }
        // A check before its time does nothing.
        assert_eq!(b.on_check(t0 + Duration::from_millis(999)).forward, None);
        assert!(b.is_open());
        // At the end of the window the connection is up: close, forward the change.
        let step = b.on_check(t0 + Duration::from_millis(1000));
        assert_eq!(
            step,
            Step {
                forward: Some(Reconnected),
                check_at: None
            }
        );
        assert!(!b.is_open());
        // Closed again: the next Suspended passes and opens it again.
        assert_eq!(
            b.on_state(Suspended, t0 + Duration::from_secs(2)).forward,
            Some(Suspended)
        );
        assert!(b.is_open());
    }

    #[tokio::test(start_paused = true)]
    async fn lost_is_sent_once_even_while_open() {
        let mut b = CircuitBreaker::new(policy(5, 1000));
        let t0 = Instant::now();
        assert_eq!(b.on_state(Suspended, t0).forward, Some(Suspended));
        assert_eq!(
            b.on_state(Lost, t0 + Duration::from_millis(10)).forward,
            Some(Lost)
        );
        assert_eq!(
            b.on_state(Lost, t0 + Duration::from_millis(20)).forward,
            None
        );
        assert_eq!(
            b.on_state(Connected, t0 + Duration::from_millis(30))
                .forward,
            None
        );
        // The new session is up at the check: Connected differs from the (now) initial Lost.
        assert_eq!(
            b.on_check(t0 + Duration::from_millis(1000)).forward,
            Some(Connected)
        );
        // A circuit opened by Lost itself does not send Lost twice.
        let mut b = CircuitBreaker::new(policy(5, 1000));
        assert_eq!(b.on_state(Lost, t0).forward, Some(Lost));
        assert_eq!(
            b.on_state(Lost, t0 + Duration::from_millis(1)).forward,
            None
        );
    }

    #[tokio::test(start_paused = true)]
    async fn stays_open_while_disconnected_until_the_policy_gives_up() {
        let mut b = CircuitBreaker::new(policy(2, 500));
        let t0 = Instant::now();
        b.on_state(Suspended, t0);
        assert_eq!(b.retry_count(), 1);
        // Still down at the first check: the policy grants a second period.
        let step = b.on_check(t0 + Duration::from_millis(500));
        assert_eq!(step.forward, None);
        assert_eq!(step.check_at, Some(t0 + Duration::from_millis(1000)));
        assert_eq!(b.retry_count(), 2);
        // Still down: retries exhausted, the circuit closes; the latest state equals the
        // opening one, so nothing is sent.
        let step = b.on_check(t0 + Duration::from_millis(1000));
        assert_eq!(
            step,
            Step {
                forward: None,
                check_at: None
            }
        );
        assert!(!b.is_open());
        // With a different latest state, closing after exhaustion sends it.
        let mut b = CircuitBreaker::new(policy(1, 500));
        b.on_state(Suspended, t0);
        b.on_state(Lost, t0 + Duration::from_millis(1)); // forwarded
        b.on_state(Suspended, t0 + Duration::from_millis(2));
        assert_eq!(
            b.on_check(t0 + Duration::from_millis(500)).forward,
            Some(Suspended)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn never_policy_breaks_nothing_and_closed_always_passes() {
        let mut b = CircuitBreaker::new(RetryPolicy::Never);
        let t0 = Instant::now();
        for s in [Suspended, Reconnected, Suspended, Lost, Connected] {
            assert_eq!(b.on_state(s, t0).forward, Some(s));
            assert!(!b.is_open());
        }
        let mut b = CircuitBreaker::new(policy(3, 1000));
        b.on_state(Suspended, t0);
        assert_eq!(b.on_state(Closed, t0).forward, Some(Closed));
        assert!(!b.is_open());
    }
}
