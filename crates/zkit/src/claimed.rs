//! What the queues with claims share ([`crate::queue::Claim`],
//! [`crate::distributed_queue::QueueClaim`]): acking a claimed item, and naming the end of the
//! claiming session.
//!
//! A claim is an ephemeral node of the claiming session; while it is held only its holder
//! deletes the item, so after an unknown outcome "item gone" means the holder's multi
//! committed.

use zkit_client as zk;

use crate::error::{Error, Result};

/// Deletes the claimed item at `item_path` and its claim node `claim_path` in one `multi` on
/// the claiming session's `client`, together with the caller's `ops`. After an unknown outcome
/// it asks, on the same session (the client waits for its reconnect; an expired session
/// answers SessionExpired), whether the item is gone: gone means the multi committed; present
/// means it did not, and it is tried again.
///
/// # Errors
/// An error of one of the operations (nothing committed, the claim is still held);
/// [`Error::SessionLost`] when the claiming session ended; other ZooKeeper errors.
pub(crate) async fn ack<F>(
    client: &zk::Client,
    item_path: &str,
    claim_path: &str,
    ops: F,
) -> Result<()>
where
    F: Fn(&mut zk::MultiWriter<'_>) -> std::result::Result<(), zk::Error>,
{
    loop {
        let mut multi = client.new_multi_writer();
        multi.add_delete(item_path, None)?;
        multi.add_delete(claim_path, None)?;
        ops(&mut multi)?;
        let err = match multi.commit().await {
            Ok(_) => return Ok(()),
            Err(err) => Error::from(zk::Error::from(err)),
        };
        if !err.is_recoverable() {
            return Err(session_lost_if_gone(err));
        }
        loop {
            match client.check_stat(item_path).await {
                Ok(None) => return Ok(()),
                Ok(Some(_)) => break,
                Err(err) => {
                    let err = Error::from(err);
                    if !err.is_recoverable() {
                        return Err(session_lost_if_gone(err));
                    }
                }
            }
        }
    }
}

/// The claiming session ended: report it as [`Error::SessionLost`] (the claim went with it).
pub(crate) fn session_lost_if_gone(err: Error) -> Error {
    match err {
        Error::SessionExpired | Error::Closed => Error::SessionLost,
        other => other,
    }
}
