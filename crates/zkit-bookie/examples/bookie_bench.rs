//! Single-bookie benchmark: add latency with one add in flight, and pipelined adds per second
//! from one connection, for 100-byte entries, on a file-backed bookie in a temp dir.
//!
//! ```text
//! cargo run --release -p zkit-bookie --example bookie_bench -- \
//!     [--fsync always|never] [--latency-adds N] [--pipelined-adds N] [--window W] \
//!     [--payload BYTES] [--dir DIR]
//! ```
//!
//! `--dir` picks the filesystem (default: the system temp dir); fsync on is the default.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use bytes::Bytes;
use futures::StreamExt;
use hdrhistogram::Histogram;
use zkit_bookie::protocol::entry::{master_key, DigestType, Digester, EntryHeader};
use zkit_bookie::storage::{FileStorageOptions, FsyncMode};
use zkit_bookie::{Bookie, BookieClient, BookieConfig, ClientOptions, MemoryRegistration};

struct Args {
    fsync: FsyncMode,
    latency_adds: u64,
    pipelined_adds: u64,
    window: usize,
    payload: usize,
    dir: Option<std::path::PathBuf>,
}

fn parse() -> Result<Args> {
    let mut a = Args {
        fsync: FsyncMode::Always,
        latency_adds: 5_000,
        pipelined_adds: 300_000,
        window: 2_000,
        payload: 100,
        dir: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().with_context(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--fsync" => {
                a.fsync = match value()?.as_str() {
                    "always" => FsyncMode::Always,
                    "never" => FsyncMode::Never,
                    v => bail!("--fsync always|never, not {v}"),
                }
            }
            "--latency-adds" => a.latency_adds = value()?.parse()?,
            "--pipelined-adds" => a.pipelined_adds = value()?.parse()?,
            "--window" => a.window = value()?.parse()?,
            "--payload" => a.payload = value()?.parse()?,
            "--dir" => a.dir = Some(value()?.into()),
            other => bail!("unknown flag {other}"),
        }
    }
    Ok(a)
}

fn entry(d: &Digester, ledger_id: i64, entry_id: i64, payload: &[u8]) -> Bytes {
    d.encode(
        EntryHeader {
            ledger_id,
            entry_id,
            lac: entry_id - 1,
            length: (entry_id + 1) * payload.len() as i64,
        },
        payload,
    )
}

fn us(h: &Histogram<u64>, q: f64) -> f64 {
    h.value_at_quantile(q) as f64 / 1000.0
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = parse()?;
    let tmp = match &args.dir {
        Some(d) => tempfile::tempdir_in(d)?,
        None => tempfile::tempdir()?,
    };
    let mut config = BookieConfig::new("127.0.0.1:0".parse()?, tmp.path());
    config.storage = FileStorageOptions {
        fsync: args.fsync,
        ..FileStorageOptions::default()
    };
    config.min_free_bytes = 0;
    config.writable_free_bytes = 0;
    let bookie = Bookie::start(config, Arc::new(MemoryRegistration::new())).await?;
    let client = BookieClient::connect(bookie.addr(), ClientOptions::default()).await?;
    let key = master_key(b"bench");
    let digester = Digester::new(DigestType::Crc32c, b"bench");
    let payload = vec![0x5au8; args.payload];
    println!(
        "bookie bench: fsync {:?}, payload {} B, dir {}",
        args.fsync,
        args.payload,
        tmp.path().display()
    );

    // One add in flight.
    let mut h = Histogram::<u64>::new(3)?;
    for e in 0..args.latency_adds as i64 {
        let bytes = entry(&digester, 1, e, &payload);
        let t = Instant::now();
        client.add(1, e, key, false, bytes).await?;
        h.record(t.elapsed().as_nanos() as u64)?;
    }
    println!(
        "one in flight: {} adds, p50 {:.1} us, p99 {:.1} us, p99.9 {:.1} us, max {:.1} us",
        h.len(),
        us(&h, 0.5),
        us(&h, 0.99),
        us(&h, 0.999),
        h.max() as f64 / 1000.0
    );

    // Pipelined: `window` adds in flight from one connection.
    let start = Instant::now();
    let mut inflight = futures::stream::FuturesUnordered::new();
    let mut next = 0i64;
    let mut done = 0u64;
    let mut lat = Histogram::<u64>::new(3)?;
    while done < args.pipelined_adds {
        while inflight.len() < args.window && (next as u64) < args.pipelined_adds {
            let c = client.clone();
            let bytes = entry(&digester, 2, next, &payload);
            let e = next;
            next += 1;
            inflight.push(async move {
                let t = Instant::now();
                c.add(2, e, key, false, bytes).await.map(|()| t.elapsed())
            });
        }
        match inflight.next().await {
            Some(r) => {
                lat.record(r?.as_nanos() as u64)?;
                done += 1;
            }
            None => break,
        }
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "pipelined: {} adds, window {}, {:.0} adds/s, {:.1} MB/s, latency p50 {:.2} ms p99 {:.2} ms",
        done,
        args.window,
        done as f64 / secs,
        done as f64 * args.payload as f64 / secs / 1e6,
        us(&lat, 0.5) / 1000.0,
        us(&lat, 0.99) / 1000.0
    );
    let stats = bookie.storage().stats();
    println!(
        "journal fsyncs: {} ({:.1} adds per fsync)",
        stats.fsync.count(),
        (args.latency_adds + done) as f64 / stats.fsync.count().max(1) as f64
    );
    client.close();
    tokio::time::timeout(Duration::from_secs(30), bookie.stop()).await?;
    Ok(())
}
