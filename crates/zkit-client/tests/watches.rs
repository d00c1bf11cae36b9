//! Watches as Apache's client keeps them: every kind fires as ZooKeeper says, events come
//! before later replies, dropped watchers leave no server watch, removeWatches/checkWatches,
//! and every kind is re-armed after a reconnect (no event lost, none doubled).

mod common;

use std::time::Duration;

use common::{connect, on_both, ready_now, root, server_watches, within, Kind, PERSISTENT};
use tempfile::TempDir;
use zkit_client::{
    AddWatchMode, Client, Error, EventType, PersistentWatcher, SessionState, WatchType,
    WatchedEvent,
};
use zkit_server::{Server, ServerConfig};
use zkit_testkit::FaultProxy;

#[tokio::test]
async fn one_shot_watches_fire_once_for_what_zookeeper_says() {
    on_both(|addr, _| async move {
        let c = connect(&addr).await;
        let r = root(&c, "oneshot").await;
        let (d, e, ch) = (format!("{r}/d"), format!("{r}/e"), format!("{r}/c"));
        c.create(&d, b"", &PERSISTENT).await.unwrap();
        c.create(&ch, b"", &PERSISTENT).await.unwrap();

        let (_, _, data) = c.get_and_watch_data(&d).await.unwrap();
        let (missing, exist) = c.check_and_watch_stat(&e).await.unwrap();
        assert_eq!(missing, None);
        let (_, children) = c.list_and_watch_children(&ch).await.unwrap();
        let (_, _, children2) = c.get_and_watch_children(&ch).await.unwrap();
        let (Some(_), exists_data) = c.check_and_watch_stat(&d).await.unwrap() else {
            panic!("exists")
        };

        // Each event is there as soon as the reply of the write that caused it (same session).
        c.set_data(&d, b"1", None).await.unwrap();
        let event = ready_now(data.changed())
            .await
            .expect("data event before the reply");
        assert_eq!(
            event,
            WatchedEvent::new(EventType::NodeDataChanged, d.clone())
        );
        assert_eq!(
            ready_now(exists_data.changed()).await.unwrap().event_type,
            EventType::NodeDataChanged
        );
        c.create(&e, b"", &PERSISTENT).await.unwrap();
        assert_eq!(
            ready_now(exist.changed()).await.unwrap(),
            WatchedEvent::new(EventType::NodeCreated, e.clone())
        );
        c.create(&format!("{ch}/x"), b"", &PERSISTENT)
            .await
            .unwrap();
        assert_eq!(
            ready_now(children.changed()).await.unwrap(),
            WatchedEvent::new(EventType::NodeChildrenChanged, ch.clone())
        );
        assert_eq!(
            ready_now(children2.changed()).await.unwrap().event_type,
            EventType::NodeChildrenChanged
        );

        // Fired once: the server holds none of them any more.
        c.sync("/").await.unwrap();
        assert_eq!(
            server_watches(&addr, c.session_id().0).await,
            Vec::<String>::new()
        );

        // Deletion fires data and child watches of the node.
        let (_, _, data) = c.get_and_watch_data(&format!("{ch}/x")).await.unwrap();
        let (_, kids) = c.list_and_watch_children(&format!("{ch}/x")).await.unwrap();
        c.delete(&format!("{ch}/x"), None).await.unwrap();
        assert_eq!(
            ready_now(data.changed()).await.unwrap().event_type,
            EventType::NodeDeleted
        );
        assert_eq!(
            ready_now(kids.changed()).await.unwrap().event_type,
            EventType::NodeDeleted
        );
        // A failed read sets no watch.
        assert_eq!(
            c.get_and_watch_data(&format!("{r}/none")).await.err(),
            Some(Error::NoNode)
        );
        assert_eq!(
            c.list_and_watch_children(&format!("{r}/none")).await.err(),
            Some(Error::NoNode)
        );
        c.sync("/").await.unwrap();
        assert_eq!(
            server_watches(&addr, c.session_id().0).await,
            Vec::<String>::new()
        );
    })
    .await;
}

async fn next(w: &mut PersistentWatcher) -> WatchedEvent {
    within(w.changed()).await
}

#[tokio::test]
async fn persistent_watches_keep_firing() {
    on_both(|addr, _| async move {
        let c = connect(&addr).await;
        let r = root(&c, "persistent").await;
        let p = format!("{r}/p");
        let mut node = c.watch(&p, AddWatchMode::Persistent).await.unwrap();
        let mut tree = c
            .watch(&r, AddWatchMode::PersistentRecursive)
            .await
            .unwrap();
        c.create(&p, b"", &PERSISTENT).await.unwrap();
        c.set_data(&p, b"1", None).await.unwrap();
        c.create(&format!("{p}/kid"), b"", &PERSISTENT)
            .await
            .unwrap();
        c.delete(&format!("{p}/kid"), None).await.unwrap();
        c.delete(&p, None).await.unwrap();
        let want_node = [
            (EventType::NodeCreated, p.clone()),
            (EventType::NodeDataChanged, p.clone()),
            (EventType::NodeChildrenChanged, p.clone()),
            (EventType::NodeChildrenChanged, p.clone()),
            (EventType::NodeDeleted, p.clone()),
        ];
        for want in want_node {
            let e = next(&mut node).await;
            assert_eq!((e.event_type, e.path), want);
        }
        // Recursive: every node below, never NodeChildrenChanged.
        let kid = format!("{p}/kid");
        let want_tree = [
            (EventType::NodeCreated, p.clone()),
            (EventType::NodeDataChanged, p.clone()),
            (EventType::NodeCreated, kid.clone()),
            (EventType::NodeDeleted, kid),
            (EventType::NodeDeleted, p.clone()),
        ];
        for want in want_tree {
            let e = next(&mut tree).await;
            assert_eq!((e.event_type, e.path), want);
        }
        assert!(ready_now(node.changed()).await.is_none(), "nothing more");
        // Dropping them removes the server's watches.
        drop(node);
        drop(tree);
        c.sync("/").await.unwrap();
        c.sync("/").await.unwrap();
        assert_eq!(
            server_watches(&addr, c.session_id().0).await,
            Vec::<String>::new()
        );
    })
    .await;
}

#[tokio::test]
async fn dropped_watchers_and_futures_leave_no_server_watch() {
    on_both(|addr, _| async move {
        let c = connect(&addr).await;
        let r = root(&c, "dropped").await;
        let a = format!("{r}/a");
        c.create(&a, b"", &PERSISTENT).await.unwrap();
        let me = c.session_id().0;

        // A watcher dropped before it fired.
        let (_, _, w) = c.get_and_watch_data(&a).await.unwrap();
        assert_eq!(server_watches(&addr, me).await, vec![a.clone()]);
        drop(w);
        c.sync("/").await.unwrap();
        assert_eq!(server_watches(&addr, me).await, Vec::<String>::new());

        // Two watchers on one path: dropping one keeps the server's watch for the other.
        let (_, _, w1) = c.get_and_watch_data(&a).await.unwrap();
        let (_, w2) = c.check_and_watch_stat(&a).await.unwrap();
        drop(w1);
        c.sync("/").await.unwrap();
        assert_eq!(server_watches(&addr, me).await, vec![a.clone()]);
        c.set_data(&a, b"x", None).await.unwrap();
        assert_eq!(
            ready_now(w2.changed()).await.unwrap().event_type,
            EventType::NodeDataChanged
        );

        // Request futures dropped before their reply: one-shot and persistent.
        drop(c.get_and_watch_data(&a));
        drop(c.list_and_watch_children(&a));
        drop(c.watch(&a, AddWatchMode::PersistentRecursive));
        // The first sync's reply comes after theirs, when the removals were written; the
        // second's after the removals were done.
        c.sync("/").await.unwrap();
        c.sync("/").await.unwrap();
        assert_eq!(server_watches(&addr, me).await, Vec::<String>::new());
        // The connection is fine.
        c.check(&a, Some(1)).await.unwrap();
    })
    .await;
}

#[tokio::test]
async fn remove_and_check_watches() {
    on_both(|addr, _| async move {
        let c = connect(&addr).await;
        let r = root(&c, "remove").await;
        let a = format!("{r}/a");
        c.create(&a, b"", &PERSISTENT).await.unwrap();
        assert_eq!(
            c.check_watches(&a, WatchType::Any).await,
            Err(Error::NoWatcher)
        );
        assert_eq!(
            c.remove_watches(&a, WatchType::Data).await,
            Err(Error::NoWatcher)
        );

        let (_, _, data) = c.get_and_watch_data(&a).await.unwrap();
        let (_, child) = c.list_and_watch_children(&a).await.unwrap();
        c.check_watches(&a, WatchType::Data).await.unwrap();
        c.check_watches(&a, WatchType::Children).await.unwrap();
        c.check_watches(&a, WatchType::Any).await.unwrap();
        c.remove_watches(&a, WatchType::Data).await.unwrap();
        assert_eq!(
            ready_now(data.changed()).await.unwrap(),
            WatchedEvent::new(EventType::DataWatchRemoved, a.clone())
        );
        assert_eq!(
            c.check_watches(&a, WatchType::Data).await,
            Err(Error::NoWatcher)
        );
        c.check_watches(&a, WatchType::Children).await.unwrap();
        c.remove_watches(&a, WatchType::Any).await.unwrap();
        assert_eq!(
            ready_now(child.changed()).await.unwrap().event_type,
            EventType::ChildWatchRemoved
        );

        let mut p = c.watch(&a, AddWatchMode::Persistent).await.unwrap();
        c.remove_watches(&a, WatchType::Any).await.unwrap();
        let removed = WatchedEvent::new(EventType::PersistentWatchRemoved, a.clone());
        assert_eq!(next(&mut p).await, removed);
        assert_eq!(next(&mut p).await, removed, "the last event again");
        c.set_data(&a, b"no event", None).await.unwrap();
        assert_eq!(
            server_watches(&addr, c.session_id().0).await,
            Vec::<String>::new()
        );
    })
    .await;
}

/// Every watch kind set, then the connection lost while another client changes things: after
/// the reconnect the one-shot watches report what changed meanwhile (SetWatches with the last
/// zxid), the persistent ones hear Disconnected/SyncConnected and every later change once.
async fn rearmed_after_reconnect(addr: String, _kind: Kind) {
    let proxy = FaultProxy::start(addr.clone()).await.unwrap();
    let c = Client::connector()
        .with_session_timeout(Duration::from_secs(20))
        .connect(&proxy.connect_string())
        .await
        .unwrap();
    let other = connect(&addr).await;
    let r = root(&other, "rearm").await;
    let (d, e, ch, p, rec) = (
        format!("{r}/d"),
        format!("{r}/e"),
        format!("{r}/c"),
        format!("{r}/p"),
        format!("{r}/rec"),
    );
    for path in [&d, &ch, &p, &rec] {
        other.create(path, b"", &PERSISTENT).await.unwrap();
    }
    let (_, _, data) = c.get_and_watch_data(&d).await.unwrap();
    let (_, exist) = c.check_and_watch_stat(&e).await.unwrap();
    let (_, child) = c.list_and_watch_children(&ch).await.unwrap();
    let (_, _, unchanged) = c.get_and_watch_data(&rec).await.unwrap();
    let mut persistent = c.watch(&p, AddWatchMode::Persistent).await.unwrap();
    let mut recursive = c
        .watch(&rec, AddWatchMode::PersistentRecursive)
        .await
        .unwrap();
    let session = c.session_id();

    // Partition: new connections are held, the open one dropped.
    let mut states = c.state_watcher();
    proxy.pause();
    proxy.drop_connections().await;
    assert_eq!(within(states.changed()).await, SessionState::Disconnected);
    other.set_data(&d, b"changed", None).await.unwrap();
    other.create(&e, b"", &PERSISTENT).await.unwrap();
    other
        .create(&format!("{ch}/kid"), b"", &PERSISTENT)
        .await
        .unwrap();
    other.set_data(&p, b"lost", None).await.unwrap();
    proxy.resume();
    assert_eq!(within(states.changed()).await, SessionState::SyncConnected);
    assert_eq!(c.session_id(), session);

    assert_eq!(
        within(data.changed()).await,
        WatchedEvent::new(EventType::NodeDataChanged, d.clone())
    );
    assert_eq!(
        within(exist.changed()).await,
        WatchedEvent::new(EventType::NodeCreated, e.clone())
    );
    assert_eq!(
        within(child.changed()).await,
        WatchedEvent::new(EventType::NodeChildrenChanged, ch.clone())
    );
    for w in [&mut persistent, &mut recursive] {
        assert_eq!(
            next(w).await,
            WatchedEvent::new_session(SessionState::Disconnected)
        );
        assert_eq!(
            next(w).await,
            WatchedEvent::new_session(SessionState::SyncConnected)
        );
    }
    // Re-armed: every later change, once each, in order.
    other.set_data(&p, b"after", None).await.unwrap();
    other
        .create(&format!("{p}/kid"), b"", &PERSISTENT)
        .await
        .unwrap();
    other
        .create(&format!("{rec}/x"), b"", &PERSISTENT)
        .await
        .unwrap();
    other.set_data(&rec, b"last", None).await.unwrap();
    assert_eq!(
        next(&mut persistent).await,
        WatchedEvent::new(EventType::NodeDataChanged, p.clone())
    );
    assert_eq!(
        next(&mut persistent).await,
        WatchedEvent::new(EventType::NodeChildrenChanged, p.clone())
    );
    assert_eq!(
        next(&mut recursive).await,
        WatchedEvent::new(EventType::NodeCreated, format!("{rec}/x"))
    );
    assert_eq!(
        next(&mut recursive).await,
        WatchedEvent::new(EventType::NodeDataChanged, rec.clone())
    );
    // The unchanged node's one-shot watch was re-armed, not fired: it fires now, once.
    assert_eq!(
        within(unchanged.changed()).await,
        WatchedEvent::new(EventType::NodeDataChanged, rec.clone())
    );
    c.sync("/").await.unwrap();
    assert!(
        ready_now(persistent.changed()).await.is_none(),
        "no doubled event"
    );
    assert!(
        ready_now(recursive.changed()).await.is_none(),
        "no doubled event"
    );
    let mut held = server_watches(&addr, session.0).await;
    held.sort();
    assert_eq!(held, [p.clone(), rec.clone()]);
}

#[tokio::test]
async fn every_watch_kind_is_rearmed_after_a_reconnect() {
    on_both(rearmed_after_reconnect).await;
}

/// The bug that started it: after a server restart a persistent watch stayed silent.
#[tokio::test]
async fn persistent_watch_survives_a_server_restart() {
    let dir = TempDir::new().unwrap();
    let config = ServerConfig {
        data_dir: Some(dir.path().to_owned()),
        ..ServerConfig::ephemeral()
    };
    let server = Server::start(config.clone()).await.unwrap();
    let addr = server.addr();
    let c = Client::connector()
        .with_session_timeout(Duration::from_secs(20))
        .connect(&addr.to_string())
        .await
        .unwrap();
    c.create("/keep", b"", &PERSISTENT).await.unwrap();
    let mut w = c.watch("/keep", AddWatchMode::Persistent).await.unwrap();
    let (_, _, oneshot) = c.get_and_watch_data("/keep").await.unwrap();
    let session = c.session_id();
    server.stop().await;
    assert_eq!(
        next(&mut w).await,
        WatchedEvent::new_session(SessionState::Disconnected)
    );
    let server = Server::start(ServerConfig {
        listen: addr,
        ..config
    })
    .await
    .unwrap();
    assert_eq!(
        next(&mut w).await,
        WatchedEvent::new_session(SessionState::SyncConnected)
    );
    assert_eq!(
        c.session_id(),
        session,
        "the same session after the restart"
    );
    let other = connect(&addr.to_string()).await;
    other.set_data("/keep", b"1", None).await.unwrap();
    other.set_data("/keep", b"2", None).await.unwrap();
    for _ in 0..2 {
        assert_eq!(
            next(&mut w).await,
            WatchedEvent::new(EventType::NodeDataChanged, "/keep")
        );
    }
    assert_eq!(
        within(oneshot.changed()).await.event_type,
        EventType::NodeDataChanged
    );
    drop((c, other));
    server.stop().await;
}
