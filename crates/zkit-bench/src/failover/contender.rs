//! The zkit contender of `zkit-bench failover` (the hidden `zkit-bench failover-contender`,
//! run by the harness as a child process, as it runs the Curator program): zkit's library
//! looping on the ensemble and printing a timestamped line for every lock acquired and every
//! transaction committed. The same workload and output as `bench/CuratorFailoverBench.java`:
//!
//! - `--clients` sessions loop on one [`zkit::lock::Mutex`]: acquire, hold `--hold-ms`,
//!   release (waiting for the delete's reply, as Curator's `release()` does).
//! - One [`Coordinator`] (its own session) loops on two-phase-commit transactions across three
//!   participants (each its own session, a [`MemoryResource`] voting yes), then sleeps
//!   `--hold-ms`.
//!
//! Every session uses zkit's defaults but for the session timeout (`--session-timeout-ms`, the
//! one the Curator side is given). Output, one line each (times: µs since the Unix epoch):
//! `READY`, `EVENT lock T`, `EVENT txn T`, `EVENT connected T` (a session's `Reconnected`),
//! `ERROR lock|txn MESSAGE`. It runs until killed.
//!
//! With `RUST_LOG` set (e.g. `RUST_LOG=zkit=debug,zkit_client=debug`), the libraries' trace
//! goes to stderr (the harness's contender log), timestamped: when each session reconnects and
//! each step of a transaction is written or retried.

use std::io::Write as _;
use std::sync::Arc;
use std::time::Duration;

use zkit::lock::Mutex;
use zkit::txn::{Coordinator, MemoryResource, Outcome, Participant, TxnOptions};
use zkit::{Session, SessionOptions, SessionState};

use super::now_micros;

/// Arguments of `zkit-bench failover-contender`.
#[derive(Debug, clap::Args)]
pub struct ContenderArgs {
    /// Connect string.
    #[arg(long)]
    pub server: String,
    /// Parent of the lock directory and the transactions' root.
    #[arg(long)]
    pub path: String,
    /// Sessions looping on the lock.
    #[arg(long, default_value_t = 4)]
    pub clients: usize,
    /// How long each holder holds the lock, and the pause between transactions (ms).
    #[arg(long, default_value_t = 10)]
    pub hold_ms: u64,
    /// Session timeout of every session (ms).
    #[arg(long, default_value_t = 10_000)]
    pub session_timeout_ms: u64,
}

/// The participants' names.
const PARTICIPANTS: [&str; 3] = ["P1", "P2", "P3"];

/// Prints one line and flushes it (the harness reads it as it comes).
fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// One line for an error: its message on one line.
fn one_line(err: &dyn std::fmt::Display) -> String {
    err.to_string().replace('\n', " ")
}

/// Prints `EVENT connected T` whenever `session` is back on its ZooKeeper session after a
/// disconnect.
async fn report_reconnects(session: Session) {
    let mut events = session.subscribe();
    loop {
        match events.recv().await {
            Ok(event) if event.state == SessionState::Reconnected => {
                say(&format!("EVENT connected {}", now_micros()));
            }
            Ok(_) => {}
            Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
            Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
        }
    }
}

async fn lock_loop(session: Session, dir: String, hold: Duration) {
    let mutex = Mutex::new(&session, &dir);
    loop {
        match mutex.lock().await {
            Ok(guard) => {
                say(&format!("EVENT lock {}", now_micros()));
                tokio::time::sleep(hold).await;
                if let Err(err) = guard.release().await {
                    say(&format!("ERROR lock release: {}", one_line(&err)));
                }
            }
            Err(err) => {
                say(&format!("ERROR lock {}", one_line(&err)));
                // Not a busy loop while the session is away: try again once it is connected.
                let _ = session.wait_connected().await;
            }
        }
    }
}

async fn txn_loop(session: Session, coordinator: Coordinator, hold: Duration) {
    loop {
        let outcome = match coordinator.begin(&PARTICIPANTS, b"failover") {
            Ok(txn) => txn.commit().await,
            Err(err) => Err(err),
        };
        match outcome {
            Ok(Outcome::Committed) => say(&format!("EVENT txn {}", now_micros())),
            Ok(Outcome::Aborted(reason)) => say(&format!("ERROR txn aborted: {reason}")),
            Err(err) => {
                say(&format!("ERROR txn {}", one_line(&err)));
                let _ = session.wait_connected().await;
            }
        }
        tokio::time::sleep(hold).await;
    }
}

/// Runs the contender until killed.
pub async fn run(args: &ContenderArgs) -> anyhow::Result<i32> {
    if std::env::var_os("RUST_LOG").is_some() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .try_init();
    }
    let options = SessionOptions::default()
        .with_session_timeout(Duration::from_millis(args.session_timeout_ms));
    let hold = Duration::from_millis(args.hold_ms);
    let base = args.path.trim_end_matches('/');
    let mut tasks = Vec::new();
    let mut lockers = Vec::new();
    for _ in 0..args.clients.max(1) {
        lockers.push(Session::connect(&args.server, options.clone()).await?);
    }
    let txn_options = TxnOptions::with_root(&format!("{base}/txn"));
    let mut participants = Vec::new();
    for name in PARTICIPANTS {
        let session = Session::connect(&args.server, options.clone()).await?;
        let participant = Participant::start(
            &session,
            &txn_options,
            name,
            Arc::new(MemoryResource::default()),
            None,
        )?;
        participants.push((session, participant));
    }
    let coordinator_session = Session::connect(&args.server, options.clone()).await?;
    let coordinator = Coordinator::new(&coordinator_session, txn_options)?;
    say("READY");
    let dir = format!("{base}/lock");
    for session in lockers {
        tokio::spawn(report_reconnects(session.clone()));
        tasks.push(tokio::spawn(lock_loop(session, dir.clone(), hold)));
    }
    tasks.push(tokio::spawn(txn_loop(
        coordinator_session,
        coordinator,
        hold,
    )));
    for task in tasks {
        task.await?;
    }
    drop(participants);
    Ok(0)
}
