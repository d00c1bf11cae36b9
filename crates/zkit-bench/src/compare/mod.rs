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

mod args;
mod doc;
mod figures;
mod harness;
pub(crate) mod machine;
mod phases;
mod table;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};

pub use self::args::BenchCompareArgs;
use self::doc::{latency_series, performance_doc, with_hand_written, PerformanceDoc};
use self::figures::{CompareSizes, ServerFigures};
use self::machine::{fdatasync_cost, load_average, settle_disk};
use self::phases::{phase_one, phase_two};
use self::table::{rows, table, targets};
use crate::bench_common::raise_fd_limit;
use crate::load::{ms, OpMix};
use crate::plot;
use crate::servers::{free_port, zkit_binary, RunningServer};

/// Runs `zkit-bench compare`.
pub async fn run_compare(args: BenchCompareArgs) -> Result<i32> {
    raise_fd_limit();
    let quick = args.quick;
    let sizes = CompareSizes {
        seconds: args.seconds.unwrap_or(if quick { 2 } else { 10 }).max(1),
        sync_seconds: args.seconds.unwrap_or(if quick { 1 } else { 5 }).max(1),
        warmup_seconds: if quick { 1 } else { 5 },
        nodes: args.nodes.unwrap_or(if quick { 20_000 } else { 1_000_000 }),
        idle_sessions: args
            .idle_sessions
            .unwrap_or(if quick { 1000 } else { 10_000 }),
        watchers: args.watchers.unwrap_or(if quick { 1000 } else { 10_000 }),
        idle_window: Duration::from_secs(if quick { 2 } else { 10 }),
        fsync_samples: if quick { 100 } else { 500 },
    };
    let command = crate::servers::command_line(args.command_line.as_deref());
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

    settle(&work, "the fdatasync probe").await?;
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
        // The page's hand-written part (what a run's figures mean, earlier runs) stays.
        let previous = std::fs::read_to_string(&path).unwrap_or_default();
        let doc = with_hand_written(doc, &previous);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, doc).with_context(|| format!("cannot write {}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    Ok(0)
}

/// Flushes the work dir's file system before `what` starts (see [`settle_disk`]) and says how
/// much was dirty.
async fn settle(work: &Path, what: &str) -> Result<()> {
    let dir = work.to_path_buf();
    let settled = tokio::task::spawn_blocking(move || settle_disk(&dir))
        .await?
        .with_context(|| format!("flushing the disk of {}", work.display()))?;
    eprintln!(
        "  disk flushed before {what}: {:.1} MiB dirty, {:.2} s",
        settled.dirty_kib as f64 / 1024.0,
        settled.took.as_secs_f64()
    );
    Ok(())
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
    settle(work, "zkit").await?;
    let server = RunningServer::start_zkit(zkit, &work.join("zkit-1"), zkit_port()?).await?;
    let r = phase_one(zkit, &server, args, sizes, &mut z).await;
    server.stop().await?;
    r?;
    if !args.zkit_only {
        settle(work, "Apache ZooKeeper").await?;
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
    settle(work, "zkit").await?;
    let server = RunningServer::start_zkit(zkit, &work.join("zkit-2"), zkit_port()?).await?;
    let r = phase_two(zkit, &server, args, sizes, rate, &mut z).await;
    server.stop().await?;
    r?;
    if !args.zkit_only {
        settle(work, "Apache ZooKeeper").await?;
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
