//! The configuration service against every server of `common::servers()`: 1,000 rapid writes
//! seen by 5 watchers (last value = last write, versions never backwards), across a dropped
//! connection and across an expired session; the store's upsert and compare-and-set; the
//! one-shot fallback.

mod common;

use std::time::Duration;

use common::{servers, session};
use zkit::config::{ChangeKind, ConfigStore, ConfigWatcher, ConfigWatcherOptions, WatchMode};
use zkit::{Error, Session};
use zkit_testkit::{unique_path, FaultProxy};

const WRITES: u32 = 1_000;
const WATCHERS: usize = 5;

/// Follows `watcher` until `key` has the value `last`; checks on the way that every path's
/// versions and mzxids strictly increase. Returns how many changes of `key` it saw.
async fn follow_until(mut watcher: ConfigWatcher, key: String, last: String) -> usize {
    let mut seen = common::ConfigVersions::default();
    let mut count = 0;
    loop {
        let change = watcher.next().await.expect("watcher next");
        seen.check(&change);
        if change.path == key {
            count += 1;
            if change.value_lossy() == last {
                return count;
            }
        }
    }
}

/// 1,000 writes, 5 watchers behind a fault proxy; the connections are dropped in the middle.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rapid_writes_reach_every_watcher_across_a_dropped_connection() {
    for target in servers().await {
        let root = unique_path("config-rapid");
        let key = format!("{root}/app/level");
        let proxy = FaultProxy::start(target.addr.clone()).await.expect("proxy");
        let writer = session(&target.addr, Duration::from_secs(10)).await;
        let store = ConfigStore::new(&writer, &root).expect("store");
        store
            .write("app/level", b"initial")
            .await
            .expect("first write");

        let last = (WRITES - 1).to_string();
        let mut tasks = Vec::new();
        let mut watcher_sessions = Vec::new();
        for _ in 0..WATCHERS {
            let s = session(&proxy.connect_string(), Duration::from_secs(10)).await;
            let mut watcher = ConfigWatcher::new(&s, &root).expect("watcher");
            // The initial snapshot arrives before any of the writes below.
            let first = watcher.next().await.expect("initial");
            assert_eq!(first.kind, ChangeKind::Initial);
            assert_eq!(watcher.mode(), WatchMode::Persistent);
            tasks.push(tokio::spawn(follow_until(
                watcher,
                key.clone(),
                last.clone(),
            )));
            watcher_sessions.push(s);
        }
        for i in 0..WRITES {
            store
                .write("app/level", i.to_string().as_bytes())
                .await
                .expect("write");
            if i == WRITES / 3 {
                proxy.drop_connections().await;
            }
        }
        for task in tasks {
            let seen = tokio::time::timeout(Duration::from_secs(60), task)
                .await
                .unwrap_or_else(|_| panic!("{}: a watcher never saw the last write", target.name))
                .expect("watcher task");
            assert!(seen >= 1, "{}", target.name);
        }
        // Reconnects happened (the drop was real) and no session was lost.
        assert!(
            proxy.accepted_connections() > WATCHERS as u64,
            "{}",
            target.name
        );
        for s in &watcher_sessions {
            assert_eq!(s.generation(), 1, "{}: session replaced", target.name);
        }
        eprintln!(
            "{}: {WRITES} writes seen by {WATCHERS} watchers",
            target.name
        );
    }
}

/// A watcher whose session expires (partition longer than the session timeout) resyncs on the
/// new session and ends on the last value; writes continue during the partition.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watcher_survives_an_expired_session() {
    for target in servers().await {
        let root = unique_path("config-expiry");
        let proxy = FaultProxy::start(target.addr.clone()).await.expect("proxy");
        let writer = session(&target.addr, Duration::from_secs(10)).await;
        let store = ConfigStore::new(&writer, &root).expect("store");
        store.write("k", b"0").await.expect("write");
        store.write("gone", b"x").await.expect("write");

        let timeout = target.min_session_timeout;
        let watched = session(&proxy.connect_string(), timeout).await;
        // Gone once the server has expired the watched session.
        let marker = unique_path("config-expiry-marker");
        watched
            .client()
            .create(
                &marker,
                b"",
                &zkit::zkit_client::CreateMode::Ephemeral
                    .with_acls(zkit::zkit_client::Acls::anyone_all()),
            )
            .await
            .expect("marker");
        let mut watcher = ConfigWatcher::new(&watched, &root).expect("watcher");
        let mut initial = Vec::new();
        // The root itself, k and gone.
        while initial.len() < 3 {
            initial.push(watcher.next().await.expect("initial"));
        }
        let task = tokio::spawn(async move {
            let mut removed_gone = false;
            let mut last_k = String::new();
            loop {
                let change = watcher.next().await.expect("next");
                if change.path.ends_with("/gone") && change.kind == ChangeKind::Removed {
                    removed_gone = true;
                }
                if change.path.ends_with("/k") {
                    last_k = change.value_lossy();
                }
                if removed_gone && last_k == "final" {
                    return watcher;
                }
            }
        });
        proxy.pause();
        // While partitioned: the node changes several times and one is deleted.
        for i in 1..50 {
            store
                .write("k", i.to_string().as_bytes())
                .await
                .expect("write");
        }
        store.delete("gone").await.expect("delete");
        store.write("k", b"final").await.expect("write");
        // Until the server has expired the session (it counts from the last packet it saw).
        let mut state = watched.watch_state();
        tokio::time::timeout(timeout * 3 + Duration::from_secs(5), async {
            state
                .wait_for(|e| e.state == zkit::SessionState::Lost)
                .await
        })
        .await
        .expect("session lost in time")
        .expect("state stream");
        // And until the server has expired it too: the watcher then resyncs on a new session.
        common::eventually("the server expires the session", timeout * 3, || {
            let (client, marker) = (writer.client(), marker.clone());
            async move {
                client.sync(&marker).await.expect("sync");
                matches!(client.check_stat(&marker).await, Ok(None))
            }
        })
        .await;
        proxy.resume();
        let watcher = tokio::time::timeout(Duration::from_secs(60), task)
            .await
            .unwrap_or_else(|_| panic!("{}: watcher never caught up", target.name))
            .expect("watcher task");
        assert!(watched.generation() >= 2, "{}: a new session", target.name);
        // The root and k are left.
        assert_eq!(watcher.view().paths().count(), 2, "{}", target.name);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_upserts_compare_and_sets_and_types() {
    for target in servers().await {
        let root = unique_path("config-store");
        let s = session(&target.addr, Duration::from_secs(10)).await;
        let store = ConfigStore::new(&s, &root).expect("store");
        assert_eq!(store.read("a/b").await.unwrap(), None);
        let v0 = store.write("a/b", b"1").await.unwrap();
        let v1 = store.write("a/b", b"2").await.unwrap();
        assert_eq!((v0.version, v1.version), (0, 1));
        assert_eq!(store.read("a/b").await.unwrap().unwrap().value, b"2");
        assert_eq!(
            store.compare_and_set("a/b", b"3", 0).await,
            Err(Error::BadVersion)
        );
        let v2 = store.compare_and_set("a/b", b"3", 1).await.unwrap();
        assert_eq!(v2.version, 2);
        assert_eq!(
            store.compare_and_set("missing", b"x", -1).await,
            Err(Error::NoNode)
        );
        #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
        struct Db {
            url: String,
            pool: u32,
        }
        let db = Db {
            url: "postgres://x".into(),
            pool: 8,
        };
        store.write_json("db.json", &db).await.unwrap();
        store.write_toml("db.toml", &db).await.unwrap();
        assert_eq!(store.read_json::<Db>("db.json").await.unwrap(), Some(db));
        assert!(store.read_toml::<Db>("db.toml").await.unwrap().is_some());
        assert!(matches!(
            store.read_json::<Db>("a/b").await,
            Err(Error::Unexpected(_))
        ));
        // Concurrent upserts of a missing key: none fails with NodeExists (the exists-then-create race).
        let mut tasks = Vec::new();
        for i in 0..8 {
            let store = store.clone();
            tasks.push(tokio::spawn(async move {
                store.write("race", format!("{i}").as_bytes()).await
            }));
        }
        for task in tasks {
            task.await
                .unwrap()
                .expect("upsert never fails with NodeExists");
        }
        // read_and_watch on a missing key fires on creation.
        let (value, watch) = store.read_and_watch("later").await.unwrap();
        assert_eq!(value, None);
        store.write("later", b"x").await.unwrap();
        let event = tokio::time::timeout(Duration::from_secs(10), watch.changed())
            .await
            .expect("creation event");
        assert_eq!(event.path, format!("{root}/later"));
    }
}

/// The one-shot fallback (what servers without `addWatch` get): same stream, same guarantees.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_shot_fallback_follows_creations_changes_and_deletions() {
    for target in servers().await {
        let root = unique_path("config-oneshot");
        let s = session(&target.addr, Duration::from_secs(10)).await;
        let store = ConfigStore::new(&s, &root).expect("store");
        let options = ConfigWatcherOptions {
            force_one_shot: true,
            ..ConfigWatcherOptions::default()
        };
        let watcher_session: Session = session(&target.addr, Duration::from_secs(10)).await;
        let mut watcher =
            ConfigWatcher::with_options(&watcher_session, &root, options).expect("watcher");
        assert_eq!(watcher.mode(), WatchMode::OneShot);
        // The node exists in the initial snapshot, so its deletion must be reported.
        store.write("x/y", b"0").await.unwrap();
        // Written through another session, perhaps on another ensemble member.
        watcher_session.client().sync(&root).await.unwrap();
        watcher.load().await.unwrap();
        let writes = tokio::spawn(async move {
            for i in 1..200u32 {
                store.write("x/y", i.to_string().as_bytes()).await.unwrap();
            }
            store.delete("x/y").await.unwrap();
            store.write("done", b"1").await.unwrap();
        });
        let mut last_y = None;
        let mut y_removed = false;
        let mut done = false;
        loop {
            let change = tokio::time::timeout(Duration::from_secs(30), watcher.next())
                .await
                .expect("progress")
                .expect("next");
            if change.path.ends_with("/x/y") {
                match change.kind {
                    ChangeKind::Removed => y_removed = true,
                    _ => {
                        let v: u32 = change.value_lossy().parse().unwrap();
                        assert!(last_y.map_or(true, |l| v > l), "went back to {v}");
                        last_y = Some(v);
                    }
                }
            }
            if change.path.ends_with("/done") {
                done = true;
            }
            if done && y_removed {
                break;
            }
        }
        writes.await.unwrap();
        assert!(y_removed, "{}: deletion reported", target.name);
    }
}
