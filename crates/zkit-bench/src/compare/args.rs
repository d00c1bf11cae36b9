//! The command line of `zkit-bench compare`.

use std::path::PathBuf;

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
