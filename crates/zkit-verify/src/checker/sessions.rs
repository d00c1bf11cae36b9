//! The sessions checker: what ZooKeeper promises about one session's view and its lifetime.
//!
//! - **Monotonic reads** (ZooKeeper's "sequential consistency" and "single system image" within
//!   a session): for every znode, a session's read never shows an mzxid below one the same
//!   session already saw (through a read or its own write) in an operation that completed
//!   before the read was invoked; a znode it saw does not vanish from its view (persistent
//!   znodes only are read).
//! - **Ephemerals die with their session**: once a client was told its session expired, no
//!   read invoked afterwards (by an observer session) shows an ephemeral owned by it. On an
//!   ensemble a read may come from a member that has lost the quorum and not noticed yet: a
//!   leader cut off from its followers serves its old copy until syncLimit passes without
//!   their acks (`Leader.lead`), while the majority elects another leader and expires the
//!   session; ZooKeeper's reads are sequentially consistent, not linearizable, so that read is
//!   allowed. [`SessionChecker::stale_read_ms`] is that window (0 for one server).
//! - **No session outlives its timeout after a partition**: if a client's link was cut (its
//!   proxy black-holed) for longer than the session timeout plus a grace (the server's tick and
//!   scheduling), the server must have expired the session by `cut + timeout + grace`: an
//!   observer read invoked after that must not show its ephemeral.
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
                (Op::ObserveEphemeral { owner: Some(_), .. }, EventKind::Ok) => {
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
        for obs in &observations {
            let Op::ObserveEphemeral {
                path,
                owner: Some(owner),
            } = obs.op()
            else {
                continue;
            };
            if let Some((seen_at, seen_time)) = expired.get(owner) {
                let stale_until = seen_time.saturating_add(self.stale_read_ms * 1_000_000);
                if obs.invoke_index > *seen_at && obs.invoke_time > stale_until {
                    report.violation(
                        format!(
                            "ephemeral {path} of session {owner:#x} still exists after the \
                             session's expiry was observed"
                        ),
                        vec![*seen_at, obs.invoke_index, obs.end_index()],
                    );
                }
            }
        }

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
                for obs in &observations {
                    let Op::ObserveEphemeral {
                        path,
                        owner: Some(owner),
                    } = obs.op()
                    else {
                        continue;
                    };
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
    let observe = |owner: Option<i64>| {
        (
            Op::ObserveEphemeral {
                path: "/e".into(),
                owner: None,
            },
            Op::ObserveEphemeral {
                path: "/e".into(),
                owner,
            },
        )
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
    let (i, o) = observe(Some(7));
    b.seq(3, i, o);
    out.push(("ephemeral after expiry", c(), b.build(), false));

    // On an ensemble (a stale-read window of 100 ms): the ephemeral seen 50 ms after the
    // expiry came from a member that has not noticed it lost the quorum, which is allowed;
    // seen 150 ms after, it is not.
    let windowed = || {
        Box::new(SessionChecker {
            grace_ms: 0,
            stale_read_ms: 100,
        }) as Box<dyn Checker>
    };
    for (after_ms, good) in [(50, true), (150, false)] {
        let mut b = HistoryBuilder::new();
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
        b.pass(after_ms * 1_000_000);
        let (i, o) = observe(Some(7));
        b.seq(3, i, o);
        let name = if good {
            "ephemeral read within the stale-read window"
        } else {
            "ephemeral read past the stale-read window"
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
