//! Three independent ZooKeeper clients against every target server: Java `zkCli.sh` (Debian's
//! `zookeeper` package), Python `kazoo` (Debian's `python3-kazoo`), and the Rust
//! `zookeeper-client` crate.
//!
//! The same checks run against Apache ZooKeeper (from `ZKIT_APACHE_ZK`, see `zkit_testkit`) and
//! against an embedded zkit server, so a check that passes on Apache and fails on zkit is a zkit
//! compatibility bug, and a check that fails on Apache is a wrong check. The scripts the Java
//! and Python clients run are in `tests/compat/`.
//!
//! Missing client tools skip with a visible `SKIP` line locally and fail under CI.

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::process::Command;
use tokio::time::timeout;
use zookeeper_client as zk;

/// Upper bound for one client-tool run (each zkCli.sh start is a JVM start, ~1 s).
const TOOL_TIMEOUT: Duration = Duration::from_secs(120);

const ZKCLI: &str = "/usr/share/zookeeper/bin/zkCli.sh";
/// Debian's kazoo is installed for Debian's Python; a pyenv or venv `python3` earlier on PATH
/// would not see it.
const SYSTEM_PYTHON: &str = "/usr/bin/python3";

/// One server to run the checks against.
struct Target {
    /// Shown in assertion messages: which server broke.
    name: &'static str,
    /// `host:port`.
    addr: String,
    /// Keeps an embedded server alive for the test's duration.
    _server: Option<Box<dyn std::any::Any + Send>>,
}

/// Every server the checks run against: Apache ZooKeeper when `ZKIT_APACHE_ZK` is set, and the
/// embedded zkit server when it is available.
async fn target_servers() -> Vec<Target> {
    let mut targets = Vec::new();
    if let Some(addr) = zkit_testkit::apache_zk() {
        targets.push(Target {
            name: "apache",
            addr,
            _server: None,
        });
    }
    if let Some(target) = embedded_zkit().await {
        targets.push(target);
    }
    if targets.is_empty() {
        eprintln!("SKIP compat_clients: no target server (neither Apache ZooKeeper nor zkit)");
    }
    targets
}

/// The embedded zkit server, as a target. Failing to start it is a test failure, not a skip.
async fn embedded_zkit() -> Option<Target> {
    let server = zkit_server::Server::start(zkit_server::ServerConfig::ephemeral())
        .await
        .expect("start the embedded zkit server");
    Some(Target {
        name: "zkit",
        addr: server.addr().to_string(),
        _server: Some(Box::new(server)),
    })
}

/// Whether a client tool is installed. Missing: `SKIP` line locally, panic under CI.
fn tool_available(path: &str, package: &str) -> bool {
    if Path::new(path).exists() {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "{path} is missing under CI: install Debian package {package} (scripts/apache-zk install)"
    );
    eprintln!("SKIP {path} not installed (Debian package {package})");
    false
}

fn compat_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/compat")
}

/// Runs a command with optional stdin, bounded by [`TOOL_TIMEOUT`], killing it on timeout.
async fn run(cmd: &mut Command, stdin: Option<&str>) -> Output {
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .kill_on_drop(true);
    let mut child = cmd.spawn().expect("spawn client tool");
    if let Some(input) = stdin {
        let mut pipe = child.stdin.take().expect("piped stdin");
        pipe.write_all(input.as_bytes()).await.expect("write stdin");
        drop(pipe); // EOF, in case the script's `quit` is not reached
    }
    timeout(TOOL_TIMEOUT, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("{cmd:?} did not finish within {TOOL_TIMEOUT:?}"))
        .expect("wait for client tool")
}

/// zkCli.sh against `addr`: stdin script when `script` is given, else one-shot `args`.
async fn zkcli(addr: &str, args: &[&str], script: Option<&str>) -> (bool, String, String) {
    let mut cmd = Command::new(ZKCLI);
    cmd.arg("-server").arg(addr).args(args);
    let out = run(&mut cmd, script).await;
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        // zkCli prints "Created ..." and errors on stderr; drop the logger's noise (no binding).
        String::from_utf8_lossy(&out.stderr)
            .lines()
            .filter(|l| !l.starts_with("SLF4J:"))
            .collect::<Vec<_>>()
            .join("\n"),
    )
}

fn assert_has_line(haystack: &str, line: &str, ctx: &str) {
    assert!(
        haystack.lines().any(|l| l.trim() == line),
        "{ctx}: expected a line {line:?} in:\n{haystack}"
    );
}

/// The values of `key = value` lines printed by zkCli's `stat`, in order.
fn stat_values<'a>(out: &'a str, key: &str) -> Vec<&'a str> {
    out.lines()
        .filter_map(|l| l.strip_prefix(key)?.trim_start().strip_prefix('='))
        .map(str::trim)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zkcli_create_get_set_ls_stat_delete_ephemeral_sequential() {
    if !tool_available(ZKCLI, "zookeeper") {
        return;
    }
    for target in target_servers().await {
        let (name, addr) = (target.name, target.addr.as_str());
        let root = zkit_testkit::unique_path("zkcli");
        let template = std::fs::read_to_string(compat_dir().join("zkcli_session.txt"))
            .expect("read tests/compat/zkcli_session.txt");
        let script = template.replace("$ROOT", &root);

        let (ok, out, err) = zkcli(addr, &[], Some(&script)).await;
        let ctx = format!("{name}: zkCli session\n--- stderr:\n{err}\n--- stdout");
        assert!(ok, "{ctx}:\n{out}");
        for created in ["", "/child", "/eph", "/seq-0000000002", "/seq-0000000003"] {
            assert_has_line(&err, &format!("Created {root}{created}"), &ctx);
        }
        assert_has_line(&out, "v1", &ctx);
        assert_has_line(&out, "v2", &ctx);
        assert_has_line(&out, "[child]", &ctx);
        assert_has_line(&out, "[eph, seq-0000000002, seq-0000000003]", &ctx);
        // Two stats: the root after one set and one child, then the ephemeral.
        assert_eq!(
            stat_values(&out, "dataVersion"),
            ["1", "0"],
            "{ctx}:\n{out}"
        );
        assert_eq!(stat_values(&out, "cversion"), ["1", "0"], "{ctx}:\n{out}");
        assert_eq!(
            stat_values(&out, "numChildren"),
            ["1", "0"],
            "{ctx}:\n{out}"
        );
        assert_eq!(stat_values(&out, "dataLength"), ["2", "1"], "{ctx}:\n{out}");
        let owners = stat_values(&out, "ephemeralOwner");
        assert_eq!(owners.len(), 2, "{ctx}:\n{out}");
        assert_eq!(owners[0], "0x0", "{ctx}: persistent node has no owner");
        assert_ne!(owners[1], "0x0", "{ctx}: ephemeral node has an owner");

        // The session ended with `quit`, so its ephemeral is gone for the next one.
        let (ok, out, err) = zkcli(addr, &["ls", &root], None).await;
        assert!(ok, "{name}: ls after quit: {err}\n{out}");
        assert_has_line(&out, "[seq-0000000002, seq-0000000003]", name);

        let missing = format!("{root}/nope");
        let (ok, _, err) = zkcli(addr, &["get", &missing], None).await;
        assert!(!ok, "{name}: get of a missing node must exit non-zero");
        assert_has_line(&err, &format!("Node does not exist: {missing}"), name);

        let (ok, out, err) = zkcli(addr, &["deleteall", &root], None).await;
        assert!(ok, "{name}: deleteall: {err}\n{out}");
        let (ok, _, err) = zkcli(addr, &["stat", &root], None).await;
        assert!(!ok, "{name}: stat after deleteall must exit non-zero");
        assert_has_line(&err, &format!("Node does not exist: {root}"), name);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kazoo_crud_watches_ephemeral_sequential_lock() {
    if !tool_available(SYSTEM_PYTHON, "python3")
        || !tool_available("/usr/lib/python3/dist-packages/kazoo", "python3-kazoo")
    {
        return;
    }
    for target in target_servers().await {
        let root = zkit_testkit::unique_path("kazoo");
        let mut cmd = Command::new(SYSTEM_PYTHON);
        cmd.arg(compat_dir().join("kazoo_check.py"))
            .arg(&target.addr)
            .arg(&root);
        let out = run(&mut cmd, None).await;
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        println!("{}: {stdout}", target.name);
        assert!(
            out.status.success(),
            "{}: kazoo_check.py failed ({}):\n{stdout}\n{stderr}",
            target.name,
            out.status
        );
        // Guards against the script silently running fewer checks.
        assert_eq!(stdout.matches("ok   kazoo ").count(), 5, "{stdout}");
    }
}

#[tokio::test]
async fn rust_zookeeper_client_crud() {
    for target in target_servers().await {
        let name = target.name;
        let client = zk::Client::connect(&target.addr)
            .await
            .unwrap_or_else(|e| panic!("{name}: connect: {e}"));
        let root = zkit_testkit::unique_path("rust-client");
        let persistent = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());

        let (stat, _) = client
            .create(&root, b"v1", &persistent)
            .await
            .expect("create");
        assert_eq!((stat.version, stat.data_length), (0, 2), "{name}");
        assert_eq!(
            client.create(&root, b"x", &persistent).await.unwrap_err(),
            zk::Error::NodeExists,
            "{name}"
        );

        let (data, stat) = client.get_data(&root).await.expect("get");
        assert_eq!((data.as_slice(), stat.version), (&b"v1"[..], 0), "{name}");

        let stat = client.set_data(&root, b"v2", Some(0)).await.expect("set");
        assert_eq!(stat.version, 1, "{name}");
        assert_eq!(
            client.set_data(&root, b"v3", Some(0)).await.unwrap_err(),
            zk::Error::BadVersion,
            "{name}"
        );
        assert_eq!(
            client.get_data(&root).await.expect("get").0,
            b"v2",
            "{name}"
        );

        let child = format!("{root}/child");
        client
            .create(&child, b"", &persistent)
            .await
            .expect("create child");
        assert_eq!(
            client.list_children(&root).await.expect("ls"),
            ["child"],
            "{name}"
        );
        let stat = client
            .check_stat(&root)
            .await
            .expect("stat")
            .expect("exists");
        assert_eq!((stat.num_children, stat.cversion), (1, 1), "{name}");
        assert_eq!(
            client.delete(&root, None).await.unwrap_err(),
            zk::Error::NotEmpty,
            "{name}"
        );

        client.delete(&child, Some(0)).await.expect("delete child");
        assert_eq!(
            client.delete(&root, Some(0)).await.unwrap_err(),
            zk::Error::BadVersion,
            "{name}"
        );
        client.delete(&root, Some(1)).await.expect("delete");
        assert_eq!(
            client.check_stat(&root).await.expect("stat"),
            None,
            "{name}"
        );
        assert_eq!(
            client.get_data(&root).await.unwrap_err(),
            zk::Error::NoNode,
            "{name}"
        );
    }
}
