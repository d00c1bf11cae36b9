//! The load generators behave like tools: `bench txn` removes the tree it made, and
//! `bench server` with its defaults runs against a server with the default connection limit
//! (maxClientCnxns 60), or says which limit stopped it.

mod common;

use std::time::Duration;

use zkit_server::{Server, ServerConfig};

const WAIT: Duration = Duration::from_secs(90);

async fn zkit(server: &str, args: &[&str]) -> (i32, String, String) {
    common::zkit_at(WAIT, server, args).await
}

/// A server with zkit serve's (and Apache's) default per-address connection limit.
async fn default_limit_server() -> Server {
    let mut config = ServerConfig::ephemeral();
    config.limits.max_client_cnxns = 60;
    Server::start(config).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_txn_leaves_no_tree_behind() {
    let server = default_limit_server().await;
    let s = server.addr().to_string();
    let args = [
        "bench",
        "txn",
        "--latency-txns",
        "5",
        "--seconds",
        "1",
        "--in-flight",
        "2",
    ];
    let (code, out, err) = zkit(&s, &args).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("txn/s"), "{out}");
    // Piped stderr: one plain line per phase, then the total.
    for line in [
        "zkit bench txn: 1/3 warm-up",
        "zkit bench txn: 2/3 latency: 5 sequential",
        "zkit bench txn: 3/3 throughput: 1 s with 2 in flight",
        "zkit bench txn: done in ",
    ] {
        assert!(err.contains(line), "no {line:?} in {err}");
    }
    let (code, out, err) = zkit(&s, &["ls", "/"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains("zkit-bench-txn"), "left behind: {out}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_proc_reports_each_row_as_it_goes() {
    let server = default_limit_server().await;
    let s = server.addr().to_string();
    let (code, out, err) = zkit(&s, &["bench", "proc", "--members", "2,3", "--rounds", "2"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("zkit bench proc: 1/2 2 members, 2 procedures"),
        "{err}"
    );
    assert!(err.contains("zkit bench proc: 2/2 3 members"), "{err}");
    // Human durations (`12ms`, `1.2s`), not Debug's `12.345678ms`.
    let row = out
        .lines()
        .find(|l| l.trim_start().starts_with("3 "))
        .expect("a 3-member row");
    let human = |d: &str| match (d.strip_suffix("ms"), d.strip_suffix('s')) {
        (Some(ms), _) => ms.chars().all(|c| c.is_ascii_digit()),
        (None, Some(s)) => s
            .split_once('.')
            .is_some_and(|(a, b)| a.chars().all(|c| c.is_ascii_digit()) && b.len() == 1),
        _ => false,
    };
    assert!(row.split_whitespace().skip(1).all(human), "{row}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_server_defaults_fit_the_default_connection_limit() {
    let server = default_limit_server().await;
    let s = server.addr().to_string();
    let (code, out, err) = zkit(
        &s,
        &["bench", "server", "--seconds", "1", "--ops", "exists"],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("sessions=50"), "{out}");
    // Over the limit: the error says which limit.
    let (code, _, err) = zkit(
        &s,
        &[
            "bench",
            "server",
            "--seconds",
            "1",
            "--ops",
            "exists",
            "--sessions",
            "70",
        ],
    )
    .await;
    assert_ne!(code, 0);
    assert!(err.contains("maxClientCnxns"), "{err}");
    assert!(
        err.contains("closed the connection during the handshake"),
        "{err}"
    );
    server.stop().await;
}

/// The names `zkit ls` prints under `path`.
async fn children(server: &str, path: &str) -> Vec<String> {
    let (code, out, err) = zkit(server, &["ls", path]).await;
    assert_eq!(code, 0, "{err}");
    out.split_whitespace().map(str::to_owned).collect()
}

/// The JSON object `zkit bench server --json` printed.
fn report(out: &str) -> serde_json::Value {
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_server_max_nodes_fills_or_holds_the_tree() {
    let server = default_limit_server().await;
    let s = server.addr().to_string();
    let run = |path: &'static str, extra: &'static [&'static str]| {
        let s = s.clone();
        async move {
            let mut args = vec![
                "bench",
                "server",
                "--ops",
                "create",
                "--sessions",
                "4",
                "--in-flight",
                "8",
                "--keep",
                "--json",
                "--path",
                path,
            ];
            args.extend_from_slice(extra);
            let (code, out, err) = zkit(&s, &args).await;
            assert_eq!(code, 0, "{err}");
            let dirs = children(&s, path).await;
            assert_eq!(dirs.len(), 1, "{dirs:?}");
            let nodes = children(&s, &format!("{path}/{}", dirs[0])).await.len();
            (report(&out), nodes)
        }
    };

    // --fill: 4 sessions × 50 creates, then it stops, long before its 60 s.
    let (json, nodes) = run(
        "/fill",
        &["--max-nodes", "200", "--fill", "--seconds", "60"],
    )
    .await;
    assert_eq!(nodes, 200, "{json}");
    assert_eq!(json["completed"], 200, "{json}");
    assert_eq!(json["errors"], 0, "{json}");
    assert!(json["seconds"].as_f64().unwrap() < 30.0, "{json}");

    // Held: past 40 nodes each session deletes its oldest for each one it creates, so the
    // tree ends with 10 or 9 nodes per session (a delete may be the last request), and no
    // delete misses its node.
    let (json, nodes) = run(
        "/hold",
        &["--max-nodes", "40", "--seconds", "2", "--interval", "1"],
    )
    .await;
    assert!((36..=40).contains(&nodes), "{nodes} nodes: {json}");
    assert_eq!(json["errors"], 0, "{json}");
    assert!(json["completed"].as_u64().unwrap() > 80, "{json}");
    let windows = json["windows"].as_array().expect("windows with --interval");
    assert!(!windows.is_empty(), "{json}");
    let counted: f64 = windows
        .iter()
        .map(|w| w["ops_per_sec"].as_f64().unwrap())
        .sum();
    // Windows of 1 s: their rates add up to the completed requests.
    assert_eq!(
        counted as u64,
        json["completed"].as_u64().unwrap(),
        "{json}"
    );
    server.stop().await;
}
