//! Carries out one history [`Op`] on one client's [`Zk`] and says how it ended. The same code
//! runs inside a client task and inside a client process (`zkit-verify client`), so both kinds
//! of client behave alike. State that spans operations (held queue claims, held lock guards)
//! lives here; asynchronous news (a lock's lost-signal) goes out as notices.

use std::collections::HashMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;
use zkit::ledger::{
    CreateOptions, LedgerClient, LedgerError, LedgerOptions, LedgerReader, LedgerWriter,
};
use zkit::lock::{LockGuard, Mutex};
use zkit::queue::{Claim, Queue};

use crate::history::{EventKind, Op};
use crate::zk_ops::{Outcome, Zk};

/// How an operation ended, with its result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reply {
    /// Ok, fail or info.
    pub kind: EventKind,
    /// The op with its result (as invoked when not ok).
    pub op: Op,
    /// Why it failed or is unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Reply {
    fn ok(op: Op) -> Reply {
        Reply {
            kind: EventKind::Ok,
            op,
            error: None,
        }
    }

    fn err(op: Op, err: &zkit::Error, read_only: bool) -> Reply {
        // A read that did not complete had no effect either way: fail, as Jepsen records it.
        let (kind, error) = match Outcome::of(err) {
            Outcome::Definite(e) => (EventKind::Fail, e),
            Outcome::Unknown(e) if read_only => (EventKind::Fail, e),
            Outcome::Unknown(e) => (EventKind::Info, e),
        };
        Reply {
            kind,
            op,
            error: Some(error),
        }
    }

    fn fail(op: Op, why: &str) -> Reply {
        Reply {
            kind: EventKind::Fail,
            op,
            error: Some(why.to_owned()),
        }
    }
}

/// Parents of the unique-id workload.
pub const ID_PARENTS: u32 = 3;

/// Where a workload's znodes live under the run's root.
#[derive(Debug, Clone)]
pub struct Layout {
    /// The run's root znode.
    pub root: String,
}

impl Layout {
    /// Register `key`.
    pub fn register(&self, key: u64) -> String {
        format!("{}/reg/k-{key}", self.root)
    }
    /// The set's directory.
    pub fn set_dir(&self) -> String {
        format!("{}/set", self.root)
    }
    /// Unique-id parent `parent`.
    pub fn id_parent(&self, parent: u32) -> String {
        format!("{}/ids/p-{parent}", self.root)
    }
    /// The queue.
    pub fn queue(&self) -> String {
        format!("{}/queue", self.root)
    }
    /// The queue's result directory.
    pub fn results(&self) -> String {
        format!("{}/results", self.root)
    }
    /// The mutex.
    pub fn lock(&self) -> String {
        format!("{}/lock", self.root)
    }
    /// The sessions workload's directory.
    pub fn sessions(&self) -> String {
        format!("{}/sessions", self.root)
    }
    /// Every directory a run needs before clients start.
    pub fn dirs(&self) -> Vec<String> {
        let mut d = vec![
            format!("{}/reg", self.root),
            self.set_dir(),
            self.results(),
            self.sessions(),
        ];
        d.extend((0..ID_PARENTS).map(|p| self.id_parent(p)));
        d
    }
}

/// One client's executor.
pub struct Executor {
    zk: Zk,
    layout: Layout,
    queue: Queue,
    mutex: Mutex,
    lock_timeout: Duration,
    claims: HashMap<u64, Claim>,
    guards: HashMap<i64, LockGuard>,
    notices: mpsc::UnboundedSender<Op>,
    sync_reads: bool,
    ledger: Option<LedgerState>,
}

impl std::fmt::Debug for Executor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Executor")
            .field("root", &self.layout.root)
            .field("claims", &self.claims.len())
            .field("guards", &self.guards.len())
            .finish()
    }
}

impl Executor {
    /// An executor on `zk`; notices (lock lost) go to `notices`.
    ///
    /// # Errors
    /// A bad root path.
    pub fn new(
        zk: Zk,
        layout: Layout,
        lock_timeout: Duration,
        notices: mpsc::UnboundedSender<Op>,
    ) -> zkit::Result<Executor> {
        let queue = zk.queue(&layout.queue())?;
        let mutex = zk.mutex(&layout.lock());
        Ok(Executor {
            zk,
            layout,
            queue,
            mutex,
            lock_timeout,
            claims: HashMap::new(),
            guards: HashMap::new(),
            notices,
            sync_reads: false,
            ledger: None,
        })
    }

    /// Register reads `sync` first when `on` (an ensemble: see
    /// [`crate::client::ClientConfig::sync_reads`]).
    #[must_use]
    pub fn with_sync_reads(mut self, on: bool) -> Executor {
        self.sync_reads = on;
        self
    }

    /// The connection.
    pub fn zk(&self) -> &Zk {
        &self.zk
    }

    /// Carries out `op`.
    pub async fn execute(&mut self, op: Op) -> Reply {
        // An expired session's client refuses requests without sending them: such a refusal
        // is a definite failure, not an unknown outcome. Checked before sending, so that an
        // expiry reported for a request already on the wire stays unknown.
        if !self.zk.wait_usable(self.lock_timeout / 2).await {
            return Reply::fail(op, "session expired before the request was sent");
        }
        let zk = &self.zk;
        let l = &self.layout;
        match op {
            Op::Read { key, .. } => match zk.read_cell(&l.register(key), self.sync_reads).await {
                Ok(cell) => Reply::ok(Op::Read {
                    key,
                    value: Some(cell),
                }),
                Err(e) => Reply::err(op, &e, true),
            },
            Op::Write { key, value, .. } => match zk.write_cell(&l.register(key), value).await {
                Ok(v) => Reply::ok(Op::Write {
                    key,
                    value,
                    version: Some(v),
                }),
                Err(e) => Reply::err(op, &e, false),
            },
            Op::Cas {
                key,
                expected,
                value,
                ..
            } => match zk.cas_cell(&l.register(key), expected, value).await {
                Ok(_) => Reply::ok(op),
                // Only the server's BadVersion / NoNode tell that the version differed.
                Err(e @ (zkit::Error::BadVersion | zkit::Error::NoNode)) => Reply::err(
                    Op::Cas {
                        key,
                        expected,
                        value,
                        mismatch: true,
                    },
                    &e,
                    false,
                ),
                Err(e) => Reply::err(op, &e, false),
            },
            Op::Add { element } => match zk.create(&format!("{}/e-{element}", l.set_dir())).await {
                Ok(()) => Reply::ok(op),
                Err(e) => Reply::err(op, &e, false),
            },
            Op::ReadSet { .. } => match zk.children(&l.set_dir()).await {
                Ok(names) => Reply::ok(Op::ReadSet {
                    elements: Some(numbers(&names, "e-")),
                }),
                Err(e) => Reply::err(op, &e, true),
            },
            Op::NextId { parent, .. } => {
                match zk
                    .create_sequential(&format!("{}/id-", l.id_parent(parent)))
                    .await
                {
                    Ok(node) => Reply::ok(Op::NextId {
                        parent,
                        node: Some(node),
                    }),
                    Err(e) => Reply::err(op, &e, false),
                }
            }
            Op::ListIds { parent, .. } => match zk.children(&l.id_parent(parent)).await {
                Ok(names) => Reply::ok(Op::ListIds {
                    parent,
                    seqs: Some(
                        names
                            .iter()
                            .filter_map(|n| zkit::protected::sequence_of(n))
                            .collect(),
                    ),
                }),
                Err(e) => Reply::err(op, &e, true),
            },
            Op::Enqueue { item } => match zk.offer(&self.queue, item).await {
                Ok(()) => Reply::ok(op),
                Err(e) => Reply::err(op, &e, false),
            },
            Op::Claim { .. } => match zk.try_claim(&self.queue).await {
                Ok(Some((item, claim))) => {
                    self.claims.insert(item, claim);
                    Reply::ok(Op::Claim { item: Some(item) })
                }
                Ok(None) => Reply::ok(Op::Claim { item: None }),
                Err(e) => Reply::err(op, &e, false),
            },
            Op::Ack { item } => {
                let Some(claim) = self.claims.remove(&item) else {
                    return Reply::fail(op, "no claim held for this item");
                };
                match zk.ack(&claim, &format!("{}/i-{item}", l.results())).await {
                    Ok(()) => Reply::ok(op),
                    Err(e) => Reply::err(op, &e, false),
                }
            }
            Op::ReadResults { .. } => match zk.children(&l.results()).await {
                Ok(names) => Reply::ok(Op::ReadResults {
                    items: Some(numbers(&names, "i-")),
                }),
                Err(e) => Reply::err(op, &e, true),
            },
            Op::Acquire { .. } => {
                // One lock per client: a guard still here belongs to an acquire whose reply
                // the runner gave up waiting for. Nobody knows this holder: let it go first.
                for (_, guard) in self.guards.drain() {
                    let _ = guard.release().await;
                }
                self.acquire(op).await
            }
            Op::Release { token, .. } => {
                let Some(guard) = self.guards.remove(&token) else {
                    return Reply::fail(op, "no guard held for this token");
                };
                let lost = guard.is_lost();
                match guard.release().await {
                    Ok(()) => Reply::ok(Op::Release { token, lost }),
                    Err(e) => Reply::err(Op::Release { token, lost }, &e, false),
                }
            }
            op @ (Op::LedgerAppend { .. } | Op::LedgerRecover { .. } | Op::LedgerRead { .. }) => {
                self.ledger_op(op).await
            }
            other => Reply::fail(other, "not an operation this executor runs"),
        }
    }
}

/// The password of the ledger workload's ledgers.
pub const LEDGER_PASSWORD: &[u8] = b"zkit-verify";

/// A ledger client's state: the ledger this client writes (at most one), and the readers it
/// opened.
struct LedgerState {
    client: LedgerClient,
    writer: Option<LedgerWriter>,
    readers: HashMap<u64, LedgerReader>,
}

/// The ledger options of the workload: failures show within seconds.
pub fn ledger_options() -> LedgerOptions {
    LedgerOptions {
        request_timeout: Duration::from_secs(3),
        connect_timeout: Duration::from_secs(2),
        speculative_read_delay: Duration::from_millis(100),
        ..LedgerOptions::default()
    }
}

fn ledger_value(payload: &[u8]) -> Option<u64> {
    std::str::from_utf8(payload).ok()?.parse().ok()
}

impl Executor {
    /// An append (opening a ledger first when this client writes none: its first append, or
    /// the one after a failure), a recovery, or a read of one entry.
    async fn ledger_op(&mut self, op: Op) -> Reply {
        if self.ledger.is_none() {
            match LedgerClient::with_options(self.zk.session(), ledger_options()) {
                Ok(client) => {
                    self.ledger = Some(LedgerState {
                        client,
                        writer: None,
                        readers: HashMap::new(),
                    });
                }
                Err(e) => return Reply::fail(op, &e.to_string()),
            }
        }
        let Some(state) = self.ledger.as_mut() else {
            return Reply::fail(op, "no ledger client");
        };
        match op {
            Op::LedgerAppend { writer, value, .. } => {
                if state.writer.is_none() {
                    let opts = CreateOptions {
                        password: LEDGER_PASSWORD.to_vec(),
                        ..CreateOptions::default()
                    };
                    match state.client.create(&opts).await {
                        Ok(w) => state.writer = Some(w),
                        // Nothing was appended; at worst an empty ledger was created.
                        Err(e) => return Reply::fail(op, &format!("create: {e}")),
                    }
                }
                let Some(w) = state.writer.as_ref() else {
                    return Reply::fail(op, "no writer");
                };
                let ledger = u64::try_from(w.id()).unwrap_or(u64::MAX);
                match w.append(value.to_string().into_bytes()).await {
                    Ok(entry) => Reply::ok(Op::LedgerAppend {
                        ledger,
                        writer,
                        value,
                        entry: u64::try_from(entry).ok(),
                    }),
                    Err(e) => {
                        // Fenced, closed or failed: the entry may still be on some bookies
                        // (unknown), and this writer is done; the next append opens a new
                        // ledger, as an application would.
                        state.writer = None;
                        Reply {
                            kind: EventKind::Info,
                            op: Op::LedgerAppend {
                                ledger,
                                writer,
                                value,
                                entry: None,
                            },
                            error: Some(e.to_string()),
                        }
                    }
                }
            }
            Op::LedgerRecover { ledger, .. } => {
                let Ok(id) = i64::try_from(ledger) else {
                    return Reply::fail(op, "no such ledger");
                };
                match state.client.recover(id, LEDGER_PASSWORD).await {
                    Ok(m) => Reply::ok(Op::LedgerRecover {
                        ledger,
                        last: Some(m.last_entry_id),
                    }),
                    Err(LedgerError::NoSuchLedger(_)) => Reply::fail(op, "no such ledger"),
                    // It may have fenced and closed the ledger before it failed: unknown.
                    Err(e) => Reply {
                        kind: EventKind::Info,
                        op,
                        error: Some(e.to_string()),
                    },
                }
            }
            Op::LedgerRead { ledger, entry, .. } => {
                let Ok(id) = i64::try_from(ledger) else {
                    return Reply::fail(op, "no such ledger");
                };
                if !state.readers.contains_key(&ledger) {
                    match state.client.open(id, LEDGER_PASSWORD).await {
                        Ok(r) => {
                            state.readers.insert(ledger, r);
                        }
                        Err(e) => return Reply::fail(op, &format!("open: {e}")),
                    }
                }
                let Some(reader) = state.readers.get(&ledger) else {
                    return Reply::fail(op, "no reader");
                };
                let Ok(e) = i64::try_from(entry) else {
                    return Reply::fail(op, "bad entry id");
                };
                match reader.read_entry(e).await {
                    Ok(got) => match ledger_value(&got.payload) {
                        Some(v) => Reply::ok(Op::LedgerRead {
                            ledger,
                            entry,
                            value: Some(v),
                        }),
                        None => Reply::fail(op, "entry payload is not a value"),
                    },
                    Err(LedgerError::BeyondLastEntry { .. } | LedgerError::NoSuchEntry { .. }) => {
                        Reply::ok(Op::LedgerRead {
                            ledger,
                            entry,
                            value: None,
                        })
                    }
                    Err(e) => Reply::fail(op, &e.to_string()),
                }
            }
            other => Reply::fail(other, "not a ledger operation"),
        }
    }
}

impl Executor {
    async fn acquire(&mut self, op: Op) -> Reply {
        match self.zk.lock(&self.mutex, self.lock_timeout).await {
            Ok(guard) => {
                let token = guard.fencing_token();
                let lost = guard.lost();
                let notices = self.notices.clone();
                tokio::spawn(async move {
                    lost.cancelled().await;
                    let _ = notices.send(Op::LockLost { token });
                });
                self.guards.insert(token, guard);
                Reply::ok(Op::Acquire { token: Some(token) })
            }
            // Without a guard nothing is held, whatever the error (a node left behind by a
            // timed-out attempt is deleted by the recipe and never counts as held).
            Err(e) => Reply::fail(op, &e.to_string()),
        }
    }
}

/// The numbers of the names `prefix<number>` among `names`, sorted.
fn numbers(names: &[String], prefix: &str) -> Vec<u64> {
    let mut out: Vec<u64> = names
        .iter()
        .filter_map(|n| n.strip_prefix(prefix)?.parse().ok())
        .collect();
    out.sort_unstable();
    out
}
