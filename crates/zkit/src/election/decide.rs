//! The pure decision core of [`super::LeaderLatch`]: given our node, the children of the latch
//! directory, and who owns our node, are we the leader, whom do we wait for, or must we create
//! our node again? No I/O.

use crate::lock::{decide, Decision};

/// Name part of latch nodes (Curator's `LeaderLatch` uses `latch-`; protected names put
/// `_c_<uuid>-` in front).
pub const LATCH_NAME: &str = "latch-";

/// The outcome of [`latch_decision`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LatchDecision {
    /// We lead.
    Leader,
    /// Wait for this child (our predecessor) to go away, then decide again.
    Follow(String),
    /// Our node is gone, or is not owned by our current session: create a new one.
    Recreate,
}

/// Decides for our node `my_node` (a child name) among `children`. `my_owner` is the
/// `ephemeralOwner` of our node as just read (`None`: it does not exist); `my_session` our
/// current session id. Ordering is by sequence number only (see [`crate::lock::decide`]).
///
/// A node first in line but owned by another session (a node an *older* session of ours made,
/// found again by a protected-create retry) does not make us leader: CURATOR-696, where a
/// client believed itself leader on a node that the server deleted with its old session.
pub fn latch_decision<S: AsRef<str>>(
    my_node: &str,
    children: &[S],
    my_session: i64,
    my_owner: Option<i64>,
) -> LatchDecision {
    match decide(my_node, children) {
        Decision::NodeGone => LatchDecision::Recreate,
        Decision::WatchPredecessor(predecessor) => LatchDecision::Follow(predecessor),
        Decision::Acquired => match my_owner {
            Some(owner) if owner == my_session => LatchDecision::Leader,
            _ => LatchDecision::Recreate,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "_c_aaaa-latch-0000000003";
    const B: &str = "_c_bbbb-latch-0000000001";
    const C: &str = "_c_cccc-latch-0000000002";

    #[test]
    fn lowest_sequence_leads_regardless_of_name_order() {
        let children = [A, B, C];
        assert_eq!(
            latch_decision(B, &children, 7, Some(7)),
            LatchDecision::Leader
        );
        assert_eq!(
            latch_decision(A, &children, 7, Some(7)),
            LatchDecision::Follow(C.to_string())
        );
        assert_eq!(
            latch_decision(C, &children, 7, Some(7)),
            LatchDecision::Follow(B.to_string())
        );
    }

    #[test]
    fn a_node_of_another_session_never_leads() {
        // CURATOR-696: first in line, but the node belongs to our previous session.
        assert_eq!(
            latch_decision(B, &[A, B], 8, Some(7)),
            LatchDecision::Recreate
        );
        // Gone between the listing and the stat.
        assert_eq!(latch_decision(B, &[A, B], 8, None), LatchDecision::Recreate);
        // Not among the children at all.
        assert_eq!(
            latch_decision(B, &[A, C], 8, Some(8)),
            LatchDecision::Recreate
        );
        // Non-sequential junk in the directory is ignored.
        assert_eq!(
            latch_decision(B, &["readme", B], 8, Some(8)),
            LatchDecision::Leader
        );
    }
}
