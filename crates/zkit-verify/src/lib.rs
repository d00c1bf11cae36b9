//! zkit-verify: Jepsen-style verification of zkit. Client processes (or tasks) with their own
//! ZooKeeper sessions run seeded workloads while a nemesis injects faults; a recorder keeps the
//! history of what they asked and were told; pure checkers decide whether the history is
//! allowed by what ZooKeeper (and each recipe) promises.
//!
//! # Layout
//! - [`history`]: events (invoke / ok / fail / info, monotonic times, process ids), faults,
//!   the JSON-lines text form.
//! - [`checker`]: the checkers (WGL linearizability of CAS registers, set, unique ids, queue,
//!   sessions, locks, ledger), each with known-good and known-bad self-tests.
//! - [`generator`]: seeded per-client operation generators.
//! - [`nemesis`]: the seeded fault schedule and what injects it (server process, proxies,
//!   tmpfs, ensemble link plumbing).
//! - [`zk_ops`]: every ZooKeeper call, on `zkit::Session`; [`executor`]: one history op on it;
//!   [`client`]: task and process clients.
//! - [`workload`]: which clients, faults and checker each workload uses; [`runner`]: one run
//!   from server start to verdict; [`soak`]: the server's RSS and descriptors over a run.
//!
//! The binary (`zkit-verify`) runs the long profile (`--minutes N`), re-checks saved
//! histories (`check`), and hosts the client processes (`client`) and the embedded server
//! with test-only knobs (`serve`). The quick profile is `tests/quick.rs`.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod checker;
pub mod client;
pub mod executor;
pub mod generator;
pub mod history;
pub mod nemesis;
pub mod runner;
pub mod soak;
pub mod workload;
pub mod zk_ops;

/// Errors of setting up or running a verification.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A ZooKeeper call during setup.
    #[error("zookeeper: {0}")]
    Zk(#[from] zkit::Error),
    /// Files, sockets.
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    /// A child process (server, client) misbehaved.
    #[error("process: {0}")]
    Process(String),
    /// The environment cannot host the run (not root for tmpfs, ...).
    #[error("setup: {0}")]
    Setup(String),
    /// A history did not pair up.
    #[error(transparent)]
    History(#[from] history::HistoryError),
}

/// Locks a std mutex, ignoring poisoning (every critical section here is one push or read).
pub(crate) fn lock_vec<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
