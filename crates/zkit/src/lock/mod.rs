//! Lock recipes on the session layer. Each has a pure decision part ([`decide`]) unit-tested
//! without a server, and a thin async driver (the private `internals` module) around it.
//!
//! - [`Mutex`]: Curator's `InterProcessMutex` (ephemeral sequential, watch only the
//!   predecessor), with node names `_c_<uuid>-lock-NNNNNNNNNN`, so a zkit process and a Java
//!   Curator process exclude each other on the same path.
//! - [`ReadWriteLock`]: Curator's `InterProcessReadWriteLock` (`__READ__` / `__WRIT__`).
//! - [`Semaphore`]: Curator's `InterProcessSemaphoreV2` layout (`locks/`, `leases/`).
//! - [`RevocableMutex`]: a mutex whose holder can be asked to release (`__REVOKE__` data).
//! - [`LeaseLock`]: TTL nodes (seed 002): survives without a session, bounded wait and hold.
//! - [`SimpleLock`]: one fixed node (seed 003 §4.2); NodeExists means taken.
//!
//! **Kazoo**: kazoo's `Lock` names nodes `<uuid>__lock__NNNNNNNNNN` and, by default, only
//! counts its own names as contenders; with `Lock(client, path, extra_lock_patterns=["-lock-"])`
//! it also sees Curator/zkit nodes. zkit always orders *every* sequential child by sequence
//! number, so it sees kazoo's nodes without configuration.
//!
//! **Not re-entrant**: locking a [`Mutex`] again while holding it through the same or another
//! value waits for itself (with `lock()`, forever; with `try_lock_for`, until the timeout).
//! Curator's mutex is re-entrant per thread; async tasks have no such identity, so zkit does not
//! guess: keep the guard and pass it along instead.

mod decide;
mod internals;
mod lease;
mod mutex;
mod rw;
mod semaphore;
mod simple;

pub use decide::{
    decide, decide_with, role_of, sorted_contenders, Decision, Role, Rule, MUTEX_NAME, READ_MARKER,
    WRITE_MARKER,
};
pub use internals::{LockGuard, LockOptions, REVOKE_MESSAGE};
pub use lease::LeaseLock;
pub use mutex::{Mutex, RevocableMutex};
pub use rw::ReadWriteLock;
pub use semaphore::{Lease, Semaphore};
pub use simple::SimpleLock;
