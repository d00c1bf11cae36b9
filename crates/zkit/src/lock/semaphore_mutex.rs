//! [`SemaphoreMutex`]: a non-reentrant mutex made of a semaphore with one lease (Curator's
//! `InterProcessSemaphoreMutex`, which is an `InterProcessSemaphoreV2` with `maxLeases = 1`).
//!
//! The node layout is the semaphore's, so a Java `InterProcessSemaphoreMutex` on the same path
//! and this one exclude each other: `path/locks` serialises the acquirers (a mutex held only
//! while acquiring), `path/leases` holds the one lease node (`_c_<uuid>-lease-NNNNNNNNNN`).
//! Unlike [`super::Mutex`] (Curator's `InterProcessMutex`, re-entrant in Java), Curator's
//! semaphore mutex is not re-entrant even per thread: taking it again while holding it waits
//! for yourself. zkit's [`super::Mutex`] is not re-entrant either; the difference here is only
//! the layout (a holder is a lease, found under `leases`), which is what Java code that uses
//! `InterProcessSemaphoreMutex` expects.
//!
//! ```no_run
//! # async fn demo(session: zkit::Session) -> zkit::Result<()> {
//! use zkit::lock::SemaphoreMutex;
//! let mutex = SemaphoreMutex::new(&session, "/jobs/nightly");
//! let lease = mutex.lock().await?;
//! // ... the only holder ...
//! lease.release().await?;
//! # Ok(()) }
//! ```

use std::time::Duration;

use super::semaphore::{Lease, Semaphore};
use crate::error::Result;
use crate::session::Session;

/// A mutex in Curator's semaphore layout. See the module docs.
#[derive(Debug, Clone)]
pub struct SemaphoreMutex {
    semaphore: Semaphore,
}

impl SemaphoreMutex {
    /// A semaphore mutex on the directory `path`.
    pub fn new(session: &Session, path: &str) -> SemaphoreMutex {
        SemaphoreMutex {
            semaphore: Semaphore::new(session, path, 1),
        }
    }

    /// Waits until it is held.
    ///
    /// # Errors
    /// As [`Semaphore::acquire`].
    ///
    /// # Cancellation safety
    /// Safe, as [`Semaphore::acquire`].
    pub async fn lock(&self) -> Result<Lease> {
        self.semaphore.acquire(None).await
    }

    /// Waits at most `timeout`.
    ///
    /// # Errors
    /// [`crate::Error::Timeout`]; otherwise as [`Semaphore::acquire`].
    ///
    /// # Cancellation safety
    /// Safe, as [`Semaphore::acquire`].
    pub async fn try_lock_for(&self, timeout: Duration) -> Result<Lease> {
        self.semaphore.acquire(Some(timeout)).await
    }

    /// Whether someone holds it right now (a lease node exists).
    ///
    /// # Errors
    /// Errors of the listing.
    pub async fn is_locked(&self) -> Result<bool> {
        Ok(self.semaphore.lease_count().await? > 0)
    }

    /// The directory of the lease nodes.
    pub fn leases_path(&self) -> String {
        self.semaphore.leases_path()
    }
}
