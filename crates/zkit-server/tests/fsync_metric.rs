//! The fsync histogram of `/metrics` counts the time a write waits for the disk, also when the
//! pipeline writes and fdatasyncs a lone write itself (the idle-log path, which a synchronous
//! client always takes). Needs `--features failpoints`: a fail point makes each fdatasync last
//! 20 ms longer, so the histogram's sum must grow by at least that much per write.
#![cfg(feature = "failpoints")]

mod common;

use std::net::SocketAddr;

use common::{client, http_get};
use zkit_client::{Acls, CreateMode};
use zkit_server::storage::failpoint;
use zkit_server::{Server, ServerConfig};

async fn fsync_histogram(admin: SocketAddr) -> (f64, u64) {
    let (_, out) = http_get(admin, "/metrics").await;
    let value = |name: &str| {
        out.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
            .unwrap_or_else(|| panic!("/metrics lacks {name}:\n{out}"))
            .to_string()
    };
    (
        value("zkit_fsync_latency_seconds_sum").parse().unwrap(),
        value("zkit_fsync_latency_seconds_count").parse().unwrap(),
    )
}

#[tokio::test]
async fn the_fsync_histogram_counts_inline_fdatasyncs() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(ServerConfig {
        admin_listen: Some("127.0.0.1:0".parse().unwrap()),
        data_dir: Some(dir.path().to_path_buf()),
        ..ServerConfig::ephemeral()
    })
    .await
    .unwrap();
    let admin = server.config().admin_listen.expect("bound admin address");
    let zk = client(server.addr()).await;
    let (sum_before, count_before) = fsync_histogram(admin).await;

    fail::cfg(failpoint::WAL_AFTER_WRITE, "sleep(20)").unwrap();
    const WRITES: u64 = 5;
    for i in 0..WRITES {
        // One at a time: each finds the log idle and is fdatasynced inline.
        zk.create(
            &format!("/f{i}"),
            b"x",
            &CreateMode::Persistent.with_acls(Acls::anyone_all()),
        )
        .await
        .unwrap();
    }
    fail::remove(failpoint::WAL_AFTER_WRITE);

    let (sum, count) = fsync_histogram(admin).await;
    assert!(count >= count_before + WRITES, "{count_before} -> {count}");
    let added = sum - sum_before;
    assert!(
        added >= 0.020 * WRITES as f64,
        "{WRITES} writes that each waited 20 ms for the disk added {added} s to the histogram"
    );
    drop(zk);
    server.stop().await;
}
