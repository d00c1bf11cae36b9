//! What `zkit bench server` shares with the compare harness of `zkit-bench`, which includes this
//! very file (as it does `plot.rs`): the operation mix, the figures of a run with their JSON form
//! (printed by `--json`, read back by the harness), latency histograms, the progress line,
//! sessions and requests in flight. A leaf: it uses nothing else of the crate.

use std::fmt::Write as _;
use std::io::{IsTerminal as _, Write as _};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use futures::stream::{FuturesUnordered, StreamExt as _};
use hdrhistogram::Histogram;
use serde_json::Value;
use zkit_client as zk;

/// Highest latency the histograms hold (60 s, in microseconds); longer ones are clamped.
const MAX_LATENCY_US: u64 = 60_000_000;
/// Session timeout the load generator asks for: long enough that a loaded 2-core machine does
/// not expire sessions mid-run, short enough that idle sessions ping every few seconds.
// Only zkit-bench connects by address; `zkit bench server` connects through its connection flags.
#[allow(dead_code)] // used where this file is included into zkit-bench
const SESSION_TIMEOUT: Duration = Duration::from_secs(10);

/// The operation mix of a load run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpMix {
    /// Create new persistent nodes (one per request).
    Create,
    /// getData on existing nodes.
    Get,
    /// setData on existing nodes.
    Set,
    /// `read_percent` % getData, the rest setData.
    Mixed {
        /// Share of reads, 0–100.
        read_percent: u8,
    },
    /// exists on a missing node: the cheapest request, a round trip through the server.
    Exists,
}

impl FromStr for OpMix {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "create" => Ok(OpMix::Create),
            "get" => Ok(OpMix::Get),
            "set" => Ok(OpMix::Set),
            "exists" => Ok(OpMix::Exists),
            "mixed" => Ok(OpMix::Mixed { read_percent: 90 }),
            other => match other.strip_prefix("mixed:").map(str::parse::<u8>) {
                Some(Ok(p)) if p <= 100 => Ok(OpMix::Mixed { read_percent: p }),
                _ => Err(format!(
                    "expected create, get, set, exists or mixed:PERCENT_READS, not {other:?}"
                )),
            },
        }
    }
}

impl std::fmt::Display for OpMix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OpMix::Create => f.write_str("create"),
            OpMix::Get => f.write_str("get"),
            OpMix::Set => f.write_str("set"),
            OpMix::Exists => f.write_str("exists"),
            OpMix::Mixed { read_percent } => write!(f, "mixed:{read_percent}"),
        }
    }
}

/// The figures of one load run.
#[derive(Debug, Clone)]
pub struct LoadReport {
    /// Operation mix.
    pub ops: OpMix,
    /// Sessions × in flight.
    pub sessions: usize,
    /// Requests in flight per session.
    pub inflight: usize,
    /// Requests answered successfully.
    pub completed: u64,
    /// Requests answered with an error.
    pub errors: u64,
    /// Measured wall time.
    pub elapsed: Duration,
    /// Successful requests per second.
    pub ops_per_sec: f64,
    /// Latency percentiles in microseconds: p50, p99, p99.9, max.
    pub p50_us: u64,
    /// 99th percentile.
    pub p99_us: u64,
    /// 99.9th percentile.
    pub p999_us: u64,
    /// Slowest request.
    pub max_us: u64,
    /// The first error seen, if any.
    pub first_error: Option<String>,
    /// The percentile distribution, (percentile in %, µs), for plots.
    pub percentiles: Vec<(f64, u64)>,
}

impl LoadReport {
    /// The JSON object `zkit bench server --json` prints.
    pub fn json(&self) -> Value {
        serde_json::json!({
            "ops": self.ops.to_string(),
            "sessions": self.sessions,
            "inflight": self.inflight,
            "completed": self.completed,
            "errors": self.errors,
            "seconds": self.elapsed.as_secs_f64(),
            "ops_per_sec": self.ops_per_sec,
            "latency_us": {
                "p50": self.p50_us, "p99": self.p99_us, "p99_9": self.p999_us, "max": self.max_us,
                "percentiles": self.percentiles,
            },
            "first_error": self.first_error,
        })
    }

    /// Reads the JSON object `zkit bench server --json` prints (`ops` comes from the spec).
    // Used by zkit-bench, which includes this file, and by the tests.
    #[allow(dead_code)]
    pub fn from_json(ops: OpMix, json: &Value) -> Result<LoadReport> {
        let u = |v: &Value, key: &str| -> Result<u64> {
            v.get(key)
                .and_then(Value::as_u64)
                .with_context(|| format!("no integer {key:?} in {json}"))
        };
        let f = |key: &str| -> Result<f64> {
            json.get(key)
                .and_then(Value::as_f64)
                .with_context(|| format!("no number {key:?} in {json}"))
        };
        let latency = json
            .get("latency_us")
            .with_context(|| format!("no latency_us in {json}"))?;
        Ok(LoadReport {
            ops,
            sessions: usize::try_from(u(json, "sessions")?)?,
            inflight: usize::try_from(u(json, "inflight")?)?,
            completed: u(json, "completed")?,
            errors: u(json, "errors")?,
            elapsed: Duration::from_secs_f64(f("seconds")?.max(0.0)),
            ops_per_sec: f("ops_per_sec")?,
            p50_us: u(latency, "p50")?,
            p99_us: u(latency, "p99")?,
            p999_us: u(latency, "p99_9")?,
            max_us: u(latency, "max")?,
            first_error: json
                .get("first_error")
                .and_then(Value::as_str)
                .map(str::to_string),
            percentiles: latency
                .get("percentiles")
                .and_then(Value::as_array)
                .map(|points| {
                    points
                        .iter()
                        .filter_map(|point| {
                            Some((point.get(0)?.as_f64()?, point.get(1)?.as_u64()?))
                        })
                        .collect()
                })
                .unwrap_or_default(),
        })
    }

    /// One line for progress output.
    pub fn line(&self) -> String {
        let mut s = format!(
            "{} sessions={} inflight={}: {:.0} ops/s ({} ok, {} errors in {:.1}s); latency \
             p50 {} p99 {} p99.9 {} max {}",
            self.ops,
            self.sessions,
            self.inflight,
            self.ops_per_sec,
            self.completed,
            self.errors,
            self.elapsed.as_secs_f64(),
            ms(self.p50_us),
            ms(self.p99_us),
            ms(self.p999_us),
            ms(self.max_us),
        );
        if let Some(e) = &self.first_error {
            let _ = write!(s, " (first error: {e})");
        }
        s
    }
}

/// Microseconds as milliseconds with three decimals.
pub fn ms(us: u64) -> String {
    format!("{:.3} ms", us as f64 / 1000.0)
}

/// An empty latency histogram, 1 µs to 60 s at three significant digits.
pub fn new_histogram() -> Histogram<u64> {
    // 3 significant digits over 1 µs..60 s: the bounds are constants, so this cannot fail.
    Histogram::new_with_bounds(1, MAX_LATENCY_US, 3).expect("constant histogram bounds are valid")
}

/// Records `d` in microseconds, clamped to the histogram's range.
pub fn record(h: &mut Histogram<u64>, d: Duration) {
    let us = u64::try_from(d.as_micros()).unwrap_or(MAX_LATENCY_US);
    h.saturating_record(us.clamp(1, MAX_LATENCY_US));
}

/// Prints `label: N ops, R/s` on stderr every half second while `done` is false; only on a
/// terminal, so logs and pipes stay clean.
pub fn spawn_progress(label: String, count: Arc<AtomicU64>, done: Arc<AtomicBool>) {
    if !std::io::stderr().is_terminal() {
        return;
    }
    tokio::spawn(async move {
        let start = Instant::now();
        while !done.load(Ordering::Relaxed) {
            tokio::time::sleep(Duration::from_millis(500)).await;
            let n = count.load(Ordering::Relaxed);
            let secs = start.elapsed().as_secs_f64();
            eprint!(
                "\r\x1b[K  {label}: {n} ops, {:.0}/s, {secs:.0}s",
                n as f64 / secs.max(0.001)
            );
            let _ = std::io::stderr().flush();
        }
        eprint!("\r\x1b[K");
    });
}

/// Opens one session with the load generator's session timeout (zkit-bench's harness; `zkit
/// bench server` connects through its connection flags instead).
#[allow(dead_code)] // used where this file is included into zkit-bench
pub async fn connect(server: &str) -> Result<zk::Client> {
    zk::Client::connector()
        .with_session_timeout(SESSION_TIMEOUT)
        .connect(server)
        .await
        .with_context(|| format!("connecting to {server}"))
}

/// Runs `work(i)` for `i in 0..count` with up to `window` of them in flight.
pub async fn pipelined<F, Fut>(count: usize, window: usize, work: F) -> Result<()>
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = Result<()>>,
{
    collect_pipelined(count, window, work).await.map(drop)
}

/// [`pipelined`] that returns the results (in completion order); the first error ends it.
pub async fn collect_pipelined<T, F, Fut>(count: usize, window: usize, work: F) -> Result<Vec<T>>
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    let mut out = Vec::with_capacity(count);
    let mut next = 0;
    let mut inflight = FuturesUnordered::new();
    loop {
        while next < count && inflight.len() < window {
            inflight.push(work(next));
            next += 1;
        }
        match inflight.next().await {
            Some(result) => out.push(result?),
            None => return Ok(out),
        }
    }
}

/// Lifts the soft open-files limit to the hard one: 10,000 idle sessions are 10,000 sockets.
pub fn raise_fd_limit() {
    #[cfg(unix)]
    {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit/setrlimit only read/write the struct we pass.
        #[allow(unsafe_code)]
        unsafe {
            if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0
                && limit.rlim_cur < limit.rlim_max
            {
                limit.rlim_cur = limit.rlim_max;
                libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_json_a_run_prints_reads_back_as_the_same_report() {
        let report = LoadReport {
            ops: OpMix::Mixed { read_percent: 90 },
            sessions: 4,
            inflight: 8,
            completed: 1234,
            errors: 2,
            elapsed: Duration::from_millis(2500),
            ops_per_sec: 493.6,
            p50_us: 410,
            p99_us: 2900,
            p999_us: 7100,
            max_us: 9000,
            first_error: Some("connection loss".into()),
            percentiles: vec![(50.0, 410), (99.0, 2900), (100.0, 9000)],
        };
        let text = report.json().to_string();
        let back =
            LoadReport::from_json(report.ops, &serde_json::from_str(&text).unwrap()).unwrap();
        assert_eq!(back.line(), report.line());
        assert_eq!(back.percentiles, report.percentiles);
        assert_eq!(back.elapsed, report.elapsed);
    }

    #[test]
    fn a_report_without_its_latency_is_refused() {
        let json = serde_json::json!({"sessions": 1, "inflight": 1, "completed": 1, "errors": 0,
            "seconds": 1.0, "ops_per_sec": 1.0});
        assert!(LoadReport::from_json(OpMix::Get, &json).is_err());
    }
}
