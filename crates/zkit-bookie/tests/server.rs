//! The bookie over TCP: pipelined and batched adds and reads, fencing, master keys, long polls, listing,
//! read-only mode and its registration, garbage-sending clients beside a healthy writer,
//! `/metrics`, and restarts on real files (fence and entries survive; cookie checks).

mod common;

use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, BytesMut};
use common::*;
use futures::future::join_all;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use zkit_bookie::cookie::CookieError;
use zkit_bookie::protocol::entry::master_key;
use zkit_bookie::protocol::{self, Status};
use zkit_bookie::storage::{FileStorageOptions, FsyncMode};
use zkit_bookie::{Bookie, BookieConfig, BookieError, ClientError, MemoryRegistration};

#[tokio::test]
async fn pipelined_adds_are_all_acknowledged_and_readable() {
    let (bookie, _, _) = memory_bookie(|_| {}).await;
    let c = client(bookie.addr()).await;
    let adds = (0..500).map(|e| c.add(1, e, key(), false, entry(1, e)));
    for r in join_all(adds).await {
        r.unwrap();
    }
    let reads = (0..500).map(|e| c.read(1, e, None));
    for (e, r) in join_all(reads).await.into_iter().enumerate() {
        assert_eq!(r.unwrap(), entry(1, e as i64));
    }
    assert_eq!(c.read_lac(1).await.unwrap(), (498, 499));
    assert_eq!(
        c.read(1, 500, None).await,
        Err(ClientError::Status(Status::NoEntry))
    );
    assert_eq!(
        c.read(2, 0, None).await,
        Err(ClientError::Status(Status::NoLedger))
    );
    let info = c.info().await.unwrap();
    assert_eq!(
        (info.ledgers, info.entries, info.read_only),
        (1, 500, false)
    );
    bookie.stop().await;
}

#[tokio::test]
async fn batched_adds_each_get_their_own_answer_and_leave_unpolled() {
    let (bookie, _, _) = memory_bookie(|_| {}).await;
    let c = client(bookie.addr()).await;
    // Sent when `add_many` returns, even if nobody polls the answers.
    drop(c.add_many(3, key(), false, (0..50).map(|e| (e, entry(3, e))).collect()));
    let batch = c.add_many(
        1,
        key(),
        false,
        (0..300).map(|e| (e, entry(1, e))).collect(),
    );
    assert_eq!(batch.len(), 300);
    for r in join_all(batch).await {
        r.unwrap();
    }
    // A batch with the wrong key is refused entry by entry and changes nothing.
    let wrong = c.add_many(
        1,
        master_key(b"wrong"),
        false,
        (300..305).map(|e| (e, entry(1, e))).collect(),
    );
    for r in join_all(wrong).await {
        assert_eq!(r, Err(ClientError::Status(Status::Unauthorized)));
    }
    let reads = (0..300).map(|e| c.read(1, e, None));
    for (e, r) in join_all(reads).await.into_iter().enumerate() {
        assert_eq!(r.unwrap(), entry(1, e as i64));
    }
    assert_eq!(
        c.read(1, 300, None).await,
        Err(ClientError::Status(Status::NoEntry))
    );
    // The unpolled batch arrived (requests on one connection are answered, not lost).
    let unpolled = async {
        loop {
            match c.read(3, 49, None).await {
                Ok(e) => break e,
                Err(ClientError::Status(Status::NoEntry | Status::NoLedger)) => {
                    tokio::task::yield_now().await
                }
                Err(e) => panic!("reading the unpolled batch: {e}"),
            }
        }
    };
    let last = tokio::time::timeout(Duration::from_secs(10), unpolled)
        .await
        .expect("the unpolled batch never arrived");
    assert_eq!(last, entry(3, 49));
    bookie.stop().await;
}

#[tokio::test]
async fn fencing_refuses_the_old_writer_and_keys_are_checked() {
    let (bookie, _, _) = memory_bookie(|_| {}).await;
    let writer = client(bookie.addr()).await;
    let recovery = client(bookie.addr()).await;
    for e in 0..3 {
        writer.add(7, e, key(), false, entry(7, e)).await.unwrap();
    }
    assert_eq!(
        writer
            .add(7, 3, master_key(b"wrong"), false, entry(7, 3))
            .await,
        Err(ClientError::Status(Status::Unauthorized))
    );
    assert_eq!(
        recovery.read(7, 0, Some(master_key(b"wrong"))).await,
        Err(ClientError::Status(Status::Unauthorized))
    );
    // A fence-and-read (recovery read) returns the entry and fences.
    assert_eq!(recovery.read(7, 2, Some(key())).await.unwrap(), entry(7, 2));
    assert_eq!(
        writer.add(7, 3, key(), false, entry(7, 3)).await,
        Err(ClientError::Status(Status::Fenced))
    );
    // Recovery adds still go in.
    recovery.add(7, 3, key(), true, entry(7, 3)).await.unwrap();
    assert_eq!(recovery.read(7, 3, None).await.unwrap(), entry(7, 3));
    // Fencing a ledger the bookie never saw creates it fenced.
    recovery.fence(8, key()).await.unwrap();
    assert_eq!(
        writer.add(8, 0, key(), false, entry(8, 0)).await,
        Err(ClientError::Status(Status::Fenced))
    );
    assert_eq!(
        recovery.read(8, 0, Some(key())).await,
        Err(ClientError::Status(Status::NoEntry))
    );
    assert_eq!(recovery.list_ledgers().await.unwrap(), vec![7, 8]);
    bookie.stop().await;
}

#[tokio::test]
async fn long_poll_waits_for_the_lac_to_pass_and_answers_out_of_order() {
    let (bookie, _, _) = memory_bookie(|_| {}).await;
    let c = client(bookie.addr()).await;
    c.add(3, 0, key(), false, entry(3, 0)).await.unwrap();
    // LAC is -1 (entry 0 carries LAC -1): a poll for LAC > -1 waits, on the same connection
    // as the adds that follow; their answers overtake it.
    let poll = {
        let c = c.clone();
        tokio::spawn(async move { c.long_poll_lac(3, -1, Duration::from_secs(30)).await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(
        !poll.is_finished(),
        "long poll answered before the LAC moved"
    );
    c.add(3, 1, key(), false, entry(3, 1)).await.unwrap();
    let (lac, e) = tokio::time::timeout(WAIT, poll)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(lac, 0);
    assert_eq!(e, Some(entry(3, 0)));
    // Nothing new: the poll times out with the LAC unchanged.
    let (lac, e) = c
        .long_poll_lac(3, 0, Duration::from_millis(100))
        .await
        .unwrap();
    assert_eq!((lac, e), (0, None));
    bookie.stop().await;
}

#[tokio::test]
async fn read_only_rejects_adds_serves_reads_and_moves_the_registration() {
    let (bookie, storage, reg) = memory_bookie(|c| {
        c.min_free_bytes = 1000;
        c.writable_free_bytes = 5000;
        c.disk_check_interval = Duration::from_millis(20);
    })
    .await;
    let id = bookie.bookie_id().to_string();
    assert_eq!(reg.available(), vec![id.clone()]);
    let c = client(bookie.addr()).await;
    c.add(1, 0, key(), false, entry(1, 0)).await.unwrap();

    // A write fails as on a full disk: the add gets IoError, the bookie turns read-only.
    storage.set_full(true);
    storage.set_free_bytes(2000);
    assert_eq!(
        c.add(1, 1, key(), false, entry(1, 1)).await,
        Err(ClientError::Status(Status::IoError))
    );
    assert!(bookie.is_read_only());
    assert_eq!(
        c.add(1, 1, key(), false, entry(1, 1)).await,
        Err(ClientError::Status(Status::ReadOnly))
    );
    assert_eq!(c.read(1, 0, None).await.unwrap(), entry(1, 0));
    assert!(c.info().await.unwrap().read_only);
    wait_until("read-only registration", || {
        reg.read_only() == vec![id.clone()]
    })
    .await;
    assert!(reg.available().is_empty());

    // Space between the two marks: still read-only (no flapping).
    storage.set_full(false);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(bookie.is_read_only());
    // Space back above the high mark: writable again.
    storage.set_free_bytes(10_000);
    let mut mode = bookie.watch_read_only();
    tokio::time::timeout(WAIT, mode.wait_for(|ro| !ro))
        .await
        .unwrap()
        .unwrap();
    c.add(1, 1, key(), false, entry(1, 1)).await.unwrap();
    wait_until("writable registration", || {
        reg.available() == vec![id.clone()]
    })
    .await;
    assert!(reg.read_only().is_empty());

    // Free space under the low mark: read-only without any failed write.
    storage.set_free_bytes(500);
    tokio::time::timeout(WAIT, mode.wait_for(|ro| *ro))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        c.add(1, 2, key(), false, entry(1, 2)).await,
        Err(ClientError::Status(Status::ReadOnly))
    );
    storage.set_free_bytes(10_000);
    tokio::time::timeout(WAIT, mode.wait_for(|ro| !ro))
        .await
        .unwrap()
        .unwrap();

    // Forced by an operator.
    bookie.force_read_only(true);
    assert_eq!(
        c.add(1, 2, key(), false, entry(1, 2)).await,
        Err(ClientError::Status(Status::ReadOnly))
    );
    bookie.force_read_only(false);
    c.add(1, 2, key(), false, entry(1, 2)).await.unwrap();
    bookie.stop().await;
    assert!(reg.available().is_empty() && reg.read_only().is_empty());
}

/// Sends raw bytes; returns what came back until the bookie closed (or a bound passed).
async fn garbage(addr: std::net::SocketAddr, bytes: Vec<u8>) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let _ = s.write_all(&bytes).await;
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(2), s.read_to_end(&mut out)).await;
    out
}

fn frame(body: &[u8]) -> Vec<u8> {
    let mut b = BytesMut::new();
    b.put_u32(body.len() as u32);
    b.put_slice(body);
    b.to_vec()
}

#[tokio::test]
async fn garbage_clients_beside_a_healthy_writer_change_nothing() {
    let (bookie, _, _) = memory_bookie(|_| {}).await;
    let addr = bookie.addr();
    let writer = client(addr).await;
    let healthy = tokio::spawn(async move {
        for e in 0..300 {
            writer.add(5, e, key(), false, entry(5, e)).await.unwrap();
        }
        writer
    });
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut noise = |n: usize| {
        (0..n)
            .map(|_| {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                rng as u8
            })
            .collect::<Vec<u8>>()
    };
    let mut bad_add = BytesMut::new();
    bad_add.put_u8(protocol::VERSION);
    bad_add.put_u8(1);
    bad_add.put_u64(77);
    bad_add.put_i64(5); // ledger 5, the healthy writer's
    bad_add.put_i64(1000);
    bad_add.put_u16(0);
    bad_add.put_slice(&key());
    bad_add.put_u32(2);
    bad_add.put_slice(b"xx"); // too short for an entry header
    let attempts = vec![
        noise(4096),
        u32::MAX.to_be_bytes().to_vec(), // frame over the limit
        frame(&[9, 1, 0, 0, 0, 0, 0, 0, 0, 1]), // version 9
        frame(&[1]),                     // body shorter than its header
        frame(&bad_add),
        [frame(&[1, 200, 0, 0, 0, 0, 0, 0, 0, 9]), noise(100)].concat(), // unknown op, then noise
    ];
    let answers = join_all(attempts.into_iter().map(|b| garbage(addr, b))).await;
    // The bad add inside a sound frame is answered BadRequest with its request id.
    let mut resp = BytesMut::from(&answers[4][..]);
    let r = protocol::decode_response(&mut resp, protocol::DEFAULT_MAX_FRAME)
        .unwrap()
        .expect("an answer to the bad add");
    assert_eq!((r.id, r.result), (77, Err(Status::BadRequest)));
    // The oversized frame is answered TooLarge, then the connection is closed.
    let mut resp = BytesMut::from(&answers[1][..]);
    let r = protocol::decode_response(&mut resp, protocol::DEFAULT_MAX_FRAME)
        .unwrap()
        .unwrap();
    assert_eq!(r.result, Err(Status::TooLarge));

    let writer = tokio::time::timeout(WAIT, healthy).await.unwrap().unwrap();
    for e in 0..300 {
        assert_eq!(writer.read(5, e, None).await.unwrap(), entry(5, e));
    }
    assert_eq!(writer.read_lac(5).await.unwrap(), (298, 299));
    assert!(bookie.metrics_text().contains("bookie_bad_requests_total"));
    bookie.stop().await;
}

#[tokio::test]
async fn metrics_are_served_over_http() {
    let (bookie, _, _) = memory_bookie(|c| c.metrics = Some(any_port())).await;
    let c = client(bookie.addr()).await;
    for e in 0..10 {
        c.add(1, e, key(), false, entry(1, e)).await.unwrap();
    }
    let body = get_metrics(bookie.metrics_addr().unwrap()).await;
    for line in [
        "bookie_adds_total 10",
        "bookie_add_latency_seconds_count 10",
        "bookie_journal_fsync_seconds_count",
        "bookie_ledgers 1",
        "bookie_entries 10",
        "bookie_read_only 0",
        "bookie_disk_free_bytes",
    ] {
        assert!(body.contains(line), "missing {line:?} in\n{body}");
    }
    bookie.stop().await;
}

fn file_config(dir: &std::path::Path, port: u16) -> BookieConfig {
    let mut c = BookieConfig::new(format!("127.0.0.1:{port}").parse().unwrap(), dir);
    c.storage = FileStorageOptions {
        fsync: FsyncMode::Always,
        ..FileStorageOptions::default()
    };
    c.min_free_bytes = 0;
    c.writable_free_bytes = 0;
    c
}

#[tokio::test]
async fn restart_on_files_keeps_entries_and_fence_and_checks_the_cookie() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let reg = Arc::new(MemoryRegistration::new());
    let bookie = Bookie::start(file_config(&data, 0), reg.clone())
        .await
        .unwrap();
    let port = bookie.addr().port();
    let c = client(bookie.addr()).await;
    for e in 0..20 {
        c.add(1, e, key(), false, entry(1, e)).await.unwrap();
    }
    c.fence(1, key()).await.unwrap();
    assert!(bookie
        .metrics_text()
        .contains("bookie_journal_fsync_seconds_count"));
    // Halted, not stopped: no final checkpoint (the journal replays).
    drop(c);
    bookie.halt().await;

    let bookie = Bookie::start(file_config(&data, port), reg.clone())
        .await
        .expect("restart on the same dir and address");
    let c = client(bookie.addr()).await;
    for e in 0..20 {
        assert_eq!(c.read(1, e, None).await.unwrap(), entry(1, e));
    }
    assert_eq!(
        c.add(1, 20, key(), false, entry(1, 20)).await,
        Err(ClientError::Status(Status::Fenced)),
        "fence lost over a restart"
    );
    bookie.stop().await;

    // Another bookie id on this dir: the dir's cookie names the first bookie.
    let mut other = file_config(&data, 0);
    other.bookie_id = Some("127.0.0.1:1".into());
    match Bookie::start(other, reg.clone()).await {
        Err(BookieError::Cookie(CookieError::Mismatch { field, .. })) => {
            assert_eq!(field, "bookieHost")
        }
        r => panic!("swapped dir accepted: {r:?}"),
    }
    // The dir wiped: the metadata store still has the cookie.
    std::fs::remove_dir_all(&data).unwrap();
    match Bookie::start(file_config(&data, port), reg.clone()).await {
        Err(BookieError::Cookie(CookieError::MissingLocal(d))) => {
            assert!(d.ends_with("data"), "{d:?}")
        }
        r => panic!("wiped dir accepted: {r:?}"),
    }
    assert!(reg.available().is_empty(), "a refused bookie registered");
}

#[tokio::test]
async fn the_garbage_collector_deletes_ledgers_whose_metadata_is_gone() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let reg = Arc::new(MemoryRegistration::new());
    let config = |port| {
        let mut c = file_config(&data, port);
        c.storage.entry_log_size = 4096;
        c.gc_interval = Some(Duration::from_millis(50));
        c
    };
    let bookie = Bookie::start(config(0), reg.clone()).await.unwrap();
    let port = bookie.addr().port();
    let c = client(bookie.addr()).await;
    for e in 0..40 {
        c.add(1, e, key(), false, entry(1, e)).await.unwrap();
        c.add(2, e, key(), false, entry(2, e)).await.unwrap();
    }
    // Passes run meanwhile and keep both: their metadata exists.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(c.read(2, 0, None).await.unwrap(), entry(2, 0));
    reg.delete_ledger(2);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while c.read(2, 0, None).await != Err(ClientError::Status(Status::NoLedger))
        || bookie.storage().stats().gc_logs_removed == 0
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "ledger 2 not collected"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for e in 0..40 {
        assert_eq!(c.read(1, e, None).await.unwrap(), entry(1, e));
    }
    drop(c);
    bookie.halt().await;
    // After a crash-like restart: still gone, ledger 1 intact.
    let bookie = Bookie::start(config(port), reg.clone()).await.unwrap();
    let c = client(bookie.addr()).await;
    assert_eq!(
        c.read(2, 0, None).await,
        Err(ClientError::Status(Status::NoLedger))
    );
    for e in 0..40 {
        assert_eq!(c.read(1, e, None).await.unwrap(), entry(1, e));
    }
    bookie.stop().await;
}

/// The answer to `GET /metrics` over HTTP (status line, headers and body), asserted to be 200.
async fn get_metrics(addr: std::net::SocketAddr) -> String {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut body = String::new();
    tokio::time::timeout(WAIT, s.read_to_string(&mut body))
        .await
        .unwrap()
        .unwrap();
    assert!(body.starts_with("HTTP/1.1 200"), "{body}");
    body
}

/// `GET /metrics` over HTTP, parsed into `name value` pairs (comments and buckets skipped).
async fn scrape(addr: std::net::SocketAddr) -> std::collections::HashMap<String, f64> {
    let body = get_metrics(addr).await;
    body.lines()
        .filter(|l| !l.starts_with('#') && !l.contains('{'))
        .filter_map(|l| {
            let (name, value) = l.split_once(' ')?;
            Some((name.to_string(), value.parse().ok()?))
        })
        .collect()
}

#[tokio::test]
async fn garbage_collection_counters_are_served_on_metrics() {
    let tmp = tempfile::tempdir().unwrap();
    let mut config = file_config(&tmp.path().join("data"), 0);
    config.storage.entry_log_size = 4096;
    config.gc_interval = Some(Duration::from_millis(50));
    config.metrics = Some(any_port());
    let reg = Arc::new(MemoryRegistration::new());
    let bookie = Bookie::start(config, reg.clone()).await.unwrap();
    let at = bookie.metrics_addr().unwrap();
    let c = client(bookie.addr()).await;
    let mut doomed_bytes = 0;
    for e in 0..40 {
        c.add(1, e, key(), false, entry(1, e)).await.unwrap();
        c.add(2, e, key(), false, entry(2, e)).await.unwrap();
        doomed_bytes += entry(2, e).len() as u64;
    }
    // Passes that find every ledger's metadata in place: counted, nothing deleted.
    let deadline = tokio::time::Instant::now() + WAIT;
    let quiet = loop {
        let m = scrape(at).await;
        if m["bookie_gc_runs_total"] >= 2.0 {
            break m;
        }
        assert!(tokio::time::Instant::now() < deadline, "no GC run: {m:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(quiet["bookie_gc_deleted_ledgers_total"], 0.0, "{quiet:?}");
    assert_eq!(quiet["bookie_gc_reclaimed_bytes_total"], 0.0, "{quiet:?}");
    assert_eq!(
        quiet["bookie_gc_entry_logs_removed_total"], 0.0,
        "{quiet:?}"
    );
    assert!(quiet["bookie_gc_run_seconds_count"] >= 2.0, "{quiet:?}");

    reg.delete_ledger(2);
    let deadline = tokio::time::Instant::now() + WAIT;
    let after = loop {
        let m = scrape(at).await;
        if m["bookie_gc_deleted_ledgers_total"] >= 1.0 && m["bookie_gc_reclaimed_bytes_total"] > 0.0
        {
            break m;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "ledger 2 not collected: {m:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(after["bookie_gc_deleted_ledgers_total"], 1.0, "{after:?}");
    // The removed logs held all of ledger 2 (with its 20-byte record overheads).
    assert!(
        after["bookie_gc_reclaimed_bytes_total"] >= doomed_bytes as f64,
        "{after:?}, ledger 2 took {doomed_bytes} bytes"
    );
    assert!(
        after["bookie_gc_entry_logs_removed_total"] >= 1.0,
        "{after:?}"
    );
    // Every log held ledger 1's entries too: compaction copied them out.
    assert!(
        after["bookie_gc_compacted_entries_total"] >= 1.0,
        "{after:?}"
    );
    assert!(after["bookie_gc_runs_total"] > quiet["bookie_gc_runs_total"]);
    assert!(after["bookie_gc_last_run_seconds"] > 0.0, "{after:?}");
    assert_eq!(after["bookie_ledgers"], 1.0, "{after:?}");
    for e in 0..40 {
        assert_eq!(c.read(1, e, None).await.unwrap(), entry(1, e));
    }
    bookie.stop().await;
}
