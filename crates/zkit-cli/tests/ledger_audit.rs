//! The full replicas check with real processes: `zkit serve`, four `zkit bookie` processes,
//! a closed ledger (E3 Qw2 Qa2) written by `zkit ledger write`. One bookie of its ensemble is
//! kill -9'd and comes back with a partial copy of its data (its cookie kept; only the first
//! and last entries of its share copied back, over the bookie protocol, from the other
//! replicas). `zkit ledger audit --check` (first and last entry of each share) finds nothing;
//! `zkit ledger audit --full` names the bookie; `zkit ledger autorecovery --full-check` marks
//! the ledger and re-replicates the bookie's share to the fourth bookie, until every entry is
//! on every bookie of its write set again.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::{first_line, listening_addr, write_ledger};
use zkit::ledger::schedule::{in_write_set, write_set};
use zkit::ledger::{LedgerClient, LedgerOptions};
use zkit::{Session, SessionOptions};
use zkit_bookie::protocol::entry::master_key;
use zkit_bookie::protocol::Status;
use zkit_bookie::{BookieClient, ClientError, ClientOptions};
use zkit_testkit::ChildGuard;

const LIMIT: Duration = Duration::from_secs(60);
const ENTRIES: usize = 300;

fn zkit() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_zkit"));
    c.env_remove("ZKIT_SERVER")
        .env_remove("ZKIT_AUTH")
        .env_remove("ZKIT_LEDGER_PASSWORD")
        .env("RUST_LOG", "warn");
    c
}

fn bookie(dir: &Path, port: u16, zk: &str) -> ChildGuard {
    let (g, line) = first_line(
        zkit()
            .args(["bookie", "--port", &port.to_string(), "--server", zk])
            .args(["--fsync", "never", "--session-timeout", "1s"])
            .args(["--gc-interval", "0s"])
            .arg("--data-dir")
            .arg(dir),
    );
    assert!(line.contains("listening on"), "unexpected line {line:?}");
    g
}

fn run(zk: &str, args: &[&str]) -> String {
    let out = zkit().args(args).args(["--server", zk]).output().unwrap();
    assert!(
        out.status.success(),
        "zkit {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn line(i: usize) -> String {
    format!("entry-{i:06}-{}", "y".repeat(80))
}

async fn connect(addr: &str) -> BookieClient {
    BookieClient::connect(addr.parse().unwrap(), ClientOptions::default())
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_full_check_finds_entries_missing_in_the_middle_and_they_are_rereplicated() {
    let tmp = tempfile::tempdir().unwrap();
    let (_zk, l) = first_line(
        zkit()
            .args(["serve", "--port", "0", "--fsync", "never"])
            .arg("--data-dir")
            .arg(tmp.path().join("zk")),
    );
    let zk = listening_addr(&l);
    let mut bookies: Vec<(PathBuf, u16, Option<ChildGuard>)> = (0..4)
        .map(|i| {
            let dir = tmp.path().join(format!("b{i}"));
            let port = zkit_testkit::free_port();
            let g = bookie(&dir, port, &zk);
            (dir, port, Some(g))
        })
        .collect();

    // A closed ledger of ENTRIES entries (EOF closes it).
    let id = write_ledger(zkit(), &zk, 2, (0..ENTRIES).map(line));

    let session = Session::connect(&zk, SessionOptions::default())
        .await
        .unwrap();
    let client = LedgerClient::with_options(&session, LedgerOptions::default()).unwrap();
    let m = client.info(id).await.unwrap().metadata;
    assert_eq!(m.last_entry_id, ENTRIES as i64 - 1);
    assert_eq!(m.ensembles.len(), 1, "no ensemble change expected");
    let ensemble = m.ensembles[&0].clone();
    let victim = ensemble[1].clone();
    let v = bookies
        .iter()
        .position(|(_, port, _)| format!("127.0.0.1:{port}") == victim)
        .unwrap();
    let share: Vec<i64> = (0..=m.last_entry_id)
        .filter(|e| in_write_set(*e, 1, 3, 2))
        .collect();
    assert_eq!(share.len(), ENTRIES * 2 / 3);

    // kill -9; everything but the cookie (`current/VERSION`) goes; back on the same port.
    bookies[v].2.take().unwrap().kill9().unwrap();
    for f in std::fs::read_dir(bookies[v].0.join("current")).unwrap() {
        let f = f.unwrap();
        if f.file_name() != "VERSION" {
            std::fs::remove_file(f.path()).unwrap();
        }
    }
    bookies[v].2 = Some(bookie(&bookies[v].0, bookies[v].1, &zk));
    // The partial copy: the first and last 10 entries of its share, from the other replica.
    let key = master_key(b"");
    let to = connect(&victim).await;
    let kept: Vec<i64> = share[..10]
        .iter()
        .chain(&share[share.len() - 10..])
        .copied()
        .collect();
    for &e in &kept {
        let other = write_set(e, 3, 2)
            .into_iter()
            .map(|slot| ensemble[slot].clone())
            .find(|b| *b != victim)
            .unwrap();
        let raw = connect(&other).await.read(id, e, None).await.unwrap();
        to.add(id, e, key, true, raw).await.unwrap();
    }
    let middle = share[share.len() / 2];
    assert_eq!(
        to.read(id, middle, None).await,
        Err(ClientError::Status(Status::NoEntry)),
        "the middle of the share is gone"
    );

    // The default check reads the ends of each share: it does not see the gap.
    let check = run(&zk, &["ledger", "audit", "--check"]);
    assert!(!check.contains("short"), "{check}");
    let full = run(&zk, &["ledger", "audit", "--full"]);
    assert!(
        full.lines().any(|l| l == format!("short {id} on {victim}")),
        "{full}"
    );

    // Auto-recovery with the full check: marked, copied to the fourth bookie, CASed in.
    let (_ar, l) = first_line(
        zkit()
            .args(["ledger", "autorecovery", "--server", &zk])
            .args(["--full-check", "--lost-bookie-delay", "1s"]),
    );
    assert_eq!(l, "zkit ledger autorecovery running");
    let start = Instant::now();
    let replaced = loop {
        let m = client.info(id).await.unwrap().metadata;
        let marks = client.store().list_underreplicated().await.unwrap();
        if !m.ensembles[&0].contains(&victim) && marks.is_empty() {
            break m;
        }
        assert!(
            start.elapsed() < LIMIT,
            "not re-replicated: {m:?}, {marks:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let now = replaced.ensembles[&0].clone();
    let before: BTreeSet<&String> = ensemble.iter().collect();
    let new: Vec<&String> = now.iter().filter(|b| !before.contains(b)).collect();
    assert_eq!(new.len(), 1, "one bookie replaced: {now:?}");
    assert_eq!(now[1], *new[0], "in the victim's slot: {now:?}");
    // Every entry is on both bookies of its write set, as written.
    let mut clients = Vec::new();
    for b in &now {
        clients.push(connect(b).await);
    }
    for e in 0..=replaced.last_entry_id {
        for slot in write_set(e, 3, 2) {
            let raw = clients[slot].read(id, e, None).await.unwrap_or_else(|err| {
                panic!("entry {e} not on {}: {err}", now[slot]);
            });
            assert!(
                raw.ends_with(line(e as usize).as_bytes()),
                "entry {e} on {} holds something else",
                now[slot]
            );
        }
    }
    let read = run(&zk, &["ledger", "read", &id.to_string()]);
    let want: Vec<String> = (0..ENTRIES).map(line).collect();
    assert_eq!(read.lines().collect::<Vec<_>>(), want);
    client.close();
    session.close();
}
