//! The `zkit demo` ledger section: four `zkit bookie` processes on the demo's embedded server;
//! a `zkit ledger write` process fed lines is killed with SIGKILL mid-stream, and a reader
//! recovers the ledger: a gap-free prefix of the input holding every entry printed as acked.
//! Then a bookie of its ensemble is killed too, and auto-recovery (auditor and replication
//! worker, in this process) copies its fragments to the spare bookie.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::guard::ChildGuard;
use anyhow::{bail, ensure, Context, Result};
use zkit::ledger::auditor::{AutoRecovery, AutoRecoveryOptions};
use zkit::ledger::{LedgerClient, LedgerOptions};
use zkit::{Session, SessionOptions};

fn line(i: u64) -> String {
    format!("demo entry {i:06}")
}

fn start_bookie(dir: &std::path::Path, zk: &str) -> Result<(ChildGuard, String)> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let mut g = ChildGuard::spawn(
        Command::new(std::env::current_exe()?)
            .args(["bookie", "--port", &port.to_string(), "--server", zk])
            .args(["--session-timeout", "1s"])
            .arg("--data-dir")
            .arg(dir)
            .env("RUST_LOG", "error")
            .stdout(Stdio::piped()),
    )?;
    let mut first = String::new();
    BufReader::new(g.child_mut().stdout.take().context("stdout")?).read_line(&mut first)?;
    ensure!(
        first.contains("listening on"),
        "bookie did not start: {first:?}"
    );
    Ok((g, format!("127.0.0.1:{port}")))
}

/// Runs the section against `server`; returns its report.
pub async fn demo_ledger(server: &str) -> Result<String> {
    let tmp = tempfile::tempdir()?;
    let mut bookies = Vec::new();
    for i in 0..4 {
        bookies.push(start_bookie(
            &tmp.path().join(format!("bookie{i}")),
            server,
        )?);
    }
    let mut report = vec![format!(
        "4 zkit bookie processes (fsync always) on {server}"
    )];

    // A writer fed lines, killed mid-stream.
    let mut w = ChildGuard::spawn(
        Command::new(std::env::current_exe()?)
            .args(["ledger", "write", "--server", server])
            .args([
                "--ensemble",
                "3",
                "--write-quorum",
                "2",
                "--ack-quorum",
                "2",
            ])
            .env("RUST_LOG", "error")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped()),
    )?;
    let mut stdin = w.child_mut().stdin.take().context("stdin")?;
    std::thread::spawn(move || {
        for i in 0.. {
            if writeln!(stdin, "{}", line(i)).is_err() {
                return;
            }
        }
    });
    let mut lines = BufReader::new(w.child_mut().stdout.take().context("stdout")?).lines();
    let id: i64 = lines
        .next()
        .context("no output from the writer")??
        .strip_prefix("ledger ")
        .and_then(|s| s.parse().ok())
        .context("no `ledger ID` line")?;
    let mut acked = -1i64;
    for l in lines.by_ref() {
        if let Some(n) = l?.strip_prefix("acked ").and_then(|s| s.parse().ok()) {
            acked = n;
            if n >= 2000 {
                break;
            }
        }
    }
    w.kill9()?;
    for l in lines {
        if let Some(n) = l?.strip_prefix("acked ").and_then(|s| s.parse().ok()) {
            acked = n;
        }
    }
    report.push(format!(
        "zkit ledger write (E3 Qw2 Qa2) killed with SIGKILL after printing `acked {acked}`"
    ));

    // A reader recovers it.
    let session = Session::connect(server, SessionOptions::default()).await?;
    let client = LedgerClient::with_options(&session, LedgerOptions::default())?;
    let t = Instant::now();
    let reader = client.open(id, b"").await?;
    let recovered = t.elapsed();
    let last = reader.last_add_confirmed();
    let entries = reader.read(0, last.max(0)).await?;
    for (i, e) in entries.iter().enumerate() {
        ensure!(
            e.payload == line(i as u64).as_bytes(),
            "entry {i} is not input line {i}"
        );
    }
    ensure!(last >= acked, "recovered to {last} but {acked} was acked");
    report.push(format!(
        "recovered ledger {id} in {recovered:.1?}: entries 0..={last}, gap-free, every acked entry in it"
    ));

    // A bookie of its ensemble dies; auto-recovery re-replicates its fragments.
    let ar = AutoRecovery::start(
        &session,
        &client,
        AutoRecoveryOptions {
            lost_bookie_delay: Duration::from_secs(1),
            open_ledger_grace: Duration::from_secs(1),
            worker_poll: Duration::from_secs(1),
            ..AutoRecoveryOptions::default()
        },
    )
    .await?;
    let meta = reader.metadata();
    let victim = meta.ensembles[&0][0].clone();
    let Some(pos) = bookies.iter().position(|(_, b)| *b == victim) else {
        bail!("bookie {victim} is not one of the demo's");
    };
    let t = Instant::now();
    bookies[pos].0.kill9()?;
    report.push(format!("bookie {victim} killed with SIGKILL"));
    let deadline = Instant::now() + Duration::from_secs(15);
    let after = loop {
        let m = client.info(id).await?.metadata;
        if !m.bookies().contains(victim.as_str()) {
            break m;
        }
        ensure!(Instant::now() < deadline, "not re-replicated within 15 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let again = client.open(id, b"").await?.read(0, last.max(0)).await?;
    ensure!(
        again.len() == entries.len(),
        "entries lost by re-replication"
    );
    report.push(format!(
        "auditor marked it, worker re-replicated in {:.1?}: ensembles now {:?}",
        t.elapsed(),
        after.ensembles.values().collect::<Vec<_>>()
    ));
    ar.stop().await;
    client.close();
    session.close();
    drop(bookies);
    Ok(report.join("\n"))
}
