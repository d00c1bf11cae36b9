//! `zkit bench ledger`: the replicated ledger's speed on this machine. It starts an embedded
//! metadata server and `zkit bookie` processes (fsync always, by default) in a temp dir and
//! measures, with 100-byte entries and E3 Qw2 Qa2 unless told otherwise:
//!
//! - add latency with one add in flight (p50, p99, max);
//! - pipelined entries/s from one writer (each entry its own `submit`, a window in flight);
//! - recovery: a `zkit ledger write` process is fed N entries and killed (SIGKILL) with its
//!   last window unacknowledged; then the time for `open` to fence, find the end, re-replicate
//!   the tail and close; then the time to read the whole ledger back;
//! - pipelined throughput with the ensemble spread over 3 and over 5 bookies (E = bookies,
//!   Qw2 Qa2: each bookie gets 2/E of the entries).
//!
//! It measures; it asserts nothing.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::guard::ChildGuard;
use anyhow::{bail, Context, Result};
use bytes::Bytes;
use futures::StreamExt;
use hdrhistogram::Histogram;
use zkit::ledger::{CreateOptions, LedgerClient, LedgerOptions};
use zkit::{Session, SessionOptions};

/// Arguments of `zkit bench ledger`.
#[derive(Debug, clap::Args)]
pub struct BenchLedgerArgs {
    /// Payload bytes per entry.
    #[arg(long, default_value_t = 100)]
    pub entry_size: usize,
    /// Sequential adds for the latency figures.
    #[arg(long, default_value_t = 5000)]
    pub latency_adds: usize,
    /// Entries of each throughput run.
    #[arg(long, default_value_t = 300_000)]
    pub entries: usize,
    /// Entries of the ledger recovered.
    #[arg(long, default_value_t = 1_000_000)]
    pub recovery_entries: usize,
    /// Entries a writer keeps in flight.
    #[arg(long, default_value_t = 1000)]
    pub window: usize,
    /// Bookie journal sync: `always` or `never`.
    #[arg(long, default_value = "always")]
    pub fsync: String,
    /// Where the bookies keep their data [default: a temp dir].
    #[arg(long)]
    pub dir: Option<std::path::PathBuf>,
    /// Print the results as a Markdown table too.
    #[arg(long)]
    pub markdown: bool,
}

fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

fn exe() -> Result<std::path::PathBuf> {
    std::env::current_exe().context("cannot find the zkit binary")
}

fn start_bookie(dir: &std::path::Path, zk: &str, fsync: &str) -> Result<ChildGuard> {
    let port = free_port()?;
    let mut g = ChildGuard::spawn(
        Command::new(exe()?)
            .args(["bookie", "--port", &port.to_string(), "--server", zk])
            .args(["--fsync", fsync])
            .arg("--data-dir")
            .arg(dir)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped()),
    )?;
    let stdout = g.child_mut().stdout.take().context("bookie stdout")?;
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line)?;
    if !line.contains("listening on") {
        bail!("bookie did not start: {line:?}");
    }
    Ok(g)
}

fn payload(size: usize, i: usize) -> Bytes {
    let mut v = format!("{i:012}").into_bytes();
    v.resize(size, b'x');
    Bytes::from(v)
}

fn ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

/// Pipelined run: `n` entries, each submitted on its own; returns entries/s.
async fn pipelined(
    client: &LedgerClient,
    opts: &CreateOptions,
    n: usize,
    size: usize,
) -> Result<f64> {
    let w = client.create(opts).await?;
    let (tx, mut rx) = tokio::sync::mpsc::channel::<zkit::ledger::PendingAdd>(1 << 16);
    let waiter = tokio::spawn(async move {
        let mut last = -1;
        while let Some(p) = rx.recv().await {
            last = p.await?;
        }
        Ok::<_, zkit::ledger::LedgerError>(last)
    });
    let started = Instant::now();
    for i in 0..n {
        let p = w.submit(payload(size, i)).await?;
        if tx.send(p).await.is_err() {
            break;
        }
    }
    drop(tx);
    let last = waiter.await??;
    let took = started.elapsed();
    if last != n as i64 - 1 {
        bail!(
            "pipelined run acknowledged up to {last}, expected {}",
            n - 1
        );
    }
    w.close().await?;
    Ok(n as f64 / took.as_secs_f64())
}

/// Feeds `n` entries to a `zkit ledger write` process and kills it with the last window
/// unacknowledged; returns the ledger id and the highest entry it printed as acked.
fn killed_writer(zk: &str, n: usize, size: usize, window: usize) -> Result<(i64, i64)> {
    let mut g = ChildGuard::spawn(
        Command::new(exe()?)
            .args(["ledger", "write", "--server", zk])
            .env("RUST_LOG", "warn")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped()),
    )?;
    let mut stdin = g.child_mut().stdin.take().context("stdin")?;
    let feeder = std::thread::spawn(move || {
        let mut out = std::io::BufWriter::with_capacity(1 << 20, &mut stdin);
        for i in 0..n {
            let mut line = payload(size, i).to_vec();
            line.push(b'\n');
            if out.write_all(&line).is_err() {
                return;
            }
        }
        let _ = out.flush();
        // Keep stdin open: the writer must not reach the end and close the ledger.
        std::thread::sleep(Duration::from_secs(3600));
    });
    drop(feeder);
    let stdout = g.child_mut().stdout.take().context("stdout")?;
    let mut lines = BufReader::new(stdout).lines();
    let first = lines.next().context("no output")??;
    let id: i64 = first
        .strip_prefix("ledger ")
        .and_then(|s| s.parse().ok())
        .context("no ledger line")?;
    let kill_at = n.saturating_sub(window) as i64;
    let mut acked = -1;
    for l in lines {
        let l = l?;
        if let Some(a) = l.strip_prefix("acked ").and_then(|s| s.parse().ok()) {
            acked = a;
            if a >= kill_at {
                break;
            }
        }
    }
    g.kill9()?;
    Ok((id, acked))
}

/// Runs the benchmark and prints the figures.
pub async fn run(args: BenchLedgerArgs) -> anyhow::Result<std::process::ExitCode> {
    run_exit_code(args).await.map(super::process_exit)
}

/// What [`run`] does, with the exit code as a number.
async fn run_exit_code(args: BenchLedgerArgs) -> anyhow::Result<i32> {
    let tmp = match &args.dir {
        Some(d) => tempfile::tempdir_in(d)?,
        None => tempfile::tempdir()?,
    };
    let zk = zkit_server::Server::start(zkit_server::ServerConfig::ephemeral())
        .await
        .context("cannot start the embedded server")?;
    let zk_addr = zk.addr().to_string();
    let mut bookies = Vec::new();
    for i in 0..5 {
        bookies.push(start_bookie(
            &tmp.path().join(format!("b{i}")),
            &zk_addr,
            &args.fsync,
        )?);
    }
    let session = Session::connect(&zk_addr, SessionOptions::default()).await?;
    let client = LedgerClient::with_options(
        &session,
        LedgerOptions {
            max_in_flight: args.window,
            ..LedgerOptions::default()
        },
    )?;
    let e3 = CreateOptions::default();
    println!(
        "zkit bench ledger — 5 bookie processes (fsync {}), {}-byte entries, E3 Qw2 Qa2, window {}",
        args.fsync, args.entry_size, args.window
    );
    let mut rows: Vec<(String, String)> = Vec::new();

    // 1. Latency, one add in flight.
    let w = client.create(&e3).await?;
    for i in 0..200 {
        w.append(payload(args.entry_size, i)).await?;
    }
    let mut h = Histogram::<u64>::new(3)?;
    for i in 0..args.latency_adds {
        let t = Instant::now();
        w.append(payload(args.entry_size, i)).await?;
        h.record(u64::try_from(t.elapsed().as_micros()).unwrap_or(u64::MAX))?;
    }
    w.close().await?;
    let lat = format!(
        "p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms",
        ms(h.value_at_quantile(0.5)),
        ms(h.value_at_quantile(0.99)),
        ms(h.max())
    );
    println!(
        "  add latency, 1 in flight ({} adds): {lat}",
        args.latency_adds
    );
    rows.push((
        format!("add latency, 1 in flight ({} adds)", args.latency_adds),
        lat,
    ));

    // 2. Pipelined, one writer.
    let rate = pipelined(&client, &e3, args.entries, args.entry_size).await?;
    println!(
        "  pipelined, one writer ({} entries): {rate:.0} entries/s",
        args.entries
    );
    rows.push((
        format!(
            "pipelined entries/s, one writer, E3 ({} entries)",
            args.entries
        ),
        format!("{rate:.0}"),
    ));

    // 3. Scaling over bookies: E = 3 and 5.
    for e in [3, 5] {
        let o = CreateOptions {
            ensemble: e,
            ..CreateOptions::default()
        };
        let rate = pipelined(&client, &o, args.entries, args.entry_size).await?;
        println!("  pipelined over {e} bookies (E{e} Qw2 Qa2): {rate:.0} entries/s");
        rows.push((
            format!("pipelined entries/s, E{e} Qw2 Qa2"),
            format!("{rate:.0}"),
        ));
    }

    // 4. Recovery of a ledger whose writer was killed mid-stream.
    let (id, acked) = killed_writer(
        &zk_addr,
        args.recovery_entries,
        args.entry_size,
        args.window,
    )?;
    let rc = LedgerClient::with_options(&session, LedgerOptions::default())?;
    let t = Instant::now();
    let reader = rc.open(id, b"").await?;
    let took = t.elapsed();
    let last = reader.last_add_confirmed();
    if last < acked {
        bail!("recovery lost acknowledged entries: acked {acked}, recovered to {last}");
    }
    let line = format!(
        "{:.3} s ({} entries; writer killed at acked {acked}; {} entries past it recovered)",
        took.as_secs_f64(),
        last + 1,
        last - acked
    );
    println!(
        "  recovery of a {}-entry ledger: {line}",
        args.recovery_entries
    );
    rows.push((
        format!("recovery, {}-entry ledger", args.recovery_entries),
        line,
    ));
    let t = Instant::now();
    let mut n = 0u64;
    {
        let mut s = std::pin::pin!(reader.entries(0, last));
        while let Some(e) = s.next().await {
            e?;
            n += 1;
        }
    }
    let read_rate = n as f64 / t.elapsed().as_secs_f64();
    println!("  read back: {n} entries, {read_rate:.0} entries/s");
    rows.push(("read back, entries/s".into(), format!("{read_rate:.0}")));

    if args.markdown {
        println!();
        println!("| measure | result |");
        println!("|---|---|");
        for (k, v) in &rows {
            println!("| {k} | {v} |");
        }
    }
    rc.close();
    client.close();
    session.close();
    drop(bookies);
    zk.stop().await;
    Ok(0)
}
