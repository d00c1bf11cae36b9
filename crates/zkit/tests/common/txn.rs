//! The two-phase-commit harness the atomicity tests share: a transaction under way on a
//! coordinator of its own (which a test may crash), the wait until a transaction is finished
//! everywhere, and the atomicity checks over the participants' file resources.

use std::path::Path;
use std::time::Duration;

use tokio::task::JoinHandle;
use zkit::txn::file::FileState;
use zkit::txn::layout::Layout;
use zkit::txn::{Coordinator, FileResource, Outcome, TxnError, TxnOptions};
use zkit::Session;

/// A transaction under way: its coordinator on a session of its own, and the commit task.
pub struct RunningTxn {
    session: Session,
    coordinator: Coordinator,
    commit: JoinHandle<Result<Outcome, TxnError>>,
    /// The transaction's id.
    pub txid: String,
}

impl RunningTxn {
    /// Opens a session to `addr`, a coordinator with `options` on it, and starts committing a
    /// transaction across `participants` with `payload`.
    pub async fn begin(
        addr: &str,
        session_timeout: Duration,
        options: TxnOptions,
        participants: &[&str],
        payload: &[u8],
    ) -> RunningTxn {
        let session = super::session(addr, session_timeout).await;
        let coordinator = Coordinator::new(&session, options).expect("coordinator");
        let txn = coordinator.begin(participants, payload).expect("begin");
        let txid = txn.txid().to_string();
        let commit = tokio::spawn(txn.commit());
        RunningTxn {
            session,
            coordinator,
            commit,
            txid,
        }
    }

    /// Whether the commit task has finished.
    pub fn is_finished(&self) -> bool {
        self.commit.is_finished()
    }

    /// A crash: the commit task stops where it is; the last session handle goes, and with it
    /// the ZooKeeper session and its ephemeral nodes (`live/<id>`, `<txid>/owner`).
    pub fn crash(self) {
        self.commit.abort();
        drop(self.coordinator);
        self.session.close();
    }

    /// Waits for the commit's result (the coordinator and its session live on with `self`).
    pub async fn outcome(&mut self) -> Result<Outcome, TxnError> {
        (&mut self.commit).await.expect("commit task")
    }
}

/// Waits (at most `limit`) until transaction `txid` under `root` is finished everywhere: its
/// tree collected and no inbox of `participants` holding it; else panics naming `what` and
/// what is left.
pub async fn wait_finished(
    probe: &Session,
    root: &str,
    participants: &[&str],
    txid: &str,
    limit: Duration,
    what: &str,
) {
    let layout = Layout::new(root).expect("layout");
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        // A failed sync (the probe reconnecting) only means another round.
        let _ = probe.client().sync(root).await;
        let tree = probe.client().check_stat(&layout.txn(txid)).await;
        let mut inboxes_empty = true;
        for p in participants {
            if !matches!(
                probe
                    .client()
                    .check_stat(&layout.inbox_entry(p, txid))
                    .await,
                Ok(None)
            ) {
                inboxes_empty = false;
            }
        }
        if matches!(tree, Ok(None)) && inboxes_empty {
            return;
        }
        if tokio::time::Instant::now() >= deadline {
            let c = probe.client();
            let votes = c.list_children(&layout.votes(txid)).await;
            let acks = c.list_children(&layout.acks(txid)).await;
            let owner = c.check_stat(&layout.owner(txid)).await.map(|s| s.is_some());
            let decision = c.get_data(&layout.decision(txid)).await;
            let live = c.list_children(&layout.live_dir()).await;
            let leader = c.list_children(&layout.leader_dir()).await;
            let children = c.list_children(&layout.txn(txid)).await;
            panic!(
                "{what}: transaction {txid} not finished: children {children:?}, votes \
                 {votes:?}, acks {acks:?}, owner {owner:?}, decision {decision:?}, live \
                 coordinators {live:?}, recoverer lock {leader:?}"
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The file resource of participant `name`, kept in `dir/<name>`.
pub fn file_resource(dir: &Path, name: &str) -> FileResource {
    FileResource::open(name, dir.join(name)).expect("resource")
}

/// Checks that the finished transaction `txid` was atomic across the file resources of
/// `participants` in `dir`: all committed or none, nothing left in doubt (prepared), no vetoed
/// transaction committed, and a surviving coordinator's `outcome` is what was applied. Returns
/// whether it committed.
pub fn check_atomic(
    dir: &Path,
    participants: &[&str],
    txid: &str,
    veto: bool,
    outcome: Option<&Outcome>,
    what: &str,
) -> bool {
    let n = participants.len();
    let states: Vec<FileState> = participants
        .iter()
        .map(|p| file_resource(dir, p).state(txid))
        .collect();
    let committed = states
        .iter()
        .filter(|s| **s == FileState::Committed)
        .count();
    assert!(
        committed == 0 || committed == n,
        "{what}: not atomic: {states:?}"
    );
    assert!(
        !states.contains(&FileState::Prepared),
        "{what}: left in doubt: {states:?}"
    );
    for p in participants {
        assert_eq!(
            file_resource(dir, p).list(FileState::Prepared),
            Vec::<String>::new(),
            "{what}: prepared transactions left"
        );
    }
    if committed == 0 {
        // The tree existed (it is collected only after every ack): everyone applied abort;
        // or the coordinator died before writing it: nobody ever heard of it.
        let aborted = states.iter().filter(|s| **s == FileState::Aborted).count();
        assert!(aborted == n || aborted == 0, "{what}: {states:?}");
    }
    if veto {
        assert_eq!(committed, 0, "{what}: a no vote committed");
    }
    match outcome {
        Some(Outcome::Committed) => assert_eq!(committed, n, "{what}"),
        Some(Outcome::Aborted(_)) => assert_eq!(committed, 0, "{what}"),
        None => {}
    }
    committed == n
}
