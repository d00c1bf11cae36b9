//! SIGTERM reaches `zkit bookie` at every stage, with ZooKeeper unreachable: while it connects,
//! while it checks its cookie and registers, and while it serves (the stop then cannot remove
//! its registration). Each time the real process exits promptly with status 0.
//!
//! "Unreachable" is made exact by a TCP proxy in front of an embedded zkit server that lets a
//! set number of server frames through and then answers nothing (the sockets stay open, as with
//! a hung or partitioned server): 0 frames blocks the handshake, 1 frame lets the session be
//! established and then blocks every request.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicI64, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// How long a stop may take. The bookie bounds each unregistration by 2 s; everything else is
/// local work on an empty data dir.
const PROMPT: Duration = Duration::from_secs(10);

struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A proxy to ZooKeeper that forwards every client frame but only `budget` server frames in
/// all (then drops what the server sends). Counts accepted connections and client frames.
struct Proxy {
    addr: String,
    budget: Arc<AtomicI64>,
    conns: watch::Receiver<usize>,
    client_frames: watch::Receiver<usize>,
}

async fn read_frame(r: &mut (impl AsyncReadExt + Unpin)) -> Option<Vec<u8>> {
    let mut len = [0u8; 4];
    r.read_exact(&mut len).await.ok()?;
    let n = u32::from_be_bytes(len) as usize;
    if n > 16 << 20 {
        return None;
    }
    let mut frame = len.to_vec();
    frame.resize(4 + n, 0);
    r.read_exact(&mut frame[4..]).await.ok()?;
    Some(frame)
}

async fn proxy(upstream: String, budget: i64) -> Proxy {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let budget = Arc::new(AtomicI64::new(budget));
    let (conns_tx, conns) = watch::channel(0usize);
    let (frames_tx, client_frames) = watch::channel(0usize);
    let frames_tx = Arc::new(frames_tx);
    let b = Arc::clone(&budget);
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            conns_tx.send_modify(|n| *n += 1);
            let Ok(server) = TcpStream::connect(&upstream).await else {
                continue;
            };
            let (mut cr, mut cw) = client.into_split();
            let (mut sr, mut sw) = server.into_split();
            let frames = Arc::clone(&frames_tx);
            tokio::spawn(async move {
                while let Some(f) = read_frame(&mut cr).await {
                    frames.send_modify(|n| *n += 1);
                    if sw.write_all(&f).await.is_err() {
                        break;
                    }
                }
                // Keep the client's socket open, as a hung server does.
                std::future::pending::<()>().await;
            });
            let b = Arc::clone(&b);
            tokio::spawn(async move {
                while let Some(f) = read_frame(&mut sr).await {
                    let allowed = b.fetch_update(SeqCst, SeqCst, |n| (n > 0).then(|| n - 1));
                    if allowed.is_ok() && cw.write_all(&f).await.is_err() {
                        break;
                    }
                }
                std::future::pending::<()>().await;
            });
        }
    });
    Proxy {
        addr,
        budget,
        conns,
        client_frames,
    }
}

async fn zk() -> zkit_server::Server {
    zkit_server::Server::start(zkit_server::ServerConfig::ephemeral())
        .await
        .unwrap()
}

fn spawn_bookie(dir: &std::path::Path, zk: &str) -> Proc {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new(env!("CARGO_BIN_EXE_zkit"))
        .args(["bookie", "--port", &port.to_string(), "--server", zk])
        .args(["--fsync", "always", "--session-timeout", "30s"])
        .arg("--data-dir")
        .arg(dir)
        .env("RUST_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn zkit bookie");
    Proc(child)
}

/// Waits (bounded) until `rx` reaches `at_least`.
async fn wait_for(rx: &mut watch::Receiver<usize>, at_least: usize, what: &str) {
    tokio::time::timeout(Duration::from_secs(20), rx.wait_for(|n| *n >= at_least))
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
        .unwrap();
}

/// Sends SIGTERM and waits, bounded by [`PROMPT`], for the exit.
async fn term_and_wait(p: &mut Proc) -> (ExitStatus, Duration) {
    let pid = p.0.id().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let start = Instant::now();
    loop {
        if let Some(status) = p.0.try_wait().unwrap() {
            return (status, start.elapsed());
        }
        assert!(
            start.elapsed() < PROMPT,
            "zkit bookie still running {PROMPT:?} after SIGTERM"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_while_connecting_to_an_unresponsive_zookeeper() {
    let zk = zk().await;
    let mut px = proxy(zk.addr().to_string(), 0).await;
    let tmp = tempfile::tempdir().unwrap();
    let mut p = spawn_bookie(tmp.path(), &px.addr);
    // Its connection is open and its handshake unanswered.
    wait_for(&mut px.client_frames, 1, "the bookie's connect request").await;
    let (status, took) = term_and_wait(&mut p).await;
    eprintln!("stopped in {took:?} with {status}");
    assert!(status.success(), "exit status {status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_while_registering_with_an_unresponsive_zookeeper() {
    let zk = zk().await;
    // The session is established (one server frame: the connect response), then nothing.
    let mut px = proxy(zk.addr().to_string(), 1).await;
    let tmp = tempfile::tempdir().unwrap();
    let mut p = spawn_bookie(tmp.path(), &px.addr);
    // Past the handshake: a request of the start (instance id, cookie, registration) is out.
    wait_for(&mut px.client_frames, 2, "a request after the handshake").await;
    assert_eq!(
        px.budget.load(SeqCst),
        0,
        "the connect response went through"
    );
    let (status, took) = term_and_wait(&mut p).await;
    eprintln!("stopped in {took:?} with {status}");
    assert!(status.success(), "exit status {status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_while_serving_after_zookeeper_became_unresponsive() {
    let zk = zk().await;
    let mut px = proxy(zk.addr().to_string(), i64::MAX).await;
    let tmp = tempfile::tempdir().unwrap();
    let mut p = spawn_bookie(tmp.path(), &px.addr);
    let stdout = p.0.stdout.take().unwrap();
    let line = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).map(|_| line)
    })
    .await
    .unwrap()
    .unwrap();
    assert!(line.contains("listening on"), "unexpected line {line:?}");
    wait_for(&mut px.conns, 1, "the bookie's session").await;
    // ZooKeeper stops answering: the stop cannot remove the registration.
    px.budget.store(0, SeqCst);
    let (status, took) = term_and_wait(&mut p).await;
    eprintln!("stopped in {took:?} with {status}");
    assert!(status.success(), "exit status {status}");
}
