//! The quick profile against the reference system: an Apache ZooKeeper 3.8 ensemble of three
//! members (`scripts/apache-zk`, Debian's `zookeeper` package) under member faults. What the
//! checkers accept here is what ZooKeeper itself does, so these runs prove the checkers as
//! much as they test anything.
//!
//! This binary is named `ensemble`: the nextest `ensemble` test group runs its tests one at a
//! time (three JVMs each). A failure prints the seed, the schedule and the sub-history around
//! each violation; `ZKIT_VERIFY_SEED=N cargo nextest run -p zkit-verify -E 'test(NAME)'`
//! replays the schedule.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use common::{print_faults, replay, run_dir, run_reported, seed};
use zkit_verify::history::FaultPhase;
use zkit_verify::nemesis::{Fault, FaultKind};
use zkit_verify::runner::{EnsembleOptions, RunConfig, RunResult, ServerCommand};
use zkit_verify::workload::Workload;

async fn on_ensemble(
    name: &str,
    workload: Workload,
    faults: &[FaultKind],
    default_seed: u64,
    duration: Duration,
    min_ok: usize,
    min_faults: usize,
) -> Option<(RunResult, KeptOnPanic)> {
    if !zkit_testkit::ensemble_available() {
        return None;
    }
    let seed = seed(default_seed);
    let dir = run_dir(&format!("zkit-verify-{name}-"));
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_zkit-verify"));
    let mut config = RunConfig::quick(
        workload,
        seed,
        ServerCommand::embedded(bin.clone(), &[]),
        bin,
        dir.path().join("run"),
    );
    config.ensemble = Some(EnsembleOptions {
        members: 3,
        links: false,
    });
    config.faults = faults.to_vec();
    config.duration = duration;
    config.clients = 3;
    // Each fault waits for the ensemble to work again after the last one (JVMs on two busy
    // cores take a while to elect and sync), so every fault hits a serving ensemble.
    config.progress_between_faults = Some(config.op_timeout * 2);
    config.replay = replay(seed, name);
    let result = run_reported(config).await;
    print_faults(&result);
    let files = KeptOnPanic(dir.keep());
    if !result.is_valid() {
        panic!("{}", result.failure_report());
    }
    assert!(
        result.counts.ok >= min_ok,
        "too little happened: {}",
        result.summary()
    );
    // Every planned fault was injected on a member it named (no "error:" or "skipped").
    let injected = result
        .history
        .faults
        .iter()
        .filter(|f| f.phase == FaultPhase::Start)
        .filter(|f| {
            f.note
                .as_deref()
                .is_some_and(|n| !n.starts_with("error") && !n.contains("skipped"))
        })
        .count();
    assert!(
        injected >= min_faults && injected == result.schedule.planned.len(),
        "faults did not land: {:#?}",
        result.history.faults
    );
    Some((result, files))
}

/// The notes of the run's faults (what each injection and recovery did).
fn fault_notes(r: &RunResult) -> Vec<&str> {
    r.history
        .faults
        .iter()
        .filter_map(|f| f.note.as_deref())
        .collect()
}

/// A run's files (history, member logs): removed when the test passes, kept and named when
/// it fails.
struct KeptOnPanic(PathBuf);

impl Drop for KeptOnPanic {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("files kept in {}", self.0.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// CAS registers (reads after a sync) while the leader and followers are killed -9 and
/// restarted, or SIGSTOPped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ensemble_register_under_member_kills_and_pauses() {
    use FaultKind::*;
    let Some((r, _files)) = on_ensemble(
        "ensemble_register_under_member_kills_and_pauses",
        Workload::Register,
        &[KillLeader, KillFollower, PauseLeader, PauseFollower],
        101,
        Duration::from_secs(12),
        100,
        2,
    )
    .await
    else {
        return;
    };
    // A member really died and came back mid-run.
    let notes = fault_notes(&r);
    assert!(
        notes.iter().any(|n| n.starts_with("killed member"))
            && notes.iter().any(|n| n.ends_with("restarted")),
        "{notes:#?}"
    );
}

/// A set while the leader is cut off from both followers for longer than syncLimit (its
/// clients keep their connections to it), and healed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ensemble_set_under_leader_isolation() {
    let Some((r, _files)) = on_ensemble(
        "ensemble_set_under_leader_isolation",
        Workload::Set,
        &[FaultKind::IsolateLeader],
        103,
        Duration::from_secs(14),
        100,
        1,
    )
    .await
    else {
        return;
    };
    let notes = fault_notes(&r);
    assert!(
        notes.iter().any(|n| n.contains("cut off from the others")),
        "{notes:#?}"
    );
    // The cut bit: the isolated leader lost its quorum and stopped leading.
    assert!(
        notes.iter().any(|n| n.contains("lost its leadership")),
        "{notes:#?}"
    );
    assert!(r
        .schedule
        .planned
        .iter()
        .all(|p| matches!(p.fault, Fault::IsolateMember { duration, .. }
            if duration > Duration::from_secs(5))));
}
