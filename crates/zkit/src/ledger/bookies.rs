//! Connections to bookies, shared by every writer and reader of one [`super::LedgerClient`]:
//! one pipelined [`BookieClient`] per bookie id (`HOST:PORT`), made on first use and made
//! again once it failed. A connection attempt in progress is shared by everyone asking.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::sync::OnceCell;
use zkit_bookie::{BookieClient, ClientError, ClientOptions};

type Slot = Arc<OnceCell<Result<BookieClient, ClientError>>>;

/// Bookie connections by id. Cheap to clone.
#[derive(Clone)]
pub struct BookiePool {
    options: ClientOptions,
    slots: Arc<Mutex<HashMap<String, Slot>>>,
}

impl std::fmt::Debug for BookiePool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BookiePool").finish_non_exhaustive()
    }
}

/// Resolves a bookie id (`IP:PORT` or `HOST:PORT`) to an address.
///
/// # Errors
/// [`ClientError::Connect`] when it does not resolve.
pub async fn resolve(bookie: &str) -> Result<SocketAddr, ClientError> {
    if let Ok(a) = bookie.parse() {
        return Ok(a);
    }
    let bad = |reason: String| ClientError::Connect {
        addr: SocketAddr::from(([0, 0, 0, 0], 0)),
        reason: format!("bookie id {bookie:?}: {reason}"),
    };
    tokio::net::lookup_host(bookie)
        .await
        .map_err(|e| bad(e.to_string()))?
        .next()
        .ok_or_else(|| bad("no address".into()))
}

impl BookiePool {
    /// An empty pool whose connections use `options`.
    pub fn new(options: ClientOptions) -> BookiePool {
        BookiePool {
            options,
            slots: Arc::default(),
        }
    }

    /// The client options.
    pub fn options(&self) -> &ClientOptions {
        &self.options
    }

    /// The live connection to `bookie`, if there is one now (no connecting).
    pub fn get_now(&self, bookie: &str) -> Option<BookieClient> {
        let slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        match slots.get(bookie).and_then(|s| s.get()) {
            Some(Ok(c)) if !c.is_closed() => Some(c.clone()),
            _ => None,
        }
    }

    /// A live connection to `bookie`, connecting if there is none.
    ///
    /// # Errors
    /// The connection failure (the next call tries again).
    pub async fn get(&self, bookie: &str) -> Result<BookieClient, ClientError> {
        let slot = {
            let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            let slot = slots.entry(bookie.to_string()).or_default();
            if let Some(Ok(c)) = slot.get() {
                if !c.is_closed() {
                    return Ok(c.clone());
                }
            }
            // Failed or closed: start over with a fresh slot.
            if slot.get().is_some() {
                *slot = Slot::default();
            }
            Arc::clone(slot)
        };
        let options = self.options.clone();
        let got = slot
            .get_or_init(|| async move {
                let addr = resolve(bookie).await?;
                BookieClient::connect(addr, options).await
            })
            .await
            .clone();
        if got.is_err() {
            let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            if slots.get(bookie).is_some_and(|s| Arc::ptr_eq(s, &slot)) {
                slots.remove(bookie);
            }
        }
        got
    }

    /// Closes and forgets the connection to `bookie` (its requests in flight fail).
    pub fn forget(&self, bookie: &str) {
        let slot = self
            .slots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(bookie);
        if let Some(Some(Ok(c))) = slot.as_ref().map(|s| s.get()) {
            c.close();
        }
    }

    /// Closes every connection.
    pub fn close_all(&self) {
        let slots: Vec<Slot> = self
            .slots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain()
            .map(|(_, s)| s)
            .collect();
        for s in slots {
            if let Some(Ok(c)) = s.get() {
                c.close();
            }
        }
    }
}
