//! A deliberately broken server proves the checkers: the embedded server of `zkit-verify
//! serve` with a test-only fail point of zkit-server (`--features zkit-server/failpoints`)
//! - acknowledges writes before they reach the log (`storage::commit::ack_before_write`): a
//!   kill -9 then loses acknowledged adds, and the set checker must say so;
//! - answers getData from a stale cache (`pipeline::stale_reads`): the linearizability checker
//!   must reject the register history, and the sessions checker must see a session's read go
//!   back behind its own write.
//!
//! Without the feature the fail points do nothing: the tests then print SKIP (and fail under
//! CI, where `scripts/test` enables the feature).

use std::path::PathBuf;
use std::time::Duration;

use zkit_server::storage::failpoint;
use zkit_verify::nemesis::FaultKind;
use zkit_verify::runner::{run, RunConfig, RunResult, ServerCommand};
use zkit_verify::workload::Workload;

fn enabled(name: &str) -> bool {
    if failpoint::ENABLED {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "{name} needs --features zkit-server/failpoints (scripts/test enables it)"
    );
    eprintln!("SKIP {name}: built without zkit-server/failpoints");
    false
}

async fn broken(workload: Workload, faults: &[FaultKind], failpoint: &str, seed: u64) -> RunResult {
    let dir = tempfile::tempdir().expect("temp dir");
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_zkit-verify"));
    let fp = format!("{failpoint}=return(300)");
    let mut config = RunConfig::quick(
        workload,
        seed,
        ServerCommand::embedded(
            bin.clone(),
            &["--failpoint", &fp, "--wal-segment-size", "1048576"],
        ),
        bin,
        dir.path().join("run"),
    );
    config.faults = faults.to_vec();
    config.duration = Duration::from_secs(6);
    // Each kill waits for a write acknowledged since the last restart: a kill that lands while
    // the clients are still reconnecting finds no acknowledged-but-unwritten write to lose.
    config.progress_between_faults = Some(config.op_timeout);
    let result = run(config).await.expect("the run could not be set up");
    eprintln!("{}", result.failure_report());
    result
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledging_before_the_log_loses_writes_and_the_set_checker_says_so() {
    if !enabled("ack_before_write") {
        return;
    }
    let r = broken(
        Workload::Set,
        &[FaultKind::Kill],
        failpoint::ACK_BEFORE_WRITE,
        3,
    )
    .await;
    assert!(r.counts.faults >= 1, "{}", r.schedule);
    assert!(
        !r.report.is_valid(),
        "lost writes went unnoticed: {}",
        r.summary()
    );
    assert!(
        r.report
            .violations
            .iter()
            .all(|v| v.message.contains("acknowledged but is lost")),
        "{}",
        r.failure_report()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_reads_are_not_linearizable() {
    if !enabled("stale_reads") {
        return;
    }
    let r = broken(Workload::Register, &[], failpoint::STALE_READS, 5).await;
    assert!(
        !r.report.is_valid(),
        "stale reads went unnoticed: {}",
        r.summary()
    );
    assert!(
        r.report.violations[0].message.contains("not linearizable"),
        "{}",
        r.failure_report()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_reads_break_a_sessions_monotonic_reads() {
    if !enabled("stale_reads_sessions") {
        return;
    }
    let r = broken(Workload::Sessions, &[], failpoint::STALE_READS, 7).await;
    assert!(
        !r.report.is_valid(),
        "stale reads went unnoticed: {}",
        r.summary()
    );
    assert!(
        r.report
            .violations
            .iter()
            .any(|v| v.message.contains("after it had seen")),
        "{}",
        r.failure_report()
    );
}
