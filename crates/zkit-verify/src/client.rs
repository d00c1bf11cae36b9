//! Clients: each has its own ZooKeeper session and carries out one operation at a time.
//!
//! Two kinds, with one interface ([`ClientHandle`]):
//! - **task** clients run an [`Executor`] on a tokio task of the runner. Used where the
//!   faults are on the server or the network (register, set, unique ids, sessions): a separate
//!   OS process would add its start-up cost and nothing else, since each task already has its
//!   own session and its own connection.
//! - **process** clients are real OS processes (`zkit-verify client`), driven over
//!   stdin/stdout with one JSON object per line. Used where the client itself crashes (queue
//!   consumers and lock holders are killed with SIGKILL mid-operation): only a real process
//!   death leaves the session to expire on the server as it would in production.
//!
//! The runner stamps an invoke before it hands the op over and the completion after the reply
//! arrives, so a process's own clock never enters the history. An op the runner timed out
//! (info) may still be carried out later; its late reply is dropped (replies carry ids).

use std::collections::HashMap;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot};

use crate::executor::{Executor, Layout, Reply};
use crate::history::Op;
use crate::zk_ops::Zk;
use crate::Error;

/// A line from the runner to a client process.
#[derive(Debug, Serialize, Deserialize)]
pub struct Request {
    /// Matches the reply.
    pub id: u64,
    /// What to do.
    pub op: Op,
}

/// A line from a client process to the runner.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Message {
    /// Connected; ready for requests (the session id).
    Ready(i64),
    /// The reply to request `id`.
    Reply {
        /// The request's id.
        id: u64,
        /// How it ended.
        reply: Reply,
    },
    /// Something that happened by itself (a lock's lost-signal).
    Notice(Op),
}

type Pending = Arc<StdMutex<HashMap<u64, oneshot::Sender<Reply>>>>;

/// How the client runs.
#[derive(Debug)]
enum Kind {
    Task(tokio::task::JoinHandle<()>),
    Process(tokio::process::Child),
}

/// A running client.
#[derive(Debug)]
pub struct ClientHandle {
    commands: mpsc::UnboundedSender<(u64, Op)>,
    pending: Pending,
    next_id: u64,
    /// Notices (lock lost) as they arrive.
    pub notices: mpsc::UnboundedReceiver<Op>,
    kind: Kind,
}

impl ClientHandle {
    /// Hands `op` over; the receiver gets the reply (or is dropped if the client dies).
    pub fn call(&mut self, op: Op) -> oneshot::Receiver<Reply> {
        let (tx, rx) = oneshot::channel();
        self.next_id += 1;
        let id = self.next_id;
        lock(&self.pending).insert(id, tx);
        // If the client is gone the sender (in `pending`) is dropped below, ending `rx`.
        if self.commands.send((id, op)).is_err() {
            lock(&self.pending).remove(&id);
        }
        rx
    }

    /// Forgets a call whose reply is no longer wanted (timed out).
    pub fn forget(&mut self) {
        lock(&self.pending).clear();
    }

    /// The OS process id of a process client.
    pub fn pid(&self) -> Option<u32> {
        match &self.kind {
            Kind::Process(child) => child.id(),
            Kind::Task(_) => None,
        }
    }

    /// Kills the client: SIGKILL for a process, abort for a task. Its session is left to
    /// expire on the server.
    pub async fn kill(&mut self) {
        match &mut self.kind {
            Kind::Process(child) => {
                let _ = child.start_kill();
                let _ = child.wait().await;
            }
            Kind::Task(task) => {
                task.abort();
                let _ = (&mut *task).await;
            }
        }
        lock(&self.pending).clear();
    }
}

fn lock<T>(m: &StdMutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Connection settings of a client.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// The connect string.
    pub connect: String,
    /// The run's root znode.
    pub root: String,
    /// Requested session timeout.
    pub session_timeout: Duration,
    /// How long a lock acquisition waits.
    pub lock_timeout: Duration,
    /// Register reads send a `sync` first: needed on an ensemble, where a member answers
    /// reads from its own replica, which may lag (ZooKeeper's reads are sequentially
    /// consistent, not linearizable; sync + read is the documented way to a fresh read).
    pub sync_reads: bool,
}

/// Connects a session as `config` says and builds the executor on it: the executor, the
/// session's id, and the notices (ops) it reports on its own, such as a lost lock.
async fn connect_executor(
    config: &ClientConfig,
) -> Result<(Executor, i64, mpsc::UnboundedReceiver<Op>), Error> {
    let zk = Zk::connect(&config.connect, config.session_timeout).await?;
    let session = zk.current().0;
    let (notice_tx, notices) = mpsc::unbounded_channel();
    let executor = Executor::new(
        zk,
        Layout {
            root: config.root.clone(),
        },
        config.lock_timeout,
        notice_tx,
    )?
    .with_sync_reads(config.sync_reads);
    Ok((executor, session, notices))
}

/// Starts a task client.
///
/// # Errors
/// When the first connect fails.
pub async fn spawn_task(config: &ClientConfig) -> Result<ClientHandle, Error> {
    let (mut executor, _, notices) = connect_executor(config).await?;
    let (commands, mut rx) = mpsc::unbounded_channel::<(u64, Op)>();
    let pending: Pending = Arc::default();
    let task_pending = Arc::clone(&pending);
    let task = tokio::spawn(async move {
        while let Some((id, op)) = rx.recv().await {
            let reply = executor.execute(op).await;
            if let Some(tx) = lock(&task_pending).remove(&id) {
                let _ = tx.send(reply);
            }
        }
        executor.zk().close();
    });
    Ok(ClientHandle {
        commands,
        pending,
        next_id: 0,
        notices,
        kind: Kind::Task(task),
    })
}

/// Starts a process client: `program client --connect … --root …` (the `zkit-verify` binary),
/// and waits for it to connect.
///
/// # Errors
/// When it cannot be started or does not connect within `connect_timeout`.
pub async fn spawn_process(
    program: &Path,
    config: &ClientConfig,
    connect_timeout: Duration,
) -> Result<ClientHandle, Error> {
    let mut child = tokio::process::Command::new(program)
        .arg("client")
        .args(["--connect", &config.connect, "--root", &config.root])
        .arg("--session-timeout-ms")
        .arg(config.session_timeout.as_millis().to_string())
        .arg("--lock-timeout-ms")
        .arg(config.lock_timeout.as_millis().to_string())
        .args(config.sync_reads.then_some("--sync-reads"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| Error::Process(format!("cannot start {}: {e}", program.display())))?;
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(Error::Process("client process without pipes".into()));
    };
    let mut lines = BufReader::new(stdout).lines();
    let ready = tokio::time::timeout(connect_timeout, lines.next_line()).await;
    match ready {
        Ok(Ok(Some(line))) if matches!(serde_json::from_str(&line), Ok(Message::Ready(_))) => {}
        other => {
            let _ = child.start_kill();
            return Err(Error::Process(format!(
                "client process did not connect: {other:?}"
            )));
        }
    }
    let pending: Pending = Arc::default();
    let (notice_tx, notices) = mpsc::unbounded_channel();
    let reader_pending = Arc::clone(&pending);
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            match serde_json::from_str::<Message>(&line) {
                Ok(Message::Reply { id, reply }) => {
                    if let Some(tx) = lock(&reader_pending).remove(&id) {
                        let _ = tx.send(reply);
                    }
                }
                Ok(Message::Notice(op)) => {
                    let _ = notice_tx.send(op);
                }
                Ok(Message::Ready(_)) | Err(_) => {}
            }
        }
        // The process ended: nobody will answer the calls still open.
        lock(&reader_pending).clear();
    });
    let (commands, mut rx) = mpsc::unbounded_channel::<(u64, Op)>();
    tokio::spawn(async move {
        let mut stdin = stdin;
        while let Some((id, op)) = rx.recv().await {
            let Ok(mut line) = serde_json::to_vec(&Request { id, op }) else {
                continue;
            };
            line.push(b'\n');
            if stdin.write_all(&line).await.is_err() || stdin.flush().await.is_err() {
                break;
            }
        }
    });
    Ok(ClientHandle {
        commands,
        pending,
        next_id: 0,
        notices,
        kind: Kind::Process(child),
    })
}

/// The client-process side: connects, prints `Ready`, then carries out requests from stdin one
/// at a time, printing replies and notices on stdout, until stdin closes.
///
/// # Errors
/// When connecting fails.
pub async fn serve_stdio(config: ClientConfig) -> Result<(), Error> {
    let (mut executor, session, mut notices) = connect_executor(&config).await?;
    let (out_tx, mut out_rx) = mpsc::unbounded_channel::<Message>();
    let writer = tokio::spawn(async move {
        let mut stdout = tokio::io::stdout();
        while let Some(m) = out_rx.recv().await {
            let Ok(mut line) = serde_json::to_vec(&m) else {
                continue;
            };
            line.push(b'\n');
            if stdout.write_all(&line).await.is_err() || stdout.flush().await.is_err() {
                break;
            }
        }
    });
    let _ = out_tx.send(Message::Ready(session));
    let notice_out = out_tx.clone();
    tokio::spawn(async move {
        while let Some(op) = notices.recv().await {
            let _ = notice_out.send(Message::Notice(op));
        }
    });
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let Ok(Request { id, op }) = serde_json::from_str(&line) else {
            continue;
        };
        let reply = executor.execute(op).await;
        let _ = out_tx.send(Message::Reply { id, reply });
    }
    executor.zk().close();
    drop(out_tx);
    // Notice forwarders may hold the writer open; the replies are flushed well within this.
    let _ = tokio::time::timeout(Duration::from_secs(1), writer).await;
    Ok(())
}
