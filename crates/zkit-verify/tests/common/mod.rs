//! What the verification profiles share: the seed (`ZKIT_VERIFY_SEED` or the test's own), the
//! replay command a failure prints, and running a configured run with its summary printed and
//! its checker's verdict asserted.
#![allow(dead_code)]

use tempfile::TempDir;
use zkit_verify::runner::{run, RunConfig, RunResult};

/// `ZKIT_VERIFY_SEED` when it is set to a number, else `default`.
pub fn seed(default: u64) -> u64 {
    std::env::var("ZKIT_VERIFY_SEED")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(default)
}

/// The command that replays test `name` with `seed`.
pub fn replay(seed: u64, name: &str) -> String {
    format!("ZKIT_VERIFY_SEED={seed} cargo nextest run -p zkit-verify -E 'test({name})'")
}

/// A fresh temp dir for one run's files, named after `prefix`.
pub fn run_dir(prefix: &str) -> TempDir {
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .expect("temp dir")
}

/// Runs `config` and prints its summary and fault schedule.
///
/// # Panics
/// When the run cannot be set up.
pub async fn run_reported(config: RunConfig) -> RunResult {
    let result = run(config).await.expect("the run could not be set up");
    eprintln!("{}\n{}", result.summary(), result.schedule);
    result
}

/// Prints each fault of the history: its phase, what it was and its note.
pub fn print_faults(result: &RunResult) {
    for f in &result.history.faults {
        eprintln!("  {:?} {} {:?}", f.phase, f.fault, f.note);
    }
}

/// Fails the test with the checker's report when `result` is not valid, keeping `dir` (the
/// run's files) and naming it; removes `dir` otherwise.
pub fn assert_valid(result: &RunResult, dir: TempDir) {
    if !result.is_valid() {
        let kept = dir.keep();
        panic!(
            "{}\n(files kept in {})",
            result.failure_report(),
            kept.display()
        );
    }
}
