//! The bookie's garbage collector task.

use std::sync::Arc;
use std::time::Duration;

use tracing::{info, warn};

use super::shared::Shared;
use crate::registration::RegistrationManager;

/// Deletes the data of ledgers whose metadata is gone and reclaims its space, every `every`
/// (BookKeeper's `GarbageCollectorThread` with `ScanAndCompareGarbageCollector` and
/// `verifyMetadataOnGc`: a ledger is deleted only when the metadata store says it does not
/// exist; an error or a slow answer keeps it until the next pass). Ledger metadata is created
/// before a writer's first add, so a ledger being written is never taken for garbage.
pub(super) async fn garbage_collector(
    shared: Arc<Shared>,
    registration: Arc<dyn RegistrationManager>,
    every: Duration,
) {
    loop {
        tokio::select! {
            () = shared.stop.cancelled() => return,
            () = tokio::time::sleep(every) => {}
        }
        let started = std::time::Instant::now();
        let ids = shared.lock().core.ledger_ids();
        let mut deleted = 0u64;
        for id in ids {
            let exists = tokio::select! {
                () = shared.stop.cancelled() => return,
                r = tokio::time::timeout(GC_METADATA_TIMEOUT, registration.ledger_exists(id)) => r,
            };
            match exists {
                Ok(Ok(false)) => {}
                Ok(Ok(true)) => continue,
                Ok(Err(e)) => {
                    warn!(error = %e, ledger_id = id, "garbage collection: metadata lookup failed");
                    continue;
                }
                Err(_) => {
                    warn!(
                        ledger_id = id,
                        "garbage collection: metadata lookup timed out"
                    );
                    continue;
                }
            }
            let record = {
                let mut locked = shared.lock();
                locked.core.delete(id)
            };
            if let Some(record) = record {
                match shared.storage.submit(vec![record]).await {
                    Ok(()) => {
                        deleted += 1;
                        info!(ledger_id = id, "deleted ledger garbage collected");
                    }
                    Err(e) => warn!(error = %e, ledger_id = id, "cannot journal a ledger delete"),
                }
            }
        }
        if let Err(e) = shared.storage.collect_garbage().await {
            warn!(error = %e, deleted, "entry log garbage collection failed");
        }
        shared.metrics.record_gc_run(started.elapsed(), deleted);
    }
}

/// The longest the garbage collector waits for one metadata lookup.
const GC_METADATA_TIMEOUT: Duration = Duration::from_secs(10);
