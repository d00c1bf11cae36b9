//! The Wing–Gong–Lowe linearizability search, with Lowe's memoization, over any sequential
//! [`Model`]. Pure: no clock, no I/O; bounded by a step budget.
//!
//! # Why not a crate
//! The two candidates were looked at: `stateright`'s `LinearizabilityTester` is a brute-force
//! search made for small model-checking histories (no state cache) and brings a large
//! dependency tree (it is a whole model checker); `todc-utils`' `WGLChecker` (two releases,
//! September 2023, unmaintained since) needs a response for every call and a deterministic
//! `apply`, and has no notion of an operation whose outcome is unknown. Jepsen's handling of
//! indeterminate operations is the heart of checking a system under faults, and the search
//! itself is a hundred lines, so it is written here, after Lowe's "Testing for linearizability"
//! (2017) and Horn & Kroening's description of WGL with memoization (2015), the algorithm
//! Knossos and Porcupine implement.
//!
//! # The algorithm
//! Calls and returns of every operation form one list in real-time order. The search walks it:
//! at a call it tries to linearize that operation now (the model accepts it from the current
//! state) and, if the pair (set of linearized operations, model state) was not seen before,
//! takes it out of the list and starts again from the head; at a return whose operation is not
//! linearized yet it backtracks (that operation had to take effect before it returned). The
//! cache of (bitset, state) pairs is what keeps this from being exponential on typical
//! histories: two orders that reach the same state with the same operations done are the same.
//!
//! # Indeterminate operations
//! An info operation (outcome unknown) may take effect at any time after its invoke, or never.
//! Its return is placed after every other event, and its model step must always be possible
//! (when its effect is impossible at that point, it is a no-op there). Once the walk reaches
//! the returns of info operations only, every definite operation has been linearized and the
//! rest may be taken as never having happened: the history is linearizable.

use std::collections::HashSet;
use std::hash::Hash;

/// A sequential specification.
pub trait Model {
    /// The object's state (cached: keep it small).
    type State: Clone + Eq + Hash;
    /// An operation with its result (for indeterminate ones, without).
    type Op;

    /// The state before any operation.
    fn init(&self) -> Self::State;

    /// The state after `op` taken from `state`, or `None` if `op` (with its result) cannot
    /// happen in `state`. For an indeterminate op (`info`), never `None`.
    fn step(&self, state: &Self::State, op: &Self::Op, info: bool) -> Option<Self::State>;
}

/// One operation for the search: where its call and return are in the history order.
#[derive(Debug, Clone)]
pub struct Entry<O> {
    /// The operation.
    pub op: O,
    /// Its invoke's position (any increasing numbering: event indices).
    pub call: usize,
    /// Its completion's position; `None` for an indeterminate op (its interval has no end).
    pub ret: Option<usize>,
}

/// The result of a search.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Some order of the operations satisfies the model.
    Linearizable,
    /// None does. `stuck` is the operation (an index into the entries) whose return the
    /// deepest attempt could not get past; `done` the operations that attempt had linearized.
    NotLinearizable {
        /// The entry that could not be linearized before its return.
        stuck: usize,
        /// The entries linearized on the deepest attempt, in linearization order.
        done: Vec<usize>,
    },
    /// The step budget ran out first.
    Unknown {
        /// Steps taken.
        steps: u64,
    },
}

const HEAD: usize = usize::MAX;

#[derive(Debug, Clone, Copy)]
struct Node {
    op: usize,
    is_call: bool,
    /// For a call: the node index of its return.
    partner: usize,
    prev: usize,
    next: usize,
}

/// Searches for a linearization of `entries` under `model`, taking at most `budget` steps.
pub fn check<M: Model>(model: &M, entries: &[Entry<M::Op>], budget: u64) -> Outcome {
    let n = entries.len();
    if n == 0 {
        return Outcome::Linearizable;
    }
    // Events in order: (position, is_return_after_call_at_same_position, op, is_call). Info
    // returns go after everything.
    let mut events: Vec<(usize, u8, usize, bool)> = Vec::with_capacity(2 * n);
    for (i, e) in entries.iter().enumerate() {
        events.push((e.call, 0, i, true));
        events.push((e.ret.unwrap_or(usize::MAX), 1, i, false));
    }
    events.sort_unstable();
    let mut nodes: Vec<Node> = events
        .iter()
        .map(|&(_, _, op, is_call)| Node {
            op,
            is_call,
            partner: 0,
            prev: HEAD,
            next: HEAD,
        })
        .collect();
    let mut ret_node = vec![0usize; n];
    for (k, node) in nodes.iter().enumerate() {
        if !node.is_call {
            ret_node[node.op] = k;
        }
    }
    let len = nodes.len();
    for k in 0..len {
        nodes[k].prev = if k == 0 { HEAD } else { k - 1 };
        nodes[k].next = if k + 1 == len { HEAD } else { k + 1 };
        if nodes[k].is_call {
            nodes[k].partner = ret_node[nodes[k].op];
        }
    }
    let mut head_next = 0usize;

    let words = n.div_ceil(64);
    let mut linearized = vec![0u64; words];
    let mut cache: HashSet<(Vec<u64>, M::State)> = HashSet::new();
    let mut state = model.init();
    let mut stack: Vec<(usize, M::State)> = Vec::new();
    let mut best: (usize, usize, Vec<usize>) = (0, 0, Vec::new());
    let mut steps = 0u64;
    let mut cur = head_next;

    loop {
        if head_next == HEAD {
            return Outcome::Linearizable;
        }
        steps += 1;
        if steps > budget {
            return Outcome::Unknown { steps };
        }
        let node = nodes[cur];
        let info = entries[node.op].ret.is_none();
        if node.is_call {
            if let Some(next_state) = model.step(&state, &entries[node.op].op, info) {
                let mut next_lin = linearized.clone();
                next_lin[node.op / 64] |= 1 << (node.op % 64);
                if cache.insert((next_lin.clone(), next_state.clone())) {
                    stack.push((cur, state));
                    state = next_state;
                    linearized = next_lin;
                    lift(&mut nodes, &mut head_next, cur);
                    cur = head_next;
                    continue;
                }
            }
            cur = node.next;
            if cur == HEAD {
                // Only calls were left after this point; cannot happen with well-formed input
                // (every call has a later return), but never loop forever.
                return Outcome::Linearizable;
            }
        } else {
            if info {
                // Only indeterminate returns are left: everything definite is linearized.
                return Outcome::Linearizable;
            }
            // The op returned without having been linearized: backtrack.
            if stack.len() >= best.0 {
                best = (
                    stack.len(),
                    node.op,
                    stack.iter().map(|(c, _)| nodes[*c].op).collect(),
                );
            }
            let Some((call, prev_state)) = stack.pop() else {
                return Outcome::NotLinearizable {
                    stuck: best.1,
                    done: best.2,
                };
            };
            state = prev_state;
            let op = nodes[call].op;
            linearized[op / 64] &= !(1 << (op % 64));
            unlift(&mut nodes, &mut head_next, call);
            cur = nodes[call].next;
            if cur == HEAD {
                return Outcome::NotLinearizable {
                    stuck: best.1,
                    done: best.2,
                };
            }
        }
    }
}

fn set_next(nodes: &mut [Node], head_next: &mut usize, at: usize, to: usize) {
    if at == HEAD {
        *head_next = to;
    } else {
        nodes[at].next = to;
    }
}

/// Takes a call and its return out of the list (their own links are kept for `unlift`).
fn lift(nodes: &mut [Node], head_next: &mut usize, call: usize) {
    let c = nodes[call];
    set_next(nodes, head_next, c.prev, c.next);
    if c.next != HEAD {
        nodes[c.next].prev = c.prev;
    }
    let r = nodes[c.partner];
    set_next(nodes, head_next, r.prev, r.next);
    if r.next != HEAD {
        nodes[r.next].prev = r.prev;
    }
}

/// Puts back what the matching `lift` took out (in reverse order).
fn unlift(nodes: &mut [Node], head_next: &mut usize, call: usize) {
    let ret = nodes[call].partner;
    let r = nodes[ret];
    set_next(nodes, head_next, r.prev, ret);
    if r.next != HEAD {
        nodes[r.next].prev = ret;
    }
    let c = nodes[call];
    set_next(nodes, head_next, c.prev, call);
    if c.next != HEAD {
        nodes[c.next].prev = call;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A plain register of u8 (0 initially): (is_write, value).
    struct Reg;
    impl Model for Reg {
        type State = u8;
        type Op = (bool, u8);
        fn init(&self) -> u8 {
            0
        }
        fn step(&self, s: &u8, op: &(bool, u8), info: bool) -> Option<u8> {
            match op {
                (true, v) => Some(*v),
                (false, _) if info => Some(*s),
                (false, v) => (*s == *v).then_some(*s),
            }
        }
    }

    fn e(op: (bool, u8), call: usize, ret: Option<usize>) -> Entry<(bool, u8)> {
        Entry { op, call, ret }
    }

    #[test]
    fn sequential_and_concurrent_histories() {
        // w1 then r1: fine. r1 before w1 completes but overlapping: fine.
        assert_eq!(
            check(
                &Reg,
                &[e((true, 1), 0, Some(1)), e((false, 1), 2, Some(3))],
                1000
            ),
            Outcome::Linearizable
        );
        assert_eq!(
            check(
                &Reg,
                &[e((true, 1), 0, Some(3)), e((false, 1), 1, Some(2))],
                1000
            ),
            Outcome::Linearizable
        );
        // r1 entirely before w1: impossible.
        assert!(matches!(
            check(
                &Reg,
                &[e((false, 1), 0, Some(1)), e((true, 1), 2, Some(3))],
                1000
            ),
            Outcome::NotLinearizable { stuck: 0, .. }
        ));
    }

    #[test]
    fn stale_read_after_two_writes_is_caught() {
        // w1; w2; r1 (all sequential): r1 is stale.
        let h = [
            e((true, 1), 0, Some(1)),
            e((true, 2), 2, Some(3)),
            e((false, 1), 4, Some(5)),
        ];
        assert!(matches!(
            check(&Reg, &h, 1000),
            Outcome::NotLinearizable { stuck: 2, .. }
        ));
    }

    #[test]
    fn an_info_write_may_happen_late_or_never() {
        // w1 info (never returns); r0 later; r1 later still: fine (took effect between).
        let h = [
            e((true, 1), 0, None),
            e((false, 0), 1, Some(2)),
            e((false, 1), 3, Some(4)),
        ];
        assert_eq!(check(&Reg, &h, 1000), Outcome::Linearizable);
        // Never: only r0 reads.
        let h = [e((true, 1), 0, None), e((false, 0), 1, Some(2))];
        assert_eq!(check(&Reg, &h, 1000), Outcome::Linearizable);
        // But not before its invoke: r1 before the info write was even sent.
        let h = [e((false, 1), 0, Some(1)), e((true, 1), 2, None)];
        assert!(matches!(
            check(&Reg, &h, 1000),
            Outcome::NotLinearizable { .. }
        ));
        // And once: r1, r0, r1 after it is impossible with one write of 1.
        let h = [
            e((true, 1), 0, None),
            e((false, 1), 1, Some(2)),
            e((false, 0), 3, Some(4)),
        ];
        assert!(matches!(
            check(&Reg, &h, 1000),
            Outcome::NotLinearizable { stuck: 2, .. }
        ));
    }

    #[test]
    fn the_budget_bounds_the_search() {
        let h: Vec<_> = (0..40u8)
            .map(|i| e((true, i), usize::from(i), None))
            .chain([e((false, 255), 100, Some(101))])
            .collect();
        assert!(matches!(check(&Reg, &h, 50), Outcome::Unknown { .. }));
    }
}
