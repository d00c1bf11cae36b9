//! Barriers across processes (against every server of `common::servers()`): n `barrier_member`
//! processes, and the order of their steps as ZooKeeper observed it (each process records
//! what it could read right after passing; see `examples/barrier_member.rs`):
//!
//! - `DoubleBarrier`: n−1 members are started and registered first, the n-th only then; no
//!   member may pass `enter` before all n arrived. The n-th holds its work for a while before
//!   leaving; no member may get out of `leave` before all n started leaving.
//! - `Barrier`: n waiters; the test records `released` and then lowers the barrier; every
//!   waiter must have passed after that, with the barrier down.
//!
//! The member is built next to the test binaries by `cargo test -p zkit` / `cargo nextest run
//! -p zkit` (`target/<profile>/examples/`), or by `cargo build -p zkit --examples`.

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{children, eventually, servers, session};
use zkit::barrier::{Barrier, READY_NODE};
use zkit::zkit_client as zk;
use zkit::Session;
use zkit_testkit::{unique_path, ChildGuard};

const N: usize = 4;
const LIMIT: Duration = Duration::from_secs(30);
/// How long the last member works inside the double barrier before it starts leaving.
const LAST_HOLD_MS: u64 = 500;

fn member_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("test exe");
    // target/<profile>/deps/<test> → target/<profile>/examples/barrier_member
    let profile = exe.parent().and_then(|d| d.parent()).expect("profile dir");
    profile.join("examples").join("barrier_member")
}

fn spawn(args: &[&str]) -> ChildGuard {
    ChildGuard::spawn(Command::new(member_bin()).args(args))
        .expect("spawn barrier_member (built by `cargo test -p zkit` without --test filters, or `cargo build -p zkit --examples`)")
}

/// Waits (bounded) for every member to exit, and requires success.
async fn wait_all(name: &str, members: &mut [ChildGuard]) {
    let deadline = Instant::now() + LIMIT;
    for (i, m) in members.iter_mut().enumerate() {
        loop {
            if let Some(status) = m.child_mut().try_wait().unwrap() {
                assert!(status.success(), "{name}: member {i} failed: {status}");
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{name}: member {i} still running"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// The observation tree `PATH-obs/{arrived,entered,leaving,left,passed}`.
async fn make_obs(s: &Session, path: &str) -> String {
    let obs = format!("{path}-obs");
    let opts = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
    for child in ["arrived", "entered", "leaving", "left", "passed"] {
        s.client()
            .mkdir(&format!("{obs}/{child}"), &opts)
            .await
            .unwrap();
    }
    obs
}

/// The data of every child of `path`, by name.
async fn records(s: &Session, path: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for child in children(s, path).await {
        let (data, _) = s
            .client()
            .get_data(&format!("{path}/{child}"))
            .await
            .unwrap();
        out.push((child, String::from_utf8_lossy(&data).into_owned()));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn double_barrier_processes_enter_and_leave_together() {
    for target in servers().await {
        let name = target.name;
        let path = unique_path("dbarrier-proc");
        let s = session(&target.addr, Duration::from_secs(10)).await;
        let obs = make_obs(&s, &path).await;
        let n = N.to_string();
        let mut members: Vec<ChildGuard> = (0..N - 1)
            .map(|i| spawn(&["double", &target.addr, &path, &n, &format!("m{i}"), "0"]))
            .collect();
        // The first n-1 are inside `enter`, registered and waiting for the last one (or, with a
        // broken barrier, one of them already got through: caught just below).
        eventually("n-1 members registered", LIMIT, || async {
            let registered = children(&s, &path)
                .await
                .iter()
                .filter(|c| *c != READY_NODE)
                .count();
            registered == N - 1 || !children(&s, &format!("{obs}/entered")).await.is_empty()
        })
        .await;
        assert!(
            children(&s, &format!("{obs}/entered")).await.is_empty(),
            "{name}: a member passed enter with n-1 members"
        );
        members.push(spawn(&[
            "double",
            &target.addr,
            &path,
            &n,
            &format!("m{}", N - 1),
            &LAST_HOLD_MS.to_string(),
        ]));
        wait_all(name, &mut members).await;

        let entered = records(&s, &format!("{obs}/entered")).await;
        assert_eq!(entered.len(), N, "{name}: {entered:?}");
        for (id, arrived) in &entered {
            assert_eq!(
                arrived, &n,
                "{name}: {id} passed enter when only {arrived} of {N} had arrived"
            );
        }
        let left = records(&s, &format!("{obs}/left")).await;
        assert_eq!(left.len(), N, "{name}: {left:?}");
        for (id, leaving) in &left {
            assert_eq!(
                leaving, &n,
                "{name}: {id} got out of leave when only {leaving} of {N} were leaving"
            );
        }
        // The last one out removed the ready node; every member node is gone.
        assert!(children(&s, &path).await.is_empty(), "{name}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn barrier_processes_pass_only_after_it_is_removed() {
    for target in servers().await {
        let name = target.name;
        let path = unique_path("barrier-proc");
        let s = session(&target.addr, Duration::from_secs(10)).await;
        let obs = make_obs(&s, &path).await;
        let barrier = Barrier::new(&s, &path).unwrap();
        barrier.set().await.unwrap();
        let mut members: Vec<ChildGuard> = (0..N)
            .map(|i| spawn(&["wait", &target.addr, &path, &format!("w{i}")]))
            .collect();
        eventually("every waiter arrived", LIMIT, || async {
            children(&s, &format!("{obs}/arrived")).await.len() == N
        })
        .await;
        assert!(
            children(&s, &format!("{obs}/passed")).await.is_empty(),
            "{name}: a waiter passed a raised barrier"
        );
        s.client()
            .create(
                &format!("{obs}/released"),
                b"",
                &zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all()),
            )
            .await
            .unwrap();
        barrier.remove().await.unwrap();
        wait_all(name, &mut members).await;
        let passed = records(&s, &format!("{obs}/passed")).await;
        assert_eq!(passed.len(), N, "{name}: {passed:?}");
        for (id, seen) in &passed {
            assert_eq!(
                seen, "released=true up=false",
                "{name}: {id} passed before the barrier was removed"
            );
        }
    }
}
