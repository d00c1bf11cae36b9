//! NodeCache and TreeCache across a dropped connection (against every server of
//! `common::servers()`): changes made while the link is down are picked up by the re-sync after
//! the reconnect (persistent watches miss them, ZOOKEEPER-4698), and changes made after it
//! arrive too, which needs the persistent watch registered again on the new connection (the
//! client re-sends it with SetWatches2).

mod common;

use std::time::Duration;

use common::{servers, session};
use zkit::cache::{CacheEvent, NodeCache, TreeCache};
use zkit::zkit_client as zk;
use zkit_testkit::{unique_path, FaultProxy};

const LIMIT: Duration = Duration::from_secs(20);

/// Feeds `tree` events until `done` holds on it (bounded); returns the events seen.
async fn tree_until(
    tree: &mut TreeCache,
    what: &str,
    done: impl Fn(&TreeCache) -> bool,
) -> Vec<CacheEvent> {
    let mut seen = Vec::new();
    while !done(tree) {
        let event = tokio::time::timeout(LIMIT, tree.next())
            .await
            .unwrap_or_else(|_| panic!("tree cache: timed out waiting for {what}; saw {seen:?}"))
            .expect("tree cache event");
        seen.push(event);
    }
    seen
}

/// Feeds `node` events until its data is `want` (bounded).
async fn node_until(node: &mut NodeCache, want: &[u8]) {
    while node.current().map(|d| d.data.as_slice()) != Some(want) {
        tokio::time::timeout(LIMIT, node.next())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "node cache: timed out waiting for {:?}, has {:?}",
                    String::from_utf8_lossy(want),
                    node.current()
                )
            })
            .expect("node cache event");
    }
}

fn data(tree: &TreeCache, path: &str) -> Option<Vec<u8>> {
    tree.get(path).map(|d| d.data.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn caches_see_changes_during_and_after_a_dropped_connection() {
    for target in servers().await {
        let name = target.name;
        let root = unique_path("cache-drop");
        let (a, b, c, d) = (
            format!("{root}/a"),
            format!("{root}/b"),
            format!("{root}/c"),
            format!("{root}/d"),
        );
        let writer = session(&target.addr, Duration::from_secs(10)).await;
        let w = writer.client();
        let opts = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
        w.create(&root, b"r", &opts).await.unwrap();
        w.create(&a, b"1", &opts).await.unwrap();
        w.create(&c, b"c", &opts).await.unwrap();

        let proxy = FaultProxy::start(target.addr.clone()).await.expect("proxy");
        let s = session(&proxy.connect_string(), Duration::from_secs(10)).await;
        let generation = s.generation();
        let mut tree = TreeCache::new(&s, &root).unwrap();
        let mut node = NodeCache::new(&s, &a).unwrap();
        tree_until(&mut tree, "the initial load", |t| t.len() == 3).await;
        node_until(&mut node, b"1").await;

        // The link goes down; changes happen meanwhile (their notifications are lost with it).
        proxy.pause();
        w.set_data(&a, b"2", None).await.unwrap();
        w.create(&b, b"x", &opts).await.unwrap();
        w.delete(&c, None).await.unwrap();
        proxy.drop_connections().await;
        proxy.resume();

        // Re-synced after the reconnect: the changes made while down.
        let during = tree_until(&mut tree, "the changes made while down", |t| {
            data(t, &a).as_deref() == Some(b"2")
                && data(t, &b).as_deref() == Some(b"x")
                && t.get(&c).is_none()
        })
        .await;
        node_until(&mut node, b"2").await;
        assert!(
            during
                .iter()
                .any(|e| matches!(e, CacheEvent::Removed(r) if r.path == c)),
            "{name}: no Removed({c}) in {during:?}"
        );
        assert_eq!(
            s.generation(),
            generation,
            "{name}: the session was replaced"
        );
        assert!(
            proxy.accepted_connections() >= 2,
            "{name}: the client did not reconnect"
        );

        // Changes after the reconnect arrive through the watch added again on the new connection
        // (no further re-sync would bring them).
        w.set_data(&a, b"3", None).await.unwrap();
        w.create(&d, b"y", &opts).await.unwrap();
        w.delete(&b, None).await.unwrap();
        tree_until(&mut tree, "the changes made after the reconnect", |t| {
            data(t, &a).as_deref() == Some(b"3")
                && data(t, &d).as_deref() == Some(b"y")
                && t.get(&b).is_none()
        })
        .await;
        node_until(&mut node, b"3").await;
        let paths: Vec<String> = tree.nodes().map(|n| n.path.clone()).collect();
        assert_eq!(paths, vec![root.clone(), a.clone(), d.clone()], "{name}");
        proxy.shutdown().await;
    }
}
