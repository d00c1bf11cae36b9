//! Measures this machine's fdatasync rate and the write-ahead log's throughput.
//!
//! `cargo run --release -p zkit-server --example storage_bench [DIR] [SECONDS_PER_CASE]`
//!
//! DIR (default: a temp dir under $TMPDIR) should be on the disk the server will use; each case
//! runs for SECONDS_PER_CASE (default 2) and the whole run stops by itself. Figures are printed,
//! never asserted: speed is measured by benchmarks, not timed tests.

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use zkit_server::storage::commit::GroupCommit;
use zkit_server::storage::wal::{FsyncMode, Wal, WalOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let base = match args.next() {
        Some(dir) => tempfile::tempdir_in(dir)?,
        None => tempfile::tempdir()?,
    };
    let secs: f64 = args.next().map(|s| s.parse()).transpose()?.unwrap_or(2.0);
    let per_case = Duration::from_secs_f64(secs);
    println!("dir: {}  ({secs} s per case)", base.path().display());

    // 1. Raw fdatasync of a 100-byte overwrite-append in a pre-allocated file.
    let fsyncs = fdatasync_rate(&base.path().join("fsync-probe"), per_case, |file| {
        fs4::fs_std::FileExt::allocate(file, 64 << 20)
    })?;
    println!(
        "raw fdatasync (100 B appends, fallocated file): {fsyncs:.0}/s  ({:.3} ms each)",
        1e3 / fsyncs
    );
    // 1b. The same in a file whose blocks were written with zeros first (no unwritten extents
    // to convert, so fdatasync has less metadata to commit on some filesystems).
    let zeroed = fdatasync_rate(&base.path().join("fsync-probe-zeroed"), per_case, |file| {
        let zeros = vec![0u8; 1 << 20];
        for i in 0..64u64 {
            file.write_all_at(&zeros, i << 20)?;
        }
        file.sync_all()
    })?;
    println!(
        "raw fdatasync (100 B appends, zero-filled file): {zeroed:.0}/s  ({:.3} ms each)",
        1e3 / zeroed
    );

    // 2. WAL append_batch + sync, various batch sizes, 100-byte payloads.
    let payload = vec![0x5au8; 100];
    for (mode, sizes) in [
        (FsyncMode::Always, &[1usize, 10, 100, 1000][..]),
        (FsyncMode::Never, &[1, 100][..]),
    ] {
        for &batch in sizes {
            let dir = tempfile::tempdir_in(base.path())?;
            let (mut wal, _) = Wal::open(
                dir.path(),
                WalOptions {
                    fsync: mode,
                    ..WalOptions::default()
                },
            )?;
            let mut zxid = 0i64;
            let mut records: Vec<(i64, &[u8])> = Vec::with_capacity(batch);
            let (n, el) = timed(per_case, |_| {
                records.clear();
                for _ in 0..batch {
                    zxid += 1;
                    records.push((zxid, &payload));
                }
                wal.append_batch(&records)
                    .and_then(|()| wal.sync())
                    .map_err(std::io::Error::other)
            })?;
            let syncs = n as f64 / el.as_secs_f64();
            println!(
                "wal fsync={mode:?} batch={batch:>4}: {:>9.0} records/s, {syncs:>7.0} syncs/s",
                syncs * batch as f64
            );
        }
    }

    // 2b. Recovery read: 1,000,000 records of 130 bytes (about a create txn with a 100-byte
    // value), written without fsync, then open (validate + repair) and read back.
    {
        let dir = tempfile::tempdir_in(base.path())?;
        let opts = WalOptions {
            fsync: FsyncMode::Never,
            ..WalOptions::default()
        };
        let (mut wal, _) = Wal::open(dir.path(), opts.clone())?;
        let record = [0x33u8; 130];
        let mut zxid = 0i64;
        for _ in 0..1000 {
            let batch: Vec<(i64, &[u8])> = (0..1000)
                .map(|_| {
                    zxid += 1;
                    (zxid, &record[..])
                })
                .collect();
            wal.append_batch(&batch)?;
        }
        wal.sync()?;
        drop(wal);
        let t = Instant::now();
        let (wal, report) = Wal::open(dir.path(), opts)?;
        let opened = t.elapsed();
        let mut n = 0u64;
        for r in wal.read_from(0) {
            r?;
            n += 1;
        }
        println!(
            "recovery of {n} records in {} segments: open {:.0} ms, open + read {:.0} ms",
            report.segments,
            opened.as_secs_f64() * 1e3,
            t.elapsed().as_secs_f64() * 1e3
        );
    }

    // 3. Group commit: 64 concurrent writers, one record each per commit.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    for writers in [1usize, 64] {
        let dir = tempfile::tempdir_in(base.path())?;
        let (wal, _) = Wal::open(dir.path(), WalOptions::default())?;
        let gc = Arc::new(GroupCommit::start(wal)?);
        let next = Arc::new(std::sync::Mutex::new(0i64));
        let done = Arc::new(AtomicU64::new(0));
        let lat_ns = Arc::new(AtomicI64::new(0));
        let start = Instant::now();
        rt.block_on(async {
            let mut tasks = Vec::new();
            for _ in 0..writers {
                let (gc, next, done, lat_ns, payload) = (
                    gc.clone(),
                    next.clone(),
                    done.clone(),
                    lat_ns.clone(),
                    payload.clone(),
                );
                tasks.push(tokio::spawn(async move {
                    while start.elapsed() < per_case {
                        let t = Instant::now();
                        // The lock stands in for the server's single writer task: zxid order
                        // equals submission order.
                        let commit = {
                            let mut z = next.lock().expect("zxid lock");
                            *z += 1;
                            gc.submit(vec![(*z, payload.clone())])
                        };
                        commit.await.expect("commit");
                        lat_ns.fetch_add(t.elapsed().as_nanos() as i64, Ordering::Relaxed);
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                }));
            }
            for t in tasks {
                t.await.expect("writer task");
            }
        });
        let el = start.elapsed().as_secs_f64();
        let n = done.load(Ordering::Relaxed);
        println!(
            "group commit, {writers:>2} writers: {:>8.0} writes/s ({:.1}x raw fsync/s), mean latency {:.3} ms",
            n as f64 / el,
            n as f64 / el / fsyncs,
            lat_ns.load(Ordering::Relaxed) as f64 / n.max(1) as f64 / 1e6
        );
        if let Ok(gc) = Arc::try_unwrap(gc) {
            gc.shutdown()?;
        }
    }
    Ok(())
}

/// fdatasyncs per second of 100-byte appends to a new file at `path`, made ready by `prepare`,
/// each append followed by fdatasync, for `budget` ([`timed`]).
fn fdatasync_rate(
    path: &std::path::Path,
    budget: Duration,
    prepare: impl FnOnce(&std::fs::File) -> std::io::Result<()>,
) -> std::io::Result<f64> {
    let file = OpenOptions::new()
        .create(true)
        .read(true)
        .write(true)
        .truncate(true)
        .open(path)?;
    prepare(&file)?;
    let (n, el) = timed(budget, |i| {
        file.write_all_at(&[0xab; 100], i * 100)?;
        file.sync_data()
    })?;
    Ok(n as f64 / el.as_secs_f64())
}

/// Runs `f(i)` until `budget` elapses (or 1,000,000 iterations); returns (iterations, elapsed).
fn timed(
    budget: Duration,
    mut f: impl FnMut(u64) -> std::io::Result<()>,
) -> std::io::Result<(u64, Duration)> {
    let start = Instant::now();
    let mut i = 0;
    while start.elapsed() < budget && i < 1_000_000 {
        f(i)?;
        i += 1;
    }
    Ok((i, start.elapsed()))
}
