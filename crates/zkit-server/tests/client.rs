//! A third-party client (the crates.io `zookeeper-client` crate, an implementation independent
//! of zkit's jute codec) against the embedded server: CRUD, one-shot and persistent watches,
//! ephemerals, sequential nodes; and the wire-level ordering rule that a watch event leaves
//! before the reply of the write that fired it. An interop test, as `compat_clients.rs` is:
//! zkit's own client shares the server's codec, so it could not catch a codec bug on both
//! sides.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::{Raw, WAIT};
use zkit_proto::{PathWatchRequest, Record, Request, SetDataRequest, WatcherEvent};
use zkit_server::{Server, ServerConfig};
use zookeeper_client::{Acls, AddWatchMode, CreateMode, Error as ZkError, EventType};

/// A zookeeper-client session against `addr`.
async fn client(addr: SocketAddr) -> zookeeper_client::Client {
    zookeeper_client::Client::connector()
        .with_session_timeout(Duration::from_secs(10))
        .connect(&addr.to_string())
        .await
        .expect("zookeeper-client session")
}

#[tokio::test]
async fn crud_and_watches_with_zookeeper_client() {
    let server = Server::start(ServerConfig::ephemeral()).await.unwrap();
    let zk = client(server.addr()).await;
    let persistent = CreateMode::Persistent.with_acls(Acls::anyone_all());

    let (stat, _) = zk.create("/app", b"v1", &persistent).await.unwrap();
    assert_eq!(stat.version, 0);
    assert_eq!(stat.data_length, 2);
    assert_eq!(
        zk.create("/app", b"", &persistent).await.unwrap_err(),
        ZkError::NodeExists
    );

    let (data, stat) = zk.get_data("/app").await.unwrap();
    assert_eq!(data, b"v1");
    let stat2 = zk
        .set_data("/app", b"v2", Some(stat.version))
        .await
        .unwrap();
    assert_eq!(stat2.version, 1);
    assert!(stat2.mzxid > stat.mzxid);
    assert_eq!(
        zk.set_data("/app", b"v3", Some(0)).await.unwrap_err(),
        ZkError::BadVersion
    );

    let sequential = CreateMode::PersistentSequential.with_acls(Acls::anyone_all());
    let (_, seq) = zk.create("/app/item-", b"", &sequential).await.unwrap();
    assert_eq!(seq.to_string(), "0000000000");
    let (_, seq) = zk.create("/app/item-", b"", &sequential).await.unwrap();
    assert_eq!(seq.to_string(), "0000000001");
    let mut children = zk.list_children("/app").await.unwrap();
    children.sort();
    assert_eq!(children, ["item-0000000000", "item-0000000001"]);
    assert_eq!(
        zk.delete("/app", None).await.unwrap_err(),
        ZkError::NotEmpty
    );

    // One-shot data watch fired by another session's write.
    let other = client(server.addr()).await;
    let (_, _, watcher) = zk.get_and_watch_data("/app").await.unwrap();
    other.set_data("/app", b"v4", None).await.unwrap();
    let event = tokio::time::timeout(WAIT, watcher.changed()).await.unwrap();
    assert_eq!(event.event_type, EventType::NodeDataChanged);
    assert_eq!(event.path, "/app");

    // Persistent recursive watch sees creates and deletes below, in order.
    let mut recursive = zk
        .watch("/app", AddWatchMode::PersistentRecursive)
        .await
        .unwrap();
    other.create("/app/x", b"", &persistent).await.unwrap();
    other.delete("/app/x", None).await.unwrap();
    let first = tokio::time::timeout(WAIT, recursive.changed())
        .await
        .unwrap();
    let second = tokio::time::timeout(WAIT, recursive.changed())
        .await
        .unwrap();
    assert_eq!(
        (first.event_type, first.path.as_str()),
        (EventType::NodeCreated, "/app/x")
    );
    assert_eq!(
        (second.event_type, second.path.as_str()),
        (EventType::NodeDeleted, "/app/x")
    );

    // An ephemeral dies with its session's close.
    let ephemeral = CreateMode::Ephemeral.with_acls(Acls::anyone_all());
    other.create("/eph", b"", &ephemeral).await.unwrap();
    assert!(zk.check_stat("/eph").await.unwrap().is_some());
    let (_, exists_watch) = zk.check_and_watch_stat("/eph").await.unwrap();
    let mut state = other.state_watcher();
    drop(other);
    tokio::time::timeout(WAIT, async {
        while !state.changed().await.is_terminated() {}
    })
    .await
    .expect("session closed");
    let event = tokio::time::timeout(WAIT, exists_watch.changed())
        .await
        .unwrap();
    assert_eq!(event.event_type, EventType::NodeDeleted);
    assert_eq!(zk.check_stat("/eph").await.unwrap(), None);

    // TTL nodes are accepted (extended types are on in ServerConfig::ephemeral()).
    let ttl = CreateMode::Persistent
        .with_acls(Acls::anyone_all())
        .with_ttl(Duration::from_secs(60));
    zk.create("/ttl", b"", &ttl).await.unwrap();

    drop(zk);
    server.stop().await;
}

/// ZooKeeper's ordering rule, checked on the wire: the event for a watched node is written
/// before the reply to the write (on the same connection) that triggered it.
#[tokio::test]
async fn event_precedes_reply_of_triggering_write() {
    let server = Server::start(ServerConfig::ephemeral()).await.unwrap();
    let (mut raw, _) = Raw::session(server.addr()).await;
    raw.send_request(
        1,
        &Request::GetData(PathWatchRequest {
            path: "/".into(),
            watch: true,
        }),
    )
    .await;
    let (header, _) = raw.read_reply().await.unwrap();
    assert_eq!((header.xid, header.err), (1, 0));
    raw.send_request(
        2,
        &Request::SetData(SetDataRequest {
            path: "/".into(),
            data: Some(b"x".to_vec()),
            version: -1,
        }),
    )
    .await;
    let (event_header, body) = raw.read_reply().await.unwrap();
    assert_eq!(event_header.xid, -1, "the event comes first");
    let event = WatcherEvent::decode_from(&body).unwrap();
    assert_eq!((event.event_type, event.path.as_str()), (3, "/"));
    let (reply, _) = raw.read_reply().await.unwrap();
    assert_eq!((reply.xid, reply.err), (2, 0));
    server.stop().await;
}
