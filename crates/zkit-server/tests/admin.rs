//! The four-letter words beyond srvr/mntr (cons, dump, wchc, wchp, gtmk, stmk, crst, hash), in
//! the formats Apache ZooKeeper 3.8 prints, and the HTTP admin endpoint (`/metrics`,
//! `/commands/<name>`).

mod common;

use std::net::SocketAddr;

use common::{client, four_letter, WAIT};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use zkit_server::{Server, ServerConfig};
use zookeeper_client::{Acls, CreateMode};

async fn http_get(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: zkit\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut out = String::new();
    tokio::time::timeout(WAIT, stream.read_to_string(&mut out))
        .await
        .expect("admin answered in time")
        .unwrap();
    let status = out
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("status line");
    let body = out
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

#[tokio::test]
async fn four_letter_words_in_zookeeper_formats() {
    let server = Server::start(ServerConfig::ephemeral()).await.unwrap();
    let addr = server.addr();
    let zk = client(addr).await;
    let sid = format!("{:#x}", zk.session_id().0);
    zk.create(
        "/w",
        b"",
        &CreateMode::Persistent.with_acls(Acls::anyone_all()),
    )
    .await
    .unwrap();
    zk.create(
        "/w/eph",
        b"",
        &CreateMode::Ephemeral.with_acls(Acls::anyone_all()),
    )
    .await
    .unwrap();
    let (_, _, _watch) = zk.get_and_watch_data("/w").await.unwrap();
    let (_, _, _child_watch) = zk.get_and_watch_children("/w").await.unwrap();

    // wchc / wchp: one line per (session, path), whichever kind of watch.
    assert_eq!(four_letter(addr, "wchc").await, format!("{sid}\n\t/w\n\n"));
    assert_eq!(four_letter(addr, "wchp").await, format!("/w\n\t{sid}\n\n"));

    // cons: the session's line carries sid, lop, est, to, lcxid, lzxid, latencies.
    let cons = four_letter(addr, "cons").await;
    let line = cons
        .lines()
        .find(|l| l.contains(&format!("sid={sid}")))
        .unwrap_or_else(|| panic!("no line for {sid}:\n{cons}"));
    assert!(line.starts_with(" /127.0.0.1:"), "{line}");
    for key in [
        "](queued=",
        ",recved=",
        ",sent=",
        ",lop=",
        ",est=",
        ",to=",
        ",lcxid=0x",
        ",lzxid=0x",
        ",lresp=",
        ",llat=",
        ",minlat=",
        ",avglat=",
        ",maxlat=",
    ] {
        assert!(line.contains(key), "cons lacks {key}: {line}");
    }
    assert!(line.ends_with(')'), "{line}");
    assert!(cons.ends_with("\n\n"), "{cons:?}");

    // dump: sessions by expiry, ephemerals by session, connections.
    let dump = four_letter(addr, "dump").await;
    assert!(
        dump.starts_with("SessionTracker dump:\nSession Sets ("),
        "{dump}"
    );
    assert!(dump.contains(" expire at "), "{dump}");
    assert!(
        dump.contains(&format!(
            "ephemeral nodes dump:\nSessions with Ephemerals (1):\n{sid}:\n\t/w/eph\n"
        )),
        "{dump}"
    );
    assert!(dump.contains(&format!("sessionId: {sid}")), "{dump}");

    // Trace mask: 306 by default; stmk sets it from the 8 bytes after the word.
    assert_eq!(four_letter(addr, "gtmk").await, "306");
    let mut raw = common::Raw::connect(addr).await;
    let mut stmk = b"stmk".to_vec();
    stmk.extend_from_slice(&338i64.to_be_bytes());
    raw.send_raw(&stmk).await;
    let mut answer = String::new();
    raw.stream.read_to_string(&mut answer).await.unwrap();
    assert_eq!(answer, "338");
    assert_eq!(four_letter(addr, "gtmk").await, "338");

    assert_eq!(four_letter(addr, "hash").await, "");
    assert_eq!(four_letter(addr, "crst").await, "Connection stats reset.\n");
    let cons = four_letter(addr, "cons").await;
    assert!(cons.contains("lop=NA"), "crst resets last op: {cons}");
    server.stop().await;
}

#[tokio::test]
async fn admin_endpoint_serves_metrics_and_commands() {
    let server = Server::start(ServerConfig {
        admin_listen: Some("127.0.0.1:0".parse().unwrap()),
        ..ServerConfig::ephemeral()
    })
    .await
    .unwrap();
    let admin = server.config().admin_listen.expect("bound admin address");
    assert_ne!(admin.port(), 0);
    let zk = client(server.addr()).await;
    for i in 0..3 {
        zk.create(
            &format!("/m{i}"),
            b"abc",
            &CreateMode::Persistent.with_acls(Acls::anyone_all()),
        )
        .await
        .unwrap();
    }
    let (_, _, _watch) = zk.get_and_watch_data("/m0").await.unwrap();

    let (status, metrics) = http_get(admin, "/metrics").await;
    assert_eq!(status, 200);
    for needle in [
        "# TYPE zkit_request_latency_seconds histogram",
        "zkit_requests_total{op=\"create2\"} 3",
        "zkit_request_latency_seconds_bucket{op=\"create2\",le=\"+Inf\"} 3",
        "zkit_request_latency_seconds_count{op=\"getData\"} 1",
        "zkit_sessions 1",
        "zkit_watches 1",
        "zkit_znodes 8",
        "zkit_outstanding_requests 0",
        "# TYPE zkit_fsync_latency_seconds histogram",
        "zkit_approximate_data_size_bytes ",
    ] {
        assert!(
            metrics.contains(needle),
            "/metrics lacks {needle:?}:\n{metrics}"
        );
    }

    // Every write batch went through one storage flush.
    assert!(
        !metrics.contains("zkit_fsync_latency_seconds_count 0\n"),
        "{metrics}"
    );

    let (status, body) = http_get(admin, "/commands/ruok").await;
    assert_eq!(status, 200);
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["command"], "ruok");
    assert!(v["error"].is_null());

    let (_, body) = http_get(admin, "/commands/stat").await;
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["command"], "stats");
    assert_eq!(v["server_stats"]["server_state"], "standalone");
    assert_eq!(v["node_count"], 8);

    let (_, body) = http_get(admin, "/commands/mntr").await;
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["command"], "monitor");
    assert_eq!(v["znode_count"], 8);
    assert_eq!(v["watch_count"], 1);

    let (_, body) = http_get(admin, "/commands/connections").await;
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    let sid = format!("{:#x}", zk.session_id().0);
    let conns = v["connections"].as_array().unwrap();
    assert!(conns.iter().any(|c| c["session_id"] == sid.as_str()), "{v}");

    let (_, body) = http_get(admin, "/commands/watches").await;
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    let by_session = v["session_id_to_watched_paths"].as_object().unwrap();
    assert_eq!(
        by_session[&zk.session_id().0.to_string()],
        serde_json::json!(["/m0"])
    );

    let (status, body) = http_get(admin, "/commands/nope").await;
    assert_eq!(status, 404);
    assert!(body.contains("Command not found"));
    let (status, _) = http_get(admin, "/elsewhere").await;
    assert_eq!(status, 404);
    server.stop().await;
}
