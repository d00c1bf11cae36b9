//! The ledger checker, over an abstract history of a BookKeeper-style ledger: writers append,
//! a recovery fences the ledger and closes it at its last entry, readers read entries. (The
//! ledger client plugs in later; the checker and its self-test are ready for it.)
//!
//! Per ledger, against its first successful recovery (`last` = the last entry id, -1: empty):
//! - every acknowledged append has an entry id `<= last` (*acknowledged entry lost*);
//! - no append invoked after the recovery completed is acknowledged (*fenced writer
//!   acknowledged*): fencing must stop the old writer;
//! - later recoveries agree with the first (*recoveries disagree*);
//! - every successful read of one entry returns the same payload (*readers disagree*), and it
//!   is the acknowledged append's payload when there is one; a read after the recovery of an
//!   entry `<= last` finds it, and finds nothing past `last`.

use std::collections::{BTreeMap, HashMap};

use super::{Checker, Example, Report};
use crate::history::{EventKind, History, HistoryBuilder, HistoryError, Op, Operation};

/// The ledger checker.
#[derive(Debug, Clone, Copy, Default)]
pub struct LedgerChecker;

impl Checker for LedgerChecker {
    fn name(&self) -> &'static str {
        "ledger"
    }

    fn check(&self, history: &History) -> Result<Report, HistoryError> {
        let mut report = Report::new(self.name());
        let ops = history.operations()?;
        let mut recoveries: BTreeMap<u64, Vec<(&Operation, i64)>> = BTreeMap::new();
        for op in &ops {
            report.operations += 1;
            if let (
                Op::LedgerRecover {
                    ledger,
                    last: Some(last),
                },
                EventKind::Ok,
            ) = (op.op(), op.kind())
            {
                recoveries.entry(*ledger).or_default().push((op, *last));
            }
        }
        for list in recoveries.values_mut() {
            list.sort_by_key(|(op, _)| op.end_index());
        }
        // (ledger, entry) -> (value, op) of the acknowledged append.
        let mut acked: HashMap<(u64, u64), (u64, &Operation)> = HashMap::new();
        for op in &ops {
            let (
                Op::LedgerAppend {
                    ledger,
                    value,
                    entry: Some(entry),
                    ..
                },
                EventKind::Ok,
            ) = (op.op(), op.kind())
            else {
                continue;
            };
            acked.insert((*ledger, *entry), (*value, op));
            let Some((rec, last)) = recoveries.get(ledger).and_then(|l| l.first()) else {
                continue;
            };
            if i64::try_from(*entry).map_or(true, |e| e > *last) {
                report.violation(
                    format!(
                        "ledger {ledger}: entry {entry} was acknowledged but recovery closed the \
                         ledger at {last}"
                    ),
                    vec![
                        op.invoke_index,
                        op.end_index(),
                        rec.invoke_index,
                        rec.end_index(),
                    ],
                );
            }
            if op.invoke_index > rec.end_index() {
                report.violation(
                    format!(
                        "ledger {ledger}: entry {entry} appended after the ledger was fenced \
                         (recovered) was acknowledged"
                    ),
                    vec![
                        rec.invoke_index,
                        rec.end_index(),
                        op.invoke_index,
                        op.end_index(),
                    ],
                );
            }
        }
        for (ledger, list) in &recoveries {
            let (first, last) = list[0];
            for (other, l) in &list[1..] {
                if *l != last {
                    report.violation(
                        format!("ledger {ledger}: recoveries disagree: last entry {last} vs {l}"),
                        vec![
                            first.invoke_index,
                            first.end_index(),
                            other.invoke_index,
                            other.end_index(),
                        ],
                    );
                }
            }
        }
        let mut reads: HashMap<(u64, u64), (Option<u64>, &Operation)> = HashMap::new();
        for op in &ops {
            let (
                Op::LedgerRead {
                    ledger,
                    entry,
                    value,
                },
                EventKind::Ok,
            ) = (op.op(), op.kind())
            else {
                continue;
            };
            let key = (*ledger, *entry);
            if let Some((v, other)) = reads.get(&key) {
                if v != value {
                    report.violation(
                        format!(
                            "ledger {ledger}: readers disagree on entry {entry}: {v:?} vs {value:?}"
                        ),
                        vec![
                            other.invoke_index,
                            other.end_index(),
                            op.invoke_index,
                            op.end_index(),
                        ],
                    );
                }
            } else {
                reads.insert(key, (*value, op));
            }
            if let (Some(v), Some((want, app))) = (value, acked.get(&key)) {
                if v != want {
                    report.violation(
                        format!(
                            "ledger {ledger}: entry {entry} reads {v} but {want} was acknowledged"
                        ),
                        vec![
                            app.invoke_index,
                            app.end_index(),
                            op.invoke_index,
                            op.end_index(),
                        ],
                    );
                }
            }
            if let Some((rec, last)) = recoveries.get(ledger).and_then(|l| l.first()) {
                if op.invoke_index > rec.end_index() {
                    let within = i64::try_from(*entry).is_ok_and(|e| e <= *last);
                    if within != value.is_some() {
                        report.violation(
                            format!(
                                "ledger {ledger}: after recovery at {last}, entry {entry} reads \
                                 {value:?}"
                            ),
                            vec![
                                rec.invoke_index,
                                rec.end_index(),
                                op.invoke_index,
                                op.end_index(),
                            ],
                        );
                    }
                }
            }
        }
        Ok(report)
    }
}

/// Known-good and known-bad histories.
pub fn examples() -> Vec<Example> {
    let c = || Box::new(LedgerChecker) as Box<dyn Checker>;
    let append = |writer, value, entry| Op::LedgerAppend {
        ledger: 1,
        writer,
        value,
        entry,
    };
    let recover = |last| Op::LedgerRecover { ledger: 1, last };
    let read = |entry, value| Op::LedgerRead {
        ledger: 1,
        entry,
        value,
    };
    let mut out: Vec<Example> = Vec::new();

    // Good: two acked entries, one unknown that made it, recovery at 2, reads agree.
    let mut b = HistoryBuilder::new();
    b.seq(1, append(1, 10, None), append(1, 10, Some(0)))
        .seq(1, append(1, 11, None), append(1, 11, Some(1)))
        .invoke(1, append(1, 12, None))
        .info(1, append(1, 12, None))
        .seq(2, recover(None), recover(Some(2)))
        .invoke(3, append(1, 13, None))
        .fail(3, append(1, 13, None))
        .seq(4, read(0, None), read(0, Some(10)))
        .seq(5, read(0, None), read(0, Some(10)))
        .seq(5, read(2, None), read(2, Some(12)))
        .seq(5, read(3, None), read(3, None));
    out.push(("recovered and read", c(), b.build(), true));

    // Bad: an acked entry beyond the recovered end.
    let mut b = HistoryBuilder::new();
    b.seq(1, append(1, 10, None), append(1, 10, Some(0)))
        .seq(1, append(1, 11, None), append(1, 11, Some(1)))
        .seq(2, recover(None), recover(Some(0)));
    out.push(("acknowledged entry lost", c(), b.build(), false));

    // Bad: the fenced writer gets an ack.
    let mut b = HistoryBuilder::new();
    b.seq(2, recover(None), recover(Some(-1)))
        .seq(1, append(1, 10, None), append(1, 10, Some(0)));
    out.push(("fenced writer acknowledged", c(), b.build(), false));

    // Bad: readers disagree.
    let mut b = HistoryBuilder::new();
    b.seq(1, append(1, 10, None), append(1, 10, Some(0)))
        .seq(2, recover(None), recover(Some(0)))
        .seq(4, read(0, None), read(0, Some(10)))
        .seq(5, read(0, None), read(0, Some(99)));
    out.push(("readers disagree", c(), b.build(), false));
    out
}
