//! `zkit serve`: run the ZooKeeper-compatible server in the foreground until SIGINT/SIGTERM,
//! then stop gracefully (answer what was received, flush, write a final snapshot, close).
//!
//! State is durable in `--data-dir` (default `./data`, locked while the server runs): every
//! acknowledged write is in the fsynced write-ahead log first. `--in-memory` keeps nothing, as
//! `zkit demo` and the in-process test servers do.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{reload, EnvFilter};
use zkit_server::zoo_cfg::ZooCfg;
use zkit_server::{FourLetterWhitelist, FsyncMode, Server, ServerConfig, TlsConfig};

/// Options of `zkit serve` (ZooKeeper's `zoo.cfg` settings of the same meaning). Settings come
/// from ZooKeeper's defaults, then `--config FILE`, then these flags (a flag given wins).
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// A `zoo.cfg` (Java properties) or `.toml` file with ZooKeeper's keys; unknown keys are
    /// reported and ignored, bad values refused with their line number. SIGHUP re-reads its
    /// `logLevel`.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// clientPort [default: 2181]; 0 picks a free port (the address is printed on startup).
    #[arg(long)]
    pub port: Option<u16>,
    /// clientPortAddress [default: 127.0.0.1].
    #[arg(long)]
    pub host: Option<IpAddr>,
    /// tickTime in milliseconds [default: 2000]: session timeouts are clamped to [2, 20] ticks.
    #[arg(long)]
    pub tick_time: Option<u64>,
    /// extendedTypesEnabled: allow TTL nodes.
    #[arg(long)]
    pub extended_types: bool,
    /// znode.container.checkIntervalMs, as a duration (`60s`, `500ms`) [default: 60s].
    #[arg(long, value_parser = humantime::parse_duration)]
    pub container_check_interval: Option<Duration>,
    /// 4lw.commands.whitelist: `*` or a comma-separated list [default: srvr].
    #[arg(long = "4lw-whitelist", value_parser = FourLetterWhitelist::parse)]
    pub four_letter_words: Option<FourLetterWhitelist>,
    /// maxClientCnxns: connections per client IP, 0 = unlimited [default: 60].
    #[arg(long)]
    pub max_client_cnxns: Option<u32>,
    /// superDigest: `super:base64(sha1("super:password"))`; who authenticates as it bypasses
    /// every ACL.
    #[arg(long, env = "ZKIT_SUPER_DIGEST")]
    pub super_digest: Option<String>,
    /// admin.serverPort: serve the web dashboard at `/`, `/metrics` (Prometheus) and
    /// `/commands/<name>` over HTTP on this port (same address as the client port); off by
    /// default.
    #[arg(long)]
    pub admin_port: Option<u16>,
    /// The log filter (`info`, `zkit_server=debug`, …) [default: RUST_LOG, else info]; the
    /// config file's `logLevel` takes over on SIGHUP.
    #[arg(long)]
    pub log_level: Option<String>,
    /// How log lines are written to stderr: `text` (for people) or `json` (one JSON object per
    /// line: timestamp, level, fields, target, spans; for log collectors).
    #[arg(long, value_enum, default_value = "text")]
    pub log_format: LogFormat,
    /// dataDir: the write-ahead log and snapshots (created if missing; one server per dir)
    /// [default: data].
    #[arg(long, conflicts_with = "in_memory")]
    pub data_dir: Option<PathBuf>,
    /// Keep state in memory only: nothing is written, everything is lost on exit.
    #[arg(long)]
    pub in_memory: bool,
    /// forceSync: `always` fdatasyncs before acknowledging a write; `never` (for tests and
    /// benchmarks only) survives a process crash but not a power loss.
    /// [default: always]
    #[arg(long, value_parser = parse_fsync)]
    pub fsync: Option<FsyncMode>,
    /// Threads that serve connections and the request pipeline [default: one per CPU core but
    /// one, at least 1: the write-ahead log has a thread of its own, which a write-heavy load
    /// keeps busy]. The environment variable TOKIO_WORKER_THREADS overrides the default too.
    #[arg(long)]
    pub worker_threads: Option<usize>,
    /// snapCount: txns since the last background snapshot before the next one may be taken
    /// [default: 100000].
    #[arg(long)]
    pub snap_count: Option<u64>,
    /// The next snapshot also waits until the WAL written since the last one reaches this
    /// share of that snapshot's size, in percent, so a large tree is not rewritten every
    /// --snap-count txns; 0: every --snap-count txns whatever the size [default: 50].
    #[arg(long, value_name = "PERCENT")]
    pub snap_log_percent: Option<u32>,
    /// snapSizeLimitInKb: this much WAL since the last snapshot makes one due whatever the
    /// txn count; 0 or less: off [default: 4194304, i.e. 4 GiB].
    #[arg(long, value_name = "KIB", allow_negative_numbers = true)]
    pub snap_size_limit_kb: Option<i64>,
    /// autopurge.snapRetainCount: snapshots kept, with the WAL the oldest of them needs; older
    /// ones are deleted after every snapshot [default: 3].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub snap_retain_count: Option<u32>,
    /// Start even when the WAL is corrupt before its tail, discarding everything from the
    /// first bad record on (by default the server refuses and names file and offset).
    #[arg(long)]
    pub truncate_corrupt: bool,
    /// First load an Apache ZooKeeper data dir (its newest valid `version-2/snapshot.*` and
    /// the `log.*` txns after it: tree, ACLs, sessions, ephemerals, TTL and container nodes)
    /// into --data-dir, which must be new or empty; then serve it.
    #[arg(long, value_name = "DIR", conflicts_with = "in_memory")]
    pub import_apache: Option<PathBuf>,
    /// secureClientPort: also serve TLS clients on this port (same address as the client
    /// port; 0 picks a free port); needs --tls-cert (or ssl.keyStore.location in --config).
    #[arg(long)]
    pub secure_port: Option<u16>,
    /// The server's PEM certificate chain, leaf first; the file may hold the private key too,
    /// as Apache's PEM key store (ssl.keyStore.location) does.
    #[arg(long, value_name = "PEM")]
    pub tls_cert: Option<PathBuf>,
    /// The server's PEM private key (PKCS#8, PKCS#1 or SEC1; not encrypted) [default: the
    /// --tls-cert file].
    #[arg(long, value_name = "PEM")]
    pub tls_key: Option<PathBuf>,
    /// ssl.trustStore.location: PEM bundle of the CAs that sign client certificates.
    #[arg(long, value_name = "PEM")]
    pub tls_ca: Option<PathBuf>,
    /// ssl.clientAuth: `need` a verified client certificate, `want` one (served without if
    /// absent), or `none` [default: need with --tls-ca, none without]. A verified client is
    /// authenticated as `x509:<certificate subject>`.
    #[arg(long, value_parser = zkit_server::ClientAuth::parse)]
    pub tls_client_auth: Option<zkit_server::ClientAuth>,
}

/// The log line format of `zkit serve`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

fn parse_fsync(text: &str) -> Result<FsyncMode, String> {
    match text {
        "always" => Ok(FsyncMode::Always),
        "never" => Ok(FsyncMode::Never),
        other => Err(format!("expected `always` or `never`, not {other:?}")),
    }
}

/// Reads `--config`, if any.
fn read_config(path: Option<&Path>) -> Result<Option<ZooCfg>> {
    let Some(path) = path else {
        return Ok(None);
    };
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let cfg = ZooCfg::parse_named(path, &text).with_context(|| format!("{}", path.display()))?;
    Ok(Some(cfg))
}

/// The TLS flags over the file's `ssl.*` settings, if any.
fn apply_tls_flags(args: &ServeArgs, c: &mut ServerConfig) -> Result<()> {
    if let Some(p) = args.secure_port {
        let host = args
            .host
            .or(c.secure_listen.map(|a| a.ip()))
            .unwrap_or(c.listen.ip());
        c.secure_listen = Some(SocketAddr::new(host, p));
    }
    let flags_given = args.tls_cert.is_some()
        || args.tls_key.is_some()
        || args.tls_ca.is_some()
        || args.tls_client_auth.is_some();
    if !flags_given {
        return Ok(());
    }
    let mut tls = match (c.tls.take(), &args.tls_cert) {
        (_, Some(cert)) => {
            let key = args.tls_key.clone().unwrap_or_else(|| cert.clone());
            TlsConfig::new(cert.clone(), key, args.tls_ca.clone())
        }
        (Some(from_file), None) => from_file,
        (None, None) => anyhow::bail!(
            "--tls-key, --tls-ca and --tls-client-auth need --tls-cert (or \
             ssl.keyStore.location in --config)"
        ),
    };
    if let Some(key) = &args.tls_key {
        tls.key = key.clone();
    }
    if let Some(ca) = &args.tls_ca {
        tls.trust = Some(ca.clone());
    }
    if let Some(auth) = args.tls_client_auth {
        tls.client_auth = auth;
    }
    c.tls = Some(tls);
    Ok(())
}

/// ZooKeeper's defaults, then the file, then the flags given.
fn server_config(args: &ServeArgs, file: Option<ZooCfg>) -> Result<ServerConfig> {
    let mut c = match file {
        Some(cfg) => cfg.server,
        None => ServerConfig::default(),
    };
    if c.data_dir.is_none() {
        c.data_dir = Some(PathBuf::from("data"));
    }
    let port = args.port.unwrap_or(c.listen.port());
    let host = args.host.unwrap_or(c.listen.ip());
    c.listen = SocketAddr::new(host, port);
    if let Some(ms) = args.tick_time {
        c.tick_time = Duration::from_millis(ms);
    }
    c.extended_types |= args.extended_types;
    if let Some(d) = args.container_check_interval {
        c.container_check_interval = d;
    }
    if let Some(w) = &args.four_letter_words {
        c.four_letter_words = w.clone();
    }
    if let Some(n) = args.max_client_cnxns {
        c.limits.max_client_cnxns = n;
    }
    if let Some(d) = &args.super_digest {
        c.super_digest = Some(d.clone());
    }
    if let Some(p) = args.admin_port {
        c.admin_listen = Some(SocketAddr::new(host, p));
    }
    if let Some(d) = &args.data_dir {
        c.data_dir = Some(d.clone());
    }
    if args.in_memory {
        c.data_dir = None;
    }
    if let Some(f) = args.fsync {
        c.fsync = f;
    }
    if let Some(n) = args.snap_count {
        c.snap_count = n;
    }
    if let Some(p) = args.snap_log_percent {
        c.snap_log_percent = p;
    }
    if let Some(kb) = args.snap_size_limit_kb {
        c.snap_size_limit = u64::try_from(kb).unwrap_or(0).saturating_mul(1024);
    }
    if let Some(n) = args.snap_retain_count {
        c.snap_retain_count = n as usize;
    }
    c.truncate_corrupt |= args.truncate_corrupt;
    apply_tls_flags(args, &mut c)?;
    Ok(c)
}

/// The log filter: `--log-level`, else the file's `logLevel`, else RUST_LOG, else info.
fn log_filter(flag: Option<&str>, file: Option<&ZooCfg>) -> Result<EnvFilter> {
    let directive = flag.or_else(|| file.and_then(|c| c.log_level.as_deref()));
    match directive {
        Some(d) => EnvFilter::try_new(d).with_context(|| format!("bad log level {d:?}")),
        None => Ok(EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"))),
    }
}

/// Runs the server until a signal arrives.
pub async fn run(args: ServeArgs) -> Result<ExitCode> {
    // Handlers first, before anything is printed: a supervisor (or a test) that signals as soon
    // as it sees output must not hit the default action, which kills the process.
    let shutdown = super::signal::shutdown_signal()?;
    let mut hangups = hangup_signals()?;
    let file = read_config(args.config.as_deref())?;
    let (filter, reload) =
        reload::Layer::new(log_filter(args.log_level.as_deref(), file.as_ref())?);
    let text = (args.log_format == LogFormat::Text).then(|| {
        tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
    });
    let json = (args.log_format == LogFormat::Json).then(|| {
        tracing_subscriber::fmt::layer()
            .json()
            .with_writer(std::io::stderr)
    });
    tracing_subscriber::registry()
        .with(filter)
        .with(text)
        .with(json)
        .init();
    if let Some(cfg) = &file {
        for warning in &cfg.warnings {
            tracing::warn!("{warning}");
        }
    }

    let mut config = server_config(&args, file)?;
    if let Some(apache) = args.import_apache.clone() {
        let for_import = config.clone();
        let report = tokio::task::spawn_blocking(move || {
            zkit_server::apache_import::import_for_server(&apache, &for_import)
        })
        .await
        .context("the import task")?
        .context("cannot import the Apache ZooKeeper data dir")?;
        tracing::info!(
            source = %report.source.display(),
            snapshot_zxid = report.snapshot_zxid.map(|z| format!("{z:#x}")),
            replayed = report.replayed,
            nodes = report.nodes,
            sessions = report.sessions,
            last_zxid = format_args!("{:#x}", report.last_zxid),
            "imported an Apache ZooKeeper data dir"
        );
        for torn in &report.torn_logs {
            tracing::warn!(file = %torn.display(), "the log ended in a record cut short (a crash while writing); imported up to it");
        }
    }
    // The web dashboard at `/` of the admin endpoint; it connects once the client port is known.
    let dashboard = config.admin_listen.map(|_| super::ui::mount());
    if let Some(mount) = &dashboard {
        config.admin_extra = Some(std::sync::Arc::new(mount.clone()));
    }
    let server = Server::start(config)
        .await
        .context("cannot start the server")?;
    // Recovery's transient memory (snapshot read buffers, the restore threads' staging) is
    // free now but stays in the allocator's caches until it purges them, which it may not do
    // for a server that then sits idle: a 1,000,000-znode restart settled at 365 MB of RSS
    // instead of 267 MB in three of five runs. Give it back once, before serving.
    crate::allocator::return_free_memory();
    // On stdout, alone on its line, so scripts and tests can read the real port.
    println!("zkit serve listening on {}", server.addr());
    if let Some(secure) = server.secure_addr() {
        println!("zkit serve listening for TLS clients on {secure}");
    }
    if let Some(admin) = server.config().admin_listen {
        println!("zkit serve admin endpoint on http://{admin}/");
        if let Some(mount) = dashboard {
            super::ui::start_mounted(mount, server.addr(), admin);
        }
    }

    let reload_log_level = async {
        while hangups.recv().await.is_some() {
            // Re-read the file's logLevel (or RUST_LOG/info): the flag is not re-read, the
            // point of SIGHUP being to change the level without a restart.
            let filter = read_config(args.config.as_deref())
                .and_then(|file| log_filter(None, file.as_ref()));
            match filter {
                Ok(filter) => {
                    let shown = filter.to_string();
                    match reload.reload(filter) {
                        Ok(()) => tracing::warn!(filter = %shown, "SIGHUP: log level reloaded"),
                        Err(err) => tracing::error!(%err, "SIGHUP: cannot reload the log level"),
                    }
                }
                Err(err) => tracing::error!("SIGHUP: keeping the log level: {err:#}"),
            }
        }
        Ok::<(), anyhow::Error>(())
    };

    tokio::select! {
        () = shutdown => {}
        reloaded = reload_log_level => reloaded?,
        () = server.stopped() => {
            server.stop().await;
            anyhow::bail!("the server stopped on its own (see the log)");
        }
    }
    tracing::info!("signal received, stopping");
    server.stop().await;
    Ok(ExitCode::SUCCESS)
}

/// SIGHUP deliveries (never on non-Unix systems).
#[cfg(unix)]
fn hangup_signals() -> Result<tokio::sync::mpsc::Receiver<()>> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut hup = signal(SignalKind::hangup()).context("cannot listen for SIGHUP")?;
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    tokio::spawn(async move {
        while hup.recv().await.is_some() {
            if tx.send(()).await.is_err() {
                break;
            }
        }
    });
    Ok(rx)
}

#[cfg(not(unix))]
fn hangup_signals() -> Result<tokio::sync::mpsc::Receiver<()>> {
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    std::mem::forget(tx); // never fires
    Ok(rx)
}

/// Worker threads of `zkit serve`'s runtime: `--worker-threads`, else `TOKIO_WORKER_THREADS`,
/// else one per core but one (the WAL thread's), at least 1.
pub fn worker_threads(args: &ServeArgs) -> usize {
    if let Some(n) = args.worker_threads {
        return n.max(1);
    }
    if let Some(n) = std::env::var("TOKIO_WORKER_THREADS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
    {
        return n.max(1);
    }
    std::thread::available_parallelism()
        .map(|n| n.get().saturating_sub(1))
        .unwrap_or(1)
        .max(1)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Wrapper {
        #[command(flatten)]
        serve: ServeArgs,
    }

    #[test]
    fn worker_threads_flag_wins_and_is_at_least_one() {
        let args = Wrapper::parse_from(["zkit", "--worker-threads", "3"]).serve;
        assert_eq!(worker_threads(&args), 3);
        let args = Wrapper::parse_from(["zkit", "--worker-threads", "0"]).serve;
        assert_eq!(worker_threads(&args), 1);
        // The default depends on the machine (and TOKIO_WORKER_THREADS), never below 1.
        let args = Wrapper::parse_from(["zkit"]).serve;
        assert!(worker_threads(&args) >= 1);
    }

    #[test]
    fn snap_retain_count_comes_from_the_file_and_the_flag_wins() {
        let file = ZooCfg::parse_properties("autopurge.snapRetainCount=7\n").unwrap();
        let args = Wrapper::parse_from(["zkit"]).serve;
        assert_eq!(server_config(&args, None).unwrap().snap_retain_count, 3);
        let c = server_config(&args, Some(file.clone())).unwrap();
        assert_eq!(c.snap_retain_count, 7);
        let args = Wrapper::parse_from(["zkit", "--snap-retain-count", "4"]).serve;
        assert_eq!(
            server_config(&args, Some(file)).unwrap().snap_retain_count,
            4
        );
        assert!(Wrapper::try_parse_from(["zkit", "--snap-retain-count", "0"]).is_err());
    }
}
