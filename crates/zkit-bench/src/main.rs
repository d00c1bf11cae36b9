//! `zkit-bench`: zkit's side-by-side benchmark harnesses (`publish = false`). They start the
//! contenders — `zkit serve` and Apache ZooKeeper, Curator and kazoo — on this machine, drive
//! the same workloads against each with the plain load generators of the `zkit` binary under
//! test (`zkit bench server`, `zkit bench lock`), and report figures and ratios.
//!
//! # Layout
//! - [`compare`]: `zkit-bench compare`, zkit serve against Apache ZooKeeper; writes
//!   `docs/PERFORMANCE.md`.
//! - [`lock_compare`]: `zkit-bench lock-compare`, zkit's Mutex on both servers against
//!   Curator's `InterProcessMutex` and kazoo's `Lock` on Apache.
//! - [`failover`]: `zkit-bench failover`, time from an ensemble leader's kill -9 to the next
//!   lock and the next transaction, zkit against Curator; [`ensemble`]: the private ensemble
//!   it (and `lock-compare --ensemble`) runs on; [`section`]: the generated sections of
//!   docs/PERFORMANCE-ENSEMBLE.md.
//! - [`scale`]: `zkit-bench scale`, scale curves of `zkit serve` (sessions, znodes, watchers,
//!   value size); writes docs/SCALE.md and docs/scale/*.svg.
//! - [`servers`]: starting, measuring and stopping the servers under test.
//! - [`load`]: running `zkit bench server --json` / `zkit bench lock --json` and reading their
//!   figures.
//! - `bench_common`: the figures of one load run and their JSON, histograms, progress, sessions
//!   and requests in flight, included from the `zkit` binary's source
//!   (crates/zkit-cli/src/cmd/bench_common.rs) as `plot` is.
//! - `plot`: the latency percentile chart (SVG), the very source file `zkit bench server
//!   --plot` draws with (crates/zkit-cli/src/cmd/plot.rs), so both charts look the same.
//!
//! Nothing here knows where it was built: the `zkit` binary, the Apache start script and the
//! report path are arguments (defaults: the `zkit` next to this executable, and
//! `scripts/apache-zk` / `docs/PERFORMANCE.md` in the current directory, i.e. a checkout's
//! root, where scripts/bench-compare and scripts/bench-lock-compare run it).

// The figures `zkit bench server --json` prints and this harness reads back, histograms, the
// progress line, sessions and requests in flight: the zkit binary's own module, included rather
// than copied, so the JSON is written and read by one definition.
#[allow(dead_code)]
#[path = "../../zkit-cli/src/cmd/bench_common.rs"]
mod bench_common;
mod compare;
mod ensemble;
mod failover;
mod load;
mod lock_compare;
// The zkit binary's own plotting module, included rather than copied; its histogram helper is
// for the load generator, which this harness runs as a process.
#[allow(dead_code)]
#[path = "../../zkit-cli/src/cmd/plot.rs"]
mod plot;
mod scale;
mod section;
mod servers;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// zkit's side-by-side benchmarks against Apache ZooKeeper, Curator and kazoo.
#[derive(Debug, Parser)]
#[command(name = "zkit-bench", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// `zkit serve` against Apache ZooKeeper: latency, pipelined throughput, memory, idle
    /// sessions, watch storm; writes docs/PERFORMANCE.md.
    Compare(compare::BenchCompareArgs),
    /// zkit's lock on `zkit serve` and on Apache ZooKeeper against Curator and kazoo.
    LockCompare(lock_compare::LockCompareArgs),
    /// Time from an ensemble leader's kill -9 to the next acquired lock and the next committed
    /// transaction, zkit against Curator.
    Failover(failover::FailoverArgs),
    /// Scale curves of `zkit serve`: throughput, p99 and memory against sessions, znodes,
    /// watchers and value size; writes docs/SCALE.md and its charts.
    Scale(scale::ScaleArgs),
    /// The zkit side of `failover` (run by it as a child process).
    #[command(hide = true)]
    FailoverContender(failover::contender::ContenderArgs),
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Compare(args) => compare::run_compare(args).await,
        Command::LockCompare(args) => lock_compare::run(&args).await,
        Command::Failover(args) => failover::run(&args).await,
        Command::Scale(args) => scale::run(&args).await,
        Command::FailoverContender(args) => failover::contender::run(&args).await,
    };
    match result {
        Ok(0) => ExitCode::SUCCESS,
        Ok(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        Err(err) => {
            eprintln!("Error: {err:#}");
            ExitCode::FAILURE
        }
    }
}
