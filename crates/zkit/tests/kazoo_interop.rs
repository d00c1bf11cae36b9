//! Interop with Python kazoo's `Lock` (Debian's `python3-kazoo`), testing exactly what the
//! `zkit::lock` module docs claim:
//!
//! - kazoo's `Lock(client, path, extra_lock_patterns=["-lock-"])` and a zkit `Mutex` on the same
//!   path exclude each other: both append `enter`/`exit` marks to one file while holding the
//!   lock, and the file shows no interleaving.
//! - kazoo's default `Lock` (names `<uuid>__lock__NNNNNNNNNN`) does not see zkit's (or Curator's)
//!   `_c_<uuid>-lock-NNNNNNNNNN` nodes: it acquires while zkit holds. The exclusion is one-sided:
//!   zkit orders every sequential child, so a zkit `Mutex` does wait for a kazoo holder.
//!
//! Runs against Apache ZooKeeper and the zkit server. Skips (with a SKIP line) when python3-kazoo
//! is missing, except under `CI`, where that fails.

mod common;

use std::time::Duration;

use common::foreign::{check_exclusion, each_kazoo_target, finished_lines, Driven};
use common::{check_no_interleaving, children, kazoo, rust_contender};
use zkit::lock::Mutex;
use zkit::Error;
use zkit_testkit::unique_path;

const KAZOO: &str = r#"
import sys, time
from kazoo.client import KazooClient

mode, connect, path = sys.argv[1], sys.argv[2], sys.argv[3]
zk = KazooClient(hosts=connect, timeout=10.0)
zk.start(timeout=30)

def append(file, line):
    with open(file, "a") as f:
        f.write(line)

if mode == "exclusion":
    # Sees Curator/zkit nodes as contenders too (kazoo >= 2.7.1).
    marks, rounds = sys.argv[4], int(sys.argv[5])
    lock = zk.Lock(path, "kazoo", extra_lock_patterns=["-lock-"])
    for _ in range(rounds):
        if not lock.acquire(timeout=60):
            raise SystemExit("kazoo: acquire timed out")
        try:
            append(marks, "enter kazoo\n")
            time.sleep(0.001)  # hold a little so that the other side really waits
            append(marks, "exit kazoo\n")
        finally:
            lock.release()
    print("kazoo done", flush=True)
elif mode == "probe":
    # The default Lock: does it acquire while a zkit Mutex holds the path?
    lock = zk.Lock(path, "kazoo-probe")
    got = lock.acquire(timeout=5)
    print("acquired" if got else "timeout", flush=True)
    if got:
        lock.release()
elif mode == "hold":
    # The default Lock, held until a line arrives on stdin.
    lock = zk.Lock(path, "kazoo-holder")
    if not lock.acquire(timeout=30):
        raise SystemExit("kazoo: acquire timed out")
    print("held", flush=True)
    sys.stdin.readline()
    lock.release()
    print("released", flush=True)
zk.stop()
zk.close()
"#;

/// The name of this file's kazoo program.
const SCRIPT: &str = "kazoo_locker.py";

#[test]
fn interleaving_check_catches_overlap() {
    assert_eq!(
        check_no_interleaving("enter kazoo\nexit kazoo\nenter rust\nexit rust\n", "kazoo"),
        (1, 1)
    );
    let overlap = std::panic::catch_unwind(|| {
        check_no_interleaving("enter kazoo\nenter rust\nexit kazoo\nexit rust\n", "kazoo")
    });
    assert!(overlap.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kazoo_lock_with_curator_pattern_and_zkit_mutex_exclude_each_other() {
    const ROUNDS: usize = 60;
    each_kazoo_target(SCRIPT, KAZOO, |script, dir, target, s| async move {
        let path = unique_path("kazoo-interop");
        let marks = dir.join(format!("marks-{}.txt", target.name));
        let marks_arg = marks.display().to_string();
        let python = kazoo(
            &script,
            &[
                "exclusion",
                &target.addr,
                &path,
                &marks_arg,
                &ROUNDS.to_string(),
            ],
        )
        .spawn()
        .expect("start python");
        let rust = rust_contender(&s, &path, &marks, ROUNDS);
        check_exclusion(python, "kazoo", rust, &marks, ROUNDS, target.name).await;
        assert!(children(&s, &path).await.is_empty(), "{}", target.name);
        eprintln!("{}: kazoo (extra_lock_patterns) interop ok", target.name);
    })
    .await;
}

/// The documented limitation, shown both ways: kazoo's default `Lock` ignores a zkit holder,
/// while a zkit `Mutex` waits for a kazoo holder.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_kazoo_lock_ignores_zkit_nodes_but_zkit_waits_for_kazoo() {
    each_kazoo_target(SCRIPT, KAZOO, |script, _dir, target, s| async move {
        let path = unique_path("kazoo-default");
        let mutex = Mutex::new(&s, &path);

        // zkit holds; kazoo's default Lock acquires anyway (it only counts `__lock__` nodes).
        let guard = mutex.lock().await.expect("lock");
        assert_eq!(
            finished_lines(
                kazoo(&script, &["probe", &target.addr, &path]),
                &format!("{}: probe", target.name)
            )
            .await,
            vec!["acquired"],
            "{}: kazoo's default Lock does not see zkit's nodes",
            target.name
        );
        guard.release().await.expect("release");

        // kazoo holds; zkit waits for it (zkit orders every sequential child).
        let mut holder = Driven::start(kazoo(&script, &["hold", &target.addr, &path]));
        assert_eq!(holder.line().await, "held");
        let err = mutex
            .try_lock_for(Duration::from_millis(500))
            .await
            .expect_err("kazoo holds the lock");
        assert!(matches!(err, Error::Timeout(_)), "{}: {err:?}", target.name);
        // A waiting zkit acquisition gets the lock once kazoo releases.
        let waiter = tokio::spawn({
            let mutex = mutex.clone();
            async move { mutex.lock().await }
        });
        common::eventually("zkit waiter's node", Duration::from_secs(10), || {
            let (s, p) = (s.clone(), path.clone());
            async move { children(&s, &p).await.len() == 2 }
        })
        .await;
        holder.tell("release").await;
        let guard = tokio::time::timeout(Duration::from_secs(30), waiter)
            .await
            .expect("zkit acquires after kazoo released")
            .expect("task")
            .expect("lock");
        holder.finish("kazoo holder", target.name).await;
        guard.release().await.expect("release");
        eprintln!("{}: kazoo default-lock story ok", target.name);
    })
    .await;
}
