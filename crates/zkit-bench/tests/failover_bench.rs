//! `zkit-bench failover` at its smallest (one leader kill, a 1 s settle), so that the harness
//! keeps working: a real 3-member Apache ZooKeeper ensemble (scripts/apache-zk), the zkit and
//! Curator contenders as real processes, a real kill -9 of the leader and its restart. It
//! checks that both contenders were measured after the kill and that the report section was
//! written; the figures themselves are the benchmark's business, not this test's.
//!
//! Runs in the `ensemble` nextest group (its name contains `ensemble_fault`): one ensemble test
//! at a time.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// The seconds of a `| X.XX s |` cell, or `None` for `none`, `-` and the like.
fn seconds(cell: &str) -> Option<f64> {
    cell.trim().strip_suffix(" s")?.parse().ok()
}

#[test]
fn failover_harness_measures_both_contenders_after_one_leader_kill_ensemble_fault() {
    if !zkit_testkit::ensemble_available() {
        return;
    }
    if zkit_testkit::curator_classpath().is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "Curator jars missing under CI (scripts/apache-zk install)"
        );
        eprintln!("SKIP failover bench: Curator jars missing (scripts/apache-zk install)");
        return;
    }
    let work = tempfile::tempdir().expect("temp dir");
    let report = work.path().join("report.md");
    std::fs::write(&report, "# Report\n\nhand-written text\n").expect("seed report");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/apache-zk");
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_zkit-bench"))
        .args([
            "failover",
            "--rounds",
            "1",
            "--settle-seconds",
            "1",
            "--clients",
            "2",
            "--timeout-seconds",
            "60",
        ])
        .arg("--apache-zk-script")
        .arg(&script)
        .arg("--work-dir")
        .arg(work.path().join("run"))
        .arg("--output")
        .arg(&report)
        .output()
        .expect("run zkit-bench failover");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{stderr}\n{stdout}\n(took {:?})", started.elapsed());
    assert!(out.status.success(), "zkit-bench failover failed");
    assert!(
        stderr.contains("round 1/1: member") && stderr.contains("(leader) killed"),
        "no leader kill reported"
    );
    for (row, what) in [
        ("the next acquired lock", "lock"),
        ("the next committed transaction", "transaction"),
    ] {
        let line = stdout
            .lines()
            .find(|l| l.starts_with(&format!("| {row}")))
            .unwrap_or_else(|| panic!("no {what} row in the table"));
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        // "", label, zkit median, zkit p90, Curator median, Curator p90, ratio, verdict, "".
        assert_eq!(cells.len(), 9, "{line}");
        for (name, cell) in [("zkit", cells[2]), ("Curator", cells[4])] {
            let s = seconds(cell)
                .unwrap_or_else(|| panic!("{name} has no {what} time after the kill: {line}"));
            // Nothing that needs the new leader can complete sooner than 200 ms after the kill:
            // the surviving members' election alone waits that long before deciding
            // (FastLeaderElection.finalizeWait). A harness that did not really kill the leader,
            // or that took the wrong instant, would report less.
            assert!(
                (0.2..60.0).contains(&s),
                "{name} {what}: {s} s is not a time to recover from a leader kill"
            );
        }
        assert!(
            cells[7].contains("held"),
            "no verdict in the {what} row: {line}"
        );
    }
    let doc = std::fs::read_to_string(&report).expect("report written");
    assert!(
        doc.starts_with("# Report\n\nhand-written text\n"),
        "text outside the section was not kept: {doc}"
    );
    assert!(doc.contains("<!-- BEGIN failover"), "{doc}");
    assert!(doc.contains("<!-- END failover -->"), "{doc}");
    assert!(
        doc.contains("| the next acquired lock"),
        "the table is not in the report: {doc}"
    );
    // Bounded: nextest kills at 180 s; this should take well under a minute.
    assert!(started.elapsed() < Duration::from_secs(170));
}
