//! `zkit serve --import-apache DIR` on a data dir written by Debian's Apache ZooKeeper in this
//! test: a private standalone server with a low snapCount (so there are snapshots and txns
//! logged after the newest one) gets a varied tree (sequential, ephemeral, TTL and container
//! nodes, digest ACLs, binary data, multis that succeed and fail, failed writes, a closed
//! session); it is stopped, zkit imports its dir and serves it. Every node must come back with
//! its data, ACL and every Stat field (czxid, mzxid, pzxid, ctime, mtime, version, cversion,
//! aversion, ephemeralOwner, dataLength, numChildren). Then: the live session resumes on zkit
//! with its id and password (Apache's), its ephemeral still there; sequential numbering
//! continues; the container and TTL nodes are reaped as such; the import refuses a non-empty
//! data dir; a restart keeps what was written after the import.

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::io::AsyncBufReadExt;
use zkit_client::{Acl, Acls, AuthId, Client, CreateMode, Permission, SessionInfo};

/// A private Apache standalone in `dir`, stopped when dropped.
struct Apache {
    dir: PathBuf,
    addr: String,
}

impl Apache {
    fn start(dir: &Path) -> Apache {
        for _ in 0..3 {
            let port = zkit_testkit::free_port();
            let status = std::process::Command::new(zkit_testkit::ensemble::apache_zk_script())
                .arg("start")
                .arg(dir)
                .arg(port.to_string())
                .env("APACHE_ZK_SNAP_COUNT", "10")
                .stdout(Stdio::null())
                .status()
                .expect("run scripts/apache-zk");
            if status.success() {
                return Apache {
                    dir: dir.to_path_buf(),
                    addr: format!("127.0.0.1:{port}"),
                };
            }
        }
        panic!(
            "Apache ZooKeeper did not start (log: {}/zk.log)",
            dir.display()
        );
    }

    fn stop(&self) {
        let _ = std::process::Command::new(zkit_testkit::ensemble::apache_zk_script())
            .arg("stop")
            .arg(&self.dir)
            .stdout(Stdio::null())
            .status();
    }
}

impl Drop for Apache {
    fn drop(&mut self) {
        self.stop();
    }
}

async fn connect(addr: &str, timeout: Duration) -> Client {
    Client::connector()
        .with_session_timeout(timeout)
        .connect(addr)
        .await
        .expect("connect")
}

/// Every node under `/` with its data, Stat and ACL, sorted by path.
async fn tree(client: &Client) -> Vec<(String, Vec<u8>, zkit_client::Stat, Vec<String>)> {
    let mut out = Vec::new();
    let mut stack = vec!["/".to_owned()];
    while let Some(path) = stack.pop() {
        let (data, stat) = client.get_data(&path).await.expect("get");
        let (acl, _) = client.get_acl(&path).await.expect("acl");
        let acl = acl
            .iter()
            .map(|a| format!("{}:{}:{}", a.scheme(), a.id(), a.permission()))
            .collect();
        for child in client.list_children(&path).await.expect("ls") {
            stack.push(if path == "/" {
                format!("/{child}")
            } else {
                format!("{path}/{child}")
            });
        }
        out.push((path, data, stat, acl));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// The writes: enough first to roll snapshots, then every kind of txn.
async fn write_tree(a: &Client, b: &Client) {
    let open = CreateMode::Persistent.with_acls(Acls::anyone_all());
    let seq = CreateMode::PersistentSequential.with_acls(Acls::anyone_all());
    a.create("/imp", b"root of the import", &open)
        .await
        .unwrap();
    a.create("/imp/counter", b"0", &open).await.unwrap();
    for i in 1..=25 {
        a.set_data("/imp/counter", i.to_string().as_bytes(), None)
            .await
            .unwrap();
    }
    a.create("/imp/seq", b"", &open).await.unwrap();
    let mut names = Vec::new();
    for _ in 0..5 {
        let (_, n) = a.create("/imp/seq/n-", b"s", &seq).await.unwrap();
        names.push(format!("/imp/seq/n-{n}"));
    }
    a.delete(&names[1], None).await.unwrap();
    a.delete(&names[3], None).await.unwrap();
    a.create("/imp/bin", &[0, 1, 254, 255], &open)
        .await
        .unwrap();
    let secret = [
        Acl::new(
            Permission::ALL,
            AuthId::new("digest", "bob:dGVzdGRpZ2VzdGhhc2g="),
        ),
        Acl::new(Permission::READ, AuthId::anyone()),
    ];
    a.create("/imp/secret", b"s", &open).await.unwrap();
    a.set_acl("/imp/secret", &secret, Some(0)).await.unwrap();
    let ttl = CreateMode::Persistent
        .with_acls(Acls::anyone_all())
        .with_ttl(Duration::from_secs(3600));
    a.create("/imp/ttl-long", b"t", &ttl).await.unwrap();
    let short = CreateMode::Persistent
        .with_acls(Acls::anyone_all())
        .with_ttl(Duration::from_secs(2));
    a.create("/imp/ttl-short", b"", &short).await.unwrap();
    a.create("/imp/ttl-short/keep", b"", &open).await.unwrap();
    let container = CreateMode::Container.with_acls(Acls::anyone_all());
    a.create("/imp/c", b"", &container).await.unwrap();
    a.create("/imp/c/x", b"", &open).await.unwrap();
    let eph = CreateMode::Ephemeral.with_acls(Acls::anyone_all());
    a.create("/imp/eph-a", b"a", &eph).await.unwrap();
    b.create("/imp/eph-b", b"b", &eph).await.unwrap();
    // A failed write (logged as an error txn) and a failed multi (nothing applied).
    assert!(a.create("/imp/bin", b"", &open).await.is_err());
    let mut failing = a.new_multi_writer();
    failing.add_create("/imp/never", b"", &open).unwrap();
    failing.add_delete("/imp/missing", None).unwrap();
    assert!(failing.commit().await.is_err());
    let mut multi = a.new_multi_writer();
    multi.add_create("/imp/m1", b"m", &open).unwrap();
    multi.add_set_data("/imp/counter", b"multi", None).unwrap();
    multi.commit().await.unwrap();
    a.set_data("/imp/m1", b"m2", Some(0)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apache_data_dir_is_served_by_zkit() {
    if !zkit_testkit::apache_installed("apache import") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let apache = Apache::start(&dir.path().join("apache"));
    let a = connect(&apache.addr, Duration::from_secs(30)).await;
    let b = connect(&apache.addr, Duration::from_secs(30)).await;
    write_tree(&a, &b).await;
    // b closes its session: a closeSession txn, which deletes /imp/eph-b.
    zk_close(b).await;
    let data = apache.dir.join("data");
    // Make sure txns follow the newest snapshot (snapshots roll every 5-10 txns here).
    let config = zkit_core::Config {
        extended_types: true,
        ..zkit_core::Config::default()
    };
    for i in 0.. {
        let (_, report) = zkit_server::apache_import::read_data_dir(&data, config.clone(), 0)
            .expect("the live dir reads");
        if report.replayed > 0 && report.snapshot_zxid.is_some_and(|z| z > 0) {
            break;
        }
        assert!(i < 50, "no snapshot followed by txns: {report:?}");
        a.set_data("/imp/counter", b"more", None).await.unwrap();
    }
    let want = tree(&a).await;
    let session: SessionInfo = a.session().clone();
    apache.stop();
    drop(a); // its close request finds no server: the session stays in Apache's files

    let zkit_dir = dir.path().join("zkit");
    let (mut server, addr) = serve(&zkit_dir, Some(&data)).await;
    let zk = connect(&addr, Duration::from_secs(30)).await;
    let got = tree(&zk).await;
    assert_eq!(
        want.len(),
        got.len(),
        "paths: {:?}",
        got.iter().map(|n| &n.0).collect::<Vec<_>>()
    );
    for (w, g) in want.iter().zip(&got) {
        assert_eq!(w, g, "node {} differs", w.0);
    }
    assert!(
        !got.iter().any(|n| n.0 == "/imp/eph-b"),
        "closed session's ephemeral"
    );

    // The session resumes on zkit with Apache's id and password.
    let resumed = Client::connector()
        .with_session(session.clone())
        .connect(&addr)
        .await
        .expect("the imported session resumes");
    assert_eq!(resumed.session_id(), session.id());
    let (_, eph) = resumed.get_data("/imp/eph-a").await.expect("its ephemeral");
    assert_eq!(eph.ephemeral_owner, session.id().0);
    // Sequential numbering continues where Apache left it (5 children were created).
    let seq = CreateMode::PersistentSequential.with_acls(Acls::anyone_all());
    let (_, n) = zk.create("/imp/seq/n-", b"", &seq).await.unwrap();
    assert_eq!(n.into_i64(), 5);
    // Container and TTL nodes are still what they were: the reaper takes them once childless.
    zk.delete("/imp/c/x", None).await.unwrap();
    zk.delete("/imp/ttl-short/keep", None).await.unwrap();
    for path in ["/imp/c", "/imp/ttl-short"] {
        let deadline = Instant::now() + Duration::from_secs(20);
        while zk.check_stat(path).await.unwrap().is_some() {
            assert!(Instant::now() < deadline, "{path} was not reaped");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    assert!(zk.check_stat("/imp/ttl-long").await.unwrap().is_some());
    drop(resumed);
    drop(zk);
    stop(&mut server).await;

    // A second import into the now non-empty dir is refused; a plain restart keeps the writes.
    let refused = tokio::process::Command::new(env!("CARGO_BIN_EXE_zkit"))
        .args(serve_args(&zkit_dir, Some(&data)))
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap();
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("not empty"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    let (mut server, addr) = serve(&zkit_dir, None).await;
    let zk = connect(&addr, Duration::from_secs(10)).await;
    assert!(zk
        .check_stat(&format!("/imp/seq/n-{n}"))
        .await
        .unwrap()
        .is_some());
    assert!(zk.check_stat("/imp/c").await.unwrap().is_none());
    drop(zk);
    stop(&mut server).await;
}

async fn zk_close(client: Client) {
    let mut state = client.state_watcher();
    drop(client);
    let _ = tokio::time::timeout(Duration::from_secs(5), async {
        while !state.changed().await.is_terminated() {}
    })
    .await;
}

fn serve_args(data_dir: &Path, import: Option<&Path>) -> Vec<String> {
    let mut args: Vec<String> = [
        "serve",
        "--port",
        "0",
        "--extended-types",
        "--tick-time",
        "500",
        "--container-check-interval",
        "200ms",
        "--data-dir",
    ]
    .map(String::from)
    .to_vec();
    args.push(data_dir.display().to_string());
    if let Some(apache) = import {
        args.push("--import-apache".into());
        args.push(apache.display().to_string());
    }
    args
}

/// `zkit serve` on `data_dir` (importing `import` first); its address once it listens.
async fn serve(data_dir: &Path, import: Option<&Path>) -> (tokio::process::Child, String) {
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_zkit"))
        .args(serve_args(data_dir, import))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn zkit serve");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let line = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
        .await
        .expect("zkit serve starts")
        .expect("read")
        .expect("a line");
    let addr = common::listening_addr(&line);
    (child, addr)
}

async fn stop(server: &mut tokio::process::Child) {
    let pid = server.id().expect("running");
    // SAFETY: kill(2) takes no pointers; the pid is our own unreaped child.
    unsafe { libc::kill(pid as libc::pid_t, libc::SIGTERM) };
    let status = tokio::time::timeout(Duration::from_secs(30), server.wait())
        .await
        .expect("zkit serve stops")
        .unwrap();
    assert!(status.success(), "{status}");
}
