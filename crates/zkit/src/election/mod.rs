//! Leader election: [`LeaderLatch`] (Curator's `LeaderLatch`: ephemeral-sequential nodes, the
//! lowest is the leader) and [`LeaderSelector`] (runs a task while leader, cancels it on loss,
//! optionally re-queues).
//!
//! # Layout
//! - [`decide`]: the pure decision core ([`decide::latch_decision`]), unit-tested without a server.
//! - [`latch`]: the async driver of [`LeaderLatch`].
//! - [`selector`]: [`LeaderSelector`] on top of it.
//!
//! Leadership is only claimed after checking that the node is owned by *our current* session
//! (`ephemeralOwner`, CURATOR-696). It is kept through `Suspended` while the session provably
//! lives ([`crate::Session::valid_until`]) and withdrawn on `Lost`, which the session layer
//! declares when that deadline passes: no server can have expired the session before.
//! The fencing token is the sequence number of the leader's node; it grows with every new
//! participant under the same parent, so a resource that rejects tokens lower than the highest
//! it has seen cannot be written by a deposed leader.

pub mod decide;
pub mod latch;
pub mod selector;

pub use decide::{latch_decision, LatchDecision, LATCH_NAME};
pub use latch::{LeaderLatch, Leadership};
pub use selector::{LeaderContext, LeaderSelector};
