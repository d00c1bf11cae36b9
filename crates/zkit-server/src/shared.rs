//! [`Shared`]: what every connection task, the four-letter words and the admin endpoint hold
//! (the configuration, the metrics, the pipeline's queue, the shutdown signal).

use std::sync::Arc;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::config::ServerConfig;
use crate::limits::ConnectionCounts;
use crate::metrics::Metrics;
use crate::to_core::ToCore;

/// What every connection shares.
pub(crate) struct Shared {
    pub config: ServerConfig,
    pub metrics: Arc<Metrics>,
    pub to_core: mpsc::Sender<ToCore>,
    pub shutdown: CancellationToken,
    /// Live connections per client IP (`maxClientCnxns`).
    pub conn_counts: Arc<ConnectionCounts>,
}
