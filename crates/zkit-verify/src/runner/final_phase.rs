//! The final phase: the workload's reads after every fault healed.

use std::sync::{Arc, Mutex as StdMutex};
use std::time::{Duration, Instant};

use super::recorder::{call, Recorder};
use super::sessions::{observe, quorum_write, shared_path};
use super::shared::Shared;
use crate::client::{self, ClientHandle};
use crate::executor::{ledger_options, ID_PARENTS};
use crate::history::{EventKind, Op, Process};
use crate::workload::Workload;
use crate::zk_ops::Zk;
use zkit::ledger::LedgerClient;

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
                let stale = shared.config.stale_reads();
                if !stale.is_zero() {
                    // On an ensemble an expired session's ephemerals go when a quorum commits
                    // its closeSession: a write that commits now shows there is a quorum, and
                    // every ephemeral of an expired session must be gone a session timeout
                    // (plus grace and the stale-read window) later. See the sessions checker.
                    quorum_write(rec, &mut process, &zk, &shared_path(shared), t).await;
                    tokio::time::sleep(
                        shared.config.session_timeout + shared.config.grace() + stale,
                    )
                    .await;
                }
                let paths = crate::lock_vec(ephemerals).clone();
                for path in paths {
                    observe(rec, process, &zk, &path, t).await;
                }
                zk.close();
            }
        }
        Workload::Ledger => ledger(shared, &cfg, &mut handle, &mut process).await,
        Workload::Register | Workload::Locks => {}
    }
    handle.kill().await;
}

/// Recovers every ledger, then two readers (each its own session) read every entry up to the
/// recovered last one, and the one after it.
async fn ledger(
    shared: &Arc<Shared>,
    cfg: &client::ClientConfig,
    handle: &mut ClientHandle,
    process: &mut Process,
) {
    let rec = &shared.recorder;
    let t = shared.config.op_timeout;
    let Ok(zk) = Zk::connect(&shared.direct, shared.config.session_timeout).await else {
        tracing::warn!("final phase: cannot connect to list the ledgers");
        return;
    };
    let ids = match LedgerClient::with_options(zk.session(), ledger_options()) {
        Ok(c) => c.list().await.unwrap_or_default(),
        Err(_) => Vec::new(),
    };
    zk.close();
    let mut lasts = Vec::new();
    for id in ids {
        let Ok(ledger) = u64::try_from(id) else {
            continue;
        };
        let op = Op::LedgerRecover { ledger, last: None };
        for _ in 0..20 {
            let reply = call(rec, *process, handle, op.clone(), t).await;
            match (&reply.op, reply.kind) {
                (Op::LedgerRecover { last: Some(l), .. }, EventKind::Ok) => {
                    lasts.push((ledger, *l));
                    break;
                }
                (_, EventKind::Info) => *process = rec.new_process(),
                _ => {}
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    let mut second = client::spawn_task(cfg).await.ok();
    let mut second_process = rec.new_process();
    for (ledger, last) in lasts {
        let last = u64::try_from(last + 1).unwrap_or(0);
        for entry in 0..=last {
            let op = Op::LedgerRead {
                ledger,
                entry,
                value: None,
            };
            read_until_ok(rec, handle, process, op.clone(), t).await;
            if let Some(h) = second.as_mut() {
                read_until_ok(rec, h, &mut second_process, op, t).await;
            }
        }
    }
    if let Some(mut h) = second {
        h.kill().await;
    }
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
