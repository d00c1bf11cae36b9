//! A real disk-full: the bookie's dir lives on a small tmpfs (we mount it; root only). A client
//! adds until the journal write hits ENOSPC: that add fails (`IoError`), the bookie turns
//! read-only (adds `ReadOnly`, reads still served, registered under read-only), nothing
//! acknowledged is lost; once space returns (a filler file is deleted) it turns writable by
//! itself and takes adds again; a restart recovers all of it.
//!
//! Skipped with a printed reason when not root or when the mount fails, unless `CI` is set.

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use common::{client, key, wait_until, WAIT};
use zkit_bookie::protocol::entry::{DigestType, Digester, EntryHeader};
use zkit_bookie::protocol::Status;
use zkit_bookie::storage::{FileStorageOptions, FsyncMode};
use zkit_bookie::{Bookie, BookieConfig, ClientError, MemoryRegistration};
use zkit_testkit::tmpfs::{is_root, skip_disk_full, Tmpfs};

fn entry(entry_id: i64) -> Bytes {
    let payload: Vec<u8> = (0..8192u32)
        .map(|j| ((entry_id as u32).wrapping_mul(31).wrapping_add(j) % 251) as u8)
        .collect();
    Digester::new(DigestType::Crc32c, common::PASSWORD).encode(
        EntryHeader {
            ledger_id: 1,
            entry_id,
            lac: entry_id - 1,
            length: 0,
        },
        &payload,
    )
}

fn config(dir: &Path, port: u16) -> BookieConfig {
    let mut c = BookieConfig::new(format!("127.0.0.1:{port}").parse().unwrap(), dir);
    c.storage = FileStorageOptions {
        fsync: FsyncMode::Always,
        ..FileStorageOptions::default()
    };
    // Read-only on ENOSPC itself (no low mark), writable again with 1 MiB free.
    c.min_free_bytes = 0;
    c.writable_free_bytes = 1 << 20;
    c.disk_check_interval = Duration::from_millis(50);
    c
}

#[tokio::test]
async fn disk_full_turns_read_only_keeps_acknowledged_entries_and_recovers() {
    if !is_root() {
        return skip_disk_full("not root (mounting a tmpfs needs it)");
    }
    let tmp = tempfile::tempdir().unwrap();
    let mount = match Tmpfs::mount(tmp.path(), 8) {
        Ok(m) => m,
        Err(reason) => return skip_disk_full(&reason),
    };
    let filler = tmp.path().join("filler");
    // Leave ~1.5 MiB.
    std::fs::write(&filler, vec![0u8; 6 << 20 | 512 << 10]).unwrap();
    let data = tmp.path().join("bookie");
    let reg = Arc::new(MemoryRegistration::new());
    let bookie = Bookie::start(config(&data, 0), reg.clone()).await.unwrap();
    let id = bookie.bookie_id().to_string();
    let port = bookie.addr().port();
    let c = client(bookie.addr()).await;

    let mut acked = Vec::new();
    let mut failed = None;
    // 1000 × 8 KiB (twice: journal and entry log) is far more than fits.
    for e in 0..1000 {
        match c.add(1, e, key(), false, entry(e)).await {
            Ok(()) => acked.push(e),
            Err(ClientError::Status(Status::IoError)) => {
                failed = Some(e);
                break;
            }
            Err(other) => panic!("add {e}: {other}"),
        }
    }
    let failed = failed.expect("the disk never filled");
    assert!(!acked.is_empty(), "nothing fit before the disk filled");
    eprintln!("disk full after {} adds; add {failed} failed", acked.len());

    assert!(bookie.is_read_only(), "not read-only after ENOSPC");
    assert_eq!(
        c.add(1, failed, key(), false, entry(failed)).await,
        Err(ClientError::Status(Status::ReadOnly))
    );
    wait_until("read-only registration", || {
        reg.read_only() == vec![id.clone()]
    })
    .await;
    for &e in &acked {
        assert_eq!(c.read(1, e, None).await.unwrap(), entry(e), "entry {e}");
    }
    assert_eq!(
        c.read(1, failed, None).await,
        Err(ClientError::Status(Status::NoEntry)),
        "the failed add is readable"
    );
    assert!(c.info().await.unwrap().read_only);

    // Space returns: writable again by itself.
    std::fs::remove_file(&filler).unwrap();
    let mut mode = bookie.watch_read_only();
    tokio::time::timeout(WAIT, mode.wait_for(|ro| !ro))
        .await
        .expect("writable again once space returned")
        .unwrap();
    wait_until("writable registration", || {
        reg.available() == vec![id.clone()]
    })
    .await;
    for e in failed..failed + 10 {
        c.add(1, e, key(), false, entry(e)).await.unwrap();
        acked.push(e);
    }
    c.close();
    bookie.stop().await;

    // A restart recovers every acknowledged entry.
    let bookie = Bookie::start(config(&data, port), reg.clone())
        .await
        .unwrap();
    let c = client(bookie.addr()).await;
    for &e in &acked {
        assert_eq!(
            c.read(1, e, None).await.unwrap(),
            entry(e),
            "entry {e} after restart"
        );
    }
    c.close();
    bookie.stop().await;
    drop(mount);
}
