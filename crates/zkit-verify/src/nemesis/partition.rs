//! Partitions between ensemble members, by routing every member-to-member link through its own
//! proxy: member `i`'s `zoo.cfg` names itself with its real quorum and election ports (it binds
//! them) and every other member `j` with the ports of the proxies `i → j`, which forward to
//! `j`'s real ports. Followers dial the leader's quorum port from their config, so pausing
//! both proxies of a pair, `i → j` and `j → i`, cuts that pair's quorum link in both
//! directions and nothing else; clients are not affected.
//!
//! The election channel is only partly covered: QuorumCnxManager keeps the connection dialed
//! by the larger server id, and when the smaller one dials first, the larger closes it and
//! dials back to the election address the smaller one sent in its initial message (its own,
//! real address: `handleConnection` in 3.8), past the proxies. Such a connection, opened
//! before a cut, survives it.
//!
//! [`super::ensemble::EnsembleTarget`] starts the members with these configs;
//! [`super::ensemble::EnsembleNemesis`] isolates the leader through them, and
//! [`PartitionNemesis`] cuts and heals one pair for [`Fault::PartitionMembers`].

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;

use futures::future::BoxFuture;
use futures::FutureExt as _;
use zkit_testkit::FaultProxy;

use super::{Fault, Nemesis};
use crate::Error;

/// syncLimit (in ticks) of the members' configs, as `scripts/apache-zk` sets it.
pub const SYNC_LIMIT_TICKS: u32 = 10;

/// One member's real ports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemberPorts {
    /// Its server id (`server.ID`, `myid`).
    pub id: u32,
    /// clientPort.
    pub client: u16,
    /// The quorum (follower-leader) port.
    pub quorum: u16,
    /// The leader-election port.
    pub election: u16,
}

/// A loopback port free now (bound and released; another process could take it first).
///
/// # Errors
/// When binding fails.
pub fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// The quorum and election proxies of one directed link.
type LinkProxies = (Arc<FaultProxy>, Arc<FaultProxy>);

/// The proxies of every directed member-to-member link.
#[derive(Debug)]
pub struct EnsembleLinks {
    members: Vec<MemberPorts>,
    /// (from, to) → (quorum proxy, election proxy).
    links: BTreeMap<(u32, u32), LinkProxies>,
}

impl EnsembleLinks {
    /// Starts two proxies (quorum, election) for every ordered pair of members.
    ///
    /// # Errors
    /// When a proxy cannot bind.
    pub async fn start(members: Vec<MemberPorts>) -> std::io::Result<EnsembleLinks> {
        let mut links = BTreeMap::new();
        for from in &members {
            for to in members.iter().filter(|m| m.id != from.id) {
                let q = FaultProxy::start(format!("127.0.0.1:{}", to.quorum)).await?;
                let e = FaultProxy::start(format!("127.0.0.1:{}", to.election)).await?;
                links.insert((from.id, to.id), (Arc::new(q), Arc::new(e)));
            }
        }
        Ok(EnsembleLinks { members, links })
    }

    /// The members.
    pub fn members(&self) -> &[MemberPorts] {
        &self.members
    }

    /// The `server.N=` lines of member `member`'s config: itself on its real ports, the others
    /// on the proxies of its links to them.
    pub fn server_lines(&self, member: u32) -> Vec<String> {
        self.members
            .iter()
            .map(|m| {
                let (q, e) = if m.id == member {
                    (m.quorum, m.election)
                } else {
                    match self.links.get(&(member, m.id)) {
                        Some((q, e)) => (q.addr().port(), e.addr().port()),
                        None => (m.quorum, m.election),
                    }
                };
                format!("server.{}=127.0.0.1:{q}:{e}", m.id)
            })
            .collect()
    }

    /// A whole `zoo.cfg` for member `member`, with the settings `scripts/apache-zk` gives the
    /// members of its own ensembles (see that script for why each is there), and `server.N=`
    /// lines from [`EnsembleLinks::server_lines`].
    pub fn zoo_cfg(&self, member: u32, data_dir: &std::path::Path, tick_ms: u64) -> String {
        let client = self
            .members
            .iter()
            .find(|m| m.id == member)
            .map_or(0, |m| m.client);
        let mut cfg = format!(
            "# Written by zkit-verify: the links to other members go through fault proxies.\n\
             tickTime={tick_ms}\ninitLimit=20\nsyncLimit={SYNC_LIMIT_TICKS}\n\
             maxSessionTimeout=40000\ndataDir={}\nclientPort={client}\n\
             clientPortAddress=127.0.0.1\nmaxClientCnxns=0\nforceSync=yes\n\
             extendedTypesEnabled=true\n4lw.commands.whitelist=*\nadmin.enableServer=false\n",
            data_dir.display()
        );
        for line in self.server_lines(member) {
            let _ = writeln!(cfg, "{line}");
        }
        cfg
    }

    /// Cuts every link between `member` and the other members, both ways.
    ///
    /// # Errors
    /// Unknown members.
    pub fn isolate(&self, member: u32) -> Result<(), Error> {
        for other in self.others(member) {
            self.cut(member, other)?;
        }
        Ok(())
    }

    /// Heals what [`EnsembleLinks::isolate`] cut.
    ///
    /// # Errors
    /// Unknown members.
    pub fn rejoin(&self, member: u32) -> Result<(), Error> {
        for other in self.others(member) {
            self.heal(member, other)?;
        }
        Ok(())
    }

    /// Heals every link.
    pub fn heal_all(&self) {
        for (q, e) in self.links.values() {
            q.resume();
            e.resume();
        }
    }

    fn others(&self, member: u32) -> Vec<u32> {
        self.members
            .iter()
            .map(|m| m.id)
            .filter(|id| *id != member)
            .collect()
    }

    fn pair(&self, a: u32, b: u32) -> Result<[&LinkProxies; 2], Error> {
        match (self.links.get(&(a, b)), self.links.get(&(b, a))) {
            (Some(x), Some(y)) => Ok([x, y]),
            _ => Err(Error::Setup(format!("no link between members {a} and {b}"))),
        }
    }

    /// Cuts the link between `a` and `b`, both ways, both ports.
    ///
    /// # Errors
    /// Unknown members.
    pub fn cut(&self, a: u32, b: u32) -> Result<(), Error> {
        for (q, e) in self.pair(a, b)? {
            q.pause();
            e.pause();
        }
        Ok(())
    }

    /// Heals what [`EnsembleLinks::cut`] cut.
    ///
    /// # Errors
    /// Unknown members.
    pub fn heal(&self, a: u32, b: u32) -> Result<(), Error> {
        for (q, e) in self.pair(a, b)? {
            q.resume();
            e.resume();
        }
        Ok(())
    }

    /// Whether the link from `a` to `b` is cut.
    pub fn is_cut(&self, a: u32, b: u32) -> bool {
        self.links
            .get(&(a, b))
            .is_some_and(|(q, e)| q.is_paused() && e.is_paused())
    }
}

/// Cuts and heals member links for [`Fault::PartitionMembers`].
#[derive(Debug)]
pub struct PartitionNemesis {
    /// The links.
    pub links: Arc<EnsembleLinks>,
}

impl Nemesis for PartitionNemesis {
    fn name(&self) -> &'static str {
        "member-partition"
    }

    fn handles(&self, fault: &Fault) -> bool {
        matches!(fault, Fault::PartitionMembers { .. })
    }

    fn inject<'a>(&'a mut self, fault: &'a Fault) -> BoxFuture<'a, Result<String, Error>> {
        async move {
            if let Fault::PartitionMembers { a, b, .. } = fault {
                self.links.cut(*a, *b)?;
                return Ok(format!("cut {a}-{b}"));
            }
            Ok(String::new())
        }
        .boxed()
    }

    fn heal<'a>(&'a mut self, fault: &'a Fault) -> BoxFuture<'a, Result<String, Error>> {
        async move {
            if let Fault::PartitionMembers { a, b, .. } = fault {
                self.links.heal(*a, *b)?;
                return Ok(format!("healed {a}-{b}"));
            }
            Ok(String::new())
        }
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn configs_route_peers_through_proxies_and_cuts_are_per_pair() {
        // Three "members" whose quorum ports are echo-less listeners we can accept on.
        let mut members = Vec::new();
        let mut listeners = Vec::new();
        for id in 1..=3 {
            let q = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let e = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            members.push(MemberPorts {
                id,
                client: 0,
                quorum: q.local_addr().unwrap().port(),
                election: e.local_addr().unwrap().port(),
            });
            listeners.push((q, e));
        }
        let links = EnsembleLinks::start(members.clone()).await.unwrap();
        let lines = links.server_lines(1);
        assert_eq!(
            lines[0],
            format!(
                "server.1=127.0.0.1:{}:{}",
                members[0].quorum, members[0].election
            )
        );
        // Member 1 reaches member 2 through a proxy, not directly.
        let port_1_to_2: u16 = lines[1]
            .split(':')
            .nth(1)
            .and_then(|p| p.parse().ok())
            .unwrap();
        assert_ne!(port_1_to_2, members[1].quorum);
        let cfg = links.zoo_cfg(1, std::path::Path::new("/d"), 200);
        assert!(
            cfg.contains("tickTime=200") && cfg.contains("server.3="),
            "{cfg}"
        );
        assert!(cfg.contains(&lines[1]), "{cfg}");

        // Through the proxy, bytes reach member 2's quorum listener.
        let mut c = tokio::net::TcpStream::connect(("127.0.0.1", port_1_to_2))
            .await
            .unwrap();
        let (mut s, _) = listeners[1].0.accept().await.unwrap();
        c.write_all(b"ping").await.unwrap();
        let mut buf = [0u8; 4];
        s.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"ping");

        // Cutting 1-2 stops that link but not 1-3.
        links.cut(1, 2).unwrap();
        assert!(links.is_cut(1, 2) && links.is_cut(2, 1));
        assert!(!links.is_cut(1, 3));
        c.write_all(b"lost").await.unwrap();
        let got = tokio::time::timeout(
            std::time::Duration::from_millis(300),
            s.read_exact(&mut buf),
        )
        .await;
        assert!(got.is_err(), "bytes crossed a cut link");
        links.heal(1, 2).unwrap();
        tokio::time::timeout(std::time::Duration::from_secs(10), s.read_exact(&mut buf))
            .await
            .expect("healed link delivers")
            .unwrap();
        assert_eq!(&buf, b"lost");
    }
}
