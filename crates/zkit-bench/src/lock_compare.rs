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

use crate::compare::machine::{load_average, machine_description};
use crate::ensemble::RunningEnsemble;
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
    /// Run every implementation against a private Apache ZooKeeper ensemble of this many
    /// members (3 when given without a number), every client with all members in its connect
    /// string, instead of a standalone Apache ZooKeeper and a `zkit serve`.
    #[arg(long, num_args = 0..=1, default_missing_value = "3", value_name = "N")]
    pub ensemble: Option<usize>,
    /// Replace this run's section of this Markdown report (created when missing).
    #[arg(long)]
    pub output: Option<PathBuf>,
    /// The command line to record in the report [default: this process's own].
    #[arg(long, env = "ZKIT_BENCH_COMMAND", hide = true)]
    pub command_line: Option<String>,
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

/// Which columns the ratio lines compare: `ours` / `curator` against `target`, and the
/// informative `ours` / `kazoo` line (indices into the columns).
struct Ratios {
    targets: Vec<(usize, f64)>,
    curator: usize,
    kazoo: (usize, usize),
}

impl Ratios {
    /// Against one Apache standalone: zkit-on-Apache ≥ 1.5 × Curator, zkit-on-zkit ≥ 3 ×.
    fn standalone() -> Ratios {
        // columns: 0 zkit-on-zkit, 1 zkit-on-Apache, 2 Curator-on-Apache, 3 kazoo-on-Apache.
        Ratios {
            targets: vec![(1, 1.5), (0, 3.0)],
            curator: 2,
            kazoo: (1, 3),
        }
    }

    /// On an ensemble: zkit ≥ 1.5 × Curator.
    fn ensemble() -> Ratios {
        // columns: 0 zkit, 1 Curator, 2 kazoo (all on the ensemble).
        Ratios {
            targets: vec![(0, 1.5)],
            curator: 1,
            kazoo: (0, 2),
        }
    }
}

/// The comparison table (one line per client count and implementation) and the target lines.
fn compare_table(columns: &[Column], clients: &[usize], ratios: &Ratios) -> (String, bool) {
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
    let name = |i: usize| columns.get(i).map_or("?", |c| c.name);
    let width = ratios
        .targets
        .iter()
        .map(|&(i, _)| name(i).len())
        .chain([name(ratios.kazoo.0).len()])
        .max()
        .unwrap_or(0);
    let mut all_held = true;
    for &n in clients {
        let curator = columns.get(ratios.curator).and_then(|c| c.at(n));
        for &(index, target) in &ratios.targets {
            let what = format!("{:<width$} / {}", name(index), name(ratios.curator));
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
        let (ours, kazoo) = ratios.kazoo;
        let kazoo_row = columns.get(kazoo).and_then(|c| c.at(n));
        let ours_row = columns.get(ours).and_then(|c| c.at(n));
        if let (Some(o), Some(k)) = (ours_row, kazoo_row) {
            if k.rate > 0.0 {
                let what = format!("{:<width$} / {}", name(ours), name(kazoo));
                let _ = writeln!(out, "{n:>2} clients  {what}:   {:.2}x", o.rate / k.rate);
            }
        }
    }
    (out, all_held)
}

/// One implementation under test and where it runs.
enum Contender {
    /// `zkit bench lock` against this connect string.
    Zkit(String),
    /// The Curator program.
    Curator(String),
    /// The kazoo script.
    Kazoo(String),
}

/// What the comparison runs against: its own standalone servers, or an ensemble.
enum Setup {
    Standalone(Box<Servers>),
    Ensemble(RunningEnsemble),
}

impl Setup {
    async fn stop(self) -> anyhow::Result<()> {
        match self {
            Setup::Standalone(servers) => servers.stop().await,
            Setup::Ensemble(ensemble) => ensemble.stop().await,
        }
    }
}

/// Runs `zkit-bench lock-compare`.
pub async fn run(args: &LockCompareArgs) -> anyhow::Result<i32> {
    let command_line = crate::servers::command_line(args.command_line.as_deref());
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
    let load_before = load_average();
    let (setup, contenders, ratios) = match args.ensemble {
        Some(members) => {
            eprintln!(
                "starting an Apache ZooKeeper ensemble of {members} under {}",
                work.display()
            );
            let ensemble =
                RunningEnsemble::start(&args.apache_zk_script, &work.join("ensemble"), members)
                    .await?;
            let connect = ensemble.connect_string().to_string();
            eprintln!(
                "ensemble on {connect} (forceSync=yes), every client given all members; {} s per count, release {:?}",
                args.seconds, args.release
            );
            (
                Setup::Ensemble(ensemble),
                vec![
                    ("zkit-on-ensemble", Contender::Zkit(connect.clone())),
                    ("Curator-on-ensemble", Contender::Curator(connect.clone())),
                    ("kazoo-on-ensemble", Contender::Kazoo(connect)),
                ],
                Ratios::ensemble(),
            )
        }
        None => {
            eprintln!(
                "starting Apache ZooKeeper and zkit serve under {}",
                work.display()
            );
            let servers = Servers::start(args, &zkit, &work).await?;
            eprintln!(
                "zkit serve on {} (fsync always), Apache ZooKeeper on {} (forceSync=yes); {} s per count, release {:?}",
                servers.zkit_addr, servers.apache_addr, args.seconds, args.release
            );
            let (z, a) = (servers.zkit_addr.clone(), servers.apache_addr.clone());
            (
                Setup::Standalone(Box::new(servers)),
                vec![
                    ("zkit-on-zkit", Contender::Zkit(z)),
                    ("zkit-on-Apache", Contender::Zkit(a.clone())),
                    ("Curator-on-Apache", Contender::Curator(a.clone())),
                    ("kazoo-on-Apache", Contender::Kazoo(a)),
                ],
                Ratios::standalone(),
            )
        }
    };
    let measured = measure_all(args, &zkit, &work, &clients, &contenders).await;
    setup.stop().await?;
    let load_after = load_average();
    let columns: Vec<Column> = contenders
        .iter()
        .zip(measured?)
        .map(|((name, _), runs)| Column {
            name,
            rows: runs.medians(&clients),
        })
        .collect();
    let (table, held) = compare_table(&columns, &clients, &ratios);
    println!(
        "median of {} rounds per cell (each round's figures are on stderr above)",
        args.rounds.max(1)
    );
    println!("{table}");
    println!(
        "targets: {}",
        if held { "all held" } else { "NOT all held" }
    );
    if let Some(path) = &args.output {
        let (section, body) =
            report_section(args, &command_line, &table, &load_before, &load_after);
        crate::section::write_section(path, section, &body)?;
    }
    Ok(0)
}

/// Warms the servers up and runs every contender, round after round.
async fn measure_all(
    args: &LockCompareArgs,
    zkit: &Path,
    work: &Path,
    clients: &[usize],
    contenders: &[(&'static str, Contender)],
) -> anyhow::Result<Vec<Runs>> {
    // A freshly started JVM serves its first ~10 seconds cold (JIT: a single client's rate on
    // it triples meanwhile), and zkit runs first: warm every server until the rate is steady,
    // so that the order does not decide.
    let mut warmed = Vec::new();
    for (_, contender) in contenders {
        if let Contender::Zkit(addr) = contender {
            if warmed.contains(addr) {
                continue;
            }
            let rounds = warm_up(zkit, addr, args.release)
                .await
                .with_context(|| format!("warm-up on {addr}"))?;
            eprintln!("  warm-up on {addr}: steady after {rounds} rounds");
            warmed.push(addr.clone());
        }
    }
    let classpath = compile_curator(work).await;
    let mut runs: Vec<Runs> = contenders
        .iter()
        .map(|(_, contender)| match contender {
            Contender::Curator(_) => Runs(classpath.clone().map(|_| Vec::new())),
            _ => Runs(Ok(Vec::new())),
        })
        .collect();
    for round in 1..=args.rounds.max(1) {
        eprintln!("round {round} of {}", args.rounds.max(1));
        for &n in clients {
            for ((name, contender), runs) in contenders.iter().zip(runs.iter_mut()) {
                // A failed implementation is not run again.
                if runs.failed() {
                    continue;
                }
                let count = n.to_string();
                let result = match (contender, &classpath) {
                    (Contender::Zkit(addr), _) => run_zkit(zkit, name, addr, n, args).await,
                    (Contender::Curator(addr), Ok(classpath)) => {
                        run_curator(classpath, addr, &count, args.seconds).await
                    }
                    (Contender::Curator(_), Err(why)) => Err(why.clone()),
                    (Contender::Kazoo(addr), _) => {
                        run_kazoo(work, addr, &count, args.seconds).await
                    }
                };
                runs.add(result);
            }
        }
    }
    Ok(runs)
}

/// The report section (its name and text) of this run.
fn report_section(
    args: &LockCompareArgs,
    command_line: &str,
    table: &str,
    load_before: &str,
    load_after: &str,
) -> (&'static str, String) {
    let (name, title, setup) = match args.ensemble {
        Some(members) => (
            "lock-compare-ensemble",
            format!("## Locks on a {members}-member ensemble: zkit vs Curator vs kazoo"),
            format!(
                "A private ensemble of {members} Apache ZooKeeper 3.8 members (scripts/apache-zk: \
                 tickTime 500 ms, forceSync), every client given the connect string with all \
                 members."
            ),
        ),
        None => (
            "lock-compare",
            "## Locks on one server: zkit vs Curator vs kazoo".to_string(),
            "A private Apache ZooKeeper 3.8 standalone (forceSync) and a `zkit serve` (fsync \
             always)."
                .to_string(),
        ),
    };
    let body = format!(
        "{title}\n\n\
         Generated by `zkit-bench lock-compare`. Command:\n\n```\n{command_line}\n```\n\n\
         - {machine}; load average before/after: {load_before} / {load_after} (a shared \
         machine: read the ratios)\n\
         - {setup}\n\
         - Acquire+release cycles of one lock, each client its own session, {seconds} s per \
         client count, median of {rounds} rounds per cell; zkit: `zkit bench lock --release {release}` \
         (the `zkit` binary under test); Curator 5 `InterProcessMutex` (Debian's \
         libcurator-recipes-java); kazoo `Lock` (python3-kazoo)\n\n\
         ```\n{table}```\n",
        machine = machine_description(),
        seconds = args.seconds,
        rounds = args.rounds.max(1),
        release = args.release.arg(),
    );
    (name, body)
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
        let (table, held) = compare_table(&columns, &[1], &Ratios::standalone());
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

    #[test]
    fn ensemble_table_compares_zkit_with_curator_and_kazoo() {
        let columns = [
            Column {
                name: "zkit-on-ensemble",
                rows: Ok(vec![row(1, 1600.0), row(4, 1000.0)]),
            },
            Column {
                name: "Curator-on-ensemble",
                rows: Ok(vec![row(1, 1000.0), row(4, 1000.0)]),
            },
            Column {
                name: "kazoo-on-ensemble",
                rows: Ok(vec![row(1, 400.0)]),
            },
        ];
        let (table, held) = compare_table(&columns, &[1, 4], &Ratios::ensemble());
        assert!(!held, "1.0x at 4 clients misses the target: {table}");
        assert!(
            table.contains(
                " 1 clients  zkit-on-ensemble / Curator-on-ensemble: 1.60x (target >= 1.5x: held)"
            ),
            "{table}"
        );
        assert!(
            table.contains(" 4 clients  zkit-on-ensemble / Curator-on-ensemble: 1.00x (target >= 1.5x: NOT held)"),
            "{table}"
        );
        assert!(
            table.contains(" 1 clients  zkit-on-ensemble / kazoo-on-ensemble:   4.00x"),
            "{table}"
        );
        // No zkit-on-zkit target on an ensemble.
        assert!(!table.contains("3x"), "{table}");
    }
}
