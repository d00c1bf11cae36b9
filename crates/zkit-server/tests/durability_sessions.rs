//! Sessions across a restart of a durable server: a client that comes back within its timeout
//! keeps its session and ephemeral node; the ephemeral of a session that does not come back is
//! removed once its timeout has run out after the restart. And a second server on the same data
//! dir refuses to start, saying why.

use std::time::Duration;

use zkit_client::{Acls, Client, CreateMode, EventType};
use zkit_server::{Server, ServerConfig};

fn config(dir: &std::path::Path) -> ServerConfig {
    ServerConfig {
        // Session timeouts clamp to [200 ms, 2 s]: expiry happens within the test's time.
        tick_time: Duration::from_millis(100),
        data_dir: Some(dir.to_path_buf()),
        ..ServerConfig::ephemeral()
    }
}

async fn connect(addr: &str, timeout: Duration) -> Client {
    Client::connector()
        .with_session_timeout(timeout)
        .with_detached()
        .connect(addr)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_survives_restart_and_abandoned_ephemerals_expire() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(config(dir.path())).await.unwrap();
    let addr = server.addr();
    let ephemeral = CreateMode::Ephemeral.with_acls(Acls::anyone_all());
    let persistent = CreateMode::Persistent.with_acls(Acls::anyone_all());

    let keeper = connect(&addr.to_string(), Duration::from_secs(2)).await;
    let leaver = connect(&addr.to_string(), Duration::from_secs(2)).await;
    keeper.create("/p", b"p", &persistent).await.unwrap();
    keeper.create("/p/keeper", b"k", &ephemeral).await.unwrap();
    leaver.create("/p/leaver", b"l", &ephemeral).await.unwrap();
    let session = keeper.session().clone();
    let keeper_id = keeper.session_id();
    let leaver_id = leaver.session_id();
    drop(keeper);
    drop(leaver);
    server.stop().await;

    // Same port, so that the reconnecting client finds it; same data dir.
    let server = Server::start(ServerConfig {
        listen: addr,
        ..config(dir.path())
    })
    .await
    .unwrap();
    let keeper = Client::connector()
        .with_session_timeout(Duration::from_secs(2))
        .with_session(session)
        .connect(&addr.to_string())
        .await
        .expect("the session was restored, so it can be resumed");
    assert_eq!(keeper.session_id(), keeper_id);
    let (_, stat) = keeper.get_data("/p/keeper").await.unwrap();
    assert_eq!(stat.ephemeral_owner, keeper_id.0);
    let (_, stat, watcher) = keeper.get_and_watch_data("/p/leaver").await.unwrap();
    assert_eq!(stat.ephemeral_owner, leaver_id.0);

    // The leaver never comes back: its session expires one timeout (plus a tick) after the
    // restart and its ephemeral goes with it; the keeper's stays.
    let event = tokio::time::timeout(Duration::from_secs(10), watcher.changed())
        .await
        .expect("the abandoned session expires");
    assert_eq!(event.event_type, EventType::NodeDeleted);
    assert!(keeper.check_stat("/p/keeper").await.unwrap().is_some());
    assert_eq!(keeper.list_children("/p").await.unwrap(), vec!["keeper"]);
    drop(keeper);
    server.stop().await;
}

#[tokio::test]
async fn a_second_server_on_the_same_data_dir_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let first = Server::start(config(dir.path())).await.unwrap();
    let err = Server::start(config(dir.path())).await.unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains("is in use by another zkit server")
            && message.contains(&std::process::id().to_string()),
        "{message}"
    );
    first.stop().await;
    // The lock goes with the server.
    let again = Server::start(config(dir.path())).await.unwrap();
    again.stop().await;
}
