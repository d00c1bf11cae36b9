//! `zkit serve`: run the ZooKeeper-compatible server in the foreground until SIGINT/SIGTERM,
//! then stop gracefully (answer what was received, flush, write a final snapshot, close).
//!
//! State is durable in `--data-dir` (default `./data`, locked while the server runs): every
//! acknowledged write is in the fsynced write-ahead log first. `--in-memory` keeps nothing, as
//! `zkit demo` and the in-process test servers do.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use tracing_subscriber::EnvFilter;
use zkit_server::{FourLetterWhitelist, FsyncMode, Server, ServerConfig};

/// Options of `zkit serve` (ZooKeeper's `zoo.cfg` settings of the same meaning).
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// clientPort; 0 picks a free port (the address is printed on startup).
    #[arg(long, default_value_t = 2181)]
    pub port: u16,
    /// clientPortAddress.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: IpAddr,
    /// tickTime in milliseconds: session timeouts are clamped to [2, 20] ticks.
    #[arg(long, default_value_t = 2000)]
    pub tick_time: u64,
    /// extendedTypesEnabled: allow TTL nodes.
    #[arg(long)]
    pub extended_types: bool,
    /// znode.container.checkIntervalMs, as a duration (`60s`, `500ms`).
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    pub container_check_interval: Duration,
    /// 4lw.commands.whitelist: `*` or a comma-separated list (default: srvr).
    #[arg(long = "4lw-whitelist", default_value = "srvr", value_parser = FourLetterWhitelist::parse)]
    pub four_letter_words: FourLetterWhitelist,
    /// dataDir: the write-ahead log and snapshots (created if missing; one server per dir).
    #[arg(long, default_value = "data", conflicts_with = "in_memory")]
    pub data_dir: PathBuf,
    /// Keep state in memory only: nothing is written, everything is lost on exit.
    #[arg(long)]
    pub in_memory: bool,
    /// forceSync: `always` fdatasyncs before acknowledging a write; `never` (for tests and
    /// benchmarks only) survives a process crash but not a power loss.
    #[arg(long, default_value = "always", value_parser = parse_fsync)]
    pub fsync: FsyncMode,
    /// snapCount: txns between background snapshots.
    #[arg(long, default_value_t = 100_000)]
    pub snap_count: u64,
    /// Start even when the WAL is corrupt before its tail, discarding everything from the
    /// first bad record on (by default the server refuses and names file and offset).
    #[arg(long)]
    pub truncate_corrupt: bool,
}

fn parse_fsync(text: &str) -> Result<FsyncMode, String> {
    match text {
        "always" => Ok(FsyncMode::Always),
        "never" => Ok(FsyncMode::Never),
        other => Err(format!("expected `always` or `never`, not {other:?}")),
    }
}

/// Runs the server until a signal arrives.
pub async fn run(args: ServeArgs) -> Result<ExitCode> {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();

    let config = ServerConfig {
        listen: SocketAddr::new(args.host, args.port),
        tick_time: Duration::from_millis(args.tick_time),
        extended_types: args.extended_types,
        container_check_interval: args.container_check_interval,
        four_letter_words: args.four_letter_words,
        data_dir: (!args.in_memory).then_some(args.data_dir),
        fsync: args.fsync,
        snap_count: args.snap_count,
        truncate_corrupt: args.truncate_corrupt,
        ..ServerConfig::default()
    };
    let server = Server::start(config)
        .await
        .context("cannot start the server")?;
    // On stdout, alone on its line, so scripts and tests can read the real port.
    println!("zkit serve listening on {}", server.addr());

    tokio::select! {
        signal = shutdown_signal() => signal?,
        () = server.stopped() => {
            server.stop().await;
            anyhow::bail!("the server stopped on its own (see the log)");
        }
    }
    tracing::info!("signal received, stopping");
    server.stop().await;
    Ok(ExitCode::SUCCESS)
}

#[cfg(unix)]
async fn shutdown_signal() -> Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).context("cannot listen for SIGTERM")?;
    tokio::select! {
        ctrl_c = tokio::signal::ctrl_c() => ctrl_c.context("cannot listen for SIGINT")?,
        _ = term.recv() => {}
    }
    Ok(())
}

#[cfg(not(unix))]
async fn shutdown_signal() -> Result<()> {
    tokio::signal::ctrl_c()
        .await
        .context("cannot listen for Ctrl-C")
}
