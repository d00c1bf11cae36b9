//! Unique ids from persistent sequential znodes: each `next-id` creates `parent/id-NNNNNNNNNN`
//! and reports the sequence number and the znode's czxid.
//!
//! Per parent, among acknowledged creates:
//! - no sequence number twice, no czxid twice (*duplicate*);
//! - ordered by czxid, the sequence numbers strictly increase (*out of zxid order*);
//! - if one create was acknowledged before another was invoked, its number is smaller
//!   (*out of real-time order*);
//! - the last successful listing of the parent holds every number acknowledged before it
//!   began (*lost*), and no number of a definitely failed create.
//!
//! Unknown (info) creates may have made a node (it shows in the listing) or not.

use std::collections::{BTreeMap, HashMap};

use super::{Checker, Example, Report};
use crate::history::{EventKind, History, HistoryBuilder, HistoryError, Op, SeqNode};

/// The unique-id checker.
#[derive(Debug, Clone, Copy, Default)]
pub struct UniqueIdChecker;

struct Created {
    node: SeqNode,
    invoke: usize,
    end: usize,
}

impl Checker for UniqueIdChecker {
    fn name(&self) -> &'static str {
        "unique ids"
    }

    fn check(&self, history: &History) -> Result<Report, HistoryError> {
        let mut report = Report::new(self.name());
        let mut created: BTreeMap<u32, Vec<Created>> = BTreeMap::new();
        let mut listings: HashMap<u32, (Vec<i64>, usize, usize)> = HashMap::new();
        for op in history.operations()? {
            match (op.op(), op.kind()) {
                (
                    Op::NextId {
                        parent,
                        node: Some(node),
                    },
                    EventKind::Ok,
                ) => {
                    report.operations += 1;
                    created.entry(*parent).or_default().push(Created {
                        node: *node,
                        invoke: op.invoke_index,
                        end: op.end_index(),
                    });
                }
                (Op::NextId { .. }, _) => report.operations += 1,
                (
                    Op::ListIds {
                        parent,
                        seqs: Some(seqs),
                    },
                    EventKind::Ok,
                ) => {
                    report.operations += 1;
                    let newer = listings
                        .get(parent)
                        .map_or(true, |(_, _, end)| op.end_index() > *end);
                    if newer {
                        listings.insert(*parent, (seqs.clone(), op.invoke_index, op.end_index()));
                    }
                }
                _ => {}
            }
        }
        for (parent, mut ids) in created {
            // Duplicates.
            let mut by_seq: HashMap<i64, &Created> = HashMap::new();
            let mut by_zxid: HashMap<i64, &Created> = HashMap::new();
            for c in &ids {
                if let Some(other) = by_seq.insert(c.node.seq, c) {
                    report.violation(
                        format!(
                            "parent {parent}: sequence number {} handed out twice",
                            c.node.seq
                        ),
                        vec![other.invoke, other.end, c.invoke, c.end],
                    );
                }
                if let Some(other) = by_zxid.insert(c.node.czxid, c) {
                    report.violation(
                        format!("parent {parent}: czxid {:#x} on two creates", c.node.czxid),
                        vec![other.invoke, other.end, c.invoke, c.end],
                    );
                }
            }
            // Increasing in zxid order.
            ids.sort_by_key(|c| c.node.czxid);
            for w in ids.windows(2) {
                if w[1].node.seq <= w[0].node.seq {
                    report.violation(
                        format!(
                            "parent {parent}: czxid {:#x} < {:#x} but sequence {} >= {}",
                            w[0].node.czxid, w[1].node.czxid, w[0].node.seq, w[1].node.seq
                        ),
                        vec![w[0].invoke, w[0].end, w[1].invoke, w[1].end],
                    );
                }
            }
            // Increasing in real-time order: for each create, compare with the create that
            // had the largest number among those acknowledged before it was invoked.
            let mut by_end: Vec<&Created> = ids.iter().collect();
            by_end.sort_by_key(|c| c.end);
            let mut by_invoke: Vec<&Created> = ids.iter().collect();
            by_invoke.sort_by_key(|c| c.invoke);
            let mut k = 0;
            let mut max_before: Option<&Created> = None;
            for c in by_invoke {
                while k < by_end.len() && by_end[k].end < c.invoke {
                    if max_before.map_or(true, |m| by_end[k].node.seq > m.node.seq) {
                        max_before = Some(by_end[k]);
                    }
                    k += 1;
                }
                if let Some(m) = max_before {
                    if c.node.seq <= m.node.seq {
                        report.violation(
                            format!(
                                "parent {parent}: sequence {} acknowledged before sequence {} \
                                 was requested",
                                m.node.seq, c.node.seq
                            ),
                            vec![m.invoke, m.end, c.invoke, c.end],
                        );
                    }
                }
            }
            // Still there at the end.
            match listings.get(&parent) {
                None => report.violation(
                    format!("parent {parent}: no successful final listing: nothing checked"),
                    vec![],
                ),
                Some((seqs, inv, end)) => {
                    let listed: std::collections::HashSet<i64> = seqs.iter().copied().collect();
                    for c in &ids {
                        if c.end < *inv && !listed.contains(&c.node.seq) {
                            report.violation(
                                format!(
                                    "parent {parent}: sequence {} was acknowledged but is lost",
                                    c.node.seq
                                ),
                                vec![c.invoke, c.end, *inv, *end],
                            );
                        }
                    }
                }
            }
        }
        Ok(report)
    }
}

fn next(parent: u32, seq: i64, czxid: i64) -> (Op, Op) {
    (
        Op::NextId { parent, node: None },
        Op::NextId {
            parent,
            node: Some(SeqNode { seq, czxid }),
        },
    )
}

fn list(parent: u32, seqs: &[i64]) -> (Op, Op) {
    (
        Op::ListIds { parent, seqs: None },
        Op::ListIds {
            parent,
            seqs: Some(seqs.to_vec()),
        },
    )
}

/// Known-good and known-bad histories.
pub fn examples() -> Vec<Example> {
    let c = || Box::new(UniqueIdChecker) as Box<dyn Checker>;
    let mut out: Vec<Example> = Vec::new();
    let build = |ops: &[(u64, (Op, Op))], concurrent: bool| {
        let mut b = HistoryBuilder::new();
        if concurrent {
            for (p, (i, _)) in ops {
                b.invoke(*p, i.clone());
            }
            for (p, (_, o)) in ops {
                b.ok(*p, o.clone());
            }
        } else {
            for (p, (i, o)) in ops {
                b.seq(*p, i.clone(), o.clone());
            }
        }
        b
    };

    let mut b = build(
        &[
            (1, next(0, 0, 10)),
            (2, next(0, 2, 12)),
            (3, next(0, 1, 11)),
        ],
        true,
    );
    b.seq(9, list(0, &[]).0, list(0, &[0, 1, 2]).1);
    out.push(("concurrent, increasing in zxid order", c(), b.build(), true));

    let mut b = build(&[(1, next(0, 0, 10)), (2, next(0, 0, 11))], true);
    b.seq(9, list(0, &[]).0, list(0, &[0]).1);
    out.push(("duplicate sequence", c(), b.build(), false));

    let mut b = build(&[(1, next(0, 5, 10)), (2, next(0, 3, 11))], true);
    b.seq(9, list(0, &[]).0, list(0, &[3, 5]).1);
    out.push(("decreasing in zxid order", c(), b.build(), false));

    let mut b = build(&[(1, next(0, 5, 20)), (2, next(0, 3, 11))], false);
    b.seq(9, list(0, &[]).0, list(0, &[3, 5]).1);
    out.push(("decreasing in real time", c(), b.build(), false));

    let mut b = build(&[(1, next(0, 0, 10)), (2, next(0, 1, 11))], false);
    b.seq(9, list(0, &[]).0, list(0, &[1]).1);
    out.push(("lost id", c(), b.build(), false));
    out
}
