//! Counters shared by the connections, the pipeline and the four-letter words: packets in and
//! out, request latency, live connections. Plain atomics and one small mutex-guarded registry;
//! nothing here blocks for long or touches the data tree.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use zkit_core::ConnId;

/// Server-wide counters.
#[derive(Debug)]
pub(crate) struct Metrics {
    pub started: Instant,
    pub packets_received: AtomicU64,
    pub packets_sent: AtomicU64,
    /// Requests handed to the pipeline and not yet answered.
    pub outstanding: AtomicI64,
    latency: Mutex<Latency>,
    connections: Mutex<BTreeMap<ConnId, Arc<ConnMetrics>>>,
}

/// Per-connection counters (the `stat` word's client list).
#[derive(Debug)]
pub(crate) struct ConnMetrics {
    pub peer: SocketAddr,
    pub session: AtomicI64,
    pub received: AtomicU64,
    pub sent: AtomicU64,
}

#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Latency {
    pub min_ms: u64,
    pub max_ms: u64,
    pub total_ms: u64,
    pub count: u64,
}

impl Latency {
    pub fn avg_ms(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.total_ms as f64 / self.count as f64
        }
    }
}

impl Metrics {
    pub fn new() -> Self {
        Metrics {
            started: Instant::now(),
            packets_received: AtomicU64::new(0),
            packets_sent: AtomicU64::new(0),
            outstanding: AtomicI64::new(0),
            latency: Mutex::new(Latency::default()),
            connections: Mutex::new(BTreeMap::new()),
        }
    }

    pub fn add_connection(&self, conn: ConnId, peer: SocketAddr) -> Arc<ConnMetrics> {
        let m = Arc::new(ConnMetrics {
            peer,
            session: AtomicI64::new(0),
            received: AtomicU64::new(0),
            sent: AtomicU64::new(0),
        });
        lock(&self.connections).insert(conn, m.clone());
        m
    }

    pub fn remove_connection(&self, conn: ConnId) {
        lock(&self.connections).remove(&conn);
    }

    pub fn connections(&self) -> Vec<Arc<ConnMetrics>> {
        lock(&self.connections).values().cloned().collect()
    }

    pub fn record_latency(&self, elapsed: Duration) {
        let ms = u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX);
        let mut l = lock(&self.latency);
        l.min_ms = if l.count == 0 { ms } else { l.min_ms.min(ms) };
        l.max_ms = l.max_ms.max(ms);
        l.total_ms = l.total_ms.saturating_add(ms);
        l.count += 1;
    }

    pub fn latency(&self) -> Latency {
        *lock(&self.latency)
    }

    /// `srst`: zero the packet and latency counters, as ZooKeeper's `resetStats`.
    pub fn reset(&self) {
        self.packets_received.store(0, Relaxed);
        self.packets_sent.store(0, Relaxed);
        *lock(&self.latency) = Latency::default();
        for c in self.connections() {
            c.received.store(0, Relaxed);
            c.sent.store(0, Relaxed);
        }
    }
}

/// Locks, ignoring poisoning: counters stay meaningful even if a holder panicked.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
