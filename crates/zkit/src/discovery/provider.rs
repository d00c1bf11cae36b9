//! Choosing an instance (Curator's `ServiceProvider`): provider strategies
//! ([`ProviderStrategy`]: random, round robin, sticky — Curator's `RandomStrategy`,
//! `RoundRobinStrategy`, `StickyStrategy`) and the down-instance bookkeeping
//! ([`DownInstances`], Curator's `DownInstanceManager` with its `DownInstancePolicy`). Both are
//! pure (time and randomness are arguments); [`ServiceProvider`] puts them on a
//! [`ServiceCache`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::time::Instant;

use super::cache::ServiceCache;
use super::instance::ServiceInstance;
use crate::error::Result;

/// How a [`ServiceProvider`] picks one instance among the usable ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProviderStrategy {
    /// A uniformly random instance (Curator's `RandomStrategy`).
    Random,
    /// The instances in turn (Curator's `RoundRobinStrategy`, the provider default): the n-th
    /// call takes `instances[n % len]`.
    RoundRobin,
    /// Keeps returning the same instance while it is usable; when it goes, the inner strategy
    /// picks the next one (Curator's `StickyStrategy`). Curator compares whole instances, so an
    /// updated payload ends the stickiness there; zkit sticks to the instance *id*.
    Sticky(Box<ProviderStrategy>),
}

/// A [`ProviderStrategy`] with its state (the round-robin counter, the sticky choice).
#[derive(Debug, Clone)]
pub struct Chooser {
    strategy: ProviderStrategy,
    next: usize,
    sticky: Option<String>,
    sticky_changes: u64,
    inner: Option<Box<Chooser>>,
}

impl Chooser {
    /// A chooser following `strategy`.
    pub fn new(strategy: ProviderStrategy) -> Self {
        let inner = match &strategy {
            ProviderStrategy::Sticky(inner) => Some(Box::new(Chooser::new((**inner).clone()))),
            _ => None,
        };
        Chooser {
            strategy,
            next: 0,
            sticky: None,
            sticky_changes: 0,
            inner,
        }
    }

    /// How often a sticky chooser had to pick a new instance (Curator's
    /// `StickyStrategy.getInstanceNumber` + 1; 0 for the other strategies).
    pub fn sticky_changes(&self) -> u64 {
        self.sticky_changes
    }

    /// Picks the index of one of `instances` (`None` when empty). `random(n)` must return a
    /// number below `n`.
    pub fn choose<T>(
        &mut self,
        instances: &[ServiceInstance<T>],
        random: &mut dyn FnMut(usize) -> usize,
    ) -> Option<usize> {
        if instances.is_empty() {
            return None;
        }
        match &self.strategy {
            ProviderStrategy::Random => Some(random(instances.len()).min(instances.len() - 1)),
            ProviderStrategy::RoundRobin => {
                let i = self.next % instances.len();
                self.next = self.next.wrapping_add(1);
                Some(i)
            }
            ProviderStrategy::Sticky(_) => {
                if let Some(id) = &self.sticky {
                    if let Some(i) = instances.iter().position(|inst| &inst.id == id) {
                        return Some(i);
                    }
                }
                let inner = self.inner.as_mut()?;
                let i = inner.choose(instances, random)?;
                self.sticky = Some(instances[i].id.clone());
                self.sticky_changes += 1;
                Some(i)
            }
        }
    }
}

/// When an instance counts as down (Curator's `DownInstancePolicy`): after `error_threshold`
/// errors noted by [`ServiceProvider::note_error`], for `timeout` after the first of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DownInstancePolicy {
    /// How long an instance's errors are remembered (default 30 s).
    pub timeout: Duration,
    /// Errors after which it is skipped (default 2).
    pub error_threshold: u32,
}

impl Default for DownInstancePolicy {
    fn default() -> Self {
        DownInstancePolicy {
            timeout: Duration::from_secs(30),
            error_threshold: 2,
        }
    }
}

/// Errors noted per instance id (Curator's `DownInstanceManager`). Pure: `now` is an argument.
#[derive(Debug, Clone)]
pub struct DownInstances {
    policy: DownInstancePolicy,
    statuses: HashMap<String, (Instant, u32)>,
    last_purge: Option<Instant>,
}

impl DownInstances {
    /// Bookkeeping under `policy`.
    pub fn new(policy: DownInstancePolicy) -> Self {
        DownInstances {
            policy,
            statuses: HashMap::new(),
            last_purge: None,
        }
    }

    /// Notes one error of the instance `id` at `now`.
    pub fn add(&mut self, id: &str, now: Instant) {
        self.purge(now);
        self.statuses.entry(id.to_string()).or_insert((now, 0)).1 += 1;
    }

    /// Whether the instance `id` is usable at `now` (fewer errors than the threshold within the
    /// timeout).
    pub fn is_up(&mut self, id: &str, now: Instant) -> bool {
        self.purge(now);
        self.statuses
            .get(id)
            .map_or(true, |(_, errors)| *errors < self.policy.error_threshold)
    }

    /// Forgets errors older than the timeout; like Curator, at most every half timeout.
    fn purge(&mut self, now: Instant) {
        let last = *self.last_purge.get_or_insert(now);
        if now.saturating_duration_since(last) < self.policy.timeout / 2 {
            return;
        }
        self.last_purge = Some(now);
        let timeout = self.policy.timeout;
        self.statuses
            .retain(|_, (start, _)| now.saturating_duration_since(*start) < timeout);
    }
}

/// A filter deciding whether an instance may be chosen.
pub type InstanceFilter<T> = Arc<dyn Fn(&ServiceInstance<T>) -> bool + Send + Sync>;

/// Chooses instances of one service from a [`ServiceCache`] (Curator's `ServiceProvider`):
/// disabled instances, instances with too many noted errors, and instances a filter rejects
/// are skipped; the strategy picks among the rest. Built by
/// [`super::ServiceDiscovery::provider`].
pub struct ServiceProvider<T = serde_json::Value> {
    cache: ServiceCache<T>,
    state: Mutex<ProviderState>,
    filters: Vec<InstanceFilter<T>>,
}

struct ProviderState {
    chooser: Chooser,
    down: DownInstances,
}

impl<T> std::fmt::Debug for ServiceProvider<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceProvider")
            .field("service", &self.cache.name())
            .finish()
    }
}

impl<T> ServiceProvider<T>
where
    T: Serialize + DeserializeOwned + Clone + Send + Sync + 'static,
{
    pub(crate) fn new(
        cache: ServiceCache<T>,
        strategy: ProviderStrategy,
        policy: DownInstancePolicy,
        filters: Vec<InstanceFilter<T>>,
    ) -> Self {
        ServiceProvider {
            cache,
            state: Mutex::new(ProviderState {
                chooser: Chooser::new(strategy),
                down: DownInstances::new(policy),
            }),
            filters,
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, ProviderState> {
        // Every critical section leaves the state consistent.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits until the cache has loaded the service's instances once, at most `timeout`.
    ///
    /// # Errors
    /// [`crate::Error::Timeout`], [`crate::Error::Closed`].
    pub async fn wait_initialized(&self, timeout: Duration) -> Result<()> {
        self.cache.wait_initialized(timeout).await
    }

    /// Every usable instance (enabled, not down, accepted by the filters).
    pub fn all_instances(&self) -> Vec<ServiceInstance<T>> {
        let instances = self.cache.instances();
        let mut state = self.state();
        let now = Instant::now();
        instances
            .iter()
            .filter(|i| i.enabled && state.down.is_up(&i.id, now))
            .filter(|i| self.filters.iter().all(|f| f(i)))
            .cloned()
            .collect()
    }

    /// One usable instance chosen by the strategy, or `None` when there is none.
    pub fn instance(&self) -> Option<ServiceInstance<T>> {
        let usable = self.all_instances();
        let mut state = self.state();
        let mut rng = |n: usize| rand::random::<usize>() % n.max(1);
        let i = state.chooser.choose(&usable, &mut rng)?;
        usable.into_iter().nth(i)
    }

    /// Notes that `instance` failed (a connection error, say): after the policy's threshold it
    /// is skipped until its errors time out.
    pub fn note_error(&self, instance: &ServiceInstance<T>) {
        self.state().down.add(&instance.id, Instant::now());
    }

    /// The cache underneath.
    pub fn cache(&self) -> &ServiceCache<T> {
        &self.cache
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn instances(ids: &[&str]) -> Vec<ServiceInstance<()>> {
        ids.iter()
            .map(|id| ServiceInstance::new("svc").with_id(*id))
            .collect()
    }

    #[test]
    fn round_robin_takes_turns_and_random_uses_the_given_source() {
        let list = instances(&["a", "b", "c"]);
        let mut rr = Chooser::new(ProviderStrategy::RoundRobin);
        let mut never = |_: usize| unreachable!("round robin needs no randomness");
        let picks: Vec<usize> = (0..7)
            .map(|_| rr.choose(&list, &mut never).unwrap())
            .collect();
        assert_eq!(picks, vec![0, 1, 2, 0, 1, 2, 0]);
        // Fewer instances later: the counter keeps going modulo the new length.
        assert_eq!(rr.choose(&list[..2], &mut never), Some(1));
        assert_eq!(rr.choose::<()>(&[], &mut never), None);

        let mut random = Chooser::new(ProviderStrategy::Random);
        let mut fixed = |n: usize| n - 1;
        assert_eq!(random.choose(&list, &mut fixed), Some(2));
        // A misbehaving source cannot index out of bounds.
        let mut huge = |_: usize| usize::MAX;
        assert_eq!(random.choose(&list, &mut huge), Some(2));
    }

    #[test]
    fn sticky_keeps_its_instance_until_it_goes() {
        let mut sticky = Chooser::new(ProviderStrategy::Sticky(Box::new(
            ProviderStrategy::RoundRobin,
        )));
        let mut never = |_: usize| 0;
        let list = instances(&["a", "b", "c"]);
        assert_eq!(sticky.choose(&list, &mut never), Some(0));
        assert_eq!(sticky.choose(&list, &mut never), Some(0));
        // Order changes do not matter: it sticks to the id.
        let reordered = instances(&["c", "a", "b"]);
        assert_eq!(sticky.choose(&reordered, &mut never), Some(1));
        assert_eq!(sticky.sticky_changes(), 1);
        // "a" goes: the inner round robin (second call) picks anew, and sticks again.
        let without_a = instances(&["b", "c"]);
        assert_eq!(sticky.choose(&without_a, &mut never), Some(1));
        assert_eq!(sticky.choose(&without_a, &mut never), Some(1));
        assert_eq!(sticky.sticky_changes(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn down_instances_are_skipped_until_their_errors_time_out() {
        let policy = DownInstancePolicy {
            timeout: Duration::from_secs(10),
            error_threshold: 2,
        };
        let mut down = DownInstances::new(policy);
        let t0 = Instant::now();
        down.add("a", t0);
        assert!(down.is_up("a", t0), "one error is below the threshold");
        down.add("a", t0 + Duration::from_secs(1));
        assert!(!down.is_up("a", t0 + Duration::from_secs(2)));
        assert!(down.is_up("b", t0 + Duration::from_secs(2)));
        // Purged once the timeout since the first error has passed, at the next purge (purges
        // run at most every half timeout, as in Curator: the one at 9 s was too early).
        assert!(!down.is_up("a", t0 + Duration::from_secs(9)));
        assert!(!down.is_up("a", t0 + Duration::from_secs(10)));
        assert!(down.is_up("a", t0 + Duration::from_secs(15)));
    }
}
