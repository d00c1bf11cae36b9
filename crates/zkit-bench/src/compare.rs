//! `zkit-bench compare`: a side-by-side run of `zkit serve` against Apache ZooKeeper.
//!
//! It starts both servers (one at a time, fresh for each phase, fsync on, data directories side
//! by side on the same disk), runs the same workloads against each — the pipelined and latency
//! workloads with `zkit bench server` (the `zkit` binary under test), the memory, idle-session
//! and watch-storm phases with zkit-client in this process —, reads server RSS from
//! `/proc/PID/status` and data-directory size at the end of each phase, prints a table of
//! figures and ratios, reports which of the performance targets held, and writes
//! `docs/PERFORMANCE.md`.
//!
//! It measures; it asserts nothing: a target that does not hold is reported, not an error. Every
//! phase is bounded in time and every server it starts is stopped on the way out.

use std::fmt::Write as _;
use std::io::{IsTerminal as _, Write as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use futures::stream::{FuturesUnordered, StreamExt as _};
use hdrhistogram::Histogram;
use zkit_client as zk;

use crate::load::{ms, run_load, LoadReport, LoadSpec, OpMix};
use crate::plot;
use crate::servers::{disk_usage, free_port, zkit_binary, RunningServer};

/// Upper bound of the latency histograms (60 s), in microseconds.
const MAX_LATENCY_US: u64 = 60_000_000;
/// Session timeout of the harness's own sessions.
const SESSION_TIMEOUT: Duration = Duration::from_secs(10);

/// Arguments of `zkit-bench compare`.
#[derive(Debug, clap::Args)]
pub struct BenchCompareArgs {
    /// Small sizes and short runs: the whole comparison in under a minute (a smoke run; the
    /// memory figures then mostly show each server's baseline).
    #[arg(long)]
    pub quick: bool,
    /// Measured seconds per throughput/latency workload [default: 10, quick: 2].
    #[arg(long)]
    pub seconds: Option<u64>,
    /// Sessions of the pipelined workloads.
    #[arg(long, default_value_t = 64)]
    pub sessions: usize,
    /// Requests in flight per session in the pipelined workloads.
    #[arg(long, default_value_t = 32)]
    pub inflight: usize,
    /// Bytes per node value.
    #[arg(long, default_value_t = 100)]
    pub value_size: usize,
    /// Znodes of the memory workload [default: 1000000, quick: 20000].
    #[arg(long)]
    pub nodes: Option<usize>,
    /// Idle sessions, each with one watch [default: 10000, quick: 1000].
    #[arg(long)]
    pub idle_sessions: Option<usize>,
    /// Watchers (one session each) of the watch storm's single write [default: 10000,
    /// quick: 1000].
    #[arg(long)]
    pub watchers: Option<usize>,
    /// Directory holding both servers' data directories (same disk for both); created, and
    /// removed at the end unless --keep-work-dir [default: ./target/bench-compare-PID].
    #[arg(long)]
    pub work_dir: Option<PathBuf>,
    /// Keep the work directory (data dirs, Apache's log) after the run.
    #[arg(long)]
    pub keep_work_dir: bool,
    /// The Apache ZooKeeper start/stop script (a checkout's scripts/apache-zk)
    /// [default: scripts/apache-zk in the current directory].
    #[arg(long, default_value = "scripts/apache-zk")]
    pub apache_script: PathBuf,
    /// The `zkit` binary under test (`zkit serve`, `zkit bench server`) [default: the `zkit`
    /// next to this executable, else `zkit` on PATH].
    #[arg(long)]
    pub zkit: Option<PathBuf>,
    /// Apache ZooKeeper's JVM heap limit (-Xmx): 1,000,000 znodes do not fit the script's
    /// 512m default.
    #[arg(long, default_value = "1g")]
    pub apache_heap: String,
    /// Only measure zkit (no Java needed; no ratios).
    #[arg(long)]
    pub zkit_only: bool,
    /// Client port for zkit [default: a free one].
    #[arg(long)]
    pub zkit_port: Option<u16>,
    /// Client port for Apache ZooKeeper [default: a free one].
    #[arg(long)]
    pub apache_port: Option<u16>,
    /// Where to write the report; `-` for nowhere [default: docs/PERFORMANCE.md in the
    /// current directory].
    #[arg(long, default_value = "docs/PERFORMANCE.md")]
    pub output: PathBuf,
    /// Where to draw both servers' latency percentile distributions (SVG), which the report
    /// embeds; `-` for nowhere [default: perf-latency.svg next to the report].
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    /// The command line to record in the report [default: this process's own].
    #[arg(long, env = "ZKIT_BENCH_COMMAND", hide = true)]
    pub command_line: Option<String>,
}

/// Sizes of one compare run.
#[derive(Debug, Clone)]
struct CompareSizes {
    seconds: u64,
    sync_seconds: u64,
    nodes: usize,
    idle_sessions: usize,
    watchers: usize,
    idle_window: Duration,
    fsync_samples: usize,
}

/// Opens one session of the harness's own.
async fn connect(server: &str) -> Result<zk::Client> {
    zk::Client::connector()
        .with_session_timeout(SESSION_TIMEOUT)
        .connect(server)
        .await
        .with_context(|| format!("connecting to {server}"))
}

/// Creates `path` and its missing ancestors (persistent, open ACL).
async fn ensure_path(client: &zk::Client, path: &str) -> Result<()> {
    let options = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
    let mut prefix = String::new();
    for part in path.split('/').filter(|p| !p.is_empty()) {
        prefix.push('/');
        prefix.push_str(part);
        match client.create(&prefix, b"", &options).await {
            Ok(_) | Err(zk::Error::NodeExists) => {}
            Err(e) => return Err(e).with_context(|| format!("creating {prefix}")),
        }
    }
    Ok(())
}

/// Runs `work(i)` for `i in 0..count` with up to `window` of them in flight.
async fn pipelined<F, Fut>(count: usize, window: usize, work: F) -> Result<()>
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = Result<()>>,
{
    let mut next = 0;
    let mut inflight = FuturesUnordered::new();
    loop {
        while next < count && inflight.len() < window {
            inflight.push(work(next));
            next += 1;
        }
        match inflight.next().await {
            Some(result) => result?,
            None => return Ok(()),
        }
    }
}

/// Prints `label: N ops, R/s` on stderr every half second while `done` is false; only on a
/// terminal, so logs and pipes stay clean.
fn spawn_progress(label: String, count: Arc<AtomicU64>, done: Arc<AtomicBool>) {
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

/// Lifts the soft open-files limit to the hard one: 10,000 idle sessions are 10,000 sockets.
fn raise_fd_limit() {
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

fn new_histogram() -> Histogram<u64> {
    // 3 significant digits over 1 µs..60 s: the bounds are constants, so this cannot fail.
    Histogram::new_with_bounds(1, MAX_LATENCY_US, 3).expect("constant histogram bounds are valid")
}

fn record(h: &mut Histogram<u64>, d: Duration) {
    let us = u64::try_from(d.as_micros()).unwrap_or(MAX_LATENCY_US);
    h.saturating_record(us.clamp(1, MAX_LATENCY_US));
}

/// The cost of one durable write on the data-dir disk: p50 of a 128-byte write + fdatasync.
#[derive(Debug, Clone, Copy)]
struct FdatasyncCost {
    /// Appending (the file grows, so the size must be journaled too).
    append: Duration,
    /// Writing sequentially into a segment pre-allocated with fallocate(2), as zkit's WAL
    /// does: the figure the sync-write target uses.
    in_place: Duration,
}

/// Measures [`FdatasyncCost`] with `samples` writes of each kind in `dir`.
fn fdatasync_cost(dir: &Path, samples: usize) -> Result<FdatasyncCost> {
    use std::io::{Seek as _, SeekFrom};
    std::fs::create_dir_all(dir)?;
    let path = dir.join("fdatasync-probe");
    let record_bytes = [b'x'; 128];
    let measure = |file: &mut std::fs::File| -> Result<Duration> {
        let mut h = new_histogram();
        for _ in 0..samples {
            let t0 = Instant::now();
            file.write_all(&record_bytes)?;
            file.sync_data()?;
            record(&mut h, t0.elapsed());
        }
        Ok(Duration::from_micros(h.value_at_quantile(0.5)))
    };
    let mut file = std::fs::File::create(&path)?;
    let append = measure(&mut file)?;
    drop(file);
    std::fs::remove_file(&path)?;
    let mut file = std::fs::File::create(&path)?;
    let len = ((samples + 1) * record_bytes.len()) as libc::off_t;
    {
        use std::os::fd::AsRawFd as _;
        // SAFETY: fallocate on a file descriptor we own, with a valid range.
        #[allow(unsafe_code)]
        let rc = unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, len) };
        if rc != 0 {
            // No fallocate here: zero-fill instead.
            file.write_all(&vec![0u8; len as usize])?;
        }
    }
    file.sync_all()?;
    file.seek(SeekFrom::Start(0))?;
    let in_place = measure(&mut file)?;
    drop(file);
    std::fs::remove_file(&path)?;
    Ok(FdatasyncCost { append, in_place })
}

/// Figures of one server.
#[derive(Debug, Default, Clone)]
struct ServerFigures {
    rtt: Option<LoadReport>,
    sync_write: Option<LoadReport>,
    sync_read: Option<LoadReport>,
    pipelined: Vec<LoadReport>,
    phase1_rss: Option<u64>,
    phase1_cpu: Option<Duration>,
    rated: Option<LoadReport>,
    offered_rate: Option<u64>,
    populate: Option<(usize, Duration)>,
    nodes_rss: Option<u64>,
    nodes_disk: Option<u64>,
    idle_rss: Option<u64>,
    idle_cpu_percent: Option<f64>,
    storm: Option<Duration>,
    storm_delivered: Option<usize>,
    final_disk: Option<u64>,
}

fn load_spec(server: &RunningServer, ops: OpMix, sessions: usize, inflight: usize) -> LoadSpec {
    LoadSpec {
        server: server.addr().to_string(),
        sessions,
        inflight,
        ops,
        value_size: 100,
        duration: Duration::from_secs(1),
        rate: None,
        path: "/zkit-bench".into(),
        cleanup: false,
    }
}

/// Phase 1: latency and pipelined throughput.
async fn phase_one(
    zkit: &Path,
    server: &RunningServer,
    args: &BenchCompareArgs,
    sizes: &CompareSizes,
    figures: &mut ServerFigures,
) -> Result<()> {
    let sync = |ops| LoadSpec {
        duration: Duration::from_secs(sizes.sync_seconds),
        value_size: args.value_size,
        ..load_spec(server, ops, 1, 1)
    };
    let cpu0 = server.cpu();
    figures.rtt = Some(report(
        run_load(zkit, &sync(OpMix::Exists)).await?,
        server,
        "rtt (exists)",
    ));
    figures.sync_write = Some(report(
        run_load(zkit, &sync(OpMix::Set)).await?,
        server,
        "sync set",
    ));
    figures.sync_read = Some(report(
        run_load(zkit, &sync(OpMix::Get)).await?,
        server,
        "sync get",
    ));
    for ops in [
        OpMix::Create,
        OpMix::Get,
        OpMix::Set,
        OpMix::Mixed { read_percent: 90 },
    ] {
        let spec = LoadSpec {
            duration: Duration::from_secs(sizes.seconds),
            value_size: args.value_size,
            ..load_spec(server, ops, args.sessions, args.inflight)
        };
        let r = run_load(zkit, &spec).await?;
        figures.pipelined.push(report(r, server, "pipelined"));
    }
    figures.phase1_rss = server.rss();
    figures.phase1_cpu = server.cpu().zip(cpu0).map(|(b, a)| b.saturating_sub(a));
    Ok(())
}

fn report(r: LoadReport, server: &RunningServer, what: &str) -> LoadReport {
    eprintln!("  {} {what}: {}", server.which.name(), r.line());
    r
}

/// Phase 2: p99 at a fixed offered load, then memory with N znodes, idle sessions, watch storm.
async fn phase_two(
    zkit: &Path,
    server: &RunningServer,
    args: &BenchCompareArgs,
    sizes: &CompareSizes,
    rate: u64,
    figures: &mut ServerFigures,
) -> Result<()> {
    let spec = LoadSpec {
        duration: Duration::from_secs(sizes.seconds),
        value_size: args.value_size,
        rate: Some(rate),
        ..load_spec(
            server,
            OpMix::Mixed { read_percent: 90 },
            args.sessions,
            args.inflight,
        )
    };
    figures.rated = Some(report(
        run_load(zkit, &spec).await?,
        server,
        &format!("rated {rate}/s"),
    ));
    figures.offered_rate = Some(rate);

    // Memory: N znodes of value_size bytes, created by `sessions` sessions in parallel.
    let took = populate(
        server.addr(),
        sizes.nodes,
        args.value_size,
        args.sessions,
        args.inflight,
    )
    .await?;
    figures.populate = Some((sizes.nodes, took));
    eprintln!(
        "  {}: {} znodes in {:.1}s ({:.0}/s)",
        server.which.name(),
        sizes.nodes,
        took.as_secs_f64(),
        sizes.nodes as f64 / took.as_secs_f64()
    );
    figures.nodes_rss = server.rss();
    figures.nodes_disk = Some(disk_usage(&server.data_dir));

    // Idle sessions with one watch each; the first `watchers` of them watch the storm node.
    let sessions = sizes.idle_sessions.max(sizes.watchers);
    let (idle_rss, cpu_percent, storm, delivered) =
        idle_and_storm(server, sessions, sizes.watchers, sizes.idle_window).await?;
    figures.idle_rss = idle_rss;
    figures.idle_cpu_percent = cpu_percent;
    figures.storm = storm;
    figures.storm_delivered = Some(delivered);
    figures.final_disk = Some(disk_usage(&server.data_dir));
    Ok(())
}

/// Creates `/zkit-mem/n{i}` for i < nodes with `sessions × inflight` requests in flight; returns
/// the time the creates took (the sessions are opened before the clock starts).
async fn populate(
    addr: &str,
    nodes: usize,
    value_size: usize,
    sessions: usize,
    inflight: usize,
) -> Result<Duration> {
    let setup = connect(addr).await?;
    ensure_path(&setup, "/zkit-mem").await?;
    let mut tasks = Vec::new();
    let per = nodes.div_ceil(sessions.max(1));
    let progress = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let mut clients = Vec::with_capacity(sessions.max(1));
    let mut connecting: FuturesUnordered<_> = (0..sessions.max(1)).map(|_| connect(addr)).collect();
    while let Some(client) = connecting.next().await {
        clients.push(client?);
    }
    drop(connecting);
    spawn_progress("populate".into(), progress.clone(), done.clone());
    let t0 = Instant::now();
    for (s, client) in clients.into_iter().enumerate() {
        let range = (s * per).min(nodes)..((s + 1) * per).min(nodes);
        let progress = progress.clone();
        tasks.push(tokio::spawn(async move {
            let value = vec![b'x'; value_size];
            let options = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
            let start = range.start;
            let result = pipelined(range.len(), inflight.max(1), |i| {
                let (client, value, options, progress) = (&client, &value, &options, &progress);
                async move {
                    let path = format!("/zkit-mem/n{}", start + i);
                    let r = client.create(&path, value, options).await;
                    progress.fetch_add(1, Ordering::Relaxed);
                    match r {
                        Ok(_) | Err(zk::Error::NodeExists) => Ok(()),
                        Err(e) => Err(e).with_context(|| format!("creating {path}")),
                    }
                }
            })
            .await;
            // A named result: the future borrows this block's locals, so it must be dropped
            // before they are.
            result
        }));
    }
    let mut result = Ok(());
    for t in tasks {
        let r = t.await.context("a populate session panicked")?;
        if result.is_ok() {
            result = r;
        }
    }
    let took = t0.elapsed();
    done.store(true, Ordering::Relaxed);
    result.map(|()| took)
}

/// Opens `sessions` sessions, each with one watch, waits `window` (pings only), then writes the
/// storm node once and times how long until all `watchers` got the event.
async fn idle_and_storm(
    server: &RunningServer,
    sessions: usize,
    watchers: usize,
    window: Duration,
) -> Result<(Option<u64>, Option<f64>, Option<Duration>, usize)> {
    let setup = connect(server.addr()).await?;
    ensure_path(&setup, "/zkit-idle/storm").await?;
    let progress = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    spawn_progress("idle sessions".into(), progress.clone(), done.clone());
    let (fired_tx, mut fired_rx) = tokio::sync::mpsc::unbounded_channel::<Instant>();
    let mut clients = Vec::with_capacity(sessions);
    let mut watch_tasks = Vec::new();
    let mut opening = FuturesUnordered::new();
    let mut next = 0;
    let addr = server.addr().to_string();
    // Open in windows of 64: a burst of 10,000 connects would mostly measure accept backlogs.
    loop {
        while next < sessions && opening.len() < 64 {
            let addr = addr.clone();
            let i = next;
            opening.push(async move {
                let client = connect(&addr).await?;
                let watcher = if i < watchers {
                    let (_, _, w) = client.get_and_watch_data("/zkit-idle/storm").await?;
                    w
                } else {
                    let (_, w) = client
                        .check_and_watch_stat(&format!("/zkit-idle/none-{i}"))
                        .await?;
                    w
                };
                anyhow::Ok((i, client, watcher))
            });
            next += 1;
        }
        match opening.next().await {
            Some(r) => {
                let (i, client, watcher) = r?;
                progress.fetch_add(1, Ordering::Relaxed);
                clients.push(client);
                if i < watchers {
                    let tx = fired_tx.clone();
                    watch_tasks.push(tokio::spawn(async move {
                        let _ = watcher.changed().await;
                        let _ = tx.send(Instant::now());
                    }));
                } else {
                    // Hold the watch for the run (dropping the watcher would not remove the
                    // server-side watch, but keep it alive all the same).
                    watch_tasks.push(tokio::spawn(async move {
                        let _ = watcher.changed().await;
                    }));
                }
            }
            None => break,
        }
    }
    done.store(true, Ordering::Relaxed);
    drop(fired_tx);

    let cpu0 = server.cpu();
    let t0 = Instant::now();
    tokio::time::sleep(window).await;
    let cpu_percent = server
        .cpu()
        .zip(cpu0)
        .map(|(b, a)| 100.0 * b.saturating_sub(a).as_secs_f64() / t0.elapsed().as_secs_f64());
    let rss = server.rss();
    eprintln!(
        "  {}: {sessions} idle sessions: RSS {}, CPU {:.1} %",
        server.which.name(),
        rss.map_or("?".into(), mib),
        cpu_percent.unwrap_or(f64::NAN)
    );

    let start = Instant::now();
    setup.set_data("/zkit-idle/storm", b"storm", None).await?;
    let deadline = start + Duration::from_secs(60);
    let mut delivered = 0;
    let mut last = start;
    while delivered < watchers {
        match tokio::time::timeout_at(deadline.into(), fired_rx.recv()).await {
            Ok(Some(at)) => {
                delivered += 1;
                last = last.max(at);
            }
            Ok(None) | Err(_) => break,
        }
    }
    let storm = (delivered == watchers).then(|| last - start);
    eprintln!(
        "  {}: watch storm: {delivered}/{watchers} watchers in {:.1} ms",
        server.which.name(),
        (last - start).as_secs_f64() * 1000.0
    );
    for t in &watch_tasks {
        t.abort();
    }
    drop(clients);
    Ok((rss, cpu_percent, storm, delivered))
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

/// This machine, for the report.
fn machine_description() -> String {
    let cpus = std::thread::available_parallelism().map_or(0, usize::from);
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map_or("unknown".to_string(), |m| m.trim().to_string());
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem_kb: u64 = meminfo
        .lines()
        .find(|l| l.starts_with("MemTotal:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    format!(
        "{cpus} CPUs ({model}), {:.1} GiB RAM, Linux {}",
        mem_kb as f64 / (1024.0 * 1024.0),
        kernel.trim()
    )
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

fn java_version() -> String {
    std::process::Command::new("java")
        .arg("-version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stderr).ok())
        .and_then(|s| s.lines().next().map(str::to_string))
        .unwrap_or_else(|| "unknown".into())
}

/// One table row: a figure of each server and how they compare.
struct Row {
    workload: String,
    metric: &'static str,
    zkit: Option<f64>,
    apache: Option<f64>,
    unit: Unit,
}

#[derive(Clone, Copy)]
enum Unit {
    OpsPerSec,
    Millis,
    Bytes,
    Percent,
    Count,
    Seconds,
}

impl Unit {
    fn show(self, v: Option<f64>) -> String {
        let Some(v) = v else { return "–".into() };
        match self {
            Unit::OpsPerSec => format!("{v:.0}/s"),
            Unit::Millis => format!("{v:.3} ms"),
            Unit::Bytes => mib(v as u64),
            Unit::Percent => format!("{v:.1} %"),
            Unit::Count => format!("{v:.0}"),
            Unit::Seconds => format!("{v:.2} s"),
        }
    }
}

fn ratio(z: Option<f64>, a: Option<f64>) -> Option<f64> {
    match (z, a) {
        (Some(z), Some(a)) if a > 0.0 => Some(z / a),
        _ => None,
    }
}

fn rows(z: &ServerFigures, a: &ServerFigures) -> Vec<Row> {
    let us = |v: u64| Some(v as f64 / 1000.0);
    let mut rows = Vec::new();
    let mut lat = |name: &str, zr: &Option<LoadReport>, ar: &Option<LoadReport>| {
        rows.push(Row {
            workload: name.into(),
            metric: "p50",
            zkit: zr.as_ref().and_then(|r| us(r.p50_us)),
            apache: ar.as_ref().and_then(|r| us(r.p50_us)),
            unit: Unit::Millis,
        });
        rows.push(Row {
            workload: name.into(),
            metric: "p99",
            zkit: zr.as_ref().and_then(|r| us(r.p99_us)),
            apache: ar.as_ref().and_then(|r| us(r.p99_us)),
            unit: Unit::Millis,
        });
    };
    lat("sync exists (RTT), 1 session", &z.rtt, &a.rtt);
    lat("sync set, 1 session", &z.sync_write, &a.sync_write);
    lat("sync get, 1 session", &z.sync_read, &a.sync_read);
    for (i, zr) in z.pipelined.iter().enumerate() {
        let ar = a.pipelined.get(i);
        let name = format!("pipelined {} ({}×{})", zr.ops, zr.sessions, zr.inflight);
        rows.push(Row {
            workload: name.clone(),
            metric: "throughput",
            zkit: Some(zr.ops_per_sec),
            apache: ar.map(|r| r.ops_per_sec),
            unit: Unit::OpsPerSec,
        });
        for (metric, f) in [
            ("p50", (|r: &LoadReport| r.p50_us) as fn(&LoadReport) -> u64),
            ("p99", |r: &LoadReport| r.p99_us),
            ("p99.9", |r: &LoadReport| r.p999_us),
        ] {
            rows.push(Row {
                workload: name.clone(),
                metric,
                zkit: us(f(zr)),
                apache: ar.and_then(|r| us(f(r))),
                unit: Unit::Millis,
            });
        }
    }
    rows.push(Row {
        workload: "after the above".into(),
        metric: "server CPU time",
        zkit: z.phase1_cpu.map(|d| d.as_secs_f64()),
        apache: a.phase1_cpu.map(|d| d.as_secs_f64()),
        unit: Unit::Seconds,
    });
    rows.push(Row {
        workload: "after the above".into(),
        metric: "RSS",
        zkit: z.phase1_rss.map(|v| v as f64),
        apache: a.phase1_rss.map(|v| v as f64),
        unit: Unit::Bytes,
    });
    if let Some(zr) = &z.rated {
        let name = format!(
            "mixed:90 at a fixed {}/s offered ({}×{})",
            z.offered_rate.unwrap_or(0),
            zr.sessions,
            zr.inflight
        );
        for (metric, zv, av) in [
            ("p50", zr.p50_us, a.rated.as_ref().map(|r| r.p50_us)),
            ("p99", zr.p99_us, a.rated.as_ref().map(|r| r.p99_us)),
            ("p99.9", zr.p999_us, a.rated.as_ref().map(|r| r.p999_us)),
        ] {
            rows.push(Row {
                workload: name.clone(),
                metric,
                zkit: us(zv),
                apache: av.and_then(us),
                unit: Unit::Millis,
            });
        }
    }
    let nodes = z.populate.map_or(0, |p| p.0);
    rows.push(Row {
        workload: format!("populate {nodes} znodes"),
        metric: "create rate",
        zkit: z.populate.map(|(n, d)| n as f64 / d.as_secs_f64()),
        apache: a.populate.map(|(n, d)| n as f64 / d.as_secs_f64()),
        unit: Unit::OpsPerSec,
    });
    rows.push(Row {
        workload: format!("{nodes} znodes"),
        metric: "RSS",
        zkit: z.nodes_rss.map(|v| v as f64),
        apache: a.nodes_rss.map(|v| v as f64),
        unit: Unit::Bytes,
    });
    rows.push(Row {
        workload: format!("{nodes} znodes"),
        metric: "data dir",
        zkit: z.nodes_disk.map(|v| v as f64),
        apache: a.nodes_disk.map(|v| v as f64),
        unit: Unit::Bytes,
    });
    rows.push(Row {
        workload: "+ idle sessions with a watch each".into(),
        metric: "RSS",
        zkit: z.idle_rss.map(|v| v as f64),
        apache: a.idle_rss.map(|v| v as f64),
        unit: Unit::Bytes,
    });
    rows.push(Row {
        workload: "+ idle sessions with a watch each".into(),
        metric: "server CPU (pings)",
        zkit: z.idle_cpu_percent,
        apache: a.idle_cpu_percent,
        unit: Unit::Percent,
    });
    rows.push(Row {
        workload: "watch storm (1 write)".into(),
        metric: "all delivered",
        zkit: z.storm.map(|d| d.as_secs_f64() * 1000.0),
        apache: a.storm.map(|d| d.as_secs_f64() * 1000.0),
        unit: Unit::Millis,
    });
    rows.push(Row {
        workload: "watch storm (1 write)".into(),
        metric: "events delivered",
        zkit: z.storm_delivered.map(|n| n as f64),
        apache: a.storm_delivered.map(|n| n as f64),
        unit: Unit::Count,
    });
    rows.push(Row {
        workload: "at the end".into(),
        metric: "data dir",
        zkit: z.final_disk.map(|v| v as f64),
        apache: a.final_disk.map(|v| v as f64),
        unit: Unit::Bytes,
    });
    rows
}

fn table(rows: &[Row]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| workload | metric | zkit | Apache ZooKeeper | zkit / Apache |"
    );
    let _ = writeln!(out, "|---|---|---:|---:|---:|");
    for r in rows {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} |",
            r.workload,
            r.metric,
            r.unit.show(r.zkit),
            r.unit.show(r.apache),
            ratio(r.zkit, r.apache).map_or("–".into(), |x| format!("{x:.2}"))
        );
    }
    out
}

/// The performance targets: (description, held?, the figures behind it).
fn targets(
    z: &ServerFigures,
    a: &ServerFigures,
    fdatasync: Duration,
) -> Vec<(String, Option<bool>, String)> {
    let mut out = Vec::new();
    let tput = |f: &ServerFigures, ops: OpMix| {
        f.pipelined
            .iter()
            .find(|r| r.ops == ops)
            .map(|r| r.ops_per_sec)
    };
    for (ops, what) in [
        (
            OpMix::Create,
            "pipelined write (create) throughput ≥ 2 × Apache",
        ),
        (OpMix::Set, "pipelined write (set) throughput ≥ 2 × Apache"),
        (OpMix::Get, "pipelined read (get) throughput ≥ 2 × Apache"),
    ] {
        let r = ratio(tput(z, ops), tput(a, ops));
        out.push((
            what.to_string(),
            r.map(|r| r >= 2.0),
            r.map_or("no Apache figure".into(), |r| format!("{r:.2} ×")),
        ));
    }
    let p99 = ratio(
        z.rated.as_ref().map(|r| r.p99_us as f64),
        a.rated.as_ref().map(|r| r.p99_us as f64),
    );
    out.push((
        "p99 latency ≤ 0.5 × Apache's at the same offered load (mixed:90)".into(),
        p99.map(|r| r <= 0.5),
        p99.map_or("no Apache figure".into(), |r| format!("{r:.2} ×")),
    ));
    let rss = ratio(z.nodes_rss.map(|v| v as f64), a.nodes_rss.map(|v| v as f64));
    let nodes = z.populate.map_or(0, |p| p.0);
    out.push((
        format!("RSS with {nodes} znodes ≤ 0.25 × Apache's"),
        rss.map(|r| r <= 0.25),
        rss.map_or("no Apache figure".into(), |r| format!("{r:.2} ×")),
    ));
    if let (Some(w), Some(rtt)) = (&z.sync_write, &z.rtt) {
        let bound = rtt.p50_us as f64 + fdatasync.as_micros() as f64 + 200.0;
        out.push((
            "sync write p50 ≤ RTT p50 + one fdatasync p50 + 0.2 ms".into(),
            Some(w.p50_us as f64 <= bound),
            format!(
                "{} vs {} ({} + {} + 0.200 ms)",
                ms(w.p50_us),
                ms(bound as u64),
                ms(rtt.p50_us),
                ms(fdatasync.as_micros() as u64)
            ),
        ));
    }
    out
}

/// Runs `zkit-bench compare`.
pub async fn run_compare(args: BenchCompareArgs) -> Result<i32> {
    raise_fd_limit();
    let quick = args.quick;
    let sizes = CompareSizes {
        seconds: args.seconds.unwrap_or(if quick { 2 } else { 10 }).max(1),
        sync_seconds: args.seconds.unwrap_or(if quick { 1 } else { 5 }).max(1),
        nodes: args.nodes.unwrap_or(if quick { 20_000 } else { 1_000_000 }),
        idle_sessions: args
            .idle_sessions
            .unwrap_or(if quick { 1000 } else { 10_000 }),
        watchers: args.watchers.unwrap_or(if quick { 1000 } else { 10_000 }),
        idle_window: Duration::from_secs(if quick { 2 } else { 10 }),
        fsync_samples: if quick { 100 } else { 500 },
    };
    let command = args.command_line.clone().unwrap_or_else(|| {
        std::env::args()
            .map(|a| if a.contains(' ') { format!("'{a}'") } else { a })
            .collect::<Vec<_>>()
            .join(" ")
    });
    let work = args
        .work_dir
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("target/bench-compare-{}", std::process::id())));
    std::fs::create_dir_all(&work).with_context(|| format!("cannot create {}", work.display()))?;
    let work = work.canonicalize()?;
    let script = &args.apache_script;
    let zkit = zkit_binary(args.zkit.as_deref());
    let started = Instant::now();
    let load_before = load_average();
    eprintln!(
        "bench compare: work dir {}, load average {load_before}",
        work.display()
    );

    let fdatasync = fdatasync_cost(&work, sizes.fsync_samples)?;
    eprintln!(
        "  fdatasync p50 on this disk: {} appending, {} into a fallocated file",
        ms(fdatasync.append.as_micros() as u64),
        ms(fdatasync.in_place.as_micros() as u64)
    );

    let result = compare_phases(&zkit, &args, &sizes, &work, script).await;
    let load_after = load_average();
    if !args.keep_work_dir {
        let _ = std::fs::remove_dir_all(&work);
    }
    let (z, a) = result?;

    let rows = rows(&z, &a);
    let table = table(&rows);
    let targets = targets(&z, &a, fdatasync.in_place);
    let mut target_text = String::new();
    for (what, held, detail) in &targets {
        let verdict = match held {
            Some(true) => "held",
            Some(false) => "NOT held",
            None => "not measured",
        };
        let _ = writeln!(target_text, "- {what}: **{verdict}** ({detail})");
    }
    let elapsed = started.elapsed();
    println!("\n{table}");
    println!(
        "fdatasync p50 of a 128-byte write on the data-dir disk: {} appending, {} into a fallocated file",
        ms(fdatasync.append.as_micros() as u64),
        ms(fdatasync.in_place.as_micros() as u64)
    );
    println!("Targets:\n{target_text}");
    println!(
        "load average before/after: {load_before} / {load_after}; took {:.0} s",
        elapsed.as_secs_f64()
    );

    let output = (args.output.as_os_str() != "-").then(|| args.output.clone());
    let plot_path = match (&args.plot, &output) {
        (Some(p), _) if p.as_os_str() == "-" => None,
        (Some(p), _) => Some(p.clone()),
        (None, Some(report)) => Some(report.with_file_name("perf-latency.svg")),
        (None, None) => None,
    };
    let mut plot_link = None;
    if let Some(path) = plot_path {
        let series = latency_series(&z, &a);
        if series.iter().all(|s| s.points.is_empty()) {
            eprintln!("no percentile distributions (an older zkit?): no plot");
        } else {
            let svg = plot::svg(
                "Latency percentiles: zkit serve and Apache ZooKeeper",
                &series,
                960,
                600,
            )?;
            if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(&path, svg)
                .with_context(|| format!("cannot write {}", path.display()))?;
            eprintln!("wrote {}", path.display());
            // The report links the plot by its name when they share a directory.
            let same_dir = output.as_ref().is_some_and(|o| o.parent() == path.parent());
            plot_link = Some(match path.file_name() {
                Some(name) if same_dir => name.to_string_lossy().into_owned(),
                _ => path.display().to_string(),
            });
        }
    }
    if let Some(path) = output {
        let doc = performance_doc(&PerformanceDoc {
            plot: plot_link.as_deref(),
            command: &command,
            quick,
            sizes: &sizes,
            args: &args,
            table: &table,
            targets: &target_text,
            fdatasync,
            load_before: &load_before,
            load_after: &load_after,
            elapsed,
        });
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, doc).with_context(|| format!("cannot write {}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    Ok(0)
}

/// Runs both phases against both servers, one fresh server at a time.
async fn compare_phases(
    zkit: &Path,
    args: &BenchCompareArgs,
    sizes: &CompareSizes,
    work: &Path,
    script: &Path,
) -> Result<(ServerFigures, ServerFigures)> {
    let mut z = ServerFigures::default();
    let mut a = ServerFigures::default();
    let zkit_port = || args.zkit_port.map_or_else(free_port, Ok);
    let apache_port = || args.apache_port.map_or_else(free_port, Ok);

    eprintln!("phase 1: latency and pipelined throughput");
    let server = RunningServer::start_zkit(zkit, &work.join("zkit-1"), zkit_port()?).await?;
    let r = phase_one(zkit, &server, args, sizes, &mut z).await;
    server.stop().await?;
    r?;
    if !args.zkit_only {
        let server = RunningServer::start_apache(
            script,
            &work.join("apache-1"),
            apache_port()?,
            &args.apache_heap,
        )
        .await?;
        let r = phase_one(zkit, &server, args, sizes, &mut a).await;
        server.stop().await?;
        r?;
    }

    // The same offered load for both: half of the slower server's closed-loop mixed:90 rate.
    let mixed = |f: &ServerFigures| {
        f.pipelined
            .iter()
            .find(|r| matches!(r.ops, OpMix::Mixed { .. }))
            .map(|r| r.ops_per_sec)
    };
    let slower = match (mixed(&z), mixed(&a)) {
        (Some(x), Some(y)) => x.min(y),
        (Some(x), None) | (None, Some(x)) => x,
        (None, None) => 1000.0,
    };
    let rate = ((slower / 2.0) as u64).max(100);

    eprintln!(
        "phase 2: fixed offered load {rate}/s, {} znodes, idle sessions, watch storm",
        sizes.nodes
    );
    let server = RunningServer::start_zkit(zkit, &work.join("zkit-2"), zkit_port()?).await?;
    let r = phase_two(zkit, &server, args, sizes, rate, &mut z).await;
    server.stop().await?;
    r?;
    if !args.zkit_only {
        let server = RunningServer::start_apache(
            script,
            &work.join("apache-2"),
            apache_port()?,
            &args.apache_heap,
        )
        .await?;
        let r = phase_two(zkit, &server, args, sizes, rate, &mut a).await;
        server.stop().await?;
        r?;
    }
    Ok((z, a))
}

/// The series of the latency plot: the runs where latency is not queueing — one request at a
/// time, and the same fixed offered load on both servers — for zkit, then Apache.
fn latency_series(z: &ServerFigures, a: &ServerFigures) -> Vec<plot::Series> {
    let mut series = Vec::new();
    for (name, f) in [("zkit", z), ("Apache", a)] {
        let runs = [
            (f.sync_read.as_ref(), "sync get".to_string()),
            (f.sync_write.as_ref(), "sync set".to_string()),
            (
                f.rated.as_ref(),
                match f.offered_rate {
                    Some(rate) => format!("mixed:90 at {rate}/s"),
                    None => "mixed:90 at a fixed rate".to_string(),
                },
            ),
        ];
        for (run, what) in runs {
            if let Some(r) = run.filter(|r| !r.percentiles.is_empty()) {
                series.push(plot::Series {
                    label: format!("{name} {what}"),
                    points: r.percentiles.clone(),
                });
            }
        }
    }
    series
}

struct PerformanceDoc<'a> {
    /// The latency plot's link from the report, if one was drawn.
    plot: Option<&'a str>,
    command: &'a str,
    quick: bool,
    sizes: &'a CompareSizes,
    args: &'a BenchCompareArgs,
    table: &'a str,
    targets: &'a str,
    fdatasync: FdatasyncCost,
    load_before: &'a str,
    load_after: &'a str,
    elapsed: Duration,
}

fn performance_doc(d: &PerformanceDoc<'_>) -> String {
    let s = d.sizes;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# Performance: zkit serve vs Apache ZooKeeper\n\n\
         Generated by `zkit-bench compare`; regenerate with the command below. Every figure \
         comes from one run on one machine, with the load generator (`zkit bench server`, on \
         zkit-client) on the same cores as the server.\n\n\
         ## Command\n\n```\n{}\n```\n\n\
         ## Machine\n\n- {}\n- Java: {}; Apache ZooKeeper 3.8 (Debian), `-Xmx{}`, forceSync=yes\n\
         - zkit serve: `--fsync always` (fdatasync before every acknowledged write, group commit)\n\
         - Both data directories on the same disk, side by side; p50 of a 128-byte write + \
         fdatasync there: {} appending to a file, {} writing into fallocated space as zkit's WAL \
         does\n\
         - Load average before/after the run: {} / {} (the machine was shared with other \
         builds: figures are noisy, ratios are what to read)\n\
         - Run time: {:.0} s{}\n",
        d.command,
        machine_description(),
        java_version(),
        d.args.apache_heap,
        ms(d.fdatasync.append.as_micros() as u64),
        ms(d.fdatasync.in_place.as_micros() as u64),
        d.load_before,
        d.load_after,
        d.elapsed.as_secs_f64(),
        if d.quick {
            " (`--quick`: small sizes, a smoke run — memory figures mostly show each server's \
             baseline)"
        } else {
            ""
        },
    );
    let _ = writeln!(
        out,
        "## Workloads\n\n\
         Each server is started fresh for each of two phases and stopped after it; zkit first.\n\n\
         1. Synchronous latency, one session, one request at a time, {sync}s each: `exists` on a \
         missing node (the loopback round trip through the server), `setData` (a durable write) \
         and `getData` of {v} bytes.\n\
         2. Pipelined, {sess} sessions × {inf} requests in flight, {sec}s each: create, get, set \
         and mixed:90 (90 % getData, 10 % setData) over 1,000 nodes of {v} bytes.\n\
         3. Fixed offered load: mixed:90 at half the slower server's closed-loop mixed:90 \
         rate, latency counted from each request's scheduled send time.\n\
         4. Memory: {nodes} znodes of {v} bytes (RSS from /proc/PID/status, data dir as \
         allocated on disk).\n\
         5. {idle} idle sessions, each with one watch: RSS and the server's CPU over {win}s of \
         pings.\n\
         6. Watch storm: {w} of those sessions watch one node; one setData; time until every \
         watcher got its event.\n",
        sync = s.sync_seconds,
        v = d.args.value_size,
        sess = d.args.sessions,
        inf = d.args.inflight,
        sec = s.seconds,
        nodes = s.nodes,
        idle = s.idle_sessions.max(s.watchers),
        win = s.idle_window.as_secs(),
        w = s.watchers,
    );
    let _ = writeln!(out, "## Results\n\n{}", d.table);
    if let Some(link) = d.plot {
        let _ = writeln!(
            out,
            "## Latency distribution\n\n\
             Percentile distributions (HdrHistogram's: x is the percentile on a scale of nines, \
             y the latency) of the runs where latency is not queueing: one request at a time, \
             and both servers at the same fixed offered load.\n\n\
             ![Latency percentiles of zkit serve and Apache ZooKeeper]({link})\n"
        );
    }
    let _ = writeln!(
        out,
        "Reading the table:\n\n\
         - Ratios are zkit / Apache: above 1 is better for throughput, below 1 is better for \
         latency, memory, CPU and disk.\n\
         - Closed-loop latencies are mostly queueing: with {sess} × {inf} requests in flight, \
         p50 ≈ in-flight / throughput (Little's law). The fixed-offered-load rows compare \
         latency at equal load.\n\
         - Data dir is what is allocated on disk (like `du`): zkit fallocates its 64 MiB WAL \
         segments up front; Apache pads its log sparsely. Small runs therefore show zkit's \
         pre-allocation rather than its data.\n\
         - Under fsync, every server stalls while the disk flushes; on a disk shared with other \
         writers (as here) fdatasync has a long tail, which dominates both servers' p99.\n",
        sess = d.args.sessions,
        inf = d.args.inflight,
    );
    let _ = writeln!(
        out,
        "## Targets\n\nReported, never asserted.\n\n{}",
        d.targets
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_plot_has_both_servers() {
        let run = |p99| LoadReport {
            ops: OpMix::Get,
            sessions: 1,
            inflight: 1,
            completed: 100,
            errors: 0,
            elapsed: Duration::from_secs(1),
            ops_per_sec: 100.0,
            p50_us: 100,
            p99_us: p99,
            p999_us: p99,
            max_us: p99,
            first_error: None,
            percentiles: vec![(0.0, 50), (90.0, 100), (99.0, p99)],
        };
        let z = ServerFigures {
            sync_read: Some(run(300)),
            rated: Some(run(900)),
            offered_rate: Some(5000),
            ..ServerFigures::default()
        };
        let a = ServerFigures {
            sync_read: Some(run(700)),
            ..ServerFigures::default()
        };
        let series = latency_series(&z, &a);
        let labels: Vec<&str> = series.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "zkit sync get",
                "zkit mixed:90 at 5000/s",
                "Apache sync get"
            ]
        );
        let svg = plot::svg("t", &series, 800, 500).unwrap();
        assert!(labels.iter().all(|l| svg.contains(l)));
    }

    #[test]
    fn ratios_and_targets() {
        assert_eq!(ratio(Some(4.0), Some(2.0)), Some(2.0));
        assert_eq!(ratio(Some(4.0), Some(0.0)), None);
        let report = |ops, rate, p50, p99| LoadReport {
            ops,
            sessions: 1,
            inflight: 1,
            completed: 1,
            errors: 0,
            elapsed: Duration::from_secs(1),
            ops_per_sec: rate,
            p50_us: p50,
            p99_us: p99,
            p999_us: p99,
            max_us: p99,
            first_error: None,
            percentiles: Vec::new(),
        };
        let z = ServerFigures {
            pipelined: vec![
                report(OpMix::Create, 300.0, 1, 1),
                report(OpMix::Get, 100.0, 1, 1),
            ],
            rtt: Some(report(OpMix::Exists, 1.0, 100, 100)),
            sync_write: Some(report(OpMix::Set, 1.0, 1400, 1400)),
            ..ServerFigures::default()
        };
        let a = ServerFigures {
            pipelined: vec![
                report(OpMix::Create, 100.0, 1, 1),
                report(OpMix::Get, 100.0, 1, 1),
            ],
            ..ServerFigures::default()
        };
        let t = targets(&z, &a, Duration::from_micros(1000));
        let held = |prefix: &str| t.iter().find(|x| x.0.starts_with(prefix)).map(|x| x.1);
        assert_eq!(held("pipelined write (create)"), Some(Some(true)));
        assert_eq!(held("pipelined read"), Some(Some(false)));
        assert_eq!(held("pipelined write (set)"), Some(None));
        // 1.4 ms ≤ 0.1 + 1.0 + 0.2 ms fails by 0.1 ms.
        assert_eq!(held("sync write"), Some(Some(false)));
    }

    #[test]
    fn table_shows_missing_figures_as_dashes() {
        let rows = vec![Row {
            workload: "w".into(),
            metric: "m",
            zkit: Some(2048.0 * 1024.0),
            apache: None,
            unit: Unit::Bytes,
        }];
        assert!(table(&rows).contains("| w | m | 2.0 MiB | – | – |"));
    }
}
