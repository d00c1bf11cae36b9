//! Curator's distributed atomics: [`DistributedAtomicValue`] (bytes) and
//! [`DistributedAtomicLong`] (an 8-byte big-endian `i64`, Curator's encoding), with Curator's
//! two modes:
//! - **optimistic**: read the node, compute, write with the read version; on a conflict
//!   (`BadVersion`, or `NodeExists`/`NoNode` around the first create) try again, sleeping as the
//!   retry policy says, until it gives up;
//! - **promoted to lock** ([`PromotedToLock`]): when the optimistic tries give up, take a mutex
//!   (Curator's `InterProcessMutex` layout at the lock path, shared with Java) and try again
//!   under it with the promoted policy. Under contention the lock serialises the writers, so
//!   the promoted tries rarely conflict (only with writers still in their optimistic phase).
//!
//! As in Curator, an operation that runs out of tries is not an error: the result says
//! [`AtomicResult::succeeded`] `false`, with [`AtomicStats`] on the tries. A connection loss
//! under a write is returned as the error, since the write may have been applied and a retry
//! could apply it twice (Curator's client-level retry can; zkit does not guess).
//!
//! The choice after a conflict is the pure [`after_conflict`].
//!
//! ```no_run
//! # async fn demo(session: zkit::Session) -> zkit::Result<()> {
//! use std::time::Duration;
//! use zkit::atomic::{AtomicOptions, DistributedAtomicLong, PromotedToLock};
//! use zkit::RetryPolicy;
//! let options = AtomicOptions {
//!     retry: RetryPolicy::NTimes { n: 3, sleep: Duration::from_millis(10) },
//!     promoted: Some(PromotedToLock::new("/counters/hits-lock")),
//! };
//! let hits = DistributedAtomicLong::new(&session, "/counters/hits", options)?;
//! let result = hits.increment().await?;
//! if result.succeeded {
//!     println!("{:?} -> {:?}", result.pre, result.post);
//! }
//! # Ok(()) }
//! ```

use std::time::Duration;

use tokio::time::Instant;
use zkit_client as zk;

use crate::counter::decode_i64;
use crate::error::{Error, Result};
use crate::lock::Mutex;
use crate::retry::RetryPolicy;
use crate::session::Session;

/// Curator's `PromotedToLock`: where the mutex is, how long to wait for it, and how to retry
/// under it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromotedToLock {
    /// The mutex directory (Curator's `lockPath`).
    pub lock_path: String,
    /// How long to wait for the mutex (`None`: as long as it takes; Curator's default).
    pub max_lock_time: Option<Duration>,
    /// Retries under the mutex (Curator's default: none, `RetryNTimes(0, 0)`).
    pub retry: RetryPolicy,
}

impl PromotedToLock {
    /// Promotion to the mutex at `lock_path`, waiting for it as long as it takes, one try
    /// under it.
    pub fn new(lock_path: &str) -> Self {
        PromotedToLock {
            lock_path: lock_path.to_string(),
            max_lock_time: None,
            retry: RetryPolicy::Never,
        }
    }
}

/// How an atomic retries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AtomicOptions {
    /// Optimistic retries (sleeps between tries).
    pub retry: RetryPolicy,
    /// Promotion to a lock when the optimistic tries give up (`None`: give up then).
    pub promoted: Option<PromotedToLock>,
}

impl Default for AtomicOptions {
    /// Exponential backoff from 10 ms (at most 500 ms a sleep), 10 retries, no promotion.
    fn default() -> Self {
        AtomicOptions {
            retry: RetryPolicy::ExponentialBackoff {
                base: Duration::from_millis(10),
                max_sleep: Duration::from_millis(500),
                max_retries: 10,
            },
            promoted: None,
        }
    }
}

/// Curator's `AtomicStats`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AtomicStats {
    /// Tries in the optimistic phase.
    pub optimistic_tries: u32,
    /// Tries under the lock.
    pub promoted_tries: u32,
    /// Time in the optimistic phase.
    pub optimistic_time: Duration,
    /// Time in the promoted phase (waiting for the lock included).
    pub promoted_time: Duration,
}

/// The outcome of an atomic operation (Curator's `AtomicValue`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AtomicResult<V> {
    /// Whether the value was changed (always true for reads).
    pub succeeded: bool,
    /// The value before (the last one read when it failed).
    pub pre: V,
    /// The value after (when it failed: the value it tried to write, if any).
    pub post: Option<V>,
    /// Tries and times.
    pub stats: AtomicStats,
}

/// The phase an operation is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Trying without the lock.
    Optimistic,
    /// Trying under the lock.
    Promoted,
}

/// What to do after a conflicting try.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterConflict {
    /// Sleep this long and try again in the same phase.
    Retry(Duration),
    /// Take the lock and try under it.
    Promote,
    /// Stop: the operation did not succeed.
    GiveUp,
}

/// After the `retries`-th retry of `phase` (0 before the first retry) and `elapsed` in that
/// phase: retry, promote, or give up (Curator's `tryOptimistic` / `tryWithMutex` loops).
pub fn after_conflict(
    phase: Phase,
    retries: u32,
    elapsed: Duration,
    options: &AtomicOptions,
) -> AfterConflict {
    let policy = match phase {
        Phase::Optimistic => &options.retry,
        Phase::Promoted => match &options.promoted {
            Some(p) => &p.retry,
            None => return AfterConflict::GiveUp,
        },
    };
    match policy.next_sleep(retries, elapsed) {
        Some(sleep) => AfterConflict::Retry(sleep),
        None if phase == Phase::Optimistic && options.promoted.is_some() => AfterConflict::Promote,
        None => AfterConflict::GiveUp,
    }
}

/// One try's outcome.
enum Try {
    Done { pre: Option<Vec<u8>>, post: Vec<u8> },
    Conflict { pre: Option<Vec<u8>> },
}

/// Curator's `DistributedAtomicValue`: a byte value with atomic updates. See the module docs.
#[derive(Debug, Clone)]
pub struct DistributedAtomicValue {
    session: Session,
    path: String,
    options: AtomicOptions,
}

impl DistributedAtomicValue {
    /// The value at `path` (a missing node reads as `None`).
    ///
    /// # Errors
    /// [`Error::BadArguments`] for an invalid path.
    pub fn new(session: &Session, path: &str, options: AtomicOptions) -> Result<Self> {
        Ok(DistributedAtomicValue {
            session: session.clone(),
            path: crate::config::resolve_key("/", path)?,
            options,
        })
    }

    /// The node's path.
    pub fn path(&self) -> &str {
        &self.path
    }

    async fn read(&self, client: &zk::Client) -> Result<Option<(Vec<u8>, i32)>> {
        match client.get_data(&self.path).await {
            Ok((data, stat)) => Ok(Some((data, stat.version))),
            Err(zk::Error::NoNode) => Ok(None),
            Err(err) => Err(err.into()),
        }
    }

    async fn create(&self, client: &zk::Client, data: &[u8]) -> std::result::Result<(), zk::Error> {
        let options = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
        match client.create(&self.path, data, &options).await {
            Ok(_) => Ok(()),
            Err(zk::Error::NoNode) => {
                if let Some((parent, _)) = self.path.rsplit_once('/') {
                    if !parent.is_empty() {
                        crate::discovery::make_parents(client, parent)
                            .await
                            .map_err(|e| zk::Error::UnexpectedError(e.to_string()))?;
                    }
                }
                client.create(&self.path, data, &options).await.map(|_| ())
            }
            Err(err) => Err(err),
        }
    }

    /// The current value (`None`: the node does not exist).
    ///
    /// # Errors
    /// ZooKeeper errors.
    pub async fn get(&self) -> Result<Option<Vec<u8>>> {
        Ok(self.read(&self.session.client()).await?.map(|(d, _)| d))
    }

    /// Sets the value unconditionally (Curator's `forceSet`).
    ///
    /// # Errors
    /// ZooKeeper errors.
    pub async fn force_set(&self, value: &[u8]) -> Result<()> {
        let client = self.session.client();
        loop {
            match client.set_data(&self.path, value, None).await {
                Ok(_) => return Ok(()),
                Err(zk::Error::NoNode) => match self.create(&client, value).await {
                    Ok(()) => return Ok(()),
                    Err(zk::Error::NodeExists) => continue,
                    Err(err) => return Err(err.into()),
                },
                Err(err) => return Err(err.into()),
            }
        }
    }

    /// Creates the node with `value` if it does not exist; `false` if it does (Curator's
    /// `initialize`).
    ///
    /// # Errors
    /// ZooKeeper errors.
    pub async fn initialize(&self, value: &[u8]) -> Result<bool> {
        match self.create(&self.session.client(), value).await {
            Ok(()) => Ok(true),
            Err(zk::Error::NodeExists) => Ok(false),
            Err(err) => Err(err.into()),
        }
    }

    /// Sets `new` if the current value is `expected` (one try, no retries: Curator's
    /// `compareAndSet`). A missing node never matches.
    ///
    /// # Errors
    /// ZooKeeper errors.
    pub async fn compare_and_set(
        &self,
        expected: &[u8],
        new: &[u8],
    ) -> Result<AtomicResult<Option<Vec<u8>>>> {
        let client = self.session.client();
        let current = self.read(&client).await?;
        let pre = current.as_ref().map(|(d, _)| d.clone());
        let mut result = AtomicResult {
            succeeded: false,
            pre,
            post: None,
            stats: AtomicStats {
                optimistic_tries: 1,
                ..AtomicStats::default()
            },
        };
        if let Some((data, version)) = current {
            if data == expected {
                match client.set_data(&self.path, new, Some(version)).await {
                    Ok(_) => {
                        result.succeeded = true;
                        result.post = Some(Some(new.to_vec()));
                    }
                    Err(zk::Error::BadVersion | zk::Error::NoNode) => {}
                    Err(err) => return Err(err.into()),
                }
            }
        }
        Ok(result)
    }

    /// Sets `new` whatever the value is, with the optimistic (then promoted) tries.
    ///
    /// # Errors
    /// ZooKeeper errors (see the module docs on connection loss).
    pub async fn try_set(&self, new: &[u8]) -> Result<AtomicResult<Option<Vec<u8>>>> {
        let new = new.to_vec();
        self.update(|_| Ok(new.clone())).await
    }

    /// The read-compute-write loop shared with [`DistributedAtomicLong`].
    pub(crate) async fn update(
        &self,
        mut make: impl FnMut(Option<&[u8]>) -> Result<Vec<u8>>,
    ) -> Result<AtomicResult<Option<Vec<u8>>>> {
        let mut stats = AtomicStats::default();
        let mut last_pre: Option<Vec<u8>>;
        let mut last_post = None;
        let mut phase = Phase::Optimistic;
        let mut phase_start = Instant::now();
        let mut retries = 0;
        let mut guard = None;
        let outcome = loop {
            match phase {
                Phase::Optimistic => stats.optimistic_tries += 1,
                Phase::Promoted => stats.promoted_tries += 1,
            }
            match self.try_once(&mut make, &mut last_post).await {
                Ok(Try::Done { pre, post }) => {
                    break Ok(AtomicResult {
                        succeeded: true,
                        pre,
                        post: Some(Some(post)),
                        stats,
                    })
                }
                Ok(Try::Conflict { pre }) => last_pre = pre,
                Err(err) => break Err(err),
            }
            match after_conflict(phase, retries, phase_start.elapsed(), &self.options) {
                AfterConflict::Retry(sleep) => {
                    retries += 1;
                    tokio::time::sleep(sleep).await;
                }
                AfterConflict::Promote => {
                    stats.optimistic_time = phase_start.elapsed();
                    phase = Phase::Promoted;
                    phase_start = Instant::now();
                    retries = 0;
                    let Some(promoted) = &self.options.promoted else {
                        break Ok(failed(last_pre, last_post, stats));
                    };
                    let mutex = Mutex::new(&self.session, &promoted.lock_path);
                    let locked = match promoted.max_lock_time {
                        None => mutex.lock().await,
                        Some(t) => mutex.try_lock_for(t).await,
                    };
                    match locked {
                        Ok(g) => guard = Some(g),
                        // Curator: the lock was not acquired in time; the operation fails.
                        Err(Error::Timeout(_)) => break Ok(failed(last_pre, last_post, stats)),
                        Err(err) => break Err(err),
                    }
                }
                AfterConflict::GiveUp => break Ok(failed(last_pre, last_post, stats)),
            }
        };
        let promoted_time = phase_start.elapsed();
        if let Some(guard) = guard {
            let _ = guard.release().await;
        }
        outcome.map(|mut r| {
            match phase {
                Phase::Optimistic => r.stats.optimistic_time = promoted_time,
                Phase::Promoted => r.stats.promoted_time = promoted_time,
            }
            r
        })
    }

    async fn try_once(
        &self,
        make: &mut impl FnMut(Option<&[u8]>) -> Result<Vec<u8>>,
        last_post: &mut Option<Vec<u8>>,
    ) -> Result<Try> {
        let client = self.session.client();
        let current = self.read(&client).await?;
        let pre = current.as_ref().map(|(d, _)| d.clone());
        let new = make(pre.as_deref())?;
        *last_post = Some(new.clone());
        let written = match &current {
            None => self.create(&client, &new).await,
            Some((_, version)) => client
                .set_data(&self.path, &new, Some(*version))
                .await
                .map(|_| ()),
        };
        match written {
            Ok(()) => Ok(Try::Done { pre, post: new }),
            Err(zk::Error::NodeExists | zk::Error::BadVersion | zk::Error::NoNode) => {
                Ok(Try::Conflict { pre })
            }
            Err(err) => Err(err.into()),
        }
    }
}

fn failed(
    pre: Option<Vec<u8>>,
    post: Option<Vec<u8>>,
    stats: AtomicStats,
) -> AtomicResult<Option<Vec<u8>>> {
    AtomicResult {
        succeeded: false,
        pre,
        post: post.map(Some),
        stats,
    }
}

/// Curator's `DistributedAtomicLong`: an `i64` stored as 8 big-endian bytes (a missing or empty
/// node reads as 0), shared with Java's `DistributedAtomicLong` and zkit's
/// [`crate::counter::AtomicCounter`].
#[derive(Debug, Clone)]
pub struct DistributedAtomicLong {
    value: DistributedAtomicValue,
}

fn long_result(r: AtomicResult<Option<Vec<u8>>>) -> Result<AtomicResult<i64>> {
    let decode = |v: Option<Vec<u8>>| decode_i64(v.as_deref().unwrap_or_default());
    Ok(AtomicResult {
        succeeded: r.succeeded,
        pre: decode(r.pre)?,
        post: r.post.map(decode).transpose()?,
        stats: r.stats,
    })
}

impl DistributedAtomicLong {
    /// The counter at `path`.
    ///
    /// # Errors
    /// [`Error::BadArguments`] for an invalid path.
    pub fn new(session: &Session, path: &str, options: AtomicOptions) -> Result<Self> {
        Ok(DistributedAtomicLong {
            value: DistributedAtomicValue::new(session, path, options)?,
        })
    }

    /// The current value (0 when missing).
    ///
    /// # Errors
    /// ZooKeeper errors; [`Error::Unexpected`] when the node does not hold 8 bytes.
    pub async fn get(&self) -> Result<i64> {
        decode_i64(self.value.get().await?.as_deref().unwrap_or_default())
    }

    /// Adds `delta` (optimistic, then promoted).
    ///
    /// # Errors
    /// ZooKeeper errors; [`Error::BadArguments`] on overflow; [`Error::Unexpected`] for
    /// undecodable data.
    pub async fn add(&self, delta: i64) -> Result<AtomicResult<i64>> {
        let r = self
            .value
            .update(|pre| {
                let pre = decode_i64(pre.unwrap_or_default())?;
                let post = pre
                    .checked_add(delta)
                    .ok_or_else(|| Error::BadArguments(format!("{pre} + {delta} overflows")))?;
                Ok(post.to_be_bytes().to_vec())
            })
            .await?;
        long_result(r)
    }

    /// `add(1)`.
    ///
    /// # Errors
    /// As [`DistributedAtomicLong::add`].
    pub async fn increment(&self) -> Result<AtomicResult<i64>> {
        self.add(1).await
    }

    /// `add(-1)`.
    ///
    /// # Errors
    /// As [`DistributedAtomicLong::add`].
    pub async fn decrement(&self) -> Result<AtomicResult<i64>> {
        self.add(-1).await
    }

    /// `add(-delta)`.
    ///
    /// # Errors
    /// As [`DistributedAtomicLong::add`].
    pub async fn subtract(&self, delta: i64) -> Result<AtomicResult<i64>> {
        let negated = delta
            .checked_neg()
            .ok_or_else(|| Error::BadArguments(format!("cannot subtract {delta}")))?;
        self.add(negated).await
    }

    /// Sets `value` (optimistic, then promoted).
    ///
    /// # Errors
    /// As [`DistributedAtomicLong::add`].
    pub async fn try_set(&self, value: i64) -> Result<AtomicResult<i64>> {
        long_result(self.value.try_set(&value.to_be_bytes()).await?)
    }

    /// Sets `new` if the value is `expected` (one try).
    ///
    /// # Errors
    /// As [`DistributedAtomicLong::add`].
    pub async fn compare_and_set(&self, expected: i64, new: i64) -> Result<AtomicResult<i64>> {
        long_result(
            self.value
                .compare_and_set(&expected.to_be_bytes(), &new.to_be_bytes())
                .await?,
        )
    }

    /// Creates the counter with `value` if missing; `false` if it exists.
    ///
    /// # Errors
    /// ZooKeeper errors.
    pub async fn initialize(&self, value: i64) -> Result<bool> {
        self.value.initialize(&value.to_be_bytes()).await
    }

    /// Sets `value` unconditionally.
    ///
    /// # Errors
    /// ZooKeeper errors.
    pub async fn force_set(&self, value: i64) -> Result<()> {
        self.value.force_set(&value.to_be_bytes()).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn optimistic_then_promoted_then_give_up() {
        let ms = Duration::from_millis;
        let options = AtomicOptions {
            retry: RetryPolicy::NTimes { n: 2, sleep: ms(5) },
            promoted: Some(PromotedToLock {
                retry: RetryPolicy::NTimes { n: 1, sleep: ms(7) },
                ..PromotedToLock::new("/lock")
            }),
        };
        use AfterConflict::*;
        assert_eq!(
            after_conflict(Phase::Optimistic, 0, ms(0), &options),
            Retry(ms(5))
        );
        assert_eq!(
            after_conflict(Phase::Optimistic, 1, ms(5), &options),
            Retry(ms(5))
        );
        assert_eq!(
            after_conflict(Phase::Optimistic, 2, ms(10), &options),
            Promote
        );
        assert_eq!(
            after_conflict(Phase::Promoted, 0, ms(0), &options),
            Retry(ms(7))
        );
        assert_eq!(after_conflict(Phase::Promoted, 1, ms(7), &options), GiveUp);
        // Without promotion the optimistic phase gives up.
        let plain = AtomicOptions {
            promoted: None,
            ..options.clone()
        };
        assert_eq!(after_conflict(Phase::Optimistic, 2, ms(10), &plain), GiveUp);
        assert_eq!(after_conflict(Phase::Promoted, 0, ms(0), &plain), GiveUp);
        // Curator's default promoted policy: one try under the lock, no retry.
        let default = AtomicOptions {
            retry: RetryPolicy::Never,
            promoted: Some(PromotedToLock::new("/lock")),
        };
        assert_eq!(
            after_conflict(Phase::Optimistic, 0, ms(0), &default),
            Promote
        );
        assert_eq!(after_conflict(Phase::Promoted, 0, ms(0), &default), GiveUp);
    }
}
