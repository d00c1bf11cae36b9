//! The async driver shared by the sequential-node locks (Curator's `LockInternals`): create a
//! protected node, decide with [`super::decide_with`], watch only the node we wait for, verify
//! ownership, and hand out a [`LockGuard`] whose lost-signal is driven by a small monitor task.
//!
//! Invariants it keeps:
//! - A node is never left behind by a failed, timed-out or dropped acquisition: the attempt
//!   carries a drop guard that deletes the attempt's UUID-named node in the background.
//! - Ownership is declared only after checking that our node exists and, for ephemeral nodes,
//!   that its `ephemeralOwner` is our current session (CURATOR-696).
//! - A session lost (or replaced, or suspended when that counts as lost) under a waiting
//!   acquisition fails it with [`Error::SessionLost`]; under a holder it fires the holder's
//!   lost-signal. Neither silently continues on the next session.
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
    /// Whether `Suspended` fires the holder's lost-signal (default `true`, like Curator's
    /// `StandardConnectionStateErrorPolicy`): during a disconnect we cannot know whether the
    /// session (and so the lock) survives. With `false`, only `Lost` (and deletion of the node)
    /// fire it. The same choice applies to waiters: with `true`, an acquisition that sees its
    /// session suspended fails with [`Error::SessionLost`]; with `false` it waits for the
    /// reconnect and fails only on `Lost`.
    pub suspended_is_lost: bool,
    /// Retry policy for recoverable errors while connected.
    pub retry: RetryPolicy,
    /// Data stored in the lock node (diagnostics; Curator stores the host address).
    pub node_data: Vec<u8>,
}

impl Default for LockOptions {
    fn default() -> Self {
        LockOptions {
            suspended_is_lost: true,
            retry: RetryPolicy::default(),
            node_data: format!("zkit pid={}", std::process::id()).into_bytes(),
        }
    }
}
