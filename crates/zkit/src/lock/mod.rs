//! Lock recipes on the session layer. Each has a pure decision part ([`decide`]) unit-tested
//! without a server, and a thin async driver (the private `internals` module) around it.
//!
//! - [`Mutex`]: Curator's `InterProcessMutex` (ephemeral sequential, watch only the
//!   predecessor), with node names `_c_<uuid>-lock-NNNNNNNNNN`, so a zkit process and a Java
//!   Curator process exclude each other on the same path. The uncontended acquire is one round
//!   trip (create and listing pipelined); after [`LockGuard::release_in_background`] (or
//!   dropping the guard), the next `lock()` on the same mutex object deletes the old node and
//!   creates the new one in one transaction.
//! - [`ReadWriteLock`]: Curator's `InterProcessReadWriteLock` (`__READ__` / `__WRIT__`).
//! - [`Semaphore`]: Curator's `InterProcessSemaphoreV2` layout (`locks/`, `leases/`).
//! - [`RevocableMutex`]: a mutex whose holder can be asked to release (`__REVOKE__` data).
//! - [`LeaseLock`]: TTL nodes: survives without a session, bounded wait and hold.
//! - [`SimpleLock`]: one fixed node; NodeExists means taken.
//! - [`MultiLock`]: all of several mutexes or none, taken in one canonical order (Curator's
//!   `InterProcessMultiLock`, without its deadlock between different listing orders).
//! - [`SemaphoreMutex`]: Curator's `InterProcessSemaphoreMutex` (a one-lease semaphore).
//! - [`KazooLock`]: a mutex in kazoo's `Lock` layout (`…__lock__NNNNNNNNNN`), which kazoo's
//!   default `Lock` and zkit both see.
//! - [`NonBlockingLease`], [`MultiNonBlockingLease`]: kazoo's time-based leases (layout and
//!   JSON shared with kazoo).
//!
//! **Kazoo** (each claim below is exercised by `tests/kazoo_interop.rs` on both servers): kazoo's
//! `Lock` names its nodes `<uuid-hex>__lock__NNNNNNNNNN` and counts as contenders only children
//! matching `(__lock__|<extra patterns>)` followed by the 10-digit sequence. zkit counts *every*
//! child with a 10-digit sequence suffix, ordered by that number. Hence:
//! - zkit [`Mutex`] and kazoo `Lock(client, path, extra_lock_patterns=["-lock-"])` (kazoo 2.7.1
//!   and later) exclude each other: each sees the other's nodes in one sequence order.
//! - zkit [`Mutex`] and kazoo's default `Lock` do **not**: zkit waits for a kazoo holder, but
//!   kazoo ignores zkit's `_c_<uuid>-lock-` nodes and acquires while zkit holds. Never mix them
//!   without `extra_lock_patterns`.
//! - Curator and kazoo are outside zkit's control (Curator sorts by the text after `lock-`, which
//!   kazoo names lack); kazoo's `ReadLock`/`WriteLock` (`__rlock__`/`__lock__`) against
//!   [`ReadWriteLock`] is not tested. zkit treats `__rlock__` nodes as readers.
//!
//! **Not re-entrant**: locking a [`Mutex`] again while holding it through the same or another
//! value waits for itself (with `lock()`, forever; with `try_lock_for`, until the timeout).
//! Curator's mutex is re-entrant per thread; async tasks have no such identity, so zkit does not
//! guess: keep the guard and pass it along instead.

mod decide;
mod internals;
mod kazoo;
mod lease;
mod multi;
mod mutex;
pub mod nonblocking_lease;
mod rw;
mod semaphore;
mod semaphore_mutex;
mod simple;

pub use decide::{
    decide, decide_with, role_of, sorted_contenders, Decision, Role, Rule, MUTEX_NAME, READ_MARKER,
    WRITE_MARKER,
};
pub use internals::{LockGuard, LockOptions, REVOKE_MESSAGE};
pub use kazoo::{KazooLock, KAZOO_LOCK_NAME};
pub use lease::LeaseLock;
pub use multi::{acquisition_order, MultiLock, MultiLockGuard};
pub use mutex::{Mutex, RevocableMutex};
pub use nonblocking_lease::{LeaseData, MultiNonBlockingLease, NonBlockingLease};
pub use rw::ReadWriteLock;
pub use semaphore::{Lease, Semaphore};
pub use semaphore_mutex::SemaphoreMutex;
pub use simple::SimpleLock;
