//! The pipelined write path, driven through a storage double whose fsyncs the test completes by
//! hand: the pipeline keeps handling requests while an fsync is in flight, releases batches
//! strictly in order once everything before them is durable (a read behind an undurable write
//! waits for it), answers reads without the disk when nothing is in flight, and after a failure
//! with several batches in flight releases none of them and rebuilds from what was durable.

mod common;

use std::io;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{Arc, Mutex};

use common::{Raw, WAIT};
use tokio::sync::{mpsc, oneshot};
use zkit_core::{Config, Core, Txn};
use zkit_proto::{CreateRequest, PathWatchRequest, Request};
use zkit_server::storage::error::StorageError;
use zkit_server::storage::{Durable, Storage, StorageFuture};
use zkit_server::{Server, ServerConfig};

/// One `submit` the test has not completed yet.
struct Submitted {
    txns: Vec<Txn>,
    done: oneshot::Sender<Result<(), StorageError>>,
}

/// A storage whose fsyncs complete when the test says so (or at once while `auto` is set).
/// What completed `Ok` is the "disk": `rebuild` replays it.
struct Gated {
    auto: Arc<AtomicBool>,
    disk: Arc<Mutex<Vec<Txn>>>,
    submitted: mpsc::UnboundedSender<Submitted>,
}

/// A core with what the "disk" holds.
fn replay(disk: &Mutex<Vec<Txn>>, config: Config, now: i64) -> Core {
    let mut core = Core::new(config, now);
    for txn in disk.lock().unwrap().iter() {
        core.apply(txn);
    }
    drop(core.ready());
    core
}

impl Storage for Gated {
    fn recover_core(&mut self, config: Config, now: i64) -> StorageFuture<'_, Core> {
        let core = replay(&self.disk, config, now);
        Box::pin(async move { Ok(core) })
    }

    fn submit(&mut self, txns: &[Txn]) -> Durable {
        let disk = self.disk.clone();
        if self.auto.load(SeqCst) {
            disk.lock().unwrap().extend_from_slice(txns);
            return Box::pin(std::future::ready(Ok(())));
        }
        let (done, rx) = oneshot::channel();
        let txns = txns.to_vec();
        self.submitted
            .send(Submitted {
                txns: txns.clone(),
                done,
            })
            .unwrap();
        Box::pin(async move {
            let result = rx
                .await
                .unwrap_or_else(|_| Err(fsync_failure("test dropped the fsync")));
            if result.is_ok() {
                // The pipeline polls only its oldest batch, so this runs in submission order.
                disk.lock().unwrap().extend(txns);
            }
            result
        })
    }

    fn rebuild(&mut self, config: Config, now: i64) -> StorageFuture<'_, Core> {
        let core = replay(&self.disk, config, now);
        Box::pin(async move { Ok(core) })
    }
}

fn fsync_failure(what: &str) -> StorageError {
    StorageError::io("fdatasync", io::Error::other(what.to_owned()))
}

struct Harness {
    server: Server,
    auto: Arc<AtomicBool>,
    submitted: mpsc::UnboundedReceiver<Submitted>,
}

impl Harness {
    async fn start() -> Harness {
        let auto = Arc::new(AtomicBool::new(true));
        let (tx, submitted) = mpsc::unbounded_channel();
        let storage = Gated {
            auto: auto.clone(),
            disk: Arc::default(),
            submitted: tx,
        };
        let server = Server::start_with_storage(ServerConfig::ephemeral(), Box::new(storage))
            .await
            .unwrap();
        Harness {
            server,
            auto,
            submitted,
        }
    }

    /// The next fsync the pipeline started.
    async fn next_fsync(&mut self) -> Submitted {
        tokio::time::timeout(WAIT, self.submitted.recv())
            .await
            .expect("no fsync started in time")
            .expect("storage gone")
    }
}

fn create(path: &str, data: &[u8]) -> Request {
    Request::Create(CreateRequest {
        path: path.into(),
        data: Some(data.to_vec()),
        acl: zkit_core::tree::open_acl(),
        flags: 0,
    })
}

fn get(path: &str) -> Request {
    Request::GetData(PathWatchRequest {
        path: path.into(),
        watch: false,
    })
}

/// The GetData reply body starts with the data (length-prefixed).
fn data_of(body: &[u8]) -> Vec<u8> {
    let len = usize::try_from(i32::from_be_bytes(body[..4].try_into().unwrap())).unwrap();
    body[4..4 + len].to_vec()
}

/// Asserts nothing arrives on `raw` within a short while (a bounded negative check: it fails
/// if the pipeline released a reply early; it cannot pass by timing luck when the code is
/// wrong, only fail late).
async fn expect_silence(raw: &mut Raw) {
    let mut byte = [0u8; 1];
    let read = tokio::time::timeout(
        std::time::Duration::from_millis(300),
        tokio::io::AsyncReadExt::read(&mut raw.stream, &mut byte),
    )
    .await;
    assert!(
        read.is_err(),
        "the server answered before the fsync: {read:?}"
    );
}

#[tokio::test]
async fn writes_overlap_an_fsync_and_batches_are_released_in_order() {
    let mut h = Harness::start().await;
    let addr = h.server.addr();
    let (mut a, _) = Raw::session(addr).await;
    let (mut b, _) = Raw::session(addr).await;
    let (mut c, _) = Raw::session(addr).await;
    h.auto.store(false, SeqCst);

    a.send_request(1, &create("/a", b"A")).await;
    let first = h.next_fsync().await;
    // The pipeline is not waiting for that fsync: it handles b's write and starts its fsync.
    b.send_request(1, &create("/b", b"B")).await;
    let second = h.next_fsync().await;
    assert_eq!(first.txns.len(), 1);
    assert_eq!(second.txns.len(), 1);
    assert!(second.txns[0].zxid > first.txns[0].zxid);
    // A read of an undurable write is handled (it sees /a) but held behind it.
    c.send_request(1, &get("/a")).await;

    // The second fsync completes first: nothing may leave, the first still runs.
    second.done.send(Ok(())).unwrap();
    expect_silence(&mut b).await;
    expect_silence(&mut c).await;

    first.done.send(Ok(())).unwrap();
    let (header, _) = a.read_reply().await.expect("a's reply");
    assert_eq!((header.xid, header.err), (1, 0));
    let (header, _) = b.read_reply().await.expect("b's reply");
    assert_eq!((header.xid, header.err), (1, 0));
    let (header, body) = c.read_reply().await.expect("c's reply");
    assert_eq!((header.xid, header.err), (1, 0));
    assert_eq!(data_of(&body), b"A");
    // Nothing was submitted for the read.
    assert!(h.submitted.try_recv().is_err());
    h.server.stop().await;
}

#[tokio::test]
async fn reads_are_answered_without_the_disk_when_nothing_is_in_flight() {
    let mut h = Harness::start().await;
    let addr = h.server.addr();
    let (mut a, _) = Raw::session(addr).await;
    h.auto.store(false, SeqCst);
    for xid in 1..=20 {
        a.send_request(xid, &get("/")).await;
        let (header, _) = a.read_reply().await.expect("reply");
        assert_eq!((header.xid, header.err), (xid, 0));
    }
    assert!(h.submitted.try_recv().is_err(), "a read went to the disk");
    h.server.stop().await;
}

#[tokio::test]
async fn a_failure_with_batches_in_flight_releases_none_and_rebuilds() {
    let mut h = Harness::start().await;
    let addr = h.server.addr();
    let (mut setup, _) = Raw::session(addr).await;
    setup.send_request(1, &create("/kept", b"k")).await;
    assert_eq!(setup.read_reply().await.unwrap().0.err, 0);
    let (mut a, _) = Raw::session(addr).await;
    let (mut b, _) = Raw::session(addr).await;
    let (mut c, _) = Raw::session(addr).await;
    h.auto.store(false, SeqCst);

    a.send_request(1, &create("/a", b"A")).await;
    let first = h.next_fsync().await;
    b.send_request(1, &create("/b", b"B")).await;
    let second = h.next_fsync().await;
    // Whether the pipeline handles this read before or after the failure, it must not be
    // answered: held behind the failed writes, or on a connection the failure closed.
    c.send_request(1, &get("/b")).await;
    // The later batch completes first (it must still wait), then the earlier one fails.
    second.done.send(Ok(())).unwrap();
    first
        .done
        .send(Err(fsync_failure("injected fsync failure")))
        .unwrap();

    // No reply, no event: every connection is closed.
    for raw in [&mut setup, &mut a, &mut b, &mut c] {
        raw.expect_closed().await;
    }
    // Rebuilt from the durable txns only: /kept is there, /a and /b are not.
    h.auto.store(true, SeqCst);
    let (mut d, _) = Raw::session(addr).await;
    d.send_request(1, &get("/kept")).await;
    let (header, body) = d.read_reply().await.unwrap();
    assert_eq!(header.err, 0);
    assert_eq!(data_of(&body), b"k");
    for (xid, path) in [(2, "/a"), (3, "/b")] {
        d.send_request(xid, &get(path)).await;
        let (header, _) = d.read_reply().await.unwrap();
        assert_eq!(
            header.err,
            zkit_proto::ErrorCode::NoNode as i32,
            "{path} survived"
        );
    }
    // And it serves writes again.
    d.send_request(4, &create("/a", b"again")).await;
    assert_eq!(d.read_reply().await.unwrap().0.err, 0);
    h.server.stop().await;
}

/// With the fsync off the pipeline's path, a snapshot may be taken from a core whose last txns
/// never reach the log (the fsync fails, or the server is killed). Recovery must start from it,
/// skip the log records at or below its zxid, and keep numbering after it, so what is written
/// next replays on the following start.
#[tokio::test]
async fn a_snapshot_ahead_of_the_log_recovers_and_the_log_continues_after_it() {
    use zkit_server::storage::durable::{DurableOptions, WalStorage};
    let dir = tempfile::tempdir().unwrap();
    let opts = DurableOptions {
        snapshots: zkit_server::storage::snapshotter::SnapshotPolicy {
            snap_count: 1_000_000,
            ..Default::default()
        },
        ..DurableOptions::default()
    };
    let config = Config {
        tick_time_ms: 100,
        extended_types: true,
        container_check_interval_ms: 1000,
        ..Config::default()
    };
    let now = 1_700_000_000_000_i64;
    let connect = zkit_proto::ConnectRequest {
        read_only: None,
        ..zkit_proto::ConnectRequest::new_session(30_000)
    };

    let mut storage = WalStorage::open_with(dir.path(), opts.clone()).unwrap();
    let mut core = storage.recover_core(config.clone(), now).await.unwrap();
    core.connect(now, 1, connect.clone(), [7; 16]);
    core.handle(now, 1, 1, create("/durable", b"d"));
    let ready = core.ready();
    storage.submit(&ready.txns).await.unwrap();
    // This batch is applied (and will be in the snapshot) but its records never reach the log.
    core.handle(now, 1, 2, create("/only-in-snapshot", b"s"));
    let lost = core.ready();
    assert_eq!(lost.txns.len(), 1);
    let snapshot_zxid = core.last_zxid();
    // The final snapshot of a graceful stop is one taken from exactly such a core.
    storage.close(&core).await.unwrap();
    drop(storage);

    let mut storage = WalStorage::open_with(dir.path(), opts.clone()).unwrap();
    let mut core = storage.recover_core(config.clone(), now).await.unwrap();
    assert_eq!(storage.recovery_stats().snapshot_zxid, Some(snapshot_zxid));
    assert_eq!(core.last_zxid(), snapshot_zxid);
    let dump = core.dump();
    assert!(dump.contains("/only-in-snapshot") && dump.contains("/durable"));
    // The log's last record is below the snapshot; new txns continue after the snapshot.
    core.connect(now, 2, connect, [8; 16]);
    core.handle(now, 2, 1, create("/after", b"a"));
    let ready = core.ready();
    assert!(ready.txns[0].zxid > snapshot_zxid);
    storage.submit(&ready.txns).await.unwrap();
    let live = core.dump();
    // A crash (no final snapshot): the next start replays the records after the snapshot.
    drop(storage);
    let mut storage = WalStorage::open_with(dir.path(), opts).unwrap();
    let core = storage.recover_core(config, now).await.unwrap();
    assert_eq!(storage.recovery_stats().snapshot_zxid, Some(snapshot_zxid));
    assert!(storage.recovery_stats().replayed >= 2);
    assert_eq!(core.dump(), live);
}
