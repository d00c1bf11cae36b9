//! `zkit bookie` takes the shared connection flags: with `--auth` it registers under a
//! metadata root only that digest user may write; without, it is refused and says so.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;
use zkit_client::{Acl, Acls, AuthId, Client, CreateMode, Permission};
use zkit_server::{Server, ServerConfig};

const WAIT: Duration = Duration::from_secs(30);

fn bookie(zk: &str, dir: &std::path::Path, port: u16, auth: Option<&str>) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_zkit"));
    command
        .args(["bookie", "--port", &port.to_string(), "--server", zk])
        .args(["--fsync", "never"])
        .arg("--data-dir")
        .arg(dir)
        .env_remove("ZKIT_AUTH")
        .env_remove("ZKIT_SERVER")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if let Some(auth) = auth {
        command.args(["--auth", auth]);
    }
    command
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bookie_authenticates_with_the_shared_auth_flag() {
    let server = Server::start(ServerConfig::ephemeral()).await.unwrap();
    let zk = server.addr().to_string();
    let alice = Client::connector()
        .with_auth("digest", b"alice:secret")
        .connect(&zk)
        .await
        .unwrap();
    let only_alice = [Acl::new(
        Permission::ALL,
        AuthId::new("digest", &zkit_core::acl::digest_id("alice:secret")),
    )];
    alice
        .create(
            "/ledgers",
            b"",
            &CreateMode::Persistent.with_acls(Acls::new(&only_alice)),
        )
        .await
        .unwrap();

    // Without --auth: refused, and the bookie exits saying so.
    let dir = tempfile::tempdir().unwrap();
    let out = tokio::time::timeout(
        WAIT,
        bookie(&zk, dir.path(), zkit_testkit::free_port(), None).output(),
    )
    .await
    .expect("the refused bookie exits in time")
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("not authorized"), "{stderr}");

    // With --auth alice:secret: registered and serving.
    let dir = tempfile::tempdir().unwrap();
    let port = zkit_testkit::free_port();
    let mut child = bookie(&zk, dir.path(), port, Some("alice:secret"))
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(WAIT, lines.next_line())
        .await
        .expect("the bookie starts in time")
        .unwrap()
        .expect("a line");
    let id = format!("127.0.0.1:{port}");
    assert_eq!(first, format!("zkit bookie {id} listening on {id}"));
    let available = alice.list_children("/ledgers/available").await.unwrap();
    assert!(available.contains(&id), "{available:?}");
    child.kill().await.unwrap();
}
