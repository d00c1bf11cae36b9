//! An Apache ZooKeeper ensemble as the system under test ([`EnsembleTarget`], over
//! `zkit_testkit::Ensemble` and `scripts/apache-zk`), and the nemesis of its members
//! ([`EnsembleNemesis`]): kill -9 and restart, SIGSTOP/SIGCONT, and the leader cut off from the
//! other members.
//!
//! Running the same workloads and checkers against the reference implementation proves the
//! checkers: what they accept there is what ZooKeeper itself does. Members are named by role
//! in the schedule ([`Member::Leader`], [`Member::Follower`]) and resolved to a member number
//! when the fault is injected (`srvr` of each member, through the script).
//!
//! With links ([`EnsembleTarget::start`] with `links`), member-to-member connections go
//! through the proxies of [`EnsembleLinks`]: isolating the leader pauses its links to both
//! followers; the clients' own connections stay up, so the clients of the old leader find it
//! answering nothing and move to the others (or see it close their connections once it steps
//! down, as `Leader.lead` does when it loses its quorum after syncLimit). The cut is certain
//! for the quorum links (learner to leader); the leader-election channel can bypass it (see
//! [`super::partition`]), so the followers may elect the isolated member again and wait on
//! it until the heal: an asymmetric partition, which ZooKeeper is allowed to sit out.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use futures::FutureExt as _;
use zkit_testkit::Ensemble;

use super::partition::{EnsembleLinks, MemberPorts};
use super::{Fault, Member, Nemesis};
use crate::Error;

/// The tickTime of ensemble members (`scripts/apache-zk` sets 500 ms).
pub const ENSEMBLE_TICK: Duration = Duration::from_millis(500);

/// A running ensemble, stopped when dropped.
#[derive(Debug)]
pub struct EnsembleTarget {
    ensemble: Ensemble,
    links: Option<Arc<EnsembleLinks>>,
}

fn io(e: std::io::Error) -> Error {
    Error::Process(e.to_string())
}

impl EnsembleTarget {
    /// Starts `members` members (at least 3); with `links`, their member-to-member links go
    /// through proxies that [`EnsembleNemesis`] can cut.
    ///
    /// # Errors
    /// When the ensemble does not come up (twice, for `links`: the ports are picked free and
    /// released before the members bind them, so another process may take one first).
    pub async fn start(members: usize, links: bool) -> Result<EnsembleTarget, Error> {
        if !links {
            let ensemble = Ensemble::start(members).await.map_err(io)?;
            return Ok(EnsembleTarget {
                ensemble,
                links: None,
            });
        }
        let mut last = None;
        for _ in 0..2 {
            match Self::start_linked(members).await {
                Ok(t) => return Ok(t),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| Error::Setup("ensemble did not start".into())))
    }

    async fn start_linked(members: usize) -> Result<EnsembleTarget, Error> {
        let n = u32::try_from(members).map_err(|_| Error::Setup("too many members".into()))?;
        // Every port held at once while the proxies pick theirs, so none collide.
        let mut held = Vec::new();
        let mut port = || -> Result<u16, Error> {
            let l = std::net::TcpListener::bind("127.0.0.1:0")?;
            let p = l.local_addr()?.port();
            held.push(l);
            Ok(p)
        };
        let mut ports = Vec::new();
        for id in 1..=n {
            ports.push(MemberPorts {
                id,
                client: port()?,
                quorum: port()?,
                election: port()?,
            });
        }
        let links = Arc::new(EnsembleLinks::start(ports).await?);
        drop(held);
        let tick = u64::try_from(ENSEMBLE_TICK.as_millis()).unwrap_or(500);
        let ensemble = Ensemble::start_with_configs(members, |m, dir| {
            links.zoo_cfg(u32::try_from(m).unwrap_or(0), &dir.join("data"), tick)
        })
        .await
        .map_err(io)?;
        Ok(EnsembleTarget {
            ensemble,
            links: Some(links),
        })
    }

    /// The connect string of every member.
    pub fn connect_string(&self) -> &str {
        self.ensemble.connect_string()
    }

    /// The ensemble.
    pub fn ensemble(&self) -> &Ensemble {
        &self.ensemble
    }

    /// The member links, when routed through proxies.
    pub fn links(&self) -> Option<&Arc<EnsembleLinks>> {
        self.links.as_ref()
    }

    /// `(member, state)` per member, from `scripts/apache-zk ensemble status`.
    async fn states(&self) -> Result<Vec<(usize, String)>, Error> {
        let out = self.ensemble.status().await.map_err(io)?;
        Ok(out
            .lines()
            .filter_map(|l| {
                let mut parts = l.splitn(4, ' ');
                let m = parts.next()?.parse().ok()?;
                let state = parts.nth(2)?.to_owned();
                Some((m, state))
            })
            .collect())
    }

    /// The member number `member` names now; waits (at most `bound`) for a leader and a
    /// follower to be serving (an election may be under way after the last fault).
    async fn resolve(&self, member: Member, bound: Duration) -> Result<usize, Error> {
        let deadline = Instant::now() + bound;
        loop {
            let states = self.states().await?;
            let with = |s: &str| {
                states
                    .iter()
                    .filter(|(_, st)| st == s)
                    .map(|(m, _)| *m)
                    .collect::<Vec<_>>()
            };
            let found = match member {
                Member::Leader => with("leader").first().copied(),
                Member::Follower(i) => {
                    let f = with("follower");
                    (!f.is_empty()).then(|| f[i as usize % f.len()])
                }
            };
            if let Some(m) = found {
                return Ok(m);
            }
            if Instant::now() >= deadline {
                return Err(Error::Process(format!(
                    "no {member:?} among the members: {states:?}"
                )));
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Waits (at most `bound`) until member `m` does not lead; whether it stopped.
    async fn until_not_leader(&self, m: usize, bound: Duration) -> bool {
        let deadline = Instant::now() + bound;
        loop {
            if let Ok(states) = self.states().await {
                if states.iter().any(|(l, s)| *l == m && s != "leader") {
                    return true;
                }
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Waits (at most `bound`) until a member other than `m` leads; which one.
    async fn other_leader(&self, m: usize, bound: Duration) -> Option<usize> {
        let deadline = Instant::now() + bound;
        loop {
            if let Ok(states) = self.states().await {
                if let Some((l, _)) = states.iter().find(|(l, s)| *l != m && s == "leader") {
                    return Some(*l);
                }
            }
            if Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Copies every member's log to `dir/member-N.log` (the ensemble's own directory goes
    /// when it stops).
    pub fn save_logs(&self, dir: &std::path::Path) {
        for m in 1..=self.ensemble.members() {
            let from = self.ensemble.dir().join(m.to_string()).join("zk.log");
            let _ = std::fs::copy(from, dir.join(format!("member-{m}.log")));
        }
    }

    /// Heals every link, continues every stopped member and restarts every killed one (after
    /// a run, or a fault whose heal failed).
    ///
    /// # Errors
    /// When a member does not come back.
    pub async fn ensure_healthy(&self) -> Result<(), Error> {
        if let Some(l) = &self.links {
            l.heal_all();
        }
        for (m, state) in self.states().await? {
            match state.as_str() {
                "paused" => self.ensemble.resume(m).await.map_err(io)?,
                "down" => self.ensemble.restart(m).await.map_err(io)?,
                _ => {}
            }
        }
        Ok(())
    }
}

/// Kills, pauses and isolates members of an [`EnsembleTarget`].
#[derive(Debug)]
pub struct EnsembleNemesis {
    /// The ensemble.
    pub target: Arc<EnsembleTarget>,
    /// The member the fault in progress hit.
    hit: Option<usize>,
}

impl EnsembleNemesis {
    /// The nemesis of `target`'s members.
    pub fn new(target: Arc<EnsembleTarget>) -> EnsembleNemesis {
        EnsembleNemesis { target, hit: None }
    }

    fn links(&self) -> Result<&Arc<EnsembleLinks>, Error> {
        self.target.links().ok_or_else(|| {
            Error::Setup("the ensemble's member links do not go through proxies".into())
        })
    }
}

/// How long the heal of an isolation waits for the other members to have a leader.
const ISOLATION_ELECTION_BOUND: Duration = Duration::from_secs(15);

/// How long a fault waits for the member it names (an election after the last fault).
const RESOLVE_BOUND: Duration = Duration::from_secs(15);

fn member_id(m: usize) -> u32 {
    u32::try_from(m).unwrap_or(u32::MAX)
}

impl Nemesis for EnsembleNemesis {
    fn name(&self) -> &'static str {
        "ensemble"
    }

    fn handles(&self, fault: &Fault) -> bool {
        match fault {
            Fault::KillMember { .. } | Fault::PauseMember { .. } => true,
            Fault::IsolateMember { .. } | Fault::PartitionMembers { .. } => {
                self.target.links().is_some()
            }
            _ => false,
        }
    }

    fn inject<'a>(&'a mut self, fault: &'a Fault) -> BoxFuture<'a, Result<String, Error>> {
        async move {
            self.hit = None;
            let e = self.target.ensemble();
            match fault {
                Fault::KillMember { member, .. } => {
                    let m = self.target.resolve(*member, RESOLVE_BOUND).await?;
                    e.kill(m).await.map_err(io)?;
                    self.hit = Some(m);
                    Ok(format!("killed member {m}"))
                }
                Fault::PauseMember { member, .. } => {
                    let m = self.target.resolve(*member, RESOLVE_BOUND).await?;
                    e.pause(m).await.map_err(io)?;
                    self.hit = Some(m);
                    Ok(format!("stopped member {m}"))
                }
                Fault::IsolateMember { member, .. } => {
                    let m = self.target.resolve(*member, RESOLVE_BOUND).await?;
                    self.links()?.isolate(member_id(m))?;
                    self.hit = Some(m);
                    Ok(format!("member {m} cut off from the others"))
                }
                Fault::PartitionMembers { a, b, .. } => {
                    self.links()?.cut(*a, *b)?;
                    Ok(format!("cut {a}-{b}"))
                }
                _ => Ok(String::new()),
            }
        }
        .boxed()
    }

    fn heal<'a>(&'a mut self, fault: &'a Fault) -> BoxFuture<'a, Result<String, Error>> {
        async move {
            let e = self.target.ensemble();
            let hit = self.hit.take();
            match (fault, hit) {
                (Fault::KillMember { .. }, Some(m)) => {
                    e.restart(m).await.map_err(io)?;
                    Ok(format!("member {m} restarted"))
                }
                (Fault::PauseMember { .. }, Some(m)) => {
                    e.resume(m).await.map_err(io)?;
                    Ok(format!("member {m} continued"))
                }
                (Fault::IsolateMember { .. }, Some(m)) => {
                    // The cut lasts past syncLimit: the followers stop acking, and the leader
                    // gives up leading (Leader.lead, "not sufficient followers synced"). The
                    // heal waits (bounded) for that, so that every isolation really bit.
                    let dropped = self
                        .target
                        .until_not_leader(m, ISOLATION_ELECTION_BOUND)
                        .await;
                    let other = self.target.other_leader(m, Duration::ZERO).await;
                    self.links()?.rejoin(member_id(m))?;
                    Ok(format!(
                        "member {m} rejoined; it {} its leadership meanwhile{}",
                        if dropped { "lost" } else { "kept" },
                        other.map_or(String::new(), |l| format!(", member {l} led"))
                    ))
                }
                (Fault::PartitionMembers { a, b, .. }, _) => {
                    self.links()?.heal(*a, *b)?;
                    Ok(format!("healed {a}-{b}"))
                }
                _ => Ok(String::new()),
            }
        }
        .boxed()
    }
}
