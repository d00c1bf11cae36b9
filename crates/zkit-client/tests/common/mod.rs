//! Shared test support: each test body runs against an embedded zkit server and against the
//! Apache ZooKeeper of `ZKIT_APACHE_ZK` (skipped, with a SKIP line, when it is not set).
#![allow(dead_code)]

use std::future::Future;
use std::time::Duration;

use zkit_client::{Acls, Client, CreateMode, CreateOptions};
use zkit_server::{Server, ServerConfig};

/// Bound on every wait: a test fails rather than hangs.
pub const WAIT: Duration = Duration::from_secs(10);

/// Persistent, open ACL.
pub const PERSISTENT: CreateOptions<'static> = CreateMode::Persistent.with_acls(Acls::anyone_all());
/// Ephemeral, open ACL.
pub const EPHEMERAL: CreateOptions<'static> = CreateMode::Ephemeral.with_acls(Acls::anyone_all());

/// Which server a test body runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Zkit,
    Apache,
}

/// Runs `body(address, kind)` against a fresh embedded zkit server, then against Apache.
pub async fn on_both<F, Fut>(body: F)
where
    F: Fn(String, Kind) -> Fut,
    Fut: Future<Output = ()>,
{
    let server = Server::start(ServerConfig::ephemeral())
        .await
        .expect("zkit server");
    body(server.addr().to_string(), Kind::Zkit).await;
    server.stop().await;
    if let Some(apache) = zkit_testkit::apache_zk() {
        body(apache, Kind::Apache).await;
    }
}

/// Connects with a 10 s session timeout.
pub async fn connect(addr: &str) -> Client {
    within(
        Client::connector()
            .with_session_timeout(Duration::from_secs(10))
            .connect(addr),
    )
    .await
    .unwrap_or_else(|e| panic!("connect {addr}: {e}"))
}

/// A fresh root for one test on a shared server, created; returns its path.
pub async fn root(client: &Client, name: &str) -> String {
    let path = zkit_testkit::unique_path(name);
    client
        .create(&path, b"", &PERSISTENT)
        .await
        .expect("create root");
    path
}

/// `fut`, or a panic after [`WAIT`].
pub async fn within<F: Future>(fut: F) -> F::Output {
    tokio::time::timeout(WAIT, fut).await.expect("timed out")
}

/// Waits until `cond` holds, checking every 10 ms, for at most [`WAIT`].
pub async fn until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !cond() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The paths the server holds data (and persistent) watches on for `session` (four-letter
/// word `wchc`; Apache's lists only its data-watch table, zkit's also child watches).
pub async fn server_watches(addr: &str, session: i64) -> Vec<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut tcp = tokio::net::TcpStream::connect(addr)
        .await
        .expect("connect for wchc");
    tcp.write_all(b"wchc").await.expect("wchc");
    let mut out = String::new();
    within(tcp.read_to_string(&mut out))
        .await
        .expect("read wchc");
    let me = format!("0x{session:x}");
    let mut paths = Vec::new();
    let mut mine = false;
    for line in out.lines() {
        if let Some(path) = line.strip_prefix('\t') {
            if mine {
                paths.push(path.trim().to_owned());
            }
        } else {
            mine = line.trim() == me;
        }
    }
    paths.sort();
    paths
}

/// Whether `fut` is ready at its first poll.
pub async fn ready_now<F: Future>(fut: F) -> Option<F::Output> {
    tokio::time::timeout(Duration::ZERO, fut).await.ok()
}

/// As [`on_both`], with a zkit server built from `config` (listen address, 4lw and limits
/// filled in for tests). Apache's tick is 500 ms (scripts/apache-zk).
pub async fn on_both_with<F, Fut>(config: ServerConfig, body: F)
where
    F: Fn(String, Kind) -> Fut,
    Fut: Future<Output = ()>,
{
    let server = Server::start(config).await.expect("zkit server");
    body(server.addr().to_string(), Kind::Zkit).await;
    server.stop().await;
    if let Some(apache) = zkit_testkit::apache_zk() {
        body(apache, Kind::Apache).await;
    }
}

/// A zkit server config with Apache's test tick (500 ms), so short sessions are allowed.
pub fn short_tick() -> ServerConfig {
    ServerConfig {
        tick_time: Duration::from_millis(500),
        ..ServerConfig::ephemeral()
    }
}

/// Waits until the async `cond` holds, checking every 20 ms, for at most [`WAIT`].
pub async fn eventually<F, Fut>(what: &str, mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + WAIT;
    while !cond().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
