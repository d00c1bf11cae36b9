//! Counters on one znode: [`SharedCount`] (Curator's `SharedCount`: a 4-byte big-endian `i32`,
//! versioned compare-and-set) and [`AtomicCounter`] (Curator's `DistributedAtomicLong`: an
//! 8-byte big-endian `i64`, optimistic add retried on `BadVersion`). Both use Curator's
//! encodings, so Java and zkit processes can share a counter.
//!
//! The pure part ([`decode_i32`], [`decode_i64`], [`plan_add`]) is unit-tested without a server.

use zkit_client as zk;

use crate::error::{Error, Result};
use crate::retry::{retry, RetryPolicy};
use crate::session::Session;

/// Decodes Curator's `SharedCount` bytes (4-byte big-endian).
///
/// # Errors
/// [`Error::Unexpected`] for any other length.
pub fn decode_i32(bytes: &[u8]) -> Result<i32> {
    <[u8; 4]>::try_from(bytes)
        .map(i32::from_be_bytes)
        .map_err(|_| Error::Unexpected(format!("a SharedCount is 4 bytes, got {}", bytes.len())))
}

/// Decodes Curator's `DistributedAtomicLong` bytes (8-byte big-endian; empty or missing = 0).
///
/// # Errors
/// [`Error::Unexpected`] for any other length.
pub fn decode_i64(bytes: &[u8]) -> Result<i64> {
    if bytes.is_empty() {
        return Ok(0);
    }
    <[u8; 8]>::try_from(bytes)
        .map(i64::from_be_bytes)
        .map_err(|_| Error::Unexpected(format!("an atomic long is 8 bytes, got {}", bytes.len())))
}

/// The result of an [`AtomicCounter`] operation: the value before and after.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AtomicValue {
    /// Before.
    pub pre: i64,
    /// After.
    pub post: i64,
}

/// Plans `current + delta`: the new value and its bytes.
///
/// # Errors
/// [`Error::BadArguments`] on overflow, [`Error::Unexpected`] for undecodable current bytes.
pub fn plan_add(current: &[u8], delta: i64) -> Result<(AtomicValue, [u8; 8])> {
    let pre = decode_i64(current)?;
    let post = pre
        .checked_add(delta)
        .ok_or_else(|| Error::BadArguments(format!("{pre} + {delta} overflows")))?;
    Ok((AtomicValue { pre, post }, post.to_be_bytes()))
}

/// A versioned value of a [`SharedCount`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VersionedCount {
    /// The count.
    pub value: i32,
    /// The node's data version, for [`SharedCount::try_set`].
    pub version: i32,
}

fn persistent() -> zk::CreateOptions<'static> {
    zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all())
}

/// Creates `path` (and parents) with `data` if missing; an existing node is left alone.
async fn ensure(client: &zk::Client, path: &str, data: &[u8]) -> Result<()> {
    match client.create(path, data, &persistent()).await {
        Ok(_) | Err(zk::Error::NodeExists) => Ok(()),
        Err(zk::Error::NoNode) => {
            if let Some((parent, _)) = path.rsplit_once('/') {
                if !parent.is_empty() {
                    client.mkdir(parent, &persistent()).await?;
                }
            }
            match client.create(path, data, &persistent()).await {
                Ok(_) | Err(zk::Error::NodeExists) => Ok(()),
                Err(err) => Err(err.into()),
            }
        }
        Err(err) => Err(err.into()),
    }
}

/// Curator's `SharedCount`. See the module docs.
#[derive(Debug, Clone)]
pub struct SharedCount {
    session: Session,
    path: String,
    policy: RetryPolicy,
}

impl SharedCount {
    /// Opens the count at `path`, creating it with `seed` if it does not exist.
    ///
    /// # Errors
    /// ZooKeeper errors of the create.
    pub async fn open(session: &Session, path: &str, seed: i32) -> Result<Self> {
        let path = crate::config::resolve_key("/", path)?;
        let policy = RetryPolicy::default();
        retry(&policy, || async {
            ensure(&session.client(), &path, &seed.to_be_bytes()).await
        })
        .await?;
        Ok(SharedCount {
            session: session.clone(),
            path,
            policy,
        })
    }

    /// The current value and version.
    ///
    /// # Errors
    /// ZooKeeper errors; [`Error::Unexpected`] if the node does not hold 4 bytes.
    pub async fn get(&self) -> Result<VersionedCount> {
        let (data, stat) =
            retry(&self.policy, || self.session.client().get_data(&self.path)).await?;
        Ok(VersionedCount {
            value: decode_i32(&data)?,
            version: stat.version,
        })
    }

    /// Sets `value` if the version is still `expected.version`; `false` if someone else wrote
    /// first (re-read with [`SharedCount::get`] and decide again).
    ///
    /// # Errors
    /// ZooKeeper errors other than `BadVersion`.
    pub async fn try_set(&self, expected: VersionedCount, value: i32) -> Result<bool> {
        let client = self.session.client();
        match client
            .set_data(&self.path, &value.to_be_bytes(), Some(expected.version))
            .await
        {
            Ok(_) => Ok(true),
            Err(zk::Error::BadVersion) => Ok(false),
            Err(err) => Err(err.into()),
        }
    }

    /// Sets `value` unconditionally.
    ///
    /// # Errors
    /// ZooKeeper errors.
    pub async fn set(&self, value: i32) -> Result<()> {
        retry(&self.policy, || {
            self.session
                .client()
                .set_data(&self.path, &value.to_be_bytes(), None)
        })
        .await
        .map(|_| ())
    }

    /// Waits until the version differs from `seen.version` and returns the new value.
    ///
    /// # Errors
    /// ZooKeeper errors.
    pub async fn wait_change(&self, seen: VersionedCount) -> Result<VersionedCount> {
        loop {
            let client = self.session.client();
            let (data, stat, watcher) = client.get_and_watch_data(&self.path).await?;
            if stat.version != seen.version {
                return Ok(VersionedCount {
                    value: decode_i32(&data)?,
                    version: stat.version,
                });
            }
            // Any event (or a session event) leads to a re-read: spurious wake-ups are harmless.
            watcher.changed().await;
        }
    }
}

/// Curator's `DistributedAtomicLong` (optimistic mode). See the module docs.
#[derive(Debug, Clone)]
pub struct AtomicCounter {
    session: Session,
    path: String,
    policy: RetryPolicy,
}

impl AtomicCounter {
    /// A counter at `path` (created as 0 on first use).
    ///
    /// # Errors
    /// [`Error::BadArguments`] for an invalid path.
    pub fn new(session: &Session, path: &str) -> Result<Self> {
        Ok(AtomicCounter {
            session: session.clone(),
            path: crate::config::resolve_key("/", path)?,
            policy: RetryPolicy::default(),
        })
    }

    /// The current value (0 if the node does not exist).
    ///
    /// # Errors
    /// ZooKeeper errors; [`Error::Unexpected`] for undecodable data.
    pub async fn get(&self) -> Result<i64> {
        match retry(&self.policy, || self.session.client().get_data(&self.path)).await {
            Ok((data, _)) => decode_i64(&data),
            Err(Error::NoNode) => Ok(0),
            Err(err) => Err(err),
        }
    }

    /// Adds `delta` atomically: read, compute, `set_data` with the read version, again on
    /// `BadVersion`. After a connection loss the outcome of the last attempt is unknown and
    /// the error is returned rather than risking a double add.
    ///
    /// # Errors
    /// ZooKeeper errors (recoverable ones included, see above); [`Error::BadArguments`] on
    /// overflow.
    pub async fn add(&self, delta: i64) -> Result<AtomicValue> {
        loop {
            let client = self.session.client();
            let (data, version) = match client.get_data(&self.path).await {
                Ok((data, stat)) => (data, Some(stat.version)),
                Err(zk::Error::NoNode) => (Vec::new(), None),
                Err(err) => return Err(err.into()),
            };
            let (value, bytes) = plan_add(&data, delta)?;
            let outcome = match version {
                Some(version) => client
                    .set_data(&self.path, &bytes, Some(version))
                    .await
                    .map(|_| ()),
                None => match ensure(&client, &self.path, &0i64.to_be_bytes()).await {
                    // Created as 0 (by us or a racer): go round and add to it.
                    Ok(()) => Err(zk::Error::BadVersion),
                    Err(err) => return Err(err),
                },
            };
            match outcome {
                Ok(()) => return Ok(value),
                Err(zk::Error::BadVersion) => continue,
                Err(err) => return Err(err.into()),
            }
        }
    }

    /// `add(1)`.
    ///
    /// # Errors
    /// As [`AtomicCounter::add`].
    pub async fn increment(&self) -> Result<AtomicValue> {
        self.add(1).await
    }

    /// `add(-1)`.
    ///
    /// # Errors
    /// As [`AtomicCounter::add`].
    pub async fn decrement(&self) -> Result<AtomicValue> {
        self.add(-1).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodings_match_curator() {
        assert_eq!(decode_i32(&7i32.to_be_bytes()).unwrap(), 7);
        assert!(decode_i32(b"abc").is_err());
        assert_eq!(decode_i64(&(-3i64).to_be_bytes()).unwrap(), -3);
        assert_eq!(decode_i64(b"").unwrap(), 0);
        assert!(decode_i64(&[0; 4]).is_err());
    }

    #[test]
    fn add_plans_and_refuses_overflow() {
        let (v, bytes) = plan_add(&41i64.to_be_bytes(), 1).unwrap();
        assert_eq!(v, AtomicValue { pre: 41, post: 42 });
        assert_eq!(bytes, 42i64.to_be_bytes());
        assert!(plan_add(&i64::MAX.to_be_bytes(), 1).is_err());
        assert_eq!(plan_add(b"", -2).unwrap().0.post, -2);
    }
}
