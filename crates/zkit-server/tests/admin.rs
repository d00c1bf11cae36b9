//! The four-letter words beyond srvr/mntr (cons, dump, wchc, wchp, gtmk, stmk, crst, hash), in
//! the formats Apache ZooKeeper 3.8 prints, and the HTTP admin endpoint (`/metrics`,
//! `/commands/<name>`). `four_letter_differential.rs` compares both with Apache itself.

mod common;

use common::{client, four_letter, http_get};
use tokio::io::AsyncReadExt;
use zkit_client::{Acls, CreateMode};
use zkit_server::{Server, ServerConfig};

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

    // hash: `<zxid hex>: <digest>` of the tree at the last zxid; every write moves both.
    let parse_hash = |text: String| -> (i64, i64) {
        let (zxid, digest) = text
            .strip_suffix('\n')
            .and_then(|l| l.split_once(": "))
            .unwrap_or_else(|| panic!("hash: {text:?}"));
        (
            i64::from_str_radix(zxid, 16).unwrap(),
            digest.parse().unwrap(),
        )
    };
    let (zxid, digest) = parse_hash(four_letter(addr, "hash").await);
    let stat = zk.set_data("/w", b"changed", None).await.unwrap();
    let (zxid2, digest2) = parse_hash(four_letter(addr, "hash").await);
    assert_eq!(zxid2, stat.mzxid);
    assert!(zxid2 > zxid);
    assert_ne!(digest2, digest);
    // Reads leave it alone.
    zk.get_data("/w").await.unwrap();
    assert_eq!(
        parse_hash(four_letter(addr, "hash").await),
        (zxid2, digest2)
    );

    // cons after a request: lop, lcxid (the xid of the last request), lzxid (its reply's zxid).
    let cons = four_letter(addr, "cons").await;
    let line = cons
        .lines()
        .find(|l| l.contains(&format!("sid={sid}")))
        .unwrap_or_else(|| panic!("no line for {sid}:\n{cons}"));
    assert!(
        line.contains(",lop=GETD,") || line.contains(",lop=PING,"),
        "{line}"
    );
    assert!(line.contains(&format!(",lzxid={zxid2:#x},")), "{line}");

    assert_eq!(four_letter(addr, "crst").await, "Connection stats reset.\n");
    let cons = four_letter(addr, "cons").await;
    let line = cons
        .lines()
        .find(|l| l.contains(&format!("sid={sid}")))
        .unwrap_or_else(|| panic!("no line for {sid}:\n{cons}"));
    // Apache's `resetStats`: last op NA, no lcxid, lzxid -1, counters zero (a ping may have
    // been answered since).
    if line.contains("lop=NA") {
        assert!(!line.contains("lcxid"), "{line}");
        assert!(line.contains(",lzxid=0xffffffffffffffff,"), "{line}");
        assert!(line.contains("](queued=0,recved=0,sent=0,"), "{line}");
    } else {
        assert!(line.contains("lop=PING"), "crst resets last op: {line}");
    }
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

    // Apache 3.8's Prometheus names and types (ZooKeeperServer.registerMetrics' gauges,
    // ServerMetrics' fsynctime/readlatency/updatelatency summaries), as ZooKeeper's Grafana
    // dashboards query them. Not measured by zkit, so absent: last/min/max_client_response_size,
    // auth_failed_count, the per-namespace quota gauge sets; quorum_size (standalone).
    let types: std::collections::BTreeMap<&str, &str> = metrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_once(' '))
        .collect();
    let apache_3_8 = [
        ("avg_latency", "gauge"),
        ("max_latency", "gauge"),
        ("min_latency", "gauge"),
        ("packets_received", "gauge"),
        ("packets_sent", "gauge"),
        ("num_alive_connections", "gauge"),
        ("outstanding_requests", "gauge"),
        ("uptime", "gauge"),
        ("znode_count", "gauge"),
        ("watch_count", "gauge"),
        ("ephemerals_count", "gauge"),
        ("approximate_data_size", "gauge"),
        ("global_sessions", "gauge"),
        ("local_sessions", "gauge"),
        ("open_file_descriptor_count", "gauge"),
        ("max_file_descriptor_count", "gauge"),
        ("connection_drop_probability", "gauge"),
        ("outstanding_tls_handshake", "gauge"),
        ("non_mtls_remote_conn_count", "gauge"),
        ("non_mtls_local_conn_count", "gauge"),
        ("fsynctime", "summary"),
        ("readlatency", "summary"),
        ("updatelatency", "summary"),
    ];
    for (name, kind) in apache_3_8 {
        assert_eq!(types.get(name), Some(&kind), "{name} in:\n{metrics}");
    }
    for line in [
        "znode_count 8\n",
        "watch_count 1\n",
        "global_sessions 1\n",
        "num_alive_connections 1\n",
        "updatelatency_count 3\n",
    ] {
        assert!(
            metrics.contains(line),
            "/metrics lacks {line:?}:\n{metrics}"
        );
    }

    // Apache's ADVANCED summaries (readlatency, updatelatency) carry quantile="0.5|0.9|0.99"
    // series, in non-decreasing order; fsynctime (BASIC) has none.
    for name in ["readlatency", "updatelatency"] {
        let quantiles: Vec<f64> = ["0.5", "0.9", "0.99"]
            .iter()
            .map(|q| {
                let prefix = format!("{name}{{quantile=\"{q}\"}} ");
                let line = metrics
                    .lines()
                    .find(|l| l.starts_with(&prefix))
                    .unwrap_or_else(|| panic!("/metrics lacks {prefix:?}:\n{metrics}"));
                line[prefix.len()..].parse().expect("a number")
            })
            .collect();
        assert!(
            quantiles.iter().all(|v| v.is_finite() && *v >= 0.0)
                && quantiles.windows(2).all(|w| w[0] <= w[1]),
            "{name}: {quantiles:?}"
        );
    }
    assert!(!metrics.contains("fsynctime{quantile="), "{metrics}");

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
    // Session ids are JSON numbers, as Apache's.
    let conns = v["connections"].as_array().unwrap();
    let mine = conns
        .iter()
        .find(|c| c["session_id"] == zk.session_id().0)
        .unwrap_or_else(|| panic!("{v}"));
    assert_eq!(mine["session_timeout"], 10_000);
    assert_eq!(mine["interest_ops"], 1);

    let (_, body) = http_get(admin, "/commands/watches").await;
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    let by_session = v["session_id_to_watched_paths"].as_object().unwrap();
    assert_eq!(
        by_session[&zk.session_id().0.to_string()],
        serde_json::json!(["/m0"])
    );

    let (_, body) = http_get(admin, "/commands/watch_summary").await;
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (
            &v["num_connections"],
            &v["num_paths"],
            &v["num_total_watches"]
        ),
        (&1.into(), &1.into(), &1.into())
    );

    let (_, body) = http_get(admin, "/commands/srvr").await;
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["command"], "server_stats");
    assert!(v.get("connections").is_none(), "{v}");

    let (_, body) = http_get(admin, "/commands/conf").await;
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["command"], "configuration");
    assert_eq!(v["client_port"], server.addr().port());
    assert_eq!(v["tick_time"], 2000);

    let (_, body) = http_get(admin, "/commands/dump").await;
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    let expiring: Vec<&serde_json::Value> = v["expiry_time_to_session_ids"]
        .as_object()
        .unwrap()
        .values()
        .flat_map(|sids| sids.as_array().unwrap())
        .collect();
    assert_eq!(expiring, [&serde_json::json!(zk.session_id().0)]);

    // The admin hash is the 4lw hash.
    let (_, body) = http_get(admin, "/commands/hash").await;
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    let digest = &v["digests"][0];
    assert_eq!(digest["digest_version"], 2);
    assert_eq!(
        four_letter(server.addr(), "hash").await,
        format!(
            "{:x}: {}\n",
            digest["zxid"].as_i64().unwrap(),
            digest["digest"]
        )
    );

    // set_trace_mask takes `traceMask`; gtmk sees it.
    let (_, body) = http_get(admin, "/commands/set_trace_mask?traceMask=338").await;
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["tracemask"], 338);
    assert_eq!(four_letter(server.addr(), "gtmk").await, "338");
    let (_, body) = http_get(admin, "/commands/stmk").await;
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["error"], "setTraceMask requires long traceMask argument");

    // stat_reset zeroes the server's packet counters.
    let (_, body) = http_get(admin, "/commands/srst").await;
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["command"], "stat_reset");
    let (_, body) = http_get(admin, "/commands/server_stats").await;
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["server_stats"]["packets_received"], 0);

    // An unknown command: 200 with the error in the body, as Apache's AdminServer.
    let (status, body) = http_get(admin, "/commands/nope").await;
    assert_eq!(status, 200);
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["error"], "Unknown command: nope");
    let (status, _) = http_get(admin, "/elsewhere").await;
    assert_eq!(status, 404);
    server.stop().await;
}
