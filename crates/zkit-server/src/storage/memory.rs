//! [`MemoryStorage`]: keeps nothing. The server's state lives only in the core's memory and is
//! gone when the process exits — the right thing for tests and demos, and the default until a
//! durable implementation is configured.

use zkit_core::{Config, Core, Txn};

use super::api::{Durable, Storage, StorageFuture};

/// A [`Storage`] that persists nothing and recovers nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct MemoryStorage;

impl Storage for MemoryStorage {
    fn recover_core(&mut self, config: Config, now: i64) -> StorageFuture<'_, Core> {
        Box::pin(async move { Ok(Core::new(config, now)) })
    }

    fn submit(&mut self, _txns: &[Txn]) -> Durable {
        Box::pin(std::future::ready(Ok(())))
    }
}
