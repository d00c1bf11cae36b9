//! `zkit bench server`: a load generator for any ZooKeeper-compatible server.
//!
//! It runs on zkit's client (`zkit-client`). Each session keeps up to `--in-flight` requests on
//! the wire (the client sends a request when it is called, which here is when its future is
//! first polled, and matches replies in xid order); latencies go into an HDR histogram in
//! microseconds. With `--rate`, requests are issued on a fixed schedule instead of as fast as
//! replies come back, and latency is counted from the scheduled time, so a stalled server cannot
//! hide its backlog (coordinated omission).
//!
//! It measures; it asserts nothing. `zkit-bench compare` (crates/zkit-bench) runs it against
//! `zkit serve` and Apache ZooKeeper side by side.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use futures::stream::{FuturesUnordered, StreamExt as _};
use hdrhistogram::Histogram;
use zkit_client as zk;

use super::bench_common::{new_histogram, pipelined, raise_fd_limit, record, spawn_progress};
pub use super::bench_common::{LoadReport, OpMix};
use super::conn::ConnArgs;
use super::plot;

/// Nodes that `get`, `set` and `mixed` pick from.
const KEY_COUNT: usize = 1000;

/// Arguments of `zkit bench server`.
#[derive(Debug, clap::Args)]
pub struct BenchServerArgs {
    /// The server under test.
    #[command(flatten)]
    pub conn: ConnArgs,
    /// Concurrent sessions (one TCP connection each, plus one for set-up). The default stays
    /// under the 60 connections per client address that zkit serve and Apache ZooKeeper allow
    /// by default (maxClientCnxns).
    #[arg(long, default_value_t = 50)]
    pub sessions: usize,
    /// Requests in flight per session.
    #[arg(long = "in-flight", alias = "inflight", default_value_t = 32)]
    pub inflight: usize,
    /// create | get | set | exists | mixed:PERCENT_READS (e.g. mixed:90).
    #[arg(long, default_value = "mixed:90")]
    pub ops: OpMix,
    /// Bytes of data per created or set node.
    #[arg(long, default_value_t = 100)]
    pub value_size: usize,
    /// Measured seconds.
    #[arg(long, default_value_t = 10)]
    pub seconds: u64,
    /// Offered load in requests per second over all sessions (open loop, latency counted from
    /// the scheduled send time); unset: as fast as replies come back.
    #[arg(long)]
    pub rate: Option<u64>,
    /// Parent of the per-run directory of nodes.
    #[arg(long, default_value = "/zkit-bench")]
    pub path: String,
    /// Leave the run's nodes on the server instead of deleting them.
    #[arg(long)]
    pub keep: bool,
    /// Print one JSON object instead of a text line.
    #[arg(long)]
    pub json: bool,
    /// Also draw the latency percentile distribution into this SVG file.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<std::path::PathBuf>,
    /// With `--ops create`: grow the run to this many nodes, then keep it there, each session
    /// deleting its oldest node for every node it creates (creates and deletes alternate, all
    /// of them durable writes), so a long run holds a tree of this size instead of growing
    /// without bound.
    #[arg(long, value_name = "N")]
    pub max_nodes: Option<u64>,
    /// With `--max-nodes`: stop once the tree has reached it, instead of holding it there (a
    /// populate; `--seconds` bounds it).
    #[arg(long, requires = "max_nodes")]
    pub fill: bool,
    /// Also report each window of this many seconds: its completed requests per second and
    /// its slowest request (how a long run's throughput and tail move over time).
    #[arg(long, value_name = "SECONDS")]
    pub interval: Option<u64>,
}

/// Completions and the slowest request of each window of a run (`--interval`).
struct Windows {
    width: Duration,
    start: Instant,
    completed: Vec<AtomicU64>,
    max_us: Vec<AtomicU64>,
}

impl Windows {
    fn new(width: Duration, start: Instant, duration: Duration) -> Windows {
        // One more window for the stragglers answered after the end.
        let n = (duration.as_secs_f64() / width.as_secs_f64()).ceil() as usize + 1;
        Windows {
            width,
            start,
            completed: (0..n).map(|_| AtomicU64::new(0)).collect(),
            max_us: (0..n).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Counts a request answered now after `latency`.
    fn record(&self, latency: Duration) {
        let at = (self.start.elapsed().as_secs_f64() / self.width.as_secs_f64()) as usize;
        let i = at.min(self.completed.len() - 1);
        self.completed[i].fetch_add(1, Ordering::Relaxed);
        let us = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        self.max_us[i].fetch_max(us, Ordering::Relaxed);
    }

    /// (start second, requests per second, slowest µs) of each window that saw a request,
    /// the stragglers' window last.
    fn rows(&self) -> WindowRows {
        let w = self.width.as_secs_f64();
        (0..self.completed.len())
            .map(|i| {
                let n = self.completed[i].load(Ordering::Relaxed);
                (
                    i as f64 * w,
                    n as f64 / w,
                    self.max_us[i].load(Ordering::Relaxed),
                )
            })
            .filter(|r| r.1 > 0.0)
            .collect()
    }
}

/// What a load run is asked to do.
#[derive(Debug, Clone)]
pub struct LoadSpec {
    /// Where and how to connect.
    pub conn: ConnArgs,
    /// Sessions.
    pub sessions: usize,
    /// Requests in flight per session.
    pub inflight: usize,
    /// Operation mix.
    pub ops: OpMix,
    /// Data bytes per write.
    pub value_size: usize,
    /// Measured time.
    pub duration: Duration,
    /// Offered load (requests/s over all sessions), or closed loop.
    pub rate: Option<u64>,
    /// Parent path of the run directory.
    pub path: String,
    /// Delete the run's nodes afterwards.
    pub cleanup: bool,
    /// Label of the progress line.
    pub label: String,
    /// `--max-nodes`: the size the run's tree is held at (create only).
    pub max_nodes: Option<u64>,
    /// `--interval`: the width of the reported windows.
    pub interval: Option<Duration>,
    /// `--fill`: stop at `max_nodes` instead of holding the tree there.
    pub fill: bool,
}

/// Runs `zkit bench server`.
pub async fn run(args: BenchServerArgs) -> anyhow::Result<std::process::ExitCode> {
    run_exit_code(args).await.map(super::process_exit)
}

/// What [`run`] does, with the exit code as a number.
async fn run_exit_code(args: BenchServerArgs) -> anyhow::Result<i32> {
    raise_fd_limit();
    let spec = LoadSpec {
        conn: args.conn.clone(),
        sessions: args.sessions.max(1),
        inflight: args.inflight.max(1),
        ops: args.ops,
        value_size: args.value_size,
        duration: Duration::from_secs(args.seconds.max(1)),
        rate: args.rate.filter(|r| *r > 0),
        path: args.path.clone(),
        cleanup: !args.keep,
        label: args.ops.to_string(),
        max_nodes: args.max_nodes.filter(|n| *n > 0),
        interval: args.interval.filter(|s| *s > 0).map(Duration::from_secs),
        fill: args.fill,
    };
    if spec.max_nodes.is_some() && spec.ops != OpMix::Create {
        anyhow::bail!("--max-nodes goes with --ops create");
    }
    let (report, windows) = run_load(&spec).await?;
    if let Some(file) = &args.plot {
        let series = [plot::Series {
            label: format!("{} on {}", report.ops, args.conn.server),
            points: report.percentiles.clone(),
        }];
        let title = format!("zkit bench server: {} latency", report.ops);
        let svg = plot::svg(&title, &series, 900, 540)?;
        std::fs::write(file, svg).with_context(|| format!("writing {}", file.display()))?;
    }
    if args.json {
        let mut json = report.json();
        if let Some(rows) = &windows {
            json["windows"] = rows
                .iter()
                .map(|(t, rate, max)| serde_json::json!({"t": t, "ops_per_sec": rate, "max_us": max}))
                .collect();
        }
        println!("{json}");
    } else {
        println!("{}", report.line());
        for (t, rate, max) in windows.iter().flatten() {
            println!(
                "  from {t:>6.0} s: {rate:>9.0} ops/s, slowest {}",
                super::bench_common::ms(*max)
            );
        }
    }
    Ok(if report.completed == 0 { 1 } else { 0 })
}

async fn connect(conn: &ConnArgs) -> Result<zk::Client> {
    conn.client().await
}

static RUN_COUNTER: AtomicU64 = AtomicU64::new(0);

/// A fresh run directory below `parent`.
fn run_dir(parent: &str) -> String {
    format!(
        "{}/r{}-{}",
        parent.trim_end_matches('/'),
        std::process::id(),
        RUN_COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// A small, fast, seeded generator: the mix must not cost the client more than the request.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
}

#[derive(Clone, Copy)]
enum Op {
    Create(u64),
    Delete(u64),
    Get(usize),
    Set(usize),
    Exists,
}

struct SessionOutcome {
    histogram: Histogram<u64>,
    completed: u64,
    errors: u64,
    created: u64,
    /// Its first node not deleted by `--max-nodes` (its nodes `first_live..created` remain).
    first_live: u64,
    first_error: Option<String>,
}

/// One session's loop: keep `inflight` requests outstanding (or follow the rate schedule) until
/// `end`, then wait for the stragglers.
#[allow(clippy::too_many_arguments)]
async fn session_loop(
    client: zk::Client,
    sid: usize,
    spec: Arc<LoadSpec>,
    dir: Arc<String>,
    keys: Arc<Vec<String>>,
    start: Instant,
    end: Instant,
    progress: Arc<AtomicU64>,
    windows: Option<Arc<Windows>>,
) -> SessionOutcome {
    let value = vec![b'x'; spec.value_size];
    let create = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
    let missing = format!("{dir}/missing");
    let mut rng = XorShift(0x9E37_79B9_7F4A_7C15 ^ ((sid as u64 + 1) << 17));
    let interval = spec.rate.map(|r| {
        Duration::from_secs_f64(spec.sessions as f64 / r as f64).max(Duration::from_nanos(1))
    });
    // Spread the sessions' schedules over one interval so they do not fire in lockstep.
    let mut next_due = start
        + interval.map_or(Duration::ZERO, |i| {
            i.mul_f64(sid as f64 / spec.sessions as f64)
        });
    let mut seq = 0u64;
    // --max-nodes: this session's share of the tree, and its oldest node still there.
    let share = spec
        .max_nodes
        .map(|n| n.div_ceil(spec.sessions as u64).max(1));
    let mut oldest = 0u64;
    let mut out = SessionOutcome {
        histogram: new_histogram(),
        completed: 0,
        errors: 0,
        created: 0,
        first_live: 0,
        first_error: None,
    };
    let mut inflight = FuturesUnordered::new();
    let (client, value, create, missing, keys) = (&client, &value, &create, &missing, &keys);
    let dir = &dir;
    loop {
        let now = Instant::now();
        // --fill: this session is done once its share is created.
        let filled = spec.fill && share.is_some_and(|s| seq >= s);
        let issuing = now < end && !filled;
        if !issuing && inflight.is_empty() {
            break;
        }
        while issuing && inflight.len() < spec.inflight {
            let due = match interval {
                None => now,
                Some(_) if next_due > now => break,
                Some(i) => {
                    let due = next_due;
                    next_due += i;
                    due
                }
            };
            let op = match spec.ops {
                // At its share, a session alternates: delete its oldest node, create a new one
                // (the delete follows that node's create on the session, so it is there).
                OpMix::Create if share.is_some_and(|s| seq - oldest >= s) => {
                    oldest += 1;
                    Op::Delete(oldest - 1)
                }
                OpMix::Create => {
                    seq += 1;
                    Op::Create(seq - 1)
                }
                OpMix::Get => Op::Get(rng.next() as usize % keys.len()),
                OpMix::Set => Op::Set(rng.next() as usize % keys.len()),
                OpMix::Exists => Op::Exists,
                OpMix::Mixed { read_percent } => {
                    let k = rng.next() as usize % keys.len();
                    if rng.next() % 100 < u64::from(read_percent) {
                        Op::Get(k)
                    } else {
                        Op::Set(k)
                    }
                }
            };
            // The request is written when this future is first polled, which the next
            // `inflight.next()` does right away; the clock starts at the scheduled time.
            inflight.push(async move {
                let t0 = if interval.is_some() {
                    due
                } else {
                    Instant::now()
                };
                let result = match op {
                    Op::Create(n) => {
                        let path = format!("{dir}/c{sid}-{n}");
                        client.create(&path, value, create).await.map(drop)
                    }
                    Op::Delete(n) => client.delete(&format!("{dir}/c{sid}-{n}"), None).await,
                    Op::Get(k) => client.get_data(&keys[k]).await.map(drop),
                    Op::Set(k) => client.set_data(&keys[k], value, None).await.map(drop),
                    Op::Exists => match client.check_stat(missing).await {
                        Ok(None) => Ok(()),
                        Ok(Some(_)) => Err(zk::Error::NodeExists),
                        Err(e) => Err(e),
                    },
                };
                (t0.elapsed(), result)
            });
        }
        let waiting_for_schedule = interval.is_some() && issuing && inflight.len() < spec.inflight;
        tokio::select! {
            Some((latency, result)) = inflight.next(), if !inflight.is_empty() => {
                match result {
                    Ok(()) => {
                        out.completed += 1;
                        record(&mut out.histogram, latency);
                        if let Some(w) = &windows {
                            w.record(latency);
                        }
                    }
                    Err(e) => {
                        out.errors += 1;
                        out.first_error.get_or_insert_with(|| e.to_string());
                    }
                }
                progress.fetch_add(1, Ordering::Relaxed);
            }
            () = tokio::time::sleep_until(next_due.into()), if waiting_for_schedule => {}
            else => break,
        }
    }
    out.created = seq;
    out.first_live = oldest;
    out
}

/// (start second, requests per second, slowest µs) of each window of a run.
type WindowRows = Vec<(f64, f64, u64)>;

/// Runs one workload and reports its figures, and with [`LoadSpec::interval`] those of each
/// window.
pub async fn run_load(spec: &LoadSpec) -> Result<(LoadReport, Option<WindowRows>)> {
    let setup = connect(&spec.conn).await?;
    let dir = run_dir(&spec.path);
    super::node::ensure_path(&setup, &dir).await?;
    let keys: Vec<String> = match spec.ops {
        OpMix::Get | OpMix::Set | OpMix::Mixed { .. } => {
            (0..KEY_COUNT).map(|i| format!("{dir}/k{i}")).collect()
        }
        OpMix::Create | OpMix::Exists => vec![dir.clone()],
    };
    if keys.len() > 1 {
        let value = vec![b'x'; spec.value_size];
        let options = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
        pipelined(keys.len(), 256, |i| {
            let (setup, keys, value, options) = (&setup, &keys, &value, &options);
            async move {
                setup
                    .create(&keys[i], value, options)
                    .await
                    .map(drop)
                    .with_context(|| format!("creating {}", keys[i]))
            }
        })
        .await?;
    }

    let mut clients = Vec::with_capacity(spec.sessions);
    let mut connecting = FuturesUnordered::new();
    for _ in 0..spec.sessions {
        connecting.push(connect(&spec.conn));
    }
    while let Some(client) = connecting.next().await {
        clients.push(client.with_context(|| {
            format!(
                "opening session {} of {} (--sessions; a server allows 60 connections per client \
                 address unless its maxClientCnxns says otherwise)",
                clients.len() + 1,
                spec.sessions
            )
        })?);
    }
    drop(connecting);

    let spec_arc = Arc::new(spec.clone());
    let dir_arc = Arc::new(dir.clone());
    let keys = Arc::new(keys);
    let progress = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    spawn_progress(spec.label.clone(), progress.clone(), done.clone());
    let start = Instant::now();
    let end = start + spec.duration;
    let windows = spec
        .interval
        .map(|w| Arc::new(Windows::new(w, start, spec.duration)));
    let tasks: Vec<_> = clients
        .into_iter()
        .enumerate()
        .map(|(sid, client)| {
            tokio::spawn(session_loop(
                client,
                sid,
                spec_arc.clone(),
                dir_arc.clone(),
                keys.clone(),
                start,
                end,
                progress.clone(),
                windows.clone(),
            ))
        })
        .collect();
    let mut histogram = new_histogram();
    let (mut completed, mut errors) = (0, 0);
    let mut first_error = None;
    let mut created = Vec::with_capacity(tasks.len());
    for task in tasks {
        let o = task.await.context("a load session panicked")?;
        histogram.add(&o.histogram).context("merging histograms")?;
        completed += o.completed;
        errors += o.errors;
        if first_error.is_none() {
            first_error = o.first_error;
        }
        created.push(o.first_live..o.created);
    }
    let elapsed = start.elapsed();
    done.store(true, Ordering::Relaxed);

    if spec.cleanup {
        cleanup(&setup, &dir, &keys, &created).await?;
    }
    let q = |p: f64| {
        if completed == 0 {
            0
        } else {
            histogram.value_at_quantile(p)
        }
    };
    let report = LoadReport {
        ops: spec.ops,
        sessions: spec.sessions,
        inflight: spec.inflight,
        completed,
        errors,
        elapsed,
        // A filling run ends when its nodes are made, not at --seconds.
        ops_per_sec: completed as f64
            / if spec.fill {
                elapsed.as_secs_f64()
            } else {
                spec.duration.as_secs_f64()
            },
        p50_us: q(0.5),
        p99_us: q(0.99),
        p999_us: q(0.999),
        max_us: if completed == 0 { 0 } else { histogram.max() },
        first_error,
        percentiles: plot::percentile_points(&histogram),
    };
    Ok((report, windows.map(|w| w.rows())))
}

/// Deletes what a run created: its keys, its `c{sid}-{n}` nodes still there (a create that
/// failed may not exist, hence NoNode is fine), then the run directory.
async fn cleanup(
    client: &zk::Client,
    dir: &str,
    keys: &[String],
    live: &[std::ops::Range<u64>],
) -> Result<()> {
    let mut paths: Vec<String> = keys.iter().filter(|k| k.as_str() != dir).cloned().collect();
    for (sid, range) in live.iter().enumerate() {
        paths.extend(range.clone().map(|i| format!("{dir}/c{sid}-{i}")));
    }
    pipelined(paths.len(), 256, |i| {
        let path = &paths[i];
        async move {
            match client.delete(path, None).await {
                Ok(()) | Err(zk::Error::NoNode) => Ok(()),
                Err(e) => Err(e).with_context(|| format!("deleting {path}")),
            }
        }
    })
    .await?;
    match client.delete(dir, None).await {
        Ok(()) | Err(zk::Error::NoNode) => Ok(()),
        Err(e) => Err(e).with_context(|| format!("deleting {dir}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn op_mix_parses_and_prints() {
        assert_eq!("create".parse(), Ok(OpMix::Create));
        assert_eq!("mixed".parse(), Ok(OpMix::Mixed { read_percent: 90 }));
        assert_eq!("mixed:75".parse(), Ok(OpMix::Mixed { read_percent: 75 }));
        assert!("mixed:101".parse::<OpMix>().is_err());
        assert!("delete".parse::<OpMix>().is_err());
        assert_eq!(OpMix::Mixed { read_percent: 90 }.to_string(), "mixed:90");
    }
}
