//! The coordinator side (HBase's `Procedure` + `ZKProcedureCoordinator`): [`Coordinator::run`]
//! drives one instance through both barriers and returns every member's result, or the abort
//! naming the failing member; [`Coordinator::recover`] resolves instances left by a coordinator
//! that died.
//!
//! The driver only observes znodes (setting watches), asks [`decide_coordinator`] and acts; it
//! must not make decisions of its own.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use zkit_client as zk;

use super::decide::{
    decide_coordinator, pending_acks, AbortReason, CoordinatorStep, CoordinatorView, COORDINATOR,
};
use super::layout::{self, check_name, InstanceHeader, Layout};
use super::tree::{
    children_key, connection_trouble, delete_tree, ensure_dirs, exists, exists_key, list,
    retry_connection, wait_any, when, Wake, WatchSet, RECOVERABLE_PAUSE,
};
use super::ProcedureError;
use crate::Session;

/// Results of a completed procedure: member name → the bytes its `inside_barrier` returned.
pub type MemberResults = BTreeMap<String, Vec<u8>>;

/// One instance resolved by [`Coordinator::recover`].
#[derive(Debug, Clone, PartialEq)]
pub struct Recovered {
    /// The instance name.
    pub instance: String,
    /// Completed with these results (its barrier had been released, so it was finished), or
    /// aborted.
    pub outcome: Result<MemberResults, ProcedureError>,
}

/// Runs procedures as their coordinator. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Coordinator {
    session: Session,
    base: String,
    /// Signatures whose directories are known to exist, with the session generation that saw
    /// them: `run` skips the five `mkdir`s (on Apache ZooKeeper every failed create is a logged
    /// write). A directory deleted behind our back shows up as `NoNode` and is made again.
    ensured: Arc<StdMutex<HashSet<(String, u64)>>>,
}

impl Coordinator {
    /// A coordinator for procedures under `base` (e.g. [`super::DEFAULT_BASE`]).
    pub fn new(session: &Session, base: &str) -> Coordinator {
        Coordinator {
            session: session.clone(),
            base: base.to_string(),
            ensured: Arc::default(),
        }
    }

    /// Creates the directories of `signature` unless this coordinator saw them on this session.
    async fn ensure_dirs_once(
        &self,
        client: &zk::Client,
        layout: &Layout,
        signature: &str,
        generation: u64,
    ) -> Result<(), zk::Error> {
        let key = (signature.to_string(), generation);
        if self.ensured_lock().contains(&key) {
            return Ok(());
        }
        ensure_dirs(client, layout).await?;
        self.ensured_lock().insert(key);
        Ok(())
    }

    fn ensured_lock(&self) -> std::sync::MutexGuard<'_, HashSet<(String, u64)>> {
        self.ensured.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs instance `instance` of procedure `signature` with `args` on `expected_members` and
    /// returns each member's result once all of them finished `inside_barrier`.
    ///
    /// The expected members must be registered ([`super::Member::start`]) when this is called:
    /// a missing or dying member aborts the procedure at once. On every outcome the instance's
    /// znodes are removed before this returns.
    ///
    /// # Errors
    /// - [`ProcedureError::Aborted`] naming the failing member (or `coordinator` for the
    ///   timeout); every member that took part runs `cleanup`.
    /// - [`ProcedureError::DuplicateInstance`] when `instance` is running or has stale state.
    /// - [`ProcedureError::BadName`], [`ProcedureError::Zk`].
    ///
    /// # Cancellation safety
    /// Dropping the future aborts the procedure: a background task writes `abort/<instance>`
    /// (reason "cancelled") and removes the instance's znodes, so members clean up.
    pub async fn run(
        &self,
        signature: &str,
        instance: &str,
        args: &[u8],
        expected_members: &[String],
        timeout: Duration,
    ) -> Result<MemberResults, ProcedureError> {
        let layout = Layout::new(&self.base, signature)?;
        check_name("instance", instance)?;
        let expected: BTreeSet<String> = expected_members.iter().cloned().collect();
        if expected.is_empty() {
            return Err(ProcedureError::BadName("no expected members".into()));
        }
        for member in &expected {
            check_name("member", member)?;
        }
        self.session.wait_connected().await?;
        let (client, generation) = self.session.client_and_generation();
        self.ensure_dirs_once(&client, &layout, signature, generation)
            .await?;

        // Leftovers of a dead coordinator's instance of the same name: `reached/<instance>`
        // or `abort/<instance>` without `acquired/<instance>` (a stale `acquired/<instance>`
        // makes the create below fail). Nothing creates either without a live owner of the
        // name or an existing `acquired/<instance>` (members abort with a check on it), so
        // the `multi` below cannot race with a new one appearing. Read together: one round trip.
        let (stale_reached, stale_abort) = tokio::join!(
            client.check_stat(&layout.reached(instance)),
            client.check_stat(&layout.abort(instance)),
        );
        if stale_reached?.is_some() || stale_abort?.is_some() {
            return Err(ProcedureError::DuplicateInstance(instance.to_string()));
        }

        let mut guard = CancelGuard {
            armed: true,
            client: client.clone(),
            layout: layout.clone(),
            instance: instance.to_string(),
        };
        let header = InstanceHeader {
            v: 1,
            members: expected.clone(),
            timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
        };
        let data = layout::encode_instance(&header, args);
        let start = Instant::now();
        // Claim the instance name and publish the instance in one `multi` (one write): the
        // ephemeral owner node makes a second run fail, and tells a later `recover` whether
        // the owner is still alive; `acquired/<instance>` starts the members.
        let mut created = claim_and_publish(&client, &layout, instance, &data).await;
        if matches!(created, Err(zk::Error::NoNode)) {
            // The directories were deleted behind our back: make them again, once.
            self.ensured_lock()
                .remove(&(signature.to_string(), generation));
            self.ensure_dirs_once(&client, &layout, signature, generation)
                .await?;
            created = claim_and_publish(&client, &layout, instance, &data).await;
        }
        if matches!(created, Err(zk::Error::NodeExists)) {
            // Nothing was written (a `multi` is all or nothing).
            guard.armed = false;
            return Err(ProcedureError::DuplicateInstance(instance.to_string()));
        }
        let result = match created {
            Ok(_) => drive(&client, &layout, instance, &expected, start + timeout).await,
            Err(err) => {
                // The `multi` may have gone through before the connection broke. Abort and
                // remove it only if the owner node is ours: otherwise it is someone else's.
                let ours = matches!(
                    client.check_stat(&layout.running(instance)).await,
                    Ok(Some(stat)) if stat.ephemeral_owner == client.session_id().0
                );
                if !ours {
                    guard.armed = false;
                    return Err(err.into());
                }
                finish_aborted(
                    &client,
                    &layout,
                    instance,
                    &AbortReason::new(COORDINATOR, err.to_string()),
                )
                .await;
                Err(err.into())
            }
        };
        guard.armed = false;
        tracing::debug!(signature, instance, elapsed = ?start.elapsed(), ok = result.is_ok(), "procedure done");
        result
    }

    /// Resolves the instances of `signature` whose coordinator is gone (no `running/<instance>`
    /// node): an instance whose barrier was released is finished (members may already have run
    /// `inside_barrier`, so aborting it would leave them half-committed), with the timeout it
    /// was started with; any other is aborted with reason "coordinator restarted". Instances
    /// owned by a live coordinator are left alone. Returns what it resolved.
    ///
    /// HBase's coordinator instead wipes every procedure znode when it starts.
    ///
    /// # Errors
    /// [`ProcedureError::BadName`], [`ProcedureError::Zk`]; per-instance outcomes are in the
    /// returned list.
    pub async fn recover(&self, signature: &str) -> Result<Vec<Recovered>, ProcedureError> {
        let layout = Layout::new(&self.base, signature)?;
        self.session.wait_connected().await?;
        let client = self.session.client();
        ensure_dirs(&client, &layout).await?;
        let mut instances = BTreeSet::new();
        for dir in [
            layout.acquired_dir(),
            layout.reached_dir(),
            layout.abort_dir(),
        ] {
            instances.extend(client.list_children(&dir).await?);
        }
        let ephemeral = zk::CreateMode::Ephemeral.with_acls(zk::Acls::anyone_all());
        let mut resolved = Vec::new();
        for instance in instances {
            match client
                .create(&layout.running(&instance), &[], &ephemeral)
                .await
            {
                Ok(_) => {}
                // A live coordinator (or another recovering one) owns it.
                Err(zk::Error::NodeExists) => continue,
                Err(err) => return Err(err.into()),
            }
            let outcome = recover_one(&client, &layout, &instance).await;
            resolved.push(Recovered { instance, outcome });
        }
        Ok(resolved)
    }
}

/// `running/<instance>` (ephemeral) and `acquired/<instance>` with `data`, in one `multi`.
async fn claim_and_publish(
    client: &zk::Client,
    layout: &Layout,
    instance: &str,
    data: &[u8],
) -> Result<(), zk::Error> {
    let ephemeral = zk::CreateMode::Ephemeral.with_acls(zk::Acls::anyone_all());
    let persistent = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
    let mut multi = client.new_multi_writer();
    multi.add_create(&layout.running(instance), &[], &ephemeral)?;
    multi.add_create(&layout.acquired(instance), data, &persistent)?;
    multi.commit().await.map(|_| ()).map_err(zk::Error::from)
}

async fn recover_one(
    client: &zk::Client,
    layout: &Layout,
    instance: &str,
) -> Result<MemberResults, ProcedureError> {
    let header = match client.get_data(&layout.acquired(instance)).await {
        Ok((data, _)) => layout::decode_instance(&data).0,
        Err(zk::Error::NoNode) => None,
        Err(err) => return Err(err.into()),
    };
    let released = client
        .check_stat(&layout.reached(instance))
        .await?
        .is_some();
    let aborted = match client.get_data(&layout.abort(instance)).await {
        Ok((data, _)) => Some(layout::decode_abort(&data)),
        Err(zk::Error::NoNode) => None,
        Err(err) => return Err(err.into()),
    };
    match (header, aborted) {
        (Some(header), None) if released => {
            let deadline = Instant::now() + Duration::from_millis(header.timeout_ms);
            drive(client, layout, instance, &header.members, deadline).await
        }
        (_, aborted) => {
            let reason = aborted.unwrap_or_else(|| {
                AbortReason::new(
                    COORDINATOR,
                    "coordinator restarted before releasing the barrier",
                )
            });
            let reason = write_abort(client, layout, instance, &reason)
                .await
                .unwrap_or(reason);
            wait_for_acks(client, layout, instance).await;
            cleanup(client, layout, instance).await?;
            Err(ProcedureError::Aborted {
                instance: instance.to_string(),
                reason,
            })
        }
    }
}

/// What the coordinator last read of each watched node; an entry is reused while its watch
/// is still armed (the node has not changed since), so a round after one member's create
/// re-reads only `acquired/<instance>`'s children instead of everything.
#[derive(Default)]
struct Cache {
    acquired: Option<Option<Vec<String>>>,
    reached_exists: Option<bool>,
    reached: Option<Option<Vec<String>>>,
    abort_exists: Option<bool>,
    abort: Option<AbortReason>,
    live: Option<Option<Vec<String>>>,
}

/// Reads the instance's znodes into a view, keeping a watch armed on everything the decision
/// depends on. Only nodes whose watch fired (or never read) are read again; the rest come from
/// `cache`: together a view as current as the last reply.
async fn observe(
    client: &zk::Client,
    layout: &Layout,
    instance: &str,
    deadline: Instant,
    watches: &mut WatchSet,
    cache: &mut Cache,
) -> Result<CoordinatorView, zk::Error> {
    let acquired_path = layout.acquired(instance);
    let reached_path = layout.reached(instance);
    let abort_path = layout.abort(instance);
    let members_dir = layout.members_dir();
    let [k_acquired, k_reached, k_abort, k_members, k_reached_children] = [
        children_key(&acquired_path),
        exists_key(&reached_path),
        exists_key(&abort_path),
        children_key(&members_dir),
        children_key(&reached_path),
    ];
    watches.drop_fired();
    let read_acquired = watches.stale(&k_acquired, cache.acquired.is_some());
    let read_reached = watches.stale(&k_reached, cache.reached_exists.is_some());
    let read_abort = watches.stale(&k_abort, cache.abort_exists.is_some());
    let read_live = watches.stale(&k_members, cache.live.is_some());
    // Issued together: the client pipelines them on one connection.
    let (acquired, reached, abort, live) = tokio::join!(
        when(read_acquired, list(client, &acquired_path, true)),
        when(read_reached, exists(client, &reached_path, true)),
        when(read_abort, exists(client, &abort_path, true)),
        when(read_live, list(client, &members_dir, true)),
    );
    if let Some(acquired) = watches.keep(k_acquired, acquired)? {
        cache.acquired = Some(acquired);
    }
    if let Some(reached) = watches.keep(k_reached, reached)? {
        cache.reached_exists = Some(reached);
    }
    if let Some(abort) = watches.keep(k_abort, abort)? {
        cache.abort_exists = Some(abort);
    }
    if let Some(live) = watches.keep(k_members, live)? {
        cache.live = Some(live);
    }
    let mut view = CoordinatorView::default();
    if let Some(Some(acquired)) = &cache.acquired {
        view.instance_exists = true;
        view.acquired = acquired.iter().cloned().collect();
    }
    if cache.reached_exists == Some(true) {
        if watches.stale(&k_reached_children, cache.reached.is_some()) {
            let (reached, w) = list(client, &reached_path, true).await?;
            watches.arm_some(k_reached_children, w);
            cache.reached = Some(reached);
        }
        if let Some(Some(reached)) = &cache.reached {
            view.reached_exists = true;
            view.reached = reached.iter().cloned().collect();
        }
    }
    if cache.abort_exists == Some(true) {
        // Written once (first writer wins): read it once.
        if cache.abort.is_none() {
            match client.get_data(&abort_path).await {
                Ok((data, _)) => cache.abort = Some(layout::decode_abort(&data)),
                Err(zk::Error::NoNode) => {}
                Err(err) => return Err(err),
            }
        }
        view.abort = cache.abort.clone();
    }
    if let Some(live) = &cache.live {
        view.live = live.iter().flatten().cloned().collect();
    }
    view.timed_out = Instant::now() >= deadline;
    Ok(view)
}

/// Drives an instance whose `acquired/<instance>` exists to its end, then removes its znodes.
async fn drive(
    client: &zk::Client,
    layout: &Layout,
    instance: &str,
    expected: &BTreeSet<String>,
    deadline: Instant,
) -> Result<MemberResults, ProcedureError> {
    let never = CancellationToken::new();
    let mut watches = WatchSet::default();
    let mut cache = Cache::default();
    let aborted = |reason: AbortReason| ProcedureError::Aborted {
        instance: instance.to_string(),
        reason,
    };
    loop {
        let view = match observe(client, layout, instance, deadline, &mut watches, &mut cache).await
        {
            Ok(observed) => observed,
            // A lost connection on a live session (an ensemble electing a new leader): our
            // owner node stays; read again once reconnected (the deadline still counts).
            Err(err) if connection_trouble(&err) => {
                tokio::time::sleep(RECOVERABLE_PAUSE).await;
                continue;
            }
            Err(err) => {
                let reason =
                    AbortReason::new(COORDINATOR, format!("coordinator lost ZooKeeper: {err}"));
                finish_aborted(client, layout, instance, &reason).await;
                return Err(err.into());
            }
        };
        match decide_coordinator(expected, &view) {
            CoordinatorStep::Wait => {
                watches.wait(Some(deadline), &never).await;
            }
            CoordinatorStep::ReleaseBarrier => {
                let persistent = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
                let reached = layout.reached(instance);
                match retry_connection(|| client.create(&reached, &[], &persistent)).await {
                    Ok(_) | Err(zk::Error::NodeExists) => {}
                    Err(err) => {
                        let reason = AbortReason::new(
                            COORDINATOR,
                            format!("releasing the barrier failed: {err}"),
                        );
                        finish_aborted(client, layout, instance, &reason).await;
                        return Err(err.into());
                    }
                }
            }
            CoordinatorStep::Complete => {
                // Every result in one multi-read (one request, however many members).
                let reads = retry_connection(|| async {
                    let mut reader = client.new_multi_reader();
                    for member in expected {
                        reader.add_get_data(&layout.reached_member(instance, member))?;
                    }
                    reader.commit().await
                })
                .await?;
                let mut results = MemberResults::new();
                for (member, read) in expected.iter().zip(reads) {
                    match read {
                        zk::MultiReadResult::Data { data, .. } => {
                            results.insert(member.clone(), data);
                        }
                        zk::MultiReadResult::Error { err } => return Err(err.into()),
                        _ => {
                            return Err(zk::Error::UnexpectedError(
                                "multi-read answered getData with something else".into(),
                            )
                            .into())
                        }
                    }
                }
                // reached/<instance> exists, so nobody waiting on it hangs (HBASE-13885). The
                // view lists every child, so the removal needs no listing: one `multi`.
                if !cleanup_known(client, layout, instance, &view).await {
                    retry_connection(|| cleanup(client, layout, instance)).await?;
                }
                return Ok(results);
            }
            CoordinatorStep::Abort(reason) => {
                let reason = retry_connection(|| write_abort(client, layout, instance, &reason))
                    .await
                    .unwrap_or(reason);
                wait_for_acks(client, layout, instance).await;
                retry_connection(|| cleanup(client, layout, instance)).await?;
                return Err(aborted(reason));
            }
            CoordinatorStep::Aborted(reason) => {
                wait_for_acks(client, layout, instance).await;
                retry_connection(|| cleanup(client, layout, instance)).await?;
                return Err(aborted(reason));
            }
        }
    }
}

/// After `abort/<instance>` exists: waits (at most [`ACK_GRACE`]) until no live member still has
/// its `acquired/<instance>/<member>` node, i.e. every live member that joined ran `cleanup`
/// and deleted its node. So when [`Coordinator::run`] reports an abort, the members' cleanups
/// are done, and the instance's znodes are not pulled from under members still reading them.
async fn wait_for_acks(client: &zk::Client, layout: &Layout, instance: &str) {
    let deadline = Instant::now() + ACK_GRACE;
    let never = CancellationToken::new();
    loop {
        let (acquired, live) = tokio::join!(
            client.list_and_watch_children(&layout.acquired(instance)),
            client.list_and_watch_children(&layout.members_dir()),
        );
        let ((acquired, w1), (live, w2)) = match (acquired, live) {
            (Ok(acquired), Ok(live)) => (acquired, live),
            (Err(err), _) | (_, Err(err)) => {
                if connection_trouble(&err) && Instant::now() < deadline {
                    tokio::time::sleep(RECOVERABLE_PAUSE).await;
                    continue;
                }
                return;
            }
        };
        let acquired: BTreeSet<String> = acquired.into_iter().collect();
        let live: BTreeSet<String> = live.into_iter().collect();
        let pending = pending_acks(&acquired, &live);
        if pending.is_empty() {
            return;
        }
        if wait_any(vec![w1, w2], Some(deadline), &never).await == Wake::Deadline {
            tracing::warn!(
                instance,
                ?pending,
                "members did not acknowledge the abort in time"
            );
            return;
        }
    }
}

/// How long an aborting coordinator waits for live members to finish their cleanup.
pub const ACK_GRACE: Duration = Duration::from_secs(10);

/// Writes `abort/<instance>`; when someone else aborted first, returns their reason (the first
/// abort wins, as in HBase).
async fn write_abort(
    client: &zk::Client,
    layout: &Layout,
    instance: &str,
    reason: &AbortReason,
) -> Result<AbortReason, zk::Error> {
    let persistent = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
    let path = layout.abort(instance);
    match client
        .create(&path, &layout::encode_abort(reason), &persistent)
        .await
    {
        Ok(_) => Ok(reason.clone()),
        Err(zk::Error::NodeExists) => match client.get_data(&path).await {
            Ok((data, _)) => Ok(layout::decode_abort(&data)),
            Err(zk::Error::NoNode) => Ok(reason.clone()),
            Err(err) => Err(err),
        },
        Err(err) => Err(err),
    }
}

/// Removes an instance's znodes. The caller made sure `reached/<instance>` or `abort/<instance>`
/// exists first, so members waiting on either wake up (HBASE-13885). `acquired/<instance>` goes
/// first: a member's abort is conditional on it, so no abort node appears after ours is gone.
async fn cleanup(client: &zk::Client, layout: &Layout, instance: &str) -> Result<(), zk::Error> {
    let acquired = layout.acquired(instance);
    let reached = layout.reached(instance);
    let abort = layout.abort(instance);
    let running = layout.running(instance);
    // Fast path: everything in one multi (one round trip, one log sync, nobody sees a half-removed
    // instance). It fails as a whole when a member changed something in between; re-read then.
    for _ in 0..CLEANUP_MULTI_ATTEMPTS {
        let (acquired_children, reached_children, abort_exists, running_exists) = tokio::join!(
            list(client, &acquired, false),
            list(client, &reached, false),
            exists(client, &abort, false),
            exists(client, &running, false),
        );
        let mut paths = Vec::new();
        for (dir, children) in [
            (&acquired, acquired_children?.0),
            (&reached, reached_children?.0),
        ] {
            if let Some(children) = children {
                paths.extend(children.iter().map(|child| format!("{dir}/{child}")));
                paths.push(dir.clone());
            }
        }
        for (path, present) in [(&abort, abort_exists?.0), (&running, running_exists?.0)] {
            if present {
                paths.push(path.clone());
            }
        }
        if paths.is_empty() {
            return Ok(());
        }
        let mut multi = client.new_multi_writer();
        for path in &paths {
            multi.add_delete(path, None)?;
        }
        match multi.commit().await.map_err(zk::Error::from) {
            Ok(_) => return Ok(()),
            Err(zk::Error::NotEmpty | zk::Error::NoNode) => continue,
            Err(err) => return Err(err),
        }
    }
    delete_tree(client, &acquired).await?;
    delete_tree(client, &reached).await?;
    delete_tree(client, &abort).await?;
    delete_tree(client, &running).await
}

/// Removes a completed instance's znodes as `view` lists them, in one `multi` without reading
/// anything first. Returns `false` (nothing changed) when the tree holds something else.
async fn cleanup_known(
    client: &zk::Client,
    layout: &Layout,
    instance: &str,
    view: &CoordinatorView,
) -> bool {
    let mut paths: Vec<String> = view
        .acquired
        .iter()
        .map(|m| layout.acquired_member(instance, m))
        .collect();
    paths.push(layout.acquired(instance));
    paths.extend(
        view.reached
            .iter()
            .map(|m| layout.reached_member(instance, m)),
    );
    paths.push(layout.reached(instance));
    if view.abort.is_some() {
        paths.push(layout.abort(instance));
    }
    paths.push(layout.running(instance));
    let mut multi = client.new_multi_writer();
    for path in &paths {
        if multi.add_delete(path, None).is_err() {
            return false;
        }
    }
    multi.commit().await.is_ok()
}

/// Attempts of the single-multi cleanup before deleting node by node.
const CLEANUP_MULTI_ATTEMPTS: usize = 3;

/// Best effort abort + cleanup after an error; errors are logged, the caller reports the first.
async fn finish_aborted(
    client: &zk::Client,
    layout: &Layout,
    instance: &str,
    reason: &AbortReason,
) {
    if let Err(err) = retry_connection(|| write_abort(client, layout, instance, reason)).await {
        tracing::warn!(instance, error = %err, "could not write abort node");
    }
    if let Err(err) = retry_connection(|| cleanup(client, layout, instance)).await {
        tracing::warn!(instance, error = %err, "could not remove procedure znodes");
    }
}

/// Aborts the instance in the background when [`Coordinator::run`] is dropped mid-way.
struct CancelGuard {
    armed: bool,
    client: zk::Client,
    layout: Layout,
    instance: String,
}

impl Drop for CancelGuard {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (client, layout, instance) = (
            self.client.clone(),
            self.layout.clone(),
            std::mem::take(&mut self.instance),
        );
        runtime.spawn(async move {
            let reason = AbortReason::new(COORDINATOR, "the coordinator cancelled the procedure");
            finish_aborted(&client, &layout, &instance, &reason).await;
        });
    }
}
