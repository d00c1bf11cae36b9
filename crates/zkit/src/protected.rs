//! Protected sequential creates (Curator's `withProtection()`): a sequential create is not
//! idempotent, so after a connection loss we cannot just send it again. The node name carries a
//! client-chosen UUID, `<parent>/_c_<uuid>-<name>NNNNNNNNNN`, and after an uncertain attempt we
//! list the parent and look for our UUID before creating again. When we give up, a background
//! task deletes a node that may have been created after all (the orphan).
//!
//! The same UUID search is what makes lock acquisition cancellation-safe: a dropped acquire only
//! has to remember its UUID ([`spawn_orphan_cleanup`]). Requests on one ZooKeeper connection are
//! answered in order, so a listing sent after a create always sees that create's node.
//!
//! This module only creates and finds nodes; it knows nothing of locks.

use std::time::Duration;

use futures::future::Either;
use zkit_client as zk;

use crate::error::{Error, Result};
use crate::retry::RetryPolicy;
use crate::session::Session;

/// Curator's protected-name marker: protected nodes are named `_c_<uuid>-<name><sequence>`.
pub const PROTECTED_PREFIX: &str = "_c_";

/// The name prefix a protected node of `uuid` starts with: `_c_<uuid>-`.
pub fn protected_marker(uuid: &str) -> String {
    format!("{PROTECTED_PREFIX}{uuid}-")
}

/// The sequence number of a sequential node name: its last 10 characters, which must be ASCII
/// digits (Curator's `StandardLockInternalsDriver.fixForSorting` relies on the same suffix).
/// `None` for a name that is not sequential.
pub fn sequence_of(name: &str) -> Option<i64> {
    let bytes = name.as_bytes();
    if bytes.len() < 10 {
        return None;
    }
    let suffix = &bytes[bytes.len() - 10..];
    if !suffix.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(suffix).ok()?.parse().ok()
}

/// Splits `"/a/b/lock-"` into `("/a/b", "lock-")`. The parent of `"/lock-"` is `"/"`.
pub fn split_prefix(path_prefix: &str) -> Result<(&str, &str)> {
    if !path_prefix.starts_with('/') {
        return Err(Error::BadArguments(format!(
            "path prefix must be absolute: {path_prefix:?}"
        )));
    }
    let (parent, name) = path_prefix
        .rsplit_once('/')
        .ok_or_else(|| Error::BadArguments(format!("bad path prefix {path_prefix:?}")))?;
    if name.starts_with(PROTECTED_PREFIX) {
        return Err(Error::BadArguments(format!(
            "name must not start with {PROTECTED_PREFIX:?}: {name:?}"
        )));
    }
    Ok((if parent.is_empty() { "/" } else { parent }, name))
}

/// Joins a parent path and a child name.
pub fn join(parent: &str, child: &str) -> String {
    if parent == "/" {
        format!("/{child}")
    } else {
        format!("{parent}/{child}")
    }
}

/// A node made by [`create_protected_sequential_with`].
#[derive(Debug, Clone, PartialEq)]
pub struct CreatedNode {
    /// Full path of the node.
    pub path: String,
    /// Its name (last path component), `_c_<uuid>-<name>NNNNNNNNNN`.
    pub name: String,
    /// Its sequence number.
    pub sequence: i64,
    /// The session generation it was created in (see [`Session::generation`]).
    pub generation: u64,
    /// The ephemeral owner recorded by the server (0 for persistent nodes).
    pub ephemeral_owner: i64,
}

/// How [`create_protected_sequential_with`] creates.
#[derive(Debug, Clone)]
pub struct ProtectedCreate {
    /// The UUID to embed; also what [`spawn_orphan_cleanup`] searches for.
    pub uuid: String,
    /// `EphemeralSequential` or `PersistentSequential`.
    pub mode: zk::CreateMode,
    /// TTL (only with `PersistentSequential`: makes a PERSISTENT_SEQUENTIAL_WITH_TTL node).
    pub ttl: Option<Duration>,
    /// Create missing parents (as persistent nodes) instead of failing with `NoNode`.
    pub create_parents: bool,
    /// How long to keep trying after recoverable errors.
    pub policy: RetryPolicy,
}

impl ProtectedCreate {
    /// Ephemeral sequential, fresh UUID, parents created, default retry policy.
    pub fn ephemeral() -> Self {
        ProtectedCreate {
            uuid: uuid::Uuid::new_v4().to_string(),
            mode: zk::CreateMode::EphemeralSequential,
            ttl: None,
            create_parents: true,
            policy: RetryPolicy::default(),
        }
    }
}

impl Session {
    /// Creates `<parent>/_c_<uuid>-<name>NNNNNNNNNN` for `path_prefix = "<parent>/<name>"`
    /// exactly once despite connection losses: see [`create_protected_sequential_with`]. Missing
    /// parents are created; the default [`RetryPolicy`] applies.
    ///
    /// # Errors
    /// As [`create_protected_sequential_with`].
    pub async fn create_protected_sequential(
        &self,
        path_prefix: &str,
        data: &[u8],
        mode: zk::CreateMode,
    ) -> Result<CreatedNode> {
        let options = ProtectedCreate {
            mode,
            ..ProtectedCreate::ephemeral()
        };
        create_protected_sequential_with(self, path_prefix, data, &options).await
    }
}

/// Finds the child of `parent` made with `uuid`, if any.
///
/// `sync` first: after a reconnect the session may be served by another ensemble member, which
/// need not have applied the uncertain create yet (the session's last-seen zxid does not cover
/// a reply it never got). The sync's reply comes after that member has applied everything the
/// leader had committed or proposed when the sync reached it; a create still on its way from
/// the old member to the leader can arrive later, a window no client-side step closes.
async fn find_by_uuid(client: &zk::Client, parent: &str, uuid: &str) -> Result<Option<String>> {
    let marker = protected_marker(uuid);
    match client.sync(parent).await {
        Ok(()) | Err(zk::Error::NoNode) => {}
        Err(err) => return Err(err.into()),
    }
    match client.list_children(parent).await {
        Ok(children) => Ok(children.into_iter().find(|c| c.starts_with(&marker))),
        Err(zk::Error::NoNode) => Ok(None),
        Err(err) => Err(err.into()),
    }
}

/// The protected create. After an attempt whose outcome is unknown (connection loss, timeout,
/// session expiry) the next attempt first lists the parent for a child carrying `options.uuid`
/// and returns it instead of creating a second node. An ephemeral node found that way is only
/// accepted if its `ephemeralOwner` is the current session (a node left by an older session of
/// ours is deleted and created again; compare CURATOR-696).
///
/// # Errors
/// The first non-recoverable error, or the last recoverable one when `options.policy` gives up;
/// in that case a background task deletes the node if it was created after all.
/// [`Error::Unimplemented`] with an explanation when the server refuses TTL nodes.
///
/// # Cancellation safety
/// Not by itself: a dropped future may leave the node behind. Callers that may be cancelled call
/// [`spawn_orphan_cleanup`] with the same UUID from a drop guard (as the locks do).
pub async fn create_protected_sequential_with(
    session: &Session,
    path_prefix: &str,
    data: &[u8],
    options: &ProtectedCreate,
) -> Result<CreatedNode> {
    create_protected(session, path_prefix, data, options, false).await
}

/// The result of [`create_protected_and_list`]: our node, and the parent's children as listed
/// right after our create (when that listing was answered).
#[derive(Debug, Clone)]
pub(crate) struct CreatedAndListed {
    pub node: CreatedNode,
    pub children: Option<Vec<String>>,
    /// The `release_first` node was deleted in the same transaction as our create.
    pub released: bool,
}

/// A protected create whose first attempt is pipelined with a listing of the parent: both
/// requests leave back to back on one connection, so the uncontended lock costs one round trip.
/// ZooKeeper answers the requests of a connection in order, and the listing is processed after
/// the create, so it contains our node (find it by name: the sequence is in the create's reply).
/// When the first create fails (missing parent, connection loss) it continues exactly as
/// [`create_protected_sequential_with`] would, uncertainty included.
///
/// With `release_first`, the first attempt is one transaction that deletes that node (a lock
/// node this session holds and releases) and creates ours: a release followed by the next
/// acquisition costs one write instead of two. If that transaction fails, nothing of it was
/// applied (or, after a connection loss, perhaps all of it): `released` is then `false`, the
/// caller still owns the deletion, and the create continues as without `release_first`.
pub(crate) async fn create_protected_and_list(
    session: &Session,
    path_prefix: &str,
    data: &[u8],
    options: &ProtectedCreate,
    release_first: Option<&str>,
) -> Result<CreatedAndListed> {
    let (parent, name) = split_prefix(path_prefix)?;
    let protected_name_prefix = format!("{}{name}", protected_marker(&options.uuid));
    let protected_path = join(parent, &protected_name_prefix);
    let create_options = create_options_of(options);
    let (client, generation) = session.client_and_generation();
    let ephemeral = options.mode == zk::CreateMode::EphemeralSequential;
    // Both requests are written to the connection when these calls return (zkit-client sends
    // at call time, not at first poll), in this order. Each arm yields the created node's
    // name and `ephemeralOwner`.
    let create = match release_first {
        Some(release) => {
            let mut writer = client.new_multi_writer();
            writer.add_delete(release, None)?;
            writer.add_create(&protected_path, data, &create_options)?;
            let commit = writer.commit();
            let session_id = client.session_id().0;
            Either::Left(async move {
                let results = commit.await.map_err(zk::Error::from)?;
                match results.into_iter().nth(1) {
                    Some(zk::MultiWriteResult::Create { path, stat }) => {
                        let name = path.rsplit('/').next().unwrap_or_default().to_string();
                        // A successful create on this session's connection is owned by this
                        // session; servers with ZOOKEEPER-4026 send no stat inside a multi
                        // (the client reports an all-zero one).
                        let owner = if stat == zk::Stat::default() && ephemeral {
                            session_id
                        } else {
                            stat.ephemeral_owner
                        };
                        Ok((name, owner))
                    }
                    other => Err(zk::Error::UnexpectedError(format!(
                        "multi create: unexpected result {other:?}"
                    ))),
                }
            })
        }
        None => {
            let create = client.create(&protected_path, data, &create_options);
            let protected_name_prefix = &protected_name_prefix;
            Either::Right(async move {
                let (stat, sequence) = create.await?;
                let name = format!("{protected_name_prefix}{:010}", sequence.into_i64());
                Ok((name, stat.ephemeral_owner))
            })
        }
    };
    let list = client.list_children(parent);
    let (created, listed) = futures::join!(create, list);
    let uncertain = match created {
        Ok((name, ephemeral_owner)) => {
            let Some(sequence) = sequence_of(&name) else {
                return Err(Error::Unexpected(format!(
                    "the server named a sequential node {name:?}"
                )));
            };
            return Ok(CreatedAndListed {
                node: CreatedNode {
                    path: join(parent, &name),
                    name,
                    sequence,
                    generation,
                    ephemeral_owner,
                },
                children: listed.ok(),
                released: release_first.is_some(),
            });
        }
        Err(zk::Error::NoNode) => false,
        Err(err) => {
            let err = Error::from(err);
            if err.is_recoverable() || matches!(err, Error::SessionExpired | Error::SessionLost) {
                true
            } else if release_first.is_some() {
                // The transaction's delete may be what failed (say, the node is not ours to
                // delete any more); the create alone decides.
                false
            } else {
                return Err(err);
            }
        }
    };
    let node = create_protected(session, path_prefix, data, options, uncertain).await?;
    Ok(CreatedAndListed {
        node,
        children: None,
        released: false,
    })
}

fn create_options_of(options: &ProtectedCreate) -> zk::CreateOptions<'static> {
    let mut create_options = options.mode.with_acls(zk::Acls::anyone_all());
    if let Some(ttl) = options.ttl {
        create_options = create_options.with_ttl(ttl);
    }
    create_options
}

/// [`create_protected_sequential_with`], starting uncertain (a previous attempt's outcome is
/// unknown) when `uncertain`.
async fn create_protected(
    session: &Session,
    path_prefix: &str,
    data: &[u8],
    options: &ProtectedCreate,
    mut uncertain: bool,
) -> Result<CreatedNode> {
    let (parent, name) = split_prefix(path_prefix)?;
    let protected_name_prefix = format!("{}{name}", protected_marker(&options.uuid));
    let protected_path = join(parent, &protected_name_prefix);
    let create_options = create_options_of(options);
    let start = tokio::time::Instant::now();
    let mut retries = 0u32;
    let mut made_parents = false;
    loop {
        let (client, generation) = session.client_and_generation();
        let attempt: Result<CreatedNode> = async {
            if uncertain {
                if let Some(found) = find_by_uuid(&client, parent, &options.uuid).await? {
                    let path = join(parent, &found);
                    let stat = client.check_stat(&path).await?;
                    let owner = stat.map(|s| s.ephemeral_owner).unwrap_or(0);
                    let ephemeral = options.mode == zk::CreateMode::EphemeralSequential;
                    match (stat, sequence_of(&found)) {
                        (Some(_), Some(sequence))
                            if !ephemeral || owner == client.session_id().0 =>
                        {
                            tracing::debug!(%path, "protected create: found our node after an uncertain attempt");
                            return Ok(CreatedNode {
                                path,
                                name: found,
                                sequence,
                                generation,
                                ephemeral_owner: owner,
                            });
                        }
                        (Some(_), _) => {
                            // Ours by UUID but from a dead session: its owner is going away.
                            match client.delete(&path, None).await {
                                Ok(()) | Err(zk::Error::NoNode) => {}
                                Err(err) => return Err(err.into()),
                            }
                        }
                        (None, _) => {}
                    }
                }
            }
            let (stat, sequence) = client.create(&protected_path, data, &create_options).await?;
            let sequence = sequence.into_i64();
            let name = format!("{protected_name_prefix}{sequence:010}");
            Ok(CreatedNode {
                path: join(parent, &name),
                name,
                sequence,
                generation,
                ephemeral_owner: stat.ephemeral_owner,
            })
        }
        .await;
        let err = match attempt {
            Ok(node) => return Ok(node),
            Err(Error::NoNode) if options.create_parents && !made_parents && parent != "/" => {
                made_parents = true;
                let persistent = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
                match client.mkdir(parent, &persistent).await {
                    Ok(()) => continue,
                    Err(err) => Error::from(err),
                }
            }
            Err(Error::Unimplemented(_)) if options.ttl.is_some() => {
                return Err(Error::Unimplemented(
                    "the server refused a TTL node: Apache ZooKeeper needs \
                     -Dzookeeper.extendedTypesEnabled=true"
                        .into(),
                ))
            }
            Err(err) => err,
        };
        // Unknown outcome: connection loss, timeout, or the session went away mid-request (a
        // TTL node would then survive it).
        if err.is_recoverable() || matches!(err, Error::SessionExpired | Error::SessionLost) {
            uncertain = true;
            let sleep = if err.is_recoverable() {
                options.policy.next_sleep(retries, start.elapsed())
            } else {
                None
            };
            if let Some(sleep) = sleep {
                retries += 1;
                tokio::time::sleep(sleep).await;
                continue;
            }
            spawn_orphan_cleanup(session, parent, &options.uuid);
        }
        return Err(err);
    }
}

/// Deletes, in the background, every child of `parent` named with `uuid` (see module docs).
/// Used when a protected create gave up and when a lock acquisition or guard is dropped. It keeps
/// trying across connection losses and session replacements until the node is gone, the session
/// is closed, or 10 minutes have passed. Requires a tokio runtime; without one it does nothing
/// (ephemeral nodes then go with their session, TTL nodes with their TTL).
pub fn spawn_orphan_cleanup(session: &Session, parent: &str, uuid: &str) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        tracing::warn!(parent, uuid, "no tokio runtime: orphan cleanup skipped");
        return;
    };
    let session = session.clone();
    let parent = parent.to_string();
    let uuid = uuid.to_string();
    runtime.spawn(async move {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(600);
        let policy = RetryPolicy::ExponentialBackoff {
            base: Duration::from_millis(50),
            max_sleep: Duration::from_secs(2),
            max_retries: u32::MAX,
        };
        let mut retries = 0u32;
        while tokio::time::Instant::now() < deadline && !session.is_closed() {
            match delete_by_uuid(&session, &parent, &uuid).await {
                Ok(()) => return,
                Err(err) if err.is_state() && err != Error::NotEmpty => return,
                Err(err) => {
                    tracing::debug!(error = %err, %parent, %uuid, "orphan cleanup retrying");
                    let sleep = policy
                        .next_sleep(retries.min(30), Duration::ZERO)
                        .unwrap_or(Duration::from_secs(1));
                    retries = retries.saturating_add(1);
                    let closed = session.closed_token();
                    tokio::select! {
                        _ = closed.cancelled() => return,
                        _ = tokio::time::sleep(sleep) => {}
                    }
                }
            }
        }
    });
}

/// Deletes every child of `parent` whose name carries `uuid`.
pub async fn delete_by_uuid(session: &Session, parent: &str, uuid: &str) -> Result<()> {
    let client = session.client();
    let marker = protected_marker(uuid);
    // As in `find_by_uuid`: an orphan made through another member must be visible here.
    match client.sync(parent).await {
        Ok(()) | Err(zk::Error::NoNode) => {}
        Err(err) => return Err(err.into()),
    }
    let children = match client.list_children(parent).await {
        Ok(children) => children,
        Err(zk::Error::NoNode) => return Ok(()),
        Err(err) => return Err(err.into()),
    };
    for child in children.iter().filter(|c| c.starts_with(&marker)) {
        match client.delete(&join(parent, child), None).await {
            Ok(()) | Err(zk::Error::NoNode) => {}
            Err(err) => return Err(err.into()),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_sequences() {
        assert_eq!(
            sequence_of("_c_0f1e-lock-0000000042"),
            Some(42),
            "Curator mutex name"
        );
        assert_eq!(sequence_of("x__READ__0000000007"), Some(7));
        assert_eq!(sequence_of("0000000001"), Some(1));
        assert_eq!(sequence_of("lock-12"), None);
        assert_eq!(sequence_of("leases"), None);
        assert_eq!(sequence_of("lock-00000000x1"), None);
        assert_eq!(split_prefix("/a/b/lock-").unwrap(), ("/a/b", "lock-"));
        assert_eq!(split_prefix("/lock-").unwrap(), ("/", "lock-"));
        assert!(split_prefix("relative/lock-").is_err());
        assert_eq!(join("/", "x"), "/x");
        assert_eq!(join("/a", "x"), "/a/x");
        assert_eq!(protected_marker("u"), "_c_u-");
    }
}
