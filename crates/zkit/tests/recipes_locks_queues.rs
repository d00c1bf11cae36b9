//! The multi-lock, the semaphore mutex, the kazoo-layout lock and leases, Curator's
//! distributed queue family, the queue sharder and kazoo's locking queue, against every server
//! of `common::servers()`.

mod common;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use common::{children, eventually, servers, session};
use zkit::distributed_queue::{
    DelayQueue, DistributedQueue, IdQueue, PriorityQueue, QueueSharder, QueueSharderPolicies,
};
use zkit::lock::{
    KazooLock, MultiLock, MultiNonBlockingLease, Mutex, NonBlockingLease, SemaphoreMutex,
};
use zkit::locking_queue::LockingQueue;
use zkit::zkit_client as zk;
use zkit::Error;
use zkit_testkit::unique_path;

const LIMIT: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_lock_is_all_or_none_and_opposite_orders_do_not_deadlock() {
    for target in servers().await {
        let name = target.name;
        let (a, b) = (unique_path("multi-a"), unique_path("multi-b"));
        // Two multi-locks listing the same paths in opposite orders, hammering concurrently:
        // with Curator's listed order this can deadlock; zkit's canonical order cannot.
        let inside = Arc::new(AtomicUsize::new(0));
        let mut tasks = Vec::new();
        for order in [[a.clone(), b.clone()], [b.clone(), a.clone()]] {
            let s = session(&target.addr, Duration::from_secs(10)).await;
            let inside = Arc::clone(&inside);
            tasks.push(tokio::spawn(async move {
                let lock = MultiLock::new(&s, &order).unwrap();
                for _ in 0..15 {
                    let guard = lock.lock().await.expect("multi lock");
                    assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two holders");
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    inside.fetch_sub(1, Ordering::SeqCst);
                    guard.release().await.expect("release");
                }
            }));
        }
        for task in tasks {
            tokio::time::timeout(LIMIT, task)
                .await
                .unwrap_or_else(|_| panic!("{name}: multi-locks deadlocked"))
                .unwrap();
        }

        // All or none: with b held elsewhere, the multi-lock times out and holds a no more.
        let s = session(&target.addr, Duration::from_secs(10)).await;
        let other = session(&target.addr, Duration::from_secs(10)).await;
        let held_b = Mutex::new(&other, &b).lock().await.unwrap();
        let multi = MultiLock::new(&s, &[a.clone(), b.clone()]).unwrap();
        let err = multi
            .try_lock_for(Duration::from_millis(500))
            .await
            .expect_err("b is held");
        assert!(matches!(err, Error::Timeout(_)), "{name}: {err:?}");
        let a_free = Mutex::new(&other, &a)
            .try_lock_for(Duration::from_secs(5))
            .await
            .unwrap_or_else(|e| panic!("{name}: a still held after the failed multi-lock: {e}"));
        a_free.release().await.unwrap();
        held_b.release().await.unwrap();

        // Held: fencing tokens for both, and the lost-signal fires when one node goes.
        let guard = multi.lock().await.unwrap();
        assert_eq!(guard.fencing_tokens().len(), 2);
        let node = guard.guards()[1].path().to_string();
        other.client().sync(&node).await.unwrap();
        other.client().delete(&node, None).await.unwrap();
        tokio::time::timeout(LIMIT, guard.lost().cancelled())
            .await
            .unwrap_or_else(|_| panic!("{name}: lost-signal did not fire"));
        guard.release().await.unwrap();
        assert!(children(&s, &a).await.is_empty() && children(&s, &b).await.is_empty());
        eprintln!("{name}: multi lock ok");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semaphore_mutex_excludes_is_not_reentrant_and_uses_curators_layout() {
    for target in servers().await {
        let name = target.name;
        let path = unique_path("semaphore-mutex");
        let s = session(&target.addr, Duration::from_secs(10)).await;
        let other = session(&target.addr, Duration::from_secs(10)).await;
        let mutex = SemaphoreMutex::new(&s, &path);
        let lease = mutex.lock().await.unwrap();
        let leases = children(&s, &format!("{path}/leases")).await;
        assert_eq!(leases.len(), 1, "{name}: {leases:?}");
        assert!(
            leases[0].starts_with("_c_") && leases[0].contains("-lease-"),
            "{leases:?}"
        );
        assert!(mutex.is_locked().await.unwrap());
        // Not re-entrant: the holder itself waits.
        assert!(matches!(
            mutex.try_lock_for(Duration::from_millis(300)).await,
            Err(Error::Timeout(_))
        ));
        let theirs = SemaphoreMutex::new(&other, &path);
        let waiter = tokio::spawn(async move { theirs.lock().await });
        // The waiter's lease node is in (it has counted the leases and waits), not granted.
        eventually("the waiter's lease node", LIMIT, || {
            let (s, leases) = (s.clone(), format!("{path}/leases"));
            async move { children(&s, &leases).await.len() == 2 }
        })
        .await;
        assert!(!waiter.is_finished(), "{name}: two holders");
        lease.release().await.unwrap();
        let their_lease = tokio::time::timeout(LIMIT, waiter)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        their_lease.release().await.unwrap();
        // Released by the other session: on an ensemble this one's server may not have
        // applied that yet, so catch up with the leader first (ZooKeeper's read-your-
        // others'-writes is a sync away).
        s.client().sync(&path).await.unwrap();
        assert!(!mutex.is_locked().await.unwrap());
        eprintln!("{name}: semaphore mutex ok");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kazoo_lock_contenders_and_leases() {
    for target in servers().await {
        let name = target.name;
        let path = unique_path("kazoo-lock");
        let s = session(&target.addr, Duration::from_secs(10)).await;
        let first = KazooLock::new(&s, &path, "first");
        let held = first.lock().await.unwrap();
        assert!(held.path().contains("__lock__"), "{}", held.path());
        let second = KazooLock::new(&s, &path, "second");
        let waiting = tokio::spawn(async move { second.lock().await });
        eventually("two contenders", LIMIT, || {
            let first = first.clone();
            async move { first.contenders().await.unwrap().len() == 2 }
        })
        .await;
        assert_eq!(first.contenders().await.unwrap(), vec!["first", "second"]);
        held.release().await.unwrap();
        let next = tokio::time::timeout(LIMIT, waiting)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        next.release().await.unwrap();

        // Leases, with a clock passed in (no waiting for real time).
        let lease = unique_path("lease");
        let t0 = SystemTime::now();
        let hour = Duration::from_secs(3600);
        let at = |offset: u64| move || t0 + Duration::from_secs(offset);
        assert!(NonBlockingLease::obtain_at(&s, &lease, hour, "a", at(0))
            .await
            .unwrap());
        assert!(!NonBlockingLease::obtain_at(&s, &lease, hour, "b", at(10))
            .await
            .unwrap());
        assert!(
            NonBlockingLease::obtain_at(&s, &lease, hour, "a", at(20))
                .await
                .unwrap(),
            "renewal"
        );
        assert!(
            !NonBlockingLease::obtain_at(&s, &lease, hour, "b", at(3600))
                .await
                .unwrap(),
            "renewed at 20 s"
        );
        assert!(NonBlockingLease::obtain_at(&s, &lease, hour, "b", at(3620))
            .await
            .unwrap());
        let (raw, _) = s
            .client()
            .get_data(&format!("{lease}/lease_holder"))
            .await
            .unwrap();
        let text = String::from_utf8(raw).unwrap();
        assert!(
            text.starts_with(r#"{"version": 1, "holder": "b", "end": ""#),
            "{name}: {text}"
        );
        // The lock under the lease path left nothing behind.
        assert_eq!(children(&s, &lease).await, vec!["lease_holder"]);

        let multi = unique_path("multi-lease");
        let slots: Vec<Option<usize>> = {
            let mut slots = Vec::new();
            for who in ["a", "b", "c", "a"] {
                slots.push(
                    MultiNonBlockingLease::obtain(&s, 2, &multi, hour, who)
                        .await
                        .unwrap(),
                );
            }
            slots
        };
        assert_eq!(slots, vec![Some(0), Some(1), None, Some(0)], "{name}");
        eprintln!("{name}: kazoo lock and leases ok");
    }
}

fn texts(message: &zkit::distributed_queue::Message) -> Vec<String> {
    message
        .items
        .iter()
        .map(|i| String::from_utf8_lossy(i).into_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn distributed_queues_order_delay_remove_and_skip_foreign_nodes() {
    for target in servers().await {
        let name = target.name;
        let s = session(&target.addr, Duration::from_secs(10)).await;

        // FIFO with a multi-item node, a foreign node and a corrupt item node.
        let path = unique_path("dqueue");
        let queue = DistributedQueue::new(&s, &path).unwrap();
        queue.put(b"1").await.unwrap();
        queue.put_multi(&[b"2a", b"2b"]).await.unwrap();
        let persistent = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
        s.client()
            .create(&format!("{path}/junk"), b"x", &persistent)
            .await
            .unwrap();
        s.client()
            .create(
                &format!("{path}/queue-0000000002x"),
                b"not framed",
                &persistent,
            )
            .await
            .unwrap();
        queue.put(b"3").await.unwrap();
        let mut got = Vec::new();
        while let Some(message) = queue.poll().await.unwrap() {
            got.push(texts(&message));
        }
        assert_eq!(got, vec![vec!["1"], vec!["2a", "2b"], vec!["3"]], "{name}");
        // Foreign and corrupt nodes are left alone.
        let mut left = children(&s, &path).await;
        left.sort();
        assert_eq!(left, vec!["junk", "queue-0000000002x"], "{name}");

        // Priorities: lower first, FIFO among equals.
        let pq = PriorityQueue::new(&s, &unique_path("pqueue")).unwrap();
        for (item, p) in [("c", 5), ("a", -1), ("d", 5), ("b", 0)] {
            pq.put(item.as_bytes(), p).await.unwrap();
        }
        let mut order = Vec::new();
        while let Some(m) = pq.poll().await.unwrap() {
            order.extend(texts(&m));
        }
        assert_eq!(order, vec!["a", "b", "c", "d"], "{name}");

        // Delays: nothing before its time.
        let dq = DelayQueue::new(&s, &unique_path("delayq")).unwrap();
        let put_at = SystemTime::now();
        dq.put(b"later", put_at + Duration::from_millis(600))
            .await
            .unwrap();
        dq.put(b"sooner", put_at + Duration::from_millis(300))
            .await
            .unwrap();
        assert_eq!(dq.poll().await.unwrap(), None, "{name}: not due yet");
        let first = dq.take_for(LIMIT).await.unwrap().expect("due");
        assert!(SystemTime::now() >= put_at + Duration::from_millis(300));
        let second = dq.take_for(LIMIT).await.unwrap().expect("due");
        assert!(SystemTime::now() >= put_at + Duration::from_millis(600));
        assert_eq!(
            (texts(&first), texts(&second)),
            (vec!["sooner".into()], vec!["later".into()])
        );

        // Ids: remove by id, the rest FIFO.
        let iq = IdQueue::new(&s, &unique_path("idq")).unwrap();
        for (item, id) in [("x", "job/1"), ("y", "job/2"), ("z", "job/1")] {
            iq.put(item.as_bytes(), id).await.unwrap();
        }
        assert_eq!(
            iq.remove("job/1").await.unwrap(),
            2,
            "{name}: ids with '/' are removable"
        );
        assert!(!iq.contains("job/1").await.unwrap());
        assert_eq!(
            texts(&iq.take_for(LIMIT).await.unwrap().unwrap()),
            vec!["y"]
        );
        eprintln!("{name}: distributed queues ok");
    }
}

/// A consumer waiting for a claimed item wakes when the claim is released: the item stays in
/// the queue and only its lock node goes, so the queue's children do not change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_safety_wakes_a_waiting_consumer_when_a_claim_is_released() {
    for target in servers().await {
        let name = target.name;
        let path = unique_path("released-claim");
        let lock = format!("{path}-locks");
        let first = session(&target.addr, Duration::from_secs(10)).await;
        let queue = DistributedQueue::new(&first, &path)
            .unwrap()
            .with_lock_path(&lock)
            .unwrap();
        queue.put(b"job").await.unwrap();
        let claim = queue.claim().await.unwrap();
        let second = session(&target.addr, Duration::from_secs(10)).await;
        let other = DistributedQueue::new(&second, &path)
            .unwrap()
            .with_lock_path(&lock)
            .unwrap();
        let waiting = tokio::spawn(async move { other.claim().await });
        // Give the waiter time to find the item claimed and wait (if the release came first it
        // would claim at once, and the test would pass without testing the wake-up).
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!waiting.is_finished(), "{name}: claimed twice");
        claim.release().await.unwrap();
        let again = tokio::time::timeout(LIMIT, waiting)
            .await
            .unwrap_or_else(|_| panic!("{name}: the waiting consumer did not wake"))
            .unwrap()
            .unwrap();
        assert_eq!(again.message().items, vec![b"job".to_vec()]);
        again.ack().await.unwrap();
        eprintln!("{name}: released claim wakes a waiter ok");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_safety_redelivers_an_item_whose_consumer_session_ended() {
    for target in servers().await {
        let name = target.name;
        let path = unique_path("safe-queue");
        let lock = format!("{path}-locks");
        let producer = session(&target.addr, Duration::from_secs(10)).await;
        DistributedQueue::new(&producer, &path)
            .unwrap()
            .put(b"job")
            .await
            .unwrap();
        let crashing = session(&target.addr, Duration::from_secs(10)).await;
        let claim = DistributedQueue::new(&crashing, &path)
            .unwrap()
            .with_lock_path(&lock)
            .unwrap()
            .claim()
            .await
            .unwrap();
        assert_eq!(claim.message().items, vec![b"job".to_vec()]);
        let survivor = session(&target.addr, Duration::from_secs(10)).await;
        let other = DistributedQueue::new(&survivor, &path)
            .unwrap()
            .with_lock_path(&lock)
            .unwrap();
        assert!(
            other.try_claim().await.unwrap().is_none(),
            "{name}: claimed twice"
        );
        // The consumer's session ends without an ack: the lock node goes, the item comes back.
        drop(claim);
        crashing.close();
        drop(crashing);
        let again = tokio::time::timeout(LIMIT, other.claim())
            .await
            .unwrap_or_else(|_| panic!("{name}: item not redelivered"))
            .unwrap();
        assert_eq!(again.message().items, vec![b"job".to_vec()]);
        again.ack().await.unwrap();
        assert!(other.is_empty().await.unwrap());
        assert!(
            children(&survivor, &lock).await.is_empty(),
            "{name}: lock node left"
        );
        eprintln!("{name}: lock safety ok");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_sharder_adds_shards_past_the_threshold_and_loses_nothing() {
    for target in servers().await {
        let name = target.name;
        let path = unique_path("sharded");
        let s = session(&target.addr, Duration::from_secs(10)).await;
        let policies = QueueSharderPolicies {
            new_queue_threshold: 10,
            threshold_check: Duration::from_secs(3600), // checks run by hand below
            max_queues: 3,
        };
        let sharder = QueueSharder::start(&s, &path, &format!("{path}-leader"), policies)
            .await
            .unwrap();
        assert_eq!(sharder.shard_count(), 1);
        eventually("sharder leads", LIMIT, || {
            let leader = sharder.is_leader();
            async move { leader }
        })
        .await;
        let mut put = BTreeSet::new();
        for round in 0..5 {
            for i in 0..10 {
                let item = format!("{round}-{i}");
                sharder.put(item.as_bytes()).await.unwrap();
                put.insert(item);
            }
            sharder.check_now().await.unwrap();
        }
        let shards = sharder.shard_count();
        assert!((2..=3).contains(&shards), "{name}: {shards} shards");
        for shard in sharder.shard_paths() {
            assert!(
                shard.rsplit('/').next().unwrap().starts_with("queue-"),
                "{shard}"
            );
        }
        let mut taken = BTreeSet::new();
        while let Some(message) = sharder.take_for(Duration::from_millis(500)).await.unwrap() {
            for item in message.items {
                assert!(
                    taken.insert(String::from_utf8(item).unwrap()),
                    "{name}: taken twice"
                );
            }
        }
        assert_eq!(taken, put, "{name}");
        sharder.close().await;
        eprintln!("{name}: queue sharder ok ({shards} shards)");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locking_queue_locks_consumes_releases_and_survives_a_consumer_crash() {
    for target in servers().await {
        let name = target.name;
        let path = unique_path("locking-queue");
        let a = session(&target.addr, Duration::from_secs(10)).await;
        let b = session(&target.addr, Duration::from_secs(10)).await;
        let qa = LockingQueue::new(&a, &path).unwrap();
        let qb = LockingQueue::new(&b, &path).unwrap();
        qa.put_all(&[b"one", b"two"], 100).await.unwrap();
        assert_eq!(qa.len().await.unwrap(), 2);
        assert_eq!(qa.get(None).await.unwrap().as_deref(), Some(&b"one"[..]));
        // The same object returns its entry until consumed; another gets the next one.
        assert_eq!(qa.get(None).await.unwrap().as_deref(), Some(&b"one"[..]));
        assert_eq!(qb.get(None).await.unwrap().as_deref(), Some(&b"two"[..]));
        assert!(qb.release().await.unwrap());
        assert!(qa.consume().await.unwrap());
        assert_eq!(qa.len().await.unwrap(), 1);
        // a takes "two" and crashes (session closed): b gets it.
        assert_eq!(qa.get(None).await.unwrap().as_deref(), Some(&b"two"[..]));
        assert_eq!(
            qb.get(Some(Duration::from_millis(300))).await.unwrap(),
            None
        );
        a.close();
        drop(qa);
        drop(a);
        let got = qb.get(Some(LIMIT)).await.unwrap();
        assert_eq!(got.as_deref(), Some(&b"two"[..]), "{name}");
        assert!(qb.consume().await.unwrap());
        assert!(qb.is_empty().await.unwrap());
        eprintln!("{name}: locking queue ok");
    }
}
