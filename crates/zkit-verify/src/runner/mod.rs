//! One run: start the server process, put a proxy in front of it per client, start the
//! clients, drive them with their generators while the nemesis plays the schedule, heal, do
//! the workload's final reads, stop, check. The history is written to `WORK_DIR/history.jsonl`
//! and the server's log to `WORK_DIR/server.log`.
//!
//! A failed run's [`RunResult::failure_report`] holds everything needed to understand and
//! replay it: the seed, the fault schedule (planned and as it happened), each violation with
//! the minimal sub-history around it, and the command that replays the seed.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex as StdMutex};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::Rng;
use tokio::sync::{mpsc, Mutex};
use tokio_util::sync::CancellationToken as Cancel;
use zkit_testkit::FaultProxy;

use crate::checker::Report;
use crate::client::{self, ClientConfig, ClientHandle};
use crate::executor::{Layout, Reply};
use crate::generator::{self, Generator, KeyPool, ID_PARENTS};
use crate::history::{Event, EventKind, Fault as FaultEvent, FaultPhase, History, Op, Process};
use crate::nemesis::disk::{DiskNemesis, Tmpfs};
use crate::nemesis::proxy::ProxyNemesis;
use crate::nemesis::server::{ServerNemesis, ServerProcess, ServerSpec};
use crate::nemesis::{Fault, FaultKind, Nemesis, Schedule, Timing};
use crate::soak::{self, SoakReport};
use crate::workload::Workload;
use crate::zk_ops::Zk;
use crate::Error;

/// The server program and its arguments (`zkit serve`, or `zkit-verify serve` with knobs).
#[derive(Debug, Clone)]
pub struct ServerCommand {
    /// The program.
    pub program: PathBuf,
    /// Arguments before `--port`/`--data-dir`/`--tick-time`.
    pub args: Vec<String>,
    /// Arguments after them.
    pub extra: Vec<String>,
}

impl ServerCommand {
    /// `zkit serve` (fsync always) from the `zkit` binary at `program`.
    pub fn zkit_serve(program: PathBuf) -> ServerCommand {
        let spec = ServerSpec::zkit_serve(program, PathBuf::new(), 0, PathBuf::new());
        ServerCommand {
            program: spec.program,
            args: spec.args,
            extra: spec.extra,
        }
    }

    /// The embedded server of `zkit-verify serve` with extra flags (`--wal-segment-size`,
    /// `--failpoint NAME=ACTION`).
    pub fn embedded(verify_bin: PathBuf, extra: &[&str]) -> ServerCommand {
        ServerCommand {
            program: verify_bin,
            args: vec!["serve".into()],
            extra: extra.iter().map(|s| (*s).to_owned()).collect(),
        }
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// The workload.
    pub workload: Workload,
    /// Fault kinds the schedule draws from (empty: none).
    pub faults: Vec<FaultKind>,
    /// The seed of every random choice.
    pub seed: u64,
    /// How long clients run (the final phase comes after).
    pub duration: Duration,
    /// Clients.
    pub clients: u32,
    /// The server.
    pub server: ServerCommand,
    /// The `zkit-verify` binary (process clients).
    pub verify_bin: PathBuf,
    /// The server's tickTime.
    pub tick: Duration,
    /// The clients' session timeout.
    pub session_timeout: Duration,
    /// How long the runner waits for one operation before recording it as info.
    pub op_timeout: Duration,
    /// Where data, log and history go (created; kept).
    pub work_dir: PathBuf,
    /// Sample the server's RSS and descriptors every second, and churn sessions, watches and
    /// ephemerals next to the workload.
    pub soak: bool,
    /// The command that replays this run (printed on failure).
    pub replay: String,
    /// When set, the nemesis holds each fault until some operation succeeded since the last
    /// fault healed (at most this long): every fault then hits a working system, which a test
    /// that must see a fault do harm needs (a kill while clients are still reconnecting from
    /// the last one loses nothing). Off by default: faults that land during a recovery are
    /// worth testing too.
    pub progress_between_faults: Option<Duration>,
}

impl RunConfig {
    /// Defaults sized for a quick run: 4 clients, tick 200 ms, session timeout 1.6 s.
    pub fn quick(
        workload: Workload,
        seed: u64,
        server: ServerCommand,
        verify_bin: PathBuf,
        work_dir: PathBuf,
    ) -> RunConfig {
        RunConfig {
            workload,
            faults: workload.faults(),
            seed,
            duration: Duration::from_secs(8),
            clients: 4,
            server,
            verify_bin,
            tick: Duration::from_millis(200),
            session_timeout: Duration::from_millis(1600),
            op_timeout: Duration::from_millis(3200),
            work_dir,
            soak: false,
            replay: String::new(),
            progress_between_faults: None,
        }
    }

    fn timing(&self) -> Timing {
        Timing {
            session_timeout: self.session_timeout,
            tick: self.tick,
        }
    }

    /// How long past its timeout a cut-off session may live on the server.
    pub fn grace(&self) -> Duration {
        self.tick * 2 + Duration::from_millis(300)
    }
}

/// Counts of a history.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Operations invoked.
    pub ops: usize,
    /// Ok.
    pub ok: usize,
    /// Fail.
    pub fail: usize,
    /// Info (including never completed).
    pub info: usize,
    /// Faults injected.
    pub faults: usize,
}

impl Counts {
    fn of(history: &History) -> Counts {
        let mut c = Counts {
            faults: history
                .faults
                .iter()
                .filter(|f| f.phase == FaultPhase::Start)
                .count(),
            ..Counts::default()
        };
        let mut open = 0usize;
        for e in &history.events {
            match e.kind {
                EventKind::Invoke => {
                    c.ops += 1;
                    open += 1;
                }
                EventKind::Ok => c.ok += 1,
                EventKind::Fail => c.fail += 1,
                EventKind::Info => c.info += 1,
            }
        }
        c.info += c.ops.saturating_sub(c.ok + c.fail + c.info);
        let _ = open;
        c
    }
}

/// What a run produced.
#[derive(Debug, Clone)]
pub struct RunResult {
    /// The workload.
    pub workload: Workload,
    /// The seed.
    pub seed: u64,
    /// The planned faults.
    pub schedule: Schedule,
    /// What happened.
    pub history: History,
    /// The checker's verdict.
    pub report: Report,
    /// Counts.
    pub counts: Counts,
    /// Server resources, when sampled.
    pub soak: Option<SoakReport>,
    /// Where the files are.
    pub work_dir: PathBuf,
    /// How to replay it.
    pub replay: String,
    /// Wall time of the whole run.
    pub elapsed: Duration,
}

impl RunResult {
    /// No violation and nothing undecided.
    pub fn is_valid(&self) -> bool {
        self.report.is_valid() && self.report.unknown.is_empty()
    }

    /// One line.
    pub fn summary(&self) -> String {
        format!(
            "{} seed {}: {} ops ({} ok, {} fail, {} info), {} faults, {:.1}s: {}",
            self.workload.name(),
            self.seed,
            self.counts.ops,
            self.counts.ok,
            self.counts.fail,
            self.counts.info,
            self.counts.faults,
            self.elapsed.as_secs_f64(),
            if self.is_valid() {
                "valid".to_owned()
            } else {
                self.report.summary()
            }
        )
    }

    /// Seed, schedule, faults as they happened, violations with their sub-histories, replay.
    pub fn failure_report(&self) -> String {
        let mut out = format!("{}\n{}", self.summary(), self.schedule);
        out.push_str("faults as they happened:\n");
        for f in &self.history.faults {
            out.push_str(&format!(
                "  {:>6}ms {:?} {}{}\n",
                f.time / 1_000_000,
                f.phase,
                f.fault,
                f.note
                    .as_deref()
                    .map(|n| format!(" ({n})"))
                    .unwrap_or_default()
            ));
        }
        out.push_str(&self.report.render(&self.history, 5));
        out.push_str(&format!(
            "history: {}\nserver log: {}\nreplay: {}\n",
            self.work_dir.join("history.jsonl").display(),
            self.work_dir.join("server.log").display(),
            self.replay
        ));
        out
    }
}

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
async fn call(
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

struct Shared {
    config: RunConfig,
    recorder: Recorder,
    stop: Cancel,
    layout: Layout,
    /// Per-client connect strings (through its proxy).
    connects: Vec<String>,
    /// The server's own address.
    direct: String,
}

impl Shared {
    fn client_config(&self, connect: &str) -> ClientConfig {
        ClientConfig {
            connect: connect.to_owned(),
            root: self.layout.root.clone(),
            session_timeout: self.config.session_timeout,
            // Well inside the runner's op timeout: an acquire that succeeded after the runner
            // gave up on it would hold the lock unrecorded.
            lock_timeout: self.config.op_timeout / 2,
        }
    }

    async fn spawn_client(&self, c: u32) -> Result<ClientHandle, Error> {
        let cfg = self.client_config(&self.connects[c as usize]);
        if self.config.workload.process_clients() {
            client::spawn_process(&self.config.verify_bin, &cfg, self.config.op_timeout * 3).await
        } else {
            client::spawn_task(&cfg).await
        }
    }

    async fn spawn_client_until_stop(&self, c: u32) -> Option<ClientHandle> {
        loop {
            match self.spawn_client(c).await {
                Ok(h) => return Some(h),
                Err(e) => {
                    tracing::debug!(client = c, %e, "client start failed; retrying");
                    if self.stop.is_cancelled() {
                        return None;
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        }
    }
}

fn generator_for(
    workload: Workload,
    c: u32,
    clients: u32,
    keys: &Arc<StdMutex<KeyPool>>,
) -> Box<dyn Generator> {
    match workload {
        Workload::Register => Box::new(generator::RegisterGen::new(c, Arc::clone(keys))),
        Workload::Set => Box::new(generator::SetGen::new(c)),
        Workload::UniqueIds => Box::new(generator::IdGen),
        Workload::Queue if c < clients / 2 => Box::new(generator::ProducerGen::new(c)),
        Workload::Queue => Box::new(generator::ConsumerGen::default()),
        Workload::Locks | Workload::Sessions => Box::new(generator::LockGen::default()),
    }
}

/// The clients that client faults may hit (queue: the consumers).
fn victims(workload: Workload, clients: u32) -> Vec<u32> {
    match workload {
        Workload::Queue => (clients / 2..clients).collect(),
        _ => (0..clients).collect(),
    }
}

/// One generic client: generator → op → record, until stopped; kills arrive on `kills`.
async fn client_loop(
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

/// The sessions workload's client: tracks its ZooKeeper session, keeps an ephemeral per
/// session, reads and writes its own ephemeral and a shared znode through that session.
async fn session_client(
    shared: Arc<Shared>,
    c: u32,
    mut rng: StdRng,
    ephemerals: Arc<StdMutex<Vec<String>>>,
) {
    let rec = shared.recorder.clone();
    let zk = loop {
        match Zk::connect(&shared.connects[c as usize], shared.config.session_timeout).await {
            Ok(zk) => break zk,
            Err(_) if !shared.stop.is_cancelled() => {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(_) => return,
        }
    };
    let mut process = rec.new_process();
    let notice_process = rec.new_process();
    let mut known: Option<(i64, String)> = None;
    let shared_path = format!("{}/shared", shared.layout.sessions());
    let timeout = shared.config.op_timeout;
    while !shared.stop.is_cancelled() {
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(rng.gen_range(2..15))) => {}
            () = shared.stop.cancelled() => break,
        }
        let (sid, negotiated, _) = zk.current();
        if known.as_ref().map(|k| k.0) != Some(sid) {
            let path = format!("{}/e-{c}-{sid:x}", shared.layout.sessions());
            let start = Op::SessionStart {
                client: c,
                session: None,
                timeout_ms: None,
            };
            rec.invoke(process, start.clone());
            let created = tokio::time::timeout(timeout, zk.create_ephemeral(&path)).await;
            match created {
                Ok(Ok(owner)) if owner == sid => {
                    rec.complete(
                        process,
                        Reply {
                            kind: EventKind::Ok,
                            op: Op::SessionStart {
                                client: c,
                                session: Some(sid),
                                timeout_ms: Some(
                                    u64::try_from(negotiated.as_millis()).unwrap_or(u64::MAX),
                                ),
                            },
                            error: None,
                        },
                    );
                    crate::lock_vec(&ephemerals).push(path.clone());
                    known = Some((sid, path));
                    // When this client gives up on the session, ask the server whether it
                    // really expired it; only a server's "expired" is an observed expiry.
                    let (zk2, rec2, stop2) = (zk.clone(), rec.clone(), shared.stop.clone());
                    let (direct, t) = (shared.direct.clone(), shared.config.session_timeout);
                    let probe = zk.probe_current();
                    tokio::spawn(async move {
                        tokio::select! {
                            () = zk2.until_given_up(&probe) => {}
                            () = stop2.cancelled() => return,
                        }
                        if let Ok(true) = Zk::server_says_expired(&direct, &probe, t).await {
                            rec2.instant(
                                notice_process,
                                Op::SessionExpired {
                                    client: c,
                                    session: probe.id(),
                                },
                            );
                        }
                    });
                }
                other => {
                    let error = format!("{other:?}");
                    rec.complete(
                        process,
                        Reply {
                            kind: EventKind::Info,
                            op: start,
                            error: Some(error),
                        },
                    );
                    process = rec.new_process();
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
            continue;
        }
        let own = known.as_ref().map(|k| k.1.clone()).unwrap_or_default();
        let path = if rng.gen_bool(0.5) {
            own
        } else {
            shared_path.clone()
        };
        let write = rng.gen_bool(0.4);
        let invoked = if write {
            Op::SessionWrite {
                session: sid,
                path: path.clone(),
                seen: None,
            }
        } else {
            Op::SessionRead {
                session: sid,
                path: path.clone(),
                seen: None,
            }
        };
        rec.invoke(process, invoked.clone());
        let reply = if write {
            match tokio::time::timeout(timeout, zk.write_seen(sid, &path)).await {
                Ok(Ok(seen)) => ok_reply(Op::SessionWrite {
                    session: sid,
                    path,
                    seen: Some(seen),
                }),
                Ok(Err(e)) => zk_err_reply(invoked, &e, false),
                Err(_) => err_reply(invoked, "timed out", false),
            }
        } else {
            match tokio::time::timeout(timeout, zk.read_seen(sid, &path)).await {
                Ok(Ok(seen)) => ok_reply(Op::SessionRead {
                    session: sid,
                    path,
                    seen,
                }),
                Ok(Err(e)) => zk_err_reply(invoked, &e, true),
                Err(_) => err_reply(invoked, "timed out", true),
            }
        };
        let info = reply.kind == EventKind::Info;
        rec.complete(process, reply);
        if info {
            process = rec.new_process();
        }
    }
    zk.close();
}

fn ok_reply(op: Op) -> Reply {
    Reply {
        kind: EventKind::Ok,
        op,
        error: None,
    }
}

fn err_reply(op: Op, error: &str, read: bool) -> Reply {
    Reply {
        kind: if read {
            EventKind::Fail
        } else {
            EventKind::Info
        },
        op,
        error: Some(error.to_owned()),
    }
}

/// A zkit error as a reply: definite errors fail, others are unknown unless `read`.
fn zk_err_reply(op: Op, err: &zkit::Error, read: bool) -> Reply {
    match crate::zk_ops::Outcome::of(err) {
        crate::zk_ops::Outcome::Definite(e) => Reply {
            kind: EventKind::Fail,
            op,
            error: Some(e),
        },
        crate::zk_ops::Outcome::Unknown(e) => err_reply(op, &e, read),
    }
}

/// The sessions workload's observer: a session of its own, straight to the server (never
/// partitioned), asking who owns the ephemerals.
async fn observer(
    shared: Arc<Shared>,
    mut rng: StdRng,
    ephemerals: Arc<StdMutex<Vec<String>>>,
    until: Cancel,
) {
    let rec = shared.recorder.clone();
    let Ok(zk) = Zk::connect(&shared.direct, shared.config.session_timeout).await else {
        return;
    };
    let process = rec.new_process();
    while !until.is_cancelled() {
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(rng.gen_range(5..25))) => {}
            () = until.cancelled() => break,
        }
        let path = {
            let list = crate::lock_vec(&ephemerals);
            if list.is_empty() {
                continue;
            }
            list[rng.gen_range(0..list.len())].clone()
        };
        observe(&rec, process, &zk, &path, shared.config.op_timeout).await;
    }
    zk.close();
}

/// One observation (a read: a failed one is a fail, so the process stays).
async fn observe(rec: &Recorder, process: Process, zk: &Zk, path: &str, timeout: Duration) {
    let invoked = Op::ObserveEphemeral {
        path: path.to_owned(),
        owner: None,
    };
    rec.invoke(process, invoked.clone());
    let reply = match tokio::time::timeout(timeout, zk.owner(path)).await {
        Ok(Ok(owner)) => ok_reply(Op::ObserveEphemeral {
            path: path.to_owned(),
            owner,
        }),
        Ok(Err(e)) => zk_err_reply(invoked, &e, true),
        Err(_) => err_reply(invoked, "timed out", true),
    };
    rec.complete(process, reply);
}

/// Session, watch and ephemeral churn next to the workload (soak runs): a session every
/// ~100 ms creates an ephemeral, watches it, and closes.
async fn churn(direct: String, stop: Cancel, root: String, timeout: Duration) {
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

/// The nemesis task: plays `schedule`, sending client kills to the client loops. With
/// `progress`, each fault first waits (at most that long) for an operation to succeed after the
/// previous fault healed.
async fn play(
    schedule: Schedule,
    mut nemeses: Vec<Box<dyn Nemesis>>,
    recorder: Recorder,
    kills: HashMap<u32, mpsc::UnboundedSender<()>>,
    stop: Cancel,
    progress: Option<Duration>,
) {
    let mut oks = recorder.oks();
    let mut healed_at = *oks.borrow_and_update();
    for planned in schedule.planned {
        let wait = planned
            .at
            .saturating_sub(recorder.elapsed())
            .max(planned.quiet);
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = stop.cancelled() => return,
        }
        if let Some(bound) = progress {
            // A bounded wait on a condition: without progress the fault goes ahead anyway.
            tokio::select! {
                _ = tokio::time::timeout(bound, oks.wait_for(|n| *n > healed_at)) => {}
                () = stop.cancelled() => return,
            }
        }
        if let Fault::KillClient { client } = planned.fault {
            recorder.fault(FaultPhase::Start, &planned.fault, None);
            if let Some(tx) = kills.get(&client) {
                let _ = tx.send(());
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
        recorder.fault(FaultPhase::Start, &planned.fault, Some(note_of(note)));
        tokio::time::sleep(planned.fault.duration()).await;
        let note = n.heal(&planned.fault).await;
        recorder.fault(FaultPhase::End, &planned.fault, Some(note_of(note)));
        healed_at = *oks.borrow_and_update();
    }
}

fn note_of(r: Result<String, Error>) -> String {
    match r {
        Ok(n) => n,
        Err(e) => format!("error: {e}"),
    }
}

/// Runs one workload under one schedule and checks the history.
///
/// # Errors
/// Setup failures (server does not start, tmpfs cannot be mounted, ...). Violations are not
/// errors: they are in the result.
pub async fn run(config: RunConfig) -> Result<RunResult, Error> {
    let began = Instant::now();
    std::fs::create_dir_all(&config.work_dir)?;
    let clients = config.clients.max(1);
    let schedule = Schedule::generate(
        config.seed,
        &config.faults,
        config.duration,
        config.timing(),
        clients,
        Some(&victims(config.workload, clients)),
    );
    // Data dir: on a small tmpfs when the disk is to fill up.
    let disk_full = config.faults.contains(&FaultKind::DiskFull);
    let tmpfs = if disk_full {
        Some(Tmpfs::mount(&config.work_dir.join("disk"), 48)?)
    } else {
        None
    };
    let data_dir = match &tmpfs {
        Some(t) => t.dir().join("data"),
        None => config.work_dir.join("data"),
    };
    let spec = ServerSpec {
        program: config.server.program.clone(),
        args: config.server.args.clone(),
        data_dir,
        tick_ms: u64::try_from(config.tick.as_millis()).unwrap_or(2000),
        extra: config.server.extra.clone(),
        log: config.work_dir.join("server.log"),
    };
    let server = Arc::new(Mutex::new(ServerProcess::start(spec).await?));
    let direct = server.lock().await.addr().to_string();
    let mut proxies = Vec::new();
    for _ in 0..clients {
        proxies.push(Arc::new(FaultProxy::start(direct.clone()).await?));
    }
    let layout = Layout {
        root: "/verify".into(),
    };
    {
        let zk = Zk::connect(&direct, config.session_timeout).await?;
        for dir in layout.dirs() {
            zk.ensure_path(&dir).await?;
        }
        zk.create(&format!("{}/shared", layout.sessions())).await?;
        zk.close();
    }
    let recorder = Recorder::new();
    let stop = Cancel::new();
    let shared = Arc::new(Shared {
        connects: proxies.iter().map(|p| p.connect_string()).collect(),
        direct: direct.clone(),
        config: config.clone(),
        recorder: recorder.clone(),
        stop: stop.clone(),
        layout: layout.clone(),
    });

    let mut tasks = Vec::new();
    let mut kills = HashMap::new();
    let ephemerals: Arc<StdMutex<Vec<String>>> = Arc::default();
    let observer_stop = Cancel::new();
    let keys = KeyPool::shared(4, 30);
    for c in 0..clients {
        let rng = generator::client_rng(config.seed, c);
        if config.workload == Workload::Sessions {
            tasks.push(tokio::spawn(session_client(
                Arc::clone(&shared),
                c,
                rng,
                Arc::clone(&ephemerals),
            )));
        } else {
            let (tx, rx) = mpsc::unbounded_channel();
            kills.insert(c, tx);
            let gen = generator_for(config.workload, c, clients, &keys);
            tasks.push(tokio::spawn(client_loop(
                Arc::clone(&shared),
                c,
                gen,
                rng,
                rx,
            )));
        }
    }
    let observer_task = (config.workload == Workload::Sessions).then(|| {
        tokio::spawn(observer(
            Arc::clone(&shared),
            generator::client_rng(config.seed, 1000),
            Arc::clone(&ephemerals),
            observer_stop.clone(),
        ))
    });
    let churn_task = config.soak.then(|| {
        tokio::spawn(churn(
            direct.clone(),
            stop.clone(),
            layout.root.clone(),
            config.op_timeout,
        ))
    });
    let samples: Arc<StdMutex<Vec<soak::Sample>>> = Arc::default();
    let sampler = config.soak.then(|| {
        let (server, samples, stop, rec) = (
            Arc::clone(&server),
            Arc::clone(&samples),
            stop.clone(),
            recorder.clone(),
        );
        tokio::spawn(async move {
            while !stop.is_cancelled() {
                if let Some(pid) = server.lock().await.pid() {
                    if let Some(s) = soak::sample(pid, rec.elapsed()) {
                        crate::lock_vec(&samples).push(s);
                    }
                }
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_secs(1)) => {}
                    () = stop.cancelled() => {}
                }
            }
        })
    });

    let mut nemeses: Vec<Box<dyn Nemesis>> = vec![
        Box::new(ServerNemesis {
            server: Arc::clone(&server),
        }),
        Box::new(ProxyNemesis {
            proxies: proxies.clone(),
        }),
    ];
    if let Some(t) = &tmpfs {
        nemeses.push(Box::new(DiskNemesis {
            filler: t.dir().join("filler"),
        }));
    }
    let nemesis_task = tokio::spawn(play(
        schedule.clone(),
        nemeses,
        recorder.clone(),
        kills,
        stop.clone(),
        config.progress_between_faults,
    ));

    tokio::time::sleep(config.duration).await;
    // The schedule ends before the run does; wait for the fault in progress to heal.
    let _ = nemesis_task.await;
    stop.cancel();
    for t in tasks {
        let _ = t.await;
    }
    for p in &proxies {
        p.resume();
        p.unstall();
    }
    server.lock().await.ensure_running().await?;

    final_phase(&shared, &ephemerals).await;
    observer_stop.cancel();
    if let Some(t) = observer_task {
        let _ = t.await;
    }
    if let Some(t) = churn_task {
        let _ = t.await;
    }
    if let Some(t) = sampler {
        let _ = t.await;
    }
    {
        let mut s = server.lock().await;
        tokio::task::block_in_place(|| s.stop());
    }
    drop(tmpfs);
    for p in proxies {
        if let Ok(p) = Arc::try_unwrap(p) {
            p.shutdown().await;
        }
    }

    let history = recorder.history();
    let file = std::fs::File::create(config.work_dir.join("history.jsonl"))?;
    history.write_jsonl(std::io::BufWriter::new(file))?;
    let report = config.workload.checker(config.grace()).check(&history)?;
    let soak = config
        .soak
        .then(|| SoakReport::from_samples(&crate::lock_vec(&samples)));
    Ok(RunResult {
        workload: config.workload,
        seed: config.seed,
        schedule,
        counts: Counts::of(&history),
        history,
        report,
        soak,
        work_dir: config.work_dir.clone(),
        replay: config.replay.clone(),
        elapsed: began.elapsed(),
    })
}

/// The workload's reads after every fault healed, by a fresh client straight to the server.
async fn final_phase(shared: &Arc<Shared>, ephemerals: &Arc<StdMutex<Vec<String>>>) {
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

#[cfg(test)]
mod tests {
    use super::*;

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
