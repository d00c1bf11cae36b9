//! Parties, the set partitioner, the TTL node, the persistent watcher, the atomics, typed
//! models, and circuit breaking on a really flapping connection, against every server of
//! `common::servers()`. Connection faults come from `zkit_testkit::FaultProxy`.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{children, eventually, servers, session};
use serde::{Deserialize, Serialize};
use zkit::atomic::{AtomicOptions, DistributedAtomicLong, DistributedAtomicValue, PromotedToLock};
use zkit::circuit_breaker::CircuitBreakingListener;
use zkit::config::ConfigStore;
use zkit::model::{Format, Model, ModelEvent, Schema};
use zkit::partitioner::{PartitionState, PartitionerOptions, SetPartitioner};
use zkit::party::{members, shallow_members, Party, ShallowParty};
use zkit::persistent_watcher::{PersistentWatcher, WatchEvent};
use zkit::ttl_node::PersistentTtlNode;
use zkit::zkit_client as zk;
use zkit::{Error, RetryPolicy, SessionState};
use zkit_testkit::{unique_path, FaultProxy};

const LIMIT: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parties_list_members_and_rejoin_after_session_loss() {
    for target in servers().await {
        let name = target.name;
        let (deep, shallow) = (unique_path("party"), unique_path("shallow-party"));
        let proxy = FaultProxy::start(target.addr.clone()).await.expect("proxy");
        let flaky = session(&proxy.connect_string(), Duration::from_secs(2)).await;
        let s = session(&target.addr, Duration::from_secs(10)).await;
        let p1 = Party::join(&flaky, &deep, "one").unwrap();
        let p2 = Party::join(&s, &deep, "two").unwrap();
        let sh = ShallowParty::join(&flaky, &shallow, "one").unwrap();
        let sh2 = ShallowParty::join(&s, &shallow, "two").unwrap();
        for p in [&p1, &p2] {
            p.wait_joined(LIMIT).await.unwrap();
        }
        sh.wait_joined(LIMIT).await.unwrap();
        sh2.wait_joined(LIMIT).await.unwrap();
        let sorted = |mut v: Vec<String>| {
            v.sort();
            v
        };
        // "one" joined through another session, perhaps on another ensemble member.
        s.client().sync(&deep).await.unwrap();
        s.client().sync(&shallow).await.unwrap();
        assert_eq!(
            sorted(members(&s, &deep).await.unwrap()),
            vec!["one", "two"],
            "{name}"
        );
        assert_eq!(
            sorted(shallow_members(&s, &shallow).await.unwrap()),
            vec!["one", "two"]
        );
        assert!(p1.node_path().ends_with("__party__"));

        // The flaky member's session is lost; it comes back on the next one.
        proxy.pause();
        eventually("the lost member's nodes expire", LIMIT, || {
            let (s, d) = (s.clone(), deep.clone());
            async move { members(&s, &d).await.unwrap() == vec!["two"] }
        })
        .await;
        proxy.resume();
        eventually("the member re-joined", LIMIT, || {
            let (s, d, sh) = (s.clone(), deep.clone(), shallow.clone());
            async move {
                members(&s, &d).await.unwrap().len() == 2
                    && shallow_members(&s, &sh).await.unwrap().len() == 2
            }
        })
        .await;
        p1.leave().await;
        sh.leave().await;
        // The leaves went through the flaky member's session, perhaps on another member.
        s.client().sync(&deep).await.unwrap();
        s.client().sync(&shallow).await.unwrap();
        assert_eq!(members(&s, &deep).await.unwrap(), vec!["two"], "{name}");
        assert_eq!(shallow_members(&s, &shallow).await.unwrap(), vec!["two"]);
        p2.leave().await;
        sh2.leave().await;
        eprintln!("{name}: parties ok");
    }
}

fn options() -> PartitionerOptions {
    PartitionerOptions {
        time_boundary: Duration::from_millis(500),
        max_reaction_time: Duration::from_millis(300),
    }
}

/// Plays the user of a partitioner: releases the set whenever told to (kazoo's loop), until
/// it fails.
fn drive(p: Arc<SetPartitioner>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            match p.state() {
                PartitionState::Release => {
                    let _ = p.release_set().await;
                }
                PartitionState::Failure => return,
                _ => {
                    let _ =
                        tokio::time::timeout(Duration::from_millis(200), p.wait_for_change()).await;
                }
            }
        }
    })
}

/// Waits (bounded) until every partitioner is `Acquired` and together they hold `items`
/// exactly once; returns their partitions.
async fn settled(ps: &[&Arc<SetPartitioner>], items: &[String], what: &str) -> Vec<Vec<String>> {
    let deadline = tokio::time::Instant::now() + LIMIT;
    loop {
        let parts: Vec<Vec<String>> = ps.iter().map(|p| p.partitions()).collect();
        let all_acquired = ps.iter().all(|p| p.state() == PartitionState::Acquired);
        let mut union: Vec<String> = parts.iter().flatten().cloned().collect();
        union.sort();
        if all_acquired && union == items {
            return parts;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: never settled: {parts:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_partitioner_splits_re_splits_and_fails_on_session_loss() {
    for target in servers().await {
        let name = target.name;
        let path = unique_path("partitioner");
        let items: Vec<String> = (0..7).map(|i| format!("item-{i}")).collect();
        let proxy = FaultProxy::start(target.addr.clone()).await.expect("proxy");
        let flaky = session(&proxy.connect_string(), Duration::from_secs(2)).await;
        let steady = session(&target.addr, Duration::from_secs(10)).await;
        let a = Arc::new(SetPartitioner::start(&steady, &path, &items, "a", options()).unwrap());
        let b = Arc::new(SetPartitioner::start(&steady, &path, &items, "b", options()).unwrap());
        let c = Arc::new(SetPartitioner::start(&flaky, &path, &items, "c", options()).unwrap());
        let drivers: Vec<_> = [&a, &b, &c]
            .into_iter()
            .map(|p| drive(Arc::clone(p)))
            .collect();
        // All three settle on kazoo's three-member split.
        let split = settled(&[&a, &b, &c], &items, name).await;
        assert_eq!(
            split[0],
            vec!["item-0", "item-3", "item-6"],
            "{name}: kazoo's split"
        );
        assert_eq!(split[1], vec!["item-1", "item-4"], "{name}");
        // The lock of each item is held by its owner.
        for item in &items {
            assert_eq!(
                children(&steady, &format!("{path}/locks/{item}"))
                    .await
                    .len(),
                1,
                "{item}"
            );
        }

        // c's session is lost: c fails; a and b release and re-split between themselves.
        proxy.pause();
        tokio::time::timeout(LIMIT, async {
            while c.state() != PartitionState::Failure {
                c.wait_for_change().await;
            }
        })
        .await
        .unwrap_or_else(|_| panic!("{name}: c did not fail on session loss"));
        proxy.resume();
        let split = settled(&[&a, &b], &items, name).await;
        assert_eq!(
            split[0],
            vec!["item-0", "item-2", "item-4", "item-6"],
            "{name}"
        );
        a.finish().await;
        b.finish().await;
        assert_eq!(a.state(), PartitionState::Failure);
        for d in drivers {
            tokio::time::timeout(LIMIT, d).await.unwrap().unwrap();
        }
        eventually("everyone left the party", LIMIT, || {
            let (s, p) = (steady.clone(), format!("{path}/party"));
            async move { children(&s, &p).await.is_empty() }
        })
        .await;
        eprintln!("{name}: set partitioner ok");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ttl_node_lives_while_touched_and_expires_after_close() {
    for target in servers().await {
        let name = target.name;
        let path = unique_path("ttl-node");
        let s = session(&target.addr, Duration::from_secs(10)).await;
        let ttl = Duration::from_millis(1000);
        let node = PersistentTtlNode::start(&s, &path, ttl, b"alive").unwrap();
        node.wait_for_initial_create(LIMIT).await.unwrap();
        let client = s.client();
        let stat = client.check_stat(&path).await.unwrap().expect("created");
        assert_eq!(stat.ephemeral_owner, 0, "{name}: not an ephemeral node");
        eventually("touch child", LIMIT, || {
            let c = client.clone();
            let p = format!("{path}/touch");
            async move { c.check_stat(&p).await.unwrap().is_some() }
        })
        .await;
        // Three TTLs (and several reaper passes) later it is still there: the touches keep it.
        tokio::time::sleep(ttl * 3).await;
        let (data, _) = client.get_data(&path).await.unwrap();
        assert_eq!(data, b"alive", "{name}: reaped while touched");
        node.set_data(b"still").await.unwrap();
        assert_eq!(client.get_data(&path).await.unwrap().0, b"still");
        // Closed: nobody touches it, the server reaps child and node.
        node.close().await;
        eventually("reaped after close", LIMIT, || {
            let c = client.clone();
            let p = path.clone();
            async move { c.check_stat(&p).await.unwrap().is_none() }
        })
        .await;
        eprintln!("{name}: ttl node ok");
    }
}

async fn next_event(w: &mut PersistentWatcher, what: &str) -> WatchEvent {
    tokio::time::timeout(LIMIT, w.next())
        .await
        .unwrap_or_else(|_| panic!("persistent watcher: timed out waiting for {what}"))
        .expect("watch event")
}

/// Waits for a node event on `path` (skipping others), bounded.
async fn node_event(w: &mut PersistentWatcher, path: &str, kind: zk::EventType) {
    loop {
        if let WatchEvent::Node(e) = next_event(w, path).await {
            if e.path == path && e.event_type == kind {
                return;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn persistent_watcher_is_re_added_after_reconnect_and_session_loss() {
    for target in servers().await {
        let name = target.name;
        let root = unique_path("pwatch");
        let proxy = FaultProxy::start(target.addr.clone()).await.expect("proxy");
        let s = session(&proxy.connect_string(), Duration::from_secs(2)).await;
        let writer = session(&target.addr, Duration::from_secs(10)).await;
        let mut w = PersistentWatcher::new(&s, &root, true).unwrap();
        assert_eq!(
            next_event(&mut w, "first reset").await,
            WatchEvent::Reset,
            "{name}"
        );
        let persistent = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
        let c = writer.client();
        c.create(&root, b"", &persistent).await.unwrap();
        node_event(&mut w, &root, zk::EventType::NodeCreated).await;
        let child = format!("{root}/a");
        c.create(&child, b"", &persistent).await.unwrap();
        node_event(&mut w, &child, zk::EventType::NodeCreated).await;

        // A dropped connection: Reset (re-read!), then events keep coming.
        proxy.drop_connections().await;
        loop {
            if next_event(&mut w, "reset after reconnect").await == WatchEvent::Reset {
                break;
            }
        }
        c.set_data(&child, b"1", None).await.unwrap();
        node_event(&mut w, &child, zk::EventType::NodeDataChanged).await;

        // A lost session: Reset on the new session, events keep coming.
        let generation = s.generation();
        proxy.pause();
        eventually("session lost", LIMIT, || {
            let s = s.clone();
            async move { s.state().state == SessionState::Lost || s.generation() > generation }
        })
        .await;
        proxy.resume();
        loop {
            if next_event(&mut w, "reset after session loss").await == WatchEvent::Reset
                && s.generation() > generation
            {
                break;
            }
        }
        c.delete(&child, None).await.unwrap();
        node_event(&mut w, &child, zk::EventType::NodeDeleted).await;
        eprintln!("{name}: persistent watcher ok");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn atomics_lose_no_update_under_contention_and_follow_curator() {
    for target in servers().await {
        let name = target.name;
        let path = unique_path("atomic");
        let lock = format!("{path}-lock");
        let mut tasks = Vec::new();
        for _ in 0..4 {
            let s = session(&target.addr, Duration::from_secs(10)).await;
            let counter = DistributedAtomicLong::new(
                &s,
                &path,
                AtomicOptions {
                    retry: RetryPolicy::NTimes {
                        n: 1,
                        sleep: Duration::from_millis(1),
                    },
                    promoted: Some(PromotedToLock {
                        retry: RetryPolicy::NTimes {
                            n: 50,
                            sleep: Duration::from_millis(2),
                        },
                        ..PromotedToLock::new(&lock)
                    }),
                },
            )
            .unwrap();
            tasks.push(tokio::spawn(async move {
                let (mut ok, mut promoted) = (0i64, 0u32);
                for _ in 0..20 {
                    let r = counter.increment().await.expect("increment");
                    if r.succeeded {
                        ok += 1;
                        assert_eq!(r.post, Some(r.pre + 1));
                    }
                    promoted += r.stats.promoted_tries;
                }
                drop(s);
                (ok, promoted)
            }));
        }
        let (mut ok, mut promoted) = (0, 0);
        for t in tasks {
            let (o, p) = t.await.unwrap();
            ok += o;
            promoted += p;
        }
        let s = session(&target.addr, Duration::from_secs(10)).await;
        let counter = DistributedAtomicLong::new(&s, &path, AtomicOptions::default()).unwrap();
        // The increments went through other sessions, perhaps on other ensemble members.
        s.client().sync(&path).await.unwrap();
        assert_eq!(counter.get().await.unwrap(), ok, "{name}: lost or doubled");
        assert_eq!(
            ok, 80,
            "{name}: promotion made every increment succeed ({promoted} promoted tries)"
        );

        // Curator's semantics of the other operations.
        let v = counter.get().await.unwrap();
        let miss = counter.compare_and_set(v + 1, 0).await.unwrap();
        assert!(!miss.succeeded && miss.pre == v);
        assert!(counter.compare_and_set(v, 7).await.unwrap().succeeded);
        assert!(!counter.initialize(1).await.unwrap(), "exists");
        assert_eq!(counter.try_set(-3).await.unwrap().post, Some(-3));
        counter.force_set(11).await.unwrap();
        assert_eq!(counter.subtract(1).await.unwrap().post, Some(10));
        let bytes =
            DistributedAtomicValue::new(&s, &format!("{path}-bytes"), AtomicOptions::default())
                .unwrap();
        assert!(bytes.initialize(b"a").await.unwrap());
        assert!(!bytes.compare_and_set(b"b", b"c").await.unwrap().succeeded);
        assert!(bytes.compare_and_set(b"a", b"c").await.unwrap().succeeded);
        assert_eq!(bytes.get().await.unwrap().as_deref(), Some(&b"c"[..]));
        // The long's bytes are Curator's (8 bytes, big-endian).
        let (raw, _) = s.client().get_data(&path).await.unwrap();
        assert_eq!(raw, 10i64.to_be_bytes());
        eprintln!("{name}: atomics ok ({promoted} promoted tries)");
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Limits {
    max_conns: u32,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn models_are_typed_versioned_schema_checked_and_watchable() {
    for target in servers().await {
        let name = target.name;
        let path = unique_path("model");
        let s = session(&target.addr, Duration::from_secs(10)).await;
        let v1: Model<Limits> = Model::new(&s, &path, Format::Json)
            .unwrap()
            .with_schema(Schema::new("limits", 1));
        let mut watch = v1.watch().unwrap();
        let first = tokio::time::timeout(LIMIT, watch.next())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(first, ModelEvent::Deleted, "{name}: starts absent");
        assert_eq!(v1.get().await.unwrap(), None);
        v1.set(&Limits { max_conns: 1 }).await.unwrap();
        let read = v1.get().await.unwrap().expect("set");
        assert_eq!(read.value, Limits { max_conns: 1 });
        // Stale CAS refused, fresh one accepted.
        v1.compare_and_set(&Limits { max_conns: 2 }, read.version)
            .await
            .unwrap();
        assert_eq!(
            v1.compare_and_set(&Limits { max_conns: 3 }, read.version)
                .await,
            Err(Error::BadVersion)
        );
        // Concurrent updates lose nothing.
        let mut tasks = Vec::new();
        for _ in 0..2 {
            let m = v1.clone();
            tasks.push(tokio::spawn(async move {
                for _ in 0..10 {
                    m.update(|old| {
                        Ok(Limits {
                            max_conns: old.map_or(0, |l| l.max_conns) + 1,
                        })
                    })
                    .await
                    .unwrap();
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(
            v1.get().await.unwrap().unwrap().value.max_conns,
            22,
            "{name}"
        );
        // Another schema version reads a clear mismatch; the watcher reports it and goes on.
        let v2: Model<Limits> = Model::new(&s, &path, Format::Json)
            .unwrap()
            .with_schema(Schema::new("limits", 2));
        match v2.get().await {
            Err(Error::SchemaMismatch {
                expected, found, ..
            }) => {
                assert_eq!(
                    (expected.as_str(), found.as_str()),
                    ("limits v2", "limits v1")
                )
            }
            other => panic!("{name}: {other:?}"),
        }
        v2.set(&Limits { max_conns: 99 }).await.unwrap();
        // Until the watcher reports the v2 value as a mismatch (v1 values may come first).
        loop {
            match tokio::time::timeout(LIMIT, watch.next())
                .await
                .unwrap()
                .unwrap()
            {
                ModelEvent::Invalid {
                    error: Error::SchemaMismatch { .. },
                    ..
                } => break,
                ModelEvent::Set(_) => {}
                other => panic!("{name}: {other:?}"),
            }
        }
        v1.delete().await.unwrap();
        loop {
            if tokio::time::timeout(LIMIT, watch.next())
                .await
                .unwrap()
                .unwrap()
                == ModelEvent::Deleted
            {
                break;
            }
        }

        // A ConfigStore model without a schema is the store's own JSON.
        let store = ConfigStore::new(&s, &unique_path("model-config")).unwrap();
        let typed: Model<Limits> = store.model("limits", Format::Json).unwrap();
        typed.set(&Limits { max_conns: 5 }).await.unwrap();
        assert_eq!(
            store.read_json::<Limits>("limits").await.unwrap(),
            Some(Limits { max_conns: 5 })
        );
        store
            .write_toml("limits.toml", &Limits { max_conns: 6 })
            .await
            .unwrap();
        let toml_model: Model<Limits> = store.model("limits.toml", Format::Toml).unwrap();
        assert_eq!(toml_model.get().await.unwrap().unwrap().value.max_conns, 6);
        eprintln!("{name}: models ok");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn circuit_breaker_swallows_a_flapping_connection() {
    for target in servers().await {
        let name = target.name;
        let proxy = FaultProxy::start(target.addr.clone()).await.expect("proxy");
        let s = session(&proxy.connect_string(), Duration::from_secs(10)).await;
        let window = Duration::from_millis(2500);
        let mut breaker = CircuitBreakingListener::new(
            &s,
            RetryPolicy::NTimes {
                n: 1,
                sleep: window,
            },
        );
        let mut raw = s.subscribe();
        // Three flaps in a row, each waited for on the raw stream (Suspended, Reconnected).
        for _ in 0..3 {
            proxy.drop_connections().await;
            for want in [SessionState::Suspended, SessionState::Reconnected] {
                tokio::time::timeout(LIMIT, async {
                    while raw.recv().await.expect("raw event").state != want {}
                })
                .await
                .unwrap_or_else(|_| panic!("{name}: raw {want:?} not seen"));
            }
        }
        // Through the breaker: the first Suspended, then nothing until the window ends, then
        // the connected state.
        let first = tokio::time::timeout(LIMIT, breaker.next())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(first.state, SessionState::Suspended, "{name}");
        assert!(breaker.is_open());
        let next = tokio::time::timeout(LIMIT, breaker.next())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(next.state, SessionState::Reconnected, "{name}: {next:?}");
        assert!(!breaker.is_open());
        eprintln!("{name}: circuit breaker ok");
    }
}
