//! The `zkit` binary's node commands (ls, get, set, create, rm, stat, watch), run as a
//! subprocess against an embedded server; plus `zkit serve` and `zkit demo` end to end.

mod common;

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;
use zkit_server::{Server, ServerConfig};

const WAIT: Duration = Duration::from_secs(30);
/// `zkit demo` runs every section, with processes killed and recovered (about 35 s here).
const DEMO_WAIT: Duration = Duration::from_secs(120);

struct Output {
    code: i32,
    stdout: String,
    stderr: String,
}

/// Runs `zkit ARGS` with `ZKIT_SERVER` pointing at `server` (unless `server` is empty).
async fn zkit(server: &str, args: &[&str]) -> Output {
    zkit_within(WAIT, server, args).await
}

async fn zkit_within(wait: Duration, server: &str, args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_zkit"));
    command
        .args(args)
        .env_remove("ZKIT_SERVER")
        .kill_on_drop(true);
    if !server.is_empty() {
        command.env("ZKIT_SERVER", server);
    }
    let out = tokio::time::timeout(wait, command.output())
        .await
        .expect("zkit finished in time")
        .expect("run zkit");
    Output {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Runs and expects success; returns stdout.
async fn ok(server: &str, args: &[&str]) -> String {
    let out = zkit(server, args).await;
    assert_eq!(out.code, 0, "zkit {args:?} failed: {}", out.stderr);
    out.stdout
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_get_set_stat_ls_rm() {
    let server = Server::start(ServerConfig::ephemeral()).await.unwrap();
    let s = server.addr().to_string();
    let s = s.as_str();

    assert_eq!(ok(s, &["create", "/app", "hello"]).await, "/app\n");
    assert_eq!(ok(s, &["create", "/app/b"]).await, "/app/b\n");
    assert_eq!(ok(s, &["create", "/app/a", "x"]).await, "/app/a\n");
    assert_eq!(
        ok(s, &["create", "/app/q-", "--sequential"]).await,
        "/app/q-0000000002\n"
    );
    assert_eq!(
        ok(s, &["create", "/app/t", "--ttl", "10s"]).await,
        "/app/t\n"
    );
    assert_eq!(
        ok(s, &["create", "/app/c", "--container"]).await,
        "/app/c\n"
    );

    assert_eq!(ok(s, &["get", "/app"]).await, "hello\n");
    ok(s, &["set", "/app", "world", "--version", "0"]).await;
    let got = ok(s, &["get", "/app", "--stat"]).await;
    assert!(got.starts_with("world\ncZxid = 0x"), "{got}");
    assert!(got.contains("\ndataVersion = 1\n"), "{got}");
    assert!(got.contains("\nnumChildren = 5\n"), "{got}");

    let stat = ok(s, &["stat", "/app/a"]).await;
    assert!(stat.contains("\ndataLength = 1\n"), "{stat}");
    assert!(stat.contains("\nephemeralOwner = 0x0\n"), "{stat}");

    assert_eq!(ok(s, &["ls", "/app"]).await, "a\nb\nc\nq-0000000002\nt\n");
    ok(s, &["create", "/app/a/deep"]).await;
    assert_eq!(
        ok(s, &["ls", "-R", "/app"]).await,
        "/app\n/app/a\n/app/a/deep\n/app/b\n/app/c\n/app/q-0000000002\n/app/t\n"
    );

    // Errors: a clear message naming the node and the code, and a non-zero exit.
    let out = zkit(s, &["set", "/app", "again", "--version", "0"]).await;
    assert_eq!(out.code, 1);
    assert_eq!(
        out.stderr,
        "Error: node /app has a different version (BadVersion)\n"
    );
    let out = zkit(s, &["get", "/missing"]).await;
    assert_eq!(out.code, 1);
    assert_eq!(out.stderr, "Error: node /missing does not exist (NoNode)\n");
    let out = zkit(s, &["create", "/app"]).await;
    assert_eq!(out.stderr, "Error: node /app already exists (NodeExists)\n");
    // A missing parent is named, not the child; -p creates the parents (kazoo's makepath).
    let out = zkit(s, &["create", "/jobs/x/job-", "--sequential"]).await;
    assert_eq!(out.code, 1);
    assert_eq!(
        out.stderr,
        "Error: cannot create /jobs/x/job-: its parent /jobs does not exist (NoNode); \
         `zkit create -p` creates missing parents\n"
    );
    assert_eq!(
        ok(s, &["create", "-p", "/jobs/x/job-", "--sequential"]).await,
        "/jobs/x/job-0000000000\n"
    );
    ok(s, &["create", "/jobs/y"]).await;
    assert_eq!(ok(s, &["create", "-p", "/jobs/y/z"]).await, "/jobs/y/z\n");
    ok(s, &["rm", "--recursive", "/jobs"]).await;
    let out = zkit(s, &["rm", "/app"]).await;
    assert_eq!(out.code, 1);
    assert_eq!(out.stderr, "Error: node /app has children (NotEmpty)\n");

    ok(s, &["rm", "/app/b", "--version", "0"]).await;
    ok(s, &["rm", "--recursive", "/app"]).await;
    assert_eq!(ok(s, &["ls", "/"]).await, "zookeeper\n");

    // An ephemeral lives only as long as the command's session.
    assert_eq!(ok(s, &["create", "/e", "--ephemeral"]).await, "/e\n");
    assert_eq!(zkit(s, &["stat", "/e"]).await.code, 1);
    server.stop().await;
}

/// `zkit digest` prints Apache's digest id: the superDigest `scripts/apache-zk` gives Apache
/// ZooKeeper for `super:test` (computed by Apache's DigestAuthenticationProvider).
#[tokio::test]
async fn digest_prints_apaches_digest_id() {
    assert_eq!(
        ok("", &["digest", "super:test"]).await,
        "super:D/InIHSb7yEEbrWz8b9l71RjZJU=\n"
    );
    let out = zkit("", &["digest", "nocolon"]).await;
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("USER:PASSWORD"), "{}", out.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_flag_env_default_and_chroot() {
    let server = Server::start(ServerConfig::ephemeral()).await.unwrap();
    let addr = server.addr().to_string();
    // --server wins over ZKIT_SERVER.
    ok("127.0.0.1:1", &["create", "/root", "--server", &addr]).await;
    ok(&addr, &["create", "/root/child", "c"]).await;
    // A chroot: paths are relative to it.
    let chrooted = format!("{addr}/root");
    assert_eq!(ok(&chrooted, &["ls", "/"]).await, "child\n");
    assert_eq!(ok(&chrooted, &["get", "/child"]).await, "c\n");
    // Nothing listening: a clear error, non-zero exit.
    let out = zkit("127.0.0.1:1", &["ls", "/"]).await;
    assert_eq!(out.code, 1);
    assert!(
        out.stderr
            .starts_with("Error: cannot connect to 127.0.0.1:1"),
        "{}",
        out.stderr
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_prints_one_line_per_event() {
    let server = Server::start(ServerConfig::ephemeral()).await.unwrap();
    let s = server.addr().to_string();
    ok(&s, &["create", "/w"]).await;

    let mut child = Command::new(env!("CARGO_BIN_EXE_zkit"))
        .args(["watch", "/w", "--recursive", "--count", "3", "--server", &s])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    // Only change things once the watch is in place (announced on stderr).
    let mut stderr = BufReader::new(child.stderr.take().unwrap()).lines();
    let line = tokio::time::timeout(WAIT, stderr.next_line())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(line.as_deref(), Some("watching /w"));

    ok(&s, &["set", "/w", "1"]).await;
    ok(&s, &["create", "/w/x"]).await;
    ok(&s, &["rm", "/w/x"]).await;
    let out = tokio::time::timeout(WAIT, child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "NodeDataChanged /w\nNodeCreated /w/x\nNodeDeleted /w/x\n"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_prints_address_and_stops_on_sigterm() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_zkit"))
        .args([
            "serve",
            "--in-memory",
            "--port",
            "0",
            "--4lw-whitelist",
            "ruok,srvr",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = tokio::time::timeout(WAIT, stdout.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let addr = common::listening_addr(&line);
    assert!(addr.starts_with("127.0.0.1:"), "{addr}");

    ok(&addr, &["create", "/served", "yes"]).await;
    assert_eq!(ok(&addr, &["get", "/served"]).await, "yes\n");

    let pid = child.id().unwrap().to_string();
    let killed = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .await
        .unwrap();
    assert!(killed.success());
    let status = tokio::time::timeout(WAIT, child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "graceful stop exits 0, got {status:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_passes_and_prints_summary() {
    let out = zkit_within(DEMO_WAIT, "", &["demo", "--changes", "5"]).await;
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("== 1. Watched value"), "{}", out.stdout);
    assert!(
        out.stdout.contains("watcher got 5 NodeDataChanged events"),
        "{}",
        out.stdout
    );
    let summary = out.stdout.split("Summary\n").nth(1).expect("summary table");
    let row = |name: &str| {
        summary
            .lines()
            .find(|line| line.trim_start().starts_with(name))
            .unwrap_or_else(|| panic!("no summary row for {name}: {summary}"))
            .to_owned()
    };
    for section in [
        "Watched value",
        "Distributed lock",
        "Configuration service",
        "Distributed procedure",
        "Two-phase commit",
        "Replicated ledger",
    ] {
        assert!(row(section).contains("PASS"), "{summary}");
    }
    assert!(summary.contains("all 6 sections passed"), "{summary}");
}

/// The same commands against Apache ZooKeeper, so `zkit` is known to be a client of the real
/// thing and not only of zkit's server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_commands_against_apache_zookeeper() {
    let Some(apache) = zkit_testkit::apache_zk() else {
        return;
    };
    let s = apache.as_str();
    let root = format!(
        "/zkit-cli-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    );
    let child = format!("{root}/a");
    assert_eq!(ok(s, &["create", &root, "v"]).await, format!("{root}\n"));
    ok(s, &["create", &child, "x"]).await;
    ok(s, &["set", &root, "w", "--version", "0"]).await;
    assert_eq!(ok(s, &["get", &root]).await, "w\n");
    assert_eq!(ok(s, &["ls", &root]).await, "a\n");
    let out = zkit(s, &["rm", &root]).await;
    assert_eq!(
        out.stderr,
        format!("Error: node {root} has children (NotEmpty)\n")
    );
    ok(s, &["rm", "-r", &root]).await;
    let out = zkit(s, &["stat", &root]).await;
    assert_eq!(
        out.stderr,
        format!("Error: node {root} does not exist (NoNode)\n")
    );
}
