//! The workloads: what the clients do, which clients they need, which faults suit them, and
//! which checker judges the history.
//!
//! | workload     | clients                         | checker                        |
//! |--------------|---------------------------------|--------------------------------|
//! | `register`   | tasks: read / write / cas       | linearizability per key (WGL)  |
//! | `set`        | tasks: add, final read          | set                            |
//! | `unique-ids` | tasks: sequential creates       | unique ids                     |
//! | `queue`      | processes: producers, consumers | queue (claim/ack exactly once) |
//! | `sessions`   | tasks + an observer             | sessions                       |
//! | `locks`      | processes: `Mutex` holders      | locks (exclusion, fencing)     |
//! | `ledger`     | processes: writers, a recoverer | ledger (acked entries survive) |

use std::time::Duration;

use crate::checker::ledger::LedgerChecker;
use crate::checker::locks::LockChecker;
use crate::checker::queue::QueueChecker;
use crate::checker::register::RegisterChecker;
use crate::checker::sessions::SessionChecker;
use crate::checker::set::SetChecker;
use crate::checker::unique_ids::UniqueIdChecker;
use crate::checker::Checker;
use crate::nemesis::FaultKind;

/// A workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Workload {
    /// CAS registers.
    Register,
    /// A grow-only set.
    Set,
    /// Sequential znodes as ids.
    UniqueIds,
    /// The claim/ack queue.
    Queue,
    /// Session guarantees.
    Sessions,
    /// The mutex.
    Locks,
    /// Ledgers on `zkit bookie` processes: writers append, a recoverer fences live writers.
    Ledger,
}

impl Workload {
    /// Every workload.
    pub const ALL: [Workload; 7] = [
        Workload::Register,
        Workload::Set,
        Workload::UniqueIds,
        Workload::Queue,
        Workload::Sessions,
        Workload::Locks,
        Workload::Ledger,
    ];

    /// Its `--workload` name.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Register => "register",
            Workload::Set => "set",
            Workload::UniqueIds => "unique-ids",
            Workload::Queue => "queue",
            Workload::Sessions => "sessions",
            Workload::Locks => "locks",
            Workload::Ledger => "ledger",
        }
    }

    /// The workload named `name`.
    pub fn parse(name: &str) -> Option<Workload> {
        Workload::ALL.into_iter().find(|w| w.name() == name)
    }

    /// Whether its clients are OS processes (they are killed as part of the workload).
    pub fn process_clients(self) -> bool {
        matches!(self, Workload::Queue | Workload::Locks | Workload::Ledger)
    }

    /// The faults that make sense for it.
    pub fn faults(self) -> Vec<FaultKind> {
        use FaultKind::*;
        match self {
            Workload::Register | Workload::Set | Workload::UniqueIds => {
                vec![Kill, Pause, PauseLong, Drop, Reset, Stall]
            }
            Workload::Queue | Workload::Locks => vec![Kill, Pause, Drop, Reset, KillClient],
            Workload::Sessions => vec![Partition, PartitionLong, Pause, PauseLong, Kill, Drop],
            Workload::Ledger => vec![KillBookie, PauseBookie, KillClient, PauseClient, Kill],
        }
    }

    /// The faults that make sense for it on an Apache ensemble: the member faults, and the
    /// connection faults that need no server process of ours.
    pub fn ensemble_faults(self) -> Vec<FaultKind> {
        use FaultKind::*;
        let mut f = vec![
            KillLeader,
            KillFollower,
            PauseLeader,
            PauseFollower,
            IsolateLeader,
        ];
        match self {
            Workload::Queue | Workload::Locks => f.extend([Drop, Reset, KillClient]),
            Workload::Ledger => f.extend([KillBookie, PauseBookie, KillClient, PauseClient]),
            Workload::Sessions => f.extend([Partition, PartitionLong, Drop]),
            _ => f.extend([Drop, Reset, Stall]),
        }
        f
    }

    /// The checker for its histories; `grace` is how long past its timeout a cut-off session
    /// may still live on the server, `stale_reads` how long after an observed expiry a read may
    /// still show the session's ephemeral (sessions workload; see [`SessionChecker`]).
    pub fn checker(self, grace: Duration, stale_reads: Duration) -> Box<dyn Checker> {
        match self {
            Workload::Register => Box::new(RegisterChecker::default()),
            Workload::Set => Box::new(SetChecker),
            Workload::UniqueIds => Box::new(UniqueIdChecker),
            Workload::Queue => Box::new(QueueChecker),
            Workload::Sessions => Box::new(SessionChecker {
                grace_ms: u64::try_from(grace.as_millis()).unwrap_or(u64::MAX),
                stale_read_ms: u64::try_from(stale_reads.as_millis()).unwrap_or(u64::MAX),
            }),
            Workload::Locks => Box::new(LockChecker),
            Workload::Ledger => Box::new(LedgerChecker),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nemesis::{Schedule, Timing};

    #[test]
    fn names_round_trip() {
        for w in Workload::ALL {
            assert_eq!(Workload::parse(w.name()), Some(w));
        }
    }

    #[test]
    fn twenty_seconds_inject_every_fault_of_each_workloads_set() {
        let run = Duration::from_secs(20);
        // The quick profile's timing (session timeout 1.6 s, tick 200 ms, syncLimit 10 ticks).
        let timing = Timing {
            session_timeout: Duration::from_millis(1600),
            tick: Duration::from_millis(200),
            sync_limit: Duration::from_millis(2000),
        };
        for w in Workload::ALL {
            let kinds = w.faults();
            for seed in 0..200 {
                let s = Schedule::generate(seed, &kinds, run, timing, 5, Some(&[1, 3]));
                for (k, n) in s.count_by_kind(&kinds) {
                    assert!(n >= 1, "{} seed {seed}: no {}\n{s}", w.name(), k.name());
                }
            }
        }
    }
}
