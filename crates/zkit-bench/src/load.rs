//! The load generators the harnesses drive: `zkit bench server --json` (one workload against
//! one server) and `zkit bench lock --json` (lock cycles), each run as a child process of the
//! `zkit` binary under test, exactly as a user runs them. This module builds their command
//! lines and reads their JSON back; what they measure and how is theirs (`zkit bench server
//! --help`).

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{bail, Context as _, Result};
use serde_json::Value;

pub use crate::bench_common::{ms, LoadReport, OpMix};

/// One `zkit bench server` run.
#[derive(Debug, Clone)]
pub struct LoadSpec {
    /// Connect string.
    pub server: String,
    /// Sessions.
    pub sessions: usize,
    /// Requests in flight per session.
    pub inflight: usize,
    /// Operation mix.
    pub ops: OpMix,
    /// Data bytes per write.
    pub value_size: usize,
    /// Measured time (whole seconds).
    pub duration: Duration,
    /// Offered load (requests/s over all sessions), or closed loop.
    pub rate: Option<u64>,
    /// Parent path of the run directory.
    pub path: String,
    /// Delete the run's nodes afterwards.
    pub cleanup: bool,
}

/// Runs `zkit` with `args` and returns its stdout; its stderr (progress) passes through.
async fn run_zkit(zkit: &Path, args: &[String]) -> Result<String> {
    let output = tokio::process::Command::new(zkit)
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .output()
        .await
        .with_context(|| format!("cannot run {}", zkit.display()))?;
    if !output.status.success() {
        bail!(
            "`{} {}` failed ({})",
            zkit.display(),
            args.join(" "),
            output.status
        );
    }
    String::from_utf8(output.stdout).context("zkit printed non-UTF-8")
}

/// Runs one workload with `zkit bench server --json`.
pub async fn run_load(zkit: &Path, spec: &LoadSpec) -> Result<LoadReport> {
    let mut args: Vec<String> = [
        "bench",
        "server",
        "--json",
        "--server",
        &spec.server,
        "--ops",
        &spec.ops.to_string(),
        "--sessions",
        &spec.sessions.to_string(),
        "--inflight",
        &spec.inflight.to_string(),
        "--value-size",
        &spec.value_size.to_string(),
        "--seconds",
        &spec.duration.as_secs().max(1).to_string(),
        "--path",
        &spec.path,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if let Some(rate) = spec.rate {
        // Each second's slowest request too, so that a tail can be placed in time.
        args.extend(["--rate".to_string(), rate.to_string()]);
        args.extend(["--interval".to_string(), "1".to_string()]);
    }
    if !spec.cleanup {
        args.push("--keep".to_string());
    }
    let stdout = run_zkit(zkit, &args).await?;
    let json: Value = serde_json::from_str(stdout.trim())
        .with_context(|| format!("zkit bench server printed {stdout:?}"))?;
    if let Some(windows) = json.get("windows").and_then(Value::as_array) {
        let slowest: Vec<String> = windows
            .iter()
            .filter_map(|w| w.get("max_us").and_then(Value::as_u64))
            .map(|us| format!("{:.1}", us as f64 / 1000.0))
            .collect();
        eprintln!(
            "    slowest request of each second (ms): {}",
            slowest.join(" ")
        );
    }
    LoadReport::from_json(spec.ops, &json)
}

/// One row of `zkit bench lock`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LockRow {
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

impl LockRow {
    /// Reads one line of `zkit bench lock --json`.
    pub fn from_json(json: &Value) -> Result<LockRow> {
        let u = |key: &str| -> Result<u64> {
            json.get(key)
                .and_then(Value::as_u64)
                .with_context(|| format!("no integer {key:?} in {json}"))
        };
        let seconds = json
            .get("seconds")
            .and_then(Value::as_f64)
            .with_context(|| format!("no seconds in {json}"))?;
        if seconds <= 0.0 {
            bail!("no measured time in {json}");
        }
        let cycles = u("cycles")?;
        Ok(LockRow {
            clients: usize::try_from(u("clients")?)?,
            cycles,
            rate: cycles as f64 / seconds,
            p50: Duration::from_micros(u("p50_us")?),
            p99: Duration::from_micros(u("p99_us")?),
        })
    }
}

/// `zkit bench lock --json` for each of `clients` (one line each), `seconds` per count.
pub async fn run_lock(
    zkit: &Path,
    server: &str,
    path: &str,
    clients: &[usize],
    seconds: u64,
    release: &str,
) -> Result<Vec<LockRow>> {
    let clients: Vec<String> = clients.iter().map(usize::to_string).collect();
    let args: Vec<String> = [
        "bench",
        "lock",
        "--json",
        "--server",
        server,
        "--path",
        path,
        "--clients",
        &clients.join(","),
        "--seconds",
        &seconds.to_string(),
        "--release",
        release,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let stdout = run_zkit(zkit, &args).await?;
    stdout
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let json: Value = serde_json::from_str(line)
                .with_context(|| format!("zkit bench lock printed {line:?}"))?;
            LockRow::from_json(&json)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_bench_server_json() {
        let json: Value = serde_json::from_str(
            r#"{"ops":"get","sessions":4,"inflight":8,"completed":1000,"errors":2,
                "seconds":2.0,"ops_per_sec":500.0,
                "latency_us":{"p50":100,"p99":900,"p99_9":1500,"max":2000,
                              "percentiles":[[0.0,40],[90.0,700],[99.0,900]]},
                "first_error":"connection to server has lost"}"#,
        )
        .unwrap();
        let r = LoadReport::from_json(OpMix::Get, &json).unwrap();
        assert_eq!(
            (r.sessions, r.inflight, r.completed, r.errors),
            (4, 8, 1000, 2)
        );
        assert_eq!(
            (r.p50_us, r.p99_us, r.p999_us, r.max_us),
            (100, 900, 1500, 2000)
        );
        assert_eq!(r.percentiles, vec![(0.0, 40), (90.0, 700), (99.0, 900)]);
        assert_eq!(
            r.first_error.as_deref(),
            Some("connection to server has lost")
        );
        assert!(LoadReport::from_json(OpMix::Get, &serde_json::json!({"ops": "get"})).is_err());
    }

    #[test]
    fn reads_bench_lock_json() {
        let json = serde_json::json!({
            "clients": 4, "cycles": 1000, "seconds": 2.0, "cycles_per_sec": 500.0,
            "p50_us": 700, "p99_us": 2900
        });
        let row = LockRow::from_json(&json).unwrap();
        assert_eq!(row.clients, 4);
        assert_eq!(row.cycles, 1000);
        assert!((row.rate - 500.0).abs() < 1e-9);
        assert_eq!(row.p50, Duration::from_micros(700));
        assert_eq!(row.p99, Duration::from_micros(2900));
        assert!(LockRow::from_json(&serde_json::json!({"clients": 4})).is_err());
    }

    #[test]
    fn op_mix_prints_as_the_cli_parses_it() {
        assert_eq!(OpMix::Mixed { read_percent: 90 }.to_string(), "mixed:90");
        assert_eq!(OpMix::Exists.to_string(), "exists");
    }
}
