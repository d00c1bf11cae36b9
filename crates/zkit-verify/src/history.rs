//! Histories: what the clients asked for and what they were told, in real-time order, as Jepsen
//! records them. Pure data: no I/O except the JSON-lines reader and writer over `Read`/`Write`.
//!
//! Every operation is an *invoke* event followed by one completion event of the same logical
//! process: *ok* (it happened, with its result), *fail* (it definitely did not happen: the
//! server answered with an error) or *info* (unknown: the connection dropped, the session was
//! lost, the client timed out or was killed). An info operation may take effect at any time
//! after its invoke, or never; its process never invokes again (the client continues under a
//! new process id), so one process has at most one operation open. Faults injected by the
//! nemesis are events too ([`Fault`] records), interleaved in the same order.
//!
//! Times are nanoseconds since the run started, from one monotonic clock (the runner's): an
//! invoke is stamped before the request leaves, a completion after the answer arrived, so every
//! recorded interval contains the real one. Event indices give the total order; times never go
//! backwards along it.
//!
//! The text form is one JSON object per line (`{"index":0,"time":1200,"process":3,"type":"invoke","f":"read","key":1}`),
//! faults as `{"index":7,"time":..,"type":"fault",...}`; [`History::write_jsonl`] and
//! [`History::read_jsonl`] round-trip it, so a saved history can be re-checked
//! (`zkit-verify check FILE`).

use std::collections::HashMap;
use std::io::{BufRead, Write};

use serde::{Deserialize, Serialize};

/// A logical client process. After an info completion a client continues under a new one.
pub type Process = u64;

/// How an event ends (or starts) an operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EventKind {
    /// The operation was sent.
    Invoke,
    /// It happened.
    Ok,
    /// It definitely did not happen.
    Fail,
    /// Unknown whether it happened (now or later).
    Info,
}

/// A register cell's content as a read returns it: absent, or a value with its znode version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "lowercase")]
pub enum Cell {
    /// The znode does not exist.
    Absent,
    /// The znode holds `value` at `version`.
    Present {
        /// The data, a decimal integer.
        value: i64,
        /// The znode's data version.
        version: i32,
    },
}

/// One created sequential znode: its sequence number and creation zxid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SeqNode {
    /// The 10-digit suffix ZooKeeper appended.
    pub seq: i64,
    /// The znode's czxid.
    pub czxid: i64,
}

/// What a session-workload read or write saw of one znode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Seen {
    /// The znode's mzxid in the returned Stat.
    pub mzxid: i64,
    /// The znode's czxid.
    pub czxid: i64,
}

/// What an operation is, with its result once completed (result fields are `None` on the
/// invoke and on fail/info completions unless said otherwise). One enum for every workload, so
/// that histories, the client protocol and the checkers share one vocabulary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "f", rename_all = "kebab-case")]
pub enum Op {
    // --- CAS register (per key) ---
    /// Read register `key`.
    Read {
        /// The register.
        key: u64,
        /// What was read.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        value: Option<Cell>,
    },
    /// Write `value` whatever the version (creating the znode if absent).
    Write {
        /// The register.
        key: u64,
        /// The value.
        value: i64,
        /// The znode version after the write (0 when it created the znode).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        version: Option<i32>,
    },
    /// Write `value` only if the znode's version is `expected` (setData with a version).
    Cas {
        /// The register.
        key: u64,
        /// The version the znode must have.
        expected: i32,
        /// The value.
        value: i64,
        /// On fail: the server answered BadVersion or NoNode, so the version was not
        /// `expected` at that point. A fail without it (refused before sending) says nothing.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        mismatch: bool,
    },

    // --- set ---
    /// Add `element` (create a znode named after it).
    Add {
        /// The element.
        element: u64,
    },
    /// Read the whole set.
    ReadSet {
        /// The elements present.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        elements: Option<Vec<u64>>,
    },

    // --- unique ids ---
    /// Create a persistent sequential znode under parent `parent`.
    NextId {
        /// The parent's number.
        parent: u32,
        /// The node created.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        node: Option<SeqNode>,
    },
    /// List the sequence numbers under `parent`.
    ListIds {
        /// The parent's number.
        parent: u32,
        /// The sequence numbers present.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        seqs: Option<Vec<i64>>,
    },

    // --- queue (claim/ack) ---
    /// Offer `item`.
    Enqueue {
        /// The item.
        item: u64,
    },
    /// Claim the head unclaimed item, if any.
    Claim {
        /// The item claimed; `None` on ok when the queue had nothing to claim.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        item: Option<u64>,
    },
    /// Acknowledge claimed `item`: one multi deletes it and records its result node.
    Ack {
        /// The item.
        item: u64,
    },
    /// Read which items have a result node (the consumed ones).
    ReadResults {
        /// The items.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        items: Option<Vec<u64>>,
    },

    // --- sessions ---
    /// A client's new ZooKeeper session (and its ephemeral znode `ephemeral`).
    SessionStart {
        /// The client (not the process: the process changes, the client does not).
        client: u32,
        /// The session id.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        session: Option<i64>,
        /// The negotiated timeout.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        timeout_ms: Option<u64>,
    },
    /// The client was told by the server that its session expired.
    SessionExpired {
        /// The client.
        client: u32,
        /// The expired session.
        session: i64,
    },
    /// A session writes `path` (setData) and reports the new mzxid.
    SessionWrite {
        /// The session.
        session: i64,
        /// The znode.
        path: String,
        /// What the write left.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        seen: Option<Seen>,
    },
    /// A session reads `path` and reports its mzxid.
    SessionRead {
        /// The session.
        session: i64,
        /// The znode.
        path: String,
        /// What was read (`None` on ok: no such node).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        seen: Option<Seen>,
    },
    /// An observer (another session) checks whether ephemeral `path` exists.
    ObserveEphemeral {
        /// The znode.
        path: String,
        /// Its ephemeralOwner when it exists (ok with `None`: it does not).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        owner: Option<i64>,
        /// The observer's own session, when known: reads are ordered within one session only.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        observer: Option<i64>,
    },

    // --- locks ---
    /// Acquire the mutex.
    Acquire {
        /// The fencing token of the acquisition.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        token: Option<i64>,
    },
    /// Stop holding the lock with `token` (the validity ends at this invoke). `lost` on ok:
    /// the holder's lost-signal had fired before.
    Release {
        /// The token held.
        token: i64,
        /// Whether the lock had already been lost.
        #[serde(default)]
        lost: bool,
    },
    /// The holder of `token` learned it lost the lock (lost-signal); a single ok event.
    LockLost {
        /// The token.
        token: i64,
    },

    // --- ledger (abstract: the ledger client plugs in later) ---
    /// Append `value` to `ledger` as `writer`.
    LedgerAppend {
        /// The ledger.
        ledger: u64,
        /// The writer (a writer is fenced by a recovery of its ledger).
        writer: u32,
        /// The payload.
        value: u64,
        /// The entry id it got.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        entry: Option<u64>,
    },
    /// Recover (fence and close) `ledger`.
    LedgerRecover {
        /// The ledger.
        ledger: u64,
        /// The last entry id of the closed ledger (`-1`: empty).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        last: Option<i64>,
    },
    /// Read entry `entry` of `ledger`.
    LedgerRead {
        /// The ledger.
        ledger: u64,
        /// The entry id.
        entry: u64,
        /// Its payload (ok with `None`: no such entry).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        value: Option<u64>,
    },
}

/// A client event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// Position in the history.
    pub index: usize,
    /// Nanoseconds since the run started.
    pub time: u64,
    /// The logical process.
    pub process: Process,
    /// Invoke or completion.
    #[serde(rename = "type")]
    pub kind: EventKind,
    /// The operation (with its result on ok).
    #[serde(flatten)]
    pub op: Op,
    /// Why it failed or is unknown (fail/info), for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A fault event: the nemesis started or ended a fault.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fault {
    /// Position in the history (shared numbering with client events).
    pub index: usize,
    /// Nanoseconds since the run started.
    pub time: u64,
    /// `start` or `end`.
    pub phase: FaultPhase,
    /// The fault, as [`crate::nemesis::Fault`] prints it (`kill-server`, `pause-server 2.5s`,
    /// `partition client 2`...).
    pub fault: String,
    /// The client a client-side fault affects (partitions through a client's proxy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<u32>,
    /// What happened, for people (errors included).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// Whether a fault began or ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FaultPhase {
    /// Injected.
    Start,
    /// Healed.
    End,
}

/// One line of the text form.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Entry {
    /// A fault (tried first: it has `phase`, which client events lack).
    Fault(FaultLine),
    /// A client event.
    Event(Event),
}

/// A [`Fault`] with its `"type":"fault"` tag, as one line of the text form.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultLine {
    /// Always `fault`.
    #[serde(rename = "type")]
    pub tag: FaultTag,
    /// The fault.
    #[serde(flatten)]
    pub fault: Fault,
}

/// The `type` of a fault line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FaultTag {
    /// `"type": "fault"`.
    Fault,
}

/// A whole history: client events and faults, each in index order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct History {
    /// Client events, by index.
    pub events: Vec<Event>,
    /// Fault events, by index.
    pub faults: Vec<Fault>,
}

/// An operation: its invoke and its completion (`None`: never completed, which counts as info).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operation {
    /// The process.
    pub process: Process,
    /// The invoke event's index and time.
    pub invoke_index: usize,
    /// When it was invoked (ns).
    pub invoke_time: u64,
    /// The operation as invoked.
    pub invoked: Op,
    /// The completion's kind, index and time, and the op with its results.
    pub completion: Option<Completion>,
}

/// The completion of an [`Operation`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    /// Ok, fail or info.
    pub kind: EventKind,
    /// Its index.
    pub index: usize,
    /// Its time (ns).
    pub time: u64,
    /// The op with its results.
    pub op: Op,
}

impl Operation {
    /// Ok, fail or info (info also when it never completed).
    pub fn kind(&self) -> EventKind {
        self.completion.as_ref().map_or(EventKind::Info, |c| c.kind)
    }

    /// The op as completed when ok or fail (with its result, or what the failure tells),
    /// else as invoked.
    pub fn op(&self) -> &Op {
        match &self.completion {
            Some(c) if c.kind != EventKind::Info => &c.op,
            _ => &self.invoked,
        }
    }

    /// The completion index, `usize::MAX` when it never completed or is info (an info op's
    /// interval extends to the end of time).
    pub fn end_index(&self) -> usize {
        match &self.completion {
            Some(c) if c.kind != EventKind::Info => c.index,
            _ => usize::MAX,
        }
    }

    /// Whether it definitely happened.
    pub fn is_ok(&self) -> bool {
        self.kind() == EventKind::Ok
    }
}

/// Errors of reading a history.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    /// A line is not an event.
    #[error("line {line}: {source}")]
    Parse {
        /// 1-based line number.
        line: usize,
        /// Why.
        source: serde_json::Error,
    },
    /// Reading failed.
    #[error("reading the history: {0}")]
    Io(#[from] std::io::Error),
    /// The events do not form a history (a completion without invoke, two open ops).
    #[error("malformed history at index {index}: {reason}")]
    Malformed {
        /// The event's index.
        index: usize,
        /// Why.
        reason: String,
    },
}

impl History {
    /// Pairs every invoke with its completion, in invoke order.
    ///
    /// # Errors
    /// [`HistoryError::Malformed`] when a process completes an op it did not invoke, invokes
    /// while one is open, or completes with a different kind of op.
    pub fn operations(&self) -> Result<Vec<Operation>, HistoryError> {
        let mut ops: Vec<Operation> = Vec::new();
        let mut open: HashMap<Process, usize> = HashMap::new();
        for e in &self.events {
            match e.kind {
                EventKind::Invoke => {
                    if open.contains_key(&e.process) {
                        return Err(HistoryError::Malformed {
                            index: e.index,
                            reason: format!("process {} invokes with an op still open", e.process),
                        });
                    }
                    open.insert(e.process, ops.len());
                    ops.push(Operation {
                        process: e.process,
                        invoke_index: e.index,
                        invoke_time: e.time,
                        invoked: e.op.clone(),
                        completion: None,
                    });
                }
                kind => {
                    let Some(at) = open.remove(&e.process) else {
                        return Err(HistoryError::Malformed {
                            index: e.index,
                            reason: format!("process {} completes without an open op", e.process),
                        });
                    };
                    let op = &mut ops[at];
                    if std::mem::discriminant(&op.invoked) != std::mem::discriminant(&e.op) {
                        return Err(HistoryError::Malformed {
                            index: e.index,
                            reason: format!(
                                "process {} completes {:?} but invoked {:?}",
                                e.process, e.op, op.invoked
                            ),
                        });
                    }
                    op.completion = Some(Completion {
                        kind,
                        index: e.index,
                        time: e.time,
                        op: e.op.clone(),
                    });
                }
            }
        }
        Ok(ops)
    }

    /// Client events and faults merged in index order, as text lines.
    pub fn entries(&self) -> Vec<Entry> {
        let mut out = Vec::with_capacity(self.events.len() + self.faults.len());
        let (mut e, mut f) = (self.events.iter().peekable(), self.faults.iter().peekable());
        loop {
            let take_fault = match (e.peek(), f.peek()) {
                (None, None) => break,
                (Some(_), None) => false,
                (None, Some(_)) => true,
                (Some(ev), Some(fa)) => fa.index < ev.index,
            };
            if take_fault {
                if let Some(fa) = f.next() {
                    out.push(Entry::Fault(FaultLine {
                        tag: FaultTag::Fault,
                        fault: fa.clone(),
                    }));
                }
            } else if let Some(ev) = e.next() {
                out.push(Entry::Event(ev.clone()));
            }
        }
        out
    }

    /// Writes the text form: one JSON object per line.
    ///
    /// # Errors
    /// What `w` returns.
    pub fn write_jsonl<W: Write>(&self, mut w: W) -> std::io::Result<()> {
        for entry in self.entries() {
            serde_json::to_writer(&mut w, &entry)?;
            w.write_all(b"\n")?;
        }
        w.flush()
    }

    /// Reads the text form (blank lines ignored).
    ///
    /// # Errors
    /// [`HistoryError::Parse`] for a line that is neither event nor fault.
    pub fn read_jsonl<R: BufRead>(r: R) -> Result<History, HistoryError> {
        let mut h = History::default();
        for (n, line) in r.lines().enumerate() {
            let line = line?;
            if line.trim().is_empty() {
                continue;
            }
            match serde_json::from_str::<Entry>(&line).map_err(|source| HistoryError::Parse {
                line: n + 1,
                source,
            })? {
                Entry::Event(e) => h.events.push(e),
                Entry::Fault(f) => h.faults.push(f.fault),
            }
        }
        Ok(h)
    }

    /// The text lines of the client events with the given indices and of every fault, merged
    /// in order: the sub-history a violation report prints.
    pub fn excerpt(&self, indices: &[usize]) -> String {
        let wanted: std::collections::BTreeSet<usize> = indices.iter().copied().collect();
        let mut out = String::new();
        for entry in self.entries() {
            let keep = match &entry {
                Entry::Event(e) => wanted.contains(&e.index),
                Entry::Fault(f) => {
                    // Faults between the first and last wanted event explain the context.
                    let lo = wanted.first().copied().unwrap_or(0);
                    let hi = wanted.last().copied().unwrap_or(0);
                    (lo..=hi).contains(&f.fault.index)
                }
            };
            if keep {
                out.push_str(&serde_json::to_string(&entry).unwrap_or_default());
                out.push('\n');
            }
        }
        out
    }
}

/// Builds histories in tests and self-tests: `b.invoke(p, op)`, `b.ok(p, op)`, times = indices
/// (plus what [`HistoryBuilder::pass`] added).
#[derive(Debug, Default)]
pub struct HistoryBuilder {
    history: History,
    /// Added to the time of every later event (ns).
    offset: u64,
}

impl HistoryBuilder {
    /// An empty builder.
    pub fn new() -> HistoryBuilder {
        HistoryBuilder::default()
    }

    fn next(&self) -> usize {
        self.history.events.len() + self.history.faults.len()
    }

    /// Appends an event of `kind`.
    pub fn event(&mut self, process: Process, kind: EventKind, op: Op) -> &mut Self {
        let index = self.next();
        self.history.events.push(Event {
            index,
            time: index as u64 + self.offset,
            process,
            kind,
            op,
            error: None,
        });
        self
    }

    /// Appends an invoke.
    pub fn invoke(&mut self, process: Process, op: Op) -> &mut Self {
        self.event(process, EventKind::Invoke, op)
    }

    /// Appends an ok completion.
    pub fn ok(&mut self, process: Process, op: Op) -> &mut Self {
        self.event(process, EventKind::Ok, op)
    }

    /// Appends a fail completion.
    pub fn fail(&mut self, process: Process, op: Op) -> &mut Self {
        self.event(process, EventKind::Fail, op)
    }

    /// Appends an info completion.
    pub fn info(&mut self, process: Process, op: Op) -> &mut Self {
        self.event(process, EventKind::Info, op)
    }

    /// Appends a fault event.
    pub fn fault(&mut self, phase: FaultPhase, fault: &str, client: Option<u32>) -> &mut Self {
        let index = self.next();
        self.history.faults.push(Fault {
            index,
            time: index as u64 + self.offset,
            phase,
            fault: fault.to_owned(),
            client,
            note: None,
        });
        self
    }

    /// Lets `ns` nanoseconds pass before the next event.
    pub fn pass(&mut self, ns: u64) -> &mut Self {
        self.offset += ns;
        self
    }

    /// Invoke and ok back to back (a sequential op).
    pub fn seq(&mut self, process: Process, invoked: Op, done: Op) -> &mut Self {
        self.invoke(process, invoked).ok(process, done)
    }

    /// The history.
    pub fn build(&self) -> History {
        self.history.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> History {
        let mut b = HistoryBuilder::new();
        b.invoke(
            1,
            Op::Read {
                key: 0,
                value: None,
            },
        )
        .fault(FaultPhase::Start, "kill-server", None)
        .ok(
            1,
            Op::Read {
                key: 0,
                value: Some(Cell::Present {
                    value: 3,
                    version: 1,
                }),
            },
        )
        .invoke(2, Op::Add { element: 9 })
        .info(2, Op::Add { element: 9 })
        .fault(FaultPhase::End, "kill-server", Some(4));
        b.build()
    }

    #[test]
    fn text_form_round_trips() {
        let h = sample();
        let mut buf = Vec::new();
        h.write_jsonl(&mut buf).unwrap();
        let text = String::from_utf8(buf.clone()).unwrap();
        assert_eq!(text.lines().count(), 6, "{text}");
        assert!(
            text.lines().nth(1).unwrap().contains(r#""type":"fault""#),
            "{text}"
        );
        assert!(
            text.lines().next().unwrap().contains(r#""f":"read""#),
            "{text}"
        );
        let back = History::read_jsonl(&buf[..]).unwrap();
        assert_eq!(back, h);
    }

    #[test]
    fn operations_pair_invokes_with_completions() {
        let ops = sample().operations().unwrap();
        assert_eq!(ops.len(), 2);
        assert!(ops[0].is_ok());
        assert_eq!(ops[0].end_index(), 2);
        assert_eq!(ops[1].kind(), EventKind::Info);
        assert_eq!(ops[1].end_index(), usize::MAX);
    }

    #[test]
    fn malformed_histories_are_refused() {
        let mut b = HistoryBuilder::new();
        b.invoke(1, Op::Add { element: 1 })
            .invoke(1, Op::Add { element: 2 });
        assert!(b.build().operations().is_err());
        let mut b = HistoryBuilder::new();
        b.ok(1, Op::Add { element: 1 });
        assert!(b.build().operations().is_err());
        let mut b = HistoryBuilder::new();
        b.invoke(1, Op::Add { element: 1 })
            .ok(1, Op::ReadSet { elements: None });
        assert!(b.build().operations().is_err());
    }
}
