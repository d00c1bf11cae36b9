//! `zkit bench lock --clients 1,4,16 --seconds 5 --server ADDR`: acquire+release cycles per
//! second of [`zkit::lock::Mutex`] with N contending clients (one session each), and the
//! p50/p99 acquire latency (an HDR histogram in microseconds).
//!
//! It measures; it asserts nothing. Each run uses a fresh lock directory and deletes it after.

use std::time::{Duration, Instant};

use anyhow::Context;
use hdrhistogram::Histogram;
use zkit::lock::Mutex;
use zkit::{Session, SessionOptions};

/// Arguments of `zkit bench lock`.
#[derive(Debug, clap::Args)]
pub struct BenchLockArgs {
    /// ZooKeeper connect string.
    #[arg(
        long,
        short = 's',
        env = "ZKIT_SERVER",
        default_value = "127.0.0.1:2181"
    )]
    pub server: String,
    /// Client counts to measure, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,4,16")]
    pub clients: Vec<usize>,
    /// Seconds per client count.
    #[arg(long, default_value_t = 5)]
    pub seconds: u64,
    /// Parent of the per-run lock directories.
    #[arg(long, default_value = "/zkit-bench")]
    pub path: String,
}

/// One measured row.
#[derive(Debug)]
pub struct BenchRow {
    /// Contending clients.
    pub clients: usize,
    /// Completed acquire+release cycles.
    pub cycles: u64,
    /// Cycles per second.
    pub rate: f64,
    /// Median acquire latency.
    pub p50: Duration,
    /// 99th percentile acquire latency.
    pub p99: Duration,
}

async fn measure(args: &BenchLockArgs, clients: usize) -> anyhow::Result<BenchRow> {
    let dir = format!(
        "{}/lock-{}-{}",
        args.path.trim_end_matches('/'),
        std::process::id(),
        clients
    );
    let mut sessions = Vec::with_capacity(clients);
    for _ in 0..clients {
        sessions.push(
            Session::connect(&args.server, SessionOptions::default())
                .await
                .with_context(|| format!("connecting to {}", args.server))?,
        );
    }
    let start = Instant::now();
    let end = start + Duration::from_secs(args.seconds);
    let mut tasks = Vec::new();
    for session in &sessions {
        let mutex = Mutex::new(session, &dir);
        tasks.push(tokio::spawn(async move {
            let mut histogram =
                Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("valid bounds");
            let mut cycles = 0u64;
            while Instant::now() < end {
                let t0 = Instant::now();
                let guard = mutex.lock().await?;
                let micros = t0.elapsed().as_micros().clamp(1, 60_000_000) as u64;
                histogram.saturating_record(micros);
                guard.release().await?;
                cycles += 1;
            }
            Ok::<_, zkit::Error>((cycles, histogram))
        }));
    }
    let mut total = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("valid bounds");
    let mut cycles = 0;
    for task in tasks {
        let (n, h) = task.await.context("bench task")??;
        cycles += n;
        total.add(h).context("merging histograms")?;
    }
    let elapsed = start.elapsed();
    if let Some(session) = sessions.first() {
        let _ = session.client().delete(&dir, None).await;
    }
    Ok(BenchRow {
        clients,
        cycles,
        rate: cycles as f64 / elapsed.as_secs_f64(),
        p50: Duration::from_micros(total.value_at_quantile(0.50)),
        p99: Duration::from_micros(total.value_at_quantile(0.99)),
    })
}

/// Runs `zkit bench lock` and prints one line per client count; returns the exit code.
///
/// # Errors
/// Connection or lock errors.
pub async fn run(args: BenchLockArgs) -> anyhow::Result<i32> {
    println!(
        "{:>8} {:>10} {:>12} {:>12} {:>12}",
        "clients", "cycles", "cycles/s", "p50", "p99"
    );
    for &clients in &args.clients {
        let row = measure(&args, clients.max(1)).await?;
        println!(
            "{:>8} {:>10} {:>12.0} {:>12?} {:>12?}",
            row.clients, row.cycles, row.rate, row.p50, row.p99
        );
    }
    Ok(0)
}
