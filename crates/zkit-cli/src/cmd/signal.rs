//! The shutdown signal every long-running command (`serve`, `ui`, `bookie`, `ledger`) waits
//! for. A leaf module, so that these commands do not import one another for it.

#[cfg(unix)]
use anyhow::Context as _;
use anyhow::Result;

/// Resolves on SIGTERM or SIGINT. The handlers are installed when this is called, not when the
/// future is first polled.
#[cfg(unix)]
pub(crate) fn shutdown_signal() -> Result<impl std::future::Future<Output = ()>> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).context("cannot listen for SIGTERM")?;
    let mut int = signal(SignalKind::interrupt()).context("cannot listen for SIGINT")?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    })
}

#[cfg(not(unix))]
pub(crate) fn shutdown_signal() -> Result<impl std::future::Future<Output = ()>> {
    Ok(async {
        let _ = tokio::signal::ctrl_c().await;
    })
}
