//! The nemesis task: the fault schedule played against the server, the proxies and the disk.

use std::collections::HashMap;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken as Cancel;

use super::recorder::Recorder;
use crate::history::FaultPhase;
use crate::nemesis::{Fault, FaultKind, Nemesis, Schedule};
use crate::Error;

/// The nemesis task: plays `schedule`, sending client kills to the client loops. With
/// `progress`, each fault first waits (at most that long) for an operation to succeed after the
/// previous fault healed. Returns how many faults of each kind were injected (an injection
/// that failed or that no nemesis handles does not count).
pub(super) async fn play(
    schedule: Schedule,
    mut nemeses: Vec<Box<dyn Nemesis>>,
    recorder: Recorder,
    kills: HashMap<u32, mpsc::UnboundedSender<()>>,
    stop: Cancel,
    progress: Option<Duration>,
) -> HashMap<FaultKind, usize> {
    let mut injected: HashMap<FaultKind, usize> = HashMap::new();
    let mut oks = recorder.oks();
    let mut healed_at = *oks.borrow_and_update();
    for planned in schedule.planned {
        let wait = planned
            .at
            .saturating_sub(recorder.elapsed())
            .max(planned.quiet);
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = stop.cancelled() => return injected,
        }
        if let Some(bound) = progress {
            // A bounded wait on a condition: without progress the fault goes ahead anyway.
            tokio::select! {
                _ = tokio::time::timeout(bound, oks.wait_for(|n| *n > healed_at)) => {}
                () = stop.cancelled() => return injected,
            }
        }
        if let Fault::KillClient { client } = planned.fault {
            recorder.fault(FaultPhase::Start, &planned.fault, None);
            if kills.get(&client).is_some_and(|tx| tx.send(()).is_ok()) {
                *injected.entry(planned.kind).or_default() += 1;
            }
            recorder.fault(FaultPhase::End, &planned.fault, None);
            continue;
        }
        let Some(n) = nemeses.iter_mut().find(|n| n.handles(&planned.fault)) else {
            recorder.fault(
                FaultPhase::Start,
                &planned.fault,
                Some("no nemesis handles it: skipped".into()),
            );
            continue;
        };
        let note = n.inject(&planned.fault).await;
        if note.is_ok() {
            *injected.entry(planned.kind).or_default() += 1;
        }
        recorder.fault(FaultPhase::Start, &planned.fault, Some(note_of(note)));
        tokio::time::sleep(planned.fault.duration()).await;
        let note = n.heal(&planned.fault).await;
        recorder.fault(FaultPhase::End, &planned.fault, Some(note_of(note)));
        healed_at = *oks.borrow_and_update();
    }
    injected
}

fn note_of(r: Result<String, Error>) -> String {
    match r {
        Ok(n) => n,
        Err(e) => format!("error: {e}"),
    }
}
