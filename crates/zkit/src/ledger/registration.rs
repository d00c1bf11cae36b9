//! [`ZkRegistrationManager`]: bookie registration and cookies in ZooKeeper, in BookKeeper's
//! layout (as `ZKRegistrationManager` keeps them):
//!
//! ```text
//! /ledgers/INSTANCEID                   the cluster's instance id (created on first use)
//! /ledgers/available/HOST:PORT          ephemeral: the bookie is up and writable
//! /ledgers/available/readonly/HOST:PORT ephemeral: the bookie is up and read-only
//! /ledgers/cookies/HOST:PORT            the bookie's cookie, versioned
//! ```
//!
//! Registrations are [`PersistentNode`]s, so they come back after a session loss (the old
//! ephemeral went with the old session). Every ZooKeeper call of the ledger's registration is
//! in this file.

use std::collections::HashMap;
use std::time::Duration;

use futures::future::BoxFuture;
use zkit_bookie::registration::{RegistrationError, RegistrationManager, Versioned};
use zkit_client as zk;

use super::layout::Layout;
use crate::persistent_node::PersistentNode;
use crate::session::Session;

/// BookKeeper's default metadata root.
pub const DEFAULT_ROOT: &str = "/ledgers";

/// Bookie registration in ZooKeeper. See the module docs.
pub struct ZkRegistrationManager {
    session: Session,
    root: String,
    nodes: tokio::sync::Mutex<HashMap<(String, bool), PersistentNode>>,
}

impl std::fmt::Debug for ZkRegistrationManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZkRegistrationManager")
            .field("root", &self.root)
            .finish()
    }
}

fn store(e: impl std::fmt::Display) -> RegistrationError {
    RegistrationError::Store(e.to_string())
}

impl ZkRegistrationManager {
    /// Registration under [`DEFAULT_ROOT`].
    pub fn new(session: &Session) -> ZkRegistrationManager {
        ZkRegistrationManager::with_root(session, DEFAULT_ROOT)
    }

    /// Registration under another root (e.g. one per test).
    pub fn with_root(session: &Session, root: &str) -> ZkRegistrationManager {
        ZkRegistrationManager {
            session: session.clone(),
            root: root.trim_end_matches('/').to_string(),
            nodes: tokio::sync::Mutex::default(),
        }
    }

    /// The path a bookie registers at in a mode.
    pub fn registration_path(&self, bookie_id: &str, read_only: bool) -> String {
        if read_only {
            format!("{}/available/readonly/{bookie_id}", self.root)
        } else {
            format!("{}/available/{bookie_id}", self.root)
        }
    }

    fn cookie_path(&self, bookie_id: &str) -> String {
        format!("{}/cookies/{bookie_id}", self.root)
    }

    /// Creates `path` persistent with `data`, making its parents.
    async fn create(&self, path: &str, data: &[u8]) -> Result<zk::Stat, zk::Error> {
        let client = self.session.client();
        let options = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
        match client.create(path, data, &options).await {
            Err(zk::Error::NoNode) => {
                if let Some((parent, _)) = path.rsplit_once('/') {
                    if !parent.is_empty() {
                        match client.mkdir(parent, &options).await {
                            Ok(()) | Err(zk::Error::NodeExists) => {}
                            Err(e) => return Err(e),
                        }
                    }
                }
                client.create(path, data, &options).await.map(|(s, _)| s)
            }
            other => other.map(|(s, _)| s),
        }
    }
}

impl RegistrationManager for ZkRegistrationManager {
    fn register_bookie<'a>(
        &'a self,
        bookie_id: &'a str,
        read_only: bool,
    ) -> BoxFuture<'a, Result<(), RegistrationError>> {
        Box::pin(async move {
            let mut nodes = self.nodes.lock().await;
            let key = (bookie_id.to_string(), read_only);
            if !nodes.contains_key(&key) {
                let path = self.registration_path(bookie_id, read_only);
                let node = PersistentNode::start(
                    &self.session,
                    &path,
                    bookie_id.as_bytes(),
                    zk::CreateMode::Ephemeral,
                )
                .map_err(store)?;
                nodes.insert(key.clone(), node);
            }
            // A previous run's ephemeral (killed bookie) goes when its session expires.
            let wait = self.session.session_timeout() * 2 + Duration::from_secs(5);
            if let Some(node) = nodes.get(&key) {
                node.wait_present(wait).await.map_err(store)?;
            }
            // Registered in the new mode: drop the other one, as ZKRegistrationManager does.
            if let Some(other) = nodes.remove(&(bookie_id.to_string(), !read_only)) {
                other.close().await;
            }
            Ok(())
        })
    }

    fn unregister_bookie<'a>(
        &'a self,
        bookie_id: &'a str,
        read_only: bool,
    ) -> BoxFuture<'a, Result<(), RegistrationError>> {
        Box::pin(async move {
            let node = self
                .nodes
                .lock()
                .await
                .remove(&(bookie_id.to_string(), read_only));
            if let Some(node) = node {
                node.close().await;
            }
            Ok(())
        })
    }

    fn read_cookie<'a>(
        &'a self,
        bookie_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<Versioned<Vec<u8>>>, RegistrationError>> {
        Box::pin(async move {
            self.session.wait_connected().await.map_err(store)?;
            match self
                .session
                .client()
                .get_data(&self.cookie_path(bookie_id))
                .await
            {
                Ok((value, stat)) => Ok(Some(Versioned {
                    value,
                    version: stat.version,
                })),
                Err(zk::Error::NoNode) => Ok(None),
                Err(e) => Err(store(e)),
            }
        })
    }

    fn write_cookie<'a>(
        &'a self,
        bookie_id: &'a str,
        cookie: &'a [u8],
        version: Option<i32>,
    ) -> BoxFuture<'a, Result<i32, RegistrationError>> {
        Box::pin(async move {
            self.session.wait_connected().await.map_err(store)?;
            let path = self.cookie_path(bookie_id);
            let result = match version {
                None => self.create(&path, cookie).await,
                Some(v) => self.session.client().set_data(&path, cookie, Some(v)).await,
            };
            match result {
                Ok(stat) => Ok(stat.version),
                Err(zk::Error::NodeExists | zk::Error::BadVersion | zk::Error::NoNode) => {
                    Err(RegistrationError::BadVersion(path))
                }
                Err(e) => Err(store(e)),
            }
        })
    }

    fn cluster_instance_id(&self) -> BoxFuture<'_, Result<String, RegistrationError>> {
        Box::pin(async move {
            self.session.wait_connected().await.map_err(store)?;
            let path = format!("{}/INSTANCEID", self.root);
            let client = self.session.client();
            match client.get_data(&path).await {
                Ok((id, _)) => return Ok(String::from_utf8_lossy(&id).into_owned()),
                Err(zk::Error::NoNode) => {}
                Err(e) => return Err(store(e)),
            }
            let id = uuid::Uuid::new_v4().to_string();
            match self.create(&path, id.as_bytes()).await {
                Ok(_) => Ok(id),
                // Another bookie created it first: use theirs.
                Err(zk::Error::NodeExists) => client
                    .get_data(&path)
                    .await
                    .map(|(id, _)| String::from_utf8_lossy(&id).into_owned())
                    .map_err(store),
                Err(e) => Err(store(e)),
            }
        })
    }

    fn ledger_exists(&self, ledger_id: i64) -> BoxFuture<'_, Result<bool, RegistrationError>> {
        Box::pin(async move {
            // An id outside the layout's range never had metadata here.
            let Ok(path) = Layout::new(&self.root).and_then(|l| l.ledger(ledger_id)) else {
                return Ok(false);
            };
            self.session.wait_connected().await.map_err(store)?;
            let stat = self
                .session
                .client()
                .check_stat(&path)
                .await
                .map_err(store)?;
            Ok(stat.is_some())
        })
    }
}
