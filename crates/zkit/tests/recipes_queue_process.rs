//! The queue with consumers in separate processes, one of them killed with SIGKILL in the
//! middle (against every server of `common::servers()`): no item is delivered twice, and at
//! most the one item the killed consumer had taken but not yet logged is missing (an item
//! belongs to whoever deleted it; see `zkit::queue`).
//!
//! Consumers are the `queue_consumer` example, which `cargo test`/`cargo nextest` build next
//! to the test binaries (`target/<profile>/examples/`).

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

use common::{eventually, servers, session};
use zkit::queue::Queue;
use zkit_testkit::{kill9, unique_path};

fn consumer_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("test exe");
    // target/<profile>/deps/<test> → target/<profile>/examples/queue_consumer
    let profile = exe.parent().and_then(|d| d.parent()).expect("profile dir");
    profile.join("examples").join("queue_consumer")
}

fn spawn(addr: &str, path: &str, log: &Path) -> Child {
    Command::new(consumer_bin())
        .args([addr, path, log.to_str().expect("utf-8 temp path")])
        .spawn()
        .expect("spawn queue_consumer (built by `cargo test -p zkit` without --test filters, or `cargo build -p zkit --examples`)")
}

fn logged(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split(' ').nth(1).map(str::to_string))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_consumer_process_loses_at_most_its_in_flight_item_and_none_is_doubled() {
    for target in servers().await {
        let path = unique_path("queue-proc");
        let dir = std::env::temp_dir().join(format!("zkit-queue-{}", path.trim_start_matches('/')));
        std::fs::create_dir_all(&dir).unwrap();
        let logs: Vec<PathBuf> = (0..3).map(|i| dir.join(format!("c{i}.log"))).collect();
        let s = session(&target.addr, Duration::from_secs(10)).await;
        let queue = Queue::new(&s, &path).unwrap();
        let mut children: Vec<Child> = logs.iter().map(|l| spawn(&target.addr, &path, l)).collect();
        const ITEMS: usize = 300;
        for i in 0..ITEMS {
            queue.offer(i.to_string().as_bytes()).await.unwrap();
            if i == ITEMS / 2 {
                kill9(&mut children[0]).unwrap();
            }
        }
        let total = || logs.iter().map(|l| logged(l).len()).sum::<usize>();
        eventually("every item consumed", Duration::from_secs(30), || async {
            total() >= ITEMS - 1 && queue.poll().await.ok().flatten().is_none()
        })
        .await;
        for child in &mut children {
            kill9(child).unwrap();
        }
        let mut counts: HashMap<String, usize> = HashMap::new();
        for log in &logs {
            for item in logged(log) {
                *counts.entry(item).or_default() += 1;
            }
        }
        let doubled: Vec<_> = counts.iter().filter(|(_, n)| **n > 1).collect();
        assert!(
            doubled.is_empty(),
            "{}: delivered twice: {doubled:?}",
            target.name
        );
        let missing = ITEMS - counts.len();
        assert!(missing <= 1, "{}: {missing} items lost", target.name);
        assert!(!logged(&logs[1]).is_empty() || !logged(&logs[2]).is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
