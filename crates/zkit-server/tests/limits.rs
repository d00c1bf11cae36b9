//! Limits against abusive clients: `maxClientCnxns` per IP, and back-pressure on a client that
//! pipelines requests without reading its replies (it is throttled; others keep being served).

mod common;

use std::time::{Duration, Instant};

use common::{four_letter, Raw, WAIT};
use zkit_proto::{CreateRequest, PathWatchRequest, Request};
use zkit_server::{Limits, Server, ServerConfig};

#[tokio::test]
async fn max_client_cnxns_refuses_the_connection_over_the_limit() {
    let server = Server::start(ServerConfig {
        limits: Limits {
            max_client_cnxns: 2,
            ..Limits::default()
        },
        ..ServerConfig::ephemeral()
    })
    .await
    .unwrap();
    let (mut first, _) = Raw::session(server.addr()).await;
    let (_second, _) = Raw::session(server.addr()).await;
    // The third from 127.0.0.1 is closed before anything is read, as Apache does.
    let mut third = Raw::connect(server.addr()).await;
    third.expect_closed().await;
    first.ping().await;
    // A freed place can be taken again (the server notices the close asynchronously).
    drop(first);
    let deadline = Instant::now() + WAIT;
    loop {
        let mut again = Raw::connect(server.addr()).await;
        if again.try_handshake().await.is_some() {
            break;
        }
        assert!(Instant::now() < deadline, "the freed place never came back");
        tokio::task::yield_now().await;
    }
    server.stop().await;
}

/// A client that sends thousands of requests for large replies and never reads is stopped
/// being read after `max_outstanding_per_connection` (plus what fits in the socket buffers),
/// while another client's requests on the same server complete.
#[tokio::test]
async fn a_flooding_client_is_throttled_and_others_are_served() {
    let server = Server::start(ServerConfig {
        limits: Limits {
            max_outstanding_per_connection: 16,
            ..Limits::unlimited_connections()
        },
        ..ServerConfig::ephemeral()
    })
    .await
    .unwrap();
    let addr = server.addr();
    create_big_node(addr).await;

    // The flooder: 4000 pipelined getData of a 512 KiB node, replies never read (~2 GiB).
    const FLOOD: i32 = 4000;
    let (mut flooder, _) = Raw::session(addr).await;
    let mut frames = bytes::BytesMut::new();
    for xid in 1..=FLOOD {
        let get = Request::GetData(PathWatchRequest {
            path: "/big".into(),
            watch: false,
        });
        zkit_proto::frame::encode_frame(&mut frames, |b| get.encode(xid, b));
    }
    // ~100 KB: fits in the socket buffers, so this write does not depend on the server.
    flooder.send_raw(&frames).await;

    // Another client keeps being served.
    let started = Instant::now();
    served_meanwhile(addr, 200).await;
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "the normal client took {:?}",
        started.elapsed()
    );

    // The server read only a bounded part of the flood: `cons` shows each connection's count.
    let cons = four_letter(addr, "cons").await;
    let received: Vec<u64> = cons
        .lines()
        .filter_map(|l| l.split("recved=").nth(1))
        .filter_map(|r| r.split(',').next()?.parse().ok())
        .collect();
    let most = received.iter().copied().max().unwrap_or(0);
    assert!(
        most < 1000,
        "the flooder was read without limit ({most} of {FLOOD} requests):\n{cons}"
    );
    assert!(most > 16, "the flooder was not read at all?\n{cons}");
    drop(flooder);
    server.stop().await;
}

/// A client that stops reading while replies keep coming is closed once its outbound queue
/// passes `max_outbound_bytes` (a log line and `zkit_outbound_overflow_closes_total`), instead
/// of growing the server's memory; another client keeps being served meanwhile.
#[tokio::test]
async fn a_client_that_does_not_read_is_closed_when_its_outbound_queue_overflows() {
    let server = Server::start(ServerConfig {
        limits: Limits {
            max_outbound_bytes: 1 << 20,
            ..Limits::unlimited_connections()
        },
        admin_listen: Some("127.0.0.1:0".parse().unwrap()),
        ..ServerConfig::ephemeral()
    })
    .await
    .unwrap();
    let addr = server.addr();
    create_big_node(addr).await;

    // 400 pipelined getData of 512 KiB (~200 MiB of replies), never read: far more than the
    // socket buffers and the 1 MiB bound hold, and under the outstanding-request limit.
    let (mut reader_less, _) = Raw::session(addr).await;
    let mut frames = bytes::BytesMut::new();
    for xid in 1..=400 {
        let get = Request::GetData(PathWatchRequest {
            path: "/big".into(),
            watch: false,
        });
        zkit_proto::frame::encode_frame(&mut frames, |b| get.encode(xid, b));
    }
    reader_less.send_raw(&frames).await;

    // The other client is served throughout.
    let mut normal = served_meanwhile(addr, 100).await;

    // The server gives up on the reader-less client: draining its socket now ends in a close,
    // long before all 400 replies (what was in the socket buffers arrives first).
    let mut received = 0usize;
    let mut chunk = vec![0u8; 1 << 16];
    loop {
        let read = tokio::time::timeout(
            WAIT,
            tokio::io::AsyncReadExt::read(&mut reader_less.stream, &mut chunk),
        )
        .await
        .expect("the reader-less client was neither closed nor served in time");
        match read {
            Ok(0) | Err(_) => break,
            Ok(n) => received += n,
        }
    }
    assert!(
        received < 400 * 512 * 1024,
        "every reply was delivered ({received} bytes): the queue was not bounded"
    );
    let admin = server.config().admin_listen.expect("admin address");
    let metrics = http_get(admin, "/metrics").await;
    assert!(
        metrics.contains("zkit_outbound_overflow_closes_total 1"),
        "no overflow counted:\n{metrics}"
    );
    normal.ping().await;
    server.stop().await;
}

async fn http_get(addr: std::net::SocketAddr, path: &str) -> String {
    use tokio::io::AsyncWriteExt;
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: zkit\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut out = String::new();
    tokio::time::timeout(
        WAIT,
        tokio::io::AsyncReadExt::read_to_string(&mut stream, &mut out),
    )
    .await
    .expect("admin answered in time")
    .unwrap();
    out
}

/// Creates `/big` with 512 KiB of data, so that each read of it is a large reply.
async fn create_big_node(addr: std::net::SocketAddr) {
    let (mut setup, _) = Raw::session(addr).await;
    setup
        .send_request(
            1,
            &Request::Create(CreateRequest {
                path: "/big".into(),
                data: Some(vec![7; 512 * 1024]),
                acl: zkit_core::tree::open_acl(),
                flags: 0,
            }),
        )
        .await;
    let (header, _) = setup.read_reply().await.expect("create reply");
    assert_eq!(header.err, 0);
}

/// A new session sends `count` exists requests one at a time; each is answered in order, OK.
/// Returns the session for later checks.
async fn served_meanwhile(addr: std::net::SocketAddr, count: i32) -> Raw {
    let (mut normal, _) = Raw::session(addr).await;
    for xid in 1..=count {
        normal
            .send_request(
                xid,
                &Request::Exists(PathWatchRequest {
                    path: "/big".into(),
                    watch: false,
                }),
            )
            .await;
        let (header, _) = normal.read_reply().await.expect("exists reply");
        assert_eq!((header.xid, header.err), (xid, 0));
    }
    normal
}
