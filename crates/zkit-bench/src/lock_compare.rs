//! `zkit-bench lock-compare`: lock acquire+release cycles side by side in one go. It starts a
//! private Apache ZooKeeper 3.8 (`scripts/apache-zk`, forceSync on) and a `zkit serve` (data
//! dir, fsync on: its default durable mode), then measures zkit-on-zkit and zkit-on-Apache
//! (`zkit bench lock`, the `zkit` binary under test), Curator's `InterProcessMutex` on Apache (a
//! Java program compiled here with javac against Debian's libcurator-recipes-java) and kazoo's
//! `Lock` on Apache (python3-kazoo), and prints one table with the ratios and whether the
//! targets hold (zkit-on-Apache >= 1.5 x Curator, and zkit-on-zkit >= 3 x Curator-on-Apache).
//! The Java and Python programs live in `crates/zkit-bench/bench/` and are embedded in the
//! binary.
//!
//! Before measuring, both servers are warmed up until the rate is steady (a fresh JVM is several
//! times slower for its first seconds), and the Curator program warms its own JVM the same way.
//!
//! It measures; it asserts nothing. Each run uses a fresh lock directory and deletes it after.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::Context;

use crate::load::{run_lock, LockRow as BenchRow};
use crate::servers::{free_port, zkit_binary, RunningServer};

/// The Curator side (see the file's header).
const CURATOR_BENCH: &str = include_str!("../bench/CuratorLockBench.java");
/// The kazoo side (see the file's header).
const KAZOO_BENCH: &str = include_str!("../bench/kazoo_lock_bench.py");

/// How `zkit bench lock` releases the lock (its `--release`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ReleaseMode {
    /// The delete is sent and the loop goes on (what dropping a guard does).
    Background,
    /// Wait for the delete's reply (as Curator's `release()`).
    Sync,
}

impl ReleaseMode {
    fn arg(self) -> &'static str {
        match self {
            ReleaseMode::Background => "background",
            ReleaseMode::Sync => "sync",
        }
    }
}

/// Arguments of `zkit-bench lock-compare`.
#[derive(Debug, clap::Args)]
pub struct LockCompareArgs {
    /// Client counts to measure, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,4,16")]
    pub clients: Vec<usize>,
    /// Seconds per client count.
    #[arg(long, default_value_t = 5)]
    pub seconds: u64,
    /// Parent of zkit's per-run lock directories.
    #[arg(long, default_value = "/zkit-bench")]
    pub path: String,
    /// How zkit's cycles release the lock.
    #[arg(long, value_enum, default_value_t = ReleaseMode::Background)]
    pub release: ReleaseMode,
    /// How many times to measure every (implementation, client count) pair; the table shows
    /// the median run. Each round runs the four implementations back to back for one client
    /// count before the next, so a slow spell of the machine hits them alike.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// The Apache ZooKeeper port [default: a free port].
    #[arg(long)]
    pub apache_port: Option<u16>,
    /// The `zkit serve` port [default: a free port].
    #[arg(long)]
    pub zkit_port: Option<u16>,
    /// Where the servers keep their data (kept afterwards when given) [default: a temporary
    /// directory, removed afterwards].
    #[arg(long)]
    pub work_dir: Option<PathBuf>,
    /// The Apache ZooKeeper start/stop script (a checkout's scripts/apache-zk)
    /// [default: scripts/apache-zk in the current directory].
    #[arg(long, default_value = "scripts/apache-zk")]
    pub apache_zk_script: PathBuf,
    /// The `zkit` binary under test (`zkit serve`, `zkit bench lock`) [default: the `zkit`
    /// next to this executable, else `zkit` on PATH].
    #[arg(long)]
    pub zkit: Option<PathBuf>,
}

/// The servers the comparison started (each stops on drop, also on error paths).
struct Servers {
    zkit: RunningServer,
    zkit_addr: String,
    apache: RunningServer,
    apache_addr: String,
}

impl Servers {
    async fn start(args: &LockCompareArgs, zkit: &Path, work: &Path) -> anyhow::Result<Servers> {
        let apache_script = &args.apache_zk_script;
        let apache_port = match args.apache_port {
            Some(port) => port,
            None => free_port()?,
        };
        // The script's default heap: a lock benchmark keeps few znodes.
        let apache =
            RunningServer::start_apache(apache_script, &work.join("apache"), apache_port, "512m")
                .await?;
        let zkit_port = match args.zkit_port {
            Some(port) => port,
            None => free_port()?,
        };
        let zkit = RunningServer::start_zkit(zkit, &work.join("zkit"), zkit_port).await?;
        Ok(Servers {
            zkit_addr: zkit.addr().to_string(),
            apache_addr: apache.addr().to_string(),
            zkit,
            apache,
        })
    }

    async fn stop(self) -> anyhow::Result<()> {
        self.zkit.stop().await?;
        self.apache.stop().await
    }
}

/// Debian's Curator jars and their dependencies (the same classpath the interop tests use).
fn curator_classpath() -> Result<String, String> {
    zkit_testkit::curator_classpath().ok_or_else(|| {
        "Curator or ZooKeeper jars missing: apt-get install libcurator-recipes-java".to_string()
    })
}

/// Parses the `RESULT clients=N cycles=C seconds=S p50_us=X p99_us=Y` lines of the Java and
/// Python programs.
fn parse_result(line: &str) -> Option<BenchRow> {
    let rest = line.strip_prefix("RESULT ")?;
    let field = |name: &str| -> Option<f64> {
        rest.split_whitespace()
            .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))?
            .parse()
            .ok()
    };
    let cycles = field("cycles")? as u64;
    let seconds = field("seconds")?;
    if seconds <= 0.0 {
        return None;
    }
    Some(BenchRow {
        clients: field("clients")? as usize,
        cycles,
        rate: cycles as f64 / seconds,
        p50: Duration::from_micros(field("p50_us")? as u64),
        p99: Duration::from_micros(field("p99_us")? as u64),
    })
}

/// Runs a foreign benchmark program and collects its RESULT lines (echoing them as progress).
async fn run_foreign(
    label: &str,
    mut command: tokio::process::Command,
) -> Result<Vec<BenchRow>, String> {
    let output = command
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|e| format!("cannot run {label}: {e}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(5).collect();
        return Err(format!(
            "{label} failed ({}): {}",
            output.status,
            tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
        ));
    }
    let rows: Vec<BenchRow> = stdout.lines().filter_map(parse_result).collect();
    for row in &rows {
        eprintln!(
            "  {label}: {} clients {:.0} cycles/s",
            row.clients, row.rate
        );
    }
    Ok(rows)
}

/// Compiles the Curator program once; returns the classpath to run it with.
async fn compile_curator(work: &Path) -> Result<String, String> {
    compile_java(work, "CuratorLockBench", CURATOR_BENCH).await
}

/// Compiles `source` (the Java class `class`) against Curator's jars into `work/curator`;
/// returns the classpath to run it with.
pub(crate) async fn compile_java(work: &Path, class: &str, source: &str) -> Result<String, String> {
    let classpath = curator_classpath()?;
    let dir = work.join("curator");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let text = source;
    let source = dir.join(format!("{class}.java"));
    std::fs::write(&source, text).map_err(|e| e.to_string())?;
    let status = tokio::process::Command::new("javac")
        .arg("-cp")
        .arg(&classpath)
        .arg("-d")
        .arg(&dir)
        .arg(&source)
        .status()
        .await
        .map_err(|e| format!("javac: {e} (apt-get install default-jdk-headless)"))?;
    if !status.success() {
        return Err(format!("javac failed ({status})"));
    }
    Ok(format!("{classpath}:{}", dir.display()))
}

async fn run_curator(
    classpath: &str,
    server: &str,
    clients: &str,
    seconds: u64,
) -> Result<Vec<BenchRow>, String> {
    let mut command = tokio::process::Command::new("java");
    command
        .arg("-cp")
        .arg(classpath)
        .arg("CuratorLockBench")
        .args([server, "/zkit-bench-curator", clients, &seconds.to_string()]);
    run_foreign("Curator", command).await
}

async fn run_kazoo(
    work: &Path,
    server: &str,
    clients: &str,
    seconds: u64,
) -> Result<Vec<BenchRow>, String> {
    // Debian's python3-kazoo lives in the system interpreter's dist-packages.
    let python = if Path::new("/usr/bin/python3").is_file() {
        "/usr/bin/python3"
    } else {
        "python3"
    };
    let script = work.join("kazoo_lock_bench.py");
    std::fs::write(&script, KAZOO_BENCH).map_err(|e| e.to_string())?;
    let mut command = tokio::process::Command::new(python);
    command
        .arg(&script)
        .args([server, "/zkit-bench-kazoo", clients, &seconds.to_string()]);
    run_foreign("kazoo", command)
        .await
        .map_err(|e| format!("{e} (apt-get install python3-kazoo)"))
}

/// Unmeasured rounds (one second with 1 client, one with 16) until two rounds in a row agree
/// within 10%, at most 15; returns the number of rounds.
async fn warm_up(zkit: &Path, addr: &str, release: ReleaseMode) -> anyhow::Result<u32> {
    let mut previous = 0.0;
    for round in 1..=15 {
        let rows = run_lock(zkit, addr, "/zkit-bench-warmup", &[1, 16], 1, release.arg()).await?;
        let rate: f64 = rows.iter().map(|r| r.rate).sum();
        if previous > 0.0 && (rate - previous).abs() <= 0.1 * previous {
            return Ok(round);
        }
        previous = rate;
    }
    Ok(15)
}

async fn run_zkit(
    zkit: &Path,
    label: &str,
    server: &str,
    clients: usize,
    args: &LockCompareArgs,
) -> Result<Vec<BenchRow>, String> {
    let rows = run_lock(
        zkit,
        server,
        &args.path,
        &[clients],
        args.seconds,
        args.release.arg(),
    )
    .await
    .map_err(|e| format!("{label}: {e:#}"))?;
    for row in &rows {
        eprintln!(
            "  {label}: {} clients {:.0} cycles/s",
            row.clients, row.rate
        );
    }
    Ok(rows)
}

/// The runs of one implementation over all rounds: every row, or the first failure.
struct Runs(Result<Vec<BenchRow>, String>);

impl Runs {
    fn add(&mut self, result: Result<Vec<BenchRow>, String>) {
        match (&mut self.0, result) {
            (Ok(rows), Ok(more)) => rows.extend(more),
            (Ok(_), Err(why)) => self.0 = Err(why),
            (Err(_), _) => {}
        }
    }

    fn failed(&self) -> bool {
        self.0.is_err()
    }

    /// Per client count, the run with the median rate (the lower middle one for an even count).
    fn medians(self, clients: &[usize]) -> Result<Vec<BenchRow>, String> {
        let rows = self.0?;
        Ok(clients
            .iter()
            .filter_map(|&n| {
                let mut runs: Vec<BenchRow> =
                    rows.iter().filter(|r| r.clients == n).copied().collect();
                runs.sort_by(|a, b| a.rate.total_cmp(&b.rate));
                runs.get(runs.len().saturating_sub(1) / 2).copied()
            })
            .collect())
    }
}

/// One column of the comparison.
struct Column {
    name: &'static str,
    rows: Result<Vec<BenchRow>, String>,
}

impl Column {
    fn at(&self, clients: usize) -> Option<BenchRow> {
        self.rows
            .as_ref()
            .ok()?
            .iter()
            .find(|r| r.clients == clients)
            .copied()
    }
}

fn fmt_ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1000.0)
}

/// The comparison table (one line per client count and implementation) and the target lines.
fn compare_table(columns: &[Column], clients: &[usize]) -> (String, bool) {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:>8}  {:<20} {:>10} {:>10} {:>10}",
        "clients", "implementation", "cycles/s", "p50 ms", "p99 ms"
    );
    for &n in clients {
        for column in columns {
            match column.at(n) {
                Some(row) => {
                    let _ = writeln!(
                        out,
                        "{:>8}  {:<20} {:>10.0} {:>10} {:>10}",
                        n,
                        column.name,
                        row.rate,
                        fmt_ms(row.p50),
                        fmt_ms(row.p99)
                    );
                }
                None => {
                    let _ = writeln!(
                        out,
                        "{:>8}  {:<20} {:>10} {:>10} {:>10}",
                        n, column.name, "-", "-", "-"
                    );
                }
            }
        }
    }
    for column in columns {
        if let Err(why) = &column.rows {
            let _ = writeln!(out, "{}: not measured: {why}", column.name);
        }
    }
    let _ = writeln!(out);
    let mut all_held = true;
    // columns: 0 zkit-on-zkit, 1 zkit-on-Apache, 2 Curator-on-Apache, 3 kazoo-on-Apache.
    for &n in clients {
        let curator = columns.get(2).and_then(|c| c.at(n));
        for (index, target, what) in [
            (1usize, 1.5, "zkit-on-Apache / Curator-on-Apache"),
            (0usize, 3.0, "zkit-on-zkit   / Curator-on-Apache"),
        ] {
            let ours = columns.get(index).and_then(|c| c.at(n));
            let line = match (ours, curator) {
                (Some(ours), Some(curator)) if curator.rate > 0.0 => {
                    let ratio = ours.rate / curator.rate;
                    let held = ratio >= target;
                    all_held &= held;
                    format!(
                        "{ratio:.2}x (target >= {target}x: {})",
                        if held { "held" } else { "NOT held" }
                    )
                }
                _ => {
                    all_held = false;
                    "- (not measured)".to_string()
                }
            };
            let _ = writeln!(out, "{n:>2} clients  {what}: {line}");
        }
        let kazoo = columns.get(3).and_then(|c| c.at(n));
        let ours = columns.get(1).and_then(|c| c.at(n));
        if let (Some(ours), Some(kazoo)) = (ours, kazoo) {
            if kazoo.rate > 0.0 {
                let _ = writeln!(
                    out,
                    "{n:>2} clients  zkit-on-Apache / kazoo-on-Apache:   {:.2}x",
                    ours.rate / kazoo.rate
                );
            }
        }
    }
    (out, all_held)
}

/// Runs `zkit-bench lock-compare`.
pub async fn run(args: &LockCompareArgs) -> anyhow::Result<i32> {
    let zkit = zkit_binary(args.zkit.as_deref());
    let temp;
    let work = match &args.work_dir {
        Some(dir) => {
            std::fs::create_dir_all(dir)?;
            dir.clone()
        }
        None => {
            temp = tempfile::Builder::new()
                .prefix("zkit-bench-lock-")
                .tempdir()?;
            temp.path().to_path_buf()
        }
    };
    let clients: Vec<usize> = args.clients.iter().map(|&n| n.max(1)).collect();
    eprintln!(
        "starting Apache ZooKeeper and zkit serve under {}",
        work.display()
    );
    let servers = Servers::start(args, &zkit, &work).await?;
    eprintln!(
        "zkit serve on {} (fsync always), Apache ZooKeeper on {} (forceSync=yes); {} s per count, release {:?}",
        servers.zkit_addr, servers.apache_addr, args.seconds, args.release
    );
    // A freshly started JVM serves its first ~10 seconds cold (JIT: a single client's rate on
    // it triples meanwhile), and zkit-on-Apache runs first: warm both servers until the rate is
    // steady, so that the order does not decide.
    for addr in [&servers.apache_addr, &servers.zkit_addr] {
        let rounds = warm_up(&zkit, addr, args.release)
            .await
            .with_context(|| format!("warm-up on {addr}"))?;
        eprintln!("  warm-up on {addr}: steady after {rounds} rounds");
    }
    let classpath = compile_curator(&work).await;
    let mut zkit_on_zkit = Runs(Ok(Vec::new()));
    let mut zkit_on_apache = Runs(Ok(Vec::new()));
    let mut curator = Runs(classpath.clone().map(|_| Vec::new()));
    let mut kazoo = Runs(Ok(Vec::new()));
    for round in 1..=args.rounds.max(1) {
        eprintln!("round {round} of {}", args.rounds.max(1));
        for &n in &clients {
            // A failed implementation is not run again.
            if !zkit_on_zkit.failed() {
                zkit_on_zkit
                    .add(run_zkit(&zkit, "zkit-on-zkit", &servers.zkit_addr, n, args).await);
            }
            if !zkit_on_apache.failed() {
                zkit_on_apache
                    .add(run_zkit(&zkit, "zkit-on-Apache", &servers.apache_addr, n, args).await);
            }
            if let (Ok(classpath), false) = (&classpath, curator.failed()) {
                let n = n.to_string();
                curator.add(run_curator(classpath, &servers.apache_addr, &n, args.seconds).await);
            }
            if !kazoo.failed() {
                let n = n.to_string();
                kazoo.add(run_kazoo(&work, &servers.apache_addr, &n, args.seconds).await);
            }
        }
    }
    servers.stop().await?;
    let (zkit_on_zkit, zkit_on_apache, curator, kazoo) = (
        zkit_on_zkit.medians(&clients),
        zkit_on_apache.medians(&clients),
        curator.medians(&clients),
        kazoo.medians(&clients),
    );
    let columns = [
        Column {
            name: "zkit-on-zkit",
            rows: zkit_on_zkit,
        },
        Column {
            name: "zkit-on-Apache",
            rows: zkit_on_apache,
        },
        Column {
            name: "Curator-on-Apache",
            rows: curator,
        },
        Column {
            name: "kazoo-on-Apache",
            rows: kazoo,
        },
    ];
    let (table, held) = compare_table(&columns, &clients);
    println!(
        "median of {} rounds per cell (each round's figures are on stderr above)",
        args.rounds.max(1)
    );
    println!("{table}");
    println!(
        "targets: {}",
        if held { "all held" } else { "NOT all held" }
    );
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_foreign_result_lines() {
        let row = parse_result("RESULT clients=4 cycles=1000 seconds=2.000 p50_us=700 p99_us=2900")
            .expect("parsed");
        assert_eq!(row.clients, 4);
        assert_eq!(row.cycles, 1000);
        assert!((row.rate - 500.0).abs() < 1e-9);
        assert_eq!(row.p50, Duration::from_micros(700));
        assert_eq!(row.p99, Duration::from_micros(2900));
        assert!(parse_result("RESULT clients=4").is_none());
        assert!(parse_result("noise").is_none());
    }

    /// A measured row with fixed latencies.
    fn row(clients: usize, rate: f64) -> BenchRow {
        BenchRow {
            clients,
            cycles: 10,
            rate,
            p50: Duration::from_millis(1),
            p99: Duration::from_millis(2),
        }
    }

    #[test]
    fn runs_report_the_median_per_client_count_or_the_first_failure() {
        let mut runs = Runs(Ok(Vec::new()));
        for (n, rate) in [(1, 300.0), (4, 40.0), (1, 100.0), (4, 10.0), (1, 200.0)] {
            runs.add(Ok(vec![row(n, rate)]));
        }
        let medians = runs.medians(&[1, 4, 16]).expect("no failure");
        let rates: Vec<(usize, f64)> = medians.iter().map(|r| (r.clients, r.rate)).collect();
        // 1: median of three; 4: the lower of two; 16: never measured.
        assert_eq!(rates, vec![(1, 200.0), (4, 10.0)]);
        let mut failing = Runs(Ok(vec![row(1, 1.0)]));
        failing.add(Err("first".into()));
        assert!(failing.failed());
        failing.add(Err("second".into()));
        failing.add(Ok(vec![row(1, 2.0)]));
        assert_eq!(failing.medians(&[1]).unwrap_err(), "first");
    }

    #[test]
    fn table_reports_ratios_and_missing_columns() {
        let columns = [
            Column {
                name: "zkit-on-zkit",
                rows: Ok(vec![row(1, 3000.0)]),
            },
            Column {
                name: "zkit-on-Apache",
                rows: Ok(vec![row(1, 1400.0)]),
            },
            Column {
                name: "Curator-on-Apache",
                rows: Ok(vec![row(1, 1000.0)]),
            },
            Column {
                name: "kazoo-on-Apache",
                rows: Err("no kazoo".into()),
            },
        ];
        let (table, held) = compare_table(&columns, &[1]);
        assert!(!held, "1.4x misses the 1.5x target");
        assert!(
            table.contains("1.40x (target >= 1.5x: NOT held)"),
            "{table}"
        );
        assert!(table.contains("3.00x (target >= 3x: held)"), "{table}");
        assert!(
            table.contains("kazoo-on-Apache: not measured: no kazoo"),
            "{table}"
        );
    }
}
