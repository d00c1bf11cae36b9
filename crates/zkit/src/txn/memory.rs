//! [`MemoryResource`]: a [`Resource`] that keeps its prepared set in memory and votes yes, for
//! benchmarks and tests that measure the coordination rather than a disk or a database.

use std::collections::HashSet;

use futures::future::BoxFuture;
use futures::FutureExt as _;

use super::{Resource, TxnError, Vote};

/// An in-memory resource: remembers what it prepared (its in-doubt list) until the decision is
/// applied, and votes yes to everything.
///
/// Not durable: a process that restarts forgets what it prepared, so a participant on it
/// cannot resolve its in-doubt transactions after a crash. Use it where nothing real is
/// committed (`zkit bench txn`, `zkit-bench failover`); [`super::FileResource`] is the
/// durable one.
#[derive(Debug, Default)]
pub struct MemoryResource {
    prepared: std::sync::Mutex<HashSet<String>>,
}

impl MemoryResource {
    fn prepared(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.prepared.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Resource for MemoryResource {
    fn prepare<'a>(
        &'a self,
        txid: &'a str,
        _payload: &'a [u8],
    ) -> BoxFuture<'a, Result<Vote, TxnError>> {
        self.prepared().insert(txid.to_string());
        async { Ok(Vote::Yes) }.boxed()
    }

    fn commit<'a>(&'a self, txid: &'a str) -> BoxFuture<'a, Result<(), TxnError>> {
        self.prepared().remove(txid);
        async { Ok(()) }.boxed()
    }

    fn abort<'a>(&'a self, txid: &'a str) -> BoxFuture<'a, Result<(), TxnError>> {
        self.prepared().remove(txid);
        async { Ok(()) }.boxed()
    }

    fn in_doubt(&self) -> BoxFuture<'_, Result<Vec<String>, TxnError>> {
        let list = self.prepared().iter().cloned().collect();
        async move { Ok(list) }.boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn prepared_is_in_doubt_until_applied() {
        let r = MemoryResource::default();
        assert_eq!(r.prepare("t1", b"x").await, Ok(Vote::Yes));
        assert_eq!(r.prepare("t2", b"y").await, Ok(Vote::Yes));
        let mut in_doubt = r.in_doubt().await.expect("in doubt");
        in_doubt.sort();
        assert_eq!(in_doubt, ["t1", "t2"]);
        r.commit("t1").await.expect("commit");
        r.abort("t2").await.expect("abort");
        assert!(r.in_doubt().await.expect("in doubt").is_empty());
    }
}
