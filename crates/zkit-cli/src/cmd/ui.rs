//! `zkit ui --server ZK [--auth U:P] [TLS flags] [--port A] [--bind ADDR]`: the web dashboard for any ZooKeeper (zkit
//! serve, an Apache standalone server or ensemble): the server's status, the tree, the live
//! sessions and their ephemerals, and the locks, elections, queues, barriers, transactions,
//! procedures and ledgers in it. Runs until SIGINT/SIGTERM.
//!
//! `zkit serve --admin-port A` serves the same dashboard at `/` of its admin endpoint.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use tokio_util::sync::CancellationToken;
use zkit_dashboard::{Dashboard, DashboardConfig};

use super::conn::ConnArgs;

/// Arguments of `zkit ui`.
#[derive(Debug, clap::Args)]
pub struct UiArgs {
    /// The connection flags (`--server`, `--auth`, `--session-timeout`, TLS): `--auth` is the
    /// dashboard's own identity (what it can read); a user who signs in on the page uses
    /// their own.
    #[command(flatten)]
    pub conn: ConnArgs,
    /// HTTP port of the dashboard; 0 picks a free one (printed on startup).
    #[arg(long, default_value_t = 8081)]
    pub port: u16,
    /// Address to listen on. The dashboard can write to ZooKeeper as whoever signs in: keep it
    /// on loopback unless the network around it is trusted.
    #[arg(long, default_value_t = IpAddr::V4(Ipv4Addr::LOCALHOST))]
    pub bind: IpAddr,
    /// zkit serve's Prometheus endpoint (`http://HOST:ADMIN_PORT/metrics`), for per-op charts
    /// with p50/p99; without it the charts use `mntr` (means and max only).
    #[arg(long)]
    pub metrics_url: Option<String>,
    /// Read the status from this AdminServer (`http://HOST:PORT`, its `/commands/…` JSON)
    /// instead of four-letter words (one server only; useful when the 4lw whitelist is closed).
    #[arg(long)]
    pub admin_url: Option<String>,
    /// Where to look for recipes (repeatable) [default: /].
    #[arg(long = "root")]
    pub roots: Vec<String>,
    /// Nodes listed per scan at most; the page says when a scan was cut.
    #[arg(long, default_value_t = 5000)]
    pub node_budget: usize,
    /// Time between collections.
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    pub interval: Duration,
    /// A host name (besides IP addresses and localhost) the dashboard may be reached by
    /// (repeatable): other Host headers are refused, against DNS rebinding.
    #[arg(long = "allow-host")]
    pub allowed_hosts: Vec<String>,
}

/// Runs the dashboard until a signal arrives.
pub async fn run(args: UiArgs) -> anyhow::Result<ExitCode> {
    let mut config = DashboardConfig::new(&args.conn.connect_string());
    // Four-letter words go to the plain host:port list (TLS is for the client port).
    config.members = zkit_dashboard::collect::hosts_of(&args.conn.server);
    config.session = args.conn.session_options(Duration::from_secs(10))?;
    config.metrics_url = args.metrics_url;
    config.admin_url = args.admin_url;
    if !args.roots.is_empty() {
        config.roots = args.roots;
    }
    config.node_budget = args.node_budget.max(1);
    config.interval = args.interval.max(Duration::from_millis(100));
    config.allowed_hosts = args.allowed_hosts;
    let (listener, addr) = zkit_dashboard::bind(SocketAddr::new(args.bind, args.port))
        .await
        .context("cannot start the dashboard")?;
    let dashboard = Dashboard::start(config)
        .await
        .context("cannot start the dashboard")?;
    // On stdout, alone on its line, so scripts and tests can read the real port.
    println!("zkit ui listening on http://{addr}/");
    let stop = CancellationToken::new();
    let serving = tokio::spawn({
        let stop = stop.clone();
        async move { dashboard.serve(listener, stop).await }
    });
    super::signal::shutdown_signal()?.await;
    stop.cancel();
    let _ = serving.await;
    Ok(ExitCode::SUCCESS)
}

/// For `zkit serve --admin-port`: a dashboard slot to put into the admin endpoint before the
/// server starts, and the task that fills it once the client port is known.
pub fn mount() -> zkit_dashboard::Mount {
    zkit_dashboard::Mount::new()
}

/// Starts the dashboard of the server listening on `client` (whose admin endpoint is `admin`)
/// into `mount`, in the background.
pub fn start_mounted(mount: zkit_dashboard::Mount, client: SocketAddr, admin: SocketAddr) {
    let mut config = DashboardConfig::new(&client.to_string());
    config.admin_url = Some(format!("http://{admin}"));
    config.metrics_url = Some(format!("http://{admin}/metrics"));
    tokio::spawn(async move {
        match Dashboard::start(config).await {
            Ok(dashboard) => mount.set(dashboard),
            Err(err) => tracing::error!("the dashboard did not start: {err}"),
        }
    });
}
