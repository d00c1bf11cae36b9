//! SIGSTOP/SIGCONT of client processes ([`Fault::PauseClient`]): a stopped client holds its
//! connections and its session but does nothing; a ledger writer stopped long enough is
//! fenced by a recovery meanwhile, and must be refused once it continues.

use std::collections::HashMap;
use std::sync::{Arc, Mutex as StdMutex};

use futures::future::BoxFuture;
use futures::FutureExt as _;

use super::server::signal;
use super::{Fault, Nemesis};
use crate::Error;

/// The process ids of the run's process clients, by client number (kept up to date by the
/// client loops as they respawn them).
pub type ClientPids = Arc<StdMutex<HashMap<u32, u32>>>;

/// Pauses and continues client processes.
#[derive(Debug)]
pub struct ClientNemesis {
    /// The clients' pids.
    pub pids: ClientPids,
    paused: Option<u32>,
}

impl ClientNemesis {
    /// The nemesis of the clients in `pids`.
    pub fn new(pids: ClientPids) -> ClientNemesis {
        ClientNemesis { pids, paused: None }
    }
}

impl Nemesis for ClientNemesis {
    fn name(&self) -> &'static str {
        "client"
    }

    fn handles(&self, fault: &Fault) -> bool {
        matches!(fault, Fault::PauseClient { .. })
    }

    fn inject<'a>(&'a mut self, fault: &'a Fault) -> BoxFuture<'a, Result<String, Error>> {
        async move {
            self.paused = None;
            let Fault::PauseClient { client, .. } = fault else {
                return Ok(String::new());
            };
            let pid = crate::lock_vec(&self.pids).get(client).copied();
            let Some(pid) = pid else {
                return Err(Error::Setup(format!("client {client} is not a process")));
            };
            signal(pid, "STOP")?;
            self.paused = Some(pid);
            Ok(format!("stopped client {client} (pid {pid})"))
        }
        .boxed()
    }

    fn heal<'a>(&'a mut self, _fault: &'a Fault) -> BoxFuture<'a, Result<String, Error>> {
        async move {
            match self.paused.take() {
                Some(pid) => {
                    // The process may have died meanwhile: nothing to continue then.
                    let _ = signal(pid, "CONT");
                    Ok(format!("continued pid {pid}"))
                }
                None => Ok(String::new()),
            }
        }
        .boxed()
    }
}
