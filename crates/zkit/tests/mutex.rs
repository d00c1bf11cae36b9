//! Mutex behaviour against every server of `common::servers()`: mutual exclusion with fencing
//! tokens, timeouts and cancellation leaving no node, lost-signal on session loss.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{children, eventually, servers, session};
use zkit::lock::{LockOptions, Mutex};
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
                for round in 0..ROUNDS {
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
                    // Half the releases wait for the delete; the others go in the background
                    // and share a transaction with this contender's next create.
                    if round % 2 == 0 {
                        guard.release().await.expect("release");
                    } else {
                        drop(guard);
                    }
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
        // The last release may still be in flight (background).
        let observer = session(&target.addr, Duration::from_secs(10)).await;
        eventually("no nodes left", Duration::from_secs(5), || async {
            children(&observer, &path).await.is_empty()
        })
        .await;
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
        // The caller sees the directory as it was. (Read through the caller's session: on an
        // ensemble another session may be served by a member that has not applied the delete
        // yet, ZooKeeper's consistency being per session.)
        assert_eq!(
            children(&b, &path).await.len(),
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

/// A disconnect inside the session's validity window changes nothing: the holder keeps the lock
/// (no lost-signal), the waiter keeps its place in the line on the same session, and gets the
/// lock when the holder releases after the reconnect.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disconnect_inside_the_validity_window_keeps_holder_and_waiter() {
    for target in servers().await {
        let path = unique_path("mutex-window");
        let proxy = FaultProxy::start(target.addr.clone()).await.expect("proxy");
        let timeout = target.min_session_timeout.max(Duration::from_secs(4));
        let holder = session(&proxy.connect_string(), timeout).await;
        let mut events = holder.subscribe();
        let guard = Mutex::new(&holder, &path).lock().await.expect("lock");
        let waiter_session = session(&proxy.connect_string(), timeout).await;
        let mut waiter_events = waiter_session.subscribe();
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
        for rx in [&mut events, &mut waiter_events] {
            tokio::time::timeout(timeout, async {
                while rx.recv().await.expect("event").state != SessionState::Suspended {}
            })
            .await
            .expect("Suspended on a black-holed link");
        }
        assert!(!guard.is_lost(), "{}: Suspended is not a loss", target.name);
        assert!(guard.valid_until().is_some(), "{}", target.name);
        proxy.resume();
        proxy.drop_connections().await;
        for rx in [&mut events, &mut waiter_events] {
            let back = tokio::time::timeout(timeout * 2, async {
                loop {
                    match rx.recv().await.expect("event").state {
                        SessionState::Reconnected => return true,
                        SessionState::Lost => return false,
                        _ => {}
                    }
                }
            })
            .await
            .expect("an outcome in time");
            assert!(back, "{}: reconnected inside the window", target.name);
        }
        assert!(
            !guard.is_lost(),
            "{}: held through the disconnect",
            target.name
        );
        assert!(
            !waiter.is_finished(),
            "{}: the waiter kept waiting",
            target.name
        );
        let token = guard.fencing_token();
        guard.release().await.expect("release");
        let next = tokio::time::timeout(Duration::from_secs(10), waiter)
            .await
            .expect("the waiter acquires")
            .expect("task")
            .expect("lock");
        assert_eq!(
            next.generation(),
            1,
            "{}: on its first session",
            target.name
        );
        assert!(next.fencing_token() > token);
        next.release().await.expect("release");
        eprintln!("{}: disconnect inside the window ok", target.name);
    }
}

/// Black-holing the connection past the validity window: the holder sees Suspended (the
/// lost-signal does not fire), then Lost at the validity deadline, when the lost-signal fires;
/// the session layer builds a new session. A waiter with the default options enters the line
/// again on its next session and gets the lock; one with `fail_waiters_on_lost` fails with
/// `SessionLost` when its session is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_loss_while_holding_and_waiting() {
    for target in servers().await {
        let path = unique_path("mutex-expiry");
        let proxy = FaultProxy::start(target.addr.clone()).await.expect("proxy");
        let timeout = target.min_session_timeout;
        let holder = session(&proxy.connect_string(), timeout).await;
        // What the server granted (a server may raise the minimum we asked for).
        let negotiated = holder.session_timeout().max(timeout);
        let mut events = holder.subscribe();
        let guard = Mutex::new(&holder, &path).lock().await.expect("lock");
        let lost = guard.lost();

        // Two waiters behind the proxy too: their sessions die with the holder's.
        let waiter_session = session(&proxy.connect_string(), timeout).await;
        let waiter = tokio::spawn({
            let (s, p) = (waiter_session.clone(), path.clone());
            async move { Mutex::new(&s, &p).lock().await }
        });
        let strict_session = session(&proxy.connect_string(), timeout).await;
        let mut strict_events = strict_session.subscribe();
        let strict = tokio::spawn({
            let (s, p) = (strict_session.clone(), path.clone());
            let options = LockOptions {
                fail_waiters_on_lost: true,
                ..LockOptions::default()
            };
            async move { Mutex::with_options(&s, &p, options).lock().await }
        });
        let observer = session(&target.addr, Duration::from_secs(10)).await;
        eventually("waiter nodes", Duration::from_secs(5), || {
            let (o, p) = (observer.clone(), path.clone());
            async move { children(&o, &p).await.len() == 3 }
        })
        .await;

        let deadline = guard.valid_until().expect("valid while connected");
        proxy.pause();
        tokio::time::timeout(negotiated * 3, lost.cancelled())
            .await
            .expect("lost-signal once the session is lost");
        let lost_at = tokio::time::Instant::now();
        assert!(
            lost_at >= deadline,
            "{}: lost-signal before the validity deadline",
            target.name
        );
        assert_eq!(guard.valid_until(), None);
        let mut seen = Vec::new();
        while !seen.contains(&SessionState::Lost) {
            let event = tokio::time::timeout(negotiated * 4, events.recv())
                .await
                .expect("state event in time")
                .expect("event");
            seen.push(event.state);
        }
        assert_eq!(seen.first(), Some(&SessionState::Suspended), "{seen:?}");
        // Releasing the lost session's lock returns while the proxy still black-holes
        // everything: the node goes with the session, so the delete (which the client would
        // keep until a reconnect) is not waited for.
        tokio::time::timeout(negotiated * 2, guard.release())
            .await
            .expect("release of a lost session's lock returns while disconnected")
            .expect("release after loss is harmless");

        // The strict waiter fails once its own session is lost, while the proxy still
        // black-holes everything: it does not wait for a reconnect to notice.
        let err = tokio::time::timeout(negotiated * 4, strict)
            .await
            .expect("strict waiter gives up on Lost")
            .expect("task")
            .expect_err("a strict waiter whose session is lost must not acquire");
        assert_eq!(err, Error::SessionLost, "{}", target.name);
        tokio::time::timeout(negotiated * 2, async {
            while strict_events.recv().await.expect("event").state != SessionState::Lost {}
        })
        .await
        .expect("the strict waiter's session is Lost");
        assert!(
            !waiter.is_finished(),
            "{}: the default waiter does not fail",
            target.name
        );

        // The server expires the old sessions (nothing reaches it), deleting all three nodes.
        eventually("old nodes expired", negotiated * 6, || {
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

        // The default waiter entered the line again on its new session and gets the lock;
        // the holder's new session contends behind it and excludes as before.
        let w = tokio::time::timeout(Duration::from_secs(30), waiter)
            .await
            .expect("the default waiter acquires on its new session")
            .expect("task")
            .expect("lock");
        assert!(w.generation() >= 2, "{}", target.name);
        let again = Mutex::new(&holder, &path);
        assert!(matches!(
            again.try_lock_for(Duration::from_millis(200)).await,
            Err(Error::Timeout(_))
        ));
        w.release().await.expect("release");
        let g = again.lock().await.expect("new session acquires");
        g.release().await.expect("release");
        assert!(children(&observer, &path).await.is_empty());
        eprintln!("{}: session loss ok", target.name);
    }
}

/// A background release and the next `lock()` of the same mutex travel as one transaction: the
/// old node's delete and the new node's create share a zxid. On the private embedded server no
/// other client writes, so the new node's `czxid` is exactly one more than the old node's (two
/// more if they went as separate writes). Apache ZooKeeper is shared with other tests, so there
/// only the outcome is checked: one node at a time, the old one gone, none left at the end.
#[tokio::test]
async fn background_release_shares_a_transaction_with_the_next_lock() {
    for target in servers().await {
        let path = unique_path("mutex-bg-release");
        let a = session(&target.addr, Duration::from_secs(10)).await;
        let mutex = Mutex::new(&a, &path);
        let mut guard = mutex.lock().await.expect("lock");
        for _ in 0..20 {
            let old_name = guard.path().rsplit('/').next().expect("name").to_string();
            let old_czxid = czxid(&a, guard.path()).await;
            guard.release_in_background();
            guard = mutex.lock().await.expect("lock again");
            let new_czxid = czxid(&a, guard.path()).await;
            if target.server.is_some() {
                assert_eq!(
                    new_czxid,
                    old_czxid + 1,
                    "release and acquisition were separate writes"
                );
            }
            let left = children(&a, &path).await;
            assert!(!left.contains(&old_name), "{}: {left:?}", target.name);
            assert_eq!(left.len(), 1, "{}: {left:?}", target.name);
        }
        // Without a next acquisition the delete is sent on its own.
        guard.release_in_background();
        eventually("released node gone", Duration::from_secs(5), || async {
            children(&a, &path).await.is_empty()
        })
        .await;
        // Dropping a guard releases the same way.
        let token = {
            let guard = mutex.lock().await.expect("lock");
            guard.fencing_token()
        };
        let next = mutex
            .try_lock_for(Duration::from_secs(5))
            .await
            .expect("dropped guard released");
        assert!(next.fencing_token() > token);
        next.release().await.expect("release");
        assert!(children(&a, &path).await.is_empty(), "{}", target.name);
        eprintln!("{}: background release ok", target.name);
    }
}

/// The shared transaction fails as a whole when the released node is already gone (deleted by
/// someone else); the acquisition then creates its node alone and still gets the lock.
#[tokio::test]
async fn background_release_of_a_vanished_node_does_not_block_the_next_lock() {
    for target in servers().await {
        let path = unique_path("mutex-bg-vanished");
        let a = session(&target.addr, Duration::from_secs(10)).await;
        let b = session(&target.addr, Duration::from_secs(10)).await;
        let mutex = Mutex::new(&a, &path);
        let guard = mutex.lock().await.expect("lock");
        b.client().delete(guard.path(), None).await.expect("delete");
        guard.release_in_background();
        let next = mutex
            .try_lock_for(Duration::from_secs(5))
            .await
            .expect("lock after the failed transaction");
        let left = children(&a, &path).await;
        assert_eq!(left.len(), 1, "{}: {left:?}", target.name);
        assert!(next.path().ends_with(&left[0]), "{}: {left:?}", target.name);
        next.release().await.expect("release");
        assert!(children(&a, &path).await.is_empty(), "{}", target.name);
        eprintln!("{}: vanished release ok", target.name);
    }
}

/// The creation zxid of `path`.
async fn czxid(session: &zkit::Session, path: &str) -> i64 {
    session
        .client()
        .check_stat(path)
        .await
        .expect("stat")
        .expect("node exists")
        .czxid
}
