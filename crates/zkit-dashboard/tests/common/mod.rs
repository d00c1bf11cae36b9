//! Shared by the dashboard's black-box tests: servers to show (an embedded zkit server, and
//! Apache ZooKeeper from `ZKIT_APACHE_ZK`), a dashboard on a loopback port, a minimal HTTP/1.1
//! client, and bounded waiting.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio_util::sync::CancellationToken;
use zkit::{Session, SessionOptions};
use zkit_dashboard::{Dashboard, DashboardConfig};
#[allow(unused_imports)] // not every test file waits
pub use zkit_testkit::eventually;

/// An embedded zkit server (every four-letter word allowed, as `ServerConfig::ephemeral` does).
pub async fn zkit_server() -> zkit_server::Server {
    zkit_server::Server::start(zkit_server::ServerConfig::ephemeral())
        .await
        .expect("embedded zkit server starts")
}

/// A dashboard of `connect` served on 127.0.0.1, port 0.
pub struct Running {
    /// The dashboard.
    pub dashboard: Dashboard,
    /// Where it serves HTTP.
    pub addr: SocketAddr,
    stop: CancellationToken,
}

impl Running {
    /// `http://addr`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop.cancel();
        self.dashboard.close();
    }
}

/// Starts a dashboard of `connect` with a short collection interval.
pub async fn dashboard(connect: &str) -> Running {
    let mut config = DashboardConfig::new(connect);
    config.interval = Duration::from_millis(250);
    dashboard_with(config).await
}

/// As [`dashboard`], scanning only `root`: a shared Apache server holds every other test's
/// nodes, and a scan of `/` may be cut at its budget before it reaches this test's.
pub async fn dashboard_scoped(connect: &str, root: &str) -> Running {
    let mut config = DashboardConfig::new(connect);
    config.interval = Duration::from_millis(250);
    config.roots = vec![root.to_string()];
    dashboard_with(config).await
}

/// Starts a dashboard with `config`.
pub async fn dashboard_with(config: DashboardConfig) -> Running {
    let dashboard = Dashboard::start(config).await.expect("dashboard starts");
    let (listener, addr) = zkit_dashboard::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .expect("bind");
    let stop = CancellationToken::new();
    tokio::spawn({
        let d = dashboard.clone();
        let stop = stop.clone();
        async move { d.serve(listener, stop).await }
    });
    Running {
        dashboard,
        addr,
        stop,
    }
}

/// A session to `addr`.
pub async fn session(addr: &str) -> Session {
    Session::connect(
        addr,
        SessionOptions::default().with_session_timeout(Duration::from_secs(10)),
    )
    .await
    .expect("session connects")
}

/// One HTTP response.
#[derive(Debug)]
pub struct Reply {
    /// Status code.
    pub status: u16,
    /// Header lines, lower-cased names.
    pub headers: Vec<(String, String)>,
    /// Body.
    pub body: String,
}

impl Reply {
    /// The first header named `name`.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
}

/// Sends one request (`Connection: close`) and reads the whole reply.
pub async fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> Reply {
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    let body = body.unwrap_or("");
    if method == "POST" {
        req.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    req.push_str("\r\n");
    req.push_str(body);
    stream.write_all(req.as_bytes()).await.expect("send");
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), stream.read_to_end(&mut raw))
        .await
        .expect("reply within 20 s")
        .expect("read");
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").expect("a header block");
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .expect("status line");
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect::<Vec<_>>();
    let chunked = headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"));
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_string()
    };
    Reply {
        status,
        headers,
        body,
    }
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        body = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// A session id as the dashboard prints it.
pub fn sid(id: i64) -> String {
    format!("{:#x}", id as u64)
}

/// Debian's Chromium and its WebDriver, when installed.
pub struct ChromiumPaths {
    /// `/usr/bin/chromium`.
    pub chromium: std::path::PathBuf,
    /// `/usr/bin/chromedriver`.
    pub driver: std::path::PathBuf,
}

/// Chromium and chromedriver, or `None` after a `SKIP` line.
///
/// # Panics
/// When they are missing and `CI` is set: CI installs them, and a skip there would hide it.
#[track_caller]
pub fn chromium() -> Option<ChromiumPaths> {
    let chromium = std::path::PathBuf::from("/usr/bin/chromium");
    let driver = std::path::PathBuf::from("/usr/bin/chromedriver");
    if chromium.is_file() && driver.is_file() {
        return Some(ChromiumPaths { chromium, driver });
    }
    if std::env::var_os("CI").is_some() {
        panic!("chromium and chromedriver are not installed but CI is set (apt-get install chromium chromium-driver)");
    }
    eprintln!("SKIP browser: /usr/bin/chromium or /usr/bin/chromedriver not installed");
    None
}

/// The flags every headless Chromium here gets (the machine's closed network refuses
/// background connections; no sandbox as root), plus `--user-data-dir`.
pub fn chromium_flags(user_data_dir: &std::path::Path) -> Vec<String> {
    [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1400,1000",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([format!("--user-data-dir={}", user_data_dir.display())])
    .collect()
}

/// Where to save screenshots: `ZKIT_DASHBOARD_SCREENSHOTS` (a directory; the docs use
/// `docs/dashboard`), or nowhere.
pub fn save_screenshot(name: &str, png: &[u8]) {
    if let Some(dir) = std::env::var_os("ZKIT_DASHBOARD_SCREENSHOTS") {
        let dir = std::path::PathBuf::from(dir);
        std::fs::create_dir_all(&dir).expect("screenshot dir");
        std::fs::write(dir.join(name), png).expect("write screenshot");
    }
}
