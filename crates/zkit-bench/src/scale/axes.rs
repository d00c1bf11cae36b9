//! The measuring part of `zkit-bench scale`: one fresh server per axis, the state of each point
//! (idle sessions, znodes, watches), the workload run while the server's RSS and CPU are
//! sampled.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _, Result};
use futures::stream::{FuturesUnordered, StreamExt as _};
use zkit_client as zk;

use super::args::ScaleArgs;
use super::report::{Axis, AxisRun, Point};
use crate::bench_common::{collect_pipelined, connect, pipelined};
use crate::compare::machine::load_average;
use crate::load::{run_load, LoadReport, LoadSpec, OpMix};
use crate::servers::{free_port, RunningServer};

/// The workload at every point: 90 % getData, 10 % setData on 1,000 znodes of the load
/// generator's own run directory.
const WORKLOAD: OpMix = OpMix::Mixed { read_percent: 90 };
/// Sessions × in flight of the workload on the znodes and watchers axes.
const SESSIONS: usize = 16;
const INFLIGHT: usize = 16;
/// Requests in flight over all sessions on the sessions axis (at least one per session).
const SESSIONS_AXIS_TOTAL_INFLIGHT: usize = 256;
/// In flight per session on the value-size axis (16 × 4 = 64 MB in flight at 1 MB).
const VALUE_INFLIGHT: usize = 4;
/// Sessions that hold the watches of the watchers axis.
const WATCH_SESSIONS: usize = 64;
/// Requests in flight while populating znodes and registering watches, per session.
const SETUP_INFLIGHT: usize = 64;

/// Runs one axis on a fresh server with its data under `dir`.
pub(super) async fn run_axis(
    zkit: &Path,
    args: &ScaleArgs,
    axis: Axis,
    dir: &Path,
) -> Result<AxisRun> {
    let points = args.points(axis)?;
    let load_before = load_average();
    eprintln!("axis {}: points {points:?}", axis.slug());
    let server = RunningServer::start_zkit(zkit, dir, free_port()?).await?;
    let r = match axis {
        Axis::Sessions => sessions_axis(zkit, args, &server, &points).await,
        Axis::Znodes => znodes_axis(zkit, args, &server, &points).await,
        Axis::Watchers => watchers_axis(zkit, args, &server, &points).await,
        Axis::ValueSize => value_axis(zkit, args, &server, &points).await,
    };
    server.stop().await?;
    let (workload, baseline_rss, points) = r?;
    let _ = std::fs::remove_dir_all(dir);
    Ok(AxisRun {
        axis,
        workload,
        baseline_rss,
        points,
        load: (load_before, load_average()),
    })
}

fn spec(server: &RunningServer, sessions: usize, inflight: usize, seconds: u64) -> LoadSpec {
    LoadSpec {
        server: server.addr().to_string(),
        sessions,
        inflight,
        ops: WORKLOAD,
        value_size: 100,
        duration: Duration::from_secs(seconds),
        rate: None,
        path: "/zkit-bench".into(),
        // Delete the workload's znodes afterwards: they must not count on the znodes axis.
        cleanup: true,
    }
}

/// Runs `spec` with `zkit bench server`, sampling the server's RSS (peak) and CPU time; the CPU
/// figure covers the last `elapsed` seconds of the run (the measured window, up to the load
/// generator's short clean-up). `rss` is the point's RSS, read before the workload.
async fn measured(
    zkit: &Path,
    server: &RunningServer,
    x: u64,
    rss: Option<u64>,
    spec: &LoadSpec,
) -> Result<Point> {
    let generator0 = children_cpu();
    let started = Instant::now();
    let load = run_load(zkit, spec);
    tokio::pin!(load);
    let mut samples: Vec<(Instant, Option<Duration>)> = vec![(Instant::now(), server.cpu())];
    let mut peak = server.rss();
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    let report: LoadReport = loop {
        tokio::select! {
            r = &mut load => break r?,
            _ = tick.tick() => {
                peak = peak.max(server.rss());
                samples.push((Instant::now(), server.cpu()));
            }
        }
    };
    let end = (Instant::now(), server.cpu());
    // The load generator has exited and been waited for: its CPU is in the children's total.
    let generator_cpu_percent = children_cpu().zip(generator0).map(|(b, a)| {
        100.0 * b.saturating_sub(a).as_secs_f64() / started.elapsed().as_secs_f64().max(1e-6)
    });
    let window_start = end.0.checked_sub(report.elapsed).unwrap_or(samples[0].0);
    let start = samples
        .iter()
        .rev()
        .find(|(at, _)| *at <= window_start)
        .copied()
        .unwrap_or(samples[0]);
    let cpu_percent = match (start.1, end.1) {
        (Some(a), Some(b)) if end.0 > start.0 => {
            Some(100.0 * b.saturating_sub(a).as_secs_f64() / (end.0 - start.0).as_secs_f64())
        }
        _ => None,
    };
    eprintln!("  {}: {}", x, report.line());
    if report.completed == 0 {
        bail!(
            "no request succeeded at {x}: {}",
            report.first_error.as_deref().unwrap_or("no error reported")
        );
    }
    Ok(Point {
        x,
        sessions: report.sessions,
        inflight: report.sessions * report.inflight,
        ops_per_sec: report.ops_per_sec,
        p50_us: report.p50_us,
        p99_us: report.p99_us,
        errors: report.errors,
        cpu_percent,
        generator_cpu_percent,
        rss,
        peak_rss: peak,
        setup_rate: None,
    })
}

/// A point of the znodes and watchers axes, once its state is set up: the RSS read (and
/// printed after `n` and `label`), then the workload from `SESSIONS` × `INFLIGHT`.
async fn set_up_point(
    zkit: &Path,
    args: &ScaleArgs,
    server: &RunningServer,
    n: u64,
    label: &str,
) -> Result<Point> {
    let rss = server.rss();
    eprintln!("  {n} {label}: RSS {rss:?}");
    let spec = spec(server, SESSIONS, INFLIGHT, args.seconds());
    measured(zkit, server, n, rss, &spec).await
}

/// User + system CPU time of this process's children that have exited and been waited for
/// (getrusage RUSAGE_CHILDREN): the load generators, which run one at a time.
fn children_cpu() -> Option<Duration> {
    // SAFETY: getrusage only writes the struct we pass.
    #[allow(unsafe_code)]
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        (libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) == 0).then_some(usage)
    }?;
    let time = |t: libc::timeval| {
        Duration::from_secs(u64::try_from(t.tv_sec).ok()?)
            .checked_add(Duration::from_micros(u64::try_from(t.tv_usec).ok()?))
    };
    time(usage.ru_utime)?.checked_add(time(usage.ru_stime)?)
}

/// Opens sessions until `held` has `count`, 64 connects at a time.
async fn open_sessions(addr: &str, held: &mut Vec<zk::Client>, count: usize) -> Result<()> {
    let mut opening = FuturesUnordered::new();
    while held.len() + opening.len() < count || !opening.is_empty() {
        while held.len() + opening.len() < count && opening.len() < 64 {
            opening.push(connect(addr));
        }
        if let Some(client) = opening.next().await {
            held.push(client?);
        }
    }
    Ok(())
}

/// Sessions: first memory (idle sessions opened up to each point, RSS read), then, with those
/// closed, the workload from N sessions with 256 requests in flight over all of them (one each
/// past 256).
async fn sessions_axis(
    zkit: &Path,
    args: &ScaleArgs,
    server: &RunningServer,
    points: &[u64],
) -> Result<(String, Option<u64>, Vec<Point>)> {
    let baseline = server.rss();
    let mut held = Vec::new();
    let mut rss = Vec::new();
    for &n in points {
        open_sessions(server.addr(), &mut held, usize::try_from(n)?).await?;
        rss.push(server.rss());
        eprintln!(
            "  {n} idle sessions: RSS {:?}",
            rss.last().copied().flatten()
        );
    }
    for client in held.drain(..) {
        client.close().await;
    }
    let mut out = Vec::new();
    for (&n, rss) in points.iter().zip(rss) {
        let sessions = usize::try_from(n)?;
        let inflight = (SESSIONS_AXIS_TOTAL_INFLIGHT / sessions).max(1);
        out.push(
            measured(
                zkit,
                server,
                n,
                rss,
                &spec(server, sessions, inflight, args.seconds()),
            )
            .await?,
        );
    }
    Ok((
        format!(
            "`{WORKLOAD}` (100-byte values) from N sessions, {SESSIONS_AXIS_TOTAL_INFLIGHT} \
             requests in flight over all of them (1 per session past {SESSIONS_AXIS_TOTAL_INFLIGHT}); \
             RSS is with N idle sessions open, measured before the workloads"
        ),
        baseline,
        out,
    ))
}

/// Creates `/zkit-scale/n{i}` for i in `range` with 100-byte values from `sessions`; returns
/// creates per second.
async fn create_range(
    sessions: &[zk::Client],
    prefix: &str,
    range: std::ops::Range<usize>,
    value_size: usize,
) -> Result<f64> {
    let t0 = Instant::now();
    let per = range.len().div_ceil(sessions.len().max(1));
    let value = vec![b'x'; value_size];
    let options = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
    let done = AtomicU64::new(0);
    let work = sessions.iter().enumerate().map(|(s, client)| {
        let start = (range.start + s * per).min(range.end);
        let end = (start + per).min(range.end);
        let (value, options, done) = (&value, &options, &done);
        pipelined(end - start, SETUP_INFLIGHT, move |i| async move {
            let path = format!("{prefix}/n{}", start + i);
            match client.create(&path, value, options).await {
                Ok(_) | Err(zk::Error::NodeExists) => {
                    done.fetch_add(1, Ordering::Relaxed);
                    Ok(())
                }
                Err(e) => Err(e).with_context(|| format!("creating {path}")),
            }
        })
    });
    futures::future::try_join_all(work).await?;
    let n = done.load(Ordering::Relaxed);
    Ok(n as f64 / t0.elapsed().as_secs_f64().max(1e-6))
}

async fn ensure_dir(client: &zk::Client, path: &str) -> Result<()> {
    let options = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
    match client.create(path, b"", &options).await {
        Ok(_) | Err(zk::Error::NodeExists) => Ok(()),
        Err(e) => Err(e).with_context(|| format!("creating {path}")),
    }
}

/// Znodes: the tree grown to each point (100-byte values), RSS read, then the workload.
async fn znodes_axis(
    zkit: &Path,
    args: &ScaleArgs,
    server: &RunningServer,
    points: &[u64],
) -> Result<(String, Option<u64>, Vec<Point>)> {
    let mut sessions = Vec::new();
    open_sessions(server.addr(), &mut sessions, SESSIONS).await?;
    ensure_dir(&sessions[0], "/zkit-scale").await?;
    let baseline = server.rss();
    let mut have = 0usize;
    let mut out = Vec::new();
    for &n in points {
        let n_usize = usize::try_from(n)?;
        let rate = create_range(&sessions, "/zkit-scale", have..n_usize, 100).await?;
        have = n_usize;
        let label = format!("znodes ({rate:.0} creates/s)");
        let mut point = set_up_point(zkit, args, server, n, &label).await?;
        point.setup_rate = Some(rate);
        out.push(point);
    }
    for client in sessions {
        client.close().await;
    }
    Ok((
        format!(
            "`{WORKLOAD}` (100-byte values, 1,000 znodes of its own) from {SESSIONS} sessions × \
             {INFLIGHT} in flight, with N znodes of 100 bytes in the tree (created by \
             {SESSIONS} sessions × {SETUP_INFLIGHT} in flight, the tree grown from point to point); \
             the baseline RSS is with the {SESSIONS} populating sessions open"
        ),
        baseline,
        out,
    ))
}

/// Watchers: N znodes, each with one data watch, held by 64 sessions; RSS read, then the
/// workload (on other znodes: the watches only sit in the server's tables), then every watched
/// znode is written once and the events counted (watch events delivered per second). The
/// watches fired, so the next point registers all of its N again.
async fn watchers_axis(
    zkit: &Path,
    args: &ScaleArgs,
    server: &RunningServer,
    points: &[u64],
) -> Result<(String, Option<u64>, Vec<Point>)> {
    let mut sessions = Vec::new();
    open_sessions(server.addr(), &mut sessions, WATCH_SESSIONS).await?;
    let sessions = Arc::new(sessions);
    ensure_dir(&sessions[0], "/zkit-watch").await?;
    // Every znode the axis watches exists before the baseline, so the RSS steps are the
    // watches' alone.
    let most = usize::try_from(points.last().copied().unwrap_or(0))?;
    create_range(&sessions[..SESSIONS], "/zkit-watch", 0..most, 10).await?;
    let baseline = server.rss();
    let mut out = Vec::new();
    for &n in points {
        let n_usize = usize::try_from(n)?;
        let fired = Arc::new(AtomicU64::new(0));
        let (all_fired_tx, mut all_fired_rx) = tokio::sync::mpsc::unbounded_channel::<()>();
        let mut tasks = Vec::with_capacity(n_usize);
        // Register: session s watches n{i} for i ≡ s (mod 64).
        let per_session = sessions.iter().enumerate().map(|(s, client)| {
            let count = n_usize.saturating_sub(s).div_ceil(WATCH_SESSIONS);
            collect_pipelined(count, SETUP_INFLIGHT, move |k| async move {
                let path = format!("/zkit-watch/n{}", s + k * WATCH_SESSIONS);
                let (_, _, watcher) = client
                    .get_and_watch_data(&path)
                    .await
                    .with_context(|| format!("watching {path}"))?;
                Ok(watcher)
            })
        });
        let watchers: Vec<zk::OneshotWatcher> = futures::future::try_join_all(per_session)
            .await?
            .into_iter()
            .flatten()
            .collect();
        for watcher in watchers {
            let (fired, tx) = (fired.clone(), all_fired_tx.clone());
            tasks.push(tokio::spawn(async move {
                let _ = watcher.changed().await;
                if fired.fetch_add(1, Ordering::Relaxed) + 1 == n {
                    let _ = tx.send(());
                }
            }));
        }
        let mut point = set_up_point(zkit, args, server, n, "watches").await?;

        // Fire them all: one setData per watched znode, from 16 sessions.
        let t0 = Instant::now();
        let writers = &sessions[..SESSIONS];
        let per = n_usize.div_ceil(SESSIONS);
        let work = writers.iter().enumerate().map(|(w, client)| {
            let start = (w * per).min(n_usize);
            let end = (start + per).min(n_usize);
            pipelined(end - start, SETUP_INFLIGHT, move |i| async move {
                let path = format!("/zkit-watch/n{}", start + i);
                client
                    .set_data(&path, b"fired", None)
                    .await
                    .with_context(|| format!("writing {path}"))?;
                Ok(())
            })
        });
        futures::future::try_join_all(work).await?;
        let all = tokio::time::timeout(Duration::from_secs(120), all_fired_rx.recv()).await;
        let took = t0.elapsed();
        let delivered = fired.load(Ordering::Relaxed);
        for t in &tasks {
            t.abort();
        }
        if all.is_err() {
            bail!("only {delivered} of {n} watch events arrived within 120 s");
        }
        let rate = n as f64 / took.as_secs_f64().max(1e-6);
        eprintln!("  {n} watched znodes written: all events in {took:.2?} ({rate:.0}/s)");
        point.setup_rate = Some(rate);
        out.push(point);
    }
    if let Ok(sessions) = Arc::try_unwrap(sessions) {
        for client in sessions {
            client.close().await;
        }
    }
    Ok((
        format!(
            "`{WORKLOAD}` (100-byte values) from {SESSIONS} sessions × {INFLIGHT} in flight, with \
             N data watches on N other znodes held by {WATCH_SESSIONS} sessions; then each \
             watched znode is written once (16 sessions × {SETUP_INFLIGHT} in flight) and the \
             time until every event arrived gives the watch events/s. The watched znodes \
             (10 bytes each) and the sessions exist before the baseline RSS; the watches of one \
             point fired before the next registers its own"
        ),
        baseline,
        out,
    ))
}

/// Value size: the workload with V-byte values (the load generator's 1,000 znodes hold V bytes
/// each, so the tree holds 1,000 × V).
async fn value_axis(
    zkit: &Path,
    args: &ScaleArgs,
    server: &RunningServer,
    points: &[u64],
) -> Result<(String, Option<u64>, Vec<Point>)> {
    let baseline = server.rss();
    let mut out = Vec::new();
    for &v in points {
        let rss = server.rss();
        let spec = LoadSpec {
            value_size: usize::try_from(v)?,
            ..spec(server, SESSIONS, VALUE_INFLIGHT, args.seconds())
        };
        out.push(measured(zkit, server, v, rss, &spec).await?);
    }
    Ok((
        format!(
            "`{WORKLOAD}` with V-byte values on the load generator's 1,000 znodes (so the tree \
             holds 1,000 × V bytes) from {SESSIONS} sessions × {VALUE_INFLIGHT} in flight; RSS \
             is before each point's workload"
        ),
        baseline,
        out,
    ))
}
