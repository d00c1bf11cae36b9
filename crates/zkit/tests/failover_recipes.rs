//! Recipes beyond locks through a leader failover of a private 3-member Apache ZooKeeper
//! ensemble (`zkit_testkit::Ensemble`): the leader is killed with SIGKILL mid-run and
//! restarted once the others elected a new one. (When a leader dies, every follower drops its
//! clients too while it rejoins: every session sees connection loss, not only the leader's.)
//!
//! - Two-phase commit: seeded runs, one transaction across 3 participants (library tasks, each
//!   with its own session and file resource) with a coordinator and a recovering leader; the
//!   decision is held back a random while and the kill comes at a random point; in some runs
//!   the coordinator crashes too. Every run ends all-committed or all-aborted on every
//!   participant, nothing left prepared (in doubt), the transaction tree collected, and a
//!   surviving coordinator's outcome is that outcome. 4 runs by default; the long profile, 40
//!   runs (about 6 minutes, past nextest's 180 s limit, hence `cargo test`):
//!   `ZKIT_TXN_FAILOVER_RUNS=40 cargo test -p zkit --test failover_recipes -- two_phase`;
//!   `ZKIT_TXN_SEED=<seed>` replays one run.
//! - Procedures: 3 members (own sessions) held in `acquire_barrier` or `inside_barrier` while the
//!   leader is killed, released right after it. The procedure completes on every member (each
//!   result in, no cleanup) or aborts on every member (each cleans up once), before its own
//!   timeout, and leaves no znode. 2 runs by default (one per phase),
//!   `ZKIT_PROC_FAILOVER_RUNS=N` for more.
//! - Config watcher: writers keep setting a key while the leader (with at least one watcher
//!   session on it) is killed, stop right after the new leader serves, then write again while
//!   the old leader restarts. One more watcher's link is cut (a fault proxy) from just before
//!   the kill until the first writes are over, so that it reconnects after the last write. Every watcher ends on the value the ensemble holds at the end,
//!   both times, with versions never going backwards, on its first session.
//!
//! Runs in the `ensemble` nextest test group (names contain `ensemble_fault`).

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::txn::{check_atomic, file_resource, wait_finished, RunningTxn};
use futures::future::BoxFuture;
use futures::FutureExt;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use zkit::config::{ConfigStore, ConfigWatcher};
use zkit::procedure::{
    AbortReason, Coordinator as ProcedureCoordinator, Member, ProcedureError, Subprocedure,
    SubprocedureFactory,
};
use zkit::txn::{Participant, Recoverer, Resource, TxnOptions};
use zkit::Session;
use zkit_testkit::{ensemble_available, Ensemble, FaultProxy};

/// Long enough that a session rides out an election (a few seconds on loopback).
const SESSION_TIMEOUT: Duration = Duration::from_secs(10);

/// kill -9 of the current leader; returns once a new leader serves and the old one is back.
async fn kill_leader_and_restart(ensemble: &Ensemble) -> usize {
    let leader = ensemble.leader().await.expect("a leader");
    ensemble.kill(leader).await.expect("kill -9 the leader");
    wait_for_leader(ensemble).await;
    ensemble.restart(leader).await.expect("restart");
    leader
}

/// Waits (bounded) until a leader serves.
async fn wait_for_leader(ensemble: &Ensemble) -> usize {
    let elected = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(leader) = ensemble.leader().await {
            return leader;
        }
        assert!(Instant::now() < elected, "no new leader after the kill");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn env_count(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

// ---- two-phase commit ----------------------------------------------------------------------

const NAMES: [&str; 3] = ["P1", "P2", "P3"];

fn txn_options(root: &str) -> TxnOptions {
    TxnOptions {
        // Votes may wait out an election: most runs commit, some abort on the timeout.
        vote_timeout: Duration::from_secs(4),
        ack_timeout: Duration::from_secs(1),
        recovery_grace: Duration::from_millis(500),
        ..TxnOptions::with_root(root)
    }
}

/// Participants and a recoverer that live through every run (and every leader kill).
struct Group {
    options: TxnOptions,
    dir: tempfile::TempDir,
    _sessions: Vec<Session>,
    _participants: Vec<Participant>,
    _recoverer: Recoverer,
}

impl Group {
    async fn start(connect: &str) -> Group {
        let options = txn_options(&zkit_testkit::unique_path("txn-failover"));
        let dir = tempfile::tempdir().expect("tempdir");
        let mut sessions = Vec::new();
        let mut participants = Vec::new();
        for name in NAMES {
            let session = common::session(connect, SESSION_TIMEOUT).await;
            let resource: Arc<dyn Resource> = Arc::new(file_resource(dir.path(), name));
            participants.push(
                Participant::start(&session, &options, name, resource, None).expect("participant"),
            );
            sessions.push(session);
        }
        let session = common::session(connect, SESSION_TIMEOUT).await;
        let recoverer = Recoverer::start(&session, &options, "r", None).expect("recoverer");
        sessions.push(session);
        Group {
            options,
            dir,
            _sessions: sessions,
            _participants: participants,
            _recoverer: recoverer,
        }
    }
}

/// One run: a transaction, the leader killed at a random point, optionally the coordinator
/// crashed too; checks atomicity once the transaction is finished everywhere.
async fn txn_run(ensemble: &Ensemble, group: &Group, seed: u64) -> String {
    let mut rng = StdRng::seed_from_u64(seed);
    let connect = ensemble.connect_string();
    let veto = rng.gen_bool(0.2);
    let crash_coordinator = rng.gen_bool(0.3);
    // The decision is held back a random while (the window in which participants wait for
    // it, prepared), and the kill comes at a random point of prepare, vote, decision or ack.
    let decision_delay = Duration::from_millis(rng.gen_range(0..300));
    let at = Duration::from_millis(rng.gen_range(0..400));
    let payload = if veto { "veto=P2" } else { "ok" };
    let what = format!(
        "seed {seed} (veto {veto}, coordinator crash {crash_coordinator}, decision delay \
         {decision_delay:?}, kill at {at:?})"
    );

    let options = TxnOptions {
        decision_delay,
        ..group.options.clone()
    };
    let txn = RunningTxn::begin(
        connect,
        SESSION_TIMEOUT,
        options,
        &NAMES,
        payload.as_bytes(),
    )
    .await;
    let txid = txn.txid.clone();
    tokio::time::sleep(at).await;
    let mut txn = if crash_coordinator {
        txn.crash();
        None
    } else {
        Some(txn)
    };
    // Whether the surviving coordinator's commit was still under way when the kill came.
    let in_flight = txn.as_ref().is_some_and(|txn| !txn.is_finished());
    let killed = kill_leader_and_restart(ensemble).await;
    let outcome = match &mut txn {
        None => None,
        Some(txn) => {
            let result = tokio::time::timeout(Duration::from_secs(60), txn.outcome())
                .await
                .unwrap_or_else(|_| panic!("{what}: commit hangs"));
            Some(result.unwrap_or_else(|e| panic!("{what}: commit failed: {e}")))
        }
    };

    let probe = common::session(connect, SESSION_TIMEOUT).await;
    wait_finished(
        &probe,
        &group.options.root,
        &NAMES,
        &txid,
        Duration::from_secs(40),
        &what,
    )
    .await;
    probe.close();
    let committed = check_atomic(
        group.dir.path(),
        &NAMES,
        &txid,
        veto,
        outcome.as_ref(),
        &what,
    );
    let result = if committed { "commit" } else { "abort" };
    eprintln!("{what}: leader {killed} killed (commit in flight: {in_flight}), {result}");
    let when = match (crash_coordinator, in_flight) {
        (true, _) => "coordinator crashed",
        (false, true) => "killed in flight",
        (false, false) => "killed after commit",
    };
    format!("{when}: {result}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ensemble_fault_two_phase_commit_atomic_through_leader_kill() {
    if !ensemble_available() {
        return;
    }
    let replay = std::env::var("ZKIT_TXN_SEED").ok();
    let base: u64 = match &replay {
        Some(seed) => seed.parse().expect("ZKIT_TXN_SEED is a number"),
        None => u64::from(rand::random::<u32>()),
    };
    let runs: u64 = if replay.is_some() {
        1
    } else {
        env_count("ZKIT_TXN_FAILOVER_RUNS", 4)
    };
    eprintln!("{runs} runs from seed {base} (replay one with ZKIT_TXN_SEED=<seed>)");
    let started = std::time::Instant::now();
    let ensemble = Ensemble::start(3).await.expect("ensemble");
    let group = Group::start(ensemble.connect_string()).await;
    let mut summary = std::collections::BTreeMap::new();
    for seed in base..base + runs {
        *summary
            .entry(txn_run(&ensemble, &group, seed).await)
            .or_insert(0) += 1;
    }
    eprintln!("{summary:?} in {:?}", started.elapsed());
}

// ---- procedures ----------------------------------------------------------------------------

const SIG: &str = "flush";
/// The procedure's own timeout. A leader failover loses no member, so ending by it (the
/// coordinator aborting because members stopped reporting) is a failure: stuck, not aborted.
const PROCEDURE_TIMEOUT: Duration = Duration::from_secs(30);
const MEMBERS: [&str; 3] = ["m1", "m2", "m3"];

/// Where the members wait when the leader is killed.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    Acquire,
    Inside,
}

#[derive(Debug, Clone, PartialEq)]
enum ProcEvent {
    /// Blocked at the gate in this phase.
    AtGate,
    Inside,
    Cleanup(AbortReason),
}

/// Subprocedures that block at `gate` (until it is opened) in one phase.
struct GatedFactory {
    phase: Phase,
    gate: watch::Receiver<bool>,
    events: mpsc::UnboundedSender<(String, ProcEvent)>,
}

struct GatedSub {
    member: String,
    phase: Phase,
    gate: watch::Receiver<bool>,
    events: mpsc::UnboundedSender<(String, ProcEvent)>,
}

impl GatedSub {
    async fn pass(&mut self, phase: Phase) {
        if self.phase == phase {
            let _ = self.events.send((self.member.clone(), ProcEvent::AtGate));
            let _ = self.gate.wait_for(|open| *open).await;
        }
    }
}

impl SubprocedureFactory for GatedFactory {
    fn build(&self, _signature: &str, _instance: &str, member: &str) -> Box<dyn Subprocedure> {
        Box::new(GatedSub {
            member: member.to_string(),
            phase: self.phase,
            gate: self.gate.clone(),
            events: self.events.clone(),
        })
    }
}

impl Subprocedure for GatedSub {
    fn acquire_barrier(&mut self, _args: Vec<u8>) -> BoxFuture<'_, Result<(), String>> {
        async move {
            self.pass(Phase::Acquire).await;
            Ok(())
        }
        .boxed()
    }

    fn inside_barrier(&mut self) -> BoxFuture<'_, Result<Vec<u8>, String>> {
        async move {
            self.pass(Phase::Inside).await;
            let _ = self.events.send((self.member.clone(), ProcEvent::Inside));
            Ok(self.member.clone().into_bytes())
        }
        .boxed()
    }

    fn cleanup(&mut self, reason: AbortReason) -> BoxFuture<'_, ()> {
        async move {
            let _ = self
                .events
                .send((self.member.clone(), ProcEvent::Cleanup(reason)));
        }
        .boxed()
    }
}

/// Waits (bounded) for the next event of any member.
async fn next_event(
    events: &mut mpsc::UnboundedReceiver<(String, ProcEvent)>,
    what: &str,
) -> (String, ProcEvent) {
    tokio::time::timeout(Duration::from_secs(60), events.recv())
        .await
        .unwrap_or_else(|_| panic!("no member event: {what}"))
        .expect("members alive")
}

/// One procedure instance on 3 members; the leader is killed while every member waits in
/// `phase`, the gate opens right after the kill (so the members' writes meet the election), and
/// the old leader restarts. The procedure must complete on every member or abort on every one.
async fn procedure_run(ensemble: &Ensemble, phase: Phase, run: u64) -> String {
    let connect = ensemble.connect_string();
    let base = zkit_testkit::unique_path("proc-failover");
    let (gate_tx, gate) = watch::channel(false);
    let (events_tx, mut events) = mpsc::unbounded_channel();
    let mut members = Vec::new();
    for name in MEMBERS {
        let session = common::session(connect, SESSION_TIMEOUT).await;
        let factory = Arc::new(GatedFactory {
            phase,
            gate: gate.clone(),
            events: events_tx.clone(),
        });
        let handle = Member::start(&session, &base, SIG, name, factory)
            .await
            .expect("member starts");
        members.push((session, handle));
    }
    let coordinator_session = common::session(connect, SESSION_TIMEOUT).await;
    let coordinator = ProcedureCoordinator::new(&coordinator_session, &base);
    let names: Vec<String> = MEMBERS.iter().map(|m| m.to_string()).collect();
    let instance = format!("i{run}");
    // The coordinator's deadline counts from here.
    let run_started = std::time::Instant::now();
    let proc_run = {
        let (coordinator, instance, names) = (coordinator.clone(), instance.clone(), names.clone());
        tokio::spawn(async move {
            coordinator
                .run(SIG, &instance, b"args", &names, PROCEDURE_TIMEOUT)
                .await
        })
    };
    let mut at_gate = std::collections::BTreeSet::new();
    while at_gate.len() < MEMBERS.len() {
        match next_event(&mut events, &format!("members at the {phase:?} gate")).await {
            (member, ProcEvent::AtGate) => {
                at_gate.insert(member);
            }
            other => panic!("run {run} ({phase:?}): before the gate: {other:?}"),
        }
    }
    let leader = ensemble.leader().await.expect("a leader");
    let killed_at = std::time::Instant::now();
    ensemble.kill(leader).await.expect("kill -9 the leader");
    gate_tx.send_replace(true);
    wait_for_leader(ensemble).await;
    ensemble.restart(leader).await.expect("restart");

    let outcome = tokio::time::timeout(Duration::from_secs(60), proc_run)
        .await
        .unwrap_or_else(|_| panic!("run {run} ({phase:?}): the procedure is stuck"))
        .expect("coordinator task");
    let took = killed_at.elapsed();
    assert!(
        run_started.elapsed() < PROCEDURE_TIMEOUT,
        "run {run} ({phase:?}): ended only by its timeout, {took:?} after the kill: {outcome:?}"
    );
    let result = match outcome {
        Ok(results) => {
            // Completed: every member ran inside the barrier and none cleaned up.
            let want: std::collections::BTreeMap<String, Vec<u8>> = MEMBERS
                .iter()
                .map(|m| (m.to_string(), m.as_bytes().to_vec()))
                .collect();
            assert_eq!(results, want, "run {run} ({phase:?}): results");
            let mut inside = std::collections::BTreeSet::new();
            while inside.len() < MEMBERS.len() {
                match next_event(&mut events, "inside reports").await {
                    (member, ProcEvent::Inside) => assert!(
                        inside.insert(member.clone()),
                        "run {run}: {member} inside twice"
                    ),
                    other => panic!("run {run} ({phase:?}): completed, yet {other:?}"),
                }
            }
            "completed"
        }
        Err(ProcedureError::Aborted { reason, .. }) => {
            // Aborted: every member (all of them took part) cleans up, once.
            let mut cleaned = std::collections::BTreeSet::new();
            while cleaned.len() < MEMBERS.len() {
                match next_event(&mut events, &format!("cleanups after abort by {reason}")).await {
                    (member, ProcEvent::Cleanup(_)) => assert!(
                        cleaned.insert(member.clone()),
                        "run {run}: {member} cleaned up twice"
                    ),
                    (_, ProcEvent::Inside) => {}
                    other => panic!("run {run} ({phase:?}): aborted, yet {other:?}"),
                }
            }
            eprintln!("run {run}: aborted by {reason}");
            "aborted"
        }
        Err(err) => panic!("run {run} ({phase:?}): neither completed nor aborted: {err}"),
    };
    // Nothing of the instance is left behind.
    let root = format!("{base}/{SIG}");
    for dir in ["acquired", "reached", "abort", "running"] {
        let left = common::children(&coordinator_session, &format!("{root}/{dir}")).await;
        assert!(
            left.is_empty(),
            "run {run} ({phase:?}): {dir}/ left: {left:?}"
        );
    }
    for (session, handle) in members {
        handle.stop().await;
        session.close();
    }
    coordinator_session.close();
    eprintln!("run {run}: leader {leader} killed in {phase:?}: {result} {took:?} after the kill");
    format!("{phase:?}: {result}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ensemble_fault_procedure_completes_or_aborts_through_leader_kill() {
    if !ensemble_available() {
        return;
    }
    let runs = env_count("ZKIT_PROC_FAILOVER_RUNS", 2);
    let started = std::time::Instant::now();
    let ensemble = Ensemble::start(3).await.expect("ensemble");
    let mut summary = std::collections::BTreeMap::new();
    for run in 0..runs {
        let phase = if run % 2 == 0 {
            Phase::Acquire
        } else {
            Phase::Inside
        };
        *summary
            .entry(procedure_run(&ensemble, phase, run).await)
            .or_insert(0) += 1;
    }
    eprintln!("{summary:?} in {:?}", started.elapsed());
}

// ---- config watcher ------------------------------------------------------------------------

const WRITERS: usize = 2;
/// Sessions opened at most while looking for a watcher session on the leader.
const MAX_SESSIONS: usize = 40;

/// Follows `watcher`, publishing the latest value of `key`; checks that every path's versions
/// and mzxids strictly increase.
async fn follow(mut watcher: ConfigWatcher, key: String, latest: watch::Sender<String>) {
    let mut seen = common::ConfigVersions::default();
    loop {
        let change = match watcher.next().await {
            Ok(change) => change,
            Err(zkit::Error::Closed) => return,
            Err(err) => panic!("watcher: {err}"),
        };
        seen.check(&change);
        if change.path == key {
            latest.send_replace(change.value_lossy());
        }
    }
}

/// Writers setting one key until `stop`; each counts its acknowledged writes.
fn start_writers(
    stores: &[ConfigStore],
    stop: &Arc<AtomicBool>,
    written: &Arc<AtomicUsize>,
    round: &str,
) -> Vec<tokio::task::JoinHandle<()>> {
    stores
        .iter()
        .enumerate()
        .map(|(w, store)| {
            let (store, stop, written) = (store.clone(), Arc::clone(stop), Arc::clone(written));
            let round = round.to_string();
            tokio::spawn(async move {
                let mut n = 0u64;
                while !stop.load(Ordering::SeqCst) {
                    n += 1;
                    // A write may fail while there is no quorum; the last value is read back
                    // from the ensemble afterwards, so a failed (or unknown) write is fine.
                    let _ = store
                        .write("app/level", format!("{round}-w{w}-{n}").as_bytes())
                        .await
                        .map(|_| written.fetch_add(1, Ordering::SeqCst));
                }
            })
        })
        .collect()
}

/// Stops the writers; returns the key's value in the ensemble now (after a `sync`).
async fn stop_writers(
    stop: &AtomicBool,
    writers: Vec<tokio::task::JoinHandle<()>>,
    probe: &ConfigStore,
    key: &str,
) -> String {
    stop.store(true, Ordering::SeqCst);
    for writer in writers {
        tokio::time::timeout(Duration::from_secs(60), writer)
            .await
            .expect("writer ends")
            .expect("writer");
    }
    // The probe's session may be reconnecting after the kill: retried.
    let session = probe.session().clone();
    zkit::retry(&zkit::RetryPolicy::default(), || session.client().sync(key))
        .await
        .expect("sync");
    let value = probe
        .read("app/level")
        .await
        .expect("read")
        .expect("the key exists");
    String::from_utf8_lossy(&value.value).into_owned()
}

/// Waits (bounded) until every watcher reported `last` as the key's value.
async fn all_reach(latest: &[watch::Receiver<String>], last: &str, what: &str) {
    for (i, rx) in latest.iter().enumerate() {
        let mut rx = rx.clone();
        // An error (the follower panicked and dropped its sender) is a failure too.
        let reached = matches!(
            tokio::time::timeout(Duration::from_secs(30), rx.wait_for(|v| v == last)).await,
            Ok(Ok(_))
        );
        assert!(
            reached,
            "{what}: watcher {i} ended on {:?}, not the last value {last:?}",
            *rx.borrow()
        );
    }
}

/// Writers keep setting a key while the leader is killed (with at least one watcher connected
/// to it) and restarted; the writes stop right after the new leader serves, while the old
/// leader's watchers may still be reconnecting, and again after the restart. Every watcher ends
/// on the last value both times.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ensemble_fault_config_watchers_end_on_the_last_value_through_leader_kill() {
    if !ensemble_available() {
        return;
    }
    let started = std::time::Instant::now();
    let ensemble = Ensemble::start(3).await.expect("ensemble");
    let connect = ensemble.connect_string();
    let root = zkit_testkit::unique_path("config-failover");
    let key = format!("{root}/app/level");
    let mut stores = Vec::new();
    for _ in 0..WRITERS {
        let session = common::session(connect, SESSION_TIMEOUT).await;
        stores.push(ConfigStore::new(&session, &root).expect("store"));
    }
    stores[0]
        .write("app/level", b"initial")
        .await
        .expect("write");
    let probe =
        ConfigStore::new(&common::session(connect, SESSION_TIMEOUT).await, &root).expect("store");

    // Watchers until at least one is connected to the leader (the clients pick a random member).
    let leader = ensemble.leader().await.expect("a leader");
    let leader_addr = ensemble.member_addr(leader).to_string();
    let mut watchers = Vec::new();
    let mut latest = Vec::new();
    let mut on_leader = 0;
    let mut sessions_opened = 0;
    while on_leader == 0 || watchers.len() < 3 {
        assert!(
            sessions_opened < MAX_SESSIONS,
            "no watcher session on the leader in {MAX_SESSIONS} sessions"
        );
        sessions_opened += 1;
        let session = common::session(connect, SESSION_TIMEOUT).await;
        if session.client().connected_server().as_deref() == Some(leader_addr.as_str()) {
            on_leader += 1;
        } else if on_leader == 0 && watchers.len() >= 2 {
            // The last place is kept for a watcher on the leader: each session lands on a
            // random member, so a bounded number of tries finds one all but surely
            // ((2/3)^40 for three members).
            session.close();
            continue;
        }
        let mut watcher = ConfigWatcher::new(&session, &root).expect("watcher");
        watcher.load().await.expect("initial snapshot");
        let (tx, rx) = watch::channel(String::new());
        watchers.push((session, tokio::spawn(follow(watcher, key.clone(), tx))));
        latest.push(rx);
    }
    // One more, whose link is cut (black-holed, connections held) from just before the kill
    // until the writes are over: its reconnect comes after the last write, whose event its
    // persistent watch will never get (a server replays no missed events to persistent
    // watches), so only its re-read after the reconnect can find the last value. A longer
    // session timeout keeps its session valid over the cut.
    let proxy = FaultProxy::start(connect.to_string()).await.expect("proxy");
    let slow = common::session(&proxy.connect_string(), 2 * SESSION_TIMEOUT).await;
    let mut watcher = ConfigWatcher::new(&slow, &root).expect("watcher");
    watcher.load().await.expect("initial snapshot");
    let (tx, rx) = watch::channel(String::new());
    watchers.push((slow, tokio::spawn(follow(watcher, key.clone(), tx))));
    latest.push(rx);
    all_reach(&latest, "initial", "before the fault").await;

    // Round one: the leader dies under the writes; they stop soon after the new leader serves.
    let stop = Arc::new(AtomicBool::new(false));
    let written = Arc::new(AtomicUsize::new(0));
    let writers = start_writers(&stores, &stop, &written, "a");
    let limit = Instant::now() + Duration::from_secs(20);
    while written.load(Ordering::SeqCst) < 50 {
        assert!(Instant::now() < limit, "no writes before the kill");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    proxy.pause();
    ensemble.kill(leader).await.expect("kill -9 the leader");
    wait_for_leader(&ensemble).await;
    let after_election = written.load(Ordering::SeqCst);
    let limit = Instant::now() + Duration::from_secs(30);
    while written.load(Ordering::SeqCst) < after_election + 5 {
        assert!(Instant::now() < limit, "no writes after the election");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let last = stop_writers(&stop, writers, &probe, &key).await;
    proxy.resume();
    all_reach(&latest, &last, "after the leader kill").await;
    let first = written.load(Ordering::SeqCst);

    // Round two: the old leader restarts under the writes.
    let stop = Arc::new(AtomicBool::new(false));
    let writers = start_writers(&stores, &stop, &written, "b");
    ensemble.restart(leader).await.expect("restart");
    let restarted = written.load(Ordering::SeqCst);
    let limit = Instant::now() + Duration::from_secs(30);
    while written.load(Ordering::SeqCst) < restarted + 20 {
        assert!(Instant::now() < limit, "no writes after the restart");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let last = stop_writers(&stop, writers, &probe, &key).await;
    all_reach(&latest, &last, "after the restart").await;

    let sessions: Vec<Session> = watchers.iter().map(|(s, _)| s.clone()).collect();
    for session in &sessions {
        assert_eq!(session.generation(), 1, "a watcher's session was replaced");
    }
    for (session, task) in watchers {
        session.close();
        drop(session);
        let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
    }
    eprintln!(
        "{} watchers ({on_leader} on the killed leader), {first} + {} writes, {:?}",
        latest.len(),
        written.load(Ordering::SeqCst) - first,
        started.elapsed()
    );
}
