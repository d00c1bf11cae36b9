//! Network faults between the clients and the server: each client connects through its own
//! `zkit_testkit::FaultProxy`, so a fault can hit every link (drops, resets, stalls) or one
//! client's (a partition: its proxy black-holes both directions, as a real partition does).

use std::sync::Arc;

use futures::future::BoxFuture;
use futures::FutureExt as _;
use zkit_testkit::FaultProxy;

use super::{Fault, Nemesis};
use crate::Error;

/// The per-client proxies, by client number.
#[derive(Debug, Clone)]
pub struct ProxyNemesis {
    /// Proxy `i` carries client `i`'s connections.
    pub proxies: Vec<Arc<FaultProxy>>,
}

impl ProxyNemesis {
    fn proxy(&self, client: u32) -> Result<&FaultProxy, Error> {
        self.proxies
            .get(client as usize)
            .map(|p| &**p)
            .ok_or_else(|| Error::Setup(format!("no proxy for client {client}")))
    }
}

impl Nemesis for ProxyNemesis {
    fn name(&self) -> &'static str {
        "proxy"
    }

    fn handles(&self, fault: &Fault) -> bool {
        matches!(
            fault,
            Fault::DropConnections
                | Fault::ResetConnections
                | Fault::StallConnections { .. }
                | Fault::Partition { .. }
        )
    }

    fn inject<'a>(&'a mut self, fault: &'a Fault) -> BoxFuture<'a, Result<String, Error>> {
        async move {
            match fault {
                Fault::DropConnections => {
                    let n: usize = self.proxies.iter().map(|p| p.open_connections()).sum();
                    for p in &self.proxies {
                        p.drop_connections().await;
                    }
                    Ok(format!("dropped {n} connections"))
                }
                Fault::ResetConnections => {
                    let n: usize = self.proxies.iter().map(|p| p.open_connections()).sum();
                    for p in &self.proxies {
                        p.reset_connections().await;
                    }
                    Ok(format!("reset {n} connections"))
                }
                Fault::StallConnections { .. } => {
                    let n: usize = self.proxies.iter().map(|p| p.stall_connections()).sum();
                    Ok(format!("stalled {n} connections"))
                }
                Fault::Partition { client, .. } => {
                    self.proxy(*client)?.pause();
                    Ok(format!("client {client} cut off"))
                }
                _ => Ok(String::new()),
            }
        }
        .boxed()
    }

    fn heal<'a>(&'a mut self, fault: &'a Fault) -> BoxFuture<'a, Result<String, Error>> {
        async move {
            match fault {
                Fault::StallConnections { .. } => {
                    for p in &self.proxies {
                        p.unstall();
                    }
                    Ok("unstalled".into())
                }
                Fault::Partition { client, .. } => {
                    self.proxy(*client)?.resume();
                    Ok(format!("client {client} reconnected"))
                }
                _ => Ok(String::new()),
            }
        }
        .boxed()
    }
}
