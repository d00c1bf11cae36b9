//! `zkit serve` with TLS (the real binary), used by Apache's Java client (ZooKeeperMain over
//! `ClientCnxnSocketNetty`, `zookeeper.client.secure=true`, PEM key and trust stores) and by
//! kazoo (`use_ssl=True`), each presenting a client certificate and creating a node only its
//! certificate may read (an `x509` ACL); the TLS settings from flags and from a zoo.cfg with
//! Apache's keys; settings zkit cannot honour refused at start-up, naming the key.
//!
//! Certificates are made by the `openssl` CLI in a temp dir. A missing Java or kazoo skips
//! with a `SKIP` line locally and fails under CI (`CI` set).
#![cfg(feature = "tls")]

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};
use zkit_client::{Client, Error, TlsOptions};
use zkit_testkit::pki::{encrypted_key, issue, make_ca_and_server};

const WAIT: Duration = Duration::from_secs(60);
/// Debian's kazoo is installed for Debian's Python.
const SYSTEM_PYTHON: &str = "/usr/bin/python3";

/// A CA (`ca.key`, `ca.crt`) and certificates signed by it: `server` (localhost, 127.0.0.1),
/// `java` and `kazoo` clients; `name.pem` holds key then certificate (Apache's PEM key store).
fn make_pki(dir: &Path) {
    make_ca_and_server(dir);
    for name in ["java", "kazoo"] {
        issue(
            dir,
            "ca",
            name,
            &format!("/CN={name}"),
            &format!("DNS:{name}"),
        );
    }
}

/// A running `zkit serve` and the addresses it printed.
struct Serve {
    /// Kept alive for the test; killed when dropped.
    _child: Child,
    plain: String,
    secure: String,
}

/// Starts `zkit serve ARGS` (in memory, free ports) and reads both listening lines.
async fn serve(args: &[&str], cwd: &Path) -> Serve {
    let mut child = Command::new(env!("CARGO_BIN_EXE_zkit"))
        .arg("serve")
        .args(args)
        .current_dir(cwd)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let plain = next_line(&mut lines).await;
    let secure = next_line(&mut lines).await;
    let addr = |line: &str, prefix: &str| {
        line.strip_prefix(prefix)
            .unwrap_or_else(|| panic!("{line:?} is not {prefix:?}…"))
            .to_string()
    };
    Serve {
        plain: addr(&plain, "zkit serve listening on "),
        secure: addr(&secure, "zkit serve listening for TLS clients on "),
        _child: child,
    }
}

async fn next_line<R: tokio::io::AsyncRead + Unpin>(
    lines: &mut tokio::io::Lines<BufReader<R>>,
) -> String {
    tokio::time::timeout(WAIT, lines.next_line())
        .await
        .expect("zkit serve printed in time")
        .unwrap()
        .expect("zkit serve exited")
}

/// Whether a client tool is there: `SKIP` locally, a failure under CI.
fn available(what: &str, present: bool) -> bool {
    if !present {
        assert!(
            std::env::var_os("CI").is_none(),
            "{what} is missing under CI"
        );
        eprintln!("SKIP {what} not installed");
    }
    present
}

async fn plain_client(addr: &str) -> Client {
    Client::connector()
        .with_session_timeout(Duration::from_secs(10))
        .connect(addr)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_client_over_tls_with_an_x509_acl() {
    let Some(classpath) = zkit_testkit::curator_classpath() else {
        available(
            "ZooKeeper's Java client (/usr/share/java/zookeeper.jar)",
            false,
        );
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    make_pki(d);
    let server = serve(
        &[
            "--in-memory",
            "--port",
            "0",
            "--secure-port",
            "0",
            "--tls-cert",
            "server.pem",
            "--tls-ca",
            "ca.crt",
        ],
        d,
    )
    .await;
    let script = "create /java-tls hello x509:CN=java:cdrwa\nget /java-tls\nwhoami\ngetAcl /java-tls\nquit\n";
    let mut java = Command::new("java")
        .args([
            "-Xmx128m",
            "-Dzookeeper.client.secure=true",
            "-Dzookeeper.clientCnxnSocket=org.apache.zookeeper.ClientCnxnSocketNetty",
            "-Dzookeeper.ssl.keyStore.location=java.pem",
            "-Dzookeeper.ssl.keyStore.type=PEM",
            "-Dzookeeper.ssl.trustStore.location=ca.crt",
            "-Dzookeeper.ssl.trustStore.type=PEM",
            "-cp",
            &classpath,
            "org.apache.zookeeper.ZooKeeperMain",
            "-server",
            &server.secure,
        ])
        .current_dir(d)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start java");
    let mut stdin = java.stdin.take().unwrap();
    stdin.write_all(script.as_bytes()).await.unwrap();
    drop(stdin);
    let out = tokio::time::timeout(WAIT, java.wait_with_output())
        .await
        .expect("the Java client finished in time")
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let all = format!("{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let has = |line: &str| all.lines().any(|l| l.trim() == line);
    assert!(has("hello"), "the Java client read its node:\n{all}");
    assert!(has("x509: CN=java"), "whoami over TLS:\n{all}");
    assert!(has("'x509,'CN=java"), "getAcl:\n{all}");
    // Only the Java client's certificate may read it: a plaintext session may not.
    let plain = plain_client(&server.plain).await;
    assert_eq!(plain.get_data("/java-tls").await.err(), Some(Error::NoAuth));
    drop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kazoo_over_tls_from_a_zoo_cfg_with_apaches_keys() {
    let present = Path::new("/usr/lib/python3/dist-packages/kazoo").exists();
    if !available("kazoo (Debian package python3-kazoo)", present) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    make_pki(d);
    std::fs::write(
        d.join("zoo.cfg"),
        "tickTime=500\nclientPort=0\nsecureClientPort=0\n\
         ssl.keyStore.location=server.pem\nssl.keyStore.type=PEM\n\
         ssl.trustStore.location=ca.crt\nssl.trustStore.type=PEM\nssl.clientAuth=need\n",
    )
    .unwrap();
    let server = serve(&["--config", "zoo.cfg", "--in-memory"], d).await;
    let script = r#"
import sys
from kazoo.client import KazooClient
from kazoo.security import make_acl
zk = KazooClient(hosts=sys.argv[1], use_ssl=True, ca="ca.crt", certfile="kazoo.crt",
                 keyfile="kazoo.key", verify_certs=True, timeout=15)
zk.start(timeout=30)
zk.create("/kazoo-tls", b"py", acl=[make_acl("x509", "CN=kazoo", all=True)])
data, _ = zk.get("/kazoo-tls")
print("data", data.decode())
acl = zk.get_acls("/kazoo-tls")[0][0]
print("acl", acl.id.scheme, acl.id.id, acl.perms)
zk.stop()
"#;
    let out = tokio::time::timeout(
        WAIT,
        Command::new(SYSTEM_PYTHON)
            .args(["-c", script, &server.secure])
            .current_dir(d)
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("kazoo finished in time")
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "kazoo:\n{stdout}\n{stderr}");
    assert!(stdout.contains("data py\n"), "{stdout}");
    assert!(stdout.contains("acl x509 CN=kazoo 31\n"), "{stdout}");
    let plain = plain_client(&server.plain).await;
    assert_eq!(
        plain.get_data("/kazoo-tls").await.err(),
        Some(Error::NoAuth)
    );
    // zkit's own client with the same certificate may read it.
    let options = TlsOptions::new()
        .with_pem_ca_certs(&std::fs::read_to_string(d.join("ca.crt")).unwrap())
        .unwrap()
        .with_pem_identity(
            &std::fs::read_to_string(d.join("kazoo.crt")).unwrap(),
            &std::fs::read_to_string(d.join("kazoo.key")).unwrap(),
        )
        .unwrap();
    let tls = Client::connector()
        .with_tls(options)
        .with_session_timeout(Duration::from_secs(10))
        .secure_connect(&server.secure)
        .await
        .unwrap();
    assert_eq!(tls.get_data("/kazoo-tls").await.unwrap().0, b"py");
    drop(server);
}

/// `zkit serve ARGS` must exit non-zero, its stderr containing every one of `needles`.
async fn refused(args: &[&str], cwd: &Path, needles: &[&str]) {
    let out = tokio::time::timeout(
        WAIT,
        Command::new(env!("CARGO_BIN_EXE_zkit"))
            .arg("serve")
            .args(args)
            .current_dir(cwd)
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("zkit serve exited in time")
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{args:?} started:\n{stderr}");
    assert!(out.stdout.is_empty(), "{args:?} listened before refusing");
    for needle in needles {
        assert!(
            stderr.contains(needle),
            "{args:?}: no {needle:?} in:\n{stderr}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_settings_zkit_cannot_honour_refuse_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    make_pki(d);
    let base = ["--in-memory", "--port", "0", "--secure-port", "0"];
    encrypted_key(d, "server", "pw", "enc.key");
    let with = |extra: &[&'static str]| -> Vec<&'static str> {
        base.iter().chain(extra).copied().collect()
    };
    refused(
        &with(&["--tls-cert", "server.crt", "--tls-key", "enc.key"]),
        d,
        &["enc.key", "encrypted"],
    )
    .await;
    refused(
        &with(&["--tls-cert", "server.pem", "--tls-client-auth", "need"]),
        d,
        &["--tls-ca"],
    )
    .await;
    refused(&with(&[]), d, &["--tls-cert"]).await;
    refused(
        &["--in-memory", "--port", "0", "--tls-cert", "server.pem"],
        d,
        &["secure client port"],
    )
    .await;
    for (line, needles) in [
        ("ssl.keyStore.type=JKS", &["ssl.keyStore.type", "PEM"][..]),
        ("ssl.protocol=TLSv1.1", &["ssl.protocol", "TLSv1.1"]),
        ("ssl.ocsp=true", &["ssl.ocsp", "revocation"]),
        (
            "authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider",
            &["authProvider.1"],
        ),
        ("portUnification=true", &["portUnification"]),
    ] {
        let cfg = format!(
            "clientPort=0\nsecureClientPort=0\nssl.keyStore.location=server.pem\n\
             ssl.trustStore.location=ca.crt\n{line}\n"
        );
        std::fs::write(d.join("zoo.cfg"), cfg).unwrap();
        refused(&["--config", "zoo.cfg", "--in-memory"], d, needles).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_taken_port_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    make_pki(d);
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let tls = ["--tls-cert", "server.pem", "--tls-ca", "ca.crt"];
    let mut args = vec!["--in-memory", "--port", "0", "--secure-port", &port];
    args.extend(tls);
    refused(&args, d, &["the secure client port 127.0.0.1:", &port]).await;
    let args = ["--in-memory", "--port", "0", "--admin-port", &port];
    refused(&args, d, &["the admin port 127.0.0.1:", &port, "in use"]).await;
    drop(taken);
}
