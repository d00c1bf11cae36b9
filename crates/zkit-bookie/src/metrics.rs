//! The bookie's counters and histograms, rendered in Prometheus' text format and served on
//! `GET /metrics` (hyper, HTTP/1.1). Plain atomics and small mutex-guarded histograms; nothing
//! here blocks for long.

use std::convert::Infallible;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use crate::histogram::{Histogram, BUCKETS};
use crate::storage::StorageStats;

/// Bookie-wide counters.
#[derive(Debug, Default)]
pub struct Metrics {
    /// Adds acknowledged.
    pub adds: AtomicU64,
    /// Adds rejected or failed.
    pub add_errors: AtomicU64,
    /// Reads answered (found or not).
    pub reads: AtomicU64,
    /// Requests that failed to decode (bad frames or contents).
    pub bad_requests: AtomicU64,
    /// Connections accepted.
    pub connections: AtomicU64,
    add_latency: Mutex<Histogram>,
    gc: GcMetrics,
}

/// What the garbage collector task did (BookKeeper's `GarbageCollectorStats`: the thread's
/// runtime and `DELETED_LEDGER_TOTAL`; the storage's counters give the reclaimed space).
#[derive(Debug, Default)]
struct GcMetrics {
    runs: AtomicU64,
    ledgers_deleted: AtomicU64,
    last_run_nanos: AtomicU64,
    run_time: Mutex<Histogram>,
}

/// Gauges sampled at render time.
#[derive(Debug, Clone, Copy, Default)]
pub struct Gauges {
    /// Ledgers held.
    pub ledgers: u64,
    /// Entries held.
    pub entries: u64,
    /// Bytes of the bookie's files.
    pub disk_used: u64,
    /// Free bytes on the ledger dir's filesystem.
    pub disk_free: u64,
    /// Read-only mode.
    pub read_only: bool,
    /// Checkpoints done.
    pub checkpoints: u64,
}

impl Metrics {
    /// Records an acknowledged add's latency (request read → response queued).
    pub fn record_add(&self, d: Duration) {
        self.adds.fetch_add(1, Relaxed);
        self.add_latency
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .observe(d);
    }

    /// Records one finished garbage collection pass: how long it took (metadata lookups,
    /// deletes and the entry log collection) and how many ledgers it deleted.
    pub fn record_gc_run(&self, took: Duration, ledgers_deleted: u64) {
        self.gc.ledgers_deleted.fetch_add(ledgers_deleted, Relaxed);
        self.gc
            .last_run_nanos
            .store(u64::try_from(took.as_nanos()).unwrap_or(u64::MAX), Relaxed);
        self.gc
            .run_time
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .observe(took);
        // Last, so a reader that sees the run also sees what it did.
        self.gc.runs.fetch_add(1, Relaxed);
    }

    /// Garbage collection passes finished.
    pub fn gc_runs(&self) -> u64 {
        self.gc.runs.load(Relaxed)
    }

    /// Prometheus text; `storage` gives the journal fsync histogram and the garbage
    /// collector's entry log counters.
    pub fn render(&self, g: &Gauges, storage: &StorageStats) -> String {
        let mut out = String::new();
        let counter = |out: &mut String, name: &str, help: &str, v: u64| {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {v}"
            );
        };
        let gauge = |out: &mut String, name: &str, help: &str, v: u64| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {v}");
        };
        counter(
            &mut out,
            "bookie_adds_total",
            "Adds acknowledged.",
            self.adds.load(Relaxed),
        );
        counter(
            &mut out,
            "bookie_add_errors_total",
            "Adds rejected or failed.",
            self.add_errors.load(Relaxed),
        );
        counter(
            &mut out,
            "bookie_reads_total",
            "Reads answered.",
            self.reads.load(Relaxed),
        );
        counter(
            &mut out,
            "bookie_bad_requests_total",
            "Requests that failed to decode.",
            self.bad_requests.load(Relaxed),
        );
        counter(
            &mut out,
            "bookie_connections_total",
            "Connections accepted.",
            self.connections.load(Relaxed),
        );
        counter(
            &mut out,
            "bookie_checkpoints_total",
            "Checkpoints done.",
            g.checkpoints,
        );
        self.add_latency
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .render(
                &mut out,
                "bookie_add_latency_seconds",
                "Add latency, request read to response queued.",
            );
        storage.fsync.render(
            &mut out,
            "bookie_journal_fsync_seconds",
            "Journal fdatasync latency.",
        );
        counter(
            &mut out,
            "bookie_gc_runs_total",
            "Garbage collection passes finished.",
            self.gc.runs.load(Relaxed),
        );
        counter(
            &mut out,
            "bookie_gc_deleted_ledgers_total",
            "Ledgers deleted by garbage collection (their metadata was gone).",
            self.gc.ledgers_deleted.load(Relaxed),
        );
        counter(
            &mut out,
            "bookie_gc_reclaimed_bytes_total",
            "Bytes of entry logs removed by garbage collection.",
            storage.gc_bytes_reclaimed,
        );
        counter(
            &mut out,
            "bookie_gc_entry_logs_removed_total",
            "Entry logs removed by garbage collection (dead or compacted).",
            storage.gc_logs_removed,
        );
        counter(
            &mut out,
            "bookie_gc_compacted_entries_total",
            "Live entries copied out of compacted entry logs.",
            storage.gc_entries_copied,
        );
        let last = Duration::from_nanos(self.gc.last_run_nanos.load(Relaxed));
        let _ = writeln!(
            out,
            "# HELP bookie_gc_last_run_seconds Duration of the last garbage collection pass.\n\
             # TYPE bookie_gc_last_run_seconds gauge\nbookie_gc_last_run_seconds {}",
            last.as_secs_f64()
        );
        self.gc
            .run_time
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .render(
                &mut out,
                "bookie_gc_run_seconds",
                "Garbage collection pass duration.",
            );
        gauge(&mut out, "bookie_ledgers", "Ledgers held.", g.ledgers);
        gauge(&mut out, "bookie_entries", "Entries held.", g.entries);
        gauge(
            &mut out,
            "bookie_disk_used_bytes",
            "Bytes of journal, entry logs and index.",
            g.disk_used,
        );
        gauge(
            &mut out,
            "bookie_disk_free_bytes",
            "Free bytes on the ledger dir's filesystem.",
            g.disk_free,
        );
        gauge(
            &mut out,
            "bookie_read_only",
            "1 when the bookie is read-only.",
            u64::from(g.read_only),
        );
        out
    }
}

/// Serves `GET /metrics` with `render()` until `stop` is cancelled.
pub(crate) async fn serve(
    listener: TcpListener,
    render: std::sync::Arc<dyn Fn() -> String + Send + Sync>,
    stop: CancellationToken,
) {
    loop {
        let (stream, _) = tokio::select! {
            () = stop.cancelled() => return,
            a = listener.accept() => match a {
                Ok(a) => a,
                Err(err) => {
                    tracing::debug!(%err, "metrics accept failed");
                    continue;
                }
            },
        };
        let render = render.clone();
        let stop = stop.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                let render = render.clone();
                async move {
                    let (status, body) =
                        if req.method() == Method::GET && req.uri().path() == "/metrics" {
                            (StatusCode::OK, render())
                        } else {
                            (
                                StatusCode::NOT_FOUND,
                                "not found; try /metrics\n".to_string(),
                            )
                        };
                    let mut resp = Response::new(Full::new(Bytes::from(body)));
                    *resp.status_mut() = status;
                    resp.headers_mut().insert(
                        hyper::header::CONTENT_TYPE,
                        hyper::header::HeaderValue::from_static("text/plain; version=0.0.4"),
                    );
                    Ok::<_, Infallible>(resp)
                }
            });
            let conn = http1::Builder::new().serve_connection(TokioIo::new(stream), service);
            tokio::select! {
                () = stop.cancelled() => {}
                r = conn => if let Err(err) = r { tracing::debug!(%err, "metrics connection failed") },
            }
        });
    }
}

/// Binds the metrics listener.
pub(crate) async fn bind(addr: SocketAddr) -> std::io::Result<(TcpListener, SocketAddr)> {
    let l = TcpListener::bind(addr).await?;
    let a = l.local_addr()?;
    Ok((l, a))
}
