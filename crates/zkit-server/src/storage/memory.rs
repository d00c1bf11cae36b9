//! [`MemoryStorage`]: keeps nothing. The server's state lives only in the core's memory and is
//! gone when the process exits — the right thing for tests and demos, and the default until a
//! durable implementation is configured.

use super::{Durable, Storage, StorageFuture};
use zkit_core::Txn;

/// A [`Storage`] that persists nothing and recovers nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct MemoryStorage;

impl Storage for MemoryStorage {
    fn recover(&mut self) -> StorageFuture<'_, Vec<Txn>> {
        Box::pin(async { Ok(Vec::new()) })
    }

    fn persist<'a>(&'a mut self, _txns: &'a [Txn]) -> StorageFuture<'a, ()> {
        Box::pin(async { Ok(()) })
    }

    fn submit(&mut self, _txns: &[Txn]) -> Durable {
        Box::pin(std::future::ready(Ok(())))
    }
}
