//! Garbage collection of a deleted ledger with real processes: `zkit serve`, three
//! `zkit bookie` processes collecting every 200 ms, two ledgers written by `zkit ledger write`;
//! after `zkit ledger delete` of one, every bookie reclaims its entry log space (it asked
//! ZooKeeper, found the metadata gone, dropped the ledger and compacted), and the other
//! ledger still reads back whole.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{first_line, listening_addr, write_ledger};
use zkit_testkit::ChildGuard;

fn zkit() -> Command {
    Command::new(env!("CARGO_BIN_EXE_zkit"))
}

/// Line `i` of the ledger `tag`.
fn entry(tag: &str, i: usize) -> String {
    format!("{tag}-{i:06}-{}", "x".repeat(80))
}

fn entry_log_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir.join("current"))
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter(|e| e.file_name().to_string_lossy().starts_with("entrylog-"))
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

#[test]
fn bookies_reclaim_a_deleted_ledgers_space_and_keep_the_others() {
    let tmp = tempfile::tempdir().unwrap();
    let (_zk, line) = first_line(
        zkit()
            .args(["serve", "--port", "0", "--fsync", "never"])
            .arg("--data-dir")
            .arg(tmp.path().join("zk"))
            .env("RUST_LOG", "warn"),
    );
    let zk = listening_addr(&line);
    let dirs: Vec<_> = (0..3).map(|i| tmp.path().join(format!("b{i}"))).collect();
    let _bookies: Vec<ChildGuard> = dirs
        .iter()
        .map(|d| {
            let (g, line) = first_line(
                zkit()
                    .args([
                        "bookie",
                        "--port",
                        &zkit_testkit::free_port().to_string(),
                        "--server",
                        &zk,
                    ])
                    .args(["--fsync", "never", "--gc-interval", "200ms"])
                    .arg("--data-dir")
                    .arg(d)
                    .env("RUST_LOG", "warn"),
            );
            assert!(line.contains("listening on"), "unexpected line {line:?}");
            g
        })
        .collect();

    let doomed = write_ledger(zkit(), &zk, 3, (0..3000).map(|i| entry("doomed", i)));
    let kept = write_ledger(zkit(), &zk, 3, (0..300).map(|i| entry("kept", i)));
    let before: Vec<u64> = dirs.iter().map(|d| entry_log_bytes(d)).collect();
    eprintln!("entry log bytes before the delete: {before:?}");
    assert!(before.iter().all(|&b| b > 300_000), "{before:?}");

    let st = zkit()
        .args(["ledger", "delete", &doomed.to_string(), "--server", &zk])
        .status()
        .unwrap();
    assert!(st.success());
    // Every bookie drops the ledger and compacts: about a tenth of the bytes stay.
    let start = Instant::now();
    loop {
        let now: Vec<u64> = dirs.iter().map(|d| entry_log_bytes(d)).collect();
        if now.iter().zip(&before).all(|(n, b)| *n < b / 5) {
            eprintln!("after {:?}: {now:?}", start.elapsed());
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "space not reclaimed: {now:?} of {before:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    let out = zkit()
        .args(["ledger", "read", &kept.to_string(), "--server", &zk])
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    let want: Vec<String> = (0..300).map(|i| entry("kept", i)).collect();
    assert_eq!(lines, want, "the kept ledger reads back whole");
}
