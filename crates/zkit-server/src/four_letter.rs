//! Four-letter words (`echo srvr | nc host 2181`) in Apache ZooKeeper's output formats, so
//! monitoring scripts written for ZooKeeper work unchanged. Formats follow ZooKeeper 3.8's
//! `StatCommand`, `MonitorCommand`, `ConfCommand` and `EnvCommand`; words outside the whitelist
//! get ZooKeeper's `<cmd> is not executed because it is not in the whitelist.` line.
//!
//! All of ZooKeeper 3.8's words: conf, cons, crst, dirs, dump, envi, gtmk, hash, isro, mntr,
//! ruok, srst, srvr, stat, stmk, wchc, wchp, wchs. `hash` answers empty (zkit keeps no digest
//! log, like a 3.8 server whose digest history is empty); `gtmk`/`stmk` keep the trace mask, which
//! zkit's tracing does not consult; `dirs` reports the data directory's size for both.

use std::fmt::Write;
use std::sync::atomic::Ordering::Relaxed;

use tokio::sync::oneshot;
use zkit_core::{ConnId, Core, Stats};

use crate::connection::Shared;
use crate::pipeline::{Inspection, ToCore};

/// The version reported as `Zookeeper version:` / `zk_version`: the ZooKeeper protocol level
/// zkit speaks, tagged with zkit's own version.
pub(crate) fn version() -> String {
    format!("3.8.0-zkit-{}, built on unknown", env!("CARGO_PKG_VERSION"))
}

/// `ZooTrace`'s default trace mask (`gtmk` on a fresh 3.8 server answers 306).
pub(crate) const DEFAULT_TRACE_MASK: i64 = 306;

/// The reply to `word` (one of ZooKeeper's four-letter words). `arg` is the 8-byte argument
/// that follows `stmk` (the new trace mask); ignored by the other words.
pub(crate) async fn answer(word: &str, arg: Option<i64>, shared: &Shared) -> String {
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
        "hash" => String::new(),
        "cons" => cons(
            shared,
            inspect(shared, ConnView::of).await.unwrap_or_default(),
        ),
        "wchc" | "wchp" | "dump" => {
            let Some(view) = inspect(shared, WatchView::of).await else {
                return "This ZooKeeper instance is not currently serving requests\n".to_string();
            };
            match word {
                "wchc" => view.by_session(),
                "wchp" => view.by_path(),
                _ => dump(shared, &view),
            }
        }
        "isro" => "rw".to_string(),
        "srst" => {
            shared.metrics.reset();
            "Server stats reset.\n".to_string()
        }
        "conf" => conf(shared),
        "envi" => envi(),
        "dirs" => {
            // zkit keeps log and snapshots in one directory: both sizes are its size.
            let size = data_dir_size(shared);
            format!("datadir_size: {size}\nlogdir_size: {size}\n")
        }
        "srvr" | "stat" | "mntr" | "wchs" => {
            let Some(stats) = core_stats(shared).await else {
                return "This ZooKeeper instance is not currently serving requests\n".to_string();
            };
            match word {
                "srvr" => server_stats(shared, &stats, false),
                "stat" => server_stats(shared, &stats, true),
                "wchs" => format!(
                    "{} connections watching {} paths\nTotal watches:{}\n",
                    shared.metrics.connections().len(),
                    stats.watched_paths,
                    stats.watches
                ),
                _ => monitor(shared, &stats),
            }
        }
        other => format!("{other} is not a four-letter word zkit knows.\n"),
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
    fn of(core: &Core) -> ConnView {
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

/// Watches, sessions and ephemerals, as `wchc`, `wchp` and `dump` show them.
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

/// Apache's short op names in `cons` (`FinalRequestProcessor`'s `lastOp`).
fn short_op(op: &str) -> &'static str {
    match op {
        "create" | "create2" | "createContainer" | "createTTL" => "CREA",
        "delete" => "DELE",
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
        "setWatches" | "setWatches2" => "SETW",
        "getEphemerals" => "GETE",
        "getAllChildrenNumber" => "GETACN",
        "addWatch" => "ADDW",
        "whoAmI" => "HOMI",
        "closeSession" => "CLOS",
        "auth" => "AUTH",
        "sasl" => "SASL",
        _ => "NA",
    }
}

/// `cons`: one line per connection (`NIOServerCnxn.dumpConnectionInfo`), then a blank line.
fn cons(shared: &Shared, view: ConnView) -> String {
    let mut s = String::new();
    for (conn, c) in shared.metrics.connections_by_id() {
        let _ = write!(
            s,
            " /{}[{}](queued={},recved={},sent={}",
            c.peer,
            u8::from(view.sessions.contains_key(&conn)),
            c.queued(),
            c.received.load(Relaxed),
            c.sent.load(Relaxed)
        );
        if let Some((sid, timeout)) = view.sessions.get(&conn) {
            let last = c.last();
            let lat = c.latency();
            let established = c
                .established
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis());
            let _ = write!(
                s,
                ",sid={sid:#x},lop={},est={established},to={timeout}",
                if last.op.is_empty() {
                    "NA"
                } else {
                    short_op(last.op)
                }
            );
            if !last.op.is_empty() {
                let _ = write!(s, ",lcxid={:#x}", last.xid);
            }
            let lzxid = if last.op.is_empty() { -1 } else { last.zxid };
            let _ = write!(
                s,
                ",lzxid=0x{lzxid:x},lresp={},llat={},minlat={},avglat={:.0},maxlat={}",
                last.at_ms,
                lat.last_ms,
                lat.min_ms,
                lat.avg_ms(),
                lat.max_ms
            );
        }
        s.push_str(")\n");
    }
    s.push('\n');
    s
}

/// `dump`: sessions by expiry, ephemerals by session, connections (Apache's
/// `SessionTrackerImpl.dumpSessions`, `DataTree.dumpEphemerals`, `dumpConnections`).
fn dump(shared: &Shared, view: &WatchView) -> String {
    let mut buckets: std::collections::BTreeMap<i64, Vec<i64>> = Default::default();
    for (sid, deadline) in &view.sessions {
        buckets.entry(deadline.unwrap_or(0)).or_default().push(*sid);
    }
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
    s.push_str("Connections dump:\n");
    let conns = shared.metrics.connections_by_id();
    let deadlines: std::collections::BTreeMap<i64, Option<i64>> =
        view.sessions.iter().copied().collect();
    let _ = writeln!(s, "Connections Sets ({})/({}):", conns.len(), conns.len());
    for (conn, c) in conns {
        let sid = view.conn_sessions.get(&conn).copied().unwrap_or(0);
        let at = deadlines.get(&sid).copied().flatten().unwrap_or(0);
        let _ = writeln!(
            s,
            "1 expire at {}:\n\tip: /{} sessionId: {sid:#x}",
            java_date(at),
            c.peer
        );
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

async fn core_stats(shared: &Shared) -> Option<Stats> {
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
            let _ = writeln!(
                s,
                " /{}[1](queued={},recved={},sent={})",
                c.peer,
                c.queued(),
                c.received.load(Relaxed),
                c.sent.load(Relaxed)
            );
        }
        s.push('\n');
    }
    let _ = write!(
        s,
        "Latency min/avg/max: {}/{:.1}/{}\nReceived: {}\nSent: {}\nConnections: {}\n\
         Outstanding: {}\nZxid: {:#x}\nMode: standalone\nNode count: {}\n",
        latency.min_ms,
        latency.avg_ms(),
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

/// `mntr`: `key<TAB>value` lines, ZooKeeper's names.
fn monitor(shared: &Shared, stats: &Stats) -> String {
    let m = &shared.metrics;
    let latency = m.latency();
    let lines: Vec<(&str, String)> = vec![
        ("zk_version", version()),
        ("zk_server_state", "standalone".into()),
        ("zk_avg_latency", format!("{:.1}", latency.avg_ms())),
        ("zk_max_latency", latency.max_ms.to_string()),
        ("zk_min_latency", latency.min_ms.to_string()),
        (
            "zk_packets_received",
            m.packets_received.load(Relaxed).to_string(),
        ),
        ("zk_packets_sent", m.packets_sent.load(Relaxed).to_string()),
        (
            "zk_num_alive_connections",
            m.connections().len().to_string(),
        ),
        (
            "zk_outstanding_requests",
            m.outstanding.load(Relaxed).max(0).to_string(),
        ),
        ("zk_znode_count", stats.node_count.to_string()),
        ("zk_watch_count", stats.watches.to_string()),
        ("zk_ephemerals_count", stats.ephemerals.to_string()),
        (
            "zk_approximate_data_size",
            stats.approximate_data_size.to_string(),
        ),
        ("zk_global_sessions", stats.sessions.to_string()),
        ("zk_local_sessions", "0".into()),
        ("zk_uptime", m.started.elapsed().as_millis().to_string()),
        ("zk_last_zxid", format!("{:#x}", stats.last_zxid)),
    ];
    let mut s = String::new();
    for (k, v) in lines {
        let _ = writeln!(s, "{k}\t{v}");
    }
    s
}

/// `conf`: the settings in ZooKeeper 3.8's order and key names (`ZooKeeperServer.dumpConf`),
/// then zkit's extra settings. An in-memory server reports an empty dataDir.
fn conf(shared: &Shared) -> String {
    let c = &shared.config;
    let (min, max) = c.session_timeout_bounds_ms();
    let dir = c
        .data_dir
        .as_ref()
        .map(|d| d.display().to_string())
        .unwrap_or_default();
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
fn data_dir_size(shared: &Shared) -> u64 {
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

/// `envi`: the environment, ZooKeeper's `Environment:` block with Rust-side values.
fn envi() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "localhost".into());
    let cwd = std::env::current_dir()
        .map(|d| d.display().to_string())
        .unwrap_or_default();
    let os = match std::env::consts::OS {
        "linux" => "Linux".to_string(),
        "macos" => "Mac OS X".to_string(),
        other => other.to_string(),
    };
    let user = std::env::var("USER").unwrap_or_default();
    let home = std::env::var("HOME").unwrap_or_default();
    format!(
        "Environment:\nzookeeper.version={}\nhost.name={host}\nzkit.version={}\nos.name={os}\n\
         os.arch={}\nuser.name={user}\nuser.home={home}\nuser.dir={cwd}\nos.pid={}\n",
        version(),
        env!("CARGO_PKG_VERSION"),
        std::env::consts::ARCH,
        std::process::id(),
    )
}

#[cfg(test)]
mod tests {
    use super::java_date;

    #[test]
    fn java_date_format() {
        // `new java.util.Date(ms).toString()` with TZ=UTC.
        assert_eq!(java_date(0), "Thu Jan 01 00:00:00 UTC 1970");
        assert_eq!(java_date(1_795_996_313_126), "Sun Nov 29 23:51:53 UTC 2026");
        assert_eq!(java_date(951_782_400_000), "Tue Feb 29 00:00:00 UTC 2000");
    }
}
