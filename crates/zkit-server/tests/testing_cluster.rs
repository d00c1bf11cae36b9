//! `zkit_server::testing::TestingCluster` does what its docs promise, seen by a real client
//! (the `zookeeper-client` crate) over TCP: members are independent, ports survive stop and
//! restart, restart keeps the data and the sessions, dropped connections keep the session,
//! a pause stops answering without closing, and failing over to another member expires the
//! session (that member never knew it).

use std::time::Duration;

use zkit_client as zk;
use zkit_server::testing::TestingCluster;

const LIMIT: Duration = Duration::from_secs(20);

async fn connect(addr: &str, timeout: Duration) -> zk::Client {
    zk::Client::connector()
        .with_session_timeout(timeout)
        .connect(addr)
        .await
        .expect("client connects")
}

fn persistent() -> zk::CreateOptions<'static> {
    zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all())
}

/// Waits (bounded) for the client's state to become `want`.
async fn state_becomes(client: &zk::Client, want: zk::SessionState) {
    let mut watcher = client.state_watcher();
    tokio::time::timeout(LIMIT, async {
        let mut state = watcher.state();
        while state != want {
            state = watcher.changed().await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("client state never became {want:?}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_are_independent_and_restart_keeps_port_data_and_sessions() {
    let cluster = TestingCluster::start(2).await.expect("cluster");
    assert_eq!(cluster.len(), 2);
    let addrs: Vec<String> = (0..2).map(|i| cluster.addr(i).to_string()).collect();
    assert_eq!(cluster.connect_string(), addrs.join(","));

    let first = connect(&addrs[0], Duration::from_secs(10)).await;
    first
        .create("/only-on-0", b"x", &persistent())
        .await
        .unwrap();
    let second = connect(&addrs[1], Duration::from_secs(10)).await;
    assert_eq!(
        second.check_stat("/only-on-0").await.unwrap(),
        None,
        "members do not replicate"
    );
    assert_eq!(cluster.connected_members(), vec![0, 1]);

    // Stop member 0: the client loses its connection, the port refuses service.
    let session = first.session_id();
    cluster.stop(0).await;
    assert!(!cluster.is_running(0));
    state_becomes(&first, zk::SessionState::Disconnected).await;
    let refused = zk::Client::connector()
        .with_session_timeout(Duration::from_secs(2))
        .connect(&addrs[0])
        .await;
    assert!(refused.is_err(), "a stopped member answers nobody");

    // Restart behind the same port: the tree and the session are back.
    cluster.restart(0).await.expect("restart");
    assert!(cluster.is_running(0));
    state_becomes(&first, zk::SessionState::SyncConnected).await;
    assert_eq!(
        first.session_id(),
        session,
        "the session survived the restart"
    );
    let (data, _) = first.get_data("/only-on-0").await.unwrap();
    assert_eq!(data, b"x");
    let data_dir = cluster.data_dir(0).expect("durable").to_path_buf();
    assert!(data_dir.exists());
    cluster.shutdown().await;
    assert!(!data_dir.exists(), "shutdown removes the data directories");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_connections_keep_the_session_and_a_pause_expires_it() {
    let cluster = TestingCluster::start(1).await.expect("cluster");
    let addr = cluster.addr(0).to_string();
    let client = connect(&addr, Duration::from_secs(10)).await;
    let ephemeral = zk::CreateMode::Ephemeral.with_acls(zk::Acls::anyone_all());
    client.create("/mine", b"", &ephemeral).await.unwrap();
    let session = client.session_id();

    // Subscribed before the drop: the client may notice it and reconnect before this task
    // looks, and the state channel keeps only the newest state, so a change of any kind is
    // the sign the connection went (Disconnected then SyncConnected may arrive as one).
    let mut watcher = client.state_watcher();
    assert_eq!(watcher.state(), zk::SessionState::SyncConnected);
    cluster.drop_connections(0).await;
    tokio::time::timeout(LIMIT, watcher.changed())
        .await
        .expect("the client noticed the dropped connection");
    state_becomes(&client, zk::SessionState::SyncConnected).await;
    assert_eq!(client.session_id(), session);
    assert!(client.check_stat("/mine").await.unwrap().is_some());

    // A paused member holds the connection open but answers nothing: the client gives up on
    // it by itself, and after longer than the session timeout the member expires the session.
    let short = connect(&addr, Duration::from_millis(1500)).await;
    short.create("/short", b"", &ephemeral).await.unwrap();
    cluster.pause(0);
    state_becomes(&short, zk::SessionState::Disconnected).await;
    assert!(cluster.open_connections(0) >= 1, "nothing was closed");
    // Long enough for the member's own clock to expire the session once it runs requests again.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    cluster.resume(0);
    state_becomes(&short, zk::SessionState::Expired).await;
    // The long session (10 s) survived the same pause.
    state_becomes(&client, zk::SessionState::SyncConnected).await;
    assert_eq!(client.session_id(), session);
    let checker = connect(&addr, Duration::from_secs(10)).await;
    assert!(checker.check_stat("/short").await.unwrap().is_none());
    assert!(checker.check_stat("/mine").await.unwrap().is_some());
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_over_to_another_member_expires_the_session() {
    let cluster = TestingCluster::start(2).await.expect("cluster");
    let client = connect(&cluster.connect_string(), Duration::from_secs(4)).await;
    let on = cluster.connected_members();
    assert_eq!(on.len(), 1, "one connection: {on:?}");
    let other = 1 - on[0];
    // ZooKeeper servers refuse a client whose last seen zxid is ahead of theirs
    // (ZooKeeperServer.processConnectRequest); make the other member's history longer so that
    // it answers, as a member of a busy deployment would.
    let busy = connect(&cluster.addr(other).to_string(), Duration::from_secs(4)).await;
    for i in 0..5 {
        busy.create(&format!("/busy-{i}"), b"", &persistent())
            .await
            .unwrap();
    }
    drop(busy);
    cluster.stop(on[0]).await;
    // The client moves to the other member, which does not know the session.
    state_becomes(&client, zk::SessionState::Expired).await;
    let fresh = connect(&cluster.connect_string(), Duration::from_secs(4)).await;
    fresh.create("/after", b"", &persistent()).await.unwrap();
    assert_eq!(cluster.connected_members(), vec![other]);
    cluster.shutdown().await;
}
