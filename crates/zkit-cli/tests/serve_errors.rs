//! `zkit serve` start-up failures, run as the real binary: each prints one `Error:` line that
//! names the culprit once (the data dir that is a file, the client port in use, the admin port
//! in use, named as the admin port) and exits 1.

use std::time::Duration;

use tokio::process::Command;

const WAIT: Duration = Duration::from_secs(30);

/// Runs `zkit serve ARGS`, expecting it to fail at start-up; returns its stderr.
async fn failed_serve(args: &[&str]) -> String {
    let out = tokio::time::timeout(
        WAIT,
        Command::new(env!("CARGO_BIN_EXE_zkit"))
            .arg("serve")
            .args(args)
            .env_remove("RUST_LOG")
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("zkit serve exited in time")
    .expect("run zkit serve");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "zkit serve {args:?}: {stderr}");
    stderr
}

/// The one `Error:` line of `stderr`.
fn error_line(stderr: &str) -> &str {
    let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("Error:")).collect();
    assert_eq!(errors.len(), 1, "one error line: {stderr}");
    errors[0]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_dir_that_is_a_file_is_said_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("not-a-dir");
    std::fs::write(&file, b"x").expect("file");
    let file = file.to_str().expect("utf-8 path");
    let stderr = failed_serve(&["--port", "0", "--data-dir", file]).await;
    let line = error_line(&stderr);
    assert_eq!(line.matches(file).count(), 1, "{line}");
    assert_eq!(line.matches("File exists").count(), 1, "{line}");
    assert_eq!(stderr.matches(file).count(), 1, "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_port_in_use_is_named_once() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = taken.local_addr().expect("addr").to_string();
    let port = addr.rsplit(':').next().expect("port").to_string();
    let stderr = failed_serve(&["--in-memory", "--port", &port]).await;
    let line = error_line(&stderr);
    assert!(line.contains(&format!("cannot listen on {addr}")), "{line}");
    assert!(!line.contains("admin"), "{line}");
    assert_eq!(line.matches("Address already in use").count(), 1, "{line}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_port_in_use_is_named_as_the_admin_port() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = taken.local_addr().expect("addr").to_string();
    let port = addr.rsplit(':').next().expect("port").to_string();
    let stderr = failed_serve(&["--in-memory", "--port", "0", "--admin-port", &port]).await;
    let line = error_line(&stderr);
    assert!(
        line.contains(&format!("cannot listen on the admin port {addr}")),
        "{line}"
    );
    assert_eq!(line.matches("Address already in use").count(), 1, "{line}");
}
