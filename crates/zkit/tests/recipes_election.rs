//! Leader election against every server of `common::servers()`: one leader at a time with
//! growing fencing tokens, hand-over on close, leadership kept while suspended and withdrawn
//! at the session's validity deadline, a new leader only after the old session is gone, the LeaderSelector's cancel-on-loss and requeue.
//!
//! The shared fencing check is ZooKeeper itself: a leader writes the resource node in a multi
//! with `check(our latch node)`, so a deposed leader's write fails instead of landing.

mod common;

use std::time::Duration;

use common::{servers, session};
use zkit::election::{LeaderLatch, LeaderSelector};
use zkit::zkit_client as zk;
use zkit::Session;
use zkit_testkit::{unique_path, FaultProxy};

/// A fenced write: sets `resource` to `token` only if our latch node still exists.
async fn fenced_write(session: &Session, latch_node: &str, resource: &str, token: i64) -> bool {
    let client = session.client();
    let mut multi = client.new_multi_writer();
    multi.add_check_version(latch_node, -1).expect("check op");
    multi
        .add_set_data(resource, token.to_string().as_bytes(), None)
        .expect("set op");
    multi.commit().await.is_ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_leader_at_a_time_and_hand_over_on_close() {
    for target in servers().await {
        let path = unique_path("latch-handover");
        let mut latches = Vec::new();
        let mut sessions = Vec::new();
        for i in 0..4 {
            let s = session(&target.addr, Duration::from_secs(10)).await;
            latches.push(Some(
                LeaderLatch::start(&s, &path, &format!("p{i}")).expect("latch"),
            ));
            sessions.push(s);
        }
        let mut last_token = i64::MIN;
        for _round in 0..4 {
            // Wait for someone to lead; then exactly one leads.
            let leader = loop {
                let mut leaders: Vec<usize> = latches
                    .iter()
                    .enumerate()
                    .filter(|(_, l)| l.as_ref().is_some_and(|l| l.has_leadership()))
                    .map(|(i, _)| i)
                    .collect();
                assert!(
                    leaders.len() <= 1,
                    "{}: two leaders {leaders:?}",
                    target.name
                );
                if let Some(i) = leaders.pop() {
                    break i;
                }
                let any = latches.iter().flatten().next().expect("a latch left");
                let mut rx = any.subscribe();
                let _ = tokio::time::timeout(Duration::from_millis(200), rx.changed()).await;
            };
            let latch = latches[leader].take().expect("leader latch");
            let leadership = latch.leadership();
            let token = leadership.fencing_token.expect("token");
            assert!(token > last_token, "{}: token went back", target.name);
            last_token = token;
            let participants = latch.participants().await.expect("participants");
            assert_eq!(participants[0], latch.id(), "{}", target.name);
            latch.close().await;
        }
    }
}

/// The leader's connection is partitioned: it keeps leading while its session provably lives
/// and withdraws when the session layer declares it Lost (at the validity deadline, before any
/// server can have expired it); a follower leads only once the old session is gone, and the old
/// leader's fenced write fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitioned_leader_withdraws_and_cannot_write_after_takeover() {
    for target in servers().await {
        let path = unique_path("latch-partition");
        let resource = format!("{path}-resource");
        let timeout = target.min_session_timeout.max(Duration::from_secs(2));
        let proxy = FaultProxy::start(target.addr.clone()).await.expect("proxy");
        let leader_session = session(&proxy.connect_string(), timeout).await;
        let leader = LeaderLatch::start(&leader_session, &path, "old").expect("latch");
        let old = leader
            .await_leadership_for(Duration::from_secs(20))
            .await
            .expect("old leads");
        let follower_session = session(&target.addr, timeout).await;
        follower_session
            .client()
            .create(
                &resource,
                b"",
                &zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all()),
            )
            .await
            .expect("resource");
        let follower = LeaderLatch::start(&follower_session, &path, "new").expect("latch");
        assert!(fenced_write(&leader_session, old.node.as_deref().unwrap(), &resource, 1).await);

        proxy.pause();
        // Suspended is not a loss: the old leader still leads while its session provably lives.
        let mut leader_state = leader_session.watch_state();
        tokio::time::timeout(timeout * 2, async {
            while leader_state.borrow_and_update().state == zkit::SessionState::Connected {
                leader_state.changed().await.expect("state");
            }
        })
        .await
        .expect("Suspended in time");
        // Leadership first, then the state: the session layer declares Lost (and the latch
        // withdraws) at the validity deadline, which may pass between two reads; a state still
        // Suspended after a withdrawal is a withdrawal on Suspended.
        let leads = leader.has_leadership();
        if leader_session.state().state == zkit::SessionState::Suspended {
            assert!(leads, "{}: withdrew on Suspended", target.name);
        }
        // Watch both latches until the follower leads: never both at once, and the old one
        // withdraws first (on Lost, at its validity deadline), before its session can have
        // expired.
        let mut old_rx = leader.subscribe();
        let mut new_rx = follower.subscribe();
        let new = tokio::time::timeout(timeout * 3 + Duration::from_secs(5), async {
            loop {
                let (o, n) = (
                    old_rx.borrow_and_update().clone(),
                    new_rx.borrow_and_update().clone(),
                );
                assert!(
                    !(o.is_leader && n.is_leader),
                    "{}: two leaders",
                    target.name
                );
                if n.is_leader {
                    return n;
                }
                tokio::select! {
                    _ = old_rx.changed() => {}
                    _ = new_rx.changed() => {}
                }
            }
        })
        .await
        .expect("follower takes over after the old session expired");
        assert!(!leader.has_leadership(), "{}: two leaders", target.name);
        assert!(new.fencing_token > old.fencing_token);
        assert!(
            fenced_write(
                &follower_session,
                new.node.as_deref().unwrap(),
                &resource,
                2
            )
            .await
        );
        proxy.resume();
        // The old leader, back with a new session, is a follower; its old node is gone, so a
        // write fenced on it fails.
        let client = session(&target.addr, timeout).await;
        assert!(!fenced_write(&client, old.node.as_deref().unwrap(), &resource, 1).await);
        let (data, _) = client.client().get_data(&resource).await.expect("resource");
        assert_eq!(data, b"2", "{}", target.name);
        assert!(!leader.has_leadership());
        leader.close().await;
        follower.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn selector_runs_while_leader_and_requeues() {
    for target in servers().await {
        let path = unique_path("selector");
        let runs = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
        let mut tasks = Vec::new();
        let mut sessions = Vec::new();
        let inside = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        for i in 0..3 {
            let s = session(&target.addr, Duration::from_secs(10)).await;
            let selector = LeaderSelector::new(&s, &path, &format!("s{i}")).with_requeue(true);
            let (runs, inside) = (runs.clone(), inside.clone());
            tasks.push(tokio::spawn(async move {
                selector
                    .run(|_ctx| {
                        let (runs, inside) = (runs.clone(), inside.clone());
                        async move {
                            assert!(!inside.swap(true, std::sync::atomic::Ordering::SeqCst));
                            tokio::time::sleep(Duration::from_millis(20)).await;
                            inside.store(false, std::sync::atomic::Ordering::SeqCst);
                            runs.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        }
                    })
                    .await
            }));
            sessions.push(s);
        }
        common::eventually("9 leader runs", Duration::from_secs(30), || {
            let runs = runs.clone();
            async move { runs.load(std::sync::atomic::Ordering::SeqCst) >= 9 }
        })
        .await;
        for t in &tasks {
            t.abort();
        }
        for t in tasks {
            let _ = t.await;
        }
    }
}
