//! The queue checker, for the claim/ack mode of `zkit::queue`: an item is consumed when its ack
//! (one multi deleting the item and its claim and creating the item's result node) commits.
//! Consumers are killed with kill -9 between claim and ack; the run ends with a drain that
//! claims and acks whatever is left, then reads the result nodes.
//!
//! - no item is acknowledged (ok) twice (*consumed twice*);
//! - the final read of the results holds every item whose enqueue was acknowledged (*lost*);
//! - it holds nothing that was not enqueued (ok or info: an unknown enqueue may have happened)
//!   (*unexpected*), and no item whose enqueue definitely failed;
//! - every item whose ack was acknowledged is among the results (*ack not durable*).

use std::collections::{BTreeMap, BTreeSet};

use super::{Checker, Example, Report};
use crate::history::{EventKind, History, HistoryBuilder, HistoryError, Op};

/// The queue checker.
#[derive(Debug, Clone, Copy, Default)]
pub struct QueueChecker;

impl Checker for QueueChecker {
    fn name(&self) -> &'static str {
        "queue"
    }

    fn check(&self, history: &History) -> Result<Report, HistoryError> {
        let mut report = Report::new(self.name());
        let mut enqueued: BTreeMap<u64, (EventKind, usize, usize)> = BTreeMap::new();
        let mut acks: BTreeMap<u64, Vec<(usize, usize)>> = BTreeMap::new();
        let mut results: Option<(Vec<u64>, usize, usize)> = None;
        for op in history.operations()? {
            match op.op() {
                Op::Enqueue { item } => {
                    report.operations += 1;
                    enqueued.insert(*item, (op.kind(), op.invoke_index, op.end_index()));
                }
                Op::Ack { item } => {
                    report.operations += 1;
                    if op.is_ok() {
                        acks.entry(*item)
                            .or_default()
                            .push((op.invoke_index, op.end_index()));
                    }
                }
                Op::Claim { .. } => report.operations += 1,
                Op::ReadResults { items: Some(items) } if op.is_ok() => {
                    report.operations += 1;
                    if results
                        .as_ref()
                        .map_or(true, |(_, _, end)| op.end_index() > *end)
                    {
                        results = Some((items.clone(), op.invoke_index, op.end_index()));
                    }
                }
                _ => {}
            }
        }
        for (item, list) in &acks {
            if list.len() > 1 {
                report.violation(
                    format!("item {item} consumed {} times", list.len()),
                    list.iter().flat_map(|(i, e)| [*i, *e]).collect(),
                );
            }
        }
        let Some((items, inv, end)) = results else {
            report.violation(
                "no successful final read of the results: nothing checked",
                vec![],
            );
            return Ok(report);
        };
        let consumed: BTreeSet<u64> = items.iter().copied().collect();
        for (item, (kind, i, e)) in &enqueued {
            let shown = consumed.contains(item);
            match kind {
                EventKind::Ok if !shown => report.violation(
                    format!("item {item} was enqueued but never consumed (lost)"),
                    vec![*i, *e, inv, end],
                ),
                EventKind::Fail if shown => report.violation(
                    format!("item {item} definitely failed to be enqueued but was consumed"),
                    vec![*i, *e, inv, end],
                ),
                _ => {}
            }
        }
        for item in consumed.iter().filter(|i| !enqueued.contains_key(i)) {
            report.violation(
                format!("item {item} was consumed but never enqueued"),
                vec![inv, end],
            );
        }
        for (item, list) in &acks {
            if !consumed.contains(item) {
                let mut idx: Vec<usize> = list.iter().flat_map(|(i, e)| [*i, *e]).collect();
                idx.extend([inv, end]);
                report.violation(
                    format!("item {item}'s ack was acknowledged but its result is missing"),
                    idx,
                );
            }
        }
        Ok(report)
    }
}

/// Known-good and known-bad histories.
pub fn examples() -> Vec<Example> {
    let c = || Box::new(QueueChecker) as Box<dyn Checker>;
    let enq = |item| Op::Enqueue { item };
    let claim = |item| Op::Claim { item };
    let ack = |item| Op::Ack { item };
    let results = |items: &[u64]| {
        (
            Op::ReadResults { items: None },
            Op::ReadResults {
                items: Some(items.to_vec()),
            },
        )
    };
    let mut out: Vec<Example> = Vec::new();

    // Good: item 1 claimed by a consumer that dies, redelivered and acked once; item 2 info.
    let mut b = HistoryBuilder::new();
    b.seq(1, enq(1), enq(1))
        .invoke(1, enq(2))
        .info(1, enq(2))
        .seq(2, claim(None), claim(Some(1)))
        .invoke(2, ack(1))
        .info(2, ack(1))
        .seq(3, claim(None), claim(Some(1)))
        .seq(3, ack(1), ack(1))
        .seq(3, claim(None), claim(Some(2)))
        .seq(3, ack(2), ack(2));
    let (i, o) = results(&[1, 2]);
    b.seq(9, i, o);
    out.push(("redelivered after a crash", c(), b.build(), true));

    // Bad: acked twice.
    let mut b = HistoryBuilder::new();
    b.seq(1, enq(1), enq(1))
        .seq(2, claim(None), claim(Some(1)))
        .seq(3, claim(None), claim(Some(1)))
        .seq(2, ack(1), ack(1))
        .seq(3, ack(1), ack(1));
    let (i, o) = results(&[1]);
    b.seq(9, i, o);
    out.push(("consumed twice", c(), b.build(), false));

    // Bad: lost.
    let mut b = HistoryBuilder::new();
    b.seq(1, enq(1), enq(1)).seq(1, enq(2), enq(2));
    let (i, o) = results(&[1]);
    b.seq(9, i, o);
    out.push(("lost item", c(), b.build(), false));

    // Bad: an acknowledged ack whose result vanished.
    let mut b = HistoryBuilder::new();
    b.invoke(1, enq(1))
        .info(1, enq(1))
        .seq(2, claim(None), claim(Some(1)))
        .seq(2, ack(1), ack(1));
    let (i, o) = results(&[]);
    b.seq(9, i, o);
    out.push(("ack not durable", c(), b.build(), false));
    out
}
