//! Snapshot + WAL replay equals the live state: a seeded random workload (creates, ephemerals,
//! sequentials, sets, deletes, multis — some failing —, session opens, closes and expiries) is
//! driven through a `Core`, its txns persisted through `WalStorage` with snapshots every few
//! dozen txns and tiny WAL segments (so snapshots, pruning and segment rolls all happen), and
//! after each round the state recovered from disk must dump exactly like the live one.
//!
//! Reproduce one seed with `ZKIT_REPLAY_SEED=<n>`.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use zkit_core::tree::open_acl;
use zkit_core::{Config, Core};
use zkit_proto::{ConnectRequest, CreateRequest, DeleteRequest, MultiOp, Request, SetDataRequest};
use zkit_server::storage::durable::{DurableOptions, WalStorage};
use zkit_server::storage::snapshotter::SnapshotPolicy;
use zkit_server::storage::wal::{FsyncMode, WalOptions};
use zkit_server::storage::Storage;

const SEEDS: u64 = 4;
const ROUNDS: usize = 4;
const BATCHES_PER_ROUND: usize = 40;

fn config() -> Config {
    Config {
        tick_time_ms: 100,
        extended_types: true,
        container_check_interval_ms: 1000,
        ..Config::default()
    }
}

/// Snapshot intervals by seed: never (pure WAL replay), every few txns, every few batches.
const SNAP_COUNTS: [u64; 4] = [u64::MAX, 37, 5, 200];

fn options(seed: u64) -> DurableOptions {
    DurableOptions {
        wal: WalOptions {
            segment_size: 16 * 1024,
            // A process that keeps running loses nothing without fsync; this keeps the test fast.
            fsync: FsyncMode::Never,
            truncate_corrupt: false,
        },
        // The size condition off: these tiny trees snapshot every few txns, as the seed says.
        snapshots: SnapshotPolicy {
            snap_count: SNAP_COUNTS[(seed % 4) as usize],
            log_percent: 0,
            size_limit: 0,
        },
        keep_snapshots: 3,
    }
}

fn create(path: String, data: Vec<u8>, flags: i32) -> CreateRequest {
    CreateRequest {
        path,
        data: Some(data),
        acl: open_acl(),
        flags,
    }
}

fn random_path(rng: &mut StdRng) -> String {
    match rng.gen_range(0..3) {
        0 => format!("/n{}", rng.gen_range(0..12)),
        _ => format!("/n{}/c{}", rng.gen_range(0..12), rng.gen_range(0..6)),
    }
}

fn random_request(rng: &mut StdRng) -> Request {
    let data: Vec<u8> = (0..rng.gen_range(0..40)).map(|_| rng.gen()).collect();
    let version = if rng.gen_bool(0.7) {
        -1
    } else {
        rng.gen_range(0..3)
    };
    match rng.gen_range(0..10) {
        0..=2 => {
            let flags = [0, 0, 1, 2, 3][rng.gen_range(0..5)];
            Request::Create(create(random_path(rng), data, flags))
        }
        3..=5 => Request::SetData(SetDataRequest {
            path: random_path(rng),
            data: Some(data),
            version,
        }),
        6..=7 => Request::Delete(DeleteRequest {
            path: random_path(rng),
            version,
        }),
        _ => Request::Multi(vec![
            MultiOp::Create(create(random_path(rng), data.clone(), 0)),
            MultiOp::SetData(SetDataRequest {
                path: random_path(rng),
                data: Some(data),
                version,
            }),
            MultiOp::Delete(DeleteRequest {
                path: random_path(rng),
                version: -1,
            }),
        ]),
    }
}

/// Connects `conn` with a new session.
fn connect(core: &mut Core, now: i64, conn: u64) {
    let request = ConnectRequest {
        read_only: None,
        ..ConnectRequest::new_session(400)
    };
    core.connect(now, conn, request, [7; 16]);
}

async fn run_seed(seed: u64) {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut now = 1_700_000_000_000_i64;
    let mut next_conn = 1_u64;
    let mut storage = WalStorage::open_with(dir.path(), options(seed)).unwrap();
    let mut core = storage.recover_core(config(), now).await.unwrap();
    for round in 0..ROUNDS {
        let mut conns: Vec<u64> = Vec::new();
        for _ in 0..BATCHES_PER_ROUND {
            for _ in 0..rng.gen_range(1..12) {
                match rng.gen_range(0..20) {
                    0 => {
                        connect(&mut core, now, next_conn);
                        conns.push(next_conn);
                        next_conn += 1;
                    }
                    1 if !conns.is_empty() => {
                        // A client goes away without closing: its session expires later.
                        let conn = conns.swap_remove(rng.gen_range(0..conns.len()));
                        core.disconnect(now, conn);
                    }
                    2 if !conns.is_empty() => {
                        let conn = conns[rng.gen_range(0..conns.len())];
                        core.handle(now, conn, 1, Request::CloseSession);
                        conns.retain(|c| *c != conn);
                    }
                    _ if !conns.is_empty() => {
                        let conn = conns[rng.gen_range(0..conns.len())];
                        core.handle(now, conn, 2, random_request(&mut rng));
                    }
                    _ => {}
                }
            }
            now += rng.gen_range(0..150);
            core.tick(now);
            let ready = core.ready();
            storage.submit(&ready.txns).await.unwrap();
            storage.committed(&core);
        }
        let live = core.dump();
        // "Crash": drop the storage without a final snapshot (a background snapshot may be
        // mid-write), then recover from what is on disk.
        drop(storage);
        storage = WalStorage::open_with(dir.path(), options(seed)).unwrap();
        core = storage.recover_core(config(), now).await.unwrap();
        assert_eq!(
            core.dump(),
            live,
            "seed {seed} round {round}: recovered state differs (ZKIT_REPLAY_SEED={seed})"
        );
        let stats = storage.recovery_stats();
        let snapshots_expected = round > 0 && SNAP_COUNTS[(seed % 4) as usize] < 100;
        assert!(
            !snapshots_expected || stats.snapshot_zxid.is_some(),
            "seed {seed} round {round}: no snapshot was used: {stats:?}"
        );
    }
    // Snapshots were pruned to the newest three, and WAL segments with them.
    let snaps = std::fs::read_dir(dir.path().join("snap")).unwrap().count();
    assert!(snaps <= 4, "{snaps} snapshot files left"); // 3 + possibly one .tmp
    storage.close(&core).await.unwrap();
    drop(storage);
    // After a graceful close the newest snapshot holds everything: nothing to replay.
    let mut storage = WalStorage::open_with(dir.path(), options(seed)).unwrap();
    let recovered = storage.recover_core(config(), now).await.unwrap();
    assert_eq!(recovered.dump(), core.dump());
    assert_eq!(storage.recovery_stats().replayed, 0);
    assert_eq!(
        storage.recovery_stats().snapshot_zxid,
        Some(core.last_zxid())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_plus_wal_replay_equals_live_state() {
    let seeds: Vec<u64> = match std::env::var("ZKIT_REPLAY_SEED") {
        Ok(s) => vec![s.parse().expect("ZKIT_REPLAY_SEED is a number")],
        Err(_) => (0..SEEDS).collect(),
    };
    for seed in seeds {
        run_seed(seed).await;
    }
}

/// Submits what the core has ready and waits for any snapshot that started, so the snapshot
/// count is the policy's and not the disk's speed.
async fn persist(storage: &mut WalStorage, core: &mut Core) {
    let ready = core.ready();
    storage.submit(&ready.txns).await.unwrap();
    storage.committed(core);
    storage.wait_for_snapshot().await.unwrap();
}

fn snapshot_files(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir.join("snap")).unwrap().count()
}

/// Builds a tree of `nodes` nodes of `value` bytes, then sets one node 1,000 times (small
/// txns), with snapshots due every 50 txns as far as the count goes. Returns the snapshots
/// taken while building and while setting; then "crashes" and checks the recovery.
async fn snapshots_for(nodes: usize, value: usize, log_percent: u32) -> (usize, usize) {
    let dir = tempfile::tempdir().unwrap();
    let opts = DurableOptions {
        wal: WalOptions {
            segment_size: 256 * 1024,
            fsync: FsyncMode::Never,
            truncate_corrupt: false,
        },
        snapshots: SnapshotPolicy {
            snap_count: 50,
            log_percent,
            size_limit: 0,
        },
        // Nothing pruned: the files count the snapshots taken.
        keep_snapshots: 10_000,
    };
    let now = 1_700_000_000_000_i64;
    let mut storage = WalStorage::open_with(dir.path(), opts.clone()).unwrap();
    let mut core = storage.recover_core(config(), now).await.unwrap();
    connect(&mut core, now, 1);
    for i in 0..nodes {
        let data = vec![(i % 251) as u8; value];
        core.handle(
            now,
            1,
            2,
            Request::Create(create(format!("/n{i}"), data, 0)),
        );
        if i % 50 == 49 {
            persist(&mut storage, &mut core).await;
        }
    }
    persist(&mut storage, &mut core).await;
    let built = snapshot_files(dir.path());
    for i in 0..1000u32 {
        core.handle(
            now,
            1,
            2,
            Request::SetData(SetDataRequest {
                path: "/n0".into(),
                data: Some(i.to_le_bytes().to_vec()),
                version: -1,
            }),
        );
        if i % 10 == 9 {
            persist(&mut storage, &mut core).await;
        }
    }
    let set = snapshot_files(dir.path()) - built;
    // A crash after the sets: the state comes back from the last snapshot plus the log.
    let live = core.dump();
    drop(storage);
    let mut storage = WalStorage::open_with(dir.path(), opts).unwrap();
    let recovered = storage.recover_core(config(), now).await.unwrap();
    assert_eq!(recovered.dump(), live, "{nodes} nodes, {log_percent} %");
    let stats = storage.recovery_stats();
    let replayed_from = stats.snapshot_zxid.unwrap_or(0);
    assert_eq!(stats.replayed, (core.last_zxid() - replayed_from) as u64);
    assert!(stats.replayed == 0 || stats.replayed_bytes > stats.replayed * 8);
    (built, set)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshots_scale_with_the_tree() {
    // A small tree: its log soon outweighs it, so snap_count decides (1,000 txns / 50).
    let (_, small) = snapshots_for(5, 100, 50).await;
    assert!(small >= 19, "small tree: {small} snapshots in 1,000 txns");
    // A large tree (about 1 MB): 1,000 small txns (~100 KB of log) do not pay for rewriting
    // it, though 20 times snap_count went by (one snapshot may come from the log of the
    // creates after the last one, which the sets top up); while it was being built, the log
    // of the creates did.
    let (built, large) = snapshots_for(1000, 1024, 50).await;
    assert!(
        large <= 1,
        "large tree: {large} snapshots during the small txns"
    );
    assert!(
        built >= 3,
        "large tree: {built} snapshots while building it"
    );
    // The size condition off: every snap_count txns, whatever the size.
    let (_, every) = snapshots_for(1000, 1024, 0).await;
    assert!(every >= 19, "percent 0: {every} snapshots in 1,000 txns");
}
