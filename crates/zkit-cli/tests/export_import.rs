//! `zkit export` / `zkit import` round trip: a varied tree on an embedded zkit server is
//! exported, imported into the Apache ensemble (`ZKIT_APACHE_ENSEMBLE`), exported from there,
//! imported into a second zkit server and exported again; the first and last exports must be
//! equal (data, ACLs, modes), sequence counters at least as high. Ephemeral nodes are listed, not
//! copied. `--dry-run` writes nothing, a second import refuses existing nodes unless
//! `--overwrite`, and `container`/`ttl` lines become real container and TTL nodes (the server
//! reaps them).

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use zkit_client::{Acl, AuthId, Client, CreateMode, Permission};
use zkit_server::{Server, ServerConfig};

async fn zkit(args: &[&str]) -> (i32, String, String) {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_zkit"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .await
        .expect("run zkit");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

async fn zkit_ok(args: &[&str]) -> String {
    let (code, _, err) = zkit(args).await;
    assert_eq!(code, 0, "zkit {args:?}: {err}");
    err
}

async fn embedded() -> Server {
    let mut config = ServerConfig::ephemeral();
    config.extended_types = true;
    config.container_check_interval = Duration::from_millis(200);
    Server::start(config).await.expect("server")
}

async fn connect(addr: &str) -> Client {
    Client::connector()
        .with_session_timeout(Duration::from_secs(20))
        .connect(addr)
        .await
        .expect("connect")
}

/// The tree under `root`: text, binary and empty data, a digest ACL, a read-only node with a
/// child, sequential children (one deleted), a container, a TTL node and an ephemeral.
async fn build(client: &Client, root: &str) {
    let open = CreateMode::Persistent.with_acls(zkit_client::Acls::anyone_all());
    let p = |s: &str| format!("{root}{s}");
    client.create(root, b"hello", &open).await.unwrap();
    client
        .create(&p("/bin"), &[0, 159, 255, 10], &open)
        .await
        .unwrap();
    client.create(&p("/empty"), b"", &open).await.unwrap();
    let secret = [
        Acl::new(
            Permission::ALL,
            AuthId::new("digest", "alice:q6IYkUtIdY8ep0OP6mzWNXBDnl8="),
        ),
        Acl::new(Permission::READ, AuthId::anyone()),
    ];
    let secret_mode = CreateMode::Persistent.with_acls(zkit_client::Acls::new(&secret));
    client
        .create(&p("/secret"), b"s3cr3t", &secret_mode)
        .await
        .unwrap();
    client.create(&p("/ro"), b"read only", &open).await.unwrap();
    client.create(&p("/ro/child"), b"c", &open).await.unwrap();
    let read_only = [Acl::new(Permission::READ, AuthId::anyone())];
    client.set_acl(&p("/ro"), &read_only, None).await.unwrap();
    client.create(&p("/q"), b"", &open).await.unwrap();
    let seq = CreateMode::PersistentSequential.with_acls(zkit_client::Acls::anyone_all());
    let mut names = Vec::new();
    for _ in 0..3 {
        let (_, n) = client.create(&p("/q/item-"), b"i", &seq).await.unwrap();
        names.push(format!("{}{n}", p("/q/item-")));
    }
    client.delete(&names[0], None).await.unwrap();
    let container = CreateMode::Container.with_acls(zkit_client::Acls::anyone_all());
    client.create(&p("/c"), b"", &container).await.unwrap();
    client.create(&p("/c/x"), b"", &open).await.unwrap();
    let ttl = open.with_ttl(Duration::from_secs(600));
    client.create(&p("/t"), b"ttl", &ttl).await.unwrap();
    let eph = CreateMode::Ephemeral.with_acls(zkit_client::Acls::anyone_all());
    client.create(&p("/eph"), b"e", &eph).await.unwrap();
}

#[derive(Debug, serde::Deserialize, PartialEq, Clone)]
struct Line {
    path: String,
    data: Option<String>,
    data_base64: Option<String>,
    acl: Vec<String>,
    mode: String,
    ttl_ms: Option<u64>,
    sequence: i32,
}

fn lines(file: &Path) -> Vec<Line> {
    std::fs::read_to_string(file)
        .expect("export file")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

/// The exports agree but for child versions, which may only have grown.
fn assert_same(first: &[Line], last: &[Line]) {
    assert_eq!(first.len(), last.len(), "{first:#?}\n{last:#?}");
    for (a, b) in first.iter().zip(last) {
        let without_sequence = |l: &Line| Line {
            sequence: 0,
            ..l.clone()
        };
        assert_eq!(without_sequence(a), without_sequence(b));
        assert!(
            b.sequence >= a.sequence,
            "{}: sequence counter went down: {} → {}",
            a.path,
            a.sequence,
            b.sequence
        );
    }
}

async fn eventually_gone(client: &Client, path: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while client.check_stat(path).await.expect("stat").is_some() {
        assert!(Instant::now() < deadline, "{path} was not reaped");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn round_trip_zkit_ensemble_zkit() {
    let Some(ensemble) = zkit_testkit::apache_ensemble() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let root = format!("/export-{}-{}", std::process::id(), rand::random::<u32>());
    let first_server = embedded().await;
    let first = first_server.addr().to_string();
    let builder = connect(&first).await;
    build(&builder, &root).await;

    let file1 = dir.path().join("1.jsonl");
    let err = zkit_ok(&[
        "export",
        "--server",
        &first,
        &root,
        "-o",
        file1.to_str().unwrap(),
    ])
    .await;
    assert!(
        err.contains(&format!("skipped ephemeral {root}/eph")),
        "ephemerals are listed: {err}"
    );
    let exported = lines(&file1);
    assert!(
        exported.iter().all(|l| !l.path.ends_with("/eph")),
        "ephemeral copied"
    );
    assert_eq!(exported.len(), 12, "{exported:#?}");
    let bin = exported.iter().find(|l| l.path.ends_with("/bin")).unwrap();
    assert_eq!(bin.data_base64.as_deref(), Some("AJ//Cg=="));
    let q = exported.iter().find(|l| l.path.ends_with("/q")).unwrap();
    assert_eq!(q.sequence, 3, "3 sequential children were created");

    // Into the ensemble: a dry run writes nothing; then for real.
    let input1 = file1.to_str().unwrap();
    zkit_ok(&["import", "--server", &ensemble, "-i", input1, "--dry-run"]).await;
    let on_ensemble = connect(&ensemble).await;
    assert!(
        on_ensemble.check_stat(&root).await.unwrap().is_none(),
        "dry run wrote"
    );
    zkit_ok(&["import", "--server", &ensemble, "-i", input1]).await;
    // Existing nodes: refused (nothing written), unless --overwrite.
    let (code, _, err) = zkit(&["import", "--server", &ensemble, "-i", input1]).await;
    assert_ne!(code, 0, "a second import must refuse: {err}");
    assert!(err.contains("exist already"), "{err}");
    // Restricted nodes (read-only, digest) need an identity allowed to change them: the
    // ensemble's super user (scripts/apache-zk).
    zkit_ok(&[
        "import",
        "--server",
        &ensemble,
        "-i",
        input1,
        "--overwrite",
        "--auth",
        "super:test",
    ])
    .await;
    // A sequential node created on the copy gets a number the source never handed out.
    let seq = CreateMode::PersistentSequential.with_acls(zkit_client::Acls::anyone_all());
    let (_, n) = on_ensemble
        .create(&format!("{root}/q/item-"), b"", &seq)
        .await
        .unwrap();
    assert_eq!(
        n.into_i64(),
        3,
        "the number the source would have given next"
    );

    let file2 = dir.path().join("2.jsonl");
    zkit_ok(&[
        "export",
        "--server",
        &ensemble,
        &root,
        "-o",
        file2.to_str().unwrap(),
    ])
    .await;
    // The sequential node just created is the only difference; drop it from the second copy.
    let second_server = embedded().await;
    let second = second_server.addr().to_string();
    let mut from_ensemble = lines(&file2);
    from_ensemble.retain(|l| l.path != format!("{root}/q/item-{n}"));
    let file2b = dir.path().join("2b.jsonl");
    std::fs::write(
        &file2b,
        std::fs::read_to_string(&file2)
            .unwrap()
            .lines()
            .filter(|l| !l.contains(&format!("{root}/q/item-{n}")))
            .map(|l| format!("{l}\n"))
            .collect::<String>(),
    )
    .unwrap();
    zkit_ok(&[
        "import",
        "--server",
        &second,
        "-i",
        file2b.to_str().unwrap(),
    ])
    .await;
    let file3 = dir.path().join("3.jsonl");
    zkit_ok(&[
        "export",
        "--server",
        &second,
        &root,
        "-o",
        file3.to_str().unwrap(),
    ])
    .await;
    assert_same(&exported, &lines(&file3));
    assert_same(&exported, &from_ensemble);

    // Modes from a file: a container and a TTL node come out as such (the server reaps them).
    let modes = dir.path().join("modes.jsonl");
    std::fs::write(
        &modes,
        format!(
            "{{\"path\":\"{root}-c\",\"acl\":[\"world:anyone:cdrwa\"],\"mode\":\"container\"}}\n\
             {{\"path\":\"{root}-c/x\",\"acl\":[\"world:anyone:cdrwa\"],\"mode\":\"persistent\"}}\n\
             {{\"path\":\"{root}-t\",\"acl\":[\"world:anyone:cdrwa\"],\"mode\":\"ttl\",\"ttl_ms\":1000}}\n"
        ),
    )
    .unwrap();
    zkit_ok(&[
        "import",
        "--server",
        &ensemble,
        "-i",
        modes.to_str().unwrap(),
    ])
    .await;
    on_ensemble
        .delete(&format!("{root}-c/x"), None)
        .await
        .unwrap();
    eventually_gone(&on_ensemble, &format!("{root}-c")).await;
    eventually_gone(&on_ensemble, &format!("{root}-t")).await;
    drop(builder);
    first_server.stop().await;
    second_server.stop().await;
}
