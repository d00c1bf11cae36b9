//! The queue's claim/ack mode with its single consumer in a separate process that is killed
//! with SIGKILL at random points, several times, and restarted (against every server of
//! `common::servers()`): at the end every item was acknowledged exactly once and none is
//! missing. Zero tolerance.
//!
//! The consumer (the `queue_consumer` example with `--ack-into`) acks each item with a multi that
//! also creates `RESULTS/<item>`: the result exists iff the ack committed, and a second delivery
//! of an acked item would be caught (the consumer checks for the result on delivery, and the
//! create in the ack would fail) and reported as a `DOUBLE` line plus exit status 3.
//!
//! The consumer is built next to the test binaries by `cargo test -p zkit` / `cargo nextest run
//! -p zkit` (`target/<profile>/examples/`), or by `cargo build -p zkit --examples`.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::{children, eventually, servers, session};
use zkit::queue::{Queue, ITEM_PREFIX};
use zkit::zkit_client as zk;
use zkit_testkit::{unique_path, ChildGuard};

const ITEMS: i64 = 150;
const KILLS: usize = 5;
/// The consumer's session timeout: how long a killed consumer's claim outlives it.
const CONSUMER_SESSION_MS: u64 = 2000;
/// The consumer's "processing" time per item: the window the kills aim at.
const WORK_MS: u64 = 30;

fn consumer_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("test exe");
    // target/<profile>/deps/<test> → target/<profile>/examples/queue_consumer
    let profile = exe.parent().and_then(|d| d.parent()).expect("profile dir");
    profile.join("examples").join("queue_consumer")
}

fn spawn_consumer(addr: &str, path: &str, results: &str, log: &Path) -> ChildGuard {
    ChildGuard::spawn(Command::new(consumer_bin()).args([
        addr,
        path,
        log.to_str().expect("utf-8 temp path"),
        "--ack-into",
        results,
        "--work-ms",
        &WORK_MS.to_string(),
        "--session-timeout-ms",
        &CONSUMER_SESSION_MS.to_string(),
    ]))
    .expect("spawn queue_consumer (built by `cargo test -p zkit` without --test filters, or `cargo build -p zkit --examples`)")
}

/// `(word, sequence)` per log line.
fn log_lines(log: &Path) -> Vec<(String, i64)> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let (word, seq) = l.split_once(' ')?;
            Some((word.to_string(), seq.parse().ok()?))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_item_is_acked_exactly_once_though_the_consumer_is_killed_repeatedly() {
    for target in servers().await {
        let name = target.name;
        let path = unique_path("queue-claim");
        let results = format!("{path}-results");
        let dir = std::env::temp_dir().join(format!("zkit-queue-{}", path.trim_start_matches('/')));
        std::fs::create_dir_all(&dir).unwrap();
        let s = session(&target.addr, Duration::from_secs(10)).await;
        s.client()
            .create(
                &results,
                b"",
                &zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all()),
            )
            .await
            .unwrap();
        let queue = Queue::new(&s, &path).unwrap();
        let producer = tokio::spawn({
            let queue = queue.clone();
            async move {
                let mut offered = BTreeSet::new();
                for i in 0..ITEMS {
                    offered.insert(queue.offer(i.to_string().as_bytes()).await.unwrap());
                }
                offered
            }
        });

        let logs: Vec<PathBuf> = (0..=KILLS).map(|i| dir.join(format!("c{i}.log"))).collect();
        let mut consumer = spawn_consumer(&target.addr, &path, &results, &logs[0]);
        for (k, log) in logs.iter().enumerate().take(KILLS) {
            // A random point in the run, then the next moment this incarnation holds a claim
            // (between its claim and its ack, where the at-most-once `take` would lose the item).
            tokio::time::sleep(Duration::from_millis(50 + rand::random::<u64>() % 400)).await;
            let deadline = Instant::now() + Duration::from_secs(20);
            while !matches!(log_lines(log).last(), Some((w, _)) if w == "claimed") {
                assert!(
                    consumer.child_mut().try_wait().unwrap().is_none(),
                    "{name}: consumer {k} exited on its own (see {})",
                    log.display()
                );
                assert!(
                    Instant::now() < deadline,
                    "{name}: consumer {k} claims nothing"
                );
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            assert!(
                consumer.child_mut().try_wait().unwrap().is_none(),
                "{name}: consumer {k} exited on its own"
            );
            consumer.kill9().unwrap();
            consumer = spawn_consumer(&target.addr, &path, &results, &logs[k + 1]);
        }
        let offered = producer.await.unwrap();
        eventually("every item acked", Duration::from_secs(60), || async {
            children(&s, &results).await.len() >= offered.len()
        })
        .await;
        assert!(
            consumer.child_mut().try_wait().unwrap().is_none(),
            "{name}: last consumer exited on its own"
        );
        consumer.kill9().unwrap();

        // Each item's result exists exactly once (a set of node names: a second ack of one
        // item cannot have committed, its create would have failed), and nothing else.
        let expected: BTreeSet<String> = offered
            .iter()
            .map(|seq| format!("{ITEM_PREFIX}{seq:010}"))
            .collect();
        let acked: BTreeSet<String> = children(&s, &results).await.into_iter().collect();
        assert_eq!(
            acked, expected,
            "{name}: acked items differ from offered ones"
        );
        let left: Vec<String> = children(&s, &path)
            .await
            .into_iter()
            .filter(|c| c.starts_with(ITEM_PREFIX))
            .collect();
        assert!(left.is_empty(), "{name}: items left in the queue: {left:?}");

        // No consumer saw an acked item again.
        let mut claims: BTreeMap<i64, usize> = BTreeMap::new();
        for log in &logs {
            for (word, seq) in log_lines(log) {
                assert_ne!(word, "DOUBLE", "{name}: item {seq} delivered after its ack");
                if word == "claimed" {
                    *claims.entry(seq).or_default() += 1;
                }
            }
        }
        // The kills really hit claimed items: those were delivered again (not lost).
        let redelivered = claims.values().filter(|n| **n > 1).count();
        assert!(
            redelivered >= 1,
            "{name}: no kill landed between a claim and its ack"
        );
        eprintln!(
            "{name}: {} items acked exactly once, {KILLS} kills, {redelivered} redelivered",
            acked.len()
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
