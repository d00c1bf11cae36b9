//! `zkit bench server --plot FILE.svg` and `zkit bench lock --plot FILE.svg`, run as
//! subprocesses against an embedded server: short, small runs write the latency percentile
//! charts.

use std::time::Duration;

use tokio::process::Command;
use zkit_server::{Server, ServerConfig};

const WAIT: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_server_writes_the_latency_plot() {
    let server = Server::start(ServerConfig::ephemeral()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("latency.svg");
    let out = tokio::time::timeout(
        WAIT,
        Command::new(env!("CARGO_BIN_EXE_zkit"))
            .args(["bench", "server", "--ops", "exists", "--sessions", "2"])
            .args(["--inflight", "2", "--seconds", "1", "--json", "--plot"])
            .arg(&file)
            .env("ZKIT_SERVER", server.addr().to_string())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("zkit bench server finished in time")
    .expect("run zkit");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "zkit bench server failed: {stderr}");

    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    let percentiles = report["latency_us"]["percentiles"]
        .as_array()
        .expect("the JSON carries the percentile distribution");
    assert!(percentiles.len() > 2, "{report}");

    let svg = std::fs::read_to_string(&file).expect("the plot was written");
    let svg = svg.trim();
    assert!(svg.starts_with("<svg"), "{svg}");
    assert!(svg.ends_with("</svg>"), "{svg}");
    assert!(
        svg.contains("exists on 127.0.0.1:"),
        "the series is named: {svg}"
    );
    assert!(svg.contains("latency (ms)"), "{svg}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_lock_plots_one_line_per_client_count() {
    let server = Server::start(ServerConfig::ephemeral()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("lock.svg");
    let out = tokio::time::timeout(
        WAIT,
        Command::new(env!("CARGO_BIN_EXE_zkit"))
            .args([
                "bench",
                "lock",
                "--clients",
                "1,2",
                "--seconds",
                "1",
                "--plot",
            ])
            .arg(&file)
            .env("ZKIT_SERVER", server.addr().to_string())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("zkit bench lock finished in time")
    .expect("run zkit");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "zkit bench lock failed: {stderr}");

    let svg = std::fs::read_to_string(&file).expect("the plot was written");
    assert!(svg.trim().starts_with("<svg"), "{svg}");
    for label in ["clients=1 on 127.0.0.1:", "clients=2 on 127.0.0.1:"] {
        assert!(svg.contains(label), "{label:?} missing: {svg}");
    }
    server.stop().await;
}
