//! What each four-letter word (and the matching admin command) reports, gathered from the
//! core (between pipeline batches, through [`super::inspect`]), the metrics and the process:
//! connections and their sessions, watches, the tree digest, `mntr`'s values, the
//! environment. `format` turns them into Apache's text; `admin_http` into JSON.

use std::sync::atomic::Ordering::Relaxed;

use zkit_core::{ConnId, Core, Stats};

use crate::metrics::ConnMetrics;
use crate::shared::Shared;

/// The version reported as `Zookeeper version:` / `zk_version`: the ZooKeeper protocol level
/// zkit speaks, tagged with zkit's own version.
pub(crate) fn version() -> String {
    format!("3.8.0-zkit-{}, built on unknown", env!("CARGO_PKG_VERSION"))
}

/// The digest of the tree at the last applied zxid (`hash`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct TreeDigest {
    pub zxid: i64,
    pub digest: i64,
}

impl TreeDigest {
    pub(crate) fn of(core: &Core) -> TreeDigest {
        TreeDigest {
            zxid: core.last_zxid(),
            digest: zkit_core::digest::tree_digest(core.tree()),
        }
    }
}

/// Which session each connection carries.
#[derive(Debug, Default)]
pub(crate) struct ConnView {
    pub sessions: std::collections::BTreeMap<ConnId, (i64, i32)>,
}

impl ConnView {
    pub(crate) fn of(core: &Core) -> ConnView {
        let timeouts: std::collections::BTreeMap<i64, i32> = core.sessions().collect();
        let sessions = core
            .connections()
            .into_iter()
            .filter_map(|c| {
                let sid = core.session_of(c)?;
                Some((c, (sid, timeouts.get(&sid).copied().unwrap_or(0))))
            })
            .collect();
        ConnView { sessions }
    }
}

/// `WatchesSummary`: what `wchs` prints.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WatchSummary {
    pub connections: usize,
    pub paths: usize,
    pub watches: usize,
}

/// Watches, sessions and ephemerals, as `wchc`, `wchp`, `wchs` and `dump` show them.
#[derive(Debug, Default)]
pub(crate) struct WatchView {
    /// (path, session) pairs, one per watched path and session.
    pub watches: std::collections::BTreeSet<(String, i64)>,
    /// Session → its expiry deadline (ms).
    pub sessions: Vec<(i64, Option<i64>)>,
    /// Session → its ephemeral paths.
    pub ephemerals: Vec<(i64, Vec<String>)>,
    /// Connection → its session.
    pub conn_sessions: std::collections::BTreeMap<ConnId, i64>,
}

impl WatchView {
    pub(crate) fn of(core: &Core) -> WatchView {
        let watches = core
            .watches()
            .into_iter()
            .filter_map(|(path, conn)| Some((path, core.session_of(conn)?)))
            .collect();
        let sessions = core.session_deadlines();
        let ephemerals = sessions
            .iter()
            .map(|(sid, _)| (*sid, core.tree().ephemerals_of(*sid)))
            .filter(|(_, paths)| !paths.is_empty())
            .collect();
        let conn_sessions = core
            .connections()
            .into_iter()
            .filter_map(|c| Some((c, core.session_of(c)?)))
            .collect();
        WatchView {
            watches,
            sessions,
            ephemerals,
            conn_sessions,
        }
    }

    /// Session → watched paths.
    pub(crate) fn session_paths(&self) -> std::collections::BTreeMap<i64, Vec<String>> {
        let mut out: std::collections::BTreeMap<i64, Vec<String>> = Default::default();
        for (path, sid) in &self.watches {
            out.entry(*sid).or_default().push(path.clone());
        }
        out
    }

    /// Path → watching sessions.
    pub(crate) fn path_sessions(&self) -> std::collections::BTreeMap<String, Vec<i64>> {
        let mut out: std::collections::BTreeMap<String, Vec<i64>> = Default::default();
        for (path, sid) in &self.watches {
            out.entry(path.clone()).or_default().push(*sid);
        }
        out
    }

    /// `wchs` / admin `watch_summary`: watching connections, watched paths, watches.
    pub(crate) fn summary(&self) -> WatchSummary {
        let connections: std::collections::BTreeSet<i64> =
            self.watches.iter().map(|(_, sid)| *sid).collect();
        let paths: std::collections::BTreeSet<&String> =
            self.watches.iter().map(|(path, _)| path).collect();
        WatchSummary {
            connections: connections.len(),
            paths: paths.len(),
            watches: self.watches.len(),
        }
    }
}

/// Apache's short op names in `cons` (`FinalRequestProcessor`'s `lastOp`), from zkit's op
/// names (`metrics::op_name`). Ops Apache answers outside that processor (auth, sasl) never
/// become the last op; see `ConnMetrics::replies_written`.
pub(crate) fn short_op(op: &str) -> &'static str {
    match op {
        "create" | "create2" | "createContainer" | "createTTL" => "CREA",
        "delete" | "deleteContainer" => "DELE",
        "exists" => "EXIS",
        "getData" => "GETD",
        "setData" => "SETD",
        "getACL" => "GETA",
        "setACL" => "SETA",
        "getChildren" | "getChildren2" => "GETC",
        "sync" => "SYNC",
        "ping" => "PING",
        "check" => "CHEC",
        "multi" => "MULT",
        "multiRead" => "MLTR",
        "reconfig" => "RECO",
        "checkWatches" => "CHKW",
        "removeWatches" => "REMW",
        "setWatches" => "SETW",
        "setWatches2" => "STW2",
        "getEphemerals" => "GETE",
        "getAllChildrenNumber" => "GETACN",
        "addWatch" => "ADDW",
        "whoAmI" => "HOMI",
        "closeSession" => "CLOS",
        "createSession" => "SESS",
        _ => "NA",
    }
}

/// What Apache's `ServerCnxn.getConnectionInfo` reports about one connection: the `cons`
/// line and the admin `connections` object are both rendered from it.
#[derive(Debug, Clone)]
pub(crate) struct ConnInfo {
    pub peer: std::net::SocketAddr,
    /// `[1]` (reading) for a connection with a session, `[0]` otherwise, as Apache shows
    /// its `interestOps`.
    pub interest_ops: u8,
    pub queued: usize,
    pub received: u64,
    pub sent: u64,
    /// Only for a connection with a session.
    pub session: Option<SessionInfo>,
}

/// The session part of [`ConnInfo`].
#[derive(Debug, Clone)]
pub(crate) struct SessionInfo {
    pub id: i64,
    pub timeout: i32,
    pub last_op: &'static str,
    pub established_ms: i64,
    /// -1 until a request with a non-negative xid is answered.
    pub last_cxid: i64,
    pub last_zxid: i64,
    pub last_response_ms: i64,
    pub last_latency: u64,
    pub min_latency: u64,
    /// Integer division, as `ServerCnxn.getAvgLatency` (a long).
    pub avg_latency: u64,
    pub max_latency: u64,
}

impl ConnInfo {
    pub(crate) fn of(c: &ConnMetrics, session: Option<(i64, i32)>) -> ConnInfo {
        let session = session.map(|(id, timeout)| {
            let last = c.last();
            let lat = c.latency();
            SessionInfo {
                id,
                timeout,
                last_op: if last.op.is_empty() {
                    "NA"
                } else {
                    short_op(last.op)
                },
                established_ms: c
                    .established
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX)),
                last_cxid: last.cxid,
                last_zxid: last.zxid,
                last_response_ms: last.at_ms,
                last_latency: lat.last_ms,
                min_latency: lat.min_ms,
                avg_latency: lat.total_ms.checked_div(lat.count).unwrap_or(0),
                max_latency: lat.max_ms,
            }
        });
        ConnInfo {
            peer: c.peer,
            interest_ops: u8::from(session.is_some()),
            queued: c.queued(),
            received: c.received.load(Relaxed),
            sent: c.sent.load(Relaxed),
            session,
        }
    }

    /// Every connection, with the sessions `view` found.
    pub(crate) fn all(shared: &Shared, view: &ConnView) -> Vec<ConnInfo> {
        shared
            .metrics
            .connections_by_id()
            .into_iter()
            .map(|(conn, c)| ConnInfo::of(&c, view.sessions.get(&conn).copied()))
            .collect()
    }
}

/// Sessions grouped by expiry deadline (ms), earliest first, as `dump` and the admin `dump`
/// show them. A session with no deadline yet (before the first tick after recovery) is in the
/// 0 group.
pub(crate) fn sessions_by_expiry(view: &WatchView) -> std::collections::BTreeMap<i64, Vec<i64>> {
    let mut buckets: std::collections::BTreeMap<i64, Vec<i64>> = Default::default();
    for (sid, deadline) in &view.sessions {
        buckets.entry(deadline.unwrap_or(0)).or_default().push(*sid);
    }
    buckets
}

/// A `mntr` value: printed as text, rendered as a JSON number or string by the admin
/// `monitor` command.
#[derive(Debug, Clone)]
pub(crate) enum MonitorValue {
    Int(i64),
    Float(f64),
    Text(String),
}

fn int(v: impl TryInto<i64>) -> MonitorValue {
    MonitorValue::Int(v.try_into().unwrap_or(i64::MAX))
}

/// `mntr` (and admin `monitor`): ZooKeeper 3.8's key names without the `zk_` prefix, for
/// everything zkit measures. Constants are listed only where they are true of zkit by
/// construction: it has no local sessions and no connection throttling (the TLS counters
/// `outstanding_tls_handshake` and `non_mtls_*_conn_count` are not measured yet and read 0). Apache's keys zkit does not measure (response sizes, auth failures,
/// bytes received, request-processor queue summaries, ...) are left out rather than faked.
pub(crate) fn monitor(shared: &Shared, stats: &Stats) -> Vec<(&'static str, MonitorValue)> {
    let m = &shared.metrics;
    let latency = m.latency();
    let fsync = m.fsync().summary_ms();
    let (open_fds, max_fds) = file_descriptors();
    let mut lines = vec![
        ("version", MonitorValue::Text(version())),
        ("server_state", MonitorValue::Text("standalone".into())),
        ("ephemerals_count", int(stats.ephemerals)),
        ("num_alive_connections", int(m.connections().len())),
        (
            "outstanding_requests",
            int(m.outstanding.load(Relaxed).max(0)),
        ),
        ("znode_count", int(stats.node_count)),
        ("global_sessions", int(stats.sessions)),
        ("local_sessions", int(0)),
        ("packets_sent", int(m.packets_sent.load(Relaxed))),
        ("packets_received", int(m.packets_received.load(Relaxed))),
        ("connection_drop_probability", MonitorValue::Float(0.0)),
        ("watch_count", int(stats.watches)),
        ("approximate_data_size", int(stats.approximate_data_size)),
    ];
    // Apache prints the descriptor counts only where the JVM can read them (Unix).
    if let Some(open) = open_fds {
        lines.push(("open_file_descriptor_count", int(open)));
    }
    if let Some(max) = max_fds {
        lines.push(("max_file_descriptor_count", int(max)));
    }
    lines.extend([
        ("uptime", int(m.started.elapsed().as_millis())),
        ("outstanding_tls_handshake", int(0)),
        ("non_mtls_remote_conn_count", int(0)),
        ("non_mtls_local_conn_count", int(0)),
        (
            "connection_rejected",
            int(m.refused_connections.load(Relaxed)),
        ),
        ("avg_latency", MonitorValue::Float(latency.avg_ms())),
        ("min_latency", int(latency.min_ms)),
        ("max_latency", int(latency.max_ms)),
        ("avg_fsynctime", MonitorValue::Float(fsync.avg())),
        ("min_fsynctime", int(fsync.min)),
        ("max_fsynctime", int(fsync.max)),
        ("cnt_fsynctime", int(fsync.count)),
        ("sum_fsynctime", int(fsync.sum)),
    ]);
    // Apache's Summary for these also has p50..p999 keys; zkit keeps no percentiles here.
    // Handshakes are not requests for zkit's metrics: unlike Apache, a new session's
    // createSession does not count as an update.
    for (keys, l) in [
        (
            [
                "avg_updatelatency",
                "min_updatelatency",
                "max_updatelatency",
                "cnt_updatelatency",
                "sum_updatelatency",
            ],
            m.update_latency(),
        ),
        (
            [
                "avg_readlatency",
                "min_readlatency",
                "max_readlatency",
                "cnt_readlatency",
                "sum_readlatency",
            ],
            m.read_latency(),
        ),
    ] {
        lines.extend([
            (keys[0], MonitorValue::Float(l.avg_ms())),
            (keys[1], int(l.min_ms)),
            (keys[2], int(l.max_ms)),
            (keys[3], int(l.count)),
            (keys[4], int(l.total_ms)),
        ]);
    }
    lines
}

/// Open descriptors of this process and its soft limit (`RLIMIT_NOFILE`), as the JVM's
/// `UnixOperatingSystemMXBean` reports them; `None` where /proc does not say.
fn file_descriptors() -> (Option<u64>, Option<u64>) {
    let open = std::fs::read_dir("/proc/self/fd")
        .ok()
        .map(|d| d.count() as u64);
    let max = std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|limits| {
            let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
            line.trim_start_matches("Max open files")
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        });
    (open, max)
}

/// Bytes in the data directory and its subdirectories (`dirs`, `conf`); 0 in memory.
pub(crate) fn data_dir_size(shared: &Shared) -> u64 {
    fn walk(dir: &std::path::Path, depth: u8) -> u64 {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return 0;
        };
        entries
            .flatten()
            .map(|e| match e.metadata() {
                Ok(m) if m.is_dir() && depth < 4 => walk(&e.path(), depth + 1),
                Ok(m) if m.is_file() => m.len(),
                _ => 0,
            })
            .sum()
    }
    shared.config.data_dir.as_deref().map_or(0, |d| walk(d, 0))
}

/// The name of the user running the server, as the JVM's `user.name`: `$USER`, else the
/// /etc/passwd entry of the process's uid.
fn user_name() -> String {
    if let Ok(user) = std::env::var("USER") {
        if !user.is_empty() {
            return user;
        }
    }
    let uid = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|ids| ids.split_whitespace().next().map(str::to_string))
        });
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    uid.and_then(|uid| {
        passwd.lines().find_map(|l| {
            let mut fields = l.split(':');
            let name = fields.next()?;
            (fields.nth(1)? == uid).then(|| name.to_string())
        })
    })
    .unwrap_or_default()
}

/// `envi` and admin `environment`: ZooKeeper's `Environment` keys that have a meaning outside
/// a JVM (the `java.*` and `os.memory.*` ones do not and are left out), then zkit's own
/// `zkit.version` and `os.pid`.
pub(crate) fn environment() -> Vec<(&'static str, String)> {
    let read = |path: &str| {
        std::fs::read_to_string(path)
            .map(|h| h.trim().to_string())
            .ok()
    };
    let host = read("/proc/sys/kernel/hostname").unwrap_or_else(|| "localhost".into());
    let cwd = std::env::current_dir()
        .map(|d| d.display().to_string())
        .unwrap_or_default();
    let os = match std::env::consts::OS {
        "linux" => "Linux".to_string(),
        "macos" => "Mac OS X".to_string(),
        other => other.to_string(),
    };
    // The JVM's `os.arch` names.
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "x86" => "i386",
        other => other,
    };
    let mut env = vec![
        ("zookeeper.version", version()),
        ("host.name", host),
        ("os.name", os),
        ("os.arch", arch.to_string()),
    ];
    if let Some(release) = read("/proc/sys/kernel/osrelease") {
        env.push(("os.version", release));
    }
    env.extend([
        ("user.name", user_name()),
        ("user.home", std::env::var("HOME").unwrap_or_default()),
        ("user.dir", cwd),
        ("zkit.version", env!("CARGO_PKG_VERSION").to_string()),
        ("os.pid", std::process::id().to_string()),
    ]);
    env
}
