//! Limits against abusive clients: connections per client IP (`maxClientCnxns`) and requests in
//! flight per connection (back-pressure). The frame-size limit (`jute.maxbuffer`) lives with the
//! frame decoder; session-timeout bounds are clamped by the core.
//!
//! Nothing here closes a well-behaved connection or blocks the pipeline: a connection over the
//! per-IP limit is refused at accept time (as Apache's `NIOServerCnxnFactory` does: "Too many
//! connections from /ip - max is N"); a connection with too many requests in flight simply stops
//! being read until replies have been written to it, so a flooding client slows itself down and
//! its backlog stays in its own socket buffers, not in the server's memory.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

/// The limits a server enforces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// `maxClientCnxns`: concurrent connections from one IP address; 0 = unlimited
    /// (ZooKeeper's default: 60).
    pub max_client_cnxns: u32,
    /// Requests read from one connection and not yet answered before the server stops reading
    /// from it (Apache throttles on `zookeeper.globalOutstandingLimit`, default 1000).
    pub max_outstanding_per_connection: usize,
    /// Bytes of replies and watch events (estimated, before encoding) queued for one
    /// connection and not yet taken by its writer. A client that stops reading its socket
    /// while events keep firing would otherwise grow the server's memory without limit; over
    /// this bound the connection is closed (its session lives on, as after any disconnect).
    pub max_outbound_bytes: usize,
}

/// Default [`Limits::max_outbound_bytes`]: 64 MiB, room for a large watch storm on one
/// connection that reads at its own pace.
pub const DEFAULT_MAX_OUTBOUND_BYTES: usize = 64 << 20;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_client_cnxns: 60,
            max_outstanding_per_connection: 1000,
            max_outbound_bytes: DEFAULT_MAX_OUTBOUND_BYTES,
        }
    }
}

impl Limits {
    /// The defaults without a per-IP connection limit (tests open many loopback connections).
    pub fn unlimited_connections() -> Self {
        Limits {
            max_client_cnxns: 0,
            ..Limits::default()
        }
    }
}

/// Live connections per client IP.
#[derive(Debug, Default)]
pub(crate) struct ConnectionCounts {
    per_ip: Mutex<HashMap<IpAddr, u32>>,
}

/// Holds one connection's place in [`ConnectionCounts`]; dropping it frees the place.
#[derive(Debug)]
pub(crate) struct ConnectionSlot {
    counts: Arc<ConnectionCounts>,
    ip: IpAddr,
}

impl ConnectionCounts {
    /// A slot for a new connection from `ip`, or `None` when `ip` already has `max`
    /// connections (`max` 0 = unlimited).
    pub fn admit(self: &Arc<Self>, ip: IpAddr, max: u32) -> Option<ConnectionSlot> {
        let mut per_ip = lock(&self.per_ip);
        let n = per_ip.entry(ip).or_insert(0);
        if max != 0 && *n >= max {
            return None;
        }
        *n += 1;
        Some(ConnectionSlot {
            counts: self.clone(),
            ip,
        })
    }

    /// Connections from `ip` now.
    #[cfg(test)]
    pub fn count(&self, ip: IpAddr) -> u32 {
        lock(&self.per_ip).get(&ip).copied().unwrap_or(0)
    }
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        let mut per_ip = lock(&self.counts.per_ip);
        if let Some(n) = per_ip.get_mut(&self.ip) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                per_ip.remove(&self.ip);
            }
        }
    }
}

/// Locks, ignoring poisoning: a count stays meaningful even if a holder panicked.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_ip_limit_and_release() {
        let counts = Arc::new(ConnectionCounts::default());
        let a: IpAddr = [10, 0, 0, 1].into();
        let b: IpAddr = [10, 0, 0, 2].into();
        let first = counts.admit(a, 2).expect("first");
        let second = counts.admit(a, 2).expect("second");
        assert!(counts.admit(a, 2).is_none(), "third from the same ip");
        let other = counts.admit(b, 2).expect("another ip has its own budget");
        drop(first);
        let again = counts.admit(a, 2).expect("a freed slot is reusable");
        assert_eq!(counts.count(a), 2);
        drop((second, again, other));
        assert_eq!(counts.count(a), 0);
        assert_eq!(counts.count(b), 0);
        // 0 = unlimited.
        let many: Vec<_> = (0..100).filter_map(|_| counts.admit(a, 0)).collect();
        assert_eq!(many.len(), 100);
    }
}
