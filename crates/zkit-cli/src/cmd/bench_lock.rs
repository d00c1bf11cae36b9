//! `zkit bench lock --clients 1,4,16 --seconds 5 --server ADDR`: acquire+release cycles per
//! second of [`zkit::lock::Mutex`] with N contending clients (one session each), and the
//! p50/p99 acquire latency (an HDR histogram in microseconds).
//!
//! It measures; it asserts nothing. Each run uses a fresh lock directory and deletes it after.
//! `zkit-bench lock-compare` (crates/zkit-bench) runs it side by side with Curator and kazoo.

use std::time::{Duration, Instant};

use anyhow::Context;
use hdrhistogram::Histogram;
use zkit::lock::Mutex;

use super::conn::{ConnArgs, DEFAULT_SESSION_TIMEOUT};

/// How the benchmark loop releases the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ReleaseMode {
    /// `LockGuard::release_in_background()`: the delete is sent and the loop goes on; the next
    /// create of the same session is ordered after it (what dropping a guard does).
    Background,
    /// `LockGuard::release().await`: wait for the delete's reply (as Curator's `release()`).
    Sync,
}

/// Arguments of `zkit bench lock`.
#[derive(Debug, clap::Args)]
pub struct BenchLockArgs {
    #[command(flatten)]
    pub conn: ConnArgs,
    /// Client counts to measure, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,4,16")]
    pub clients: Vec<usize>,
    /// Seconds per client count.
    #[arg(long, default_value_t = 5)]
    pub seconds: u64,
    /// Parent of the per-run lock directories.
    #[arg(long, default_value = "/zkit-bench")]
    pub path: String,
    /// How each cycle releases the lock.
    #[arg(long, value_enum, default_value_t = ReleaseMode::Background)]
    pub release: ReleaseMode,
    /// Print one JSON object per client count instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Also draw the acquire latency percentile distributions, one line per client count,
    /// into this SVG file.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<std::path::PathBuf>,
}

/// One measured row.
#[derive(Debug, Clone)]
pub struct BenchRow {
    /// Contending clients.
    pub clients: usize,
    /// Completed acquire+release cycles.
    pub cycles: u64,
    /// Measured wall time.
    pub elapsed: Duration,
    /// Cycles per second.
    pub rate: f64,
    /// Median acquire latency.
    pub p50: Duration,
    /// 99th percentile acquire latency.
    pub p99: Duration,
    /// The acquire latency distribution, (percentile in %, µs), for plots.
    pub percentiles: Vec<(f64, u64)>,
}

/// Runs `clients` contending sessions on one lock for `seconds`.
async fn measure(
    conn: &ConnArgs,
    parent: &str,
    clients: usize,
    seconds: u64,
    release: ReleaseMode,
) -> anyhow::Result<BenchRow> {
    let dir = format!(
        "{}/lock-{}-{}",
        parent.trim_end_matches('/'),
        std::process::id(),
        clients
    );
    let mut sessions = Vec::with_capacity(clients);
    for _ in 0..clients {
        sessions.push(conn.session(DEFAULT_SESSION_TIMEOUT).await?);
    }
    let start = Instant::now();
    let end = start + Duration::from_secs(seconds);
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
                match release {
                    ReleaseMode::Background => guard.release_in_background(),
                    ReleaseMode::Sync => guard.release().await?,
                }
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
        // The last background deletes are ordered before this one on the same session only for
        // that session; others may still be in flight, so a NotEmpty here is not an error.
        let _ = session.client().delete(&dir, None).await;
    }
    Ok(BenchRow {
        clients,
        cycles,
        elapsed,
        rate: cycles as f64 / elapsed.as_secs_f64(),
        p50: Duration::from_micros(total.value_at_quantile(0.50)),
        p99: Duration::from_micros(total.value_at_quantile(0.99)),
        percentiles: super::plot::percentile_points(&total),
    })
}

fn print_header() {
    println!(
        "{:>8} {:>10} {:>12} {:>12} {:>12}",
        "clients", "cycles", "cycles/s", "p50", "p99"
    );
}

fn print_row(row: &BenchRow) {
    println!(
        "{:>8} {:>10} {:>12.0} {:>12?} {:>12?}",
        row.clients, row.cycles, row.rate, row.p50, row.p99
    );
}

/// The row as one JSON object (what `zkit-bench lock-compare` reads).
fn row_json(row: &BenchRow) -> serde_json::Value {
    serde_json::json!({
        "clients": row.clients,
        "cycles": row.cycles,
        "seconds": row.elapsed.as_secs_f64(),
        "cycles_per_sec": row.rate,
        "p50_us": u64::try_from(row.p50.as_micros()).unwrap_or(u64::MAX),
        "p99_us": u64::try_from(row.p99.as_micros()).unwrap_or(u64::MAX),
    })
}

/// Runs `zkit bench lock` and prints one line per client count; returns the exit code.
///
/// # Errors
/// Connection or lock errors.
pub async fn run(args: BenchLockArgs) -> anyhow::Result<std::process::ExitCode> {
    run_exit_code(args).await.map(super::process_exit)
}

/// What [`run`] does, with the exit code as a number.
async fn run_exit_code(args: BenchLockArgs) -> anyhow::Result<i32> {
    if !args.json {
        print_header();
    }
    let mut series = Vec::new();
    for &clients in &args.clients {
        let row = measure(
            &args.conn,
            &args.path,
            clients.max(1),
            args.seconds,
            args.release,
        )
        .await?;
        if args.json {
            println!("{}", row_json(&row));
        } else {
            print_row(&row);
        }
        series.push(super::plot::Series {
            label: format!("clients={} on {}", row.clients, args.conn.server),
            points: row.percentiles,
        });
    }
    if let Some(file) = &args.plot {
        let svg = super::plot::svg("zkit bench lock: acquire latency", &series, 900, 540)?;
        std::fs::write(file, svg).with_context(|| format!("writing {}", file.display()))?;
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_rows_carry_what_the_compare_harness_reads() {
        let row = BenchRow {
            clients: 4,
            cycles: 1000,
            elapsed: Duration::from_secs(2),
            rate: 500.0,
            p50: Duration::from_micros(700),
            p99: Duration::from_micros(2900),
            percentiles: Vec::new(),
        };
        assert_eq!(
            row_json(&row),
            serde_json::json!({
                "clients": 4, "cycles": 1000, "seconds": 2.0, "cycles_per_sec": 500.0,
                "p50_us": 700, "p99_us": 2900,
            })
        );
    }
}
