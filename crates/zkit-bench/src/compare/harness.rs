//! The harness's own client work: sessions, paths, requests in flight, progress, histograms.

use std::io::{IsTerminal as _, Write as _};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use futures::stream::{FuturesUnordered, StreamExt as _};
use hdrhistogram::Histogram;
use zkit_client as zk;

use super::figures::{MAX_LATENCY_US, SESSION_TIMEOUT};

/// Opens one session of the harness's own.
pub(super) async fn connect(server: &str) -> Result<zk::Client> {
    zk::Client::connector()
        .with_session_timeout(SESSION_TIMEOUT)
        .connect(server)
        .await
        .with_context(|| format!("connecting to {server}"))
}

/// Creates `path` and its missing ancestors (persistent, open ACL).
pub(super) async fn ensure_path(client: &zk::Client, path: &str) -> Result<()> {
    let options = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
    let mut prefix = String::new();
    for part in path.split('/').filter(|p| !p.is_empty()) {
        prefix.push('/');
        prefix.push_str(part);
        match client.create(&prefix, b"", &options).await {
            Ok(_) | Err(zk::Error::NodeExists) => {}
            Err(e) => return Err(e).with_context(|| format!("creating {prefix}")),
        }
    }
    Ok(())
}

/// Runs `work(i)` for `i in 0..count` with up to `window` of them in flight.
pub(super) async fn pipelined<F, Fut>(count: usize, window: usize, work: F) -> Result<()>
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = Result<()>>,
{
    let mut next = 0;
    let mut inflight = FuturesUnordered::new();
    loop {
        while next < count && inflight.len() < window {
            inflight.push(work(next));
            next += 1;
        }
        match inflight.next().await {
            Some(result) => result?,
            None => return Ok(()),
        }
    }
}

/// Prints `label: N ops, R/s` on stderr every half second while `done` is false; only on a
/// terminal, so logs and pipes stay clean.
pub(super) fn spawn_progress(label: String, count: Arc<AtomicU64>, done: Arc<AtomicBool>) {
    if !std::io::stderr().is_terminal() {
        return;
    }
    tokio::spawn(async move {
        let start = Instant::now();
        while !done.load(Ordering::Relaxed) {
            tokio::time::sleep(Duration::from_millis(500)).await;
            let n = count.load(Ordering::Relaxed);
            let secs = start.elapsed().as_secs_f64();
            eprint!(
                "\r\x1b[K  {label}: {n} ops, {:.0}/s, {secs:.0}s",
                n as f64 / secs.max(0.001)
            );
            let _ = std::io::stderr().flush();
        }
        eprint!("\r\x1b[K");
    });
}

/// Lifts the soft open-files limit to the hard one: 10,000 idle sessions are 10,000 sockets.
pub(super) fn raise_fd_limit() {
    #[cfg(unix)]
    {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit/setrlimit only read/write the struct we pass.
        #[allow(unsafe_code)]
        unsafe {
            if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0
                && limit.rlim_cur < limit.rlim_max
            {
                limit.rlim_cur = limit.rlim_max;
                libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
            }
        }
    }
}

pub(super) fn new_histogram() -> Histogram<u64> {
    // 3 significant digits over 1 µs..60 s: the bounds are constants, so this cannot fail.
    Histogram::new_with_bounds(1, MAX_LATENCY_US, 3).expect("constant histogram bounds are valid")
}

pub(super) fn record(h: &mut Histogram<u64>, d: Duration) {
    let us = u64::try_from(d.as_micros()).unwrap_or(MAX_LATENCY_US);
    h.saturating_record(us.clamp(1, MAX_LATENCY_US));
}
