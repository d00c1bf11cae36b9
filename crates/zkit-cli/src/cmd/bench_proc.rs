//! `zkit bench proc --members 3,10,50 --server ADDR`: wall-clock time of one full distributed
//! procedure ([`zkit::procedure::Coordinator::run`]: both barriers, results, cleanup) with N
//! members, each a task with its own ZooKeeper session and a no-op subprocedure.
//!
//! It measures; it asserts nothing. Each member count uses a fresh base path, deleted after.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use zkit::procedure::{AbortReason, Coordinator, Member, Subprocedure, SubprocedureFactory};

use super::conn::{human_duration, ConnArgs, DEFAULT_SESSION_TIMEOUT};
use super::progress::Progress;

type BoxedFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Arguments of `zkit bench proc`.
#[derive(Debug, clap::Args)]
pub struct BenchProcArgs {
    #[command(flatten)]
    pub conn: ConnArgs,
    /// Member counts to measure, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "3,10,50")]
    pub members: Vec<usize>,
    /// Procedures per member count (after one warm-up run).
    #[arg(long, default_value_t = 20)]
    pub rounds: usize,
    /// Parent of the per-run base paths.
    #[arg(long, default_value = "/zkit-bench")]
    pub path: String,
}

/// One measured row.
#[derive(Debug)]
pub struct BenchProcRow {
    /// Members per procedure.
    pub members: usize,
    /// Fastest procedure.
    pub min: Duration,
    /// Median procedure.
    pub median: Duration,
    /// 99th percentile (nearest rank: the maximum below 100 rounds).
    pub p99: Duration,
    /// Slowest procedure.
    pub max: Duration,
}

struct Noop;
struct NoopSub(String);

impl SubprocedureFactory for Noop {
    fn build(&self, _signature: &str, _instance: &str, member: &str) -> Box<dyn Subprocedure> {
        Box::new(NoopSub(member.to_string()))
    }
}

impl Subprocedure for NoopSub {
    fn acquire_barrier(&mut self, _args: Vec<u8>) -> BoxedFuture<'_, Result<(), String>> {
        Box::pin(async { Ok(()) })
    }
    fn inside_barrier(&mut self) -> BoxedFuture<'_, Result<Vec<u8>, String>> {
        Box::pin(async move { Ok(self.0.clone().into_bytes()) })
    }
    fn cleanup(&mut self, _reason: AbortReason) -> BoxedFuture<'_, ()> {
        Box::pin(async {})
    }
}

async fn measure(args: &BenchProcArgs, n: usize) -> anyhow::Result<BenchProcRow> {
    let base = format!(
        "{}/proc-{}-{n}",
        args.path.trim_end_matches('/'),
        std::process::id()
    );
    let mut members = Vec::with_capacity(n);
    let mut names = Vec::with_capacity(n);
    for i in 0..n {
        let session = args.conn.session(DEFAULT_SESSION_TIMEOUT).await?;
        let name = format!("m{i:03}");
        let handle = Member::start(&session, &base, "bench", &name, Arc::new(Noop)).await?;
        members.push((session, handle));
        names.push(name);
    }
    let session = args.conn.session(DEFAULT_SESSION_TIMEOUT).await?;
    let coordinator = Coordinator::new(&session, &base);
    let mut times = Vec::with_capacity(args.rounds);
    for round in 0..=args.rounds {
        let start = Instant::now();
        let results = coordinator
            .run(
                "bench",
                &format!("r{round}"),
                b"",
                &names,
                Duration::from_secs(60),
            )
            .await?;
        anyhow::ensure!(results.len() == n, "{} results of {n}", results.len());
        if round > 0 {
            times.push(start.elapsed());
        }
    }
    for (s, handle) in members {
        handle.stop().await;
        s.close();
    }
    let client = session.client();
    for dir in ["acquired", "reached", "abort", "members", "running", ""] {
        let p = if dir.is_empty() {
            format!("{base}/bench")
        } else {
            format!("{base}/bench/{dir}")
        };
        let _ = client.delete(&p, None).await;
    }
    let _ = client.delete(&base, None).await;
    session.close();
    times.sort();
    anyhow::ensure!(!times.is_empty(), "--rounds must be at least 1");
    Ok(BenchProcRow {
        members: n,
        min: times[0],
        median: times[times.len() / 2],
        p99: times[(times.len() * 99).div_ceil(100).saturating_sub(1)],
        max: times[times.len() - 1],
    })
}

/// Runs `zkit bench proc`; prints one row per member count.
pub async fn run(args: BenchProcArgs) -> anyhow::Result<std::process::ExitCode> {
    run_exit_code(args).await.map(super::process_exit)
}

/// What [`run`] does, with the exit code as a number.
async fn run_exit_code(args: BenchProcArgs) -> anyhow::Result<i32> {
    println!(
        "server {}; {} procedures per row",
        args.conn.server, args.rounds
    );
    println!(
        "{:>8} {:>12} {:>12} {:>12} {:>12}",
        "members", "min", "median", "p99", "max"
    );
    let mut progress = Progress::new("zkit bench proc", args.members.len() as u64);
    for &n in &args.members {
        progress.step(&format!("{n} members, {} procedures", args.rounds));
        let row = measure(&args, n).await?;
        // Above the bar, which stays at the bottom on a terminal.
        progress.println(&format!(
            "{:>8} {:>12} {:>12} {:>12} {:>12}",
            row.members,
            human_duration(row.min),
            human_duration(row.median),
            human_duration(row.p99),
            human_duration(row.max)
        ));
    }
    progress.finish();
    Ok(0)
}
