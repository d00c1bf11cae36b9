//! `zkit lock` with default flags through the faults of a private Apache ZooKeeper ensemble
//! (`zkit_testkit::Ensemble`): 6 processes loop on `zkit lock /L -- CMD` around a critical
//! section while the ensemble fails under them:
//!
//! - the leader killed with SIGKILL mid-run and restarted;
//! - the leader stopped (SIGSTOP) for longer than the session timeout, then resumed (SIGCONT);
//! - the member most of the processes are connected to killed with SIGKILL, then restarted;
//! - two of five members paused (a quorum is left), then a third one (the quorum is lost until
//!   no member leads), then all three resumed.
//!
//! Checked, OS-level, for every fault: no two CMDs at once (CMD `mkdir`s a marker directory,
//! which fails if another CMD is inside, and removes it on the way out), fencing tokens strictly
//! increasing in the order the critical sections ran, every run exits 0 (no waiter fails, no
//! holder is stopped), and runs complete during and after the fault.
//!
//! Default: each process runs 8 times (more if the fault is still under way), one fault each.
//! `ZKIT_FAILOVER_RUNS=N` makes it at least N runs per process; the leader-kill test then kills
//! the leader after every 24 completed runs (the long profile:
//! `ZKIT_FAILOVER_RUNS=40 cargo nextest run -p zkit --test failover_cli`). The tests run in the
//! `ensemble` nextest test group (one ensemble at a time).

use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use zkit_testkit::{ensemble_available, zkit_bin, Ensemble};

const PROCESSES: usize = 6;
const KILL_EVERY: usize = 24;
/// `zkit lock`'s default session timeout (the tests pass no flags but `--server`).
const SESSION_TIMEOUT: Duration = Duration::from_secs(10);

fn runs_per_process() -> usize {
    std::env::var("ZKIT_FAILOVER_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(8)
}

/// `PROCESSES` processes looping on `zkit lock --server CONNECT PATH -- sh -c SCRIPT`, where
/// SCRIPT is the checked critical section. Each runs at least `runs` times, and on until
/// [`LockRuns::finish`].
struct LockRuns {
    dir: tempfile::TempDir,
    done: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<Vec<String>>>,
    started: Instant,
    /// Bound of the whole test, well inside nextest's 180 s, so that a hang reports its state.
    limit: Instant,
}

impl LockRuns {
    fn start(ensemble: &Ensemble, path: &str, runs: usize) -> LockRuns {
        let dir = tempfile::tempdir().expect("tempdir");
        let marker = dir.path().join("inside");
        // The critical section: enter (mkdir fails if someone is inside), record the token,
        // hold for a while so that the fault lands on a holder, leave.
        let script = format!(
            "mkdir {m} 2>/dev/null || {{ echo \"$ZKIT_FENCING_TOKEN\" >> {o}; exit 99; }}; \
             echo \"$ZKIT_FENCING_TOKEN\" >> {t}; sleep 0.3; rmdir {m}",
            m = marker.display(),
            t = dir.path().join("tokens").display(),
            o = dir.path().join("overlaps").display()
        );
        let done = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let mut tasks = Vec::new();
        for p in 0..PROCESSES {
            let (connect, script, done, stop, path) = (
                ensemble.connect_string().to_owned(),
                script.clone(),
                Arc::clone(&done),
                Arc::clone(&stop),
                path.to_owned(),
            );
            tasks.push(tokio::spawn(async move {
                let mut failures = Vec::new();
                let mut r = 0;
                while r < runs || !stop.load(Ordering::SeqCst) {
                    let out = tokio::process::Command::new(zkit_bin())
                        .args(["lock", "--server", &connect, &path, "--"])
                        .args(["sh", "-c", &script])
                        .stdin(Stdio::null())
                        .kill_on_drop(true)
                        .output()
                        .await
                        .expect("run zkit lock");
                    if !out.status.success() {
                        failures.push(format!(
                            "process {p} run {r}: {} {}",
                            out.status,
                            String::from_utf8_lossy(&out.stderr).trim()
                        ));
                    }
                    done.fetch_add(1, Ordering::SeqCst);
                    r += 1;
                }
                failures
            }));
        }
        LockRuns {
            dir,
            done,
            stop,
            tasks,
            started: Instant::now(),
            limit: Instant::now() + Duration::from_secs(60 + 2 * (PROCESSES * runs) as u64),
        }
    }

    /// Runs completed so far.
    fn done(&self) -> usize {
        self.done.load(Ordering::SeqCst)
    }

    /// Waits (bounded by the test's limit) until `n` more runs completed.
    async fn progress(&self, ensemble: &Ensemble, n: usize, what: &str) {
        let want = self.done() + n;
        self.until(ensemble, want, what).await;
    }

    /// Waits (bounded by the test's limit) until `total` runs completed in all.
    async fn until(&self, ensemble: &Ensemble, total: usize, what: &str) {
        while self.done() < total {
            if Instant::now() > self.limit {
                let status = ensemble.status().await.unwrap_or_default();
                panic!(
                    "{what}: only {} of {total} runs finished in time; ensemble:\n{status}",
                    self.done()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Lets every process end after its current run (once it ran its `runs`), then checks
    /// what they did: no overlap, no failed run, one strictly increasing token per run.
    async fn finish(self, ensemble: &Ensemble, what: &str) {
        self.stop.store(true, Ordering::SeqCst);
        let mut failures = Vec::new();
        for task in self.tasks {
            let left = self.limit.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, task).await {
                Ok(task) => failures.extend(task.expect("task")),
                Err(_) => {
                    let status = ensemble.status().await.unwrap_or_default();
                    panic!("a process did not end in time; ensemble:\n{status}");
                }
            }
        }
        let total = self.done.load(Ordering::SeqCst);
        let overlapped =
            std::fs::read_to_string(self.dir.path().join("overlaps")).unwrap_or_default();
        let tokens: Vec<i64> = std::fs::read_to_string(self.dir.path().join("tokens"))
            .expect("tokens")
            .lines()
            .map(|l| l.parse().expect("token"))
            .collect();
        eprintln!(
            "{what}: {PROCESSES} processes, {total} runs: {} failed, {} overlaps, {:?}",
            failures.len(),
            overlapped.lines().count(),
            self.started.elapsed()
        );
        assert!(overlapped.is_empty(), "two holders at once: {overlapped}");
        assert!(failures.is_empty(), "failed runs: {failures:#?}");
        assert_eq!(
            tokens.len(),
            total,
            "every run entered the critical section once"
        );
        assert!(
            tokens.windows(2).all(|w| w[0] < w[1]),
            "fencing tokens not strictly increasing: {tokens:?}"
        );
    }
}

/// Waits (bounded) until a member leads again.
async fn wait_leader(ensemble: &Ensemble) -> usize {
    let elected = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(leader) = ensemble.leader().await {
            return leader;
        }
        assert!(Instant::now() < elected, "no new leader");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Member `m`'s answer to the four-letter word `word` (bounded: a paused member answers
/// nothing).
async fn four_letter(ensemble: &Ensemble, m: usize, word: &str) -> String {
    let ask = async {
        let mut stream = tokio::net::TcpStream::connect(ensemble.member_addr(m)).await?;
        stream.write_all(word.as_bytes()).await?;
        let mut out = String::new();
        stream.read_to_string(&mut out).await?;
        Ok::<_, std::io::Error>(out)
    };
    match tokio::time::timeout(Duration::from_secs(2), ask).await {
        Ok(Ok(out)) => out,
        Ok(Err(_)) | Err(_) => String::new(),
    }
}

/// The number of client connections member `m` has (`mntr`'s `zk_num_alive_connections`,
/// less the `mntr` connection itself).
async fn client_connections(ensemble: &Ensemble, m: usize) -> usize {
    let out = four_letter(ensemble, m, "mntr").await;
    out.lines()
        .find_map(|l| l.strip_prefix("zk_num_alive_connections"))
        .and_then(|n| n.trim().parse::<usize>().ok())
        .unwrap_or_else(|| panic!("no connection count in member {m}'s mntr: {out:?}"))
        .saturating_sub(1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ensemble_fault_zkit_lock_default_flags_through_leader_kill() {
    if !ensemble_available() {
        return;
    }
    let runs = runs_per_process();
    let ensemble = Ensemble::start(3).await.expect("ensemble starts");
    let lock = LockRuns::start(&ensemble, "/failover-lock", runs);
    // Exactly `runs` runs per process: they may stop as soon as they ran them.
    lock.stop.store(true, Ordering::SeqCst);
    // The faults: kill -9 the leader mid-run, restart it once a new leader serves.
    let total = PROCESSES * runs;
    let mut kills = 0;
    let mut next_kill = KILL_EVERY.min(total / 2);
    while next_kill < total {
        lock.until(&ensemble, next_kill, "before a kill").await;
        let leader = ensemble.leader().await.expect("a leader");
        ensemble.kill(leader).await.expect("kill -9 the leader");
        eprintln!(
            "killed leader {leader} after {} runs ({:?})",
            lock.done(),
            lock.started.elapsed()
        );
        kills += 1;
        // Restart it once the others have elected a new leader (restart waits for it to
        // serve, which needs a quorum).
        wait_leader(&ensemble).await;
        ensemble.restart(leader).await.expect("restart");
        next_kill += KILL_EVERY;
    }
    assert!(kills >= 1, "the leader was never killed");
    lock.finish(&ensemble, &format!("{kills} leader kill(s)"))
        .await;
}

/// The leader stopped for longer than `zkit lock`'s session timeout: the others elect a new
/// leader; the processes connected to the stopped one notice the silence and move over inside
/// their sessions' validity, keeping what they hold or wait for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ensemble_fault_zkit_lock_leader_paused_longer_than_the_session_timeout() {
    if !ensemble_available() {
        return;
    }
    let ensemble = Ensemble::start(3).await.expect("ensemble starts");
    let lock = LockRuns::start(&ensemble, "/failover-pause", runs_per_process());
    lock.progress(&ensemble, 6, "before the fault").await;
    let leader = ensemble.leader().await.expect("a leader");
    ensemble.pause(leader).await.expect("pause the leader");
    let paused = Instant::now();
    lock.progress(&ensemble, 3, "with the leader stopped").await;
    tokio::time::sleep((SESSION_TIMEOUT + Duration::from_secs(2)).saturating_sub(paused.elapsed()))
        .await;
    ensemble.resume(leader).await.expect("resume");
    eprintln!("leader {leader} resumed after {:?}", paused.elapsed());
    lock.progress(&ensemble, 6, "after the leader resumed")
        .await;
    lock.finish(&ensemble, "leader paused").await;
}

/// The member with the most of the processes' sessions killed with SIGKILL: they go
/// Suspended, move to another member inside their validity and keep what they held; the
/// member is restarted once the others lead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ensemble_fault_zkit_lock_connected_member_killed() {
    if !ensemble_available() {
        return;
    }
    let ensemble = Ensemble::start(3).await.expect("ensemble starts");
    let lock = LockRuns::start(&ensemble, "/failover-connected", runs_per_process());
    lock.progress(&ensemble, 6, "before the fault").await;
    let mut busiest = (0, 0);
    for m in 1..=ensemble.members() {
        let n = client_connections(&ensemble, m).await;
        if n > busiest.1 {
            busiest = (m, n);
        }
    }
    let (member, sessions) = busiest;
    assert!(sessions > 0, "no member has a client connection");
    ensemble.kill(member).await.expect("kill -9");
    eprintln!("killed member {member} with {sessions} connection(s)");
    lock.progress(&ensemble, 6, "with the member down").await;
    wait_leader(&ensemble).await;
    ensemble.restart(member).await.expect("restart");
    lock.progress(&ensemble, 6, "after the member restarted")
        .await;
    lock.finish(&ensemble, "connected member killed").await;
}

/// Five members: two followers paused (a quorum is left: the runs go on), then a third one
/// until no member leads (the quorum is lost: every session is disconnected and nothing can be
/// written), then all three resumed: the runs resume on the same sessions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ensemble_fault_zkit_lock_two_then_three_of_five_paused() {
    if !ensemble_available() {
        return;
    }
    let ensemble = Ensemble::start(5).await.expect("ensemble starts");
    let lock = LockRuns::start(&ensemble, "/failover-quorum", runs_per_process());
    lock.progress(&ensemble, 6, "before the fault").await;
    let leader = ensemble.leader().await.expect("a leader");
    let followers: Vec<usize> = (1..=5).filter(|&m| m != leader).collect();
    for &m in &followers[..2] {
        ensemble.pause(m).await.expect("pause");
    }
    lock.progress(&ensemble, 6, "with two of five paused").await;
    ensemble.pause(followers[2]).await.expect("pause");
    let paused = Instant::now();
    // The leader gives up once it has not heard from a quorum for syncLimit (5 s here), as
    // Leader.lead's check of its synced followers does, and drops its clients.
    let lost = Instant::now() + Duration::from_secs(20);
    while four_letter(&ensemble, leader, "srvr")
        .await
        .contains("Mode: leader")
    {
        assert!(Instant::now() < lost, "the quorum was never lost");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let done = lock.done();
    for &m in &followers[..3] {
        ensemble.resume(m).await.expect("resume");
    }
    eprintln!(
        "quorum lost after {:?}; resumed, {done} runs so far",
        paused.elapsed()
    );
    lock.progress(&ensemble, 6, "after the quorum came back")
        .await;
    lock.finish(&ensemble, "two then three of five paused")
        .await;
}
