//! Server lifecycle: start on port 0, address, config, bind errors, graceful stop.

mod common;

use common::{Raw, WAIT};
use zkit_proto::{PathWatchRequest, Request, SetDataRequest};
use zkit_server::{Error, Server, ServerConfig};

#[tokio::test]
async fn starts_on_port_zero_and_stops() {
    let server = Server::start(ServerConfig::ephemeral()).await.unwrap();
    let addr = server.addr();
    assert_ne!(addr.port(), 0, "the real port is reported");
    assert_eq!(server.config().listen, addr);
    let (mut raw, response) = Raw::session(addr).await;
    assert_eq!(response.time_out, 30_000);
    assert_eq!(response.passwd.len(), 16);
    raw.ping().await;

    tokio::time::timeout(WAIT, server.stop())
        .await
        .expect("stop finished");
    raw.expect_closed().await;
    assert!(
        tokio::net::TcpStream::connect(addr).await.is_err(),
        "a stopped server no longer accepts"
    );
}

#[tokio::test]
async fn passwords_are_random_per_session() {
    let server = Server::start(ServerConfig::ephemeral()).await.unwrap();
    let (_a, first) = Raw::session(server.addr()).await;
    let (_b, second) = Raw::session(server.addr()).await;
    assert_ne!(first.session_id, second.session_id);
    assert_ne!(first.passwd, second.passwd);
    assert_ne!(first.passwd, vec![0; 16]);
    server.stop().await;
}

#[tokio::test]
async fn address_in_use_is_an_error() {
    let first = Server::start(ServerConfig::ephemeral()).await.unwrap();
    let config = ServerConfig {
        listen: first.addr(),
        ..ServerConfig::ephemeral()
    };
    match Server::start(config).await {
        Err(Error::Bind { addr, .. }) => assert_eq!(addr, first.addr()),
        other => panic!("expected a bind error, got {other:?}"),
    }
    first.stop().await;
}

#[tokio::test]
async fn invalid_config_is_refused() {
    let config = ServerConfig {
        tick_time: std::time::Duration::ZERO,
        ..ServerConfig::ephemeral()
    };
    assert!(matches!(Server::start(config).await, Err(Error::Config(_))));
}

/// Requests already sent when `stop` is called are answered in order (a prefix of what was
/// sent, since the server may stop reading at any point), then the connection closes cleanly.
#[tokio::test]
async fn graceful_stop_answers_in_order_then_closes() {
    let server = Server::start(ServerConfig::ephemeral()).await.unwrap();
    let (mut raw, _) = Raw::session(server.addr()).await;
    // One answered round trip first, so the server is surely reading this connection.
    raw.send_request(
        1,
        &Request::Exists(PathWatchRequest {
            path: "/".into(),
            watch: false,
        }),
    )
    .await;
    assert_eq!(raw.read_reply().await.unwrap().0.xid, 1);

    const N: i32 = 200;
    for xid in 2..=N {
        let request = Request::SetData(SetDataRequest {
            path: "/".into(),
            data: Some(xid.to_be_bytes().to_vec()),
            version: -1,
        });
        raw.send_request(xid, &request).await;
    }
    tokio::time::timeout(WAIT, server.stop())
        .await
        .expect("stop finished");

    let mut expected = 2;
    while let Some((header, _)) = raw.read_reply().await {
        assert_eq!(header.xid, expected, "replies in request order");
        assert_eq!(header.err, 0);
        expected += 1;
    }
    assert!(expected <= N + 1);
}

/// A connection that never completes its handshake is closed after the sessionless timeout
/// (ZooKeeper's `zookeeper.nio.sessionlessCnxnTimeout`), also when it sent a partial frame.
#[tokio::test]
async fn connections_without_handshake_are_closed() {
    let server = Server::start(ServerConfig {
        sessionless_timeout: std::time::Duration::from_millis(200),
        ..ServerConfig::ephemeral()
    })
    .await
    .unwrap();
    let mut silent = Raw::connect(server.addr()).await;
    let mut partial = Raw::connect(server.addr()).await;
    partial.send_raw(&[0, 0, 0, 40, 1, 2]).await;
    silent.expect_closed().await;
    partial.expect_closed().await;
    // A completed handshake is not subject to it.
    let (mut raw, _) = Raw::session(server.addr()).await;
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    raw.ping().await;
    server.stop().await;
}
