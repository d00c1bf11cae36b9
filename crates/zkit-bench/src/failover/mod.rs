//! `zkit-bench failover`: how long after a leader's kill -9 work resumes, zkit against Curator,
//! on one private Apache ZooKeeper ensemble (`scripts/apache-zk ensemble`, 3 members by
//! default; every client is given the connect string with all members).
//!
//! Two contenders run side by side for the whole benchmark, each its own process printing a
//! timestamped line per event (see [`contender`] and `bench/CuratorFailoverBench.java`):
//! - **lock**: the same number of sessions loop on one lock (zkit's `Mutex`, Curator's
//!   `InterProcessMutex`): acquire, hold, release;
//! - **txn**: zkit's two-phase-commit coordinator commits transactions across three
//!   participants, one after another; Curator has no 2PC recipe, so its side commits a multi of
//!   three `setData` through its transaction API (`transaction().forOperations`), its atomic
//!   write of several nodes. The report labels that row so.
//!
//! Each round: wait until both contenders make progress of every kind on the whole ensemble,
//! wait a random moment (up to `--settle-seconds`), kill -9 the leader, measure for each
//! contender and kind the time from the kill to the next event, restart the member and wait
//! until the ensemble is whole again (except after the last round). Medians and p90s over the rounds, the zkit / Curator ratio
//! and whether the target (zkit ≤ Curator) holds are printed, and written into a section of
//! `--output` (docs/PERFORMANCE-ENSEMBLE.md from scripts/bench-failover).
//!
//! An event that completes within [`IN_FLIGHT_GRACE`] of the kill is not counted: a reply the
//! leader (or a follower relaying its commit) sent before it died can still arrive just after
//! the kill, while no operation needing the new leader can complete that soon (an election
//! alone waits longer: Apache's FastLeaderElection finalize wait is 200 ms).
//!
//! It measures; it asserts nothing.

pub mod contender;

use std::collections::hash_map::RandomState;
use std::fmt::Write as _;
use std::hash::{BuildHasher as _, Hasher as _};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context as _};
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::sync::watch;

use crate::compare::machine::{load_average, machine_description};
use crate::ensemble::RunningEnsemble;
use crate::lock_compare::compile_java;

/// The Curator side (see the file's header).
const CURATOR_FAILOVER: &str = include_str!("../../bench/CuratorFailoverBench.java");

/// Events completing this soon after the kill were already on their way (see the module docs).
pub const IN_FLIGHT_GRACE: Duration = Duration::from_millis(50);

/// The section of the report this harness writes.
const SECTION: &str = "failover";

/// Arguments of `zkit-bench failover`.
#[derive(Debug, clap::Args)]
pub struct FailoverArgs {
    /// Leader kills (rounds); the table shows medians and p90s over them.
    #[arg(long, default_value_t = 10)]
    pub rounds: usize,
    /// Ensemble members.
    #[arg(long, default_value_t = 3)]
    pub members: usize,
    /// Sessions looping on the lock, per contender.
    #[arg(long, default_value_t = 4)]
    pub clients: usize,
    /// How long a holder holds the lock, and the pause between transactions (ms).
    #[arg(long, default_value_t = 10)]
    pub hold_ms: u64,
    /// Session timeout of every client of both contenders (ms).
    #[arg(long, default_value_t = 10_000)]
    pub session_timeout_ms: u64,
    /// After the ensemble is whole and both contenders make progress, the kill comes at a
    /// random moment within this many seconds.
    #[arg(long, default_value_t = 5)]
    pub settle_seconds: u64,
    /// How long to wait for progress, and for the next event after a kill, before counting the
    /// round as "no event" (s).
    #[arg(long, default_value_t = 60)]
    pub timeout_seconds: u64,
    /// Where the ensemble and the compiled Curator program live (kept when given)
    /// [default: a temporary directory, removed afterwards].
    #[arg(long)]
    pub work_dir: Option<PathBuf>,
    /// The Apache ZooKeeper script (a checkout's scripts/apache-zk).
    #[arg(long, default_value = "scripts/apache-zk")]
    pub apache_zk_script: PathBuf,
    /// Replace this harness's section of this Markdown report (created when missing).
    #[arg(long)]
    pub output: Option<PathBuf>,
    /// The command line to record in the report [default: this process's own].
    #[arg(long, env = "ZKIT_BENCH_COMMAND", hide = true)]
    pub command_line: Option<String>,
}

/// Microseconds since the Unix epoch (the contenders' event times).
pub fn now_micros() -> u64 {
    micros(SystemTime::now())
}

fn micros(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

/// What a contender measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Lock,
    Txn,
    /// A session reconnected (zkit's `Reconnected`, Curator's `RECONNECTED`): a diagnostic,
    /// when the clients got a server back, apart from what they did with it.
    Connected,
}

/// The kinds of work, whose progress each round waits for.
const KINDS: [Kind; 2] = [Kind::Lock, Kind::Txn];
/// What is measured after a kill.
const MEASURED: [Kind; 3] = [Kind::Lock, Kind::Txn, Kind::Connected];

impl Kind {
    fn word(self) -> &'static str {
        match self {
            Kind::Lock => "lock",
            Kind::Txn => "txn",
            Kind::Connected => "connected",
        }
    }
}

/// What a contender printed so far.
#[derive(Debug, Default, Clone)]
struct Events {
    ready: bool,
    exited: bool,
    lock: Vec<u64>,
    txn: Vec<u64>,
    connected: Vec<u64>,
    /// Failed lock operations, failed or aborted transactions.
    errors: [u64; 2],
    first_error: [Option<String>; 2],
}

impl Events {
    fn of(&self, kind: Kind) -> &[u64] {
        match kind {
            Kind::Lock => &self.lock,
            Kind::Txn => &self.txn,
            Kind::Connected => &self.connected,
        }
    }

    /// Takes one output line (`READY`, `EVENT KIND T`, `ERROR KIND MESSAGE`); others are
    /// ignored.
    fn apply(&mut self, line: &str) {
        let mut words = line.trim().splitn(3, ' ');
        let (what, kind, rest) = (words.next(), words.next(), words.next());
        let kind = match kind {
            Some("lock") => Kind::Lock,
            Some("txn") => Kind::Txn,
            Some("connected") => Kind::Connected,
            _ => {
                if what == Some("READY") {
                    self.ready = true;
                }
                return;
            }
        };
        match what {
            Some("EVENT") => {
                if let Some(at) = rest.and_then(|t| t.trim().parse().ok()) {
                    match kind {
                        Kind::Lock => self.lock.push(at),
                        Kind::Txn => self.txn.push(at),
                        Kind::Connected => self.connected.push(at),
                    }
                }
            }
            Some("ERROR") if kind != Kind::Connected => {
                let i = kind as usize;
                self.errors[i] += 1;
                if self.first_error[i].is_none() {
                    self.first_error[i] = Some(rest.unwrap_or("").to_string());
                }
            }
            _ => {}
        }
    }
}

/// The first event strictly after `after` (µs), if any.
fn next_after(events: &[u64], after: u64) -> Option<u64> {
    events.iter().copied().filter(|&t| t > after).min()
}

/// A contender process and what it printed.
struct Contender {
    name: &'static str,
    child: tokio::process::Child,
    events: watch::Receiver<Events>,
    log: PathBuf,
}

impl Contender {
    /// Starts `command` (stderr into `log`), and waits until it printed `READY`.
    async fn start(
        name: &'static str,
        mut command: tokio::process::Command,
        log: PathBuf,
        timeout: Duration,
    ) -> anyhow::Result<Contender> {
        let log_file = std::fs::File::create(&log)?;
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log_file)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("cannot start the {name} contender"))?;
        let stdout = child.stdout.take().context("no stdout")?;
        let (tx, rx) = watch::channel(Events::default());
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                tx.send_modify(|e| e.apply(&line));
            }
            tx.send_modify(|e| e.exited = true);
        });
        let contender = Contender {
            name,
            child,
            events: rx,
            log,
        };
        let mut events = contender.events.clone();
        let ready = tokio::time::timeout(timeout, events.wait_for(|e| e.ready || e.exited))
            .await
            .is_ok_and(|r| r.is_ok_and(|e| e.ready));
        if !ready {
            bail!(
                "the {name} contender did not get ready within {timeout:?}: {}",
                contender.log_tail()
            );
        }
        Ok(contender)
    }

    /// The first event of `kind` after `after` (µs), waiting at most `timeout`.
    async fn next_event(&self, kind: Kind, after: u64, timeout: Duration) -> Option<u64> {
        let mut events = self.events.clone();
        let found = tokio::time::timeout(
            timeout,
            events.wait_for(|e| e.exited || next_after(e.of(kind), after).is_some()),
        )
        .await;
        match found {
            Ok(Ok(e)) => next_after(e.of(kind), after),
            _ => None,
        }
    }

    fn exited(&self) -> bool {
        self.events.borrow().exited
    }

    /// The last lines of the contender's stderr.
    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(5).collect();
        tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
    }

    async fn stop(mut self) -> Events {
        let _ = self.child.kill().await;
        let events = self.events.borrow().clone();
        events
    }
}

/// A random duration in `[0, max]` (std's per-process random hasher keys: no dependency).
fn random_up_to(max: Duration) -> Duration {
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u128(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos(),
    );
    let max_ms = u64::try_from(max.as_millis()).unwrap_or(u64::MAX);
    Duration::from_millis(hasher.finish() % (max_ms + 1))
}

/// Median and p90 of the measured rounds.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Stats {
    median: Duration,
    p90: Duration,
}

/// Median (the mean of the middle two for an even count) and p90 (nearest rank) of the
/// measured samples; `None` when there is none.
fn stats(samples: &[Option<Duration>]) -> Option<Stats> {
    let mut measured: Vec<Duration> = samples.iter().flatten().copied().collect();
    if measured.is_empty() {
        return None;
    }
    measured.sort();
    let n = measured.len();
    let median = if n % 2 == 1 {
        measured[n / 2]
    } else {
        (measured[n / 2 - 1] + measured[n / 2]) / 2
    };
    let rank = (n * 9).div_ceil(10).max(1);
    Some(Stats {
        median,
        p90: measured[rank - 1],
    })
}

/// The samples of one contender and kind, one per round (`None`: no event in time).
#[derive(Debug, Default, Clone)]
struct Samples {
    zkit: Vec<Option<Duration>>,
    curator: Vec<Option<Duration>>,
}

fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

/// The report's table (Markdown) and whether every target held.
fn failover_table(
    lock: &Samples,
    txn: &Samples,
    connected: &Samples,
    errors: &[(&str, [u64; 2])],
) -> (String, bool) {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| after the leader's kill -9, time to… | zkit median | zkit p90 | Curator median | \
         Curator p90 | zkit / Curator (medians) | target zkit ≤ Curator |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|");
    let mut all_held = true;
    let rows = [
        (
            "the next acquired lock (zkit `Mutex` / Curator `InterProcessMutex`)",
            lock,
            true,
        ),
        (
            "the next committed transaction: zkit's 2PC coordinator, 3 participants / Curator's \
             `transaction()` multi of 3 `setData` (Curator has no 2PC)",
            txn,
            true,
        ),
        (
            "diagnostic: the first session reconnected (zkit `Reconnected` / Curator \
             `RECONNECTED`)",
            connected,
            false,
        ),
    ];
    for (what, samples, has_target) in rows {
        let (z, c) = (stats(&samples.zkit), stats(&samples.curator));
        let cell = |s: Option<Stats>, f: fn(Stats) -> Duration, all: &[Option<Duration>]| {
            let missing = all.iter().filter(|s| s.is_none()).count();
            match s {
                Some(s) if missing == 0 => secs(f(s)),
                Some(s) => format!("{} ({missing} of {} rounds: none)", secs(f(s)), all.len()),
                None => "none".to_string(),
            }
        };
        let (ratio, verdict) = match (z, c) {
            (Some(z), Some(c)) if !c.median.is_zero() => {
                let ratio = z.median.as_secs_f64() / c.median.as_secs_f64();
                let missing = samples.zkit.iter().any(Option::is_none);
                let held = ratio <= 1.0 && !missing;
                let verdict = if !has_target {
                    "(no target)"
                } else if held {
                    "**held**"
                } else {
                    "**NOT held**"
                };
                all_held &= held || !has_target;
                (format!("{ratio:.2}×"), verdict.to_string())
            }
            _ => {
                all_held &= !has_target;
                ("-".to_string(), "not measured".to_string())
            }
        };
        let _ = writeln!(
            out,
            "| {what} | {} | {} | {} | {} | {ratio} | {verdict} |",
            cell(z, |s| s.median, &samples.zkit),
            cell(z, |s| s.p90, &samples.zkit),
            cell(c, |s| s.median, &samples.curator),
            cell(c, |s| s.p90, &samples.curator),
        );
    }
    let _ = writeln!(out);
    for (name, [lock, txn]) in errors {
        let _ = writeln!(
            out,
            "- {name}: {lock} failed lock operations, {txn} failed or aborted transactions over \
             all rounds (reported by the program, which then carries on)"
        );
    }
    (out, all_held)
}

/// Runs `zkit-bench failover`.
pub async fn run(args: &FailoverArgs) -> anyhow::Result<i32> {
    let command_line = crate::servers::command_line(args.command_line.as_deref());
    let temp;
    let work = match &args.work_dir {
        Some(dir) => {
            std::fs::create_dir_all(dir)?;
            dir.canonicalize()?
        }
        None => {
            temp = tempfile::Builder::new()
                .prefix("zkit-bench-failover-")
                .tempdir()?;
            temp.path().to_path_buf()
        }
    };
    let timeout = Duration::from_secs(args.timeout_seconds.max(1));
    let load_before = load_average();
    eprintln!(
        "starting an ensemble of {} under {}",
        args.members,
        work.display()
    );
    // javac and the ensemble's JVMs start side by side.
    let ensemble_dir = work.join("ensemble");
    let (classpath, ensemble) = tokio::join!(
        compile_java(&work, "CuratorFailoverBench", CURATOR_FAILOVER),
        RunningEnsemble::start(&args.apache_zk_script, &ensemble_dir, args.members)
    );
    let ensemble = ensemble?;
    let classpath = classpath.map_err(|e| anyhow::anyhow!("the Curator program: {e}"))?;
    let connect = ensemble.connect_string().to_string();
    eprintln!("ensemble: {connect}");
    let measured = measure(args, &ensemble, &connect, &classpath, &work, timeout).await;
    let stopped = ensemble.stop().await;
    let (lock, txn, connected, errors) = measured?;
    stopped?;
    let load_after = load_average();
    let (table, held) = failover_table(&lock, &txn, &connected, &errors);
    println!("{table}");
    println!(
        "target (zkit ≤ Curator): {}",
        if held { "held" } else { "NOT held" }
    );
    if let Some(path) = &args.output {
        let body = report_section(args, &command_line, &table, &load_before, &load_after);
        crate::section::write_section(path, SECTION, &body)?;
    }
    Ok(0)
}

type Measured = (Samples, Samples, Samples, Vec<(&'static str, [u64; 2])>);

/// Starts both contenders and runs the rounds.
async fn measure(
    args: &FailoverArgs,
    ensemble: &RunningEnsemble,
    connect: &str,
    classpath: &str,
    work: &Path,
    timeout: Duration,
) -> anyhow::Result<Measured> {
    let clients = args.clients.max(1).to_string();
    let hold = args.hold_ms.to_string();
    let session = args.session_timeout_ms.to_string();
    // Ready: every session connected; a JVM on a loaded machine takes its time.
    let ready_timeout = timeout.max(Duration::from_secs(120));
    let tag = format!("{}-{}", std::process::id(), now_micros());
    let mut zkit = tokio::process::Command::new(std::env::current_exe()?);
    zkit.arg("failover-contender")
        .args(["--server", connect])
        .args(["--path", &format!("/zkit-failover-{tag}")])
        .args(["--clients", &clients])
        .args(["--hold-ms", &hold])
        .args(["--session-timeout-ms", &session]);
    let zkit =
        Contender::start("zkit", zkit, work.join("zkit-contender.log"), ready_timeout).await?;
    let mut curator = tokio::process::Command::new("java");
    curator
        .args(["-cp", classpath, "CuratorFailoverBench", connect])
        .arg(format!("/curator-failover-{tag}"))
        .args([&clients, &hold, &session]);
    let curator = Contender::start(
        "Curator",
        curator,
        work.join("curator-contender.log"),
        ready_timeout,
    )
    .await?;
    let rounds = rounds(args, ensemble, [&zkit, &curator], timeout).await;
    let errors = vec![
        ("zkit", zkit.stop().await.errors),
        ("Curator", curator.stop().await.errors),
    ];
    let (lock, txn, connected) = rounds?;
    Ok((lock, txn, connected, errors))
}

async fn rounds(
    args: &FailoverArgs,
    ensemble: &RunningEnsemble,
    contenders: [&Contender; 2],
    timeout: Duration,
) -> anyhow::Result<(Samples, Samples, Samples)> {
    let mut lock = Samples::default();
    let mut txn = Samples::default();
    let mut connected = Samples::default();
    let total = args.rounds.max(1);
    for round in 1..=total {
        // Progress of every kind on the whole ensemble before the kill.
        let since = now_micros();
        for contender in contenders {
            for kind in KINDS {
                if contender.next_event(kind, since, timeout).await.is_none() {
                    bail!(
                        "round {round}: the {} contender made no {} progress within {timeout:?} \
                         (exited: {}): {}",
                        contender.name,
                        kind.word(),
                        contender.exited(),
                        contender.log_tail()
                    );
                }
            }
        }
        tokio::time::sleep(random_up_to(Duration::from_secs(args.settle_seconds))).await;
        let leader = ensemble.leader().await?;
        let killed = micros(ensemble.kill9(leader).await?);
        let counted_from = killed + u64::try_from(IN_FLIGHT_GRACE.as_micros()).unwrap_or(0);
        let mut line = format!("round {round}/{total}: member {leader} (leader) killed;");
        for (index, contender) in contenders.into_iter().enumerate() {
            for kind in MEASURED {
                let next = contender.next_event(kind, counted_from, timeout).await;
                let sample = next.map(|at| Duration::from_micros(at.saturating_sub(killed)));
                let samples = match kind {
                    Kind::Lock => &mut lock,
                    Kind::Txn => &mut txn,
                    Kind::Connected => &mut connected,
                };
                let list = if index == 0 {
                    &mut samples.zkit
                } else {
                    &mut samples.curator
                };
                list.push(sample);
                let _ = write!(
                    line,
                    " {} {} {}",
                    contender.name,
                    kind.word(),
                    sample.map_or("none".to_string(), secs)
                );
            }
        }
        eprintln!("{line}");
        // After the last round the ensemble is stopped anyway.
        if round < total {
            ensemble.restart(leader).await?;
            ensemble.wait_whole(Duration::from_secs(90)).await?;
        }
    }
    Ok((lock, txn, connected))
}

fn report_section(
    args: &FailoverArgs,
    command_line: &str,
    table: &str,
    load_before: &str,
    load_after: &str,
) -> String {
    let build = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    format!(
        "## Failover: time from the leader's kill -9 to the next lock and the next transaction\n\n\
         Generated by `zkit-bench failover`. Command:\n\n```\n{command_line}\n```\n\n\
         - {machine}; load average before/after: {load_before} / {load_after} (a shared \
         machine: read the ratios)\n\
         - A private ensemble of {members} Apache ZooKeeper 3.8 members (scripts/apache-zk: \
         tickTime 500 ms, initLimit 20, syncLimit 10, forceSync), every client given all members\n\
         - Both contenders run at once, through every kill: {clients} sessions each looping on \
         one lock (hold {hold} ms), and one committing transactions one after another (pause \
         {hold} ms); session timeout {session} ms for every session\n\
         - zkit: the library (`zkit-bench failover-contender`, a {build} build), with its \
         defaults; Curator 5 (Debian's libcurator-recipes-java) with \
         `ExponentialBackoffRetry(1000, 3)` and its default 15 s connection timeout\n\
         - {rounds} rounds: wait until both make progress, kill -9 the leader at a random moment \
         within {settle} s, take for each the first event completing after the kill (not \
         within {grace} ms of it: replies already on their way), restart the member, wait \
         until the ensemble is whole again\n\n\
         {table}",
        machine = machine_description(),
        members = args.members,
        clients = args.clients.max(1),
        hold = args.hold_ms,
        session = args.session_timeout_ms,
        rounds = args.rounds.max(1),
        settle = args.settle_seconds,
        grace = IN_FLIGHT_GRACE.as_millis(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_read_from_the_contenders_lines() {
        let mut e = Events::default();
        for line in [
            "noise",
            "READY",
            "EVENT lock 100",
            "EVENT txn 150",
            "EVENT lock 90",
            "ERROR lock KeeperErrorCode = ConnectionLoss",
            "ERROR txn aborted: votes missing",
            "ERROR lock again",
            "EVENT lock notanumber",
            "EVENT connected 120",
            "ERROR connected not a kind of work",
        ] {
            e.apply(line);
        }
        assert!(e.ready && !e.exited);
        assert_eq!(e.lock, vec![100, 90]);
        assert_eq!(e.txn, vec![150]);
        assert_eq!(e.connected, vec![120]);
        assert_eq!(e.errors, [2, 1]);
        assert_eq!(
            e.first_error[0].as_deref(),
            Some("KeeperErrorCode = ConnectionLoss")
        );
        // Lines of several clients may interleave out of time order: the earliest counts.
        assert_eq!(next_after(&e.lock, 80), Some(90));
        assert_eq!(next_after(&e.lock, 95), Some(100));
        assert_eq!(next_after(&e.lock, 100), None);
    }

    #[test]
    fn stats_are_median_and_nearest_rank_p90_of_measured_rounds() {
        let s = |ms: &[u64]| -> Vec<Option<Duration>> {
            ms.iter().map(|&m| Some(Duration::from_millis(m))).collect()
        };
        let ten = s(&[10, 1, 9, 2, 8, 3, 7, 4, 6, 5]);
        let st = stats(&ten).unwrap();
        assert_eq!(st.median, Duration::from_micros(5500));
        assert_eq!(st.p90, Duration::from_millis(9));
        let mut odd = s(&[3, 1, 2]);
        odd.push(None);
        let st = stats(&odd).unwrap();
        assert_eq!(
            (st.median, st.p90),
            (Duration::from_millis(2), Duration::from_millis(3))
        );
        assert_eq!(stats(&[None]), None);
    }

    #[test]
    fn table_reports_ratios_targets_and_missing_rounds() {
        let ms = |v: &[u64]| -> Vec<Option<Duration>> {
            v.iter().map(|&m| Some(Duration::from_millis(m))).collect()
        };
        let lock = Samples {
            zkit: ms(&[800, 1000, 1200]),
            curator: ms(&[1500, 2000, 2500]),
        };
        let mut txn = Samples {
            zkit: ms(&[3000, 3000]),
            curator: ms(&[2000, 2000]),
        };
        let slow = Samples {
            zkit: ms(&[900]),
            curator: ms(&[300]),
        };
        let (table, held) =
            failover_table(&lock, &txn, &slow, &[("zkit", [0, 3]), ("Curator", [7, 2])]);
        assert!(!held, "{table}");
        let lock_row = table.lines().find(|l| l.contains("acquired lock")).unwrap();
        assert!(
            lock_row.contains("| 1.00 s | 1.20 s | 2.00 s | 2.50 s | 0.50× | **held** |"),
            "{lock_row}"
        );
        let txn_row = table
            .lines()
            .find(|l| l.contains("committed transaction"))
            .unwrap();
        assert!(txn_row.contains("1.50× | **NOT held**"), "{txn_row}");
        assert!(txn_row.contains("Curator has no 2PC"), "{txn_row}");
        assert!(
            table.contains("Curator: 7 failed lock operations, 2 failed"),
            "{table}"
        );
        // A round where zkit saw no event: shown, and the target is not held.
        txn.zkit = vec![Some(Duration::from_millis(100)), None];
        let (table, held) = failover_table(&lock, &txn, &slow, &[]);
        assert!(!held);
        assert!(table.contains("(1 of 2 rounds: none)"), "{table}");
        // The diagnostic row has no target: 3× slower there still holds.
        let (table, held) = failover_table(&lock, &lock, &slow, &[]);
        assert!(held, "{table}");
        assert!(table.contains("3.00× | (no target) |"), "{table}");
    }

    #[test]
    fn random_moments_stay_within_the_bound() {
        for _ in 0..100 {
            assert!(random_up_to(Duration::from_millis(30)) <= Duration::from_millis(30));
        }
        assert_eq!(random_up_to(Duration::ZERO), Duration::ZERO);
    }
}
