//! Seeded operation generators, one per client, per workload. Pure: they pick the next
//! operation from a `StdRng` and from what the client saw so far (a register version to
//! compare-and-set on, a claimed item to ack, a held token to release); no I/O, no clock.
//!
//! Each client's `StdRng` is seeded from the run's seed and the client's number, so a seed
//! fixes every random choice (operations, values, delays) and the fault schedule. It does not
//! fix the interleaving: the servers and the network are real.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::executor::{Reply, ID_PARENTS};
use crate::history::{Cell, EventKind, Op};

/// The RNG of client `client` in a run seeded `seed`.
pub fn client_rng(seed: u64, client: u32) -> StdRng {
    StdRng::seed_from_u64(seed ^ (u64::from(client) + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

/// The next operation and how long to wait before invoking it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// Think time before the invoke.
    pub delay: Duration,
    /// The operation.
    pub op: Op,
}

/// Picks operations for one client.
pub trait Generator: Send {
    /// The next step.
    fn next(&mut self, rng: &mut StdRng) -> Step;
    /// What the last operation returned (for state machines: claim then ack, lock then
    /// release).
    fn observe(&mut self, _reply: &Reply) {}
    /// The client's process was killed: forget what it held.
    fn reset(&mut self) {}
}

fn think(rng: &mut StdRng, max_ms: u64) -> Duration {
    Duration::from_millis(rng.gen_range(0..=max_ms))
}

/// Register keys shared by the clients of a run: a window of keys in use, each retired after
/// a bounded number of operations so every key's history stays small enough to search, or
/// sooner, after [`MAX_INDETERMINATE_PER_KEY`] writes or CAS of unknown outcome: each of those
/// may take effect at any later point or never, so the linearizability search over a key grows
/// with two to the power of their number (an ensemble losing its quorum makes every request of
/// a few seconds indeterminate).
#[derive(Debug)]
pub struct KeyPool {
    active: Vec<LiveKey>,
    next_key: u64,
    ops_per_key: u32,
}

impl KeyPool {
    /// `window` keys in use at once, each for `ops_per_key` operations.
    pub fn shared(window: usize, ops_per_key: u32) -> Arc<Mutex<KeyPool>> {
        Arc::new(Mutex::new(KeyPool {
            active: (0..window as u64)
                .map(|key| LiveKey::new(key, ops_per_key))
                .collect(),
            next_key: window as u64,
            ops_per_key,
        }))
    }

    fn take(&mut self, rng: &mut StdRng) -> u64 {
        let i = rng.gen_range(0..self.active.len());
        let live = &mut self.active[i];
        let key = live.key;
        live.left -= 1;
        if live.left == 0 {
            self.retire(i);
        }
        key
    }

    /// A write or CAS on `key` ended with an unknown outcome (info).
    fn note_indeterminate(&mut self, key: u64) {
        if let Some(i) = self.active.iter().position(|live| live.key == key) {
            self.active[i].indeterminate += 1;
            if self.active[i].indeterminate >= MAX_INDETERMINATE_PER_KEY {
                self.retire(i);
            }
        }
    }

    fn retire(&mut self, i: usize) {
        self.active[i] = LiveKey::new(self.next_key, self.ops_per_key);
        self.next_key += 1;
    }
}

/// A key of the [`KeyPool`]'s window.
#[derive(Debug)]
struct LiveKey {
    key: u64,
    /// Operations left before it is retired.
    left: u32,
    /// Writes and CAS on it that ended with an unknown outcome.
    indeterminate: u32,
}

impl LiveKey {
    fn new(key: u64, ops: u32) -> LiveKey {
        LiveKey {
            key,
            left: ops,
            indeterminate: 0,
        }
    }
}

/// Indeterminate writes and CAS after which a register key is retired (see [`KeyPool`]).
pub const MAX_INDETERMINATE_PER_KEY: u32 = 6;

/// CAS register: reads, writes of unique values, and compare-and-sets on the last version
/// this client saw of the key.
#[derive(Debug)]
pub struct RegisterGen {
    client: u32,
    counter: i64,
    keys: Arc<Mutex<KeyPool>>,
    seen: std::collections::HashMap<u64, i32>,
}

impl RegisterGen {
    /// Client `client`'s generator over the shared `keys`.
    pub fn new(client: u32, keys: Arc<Mutex<KeyPool>>) -> RegisterGen {
        RegisterGen {
            client,
            counter: 0,
            keys,
            seen: Default::default(),
        }
    }
}

impl RegisterGen {
    /// The shared key pool; a poisoned lock is taken as it is (none of the pool's methods can
    /// panic halfway through a change).
    fn pool(&self) -> std::sync::MutexGuard<'_, KeyPool> {
        self.keys.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Generator for RegisterGen {
    fn next(&mut self, rng: &mut StdRng) -> Step {
        let key = self.pool().take(rng);
        self.counter += 1;
        let value = i64::from(self.client + 1) * 1_000_000_000 + self.counter;
        let op = match rng.gen_range(0..10) {
            0..=3 => Op::Read { key, value: None },
            4..=6 => Op::Write {
                key,
                value,
                version: None,
            },
            _ => {
                let known = self.seen.get(&key).copied().unwrap_or(0);
                Op::Cas {
                    key,
                    expected: if rng.gen_bool(0.8) { known } else { known + 1 },
                    value,
                    mismatch: false,
                }
            }
        };
        Step {
            delay: think(rng, 5),
            op,
        }
    }

    fn observe(&mut self, reply: &Reply) {
        if reply.kind == EventKind::Info {
            if let Op::Write { key, .. } | Op::Cas { key, .. } = &reply.op {
                self.pool().note_indeterminate(*key);
            }
            return;
        }
        if reply.kind != EventKind::Ok {
            return;
        }
        match &reply.op {
            Op::Read {
                key,
                value: Some(Cell::Present { version, .. }),
            } => {
                self.seen.insert(*key, *version);
            }
            Op::Write {
                key,
                version: Some(v),
                ..
            } => {
                self.seen.insert(*key, *v);
            }
            Op::Cas { key, expected, .. } => {
                self.seen.insert(*key, expected + 1);
            }
            _ => {}
        }
    }
}

/// Set: adds of elements unique to the client.
#[derive(Debug)]
pub struct SetGen {
    client: u32,
    counter: u64,
}

impl SetGen {
    /// Client `client`'s generator.
    pub fn new(client: u32) -> SetGen {
        SetGen { client, counter: 0 }
    }
}

impl Generator for SetGen {
    fn next(&mut self, rng: &mut StdRng) -> Step {
        self.counter += 1;
        Step {
            delay: think(rng, 5),
            op: Op::Add {
                element: (u64::from(self.client) << 32) | self.counter,
            },
        }
    }
}

/// Unique ids: sequential creates under one of [`ID_PARENTS`] parents.
#[derive(Debug, Default)]
pub struct IdGen;

impl Generator for IdGen {
    fn next(&mut self, rng: &mut StdRng) -> Step {
        Step {
            delay: think(rng, 5),
            op: Op::NextId {
                parent: rng.gen_range(0..ID_PARENTS),
                node: None,
            },
        }
    }
}

/// Queue producer: offers items unique to the client.
#[derive(Debug)]
pub struct ProducerGen {
    client: u32,
    counter: u64,
}

impl ProducerGen {
    /// Client `client`'s generator.
    pub fn new(client: u32) -> ProducerGen {
        ProducerGen { client, counter: 0 }
    }
}

impl Generator for ProducerGen {
    fn next(&mut self, rng: &mut StdRng) -> Step {
        self.counter += 1;
        Step {
            delay: think(rng, 15),
            op: Op::Enqueue {
                item: (u64::from(self.client) << 32) | self.counter,
            },
        }
    }
}

/// Queue consumer: claim, "process" for a while, ack.
#[derive(Debug, Default)]
pub struct ConsumerGen {
    holding: Option<u64>,
}

impl Generator for ConsumerGen {
    fn next(&mut self, rng: &mut StdRng) -> Step {
        match self.holding {
            Some(item) => Step {
                delay: think(rng, 30),
                op: Op::Ack { item },
            },
            None => Step {
                delay: think(rng, 10),
                op: Op::Claim { item: None },
            },
        }
    }

    fn observe(&mut self, reply: &Reply) {
        match (&reply.op, reply.kind) {
            (Op::Claim { item: Some(item) }, EventKind::Ok) => self.holding = Some(*item),
            (Op::Ack { .. }, _) => self.holding = None,
            _ => {}
        }
    }

    fn reset(&mut self) {
        self.holding = None;
    }
}

/// Lock client: acquire, hold for a while, release.
#[derive(Debug, Default)]
pub struct LockGen {
    holding: Option<i64>,
}

impl Generator for LockGen {
    fn next(&mut self, rng: &mut StdRng) -> Step {
        match self.holding {
            Some(token) => Step {
                delay: Duration::from_millis(rng.gen_range(10..=60)),
                op: Op::Release { token, lost: false },
            },
            None => Step {
                delay: think(rng, 20),
                op: Op::Acquire { token: None },
            },
        }
    }

    fn observe(&mut self, reply: &Reply) {
        match (&reply.op, reply.kind) {
            (Op::Acquire { token: Some(t) }, EventKind::Ok) => self.holding = Some(*t),
            (Op::Release { .. }, _) => self.holding = None,
            _ => {}
        }
    }

    fn reset(&mut self) {
        self.holding = None;
    }
}

/// The ledger each writer appends to now (from its last acknowledged append), shared by the
/// writers and the recoverer of a ledger run.
pub type CurrentLedgers = Arc<Mutex<std::collections::BTreeMap<u32, u64>>>;

/// Ledger writer: appends values unique to the client (`client << 32 | n`); the executor
/// opens a new ledger when it has none (first append, or after a failure or a fence).
#[derive(Debug)]
pub struct LedgerWriterGen {
    client: u32,
    counter: u64,
    current: CurrentLedgers,
}

impl LedgerWriterGen {
    /// Writer `client`, publishing its ledger in `current`.
    pub fn new(client: u32, current: CurrentLedgers) -> LedgerWriterGen {
        LedgerWriterGen {
            client,
            counter: 0,
            current,
        }
    }
}

impl Generator for LedgerWriterGen {
    fn next(&mut self, rng: &mut StdRng) -> Step {
        self.counter += 1;
        Step {
            delay: think(rng, 10),
            op: Op::LedgerAppend {
                ledger: 0,
                writer: self.client,
                value: (u64::from(self.client) << 32) | self.counter,
                entry: None,
            },
        }
    }

    fn observe(&mut self, reply: &Reply) {
        if let (Op::LedgerAppend { ledger, .. }, EventKind::Ok) = (&reply.op, reply.kind) {
            crate::lock_vec(&self.current).insert(self.client, *ledger);
        }
    }
}

/// Ledger recoverer: now and then recovers (fences and closes) a writer's current ledger while
/// that writer is alive, the way a new owner takes a log over; the writer must then be
/// refused, and moves on to a new ledger.
#[derive(Debug)]
pub struct LedgerRecoverGen {
    current: CurrentLedgers,
}

impl LedgerRecoverGen {
    /// A recoverer of the ledgers in `current`.
    pub fn new(current: CurrentLedgers) -> LedgerRecoverGen {
        LedgerRecoverGen { current }
    }
}

impl Generator for LedgerRecoverGen {
    fn next(&mut self, rng: &mut StdRng) -> Step {
        let ledgers: Vec<u64> = crate::lock_vec(&self.current).values().copied().collect();
        let delay = Duration::from_millis(rng.gen_range(1500..=3000));
        match ledgers.as_slice() {
            [] => Step {
                delay,
                // Nothing written yet: this fails (no such ledger); only ok recoveries count.
                op: Op::LedgerRecover {
                    ledger: u64::MAX,
                    last: None,
                },
            },
            l => Step {
                delay,
                op: Op::LedgerRecover {
                    ledger: l[rng.gen_range(0..l.len())],
                    last: None,
                },
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_fixes_the_operations() {
        let run = |seed| {
            let keys = KeyPool::shared(3, 5);
            let mut g = RegisterGen::new(1, keys);
            let mut rng = client_rng(seed, 1);
            (0..50).map(|_| g.next(&mut rng)).collect::<Vec<_>>()
        };
        assert_eq!(run(7), run(7));
        assert_ne!(run(7), run(8));
    }

    #[test]
    fn keys_retire_after_their_budget() {
        let keys = KeyPool::shared(2, 3);
        let mut rng = client_rng(1, 0);
        let mut counts = std::collections::HashMap::new();
        for _ in 0..60 {
            let k = keys.lock().unwrap().take(&mut rng);
            *counts.entry(k).or_insert(0) += 1;
        }
        assert!(counts.values().all(|c| *c <= 3), "{counts:?}");
        assert!(counts.len() >= 20, "{counts:?}");
    }

    #[test]
    fn keys_retire_after_their_indeterminate_writes() {
        let keys = KeyPool::shared(1, 1000);
        let mut g = RegisterGen::new(0, keys.clone());
        let mut rng = client_rng(1, 0);
        let first = keys.lock().unwrap().take(&mut rng);
        let info = |key| Reply {
            kind: EventKind::Info,
            op: Op::Write {
                key,
                value: 1,
                version: None,
            },
            error: None,
        };
        for _ in 1..MAX_INDETERMINATE_PER_KEY {
            g.observe(&info(first));
        }
        assert_eq!(keys.lock().unwrap().take(&mut rng), first);
        g.observe(&info(first));
        assert_ne!(keys.lock().unwrap().take(&mut rng), first);
    }

    #[test]
    fn consumers_ack_what_they_claimed() {
        let mut g = ConsumerGen::default();
        let mut rng = client_rng(1, 0);
        assert_eq!(g.next(&mut rng).op, Op::Claim { item: None });
        g.observe(&Reply {
            kind: EventKind::Ok,
            op: Op::Claim { item: Some(9) },
            error: None,
        });
        assert_eq!(g.next(&mut rng).op, Op::Ack { item: 9 });
        g.reset();
        assert_eq!(g.next(&mut rng).op, Op::Claim { item: None });
    }
}
