//! Counters shared by the connections, the pipeline and the four-letter words: packets in and
//! out, request latency (overall and per op, as histograms), fsync latency, live connections.
//! Plain atomics and small mutex-guarded registries; nothing here blocks for long or touches
//! the data tree. [`Metrics::prometheus`] renders them in Prometheus' text format.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use zkit_core::ConnId;

/// `ZooTrace`'s default trace mask (`gtmk` on a fresh 3.8 server answers 306).
const DEFAULT_TRACE_MASK: i64 = 306;

/// Server-wide counters.
#[derive(Debug)]
pub(crate) struct Metrics {
    pub started: Instant,
    pub packets_received: AtomicU64,
    pub packets_sent: AtomicU64,
    /// Requests handed to the pipeline and not yet answered.
    pub outstanding: AtomicI64,
    latency: Mutex<Latency>,
    /// Latency of requests that write (ZooKeeper's `UPDATE_LATENCY`: requests with a txn) and
    /// of the others (`READ_LATENCY`), for `mntr`'s `updatelatency`/`readlatency` summaries.
    update_latency: Mutex<Latency>,
    read_latency: Mutex<Latency>,
    /// The same two as histograms, for the quantiles of Apache's `updatelatency` and
    /// `readlatency` Prometheus summaries.
    update_histogram: Mutex<Histogram>,
    read_histogram: Mutex<Histogram>,
    connections: Mutex<BTreeMap<ConnId, Arc<ConnMetrics>>>,
    /// Requests and their latency (read → reply written) per op name.
    per_op: Mutex<BTreeMap<&'static str, Histogram>>,
    /// Storage flush (fsync) latency; fed by the storage layer through [`Metrics::record_fsync`].
    fsync: Mutex<Histogram>,
    /// Connections refused by `maxClientCnxns`.
    pub refused_connections: AtomicU64,
    /// Connections of the secure port closed because their TLS handshake failed or did not
    /// finish in time (Apache's `unsuccessful_handshake`).
    pub tls_handshake_failures: AtomicU64,
    /// Connections closed because their outbound queue passed `max_outbound_bytes` (a client
    /// that does not read its socket).
    pub outbound_overflows: AtomicU64,
    /// `gtmk`/`stmk`: ZooKeeper's trace mask (kept and reported; tracing filters are set by
    /// the log level instead).
    pub trace_mask: AtomicI64,
}

/// Upper bounds (seconds) of the latency histogram buckets; `+Inf` is implied.
pub(crate) const BUCKETS: [f64; 14] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0,
];

/// A fixed-bucket latency histogram (Prometheus semantics: cumulative at render time).
#[derive(Debug, Clone, Default)]
pub(crate) struct Histogram {
    /// Observations per bucket (not cumulative); the last slot is `+Inf`.
    counts: [u64; BUCKETS.len() + 1],
    sum_seconds: f64,
    count: u64,
    /// Smallest and largest observation (seconds), for ZooKeeper's `fsynctime` summary.
    min_seconds: f64,
    max_seconds: f64,
}

impl Histogram {
    pub fn observe(&mut self, d: Duration) {
        let secs = d.as_secs_f64();
        let slot = BUCKETS
            .iter()
            .position(|b| secs <= *b)
            .unwrap_or(BUCKETS.len());
        self.counts[slot] += 1;
        self.sum_seconds += secs;
        self.min_seconds = if self.count == 0 {
            secs
        } else {
            self.min_seconds.min(secs)
        };
        self.max_seconds = self.max_seconds.max(secs);
        self.count += 1;
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    /// The `q`-quantile (0 ≤ q ≤ 1) in seconds, estimated as Prometheus' `histogram_quantile`
    /// does: linear within the bucket holding the rank, the bucket's bounds narrowed to the
    /// smallest and largest observation (so a quantile is never outside them, and one in the
    /// `+Inf` bucket is the largest). `None` before the first observation.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        if self.count == 0 {
            return None;
        }
        let rank = q.clamp(0.0, 1.0) * self.count as f64;
        let mut below = 0u64;
        for (i, &c) in self.counts.iter().enumerate() {
            if c == 0 || ((below + c) as f64) < rank {
                below += c;
                continue;
            }
            let lower = if i == 0 { 0.0 } else { BUCKETS[i - 1] };
            let upper = BUCKETS.get(i).copied().unwrap_or(self.max_seconds);
            let (lower, upper) = (
                lower.max(self.min_seconds),
                upper.min(self.max_seconds).max(lower.max(self.min_seconds)),
            );
            let within = ((rank - below as f64) / c as f64).clamp(0.0, 1.0);
            return Some(lower + (upper - lower) * within);
        }
        Some(self.max_seconds)
    }

    /// Observations above `threshold` seconds. Exact only when `threshold` is a bucket bound.
    pub fn count_above(&self, threshold: f64) -> u64 {
        BUCKETS
            .iter()
            .zip(&self.counts)
            .filter(|(bound, _)| **bound <= threshold)
            .fold(self.count, |above, (_, c)| above - c)
    }

    /// ZooKeeper's summary of this histogram in whole milliseconds, as `mntr` prints a
    /// `Summary` (`zk_avg_x`, `zk_min_x`, `zk_max_x`, `zk_cnt_x`, `zk_sum_x`).
    pub fn summary_ms(&self) -> SummaryMs {
        // Truncated to whole milliseconds like Apache's samples; the sum is of the exact
        // durations, so it can exceed Apache's sum of truncated samples by under 1 ms each.
        let ms = |secs: f64| (secs * 1000.0) as u64;
        SummaryMs {
            min: ms(self.min_seconds),
            max: ms(self.max_seconds),
            count: self.count,
            sum: ms(self.sum_seconds),
        }
    }

    /// Appends `name_bucket`, `name_sum`, `name_count` lines with `labels` (`k="v"` pairs).
    fn render(&self, out: &mut String, name: &str, labels: &str) {
        use std::fmt::Write as _;
        let sep = if labels.is_empty() { "" } else { "," };
        let mut cumulative = 0;
        for (i, c) in self.counts.iter().enumerate() {
            cumulative += c;
            let le = BUCKETS
                .get(i)
                .map_or_else(|| "+Inf".to_string(), |b| b.to_string());
            let _ = writeln!(
                out,
                "{name}_bucket{{{labels}{sep}le=\"{le}\"}} {cumulative}"
            );
        }
        let braces = if labels.is_empty() {
            String::new()
        } else {
            format!("{{{labels}}}")
        };
        let _ = writeln!(out, "{name}_sum{braces} {}", self.sum_seconds);
        let _ = writeln!(out, "{name}_count{braces} {}", self.count);
    }
}

/// A latency summary in milliseconds (ZooKeeper's `AvgMinMaxCounter` fields).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SummaryMs {
    pub min: u64,
    pub max: u64,
    pub count: u64,
    pub sum: u64,
}

impl SummaryMs {
    /// `sum / count` rounded to 4 places, as `AvgMinMaxCounter.getAvg` reports it.
    pub fn avg(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            (self.sum as f64 / self.count as f64 * 10_000.0).round() / 10_000.0
        }
    }
}

/// Gauges read from the core at scrape time.
#[derive(Debug, Clone, Default)]
pub(crate) struct CoreGauges {
    pub sessions: u64,
    pub watches: u64,
    pub znodes: u64,
    pub ephemerals: u64,
    pub data_size: u64,
    pub last_zxid: i64,
}

/// Per-connection counters (the `stat` word's client list).
#[derive(Debug)]
pub(crate) struct ConnMetrics {
    pub peer: SocketAddr,
    pub session: AtomicI64,
    pub received: AtomicU64,
    pub sent: AtomicU64,
    /// When the connection was accepted (`cons`: `established`).
    pub established: std::time::SystemTime,
    /// Requests read and not yet answered, in order, with their op and when they were read:
    /// replies leave in request order, so the writer pops one per reply (`cons`: `queued`).
    pending: Mutex<std::collections::VecDeque<(&'static str, Instant)>>,
    /// Reply latency of this connection (`cons`: `lat=min/avg/max`).
    pub latency: Mutex<Latency>,
    /// The last op answered and its xid/zxid (`cons`: `lop`, `lcxid`, `lzxid`).
    pub last: Mutex<LastOp>,
}

/// What `cons` reports about a connection's most recent reply (`ServerCnxn`'s `lastOp`,
/// `lastCxid`, `lastZxid`, `lastResponseTime`).
#[derive(Debug, Clone)]
pub(crate) struct LastOp {
    /// ZooKeeper's name of the op (`Request.op2String`); empty before the first reply.
    pub op: &'static str,
    /// The last non-negative xid answered; -1 before any. Like Apache's
    /// `updateStatsForResponse`, special xids (ping -2, auth -4, setWatches -8) leave it.
    pub cxid: i64,
    /// The zxid of the last reply header; -1 before any.
    pub zxid: i64,
    /// When the last reply was written (ms since the epoch); 0 before any.
    pub at_ms: i64,
}

impl Default for LastOp {
    fn default() -> Self {
        LastOp {
            op: "",
            cxid: -1,
            zxid: -1,
            at_ms: 0,
        }
    }
}

#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Latency {
    pub min_ms: u64,
    pub max_ms: u64,
    pub last_ms: u64,
    pub total_ms: u64,
    pub count: u64,
}

impl Latency {
    pub fn avg_ms(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.total_ms as f64 / self.count as f64
        }
    }
}

impl Metrics {
    pub fn new() -> Self {
        Metrics {
            started: Instant::now(),
            packets_received: AtomicU64::new(0),
            packets_sent: AtomicU64::new(0),
            outstanding: AtomicI64::new(0),
            latency: Mutex::new(Latency::default()),
            update_latency: Mutex::new(Latency::default()),
            read_latency: Mutex::new(Latency::default()),
            update_histogram: Mutex::new(Histogram::default()),
            read_histogram: Mutex::new(Histogram::default()),
            connections: Mutex::new(BTreeMap::new()),
            per_op: Mutex::new(BTreeMap::new()),
            fsync: Mutex::new(Histogram::default()),
            refused_connections: AtomicU64::new(0),
            tls_handshake_failures: AtomicU64::new(0),
            outbound_overflows: AtomicU64::new(0),
            trace_mask: AtomicI64::new(DEFAULT_TRACE_MASK),
        }
    }

    /// Several answered requests at once (one socket write's replies): each lock is taken once
    /// for the lot, each counted per op and in the update or read summary.
    pub fn record_ops(&self, done: &[(&'static str, Duration)]) {
        {
            let mut per_op = lock(&self.per_op);
            for (op, elapsed) in done {
                per_op.entry(op).or_default().observe(*elapsed);
            }
        }
        let mut update = lock(&self.update_latency);
        let mut read = lock(&self.read_latency);
        let mut update_histogram = lock(&self.update_histogram);
        let mut read_histogram = lock(&self.read_histogram);
        for &(op, elapsed) in done {
            match op {
                // Answered before Apache's pipeline: in neither of its latency summaries.
                "auth" | "sasl" => {}
                op if is_update(op) => {
                    update.record(elapsed);
                    update_histogram.observe(elapsed);
                }
                _ => {
                    read.record(elapsed);
                    read_histogram.observe(elapsed);
                }
            }
        }
    }

    /// Write-request latency as a histogram (`updatelatency`'s quantiles).
    pub fn update_histogram(&self) -> Histogram {
        lock(&self.update_histogram).clone()
    }

    /// Read-request latency as a histogram (`readlatency`'s quantiles).
    pub fn read_histogram(&self) -> Histogram {
        lock(&self.read_histogram).clone()
    }

    /// Latency of write requests so far (`zk_*_updatelatency`).
    pub fn update_latency(&self) -> Latency {
        *lock(&self.update_latency)
    }

    /// Latency of the other requests so far (`zk_*_readlatency`).
    pub fn read_latency(&self) -> Latency {
        *lock(&self.read_latency)
    }

    /// One storage flush (a batch's append + fsync) took `elapsed`.
    pub fn record_fsync(&self, elapsed: Duration) {
        lock(&self.fsync).observe(elapsed);
    }

    /// Storage flush latency so far.
    pub fn fsync(&self) -> Histogram {
        lock(&self.fsync).clone()
    }

    /// Requests answered per op so far.
    pub fn op_counts(&self) -> Vec<(&'static str, u64)> {
        lock(&self.per_op)
            .iter()
            .map(|(op, h)| (*op, h.count()))
            .collect()
    }

    /// Everything in Prometheus' text exposition format (version 0.0.4).
    pub fn prometheus(&self, core: &CoreGauges) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let mut gauge = |name: &str, kind: &str, help: &str, value: String| {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}"
            );
        };
        gauge(
            "zkit_uptime_seconds",
            "gauge",
            "Seconds since the server started.",
            self.started.elapsed().as_secs_f64().to_string(),
        );
        gauge(
            "zkit_packets_received_total",
            "counter",
            "Packets received from clients.",
            self.packets_received.load(Relaxed).to_string(),
        );
        gauge(
            "zkit_packets_sent_total",
            "counter",
            "Packets sent to clients.",
            self.packets_sent.load(Relaxed).to_string(),
        );
        gauge(
            "zkit_connections",
            "gauge",
            "Live client connections.",
            self.connections().len().to_string(),
        );
        gauge(
            "zkit_refused_connections_total",
            "counter",
            "Connections refused by maxClientCnxns.",
            self.refused_connections.load(Relaxed).to_string(),
        );
        gauge(
            "zkit_tls_handshake_failures_total",
            "counter",
            "Connections of the secure client port whose TLS handshake failed.",
            self.tls_handshake_failures.load(Relaxed).to_string(),
        );
        gauge(
            "zkit_outbound_overflow_closes_total",
            "counter",
            "Connections closed because they did not read their replies and events.",
            self.outbound_overflows.load(Relaxed).to_string(),
        );
        gauge(
            "zkit_outstanding_requests",
            "gauge",
            "Requests received and not yet answered.",
            self.outstanding.load(Relaxed).max(0).to_string(),
        );
        gauge(
            "zkit_sessions",
            "gauge",
            "Live sessions.",
            core.sessions.to_string(),
        );
        gauge(
            "zkit_watches",
            "gauge",
            "Watch registrations.",
            core.watches.to_string(),
        );
        gauge(
            "zkit_znodes",
            "gauge",
            "Znodes, counted as ZooKeeper's zk_znode_count.",
            core.znodes.to_string(),
        );
        gauge(
            "zkit_ephemerals",
            "gauge",
            "Ephemeral znodes.",
            core.ephemerals.to_string(),
        );
        gauge(
            "zkit_approximate_data_size_bytes",
            "gauge",
            "Sum of path and data lengths of all znodes.",
            core.data_size.to_string(),
        );
        gauge(
            "zkit_last_zxid",
            "gauge",
            "The last applied zxid.",
            core.last_zxid.to_string(),
        );
        let _ = writeln!(
            out,
            "# HELP zkit_request_latency_seconds Request latency (read to reply written), per op.\n\
             # TYPE zkit_request_latency_seconds histogram"
        );
        for (op, h) in lock(&self.per_op).iter() {
            h.render(
                &mut out,
                "zkit_request_latency_seconds",
                &format!("op=\"{op}\""),
            );
        }
        let _ = writeln!(
            out,
            "# HELP zkit_requests_total Requests answered, per op.\n# TYPE zkit_requests_total counter"
        );
        for (op, count) in self.op_counts() {
            let _ = writeln!(out, "zkit_requests_total{{op=\"{op}\"}} {count}");
        }
        let _ = writeln!(
            out,
            "# HELP zkit_fsync_latency_seconds Storage flush (fsync) latency.\n\
             # TYPE zkit_fsync_latency_seconds histogram"
        );
        lock(&self.fsync).render(&mut out, "zkit_fsync_latency_seconds", "");
        out
    }

    pub fn add_connection(&self, conn: ConnId, peer: SocketAddr) -> Arc<ConnMetrics> {
        let m = Arc::new(ConnMetrics {
            peer,
            session: AtomicI64::new(0),
            received: AtomicU64::new(0),
            sent: AtomicU64::new(0),
            established: std::time::SystemTime::now(),
            pending: Mutex::new(std::collections::VecDeque::new()),
            latency: Mutex::new(Latency::default()),
            last: Mutex::new(LastOp::default()),
        });
        lock(&self.connections).insert(conn, m.clone());
        m
    }

    pub fn remove_connection(&self, conn: ConnId) {
        lock(&self.connections).remove(&conn);
    }

    pub fn connections_by_id(&self) -> Vec<(ConnId, Arc<ConnMetrics>)> {
        lock(&self.connections)
            .iter()
            .map(|(id, c)| (*id, c.clone()))
            .collect()
    }

    pub fn connections(&self) -> Vec<Arc<ConnMetrics>> {
        lock(&self.connections).values().cloned().collect()
    }

    /// The requests received at `received` were answered at `now`: one lock for the lot.
    pub fn record_latencies(&self, received: &[Instant], now: Instant) {
        let mut l = lock(&self.latency);
        for at in received {
            let ms =
                u64::try_from(now.saturating_duration_since(*at).as_millis()).unwrap_or(u64::MAX);
            l.min_ms = if l.count == 0 { ms } else { l.min_ms.min(ms) };
            l.max_ms = l.max_ms.max(ms);
            l.total_ms = l.total_ms.saturating_add(ms);
            l.count += 1;
        }
    }

    pub fn latency(&self) -> Latency {
        *lock(&self.latency)
    }

    /// `crst`: zero every connection's counters.
    pub fn reset_connections(&self) {
        for c in self.connections() {
            c.reset();
        }
    }

    /// `srst`: zero the server's packet and latency counters, as ZooKeeper's
    /// `ServerStats.reset`; per-connection counters are `crst`'s business.
    pub fn reset(&self) {
        self.packets_received.store(0, Relaxed);
        self.packets_sent.store(0, Relaxed);
        *lock(&self.latency) = Latency::default();
        // Apache's `srst` also resets every `ServerMetrics` summary.
        *lock(&self.update_latency) = Latency::default();
        *lock(&self.read_latency) = Latency::default();
    }
}

impl Latency {
    pub fn record(&mut self, elapsed: Duration) {
        let ms = u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX);
        self.min_ms = if self.count == 0 {
            ms
        } else {
            self.min_ms.min(ms)
        };
        self.max_ms = self.max_ms.max(ms);
        self.last_ms = ms;
        self.total_ms = self.total_ms.saturating_add(ms);
        self.count += 1;
    }
}

impl ConnMetrics {
    /// A request of `op` was read and handed to the pipeline.
    pub fn request_read(&self, op: &'static str, at: Instant) {
        lock(&self.pending).push_back((op, at));
    }

    /// The replies to the oldest `written.len()` pending requests (their `(xid, zxid)`) were
    /// written by one socket write: each lock is taken once for the lot (this runs per reply
    /// write, on every connection, so per-reply locking showed in profiles).
    pub fn replies_written(&self, server: &Metrics, written: &[(i32, i64)]) {
        let now = Instant::now();
        let mut done: Vec<(&'static str, Duration)> = Vec::with_capacity(written.len());
        let mut last_counted = None;
        {
            let mut pending = lock(&self.pending);
            for &(xid, zxid) in written {
                let Some((op, at)) = pending.pop_front() else {
                    break;
                };
                done.push((op, now.saturating_duration_since(at)));
                // Apache answers auth and sasl packets before its request pipeline: they never
                // become a connection's last op nor count in its latency (`cons`).
                if !matches!(op, "auth" | "sasl") {
                    last_counted = Some((op, xid, zxid));
                }
            }
        }
        server.record_ops(&done);
        {
            let mut latency = lock(&self.latency);
            for (_, elapsed) in done
                .iter()
                .filter(|(op, _)| !matches!(*op, "auth" | "sasl"))
            {
                latency.record(*elapsed);
            }
        }
        let Some((op, xid, zxid)) = last_counted else {
            return;
        };
        let at_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        let mut last = lock(&self.last);
        let cxid = if xid >= 0 { i64::from(xid) } else { last.cxid };
        *last = LastOp {
            op,
            cxid,
            zxid,
            at_ms,
        };
    }

    /// Requests read and not yet answered.
    pub fn queued(&self) -> usize {
        lock(&self.pending).len()
    }

    /// The latency summary of this connection.
    pub fn latency(&self) -> Latency {
        *lock(&self.latency)
    }

    /// The last reply.
    pub fn last(&self) -> LastOp {
        lock(&self.last).clone()
    }

    /// `crst` for this connection.
    pub fn reset(&self) {
        self.received.store(0, Relaxed);
        self.sent.store(0, Relaxed);
        *lock(&self.latency) = Latency::default();
        *lock(&self.last) = LastOp::default();
    }
}

/// Whether Apache turns a request of `op` into a txn (its `Request` then has a header and
/// counts in `UPDATE_LATENCY`): every write, including a standalone `check` and one that
/// fails validation (logged as an error txn).
fn is_update(op: &str) -> bool {
    matches!(
        op,
        "create"
            | "create2"
            | "createContainer"
            | "createTTL"
            | "delete"
            | "deleteContainer"
            | "setData"
            | "setACL"
            | "check"
            | "multi"
            | "reconfig"
            | "createSession"
            | "closeSession"
    )
}

/// ZooKeeper's name for an op (`Request.op2String`), for metrics labels and `cons`.
pub(crate) fn op_name(op: zkit_proto::op::OpCode) -> &'static str {
    use zkit_proto::op::OpCode as O;
    match op {
        O::Notification => "notification",
        O::Create => "create",
        O::Delete => "delete",
        O::Exists => "exists",
        O::GetData => "getData",
        O::SetData => "setData",
        O::GetAcl => "getACL",
        O::SetAcl => "setACL",
        O::GetChildren => "getChildren",
        O::Sync => "sync",
        O::Ping => "ping",
        O::GetChildren2 => "getChildren2",
        O::Check => "check",
        O::Multi => "multi",
        O::Create2 => "create2",
        O::Reconfig => "reconfig",
        O::CheckWatches => "checkWatches",
        O::RemoveWatches => "removeWatches",
        O::CreateContainer => "createContainer",
        O::DeleteContainer => "deleteContainer",
        O::CreateTtl => "createTTL",
        O::MultiRead => "multiRead",
        O::Auth => "auth",
        O::SetWatches => "setWatches",
        O::Sasl => "sasl",
        O::GetEphemerals => "getEphemerals",
        O::GetAllChildrenNumber => "getAllChildrenNumber",
        O::SetWatches2 => "setWatches2",
        O::AddWatch => "addWatch",
        O::WhoAmI => "whoAmI",
        O::CreateSession => "createSession",
        O::CloseSession => "closeSession",
        O::Error => "error",
    }
}

/// Locks, ignoring poisoning: counters stay meaningful even if a holder panicked.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn histogram(samples: &[(u64, u32)]) -> Histogram {
        let mut h = Histogram::default();
        for &(micros, times) in samples {
            for _ in 0..times {
                h.observe(Duration::from_micros(micros));
            }
        }
        h
    }

    #[test]
    fn quantiles_interpolate_within_the_bucket_and_stay_within_the_observations() {
        assert_eq!(Histogram::default().quantile(0.5), None);
        // One value: every quantile is it.
        let h = histogram(&[(2_000, 100)]);
        for q in [0.0, 0.5, 0.9, 0.99, 1.0] {
            assert!((h.quantile(q).unwrap() - 0.002).abs() < 1e-12, "{q}");
        }
        // 90 fast (1 ms) and 10 slow (200 ms): the median and p90 are fast, p99 sits 90% of
        // the way through the (0.1 s, 0.25 s] bucket, cut at the largest observation.
        let h = histogram(&[(1_000, 90), (200_000, 10)]);
        assert!((h.quantile(0.5).unwrap() - 0.001).abs() < 1e-12);
        assert!((h.quantile(0.9).unwrap() - 0.001).abs() < 1e-12);
        assert!((h.quantile(0.99).unwrap() - 0.19).abs() < 1e-9);
        assert!((h.quantile(1.0).unwrap() - 0.2).abs() < 1e-12);
        // Past the last bound (+Inf bucket): at most the largest observation.
        let h = histogram(&[(9_000_000, 3)]);
        assert!((h.quantile(0.99).unwrap() - 9.0).abs() < 1e-9);
    }
}
