//! The final phase: the workload's reads after every fault healed.

use std::sync::{Arc, Mutex as StdMutex};
use std::time::{Duration, Instant};

use super::recorder::{call, Recorder};
use super::sessions::observe;
use super::shared::Shared;
use crate::client::{self, ClientHandle};
use crate::executor::ID_PARENTS;
use crate::history::{EventKind, Op, Process};
use crate::workload::Workload;
use crate::zk_ops::Zk;

/// The workload's reads after every fault healed, by a fresh client straight to the server.
pub(super) async fn final_phase(shared: &Arc<Shared>, ephemerals: &Arc<StdMutex<Vec<String>>>) {
    let rec = &shared.recorder;
    let cfg = shared.client_config(&shared.direct);
    let t = shared.config.op_timeout;
    // The server may still be recovering: retry the connect for a while.
    let deadline = Instant::now() + t * 10;
    let mut handle = loop {
        match client::spawn_task(&cfg).await {
            Ok(h) => break h,
            Err(_) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => {
                tracing::warn!(%e, "final phase: cannot connect");
                return;
            }
        }
    };
    let mut process = rec.new_process();
    match shared.config.workload {
        Workload::Set => {
            read_until_ok(
                rec,
                &mut handle,
                &mut process,
                Op::ReadSet { elements: None },
                t,
            )
            .await
        }
        Workload::UniqueIds => {
            for parent in 0..ID_PARENTS {
                read_until_ok(
                    rec,
                    &mut handle,
                    &mut process,
                    Op::ListIds { parent, seqs: None },
                    t,
                )
                .await;
            }
        }
        Workload::Queue => {
            drain(shared, &mut handle, &mut process).await;
            read_until_ok(
                rec,
                &mut handle,
                &mut process,
                Op::ReadResults { items: None },
                t,
            )
            .await;
        }
        Workload::Sessions => {
            // Every abandoned session has had time to expire; look at every ephemeral once.
            tokio::time::sleep(shared.config.session_timeout + shared.config.grace()).await;
            if let Ok(zk) = Zk::connect(&shared.direct, shared.config.session_timeout).await {
                let paths = crate::lock_vec(ephemerals).clone();
                for path in paths {
                    observe(rec, process, &zk, &path, t).await;
                }
                zk.close();
            }
        }
        Workload::Register | Workload::Locks => {}
    }
    handle.kill().await;
}

/// Repeats a read until it succeeds (at most 20 attempts), each attempt recorded.
async fn read_until_ok(
    rec: &Recorder,
    handle: &mut ClientHandle,
    process: &mut Process,
    op: Op,
    t: Duration,
) {
    for _ in 0..20 {
        let reply = call(rec, *process, handle, op.clone(), t).await;
        if reply.kind == EventKind::Ok {
            return;
        }
        if reply.kind == EventKind::Info {
            *process = rec.new_process();
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Claims and acks everything left in the queue, waiting for the claims of dead consumers to
/// go with their sessions. Gives up only after a while without progress (a long run can leave
/// a long queue).
async fn drain(shared: &Arc<Shared>, handle: &mut ClientHandle, process: &mut Process) {
    let rec = &shared.recorder;
    let t = shared.config.op_timeout;
    let patience = shared.config.session_timeout * 4 + Duration::from_secs(10);
    let mut deadline = Instant::now() + patience;
    let probe = Zk::connect(&shared.direct, shared.config.session_timeout)
        .await
        .ok();
    while Instant::now() < deadline {
        let reply = call(rec, *process, handle, Op::Claim { item: None }, t).await;
        match (&reply.op, reply.kind) {
            (Op::Claim { item: Some(item) }, EventKind::Ok) => {
                let item = *item;
                let ack = call(rec, *process, handle, Op::Ack { item }, t).await;
                match ack.kind {
                    EventKind::Info => *process = rec.new_process(),
                    EventKind::Ok => deadline = Instant::now() + patience,
                    _ => {}
                }
            }
            (Op::Claim { item: None }, EventKind::Ok) => {
                let left = match &probe {
                    Some(zk) => zk.queue_entries(&shared.layout.queue()).await.unwrap_or(1),
                    None => 0,
                };
                if left == 0 {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            (_, EventKind::Info) => *process = rec.new_process(),
            _ => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
    if let Some(zk) = probe {
        zk.close();
    }
}
