//! Server status through ZooKeeper's four-letter words, sent to each ensemble member: `mntr`
//! (status and counters), `cons` (connections and their sessions), `dump` (sessions and the
//! ephemerals each owns) and `wchc` (watches by session). Apache ZooKeeper answers only the
//! whitelisted ones (`4lw.commands.whitelist`, default `srvr` alone); a refused word leaves its
//! part of the page empty with the server's reason.
//!
//! The parsers are pure functions of the reply text (the formats of Apache's `MonitorCommand`,
//! `ConsCommand` / `ServerCnxn.dumpConnectionInfo`, `DumpCommand` and `WatchCommand`), unit
//! tested here; [`ask`] is the only I/O.

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

/// The most a reply may be (a `dump` of a big server is long; the rest is cut).
const MAX_REPLY: u64 = 4 << 20;

/// Sends `word` to `addr` (`host:port`) and reads the reply until the server closes.
///
/// # Errors
/// A message when the server cannot be reached or does not answer within `timeout`, or
/// refuses the word (Apache: "`<word>` is not executed because it is not in the whitelist.").
pub async fn ask(addr: &str, word: &str, timeout: Duration) -> Result<String, String> {
    let exchange = async {
        let mut stream = TcpStream::connect(addr)
            .await
            .map_err(|e| format!("cannot connect to {addr}: {e}"))?;
        stream
            .write_all(word.as_bytes())
            .await
            .map_err(|e| format!("{addr}: {e}"))?;
        let mut reply = Vec::new();
        // A reset after a complete reply is how some servers close: keep what arrived.
        let read = (&mut stream).take(MAX_REPLY).read_to_end(&mut reply).await;
        if let (Err(e), true) = (read, reply.is_empty()) {
            return Err(format!("{addr}: {e}"));
        }
        Ok::<_, String>(String::from_utf8_lossy(&reply).into_owned())
    };
    let reply = tokio::time::timeout(timeout, exchange)
        .await
        .map_err(|_| format!("{addr}: no answer to {word} within {timeout:?}"))??;
    if reply.contains("is not executed because it is not in the whitelist") {
        return Err(reply.trim().to_string());
    }
    Ok(reply)
}

/// `mntr`: `zk_key<TAB>value` lines into a map (keys without `zk_`).
pub fn parse_mntr(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|line| {
            let (k, v) = line.split_once('\t')?;
            let k = k.trim();
            Some((
                k.strip_prefix("zk_").unwrap_or(k).to_string(),
                v.trim().to_string(),
            ))
        })
        .collect()
}

/// One connection of `cons`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Connection {
    /// The client's address.
    pub peer: String,
    /// Its session, if it completed the handshake.
    pub session: Option<i64>,
    /// The negotiated session timeout (ms).
    pub timeout_ms: Option<u64>,
    /// Requests queued.
    pub queued: u64,
    /// Packets received from it.
    pub received: u64,
    /// Packets sent to it.
    pub sent: u64,
}

fn hex(text: &str) -> Option<i64> {
    let digits = text.strip_prefix("0x").unwrap_or(text);
    // Session ids are printed as unsigned 64-bit hex.
    u64::from_str_radix(digits, 16).ok().map(|v| v as i64)
}

/// `cons`: lines ` /127.0.0.1:5555[1](queued=0,recved=3,sent=3,sid=0x1,lop=PING,est=…,to=30000,…)`.
pub fn parse_cons(text: &str) -> Vec<Connection> {
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        let Some(rest) = line.strip_prefix('/') else {
            continue;
        };
        let Some((peer, rest)) = rest.split_once('[') else {
            continue;
        };
        let Some(fields) = rest.split_once('(').and_then(|(_, f)| f.strip_suffix(')')) else {
            continue;
        };
        let mut c = Connection {
            peer: peer.to_string(),
            session: None,
            timeout_ms: None,
            queued: 0,
            received: 0,
            sent: 0,
        };
        for kv in fields.split(',') {
            let Some((k, v)) = kv.split_once('=') else {
                continue;
            };
            match k {
                "sid" => c.session = hex(v),
                "to" => c.timeout_ms = v.parse().ok(),
                "queued" => c.queued = v.parse().unwrap_or(0),
                "recved" => c.received = v.parse().unwrap_or(0),
                "sent" => c.sent = v.parse().unwrap_or(0),
                _ => {}
            }
        }
        out.push(c);
    }
    out
}

/// What `dump` says about sessions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Dump {
    /// Every live session (from the session tracker's expiry sets).
    pub sessions: Vec<i64>,
    /// Ephemeral paths by owner session.
    pub ephemerals: BTreeMap<i64, Vec<String>>,
}

/// `dump`: the `Session Sets` part (`\t0x…` lines under `N expire at …:`) and the
/// `Sessions with Ephemerals` part (`0x…:` then `\t/path` lines).
pub fn parse_dump(text: &str) -> Dump {
    #[derive(PartialEq)]
    enum Part {
        None,
        Sessions,
        Ephemerals,
    }
    let mut part = Part::None;
    let mut dump = Dump::default();
    let mut owner: Option<i64> = None;
    for line in text.lines() {
        if line.starts_with("Session Sets") {
            part = Part::Sessions;
            continue;
        }
        if line.starts_with("Sessions with Ephemerals") {
            part = Part::Ephemerals;
            continue;
        }
        if line.starts_with("Connections dump") || line.starts_with("ephemeral nodes dump") {
            part = Part::None;
            continue;
        }
        match part {
            Part::Sessions => {
                if let Some(sid) = line.strip_prefix('\t').and_then(|s| hex(s.trim())) {
                    dump.sessions.push(sid);
                }
            }
            Part::Ephemerals => {
                if let Some(path) = line.strip_prefix('\t') {
                    if let Some(sid) = owner {
                        dump.ephemerals
                            .entry(sid)
                            .or_default()
                            .push(path.trim().to_string());
                    }
                } else if let Some(sid) = line.trim().strip_suffix(':').and_then(hex) {
                    owner = Some(sid);
                    dump.ephemerals.entry(sid).or_default();
                }
            }
            Part::None => {}
        }
    }
    dump.sessions.sort_unstable();
    dump.sessions.dedup();
    for paths in dump.ephemerals.values_mut() {
        paths.sort();
    }
    dump
}

/// `wchc`: `0x…` lines, each followed by the `\t/path` lines that session watches.
pub fn parse_wchc(text: &str) -> BTreeMap<i64, Vec<String>> {
    let mut out: BTreeMap<i64, Vec<String>> = BTreeMap::new();
    let mut current = None;
    for line in text.lines() {
        if let Some(path) = line.strip_prefix('\t') {
            if let Some(sid) = current {
                out.entry(sid).or_default().push(path.trim().to_string());
            }
        } else if let Some(sid) = hex(line.trim()) {
            current = Some(sid);
            out.entry(sid).or_default();
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mntr_lines_become_a_map() {
        let m = parse_mntr(
            "zk_version\t3.8.4-1, built on 2024\nzk_server_state\tstandalone\nzk_znode_count\t7\n",
        );
        assert_eq!(m["server_state"], "standalone");
        assert_eq!(m["znode_count"], "7");
        assert!(m["version"].starts_with("3.8.4"));
    }

    #[test]
    fn cons_lines_parse_with_and_without_session() {
        let text = " /127.0.0.1:40000[1](queued=0,recved=5,sent=6,sid=0x100000a3b2c0001,lop=PING,est=1,to=30000,lcxid=0x3,lzxid=0x9,lresp=1,llat=0,minlat=0,avglat=0,maxlat=1)\n /127.0.0.1:40001[0](queued=0,recved=1,sent=0)\n\n";
        let c = parse_cons(text);
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].peer, "127.0.0.1:40000");
        assert_eq!(c[0].session, Some(0x100000a3b2c0001));
        assert_eq!(c[0].timeout_ms, Some(30000));
        assert_eq!((c[0].received, c[0].sent), (5, 6));
        assert_eq!(c[1].session, None);
    }

    #[test]
    fn dump_gives_sessions_and_their_ephemerals() {
        let text = "SessionTracker dump:\nSession Sets (2)/(3):\n1 expire at Sun Nov 29 23:52:24 UTC 2026:\n\t0x1\n2 expire at Sun Nov 29 23:52:26 UTC 2026:\n\t0x2\n\t0xffffffffffffffff\nephemeral nodes dump:\nSessions with Ephemerals (1):\n0x2:\n\t/locks/a/_c_x-lock-0000000001\n\t/app/member\nConnections dump:\nConnections Sets (1)/(1):\n1 expire at Sun Nov 29 23:52:24 UTC 2026:\n\tip: /127.0.0.1:5 sessionId: 0x1\n";
        let d = parse_dump(text);
        assert_eq!(d.sessions, vec![-1, 1, 2]);
        assert_eq!(
            d.ephemerals[&2],
            vec!["/app/member", "/locks/a/_c_x-lock-0000000001"]
        );
        assert_eq!(d.ephemerals.len(), 1);
    }

    #[test]
    fn wchc_groups_paths_by_session() {
        let w = parse_wchc("0x10\n\t/a\n\t/b\n0x11\n\t/c\n");
        assert_eq!(w[&0x10], vec!["/a", "/b"]);
        assert_eq!(w[&0x11], vec!["/c"]);
    }
}
