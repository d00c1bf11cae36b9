//! The generic clients: each workload's generator, driven op by op and recorded; and the
//! session churn of soak runs.

use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use rand::rngs::StdRng;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken as Cancel;

use super::recorder::call;
use super::shared::Shared;
use crate::generator::{self, Generator, KeyPool};
use crate::history::{EventKind, Op};
use crate::workload::Workload;
use crate::zk_ops::Zk;

pub(super) fn generator_for(
    workload: Workload,
    c: u32,
    clients: u32,
    keys: &Arc<StdMutex<KeyPool>>,
    ledgers: &generator::CurrentLedgers,
) -> Box<dyn Generator> {
    match workload {
        Workload::Register => Box::new(generator::RegisterGen::new(c, Arc::clone(keys))),
        Workload::Set => Box::new(generator::SetGen::new(c)),
        Workload::UniqueIds => Box::new(generator::IdGen),
        Workload::Queue if c < clients / 2 => Box::new(generator::ProducerGen::new(c)),
        Workload::Queue => Box::new(generator::ConsumerGen::default()),
        Workload::Locks | Workload::Sessions => Box::new(generator::LockGen::default()),
        Workload::Ledger if c + 1 < clients.max(2) => {
            Box::new(generator::LedgerWriterGen::new(c, Arc::clone(ledgers)))
        }
        Workload::Ledger => Box::new(generator::LedgerRecoverGen::new(Arc::clone(ledgers))),
    }
}

/// The clients that client faults may hit (queue: the consumers; ledger: the writers).
pub(super) fn victims(workload: Workload, clients: u32) -> Vec<u32> {
    match workload {
        Workload::Queue => (clients / 2..clients).collect(),
        Workload::Ledger => (0..clients.saturating_sub(1).max(1)).collect(),
        _ => (0..clients).collect(),
    }
}

/// One generic client: generator → op → record, until stopped; kills arrive on `kills`.
pub(super) async fn client_loop(
    shared: Arc<Shared>,
    c: u32,
    mut gen: Box<dyn Generator>,
    mut rng: StdRng,
    mut kills: mpsc::UnboundedReceiver<()>,
) {
    let rec = &shared.recorder;
    let Some(mut handle) = shared.spawn_client_until_stop(c).await else {
        return;
    };
    shared.note_pid(c, &handle);
    let mut process = rec.new_process();
    let notice_process = rec.new_process();
    let mut held: Option<i64> = None;
    while !shared.stop.is_cancelled() {
        let step = gen.next(&mut rng);
        tokio::select! {
            () = tokio::time::sleep(step.delay) => {}
            () = shared.stop.cancelled() => break,
        }
        let killed = tokio::select! {
            reply = call(rec, process, &mut handle, step.op.clone(), shared.config.op_timeout) => {
                if reply.kind == EventKind::Info {
                    process = rec.new_process();
                }
                match (&reply.op, reply.kind) {
                    (Op::Acquire { token: Some(t) }, EventKind::Ok) => held = Some(*t),
                    (Op::Release { .. }, _) => held = None,
                    _ => {}
                }
                gen.observe(&reply);
                false
            }
            Some(()) = kills.recv() => true,
        };
        while let Ok(op) = handle.notices.try_recv() {
            rec.instant(notice_process, op);
        }
        let killed = killed || kills.try_recv().is_ok();
        if killed {
            // The holder dies now: its validity ends before the kill.
            if let Some(token) = held.take() {
                rec.instant(notice_process, Op::LockLost { token });
            }
            handle.kill().await;
            // An op open at the kill stays open: it never completes (info).
            process = rec.new_process();
            gen.reset();
            let Some(h) = shared.spawn_client_until_stop(c).await else {
                return;
            };
            handle = h;
            shared.note_pid(c, &handle);
        }
    }
    while let Ok(op) = handle.notices.try_recv() {
        rec.instant(notice_process, op);
    }
    if let Some(token) = held.take() {
        let _ = call(
            rec,
            process,
            &mut handle,
            Op::Release { token, lost: false },
            shared.config.op_timeout,
        )
        .await;
    }
    handle.kill().await;
}

/// Session, watch and ephemeral churn next to the workload (soak runs): a session every
/// ~100 ms creates an ephemeral, watches it, and closes.
pub(super) async fn churn(direct: String, stop: Cancel, root: String, timeout: Duration) {
    let mut n = 0u64;
    while !stop.is_cancelled() {
        n += 1;
        let path = format!("{root}/churn-{n}");
        let _ = tokio::time::timeout(timeout * 2, Zk::churn_once(&direct, &path, timeout)).await;
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(100)) => {}
            () = stop.cancelled() => break,
        }
    }
}
