//! Lock holders and waiters (library [`Mutex`]es, one session each) on a private Apache
//! ZooKeeper ensemble (`zkit_testkit::Ensemble`) while members are paused (SIGSTOP) and
//! resumed. Checked for every fault: never two holders at once (a holder counts as inside
//! from its acquisition until it releases or its lost-signal fires), fencing tokens strictly
//! increasing in acquisition order, no failed waiter (every `lock()` returns a guard), and
//! progress after the fault; where no session may expire, also that no holder's lost-signal
//! fired.
//!
//! The faults: the leader paused for longer than the session timeout; two, then three of five
//! members paused; and the member a lock holder's session is connected to killed with SIGKILL
//! and restarted (found through `zkit_client::Client::connected_server`), twice by default,
//! `ZKIT_FAILOVER_KILLS=N` times in the long profile
//! (`ZKIT_FAILOVER_KILLS=10 cargo nextest run -p zkit --test failover_faults`).
//!
//! Runs in the `ensemble` nextest test group (names contain `ensemble_fault`).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use zkit::lock::Mutex;
use zkit::{Session, SessionOptions, SessionState};
use zkit_testkit::{ensemble_available, Ensemble};

const CONTENDERS: usize = 4;
const SESSION_TIMEOUT: Duration = Duration::from_secs(4);
/// How long a contender holds the lock.
const HOLD: Duration = Duration::from_millis(100);

/// What the contenders saw.
#[derive(Default)]
struct Record {
    inside: AtomicBool,
    acquired: AtomicUsize,
    overlaps: AtomicUsize,
    /// Lost-signals fired while holding.
    lost: AtomicUsize,
    tokens: std::sync::Mutex<Vec<i64>>,
    errors: std::sync::Mutex<Vec<String>>,
    states: std::sync::Mutex<Vec<SessionState>>,
    /// The server the latest holder's session was connected to when it acquired.
    holder_server: std::sync::Mutex<Option<String>>,
    /// Holders whose acquisition number (1, 2, …) is at least this stay inside after their
    /// `hold` until it is set back to 0 (or their lost-signal fires): a fault can then be
    /// injected while a holder is known to hold, however long injecting it takes. `0` (the
    /// default) is read as "none".
    pin_from: AtomicUsize,
}

/// Starts the contenders on a fresh [`Record`]; they loop until the returned stop flag is set,
/// holding the lock for `hold` each time. Returns the record, the flag and their tasks.
async fn contend(
    connect: &str,
    path: &str,
    hold: Duration,
) -> (
    Arc<Record>,
    Arc<AtomicBool>,
    Vec<tokio::task::JoinHandle<()>>,
) {
    let record = &Arc::new(Record::default());
    let stop = &Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for _ in 0..CONTENDERS {
        let session = Session::connect(
            connect,
            SessionOptions::default().with_session_timeout(SESSION_TIMEOUT),
        )
        .await
        .expect("session");
        let mut events = session.subscribe();
        let states = Arc::clone(record);
        tokio::spawn(async move {
            while let Ok(event) = events.recv().await {
                states.states.lock().expect("states").push(event.state);
            }
        });
        let (record, stop, path) = (Arc::clone(record), Arc::clone(stop), path.to_owned());
        tasks.push(tokio::spawn(async move {
            let mutex = Mutex::new(&session, &path);
            while !stop.load(Ordering::SeqCst) {
                let guard = match mutex.lock().await {
                    Ok(guard) => guard,
                    Err(err) => {
                        record.errors.lock().expect("errors").push(err.to_string());
                        continue;
                    }
                };
                if record.inside.swap(true, Ordering::SeqCst) {
                    record.overlaps.fetch_add(1, Ordering::SeqCst);
                }
                record
                    .tokens
                    .lock()
                    .expect("tokens")
                    .push(guard.fencing_token());
                *record.holder_server.lock().expect("holder") = session.client().connected_server();
                let number = record.acquired.fetch_add(1, Ordering::SeqCst) + 1;
                let lost = guard.lost();
                let held = async {
                    tokio::time::sleep(hold).await;
                    while (1..=number).contains(&record.pin_from.load(Ordering::SeqCst)) {
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                };
                tokio::select! {
                    () = held => {}
                    () = lost.cancelled() => {
                        record.lost.fetch_add(1, Ordering::SeqCst);
                    }
                }
                record.inside.store(false, Ordering::SeqCst);
                let _ = guard.release().await;
            }
            session.close();
        }));
    }
    (record.clone(), stop.clone(), tasks)
}

/// Waits (bounded) until `n` more acquisitions happened.
async fn progress(record: &Record, n: usize, what: &str) {
    let want = record.acquired.load(Ordering::SeqCst) + n;
    let limit = Instant::now() + Duration::from_secs(40);
    while record.acquired.load(Ordering::SeqCst) < want {
        assert!(Instant::now() < limit, "no progress {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn finish(record: &Record, stop: &AtomicBool, tasks: Vec<tokio::task::JoinHandle<()>>) {
    stop.store(true, Ordering::SeqCst);
    for task in tasks {
        tokio::time::timeout(Duration::from_secs(30), task)
            .await
            .expect("contender ends")
            .expect("contender");
    }
    let tokens = record.tokens.lock().expect("tokens").clone();
    eprintln!(
        "{} acquisitions, {} overlaps, {} lost, errors {:?}, states {:?}",
        tokens.len(),
        record.overlaps.load(Ordering::SeqCst),
        record.lost.load(Ordering::SeqCst),
        record.errors.lock().expect("errors"),
        record.states.lock().expect("states")
    );
    assert_eq!(
        record.overlaps.load(Ordering::SeqCst),
        0,
        "two holders at once"
    );
    assert!(
        record.errors.lock().expect("errors").is_empty(),
        "failed waiters"
    );
    assert!(
        tokens.windows(2).all(|w| w[0] < w[1]),
        "fencing tokens not strictly increasing: {tokens:?}"
    );
}

/// The leader stopped (SIGSTOP) for longer than the session timeout, then resumed: the others
/// elect a new leader, clients connected to the stopped one move over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ensemble_fault_leader_paused_longer_than_the_session_timeout() {
    if !ensemble_available() {
        return;
    }
    let ensemble = Ensemble::start(3).await.expect("ensemble");
    let (record, stop, tasks) = contend(ensemble.connect_string(), "/fault-pause", HOLD).await;
    progress(&record, 10, "before the fault").await;
    let leader = ensemble.leader().await.expect("leader");
    ensemble.pause(leader).await.expect("pause");
    tokio::time::sleep(SESSION_TIMEOUT + Duration::from_secs(2)).await;
    progress(&record, 5, "with the old leader stopped").await;
    ensemble.resume(leader).await.expect("resume");
    progress(&record, 10, "after the old leader resumed").await;
    finish(&record, &stop, tasks).await;
}

/// Five members: two paused (a quorum is left: the work goes on), then three paused for less
/// than the validity window (no quorum for that time; the work resumes after it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ensemble_fault_two_then_three_of_five_paused() {
    if !ensemble_available() {
        return;
    }
    let ensemble = Ensemble::start(5).await.expect("ensemble");
    let (record, stop, tasks) = contend(ensemble.connect_string(), "/fault-quorum", HOLD).await;
    progress(&record, 10, "before the fault").await;
    // Two followers: the quorum (3 of 5) stays.
    let leader = ensemble.leader().await.expect("leader");
    let followers: Vec<usize> = (1..=5).filter(|&m| m != leader).collect();
    for &m in &followers[..2] {
        ensemble.pause(m).await.expect("pause");
    }
    progress(&record, 10, "with two of five paused").await;
    // A third one: no quorum. Resumed well inside the validity window.
    ensemble.pause(followers[2]).await.expect("pause");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    for &m in &followers[..3] {
        ensemble.resume(m).await.expect("resume");
    }
    progress(&record, 10, "after the quorum came back").await;
    finish(&record, &stop, tasks).await;
}

/// The member a lock holder's session is connected to, killed with SIGKILL and restarted once
/// the others serve: that session and any other on the member go `Suspended`, move to another
/// member inside the validity window and keep what they held or waited for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ensemble_fault_connected_member_killed() {
    if !ensemble_available() {
        return;
    }
    let kills: usize = std::env::var("ZKIT_FAILOVER_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2);
    let ensemble = Ensemble::start(3).await.expect("ensemble");
    // The holder of each round's fresh acquisition is pinned (see `Record::pin_from`) until
    // its member is killed.
    let hold = HOLD;
    let (record, stop, tasks) = contend(ensemble.connect_string(), "/fault-connected", hold).await;
    progress(&record, 4, "before the fault").await;
    for round in 0..kills {
        let leader = ensemble.leader().await.ok();
        // A fresh acquisition, pinned inside: kill its session's member.
        let seen = record.acquired.load(Ordering::SeqCst);
        record.pin_from.store(seen + 1, Ordering::SeqCst);
        let limit = Instant::now() + Duration::from_secs(20);
        while record.acquired.load(Ordering::SeqCst) == seen {
            assert!(Instant::now() < limit, "no acquisition");
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        let acquisition = record.acquired.load(Ordering::SeqCst);
        let server = record
            .holder_server
            .lock()
            .expect("holder")
            .clone()
            .expect("the holder's session is connected");
        let member = (1..=ensemble.members())
            .find(|&m| ensemble.member_addr(m) == server)
            .unwrap_or_else(|| panic!("{server} is no member"));
        let suspended_before = suspensions(&record);
        ensemble.kill(member).await.expect("kill -9");
        assert!(
            record.inside.load(Ordering::SeqCst)
                && record.acquired.load(Ordering::SeqCst) == acquisition,
            "the kill did not land while the holder was inside"
        );
        record.pin_from.store(0, Ordering::SeqCst);
        eprintln!(
            "round {round}: killed member {member} (leader: {})",
            leader == Some(member)
        );
        progress(&record, 3, "with the holder's member down").await;
        assert!(
            suspensions(&record) > suspended_before,
            "no session was suspended by the kill of its member"
        );
        let elected = Instant::now() + Duration::from_secs(30);
        while ensemble.leader().await.is_err() {
            assert!(Instant::now() < elected, "no leader after the kill");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        ensemble.restart(member).await.expect("restart");
        progress(&record, 4, "after the member restarted").await;
    }
    finish(&record, &stop, tasks).await;
    // No session expired (they all moved to another member in time): no holder lost its lock.
    assert_eq!(
        record.lost.load(Ordering::SeqCst),
        0,
        "a holder lost its lock though its session survived"
    );
    assert!(
        !record
            .states
            .lock()
            .expect("states")
            .contains(&SessionState::Lost),
        "a session was lost"
    );
}

fn suspensions(record: &Record) -> usize {
    record
        .states
        .lock()
        .expect("states")
        .iter()
        .filter(|s| **s == SessionState::Suspended)
        .count()
}
