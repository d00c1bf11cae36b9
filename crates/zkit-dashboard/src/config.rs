//! [`DashboardConfig`]: what the dashboard reads and how.

use std::time::Duration;

use zkit::SessionOptions;

/// How the dashboard reads its server.
#[derive(Debug, Clone)]
pub struct DashboardConfig {
    /// The ZooKeeper connect string (`h1:2181,h2:2181[/chroot]`).
    pub connect: String,
    /// The members whose four-letter words give the status (default: the connect string's
    /// hosts, see [`DashboardConfig::new`]).
    pub members: Vec<String>,
    /// The AdminServer (`http://host:port`, serving `/commands/<name>`) to read the status
    /// from instead of four-letter words: one member only. zkit serve's admin endpoint and
    /// Apache's `admin.serverPort` answer every command whatever the 4lw whitelist says.
    pub admin_url: Option<String>,
    /// zkit serve's Prometheus `/metrics` URL, for per-op charts with percentiles; `None`:
    /// the charts use `mntr` (means and max only).
    pub metrics_url: Option<String>,
    /// How often the collector runs (default 1 s).
    pub interval: Duration,
    /// Nodes listed per scan at most (default 5,000); the page says when a scan was cut.
    pub node_budget: usize,
    /// Where to look for recipes (default `/`); the root's children are always shown.
    pub roots: Vec<String>,
    /// Options of the dashboard's ZooKeeper sessions: the session timeout (default 10 s),
    /// TLS, and authentication. The authentication is the collector's own: a user who signs in
    /// gets a session with the same timeout and TLS settings that authenticates as that user
    /// only.
    pub session: SessionOptions,
    /// Skip collections after this long without an open event stream or a page request
    /// (default 60 s); the next request collects at once.
    pub idle_after: Duration,
    /// `Host` names accepted besides IP addresses and `localhost` (DNS-rebinding guard).
    pub allowed_hosts: Vec<String>,
}

impl DashboardConfig {
    /// The defaults for `connect`.
    pub fn new(connect: &str) -> DashboardConfig {
        DashboardConfig {
            connect: connect.to_string(),
            members: hosts_of(connect),
            admin_url: None,
            metrics_url: None,
            interval: Duration::from_secs(1),
            node_budget: 5_000,
            roots: vec!["/".to_string()],
            session: SessionOptions::default().with_session_timeout(Duration::from_secs(10)),
            idle_after: Duration::from_secs(60),
            allowed_hosts: Vec::new(),
        }
    }
}

/// The connect string's hosts (`h1:2181,h2:2181/chroot` → `["h1:2181", "h2:2181"]`).
pub fn hosts_of(connect: &str) -> Vec<String> {
    let hosts = connect.split('/').next().unwrap_or(connect);
    hosts
        .split(',')
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .map(|h| {
            if h.contains(':') {
                h.to_string()
            } else {
                format!("{h}:2181")
            }
        })
        .collect()
}
