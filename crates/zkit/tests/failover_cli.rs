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
use std::sync::atomic::{AtomicUsize, Ordering};
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ensemble_fault_zkit_lock_default_flags_through_leader_kill() {
    if !ensemble_available() {
        return;
    }
    let runs = runs_per_process();
    let ensemble = Ensemble::start(3).await.expect("ensemble starts");
    let dir = tempfile::tempdir().expect("tempdir");
    let marker = dir.path().join("inside");
    let tokens = dir.path().join("tokens");
    let overlaps = dir.path().join("overlaps");
    // The critical section: enter (mkdir fails if someone is inside), record the token, hold
    // for a while so that the kill lands on a holder, leave.
    let script = format!(
        "mkdir {m} 2>/dev/null || {{ echo \"$ZKIT_FENCING_TOKEN\" >> {o}; exit 99; }}; \
         echo \"$ZKIT_FENCING_TOKEN\" >> {t}; sleep 0.3; rmdir {m}",
        m = marker.display(),
        t = tokens.display(),
        o = overlaps.display()
    );
    let done = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for p in 0..PROCESSES {
        let (connect, script, done) = (
            ensemble.connect_string().to_owned(),
            script.clone(),
            Arc::clone(&done),
        );
        tasks.push(tokio::spawn(async move {
            let mut failures = Vec::new();
            for r in 0..runs {
                let out = tokio::process::Command::new(zkit_bin())
                    .args(["lock", "--server", &connect, "/failover-lock", "--"])
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
            }
            failures
        }));
    }

    // The faults: kill -9 the leader mid-run, restart it once a new leader serves.
    let total = PROCESSES * runs;
    let mut kills = 0;
    let mut next_kill = KILL_EVERY.min(total / 2);
    // Well inside nextest's 180 s at the default counts, so that a hang reports its state.
    let limit = Instant::now() + Duration::from_secs(60 + 2 * total as u64);
    while done.load(Ordering::SeqCst) < total {
        if Instant::now() > limit {
            let status = ensemble.status().await.unwrap_or_default();
            panic!(
                "only {} of {total} runs finished in time; ensemble:\n{status}",
                done.load(Ordering::SeqCst)
            );
        }
        if done.load(Ordering::SeqCst) >= next_kill {
            let leader = ensemble.leader().await.expect("a leader");
            ensemble.kill(leader).await.expect("kill -9 the leader");
            eprintln!(
                "killed leader {leader} after {} runs ({:?})",
                done.load(Ordering::SeqCst),
                started.elapsed()
            );
            kills += 1;
            // Restart it once the others have elected a new leader (restart waits for it to
            // serve, which needs a quorum).
            let elected = Instant::now() + Duration::from_secs(30);
            while ensemble.leader().await.is_err() {
                assert!(Instant::now() < elected, "no new leader");
                eprintln!("waiting for a new leader");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            ensemble.restart(leader).await.expect("restart");
            next_kill += KILL_EVERY;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut failures = Vec::new();
    for task in tasks {
        failures.extend(task.await.expect("task"));
    }
    let overlapped = std::fs::read_to_string(&overlaps).unwrap_or_default();
    let tokens: Vec<i64> = std::fs::read_to_string(&tokens)
        .expect("tokens")
        .lines()
        .map(|l| l.parse().expect("token"))
        .collect();
    eprintln!(
        "{PROCESSES} processes x {runs} runs, {kills} leader kill(s): {} failed, {} overlaps, \
         {:?}",
        failures.len(),
        overlapped.lines().count(),
        started.elapsed()
    );
    assert!(kills >= 1, "the leader was never killed");
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
