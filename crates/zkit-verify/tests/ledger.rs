//! The quick ledger workload: writers append through `zkit::ledger` to four real `zkit bookie`
//! processes (metadata on a real `zkit serve`), a recoverer fences live writers' ledgers now
//! and then, while the nemesis kills (-9) and pauses bookies and writers; afterwards every
//! ledger is recovered and read by two readers. The ledger checker: every acknowledged entry
//! readable after recovery, readers agree, a fenced writer never acknowledged.
//!
//! Replay: `ZKIT_VERIFY_SEED=N cargo nextest run -p zkit-verify -E 'test(NAME)'`. Needs the
//! `zkit` binary (`cargo build -p zkit-cli`).

mod common;

use std::path::PathBuf;
use std::time::Duration;

use common::{assert_valid, print_faults, replay, run_dir, run_reported, seed};
use zkit_verify::history::{EventKind, Op};
use zkit_verify::nemesis::FaultKind;
use zkit_verify::runner::{RunConfig, ServerCommand};
use zkit_verify::workload::Workload;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ledger_under_bookie_and_writer_kills_and_pauses() {
    use FaultKind::*;
    let name = "ledger_under_bookie_and_writer_kills_and_pauses";
    let seed = seed(211);
    let dir = run_dir("zkit-verify-ledger-");
    let zkit = zkit_testkit::zkit_bin();
    let mut config = RunConfig::quick(
        Workload::Ledger,
        seed,
        ServerCommand::zkit_serve(zkit.clone()),
        PathBuf::from(env!("CARGO_BIN_EXE_zkit-verify")),
        dir.path().join("run"),
    );
    config.zkit_bin = Some(zkit);
    config.faults = vec![KillBookie, PauseBookie, KillClient, PauseClient];
    config.clients = 3;
    config.duration = Duration::from_secs(10);
    config.progress_between_faults = Some(config.op_timeout);
    config.replay = replay(seed, name);
    let result = run_reported(config).await;
    print_faults(&result);
    assert_valid(&result, dir);
    let ops = result.history.operations().expect("paired history");
    let count =
        |f: &dyn Fn(&Op, EventKind) -> bool| ops.iter().filter(|o| f(o.op(), o.kind())).count();
    let acked = count(&|op, k| matches!(op, Op::LedgerAppend { .. }) && k == EventKind::Ok);
    let fenced_live = count(&|op, k| matches!(op, Op::LedgerRecover { .. }) && k == EventKind::Ok);
    let reads =
        count(&|op, k| matches!(op, Op::LedgerRead { value: Some(_), .. }) && k == EventKind::Ok);
    eprintln!("{acked} acknowledged appends, {fenced_live} recoveries, {reads} entries read");
    // Not vacuous: entries were acknowledged, ledgers recovered (mid-run and at the end), and
    // every acknowledged entry was read back by both readers.
    assert!(acked >= 100, "{}", result.summary());
    assert!(fenced_live >= 3, "{}", result.summary());
    assert!(reads >= 2 * acked, "{acked} acked, {reads} read");
    assert!(result.counts.faults >= 2, "{}", result.schedule);
}
