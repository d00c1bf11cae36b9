//! `zkit bench txn --server ADDR`: latency (median, p99, max) of all-yes two-phase-commit
//! transactions with 3 participants, one at a time, and throughput with 64 in flight. The
//! participants run in this process, each on its own session, with an in-memory resource (the
//! benchmark measures the coordination, not a disk); latency is from `commit()` to every
//! participant's acknowledgement.
//!
//! It measures; it asserts nothing. Each run uses a fresh root and deletes nothing it did not
//! create (finished transactions are collected by the protocol itself).

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use hdrhistogram::Histogram;
use zkit::txn::{Coordinator, MemoryResource, Outcome, Participant, TxnOptions};
use zkit::Session;

use super::conn::{ConnArgs, DEFAULT_SESSION_TIMEOUT};
use super::progress::Progress;

/// Arguments of `zkit bench txn`.
#[derive(Debug, clap::Args)]
pub struct BenchTxnArgs {
    #[command(flatten)]
    pub conn: ConnArgs,
    /// Sequential transactions for the latency figures.
    #[arg(long, default_value_t = 500)]
    pub latency_txns: usize,
    /// Seconds of the throughput run.
    #[arg(long, default_value_t = 5)]
    pub seconds: u64,
    /// Transactions in flight during the throughput run.
    #[arg(long, alias = "inflight", default_value_t = 64)]
    pub in_flight: usize,
}

/// The measured figures.
#[derive(Debug)]
pub struct BenchTxnReport {
    /// Median latency (µs).
    pub median_us: u64,
    /// 99th percentile (µs).
    pub p99_us: u64,
    /// Maximum (µs).
    pub max_us: u64,
    /// Committed transactions per second with `in_flight` concurrent.
    pub throughput: f64,
}

async fn connect(conn: &ConnArgs) -> anyhow::Result<Session> {
    conn.session(DEFAULT_SESSION_TIMEOUT).await
}

/// Runs the benchmark and returns the figures.
///
/// # Errors
/// Connection failures, or a transaction that did not commit.
pub async fn bench(args: &BenchTxnArgs) -> anyhow::Result<BenchTxnReport> {
    let root = format!(
        "/zkit-bench-txn-{}-{}",
        std::process::id(),
        zkit::txn::now_ms()
    );
    let options = TxnOptions {
        vote_timeout: Duration::from_secs(10),
        ..TxnOptions::with_root(&root)
    };
    let names = ["P1", "P2", "P3"];
    let mut keep = Vec::new();
    for name in names {
        let session = connect(&args.conn).await?;
        let participant = Participant::start(
            &session,
            &options,
            name,
            Arc::new(MemoryResource::default()),
            None,
        )?;
        keep.push((session, participant));
    }
    let session = connect(&args.conn).await?;
    let measured = measure(args, &session, options, &names).await;
    // Stop the participants before removing their tree, so none re-creates a node in it.
    for (session, participant) in &keep {
        participant.stop();
        session.close();
    }
    drop(keep);
    let cleaned = super::node::delete_tree(&session.client(), &root)
        .await
        .with_context(|| format!("removing the benchmark's tree {root}"));
    session.close();
    let report = measured?;
    cleaned?;
    Ok(report)
}

/// The latency and throughput runs, with the participants already started.
async fn measure(
    args: &BenchTxnArgs,
    session: &Session,
    options: TxnOptions,
    names: &[&'static str; 3],
) -> anyhow::Result<BenchTxnReport> {
    let names = *names;
    let coordinator = Coordinator::new(session, options)?;
    let mut progress = Progress::new("zkit bench txn", 3);
    progress.step("warm-up: 20 transactions");
    // Warm-up: directories, inboxes, connections.
    for _ in 0..20 {
        run_one(&coordinator, &names).await?;
    }
    let mut histogram = Histogram::<u64>::new(3).context("histogram")?;
    progress.step(&format!(
        "latency: {} sequential transactions",
        args.latency_txns
    ));
    for _ in 0..args.latency_txns {
        let started = Instant::now();
        run_one(&coordinator, &names).await?;
        histogram.record(u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX))?;
    }
    progress.step(&format!(
        "throughput: {} s with {} in flight",
        args.seconds, args.in_flight
    ));
    let deadline = Instant::now() + Duration::from_secs(args.seconds);
    let started = Instant::now();
    let mut workers = Vec::new();
    for _ in 0..args.in_flight {
        let coordinator = coordinator.clone();
        workers.push(tokio::spawn(async move {
            let mut done = 0u64;
            while Instant::now() < deadline {
                run_one(&coordinator, &names).await?;
                done += 1;
            }
            anyhow::Ok(done)
        }));
    }
    let mut total = 0;
    for worker in workers {
        total += worker.await??;
    }
    let throughput = total as f64 / started.elapsed().as_secs_f64();
    progress.finish();
    Ok(BenchTxnReport {
        median_us: histogram.value_at_quantile(0.5),
        p99_us: histogram.value_at_quantile(0.99),
        max_us: histogram.max(),
        throughput,
    })
}

async fn run_one(coordinator: &Coordinator, names: &[&str]) -> anyhow::Result<()> {
    match coordinator.begin(names, b"bench")?.commit().await? {
        Outcome::Committed => Ok(()),
        Outcome::Aborted(reason) => anyhow::bail!("benchmark transaction aborted: {reason}"),
    }
}

/// `zkit bench txn`: prints the figures.
pub async fn run(args: BenchTxnArgs) -> anyhow::Result<std::process::ExitCode> {
    run_exit_code(args).await.map(super::process_exit)
}

/// What [`run`] does, with the exit code as a number.
async fn run_exit_code(args: BenchTxnArgs) -> anyhow::Result<i32> {
    let report = bench(&args).await?;
    println!(
        "zkit bench txn — {} (3 participants, all yes)",
        args.conn.server
    );
    println!(
        "  latency ({} sequential): median {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        args.latency_txns,
        report.median_us as f64 / 1e3,
        report.p99_us as f64 / 1e3,
        report.max_us as f64 / 1e3
    );
    println!(
        "  throughput ({} in flight, {} s): {:.0} txn/s",
        args.in_flight, args.seconds, report.throughput
    );
    Ok(0)
}
