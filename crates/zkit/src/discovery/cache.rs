//! [`ServiceCache`]: the instances of one service, kept up to date by watches (Curator's
//! `ServiceCache`, which is a `CuratorCache` of the service's node). Built on
//! [`crate::cache::TreeCache`], so it re-syncs after reconnects and new sessions without
//! repeating or skipping the latest state. The decoding of the cached nodes is the pure
//! [`instances_of`].

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde::de::DeserializeOwned;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::instance::{JsonInstanceSerializer, ServiceInstance};
use crate::cache::{CacheEvent, ChildData, TreeCache};
use crate::error::{Error, Result};
use crate::session::Session;

/// What a [`ServiceCache`] holds at one moment.
#[derive(Debug)]
pub struct CacheSnapshot<T> {
    /// True once the first full load is done (before that, `instances` may be incomplete).
    pub initialized: bool,
    /// The instances, ordered by node name (the instance id).
    pub instances: Arc<Vec<ServiceInstance<T>>>,
}

impl<T> Clone for CacheSnapshot<T> {
    fn clone(&self) -> Self {
        CacheSnapshot {
            initialized: self.initialized,
            instances: Arc::clone(&self.instances),
        }
    }
}

/// The instances among cached `nodes` of the service node `service_path`: its direct children
/// that decode, in node-name order. A child that does not decode (not an instance, or a payload
/// of another type) is skipped with a warning, so one foreign node cannot hide the others.
pub fn instances_of<'a, T: DeserializeOwned>(
    service_path: &str,
    nodes: impl IntoIterator<Item = &'a ChildData>,
    serializer: &JsonInstanceSerializer,
) -> Vec<ServiceInstance<T>> {
    let prefix = format!("{}/", service_path.trim_end_matches('/'));
    let mut out = BTreeMap::new();
    for node in nodes {
        let Some(name) = node.path.strip_prefix(&prefix) else {
            continue;
        };
        if name.is_empty() || name.contains('/') {
            continue;
        }
        match serializer.deserialize(&node.data) {
            Ok(instance) => {
                out.insert(name.to_string(), instance);
            }
            Err(err) => {
                tracing::warn!(path = %node.path, error = %err, "skipping a node that is not a service instance")
            }
        }
    }
    out.into_values().collect()
}

struct Inner<T> {
    name: String,
    path: String,
    snapshot: watch::Sender<CacheSnapshot<T>>,
    cancel: CancellationToken,
}

impl<T> Drop for Inner<T> {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

/// A watched cache of one service's instances. Cheap to clone; the background task stops when
/// the last clone is dropped.
pub struct ServiceCache<T = serde_json::Value> {
    inner: Arc<Inner<T>>,
}

impl<T> Clone for ServiceCache<T> {
    fn clone(&self) -> Self {
        ServiceCache {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<T> std::fmt::Debug for ServiceCache<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let snapshot = self.inner.snapshot.borrow();
        f.debug_struct("ServiceCache")
            .field("path", &self.inner.path)
            .field("initialized", &snapshot.initialized)
            .field("instances", &snapshot.instances.len())
            .finish()
    }
}

impl<T> ServiceCache<T> {
    /// The service's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }
}

impl<T> ServiceCache<T>
where
    T: DeserializeOwned + Send + Sync + 'static,
{
    /// Starts caching the service `name` whose node is `path`.
    pub(crate) fn start(
        session: &Session,
        name: &str,
        path: &str,
        serializer: JsonInstanceSerializer,
    ) -> Result<Self> {
        let tree = TreeCache::new(session, path)?;
        let (snapshot, _) = watch::channel(CacheSnapshot {
            initialized: false,
            instances: Arc::new(Vec::new()),
        });
        let inner = Arc::new(Inner {
            name: name.to_string(),
            path: path.to_string(),
            snapshot,
            cancel: CancellationToken::new(),
        });
        tokio::spawn(run(
            tree,
            inner.snapshot.clone(),
            inner.path.clone(),
            serializer,
            inner.cancel.clone(),
        ));
        Ok(ServiceCache { inner })
    }

    /// The current instances (empty before the first load).
    pub fn instances(&self) -> Arc<Vec<ServiceInstance<T>>> {
        Arc::clone(&self.inner.snapshot.borrow().instances)
    }

    /// A receiver of every new snapshot (intermediate ones may be skipped).
    pub fn subscribe(&self) -> watch::Receiver<CacheSnapshot<T>> {
        self.inner.snapshot.subscribe()
    }

    /// Waits until the first full load is done, at most `timeout`.
    ///
    /// # Errors
    /// [`Error::Timeout`]; [`Error::Closed`] when the session closed first.
    pub async fn wait_initialized(&self, timeout: Duration) -> Result<()> {
        self.wait_for(timeout, |s| s.initialized).await.map(|_| ())
    }

    /// Waits until `condition` holds for a snapshot (checked at once, then on every change), at
    /// most `timeout`; returns that snapshot.
    ///
    /// # Errors
    /// [`Error::Timeout`]; [`Error::Closed`] when the session closed first.
    pub async fn wait_for(
        &self,
        timeout: Duration,
        mut condition: impl FnMut(&CacheSnapshot<T>) -> bool,
    ) -> Result<CacheSnapshot<T>> {
        let mut rx = self.subscribe();
        let waited = tokio::time::timeout(timeout, rx.wait_for(|s| condition(s))).await;
        match waited {
            Ok(Ok(snapshot)) => Ok(snapshot.clone()),
            Ok(Err(_)) => Err(Error::Closed),
            Err(_) => Err(Error::Timeout(timeout)),
        }
    }
}

async fn run<T: DeserializeOwned>(
    mut tree: TreeCache,
    snapshot: watch::Sender<CacheSnapshot<T>>,
    path: String,
    serializer: JsonInstanceSerializer,
    cancel: CancellationToken,
) {
    let mut initialized = false;
    loop {
        let event = tokio::select! {
            () = cancel.cancelled() => return,
            event = tree.next() => event,
        };
        match event {
            Ok(CacheEvent::Initialized) => initialized = true,
            Ok(_) if !initialized => continue,
            Ok(_) => {}
            // Only `Closed` comes out of the tree cache: the session is gone for good.
            Err(_) => return,
        }
        let instances = instances_of(&path, tree.nodes(), &serializer);
        snapshot.send_replace(CacheSnapshot {
            initialized,
            instances: Arc::new(instances),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(path: &str, data: &str) -> ChildData {
        ChildData {
            path: path.into(),
            data: data.as_bytes().to_vec(),
            version: 0,
            mzxid: 1,
        }
    }

    #[test]
    fn direct_children_that_decode_are_the_instances() {
        let nodes = [
            node("/services/api", ""),
            node("/services/api/b", r#"{"name":"api","id":"b","port":2}"#),
            node("/services/api/a", r#"{"name":"api","id":"a","port":1}"#),
            node("/services/api/a/deeper", r#"{"name":"api","id":"x"}"#),
            node("/services/api/junk", "not json"),
            node("/services/apix/c", r#"{"name":"apix","id":"c"}"#),
        ];
        let found: Vec<ServiceInstance<serde_json::Value>> =
            instances_of("/services/api", &nodes, &JsonInstanceSerializer::new());
        let ids: Vec<&str> = found.iter().map(|i| i.id.as_str()).collect();
        assert_eq!(ids, vec!["a", "b"]);
        assert_eq!(found[0].port, Some(1));
    }
}
