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
//! (`ephemeralOwner`, CURATOR-696), and it is withdrawn as soon as the connection is suspended:
//! during `Suspended` the session may already be gone on the server and someone else may lead.
//! The fencing token is the sequence number of the leader's node; it grows with every new
//! participant under the same parent, so a resource that rejects tokens lower than the highest
//! it has seen cannot be written by a deposed leader.

pub mod decide;
pub mod latch;
pub mod selector;

pub use decide::{latch_decision, LatchDecision, LATCH_NAME};
pub use latch::{LeaderLatch, Leadership};
pub use selector::{LeaderContext, LeaderSelector};
