//! The sessions checker: what ZooKeeper promises about one session's view and its lifetime.
//!
//! - **Monotonic reads** (ZooKeeper's "sequential consistency" and "single system image" within
//!   a session): for every znode, a session's read never shows an mzxid below one the same
//!   session already saw (through a read or its own write) in an operation that completed
//!   before the read was invoked; a znode it saw does not vanish from its view (persistent
//!   znodes only are read).
//! - **Ephemerals die with their session**: on one server, once a client was told its session
//!   expired, no read invoked afterwards (by an observer session) shows an ephemeral owned by
//!   it. An ensemble promises less, in two ways:
//!   - a read may come from a member that has lost the quorum and not noticed yet: a leader
//!     cut off from its followers serves its old copy until syncLimit passes without their acks
//!     (`Leader.lead`); ZooKeeper's reads are sequentially consistent, not linearizable, so
//!     that read is allowed. [`SessionChecker::stale_read_ms`] is that window (0 for one
//!     server, which selects the strict rule);
//!   - the leader's session tracker may tell a client "expired" before the closeSession
//!     transaction that deletes its ephemerals has committed, and that needs a quorum; a
//!     leader elected meanwhile takes the sessions over with a fresh timeout.
//!
//!   So on an ensemble the ephemeral must be gone a session timeout (plus grace and the
//!   stale-read window) after a quorum is seen to commit: the first acknowledged write invoked
//!   after the observed expiry and after the last member fault (kill, pause or isolation of a
//!   member) before the read. And once one observer session saw it gone, that session never
//!   sees it again.
//! - **No session outlives its timeout after a partition**: if a client's link was cut (its
//!   proxy black-holed) for longer than the session timeout plus a grace (the server's tick and
//!   scheduling), the server must have expired the session by `cut + timeout + grace`: an
//!   observer read invoked after that must not show its ephemeral. On an ensemble, only for a
//!   cut that came after a write committed past the last member fault (so the leader that
//!   expires the session was in place), with no member fault from the cut to the read, and
//!   with the stale-read window added.
//!
//! Partitions are the history's fault events named `partition` with a `client`.

use std::collections::{BTreeMap, HashMap};

use super::{Checker, Example, Report};
use crate::history::{
    EventKind, FaultPhase, History, HistoryBuilder, HistoryError, Op, Operation, Seen,
};

/// The sessions checker.
#[derive(Debug, Clone, Copy)]
pub struct SessionChecker {
    /// How long past its timeout a cut-off session may still live on the server (ms): the
    /// server's expiry granularity (a tick) and scheduling slack.
    pub grace_ms: u64,
    /// How long after a client was told its session expired an observer's read may still show
    /// the session's ephemeral (ms): 0 for one server; on an ensemble, syncLimit × tickTime
    /// plus a tick, the longest a member cut off from the quorum keeps serving reads.
    pub stale_read_ms: u64,
}

impl Default for SessionChecker {
    fn default() -> Self {
        SessionChecker {
            grace_ms: 500,
            stale_read_ms: 0,
        }
    }
}

struct SessionInfo {
    client: u32,
    timeout_ms: u64,
    /// End index of the SessionStart op.
    started: usize,
}

impl Checker for SessionChecker {
    fn name(&self) -> &'static str {
        "sessions"
    }

    fn check(&self, history: &History) -> Result<Report, HistoryError> {
        let mut report = Report::new(self.name());
        let ops = history.operations()?;
        let mut sessions: HashMap<i64, SessionInfo> = HashMap::new();
        let mut expired: HashMap<i64, (usize, u64)> = HashMap::new();
        let mut by_session_path: BTreeMap<(i64, String), Vec<&Operation>> = BTreeMap::new();
        let mut observations: Vec<&Operation> = Vec::new();
        for op in &ops {
            report.operations += 1;
            match (op.op(), op.kind()) {
                (
                    Op::SessionStart {
                        client,
                        session: Some(s),
                        timeout_ms: Some(t),
                    },
                    EventKind::Ok,
                ) => {
                    sessions.insert(
                        *s,
                        SessionInfo {
                            client: *client,
                            timeout_ms: *t,
                            started: op.end_index(),
                        },
                    );
                }
                (Op::SessionExpired { session, .. }, EventKind::Ok) => {
                    let c = op
                        .completion
                        .as_ref()
                        .map_or((usize::MAX, 0), |c| (c.index, c.time));
                    expired.entry(*session).or_insert(c);
                }
                (Op::SessionRead { session, path, .. }, EventKind::Ok)
                | (Op::SessionWrite { session, path, .. }, EventKind::Ok) => {
                    by_session_path
                        .entry((*session, path.clone()))
                        .or_default()
                        .push(op);
                }
                (Op::ObserveEphemeral { .. }, EventKind::Ok) => {
                    observations.push(op);
                }
                _ => {}
            }
        }

        // Monotonic reads per (session, znode).
        for ((session, path), list) in &by_session_path {
            let mut by_end: Vec<&&Operation> = list.iter().collect();
            by_end.sort_by_key(|o| o.end_index());
            let mut by_invoke: Vec<&&Operation> = list.iter().collect();
            by_invoke.sort_by_key(|o| o.invoke_index);
            let mut k = 0;
            let mut best: Option<(Seen, &Operation)> = None;
            for op in by_invoke {
                while k < by_end.len() && by_end[k].end_index() < op.invoke_index {
                    if let Some(seen) = seen_of(by_end[k]) {
                        if best.map_or(true, |(b, _)| seen.mzxid > b.mzxid) {
                            best = Some((seen, by_end[k]));
                        }
                    }
                    k += 1;
                }
                let Op::SessionRead { seen, .. } = op.op() else {
                    continue;
                };
                let Some((before, earlier)) = best else {
                    continue;
                };
                let went_back = match seen {
                    Some(s) => s.mzxid < before.mzxid,
                    None => true,
                };
                if went_back {
                    report.violation(
                        format!(
                            "session {session:#x} read {path} at mzxid {} after it had seen \
                             mzxid {:#x}",
                            seen.map_or("none (no node)".to_owned(), |s| format!("{:#x}", s.mzxid)),
                            before.mzxid
                        ),
                        vec![
                            earlier.invoke_index,
                            earlier.end_index(),
                            op.invoke_index,
                            op.end_index(),
                        ],
                    );
                }
            }
        }

        // Ephemerals gone once the expiry was observed.
        let member_faults = member_fault_windows(history);
        let writes = QuorumWrites::new(&ops);
        if self.stale_read_ms == 0 {
            check_gone_at_expiry(&mut report, &observations, &expired);
        } else {
            self.check_gone_after_quorum(
                &mut report,
                &observations,
                &expired,
                &sessions,
                &writes,
                &member_faults,
            );
        }
        check_never_back(&mut report, &observations, &expired);

        // No session outlives its timeout after a partition.
        let mut open: HashMap<u32, (usize, u64)> = HashMap::new();
        let mut windows: Vec<(u32, usize, u64, usize, u64)> = Vec::new();
        for f in history
            .faults
            .iter()
            .filter(|f| f.fault.starts_with("partition"))
        {
            let Some(client) = f.client else { continue };
            match f.phase {
                FaultPhase::Start => {
                    open.insert(client, (f.index, f.time));
                }
                FaultPhase::End => {
                    if let Some((si, st)) = open.remove(&client) {
                        windows.push((client, si, st, f.index, f.time));
                    }
                }
            }
        }
        // A partition still open at the end of the history lasts until the end.
        let last_time = history.events.last().map_or(0, |e| e.time);
        for (client, (si, st)) in open {
            windows.push((client, si, st, usize::MAX, last_time));
        }
        for (client, start_index, start, end_index, end) in windows {
            for (session, info) in sessions.iter().filter(|(_, i)| i.client == client) {
                if info.started > start_index {
                    continue;
                }
                let deadline = start + (info.timeout_ms + self.grace_ms) * 1_000_000;
                if end <= deadline {
                    continue; // a short cut: the session may survive
                }
                // On an ensemble the leader that would expire the session must have been in
                // place before the cut: a write after the last member fault committed before it
                // (a member fault's End is when it healed, not when a new leader took over).
                if self.stale_read_ms > 0
                    && !quiet_since(&member_faults, start_index)
                        .and_then(|l| writes.first_after(l))
                        .is_some_and(|(write_end, _)| write_end < start_index)
                {
                    continue;
                }
                let deadline = deadline + self.stale_read_ms * 1_000_000;
                for obs in &observations {
                    let Op::ObserveEphemeral {
                        path,
                        owner: Some(owner),
                        ..
                    } = obs.op()
                    else {
                        continue;
                    };
                    // On an ensemble a member fault after the cut may hold the expiry back
                    // (see `check_gone_after_quorum`).
                    if self.stale_read_ms > 0
                        && !quiet_since(&member_faults, obs.invoke_index)
                            .is_some_and(|l| l < start_index)
                    {
                        continue;
                    }
                    if owner == session && obs.invoke_time > deadline {
                        report.violation(
                            format!(
                                "session {session:#x} (client {client}, timeout {} ms) was cut \
                                 off for {} ms but its ephemeral {path} still exists {} ms after \
                                 the cut",
                                info.timeout_ms,
                                (end - start) / 1_000_000,
                                (obs.invoke_time - start) / 1_000_000
                            ),
                            vec![start_index, end_index, obs.invoke_index, obs.end_index()],
                        );
                    }
                }
            }
        }
        Ok(report)
    }
}

impl SessionChecker {
    /// The rule on an ensemble. A member's session tracker may tell a client its session
    /// expired before the closeSession transaction that deletes its ephemerals has committed,
    /// which takes a quorum; while the quorum is lost or moving, a new leader takes the
    /// sessions over with a fresh timeout. So the ephemeral must be gone once a quorum has
    /// committed after the expiry and no member fault came since: by the completion `q` of the
    /// first acknowledged write invoked after both, plus the session timeout and grace, plus
    /// the stale-read window of a member that has not noticed it lost the quorum.
    fn check_gone_after_quorum(
        &self,
        report: &mut Report,
        observations: &[&Operation],
        expired: &HashMap<i64, (usize, u64)>,
        sessions: &HashMap<i64, SessionInfo>,
        writes: &QuorumWrites,
        member_faults: &[(usize, usize)],
    ) {
        for (obs, path, owner, seen_at) in seen_after_expiry(observations, expired) {
            let Some(quiet) = quiet_since(member_faults, obs.invoke_index) else {
                continue; // a member fault is under way
            };
            let Some((write_end_index, q)) = writes.first_after(seen_at.max(quiet)) else {
                continue;
            };
            let timeout_ms = sessions.get(&owner).map_or(0, |i| i.timeout_ms);
            let deadline =
                q.saturating_add((timeout_ms + self.grace_ms + self.stale_read_ms) * 1_000_000);
            if obs.invoke_time > deadline {
                report.violation(
                    format!(
                        "ephemeral {path} of session {owner:#x} still exists {} ms after a \
                         quorum committed a write that followed the session's observed expiry \
                         (timeout {timeout_ms} ms, grace {} ms, stale-read window {} ms)",
                        (obs.invoke_time - q) / 1_000_000,
                        self.grace_ms,
                        self.stale_read_ms
                    ),
                    vec![seen_at, write_end_index, obs.invoke_index, obs.end_index()],
                );
            }
        }
    }
}

/// The rule on one server: once a client was told its session expired, no observation
/// invoked afterwards shows its ephemeral.
fn check_gone_at_expiry(
    report: &mut Report,
    observations: &[&Operation],
    expired: &HashMap<i64, (usize, u64)>,
) {
    for (obs, path, owner, seen_at) in seen_after_expiry(observations, expired) {
        report.violation(
            format!(
                "ephemeral {path} of session {owner:#x} still exists after the session's expiry \
                 was observed"
            ),
            vec![seen_at, obs.invoke_index, obs.end_index()],
        );
    }
}

/// The observations that show an ephemeral of a session whose expiry was observed before they
/// were invoked: (the observation, its path, the owner, the expiry's event index).
fn seen_after_expiry<'a>(
    observations: &'a [&'a Operation],
    expired: &'a HashMap<i64, (usize, u64)>,
) -> impl Iterator<Item = (&'a Operation, &'a str, i64, usize)> + 'a {
    observations.iter().filter_map(move |obs| {
        let Op::ObserveEphemeral {
            path,
            owner: Some(owner),
            ..
        } = obs.op()
        else {
            return None;
        };
        let &(seen_at, _) = expired.get(owner)?;
        (obs.invoke_index > seen_at).then_some((*obs, path.as_str(), *owner, seen_at))
    })
}

/// Within one observer session, an ephemeral whose session's expiry was observed, once seen
/// gone, is not seen again: reads are sequentially consistent per session, and an expired
/// session creates nothing.
fn check_never_back(
    report: &mut Report,
    observations: &[&Operation],
    expired: &HashMap<i64, (usize, u64)>,
) {
    let mut owners: HashMap<&str, i64> = HashMap::new();
    let mut by_observer: BTreeMap<i64, Vec<&Operation>> = BTreeMap::new();
    for obs in observations {
        let Op::ObserveEphemeral {
            path,
            owner,
            observer,
        } = obs.op()
        else {
            continue;
        };
        if let Some(owner) = owner {
            owners.entry(path.as_str()).or_insert(*owner);
        }
        if let Some(observer) = observer {
            by_observer.entry(*observer).or_default().push(obs);
        }
    }
    for (observer, mut list) in by_observer {
        list.sort_by_key(|o| o.invoke_index);
        // Path -> the end index of the observation that saw it gone.
        let mut gone: HashMap<&str, usize> = HashMap::new();
        for obs in list {
            let Op::ObserveEphemeral { path, owner, .. } = obs.op() else {
                continue;
            };
            let Some(&known) = owners.get(path.as_str()) else {
                continue;
            };
            if *owner == Some(known) {
                if let Some(&gone_at) = gone.get(path.as_str()) {
                    if gone_at < obs.invoke_index {
                        report.violation(
                            format!(
                                "observer session {observer:#x} saw ephemeral {path} of expired \
                                 session {known:#x} again after it had seen it gone"
                            ),
                            vec![gone_at, obs.invoke_index, obs.end_index()],
                        );
                    }
                }
            } else if expired
                .get(&known)
                .is_some_and(|&(seen_at, _)| seen_at < obs.invoke_index)
            {
                gone.entry(path.as_str()).or_insert(obs.end_index());
            }
        }
    }
}

/// The (start, end) event indices of the faults that move or break an ensemble's quorum: a
/// member killed, paused or cut off. One still under way at the end ends at `usize::MAX`.
fn member_fault_windows(history: &History) -> Vec<(usize, usize)> {
    const MEMBER_FAULTS: [&str; 4] = [
        "kill-member",
        "pause-member",
        "isolate-member",
        "partition-members",
    ];
    let mut open: HashMap<&str, usize> = HashMap::new();
    let mut windows = Vec::new();
    for f in &history.faults {
        if !MEMBER_FAULTS.iter().any(|m| f.fault.starts_with(m)) {
            continue;
        }
        match f.phase {
            FaultPhase::Start => {
                open.insert(f.fault.as_str(), f.index);
            }
            FaultPhase::End => {
                if let Some(start) = open.remove(f.fault.as_str()) {
                    windows.push((start, f.index));
                }
            }
        }
    }
    windows.extend(open.into_values().map(|start| (start, usize::MAX)));
    windows
}

/// `None` when a member fault is under way at event `at`; otherwise the end index of the last
/// member fault that started before it (0: none did).
fn quiet_since(windows: &[(usize, usize)], at: usize) -> Option<usize> {
    let mut last = 0;
    for &(_, end) in windows.iter().filter(|(start, _)| *start < at) {
        if end > at {
            return None;
        }
        last = last.max(end);
    }
    Some(last)
}

/// The acknowledged writes of the sessions' clients, by invoke index: which one invoked
/// after a point completed first.
struct QuorumWrites {
    /// Invoke indices, increasing.
    invoked: Vec<usize>,
    /// From each write on, the earliest completion: (its end index, its time).
    first_end: Vec<(usize, u64)>,
}

impl QuorumWrites {
    fn new(ops: &[Operation]) -> Self {
        let mut writes: Vec<(usize, usize, u64)> = ops
            .iter()
            .filter(|o| matches!((o.op(), o.kind()), (Op::SessionWrite { .. }, EventKind::Ok)))
            .filter_map(|o| {
                let c = o.completion.as_ref()?;
                Some((o.invoke_index, c.index, c.time))
            })
            .collect();
        writes.sort_unstable();
        let mut first_end = vec![(usize::MAX, u64::MAX); writes.len()];
        let mut best = (usize::MAX, u64::MAX);
        for (i, &(_, end, time)) in writes.iter().enumerate().rev() {
            if time < best.1 {
                best = (end, time);
            }
            first_end[i] = best;
        }
        QuorumWrites {
            invoked: writes.iter().map(|w| w.0).collect(),
            first_end,
        }
    }

    /// The first completion (end index, time) among the writes invoked after event `after`.
    fn first_after(&self, after: usize) -> Option<(usize, u64)> {
        let i = self.invoked.partition_point(|&x| x <= after);
        self.first_end.get(i).copied()
    }
}

fn seen_of(op: &Operation) -> Option<Seen> {
    match op.op() {
        Op::SessionRead { seen, .. } | Op::SessionWrite { seen, .. } => *seen,
        _ => None,
    }
}

/// Known-good and known-bad histories.
pub fn examples() -> Vec<Example> {
    let c = || {
        Box::new(SessionChecker {
            grace_ms: 0,
            stale_read_ms: 0,
        }) as Box<dyn Checker>
    };
    let start = |client, s, t| {
        (
            Op::SessionStart {
                client,
                session: None,
                timeout_ms: None,
            },
            Op::SessionStart {
                client,
                session: Some(s),
                timeout_ms: Some(t),
            },
        )
    };
    let read = |s, mzxid: Option<i64>| {
        (
            Op::SessionRead {
                session: s,
                path: "/x".into(),
                seen: None,
            },
            Op::SessionRead {
                session: s,
                path: "/x".into(),
                seen: mzxid.map(|m| Seen { mzxid: m, czxid: 1 }),
            },
        )
    };
    let write = |s, mzxid| {
        (
            Op::SessionWrite {
                session: s,
                path: "/x".into(),
                seen: None,
            },
            Op::SessionWrite {
                session: s,
                path: "/x".into(),
                seen: Some(Seen { mzxid, czxid: 1 }),
            },
        )
    };
    let observe_by = |observer: i64, owner: Option<i64>| {
        (
            Op::ObserveEphemeral {
                path: "/e".into(),
                owner: None,
                observer: None,
            },
            Op::ObserveEphemeral {
                path: "/e".into(),
                owner,
                observer: Some(observer),
            },
        )
    };
    let observe = |owner: Option<i64>| observe_by(9, owner);
    let expire = |b: &mut HistoryBuilder| {
        b.seq(
            1,
            Op::SessionExpired {
                client: 0,
                session: 7,
            },
            Op::SessionExpired {
                client: 0,
                session: 7,
            },
        );
    };
    let mut out: Vec<Example> = Vec::new();

    let mut b = HistoryBuilder::new();
    let (i, o) = start(0, 7, 1);
    b.seq(1, i, o);
    let (i, o) = write(7, 5);
    b.seq(1, i, o);
    let (i, o) = read(7, Some(5));
    b.seq(1, i, o);
    let (i, o) = read(8, Some(3)); // another session may lag
    b.seq(2, i, o);
    let (i, o) = observe(Some(7));
    b.seq(3, i, o);
    expire(&mut b);
    let (i, o) = observe(None);
    b.seq(3, i, o);
    out.push(("monotonic, ephemeral gone", c(), b.build(), true));

    let mut b = HistoryBuilder::new();
    let (i, o) = write(7, 5);
    b.seq(1, i, o);
    let (i, o) = read(7, Some(4));
    b.seq(1, i, o);
    out.push(("read goes back", c(), b.build(), false));

    let mut b = HistoryBuilder::new();
    expire(&mut b);
    let (i, o) = observe(Some(7));
    b.seq(3, i, o);
    out.push(("ephemeral after expiry", c(), b.build(), false));

    // On an ensemble (a stale-read window of 100 ms, timeout 1 ms, no grace): the ephemeral
    // must be gone 101 ms after a write that a quorum acknowledged after the expiry and after
    // the last member fault.
    let windowed = || {
        Box::new(SessionChecker {
            grace_ms: 0,
            stale_read_ms: 100,
        }) as Box<dyn Checker>
    };
    let ensemble = |fault_after_write: bool, after_ms: u64| {
        let mut b = HistoryBuilder::new();
        let (i, o) = start(0, 7, 1);
        b.seq(1, i, o);
        expire(&mut b);
        b.fault(FaultPhase::Start, "isolate-member Leader 9000ms", None);
        b.fault(FaultPhase::End, "isolate-member Leader 9000ms", None);
        let (i, o) = write(8, 5);
        b.seq(2, i, o);
        if fault_after_write {
            b.fault(FaultPhase::Start, "kill-member Leader down 50ms", None);
            b.fault(FaultPhase::End, "kill-member Leader down 50ms", None);
        }
        b.pass(after_ms * 1_000_000);
        let (i, o) = observe(Some(7));
        b.seq(3, i, o);
        b.build()
    };
    out.push((
        "ensemble: ephemeral read within timeout and window of a quorum write",
        windowed(),
        ensemble(false, 90),
        true,
    ));
    out.push((
        "ensemble: ephemeral read past timeout and window of a quorum write",
        windowed(),
        ensemble(false, 150),
        false,
    ));
    out.push((
        "ensemble: a member fault after the write may hold the expiry back",
        windowed(),
        ensemble(true, 150),
        true,
    ));
    // A write before the member fault ended shows no quorum after it.
    let mut b = HistoryBuilder::new();
    let (i, o) = start(0, 7, 1);
    b.seq(1, i, o);
    expire(&mut b);
    b.fault(FaultPhase::Start, "pause-member Leader 900ms", None);
    let (i, o) = write(8, 5);
    b.seq(2, i, o);
    b.fault(FaultPhase::End, "pause-member Leader 900ms", None);
    b.pass(150 * 1_000_000);
    let (i, o) = observe(Some(7));
    b.seq(3, i, o);
    out.push((
        "ensemble: a write during a member fault shows no quorum",
        windowed(),
        b.build(),
        true,
    ));
    // Seen gone by one observer session, then seen again by it: back in time. By another
    // observer session (which may read from a member behind the first's), it is not.
    for (second_observer, good) in [(9, false), (10, true)] {
        let mut b = HistoryBuilder::new();
        let (i, o) = start(0, 7, 1);
        b.seq(1, i, o);
        let (i, o) = observe(Some(7));
        b.seq(3, i, o);
        expire(&mut b);
        let (i, o) = observe(None);
        b.seq(3, i, o);
        let (i, o) = observe_by(second_observer, Some(7));
        b.seq(4, i, o);
        let name = if good {
            "ensemble: another observer session still sees the ephemeral"
        } else {
            "ensemble: an observer session sees the ephemeral back"
        };
        out.push((name, windowed(), b.build(), good));
    }

    // On an ensemble, a client cut off for longer than its timeout (1 ms here): its
    // ephemeral must be gone 101 ms after the cut if a write committed after the last member
    // fault and before the cut; without that write the leader may have taken over after the
    // cut, with a fresh timeout, and the session survive.
    for (write_before_cut, good) in [(true, false), (false, true)] {
        let mut b = HistoryBuilder::new();
        let (i, o) = start(0, 7, 1);
        b.seq(1, i, o);
        b.fault(FaultPhase::Start, "pause-member Leader 6000ms", None);
        b.fault(FaultPhase::End, "pause-member Leader 6000ms", None);
        if write_before_cut {
            let (i, o) = write(8, 5);
            b.seq(2, i, o);
        }
        b.fault(FaultPhase::Start, "partition", Some(0));
        b.pass(5 * 1_000_000);
        b.fault(FaultPhase::End, "partition", Some(0));
        b.pass(150 * 1_000_000);
        let (i, o) = observe(Some(7));
        b.seq(3, i, o);
        let name = if good {
            "ensemble: a cut right after a member fault may outlive its timeout"
        } else {
            "ensemble: a session outlives a long partition"
        };
        out.push((name, windowed(), b.build(), good));
    }

    // Timeout 1 ms (1e6 ns); the builder's times are indices, so stretch with filler events.
    let mut b = HistoryBuilder::new();
    let (i, o) = start(0, 7, 0);
    b.seq(1, i, o);
    b.fault(FaultPhase::Start, "partition", Some(0));
    b.fault(FaultPhase::End, "partition", Some(0));
    let (i, o) = observe(Some(7));
    b.seq(3, i, o);
    let mut h = b.build();
    // Stretch time: the partition lasts 2 ms, the observation comes 3 ms after the cut.
    h.faults[1].time = h.faults[0].time + 2_000_000;
    for e in h.events.iter_mut().skip(2) {
        e.time = h.faults[0].time + 3_000_000;
    }
    out.push(("session outlives a long partition", c(), h.clone(), false));
    // The same with a partition shorter than the timeout: fine.
    let mut short = h;
    short.faults[1].time = short.faults[0].time;
    if let Some(Op::SessionStart { timeout_ms, .. }) = short.events.get_mut(1).map(|e| &mut e.op) {
        *timeout_ms = Some(5);
    }
    out.push(("session survives a short partition", c(), short, true));
    out
}
