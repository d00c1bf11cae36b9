//! What every task of one run shares: the config, the recorder, the stop signal, the
//! connect strings.

use std::time::Duration;

use tokio_util::sync::CancellationToken as Cancel;

use super::config::RunConfig;
use super::recorder::Recorder;
use crate::client::{self, ClientConfig, ClientHandle};
use crate::executor::Layout;
use crate::nemesis::client::ClientPids;
use crate::Error;

pub(super) struct Shared {
    pub(super) config: RunConfig,
    pub(super) recorder: Recorder,
    pub(super) stop: Cancel,
    pub(super) layout: Layout,
    /// Per-client connect strings (through its proxy).
    pub(super) connects: Vec<String>,
    /// The server's own address.
    pub(super) direct: String,
    /// The process clients' pids (for SIGSTOP).
    pub(super) pids: ClientPids,
}

impl Shared {
    pub(super) fn client_config(&self, connect: &str) -> ClientConfig {
        ClientConfig {
            connect: connect.to_owned(),
            root: self.layout.root.clone(),
            session_timeout: self.config.session_timeout,
            // Well inside the runner's op timeout: an acquire that succeeded after the runner
            // gave up on it would hold the lock unrecorded.
            lock_timeout: self.config.op_timeout / 2,
            sync_reads: self.config.ensemble.is_some(),
        }
    }

    pub(super) async fn spawn_client(&self, c: u32) -> Result<ClientHandle, Error> {
        let cfg = self.client_config(&self.connects[c as usize]);
        if self.config.workload.process_clients() {
            client::spawn_process(&self.config.verify_bin, &cfg, self.config.op_timeout * 3).await
        } else {
            client::spawn_task(&cfg).await
        }
    }

    /// Keeps client `c`'s pid (process clients) for the client nemesis.
    pub(super) fn note_pid(&self, c: u32, handle: &ClientHandle) {
        if let Some(pid) = handle.pid() {
            crate::lock_vec(&self.pids).insert(c, pid);
        }
    }

    pub(super) async fn spawn_client_until_stop(&self, c: u32) -> Option<ClientHandle> {
        loop {
            match self.spawn_client(c).await {
                Ok(h) => return Some(h),
                Err(e) => {
                    tracing::debug!(client = c, %e, "client start failed; retrying");
                    if self.stop.is_cancelled() {
                        return None;
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        }
    }
}
