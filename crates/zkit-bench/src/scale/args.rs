//! The command line of `zkit-bench scale`.

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};

use super::report::Axis;

/// Arguments of `zkit-bench scale`.
#[derive(Debug, clap::Args)]
pub struct ScaleArgs {
    /// Small points and 1-second workloads: all four axes in well under a minute (a smoke run).
    #[arg(long)]
    pub quick: bool,
    /// The axes to run, comma-separated: sessions, znodes, watchers, value-size [default: all].
    #[arg(long, value_delimiter = ',')]
    pub axis: Vec<String>,
    /// Measured seconds of the workload at each point [default: 5, quick: 1].
    #[arg(long)]
    pub seconds: Option<u64>,
    /// Add the 10,000,000-znode point to the znodes axis (minutes, about 2 GB of RAM).
    #[arg(long)]
    pub ten_million: bool,
    /// Directory of the servers' data directories; created, and removed at the end unless
    /// --keep-work-dir [default: ./target/bench-scale-PID].
    #[arg(long)]
    pub work_dir: Option<PathBuf>,
    /// Keep the work directory after the run.
    #[arg(long)]
    pub keep_work_dir: bool,
    /// The `zkit` binary under test (`zkit serve`, `zkit bench server`) [default: the `zkit`
    /// next to this executable, else `zkit` on PATH].
    #[arg(long)]
    pub zkit: Option<PathBuf>,
    /// The report whose generated sections are replaced; `-` for nowhere (tables on stdout
    /// only).
    #[arg(long, default_value = "-")]
    pub output: PathBuf,
    /// Directory of the charts, AXIS.svg [default: scale/ next to the report; none without
    /// one].
    #[arg(long)]
    pub svg_dir: Option<PathBuf>,
    /// The command line to record in the report [default: this process's own].
    #[arg(long, env = "ZKIT_BENCH_COMMAND", hide = true)]
    pub command_line: Option<String>,
}

impl ScaleArgs {
    /// The axes asked for, in report order.
    pub fn axes(&self) -> Result<Vec<Axis>> {
        if self.axis.is_empty() {
            return Ok(Axis::ALL.to_vec());
        }
        let asked = self
            .axis
            .iter()
            .map(|a| Axis::parse(a.trim()))
            .collect::<Result<Vec<_>>>()?;
        Ok(Axis::ALL
            .into_iter()
            .filter(|a| asked.contains(a))
            .collect())
    }

    /// Measured seconds per point.
    pub fn seconds(&self) -> u64 {
        self.seconds
            .unwrap_or(if self.quick { 1 } else { 5 })
            .max(1)
    }

    /// The points of `axis`, increasing.
    pub fn points(&self, axis: Axis) -> Result<Vec<u64>> {
        let points: Vec<u64> = match (axis, self.quick) {
            (Axis::Sessions, false) => vec![1, 4, 16, 64, 256, 1024],
            (Axis::Sessions, true) => vec![1, 4, 16],
            (Axis::Znodes, false) if self.ten_million => {
                vec![10_000, 100_000, 1_000_000, 10_000_000]
            }
            (Axis::Znodes, false) => vec![10_000, 100_000, 1_000_000],
            (Axis::Znodes, true) => vec![1000, 10_000],
            (Axis::Watchers, false) => vec![1000, 10_000, 100_000],
            (Axis::Watchers, true) => vec![100, 1000],
            // 1 MB is 1,000,000 bytes: a request of 2^20 data bytes would not fit the default
            // jute.maxbuffer (1,048,575 bytes, header included).
            (Axis::ValueSize, false) => vec![10, 100, 1000, 10_000, 100_000, 1_000_000],
            (Axis::ValueSize, true) => vec![10, 1000, 100_000],
        };
        if points.windows(2).any(|w| w[0] >= w[1]) {
            bail!("points of {} must increase", axis.title());
        }
        Ok(points)
    }

    /// Where the charts go: `--svg-dir`, else `scale/` next to the report, else nowhere.
    pub fn svg_dir(&self, report: Option<&Path>) -> Option<PathBuf> {
        match (&self.svg_dir, report) {
            (Some(dir), _) if dir.as_os_str() == "-" => None,
            (Some(dir), _) => Some(dir.clone()),
            (None, Some(report)) => Some(report.with_file_name("scale")),
            (None, None) => None,
        }
    }
}
