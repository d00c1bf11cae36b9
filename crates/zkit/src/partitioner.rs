//! [`SetPartitioner`]: kazoo's `SetPartitioner` (`kazoo/recipe/partitioner.py`): a set of
//! items split among the members of a party, each item held by exactly one member, split
//! again whenever members come or go. The layout is kazoo's, so Python and zkit members share
//! one partitioned set:
//! - `<path>/party`: a [`crate::party::ShallowParty`] of the members (`<uuid-hex>-<identifier>`).
//! - `<path>/locks/<item>`: kazoo's `Lock` per item ([`crate::lock::KazooLock`]): a member holds
//!   the locks of its items while it has them.
//!
//! The split is kazoo's default [`partition`]: items and member identifiers sorted, the
//! member at index `i` of `n` takes items `i, i+n, i+2n, …`. Every member computes the same
//! split from the same party, and the locks make sure nobody works on an item before its
//! previous owner released it.
//!
//! States ([`PartitionState`], kazoo's):
//! - `Allocating`: waiting for the party to be stable for `time_boundary` (kazoo's
//!   `PatientChildrenWatch`), then taking the locks of our items (each with
//!   `max_reaction_time`, restarting when the party changes meanwhile);
//! - `Acquired`: we hold our items ([`SetPartitioner::partitions`]);
//! - `Release`: the party changed, or the connection was suspended: stop working on the items
//!   and call [`SetPartitioner::release_set`], which releases the locks and allocates again;
//! - `Failure`: the session was lost (or [`SetPartitioner::finish`] was called): the
//!   partitioner has left the party and is unusable; make a new one.
//!
//! The transitions are the pure [`transition`]; the async driver only feeds it events.
//!
//! ```no_run
//! # async fn demo(session: zkit::Session) -> zkit::Result<()> {
//! use zkit::partitioner::{PartitionState, SetPartitioner, PartitionerOptions};
//! let items: Vec<String> = (1..=3).map(|i| format!("queue-{i}")).collect();
//! let p = SetPartitioner::start(&session, "/work_queues", &items, "host-7", PartitionerOptions::default())?;
//! loop {
//!     match p.wait_for_change().await {
//!         PartitionState::Acquired => println!("working on {:?}", p.partitions()),
//!         PartitionState::Release => p.release_set().await?,
//!         PartitionState::Failure => break,
//!         PartitionState::Allocating => {}
//!     }
//! }
//! # Ok(()) }
//! ```

use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;
use zkit_client as zk;

use crate::error::{Error, Result};
use crate::lock::{KazooLock, LockGuard};
use crate::party::{shallow_identifier, ShallowParty};
use crate::protected::join;
use crate::session::{Session, SessionState};

/// kazoo's `PartitionState`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PartitionState {
    /// The set is being split and our items' locks taken.
    Allocating,
    /// Our items are held: work on [`SetPartitioner::partitions`].
    Acquired,
    /// The split must change: stop working and call [`SetPartitioner::release_set`].
    Release,
    /// Unusable (session lost, timed out, or finished). Terminal.
    Failure,
}

/// What happens to a partitioner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PartitionEvent {
    /// Every lock of our items is held, and the party did not change meanwhile.
    LocksAcquired,
    /// The party's members changed.
    PartyChanged,
    /// The connection was suspended (or reconnected): kazoo releases on any state change.
    ConnectionChanged,
    /// The session was lost.
    SessionLost,
    /// The user released the set.
    Released,
    /// The user finished, or something failed for good.
    Finished,
}

/// kazoo's state transitions, pure.
pub fn transition(state: PartitionState, event: PartitionEvent) -> PartitionState {
    use PartitionEvent::*;
    use PartitionState::*;
    match (state, event) {
        (Failure, _) | (_, SessionLost) | (_, Finished) => Failure,
        (Allocating, LocksAcquired) => Acquired,
        // Allocation starts over with the new party (kazoo's `_abort_lock_acquisition`).
        (Allocating, PartyChanged) => Allocating,
        (Allocating | Acquired, ConnectionChanged) | (Acquired, PartyChanged) => Release,
        // kazoo's `release_set` allocates again from any state but Failure.
        (_, Released) => Allocating,
        (state, _) => state,
    }
}

/// kazoo's default partition function: the items of `identifier` among `members`. `None` when
/// `identifier` is not a member (yet).
pub fn partition<S: AsRef<str>>(
    identifier: &str,
    members: &[S],
    items: &[S],
) -> Option<Vec<String>> {
    let mut all: Vec<&str> = items.iter().map(AsRef::as_ref).collect();
    all.sort_unstable();
    let mut workers: Vec<&str> = members.iter().map(AsRef::as_ref).collect();
    workers.sort_unstable();
    let i = workers.iter().position(|w| *w == identifier)?;
    Some(
        all.into_iter()
            .skip(i)
            .step_by(workers.len())
            .map(str::to_string)
            .collect(),
    )
}

/// Options of [`SetPartitioner::start`].
#[derive(Debug, Clone, Copy)]
pub struct PartitionerOptions {
    /// How long the party must be unchanged before allocating (kazoo's `time_boundary`,
    /// default 30 s).
    pub time_boundary: Duration,
    /// How long one lock attempt waits before checking whether the party changed (kazoo's
    /// `max_reaction_time`, default 1 s).
    pub max_reaction_time: Duration,
}

impl Default for PartitionerOptions {
    fn default() -> Self {
        PartitionerOptions {
            time_boundary: Duration::from_secs(30),
            max_reaction_time: Duration::from_secs(1),
        }
    }
}

/// The partitioner's state and, when `Acquired`, its items.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Partitioning {
    /// The state.
    pub state: PartitionState,
    /// Our items (empty unless `Acquired`).
    pub partitions: Vec<String>,
}

enum Command {
    Release(oneshot::Sender<()>),
    Finish(oneshot::Sender<()>),
}

/// kazoo's `SetPartitioner`. See the module docs.
#[derive(Debug)]
pub struct SetPartitioner {
    state: watch::Receiver<Partitioning>,
    commands: mpsc::Sender<Command>,
    cancel: CancellationToken,
}

impl Drop for SetPartitioner {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

impl SetPartitioner {
    /// Joins the party at `<path>/party` as `identifier` and starts allocating `items`.
    ///
    /// # Errors
    /// [`Error::BadArguments`] for an invalid path or identifier, or an item that is not a
    /// valid node name.
    pub fn start<S: AsRef<str>>(
        session: &Session,
        path: &str,
        items: &[S],
        identifier: &str,
        options: PartitionerOptions,
    ) -> Result<SetPartitioner> {
        let path = crate::config::resolve_key("/", path)?;
        let items: Vec<String> = items.iter().map(|i| i.as_ref().to_string()).collect();
        for item in &items {
            if item.is_empty() || item.contains('/') || item == "." || item == ".." {
                return Err(Error::BadArguments(format!("invalid set item {item:?}")));
            }
        }
        let party = ShallowParty::join(session, &join(&path, "party"), identifier)?;
        let (state_tx, state) = watch::channel(Partitioning {
            state: PartitionState::Allocating,
            partitions: Vec::new(),
        });
        let (commands, rx) = mpsc::channel(4);
        let cancel = CancellationToken::new();
        let driver = Driver {
            session: session.clone(),
            path,
            items,
            identifier: identifier.to_string(),
            options,
            party: Some(party),
            locks: Vec::new(),
            state: state_tx,
        };
        tokio::spawn(driver.run(rx, cancel.clone()));
        Ok(SetPartitioner {
            state,
            commands,
            cancel,
        })
    }

    /// The current state.
    pub fn state(&self) -> PartitionState {
        self.state.borrow().state
    }

    /// Our items while `Acquired` (empty otherwise).
    pub fn partitions(&self) -> Vec<String> {
        self.state.borrow().partitions.clone()
    }

    /// A receiver of every state change.
    pub fn subscribe(&self) -> watch::Receiver<Partitioning> {
        self.state.clone()
    }

    /// Waits for the next state change and returns the new state (at once with `Failure` once
    /// failed).
    pub async fn wait_for_change(&self) -> PartitionState {
        let mut rx = self.state.clone();
        if rx.borrow_and_update().state == PartitionState::Failure {
            return PartitionState::Failure;
        }
        if rx.changed().await.is_err() {
            return PartitionState::Failure;
        }
        let state = rx.borrow().state;
        state
    }

    /// Waits until `Acquired` (or `Failure`), at most `timeout` (kazoo's `wait_for_acquire`);
    /// returns the state then.
    pub async fn wait_for_acquire(&self, timeout: Duration) -> PartitionState {
        let mut rx = self.state.clone();
        let waited = tokio::time::timeout(
            timeout,
            rx.wait_for(|p| matches!(p.state, PartitionState::Acquired | PartitionState::Failure)),
        )
        .await;
        match waited {
            Ok(Ok(p)) => p.state,
            Ok(Err(_)) => PartitionState::Failure,
            Err(_) => self.state(),
        }
    }

    /// Releases our items' locks and allocates again (kazoo's `release_set`; call it in the
    /// `Release` state).
    ///
    /// # Errors
    /// [`Error::Closed`] when the partitioner has stopped.
    pub async fn release_set(&self) -> Result<()> {
        let (done, wait) = oneshot::channel();
        self.commands
            .send(Command::Release(done))
            .await
            .map_err(|_| Error::Closed)?;
        wait.await.map_err(|_| Error::Closed)
    }

    /// Releases the locks and leaves the party (kazoo's `finish`): `Failure` from now on.
    pub async fn finish(&self) {
        let (done, wait) = oneshot::channel();
        if self.commands.send(Command::Finish(done)).await.is_ok() {
            let _ = wait.await;
        }
    }
}

struct Driver {
    session: Session,
    path: String,
    items: Vec<String>,
    identifier: String,
    options: PartitionerOptions,
    party: Option<ShallowParty>,
    locks: Vec<LockGuard>,
    state: watch::Sender<Partitioning>,
}

/// Why an allocation round ended.
enum Round {
    Acquired(Vec<String>, zk::OneshotWatcher),
    PartyChanged,
}

impl Driver {
    fn current(&self) -> PartitionState {
        self.state.borrow().state
    }

    fn apply(&mut self, event: PartitionEvent, partitions: Vec<String>) -> PartitionState {
        let next = transition(self.current(), event);
        let partitions = if next == PartitionState::Acquired {
            partitions
        } else {
            Vec::new()
        };
        self.state.send_replace(Partitioning {
            state: next,
            partitions,
        });
        next
    }

    async fn release_locks(&mut self) {
        while let Some(guard) = self.locks.pop() {
            let _ = guard.release().await;
        }
    }

    async fn fail(&mut self) {
        self.apply(PartitionEvent::Finished, Vec::new());
        self.release_locks().await;
        if let Some(party) = self.party.take() {
            party.leave().await;
        }
    }

    async fn run(mut self, mut commands: mpsc::Receiver<Command>, cancel: CancellationToken) {
        let mut session_state = self.session.watch_state();
        loop {
            let state = self.current();
            if state == PartitionState::Failure {
                return;
            }
            let step = async {
                match state {
                    PartitionState::Allocating => match self.allocate().await {
                        Ok(Round::Acquired(items, watcher)) => Step::Acquired(items, watcher),
                        Ok(Round::PartyChanged) => Step::Event(PartitionEvent::PartyChanged),
                        Err(Error::Closed) => Step::Event(PartitionEvent::Finished),
                        Err(err) => {
                            tracing::debug!(error = %err, "partition allocation retrying");
                            tokio::time::sleep(Duration::from_millis(200)).await;
                            Step::Event(PartitionEvent::PartyChanged)
                        }
                    },
                    // Release: waiting for the user. (Acquired is handled below, Failure above.)
                    _ => std::future::pending().await,
                }
            };
            let step = tokio::select! {
                () = cancel.cancelled() => Step::Event(PartitionEvent::Finished),
                step = step => step,
                command = commands.recv() => match command {
                    Some(Command::Release(done)) => Step::Release(done),
                    Some(Command::Finish(done)) => Step::Finish(done),
                    None => Step::Event(PartitionEvent::Finished),
                },
                changed = session_state.changed() => session_event(changed, &session_state),
            };
            let event = match step {
                Step::Acquired(items, watcher) => {
                    if self.apply(PartitionEvent::LocksAcquired, items) != PartitionState::Acquired
                    {
                        continue;
                    }
                    // Acquired: wait for the party (or the session, or the user) to change.
                    tokio::select! {
                        () = cancel.cancelled() => PartitionEvent::Finished,
                        _ = watcher.changed() => PartitionEvent::PartyChanged,
                        changed = session_state.changed() => match session_event(changed, &session_state) {
                            Step::Event(event) => event,
                            _ => PartitionEvent::Finished,
                        },
                        command = commands.recv() => match command {
                            Some(Command::Release(done)) => {
                                self.release_locks().await;
                                let _ = done.send(());
                                PartitionEvent::Released
                            }
                            Some(Command::Finish(done)) => {
                                self.fail().await;
                                let _ = done.send(());
                                return;
                            }
                            None => PartitionEvent::Finished,
                        },
                    }
                }
                Step::Event(event) => event,
                Step::Release(done) => {
                    self.release_locks().await;
                    let _ = done.send(());
                    PartitionEvent::Released
                }
                Step::Finish(done) => {
                    self.fail().await;
                    let _ = done.send(());
                    return;
                }
            };
            match self.apply(event, Vec::new()) {
                PartitionState::Failure => {
                    self.fail().await;
                    return;
                }
                // Starting over: give back what a partial allocation took.
                PartitionState::Allocating => self.release_locks().await,
                _ => {}
            }
        }
    }

    /// One allocation: wait for a stable party, split, take our locks.
    async fn allocate(&mut self) -> Result<Round> {
        if let Some(party) = &self.party {
            party.wait_joined(Duration::from_secs(30)).await?;
        }
        let party_path = join(&self.path, "party");
        let (children, watcher) = self.patient_children(&party_path).await?;
        let members: Vec<String> = children
            .iter()
            .map(|c| shallow_identifier(c).to_string())
            .collect();
        let Some(mine) = partition(&self.identifier, &members, &self.items) else {
            // Our own member node is not listed (re-created after a loss): look again.
            return Ok(Round::PartyChanged);
        };
        let mut watcher = Box::pin(watcher.changed());
        for item in &mine {
            let lock = KazooLock::new(&self.session, &join(&join(&self.path, "locks"), item), "");
            loop {
                let attempt = tokio::select! {
                    _ = &mut watcher => return Ok(Round::PartyChanged),
                    attempt = lock.try_lock_for(self.options.max_reaction_time) => attempt,
                };
                match attempt {
                    Ok(guard) => {
                        self.locks.push(guard);
                        break;
                    }
                    // The previous owner still holds it; the party watch decides.
                    Err(Error::Timeout(_)) => continue,
                    Err(err) => return Err(err),
                }
            }
        }
        // The party watch is still armed (it did not fire): hand a fresh one over, taken after
        // a listing that must show the same members.
        let client = self.session.client();
        let (now, fresh) = client.list_and_watch_children(&party_path).await?;
        let mut now_sorted = now.clone();
        now_sorted.sort();
        let mut then_sorted = children;
        then_sorted.sort();
        if now_sorted != then_sorted {
            return Ok(Round::PartyChanged);
        }
        Ok(Round::Acquired(mine, fresh))
    }

    /// kazoo's `PatientChildrenWatch`: the children once they have not changed for
    /// `time_boundary`, with a watch armed on them.
    async fn patient_children(&self, path: &str) -> Result<(Vec<String>, zk::OneshotWatcher)> {
        loop {
            let client = self.session.client();
            let (children, watcher) = client.list_and_watch_children(path).await?;
            drop(client);
            let mut changed = Box::pin(watcher.changed());
            tokio::select! {
                _ = &mut changed => continue,
                () = tokio::time::sleep(self.options.time_boundary) => {}
            }
            // Unchanged for the whole boundary: that watch is still armed; take a new one with a
            // listing (the old future cannot be handed back).
            let client = self.session.client();
            let (again, watcher) = client.list_and_watch_children(path).await?;
            let (mut a, mut b) = (children.clone(), again.clone());
            a.sort();
            b.sort();
            if a == b {
                return Ok((again, watcher));
            }
        }
    }
}

/// The partitioner event of a session state change.
fn session_event(
    changed: std::result::Result<(), watch::error::RecvError>,
    state: &watch::Receiver<crate::session::SessionEvent>,
) -> Step {
    match changed {
        Err(_) => Step::Event(PartitionEvent::Finished),
        Ok(()) => match state.borrow().state {
            SessionState::Lost | SessionState::Closed => Step::Event(PartitionEvent::SessionLost),
            _ => Step::Event(PartitionEvent::ConnectionChanged),
        },
    }
}

enum Step {
    Acquired(Vec<String>, zk::OneshotWatcher),
    Event(PartitionEvent),
    Release(oneshot::Sender<()>),
    Finish(oneshot::Sender<()>),
}

#[cfg(test)]
mod tests {
    use super::*;
    use PartitionEvent::*;
    use PartitionState::*;

    #[test]
    fn kazoos_split_is_disjoint_and_complete() {
        let items: Vec<String> = (0..7).map(|i| format!("q{i}")).collect();
        let members = ["c", "a", "b"];
        let mut seen = Vec::new();
        for m in members {
            let mine = partition(m, &members.map(String::from), &items).unwrap();
            seen.extend(mine);
        }
        seen.sort();
        assert_eq!(seen, items);
        // kazoo: sorted members a, b, c; "a" takes indexes 0, 3, 6 of the sorted items.
        let a = partition("a", &members.map(String::from), &items).unwrap();
        assert_eq!(a, vec!["q0", "q3", "q6"]);
        assert_eq!(partition("zz", &members.map(String::from), &items), None);
        // More members than items: some get nothing.
        let many = ["a", "b", "c", "d", "e", "f", "g", "h"].map(String::from);
        assert_eq!(partition("h", &many, &items).unwrap(), Vec::<String>::new());
    }

    #[test]
    fn transitions_follow_kazoo() {
        assert_eq!(transition(Allocating, LocksAcquired), Acquired);
        assert_eq!(transition(Allocating, PartyChanged), Allocating);
        assert_eq!(transition(Acquired, PartyChanged), Release);
        assert_eq!(transition(Acquired, ConnectionChanged), Release);
        assert_eq!(transition(Allocating, ConnectionChanged), Release);
        assert_eq!(transition(Release, PartyChanged), Release);
        assert_eq!(transition(Release, Released), Allocating);
        for s in [Allocating, Acquired, Release] {
            assert_eq!(transition(s, SessionLost), Failure);
            assert_eq!(transition(s, Finished), Failure);
        }
        for e in [LocksAcquired, PartyChanged, ConnectionChanged, Released] {
            assert_eq!(transition(Failure, e), Failure, "terminal");
        }
        assert_eq!(transition(Acquired, Released), Allocating);
        assert_eq!(transition(Allocating, Released), Allocating);
    }
}
