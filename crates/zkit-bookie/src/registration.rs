//! How a bookie announces itself and keeps its cookie in the metadata store: the
//! [`RegistrationManager`] trait, named and shaped after BookKeeper's `RegistrationManager`,
//! and [`MemoryRegistration`] for tests. The ZooKeeper implementation (BookKeeper's layout:
//! `/ledgers/available/ID`, `/ledgers/available/readonly/ID`, `/ledgers/cookies/ID`,
//! `/ledgers/INSTANCEID`) is `zkit::ledger::registration`; this crate does not depend on a
//! ZooKeeper client.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use futures::future::BoxFuture;

/// A value and its version in the metadata store (a ZooKeeper node's data version).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Versioned<T> {
    /// The value.
    pub value: T,
    /// Its version.
    pub version: i32,
}

/// Registration failures.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RegistrationError {
    /// A versioned write found another version (or, creating, a value already there).
    #[error("version conflict writing {0}")]
    BadVersion(String),
    /// The metadata store failed or is unreachable.
    #[error("metadata store: {0}")]
    Store(String),
}

/// Announces a bookie and stores its cookie. Implementations must be safe to call from
/// several tasks.
pub trait RegistrationManager: Send + Sync + 'static {
    /// Registers `bookie_id` (`HOST:PORT`) as available, or as read-only; registering in one
    /// mode removes the registration in the other (BookKeeper's `ZKRegistrationManager`
    /// creates the read-only node and then deletes the writable one). The registration lasts
    /// while the implementation's session does (ephemeral).
    fn register_bookie<'a>(
        &'a self,
        bookie_id: &'a str,
        read_only: bool,
    ) -> BoxFuture<'a, Result<(), RegistrationError>>;

    /// Removes the registration in the given mode.
    fn unregister_bookie<'a>(
        &'a self,
        bookie_id: &'a str,
        read_only: bool,
    ) -> BoxFuture<'a, Result<(), RegistrationError>>;

    /// The bookie's cookie and its version, `None` when there is none.
    fn read_cookie<'a>(
        &'a self,
        bookie_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<Versioned<Vec<u8>>>, RegistrationError>>;

    /// Writes the cookie: `version` `None` creates it (fails if present), `Some(v)` replaces
    /// version `v`. Returns the new version.
    fn write_cookie<'a>(
        &'a self,
        bookie_id: &'a str,
        cookie: &'a [u8],
        version: Option<i32>,
    ) -> BoxFuture<'a, Result<i32, RegistrationError>>;

    /// The cluster's instance id (created on first use).
    fn cluster_instance_id(&self) -> BoxFuture<'_, Result<String, RegistrationError>>;

    /// Whether the ledger's metadata exists. `Ok(false)` only when the store says for sure it
    /// does not: the garbage collector then deletes the ledger's data on this bookie (as
    /// BookKeeper's `ScanAndCompareGarbageCollector` does on `NoSuchLedgerExists`). The
    /// default keeps every ledger.
    fn ledger_exists(&self, ledger_id: i64) -> BoxFuture<'_, Result<bool, RegistrationError>> {
        let _ = ledger_id;
        Box::pin(async { Ok(true) })
    }
}

#[derive(Debug, Default)]
struct State {
    available: BTreeSet<String>,
    read_only: BTreeSet<String>,
    cookies: BTreeMap<String, Versioned<Vec<u8>>>,
    instance_id: Option<String>,
    deleted_ledgers: BTreeSet<i64>,
}

/// In-memory [`RegistrationManager`] for tests; its state can be inspected.
#[derive(Debug, Default)]
pub struct MemoryRegistration {
    state: Mutex<State>,
}

impl MemoryRegistration {
    /// Empty.
    pub fn new() -> MemoryRegistration {
        MemoryRegistration::default()
    }

    /// Says from now on that the ledger's metadata is gone (every other ledger exists).
    pub fn delete_ledger(&self, ledger_id: i64) {
        self.lock().deleted_ledgers.insert(ledger_id);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Bookies registered as available (writable).
    pub fn available(&self) -> Vec<String> {
        self.lock().available.iter().cloned().collect()
    }

    /// Bookies registered as read-only.
    pub fn read_only(&self) -> Vec<String> {
        self.lock().read_only.iter().cloned().collect()
    }

    /// Removes a cookie (as an operator wiping metadata would).
    pub fn remove_cookie(&self, bookie_id: &str) {
        self.lock().cookies.remove(bookie_id);
    }
}

impl RegistrationManager for MemoryRegistration {
    fn register_bookie<'a>(
        &'a self,
        bookie_id: &'a str,
        read_only: bool,
    ) -> BoxFuture<'a, Result<(), RegistrationError>> {
        Box::pin(async move {
            let mut s = self.lock();
            if read_only {
                s.read_only.insert(bookie_id.to_string());
                s.available.remove(bookie_id);
            } else {
                s.available.insert(bookie_id.to_string());
                s.read_only.remove(bookie_id);
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
            let mut s = self.lock();
            if read_only {
                s.read_only.remove(bookie_id);
            } else {
                s.available.remove(bookie_id);
            }
            Ok(())
        })
    }

    fn read_cookie<'a>(
        &'a self,
        bookie_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<Versioned<Vec<u8>>>, RegistrationError>> {
        Box::pin(async move { Ok(self.lock().cookies.get(bookie_id).cloned()) })
    }

    fn write_cookie<'a>(
        &'a self,
        bookie_id: &'a str,
        cookie: &'a [u8],
        version: Option<i32>,
    ) -> BoxFuture<'a, Result<i32, RegistrationError>> {
        Box::pin(async move {
            let mut s = self.lock();
            let current = s.cookies.get(bookie_id).map(|c| c.version);
            let next = match (current, version) {
                (None, None) => 0,
                (Some(have), Some(want)) if have == want => have + 1,
                _ => {
                    return Err(RegistrationError::BadVersion(format!(
                        "cookie of {bookie_id}"
                    )))
                }
            };
            s.cookies.insert(
                bookie_id.to_string(),
                Versioned {
                    value: cookie.to_vec(),
                    version: next,
                },
            );
            Ok(next)
        })
    }

    fn cluster_instance_id(&self) -> BoxFuture<'_, Result<String, RegistrationError>> {
        Box::pin(async move {
            let mut s = self.lock();
            Ok(s.instance_id
                .get_or_insert_with(|| uuid::Uuid::new_v4().to_string())
                .clone())
        })
    }

    fn ledger_exists(&self, ledger_id: i64) -> BoxFuture<'_, Result<bool, RegistrationError>> {
        let exists = !self.lock().deleted_ledgers.contains(&ledger_id);
        Box::pin(async move { Ok(exists) })
    }
}
