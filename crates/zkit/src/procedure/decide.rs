//! The pure decision core of the procedure framework: given what a coordinator or a member has
//! observed in the tree (a [`CoordinatorView`] / [`MemberView`]), what it must do next.
//!
//! No I/O, no clock (a timeout arrives as `timed_out: bool`), so every ordering the drivers can
//! meet, including the ones HBase gets wrong, is a unit test here. The drivers in
//! [`super::coordinator`] and [`super::member`] only read znodes into a view, call these
//! functions and carry out the step.

use std::collections::BTreeSet;
use std::fmt;

/// Why a procedure was aborted: who decided it (a member name, or `coordinator`) and why.
/// Serialized as JSON in `abort/<instance>` (see the module docs of [`super`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AbortReason {
    /// The member that failed, or [`COORDINATOR`] when the coordinator aborted.
    pub source: String,
    /// Human-readable cause.
    pub message: String,
}

/// The `source` of an abort decided by the coordinator (timeout, cancellation, dead member
/// detection is reported under the dead member's name instead).
pub const COORDINATOR: &str = "coordinator";

impl AbortReason {
    /// An abort caused by `source` with `message`.
    pub fn new(source: impl Into<String>, message: impl Into<String>) -> Self {
        AbortReason {
            source: source.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for AbortReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.source == COORDINATOR {
            write!(f, "coordinator: {}", self.message)
        } else {
            write!(f, "member '{}': {}", self.source, self.message)
        }
    }
}

/// What a coordinator sees of one instance.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CoordinatorView {
    /// `acquired/<instance>` exists.
    pub instance_exists: bool,
    /// Children of `acquired/<instance>`: members past their acquire barrier.
    pub acquired: BTreeSet<String>,
    /// `reached/<instance>` exists: the global barrier was released.
    pub reached_exists: bool,
    /// Children of `reached/<instance>`: members that finished `inside_barrier`.
    pub reached: BTreeSet<String>,
    /// `abort/<instance>`, parsed, when it exists.
    pub abort: Option<AbortReason>,
    /// Children of `members/`: members whose session is alive.
    pub live: BTreeSet<String>,
    /// The coordinator's deadline has passed.
    pub timed_out: bool,
}

/// The coordinator's next step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CoordinatorStep {
    /// Nothing to do until a watch fires or the deadline passes.
    Wait,
    /// Every expected member acquired: create `reached/<instance>`.
    ReleaseBarrier,
    /// Every expected member finished: collect results, clean up.
    Complete,
    /// Write `abort/<instance>` with this reason, then clean up.
    Abort(AbortReason),
    /// Someone already wrote `abort/<instance>`: clean up and report it.
    Aborted(AbortReason),
}

/// Decides the coordinator's next step for the members `expected`.
///
/// Order matters: an existing abort wins (it may already have reached members); completion wins
/// over a member that died *after* writing its result; a dead expected member aborts at once
/// instead of waiting for the timeout (HBase only times out); unexpected members are ignored.
pub fn decide_coordinator(expected: &BTreeSet<String>, view: &CoordinatorView) -> CoordinatorStep {
    if let Some(reason) = &view.abort {
        return CoordinatorStep::Aborted(reason.clone());
    }
    if !view.instance_exists {
        return CoordinatorStep::Abort(AbortReason::new(
            COORDINATOR,
            "the instance node was removed while the procedure ran",
        ));
    }
    if view.reached_exists && expected.iter().all(|m| view.reached.contains(m)) {
        return CoordinatorStep::Complete;
    }
    // A member that already delivered its result may go away; anyone else must stay alive.
    if let Some(dead) = expected
        .iter()
        .find(|m| !view.live.contains(*m) && !view.reached.contains(*m))
    {
        return CoordinatorStep::Abort(AbortReason::new(
            dead.clone(),
            "member is not alive (its ephemeral member node is gone)",
        ));
    }
    if view.timed_out {
        let missing: Vec<&str> = if view.reached_exists {
            expected
                .iter()
                .filter(|m| !view.reached.contains(*m))
                .map(String::as_str)
                .collect()
        } else {
            expected
                .iter()
                .filter(|m| !view.acquired.contains(*m))
                .map(String::as_str)
                .collect()
        };
        let phase = if view.reached_exists {
            "inside the barrier"
        } else {
            "acquiring the barrier"
        };
        return CoordinatorStep::Abort(AbortReason::new(
            COORDINATOR,
            format!("timed out {phase}, waiting for {}", missing.join(",")),
        ));
    }
    if !view.reached_exists && expected.iter().all(|m| view.acquired.contains(m)) {
        return CoordinatorStep::ReleaseBarrier;
    }
    CoordinatorStep::Wait
}

/// What a member has done for one instance, in this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberLocal {
    /// Nothing yet.
    New,
    /// `acquire_barrier` succeeded and `acquired/<instance>/<me>` was created.
    Acquired,
    /// `inside_barrier` succeeded and `reached/<instance>/<me>` was created.
    Finished,
}

/// What a member sees of one instance.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemberView {
    /// `acquired/<instance>` exists.
    pub instance_exists: bool,
    /// This member is one of the instance's expected members (or the instance names none).
    pub expected_me: bool,
    /// `acquired/<instance>/<me>` exists.
    pub my_acquired: bool,
    /// `reached/<instance>` exists.
    pub reached_exists: bool,
    /// `reached/<instance>/<me>` exists.
    pub my_reached: bool,
    /// `abort/<instance>`, parsed, when it exists.
    pub abort: Option<AbortReason>,
}

/// A member's next step for one instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemberStep {
    /// Not ours, already aborted before we started, or already completed: leave it alone.
    Ignore,
    /// Run `acquire_barrier(args)`, then create `acquired/<instance>/<me>`.
    RunAcquire,
    /// Wait for `reached/<instance>` or an abort.
    Wait,
    /// Run `inside_barrier()`, then create `reached/<instance>/<me>` with the result.
    RunInside,
    /// Done with this instance.
    Done,
    /// Run `cleanup(reason)` and stop.
    Cleanup(AbortReason),
    /// Write `abort/<instance>` with this reason (nothing local to clean up) and stop.
    Abort(AbortReason),
}

/// Decides a member's next step for one instance, from what it did locally and what it sees.
pub fn decide_member(me: &str, local: MemberLocal, view: &MemberView) -> MemberStep {
    match local {
        MemberLocal::New => {
            if !view.instance_exists || !view.expected_me {
                MemberStep::Ignore
            } else if view.my_reached {
                // HBASE-29381: a completed instance must never run twice (a member that
                // restarts, or sees the instance listed again, must not redo its work).
                MemberStep::Ignore
            } else if view.abort.is_some() {
                // Aborted before we did anything: there is nothing to clean up.
                MemberStep::Ignore
            } else if view.my_acquired {
                // A previous incarnation of this member acquired the barrier and its local state
                // is gone: it cannot run inside_barrier on it, so the procedure must abort.
                MemberStep::Abort(AbortReason::new(
                    me,
                    "member restarted after acquiring the barrier; its local state is lost",
                ))
            } else {
                // Also when `reached/<instance>` already exists: HBase leaves "reached before our
                // acquired was processed" as a TODO; we simply acquire first, then go inside.
                MemberStep::RunAcquire
            }
        }
        MemberLocal::Acquired => {
            if let Some(reason) = &view.abort {
                MemberStep::Cleanup(reason.clone())
            } else if !view.instance_exists {
                MemberStep::Cleanup(AbortReason::new(
                    COORDINATOR,
                    "the instance was removed before the barrier was released",
                ))
            } else if view.reached_exists {
                MemberStep::RunInside
            } else {
                MemberStep::Wait
            }
        }
        // A finished member stays until the instance is gone: another member may still fail
        // inside the barrier, and then every member cleans up, finished or not.
        MemberLocal::Finished => {
            if let Some(reason) = &view.abort {
                MemberStep::Cleanup(reason.clone())
            } else if !view.instance_exists {
                MemberStep::Done
            } else {
                MemberStep::Wait
            }
        }
    }
}

/// After an abort, the members the coordinator still waits for before removing the instance:
/// live members whose `acquired/<instance>/<member>` node is still there (a member deletes it
/// once its `cleanup` ran). Dead members are not waited for.
pub fn pending_acks(acquired: &BTreeSet<String>, live: &BTreeSet<String>) -> BTreeSet<String> {
    acquired.intersection(live).cloned().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    fn running(live: &[&str]) -> CoordinatorView {
        CoordinatorView {
            instance_exists: true,
            live: set(live),
            ..Default::default()
        }
    }

    #[test]
    fn coordinator_waits_then_releases_then_completes() {
        let expected = set(&["a", "b", "c"]);
        let mut view = running(&["a", "b", "c"]);
        assert_eq!(decide_coordinator(&expected, &view), CoordinatorStep::Wait);
        view.acquired = set(&["a", "b"]);
        assert_eq!(decide_coordinator(&expected, &view), CoordinatorStep::Wait);
        view.acquired = set(&["a", "b", "c"]);
        assert_eq!(
            decide_coordinator(&expected, &view),
            CoordinatorStep::ReleaseBarrier
        );
        view.reached_exists = true;
        view.reached = set(&["a", "c"]);
        assert_eq!(decide_coordinator(&expected, &view), CoordinatorStep::Wait);
        view.reached = set(&["a", "b", "c"]);
        assert_eq!(
            decide_coordinator(&expected, &view),
            CoordinatorStep::Complete
        );
    }

    #[test]
    fn unexpected_members_are_ignored() {
        let expected = set(&["a"]);
        let mut view = running(&["a", "x"]);
        view.acquired = set(&["x"]);
        assert_eq!(decide_coordinator(&expected, &view), CoordinatorStep::Wait);
        view.acquired = set(&["a", "x"]);
        assert_eq!(
            decide_coordinator(&expected, &view),
            CoordinatorStep::ReleaseBarrier
        );
    }

    #[test]
    fn dead_expected_member_aborts_at_once_naming_it() {
        let expected = set(&["a", "b"]);
        let mut view = running(&["a"]);
        view.acquired = set(&["a", "b"]);
        match decide_coordinator(&expected, &view) {
            CoordinatorStep::Abort(reason) => assert_eq!(reason.source, "b"),
            other => panic!("{other:?}"),
        }
        // A dead *unexpected* member changes nothing.
        let view = running(&["a", "b"]);
        assert_eq!(decide_coordinator(&expected, &view), CoordinatorStep::Wait);
    }

    #[test]
    fn member_that_delivered_its_result_may_die() {
        let expected = set(&["a", "b"]);
        let mut view = running(&["b"]);
        view.acquired = set(&["a", "b"]);
        view.reached_exists = true;
        view.reached = set(&["a"]);
        assert_eq!(decide_coordinator(&expected, &view), CoordinatorStep::Wait);
        view.live.clear();
        view.reached = set(&["a", "b"]);
        assert_eq!(
            decide_coordinator(&expected, &view),
            CoordinatorStep::Complete
        );
    }

    #[test]
    fn existing_abort_wins_over_everything() {
        let expected = set(&["a"]);
        let mut view = running(&[]);
        view.reached_exists = true;
        view.reached = set(&["a"]);
        view.timed_out = true;
        view.abort = Some(AbortReason::new("a", "disk full"));
        assert_eq!(
            decide_coordinator(&expected, &view),
            CoordinatorStep::Aborted(AbortReason::new("a", "disk full"))
        );
    }

    #[test]
    fn timeout_names_the_missing_members_and_phase() {
        let expected = set(&["a", "b", "c"]);
        let mut view = running(&["a", "b", "c"]);
        view.acquired = set(&["a"]);
        view.timed_out = true;
        match decide_coordinator(&expected, &view) {
            CoordinatorStep::Abort(reason) => {
                assert_eq!(reason.source, COORDINATOR);
                assert!(reason.message.contains("acquiring"), "{}", reason.message);
                assert!(reason.message.contains("b,c"), "{}", reason.message);
            }
            other => panic!("{other:?}"),
        }
        // Completion observed together with the deadline still completes.
        view.reached_exists = true;
        view.reached = expected.clone();
        assert_eq!(
            decide_coordinator(&expected, &view),
            CoordinatorStep::Complete
        );
    }

    #[test]
    fn removed_instance_aborts() {
        let expected = set(&["a"]);
        let view = CoordinatorView {
            live: set(&["a"]),
            ..Default::default()
        };
        assert!(matches!(
            decide_coordinator(&expected, &view),
            CoordinatorStep::Abort(_)
        ));
    }

    fn fresh() -> MemberView {
        MemberView {
            instance_exists: true,
            expected_me: true,
            ..Default::default()
        }
    }

    #[test]
    fn member_happy_path() {
        let mut view = fresh();
        assert_eq!(
            decide_member("m", MemberLocal::New, &view),
            MemberStep::RunAcquire
        );
        view.my_acquired = true;
        assert_eq!(
            decide_member("m", MemberLocal::Acquired, &view),
            MemberStep::Wait
        );
        view.reached_exists = true;
        assert_eq!(
            decide_member("m", MemberLocal::Acquired, &view),
            MemberStep::RunInside
        );
        assert_eq!(
            decide_member("m", MemberLocal::Finished, &view),
            MemberStep::Wait
        );
        view.instance_exists = false;
        assert_eq!(
            decide_member("m", MemberLocal::Finished, &view),
            MemberStep::Done
        );
    }

    #[test]
    fn finished_member_cleans_up_when_another_fails_inside() {
        let mut view = fresh();
        view.reached_exists = true;
        view.my_reached = true;
        view.abort = Some(AbortReason::new("b", "inside failed"));
        assert_eq!(
            decide_member("m", MemberLocal::Finished, &view),
            MemberStep::Cleanup(AbortReason::new("b", "inside failed"))
        );
    }

    #[test]
    fn coordinator_waits_only_for_live_joined_members_to_ack() {
        let pending = pending_acks(&set(&["a", "b", "x"]), &set(&["a", "c", "x"]));
        assert_eq!(pending, set(&["a", "x"]));
        assert!(pending_acks(&set(&["b"]), &set(&["a"])).is_empty());
    }

    #[test]
    fn member_tolerates_reached_before_its_own_acquired() {
        // The barrier is already released when the member first looks (HBase's TODO): it still
        // acquires first, then goes inside without waiting for another event.
        let mut view = fresh();
        view.reached_exists = true;
        assert_eq!(
            decide_member("m", MemberLocal::New, &view),
            MemberStep::RunAcquire
        );
        // Its own acquired node not visible yet (e.g. a stale read) does not matter either.
        assert_eq!(
            decide_member("m", MemberLocal::Acquired, &view),
            MemberStep::RunInside
        );
    }

    #[test]
    fn member_never_runs_a_completed_instance_twice() {
        let mut view = fresh();
        view.my_acquired = true;
        view.reached_exists = true;
        view.my_reached = true;
        assert_eq!(
            decide_member("m", MemberLocal::New, &view),
            MemberStep::Ignore
        );
    }

    #[test]
    fn member_restarted_mid_procedure_aborts_it() {
        let mut view = fresh();
        view.my_acquired = true;
        match decide_member("m", MemberLocal::New, &view) {
            MemberStep::Abort(reason) => assert_eq!(reason.source, "m"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn member_ignores_foreign_aborted_and_missing_instances() {
        let mut view = fresh();
        view.expected_me = false;
        assert_eq!(
            decide_member("m", MemberLocal::New, &view),
            MemberStep::Ignore
        );
        let mut view = fresh();
        view.abort = Some(AbortReason::new("x", "boom"));
        assert_eq!(
            decide_member("m", MemberLocal::New, &view),
            MemberStep::Ignore
        );
        let view = MemberView::default();
        assert_eq!(
            decide_member("m", MemberLocal::New, &view),
            MemberStep::Ignore
        );
    }

    #[test]
    fn member_cleans_up_on_abort_or_removal_after_acquiring() {
        let mut view = fresh();
        view.my_acquired = true;
        view.reached_exists = true;
        view.abort = Some(AbortReason::new("x", "boom"));
        assert_eq!(
            decide_member("m", MemberLocal::Acquired, &view),
            MemberStep::Cleanup(AbortReason::new("x", "boom"))
        );
        let view = MemberView {
            expected_me: true,
            ..Default::default()
        };
        assert!(matches!(
            decide_member("m", MemberLocal::Acquired, &view),
            MemberStep::Cleanup(_)
        ));
    }
}
