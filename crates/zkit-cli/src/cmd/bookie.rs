//! `zkit bookie`: run a bookie (the ledger's storage server) in the foreground until
//! SIGINT/SIGTERM, then stop gracefully (answer what was received, checkpoint, unregister).
//! A signal is honoured at every stage: while connecting to ZooKeeper or registering (ZooKeeper
//! unreachable) the bookie gives up and exits cleanly, as it does when serving.
//!
//! It registers in ZooKeeper (`--server`, with the other shared connection flags) under `/ledgers/available/HOST:PORT`, and keeps its
//! cookie there and in its dirs: a wiped or swapped data dir is refused at start. Every
//! acknowledged add is in the fsynced journal first (`--fsync always`, the default).

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use zkit::ledger::ZkRegistrationManager;
use zkit::Session;
use zkit_bookie::storage::FsyncMode;
use zkit_bookie::{Bookie, BookieConfig};

use super::conn::{ConnArgs, DEFAULT_SESSION_TIMEOUT};

/// When the journal is fdatasynced.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Fsync {
    /// Before acknowledging each add (group-committed).
    Always,
    /// Never (tests and benchmarks only): survives a process crash, not a power loss.
    Never,
}

/// Options of `zkit bookie`.
#[derive(Debug, Args)]
pub struct BookieArgs {
    /// Port to serve the bookie protocol on; with the host, the bookie's id (`HOST:PORT`).
    #[arg(long)]
    pub port: u16,
    /// Address to listen on and register [default: 127.0.0.1].
    #[arg(long, default_value = "127.0.0.1")]
    pub host: IpAddr,
    /// Ledger dir: entry logs, index, checkpoints, cookie (created if missing).
    #[arg(long)]
    pub data_dir: PathBuf,
    /// Journal dir [default: the data dir].
    #[arg(long)]
    pub journal_dir: Option<PathBuf>,
    /// Journal sync policy.
    #[arg(long, value_enum, default_value = "always")]
    pub fsync: Fsync,
    /// Serve Prometheus `/metrics` over HTTP on this port (same host).
    #[arg(long)]
    pub metrics_port: Option<u16>,
    /// How often to garbage-collect deleted ledgers (their metadata gone from ZooKeeper):
    /// their data is dropped and entry logs are removed or compacted (`0s`: never).
    #[arg(long, value_parser = humantime::parse_duration, default_value = "60s")]
    pub gc_interval: Duration,
    /// The log filter [default: RUST_LOG, else info].
    #[arg(long)]
    pub log_level: Option<String>,
}

/// Runs the bookie until a signal arrives, registered in the ZooKeeper `conn` reaches (the
/// shared connection flags; `--session-timeout` is how long a killed bookie stays registered,
/// default 10s).
pub async fn run(args: BookieArgs, conn: ConnArgs) -> Result<ExitCode> {
    let shutdown = super::signal::shutdown_signal()?;
    let filter = match &args.log_level {
        Some(l) => tracing_subscriber::EnvFilter::try_new(l).context("bad --log-level")?,
        None => tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();

    // The signal is watched from here on: a ZooKeeper that never answers must not keep the
    // process from stopping.
    let mut shutdown = std::pin::pin!(shutdown);
    tracing::info!(server = %conn.server, "connecting to ZooKeeper");
    let options = conn.session_options(DEFAULT_SESSION_TIMEOUT)?;
    let target = conn.connect_string();
    let session = tokio::select! {
        s = Session::connect(&target, options)
            => s.with_context(|| format!("cannot connect to ZooKeeper at {}", conn.server))?,
        () = &mut shutdown => {
            tracing::info!("signal received while connecting to ZooKeeper, stopping");
            return Ok(ExitCode::SUCCESS);
        }
    };
    tracing::info!("connected to ZooKeeper; checking the cookie and registering");
    let registration = Arc::new(ZkRegistrationManager::new(&session));
    let mut config = BookieConfig::new(SocketAddr::new(args.host, args.port), &args.data_dir);
    config.journal_dir = args.journal_dir.clone();
    config.storage.fsync = match args.fsync {
        Fsync::Always => FsyncMode::Always,
        Fsync::Never => FsyncMode::Never,
    };
    config.metrics = args.metrics_port.map(|p| SocketAddr::new(args.host, p));
    config.gc_interval = (!args.gc_interval.is_zero()).then_some(args.gc_interval);
    // Dropping a start that has not finished is safe: nothing was acknowledged yet, and the
    // storage it may have opened shuts its journal down when dropped.
    let bookie = tokio::select! {
        b = Bookie::start(config, registration) => b.context("cannot start the bookie")?,
        () = &mut shutdown => {
            tracing::info!("signal received while starting (ZooKeeper unreachable?), stopping");
            session.close();
            return Ok(ExitCode::SUCCESS);
        }
    };
    // On stdout, alone on its line, so scripts and tests know it is serving.
    println!(
        "zkit bookie {} listening on {}",
        bookie.bookie_id(),
        bookie.addr()
    );
    if let Some(m) = bookie.metrics_addr() {
        println!("zkit bookie metrics on http://{m}/metrics");
    }
    shutdown.await;
    tracing::info!("signal received, stopping");
    bookie.stop().await;
    session.close();
    Ok(ExitCode::SUCCESS)
}
