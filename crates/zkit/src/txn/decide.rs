//! The pure decision core of two-phase commit: given what is in ZooKeeper (participants, votes,
//! decision, deadline) and the time, what should the coordinator, the recovering leader and a
//! participant do next. No I/O, no clock: time is an argument, so every rule is unit-tested
//! without a server.
//!
//! The rules (presumed abort):
//! - a decision, once written, is final: everyone follows it;
//! - any `no` vote → abort;
//! - every participant voted `yes` → commit;
//! - a vote still missing at the prepare deadline → abort;
//! - otherwise wait, until the deadline at the latest.

use std::collections::{BTreeMap, BTreeSet};

/// A participant's vote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Vote {
    /// Prepared durably: will commit if told to.
    Yes,
    /// Refused, with the reason; nothing is held.
    No(String),
}

/// The outcome of a transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Every participant applies the transaction.
    Commit,
    /// Every participant rolls it back; the reason says why.
    Abort(String),
}

impl Decision {
    /// `commit` or `abort`.
    pub fn word(&self) -> &'static str {
        match self {
            Decision::Commit => "commit",
            Decision::Abort(_) => "abort",
        }
    }
}

/// What the votes allow, at time `now_ms`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tally {
    /// Write this decision.
    Decide(Decision),
    /// Wait for more votes, until `until_ms` at the latest.
    Wait {
        /// The deadline (Unix ms); past it, missing votes mean abort.
        until_ms: u64,
        /// The participants that have not voted.
        missing: BTreeSet<String>,
    },
}

/// Tallies `votes` of `participants` against `deadline_ms` at `now_ms`. Votes of
/// non-participants are ignored.
pub fn tally(
    participants: &BTreeSet<String>,
    votes: &BTreeMap<String, Vote>,
    deadline_ms: u64,
    now_ms: u64,
) -> Tally {
    // A `no` decides at once, even before the other votes are in (as in the textbook
    // protocol): it cannot become a commit.
    if let Some((who, reason)) = participants.iter().find_map(|p| match votes.get(p) {
        Some(Vote::No(reason)) => Some((p, reason)),
        _ => None,
    }) {
        return Tally::Decide(Decision::Abort(format!("{who} voted no: {reason}")));
    }
    let missing: BTreeSet<String> = participants
        .iter()
        .filter(|p| !votes.contains_key(*p))
        .cloned()
        .collect();
    if missing.is_empty() {
        return Tally::Decide(Decision::Commit);
    }
    if now_ms >= deadline_ms {
        let names: Vec<&str> = missing.iter().map(String::as_str).collect();
        return Tally::Decide(Decision::Abort(format!(
            "vote timeout: no vote from {}",
            names.join(", ")
        )));
    }
    Tally::Wait {
        until_ms: deadline_ms,
        missing,
    }
}

/// What the recovering leader knows about one undecided transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Undecided {
    /// The prepare deadline (Unix ms).
    pub deadline_ms: u64,
    /// Whether the coordinator that began it is still live (`coordinators/live/<id>` exists).
    pub coordinator_alive: bool,
}

/// The leader's step for an undecided transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecoveryStep {
    /// Take it over now: collect the votes and decide (commit only if all are yes).
    Resume,
    /// Leave it to its live coordinator; look again at `at_ms` (deadline + grace) at the latest,
    /// or when the coordinator dies.
    LookAgain {
        /// When to look again (Unix ms).
        at_ms: u64,
    },
}

/// Whether the leader resumes an undecided transaction now. A live coordinator keeps its
/// transaction until `grace_ms` after the deadline (it aborts by itself at the deadline, so
/// still being undecided then means it is stuck, e.g. partitioned); a dead one's transaction is
/// resumed at once, because all its votes may already be in (the "coordinator crash"
/// case, which otherwise blocks forever).
pub fn recovery_step(txn: &Undecided, grace_ms: u64, now_ms: u64) -> RecoveryStep {
    let give_up_at = txn.deadline_ms.saturating_add(grace_ms);
    if !txn.coordinator_alive || now_ms >= give_up_at {
        RecoveryStep::Resume
    } else {
        RecoveryStep::LookAgain { at_ms: give_up_at }
    }
}

/// When the recovering leader next tries to expire a decided transaction begun at
/// `created_ms`: `retention_ms` after it began, then (after `failed` attempts that found it still
/// owned or changing) backing off by 1 s, 2 s, 4 s, … capped at `retention_ms`.
pub fn expiry_at(created_ms: u64, retention_ms: u64, failed: u32, now_ms: u64) -> u64 {
    let first = created_ms.saturating_add(retention_ms);
    if failed == 0 {
        return first;
    }
    let backoff = (1000u64 << failed.min(16)).min(retention_ms.max(1000));
    first.max(now_ms.saturating_add(backoff))
}

/// A participant's local state of one transaction, as its resource reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Local {
    /// Never prepared (or prepared and refused: nothing is held).
    Unknown,
    /// Prepared durably (voted or about to vote yes); the outcome is not applied.
    Prepared,
}

/// A participant's step for one transaction in its inbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParticipantStep {
    /// Prepare the payload and vote.
    Prepare,
    /// Vote `yes` (prepared before a crash, but the vote was never written).
    VoteYes,
    /// Wait for the decision (voted, nothing decided yet).
    AwaitDecision,
    /// Apply the decision (idempotent), then acknowledge it.
    Apply(Decision),
}

/// The participant's step, given its local state, its vote in ZooKeeper and the decision.
/// A participant that never prepared must not prepare once a decision exists (it can only be
/// an abort, or a commit that does not need it, which the rules above rule out).
pub fn participant_step(
    local: Local,
    my_vote: Option<&Vote>,
    decision: Option<&Decision>,
) -> ParticipantStep {
    match (decision, my_vote, local) {
        (Some(decision), _, _) => ParticipantStep::Apply(decision.clone()),
        (None, Some(_), _) => ParticipantStep::AwaitDecision,
        (None, None, Local::Prepared) => ParticipantStep::VoteYes,
        (None, None, Local::Unknown) => ParticipantStep::Prepare,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expiry_waits_for_retention_then_backs_off() {
        assert_eq!(expiry_at(1_000, 60_000, 0, 5_000), 61_000);
        // A failed attempt at 61 s: 2 s later, then 4 s, capped at the retention.
        assert_eq!(expiry_at(1_000, 60_000, 1, 61_000), 63_000);
        assert_eq!(expiry_at(1_000, 60_000, 2, 63_000), 67_000);
        assert_eq!(expiry_at(1_000, 60_000, 30, 67_000), 127_000);
        // Never before the retention, even after failures.
        assert_eq!(expiry_at(1_000, 60_000, 1, 2_000), 61_000);
    }

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    fn votes(v: &[(&str, Vote)]) -> BTreeMap<String, Vote> {
        v.iter().map(|(p, v)| (p.to_string(), v.clone())).collect()
    }

    #[test]
    fn all_yes_commits_any_no_aborts_missing_waits_then_aborts() {
        let ps = set(&["P1", "P2", "P3"]);
        let all_yes = votes(&[("P1", Vote::Yes), ("P2", Vote::Yes), ("P3", Vote::Yes)]);
        assert_eq!(
            tally(&ps, &all_yes, 100, 0),
            Tally::Decide(Decision::Commit)
        );
        // Past the deadline, a complete set of yes votes still commits.
        assert_eq!(
            tally(&ps, &all_yes, 100, 500),
            Tally::Decide(Decision::Commit)
        );

        let one_no = votes(&[("P2", Vote::No("constraint".into())), ("P3", Vote::Yes)]);
        assert_eq!(
            tally(&ps, &one_no, 100, 0),
            Tally::Decide(Decision::Abort("P2 voted no: constraint".into()))
        );

        let partial = votes(&[("P1", Vote::Yes), ("P2", Vote::Yes)]);
        assert_eq!(
            tally(&ps, &partial, 100, 99),
            Tally::Wait {
                until_ms: 100,
                missing: set(&["P3"])
            }
        );
        assert_eq!(
            tally(&ps, &partial, 100, 100),
            Tally::Decide(Decision::Abort("vote timeout: no vote from P3".into()))
        );
    }

    #[test]
    fn votes_of_strangers_do_not_count() {
        let ps = set(&["P1"]);
        let v = votes(&[("P9", Vote::Yes)]);
        assert!(matches!(tally(&ps, &v, 10, 0), Tally::Wait { .. }));
        let v = votes(&[("P1", Vote::Yes), ("P9", Vote::No("x".into()))]);
        assert_eq!(tally(&ps, &v, 10, 0), Tally::Decide(Decision::Commit));
    }

    #[test]
    fn leader_resumes_dead_coordinators_at_once_and_live_ones_after_grace() {
        let dead = Undecided {
            deadline_ms: 1_000,
            coordinator_alive: false,
        };
        assert_eq!(recovery_step(&dead, 500, 0), RecoveryStep::Resume);
        let alive = Undecided {
            deadline_ms: 1_000,
            coordinator_alive: true,
        };
        assert_eq!(
            recovery_step(&alive, 500, 0),
            RecoveryStep::LookAgain { at_ms: 1_500 }
        );
        assert_eq!(recovery_step(&alive, 500, 1_500), RecoveryStep::Resume);
        let far = Undecided {
            deadline_ms: u64::MAX,
            coordinator_alive: true,
        };
        assert_eq!(
            recovery_step(&far, 500, 0),
            RecoveryStep::LookAgain { at_ms: u64::MAX }
        );
    }

    #[test]
    fn participant_steps_follow_decision_vote_and_local_state() {
        let commit = Decision::Commit;
        assert_eq!(
            participant_step(Local::Unknown, None, None),
            ParticipantStep::Prepare
        );
        assert_eq!(
            participant_step(Local::Prepared, None, None),
            ParticipantStep::VoteYes
        );
        assert_eq!(
            participant_step(Local::Prepared, Some(&Vote::Yes), None),
            ParticipantStep::AwaitDecision
        );
        // A decision wins over everything, also for a participant that never prepared.
        assert_eq!(
            participant_step(Local::Unknown, None, Some(&commit)),
            ParticipantStep::Apply(Decision::Commit)
        );
        let abort = Decision::Abort("x".into());
        assert_eq!(
            participant_step(Local::Prepared, Some(&Vote::Yes), Some(&abort)),
            ParticipantStep::Apply(abort.clone())
        );
    }
}
