//! Linearizability of CAS registers, one znode per key: read (getData), write (setData any
//! version, or create when absent) and compare-and-set on the znode version (setData with a
//! version).
//!
//! The history is split per key (registers are independent, so the whole is linearizable iff
//! every key is: P-compositionality) and each key's operations go through the [`super::wgl`]
//! search with this model:
//! - state: the znode absent, or (value, version);
//! - read ok: must equal the state; failed or unknown reads are dropped (a read has no effect);
//! - write ok: absent → (v, 0), (x, n) → (v, n + 1), and the version the server returned must
//!   be that one; an unknown write takes effect or not;
//! - cas ok: the version must be `expected`, → (v, expected + 1); a cas the server refused
//!   (BadVersion, NoNode: `mismatch`) is kept as a check that the version was *not* `expected`
//!   then, other failures (refused before sending) are dropped; an
//!   unknown cas takes effect if the version matches where it is linearized, or never.
//!
//! A violation names the operation the deepest attempt could not linearize and prints every
//! operation of that key overlapping it and the last ones before it.

use std::collections::BTreeMap;

use super::wgl::{self, Entry, Model, Outcome};
use super::{Checker, Example, Report};
use crate::history::{Cell, EventKind, History, HistoryBuilder, HistoryError, Op, Operation};

/// Steps one key's search may take before it is reported undecided.
///
/// Outcome-unknown writes are what make a key's search long: each may take effect at any
/// point after its invoke, or never. They pile up on a key while the server is down, since a
/// request queued during a failed reconnect fails with ConnectionLoss, as one that was sent
/// does, and the client issues its next at once. One such key of 20 operations in the quick
/// profile (seed 17, a kill then a long pause) needed more than 5,000,000 steps, and was
/// decided (linearizable) within 500,000,000, in under a second of a release build.
pub const DEFAULT_BUDGET: u64 = 50_000_000;

/// The CAS register checker.
#[derive(Debug, Clone)]
pub struct RegisterChecker {
    /// Search steps per key.
    pub budget: u64,
}

impl Default for RegisterChecker {
    fn default() -> Self {
        RegisterChecker {
            budget: DEFAULT_BUDGET,
        }
    }
}

/// A register op as the model sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum RegOp {
    Read(Cell),
    Write { value: i64, version: Option<i32> },
    Cas { expected: i32, value: i64 },
    CasFailed { expected: i32 },
}

struct CasRegister;

impl Model for CasRegister {
    type State = Cell;
    type Op = RegOp;

    fn init(&self) -> Cell {
        Cell::Absent
    }

    fn step(&self, state: &Cell, op: &RegOp, info: bool) -> Option<Cell> {
        let version = match state {
            Cell::Absent => None,
            Cell::Present { version, .. } => Some(*version),
        };
        match op {
            RegOp::Read(seen) => (seen == state).then_some(*state),
            RegOp::Write {
                value,
                version: got,
            } => {
                let next = version.map_or(0, |v| v + 1);
                if got.is_some_and(|g| g != next) {
                    return None;
                }
                Some(Cell::Present {
                    value: *value,
                    version: next,
                })
            }
            RegOp::Cas { expected, value } => {
                if version == Some(*expected) {
                    Some(Cell::Present {
                        value: *value,
                        version: expected + 1,
                    })
                } else if info {
                    // Linearized here it would have failed: the same as never.
                    Some(*state)
                } else {
                    None
                }
            }
            RegOp::CasFailed { expected } => (version != Some(*expected)).then_some(*state),
        }
    }
}

/// The model op and key of `op`, or `None` when it has no effect to check.
fn model_op(op: &Operation) -> Option<(u64, RegOp)> {
    let kind = op.kind();
    match (op.op(), kind) {
        (Op::Read { key, value }, EventKind::Ok) => Some((*key, RegOp::Read((*value)?))),
        (
            Op::Write {
                key,
                value,
                version,
            },
            EventKind::Ok,
        ) => Some((
            *key,
            RegOp::Write {
                value: *value,
                version: *version,
            },
        )),
        (Op::Write { key, value, .. }, EventKind::Info) => Some((
            *key,
            RegOp::Write {
                value: *value,
                version: None,
            },
        )),
        (
            Op::Cas {
                key,
                expected,
                value,
                ..
            },
            EventKind::Ok | EventKind::Info,
        ) => Some((
            *key,
            RegOp::Cas {
                expected: *expected,
                value: *value,
            },
        )),
        (
            Op::Cas {
                key,
                expected,
                mismatch: true,
                ..
            },
            EventKind::Fail,
        ) => Some((
            *key,
            RegOp::CasFailed {
                expected: *expected,
            },
        )),
        _ => None,
    }
}

impl Checker for RegisterChecker {
    fn name(&self) -> &'static str {
        "cas-register linearizability"
    }

    fn check(&self, history: &History) -> Result<Report, HistoryError> {
        let mut report = Report::new(self.name());
        let mut per_key: BTreeMap<u64, Vec<(Operation, RegOp)>> = BTreeMap::new();
        for op in history.operations()? {
            if let Some((key, m)) = model_op(&op) {
                per_key.entry(key).or_default().push((op, m));
            }
        }
        for (key, ops) in per_key {
            report.operations += ops.len();
            let entries: Vec<Entry<RegOp>> = ops
                .iter()
                .map(|(op, m)| Entry {
                    op: m.clone(),
                    call: op.invoke_index,
                    ret: (op.kind() != EventKind::Info).then(|| op.end_index()),
                })
                .collect();
            match wgl::check(&CasRegister, &entries, self.budget) {
                Outcome::Linearizable => {}
                Outcome::Unknown { steps } => report.unknown.push(format!(
                    "key {key}: {} operations, search stopped after {steps} steps",
                    ops.len()
                )),
                Outcome::NotLinearizable { stuck, done } => {
                    let stuck_op = &ops[stuck].0;
                    let (from, to) = (stuck_op.invoke_index, stuck_op.end_index());
                    // Everything of this key overlapping the stuck op, and the last few
                    // operations the deepest attempt had linearized before it.
                    let mut indices = Vec::new();
                    for (op, _) in &ops {
                        if op.invoke_index <= to && op.end_index() >= from {
                            indices.push(op.invoke_index);
                            indices.push(op.end_index());
                        }
                    }
                    for &d in done.iter().rev().take(4) {
                        indices.push(ops[d].0.invoke_index);
                        indices.push(ops[d].0.end_index());
                    }
                    report.violation(
                        format!(
                            "key {key}: not linearizable: no order of the {} operations explains \
                             {:?} (process {}, events {}..{}) after {} of them",
                            ops.len(),
                            stuck_op.op(),
                            stuck_op.process,
                            from,
                            if to == usize::MAX {
                                "end".to_owned()
                            } else {
                                to.to_string()
                            },
                            done.len()
                        ),
                        indices,
                    );
                }
            }
        }
        Ok(report)
    }
}

fn read(key: u64, cell: Cell) -> Op {
    Op::Read {
        key,
        value: Some(cell),
    }
}

fn cas(key: u64, expected: i32, value: i64, mismatch: bool) -> Op {
    Op::Cas {
        key,
        expected,
        value,
        mismatch,
    }
}

fn present(value: i64, version: i32) -> Cell {
    Cell::Present { value, version }
}

fn write(key: u64, value: i64, version: Option<i32>) -> Op {
    Op::Write {
        key,
        value,
        version,
    }
}

/// Known-good and known-bad histories.
pub fn examples() -> Vec<Example> {
    let c = || Box::new(RegisterChecker::default()) as Box<dyn super::Checker>;
    let mut out: Vec<Example> = Vec::new();

    // Good: create, concurrent cas and read, cas fails on the old version, a second key.
    let mut b = HistoryBuilder::new();
    b.invoke(1, write(0, 10, None))
        .ok(1, write(0, 10, Some(0)))
        .invoke(1, cas(0, 0, 11, false))
        .invoke(2, read(0, Cell::Absent))
        .ok(2, read(0, present(10, 0)))
        .ok(1, cas(0, 0, 11, false))
        .invoke(2, cas(0, 0, 12, false))
        .fail(2, cas(0, 0, 12, true))
        .seq(3, read(1, Cell::Absent), read(1, Cell::Absent))
        .seq(2, read(0, Cell::Absent), read(0, present(11, 1)));
    out.push(("cas and reads", c(), b.build(), true));

    // Good: an unknown write shows up later; another never shows up.
    let mut b = HistoryBuilder::new();
    b.seq(1, write(0, 1, None), write(0, 1, Some(0)))
        .invoke(2, write(0, 2, None))
        .info(2, write(0, 2, None))
        .invoke(4, write(0, 3, None))
        .info(4, write(0, 3, None))
        .seq(3, read(0, Cell::Absent), read(0, present(1, 0)))
        .seq(3, read(0, Cell::Absent), read(0, present(2, 1)));
    out.push(("info writes", c(), b.build(), true));

    // Bad: a stale read after an acknowledged overwrite.
    let mut b = HistoryBuilder::new();
    b.seq(1, write(0, 1, None), write(0, 1, Some(0)))
        .seq(1, write(0, 2, None), write(0, 2, Some(1)))
        .seq(2, read(0, Cell::Absent), read(0, present(1, 0)));
    out.push(("stale read", c(), b.build(), false));

    // Bad: two cas on the same version both succeed.
    let mut b = HistoryBuilder::new();
    b.seq(1, write(0, 1, None), write(0, 1, Some(0)))
        .invoke(1, cas(0, 0, 2, false))
        .invoke(2, cas(0, 0, 3, false))
        .ok(1, cas(0, 0, 2, false))
        .ok(2, cas(0, 0, 3, false));
    out.push(("double cas", c(), b.build(), false));

    // Bad: a cas fails although nothing else could have changed the version.
    let mut b = HistoryBuilder::new();
    b.seq(1, write(0, 1, None), write(0, 1, Some(0)))
        .invoke(1, cas(0, 0, 2, false))
        .fail(1, cas(0, 0, 2, true));
    out.push(("spurious cas failure", c(), b.build(), false));

    // Good: a cas refused before it was sent (no server answer) says nothing of the version.
    let mut b = HistoryBuilder::new();
    b.seq(1, write(0, 1, None), write(0, 1, Some(0)))
        .invoke(2, cas(0, 0, 2, false))
        .fail(2, cas(0, 0, 2, false))
        .seq(3, read(0, Cell::Absent), read(0, present(1, 0)));
    out.push(("cas refused before sending", c(), b.build(), true));

    // Bad: a lost acknowledged write (read sees the older value long after).
    let mut b = HistoryBuilder::new();
    b.seq(1, write(0, 1, None), write(0, 1, Some(0)))
        .seq(2, write(0, 2, None), write(0, 2, Some(1)))
        .fault(crate::history::FaultPhase::Start, "kill-server", None)
        .fault(crate::history::FaultPhase::End, "kill-server", None)
        .seq(3, read(0, Cell::Absent), read(0, present(1, 0)));
    out.push(("lost write", c(), b.build(), false));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_independent() {
        // A read of key 1 cannot see key 0's write.
        let mut b = HistoryBuilder::new();
        b.seq(1, write(0, 1, None), write(0, 1, Some(0))).seq(
            2,
            read(1, Cell::Absent),
            read(1, present(1, 0)),
        );
        let h = b.build();
        let report = RegisterChecker::default().check(&h).unwrap();
        assert_eq!(report.violations.len(), 1);
        assert!(
            report.violations[0].message.starts_with("key 1"),
            "{report:?}"
        );
        // The violation's sub-history holds the offending read.
        assert!(report.violations[0].indices.contains(&3), "{report:?}");
    }

    #[test]
    fn a_long_concurrent_history_is_decided_quickly() {
        // 6 processes, 300 ops on one key, unique values, every read consistent.
        let mut b = HistoryBuilder::new();
        let mut version: Option<i32> = None;
        let mut value = 0i64;
        for round in 0..50i64 {
            for p in 0..6u64 {
                b.invoke(
                    p,
                    if p % 2 == 0 {
                        write(0, round * 10 + p as i64, None)
                    } else {
                        read(0, Cell::Absent)
                    },
                );
            }
            for p in 0..6u64 {
                if p % 2 == 0 {
                    let v = round * 10 + p as i64;
                    version = Some(version.map_or(0, |x| x + 1));
                    value = v;
                    b.ok(p, write(0, v, version));
                } else {
                    let cell = match version {
                        None => Cell::Absent,
                        Some(ver) => present(value, ver),
                    };
                    b.ok(p, read(0, cell));
                }
            }
        }
        let report = RegisterChecker { budget: 2_000_000 }
            .check(&b.build())
            .unwrap();
        assert!(report.is_valid() && report.unknown.is_empty(), "{report:?}");
        assert_eq!(report.operations, 300);
    }
}
