//! One run: start the server process (or an Apache ZooKeeper ensemble), put a proxy in front
//! of it per client, start the
//! clients, drive them with their generators while the nemesis plays the schedule, heal, do
//! the workload's final reads, stop, check. The history is written to `WORK_DIR/history.jsonl`
//! and the server's log to `WORK_DIR/server.log`.
//!
//! A failed run's [`RunResult::failure_report`] holds everything needed to understand and
//! replay it: the seed, the fault schedule (planned and as it happened), each violation with
//! the minimal sub-history around it, and the command that replays the seed.

mod clients;
mod config;
mod final_phase;
mod play;
mod recorder;
mod result;
mod sessions;
mod shared;

use std::collections::HashMap;
use std::sync::{Arc, Mutex as StdMutex};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, Mutex};
use tokio_util::sync::CancellationToken as Cancel;
use zkit_testkit::FaultProxy;

use crate::executor::Layout;
use crate::generator::{self, KeyPool};
use crate::nemesis::bookie::{BookieNemesis, Bookies};
use crate::nemesis::client::ClientNemesis;
use crate::nemesis::disk::{DiskNemesis, Tmpfs};
use crate::nemesis::ensemble::{EnsembleNemesis, EnsembleTarget, ENSEMBLE_TICK};
use crate::nemesis::proxy::ProxyNemesis;
use crate::nemesis::server::{ServerNemesis, ServerProcess, ServerSpec};
use crate::nemesis::{FaultKind, Nemesis, Schedule, BOOKIES};
use crate::soak::{self, SoakReport};
use crate::workload::Workload;
use crate::zk_ops::Zk;
use crate::Error;

use self::clients::{churn, client_loop, generator_for, victims};
pub use self::config::{EnsembleOptions, RunConfig, ServerCommand};
use self::final_phase::final_phase;
use self::play::play;
pub use self::recorder::Recorder;
pub use self::result::{Counts, RunResult};
use self::sessions::{observer, session_client};
use self::shared::Shared;

/// What the clients talk to.
enum System {
    /// A `zkit serve` (or `zkit-verify serve`) process.
    Server(Arc<Mutex<ServerProcess>>),
    /// An Apache ZooKeeper ensemble.
    Ensemble(Arc<EnsembleTarget>),
}

/// Runs one workload under one schedule and checks the history.
///
/// # Errors
/// Setup failures (server does not start, tmpfs cannot be mounted, ...). Violations are not
/// errors: they are in the result.
pub async fn run(mut config: RunConfig) -> Result<RunResult, Error> {
    let began = Instant::now();
    if config.ensemble.is_some() {
        config.tick = ENSEMBLE_TICK;
    }
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
    if config.ensemble.is_some() && disk_full {
        return Err(Error::Setup(
            "disk-full is a fault of the zkit server only".into(),
        ));
    }
    if let Some(k) = config.faults.iter().find(|k| k.needs_ensemble()) {
        if config.ensemble.is_none() {
            return Err(Error::Setup(format!(
                "{} needs an ensemble as the target",
                k.name()
            )));
        }
    }
    let tmpfs = if disk_full {
        Some(Tmpfs::mount(&config.work_dir.join("disk"), 48).map_err(Error::Setup)?)
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
    let system = match config.ensemble {
        Some(e) => {
            let links = e.links || config.faults.iter().any(|k| k.needs_links());
            System::Ensemble(Arc::new(EnsembleTarget::start(e.members, links).await?))
        }
        None => System::Server(Arc::new(Mutex::new(ServerProcess::start(spec).await?))),
    };
    let direct = match &system {
        System::Server(s) => s.lock().await.addr().to_string(),
        System::Ensemble(e) => e.connect_string().to_owned(),
    };
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
    let bookies = if config.workload == Workload::Ledger {
        let program = config
            .zkit_bin
            .clone()
            .unwrap_or_else(|| config.server.program.clone());
        let b = Bookies::start(program, direct.clone(), &config.work_dir, BOOKIES as usize).await?;
        Some(Arc::new(Mutex::new(b)))
    } else {
        None
    };
    let recorder = Recorder::new();
    let stop = Cancel::new();
    let shared = Arc::new(Shared {
        connects: proxies.iter().map(|p| p.connect_string()).collect(),
        direct: direct.clone(),
        config: config.clone(),
        recorder: recorder.clone(),
        stop: stop.clone(),
        layout: layout.clone(),
        pids: Arc::default(),
    });

    let mut tasks = Vec::new();
    let mut kills = HashMap::new();
    let ephemerals: Arc<StdMutex<Vec<String>>> = Arc::default();
    let observer_stop = Cancel::new();
    let keys = KeyPool::shared(4, 30);
    let ledgers: generator::CurrentLedgers = Arc::default();
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
            let gen = generator_for(config.workload, c, clients, &keys, &ledgers);
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
    let sampler = match (&system, config.soak) {
        (System::Server(server), true) => Some(server),
        _ => None,
    }
    .map(|server| {
        let (server, samples, stop, rec) = (
            Arc::clone(server),
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
        Box::new(ProxyNemesis {
            proxies: proxies.clone(),
        }),
        Box::new(ClientNemesis::new(Arc::clone(&shared.pids))),
    ];
    if let Some(b) = &bookies {
        nemeses.push(Box::new(BookieNemesis {
            bookies: Arc::clone(b),
        }));
    }
    match &system {
        System::Server(server) => nemeses.push(Box::new(ServerNemesis {
            server: Arc::clone(server),
        })),
        System::Ensemble(e) => nemeses.push(Box::new(EnsembleNemesis::new(Arc::clone(e)))),
    }
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
    let injected = nemesis_task.await.unwrap_or_default();
    stop.cancel();
    for t in tasks {
        let _ = t.await;
    }
    for p in &proxies {
        p.resume();
        p.unstall();
    }
    match &system {
        System::Server(s) => s.lock().await.ensure_running().await?,
        System::Ensemble(e) => e.ensure_healthy().await?,
    }
    if let Some(b) = &bookies {
        b.lock().await.ensure_running().await?;
    }

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
    if let Some(b) = &bookies {
        let mut b = b.lock().await;
        tokio::task::block_in_place(|| b.stop());
    }
    match system {
        System::Server(server) => {
            let mut s = server.lock().await;
            tokio::task::block_in_place(|| s.stop());
        }
        // Dropping the last reference stops the members (a blocking script call).
        System::Ensemble(e) => {
            e.save_logs(&config.work_dir);
            tokio::task::block_in_place(|| drop(e));
        }
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
    let report = config
        .workload
        .checker(config.grace(), config.stale_reads())
        .check(&history)?;
    let soak = config
        .soak
        .then(|| SoakReport::from_samples(&crate::lock_vec(&samples)));
    Ok(RunResult {
        workload: config.workload,
        seed: config.seed,
        schedule,
        counts: Counts::of(&history),
        injected: config
            .faults
            .iter()
            .map(|k| (*k, injected.get(k).copied().unwrap_or(0)))
            .collect(),
        history,
        report,
        soak,
        work_dir: config.work_dir.clone(),
        replay: config.replay.clone(),
        elapsed: began.elapsed(),
    })
}
