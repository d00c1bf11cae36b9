//! [`ReadWriteLock`] (Curator's `InterProcessReadWriteLock`): readers share, writers exclude
//! everyone; one directory, nodes `_c_<uuid>-__READ__NNNNNNNNNN` and `_c_<uuid>-__WRIT__…`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use zkit_client as zk;

use super::decide::{Rule, READ_MARKER, WRITE_MARKER};
use super::internals::{acquire, Contend, LockGuard, LockOptions};
use crate::error::{Error, Result};
use crate::session::Session;

#[derive(Debug, Default)]
struct Held {
    /// Node name of the write lock held through this value, if any.
    writer: StdMutex<Option<String>>,
    /// Read locks held through this value.
    readers: AtomicUsize,
}

/// A distributed read/write lock on the directory `path`.
///
/// - Writers exclude readers and writers; readers exclude only writers; order is first come,
///   first served (a reader behind a waiting writer waits too, so writers do not starve).
/// - The holder of the write lock may also take the read lock through the **same**
///   `ReadWriteLock` value (or a clone), as in Curator (downgrade: take read, release write).
/// - No upgrade: taking the write lock while this value holds a read lock would wait for itself
///   forever, so it fails at once with [`Error::BadArguments`].
#[derive(Debug, Clone)]
pub struct ReadWriteLock {
    session: Session,
    path: String,
    options: LockOptions,
    held: Arc<Held>,
}

impl ReadWriteLock {
    /// A read/write lock on the directory `path`.
    pub fn new(session: &Session, path: &str) -> ReadWriteLock {
        ReadWriteLock::with_options(session, path, LockOptions::default())
    }

    /// A read/write lock with explicit options.
    pub fn with_options(session: &Session, path: &str, options: LockOptions) -> ReadWriteLock {
        ReadWriteLock {
            session: session.clone(),
            path: path.trim_end_matches('/').to_string(),
            options,
            held: Arc::default(),
        }
    }

    fn contend(&self, write: bool) -> Contend<'_> {
        let exempt = if write {
            None
        } else {
            self.held
                .writer
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone()
        };
        Contend {
            session: &self.session,
            parent: &self.path,
            name: if write { WRITE_MARKER } else { READ_MARKER },
            rule: if write {
                Rule::Exclusive { max_leases: 1 }
            } else {
                Rule::Shared
            },
            exempt,
            mode: zk::CreateMode::EphemeralSequential,
            ttl: None,
            options: &self.options,
            max_locked_time: None,
            release_slot: None,
        }
    }

    /// Takes the read (shared) lock; `timeout: None` waits forever.
    ///
    /// # Errors
    /// As [`super::Mutex::lock`], plus [`Error::Timeout`].
    ///
    /// # Cancellation safety
    /// Safe: a dropped acquisition leaves no node behind.
    pub async fn read(&self, timeout: Option<Duration>) -> Result<LockGuard> {
        let mut guard = acquire(self.contend(false), timeout).await?;
        self.held.readers.fetch_add(1, Ordering::SeqCst);
        let held = Arc::clone(&self.held);
        guard.set_on_release(move || {
            held.readers.fetch_sub(1, Ordering::SeqCst);
        });
        Ok(guard)
    }

    /// Takes the write (exclusive) lock; `timeout: None` waits forever.
    ///
    /// # Errors
    /// [`Error::BadArguments`] when this value holds a read lock (no upgrade); otherwise as
    /// [`super::Mutex::lock`], plus [`Error::Timeout`].
    ///
    /// # Cancellation safety
    /// Safe: a dropped acquisition leaves no node behind.
    pub async fn write(&self, timeout: Option<Duration>) -> Result<LockGuard> {
        if self.held.readers.load(Ordering::SeqCst) > 0 {
            return Err(Error::BadArguments(
                "read → write upgrade is not supported: it would wait for itself".into(),
            ));
        }
        let mut guard = acquire(self.contend(true), timeout).await?;
        let name = guard
            .path()
            .rsplit_once('/')
            .map(|(_, name)| name.to_string())
            .unwrap_or_default();
        *self.held.writer.lock().unwrap_or_else(|e| e.into_inner()) = Some(name);
        let held = Arc::clone(&self.held);
        guard.set_on_release(move || {
            *held.writer.lock().unwrap_or_else(|e| e.into_inner()) = None;
        });
        Ok(guard)
    }
}
