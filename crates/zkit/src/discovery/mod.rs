//! Service discovery, interoperable with Apache Curator's curator-x-discovery
//! (`ServiceDiscovery`, `ServiceCache`, `ServiceProvider`): services register instances as
//! `/<base>/<service name>/<instance id>` nodes holding Curator's JSON (base path
//! [`DEFAULT_BASE_PATH`], `/services`), so a Java `ServiceDiscovery` lists what zkit registered
//! and the other way round.
//!
//! - [`ServiceDiscovery::register`]: the instance node is ephemeral for [`ServiceType::Dynamic`]
//!   (the default; persistent for `Static`/`Permanent`, ephemeral sequential for
//!   `DynamicSequential`), parents are containers. A background task keeps it in place: after a
//!   session loss it is registered again on the new session, and a node left by the old session
//!   is replaced, as Curator does on `CONNECTED`/`RECONNECTED`; unlike Curator, a mere
//!   reconnect of the same session changes nothing (the node is still there), so watchers are
//!   not woken for nothing. [`ServiceDiscovery::update`] rewrites the data,
//!   [`ServiceDiscovery::unregister`] deletes it.
//! - Queries: [`ServiceDiscovery::query_for_names`], [`ServiceDiscovery::query_for_instances`],
//!   [`ServiceDiscovery::query_for_instance`].
//! - [`cache::ServiceCache`]: a watched cache of one service's instances;
//!   [`provider::ServiceProvider`]: picks one with a [`provider::ProviderStrategy`] (random,
//!   round robin — the default, as in Curator —, sticky), skipping disabled instances and those
//!   with errors noted ([`provider::DownInstancePolicy`]).
//! - Payloads are typed: `ServiceDiscovery<T>` for any `T: Serialize + DeserializeOwned`
//!   (default `serde_json::Value`), written with Jackson's type information so that Java reads
//!   them (see [`instance`] for the JSON and the `@class` rules).
//!
//! ```no_run
//! # async fn demo(session: zkit::Session) -> zkit::Result<()> {
//! use std::time::Duration;
//! use zkit::discovery::{ServiceDiscovery, ServiceInstance, ProviderStrategy};
//!
//! #[derive(Clone, serde::Serialize, serde::Deserialize)]
//! struct Details { zone: String }
//!
//! let discovery = ServiceDiscovery::<Details>::new(&session, "/services")?;
//! let me = ServiceInstance::new("api")
//!     .with_address("10.0.0.7")
//!     .with_port(8080)
//!     .with_payload(Details { zone: "a".into() });
//! discovery.register(&me).await?;
//!
//! let provider = discovery.provider("api").strategy(ProviderStrategy::RoundRobin).build()?;
//! provider.wait_initialized(Duration::from_secs(5)).await?;
//! if let Some(instance) = provider.instance() {
//!     println!("call {}:{:?}", instance.address.unwrap_or_default(), instance.port);
//! }
//! discovery.close().await;
//! # Ok(()) }
//! ```
//!
//! # Layout
//! - [`instance`]: [`ServiceInstance`], [`ServiceType`], [`UriSpec`], the JSON codec. Pure.
//! - [`provider`]: strategies and down instances (pure), [`provider::ServiceProvider`].
//! - [`cache`]: [`cache::ServiceCache`] on [`crate::cache::TreeCache`].
//! - `registration`: the pure [`registration_action`] and the task that keeps a node in place.

pub mod cache;
pub mod instance;
pub mod provider;
mod registration;

use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use zkit_client as zk;

pub use cache::{CacheSnapshot, ServiceCache};
pub use instance::{JsonInstanceSerializer, ServiceInstance, ServiceType, UriPart, UriSpec};
pub use provider::{DownInstancePolicy, InstanceFilter, ProviderStrategy, ServiceProvider};
pub use registration::{registration_action, RegistrationAction};

use crate::error::{Error, Result};
use crate::protected::join;
use crate::retry::{retry, RetryPolicy};
use crate::session::Session;
pub(crate) use registration::make_parents;
use registration::Registration;

/// Curator's default base path for service discovery.
pub const DEFAULT_BASE_PATH: &str = "/services";

/// A node name Curator's `ZKPaths.makePath` would not turn into something else.
fn check_name(what: &str, name: &str) -> Result<()> {
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return Err(Error::BadArguments(format!("invalid {what} {name:?}")));
    }
    Ok(())
}

struct Registered {
    registration: Arc<Registration>,
    task: tokio::task::JoinHandle<()>,
}

/// Registers, unregisters and queries service instances under one base path. See the module
/// docs. Dropping it stops keeping its registrations in place (ephemeral nodes then go with
/// the session); [`ServiceDiscovery::close`] deletes them.
pub struct ServiceDiscovery<T = serde_json::Value> {
    session: Session,
    base: String,
    serializer: JsonInstanceSerializer,
    policy: RetryPolicy,
    registered: Mutex<HashMap<String, Registered>>,
    _payload: PhantomData<fn() -> T>,
}

impl<T> std::fmt::Debug for ServiceDiscovery<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceDiscovery")
            .field("base", &self.base)
            .field("registered", &self.lock().len())
            .finish()
    }
}

impl<T> Drop for ServiceDiscovery<T> {
    fn drop(&mut self) {
        for (_, r) in self.lock().drain() {
            r.registration.cancel.cancel();
        }
    }
}

impl<T> ServiceDiscovery<T> {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Registered>> {
        // Map operations only: a poisoned lock is still consistent.
        self.registered.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl<T> ServiceDiscovery<T>
where
    T: Serialize + DeserializeOwned + Clone + Send + Sync + 'static,
{
    /// Discovery under `base_path` (Curator's `basePath`; [`DEFAULT_BASE_PATH`] is theirs),
    /// with Curator's default JSON ([`JsonInstanceSerializer::new`]).
    ///
    /// # Errors
    /// [`Error::BadArguments`] for an invalid path.
    pub fn new(session: &Session, base_path: &str) -> Result<Self> {
        let base = crate::config::resolve_key("/", base_path)?;
        Ok(ServiceDiscovery {
            session: session.clone(),
            base,
            serializer: JsonInstanceSerializer::new(),
            policy: RetryPolicy::default(),
            registered: Mutex::new(HashMap::new()),
            _payload: PhantomData,
        })
    }

    /// Uses `serializer` (e.g. to name the Java class of the payload).
    pub fn with_serializer(mut self, serializer: JsonInstanceSerializer) -> Self {
        self.serializer = serializer;
        self
    }

    /// The base path.
    pub fn base_path(&self) -> &str {
        &self.base
    }

    /// The serializer in use.
    pub fn serializer(&self) -> &JsonInstanceSerializer {
        &self.serializer
    }

    /// The node of service `name`.
    pub fn path_for_name(&self, name: &str) -> String {
        join(&self.base, name)
    }

    /// The node of instance `id` of service `name` (not for `DynamicSequential` instances,
    /// whose node name carries a sequence suffix).
    pub fn path_for_instance(&self, name: &str, id: &str) -> String {
        join(&self.path_for_name(name), id)
    }

    /// Registers `instance` (or, if its id is registered here already, updates it): the node
    /// is created now, then kept in place until [`ServiceDiscovery::unregister`] or
    /// [`ServiceDiscovery::close`] — re-registered after a session loss, recreated if deleted.
    ///
    /// # Errors
    /// [`Error::BadArguments`] for an invalid name or id or an unserializable payload; errors
    /// of the first create (recoverable ones after the retry policy gives up). Nothing stays
    /// registered after an error.
    pub async fn register(&self, instance: &ServiceInstance<T>) -> Result<()> {
        check_name("service name", &instance.name)?;
        check_name("instance id", &instance.id)?;
        let bytes = self.serializer.serialize(instance)?;
        if self.lock().contains_key(&instance.id) {
            return self.update(instance).await;
        }
        let (desired, _) = watch::channel(bytes);
        let (present, _) = watch::channel(false);
        let registration = Arc::new(Registration {
            session: self.session.clone(),
            parent: self.path_for_name(&instance.name),
            id: instance.id.clone(),
            mode: registration::create_mode(instance.service_type),
            desired,
            path: Mutex::new(None),
            present,
            cancel: CancellationToken::new(),
        });
        // The first round in the caller's task, so that its errors are the caller's.
        let first = retry(&self.policy, || async {
            loop {
                if registration.ensure().await?.is_some() {
                    return Ok::<_, Error>(());
                }
            }
        })
        .await;
        if let Err(err) = first {
            if let Some(path) = registration.current_path() {
                let _ = self.session.client().delete(&path, None).await;
            }
            return Err(err);
        }
        let task = tokio::spawn(registration::keep(Arc::clone(&registration)));
        let previous = self
            .lock()
            .insert(instance.id.clone(), Registered { registration, task });
        if let Some(previous) = previous {
            // A concurrent register of the same id: the later one wins.
            previous.registration.cancel.cancel();
        }
        Ok(())
    }

    /// Writes `instance`'s new data (its id must be registered here). The background task
    /// keeps the new data in place from now on.
    ///
    /// # Errors
    /// [`Error::NoNode`] when the id is not registered here; errors of the write.
    pub async fn update(&self, instance: &ServiceInstance<T>) -> Result<()> {
        let bytes = self.serializer.serialize(instance)?;
        let registration = self
            .lock()
            .get(&instance.id)
            .map(|r| Arc::clone(&r.registration))
            .ok_or(Error::NoNode)?;
        registration.desired.send_replace(bytes.clone());
        let Some(path) = registration.current_path() else {
            // Not created on this session yet: the task writes the new data when it creates.
            return Ok(());
        };
        retry(&self.policy, || async {
            match self.session.client().set_data(&path, &bytes, None).await {
                // Gone: the task recreates it with the new data.
                Ok(_) | Err(zk::Error::NoNode) => Ok(()),
                Err(err) => Err(err),
            }
        })
        .await
    }

    /// Unregisters the instance `id`: stops keeping it and deletes its node.
    ///
    /// # Errors
    /// Errors of the delete (after retries); the instance is no longer kept either way.
    pub async fn unregister(&self, id: &str) -> Result<()> {
        let Some(registered) = self.lock().remove(id) else {
            return Ok(());
        };
        registered.registration.cancel.cancel();
        let _ = registered.task.await;
        let Some(path) = registered.registration.current_path() else {
            return Ok(());
        };
        let ephemeral = registered.registration.ephemeral();
        retry(&self.policy, || async {
            let client = self.session.client();
            match client.check_stat(&path).await? {
                // Never delete another session's registration of the same id.
                Some(stat) if ephemeral && stat.ephemeral_owner != client.session_id().0 => Ok(()),
                Some(stat) => match client.delete(&path, Some(stat.version)).await {
                    Ok(()) | Err(zk::Error::NoNode) => Ok(()),
                    Err(err) => Err(err),
                },
                None => Ok(()),
            }
        })
        .await
    }

    /// The ids registered through this object.
    pub fn registered_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.lock().keys().cloned().collect();
        ids.sort();
        ids
    }

    /// Waits until the registration of `id` is in place (true after
    /// [`ServiceDiscovery::register`] returned, until a disconnect or a session loss; then again
    /// once it has been re-registered), at most `timeout`.
    ///
    /// # Errors
    /// [`Error::NoNode`] when `id` is not registered here, [`Error::Timeout`].
    pub async fn wait_registered(&self, id: &str, timeout: Duration) -> Result<()> {
        let mut present = self
            .lock()
            .get(id)
            .map(|r| r.registration.present.subscribe())
            .ok_or(Error::NoNode)?;
        let waited = tokio::time::timeout(timeout, present.wait_for(|p| *p)).await;
        match waited {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(_)) => Err(Error::Closed),
            Err(_) => Err(Error::Timeout(timeout)),
        }
    }

    /// Unregisters everything registered through this object (Curator's `close`).
    pub async fn close(&self) {
        for id in self.registered_ids() {
            if let Err(err) = self.unregister(&id).await {
                tracing::warn!(%id, error = %err, "could not unregister on close");
            }
        }
    }

    /// The names of all services (children of the base path).
    ///
    /// # Errors
    /// ZooKeeper errors after retries; a missing base path is an empty list.
    pub async fn query_for_names(&self) -> Result<Vec<String>> {
        let mut names = retry(&self.policy, || async {
            match self.session.client().list_children(&self.base).await {
                Ok(names) => Ok(names),
                Err(zk::Error::NoNode) => Ok(Vec::new()),
                Err(err) => Err(err),
            }
        })
        .await?;
        names.sort();
        Ok(names)
    }

    /// Every instance of service `name`, by id. Nodes that are not instances (or whose payload
    /// is not a `T`) are skipped with a warning.
    ///
    /// # Errors
    /// ZooKeeper errors after retries; an unknown service is an empty list.
    pub async fn query_for_instances(&self, name: &str) -> Result<Vec<ServiceInstance<T>>> {
        check_name("service name", name)?;
        let path = self.path_for_name(name);
        let mut ids = retry(&self.policy, || async {
            match self.session.client().list_children(&path).await {
                Ok(ids) => Ok(ids),
                Err(zk::Error::NoNode) => Ok(Vec::new()),
                Err(err) => Err(err),
            }
        })
        .await?;
        ids.sort();
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            match self.read_instance(&join(&path, &id)).await {
                Ok(Some(instance)) => out.push(instance),
                Ok(None) => {}
                Err(Error::Unexpected(why)) => {
                    tracing::warn!(service = name, %id, why, "skipping a node that is not an instance")
                }
                Err(err) => return Err(err),
            }
        }
        Ok(out)
    }

    /// The instance `id` of service `name`, if registered.
    ///
    /// # Errors
    /// ZooKeeper errors after retries; [`Error::Unexpected`] when the node is not an instance.
    pub async fn query_for_instance(
        &self,
        name: &str,
        id: &str,
    ) -> Result<Option<ServiceInstance<T>>> {
        check_name("service name", name)?;
        check_name("instance id", id)?;
        self.read_instance(&self.path_for_instance(name, id)).await
    }

    async fn read_instance(&self, path: &str) -> Result<Option<ServiceInstance<T>>> {
        let data = retry(&self.policy, || async {
            match self.session.client().get_data(path).await {
                Ok((data, _)) => Ok(Some(data)),
                Err(zk::Error::NoNode) => Ok(None),
                Err(err) => Err(err),
            }
        })
        .await?;
        data.map(|d| self.serializer.deserialize(&d)).transpose()
    }

    /// A watched cache of service `name` (Curator's `serviceCacheBuilder().name(..).build()`).
    ///
    /// # Errors
    /// [`Error::BadArguments`] for an invalid name.
    pub fn cache(&self, name: &str) -> Result<ServiceCache<T>> {
        check_name("service name", name)?;
        ServiceCache::start(
            &self.session,
            name,
            &self.path_for_name(name),
            self.serializer.clone(),
        )
    }

    /// A builder of a provider for service `name` (Curator's `serviceProviderBuilder()`):
    /// round robin by default.
    pub fn provider(&self, name: &str) -> ServiceProviderBuilder<'_, T> {
        ServiceProviderBuilder {
            discovery: self,
            name: name.to_string(),
            strategy: ProviderStrategy::RoundRobin,
            policy: DownInstancePolicy::default(),
            filters: Vec::new(),
        }
    }
}

/// Builds a [`ServiceProvider`] (from [`ServiceDiscovery::provider`]).
pub struct ServiceProviderBuilder<'a, T> {
    discovery: &'a ServiceDiscovery<T>,
    name: String,
    strategy: ProviderStrategy,
    policy: DownInstancePolicy,
    filters: Vec<InstanceFilter<T>>,
}

impl<T> std::fmt::Debug for ServiceProviderBuilder<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceProviderBuilder")
            .field("name", &self.name)
            .field("strategy", &self.strategy)
            .finish()
    }
}

impl<T> ServiceProviderBuilder<'_, T>
where
    T: Serialize + DeserializeOwned + Clone + Send + Sync + 'static,
{
    /// The strategy (default round robin).
    pub fn strategy(mut self, strategy: ProviderStrategy) -> Self {
        self.strategy = strategy;
        self
    }

    /// When instances count as down (default: 2 errors within 30 s).
    pub fn down_instance_policy(mut self, policy: DownInstancePolicy) -> Self {
        self.policy = policy;
        self
    }

    /// Adds a filter: only instances it accepts are chosen.
    pub fn filter(
        mut self,
        filter: impl Fn(&ServiceInstance<T>) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.filters.push(Arc::new(filter));
        self
    }

    /// Starts the provider's cache.
    ///
    /// # Errors
    /// [`Error::BadArguments`] for an invalid name.
    pub fn build(self) -> Result<ServiceProvider<T>> {
        let cache = self.discovery.cache(&self.name)?;
        Ok(ServiceProvider::new(
            cache,
            self.strategy,
            self.policy,
            self.filters,
        ))
    }
}
