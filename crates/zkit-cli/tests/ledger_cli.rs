//! The ledger with real processes: `zkit serve` (or Apache ZooKeeper, under a chroot of its
//! own, when configured), `zkit bookie` processes, and a `zkit ledger write` fed line by line
//! through its stdin; faults are kill -9 and SIGSTOP/SIGCONT.
//!
//! - Bookie then writer killed (the acceptance scenario: 4 bookies, E3 Qw2 Qa2): two
//!   `zkit ledger read` processes recover at once and print the same gap-free prefix of the
//!   input holding every entry printed as acked; a third read prints it again; the killed
//!   bookie, restarted on its data, serves its entries again.
//! - A writer paused with SIGSTOP while `zkit ledger recover` runs, then resumed: none of its
//!   later adds is acknowledged, it exits with the fenced code, and every `acked N` it ever
//!   printed is inside the recovered ledger.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use zkit::ledger::{LedgerClient, LedgerOptions};
use zkit::{Session, SessionOptions};
use zkit_testkit::ChildGuard;

const LIMIT: Duration = Duration::from_secs(60);

fn zkit() -> Command {
    Command::new(env!("CARGO_BIN_EXE_zkit"))
}

/// Spawns `cmd` with piped stdout and returns the guard and its first stdout line.
fn spawn_and_first_line(
    cmd: &mut Command,
) -> (ChildGuard, BufReader<std::process::ChildStdout>, String) {
    let mut child = ChildGuard::spawn(cmd.stdout(Stdio::piped())).expect("spawn");
    let stdout = child.child_mut().stdout.take().unwrap();
    let mut r = BufReader::new(stdout);
    let mut line = String::new();
    r.read_line(&mut line).expect("first line");
    (child, r, line.trim().to_string())
}

/// Where the metadata lives for one test.
struct Zk {
    /// Connect string (with a chroot on Apache).
    connect: String,
    name: &'static str,
    _serve: Option<ChildGuard>,
}

fn zkit_serve(dir: &Path) -> Zk {
    let (g, _, line) = spawn_and_first_line(
        zkit()
            .args([
                "serve",
                "--port",
                "0",
                "--tick-time",
                "250",
                "--fsync",
                "never",
            ])
            .arg("--data-dir")
            .arg(dir)
            .env("RUST_LOG", "warn"),
    );
    let addr = common::listening_addr(&line);
    Zk {
        connect: addr,
        name: "zkit",
        _serve: Some(g),
    }
}

async fn targets(dir: &Path) -> Vec<Zk> {
    let mut v = vec![zkit_serve(&dir.join("zk"))];
    if let Some(addr) = zkit_testkit::apache_zk() {
        // A chroot of its own: bookies register under /ledgers, which must not be shared.
        let chroot = zkit_testkit::unique_path("ledger-cli");
        let s = Session::connect(&addr, SessionOptions::default())
            .await
            .unwrap();
        s.client()
            .create(
                &chroot,
                &[],
                &zkit::zkit_client::CreateMode::Persistent
                    .with_acls(zkit::zkit_client::Acls::anyone_all()),
            )
            .await
            .unwrap();
        s.close();
        v.push(Zk {
            connect: format!("{addr}{chroot}"),
            name: "apache",
            _serve: None,
        });
    }
    v
}

struct BookieProc {
    guard: Option<ChildGuard>,
    dir: PathBuf,
    port: u16,
}

impl BookieProc {
    fn start(dir: PathBuf, port: u16, zk: &str) -> BookieProc {
        let (g, _, line) = spawn_and_first_line(
            zkit()
                .args(["bookie", "--port", &port.to_string(), "--server", zk])
                .args(["--fsync", "always", "--session-timeout", "1s"])
                .arg("--data-dir")
                .arg(&dir)
                .env("RUST_LOG", "warn"),
        );
        assert!(
            line.contains("listening on"),
            "unexpected first line {line:?}"
        );
        BookieProc {
            guard: Some(g),
            dir,
            port,
        }
    }

    fn id(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn kill9(&mut self) {
        if let Some(mut g) = self.guard.take() {
            g.kill9().unwrap();
        }
    }
}

fn bookies(tmp: &Path, zk: &str, n: usize) -> Vec<BookieProc> {
    (0..n)
        .map(|i| BookieProc::start(tmp.join(format!("b{i}")), zkit_testkit::free_port(), zk))
        .collect()
}

/// A running `zkit ledger write`: stdin fed by a thread, stdout lines forwarded.
struct Writer {
    guard: ChildGuard,
    id: i64,
    lines: mpsc::Receiver<String>,
    acked: Vec<i64>,
}

fn line(i: u64) -> String {
    format!("line-{i:07}-{}", "p".repeat(20))
}

impl Writer {
    fn start(zk: &str, e: usize, qw: usize, qa: usize) -> Writer {
        let mut child = ChildGuard::spawn(
            zkit()
                .args(["ledger", "write", "--server", zk])
                .args(["--ensemble", &e.to_string()])
                .args(["--write-quorum", &qw.to_string()])
                .args(["--ack-quorum", &qa.to_string()])
                .args(["--bookie-timeout", "3s"])
                .env("RUST_LOG", "warn")
                .stdin(Stdio::piped())
                .stdout(Stdio::piped()),
        )
        .unwrap();
        let mut stdin = child.child_mut().stdin.take().unwrap();
        // Feed lines until the process goes away (a broken pipe ends the thread).
        thread::spawn(move || {
            for i in 0.. {
                if writeln!(stdin, "{}", line(i)).is_err() {
                    return;
                }
            }
        });
        let stdout = child.child_mut().stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            for l in BufReader::new(stdout).lines() {
                let Ok(l) = l else { return };
                if tx.send(l).is_err() {
                    return;
                }
            }
        });
        let first = rx.recv_timeout(LIMIT).expect("ledger line");
        let id = first
            .strip_prefix("ledger ")
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("unexpected first line {first:?}"));
        Writer {
            guard: child,
            id,
            lines: rx,
            acked: Vec::new(),
        }
    }

    fn take(&mut self, l: String) {
        let n = l
            .strip_prefix("acked ")
            .and_then(|s| s.parse::<i64>().ok())
            .unwrap_or_else(|| panic!("unexpected writer line {l:?}"));
        self.acked.push(n);
    }

    /// Collects `acked N` lines until at least `n` more arrived.
    fn wait_acks(&mut self, n: usize) {
        let want = self.acked.len() + n;
        let deadline = Instant::now() + LIMIT;
        while self.acked.len() < want {
            let left = deadline.saturating_duration_since(Instant::now());
            let l = self
                .lines
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("only {} acks", self.acked.len()));
            self.take(l);
        }
    }

    /// Reads every line still to come (until the process's stdout closes).
    fn drain(&mut self) {
        while let Ok(l) = self.lines.recv_timeout(LIMIT) {
            self.take(l);
        }
    }

    fn check_acks_in_order(&self) {
        for (i, n) in self.acked.iter().enumerate() {
            assert_eq!(*n, i as i64, "acknowledgements in entry order");
        }
    }
}

/// `zkit ledger read ID` as a child (so that two can run at once).
fn start_read(zk: &str, id: i64) -> std::process::Child {
    zkit()
        .args(["ledger", "read", &id.to_string(), "--server", zk])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn finish_read(child: std::process::Child) -> Vec<String> {
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "zkit ledger read failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

/// The read is a gap-free prefix of the input holding every acked entry.
fn check_prefix(name: &str, got: &[String], acked: &[i64]) {
    for (i, l) in got.iter().enumerate() {
        assert_eq!(
            *l,
            line(i as u64),
            "{name}: entry {i} is not input line {i}"
        );
    }
    let max_acked = acked.iter().max().copied().unwrap_or(-1);
    assert!(
        got.len() as i64 > max_acked,
        "{name}: read {} entries but entry {max_acked} was acked",
        got.len()
    );
}

async fn ledger_client(zk: &str) -> (Session, LedgerClient) {
    let s = Session::connect(zk, SessionOptions::default())
        .await
        .unwrap();
    let c = LedgerClient::with_options(&s, LedgerOptions::default()).unwrap();
    (s, c)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bookie_then_writer_kill_9_recovers_every_acked_entry_the_same_for_every_reader() {
    let tmp = tempfile::tempdir().unwrap();
    for zk in targets(tmp.path()).await {
        let name = zk.name;
        let dir = tmp.path().join(name);
        let mut bs = bookies(&dir, &zk.connect, 4);
        let mut w = Writer::start(&zk.connect, 3, 2, 2);
        w.wait_acks(300);

        // kill -9 a bookie of the writer's ensemble, mid-stream.
        let (session, client) = ledger_client(&zk.connect).await;
        let info = client.info(w.id).await.unwrap();
        let victim_id = info.metadata.ensembles[&0][1].clone();
        let victim = bs.iter().position(|b| b.id() == victim_id).unwrap();
        bs[victim].kill9();
        // The writer replaces it (ensemble change) ...
        let deadline = Instant::now() + LIMIT;
        loop {
            let m = client.info(w.id).await.unwrap().metadata;
            if m.ensembles.len() >= 2 {
                break;
            }
            assert!(Instant::now() < deadline, "{name}: no ensemble change");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // ... and writes go on: acks printed after the change was recorded.
        while let Ok(l) = w.lines.try_recv() {
            w.take(l);
        }
        w.wait_acks(300);
        // ... then the writer dies.
        w.guard.kill9().unwrap();
        w.drain();
        w.check_acks_in_order();
        let info = client.info(w.id).await.unwrap();
        assert!(
            info.metadata.ensembles.len() >= 2
                && !info.metadata.last_ensemble().1.contains(&victim_id),
            "{name}: ensemble change recorded: {:?}",
            info.metadata.ensembles
        );

        // Two readers recover at once and agree; a third read agrees again.
        let (r1, r2) = (start_read(&zk.connect, w.id), start_read(&zk.connect, w.id));
        let (a, b) = (finish_read(r1), finish_read(r2));
        check_prefix(name, &a, &w.acked);
        assert_eq!(a, b, "{name}: two recoverers print the same ledger");
        let c = finish_read(start_read(&zk.connect, w.id));
        assert_eq!(a, c, "{name}: a second read prints the same");
        eprintln!(
            "{name}: {} acked, {} recovered, fragments {:?}",
            w.acked.len(),
            a.len(),
            info.metadata.ensembles.keys().collect::<Vec<_>>()
        );
        // The killed bookie, restarted on its data, serves its entries of the first fragment.
        let port = bs[victim].port;
        let vdir = bs[victim].dir.clone();
        bs[victim] = BookieProc::start(vdir, port, &zk.connect);
        let closed = client.info(w.id).await.unwrap().metadata;
        let second = *closed.ensembles.keys().nth(1).unwrap();
        let bc = zkit_bookie::BookieClient::connect(
            format!("127.0.0.1:{port}").parse().unwrap(),
            zkit_bookie::ClientOptions::default(),
        )
        .await
        .unwrap();
        let d = zkit_bookie::protocol::entry::Digester::new(
            zkit_bookie::protocol::entry::DigestType::Crc32c,
            b"",
        );
        let mut served = 0;
        for e in 0..second {
            if zkit::ledger::schedule::write_set(e, 3, 2).contains(&1) {
                let raw = bc
                    .read(w.id, e, None)
                    .await
                    .unwrap_or_else(|err| panic!("{name}: restarted bookie lost entry {e}: {err}"));
                let entry = d.verify(&raw, w.id, e).unwrap();
                assert_eq!(entry.payload, line(e as u64).as_bytes(), "{name}");
                served += 1;
            }
        }
        assert!(served > 0, "{name}");
        client.close();
        session.close();
        drop(bs);
    }
}

fn signal(pid: u32, sig: &str) {
    assert!(Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .unwrap()
        .success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_paused_during_recovery_is_fenced_when_it_resumes() {
    let tmp = tempfile::tempdir().unwrap();
    for zk in targets(tmp.path()).await {
        let name = zk.name;
        let dir = tmp.path().join(name);
        let bs = bookies(&dir, &zk.connect, 3);
        let mut w = Writer::start(&zk.connect, 3, 2, 2);
        w.wait_acks(200);
        signal(w.guard.id(), "-STOP");
        let out = zkit()
            .args([
                "ledger",
                "recover",
                &w.id.to_string(),
                "--server",
                &zk.connect,
            ])
            .env("RUST_LOG", "warn")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).unwrap();
        let last: i64 = text
            .split_whitespace()
            .nth(3)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("{name}: unexpected recover output {text:?}"));
        signal(w.guard.id(), "-CONT");
        // The writer learns it is fenced at its next add and exits.
        let status = {
            let deadline = Instant::now() + LIMIT;
            loop {
                if let Some(s) = w.guard.child_mut().try_wait().unwrap() {
                    break s;
                }
                assert!(
                    Instant::now() < deadline,
                    "{name}: fenced writer did not exit"
                );
                thread::sleep(Duration::from_millis(20));
            }
        };
        w.drain();
        assert_eq!(
            status.code(),
            Some(75),
            "{name}: exit code of a fenced writer"
        );
        w.check_acks_in_order();
        let max_acked = w.acked.iter().max().copied().unwrap_or(-1);
        assert!(
            max_acked <= last,
            "{name}: entry {max_acked} acknowledged after a recovery that closed at {last}"
        );
        assert!(max_acked >= 199, "{name}");
        let got = finish_read(start_read(&zk.connect, w.id));
        assert_eq!(got.len() as i64, last + 1, "{name}");
        check_prefix(name, &got, &w.acked);
        drop(bs);
    }
}
