//! Interop of the kazoo-layout recipes with Python kazoo (Debian's `python3-kazoo`), both ways,
//! against every server of `common::servers()`: `KazooLock` and kazoo's default `Lock` exclude
//! each other; `NonBlockingLease`/`MultiNonBlockingLease` are shared; a `LockingQueue` is fed
//! and drained from both sides; `Party`/`ShallowParty` members see each other; a kazoo
//! `SetPartitioner` and a zkit one split one set and re-split it when zkit leaves.
//!
//! Skips (with a SKIP line) when python3-kazoo is missing, except under `CI`.

mod common;

use std::path::Path;
use std::time::{Duration, SystemTime};

use common::foreign::{check_exclusion, each_kazoo_target, finished_lines, Driven};
use common::{contend, kazoo};
use zkit::lock::{KazooLock, MultiNonBlockingLease, NonBlockingLease};
use zkit::locking_queue::LockingQueue;
use zkit::partitioner::{PartitionState, PartitionerOptions, SetPartitioner};
use zkit::party::{Party, ShallowParty};
use zkit_testkit::unique_path;

const LIMIT: Duration = Duration::from_secs(30);

const KAZOO: &str = r#"
import datetime, select, sys, time
from kazoo.client import KazooClient

mode, connect = sys.argv[1], sys.argv[2]
a = sys.argv[3:]
zk = KazooClient(hosts=connect, timeout=10.0)
zk.start(timeout=30)

def out(line):
    print(line, flush=True)

def append(file, line):
    with open(file, "a") as f:
        f.write(line)

def wait_line():
    return sys.stdin.readline().strip()

if mode == "lock":
    path, marks, rounds = a[0], a[1], int(a[2])
    lock = zk.Lock(path, "kazoo")
    for _ in range(rounds):
        if not lock.acquire(timeout=60):
            raise SystemExit("kazoo: acquire timed out")
        try:
            append(marks, "enter kazoo\n")
            time.sleep(0.001)
            append(marks, "exit kazoo\n")
        finally:
            lock.release()
elif mode == "lease":
    lease = zk.NonBlockingLease(a[0], datetime.timedelta(seconds=int(a[1])), identifier=a[2])
    out("obtained" if lease else "not obtained")
elif mode == "multi-lease":
    lease = zk.MultiNonBlockingLease(int(a[0]), a[1], datetime.timedelta(seconds=int(a[2])), identifier=a[3])
    out("obtained" if lease else "not obtained")
elif mode == "queue-put":
    q = zk.LockingQueue(a[0])
    for item in a[1:]:
        value, priority = item.rsplit(":", 1)
        q.put(value.encode(), priority=int(priority))
elif mode == "queue-get":
    q = zk.LockingQueue(a[0])
    for _ in range(int(a[1])):
        value = q.get(timeout=30)
        if value is None:
            raise SystemExit("kazoo: nothing to get")
        out(value.decode())
        if not q.consume():
            raise SystemExit("kazoo: consume failed")
elif mode in ("party", "shallow"):
    party = (zk.Party if mode == "party" else zk.ShallowParty)(a[0], a[1])
    party.join()
    out("joined")
    wait_line()
    zk.sync(a[0])  # zkit's member joined through another session, perhaps another server
    out("members " + ",".join(sorted(party)))
    party.leave()
elif mode == "partition":
    path, ident, items = a[0], a[1], a[2].split(",")
    qp = zk.SetPartitioner(path, set=items, identifier=ident, time_boundary=float(a[3]))
    while True:
        if qp.failed:
            out("failed")
            break
        elif qp.release:
            qp.release_set()
        elif qp.acquired:
            out("acquired " + ",".join(sorted(qp)))
            finished = False
            while qp.acquired:
                ready, _, _ = select.select([sys.stdin], [], [], 0.05)
                if ready and wait_line() == "finish":
                    finished = True
                    break
            if finished:
                qp.finish()
                break
        elif qp.allocating:
            qp.wait_for_acquire(timeout=5)
zk.stop()
zk.close()
"#;

/// Runs kazoo to completion (bounded); returns its stdout lines.
async fn kazoo_lines(script: &Path, args: &[&str]) -> Vec<String> {
    finished_lines(kazoo(script, args), &format!("kazoo {args:?}")).await
}

/// The name of this file's kazoo program.
const SCRIPT: &str = "kazoo_recipes.py";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kazoo_lock_and_kazoo_layout_mutex_exclude_each_other() {
    const ROUNDS: usize = 40;
    each_kazoo_target(SCRIPT, KAZOO, |script, dir, target, s| async move {
        let path = unique_path("kazoo-lock-interop");
        let marks = dir.join(format!("marks-{}.txt", target.name));
        let marks_arg = marks.display().to_string();
        let python = kazoo(
            &script,
            &["lock", &target.addr, &path, &marks_arg, &ROUNDS.to_string()],
        )
        .spawn()
        .expect("start kazoo");
        let lock = KazooLock::new(&s, &path, "zkit");
        let rust = contend(|| lock.lock(), &marks, ROUNDS);
        check_exclusion(python, "kazoo", rust, &marks, ROUNDS, target.name).await;
        eprintln!("{}: kazoo default lock interop ok", target.name);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_are_shared_with_kazoo() {
    each_kazoo_target(SCRIPT, KAZOO, |script, _dir, target, s| async move {
        let name = target.name;
        let path = unique_path("kazoo-lease");
        let minute = Duration::from_secs(60);
        assert_eq!(
            kazoo_lines(&script, &["lease", &target.addr, &path, "60", "py"]).await,
            vec!["obtained"]
        );
        // kazoo's JSON reads back; zkit does not get a lease kazoo holds. (kazoo wrote through
        // its own session, perhaps on another ensemble member.)
        s.client().sync(&path).await.unwrap();
        let holder = NonBlockingLease::holder(&s, &path)
            .await
            .unwrap()
            .expect("holder");
        assert_eq!(
            (holder.version, holder.holder.as_str()),
            (1, "py"),
            "{name}"
        );
        assert!(
            !NonBlockingLease::obtain(&s, &path, minute, "rs")
                .await
                .unwrap(),
            "{name}"
        );
        // Once kazoo's lease ended (a clock an hour ahead), zkit takes it; kazoo then does not.
        let later = || SystemTime::now() + Duration::from_secs(3600);
        assert!(NonBlockingLease::obtain_at(&s, &path, minute, "rs", later)
            .await
            .unwrap());
        assert_eq!(
            kazoo_lines(&script, &["lease", &target.addr, &path, "60", "py"]).await,
            vec!["not obtained"],
            "{name}: kazoo reads zkit's lease"
        );
        // The same identifier renews.
        assert!(NonBlockingLease::obtain_at(&s, &path, minute, "rs", later)
            .await
            .unwrap());

        // Multi lease: kazoo takes slot 0, zkit slot 1, nobody a third.
        let multi = unique_path("kazoo-multi-lease");
        assert_eq!(
            kazoo_lines(
                &script,
                &["multi-lease", &target.addr, "2", &multi, "60", "py"]
            )
            .await,
            vec!["obtained"]
        );
        assert_eq!(
            MultiNonBlockingLease::obtain(&s, 2, &multi, minute, "rs")
                .await
                .unwrap(),
            Some(1)
        );
        assert_eq!(
            MultiNonBlockingLease::obtain(&s, 2, &multi, minute, "other")
                .await
                .unwrap(),
            None
        );
        assert_eq!(
            kazoo_lines(
                &script,
                &["multi-lease", &target.addr, "2", &multi, "60", "third"]
            )
            .await,
            vec!["not obtained"]
        );
        eprintln!("{name}: kazoo lease interop ok");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locking_queue_is_shared_with_kazoo() {
    each_kazoo_target(SCRIPT, KAZOO, |script, _dir, target, s| async move {
        let name = target.name;
        let path = unique_path("kazoo-locking-queue");
        // kazoo puts; zkit gets by priority, then FIFO.
        kazoo_lines(
            &script,
            &[
                "queue-put",
                &target.addr,
                &path,
                "b:100",
                "a:5",
                "c:100",
                "urgent:0",
            ],
        )
        .await;
        let queue = LockingQueue::new(&s, &path).unwrap();
        let mut got = Vec::new();
        for _ in 0..4 {
            let value = queue.get(Some(LIMIT)).await.unwrap().expect("an entry");
            assert!(queue.holds_lock().await.unwrap());
            assert!(queue.consume().await.unwrap());
            got.push(String::from_utf8(value).unwrap());
        }
        assert_eq!(got, vec!["urgent", "a", "b", "c"], "{name}");
        // A locked entry is skipped by kazoo; a released one is delivered to it.
        queue.put(b"held", 1).await.unwrap();
        queue.put(b"free", 2).await.unwrap();
        assert_eq!(
            queue.get(Some(LIMIT)).await.unwrap().as_deref(),
            Some(&b"held"[..])
        );
        assert_eq!(
            kazoo_lines(&script, &["queue-get", &target.addr, &path, "1"]).await,
            vec!["free"]
        );
        assert!(queue.release().await.unwrap());
        assert_eq!(
            kazoo_lines(&script, &["queue-get", &target.addr, &path, "1"]).await,
            vec!["held"]
        );
        // kazoo consumed it through its own session, perhaps on another ensemble member.
        s.client().sync(&path).await.unwrap();
        assert_eq!(queue.len().await.unwrap(), 0, "{name}");
        eprintln!("{name}: kazoo locking queue interop ok");
    })
    .await;
}

/// Joins a zkit member `rs-member` of party kind `$kind` (`Party` and `ShallowParty` have the
/// same API) at `$path` next to kazoo's, and returns the members zkit sees and the line kazoo
/// answers to `list`; then leaves.
macro_rules! join_and_list {
    ($kind:ident, $s:expr, $path:expr, $python:expr) => {{
        let me = $kind::join(&$s, &$path, "rs-member").unwrap();
        me.wait_joined(LIMIT).await.unwrap();
        // kazoo joined through its own session, perhaps on another ensemble member.
        $s.client().sync(&$path).await.unwrap();
        let members = me.members().await.unwrap();
        $python.tell("list").await;
        let kazoo_sees = $python.line().await;
        me.leave().await;
        (members, kazoo_sees)
    }};
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parties_are_shared_with_kazoo() {
    each_kazoo_target(SCRIPT, KAZOO, |script, _dir, target, s| async move {
        let name = target.name;
        for (mode, path) in [
            ("party", unique_path("kazoo-party")),
            ("shallow", unique_path("kazoo-shallow")),
        ] {
            let mut python =
                Driven::start(kazoo(&script, &[mode, &target.addr, &path, "py-member"]));
            assert_eq!(python.line().await, "joined");
            let members = if mode == "party" {
                join_and_list!(Party, s, path, python)
            } else {
                join_and_list!(ShallowParty, s, path, python)
            };
            let mut ours = members.0;
            ours.sort();
            assert_eq!(ours, vec!["py-member", "rs-member"], "{name} {mode}");
            assert_eq!(members.1, "members py-member,rs-member", "{name} {mode}");
            python.finish("kazoo party", name).await;
        }
        eprintln!("{name}: kazoo party interop ok");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_partitioner_splits_with_kazoo_and_re_splits_when_zkit_leaves() {
    each_kazoo_target(SCRIPT, KAZOO, |script, _dir, target, s| async move {
        let name = target.name;
        let path = unique_path("kazoo-partition");
        let items: Vec<String> = (1..=6).map(|i| format!("q{i}")).collect();
        let joined = items.join(",");
        let options = PartitionerOptions {
            time_boundary: Duration::from_millis(1500),
            max_reaction_time: Duration::from_millis(500),
        };
        let mut python = Driven::start(kazoo(
            &script,
            &["partition", &target.addr, &path, "py", &joined, "1.5"],
        ));
        let ours = SetPartitioner::start(&s, &path, &items, "rs", options).unwrap();
        // Both must end up acquired on the two-member party; kazoo may first acquire alone
        // (everything) and then release when zkit joins.
        let mut theirs;
        loop {
            let line = python.line().await;
            theirs = line
                .strip_prefix("acquired ")
                .expect("acquired line")
                .to_string();
            if theirs.split(',').count() < items.len() {
                break;
            }
        }
        assert_eq!(
            ours.wait_for_acquire(LIMIT).await,
            PartitionState::Acquired,
            "{name}"
        );
        let mine = ours.partitions();
        let mut all: Vec<String> = mine
            .iter()
            .cloned()
            .chain(theirs.split(',').map(String::from))
            .collect();
        all.sort();
        assert_eq!(
            all, items,
            "{name}: disjoint and complete (zkit {mine:?}, kazoo {theirs})"
        );
        // kazoo's split: sorted members [py, rs]; py takes q1,q3,q5.
        assert_eq!(theirs, "q1,q3,q5", "{name}");
        assert_eq!(mine, vec!["q2", "q4", "q6"], "{name}");

        // zkit leaves: kazoo re-splits and takes everything (zkit's locks are released first).
        ours.finish().await;
        assert_eq!(ours.state(), PartitionState::Failure);
        assert_eq!(python.line().await, format!("acquired {joined}"), "{name}");
        python.tell("finish").await;
        python.finish("kazoo partitioner", name).await;
        eprintln!("{name}: kazoo partitioner interop ok");
    })
    .await;
}
