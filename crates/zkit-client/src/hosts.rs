//! Connect strings and the order hosts are tried in, as Apache's `ConnectStringParser` and
//! `StaticHostProvider` do it.
//!
//! - [`ConnectString::parse`]: `host1:port1,host2:port2[/chroot]`; the port defaults to 2181,
//!   IPv6 addresses go in brackets (`[::1]:2181`), and a host may say `tcp://` or `tcp+tls://`.
//! - [`HostProvider`]: the hosts shuffled once, then tried round-robin; after a full round
//!   without a session in between, the caller must back off (`StaticHostProvider.next(spinDelay)`
//!   sleeps). Names are resolved by the caller on each attempt (`StaticHostProvider.resolve`),
//!   so a host whose address changes is found again.
//!
//! Pure: no DNS, no sockets, randomness passed in.

use rand::seq::SliceRandom;
use rand::Rng;

use crate::error::{Error, Result};
use crate::path::Chroot;

/// ZooKeeper's client port when a connect string names none.
pub const DEFAULT_PORT: u16 = 2181;

/// One server of a connect string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Host {
    /// Host name or IP literal (brackets removed).
    pub host: String,
    pub port: u16,
    /// Whether to speak TLS to it.
    pub tls: bool,
}

impl Host {
    /// `host:port` as `lookup_host` takes it (IPv6 back in brackets).
    pub fn address(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

impl std::fmt::Display for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.address())
    }
}

/// A parsed connect string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ConnectString {
    pub hosts: Vec<Host>,
    pub chroot: Chroot,
}

impl ConnectString {
    /// Parses `hosts[/chroot]`. Hosts without a scheme use TLS when `default_tls`.
    ///
    /// # Errors
    /// [`Error::BadArguments`] for no host, a bad port, an unknown scheme or a bad chroot.
    pub fn parse(s: &str, default_tls: bool) -> Result<ConnectString> {
        let mut hosts = Vec::new();
        let mut rest = s.trim();
        let mut chroot = Chroot::default();
        loop {
            let (tls, after) = if let Some(after) = rest.strip_prefix("tcp+tls://") {
                (true, after)
            } else if let Some(after) = rest.strip_prefix("tcp://") {
                (false, after)
            } else if rest.contains("://") && rest.find("://") < rest.find([',', '/']) {
                return Err(Error::bad_arguments("unknown scheme in connect string"));
            } else {
                (default_tls, rest)
            };
            let end = after.find([',', '/']).unwrap_or(after.len());
            let spec = after[..end].trim();
            if !spec.is_empty() {
                hosts.push(parse_host(spec, tls)?);
            }
            rest = &after[end..];
            if let Some(next) = rest.strip_prefix(',') {
                rest = next.trim_start();
                continue;
            }
            if rest.starts_with('/') {
                chroot = Chroot::new(rest)?;
            }
            break;
        }
        if hosts.is_empty() {
            return Err(Error::bad_arguments("connect string names no host"));
        }
        Ok(ConnectString { hosts, chroot })
    }
}

fn parse_host(spec: &str, tls: bool) -> Result<Host> {
    let (host, port) = if let Some(bracketed) = spec.strip_prefix('[') {
        let (host, after) = bracketed
            .split_once(']')
            .ok_or(Error::bad_arguments("unclosed [ in connect string"))?;
        match after.strip_prefix(':') {
            Some(port) => (host, Some(port)),
            None if after.is_empty() => (host, None),
            None => return Err(Error::bad_arguments("junk after ] in connect string")),
        }
    } else {
        match spec.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (spec, None),
        }
    };
    if host.is_empty() {
        return Err(Error::bad_arguments("empty host in connect string"));
    }
    let port = match port {
        None => DEFAULT_PORT,
        Some(p) => p
            .parse::<u16>()
            .map_err(|_| Error::bad_arguments("bad port in connect string"))?,
    };
    Ok(Host {
        host: host.to_owned(),
        port,
        tls,
    })
}

/// Round-robin over shuffled hosts, `StaticHostProvider`'s way.
#[derive(Debug)]
pub(crate) struct HostProvider {
    hosts: Vec<Host>,
    /// Index of the host handed out last; `None` before the first.
    current: Option<usize>,
    /// Index of the host of the last session established; the round is complete when `next`
    /// comes back to it. `None` until the first `next`.
    last: Option<usize>,
}

impl HostProvider {
    /// The hosts in a random order.
    pub fn new(mut hosts: Vec<Host>, rng: &mut impl Rng) -> HostProvider {
        hosts.shuffle(rng);
        HostProvider {
            hosts,
            current: None,
            last: None,
        }
    }

    /// How many hosts there are (never 0).
    pub fn len(&self) -> usize {
        self.hosts.len()
    }

    /// The next host, and whether the caller must back off first: every host has been tried
    /// since the last session was established (or since the start). The very first call never
    /// backs off.
    pub fn next(&mut self) -> (Host, bool) {
        let n = self.hosts.len();
        let index = self.current.map_or(0, |i| (i + 1) % n);
        self.current = Some(index);
        let back_off = match self.last {
            None => {
                self.last = Some(0);
                false
            }
            Some(last) => index == last,
        };
        (self.hosts[index].clone(), back_off)
    }

    /// A session was established on the host handed out last.
    pub fn on_connected(&mut self) {
        self.last = self.current;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn host(h: &str, port: u16) -> Host {
        Host {
            host: h.into(),
            port,
            tls: false,
        }
    }

    #[test]
    fn parses_like_connect_string_parser() {
        let cs = ConnectString::parse("a:1,b,[::1]:3/app/x", false).unwrap();
        assert_eq!(
            cs.hosts,
            vec![host("a", 1), host("b", 2181), host("::1", 3)]
        );
        assert_eq!(cs.chroot.root(), "/app/x");
        assert_eq!(cs.hosts[2].address(), "[::1]:3");
        let cs = ConnectString::parse("127.0.0.1:2181", false).unwrap();
        assert_eq!(cs.chroot.root(), "");
        let cs = ConnectString::parse("a:1/", false).unwrap();
        assert_eq!(cs.chroot.root(), "");
        let cs = ConnectString::parse("tcp+tls://a:1,tcp://b:2,c:3/r", false).unwrap();
        assert_eq!(
            cs.hosts.iter().map(|h| h.tls).collect::<Vec<_>>(),
            [true, false, false]
        );
        assert_eq!(cs.chroot.root(), "/r");
        let cs = ConnectString::parse("a:1,b:2", true).unwrap();
        assert!(cs.hosts.iter().all(|h| h.tls));
        for bad in [
            "",
            "/app",
            "a:x",
            "a:70000",
            "a:1/bad/",
            "[::1",
            "udp://a:1",
            ":1",
        ] {
            assert!(ConnectString::parse(bad, false).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn round_robin_backs_off_after_a_full_round() {
        let hosts = vec![host("a", 1), host("b", 2), host("c", 3)];
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let mut p = HostProvider::new(hosts.clone(), &mut rng);
        let mut seen = Vec::new();
        let mut backoffs = Vec::new();
        for _ in 0..7 {
            let (h, back_off) = p.next();
            seen.push(h);
            backoffs.push(back_off);
        }
        // Every host once per round, same order each round.
        let mut first_round = seen[..3].to_vec();
        first_round.sort_by_key(|h| h.port);
        assert_eq!(first_round, hosts);
        assert_eq!(seen[..3], seen[3..6]);
        // Back off when the round comes back to where it started.
        assert_eq!(backoffs, [false, false, false, true, false, false, true]);

        // A session on the 2nd host: a round now ends when the 2nd comes up again.
        let mut p = HostProvider::new(hosts, &mut rng);
        p.next();
        let (second, _) = p.next();
        p.on_connected();
        let rounds: Vec<(Host, bool)> = (0..3).map(|_| p.next()).collect();
        assert_eq!(rounds[2], (second, true));
        assert!(!rounds[0].1 && !rounds[1].1);
    }

    #[test]
    fn shuffle_spreads_first_hosts() {
        let hosts: Vec<Host> = (1..=5).map(|i| host("h", i)).collect();
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        let firsts: std::collections::HashSet<u16> = (0..50)
            .map(|_| HostProvider::new(hosts.clone(), &mut rng).next().0.port)
            .collect();
        assert!(firsts.len() >= 4, "{firsts:?}");
    }
}
