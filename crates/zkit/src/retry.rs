//! Retry policies (Curator's `RetryPolicy` family) and [`retry`], which re-runs an *idempotent*
//! operation after a recoverable error ([`Error::is_recoverable`]).
//!
//! The policy itself is pure: [`RetryPolicy::next_sleep`] maps (retries so far, time elapsed) to
//! "sleep this long and try again" or "give up", so it is unit-tested without a clock. This module
//! must not be used to retry non-idempotent operations such as sequential creates; those go
//! through [`crate::Session::create_protected_sequential`].

use std::future::Future;
use std::time::Duration;

use rand::Rng;

use crate::error::Error;

/// When to retry an operation that failed with a recoverable error, and how long to sleep first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RetryPolicy {
    /// Curator's `ExponentialBackoffRetry`/`BoundedExponentialBackoffRetry`: the n-th retry
    /// (0-based) sleeps `base * random(1..=2^(n+1))`, at most `max_sleep`, for at most
    /// `max_retries` retries.
    ExponentialBackoff {
        /// Base sleep time.
        base: Duration,
        /// Upper bound of one sleep.
        max_sleep: Duration,
        /// How many retries (not counting the first attempt).
        max_retries: u32,
    },
    /// Exponential backoff bounded both in retries and in total elapsed time: gives up at
    /// whichever comes first.
    Bounded {
        /// Base sleep time.
        base: Duration,
        /// Upper bound of one sleep.
        max_sleep: Duration,
        /// How many retries.
        max_retries: u32,
        /// Total time after which no retry starts.
        max_elapsed: Duration,
    },
    /// Curator's `RetryNTimes`: `n` retries, `sleep` apart.
    NTimes {
        /// How many retries.
        n: u32,
        /// Sleep between attempts.
        sleep: Duration,
    },
    /// Curator's `RetryUntilElapsed`: retry `sleep` apart until `max_elapsed` has passed.
    UntilElapsed {
        /// Total time after which no retry starts.
        max_elapsed: Duration,
        /// Sleep between attempts.
        sleep: Duration,
    },
    /// Never retry.
    Never,
}

impl Default for RetryPolicy {
    /// Exponential backoff from 100 ms, at most 2 s a sleep, 10 retries.
    fn default() -> Self {
        RetryPolicy::ExponentialBackoff {
            base: Duration::from_millis(100),
            max_sleep: Duration::from_secs(2),
            max_retries: 10,
        }
    }
}

/// Exponential sleep for retry `n` (0-based), with `factor` in `1..=2^(n+1)` chosen by the caller.
fn backoff(base: Duration, max_sleep: Duration, factor: u32) -> Duration {
    base.saturating_mul(factor).min(max_sleep)
}

fn backoff_factor(retries: u32) -> u32 {
    // Cap the exponent as Curator does (MAX_RETRIES_LIMIT = 29) so the shift cannot overflow.
    let upper = 1u32 << (retries.min(29) + 1);
    rand::thread_rng().gen_range(1..=upper)
}

impl RetryPolicy {
    /// After `retries` retries (0 before the first retry) and `elapsed` since the first attempt,
    /// returns how long to sleep before the next attempt, or `None` to give up.
    pub fn next_sleep(&self, retries: u32, elapsed: Duration) -> Option<Duration> {
        match *self {
            RetryPolicy::ExponentialBackoff {
                base,
                max_sleep,
                max_retries,
            } => (retries < max_retries).then(|| backoff(base, max_sleep, backoff_factor(retries))),
            RetryPolicy::Bounded {
                base,
                max_sleep,
                max_retries,
                max_elapsed,
            } => (retries < max_retries && elapsed < max_elapsed)
                .then(|| backoff(base, max_sleep, backoff_factor(retries))),
            RetryPolicy::NTimes { n, sleep } => (retries < n).then_some(sleep),
            RetryPolicy::UntilElapsed { max_elapsed, sleep } => {
                (elapsed < max_elapsed).then_some(sleep)
            }
            RetryPolicy::Never => None,
        }
    }
}

/// Runs `op` until it succeeds, fails with a non-recoverable error, or `policy` gives up; between
/// attempts it sleeps as the policy says. Returns the last error when giving up.
///
/// `op` is called afresh for every attempt, so it should fetch the current client
/// ([`crate::Session::client`]) inside: after a session is replaced the next attempt uses the
/// new one.
///
/// Only for idempotent operations (reads, `set_data` with a version, deletes where `NoNode` is
/// acceptable): a retried non-idempotent write may apply twice.
///
/// # Cancellation safety
/// Dropping the future stops retrying; an attempt in flight may or may not have been applied.
pub async fn retry<T, E, F, Fut>(policy: &RetryPolicy, mut op: F) -> Result<T, Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
    E: Into<Error>,
{
    let start = tokio::time::Instant::now();
    let mut retries = 0u32;
    loop {
        match op().await.map_err(Into::into) {
            Ok(value) => return Ok(value),
            Err(err) if err.is_recoverable() => match policy.next_sleep(retries, start.elapsed()) {
                Some(sleep) => {
                    tracing::debug!(retries, ?sleep, error = %err, "retrying");
                    tokio::time::sleep(sleep).await;
                    retries += 1;
                }
                None => return Err(err),
            },
            Err(err) => return Err(err),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[test]
    fn policies_give_up_where_documented() {
        let ms = Duration::from_millis;
        let exp = RetryPolicy::ExponentialBackoff {
            base: ms(10),
            max_sleep: ms(50),
            max_retries: 3,
        };
        for n in 0..3 {
            let sleep = exp.next_sleep(n, Duration::ZERO).expect("retry allowed");
            assert!(sleep >= ms(10) && sleep <= ms(50), "{sleep:?}");
        }
        assert_eq!(exp.next_sleep(3, Duration::ZERO), None);
        // Large retry counts neither overflow nor exceed max_sleep.
        let big = RetryPolicy::ExponentialBackoff {
            base: ms(10),
            max_sleep: ms(50),
            max_retries: u32::MAX,
        };
        assert!(big.next_sleep(1000, Duration::ZERO).unwrap() <= ms(50));

        let bounded = RetryPolicy::Bounded {
            base: ms(1),
            max_sleep: ms(5),
            max_retries: 100,
            max_elapsed: ms(100),
        };
        assert!(bounded.next_sleep(5, ms(99)).is_some());
        assert_eq!(bounded.next_sleep(5, ms(100)), None);
        assert_eq!(bounded.next_sleep(100, ms(0)), None);

        let n = RetryPolicy::NTimes { n: 2, sleep: ms(7) };
        assert_eq!(n.next_sleep(0, ms(0)), Some(ms(7)));
        assert_eq!(n.next_sleep(1, ms(0)), Some(ms(7)));
        assert_eq!(n.next_sleep(2, ms(0)), None);

        let until = RetryPolicy::UntilElapsed {
            max_elapsed: ms(30),
            sleep: ms(3),
        };
        assert_eq!(until.next_sleep(1_000, ms(29)), Some(ms(3)));
        assert_eq!(until.next_sleep(0, ms(30)), None);

        assert_eq!(RetryPolicy::Never.next_sleep(0, ms(0)), None);
    }

    #[tokio::test(start_paused = true)]
    async fn retry_stops_on_state_errors_and_retries_connection_loss() {
        let calls = AtomicU32::new(0);
        let policy = RetryPolicy::NTimes {
            n: 5,
            sleep: Duration::from_millis(10),
        };
        let result: Result<u32, Error> = retry(&policy, || async {
            let n = calls.fetch_add(1, Ordering::SeqCst);
            if n < 2 {
                Err(zkit_client::Error::ConnectionLoss)
            } else {
                Ok(n)
            }
        })
        .await;
        assert_eq!(result, Ok(2));

        calls.store(0, Ordering::SeqCst);
        let result: Result<(), Error> = retry(&policy, || async {
            calls.fetch_add(1, Ordering::SeqCst);
            Err(Error::BadVersion)
        })
        .await;
        assert_eq!(result, Err(Error::BadVersion));
        assert_eq!(calls.load(Ordering::SeqCst), 1);

        calls.store(0, Ordering::SeqCst);
        let result: Result<(), Error> = retry(&policy, || async {
            calls.fetch_add(1, Ordering::SeqCst);
            Err(Error::OperationTimeout)
        })
        .await;
        assert_eq!(result, Err(Error::OperationTimeout));
        assert_eq!(calls.load(Ordering::SeqCst), 6, "first attempt + 5 retries");
    }
}
