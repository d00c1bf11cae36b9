//! The set checker: elements are added (one znode each) and the whole set is read at the end,
//! after every fault has healed.
//!
//! Against the last successful read of the whole set:
//! - every add that was acknowledged (ok) is present (else: *lost*);
//! - no add that definitely failed (fail) is present (else: *resurrected*);
//! - nothing that was never added is present (else: *unexpected*).
//!
//! Unknown (info) adds may be present or not. Reads before the last one are not checked
//! against each other (an add concurrent with a read may or may not show in it). A history
//! without a final read is itself a violation: nothing was checked.

use std::collections::{BTreeMap, BTreeSet};

use super::{Checker, Example, Report};
use crate::history::{EventKind, HistoryBuilder, Op};
use crate::history::{History, HistoryError};

/// The set checker.
#[derive(Debug, Clone, Copy, Default)]
pub struct SetChecker;

impl Checker for SetChecker {
    fn name(&self) -> &'static str {
        "set"
    }

    fn check(&self, history: &History) -> Result<Report, HistoryError> {
        let mut report = Report::new(self.name());
        // element -> (kind, invoke index, end index)
        let mut adds: BTreeMap<u64, Vec<(EventKind, usize, usize)>> = BTreeMap::new();
        let mut last_read: Option<(Vec<u64>, usize, usize)> = None;
        for op in history.operations()? {
            match op.op() {
                Op::Add { element } => {
                    report.operations += 1;
                    adds.entry(*element).or_default().push((
                        op.kind(),
                        op.invoke_index,
                        op.end_index(),
                    ));
                }
                Op::ReadSet {
                    elements: Some(elements),
                } if op.is_ok() => {
                    report.operations += 1;
                    let newer = last_read
                        .as_ref()
                        .map_or(true, |(_, _, end)| op.end_index() > *end);
                    if newer {
                        last_read = Some((elements.clone(), op.invoke_index, op.end_index()));
                    }
                }
                _ => {}
            }
        }
        let Some((elements, read_invoke, read_end)) = last_read else {
            report.violation(
                "no successful final read of the set: nothing was checked",
                vec![],
            );
            return Ok(report);
        };
        let present: BTreeSet<u64> = elements.iter().copied().collect();
        for (element, attempts) in &adds {
            let ok = attempts.iter().find(|a| a.0 == EventKind::Ok);
            let all_failed = attempts.iter().all(|a| a.0 == EventKind::Fail);
            let shown = present.contains(element);
            if let Some(&(_, inv, end)) = ok {
                // An add acknowledged before the final read began must be in it.
                if !shown && end < read_invoke {
                    report.violation(
                        format!("element {element} was acknowledged but is lost"),
                        vec![inv, end, read_invoke, read_end],
                    );
                }
            }
            if all_failed && shown {
                let mut idx: Vec<usize> = attempts.iter().flat_map(|a| [a.1, a.2]).collect();
                idx.extend([read_invoke, read_end]);
                report.violation(
                    format!("element {element} definitely failed to be added but is present"),
                    idx,
                );
            }
        }
        for element in present.iter().filter(|e| !adds.contains_key(e)) {
            report.violation(
                format!("element {element} is present but was never added"),
                vec![read_invoke, read_end],
            );
        }
        Ok(report)
    }
}

fn add(element: u64) -> Op {
    Op::Add { element }
}

fn read(elements: &[u64]) -> (Op, Op) {
    (
        Op::ReadSet { elements: None },
        Op::ReadSet {
            elements: Some(elements.to_vec()),
        },
    )
}

/// Known-good and known-bad histories.
pub fn examples() -> Vec<Example> {
    let c = || Box::new(SetChecker) as Box<dyn Checker>;
    let mut out: Vec<Example> = Vec::new();

    let mut b = HistoryBuilder::new();
    b.seq(1, add(1), add(1))
        .invoke(2, add(2))
        .info(2, add(2))
        .invoke(3, add(3))
        .fail(3, add(3))
        .invoke(4, add(4))
        .info(4, add(4));
    let (i, o) = read(&[1, 4]);
    b.seq(5, i, o);
    out.push(("acked present, info either way", c(), b.build(), true));

    let mut b = HistoryBuilder::new();
    b.seq(1, add(1), add(1)).seq(1, add(2), add(2));
    let (i, o) = read(&[2]);
    b.seq(5, i, o);
    out.push(("lost acknowledged add", c(), b.build(), false));

    let mut b = HistoryBuilder::new();
    b.invoke(1, add(1)).fail(1, add(1));
    let (i, o) = read(&[1]);
    b.seq(5, i, o);
    out.push(("failed add present", c(), b.build(), false));

    let mut b = HistoryBuilder::new();
    b.seq(1, add(1), add(1));
    let (i, o) = read(&[1, 7]);
    b.seq(5, i, o);
    out.push(("element never added", c(), b.build(), false));

    let mut b = HistoryBuilder::new();
    b.seq(1, add(1), add(1));
    out.push(("no final read", c(), b.build(), false));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_add_concurrent_with_the_final_read_may_be_missing() {
        let mut b = HistoryBuilder::new();
        let (i, o) = read(&[]);
        b.invoke(1, add(1)).invoke(5, i).ok(1, add(1)).ok(5, o);
        let report = SetChecker.check(&b.build()).unwrap();
        assert!(report.is_valid(), "{report:?}");
    }
}
