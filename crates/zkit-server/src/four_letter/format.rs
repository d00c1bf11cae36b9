//! Apache's text formats: Java's `Double.toString` and `Date.toString`, and the layout of the
//! words that print lines (`cons`, `stat`/`srvr`, `dump`, `conf`, `wchc`, `wchp`, `mntr`
//! values), rendered from the [`views`](super::views). Pure string building.

use std::fmt::Write;
use std::sync::atomic::Ordering::Relaxed;

use zkit_core::Stats;

use super::views::{
    data_dir_size, sessions_by_expiry, version, ConnInfo, ConnView, MonitorValue, WatchView,
};
use crate::shared::Shared;

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

/// `java.util.Date.toString()` in UTC: `Sun Nov 29 23:52:24 UTC 2026`; the milliseconds as a
/// number for an instant outside years 1 to 9999.
pub(crate) fn java_date(ms: i64) -> String {
    const FORMAT: &[time::format_description::BorrowedFormatItem<'_>] = time::macros::format_description!(
        "[weekday repr:short] [month repr:short] [day] [hour]:[minute]:[second] UTC [year]"
    );
    time::OffsetDateTime::from_unix_timestamp(ms.div_euclid(1000))
        .ok()
        .and_then(|t| t.format(FORMAT).ok())
        .unwrap_or_else(|| ms.to_string())
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

impl WatchView {
    /// `wchc`: `0x<session>` then a tab-indented line per path; a blank line after each.
    pub(super) fn by_session(&self) -> String {
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
    pub(super) fn by_path(&self) -> String {
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

impl ConnInfo {
    /// The line `stat` (brief) or `cons` (full) prints, without the newline.
    pub(super) fn line(&self, brief: bool) -> String {
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
pub(super) fn cons(shared: &Shared, view: &ConnView) -> String {
    let mut s = String::new();
    for info in ConnInfo::all(shared, view) {
        let _ = writeln!(s, "{}", info.line(false));
    }
    s.push('\n');
    s
}

/// `dump`: sessions by expiry, ephemerals by session, connections by expiry (Apache's
/// `SessionTrackerImpl.dumpSessions`, `DataTree.dumpEphemerals`, `dumpConnections`).
pub(super) fn dump(shared: &Shared, view: &WatchView) -> String {
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

/// `srvr`, and `stat` (which adds the client list).
pub(super) fn server_stats(shared: &Shared, stats: &Stats, with_clients: bool) -> String {
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

/// `conf`: the settings in ZooKeeper 3.8's order and key names (`ZooKeeperServer.dumpConf`),
/// then zkit's extra settings. An in-memory server reports an empty dataDir.
pub(super) fn conf(shared: &Shared) -> String {
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
