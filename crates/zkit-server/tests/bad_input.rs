//! Bad input: garbage, oversized and negative lengths, truncated frames, requests before the
//! handshake, unknown op codes and malformed bodies — each from its own connection, beside a
//! healthy client session that must keep working (with its watch) throughout, and
//! with no panic anywhere in the server.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Once;

use bytes::BufMut;
use common::{client, Raw, WAIT};
use rand::{rngs::StdRng, Rng, SeedableRng};
use zkit_client::{Acls, AddWatchMode, CreateMode, EventType};
use zkit_proto::{PathWatchRequest, Record, Request, RequestHeader};
use zkit_server::{Server, ServerConfig};

static PANICKED: AtomicBool = AtomicBool::new(false);

/// Records any panic (a panicking connection task would otherwise only die quietly).
fn watch_for_panics() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICKED.store(true, Ordering::SeqCst);
            default(info);
        }));
    });
}

/// The healthy client still reads, writes and gets its watch events.
async fn assert_healthy(
    zk: &zkit_client::Client,
    watch: &mut zkit_client::PersistentWatcher,
    round: u32,
) {
    let value = format!("round-{round}");
    zk.set_data("/healthy", value.as_bytes(), None)
        .await
        .expect("healthy write");
    let event = tokio::time::timeout(WAIT, watch.changed())
        .await
        .expect("healthy watch fired");
    assert_eq!(event.event_type, EventType::NodeDataChanged);
    let (data, _) = zk.get_data("/healthy").await.expect("healthy read");
    assert_eq!(data, value.as_bytes());
}

#[tokio::test]
async fn garbage_clients_beside_a_healthy_one() {
    watch_for_panics();
    let server = Server::start(ServerConfig::ephemeral()).await.unwrap();
    let addr = server.addr();
    let zk = client(addr).await;
    zk.create(
        "/healthy",
        b"",
        &CreateMode::Persistent.with_acls(Acls::anyone_all()),
    )
    .await
    .unwrap();
    let mut watch = zk
        .watch("/healthy", AddWatchMode::Persistent)
        .await
        .unwrap();
    let mut round = 0;
    assert_healthy(&zk, &mut watch, round).await;

    // A length over jute.maxbuffer: closed without waiting for the payload.
    let mut raw = Raw::connect(addr).await;
    raw.send_raw(&(2 * 1024 * 1024i32).to_be_bytes()).await;
    raw.expect_closed().await;
    round += 1;
    assert_healthy(&zk, &mut watch, round).await;

    // A negative length.
    let mut raw = Raw::connect(addr).await;
    raw.send_raw(&(-5i32).to_be_bytes()).await;
    raw.expect_closed().await;
    round += 1;
    assert_healthy(&zk, &mut watch, round).await;

    // A truncated frame: 100 bytes announced, 10 sent, then the client stops writing.
    let mut raw = Raw::connect(addr).await;
    raw.send_raw(&100i32.to_be_bytes()).await;
    raw.send_raw(&[7u8; 10]).await;
    tokio::io::AsyncWriteExt::shutdown(&mut raw.stream)
        .await
        .unwrap();
    raw.expect_closed().await;
    round += 1;
    assert_healthy(&zk, &mut watch, round).await;

    // A request before the handshake: it does not decode as a ConnectRequest.
    let mut raw = Raw::connect(addr).await;
    raw.send_request(
        1,
        &Request::GetData(PathWatchRequest {
            path: "/".into(),
            watch: false,
        }),
    )
    .await;
    raw.expect_closed().await;
    round += 1;
    assert_healthy(&zk, &mut watch, round).await;

    // An unknown op code after the handshake: ZooKeeper's Unimplemented reply, then the core
    // closes the connection (as Apache does for an unknown packet type).
    let (mut raw, _) = Raw::session(addr).await;
    raw.ping().await;
    raw.send_frame(|b| RequestHeader { xid: 5, op: 999 }.encode(b))
        .await;
    let (header, _) = raw.read_reply().await.expect("reply to unknown op");
    assert_eq!((header.xid, header.err), (5, -6));
    raw.expect_closed().await;
    round += 1;
    assert_healthy(&zk, &mut watch, round).await;

    // A body that does not decode (a string longer than the frame): MarshallingError, kept.
    let (mut raw, _) = Raw::session(addr).await;
    raw.send_frame(|b| {
        RequestHeader { xid: 6, op: 4 }.encode(b);
        b.put_i32(1000);
        b.put_slice(b"/x");
    })
    .await;
    let (header, _) = raw.read_reply().await.expect("reply to malformed body");
    assert_eq!((header.xid, header.err), (6, -5));
    raw.ping().await;

    // A frame too short for a request header: closed.
    raw.send_frame(|b| b.put_slice(&[1, 2, 3])).await;
    raw.expect_closed().await;
    round += 1;
    assert_healthy(&zk, &mut watch, round).await;

    // Seeded random garbage, several connections at once; the server may close them or wait
    // for more bytes, but must neither crash nor disturb the healthy session.
    let mut rng = StdRng::seed_from_u64(0x5eed);
    let mut garbage = Vec::new();
    for _ in 0..16 {
        let len = rng.gen_range(1..4096);
        let bytes: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
        let mut raw = Raw::connect(addr).await;
        raw.send_raw(&bytes).await;
        garbage.push(raw);
    }
    round += 1;
    assert_healthy(&zk, &mut watch, round).await;
    drop(garbage);
    round += 1;
    assert_healthy(&zk, &mut watch, round).await;

    assert!(!PANICKED.load(Ordering::SeqCst), "the server panicked");
    drop(zk);
    server.stop().await;
}
