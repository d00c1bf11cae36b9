//! Two-phase commit scenarios (the classic four and harder ones), in-process, against
//! Apache ZooKeeper and the embedded zkit server: all-yes, one no, a participant dead before
//! voting, a coordinator crash before the decision (the recoverer commits), a participant crash
//! after voting yes (it applies the decision when back), and the old-coordinator/recoverer race
//! for the decision (exactly one stands).

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use zkit::txn::decide::{Decision, Vote};
use zkit::txn::file::FileState;
use zkit::txn::layout::Layout;
use zkit::txn::participant::Observer;
use zkit::txn::recovery::{RecoveryEvent, RecoveryObserver};
use zkit::txn::{
    decide_by_create, Coordinator, FileResource, Outcome, Participant, ParticipantEvent, Recoverer,
    TxnOptions,
};
use zkit::Session;

const NAMES: [&str; 3] = ["P1", "P2", "P3"];

struct Node {
    session: Session,
    participant: Participant,
}

struct Group {
    addr: String,
    options: TxnOptions,
    dir: tempfile::TempDir,
    nodes: Vec<Option<Node>>,
    events: mpsc::UnboundedReceiver<(String, ParticipantEvent)>,
    events_tx: mpsc::UnboundedSender<(String, ParticipantEvent)>,
}

fn options(root: &str) -> TxnOptions {
    TxnOptions {
        vote_timeout: Duration::from_millis(1500),
        ack_timeout: Duration::from_secs(5),
        recovery_grace: Duration::from_millis(300),
        ..TxnOptions::with_root(root)
    }
}

/// The event of `who` voting yes (for [`Group::expect`]).
fn voted_yes(who: &'static str) -> impl Fn(&str, &ParticipantEvent) -> bool {
    move |n, e| {
        n == who
            && matches!(
                e,
                ParticipantEvent::Voted {
                    vote: Vote::Yes,
                    ..
                }
            )
    }
}

impl Group {
    async fn start(addr: &str, options: TxnOptions) -> Group {
        let (events_tx, events) = mpsc::unbounded_channel();
        let mut group = Group {
            addr: addr.to_string(),
            options,
            dir: tempfile::tempdir().expect("tempdir"),
            nodes: Vec::new(),
            events,
            events_tx,
        };
        for i in 0..NAMES.len() {
            group.nodes.push(None);
            group.restart(i, Duration::ZERO).await;
        }
        for _ in 0..NAMES.len() {
            group
                .expect(|_, e| matches!(e, ParticipantEvent::Ready), "ready")
                .await;
        }
        group
    }

    fn resource(&self, i: usize) -> FileResource {
        FileResource::open(NAMES[i], self.dir.path().join(NAMES[i])).expect("open resource")
    }

    async fn restart(&mut self, i: usize, prepare_delay: Duration) {
        let session = common::session(&self.addr, Duration::from_secs(10)).await;
        let tx = self.events_tx.clone();
        let observer: Observer = Arc::new(move |name, event| {
            let _ = tx.send((name.to_string(), event.clone()));
        });
        let resource = Arc::new(self.resource(i).with_prepare_delay(prepare_delay));
        let participant =
            Participant::start(&session, &self.options, NAMES[i], resource, Some(observer))
                .expect("participant starts");
        self.nodes[i] = Some(Node {
            session,
            participant,
        });
    }

    /// A crash: the tasks stop where they are, the session goes away.
    fn kill(&mut self, i: usize) {
        if let Some(node) = self.nodes[i].take() {
            node.participant.stop();
            node.session.close();
        }
    }

    async fn expect(
        &mut self,
        want: impl Fn(&str, &ParticipantEvent) -> bool,
        what: &str,
    ) -> (String, ParticipantEvent) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            let next = tokio::time::timeout_at(deadline, self.events.recv()).await;
            match next {
                Ok(Some((name, event))) if want(&name, &event) => return (name, event),
                Ok(Some(_)) => {}
                Ok(None) => panic!("event stream ended waiting for {what}"),
                Err(_) => panic!("timed out waiting for {what}"),
            }
        }
    }

    /// Waits until every named participant applied `txid`.
    async fn applied(&mut self, txid: &str, names: &[&str]) {
        let mut left: Vec<String> = names.iter().map(|s| s.to_string()).collect();
        while !left.is_empty() {
            let (name, _) = self
                .expect(
                    |_, e| matches!(e, ParticipantEvent::Applied { txid: t, .. } if t == txid),
                    &format!("{txid} applied by {left:?}"),
                )
                .await;
            left.retain(|n| *n != name);
        }
    }

    fn states(&self, txid: &str) -> Vec<FileState> {
        (0..NAMES.len())
            .map(|i| self.resource(i).state(txid))
            .collect()
    }

    async fn stop(mut self) {
        for i in 0..NAMES.len() {
            self.kill(i);
        }
    }
}

/// A fresh transaction root (named after `name`) on `addr`, its [`options`], and the
/// participants started on it.
async fn fresh_group(addr: &str, name: &str) -> (TxnOptions, Group) {
    let options = options(&zkit_testkit::unique_path(name));
    let group = Group::start(addr, options.clone()).await;
    (options, group)
}

async fn coordinator(addr: &str, options: TxnOptions) -> (Session, Coordinator) {
    let session = common::session(addr, Duration::from_secs(10)).await;
    let coordinator = Coordinator::new(&session, options).expect("coordinator");
    (session, coordinator)
}

/// Begins a transaction of [`NAMES`] and commits it, killing P3 once it voted yes; asserts
/// that it committed and returns its id.
async fn commit_with_p3_killed_after_its_yes(c: &Coordinator, group: &mut Group) -> String {
    let txn = c.begin(&NAMES, b"x").expect("begin");
    let txid = txn.txid().to_string();
    let commit = tokio::spawn(txn.commit());
    group.expect(voted_yes("P3"), "P3 voted yes").await;
    group.kill(2);
    assert_eq!(commit.await.expect("task"), Ok(Outcome::Committed));
    txid
}

async fn gone(session: Session, path: String) -> bool {
    matches!(session.client().check_stat(&path).await, Ok(None))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn all_yes_commits_everywhere_and_is_collected() {
    for target in common::servers().await {
        let (options, mut group) = fresh_group(&target.addr, "txn-yes").await;
        let (session, c) = coordinator(&target.addr, options.clone()).await;
        let mut took = Vec::new();
        for i in 0..20 {
            let started = Instant::now();
            let txn = c
                .begin(&NAMES, format!("transfer {i}").as_bytes())
                .expect("begin");
            let txid = txn.txid().to_string();
            assert_eq!(
                txn.commit().await,
                Ok(Outcome::Committed),
                "{}",
                target.name
            );
            took.push(started.elapsed());
            // commit() returned after every ack, so every resource has it committed.
            assert_eq!(group.states(&txid), vec![FileState::Committed; 3]);
            group.applied(&txid, &NAMES).await;
            let layout = Layout::new(&options.root).expect("layout");
            common::eventually("transaction collected", Duration::from_secs(5), || {
                gone(session.clone(), layout.txn(&txid))
            })
            .await;
            assert!(gone(session.clone(), layout.inbox_entry("P1", &txid)).await);
        }
        took.sort();
        eprintln!(
            "{}: 20 all-yes txns, median {:?}, max {:?}",
            target.name, took[10], took[19]
        );
        group.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_no_vote_aborts_everywhere() {
    for target in common::servers().await {
        let (options, mut group) = fresh_group(&target.addr, "txn-no").await;
        let (_session, c) = coordinator(&target.addr, options).await;
        let txn = c.begin(&NAMES, b"veto=P2").expect("begin");
        let txid = txn.txid().to_string();
        match txn.commit().await {
            Ok(Outcome::Aborted(reason)) => assert!(reason.contains("P2 voted no"), "{reason}"),
            other => panic!("{}: expected abort, got {other:?}", target.name),
        }
        // The reason names the no vote, not a timeout: a no decides at once.
        group.applied(&txid, &NAMES).await;
        assert_eq!(group.states(&txid), vec![FileState::Aborted; 3]);
        group.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn participant_dead_before_voting_aborts_after_the_vote_timeout() {
    for target in common::servers().await {
        let (options, mut group) = fresh_group(&target.addr, "txn-dead").await;
        // P3 gets stuck in prepare and is killed there, before it votes.
        group.kill(2);
        group.restart(2, Duration::from_secs(60)).await;
        group
            .expect(
                |n, e| n == "P3" && matches!(e, ParticipantEvent::Ready),
                "P3 ready",
            )
            .await;
        let (_session, c) = coordinator(&target.addr, options.clone()).await;
        let txn = c.begin(&NAMES, b"x").expect("begin");
        let txid = txn.txid().to_string();
        let started = Instant::now();
        let commit = tokio::spawn(txn.commit());
        group
            .expect(
                |n, e| n == "P3" && matches!(e, ParticipantEvent::Prepare { .. }),
                "P3 prepare",
            )
            .await;
        group.kill(2);
        match commit.await.expect("commit task") {
            Ok(Outcome::Aborted(reason)) => {
                assert!(
                    reason.contains("vote timeout") && reason.contains("P3"),
                    "{reason}"
                )
            }
            other => panic!("{}: expected abort, got {other:?}", target.name),
        }
        assert!(started.elapsed() >= options.vote_timeout);
        group.applied(&txid, &["P1", "P2"]).await;
        assert_eq!(
            group.states(&txid)[..2],
            [FileState::Aborted, FileState::Aborted]
        );
        assert_eq!(group.states(&txid)[2], FileState::Unknown);
        // P3 comes back and applies the abort too (nothing was prepared).
        group.restart(2, Duration::ZERO).await;
        group.applied(&txid, &["P3"]).await;
        assert_eq!(group.states(&txid)[2], FileState::Aborted);
        group.stop().await;
    }
}

fn recovery_observer() -> (RecoveryObserver, mpsc::UnboundedReceiver<RecoveryEvent>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let observer: RecoveryObserver = Arc::new(move |event| {
        let _ = tx.send(event.clone());
    });
    (observer, rx)
}

/// The recoverer's decision on `txid` and who wrote it, from its observer's events.
async fn decided_by_recoverer(
    recovered: &mut mpsc::UnboundedReceiver<RecoveryEvent>,
    txid: &str,
) -> (Decision, String) {
    loop {
        match recovered.recv().await {
            Some(RecoveryEvent::Decided {
                txid: t,
                decision,
                by,
            }) if t == txid => break (decision, by),
            Some(_) => {}
            None => panic!("recoverer stopped"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn coordinator_crash_before_decision_is_committed_by_the_recoverer() {
    for target in common::servers().await {
        let (options, mut group) = fresh_group(&target.addr, "txn-coord").await;
        let recoverer_session = common::session(&target.addr, Duration::from_secs(10)).await;
        let (observer, mut recovered) = recovery_observer();
        let _recoverer = Recoverer::start(&recoverer_session, &options, "r1", Some(observer))
            .expect("recoverer");
        assert_eq!(recovered.recv().await, Some(RecoveryEvent::Leading));

        let slow = TxnOptions {
            decision_delay: Duration::from_secs(60),
            vote_timeout: Duration::from_secs(30),
            ..options.clone()
        };
        let (session, c) = coordinator(&target.addr, slow).await;
        let txn = c.begin(&NAMES, b"x").expect("begin");
        let txid = txn.txid().to_string();
        let commit = tokio::spawn(txn.commit());
        for _ in 0..3 {
            group
                .expect(|_, e| matches!(e, ParticipantEvent::Voted { .. }), "votes")
                .await;
        }
        // The crash: all votes are in, the decision is not written.
        commit.abort();
        // The last handles go: the ZooKeeper session (and its ephemeral nodes) goes with them.
        drop(c);
        session.close();
        drop(session);
        let started = Instant::now();
        group.applied(&txid, &NAMES).await;
        assert_eq!(group.states(&txid), vec![FileState::Committed; 3]);
        // Long before the (30 s) deadline: a dead coordinator's complete votes commit at once.
        assert!(started.elapsed() < Duration::from_secs(10));
        let decided = decided_by_recoverer(&mut recovered, &txid).await;
        assert_eq!(decided, (Decision::Commit, "r1".to_string()));
        group.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn participant_crash_after_yes_applies_the_decision_when_back() {
    for target in common::servers().await {
        let (options, mut group) = fresh_group(&target.addr, "txn-back").await;
        let slow = TxnOptions {
            decision_delay: Duration::from_millis(300),
            ack_timeout: Duration::from_millis(500),
            ..options.clone()
        };
        let (_session, c) = coordinator(&target.addr, slow).await;
        let txid = commit_with_p3_killed_after_its_yes(&c, &mut group).await;
        // P3 is in doubt: prepared, outcome not applied.
        assert_eq!(group.resource(2).state(&txid), FileState::Prepared);
        group.restart(2, Duration::ZERO).await;
        let (_, started) = group
            .expect(
                |n, e| n == "P3" && matches!(e, ParticipantEvent::Started { .. }),
                "P3 started",
            )
            .await;
        assert_eq!(
            started,
            ParticipantEvent::Started {
                in_doubt: vec![txid.clone()]
            }
        );
        group.applied(&txid, &["P3"]).await;
        group
            .expect(
                |n, e| n == "P3" && matches!(e, ParticipantEvent::Ready),
                "P3 ready",
            )
            .await;
        assert_eq!(group.states(&txid), vec![FileState::Committed; 3]);
        let probe = common::session(&target.addr, Duration::from_secs(10)).await;
        let layout = Layout::new(&options.root).expect("layout");
        common::eventually("collected after P3's ack", Duration::from_secs(5), || {
            gone(probe.clone(), layout.txn(&txid))
        })
        .await;
        group.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn old_coordinator_and_recoverer_race_for_one_decision() {
    for target in common::servers().await {
        let (options, mut group) = fresh_group(&target.addr, "txn-race").await;
        let layout = Layout::new(&options.root).expect("layout");
        let session = common::session(&target.addr, Duration::from_secs(10)).await;
        // Raw race on the decision node: 20 rounds, the "old coordinator" proposes abort and
        // the "recoverer" commit, released together. Exactly one create wins each round, and
        // both sides come back with the same decision.
        let other = common::session(&target.addr, Duration::from_secs(10)).await;
        let mut winners = std::collections::BTreeMap::new();
        for round in 0..20 {
            let txid = format!("race-{round}-{}", uuid_like(round));
            let barrier = Arc::new(tokio::sync::Barrier::new(2));
            // A transaction whose only participant (R1) never votes: its coordinator writes the
            // tree and then waits, so the decision is open for the racers.
            let tree = Coordinator::new(
                &other,
                TxnOptions {
                    vote_timeout: Duration::from_secs(60),
                    ..options.clone()
                },
            )
            .expect("coordinator");
            let writer = tokio::spawn(
                tree.begin_with_id(&txid, &["R1"], b"")
                    .expect("begin")
                    .commit(),
            );
            common::eventually("tree written", Duration::from_secs(5), || {
                let session = session.clone();
                let path = layout.prepare(&txid);
                async move { matches!(session.client().check_stat(&path).await, Ok(Some(_))) }
            })
            .await;
            let mut racers = Vec::new();
            for (who, proposal) in [
                ("old-coordinator", Decision::Abort("vote timeout".into())),
                ("recoverer", Decision::Commit),
            ] {
                let barrier = Arc::clone(&barrier);
                let session = if who == "recoverer" {
                    other.clone()
                } else {
                    session.clone()
                };
                let layout = layout.clone();
                let txid = txid.clone();
                racers.push(tokio::spawn(async move {
                    barrier.wait().await;
                    decide_by_create(&session, &layout, &txid, &proposal, who).await
                }));
            }
            let mut results = Vec::new();
            for racer in racers {
                results.push(racer.await.expect("racer").expect("decides"));
            }
            assert_eq!(
                results[0], results[1],
                "{}: both see the same decision",
                target.name
            );
            *winners.entry(results[0].1.clone()).or_insert(0) += 1;
            writer.abort();
        }
        eprintln!("{}: race winners {winners:?}", target.name);

        // Full flow: the coordinator is stuck before deciding (decision delay) past its deadline
        // plus grace, so the recoverer takes over while the coordinator is still alive; then the
        // coordinator wakes and writes its own decision. One decision stands, for both.
        let (observer, mut recovered) = recovery_observer();
        let recoverer_session = common::session(&target.addr, Duration::from_secs(10)).await;
        let _recoverer = Recoverer::start(&recoverer_session, &options, "r1", Some(observer))
            .expect("recoverer");
        // Leading before the transaction begins, so that its deadline plus grace (0.5 s) is all
        // it waits for; the coordinator's decision comes 2 s after that.
        assert_eq!(recovered.recv().await, Some(RecoveryEvent::Leading));
        let stuck = TxnOptions {
            vote_timeout: Duration::from_millis(400),
            recovery_grace: Duration::from_millis(100),
            decision_delay: Duration::from_millis(2500),
            ..options.clone()
        };
        let (_s2, old) = coordinator(&target.addr, stuck).await;
        let txn = old.begin(&NAMES, b"x").expect("begin");
        let txid = txn.txid().to_string();
        let outcome = txn.commit().await.expect("old coordinator finishes");
        let by_recoverer = decided_by_recoverer(&mut recovered, &txid).await;
        assert_eq!(Outcome::from(by_recoverer.0.clone()), outcome);
        assert_eq!(by_recoverer.1, "r1", "the recoverer wrote it first");
        group.applied(&txid, &NAMES).await;
        assert_eq!(group.states(&txid), vec![FileState::Committed; 3]);
        group.stop().await;
    }
}

fn uuid_like(round: usize) -> String {
    format!("{round:04}-{}", std::process::id())
}

/// The "GC by TTL": a participant gone for good never acks, so the collect-after-all-acks
/// path never fires. The recovering leader expires the transaction after `retention`, leaving
/// the decision in the straggler's inbox entry; when the straggler does come back it applies
/// that decision (a commit, not a presumed abort) and removes the entry.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn unacked_transaction_expires_and_the_straggler_still_commits() {
    for target in common::servers().await {
        let root = zkit_testkit::unique_path("txn-ttl");
        let options = TxnOptions {
            retention: Duration::from_secs(1),
            ack_timeout: Duration::from_millis(300),
            ..options(&root)
        };
        let mut group = Group::start(&target.addr, options.clone()).await;
        let recoverer_session = common::session(&target.addr, Duration::from_secs(10)).await;
        let _recoverer =
            Recoverer::start(&recoverer_session, &options, "r1", None).expect("recoverer");
        let slow = TxnOptions {
            decision_delay: Duration::from_millis(300),
            ..options.clone()
        };
        let (session, c) = coordinator(&target.addr, slow).await;
        let txid = commit_with_p3_killed_after_its_yes(&c, &mut group).await;
        group.applied(&txid, &["P1", "P2"]).await;
        let layout = Layout::new(&root).expect("layout");
        common::eventually("expired without P3's ack", Duration::from_secs(15), || {
            gone(session.clone(), layout.txn(&txid))
        })
        .await;
        // The decision waits for P3 in its inbox entry.
        let (data, _) = session
            .client()
            .get_data(&layout.inbox_entry("P3", &txid))
            .await
            .expect("P3's inbox entry is kept");
        assert_eq!(
            zkit::txn::layout::decode_decision(&data).0,
            Decision::Commit,
            "{}",
            target.name
        );
        assert_eq!(group.resource(2).state(&txid), FileState::Prepared);
        group.restart(2, Duration::ZERO).await;
        group.applied(&txid, &["P3"]).await;
        assert_eq!(group.states(&txid), vec![FileState::Committed; 3]);
        common::eventually("P3's inbox entry removed", Duration::from_secs(5), || {
            gone(session.clone(), layout.inbox_entry("P3", &txid))
        })
        .await;
        group.stop().await;
    }
}
