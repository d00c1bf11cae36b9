//! `zkit watch` across a server restart, with real processes: a durable `zkit serve` is killed
//! (SIGKILL) and started again on the same data dir and port while `zkit watch /keep` runs
//! (through a fault proxy, so the test decides when the watcher may reconnect). Every change is
//! printed exactly once: the one before the restart, the data change and child creation made
//! while the watcher was disconnected (reported from the re-read after the reconnect: a
//! persistent watch does not get them), and two writes after the reconnect (which need the
//! watch registered again on the new connection).

mod common;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use common::Serve;
use tokio::io::{AsyncBufReadExt, BufReader as AsyncBufReader, Lines};
use tokio::process::ChildStderr;
use zkit_client::{Acls, Client, CreateMode};
use zkit_testkit::FaultProxy;

/// Bound on every wait: the test fails rather than hangs.
const WAIT: Duration = Duration::from_secs(30);

/// `zkit serve` on `port` (0: any) with its data in `dir`; returns once it listens.
fn serve(dir: &Path, port: u16) -> Serve {
    let port = port.to_string();
    common::serve(dir, &["--host", "127.0.0.1", "--port", &port], WAIT)
}

/// Reads stderr lines until one equals `want` (bounded).
async fn wait_stderr(lines: &mut Lines<AsyncBufReader<ChildStderr>>, want: &str) {
    tokio::time::timeout(WAIT, async {
        loop {
            let line = lines
                .next_line()
                .await
                .expect("read stderr")
                .unwrap_or_else(|| panic!("zkit watch exited before printing {want:?}"));
            if line == want {
                return;
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no {want:?} from zkit watch within {WAIT:?}"));
}

/// Reads the next stdout line (bounded).
async fn next_line<R: tokio::io::AsyncBufRead + Unpin>(lines: &mut Lines<R>) -> String {
    tokio::time::timeout(WAIT, lines.next_line())
        .await
        .expect("zkit watch printed a line in time")
        .expect("read stdout")
        .expect("zkit watch exited early")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_prints_every_change_across_a_server_restart() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = serve(dir.path(), 0);
    let port: u16 = server
        .addr
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("port in the address");
    let writer = Client::connect(&server.addr).await.unwrap();
    let persistent = CreateMode::Persistent.with_acls(Acls::anyone_all());
    writer.create("/keep", b"0", &persistent).await.unwrap();

    let proxy = FaultProxy::start(server.addr.clone()).await.unwrap();
    let mut watch = tokio::process::Command::new(env!("CARGO_BIN_EXE_zkit"))
        .args(["watch", "/keep", "--count", "5", "--server"])
        .arg(proxy.connect_string())
        .env_remove("ZKIT_SERVER")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stderr = AsyncBufReader::new(watch.stderr.take().unwrap()).lines();
    let mut stdout = AsyncBufReader::new(watch.stdout.take().unwrap()).lines();
    wait_stderr(&mut stderr, "watching /keep").await;

    writer.set_data("/keep", b"1", None).await.unwrap();
    assert_eq!(next_line(&mut stdout).await, "NodeDataChanged /keep");

    // kill -9 and a restart on the same data dir and port. The watcher must not reconnect
    // until the writes below are made: the proxy holds its attempts.
    drop(writer);
    server.child.kill().unwrap();
    server.child.wait().unwrap();
    wait_stderr(&mut stderr, "session Disconnected").await;
    proxy.pause();
    let server = serve(dir.path(), port);
    assert_eq!(
        server.addr,
        proxy.upstream(),
        "restarted on the same address"
    );
    let writer = Client::connect(&server.addr).await.unwrap();
    writer.set_data("/keep", b"2", None).await.unwrap();
    writer
        .create("/keep/child", b"", &persistent)
        .await
        .unwrap();
    proxy.resume();

    // Same session (the server restored it), watch registered again, node re-read.
    wait_stderr(&mut stderr, "session SyncConnected").await;
    assert_eq!(next_line(&mut stdout).await, "NodeDataChanged /keep");
    assert_eq!(next_line(&mut stdout).await, "NodeChildrenChanged /keep");

    writer.set_data("/keep", b"3", None).await.unwrap();
    assert_eq!(next_line(&mut stdout).await, "NodeDataChanged /keep");
    writer.set_data("/keep", b"4", None).await.unwrap();
    assert_eq!(next_line(&mut stdout).await, "NodeDataChanged /keep");

    // --count 5 reached: it exits cleanly, having printed nothing else.
    let status = tokio::time::timeout(WAIT, watch.wait())
        .await
        .expect("zkit watch exited after 5 lines")
        .unwrap();
    assert!(status.success(), "zkit watch: {status}");
    assert_eq!(
        tokio::time::timeout(WAIT, stdout.next_line())
            .await
            .unwrap()
            .unwrap(),
        None
    );
    writer.close().await;
    proxy.shutdown().await;
}
