//! The phases of one server's run: latency and pipelined throughput, then fixed-rate latency,
//! memory with many znodes, idle sessions and the watch storm.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use futures::stream::{FuturesUnordered, StreamExt as _};
use zkit_client as zk;

use super::args::BenchCompareArgs;
use super::figures::{CompareSizes, ServerFigures};
use super::harness::ensure_path;
use super::machine::mib;
use crate::bench_common::spawn_progress;
use crate::bench_common::{connect, pipelined};
use crate::load::{run_load, run_lock, LoadReport, LoadSpec, OpMix};
use crate::servers::{disk_usage, RunningServer};

pub(super) fn load_spec(
    server: &RunningServer,
    ops: OpMix,
    sessions: usize,
    inflight: usize,
) -> LoadSpec {
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
pub(super) async fn phase_one(
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
        let before = server.cpu();
        let r = run_load(zkit, &spec).await?;
        let cpu = server.cpu().zip(before).map(|(b, a)| b.saturating_sub(a));
        figures.pipelined.push(report(r, server, "pipelined"));
        figures.pipelined_cpu.push(cpu);
    }
    // One client's lock cycles: a create, a getChildren and a delete per cycle, the create
    // durable, so about one round trip and one fdatasync each.
    let lock = run_lock(
        zkit,
        server.addr(),
        "/zkit-bench-lock",
        &[1],
        sizes.sync_seconds,
        "background",
    )
    .await?;
    if let Some(row) = lock.into_iter().next() {
        eprintln!(
            "  {} lock, 1 client: {:.0} cycles/s",
            server.which.name(),
            row.rate
        );
        figures.lock = Some(row);
    }
    figures.phase1_rss = server.rss();
    figures.phase1_cpu = server.cpu().zip(cpu0).map(|(b, a)| b.saturating_sub(a));
    Ok(())
}

pub(super) fn report(r: LoadReport, server: &RunningServer, what: &str) -> LoadReport {
    eprintln!("  {} {what}: {}", server.which.name(), r.line());
    r
}

/// Phase 2: p99 at a fixed offered load, then memory with N znodes, idle sessions, watch storm.
pub(super) async fn phase_two(
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
    // The same load unmeasured first: each server has just started (a JVM's first seconds
    // are its JIT's), and the figure is for a server that has been running.
    let warmup = LoadSpec {
        duration: Duration::from_secs(sizes.warmup_seconds),
        ..spec.clone()
    };
    run_load(zkit, &warmup).await?;
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
pub(super) async fn populate(
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
pub(super) async fn idle_and_storm(
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
