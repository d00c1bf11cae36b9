//! The locks checker: mutual exclusion and fencing for `zkit::lock::Mutex`.
//!
//! A holder's *validity* starts when its acquire was acknowledged (the ok event: the holder
//! cannot act before it knows) and ends at the earliest of: the invoke of its release, its
//! lost-signal (a `lock-lost` event), or the end of its process (an info completion: killed,
//! timed out). Recorded that way an interval is never wider than the time the holder really
//! believed it held the lock, so an overlap is a real one.
//!
//! - no two validity intervals overlap (*two holders*);
//! - ordered by the start of their validity, fencing tokens strictly increase (*token went
//!   back*), and no token is handed out twice.

use std::collections::HashMap;

use super::{Checker, Example, Report};
use crate::history::{EventKind, History, HistoryBuilder, HistoryError, Op};

/// The locks checker.
#[derive(Debug, Clone, Copy, Default)]
pub struct LockChecker;

#[derive(Debug, Clone, Copy)]
struct Hold {
    token: i64,
    start: usize,
    end: usize,
    acquire_invoke: usize,
}

impl Checker for LockChecker {
    fn name(&self) -> &'static str {
        "locks"
    }

    fn check(&self, history: &History) -> Result<Report, HistoryError> {
        let mut report = Report::new(self.name());
        let ops = history.operations()?;
        // Where each token's validity ends: its release invoke or lost-signal, whichever first.
        let mut ends: HashMap<i64, usize> = HashMap::new();
        // The last event index of each process (for holders that died holding).
        let mut process_end: HashMap<u64, usize> = HashMap::new();
        for op in &ops {
            let last = op.completion.as_ref().map_or(op.invoke_index, |c| c.index);
            process_end
                .entry(op.process)
                .and_modify(|e| *e = (*e).max(last))
                .or_insert(last);
            match op.op() {
                Op::Release { token, .. } => {
                    let e = ends.entry(*token).or_insert(op.invoke_index);
                    *e = (*e).min(op.invoke_index);
                }
                Op::LockLost { token } => {
                    let at = op.invoke_index;
                    let e = ends.entry(*token).or_insert(at);
                    *e = (*e).min(at);
                }
                _ => {}
            }
        }
        let mut holds: Vec<Hold> = Vec::new();
        for op in &ops {
            if let (Op::Acquire { token: Some(token) }, EventKind::Ok) = (op.op(), op.kind()) {
                report.operations += 1;
                let start = op.end_index();
                let end = ends
                    .get(token)
                    .copied()
                    .or_else(|| process_end.get(&op.process).copied().filter(|e| *e > start))
                    .unwrap_or(usize::MAX);
                holds.push(Hold {
                    token: *token,
                    start,
                    end,
                    acquire_invoke: op.invoke_index,
                });
            } else if matches!(op.op(), Op::Acquire { .. }) {
                report.operations += 1;
            }
        }
        holds.sort_by_key(|h| h.start);
        // Overlaps: sweep in start order, keeping the hold that ends last so far.
        let mut latest: Option<Hold> = None;
        for h in &holds {
            if let Some(l) = latest {
                if h.start < l.end {
                    report.violation(
                        format!(
                            "two holders: token {} held from event {} to {} overlaps token {} \
                             acquired at event {}",
                            l.token,
                            l.start,
                            if l.end == usize::MAX {
                                "the end".to_owned()
                            } else {
                                l.end.to_string()
                            },
                            h.token,
                            h.start
                        ),
                        vec![
                            l.acquire_invoke,
                            l.start,
                            l.end,
                            h.acquire_invoke,
                            h.start,
                            h.end,
                        ],
                    );
                }
            }
            if latest.map_or(true, |l| h.end > l.end) {
                latest = Some(*h);
            }
        }
        for w in holds.windows(2) {
            if w[1].token <= w[0].token {
                report.violation(
                    format!(
                        "fencing token went back: {} acquired after {}",
                        w[1].token, w[0].token
                    ),
                    vec![
                        w[0].acquire_invoke,
                        w[0].start,
                        w[1].acquire_invoke,
                        w[1].start,
                    ],
                );
            }
        }
        Ok(report)
    }
}

/// Known-good and known-bad histories.
pub fn examples() -> Vec<Example> {
    let c = || Box::new(LockChecker) as Box<dyn Checker>;
    let acq = |t: Option<i64>| Op::Acquire { token: t };
    let rel = |token| Op::Release { token, lost: false };
    let mut out: Vec<Example> = Vec::new();

    // Good: 1 holds and releases, 2 waits then holds; 3 dies holding, 4 gets it after.
    let mut b = HistoryBuilder::new();
    b.invoke(1, acq(None))
        .ok(1, acq(Some(1)))
        .invoke(2, acq(None))
        .seq(1, rel(1), rel(1))
        .ok(2, acq(Some(2)))
        .seq(2, rel(2), rel(2))
        .seq(3, acq(None), acq(Some(3)))
        .invoke(3, rel(3))
        .info(3, rel(3))
        .seq(4, acq(None), acq(Some(4)))
        .seq(4, rel(4), rel(4));
    out.push(("hand-over and a crash", c(), b.build(), true));

    // Good: the holder learns it lost the lock before the next one acquires.
    let mut b = HistoryBuilder::new();
    b.seq(1, acq(None), acq(Some(1)))
        .invoke(2, acq(None))
        .seq(1, Op::LockLost { token: 1 }, Op::LockLost { token: 1 })
        .ok(2, acq(Some(2)))
        .seq(
            1,
            rel(1),
            Op::Release {
                token: 1,
                lost: true,
            },
        );
    out.push(("lost before the next holder", c(), b.build(), true));

    // Bad: overlap.
    let mut b = HistoryBuilder::new();
    b.seq(1, acq(None), acq(Some(1)))
        .seq(2, acq(None), acq(Some(2)))
        .seq(1, rel(1), rel(1))
        .seq(2, rel(2), rel(2));
    out.push(("two holders", c(), b.build(), false));

    // Bad: token decreases.
    let mut b = HistoryBuilder::new();
    b.seq(1, acq(None), acq(Some(5)))
        .seq(1, rel(5), rel(5))
        .seq(2, acq(None), acq(Some(3)))
        .seq(2, rel(3), rel(3));
    out.push(("token went back", c(), b.build(), false));
    out
}
