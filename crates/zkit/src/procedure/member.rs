//! The member side (HBase's `ProcedureMember` + `ZKProcedureMemberRpcs` + `Subprocedure`):
//! [`Member::start`] registers a live member node, watches `acquired/` for new instances and runs
//! one [`Subprocedure`] per instance through both barriers, or its `cleanup` on abort.
//!
//! The driver only observes znodes, asks [`decide_member`] and acts; it must not make decisions
//! of its own, and it never creates a parent node (so it cannot re-create what a coordinator's
//! cleanup removed).

use std::collections::HashSet;
use std::sync::{Arc, Mutex as StdMutex};

use futures::future::BoxFuture;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use zkit_client as zk;

use super::decide::{decide_member, AbortReason, MemberLocal, MemberStep, MemberView, COORDINATOR};
use super::layout::{self, check_name, Layout};
use super::tree::{
    connection_trouble, ensure_dirs, exists, exists_created_at, exists_key, retry_connection, when,
    Wake, WatchSet, RECOVERABLE_PAUSE,
};
use super::ProcedureError;
use crate::Session;

/// The work of one member in one procedure instance (HBase's `Subprocedure`).
///
/// `cleanup` runs when the procedure is aborted after `acquire_barrier` started (by this member's
/// own failure, another member's, the coordinator's timeout or cancellation, or a dead member);
/// it must undo whatever `acquire_barrier` prepared, and tolerate being called after a failed or
/// partial `acquire_barrier`. It does not run after success.
pub trait Subprocedure: Send {
    /// Phase one: prepare with the coordinator's arguments. An `Err` aborts the procedure for
    /// everyone, with this member named as the source and the string as the message.
    fn acquire_barrier(&mut self, args: Vec<u8>) -> BoxFuture<'_, Result<(), String>>;
    /// Phase two, once every expected member acquired: do the work; the bytes are this
    /// member's result, handed to the coordinator. An `Err` aborts the procedure.
    fn inside_barrier(&mut self) -> BoxFuture<'_, Result<Vec<u8>, String>>;
    /// Undo after an abort; `reason` says who aborted and why.
    fn cleanup(&mut self, reason: AbortReason) -> BoxFuture<'_, ()>;
}

/// Builds a [`Subprocedure`] for each instance a member takes part in.
pub trait SubprocedureFactory: Send + Sync + 'static {
    /// A fresh subprocedure for `instance` of `signature`, run by member `member`.
    fn build(&self, signature: &str, instance: &str, member: &str) -> Box<dyn Subprocedure>;
}

/// Starts procedure members.
#[derive(Debug, Clone, Copy)]
pub struct Member;

struct Ctx {
    session: Session,
    layout: Layout,
    signature: String,
    name: String,
    factory: Arc<dyn SubprocedureFactory>,
}

/// A running member. [`MemberHandle::stop`] (or dropping it) stops it; stopping does not run
/// `cleanup` for instances in progress (as a crash would not), but removes the member node, so
/// coordinators abort those instances at once.
#[derive(Debug)]
pub struct MemberHandle {
    cancel: CancellationToken,
    task: Option<tokio::task::JoinHandle<()>>,
    session: Session,
    layout: Layout,
    name: String,
}

impl MemberHandle {
    /// The member's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Stops the member and removes its member node.
    pub async fn stop(mut self) {
        self.cancel.cancel();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
        let _ = self
            .session
            .client()
            .delete(&self.layout.member(&self.name), None)
            .await;
    }
}

impl Drop for MemberHandle {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

impl Member {
    /// Registers member `name` for procedure `signature` under `base` and starts serving
    /// instances in the background. Returns once `members/<name>` exists, so a coordinator
    /// started afterwards sees the member as alive.
    ///
    /// # Errors
    /// [`ProcedureError::DuplicateMember`] when another live session registered `name`;
    /// [`ProcedureError::BadName`]; [`ProcedureError::Zk`].
    pub async fn start(
        session: &Session,
        base: &str,
        signature: &str,
        name: &str,
        factory: Arc<dyn SubprocedureFactory>,
    ) -> Result<MemberHandle, ProcedureError> {
        let layout = Layout::new(base, signature)?;
        check_name("member", name)?;
        session.wait_connected().await?;
        let (client, generation) = session.client_and_generation();
        ensure_dirs(&client, &layout).await?;
        if !register(&client, &layout, name).await? {
            return Err(ProcedureError::DuplicateMember(name.to_string()));
        }
        let cancel = CancellationToken::new();
        let ctx = Arc::new(Ctx {
            session: session.clone(),
            layout: layout.clone(),
            signature: signature.to_string(),
            name: name.to_string(),
            factory,
        });
        let task = tokio::spawn(member_loop(ctx, generation, cancel.clone()));
        Ok(MemberHandle {
            cancel,
            task: Some(task),
            session: session.clone(),
            layout,
            name: name.to_string(),
        })
    }
}

/// Creates `members/<name>`; `Ok(false)` when another session owns it.
async fn register(client: &zk::Client, layout: &Layout, name: &str) -> Result<bool, zk::Error> {
    let ephemeral = zk::CreateMode::Ephemeral.with_acls(zk::Acls::anyone_all());
    let path = layout.member(name);
    match client.create(&path, &[], &ephemeral).await {
        Ok(_) => Ok(true),
        Err(zk::Error::NodeExists) => match client.check_stat(&path).await? {
            // Our own create got through before a connection loss.
            Some(stat) => Ok(stat.ephemeral_owner == client.session_id().0),
            None => Box::pin(register(client, layout, name)).await,
        },
        Err(err) => Err(err),
    }
}

/// Watches `acquired/` for new instances and spawns one task per instance; re-registers the
/// member node after the session layer built a new session.
async fn member_loop(ctx: Arc<Ctx>, mut registered_generation: u64, cancel: CancellationToken) {
    let closed = ctx.session.closed_token();
    let mut state = ctx.session.watch_state();
    // Instances with a task. A task removes its instance only once that `acquired/<instance>`
    // node is gone, then asks for a re-list: so an instance name reused right after cleanup is
    // seen as new, while the same instance is never handled twice (HBASE-29381).
    let known: Arc<StdMutex<HashSet<String>>> = Arc::default();
    let relist = Arc::new(Notify::new());
    let mut registered = true;
    loop {
        if cancel.is_cancelled() || closed.is_cancelled() {
            return;
        }
        let (client, generation) = ctx.session.client_and_generation();
        if generation != registered_generation || !registered {
            match register(&client, &ctx.layout, &ctx.name).await {
                Ok(ok) => {
                    registered = ok;
                    registered_generation = generation;
                    if !ok {
                        // The old session's node lingers until the server expires it: wait for
                        // its deletion, then register again.
                        if let Ok((Some(_), watcher)) = client
                            .check_and_watch_stat(&ctx.layout.member(&ctx.name))
                            .await
                        {
                            tokio::select! {
                                _ = cancel.cancelled() => return,
                                _ = closed.cancelled() => return,
                                _ = watcher.changed() => {}
                            }
                        }
                        continue;
                    }
                }
                Err(err) => {
                    tracing::debug!(member = %ctx.name, error = %err, "re-registering failed");
                    pause(&ctx.session, &cancel).await;
                    continue;
                }
            }
        }
        match client
            .list_and_watch_children(&ctx.layout.acquired_dir())
            .await
        {
            Ok((children, watcher)) => {
                for instance in children {
                    let new = known
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(instance.clone());
                    if new {
                        tokio::spawn(instance_task(
                            Arc::clone(&ctx),
                            instance,
                            cancel.child_token(),
                            Arc::clone(&known),
                            Arc::clone(&relist),
                        ));
                    }
                }
                tokio::select! {
                    _ = cancel.cancelled() => return,
                    _ = closed.cancelled() => return,
                    _ = watcher.changed() => {}
                    _ = relist.notified() => {}
                    changed = state.changed() => if changed.is_err() { return },
                }
            }
            Err(zk::Error::NoNode) => {
                if ensure_dirs(&client, &ctx.layout).await.is_err() {
                    pause(&ctx.session, &cancel).await;
                }
            }
            Err(err) => {
                tracing::debug!(member = %ctx.name, error = %err, "listing instances failed");
                pause(&ctx.session, &cancel).await;
            }
        }
    }
}

/// Waits for the session to be usable again after a failed operation.
async fn pause(session: &Session, cancel: &CancellationToken) {
    tokio::select! {
        _ = cancel.cancelled() => {}
        _ = async {
            let _ = session.wait_connected().await;
            // Backoff between attempts, so a connection that is not really back yet is not
            // hammered; the session layer does the reconnecting.
            tokio::time::sleep(RECOVERABLE_PAUSE).await;
        } => {}
    }
}

/// What a member last read of one instance; an entry is reused while its watch is still armed
/// (the node has not changed since), so waiting for `reached/<instance>` costs no reads.
#[derive(Default)]
struct Cache {
    acquired: Option<bool>,
    reached: Option<bool>,
    abort_exists: Option<bool>,
    abort: Option<AbortReason>,
}

/// What a member reads of one instance (the one whose `acquired/<instance>` was created at
/// `czxid`), with watches on what it may wait for. Only nodes whose watch fired (or never read)
/// are read again. Its own `acquired/…/<member>` and
/// `reached/…/<member>` matter only before it did anything (`local` is `New`: a restart, or a
/// completed instance seen again); after that it knows them.
#[allow(clippy::too_many_arguments)] // one instance's identity, its state and its watches
async fn observe(
    client: &zk::Client,
    ctx: &Ctx,
    instance: &str,
    czxid: i64,
    expected_me: bool,
    local: MemberLocal,
    watches: &mut WatchSet,
    cache: &mut Cache,
) -> Result<MemberView, zk::Error> {
    let l = &ctx.layout;
    let (acquired_path, reached_path, abort_path) =
        (l.acquired(instance), l.reached(instance), l.abort(instance));
    let [k_acquired, k_reached, k_abort] = [
        exists_key(&acquired_path),
        exists_key(&reached_path),
        exists_key(&abort_path),
    ];
    watches.drop_fired();
    let read_acquired = watches.stale(&k_acquired, cache.acquired.is_some());
    let read_reached = watches.stale(&k_reached, cache.reached.is_some());
    let read_abort = watches.stale(&k_abort, cache.abort_exists.is_some());
    let read_mine = local == MemberLocal::New;
    let my_acquired_path = l.acquired_member(instance, &ctx.name);
    let my_reached_path = l.reached_member(instance, &ctx.name);
    // Issued together: the client pipelines them on one connection.
    let (acquired, my_acquired, reached, my_reached, abort) = tokio::join!(
        // By identity: the coordinator may have removed this instance and started another
        // under the same name between our watch firing and this read (on an ensemble, our
        // member applies both before answering); that one is not ours to wait on.
        when(
            read_acquired,
            exists_created_at(client, &acquired_path, czxid, true)
        ),
        when(read_mine, client.check_stat(&my_acquired_path)),
        when(read_reached, exists(client, &reached_path, true)),
        when(read_mine, client.check_stat(&my_reached_path)),
        when(read_abort, exists(client, &abort_path, true)),
    );
    if let Some(acquired) = watches.keep(k_acquired, acquired)? {
        cache.acquired = Some(acquired);
    }
    if let Some(reached) = watches.keep(k_reached, reached)? {
        cache.reached = Some(reached);
    }
    if let Some(abort) = watches.keep(k_abort, abort)? {
        cache.abort_exists = Some(abort);
    }
    if cache.abort_exists == Some(true) && cache.abort.is_none() {
        // Written once (first writer wins): read it once.
        match client.get_data(&abort_path).await {
            Ok((data, _)) => cache.abort = Some(layout::decode_abort(&data)),
            Err(zk::Error::NoNode) => {}
            Err(err) => return Err(err),
        }
    }
    let (my_acquired, my_reached) = match (my_acquired, my_reached) {
        (Some(a), Some(r)) => (a?.is_some(), r?.is_some()),
        // Not read: past `New`, this member created them itself (and the decision no longer
        // depends on them).
        _ => (local != MemberLocal::New, local == MemberLocal::Finished),
    };
    Ok(MemberView {
        instance_exists: cache.acquired == Some(true),
        expected_me,
        my_acquired,
        reached_exists: cache.reached == Some(true),
        my_reached,
        abort: if cache.abort_exists == Some(true) {
            cache.abort.clone()
        } else {
            None
        },
    })
}

/// Aborts an instance as this member: `abort/<instance>` is created only while
/// `acquired/<instance>` exists (one `multi`), so a late abort cannot leave a node behind a
/// coordinator's cleanup. Already aborted or already removed are both fine.
async fn member_abort(client: &zk::Client, layout: &Layout, instance: &str, reason: &AbortReason) {
    let persistent = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
    let data = layout::encode_abort(reason);
    // Retried through connection loss (a retry after a lost reply finds it: `NodeExists`).
    let written = retry_connection(|| async {
        let mut multi = client.new_multi_writer();
        multi.add_check_version(&layout.acquired(instance), -1)?;
        multi.add_create(&layout.abort(instance), &data, &persistent)?;
        multi.commit().await.map(drop).map_err(zk::Error::from)
    })
    .await;
    match written {
        Ok(()) | Err(zk::Error::NoNode | zk::Error::NodeExists) => {}
        Err(err) => tracing::warn!(instance, error = %err, "writing the abort node failed"),
    }
}

/// Runs `cleanup`, then deletes this member's `acquired/<instance>/<member>`: the deletion is the
/// acknowledgement an aborting coordinator waits for.
async fn cleanup_and_ack(
    client: &zk::Client,
    ctx: &Ctx,
    instance: &str,
    sub: &mut dyn Subprocedure,
    reason: AbortReason,
) {
    sub.cleanup(reason).await;
    let path = ctx.layout.acquired_member(instance, &ctx.name);
    match retry_connection(|| client.delete(&path, None)).await {
        Ok(()) | Err(zk::Error::NoNode) => {}
        Err(err) => {
            tracing::warn!(member = %ctx.name, instance, error = %err, "acknowledging the abort failed")
        }
    }
}

/// Runs one instance, then waits until its `acquired/<instance>` node (the one with creation
/// zxid `czxid`) is gone before forgetting it.
async fn instance_task(
    ctx: Arc<Ctx>,
    instance: String,
    cancel: CancellationToken,
    known: Arc<StdMutex<HashSet<String>>>,
    relist: Arc<Notify>,
) {
    let client = ctx.session.client();
    // With a watch: it stands for the exists watch `run_instance` keeps on the node (both fire
    // on its deletion), which saves reading it again.
    let czxid = match client
        .get_and_watch_data(&ctx.layout.acquired(&instance))
        .await
    {
        Ok((data, stat, watcher)) => {
            run_instance(
                &ctx, &client, &instance, stat.czxid, &data, watcher, &cancel,
            )
            .await;
            Some(stat.czxid)
        }
        Err(err) => {
            if err != zk::Error::NoNode {
                tracing::warn!(member = %ctx.name, instance, error = %err, "reading the instance failed");
            }
            None
        }
    };
    if let Some(czxid) = czxid {
        let closed = ctx.session.closed_token();
        let path = ctx.layout.acquired(&instance);
        // Usually the instance is gone by now: look without a watch first, since a watch set
        // on a missing node and then dropped costs a removeWatches request.
        let mut watch = false;
        loop {
            let checked = if watch {
                client
                    .check_and_watch_stat(&path)
                    .await
                    .map(|(stat, watcher)| (stat, Some(watcher)))
            } else {
                client.check_stat(&path).await.map(|stat| (stat, None))
            };
            match checked {
                Ok((Some(stat), watcher)) if stat.czxid == czxid => match watcher {
                    Some(watcher) => {
                        tokio::select! {
                            _ = cancel.cancelled() => return,
                            _ = closed.cancelled() => return,
                            _ = watcher.changed() => {}
                        }
                    }
                    None => watch = true,
                },
                Ok(_) => break,
                Err(_) => {
                    pause(&ctx.session, &cancel).await;
                    if cancel.is_cancelled() || closed.is_cancelled() {
                        return;
                    }
                }
            }
        }
    }
    known
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&instance);
    relist.notify_one();
}

/// Runs one instance (whose `acquired/<instance>`, created at `czxid`, held `data`) through
/// both barriers, or its cleanup.
async fn run_instance(
    ctx: &Ctx,
    client: &zk::Client,
    instance: &str,
    czxid: i64,
    data: &[u8],
    acquired_watch: zk::OneshotWatcher,
    cancel: &CancellationToken,
) {
    let closed = ctx.session.closed_token();
    let l = &ctx.layout;
    let (header, args) = layout::decode_instance(data);
    let expected_me = header.map_or(true, |h| h.members.contains(&ctx.name));
    if !expected_me {
        return;
    }
    let persistent = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
    let mut local = MemberLocal::New;
    let mut sub: Option<Box<dyn Subprocedure>> = None;
    let mut args = Some(args);
    let mut watches = WatchSet::default();
    let mut cache = Cache {
        acquired: Some(true),
        ..Cache::default()
    };
    watches.arm(exists_key(&l.acquired(instance)), acquired_watch);
    loop {
        let view = match observe(
            client,
            ctx,
            instance,
            czxid,
            expected_me,
            local,
            &mut watches,
            &mut cache,
        )
        .await
        {
            Ok(observed) => observed,
            // A lost connection on a live session (every client of an ensemble whose leader
            // died): our member node and our place stay; read again once reconnected.
            Err(err) if connection_trouble(&err) => {
                tokio::select! {
                    _ = cancel.cancelled() => return,
                    _ = closed.cancelled() => return,
                    _ = tokio::time::sleep(RECOVERABLE_PAUSE) => {}
                }
                continue;
            }
            Err(err) => {
                // Our session is gone: the coordinator sees our member node disappear and
                // aborts; undo locally.
                if let Some(mut s) = sub.take() {
                    s.cleanup(AbortReason::new(
                        &ctx.name,
                        format!("member lost ZooKeeper: {err}"),
                    ))
                    .await;
                }
                return;
            }
        };
        match decide_member(&ctx.name, local, &view) {
            MemberStep::Ignore | MemberStep::Done => return,
            MemberStep::RunAcquire => {
                let s = sub.insert(ctx.factory.build(&ctx.signature, instance, &ctx.name));
                let result = tokio::select! {
                    _ = cancel.cancelled() => return,
                    _ = closed.cancelled() => return,
                    result = s.acquire_barrier(args.take().unwrap_or_default()) => result,
                };
                if let Err(message) = result {
                    let reason = AbortReason::new(&ctx.name, message);
                    member_abort(client, l, instance, &reason).await;
                    cleanup_and_ack(client, ctx, instance, s.as_mut(), reason).await;
                    return;
                }
                let path = l.acquired_member(instance, &ctx.name);
                match retry_connection(|| client.create(&path, &[], &persistent)).await {
                    Ok(_) | Err(zk::Error::NodeExists) => local = MemberLocal::Acquired,
                    Err(zk::Error::NoNode) => {
                        s.cleanup(AbortReason::new(
                            COORDINATOR,
                            "the instance was removed while acquiring",
                        ))
                        .await;
                        return;
                    }
                    Err(err) => {
                        let reason = AbortReason::new(
                            &ctx.name,
                            format!("joining the barrier failed: {err}"),
                        );
                        member_abort(client, l, instance, &reason).await;
                        cleanup_and_ack(client, ctx, instance, s.as_mut(), reason).await;
                        return;
                    }
                }
            }
            MemberStep::Wait => {
                tokio::select! {
                    _ = closed.cancelled() => return,
                    wake = watches.wait(None, cancel) => {
                        if wake == Wake::Cancelled {
                            return;
                        }
                    }
                }
            }
            MemberStep::RunInside => {
                let Some(s) = sub.as_mut() else { return };
                let result = tokio::select! {
                    _ = cancel.cancelled() => return,
                    _ = closed.cancelled() => return,
                    result = s.inside_barrier() => result,
                };
                let reason = match result {
                    Ok(data) => match retry_connection(|| {
                        client.create(&l.reached_member(instance, &ctx.name), &data, &persistent)
                    })
                    .await
                    {
                        Ok(_) | Err(zk::Error::NodeExists) => {
                            local = MemberLocal::Finished;
                            continue;
                        }
                        Err(zk::Error::NoNode) => AbortReason::new(
                            COORDINATOR,
                            "the instance was removed inside the barrier",
                        ),
                        Err(err) => AbortReason::new(
                            &ctx.name,
                            format!("reporting the result failed: {err}"),
                        ),
                    },
                    Err(message) => AbortReason::new(&ctx.name, message),
                };
                member_abort(client, l, instance, &reason).await;
                cleanup_and_ack(client, ctx, instance, s.as_mut(), reason).await;
                return;
            }
            MemberStep::Cleanup(reason) => {
                if let Some(mut s) = sub.take() {
                    cleanup_and_ack(client, ctx, instance, s.as_mut(), reason).await;
                }
                return;
            }
            MemberStep::Abort(reason) => {
                member_abort(client, l, instance, &reason).await;
                // The stale node of our previous incarnation would otherwise look like a
                // pending acknowledgement to the coordinator.
                let path = l.acquired_member(instance, &ctx.name);
                let _ = retry_connection(|| client.delete(&path, None)).await;
                return;
            }
        }
    }
}
