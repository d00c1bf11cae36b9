//! The async driver shared by the sequential-node locks (Curator's `LockInternals`): create a
//! protected node, decide with [`super::decide_with`], watch only the node we wait for, verify
//! ownership, and hand out a [`LockGuard`] whose lost-signal is driven by a small monitor task.
//!
//! Invariants it keeps:
//! - A node is never left behind by a failed, timed-out or dropped acquisition: the attempt
//!   carries a drop guard that deletes the attempt's UUID-named node in the background.
//! - Ownership is declared only after checking that our node exists and, for ephemeral nodes,
//!   that its `ephemeralOwner` is our current session (CURATOR-696).
//! - `Suspended` changes nothing: the session provably lives until
//!   [`crate::Session::valid_until`], and the session layer declares `Lost` when that passes.
//! - A session lost (or replaced) under a holder fires the holder's lost-signal; under a waiting
//!   acquisition it makes the waiter enter the line again on the next session, or fail with
//!   [`crate::Error::SessionLost`] ([`LockOptions::fail_waiters_on_lost`]). A holder never silently
//!   continues on the next session.
//!
//! Split in three: [`acquire`] (contending for the lock), [`guard`] (the held lock and its
//! lost-signal monitor) and [`release`] (deleting the node, now or in the background).

mod acquire;
mod guard;
mod release;

pub(crate) use acquire::{acquire, recover, until, Contend};
pub use guard::LockGuard;
pub(crate) use release::{Cleanup, ReleaseSlot};

use crate::retry::RetryPolicy;

/// Data Curator's `LockInternals` writes to a revoke-able lock node to ask its holder to release.
pub const REVOKE_MESSAGE: &[u8] = b"__REVOKE__";

/// Options shared by the lock recipes.
#[derive(Debug, Clone)]
pub struct LockOptions {
    /// What a waiter does when its session is `Lost` before it holds the lock: `false` (the
    /// default) enters the line again on the next session; `true` fails the acquisition with
    /// [`crate::Error::SessionLost`], as Curator's `acquire` throws.
    ///
    /// Re-entering is the default because a waiter holds nothing: starting over on a new
    /// session cannot break exclusion, it only costs the waiter its place in the line, and a
    /// leader election of the ensemble then never fails a waiting caller. Choose `true` when
    /// the caller must learn that everything tied to the old session (its ephemeral nodes,
    /// its watches) is gone. A `Suspended` session is never a reason to give up, for holders
    /// nor waiters: see the failover table in the crate docs.
    pub fail_waiters_on_lost: bool,
    /// Retry policy for recoverable errors while connected.
    pub retry: RetryPolicy,
    /// Data stored in the lock node (diagnostics; Curator stores the host address).
    pub node_data: Vec<u8>,
}

impl Default for LockOptions {
    fn default() -> Self {
        LockOptions {
            fail_waiters_on_lost: false,
            retry: RetryPolicy::default(),
            node_data: format!("zkit pid={}", std::process::id()).into_bytes(),
        }
    }
}
