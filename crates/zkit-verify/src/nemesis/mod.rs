//! The nemesis: a seeded schedule of faults ([`Schedule::generate`], printed with the run) and
//! the things that inject and heal them ([`Nemesis`] implementations).
//!
//! - [`server`]: a `zkit serve` process (or the embedded server of `zkit-verify serve`) on a
//!   durable data dir: kill -9 and restart, SIGSTOP/SIGCONT.
//! - [`proxy`]: every client reaches the server through its own `zkit_testkit::FaultProxy`:
//!   connection drops, resets (RST), stalls, and partitions of one client (black hole).
//! - [`bookie`]: the ledger workload's `zkit bookie` processes: kill -9 and restart,
//!   SIGSTOP/SIGCONT.
//! - [`client`]: SIGSTOP/SIGCONT of client processes.
//! - [`disk`]: the data dir on a small tmpfs (root only) filled to ENOSPC and freed again.
//! - [`partition`]: per-member configs whose quorum and election addresses point at per-link
//!   proxies, so one link between two members can be cut ([`Fault::PartitionMembers`]).
//! - [`ensemble`]: an Apache ZooKeeper ensemble as the system under test, and the nemesis of
//!   its members: kill -9 and restart, SIGSTOP/SIGCONT of the leader or a follower
//!   ([`Fault::KillMember`], [`Fault::PauseMember`]), and the leader cut off from every other
//!   member ([`Fault::IsolateMember`]) while its clients keep their connections.
//!
//! Faults run one at a time: inject, hold, heal, pause, next. A schedule is a pure function of
//! the seed, the fault kinds, the run's length and its timing; it goes through the kinds in
//! cycles, each a seeded random permutation of them, so that a run long enough for one cycle
//! injects every kind of its set.

pub mod bookie;
pub mod client;
pub mod disk;
pub mod ensemble;
pub mod partition;
pub mod proxy;
pub mod server;

use std::fmt;
use std::time::Duration;

use futures::future::BoxFuture;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use crate::Error;

/// Which member of an ensemble a member fault hits (resolved when it is injected).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Member {
    /// Whoever leads at that moment.
    Leader,
    /// A follower, by its position among the followers.
    Follower(u32),
}

/// One fault, with its parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// kill -9 the server, restart it on the same data dir after `down`.
    KillServer {
        /// Time down.
        down: Duration,
    },
    /// SIGSTOP the server, SIGCONT after `duration`.
    PauseServer {
        /// Time stopped.
        duration: Duration,
    },
    /// Close every client connection (FIN); clients reconnect.
    DropConnections,
    /// Abort every client connection with RST.
    ResetConnections,
    /// Freeze the open client connections for `duration` (new ones pass).
    StallConnections {
        /// How long before they are let go.
        duration: Duration,
    },
    /// Black-hole one client's link for `duration`.
    Partition {
        /// The client.
        client: u32,
        /// How long.
        duration: Duration,
    },
    /// Fill the data dir's file system for `duration`.
    DiskFull {
        /// How long.
        duration: Duration,
    },
    /// kill -9 a client process (its session is left to expire).
    KillClient {
        /// The client.
        client: u32,
    },
    /// SIGSTOP a client process for `duration` (its session may expire meanwhile; a ledger
    /// writer may be fenced meanwhile).
    PauseClient {
        /// The client.
        client: u32,
        /// How long.
        duration: Duration,
    },
    /// kill -9 a bookie, restart it on the same data dir after `down`.
    KillBookie {
        /// Which bookie (by number, modulo the bookies of the run).
        bookie: u32,
        /// Time down.
        down: Duration,
    },
    /// SIGSTOP a bookie for `duration`.
    PauseBookie {
        /// Which bookie.
        bookie: u32,
        /// How long.
        duration: Duration,
    },
    /// kill -9 an ensemble member, restart it after `down`.
    KillMember {
        /// Which member.
        member: Member,
        /// Time down.
        down: Duration,
    },
    /// SIGSTOP an ensemble member for `duration`.
    PauseMember {
        /// Which member.
        member: Member,
        /// Time stopped.
        duration: Duration,
    },
    /// Cut the quorum and election links between `member` and every other member for
    /// `duration`; client connections are untouched.
    IsolateMember {
        /// Which member.
        member: Member,
        /// How long.
        duration: Duration,
    },
    /// Cut the quorum and election links between members `a` and `b` for `duration`.
    PartitionMembers {
        /// One member (server id).
        a: u32,
        /// The other.
        b: u32,
        /// How long.
        duration: Duration,
    },
}

impl Fault {
    /// How long the fault lasts before it is healed.
    pub fn duration(&self) -> Duration {
        match self {
            Fault::KillServer { down }
            | Fault::KillMember { down, .. }
            | Fault::KillBookie { down, .. } => *down,
            Fault::PauseServer { duration }
            | Fault::StallConnections { duration }
            | Fault::Partition { duration, .. }
            | Fault::DiskFull { duration }
            | Fault::PauseMember { duration, .. }
            | Fault::IsolateMember { duration, .. }
            | Fault::PauseClient { duration, .. }
            | Fault::PauseBookie { duration, .. }
            | Fault::PartitionMembers { duration, .. } => *duration,
            Fault::DropConnections | Fault::ResetConnections | Fault::KillClient { .. } => {
                Duration::ZERO
            }
        }
    }

    /// The client a client-side fault hits.
    pub fn client(&self) -> Option<u32> {
        match self {
            Fault::Partition { client, .. }
            | Fault::KillClient { client }
            | Fault::PauseClient { client, .. } => Some(*client),
            _ => None,
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = |d: &Duration| d.as_millis();
        match self {
            Fault::KillServer { down } => write!(f, "kill-server down {}ms", ms(down)),
            Fault::PauseServer { duration } => write!(f, "pause-server {}ms", ms(duration)),
            Fault::DropConnections => write!(f, "drop-connections"),
            Fault::ResetConnections => write!(f, "reset-connections"),
            Fault::StallConnections { duration } => {
                write!(f, "stall-connections {}ms", ms(duration))
            }
            Fault::Partition { client, duration } => {
                write!(f, "partition client {client} {}ms", ms(duration))
            }
            Fault::DiskFull { duration } => write!(f, "disk-full {}ms", ms(duration)),
            Fault::KillClient { client } => write!(f, "kill-client {client}"),
            Fault::PauseClient { client, duration } => {
                write!(f, "pause-client {client} {}ms", ms(duration))
            }
            Fault::KillBookie { bookie, down } => {
                write!(f, "kill-bookie {bookie} down {}ms", ms(down))
            }
            Fault::PauseBookie { bookie, duration } => {
                write!(f, "pause-bookie {bookie} {}ms", ms(duration))
            }
            Fault::KillMember { member, down } => {
                write!(f, "kill-member {member:?} down {}ms", ms(down))
            }
            Fault::PauseMember { member, duration } => {
                write!(f, "pause-member {member:?} {}ms", ms(duration))
            }
            Fault::IsolateMember { member, duration } => {
                write!(f, "isolate-member {member:?} {}ms", ms(duration))
            }
            Fault::PartitionMembers { a, b, duration } => {
                write!(f, "partition-members {a}-{b} {}ms", ms(duration))
            }
        }
    }
}

/// The kinds of fault a schedule draws from (the `--nemesis` names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FaultKind {
    /// `kill`: kill -9 and restart of the server.
    Kill,
    /// `pause`: SIGSTOP shorter than the session timeout.
    Pause,
    /// `pause-long`: SIGSTOP longer than the session timeout.
    PauseLong,
    /// `drop`: connections closed.
    Drop,
    /// `reset`: connections reset.
    Reset,
    /// `stall`: connections frozen (longer than the client's connection timeout).
    Stall,
    /// `partition`: one client cut off for less than the session timeout.
    Partition,
    /// `partition-long`: one client cut off for longer than the session timeout.
    PartitionLong,
    /// `disk-full`: ENOSPC on the data dir.
    DiskFull,
    /// `kill-client`: kill -9 of a client process.
    KillClient,
    /// `kill-leader`: kill -9 and restart of the ensemble's leader.
    KillLeader,
    /// `kill-follower`: kill -9 and restart of a follower.
    KillFollower,
    /// `pause-leader`: SIGSTOP of the leader, shorter or longer than the ensemble's syncLimit.
    PauseLeader,
    /// `pause-follower`: SIGSTOP of a follower, shorter or longer than syncLimit.
    PauseFollower,
    /// `pause-client`: SIGSTOP of a client process (a ledger writer: fenced meanwhile).
    PauseClient,
    /// `kill-bookie`: kill -9 and restart of a bookie.
    KillBookie,
    /// `pause-bookie`: SIGSTOP of a bookie.
    PauseBookie,
    /// `isolate-leader`: the leader's links to every other member cut for longer than
    /// syncLimit (it loses its quorum, the others elect a new leader), then healed.
    IsolateLeader,
}

impl FaultKind {
    /// Every kind, in `--nemesis` order.
    pub const ALL: [FaultKind; 18] = [
        FaultKind::Kill,
        FaultKind::Pause,
        FaultKind::PauseLong,
        FaultKind::Drop,
        FaultKind::Reset,
        FaultKind::Stall,
        FaultKind::Partition,
        FaultKind::PartitionLong,
        FaultKind::DiskFull,
        FaultKind::KillClient,
        FaultKind::KillLeader,
        FaultKind::KillFollower,
        FaultKind::PauseLeader,
        FaultKind::PauseFollower,
        FaultKind::IsolateLeader,
        FaultKind::PauseClient,
        FaultKind::KillBookie,
        FaultKind::PauseBookie,
    ];

    /// The kinds that need an ensemble as the target.
    pub fn needs_ensemble(self) -> bool {
        matches!(
            self,
            FaultKind::KillLeader
                | FaultKind::KillFollower
                | FaultKind::PauseLeader
                | FaultKind::PauseFollower
                | FaultKind::IsolateLeader
        )
    }

    /// The kinds that need the ensemble's member links routed through proxies.
    pub fn needs_links(self) -> bool {
        self == FaultKind::IsolateLeader
    }

    /// The `--nemesis` name.
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::Kill => "kill",
            FaultKind::Pause => "pause",
            FaultKind::PauseLong => "pause-long",
            FaultKind::Drop => "drop",
            FaultKind::Reset => "reset",
            FaultKind::Stall => "stall",
            FaultKind::Partition => "partition",
            FaultKind::PartitionLong => "partition-long",
            FaultKind::DiskFull => "disk-full",
            FaultKind::KillClient => "kill-client",
            FaultKind::KillLeader => "kill-leader",
            FaultKind::KillFollower => "kill-follower",
            FaultKind::PauseLeader => "pause-leader",
            FaultKind::PauseFollower => "pause-follower",
            FaultKind::IsolateLeader => "isolate-leader",
            FaultKind::PauseClient => "pause-client",
            FaultKind::KillBookie => "kill-bookie",
            FaultKind::PauseBookie => "pause-bookie",
        }
    }

    /// The kind named `name`.
    pub fn parse(name: &str) -> Option<FaultKind> {
        FaultKind::ALL.into_iter().find(|k| k.name() == name)
    }
}

/// What the schedule needs to know to size faults.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// The clients' session timeout.
    pub session_timeout: Duration,
    /// The server's tickTime.
    pub tick: Duration,
    /// How long a follower may be silent before the leader drops it, and the leader before
    /// its followers leave it (an ensemble's syncLimit × tickTime; unused for one server).
    pub sync_limit: Duration,
}

/// One planned fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Planned {
    /// When to inject it, from the start of the run.
    pub at: Duration,
    /// At least this long after the previous fault healed (a heal that took longer than
    /// planned, such as a slow restart, pushes the rest of the schedule back).
    pub quiet: Duration,
    /// The kind it was drawn as (`pause` and `pause-long` are both [`Fault::PauseServer`]).
    pub kind: FaultKind,
    /// The cycle of the schedule it belongs to, from 0: a cycle goes through each kind of the
    /// set once, but for those that no longer fit near the end of the run.
    pub cycle: usize,
    /// The fault.
    pub fault: Fault,
}

/// A seeded fault schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    /// The seed it was drawn from.
    pub seed: u64,
    /// The faults, in order, never overlapping.
    pub planned: Vec<Planned>,
}

fn between(rng: &mut StdRng, base: Duration, lo: f64, hi: f64) -> Duration {
    base.mul_f64(rng.gen_range(lo..hi))
}

impl Schedule {
    /// Draws faults of `kinds` over `run` (none in the first 10% and the last 15%, so the
    /// run starts and ends healthy), hitting clients `0..clients` (client faults only hit
    /// `victims`, when given).
    ///
    /// The schedule goes through the set in cycles: each cycle is a seeded random
    /// permutation of `kinds`, so every kind is injected once per cycle and a run long enough
    /// for one cycle injects every kind of its set. A fault that no longer fits before the
    /// end is left out and the rest of its cycle tried; the schedule ends with the first cycle
    /// of which nothing fits.
    pub fn generate(
        seed: u64,
        kinds: &[FaultKind],
        run: Duration,
        timing: Timing,
        clients: u32,
        victims: Option<&[u32]>,
    ) -> Schedule {
        let mut rng = StdRng::seed_from_u64(seed ^ 0x006e_656d_6573_6973);
        let mut planned = Vec::new();
        if kinds.is_empty() {
            return Schedule { seed, planned };
        }
        let last = run.mul_f64(0.85);
        let mut at = run.mul_f64(0.1);
        let mut quiet = Duration::ZERO;
        for cycle in 0.. {
            let mut order = kinds.to_vec();
            order.shuffle(&mut rng);
            let mut fitted = false;
            for kind in order {
                let fault = draw(kind, &mut rng, timing, clients, victims);
                if at + fault.duration() > last {
                    continue;
                }
                let gap = between(&mut rng, timing.session_timeout, 0.2, 0.5);
                let next = at + fault.duration() + gap;
                planned.push(Planned {
                    at,
                    quiet,
                    kind,
                    cycle,
                    fault,
                });
                fitted = true;
                quiet = gap;
                at = next;
            }
            if !fitted {
                break;
            }
        }
        Schedule { seed, planned }
    }

    /// How many faults of each kind of `kinds` it plans, in the order of `kinds`.
    pub fn count_by_kind(&self, kinds: &[FaultKind]) -> Vec<(FaultKind, usize)> {
        kinds
            .iter()
            .map(|&k| (k, self.planned.iter().filter(|p| p.kind == k).count()))
            .collect()
    }
}

/// One fault of `kind` with its parameters drawn from `rng`.
fn draw(
    kind: FaultKind,
    rng: &mut StdRng,
    timing: Timing,
    clients: u32,
    victims: Option<&[u32]>,
) -> Fault {
    let t = timing.session_timeout;
    let victim = |rng: &mut StdRng| match victims {
        Some(v) if !v.is_empty() => v[rng.gen_range(0..v.len())],
        _ => rng.gen_range(0..clients.max(1)),
    };
    match kind {
        FaultKind::Kill => Fault::KillServer {
            down: between(rng, t, 0.1, 0.5),
        },
        FaultKind::Pause => Fault::PauseServer {
            duration: between(rng, t, 0.15, 0.4),
        },
        FaultKind::PauseLong => Fault::PauseServer {
            duration: between(rng, t, 1.4, 1.9) + timing.tick * 2,
        },
        FaultKind::Drop => Fault::DropConnections,
        FaultKind::Reset => Fault::ResetConnections,
        FaultKind::Stall => Fault::StallConnections {
            duration: between(rng, t, 0.6, 0.9),
        },
        FaultKind::Partition => Fault::Partition {
            client: victim(rng),
            duration: between(rng, t, 0.2, 0.4),
        },
        FaultKind::PartitionLong => Fault::Partition {
            client: victim(rng),
            duration: between(rng, t, 1.5, 2.0) + timing.tick * 2,
        },
        FaultKind::DiskFull => Fault::DiskFull {
            duration: between(rng, Duration::from_secs(1), 0.5, 1.5),
        },
        FaultKind::KillClient => Fault::KillClient {
            client: victim(rng),
        },
        FaultKind::KillLeader | FaultKind::KillFollower => Fault::KillMember {
            member: member_of(kind, rng),
            down: between(rng, t, 0.1, 0.5),
        },
        FaultKind::PauseLeader | FaultKind::PauseFollower => Fault::PauseMember {
            member: member_of(kind, rng),
            // Half of them short of syncLimit (writes stall, nobody leaves), half past it
            // (the leader is left, or drops the follower).
            duration: if rng.gen_bool(0.5) {
                between(rng, timing.sync_limit, 0.2, 0.6)
            } else {
                between(rng, timing.sync_limit, 1.1, 1.4)
            },
        },
        FaultKind::PauseClient => Fault::PauseClient {
            client: victim(rng),
            duration: between(rng, t, 0.5, 1.5),
        },
        FaultKind::KillBookie => Fault::KillBookie {
            bookie: rng.gen_range(0..BOOKIES),
            down: between(rng, t, 0.3, 1.0),
        },
        FaultKind::PauseBookie => Fault::PauseBookie {
            bookie: rng.gen_range(0..BOOKIES),
            duration: between(rng, t, 0.3, 1.5),
        },
        FaultKind::IsolateLeader => Fault::IsolateMember {
            member: Member::Leader,
            duration: between(rng, timing.sync_limit, 1.6, 2.0),
        },
    }
}

/// Bookies of a ledger run (E3 Qw2 Qa2 ledgers: one bookie down leaves a full ensemble).
pub const BOOKIES: u32 = 4;

/// The member a member fault kind hits: the leader, or one of (at least two) followers.
fn member_of(kind: FaultKind, rng: &mut StdRng) -> Member {
    match kind {
        FaultKind::KillFollower | FaultKind::PauseFollower => Member::Follower(rng.gen_range(0..2)),
        _ => Member::Leader,
    }
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "fault schedule (seed {}):", self.seed)?;
        if self.planned.is_empty() {
            writeln!(f, "  (no faults)")?;
        }
        for p in &self.planned {
            writeln!(
                f,
                "  at {:>6}ms  cycle {}  {:<14} {}",
                p.at.as_millis(),
                p.cycle,
                p.kind.name(),
                p.fault
            )?;
        }
        Ok(())
    }
}

/// Something that injects and heals faults. Each fault kind is handled by the first nemesis
/// (of a run's list) that [`Nemesis::handles`] it.
pub trait Nemesis: Send {
    /// Its name in notes.
    fn name(&self) -> &'static str;
    /// Whether it can inject `fault`.
    fn handles(&self, fault: &Fault) -> bool;
    /// Injects `fault`; returns a note for the history.
    fn inject<'a>(&'a mut self, fault: &'a Fault) -> BoxFuture<'a, Result<String, Error>>;
    /// Heals `fault` (a no-op for instantaneous faults); returns a note.
    fn heal<'a>(&'a mut self, fault: &'a Fault) -> BoxFuture<'a, Result<String, Error>>;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timing() -> Timing {
        Timing {
            session_timeout: Duration::from_millis(1600),
            tick: Duration::from_millis(200),
            sync_limit: Duration::from_millis(2000),
        }
    }

    #[test]
    fn schedules_are_seeded_sequential_and_inside_the_run() {
        let kinds = [FaultKind::Kill, FaultKind::PauseLong, FaultKind::Partition];
        let run = Duration::from_secs(20);
        let a = Schedule::generate(5, &kinds, run, timing(), 4, None);
        assert_eq!(a, Schedule::generate(5, &kinds, run, timing(), 4, None));
        assert_ne!(a, Schedule::generate(6, &kinds, run, timing(), 4, None));
        assert!(a.planned.len() >= 3, "{a}");
        for w in a.planned.windows(2) {
            assert!(w[0].at + w[0].fault.duration() < w[1].at, "{a}");
        }
        let end = a.planned.last().map(|p| p.at + p.fault.duration()).unwrap();
        assert!(end <= run.mul_f64(0.85), "{a}");
        assert!(a.to_string().contains("seed 5"), "{a}");
    }

    #[test]
    fn long_faults_outlast_the_session_timeout_and_short_ones_do_not() {
        let run = Duration::from_secs(60);
        let t = timing();
        for (kind, longer) in [
            (FaultKind::PauseLong, true),
            (FaultKind::PartitionLong, true),
            (FaultKind::Pause, false),
            (FaultKind::Partition, false),
        ] {
            let s = Schedule::generate(1, &[kind], run, t, 3, Some(&[2]));
            assert!(!s.planned.is_empty());
            for p in &s.planned {
                let d = p.fault.duration();
                if longer {
                    assert!(d > t.session_timeout + t.tick * 2, "{}", p.fault);
                } else {
                    assert!(d < t.session_timeout, "{}", p.fault);
                }
                if let Some(c) = p.fault.client() {
                    assert_eq!(c, 2);
                }
            }
        }
    }

    #[test]
    fn every_cycle_before_the_end_goes_through_the_whole_set() {
        let kinds = [
            FaultKind::Kill,
            FaultKind::Pause,
            FaultKind::PauseLong,
            FaultKind::Drop,
            FaultKind::Reset,
            FaultKind::Stall,
        ];
        let run = Duration::from_secs(120);
        for seed in 0..50 {
            let s = Schedule::generate(seed, &kinds, run, timing(), 4, None);
            let cycles = s.planned.last().map_or(0, |p| p.cycle + 1);
            // A cycle leaves a kind out only when that fault would end past the last moment
            // for faults (85% of the run). The longest here is a pause-long (under 3.5 s), the
            // longest gap after a fault 0.8 s: a cycle whose last fault ends earlier than
            // 4.3 s before that moment had room for every kind, and must have all of them.
            let mut full = 0;
            for c in 0..cycles {
                let of_c: Vec<&Planned> = s.planned.iter().filter(|p| p.cycle == c).collect();
                let end = of_c[of_c.len() - 1];
                if end.at + end.fault.duration() + Duration::from_millis(4300) > run.mul_f64(0.85) {
                    continue;
                }
                full += 1;
                let mut got: Vec<&str> = of_c.iter().map(|p| p.kind.name()).collect();
                got.sort_unstable();
                let mut want: Vec<&str> = kinds.iter().map(|k| k.name()).collect();
                want.sort_unstable();
                assert_eq!(got, want, "seed {seed} cycle {c}\n{s}");
            }
            assert!(full >= 4, "{s}");
            // Cycles are permutations drawn from the seed, not one fixed order.
            let firsts: Vec<FaultKind> = (0..full)
                .filter_map(|c| s.planned.iter().find(|p| p.cycle == c).map(|p| p.kind))
                .collect();
            assert!(firsts.windows(2).any(|w| w[0] != w[1]), "{s}");
        }
    }

    #[test]
    fn the_same_seed_gives_the_same_schedule() {
        let kinds = [
            FaultKind::Partition,
            FaultKind::PartitionLong,
            FaultKind::Kill,
        ];
        let run = Duration::from_secs(30);
        for seed in [0, 1, 17, u64::MAX] {
            let a = Schedule::generate(seed, &kinds, run, timing(), 4, None);
            let b = Schedule::generate(seed, &kinds, run, timing(), 4, None);
            assert_eq!(a, b);
            assert_eq!(a.to_string(), b.to_string());
        }
        let orders: std::collections::HashSet<Vec<FaultKind>> = (0..20)
            .map(|seed| {
                let s = Schedule::generate(seed, &kinds, run, timing(), 4, None);
                s.planned.iter().take(3).map(|p| p.kind).collect()
            })
            .collect();
        assert!(orders.len() > 1, "every seed drew the same order");
    }

    #[test]
    fn kinds_parse_by_name() {
        for k in FaultKind::ALL {
            assert_eq!(FaultKind::parse(k.name()), Some(k));
        }
        assert_eq!(FaultKind::parse("nope"), None);
    }
}
