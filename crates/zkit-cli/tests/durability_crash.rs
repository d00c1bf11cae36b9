//! Crash test with real processes: `zkit serve --data-dir D` is killed with SIGKILL at random
//! moments while clients write; after every restart, every acknowledged create, set, delete and
//! multi is there with the right data and version, and the one write per client that was in
//! flight at the kill is either wholly applied or not at all (a multi is all-or-nothing).
//!
//! Each client writes its own keys, one request at a time, so the acknowledged state is known
//! exactly and at most one outcome per client is unknown. The data of every write is unique, so
//! "the right data" cannot be matched by accident. A second server on the same data dir must
//! refuse to start with the lock message, and the last round stops gracefully (SIGTERM), which
//! leaves a snapshot. Time is bounded: a few rounds of about a second of writing each.
//! Reproduce a schedule with `ZKIT_CRASH_SEED=<n>`.

mod common;

use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::Serve;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use zkit_client::{Acls, Client, CreateMode, MultiWriteResult};

const ROUNDS: usize = 5;
const CLIENTS: usize = 6;
const KEYS: usize = 8;
const OP_TIMEOUT: Duration = Duration::from_secs(2);

/// A node's acknowledged state: `None` = absent.
type Value = Option<(Vec<u8>, i32)>;

/// A write sent whose outcome is unknown (the server died before answering): each key it
/// touches, with its state if the write did not happen and if it did.
type Pending = Vec<(String, Value, Value)>;

fn serve(dir: &Path, snap_count: u32) -> Serve {
    let snap_count = snap_count.to_string();
    common::serve(
        dir,
        &["--port", "0", "--snap-count", &snap_count],
        Duration::from_secs(20),
    )
}

fn key(client: usize, k: usize) -> String {
    format!("/c{client}k{k}")
}

async fn read(zk: &Client, path: &str) -> Value {
    match zk.get_data(path).await {
        Ok((data, stat)) => Some((data, stat.version)),
        Err(zkit_client::Error::NoNode) => None,
        Err(e) => panic!("reading {path}: {e}"),
    }
}

/// One client's writes until the server dies (or `until`). Returns the write in flight at the
/// end, if any, and updates `acked` with every acknowledged one.
async fn write_until_error(
    addr: String,
    client: usize,
    seed: u64,
    mut acked: HashMap<String, Value>,
) -> (HashMap<String, Value>, Option<Pending>, usize) {
    let mut rng = StdRng::seed_from_u64(seed);
    let persistent = CreateMode::Persistent.with_acls(Acls::anyone_all());
    let Ok(Ok(zk)) = tokio::time::timeout(OP_TIMEOUT, Client::connect(&addr)).await else {
        return (acked, None, 0);
    };
    let mut acks = 0;
    loop {
        let k = rng.gen_range(0..KEYS);
        let path = key(client, k);
        let before = acked.get(&path).cloned().flatten();
        let data = format!("{client}-{seed}-{acks}-{}", rng.gen::<u32>()).into_bytes();
        let pending: Pending;
        let outcome = match &before {
            None => {
                pending = vec![(path.clone(), None, Some((data.clone(), 0)))];
                tokio::time::timeout(OP_TIMEOUT, zk.create(&path, &data, &persistent))
                    .await
                    .ok()
                    .and_then(Result::ok)
                    .map(|(stat, _)| vec![Some((data.clone(), stat.version))])
            }
            Some((_, version)) if rng.gen_bool(0.2) => {
                pending = vec![(path.clone(), before.clone(), None)];
                tokio::time::timeout(OP_TIMEOUT, zk.delete(&path, Some(*version)))
                    .await
                    .ok()
                    .and_then(Result::ok)
                    .map(|()| vec![None])
            }
            Some((_, version)) if rng.gen_bool(0.3) => {
                // A multi: set this key and create-or-delete a partner key, all or nothing.
                let partner = key(client, (k + 1 + rng.gen_range(0..KEYS - 1)) % KEYS);
                let partner_before = acked.get(&partner).cloned().flatten();
                let mut multi = zk.new_multi_writer();
                multi.add_set_data(&path, &data, Some(*version)).unwrap();
                let partner_after = match &partner_before {
                    None => {
                        multi.add_create(&partner, &data, &persistent).unwrap();
                        Some((data.clone(), 0))
                    }
                    Some((_, v)) => {
                        multi.add_delete(&partner, Some(*v)).unwrap();
                        None
                    }
                };
                pending = vec![
                    (
                        path.clone(),
                        before.clone(),
                        Some((data.clone(), version + 1)),
                    ),
                    (partner.clone(), partner_before, partner_after.clone()),
                ];
                let set_after = Some((data.clone(), version + 1));
                tokio::time::timeout(OP_TIMEOUT, multi.commit())
                    .await
                    .ok()
                    .and_then(Result::ok)
                    .map(|results| {
                        let set_version = results.iter().find_map(|r| match r {
                            MultiWriteResult::SetData { stat } => Some(stat.version),
                            _ => None,
                        });
                        assert_eq!(set_version, Some(version + 1), "multi set version");
                        vec![set_after, partner_after]
                    })
            }
            Some((_, version)) => {
                pending = vec![(
                    path.clone(),
                    before.clone(),
                    Some((data.clone(), version + 1)),
                )];
                tokio::time::timeout(OP_TIMEOUT, zk.set_data(&path, &data, Some(*version)))
                    .await
                    .ok()
                    .and_then(Result::ok)
                    .map(|stat| vec![Some((data.clone(), stat.version))])
            }
        };
        match outcome {
            Some(afters) => {
                for ((p, _, expected), after) in pending.into_iter().zip(afters) {
                    assert_eq!(after, expected, "{p}: acknowledged version");
                    acked.insert(p, after);
                }
                acks += 1;
            }
            // Any error: the server died (or is dying); the outcome of this write is unknown.
            None => return (acked, Some(pending), acks),
        }
    }
}

/// Checks the restarted server against the model and resolves the pending writes.
async fn verify(
    addr: &str,
    models: &mut [HashMap<String, Value>],
    pendings: Vec<Option<Pending>>,
    round: usize,
) {
    let zk = Client::connect(addr).await.expect("connect after restart");
    for (client, (model, pending)) in models.iter_mut().zip(pendings).enumerate() {
        let mut actual = HashMap::new();
        for k in 0..KEYS {
            let path = key(client, k);
            actual.insert(path.clone(), read(&zk, &path).await);
        }
        let mut expected = model.clone();
        if let Some(pending) = pending {
            let applied = pending.iter().all(|(p, _, after)| actual[p] == *after);
            let not_applied = pending.iter().all(|(p, before, _)| actual[p] == *before);
            assert!(
                applied || not_applied,
                "round {round}: write in flight half-applied: {pending:?} vs {actual:?}"
            );
            if applied {
                for (p, _, after) in pending {
                    expected.insert(p, after);
                }
            }
        }
        for k in 0..KEYS {
            let path = key(client, k);
            let want = expected.get(&path).cloned().flatten();
            assert_eq!(
                actual[&path], want,
                "round {round}: {path} after restart (acknowledged state lost or changed)"
            );
        }
        *model = expected;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn acknowledged_writes_survive_kill_9() {
    let seed: u64 = std::env::var("ZKIT_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    eprintln!("ZKIT_CRASH_SEED={seed}");
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let mut models: Vec<HashMap<String, Value>> = vec![HashMap::new(); CLIENTS];
    // Small snapshot interval, so kills also land around background snapshots.
    let snap_count = 200;
    let mut server = serve(dir.path(), snap_count);
    let mut total_acks = 0;
    for round in 0..ROUNDS {
        if round == 0 {
            let second = Command::new(env!("CARGO_BIN_EXE_zkit"))
                .args(["serve", "--port", "0", "--data-dir"])
                .arg(dir.path())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            let output = second.wait_with_output().unwrap();
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert!(!output.status.success(), "a second server started");
            assert!(
                stderr.contains("is in use by another zkit server")
                    && stderr.contains(&server.child.id().to_string()),
                "refusal message: {stderr}"
            );
        }
        let writers: Vec<_> = models
            .iter()
            .enumerate()
            .map(|(client, model)| {
                tokio::spawn(write_until_error(
                    server.addr.clone(),
                    client,
                    rng.gen(),
                    model.clone(),
                ))
            })
            .collect();
        let last = round + 1 == ROUNDS;
        tokio::time::sleep(Duration::from_millis(rng.gen_range(300..1200))).await;
        if last {
            // Graceful stop: SIGTERM, the server answers what it has, snapshots and exits 0.
            let term = Command::new("kill")
                .args(["-TERM", &server.child.id().to_string()])
                .status()
                .unwrap();
            assert!(term.success());
            let status = server.child.wait().unwrap();
            assert!(status.success(), "graceful stop exit status {status}");
        } else {
            server.child.kill().unwrap();
            server.child.wait().unwrap();
        }
        let killed = Instant::now();
        let mut pendings = Vec::new();
        for (client, writer) in writers.into_iter().enumerate() {
            let (model, pending, acks) = writer.await.unwrap();
            models[client] = model;
            pendings.push(pending);
            total_acks += acks;
        }
        let writers_done = killed.elapsed();
        server = serve(dir.path(), snap_count);
        let restarted = killed.elapsed();
        verify(&server.addr, &mut models, pendings, round).await;
        eprintln!(
            "round {round}: writers done {writers_done:?}, restarted {restarted:?}, verified {:?}",
            killed.elapsed()
        );
        if last {
            let snaps = std::fs::read_dir(dir.path().join("snap")).unwrap().count();
            assert!(snaps >= 1, "a graceful stop leaves a snapshot");
        }
    }
    eprintln!(
        "{ROUNDS} rounds, {total_acks} acknowledged writes verified in {:?}",
        started.elapsed()
    );
    assert!(
        total_acks > ROUNDS * CLIENTS,
        "too few writes to mean anything"
    );
}
