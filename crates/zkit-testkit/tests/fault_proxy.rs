//! FaultProxy against a loopback echo server: forwarding, dropped connections, pause/resume
//! (black-holing of existing and new connections), and shutdown. Plus, when Apache ZooKeeper is
//! available, the end-to-end purpose of `pause`: a partitioned session expires.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::timeout;
use zkit_testkit::FaultProxy;

/// Bound for things that must happen; generous, as the machine is shared.
const MUST: Duration = Duration::from_secs(10);
/// Observation window for things that must NOT happen. A forwarding bug would deliver in
/// microseconds on loopback, so a short window detects it; it cannot make a passing test flaky.
const MUST_NOT: Duration = Duration::from_millis(300);

/// An echo server counting accepted connections.
async fn echo_server() -> (String, Arc<AtomicU64>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind echo");
    let addr = listener.local_addr().expect("addr").to_string();
    let accepted = Arc::new(AtomicU64::new(0));
    let counter = Arc::clone(&accepted);
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            counter.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buf = [0u8; 1024];
                loop {
                    match sock.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => {
                            if sock.write_all(&buf[..n]).await.is_err() {
                                return;
                            }
                        }
                    }
                }
            });
        }
    });
    (addr, accepted)
}

async fn roundtrip(sock: &mut TcpStream, msg: &[u8]) {
    sock.write_all(msg).await.expect("write");
    let mut got = vec![0u8; msg.len()];
    timeout(MUST, sock.read_exact(&mut got))
        .await
        .expect("echo within bound")
        .expect("read echo");
    assert_eq!(got, msg);
}

/// Reads until EOF or error; returns true when the connection was closed.
async fn closed(sock: &mut TcpStream) -> bool {
    let mut buf = [0u8; 16];
    matches!(timeout(MUST, sock.read(&mut buf)).await, Ok(Ok(0) | Err(_)))
}

#[tokio::test]
async fn forwards_both_ways() {
    let (echo, accepted) = echo_server().await;
    let proxy = FaultProxy::start(echo.clone()).await.expect("proxy");
    assert_eq!(proxy.upstream(), echo);
    let mut a = TcpStream::connect(proxy.addr()).await.expect("connect a");
    let mut b = TcpStream::connect(proxy.addr()).await.expect("connect b");
    roundtrip(&mut a, b"hello").await;
    roundtrip(&mut b, b"world").await;
    roundtrip(&mut a, &[7u8; 100_000]).await;
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
    assert_eq!(proxy.accepted_connections(), 2);
    assert_eq!(proxy.open_connections(), 2);
}

#[tokio::test]
async fn drop_connections_closes_both_sides_and_keeps_accepting() {
    let (echo, accepted) = echo_server().await;
    let proxy = FaultProxy::start(echo).await.expect("proxy");
    let mut a = TcpStream::connect(proxy.addr()).await.expect("connect");
    roundtrip(&mut a, b"before").await;

    proxy.drop_connections().await;
    assert_eq!(proxy.open_connections(), 0);
    assert!(
        closed(&mut a).await,
        "client side must see the connection closed"
    );

    let mut b = TcpStream::connect(proxy.addr()).await.expect("reconnect");
    roundtrip(&mut b, b"after").await;
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn client_eof_is_forwarded() {
    let (echo, _) = echo_server().await;
    let proxy = FaultProxy::start(echo).await.expect("proxy");
    let mut a = TcpStream::connect(proxy.addr()).await.expect("connect");
    roundtrip(&mut a, b"x").await;
    a.shutdown().await.expect("half-close");
    // The echo server closes on EOF; the proxy must pass that close back.
    assert!(closed(&mut a).await);
}

#[tokio::test]
async fn pause_black_holes_existing_connections_until_resume() {
    let (echo, _) = echo_server().await;
    let proxy = FaultProxy::start(echo).await.expect("proxy");
    let mut a = TcpStream::connect(proxy.addr()).await.expect("connect");
    roundtrip(&mut a, b"warm").await;

    proxy.pause();
    assert!(proxy.is_paused());
    a.write_all(b"held").await.expect("write while paused");
    let mut buf = [0u8; 4];
    assert!(
        timeout(MUST_NOT, a.read_exact(&mut buf)).await.is_err(),
        "bytes crossed a paused proxy"
    );

    proxy.resume();
    timeout(MUST, a.read_exact(&mut buf))
        .await
        .expect("held bytes delivered after resume")
        .expect("read");
    assert_eq!(&buf, b"held");
}

#[tokio::test]
async fn pause_holds_new_connections_until_resume() {
    let (echo, accepted) = echo_server().await;
    let proxy = FaultProxy::start(echo).await.expect("proxy");
    proxy.pause();

    let mut a = TcpStream::connect(proxy.addr())
        .await
        .expect("connect is accepted");
    a.write_all(b"ping").await.expect("write");
    let mut buf = [0u8; 4];
    assert!(timeout(MUST_NOT, a.read_exact(&mut buf)).await.is_err());
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        0,
        "held connection reached upstream"
    );
    assert_eq!(proxy.open_connections(), 1);

    proxy.resume();
    timeout(MUST, a.read_exact(&mut buf))
        .await
        .expect("delivered after resume")
        .expect("read");
    assert_eq!(&buf, b"ping");
    assert_eq!(accepted.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn drop_connections_also_drops_held_connections() {
    let (echo, _) = echo_server().await;
    let proxy = FaultProxy::start(echo).await.expect("proxy");
    proxy.pause();
    let mut a = TcpStream::connect(proxy.addr()).await.expect("connect");
    // Wait until the proxy has registered it; accept is asynchronous.
    timeout(MUST, async {
        while proxy.open_connections() == 0 {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("connection registered");
    proxy.drop_connections().await;
    assert!(closed(&mut a).await);
}

#[tokio::test]
async fn shutdown_refuses_new_connections_and_closes_old_ones() {
    let (echo, _) = echo_server().await;
    let proxy = FaultProxy::start(echo).await.expect("proxy");
    let addr = proxy.addr();
    let mut a = TcpStream::connect(addr).await.expect("connect");
    roundtrip(&mut a, b"x").await;
    proxy.shutdown().await;
    assert!(closed(&mut a).await);
    assert!(
        TcpStream::connect(addr).await.is_err(),
        "listener still open"
    );
}

#[tokio::test]
async fn drop_stops_the_proxy() {
    let (echo, _) = echo_server().await;
    let proxy = FaultProxy::start(echo).await.expect("proxy");
    let addr = proxy.addr();
    let mut a = TcpStream::connect(addr).await.expect("connect");
    roundtrip(&mut a, b"x").await;
    drop(proxy);
    // Drop aborts the tasks; the runtime drops their sockets on its next turn.
    assert!(closed(&mut a).await);
    let refused = timeout(MUST, async {
        loop {
            match TcpStream::connect(addr).await {
                Err(_) => return,
                Ok(_) => tokio::task::yield_now().await,
            }
        }
    })
    .await;
    assert!(refused.is_ok(), "listener still accepting after drop");
}

/// The reason `pause` exists: a partition longer than the session timeout expires the session
/// on the server (its ephemeral node disappears) even though no connection was ever closed.
#[tokio::test]
async fn pause_expires_a_zookeeper_session() {
    let Some(zk) = zkit_testkit::apache_zk() else {
        return;
    };
    let proxy = FaultProxy::start(zk.clone()).await.expect("proxy");
    let path = zkit_testkit::unique_path("fault-proxy-expiry");

    // A 4 s session: at least Apache's minimum (2 * tickTime, 1 s with scripts/apache-zk).
    let victim = zkit_client::Client::connector()
        .with_session_timeout(Duration::from_secs(4))
        .connect(&proxy.connect_string())
        .await
        .expect("connect through proxy");
    victim
        .create(
            &path,
            b"",
            &zkit_client::CreateMode::Ephemeral.with_acls(zkit_client::Acls::anyone_all()),
        )
        .await
        .expect("create ephemeral");

    let observer = zkit_client::Client::connect(&zk).await.expect("observer");
    let (stat, watcher) = observer.check_and_watch_stat(&path).await.expect("watch");
    assert!(stat.is_some(), "ephemeral visible to observer");

    proxy.pause();
    let event = timeout(Duration::from_secs(30), watcher.changed())
        .await
        .expect("session expired within 30 s of the partition");
    assert_eq!(event.event_type, zkit_client::EventType::NodeDeleted);
    assert_eq!(event.path, path);
    proxy.resume();
}

#[tokio::test]
async fn reset_connections_sends_rst_and_keeps_accepting() {
    let (echo, _) = echo_server().await;
    let proxy = FaultProxy::start(echo).await.expect("proxy");
    let mut a = TcpStream::connect(proxy.addr()).await.expect("connect a");
    roundtrip(&mut a, b"before").await;
    proxy.reset_connections().await;
    assert_eq!(proxy.open_connections(), 0);
    // An RST, not an orderly end of stream: the read fails with ConnectionReset.
    let mut buf = [0u8; 16];
    let got = timeout(MUST, a.read(&mut buf))
        .await
        .expect("reset seen in time");
    assert_eq!(
        got.map_err(|e| e.kind()),
        Err(std::io::ErrorKind::ConnectionReset),
        "expected a reset"
    );
    let mut b = TcpStream::connect(proxy.addr()).await.expect("connect b");
    roundtrip(&mut b, b"after").await;
}

#[tokio::test]
async fn stalled_connections_freeze_while_new_ones_work() {
    let (echo, _) = echo_server().await;
    let proxy = FaultProxy::start(echo).await.expect("proxy");
    let mut a = TcpStream::connect(proxy.addr()).await.expect("connect a");
    roundtrip(&mut a, b"before").await;
    assert_eq!(proxy.stall_connections(), 1);
    a.write_all(b"held").await.expect("write into the stall");
    let mut buf = [0u8; 4];
    assert!(
        timeout(MUST_NOT, a.read_exact(&mut buf)).await.is_err(),
        "a stalled connection forwarded bytes"
    );
    // A new connection is not stalled.
    let mut b = TcpStream::connect(proxy.addr()).await.expect("connect b");
    roundtrip(&mut b, b"fresh").await;
    // Unstalled, the held bytes go through.
    proxy.unstall();
    timeout(MUST, a.read_exact(&mut buf))
        .await
        .expect("released in time")
        .expect("read");
    assert_eq!(&buf, b"held");
}
