//! What one compare run measures: its sizes and each server's figures.

use std::time::Duration;

use crate::load::{LoadReport, LockRow};

/// Sizes of one compare run.
#[derive(Debug, Clone)]
pub(super) struct CompareSizes {
    pub(super) seconds: u64,
    pub(super) sync_seconds: u64,
    /// Unmeasured seconds of the fixed offered load before the measured ones.
    pub(super) warmup_seconds: u64,
    pub(super) nodes: usize,
    pub(super) idle_sessions: usize,
    pub(super) watchers: usize,
    pub(super) idle_window: Duration,
    pub(super) fsync_samples: usize,
}

/// Figures of one server.
#[derive(Debug, Default, Clone)]
pub(super) struct ServerFigures {
    pub(super) rtt: Option<LoadReport>,
    pub(super) sync_write: Option<LoadReport>,
    pub(super) sync_read: Option<LoadReport>,
    pub(super) pipelined: Vec<LoadReport>,
    /// The server's CPU time (user + system) during each of `pipelined`, in the same order.
    pub(super) pipelined_cpu: Vec<Option<Duration>>,
    /// `zkit bench lock`, one client: acquire+release cycles of one lock.
    pub(super) lock: Option<LockRow>,
    pub(super) phase1_rss: Option<u64>,
    pub(super) phase1_cpu: Option<Duration>,
    pub(super) rated: Option<LoadReport>,
    pub(super) offered_rate: Option<u64>,
    pub(super) populate: Option<(usize, Duration)>,
    pub(super) nodes_rss: Option<u64>,
    pub(super) nodes_disk: Option<u64>,
    pub(super) idle_rss: Option<u64>,
    pub(super) idle_cpu_percent: Option<f64>,
    pub(super) storm: Option<Duration>,
    pub(super) storm_delivered: Option<usize>,
    pub(super) final_disk: Option<u64>,
}
