//! `Ensemble` (and `scripts/apache-zk ensemble` under it) on a real 3-member Apache ZooKeeper
//! ensemble: a write through the connect string; kill -9 of the leader, a new leader among the
//! others and writes again; restart of the killed member, which follows; pause/resume as seen by
//! `status`; every member process gone after drop. Runs in the `ensemble` nextest test group.

use std::time::{Duration, Instant};

use zkit_client as zk;
use zkit_testkit::{ensemble_available, Ensemble};

/// `(member, pid, state)` from `status`.
fn parse_status(status: &str) -> Vec<(usize, String, String)> {
    status
        .lines()
        .map(|l| {
            let mut parts = l.splitn(4, ' ');
            let m = parts.next().expect("member").parse().expect("number");
            let pid = parts.next().expect("pid").to_owned();
            let _addr = parts.next().expect("address");
            (m, pid, parts.next().expect("state").to_owned())
        })
        .collect()
}

async fn state_of(ensemble: &Ensemble, m: usize) -> String {
    let status = ensemble.status().await.expect("status");
    parse_status(&status)
        .into_iter()
        .find(|(n, _, _)| *n == m)
        .map(|(_, _, state)| state)
        .expect("member in status")
}

/// Retries `create` (bounded) while the ensemble fails over.
async fn create_eventually(client: &zk::Client, path: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mode = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
    loop {
        match client.create(path, b"x", &mode).await {
            Ok(_) | Err(zk::Error::NodeExists) => return,
            Err(err) => {
                assert!(Instant::now() < deadline, "create {path}: {err}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_restart_pause_resume_and_stop() {
    if !ensemble_available() {
        return;
    }
    let ensemble = Ensemble::start(3).await.expect("ensemble starts");
    assert_eq!(ensemble.connect_string().split(',').count(), 3);
    let client = zk::Client::connector()
        .with_session_timeout(Duration::from_secs(10))
        .connect(ensemble.connect_string())
        .await
        .expect("connect");
    create_eventually(&client, "/before").await;

    let leader = ensemble.leader().await.expect("a leader");
    ensemble.kill(leader).await.expect("kill the leader");
    assert_eq!(state_of(&ensemble, leader).await, "down");
    let deadline = Instant::now() + Duration::from_secs(30);
    let new_leader = loop {
        match ensemble.leader().await {
            Ok(m) => break m,
            Err(err) => assert!(Instant::now() < deadline, "no new leader: {err}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_ne!(new_leader, leader, "the killed member cannot lead");
    create_eventually(&client, "/after-kill").await;

    ensemble.restart(leader).await.expect("restart");
    assert_eq!(state_of(&ensemble, leader).await, "follower");
    // The restarted member has the data written while it was down.
    let direct = zk::Client::connector()
        .with_session_timeout(Duration::from_secs(10))
        .connect(ensemble.member_addr(leader))
        .await
        .expect("connect to the restarted member");
    direct.sync("/").await.expect("sync");
    assert!(direct
        .check_stat("/after-kill")
        .await
        .expect("stat")
        .is_some());

    let follower = (1..=3).find(|&m| m != new_leader).expect("a follower");
    ensemble.pause(follower).await.expect("pause");
    assert_eq!(state_of(&ensemble, follower).await, "paused");
    ensemble.resume(follower).await.expect("resume");
    let deadline = Instant::now() + Duration::from_secs(30);
    while state_of(&ensemble, follower).await != "follower" {
        assert!(
            Instant::now() < deadline,
            "resumed member did not follow again"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let pids: Vec<String> = parse_status(&ensemble.status().await.expect("status"))
        .into_iter()
        .map(|(_, pid, _)| pid)
        .collect();
    let dir = ensemble.dir().to_path_buf();
    drop(direct);
    drop(client);
    drop(ensemble);
    for pid in pids {
        // Gone, or a zombie (it runs no code) until its new parent reaps it.
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let running = stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'));
        assert!(!running, "member pid {pid} still runs after drop");
    }
    assert!(!dir.exists(), "the ensemble's directory is removed");
}
