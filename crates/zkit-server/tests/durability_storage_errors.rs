//! A storage failure while the server runs: the write whose batch failed is not acknowledged
//! (its client's connection is closed instead), the server rebuilds its state from what is on
//! disk and serves again, and what it serves then is exactly what a restart recovers. Needs
//! `--features failpoints`.
#![cfg(feature = "failpoints")]

use std::time::Duration;

use zkit_client::{Acls, Client, CreateMode};
use zkit_server::storage::failpoint;
use zkit_server::{Server, ServerConfig};

fn config(dir: &std::path::Path) -> ServerConfig {
    ServerConfig {
        data_dir: Some(dir.to_path_buf()),
        ..ServerConfig::ephemeral()
    }
}

async fn connect(addr: &str) -> Client {
    Client::connector()
        .with_session_timeout(Duration::from_secs(10))
        .connect(addr)
        .await
        .unwrap()
}

/// Every node under `/` with data and version, for comparing states.
async fn listing(zk: &Client) -> Vec<(String, Vec<u8>, i32)> {
    let mut out = Vec::new();
    let mut children = zk.list_children("/").await.unwrap();
    children.sort();
    for child in children.into_iter().filter(|c| c != "zookeeper") {
        let path = format!("/{child}");
        let (data, stat) = zk.get_data(&path).await.unwrap();
        out.push((path, data, stat.version));
    }
    out
}

/// Runs one failing write with `point` armed; returns whether its node is there afterwards.
async fn failing_write(addr: &str, point: &str, path: &str) -> bool {
    let persistent = CreateMode::Persistent.with_acls(Acls::anyone_all());
    let zk = connect(addr).await;
    fail::cfg(point, "1*return").unwrap();
    let result = zk.create(path, b"lost?", &persistent).await;
    fail::remove(point);
    assert!(
        result.is_err(),
        "a write whose fsync failed was acknowledged: {result:?}"
    );
    drop(zk);
    // The server rebuilt itself and serves again, on new connections.
    let zk = connect(addr).await;
    zk.create(&format!("{path}-after"), b"ok", &persistent)
        .await
        .expect("the server serves writes again after rebuilding");
    zk.check_stat(path).await.unwrap().is_some()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_batch_is_not_acknowledged_and_the_server_rebuilds_from_disk() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(config(dir.path())).await.unwrap();
    let addr = server.addr().to_string();
    let persistent = CreateMode::Persistent.with_acls(Acls::anyone_all());
    let zk = connect(&addr).await;
    zk.create("/before", b"b", &persistent).await.unwrap();
    zk.set_data("/before", b"b2", None).await.unwrap();
    drop(zk);

    // Failing before any byte is written: the write is not on disk, so not in the state.
    assert!(!failing_write(&addr, failpoint::WAL_BEFORE_WRITE, "/w1").await);
    // Failing after the write, before the fsync: the record may be in the log; either way
    // the rebuilt state is what the log holds (checked against a restart below).
    let _ = failing_write(&addr, failpoint::WAL_AFTER_WRITE, "/w2").await;
    // A torn write: half of the batch's bytes.
    assert!(!failing_write(&addr, failpoint::WAL_PARTIAL_WRITE, "/w3").await);

    let zk = connect(&addr).await;
    let served = listing(&zk).await;
    drop(zk);
    assert!(served.contains(&("/before".into(), b"b2".to_vec(), 1)));
    for after in ["/w1-after", "/w2-after", "/w3-after"] {
        assert!(served.iter().any(|(p, _, _)| p == after), "{after} missing");
    }
    server.stop().await;

    let server = Server::start(config(dir.path())).await.unwrap();
    let zk = connect(&server.addr().to_string()).await;
    assert_eq!(
        listing(&zk).await,
        served,
        "restart recovers what was served"
    );
    drop(zk);
    server.stop().await;
}
