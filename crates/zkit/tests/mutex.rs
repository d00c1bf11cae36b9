//! Mutex behaviour against every server of `common::servers()`: mutual exclusion with fencing
//! tokens, timeouts and cancellation leaving no node, lost-signal on session loss.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{children, eventually, servers, session};
use zkit::lock::Mutex;
use zkit::{Error, SessionState};
use zkit_testkit::{unique_path, FaultProxy};

/// 16 contenders, each with its own session, × N acquisitions around a shared counter. The
/// "resource" checks that nobody else is inside and that fencing tokens only grow.
/// N = 200 (3,200 cycles); on Apache ZooKeeper this takes a few seconds at ~1,000 cycles/s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_exclusion_with_monotonic_fencing_tokens() {
    const CONTENDERS: usize = 16;
    const ROUNDS: u64 = 200;
    for target in servers().await {
        let path = unique_path("mutex-exclusion");
        let inside = Arc::new(AtomicBool::new(false));
        let counter = Arc::new(AtomicU64::new(0));
        let last_token = Arc::new(std::sync::Mutex::new(i64::MIN));
        let mut tasks = Vec::new();
        for _ in 0..CONTENDERS {
            let session = session(&target.addr, Duration::from_secs(10)).await;
            let mutex = Mutex::new(&session, &path);
            let (inside, counter, last_token) =
                (inside.clone(), counter.clone(), last_token.clone());
            tasks.push(tokio::spawn(async move {
                for _ in 0..ROUNDS {
                    let guard = mutex.lock().await.expect("lock");
                    assert!(!inside.swap(true, Ordering::SeqCst), "two holders at once");
                    {
                        let mut last = last_token.lock().unwrap();
                        assert!(
                            guard.fencing_token() > *last,
                            "fencing token went back: {} after {}",
                            guard.fencing_token(),
                            *last
                        );
                        *last = guard.fencing_token();
                    }
                    let seen = counter.load(Ordering::SeqCst);
                    tokio::task::yield_now().await;
                    counter.store(seen + 1, Ordering::SeqCst);
                    assert!(!guard.is_lost());
                    inside.store(false, Ordering::SeqCst);
                    guard.release().await.expect("release");
                }
                drop(session);
            }));
        }
        for task in tasks {
            task.await.expect("contender");
        }
        assert_eq!(
            counter.load(Ordering::SeqCst),
            CONTENDERS as u64 * ROUNDS,
            "{}",
            target.name
        );
        let observer = session(&target.addr, Duration::from_secs(10)).await;
        assert!(
            children(&observer, &path).await.is_empty(),
            "{}: nodes left",
            target.name
        );
        eprintln!("{}: mutual exclusion ok", target.name);
    }
}

#[tokio::test]
async fn try_lock_for_times_out_and_cancelled_acquire_leaves_no_node() {
    for target in servers().await {
        let path = unique_path("mutex-timeout");
        let a = session(&target.addr, Duration::from_secs(10)).await;
        let b = session(&target.addr, Duration::from_secs(10)).await;
        let held = Mutex::new(&a, &path).lock().await.expect("lock");
        let nodes = children(&a, &path).await;
        assert_eq!(nodes.len(), 1);
        assert!(
            nodes[0].starts_with("_c_") && nodes[0].contains("-lock-"),
            "{nodes:?}"
        );

        let err = Mutex::new(&b, &path)
            .try_lock_for(Duration::from_millis(300))
            .await
            .expect_err("held by a");
        assert!(matches!(err, Error::Timeout(_)), "{err:?}");
        assert_eq!(
            children(&a, &path).await.len(),
            1,
            "{}: timed-out node left",
            target.name
        );

        // A dropped acquire future (here: by select) leaves no node behind either.
        let mutex_b = Mutex::new(&b, &path);
        let observer = a.clone();
        let path2 = path.clone();
        tokio::select! {
            _ = mutex_b.lock() => panic!("must not acquire"),
            _ = eventually("b's node to appear", Duration::from_secs(5), || {
                let (observer, path2) = (observer.clone(), path2.clone());
                async move { children(&observer, &path2).await.len() == 2 }
            }) => {}
        }
        eventually("b's node to be cleaned up", Duration::from_secs(10), || {
            let (a, path) = (a.clone(), path.clone());
            async move { children(&a, &path).await.len() == 1 }
        })
        .await;

        // Release hands the lock over to a waiter, and the waiter's token is larger.
        let token = held.fencing_token();
        let waiter = tokio::spawn({
            let b = b.clone();
            let path = path.clone();
            async move { Mutex::new(&b, &path).lock().await }
        });
        eventually("waiter's node", Duration::from_secs(5), || {
            let (a, path) = (a.clone(), path.clone());
            async move { children(&a, &path).await.len() == 2 }
        })
        .await;
        held.release().await.expect("release");
        let guard_b = waiter.await.expect("task").expect("b locks");
        assert!(guard_b.fencing_token() > token);
        guard_b.release().await.expect("release");
        assert!(children(&a, &path).await.is_empty());
        eprintln!("{}: timeout/cancellation ok", target.name);
    }
}

#[tokio::test]
async fn deleting_the_node_fires_the_lost_signal() {
    for target in servers().await {
        let path = unique_path("mutex-deleted");
        let a = session(&target.addr, Duration::from_secs(10)).await;
        let guard = Mutex::new(&a, &path).lock().await.expect("lock");
        let lost = guard.lost();
        a.client()
            .delete(guard.path(), None)
            .await
            .expect("admin delete");
        tokio::time::timeout(Duration::from_secs(5), lost.cancelled())
            .await
            .expect("lost-signal after deletion");
        guard
            .release()
            .await
            .expect("release of a deleted node is fine");
        eprintln!("{}: node deletion → lost ok", target.name);
    }
}

/// Black-holing the connection longer than the session timeout: the holder sees Suspended
/// (lost-signal fires at once, by default), then Lost; the session layer builds a new session
/// and a new acquisition succeeds; a waiter on the dead session also ends up holding the lock on
/// its new session once the holder is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_loss_while_holding_and_waiting() {
    for target in servers().await {
        let path = unique_path("mutex-expiry");
        let proxy = FaultProxy::start(target.addr.clone()).await.expect("proxy");
        let timeout = target.min_session_timeout;
        let holder = session(&proxy.connect_string(), timeout).await;
        let mut events = holder.subscribe();
        let guard = Mutex::new(&holder, &path).lock().await.expect("lock");
        let lost = guard.lost();

        // A waiter behind the proxy too: its session dies with the holder's.
        let waiter_session = session(&proxy.connect_string(), timeout).await;
        let waiter = tokio::spawn({
            let (s, p) = (waiter_session.clone(), path.clone());
            async move { Mutex::new(&s, &p).lock().await }
        });
        let observer = session(&target.addr, Duration::from_secs(10)).await;
        eventually("waiter node", Duration::from_secs(5), || {
            let (o, p) = (observer.clone(), path.clone());
            async move { children(&o, &p).await.len() == 2 }
        })
        .await;

        proxy.pause();
        tokio::time::timeout(timeout * 3, lost.cancelled())
            .await
            .expect("lost-signal on Suspended");
        let mut seen = Vec::new();
        while !seen.contains(&SessionState::Lost) {
            let event = tokio::time::timeout(timeout * 4, events.recv())
                .await
                .expect("state event in time")
                .expect("event");
            seen.push(event.state);
        }
        assert_eq!(seen.first(), Some(&SessionState::Suspended), "{seen:?}");
        // The server expires the old sessions (nothing reaches it), deleting both nodes.
        eventually("old nodes expired", timeout * 6, || {
            let (o, p) = (observer.clone(), path.clone());
            async move { children(&o, &p).await.is_empty() }
        })
        .await;
        proxy.resume();
        let event = tokio::time::timeout(Duration::from_secs(30), async {
            loop {
                let event = events.recv().await.expect("event");
                if event.state == SessionState::Connected {
                    return event;
                }
            }
        })
        .await
        .expect("new session");
        assert_eq!(event.generation, 2);
        guard
            .release()
            .await
            .expect("release after loss is harmless");

        // The waiter restarted on its new session and now holds the lock.
        let waiter_guard = tokio::time::timeout(Duration::from_secs(30), waiter)
            .await
            .expect("waiter finishes")
            .expect("task")
            .expect("waiter locks on its new session");
        assert!(waiter_session.generation() >= 2);
        assert_eq!(children(&observer, &path).await.len(), 1);
        // And the holder's new session can contend again.
        let again = Mutex::new(&holder, &path);
        assert!(matches!(
            again.try_lock_for(Duration::from_millis(200)).await,
            Err(Error::Timeout(_))
        ));
        waiter_guard.release().await.expect("release");
        let g = again.lock().await.expect("new session acquires");
        g.release().await.expect("release");
        eprintln!("{}: session loss ok", target.name);
    }
}
