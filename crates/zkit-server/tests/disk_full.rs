//! A real disk-full: the data dir lives on a small tmpfs (we mount it; root only), a client
//! writes until the WAL hits ENOSPC. The failing write gets a connection loss, no acknowledged
//! write is lost, none is half-applied, and once space returns (a filler file is deleted) the
//! server serves writes again — or, if it stopped, restarts cleanly on the same dir.
//!
//! Skipped with a printed reason when not root or when the mount fails, unless `CI` is set.

mod common;

use std::path::Path;
use std::time::Duration;

use common::{Raw, WAIT};
use zkit_proto::{CreateRequest, PathWatchRequest, Request};
use zkit_server::storage::durable::DurableOptions;
use zkit_server::storage::wal::WalOptions;
use zkit_server::storage::WalStorage;
use zkit_server::{Server, ServerConfig};
use zkit_testkit::tmpfs::{is_root, skip_disk_full, Tmpfs};

/// Distinct data per node, so a half-written or mixed-up value shows.
fn value(i: u32) -> Vec<u8> {
    (0..8192u32)
        .map(|j| u8::try_from((i * 31 + j) % 251).unwrap())
        .collect()
}

async fn start(data: &Path) -> Server {
    let opts = DurableOptions {
        wal: WalOptions {
            // Small segments: the next one is pre-allocated often, so ENOSPC comes soon.
            segment_size: 256 * 1024,
            ..WalOptions::default()
        },
        snapshots: zkit_server::storage::snapshotter::SnapshotPolicy {
            snap_count: 1_000_000,
            ..Default::default()
        },
        ..DurableOptions::default()
    };
    let dir = data.to_path_buf();
    let storage = tokio::task::spawn_blocking(move || WalStorage::open_with(dir, opts))
        .await
        .unwrap()
        .expect("open the data dir");
    Server::start_with_storage(ServerConfig::ephemeral(), Box::new(storage))
        .await
        .expect("start on the data dir")
}

/// A new session, or `None` if the server closed the connection instead (it cannot log the
/// session's creation).
async fn session(server: &Server) -> Option<Raw> {
    let mut raw = Raw::connect(server.addr()).await;
    raw.try_handshake().await?;
    Some(raw)
}

/// Creates `/n{i}`: `Some(true)` acknowledged, `None` connection lost.
async fn create(raw: &mut Raw, i: u32) -> Option<bool> {
    let xid = i32::try_from(i).unwrap() + 1;
    raw.send_request(
        xid,
        &Request::Create(CreateRequest {
            path: format!("/n{i}"),
            data: Some(value(i)),
            acl: zkit_core::tree::open_acl(),
            flags: 0,
        }),
    )
    .await;
    let (header, _) = raw.read_reply().await?;
    assert_eq!(header.xid, xid);
    Some(header.err == 0)
}

/// `/n{i}`'s data, or `None` when it does not exist.
async fn read(raw: &mut Raw, i: u32) -> Option<Vec<u8>> {
    raw.send_request(
        1,
        &Request::GetData(PathWatchRequest {
            path: format!("/n{i}"),
            watch: false,
        }),
    )
    .await;
    let (header, body) = raw.read_reply().await.expect("getData reply");
    if header.err != 0 {
        assert_eq!(header.err, zkit_proto::ErrorCode::NoNode as i32);
        return None;
    }
    let len = usize::try_from(i32::from_be_bytes(body[..4].try_into().unwrap())).unwrap();
    Some(body[4..4 + len].to_vec())
}

/// Every acknowledged node has its whole value; the one whose write failed is absent or whole.
async fn check(raw: &mut Raw, acked: &[u32], failed: Option<u32>) {
    for &i in acked {
        assert_eq!(
            read(raw, i).await,
            Some(value(i)),
            "acknowledged /n{i} lost"
        );
    }
    if let Some(i) = failed {
        if let Some(data) = read(raw, i).await {
            assert_eq!(data, value(i), "the failed write /n{i} is half-applied");
        }
    }
}

#[tokio::test]
async fn disk_full_fails_writes_keeps_acknowledged_ones_and_recovers() {
    if !is_root() {
        return skip_disk_full("not root (mounting a tmpfs needs it)");
    }
    let tmp = tempfile::tempdir().unwrap();
    let mount = match Tmpfs::mount(tmp.path(), 6) {
        Ok(mount) => mount,
        Err(reason) => return skip_disk_full(&reason),
    };
    let filler = tmp.path().join("filler");
    // Leave ~1.5 MiB: a few segments' worth.
    std::fs::write(&filler, vec![0u8; 4 << 20 | 512 << 10]).unwrap();
    let data = tmp.path().join("data");

    let server = start(&data).await;
    let mut raw = session(&server)
        .await
        .expect("session before the disk fills");
    let mut acked = Vec::new();
    let mut failed = None;
    // 1000 × 8 KiB is more than the space left: the disk fills well before the end.
    for i in 0..1000 {
        match create(&mut raw, i).await {
            Some(true) => acked.push(i),
            Some(false) => panic!("create /n{i} got an error reply"),
            None => {
                failed = Some(i);
                break;
            }
        }
    }
    let failed = failed.expect("the disk never filled");
    assert!(!acked.is_empty(), "nothing fit before the disk filled");
    eprintln!(
        "disk full after {} acknowledged writes; /n{failed} failed",
        acked.len()
    );

    // Space returns.
    std::fs::remove_file(&filler).unwrap();

    // The server rebuilt from disk after the failure and serves writes again; if the rebuild
    // itself failed on the full disk it stopped, and restarts cleanly on the same dir.
    let server = match tokio::time::timeout(Duration::ZERO, server.stopped()).await {
        Ok(()) => {
            eprintln!("the server stopped on the full disk; restarting it");
            server.stop().await;
            start(&data).await
        }
        Err(_) => server,
    };
    let mut raw = session(&server)
        .await
        .expect("session after space returned");
    check(&mut raw, &acked, Some(failed)).await;
    let more: Vec<u32> = (1000..1010).collect();
    for &i in &more {
        assert_eq!(
            create(&mut raw, i).await,
            Some(true),
            "write after space returned"
        );
    }
    acked.extend(&more);
    server.stop().await;

    // And a restart recovers all of it.
    let server = start(&data).await;
    let mut raw = tokio::time::timeout(WAIT, session(&server))
        .await
        .unwrap()
        .expect("session after restart");
    check(&mut raw, &acked, Some(failed)).await;
    server.stop().await;
    drop(mount);
}
