//! The history as it happens: events and faults under one lock, stamped from one clock.

use std::sync::{Arc, Mutex as StdMutex};
use std::time::{Duration, Instant};

use crate::client::ClientHandle;
use crate::executor::Reply;
use crate::history::{Event, EventKind, Fault as FaultEvent, FaultPhase, History, Op, Process};
use crate::nemesis::Fault;

/// Records events under one lock, stamping times from one clock.
#[derive(Debug, Clone)]
pub struct Recorder(Arc<StdMutex<RecState>>);

#[derive(Debug)]
struct RecState {
    start: Instant,
    history: History,
    next_process: Process,
    /// How many operations completed ok so far.
    oks: tokio::sync::watch::Sender<u64>,
}

impl Recorder {
    /// A recorder whose clock starts now.
    pub fn new() -> Recorder {
        Recorder(Arc::new(StdMutex::new(RecState {
            start: Instant::now(),
            history: History::default(),
            next_process: 0,
            oks: tokio::sync::watch::Sender::new(0),
        })))
    }

    fn state(&self) -> std::sync::MutexGuard<'_, RecState> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Time since the start.
    pub fn elapsed(&self) -> Duration {
        self.state().start.elapsed()
    }

    /// The number of operations completed ok so far, as it changes.
    pub fn oks(&self) -> tokio::sync::watch::Receiver<u64> {
        self.state().oks.subscribe()
    }

    /// A fresh process id.
    pub fn new_process(&self) -> Process {
        let mut s = self.state();
        s.next_process += 1;
        s.next_process
    }

    fn push(&self, process: Process, kind: EventKind, op: Op, error: Option<String>) {
        let mut s = self.state();
        if kind == EventKind::Ok {
            s.oks.send_modify(|n| *n += 1);
        }
        let index = s.history.events.len() + s.history.faults.len();
        let time = u64::try_from(s.start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        s.history.events.push(Event {
            index,
            time,
            process,
            kind,
            op,
            error,
        });
    }

    /// An invoke.
    pub fn invoke(&self, process: Process, op: Op) {
        self.push(process, EventKind::Invoke, op, None);
    }

    /// A completion.
    pub fn complete(&self, process: Process, reply: Reply) {
        self.push(process, reply.kind, reply.op, reply.error);
    }

    /// Something observed at one instant: invoke and ok back to back.
    pub fn instant(&self, process: Process, op: Op) {
        self.invoke(process, op.clone());
        self.push(process, EventKind::Ok, op, None);
    }

    /// A fault event.
    pub fn fault(&self, phase: FaultPhase, fault: &Fault, note: Option<String>) {
        let mut s = self.state();
        let index = s.history.events.len() + s.history.faults.len();
        let time = u64::try_from(s.start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let name = match fault {
            Fault::Partition { .. } => "partition".to_owned(),
            other => other.to_string(),
        };
        s.history.faults.push(FaultEvent {
            index,
            time,
            phase,
            fault: name,
            client: fault.client(),
            note,
        });
    }

    /// The history so far.
    pub fn history(&self) -> History {
        self.state().history.clone()
    }
}

impl Default for Recorder {
    fn default() -> Self {
        Recorder::new()
    }
}

/// Invokes `op` on `handle` and records both ends; `None` if it never completed in time.
pub(super) async fn call(
    recorder: &Recorder,
    process: Process,
    handle: &mut ClientHandle,
    op: Op,
    timeout: Duration,
) -> Reply {
    recorder.invoke(process, op.clone());
    let rx = handle.call(op.clone());
    let reply = match tokio::time::timeout(timeout, rx).await {
        Ok(Ok(reply)) => reply,
        Ok(Err(_)) => Reply {
            kind: EventKind::Info,
            op,
            error: Some("client gone".into()),
        },
        Err(_) => {
            handle.forget();
            Reply {
                kind: EventKind::Info,
                op,
                error: Some("timed out".into()),
            }
        }
    };
    recorder.complete(process, reply.clone());
    reply
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::result::Counts;

    #[test]
    fn the_recorder_orders_events_and_faults() {
        let r = Recorder::new();
        let p = r.new_process();
        r.invoke(p, Op::Add { element: 1 });
        r.fault(FaultPhase::Start, &Fault::DropConnections, None);
        r.complete(
            p,
            Reply {
                kind: EventKind::Ok,
                op: Op::Add { element: 1 },
                error: None,
            },
        );
        let h = r.history();
        assert_eq!(h.events.len(), 2);
        assert_eq!(h.faults[0].index, 1);
        assert_eq!(h.events[1].index, 2);
        assert!(h.events[0].time <= h.faults[0].time && h.faults[0].time <= h.events[1].time);
        assert_eq!(h.operations().unwrap().len(), 1);
        let c = Counts::of(&h);
        assert_eq!((c.ops, c.ok, c.faults), (1, 1, 1));
    }
}
