//! Counters, barriers, the queue, caches, group membership and the persistent node against
//! every server of `common::servers()`.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::{children, eventually, servers, session};
use zkit::barrier::{Barrier, DoubleBarrier};
use zkit::cache::{CacheEvent, NodeCache, TreeCache};
use zkit::counter::{AtomicCounter, SharedCount};
use zkit::group::GroupMember;
use zkit::persistent_node::PersistentNode;
use zkit::queue::Queue;
use zkit::zkit_client as zk;
use zkit_testkit::unique_path;

const LIMIT: Duration = Duration::from_secs(20);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn atomic_counter_loses_no_increment_and_shared_count_rejects_stale_versions() {
    for target in servers().await {
        let path = unique_path("counter");
        let mut tasks = Vec::new();
        for _ in 0..4 {
            let s = session(&target.addr, Duration::from_secs(10)).await;
            let counter = AtomicCounter::new(&s, &path).unwrap();
            tasks.push(tokio::spawn(async move {
                let mut posts = Vec::new();
                for _ in 0..50 {
                    posts.push(counter.increment().await.expect("increment").post);
                }
                drop(s);
                posts
            }));
        }
        let mut all = BTreeSet::new();
        for t in tasks {
            for p in t.await.unwrap() {
                assert!(all.insert(p), "{}: {p} handed out twice", target.name);
            }
        }
        assert_eq!(all, (1..=200).collect(), "{}", target.name);

        let s = session(&target.addr, Duration::from_secs(10)).await;
        let count = SharedCount::open(&s, &format!("{path}-shared"), 5)
            .await
            .unwrap();
        let v = count.get().await.unwrap();
        assert_eq!(v.value, 5);
        assert!(count.try_set(v, 6).await.unwrap());
        assert!(
            !count.try_set(v, 7).await.unwrap(),
            "{}: stale version accepted",
            target.name
        );
        let waiter = {
            let count = count.clone();
            let seen = count.get().await.unwrap();
            tokio::spawn(async move { count.wait_change(seen).await })
        };
        count.set(9).await.unwrap();
        let changed = tokio::time::timeout(LIMIT, waiter)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(changed.value, 9);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn barriers_release_nobody_early() {
    for target in servers().await {
        let path = unique_path("barrier");
        let s = session(&target.addr, Duration::from_secs(10)).await;
        let barrier = Barrier::new(&s, &path).unwrap();
        barrier.set().await.unwrap();
        let waiters: Vec<_> = (0..3)
            .map(|_| {
                let b = barrier.clone();
                tokio::spawn(async move { b.wait().await })
            })
            .collect();
        // A round trip after the waiters registered their watches: still up, nobody through.
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(
            waiters.iter().all(|w| !w.is_finished()),
            "{}: passed early",
            target.name
        );
        barrier.remove().await.unwrap();
        for w in waiters {
            tokio::time::timeout(LIMIT, w)
                .await
                .unwrap()
                .unwrap()
                .unwrap();
        }

        // Double barrier of 3: two members wait until the third enters.
        let dpath = unique_path("double-barrier");
        let mut members = Vec::new();
        for _ in 0..3 {
            let ms = session(&target.addr, Duration::from_secs(10)).await;
            members.push((DoubleBarrier::new(&ms, &dpath, 3).unwrap(), ms));
        }
        let first_two: Vec<_> = members[..2]
            .iter()
            .map(|(b, _)| {
                let b = b.clone();
                tokio::spawn(async move { b.enter().await })
            })
            .collect();
        eventually("two members registered", LIMIT, || async {
            children(&s, &dpath).await.len() == 2
        })
        .await;
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(
            first_two.iter().all(|t| !t.is_finished()),
            "{}: entered early",
            target.name
        );
        members[2].0.enter().await.unwrap();
        for t in first_two {
            tokio::time::timeout(LIMIT, t)
                .await
                .unwrap()
                .unwrap()
                .unwrap();
        }
        let leaving: Vec<_> = members
            .iter()
            .map(|(b, _)| {
                let b = b.clone();
                tokio::spawn(async move { b.leave().await })
            })
            .collect();
        for t in leaving {
            tokio::time::timeout(LIMIT, t)
                .await
                .unwrap()
                .unwrap()
                .unwrap();
        }
        assert!(children(&s, &dpath).await.is_empty(), "{}", target.name);
    }
}

/// 200 items, three consumers, one of which is aborted half-way: every item is taken exactly
/// once (the aborted consumer's items count if its take returned).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_delivers_each_item_once_with_a_consumer_killed() {
    for target in servers().await {
        let path = unique_path("queue");
        let producer_session = session(&target.addr, Duration::from_secs(10)).await;
        let queue = Queue::new(&producer_session, &path).unwrap();
        let taken = std::sync::Arc::new(std::sync::Mutex::new(Vec::<i64>::new()));
        let mut consumers = Vec::new();
        for _ in 0..3 {
            let s = session(&target.addr, Duration::from_secs(10)).await;
            let q = Queue::new(&s, &path).unwrap();
            let taken = taken.clone();
            consumers.push(tokio::spawn(async move {
                loop {
                    let item = q.take().await.expect("take");
                    let n: i64 = String::from_utf8_lossy(&item.data).parse().unwrap();
                    taken.lock().unwrap().push(n);
                    if n < 0 {
                        return;
                    }
                }
            }));
        }
        for i in 0..200 {
            queue.offer(i.to_string().as_bytes()).await.unwrap();
            if i == 100 {
                consumers[0].abort();
            }
        }
        // 199, not 200: the aborted consumer may have been cancelled inside a take after its
        // delete (asserted below to be at most one item). The poison pills queue behind every
        // remaining item, so the consumers drain the queue before they stop.
        eventually("all items taken", LIMIT, || async {
            taken.lock().unwrap().len() >= 199
        })
        .await;
        // Stop the others with poison pills.
        for _ in 0..2 {
            queue.offer(b"-1").await.unwrap();
        }
        for c in consumers.drain(1..) {
            tokio::time::timeout(LIMIT, c).await.unwrap().unwrap();
        }
        let mut got: Vec<i64> = taken
            .lock()
            .unwrap()
            .iter()
            .copied()
            .filter(|n| *n >= 0)
            .collect();
        got.sort_unstable();
        let aborted_in_flight = 200 - got.len();
        got.dedup();
        assert_eq!(
            got.len() + aborted_in_flight,
            200,
            "{}: duplicates",
            target.name
        );
        // An item can only be missing if the aborted consumer was cancelled inside its take
        // (after the delete): at most one.
        assert!(
            aborted_in_flight <= 1,
            "{}: {aborted_in_flight} lost",
            target.name
        );
        assert!(queue.poll().await.unwrap().is_none());
    }
}

/// Claim/ack: a claimed item is hidden from other claimers and from `take`; a failed ack
/// commits nothing and keeps the claim; a released claim makes the item available again; an ack
/// deletes item and claim together with the caller's ops.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_claims_hide_items_until_acked_or_released() {
    for target in servers().await {
        let name = target.name;
        let path = unique_path("queue-claim");
        let results = format!("{path}-results");
        let s1 = session(&target.addr, Duration::from_secs(10)).await;
        let s2 = session(&target.addr, Duration::from_secs(10)).await;
        let (q1, q2) = (
            Queue::new(&s1, &path).unwrap(),
            Queue::new(&s2, &path).unwrap(),
        );
        let opts = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
        s1.client().create(&results, b"", &opts).await.unwrap();
        let first = q1.offer(b"a").await.unwrap();

        let claim = q1.try_claim().await.unwrap().expect("an item to claim");
        assert_eq!(claim.item().sequence, first);
        // s2 may be on another ensemble member: see s1's item and claim before judging.
        s2.client().sync(&path).await.unwrap();
        assert!(
            q2.try_claim().await.unwrap().is_none(),
            "{name}: claimed twice"
        );
        assert!(
            q2.poll().await.unwrap().is_none(),
            "{name}: took a claimed item"
        );

        // A failing op in the ack: nothing commits, the item and the claim stay.
        let result = format!("{results}/a");
        s1.client().create(&result, b"", &opts).await.unwrap();
        let err = claim
            .ack_with(|m| m.add_create(&result, b"", &opts))
            .await
            .unwrap_err();
        assert_eq!(err, zkit::Error::NodeExists, "{name}");
        let item_path = claim.item_path().to_string();
        assert!(s1.client().check_stat(&item_path).await.unwrap().is_some());
        assert!(q2.try_claim().await.unwrap().is_none(), "{name}");
        s1.client().delete(&result, None).await.unwrap();
        // Given back: the other consumer gets it.
        claim.release().await.unwrap();
        s2.client().sync(&path).await.unwrap();

        let claim = q2.try_claim().await.unwrap().expect("released item");
        assert_eq!(claim.item().data, b"a");
        claim
            .ack_with(|m| m.add_create(&result, b"done", &opts))
            .await
            .unwrap();
        assert!(children(&s1, &path).await.is_empty(), "{name}");
        assert_eq!(s1.client().get_data(&result).await.unwrap().0, b"done");

        // release() gives an item back too; `claim` waits for an offer.
        let waiting = tokio::spawn({
            let q2 = q2.clone();
            async move { q2.claim().await }
        });
        q1.offer(b"b").await.unwrap();
        let claim = tokio::time::timeout(LIMIT, waiting)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(claim.item().data, b"b");
        claim.release().await.unwrap();
        let item = q1.take().await.unwrap();
        assert_eq!(item.data, b"b", "{name}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn caches_load_then_follow_changes() {
    for target in servers().await {
        let root = unique_path("cache");
        let s = session(&target.addr, Duration::from_secs(10)).await;
        let opts = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
        let client = s.client();
        client.create(&root, b"r", &opts).await.unwrap();
        client
            .create(&format!("{root}/a"), b"1", &opts)
            .await
            .unwrap();
        let mut tree = TreeCache::new(&s, &root).unwrap();
        let mut node = NodeCache::new(&s, &format!("{root}/a")).unwrap();
        let mut initial = Vec::new();
        loop {
            match tokio::time::timeout(LIMIT, tree.next())
                .await
                .unwrap()
                .unwrap()
            {
                CacheEvent::Initialized => break,
                CacheEvent::Added(d) => initial.push(d.path),
                other => panic!("{other:?} before Initialized"),
            }
        }
        assert_eq!(initial.len(), 2, "{}", target.name);
        assert_eq!(tree.get(&format!("{root}/a")).unwrap().data, b"1");
        node.next().await.unwrap(); // Added(a)
        client
            .set_data(&format!("{root}/a"), b"2", None)
            .await
            .unwrap();
        client
            .create(&format!("{root}/b"), b"x", &opts)
            .await
            .unwrap();
        let mut kinds = Vec::new();
        kinds.push(next_kind(&mut tree).await);
        kinds.push(next_kind(&mut tree).await);
        // Deleted only once seen: a node created and deleted between two reads is never
        // reported (the cache follows the latest state, like Curator's).
        client.delete(&format!("{root}/b"), None).await.unwrap();
        kinds.push(next_kind(&mut tree).await);
        assert_eq!(
            kinds,
            vec![
                format!("updated {root}/a"),
                format!("added {root}/b"),
                format!("removed {root}/b")
            ],
            "{}",
            target.name
        );
        loop {
            if let CacheEvent::Updated { new, .. } = tokio::time::timeout(LIMIT, node.next())
                .await
                .unwrap()
                .unwrap()
            {
                assert_eq!(new.data, b"2");
                break;
            }
        }
        assert_eq!(node.current().unwrap().data, b"2");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_membership_and_persistent_node_come_back() {
    for target in servers().await {
        let path = unique_path("group");
        let mut members = Vec::new();
        let mut sessions = Vec::new();
        for i in 0..3 {
            let s = session(&target.addr, Duration::from_secs(10)).await;
            let m =
                GroupMember::join(&s, &path, &format!("m{i}"), format!("p{i}").as_bytes()).unwrap();
            m.wait_joined(LIMIT).await.unwrap();
            members.push(m);
            sessions.push(s);
        }
        // The others joined through their own sessions, perhaps on other ensemble members.
        sessions[0].client().sync(&path).await.unwrap();
        let all = members[0].members().await.unwrap();
        assert_eq!(
            all.keys().cloned().collect::<Vec<_>>(),
            vec!["m0", "m1", "m2"]
        );
        assert_eq!(all["m1"], b"p1");
        members.pop().unwrap().leave().await;
        // The leave went through another session, perhaps on another ensemble member.
        sessions[0].client().sync(&path).await.unwrap();
        assert_eq!(
            members[0].members().await.unwrap().len(),
            2,
            "{}",
            target.name
        );

        // Someone deletes the node: it is put back.
        let s = session(&target.addr, Duration::from_secs(10)).await;
        let node_path = format!("{path}-node");
        let node =
            PersistentNode::start(&s, &node_path, b"here", zk::CreateMode::Ephemeral).unwrap();
        node.wait_present(LIMIT).await.unwrap();
        let other = session(&target.addr, Duration::from_secs(10)).await;
        other.client().sync(&node_path).await.unwrap();
        other.client().delete(&node_path, None).await.unwrap();
        eventually("node recreated", LIMIT, || async {
            other
                .client()
                .check_stat(&node_path)
                .await
                .ok()
                .flatten()
                .is_some()
        })
        .await;
        node.close().await;
        // `close` deleted it through its own session; on an ensemble `other` may be served
        // by a member that has not applied that yet: sync first (ZooKeeper's consistency is
        // per session).
        other.client().sync(&node_path).await.unwrap();
        assert!(other
            .client()
            .check_stat(&node_path)
            .await
            .unwrap()
            .is_none());
    }
}

/// The next cache event as `"<kind> <path>"`.
async fn next_kind(tree: &mut TreeCache) -> String {
    match tokio::time::timeout(LIMIT, tree.next())
        .await
        .unwrap()
        .unwrap()
    {
        CacheEvent::Updated { new, .. } => format!("updated {}", new.path),
        CacheEvent::Added(d) => format!("added {}", d.path),
        CacheEvent::Removed(d) => format!("removed {}", d.path),
        CacheEvent::Initialized => panic!("initialized twice"),
    }
}
