//! Memory of idle sessions: N zkit-client sessions in this process against N Java ZooKeeper
//! client sessions (a small Java program compiled at run time with javac against Debian's
//! /usr/share/java/zookeeper.jar), resident set size read from /proc.
//!
//! ```sh
//! cargo run --release -p zkit-client --example idle_sessions -- [--sessions 10000] \
//!     [--java-per-jvm 5000] [--server HOST:PORT] [--skip-java]
//! ```
//!
//! Without `--server`, an in-memory zkit server runs in a child process (no connection limit).
//! Java's client needs three file descriptors per session (socket, epoll, eventfd: one NIO
//! selector each), so with `ulimit -n` 20000 its sessions are spread over JVMs of
//! `--java-per-jvm` sessions, all alive at the measurement, and their RSS is summed.

#[path = "support/server.rs"]
mod support;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use support::{rss_kib, serve_if_asked, ChildServer};
use zkit_client::Client;

const JAVA: &str = r#"
import org.apache.zookeeper.*;
import java.io.*;
import java.util.*;
import java.util.concurrent.*;

public class IdleSessions {
    public static void main(String[] args) throws Exception {
        String addr = args[0];
        int n = Integer.parseInt(args[1]);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        System.out.println("BASELINE");
        System.out.flush();
        in.readLine();
        CountDownLatch connected = new CountDownLatch(n);
        List<ZooKeeper> sessions = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            sessions.add(new ZooKeeper(addr, 30000, e -> {
                if (e.getType() == Watcher.Event.EventType.None
                        && e.getState() == Watcher.Event.KeeperState.SyncConnected) {
                    connected.countDown();
                }
            }));
        }
        connected.await();
        System.out.println("READY " + sessions.size());
        System.out.flush();
        in.readLine();
        System.exit(0);
    }
}
"#;

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn main() {
    serve_if_asked();
    let n: usize = arg("--sessions").map_or(10_000, |s| s.parse().expect("--sessions N"));
    let per_jvm: usize =
        arg("--java-per-jvm").map_or(5_000, |s| s.parse().expect("--java-per-jvm N"));
    let skip_java = std::env::args().any(|a| a == "--skip-java");
    let child;
    let addr = match arg("--server") {
        Some(addr) => addr,
        None => {
            child = ChildServer::start();
            child.addr.clone()
        }
    };
    println!("server {addr}, {n} sessions");

    let zkit_kib = zkit_sessions(&addr, n);
    let base = zkit_kib.0;
    println!(
        "zkit-client: RSS {:.1} MiB with {n} sessions (baseline {:.1} MiB): {:.2} KiB per session",
        mib(zkit_kib.1),
        mib(base),
        (zkit_kib.1 - base) as f64 / n as f64
    );
    if skip_java {
        return;
    }
    let java = java_sessions(&addr, n, per_jvm);
    println!(
        "java client: RSS {:.1} MiB with {n} sessions in {} JVMs (baselines {:.1} MiB): {:.2} KiB per session",
        mib(java.1),
        n.div_ceil(per_jvm),
        mib(java.0),
        (java.1 - java.0) as f64 / n as f64
    );
    println!(
        "ratio zkit/java: {:.3} of the RSS ({:.3} of the per-session increment)",
        zkit_kib.1 as f64 / java.1 as f64,
        (zkit_kib.1 - base) as f64 / (java.1 - java.0) as f64
    );
}

/// (baseline, with sessions) RSS of this process in KiB.
fn zkit_sessions(addr: &str, n: usize) -> (u64, u64) {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let me = std::process::id();
    rt.block_on(async {
        // Warm the runtime and the allocator with one session first.
        let warm = Client::connect(addr).await.expect("connect");
        warm.close().await;
        let baseline = rss_kib(me);
        let started = Instant::now();
        let limit = Arc::new(tokio::sync::Semaphore::new(256));
        let mut tasks = Vec::with_capacity(n);
        for _ in 0..n {
            let addr = addr.to_owned();
            let limit = limit.clone();
            tasks.push(tokio::spawn(async move {
                let _permit = limit.acquire().await.expect("semaphore");
                Client::connector()
                    .with_session_timeout(Duration::from_secs(30))
                    .connect(&addr)
                    .await
                    .expect("connect")
            }));
        }
        let mut clients = Vec::with_capacity(n);
        for t in tasks {
            clients.push(t.await.expect("join"));
        }
        println!("zkit-client: {n} sessions in {:?}", started.elapsed());
        // Past two ping rounds (every 9 s with a 30 s session): steady state.
        tokio::time::sleep(Duration::from_secs(20)).await;
        assert!(clients.iter().all(|c| c.state().is_connected()));
        let with = rss_kib(me);
        // Dropping the last handle of each closes its session.
        drop(clients);
        (baseline, with)
    })
}

/// (sum of baselines, sum with sessions) RSS of the JVMs in KiB.
fn java_sessions(addr: &str, n: usize, per_jvm: usize) -> (u64, u64) {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("IdleSessions.java"), JAVA).expect("write java");
    let classpath = zkit_testkit::curator_classpath().expect("ZooKeeper jars in /usr/share/java");
    let status = Command::new("javac")
        .args(["-cp", &classpath, "-d"])
        .arg(dir.path())
        .arg(dir.path().join("IdleSessions.java"))
        .status()
        .expect("javac");
    assert!(status.success(), "javac failed");
    let classpath = format!("{}:{classpath}", dir.path().display());
    let mut jvms = Vec::new();
    let mut left = n;
    while left > 0 {
        let count = left.min(per_jvm);
        left -= count;
        let mut child = Command::new("java")
            .args(["-cp", &classpath, "IdleSessions", addr, &count.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("java");
        let mut out = BufReader::new(child.stdout.take().expect("stdout"));
        let mut line = String::new();
        out.read_line(&mut line).expect("BASELINE");
        assert_eq!(line.trim(), "BASELINE");
        jvms.push((child, out));
    }
    let baseline: u64 = jvms.iter().map(|(c, _)| rss_kib(c.id())).sum();
    let started = Instant::now();
    for (child, _) in &mut jvms {
        writeln!(child.stdin.as_mut().expect("stdin")).expect("go");
    }
    for (_, out) in &mut jvms {
        let mut line = String::new();
        out.read_line(&mut line).expect("READY");
        assert!(line.starts_with("READY"), "{line:?}");
    }
    println!("java client: {n} sessions in {:?}", started.elapsed());
    std::thread::sleep(Duration::from_secs(20));
    let with: u64 = jvms.iter().map(|(c, _)| rss_kib(c.id())).sum();
    for (mut child, _) in jvms {
        let _ = writeln!(child.stdin.as_mut().expect("stdin"));
        let _ = child.wait();
    }
    (baseline, with)
}
