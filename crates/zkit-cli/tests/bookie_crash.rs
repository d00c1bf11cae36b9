//! Crash test with a real process: `zkit bookie` (metadata on an embedded zkit server) is
//! killed with SIGKILL while a client streams pipelined adds; after every restart on the same
//! data dir, every add that was acknowledged before the kill is readable, byte for byte, and
//! the ledger's state (fence) survives. The last round stops gracefully (SIGTERM: checkpoint)
//! and is checked after one more restart. A few rounds of well under a second of writing each.
//! Reproduce a schedule with `ZKIT_CRASH_SEED=<n>`.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use zkit_bookie::protocol::entry::{master_key, DigestType, Digester, EntryHeader};
use zkit_bookie::protocol::Status;
use zkit_bookie::{BookieClient, ClientError, ClientOptions};

const ROUNDS: i64 = 4;
const WINDOW: usize = 32;

struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `zkit bookie` and waits for its "listening" line.
fn bookie(dir: &Path, port: u16, zk: &str) -> Proc {
    let mut child = Command::new(env!("CARGO_BIN_EXE_zkit"))
        .args(["bookie", "--port", &port.to_string(), "--server", zk])
        .args(["--fsync", "always", "--session-timeout", "1s"])
        .arg("--data-dir")
        .arg(dir)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn zkit bookie");
    let stdout = child.stdout.take().unwrap();
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("read the bookie's first line");
    assert!(
        line.contains("listening on"),
        "unexpected first line {line:?}"
    );
    Proc(child)
}

fn entry(ledger_id: i64, entry_id: i64) -> Bytes {
    let payload = format!("round {ledger_id} entry {entry_id} ").repeat(4);
    Digester::new(DigestType::HmacSha256, b"pw").encode(
        EntryHeader {
            ledger_id,
            entry_id,
            lac: entry_id - 1,
            length: 0,
        },
        payload.as_bytes(),
    )
}

async fn connect(port: u16) -> BookieClient {
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    BookieClient::connect(addr, ClientOptions::default())
        .await
        .expect("connect to the bookie")
}

/// Streams adds to `ledger` with `WINDOW` in flight until the connection fails; returns the
/// acknowledged entry ids.
async fn stream_adds(c: BookieClient, ledger: i64, acked: Arc<Mutex<Vec<i64>>>) {
    let mut inflight = futures::stream::FuturesUnordered::new();
    let mut next = 0i64;
    loop {
        while inflight.len() < WINDOW {
            let c = c.clone();
            let e = next;
            next += 1;
            inflight.push(async move {
                (
                    e,
                    c.add(ledger, e, master_key(b"pw"), false, entry(ledger, e))
                        .await,
                )
            });
        }
        match futures::StreamExt::next(&mut inflight).await {
            Some((e, Ok(()))) => acked.lock().unwrap().push(e),
            Some((_, Err(ClientError::Status(s)))) => panic!("add refused with {s}"),
            Some((_, Err(_))) | None => return,
        }
    }
}

async fn check(port: u16, acked: &[(i64, Vec<i64>)]) {
    let c = connect(port).await;
    for (ledger, ids) in acked {
        let reads = ids.iter().map(|&e| {
            let c = c.clone();
            async move { (e, c.read(*ledger, e, None).await) }
        });
        for (e, got) in futures::future::join_all(reads).await {
            assert_eq!(
                got,
                Ok(entry(*ledger, e)),
                "acknowledged entry {e} of ledger {ledger} lost"
            );
        }
    }
    c.close();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_acknowledged_add_survives_kill_9() {
    let seed = std::env::var("ZKIT_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random::<u64>);
    eprintln!("ZKIT_CRASH_SEED={seed}");
    let mut rng = StdRng::seed_from_u64(seed);

    let mut zk_config = zkit_server::ServerConfig::ephemeral();
    zk_config.tick_time = Duration::from_millis(250);
    zk_config.min_session_timeout = Some(Duration::from_millis(1000));
    let zk = zkit_server::Server::start(zk_config).await.unwrap();
    let zk_addr = zk.addr().to_string();
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("bookie");
    let port = zkit_testkit::free_port();
    let mut all: Vec<(i64, Vec<i64>)> = Vec::new();

    for round in 1..=ROUNDS {
        let mut proc = bookie(&data, port, &zk_addr);
        check(port, &all).await;
        let acked = Arc::new(Mutex::new(Vec::new()));
        let writer = tokio::spawn(stream_adds(connect(port).await, round, acked.clone()));
        let ms = rng.gen_range(150..600);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        // Write for a while, but at least until something was acknowledged.
        tokio::time::sleep(Duration::from_millis(ms)).await;
        while acked.lock().unwrap().is_empty() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "no add acknowledged"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        if round < ROUNDS {
            proc.0.kill().unwrap(); // SIGKILL
        } else {
            // SIGTERM: a graceful stop, with a final checkpoint.
            let pid = proc.0.id().to_string();
            assert!(Command::new("kill")
                .args(["-TERM", &pid])
                .status()
                .unwrap()
                .success());
        }
        let status = proc.0.wait().unwrap();
        tokio::time::timeout(Duration::from_secs(20), writer)
            .await
            .expect("writer stops once the bookie is gone")
            .unwrap();
        let ids = acked.lock().unwrap().clone();
        eprintln!(
            "round {round}: {} adds acknowledged, bookie {status}",
            ids.len()
        );
        if round == ROUNDS {
            assert!(status.success(), "graceful stop failed: {status}");
        }
        all.push((round, ids));
    }
    // One more restart: everything from every round, and a fence set now survives too.
    let proc = bookie(&data, port, &zk_addr);
    check(port, &all).await;
    let c = connect(port).await;
    c.fence(1, master_key(b"pw")).await.unwrap();
    drop(proc);
    let _proc = bookie(&data, port, &zk_addr);
    let c2 = connect(port).await;
    assert_eq!(
        c2.add(1, 1_000_000, master_key(b"pw"), false, entry(1, 1_000_000))
            .await,
        Err(ClientError::Status(Status::Fenced))
    );
    check(port, &all).await;
    drop(c);
    zk.stop().await;
}
