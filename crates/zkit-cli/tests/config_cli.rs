//! `zkit config` end to end against an embedded zkit server and Apache ZooKeeper
//! (`ZKIT_APACHE_ZK`): set/get with relative and absolute keys, watch printing one line per
//! change with the value last, import of a TOML tree and export back as JSON.

mod common;

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;
use zkit_server::{Server, ServerConfig};

const WAIT: Duration = Duration::from_secs(30);

async fn zkit(server: &str, args: &[&str]) -> (i32, String, String) {
    common::zkit_at(WAIT, server, args).await
}

async fn config_commands(server: &str, name: &str) {
    let prefix = format!("/cfgcli-{}-{}", std::process::id(), rand::random::<u32>());
    let p = ["--prefix", prefix.as_str()];
    let (code, _, err) = zkit(
        server,
        &[&["config", "set", "db/url", "pg://a"][..], &p].concat(),
    )
    .await;
    assert_eq!(code, 0, "{name}: {err}");
    let (code, out, _) = zkit(server, &[&["config", "get", "db/url"][..], &p].concat()).await;
    assert_eq!((code, out.as_str()), (0, "pg://a\n"), "{name}");
    let abs = format!("{prefix}/db/url");
    let (_, out, _) = zkit(server, &["config", "get", &abs]).await;
    assert_eq!(out, "pg://a\n", "{name}: absolute key");
    let (code, _, err) = zkit(server, &[&["config", "get", "nope"][..], &p].concat()).await;
    assert_eq!(code, 1, "{name}");
    assert!(err.contains("NoNode"), "{name}: {err}");

    // watch: initial line, then each change, value last; --until ends it.
    let mut watch = Command::new(env!("CARGO_BIN_EXE_zkit"))
        .args([
            "config", "watch", "db/url", "--until", "pg://c", "--server", server,
        ])
        .args(p)
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn watch");
    let mut lines = BufReader::new(watch.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .expect("initial line")
        .unwrap()
        .unwrap();
    assert!(
        first.starts_with(&format!("{abs} initial version=0 ")),
        "{name}: {first}"
    );
    assert!(first.ends_with(" pg://a"), "{name}: {first}");
    for v in ["pg://b", "pg://c"] {
        let (code, _, _) = zkit(server, &[&["config", "set", "db/url", v][..], &p].concat()).await;
        assert_eq!(code, 0);
    }
    let mut rest = Vec::new();
    while let Some(line) = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .expect("watch lines")
        .unwrap()
    {
        rest.push(line);
    }
    let status = watch.wait().await.unwrap();
    assert!(status.success(), "{name}: watch --until exits 0");
    assert_eq!(
        rest.last().map(|l| l.ends_with(" pg://c")),
        Some(true),
        "{name}: {rest:?}"
    );
    assert!(
        rest.iter().all(|l| l.contains(" changed ")),
        "{name}: {rest:?}"
    );

    // import a TOML tree, export it back.
    let dir = std::env::temp_dir().join(format!("zkit-cfgcli-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("app.toml");
    std::fs::write(
        &file,
        "name = \"svc\"\n[limits]\nconns = 100\nstrict = true\n",
    )
    .unwrap();
    let sub = format!("{prefix}/imported");
    let (code, _, err) = zkit(
        server,
        &["config", "import", file.to_str().unwrap(), "--prefix", &sub],
    )
    .await;
    assert_eq!(code, 0, "{name}: {err}");
    let (_, out, _) = zkit(server, &["config", "get", "limits/conns", "--prefix", &sub]).await;
    assert_eq!(out, "100\n");
    let (code, out, err) = zkit(server, &["config", "export", &sub]).await;
    assert_eq!(code, 0, "{name}: {err}");
    let json: serde_json::Value = serde_json::from_str(&out).expect("export is JSON");
    assert_eq!(
        json,
        serde_json::json!({"name": "svc", "limits": {"conns": "100", "strict": "true"}}),
        "{name}"
    );
    // Importing again is an update, not a failure.
    let (code, _, err) = zkit(
        server,
        &["config", "import", file.to_str().unwrap(), "--prefix", &sub],
    )
    .await;
    assert_eq!(code, 0, "{name}: {err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_commands_on_zkit() {
    let server = Server::start(ServerConfig::ephemeral()).await.unwrap();
    config_commands(&server.addr().to_string(), "zkit").await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_commands_on_apache() {
    let Some(addr) = zkit_testkit::apache_zk() else {
        return;
    };
    config_commands(&addr, "apache").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_commands_on_ensemble() {
    let Some(addr) = zkit_testkit::apache_ensemble() else {
        return;
    };
    config_commands(&addr, "ensemble").await;
}
