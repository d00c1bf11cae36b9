//! How many snapshots a durable server keeps (`ServerConfig::snap_retain_count`, zoo.cfg's
//! `autopurge.snapRetainCount`): after many snapshots and a graceful stop, exactly that many
//! are left, and every write comes back after a restart.

use zkit_client::{Acls, Client, CreateMode};
use zkit_server::{Server, ServerConfig};

fn config(dir: &std::path::Path, retain: usize) -> ServerConfig {
    ServerConfig {
        data_dir: Some(dir.to_path_buf()),
        // A snapshot every 20 txns, whatever the tree's size: many snapshots in a short test.
        snap_count: 20,
        snap_log_percent: 0,
        snap_retain_count: retain,
        ..ServerConfig::ephemeral()
    }
}

/// The snapshot files in `dir/snap`, by name.
fn snapshots(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir.join("snap"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("snap-") && !n.ends_with(".tmp"))
        .collect();
    names.sort();
    names
}

async fn keeps(retain: usize) {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(config(dir.path(), retain)).await.unwrap();
    let client = Client::connect(&server.addr().to_string()).await.unwrap();
    let mode = CreateMode::Persistent.with_acls(Acls::anyone_all());
    client.create("/r", b"", &mode).await.unwrap();
    // 600 txns: far more snapshots are due than are kept, however many of them a snapshot
    // still being written makes the policy skip.
    for i in 0..600 {
        client
            .create(&format!("/r/n{i:04}"), b"v", &mode)
            .await
            .unwrap();
    }
    drop(client);
    // A graceful stop takes a last snapshot and prunes after it.
    server.stop().await;
    let kept = snapshots(dir.path());
    assert_eq!(kept.len(), retain, "{kept:?}");

    let server = Server::start(config(dir.path(), retain)).await.unwrap();
    let client = Client::connect(&server.addr().to_string()).await.unwrap();
    assert_eq!(client.list_children("/r").await.unwrap().len(), 600);
    drop(client);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_keeps_three_snapshots() {
    assert_eq!(ServerConfig::default().snap_retain_count, 3);
    keeps(ServerConfig::default().snap_retain_count).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_keeps_as_many_snapshots_as_it_is_told() {
    keeps(7).await;
}
