//! Two-phase commit with real processes and real `kill -9`, against Apache ZooKeeper and the
//! embedded zkit server: participants and a crashing coordinator run as child processes (this
//! test executable re-run in "child" mode, see [`child_process_entry`]), so a kill leaves
//! exactly what a crash leaves: a session that lingers until it expires, files half-way.
//!
//! Scenarios: all-yes and a no vote; a participant killed before voting (abort after the vote
//! timeout); a participant killed after voting yes (applies the decision when back); the
//! coordinator killed before the decision (the recoverer commits); and randomized kills of
//! participant processes at random points, checking atomicity after each.

mod common;

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use rand::Rng;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;
use zkit::txn::file::FileState;
use zkit::txn::layout::Layout;
use zkit::txn::participant::Observer;
use zkit::txn::{Coordinator, FileResource, Outcome, Participant, Recoverer, TxnOptions};

const NAMES: [&str; 3] = ["P1", "P2", "P3"];
const CHILD: &str = "ZKIT_TXN_CHILD";

/// Not a test of its own: the entry point of the child processes the tests below start (with
/// `ZKIT_TXN_CHILD` set). Without that variable it returns at once.
#[test]
fn child_process_entry() {
    let Ok(mode) = std::env::var(CHILD) else {
        return;
    };
    let env = |k: &str| std::env::var(k).unwrap_or_default();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async move {
        let session = common::session(&env("ZKIT_TXN_ADDR"), Duration::from_millis(1000)).await;
        let options = TxnOptions {
            vote_timeout: Duration::from_secs(60),
            decision_delay: Duration::from_millis(
                env("ZKIT_TXN_DECISION_DELAY_MS").parse().unwrap_or(0),
            ),
            ..TxnOptions::with_root(&env("ZKIT_TXN_ROOT"))
        };
        if mode == "participant" {
            let name = env("ZKIT_TXN_NAME");
            let delay = env("ZKIT_TXN_PREPARE_DELAY_MS").parse().unwrap_or(0);
            let resource = FileResource::open(&name, env("ZKIT_TXN_DIR"))
                .expect("resource")
                .with_prepare_delay(Duration::from_millis(delay));
            let observer: Observer = Arc::new(|name, event| println!("EVENT {name} {event:?}"));
            let p = Participant::start(
                &session,
                &options,
                &name,
                Arc::new(resource),
                Some(observer),
            )
            .expect("participant");
            let _ = p.join().await;
        } else {
            let c = Coordinator::new(&session, options).expect("coordinator");
            let txn = c.begin(&NAMES, b"from a child").expect("begin");
            println!("EVENT BEGIN {}", txn.txid());
            let outcome = txn.commit().await;
            println!("EVENT OUTCOME {outcome:?}");
        }
    });
}

struct Procs {
    addr: String,
    root: String,
    dir: tempfile::TempDir,
    children: Vec<(String, Child)>,
    tx: mpsc::UnboundedSender<(String, String)>,
    rx: mpsc::UnboundedReceiver<(String, String)>,
    pending: Vec<(String, String)>,
}

impl Procs {
    fn new(addr: &str, root: &str) -> Procs {
        let (tx, rx) = mpsc::unbounded_channel();
        Procs {
            addr: addr.to_string(),
            root: root.to_string(),
            dir: tempfile::tempdir().expect("tempdir"),
            children: Vec::new(),
            tx,
            rx,
            pending: Vec::new(),
        }
    }

    fn spawn(&mut self, who: &str, envs: &[(&str, String)]) {
        self.pending.retain(|(w, _)| w != who);
        let exe = std::env::current_exe().expect("current_exe");
        let mut child = Command::new(exe)
            .args([
                "--exact",
                "child_process_entry",
                "--nocapture",
                "--test-threads",
                "1",
            ])
            .env(
                CHILD,
                if who == "COORD" {
                    "coordinator"
                } else {
                    "participant"
                },
            )
            .env("ZKIT_TXN_ADDR", &self.addr)
            .env("ZKIT_TXN_ROOT", &self.root)
            .env("ZKIT_TXN_NAME", who)
            .env("ZKIT_TXN_DIR", self.dir.path().join(who))
            .envs(envs.iter().map(|(k, v)| (*k, v.as_str())))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn child");
        let stdout = child.stdout.take().expect("stdout");
        let tx = self.tx.clone();
        let name = who.to_string();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                // libtest's "test child_process_entry ... " has no newline: the first event
                // shares its line.
                if let Some(at) = line.find("EVENT ") {
                    let _ = tx.send((name.clone(), line[at + "EVENT ".len()..].to_string()));
                }
            }
        });
        self.children.push((who.to_string(), child));
    }

    fn participant(&mut self, who: &str, prepare_delay_ms: u64) {
        self.spawn(
            who,
            &[("ZKIT_TXN_PREPARE_DELAY_MS", prepare_delay_ms.to_string())],
        );
    }

    async fn kill9(&mut self, who: &str) {
        if let Some(i) = self.children.iter().position(|(w, _)| w == who) {
            let (_, mut child) = self.children.remove(i);
            child.start_kill().expect("kill -9");
            child.wait().await.expect("reap");
        }
    }

    async fn expect(&mut self, who: &str, words: &[&str]) -> String {
        let hit = |(w, text): &(String, String)| w == who && words.iter().all(|x| text.contains(x));
        if let Some(i) = self.pending.iter().position(hit) {
            return self.pending.remove(i).1;
        }
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            match tokio::time::timeout_at(deadline, self.rx.recv()).await {
                Ok(Some(line)) if hit(&line) => return line.1,
                Ok(Some(line)) => self.pending.push(line),
                _ => panic!("timed out waiting for {who} {words:?}"),
            }
        }
    }

    fn state(&self, who: &str, txid: &str) -> FileState {
        FileResource::open(who, self.dir.path().join(who))
            .expect("resource")
            .state(txid)
    }

    fn states(&self, txid: &str) -> Vec<FileState> {
        NAMES.iter().map(|p| self.state(p, txid)).collect()
    }
}

fn options(root: &str) -> TxnOptions {
    TxnOptions {
        vote_timeout: Duration::from_millis(1500),
        ack_timeout: Duration::from_millis(500),
        recovery_grace: Duration::from_millis(200),
        ..TxnOptions::with_root(root)
    }
}

async fn start(addr: &str) -> (Procs, TxnOptions) {
    let root = zkit_testkit::unique_path("txn-proc");
    let mut procs = Procs::new(addr, &root);
    for p in NAMES {
        procs.participant(p, 0);
    }
    for p in NAMES {
        procs.expect(p, &["Ready"]).await;
    }
    (procs, options(&root))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn processes_commit_abort_and_survive_kill9_before_and_after_voting() {
    for target in common::servers().await {
        let (mut procs, options) = start(&target.addr).await;
        let session = common::session(&target.addr, Duration::from_secs(10)).await;
        let c = Coordinator::new(&session, options.clone()).expect("coordinator");
        for _ in 0..5 {
            let txn = c.begin(&NAMES, b"ok").expect("begin");
            let txid = txn.txid().to_string();
            assert_eq!(txn.commit().await, Ok(Outcome::Committed));
            assert_eq!(procs.states(&txid), vec![FileState::Committed; 3]);
        }
        let txn = c.begin(&NAMES, b"veto=P2").expect("begin");
        let txid = txn.txid().to_string();
        assert!(matches!(txn.commit().await, Ok(Outcome::Aborted(_))));
        assert_eq!(procs.states(&txid), vec![FileState::Aborted; 3]);

        // kill -9 before voting.
        procs.kill9("P3").await;
        procs.participant("P3", 60_000);
        procs.expect("P3", &["Ready"]).await;
        let txn = c.begin(&NAMES, b"x").expect("begin");
        let txid = txn.txid().to_string();
        let commit = tokio::spawn(txn.commit());
        procs.expect("P3", &["Prepare", &txid]).await;
        procs.kill9("P3").await;
        match commit.await.expect("task") {
            Ok(Outcome::Aborted(reason)) => assert!(reason.contains("vote timeout"), "{reason}"),
            other => panic!("{}: {other:?}", target.name),
        }
        assert_eq!(
            procs.states(&txid)[..2],
            [FileState::Aborted, FileState::Aborted]
        );
        procs.participant("P3", 0);
        procs.expect("P3", &["Applied", &txid]).await;
        assert_eq!(procs.state("P3", &txid), FileState::Aborted);

        // kill -9 after voting yes.
        let slow = Coordinator::new(
            &session,
            TxnOptions {
                decision_delay: Duration::from_millis(300),
                ..options.clone()
            },
        )
        .expect("coordinator");
        let txn = slow.begin(&NAMES, b"y").expect("begin");
        let txid = txn.txid().to_string();
        let commit = tokio::spawn(txn.commit());
        procs.expect("P3", &["Voted", &txid, "Yes"]).await;
        procs.kill9("P3").await;
        assert_eq!(commit.await.expect("task"), Ok(Outcome::Committed));
        assert_eq!(procs.state("P3", &txid), FileState::Prepared);
        procs.participant("P3", 0);
        let started = procs.expect("P3", &["Started"]).await;
        assert!(started.contains(&txid), "{started}");
        procs.expect("P3", &["Applied", &txid, "Commit"]).await;
        assert_eq!(procs.states(&txid), vec![FileState::Committed; 3]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn coordinator_process_killed_before_decision_is_committed_by_the_recoverer() {
    for target in common::servers().await {
        let (mut procs, options) = start(&target.addr).await;
        let session = common::session(&target.addr, Duration::from_secs(10)).await;
        let _recoverer = Recoverer::start(&session, &options, "r", None).expect("recoverer");
        procs.spawn("COORD", &[("ZKIT_TXN_DECISION_DELAY_MS", "60000".into())]);
        let begin = procs.expect("COORD", &["BEGIN"]).await;
        let txid = begin.trim_start_matches("BEGIN ").to_string();
        for p in NAMES {
            procs.expect(p, &["Voted", &txid, "Yes"]).await;
        }
        procs.kill9("COORD").await;
        // The coordinator's session expires (its ephemeral nodes go); the recoverer resumes and
        // commits; every participant applies it.
        for p in NAMES {
            procs.expect(p, &["Applied", &txid, "Commit"]).await;
        }
        assert_eq!(procs.states(&txid), vec![FileState::Committed; 3]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn random_kill9_of_participant_processes_keeps_atomicity() {
    for target in common::servers().await {
        let (mut procs, options) = start(&target.addr).await;
        let session = common::session(&target.addr, Duration::from_secs(10)).await;
        let _recoverer = Recoverer::start(&session, &options, "r", None).expect("recoverer");
        let c = Coordinator::new(&session, options.clone()).expect("coordinator");
        let layout = Layout::new(&procs.root).expect("layout");
        for run in 0..8 {
            let victim = NAMES[rand::thread_rng().gen_range(0..3)];
            let at = Duration::from_micros(rand::thread_rng().gen_range(0..30_000));
            let veto = run % 4 == 3;
            let txn = c
                .begin(&NAMES, if veto { b"veto=P1" } else { b"ok" })
                .expect("begin");
            let txid = txn.txid().to_string();
            let commit = tokio::spawn(txn.commit());
            tokio::time::sleep(at).await;
            procs.kill9(victim).await;
            procs.participant(victim, 0);
            let outcome = commit.await.expect("task").expect("commit");
            procs.expect(victim, &["Ready"]).await;
            common::eventually("transaction finished", Duration::from_secs(20), || {
                let session = session.clone();
                let path = layout.txn(&txid);
                async move { matches!(session.client().check_stat(&path).await, Ok(None)) }
            })
            .await;
            let states = procs.states(&txid);
            let want = match outcome {
                Outcome::Committed => FileState::Committed,
                Outcome::Aborted(_) => FileState::Aborted,
            };
            assert_eq!(
                states,
                vec![want; 3],
                "{}: run {run}, {victim} killed at {at:?}",
                target.name
            );
            assert!(!veto || want == FileState::Aborted);
        }
    }
}
