//! Four-letter words (`echo srvr | nc host 2181`) in Apache ZooKeeper's output formats, so
//! monitoring scripts written for ZooKeeper work unchanged. Formats follow ZooKeeper 3.8's
//! `StatCommand`, `MonitorCommand`, `ConsCommand`, `DumpCommand`, `ConfCommand`, `EnvCommand`
//! and `DigestCommand`; words outside the whitelist get ZooKeeper's `<cmd> is not executed
//! because it is not in the whitelist.` line. The AdminServer (`admin_http`) reuses the values
//! computed here, so text and JSON always agree.
//!
//! All of ZooKeeper 3.8's words: conf, cons, crst, dirs, dump, envi, gtmk, hash, isro, mntr,
//! ruok, srst, srvr, stat, stmk, wchc, wchp, wchs. Where zkit differs from Apache:
//! - `hash` prints the digest of the tree as it is now (one `zxid: digest` line, computed on
//!   demand with Apache's `DigestCalculator`); Apache prints its history of digests taken every
//!   128 txns, which zkit does not keep.
//! - `cons`: a handshake is not a request to zkit's counters, so a new session shows `lop=NA`
//!   until its first request (Apache: `SESS`), and `lresp` is wall-clock ms since the epoch
//!   (Apache: its monotonic clock).
//! - `gtmk`/`stmk` keep the trace mask, which zkit's tracing does not consult; `dirs` reports
//!   the data directory's size for both directories (zkit keeps log and snapshots together).
//!
//! Nothing here changes the data tree; core state is read between pipeline batches.

use std::fmt::Write;
use std::sync::atomic::Ordering::Relaxed;

use tokio::sync::oneshot;
use zkit_core::{ConnId, Core, Stats};

use crate::metrics::ConnMetrics;
use crate::shared::Shared;
use crate::to_core::{Inspection, ToCore};

/// The version reported as `Zookeeper version:` / `zk_version`: the ZooKeeper protocol level
/// zkit speaks, tagged with zkit's own version.
pub(crate) fn version() -> String {
    format!("3.8.0-zkit-{}, built on unknown", env!("CARGO_PKG_VERSION"))
}

/// Apache's `ZK_NOT_SERVING` line.
const NOT_SERVING: &str = "This ZooKeeper instance is not currently serving requests\n";

/// The reply to `word` (one of ZooKeeper's four-letter words). `arg` is the 8-byte argument
/// that follows `stmk` (the new trace mask); ignored by the other words.
pub(crate) async fn answer(word: &str, arg: Option<i64>, shared: &Shared) -> String {
    // Apache counts a four-letter word as one packet received (the connection did that) and
    // one sent, before it runs the command: `srvr` after `srst` shows `Received: 1, Sent: 1`.
    shared.metrics.packets_sent.fetch_add(1, Relaxed);
    if !shared.config.four_letter_words.allows(word) {
        return format!("{word} is not executed because it is not in the whitelist.\n");
    }
    match word {
        "ruok" => "imok".to_string(),
        "gtmk" => shared.metrics.trace_mask.load(Relaxed).to_string(),
        "stmk" => {
            if let Some(mask) = arg {
                shared.metrics.trace_mask.store(mask, Relaxed);
            }
            shared.metrics.trace_mask.load(Relaxed).to_string()
        }
        "crst" => {
            shared.metrics.reset_connections();
            "Connection stats reset.\n".to_string()
        }
        "hash" => match inspect(shared, TreeDigest::of).await {
            // `DigestCommand`: `Long.toHexString(zxid) + ": " + digest`.
            Some(d) => format!("{:x}: {}\n", d.zxid, d.digest),
            None => NOT_SERVING.to_string(),
        },
        "cons" => cons(
            shared,
            &inspect(shared, ConnView::of).await.unwrap_or_default(),
        ),
        "wchc" | "wchp" | "wchs" | "dump" => {
            let Some(view) = inspect(shared, WatchView::of).await else {
                return NOT_SERVING.to_string();
            };
            match word {
                "wchc" => view.by_session(),
                "wchp" => view.by_path(),
                "wchs" => {
                    let summary = view.summary();
                    format!(
                        "{} connections watching {} paths\nTotal watches:{}\n",
                        summary.connections, summary.paths, summary.watches
                    )
                }
                _ => dump(shared, &view),
            }
        }
        "isro" => "rw".to_string(),
        "srst" => {
            shared.metrics.reset();
            "Server stats reset.\n".to_string()
        }
        "conf" => conf(shared),
        "envi" => {
            let mut s = String::from("Environment:\n");
            for (k, v) in environment() {
                let _ = writeln!(s, "{k}={v}");
            }
            s
        }
        "dirs" => {
            // zkit keeps log and snapshots in one directory: both sizes are its size.
            let size = data_dir_size(shared);
            format!("datadir_size: {size}\nlogdir_size: {size}\n")
        }
        "srvr" | "stat" | "mntr" => {
            let Some(stats) = core_stats(shared).await else {
                return NOT_SERVING.to_string();
            };
            match word {
                "srvr" => server_stats(shared, &stats, false),
                "stat" => server_stats(shared, &stats, true),
                _ => {
                    let mut s = String::new();
                    for (k, v) in monitor(shared, &stats) {
                        let _ = writeln!(s, "zk_{k}\t{v}");
                    }
                    s
                }
            }
        }
        other => format!("{other} is not a four-letter word zkit knows.\n"),
    }
}

/// Java's `Double.toString` for the latency averages Apache rounds to 4 places
/// (`AvgMinMaxCounter.getAvg`): `0.0`, `2.5`, `2.9091`.
pub(crate) fn java_double(value: f64) -> String {
    let rounded = (value * 10_000.0).round() / 10_000.0;
    if rounded.fract() == 0.0 && rounded.abs() < 1e7 {
        format!("{rounded:.1}")
    } else {
        format!("{rounded}")
    }
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

/// Runs `f` on the core between two pipeline batches; `None` if the pipeline has stopped.
pub(crate) async fn inspect<T: Send + 'static>(
    shared: &Shared,
    f: impl FnOnce(&Core) -> T + Send + 'static,
) -> Option<T> {
    let (reply, rx) = oneshot::channel();
    let job = Box::new(move |core: &Core| {
        // The asker may have gone; nothing to do then.
        let _ = reply.send(f(core));
    });
    shared
        .to_core
        .send(ToCore::Inspect(Inspection(job)))
        .await
        .ok()?;
    rx.await.ok()
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

    /// `wchc`: `0x<session>` then a tab-indented line per path; a blank line after each.
    fn by_session(&self) -> String {
        let mut s = String::new();
        for (sid, paths) in self.session_paths() {
            let _ = writeln!(s, "{sid:#x}");
            for p in paths {
                let _ = writeln!(s, "\t{p}");
            }
        }
        s.push('\n');
        s
    }

    /// `wchp`: the path, then a tab-indented `0x<session>` line per watcher.
    fn by_path(&self) -> String {
        let mut s = String::new();
        for (path, sids) in self.path_sessions() {
            let _ = writeln!(s, "{path}");
            for sid in sids {
                let _ = writeln!(s, "\t{sid:#x}");
            }
        }
        s.push('\n');
        s
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

    /// The line `stat` (brief) or `cons` (full) prints, without the newline.
    fn line(&self, brief: bool) -> String {
        let mut s = format!(
            " /{}[{}](queued={},recved={},sent={}",
            self.peer, self.interest_ops, self.queued, self.received, self.sent
        );
        if let (false, Some(x)) = (brief, &self.session) {
            let _ = write!(
                s,
                ",sid={:#x},lop={},est={},to={}",
                x.id, x.last_op, x.established_ms, x.timeout
            );
            if x.last_cxid >= 0 {
                let _ = write!(s, ",lcxid={:#x}", x.last_cxid);
            }
            // `Long.toHexString`: -1 (nothing answered yet) prints as ffffffffffffffff.
            let _ = write!(
                s,
                ",lzxid=0x{:x},lresp={},llat={},minlat={},avglat={},maxlat={}",
                x.last_zxid,
                x.last_response_ms,
                x.last_latency,
                x.min_latency,
                x.avg_latency,
                x.max_latency
            );
        }
        s.push(')');
        s
    }
}

/// `cons`: one line per connection (`ServerCnxn.dumpConnectionInfo`), then a blank line.
fn cons(shared: &Shared, view: &ConnView) -> String {
    let mut s = String::new();
    for info in ConnInfo::all(shared, view) {
        let _ = writeln!(s, "{}", info.line(false));
    }
    s.push('\n');
    s
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

/// `dump`: sessions by expiry, ephemerals by session, connections by expiry (Apache's
/// `SessionTrackerImpl.dumpSessions`, `DataTree.dumpEphemerals`, `dumpConnections`).
fn dump(shared: &Shared, view: &WatchView) -> String {
    let buckets = sessions_by_expiry(view);
    let mut s = String::from("SessionTracker dump:\n");
    let _ = writeln!(
        s,
        "Session Sets ({})/({}):",
        buckets.len(),
        view.sessions.len()
    );
    for (at, sids) in &buckets {
        let _ = writeln!(s, "{} expire at {}:", sids.len(), java_date(*at));
        for sid in sids {
            let _ = writeln!(s, "\t{sid:#x}");
        }
    }
    s.push_str("ephemeral nodes dump:\n");
    let _ = writeln!(s, "Sessions with Ephemerals ({}):", view.ephemerals.len());
    for (sid, paths) in &view.ephemerals {
        let _ = writeln!(s, "{sid:#x}:");
        for p in paths {
            let _ = writeln!(s, "\t{p}");
        }
    }
    // Connections expire with their session; one without a session when its handshake
    // deadline (`sessionless_timeout` after accept) passes, like Apache's sessionless
    // connection expiry.
    s.push_str("Connections dump:\n");
    let deadlines: std::collections::BTreeMap<i64, Option<i64>> =
        view.sessions.iter().copied().collect();
    let sessionless_ms = i64::try_from(shared.config.sessionless_timeout.as_millis()).unwrap_or(0);
    let mut conns: std::collections::BTreeMap<i64, Vec<(std::net::SocketAddr, i64)>> =
        Default::default();
    let total = shared.metrics.connections_by_id().len();
    for (conn, c) in shared.metrics.connections_by_id() {
        let sid = view.conn_sessions.get(&conn).copied().unwrap_or(0);
        let at = match deadlines.get(&sid) {
            Some(deadline) => deadline.unwrap_or(0),
            None => c
                .established
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(0))
                .saturating_add(sessionless_ms),
        };
        conns.entry(at).or_default().push((c.peer, sid));
    }
    let _ = writeln!(s, "Connections Sets ({})/({}):", conns.len(), total);
    for (at, members) in &conns {
        let _ = writeln!(s, "{} expire at {}:", members.len(), java_date(*at));
        for (peer, sid) in members {
            let _ = writeln!(s, "\tip: /{peer} sessionId: {sid:#x}");
        }
    }
    s
}

/// `java.util.Date.toString()` in UTC: `Sun Nov 29 23:52:24 UTC 2026`.
pub(crate) fn java_date(ms: i64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let secs = ms.div_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{} {} {day:02} {:02}:{:02}:{:02} UTC {year}",
        DAYS[days.rem_euclid(7) as usize],
        MONTHS[(month - 1) as usize],
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

pub(crate) async fn core_stats(shared: &Shared) -> Option<Stats> {
    let (reply, rx) = oneshot::channel();
    shared.to_core.send(ToCore::Stats { reply }).await.ok()?;
    rx.await.ok()
}

/// `srvr`, and `stat` (which adds the client list).
fn server_stats(shared: &Shared, stats: &Stats, with_clients: bool) -> String {
    let m = &shared.metrics;
    let latency = m.latency();
    let mut s = format!("Zookeeper version: {}\n", version());
    if with_clients {
        s.push_str("Clients:\n");
        for c in m.connections() {
            // `stat` needs no core round trip for the brief line: the handshake recorded
            // whether the connection has a session.
            let session = (c.session.load(Relaxed) != 0).then_some((0, 0));
            let _ = writeln!(s, "{}", ConnInfo::of(&c, session).line(true));
        }
        s.push('\n');
    }
    let _ = write!(
        s,
        "Latency min/avg/max: {}/{}/{}\nReceived: {}\nSent: {}\nConnections: {}\n\
         Outstanding: {}\nZxid: {:#x}\nMode: standalone\nNode count: {}\n",
        latency.min_ms,
        java_double(latency.avg_ms()),
        latency.max_ms,
        m.packets_received.load(Relaxed),
        m.packets_sent.load(Relaxed),
        m.connections().len(),
        m.outstanding.load(Relaxed).max(0),
        stats.last_zxid,
        stats.node_count,
    );
    s
}

/// A `mntr` value: printed as text, rendered as a JSON number or string by the admin
/// `monitor` command.
#[derive(Debug, Clone)]
pub(crate) enum MonitorValue {
    Int(i64),
    Float(f64),
    Text(String),
}

impl std::fmt::Display for MonitorValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MonitorValue::Int(v) => write!(f, "{v}"),
            MonitorValue::Float(v) => f.write_str(&java_double(*v)),
            MonitorValue::Text(v) => f.write_str(v),
        }
    }
}

fn int(v: impl TryInto<i64>) -> MonitorValue {
    MonitorValue::Int(v.try_into().unwrap_or(i64::MAX))
}

/// `mntr` (and admin `monitor`): ZooKeeper 3.8's key names without the `zk_` prefix, for
/// everything zkit measures. Constants are listed only where they are true of zkit by
/// construction: it has no local sessions, no TLS, no x509 client certificates and no
/// connection throttling. Apache's keys zkit does not measure (response sizes, auth failures,
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

/// `conf`: the settings in ZooKeeper 3.8's order and key names (`ZooKeeperServer.dumpConf`),
/// then zkit's extra settings. An in-memory server reports an empty dataDir.
fn conf(shared: &Shared) -> String {
    let c = &shared.config;
    let (min, max) = c.session_timeout_bounds_ms();
    let dir = c.data_dir_display();
    let size = data_dir_size(shared);
    format!(
        "clientPort={}\nsecureClientPort=-1\ndataDir={dir}\ndataDirSize={size}\n\
         dataLogDir={dir}\ndataLogSize={size}\ntickTime={}\nmaxClientCnxns={}\n\
         minSessionTimeout={min}\nmaxSessionTimeout={max}\nclientPortListenBacklog=-1\n\
         serverId=0\nclientPortAddress={}\nextendedTypesEnabled={}\n\
         znode.container.checkIntervalMs={}\njute.maxbuffer={}\n",
        c.listen.port(),
        c.tick_time.as_millis(),
        c.limits.max_client_cnxns,
        c.listen.ip(),
        c.extended_types,
        c.container_check_interval.as_millis(),
        c.max_frame,
    )
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

#[cfg(test)]
mod tests {
    use super::{java_date, java_double};

    #[test]
    fn java_double_format() {
        assert_eq!(java_double(0.0), "0.0");
        assert_eq!(java_double(2.5), "2.5");
        assert_eq!(java_double(32.0 / 11.0), "2.9091");
        assert_eq!(java_double(3.0), "3.0");
    }

    #[test]
    fn java_date_format() {
        // `new java.util.Date(ms).toString()` with TZ=UTC.
        assert_eq!(java_date(0), "Thu Jan 01 00:00:00 UTC 1970");
        assert_eq!(java_date(1_795_996_313_126), "Sun Nov 29 23:51:53 UTC 2026");
        assert_eq!(java_date(951_782_400_000), "Tue Feb 29 00:00:00 UTC 2000");
    }
}
