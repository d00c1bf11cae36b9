//! Atomicity of two-phase commit under random faults: 200 seeded runs on the embedded zkit
//! server (40 on Apache ZooKeeper), each one transaction across 3 participants with a
//! coordinator and a recovering leader, killing the coordinator, participants (then restarting
//! them on the same durable resource) or dropping their connections at random points. At the
//! end of every run: every participant applied the same outcome (all committed, or none did),
//! nothing is left in doubt, the transaction tree is collected, and a surviving coordinator's
//! outcome is that outcome.
//!
//! Kills are in-process (the participant's tasks stop where they are, its session is closed
//! without any cleanup): fast enough for hundreds of runs. `txn_processes.rs` does kill -9 of
//! real processes. Replay one run with `ZKIT_TXN_SEED=<seed>`.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::txn::{check_atomic, file_resource, wait_finished, RunningTxn};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use zkit::txn::{Participant, Recoverer, Resource, TxnOptions};
use zkit::Session;
use zkit_testkit::FaultProxy;

const NAMES: [&str; 3] = ["P1", "P2", "P3"];

fn options(root: &str) -> TxnOptions {
    TxnOptions {
        vote_timeout: Duration::from_millis(400),
        ack_timeout: Duration::from_millis(300),
        recovery_grace: Duration::from_millis(100),
        ..TxnOptions::with_root(root)
    }
}

#[derive(Debug, Clone, Copy)]
enum Fault {
    None,
    KillCoordinator,
    KillParticipant(usize),
    /// Drop P1's connection (through the fault proxy); the session survives.
    DropConnection,
    KillBoth(usize),
}

struct Run {
    addr: String,
    root: String,
    options: TxnOptions,
    dir: tempfile::TempDir,
    proxy: FaultProxy,
    participants: Vec<Option<(Session, Participant)>>,
}

impl Run {
    async fn start_participant(&mut self, i: usize) {
        // P1 goes through the fault proxy, so its connection can be dropped.
        let addr = if i == 0 {
            self.proxy.connect_string()
        } else {
            self.addr.clone()
        };
        let session = common::session(&addr, Duration::from_secs(10)).await;
        let resource: Arc<dyn Resource> = Arc::new(file_resource(self.dir.path(), NAMES[i]));
        let participant = Participant::start(&session, &self.options, NAMES[i], resource, None)
            .expect("participant");
        self.participants[i] = Some((session, participant));
    }

    fn kill_participant(&mut self, i: usize) {
        if let Some((session, participant)) = self.participants[i].take() {
            participant.stop();
            drop(participant);
            session.close();
        }
    }
}

/// One run; returns a description of what happened for the summary.
async fn one_run(addr: &str, seed: u64) -> String {
    let mut rng = StdRng::seed_from_u64(seed);
    let root = zkit_testkit::unique_path("txn-atom");
    let options = options(&root);
    let proxy = FaultProxy::start(addr.to_string()).await.expect("proxy");
    let mut run = Run {
        addr: addr.to_string(),
        root: root.clone(),
        options: options.clone(),
        dir: tempfile::tempdir().expect("tempdir"),
        proxy,
        participants: vec![None, None, None],
    };
    for i in 0..NAMES.len() {
        run.start_participant(i).await;
    }
    let recoverer_session = common::session(addr, Duration::from_secs(10)).await;
    let _recoverer = Recoverer::start(&recoverer_session, &options, "r", None).expect("recoverer");

    let fault = match rng.gen_range(0..10) {
        0 | 1 => Fault::None,
        2..=4 => Fault::KillCoordinator,
        5 | 6 => Fault::KillParticipant(rng.gen_range(0..3)),
        7 => Fault::DropConnection,
        _ => Fault::KillBoth(rng.gen_range(0..3)),
    };
    let veto = rng.gen_bool(0.2);
    let payload = if veto { "veto=P2" } else { "ok" };
    let at = Duration::from_micros(rng.gen_range(0..40_000));
    let restart_after = Duration::from_micros(rng.gen_range(0..100_000));

    let txn = RunningTxn::begin(
        addr,
        Duration::from_secs(10),
        options.clone(),
        &NAMES,
        payload.as_bytes(),
    )
    .await;
    let txid = txn.txid.clone();
    tokio::time::sleep(at).await;
    let mut coordinator_alive = true;
    let mut killed = None;
    match fault {
        Fault::None => {}
        Fault::KillCoordinator => coordinator_alive = false,
        Fault::KillParticipant(i) => killed = Some(i),
        Fault::DropConnection => run.proxy.drop_connections().await,
        Fault::KillBoth(i) => {
            coordinator_alive = false;
            killed = Some(i);
        }
    }
    let mut txn = if coordinator_alive {
        Some(txn)
    } else {
        txn.crash();
        None
    };
    if let Some(i) = killed {
        run.kill_participant(i);
        tokio::time::sleep(restart_after).await;
        run.start_participant(i).await;
    }
    let outcome = match &mut txn {
        Some(txn) => Some(
            txn.outcome()
                .await
                .unwrap_or_else(|e| panic!("seed {seed}: commit failed: {e}")),
        ),
        None => None,
    };

    let probe = common::session(addr, Duration::from_secs(10)).await;
    let what = format!("seed {seed} ({fault:?}, veto {veto}, at {at:?})");
    wait_finished(
        &probe,
        &run.root,
        &NAMES,
        &txid,
        Duration::from_secs(20),
        &what,
    )
    .await;
    let committed = check_atomic(run.dir.path(), &NAMES, &txid, veto, outcome.as_ref(), &what);
    for i in 0..3 {
        run.kill_participant(i);
    }
    let result = if committed { "commit" } else { "abort" };
    format!("{fault:?}/{result}")
}

async fn many_runs(addr: &str, name: &str, runs: u64) {
    let base: u64 = match std::env::var("ZKIT_TXN_SEED") {
        Ok(seed) => seed.parse().expect("ZKIT_TXN_SEED is a number"),
        Err(_) => rand::random::<u32>() as u64,
    };
    let replay = std::env::var("ZKIT_TXN_SEED").is_ok();
    let runs = if replay { 1 } else { runs };
    eprintln!("{name}: {runs} runs from seed {base} (replay one with ZKIT_TXN_SEED=<seed>)");
    let mut summary = std::collections::BTreeMap::new();
    // 8 runs at a time, each with its own root, sessions and resources.
    let mut seeds = (base..base + runs).peekable();
    while seeds.peek().is_some() {
        let batch: Vec<u64> = seeds.by_ref().take(8).collect();
        let tasks: Vec<_> = batch
            .iter()
            .map(|&seed| {
                let addr = addr.to_string();
                tokio::spawn(async move { one_run(&addr, seed).await })
            })
            .collect();
        for (seed, task) in batch.iter().zip(tasks) {
            match task.await {
                Ok(what) => *summary.entry(what).or_insert(0) += 1,
                Err(err) => panic!("{name}: run with seed {seed} failed: {err}"),
            }
        }
    }
    eprintln!("{name}: {summary:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_run_is_atomic_under_random_kills_and_disconnects() {
    let started = std::time::Instant::now();
    for target in common::servers().await {
        let runs = if target.name == "zkit" { 200 } else { 40 };
        many_runs(&target.addr, target.name, runs).await;
    }
    eprintln!("took {:?}", started.elapsed());
}
