//! `zkit lock` with default flags through a leader failover of a private 3-member Apache
//! ZooKeeper ensemble (`zkit_testkit::Ensemble`): 6 processes loop on `zkit lock /L -- CMD`
//! around a critical section while the leader is killed with SIGKILL mid-run and restarted.
//!
//! Checked: no two CMDs at once (CMD `mkdir`s a marker directory, which fails if another CMD is
//! inside, and removes it on the way out), fencing tokens strictly increasing in the order the
//! critical sections ran, and every run exits 0 (no waiter fails, no holder is stopped).
//!
//! Default: 6 × 8 runs, one leader kill. `ZKIT_FAILOVER_RUNS=N` makes it N runs per process,
//! with a leader kill after every 24 completed runs (the long profile:
//! `ZKIT_FAILOVER_RUNS=40 cargo nextest run -p zkit --test failover_cli`). Runs in the
//! `ensemble` nextest test group (one ensemble at a time).

use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use zkit_testkit::{ensemble_available, zkit_bin, Ensemble};

const PROCESSES: usize = 6;
const KILL_EVERY: usize = 24;
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
