//! [`ConfigStore`]: reads and writes configuration values, one znode per key under a prefix.
//!
//! The classic key-value store write checks `exists` and then creates or sets, which races
//! with a concurrent writer (both see "absent", one create fails). Here a write is a single
//! idempotent upsert: create, and on `NodeExists` set. Every operation is retried on connection
//! loss with the store's [`RetryPolicy`]; all of them are idempotent, so a retry after an
//! uncertain attempt cannot do harm (a retried upsert writes the same value again).
//!
//! It does not watch: that is [`crate::config::ConfigWatcher`].

use serde::de::DeserializeOwned;
use serde::Serialize;
use zkit_client as zk;

use crate::error::{Error, Result};
use crate::format::Format;
use crate::protected::join;
use crate::retry::{retry, RetryPolicy};
use crate::session::Session;

/// A value with the version information of its node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Versioned {
    /// The node's data.
    pub value: Vec<u8>,
    /// The node's data version (for [`ConfigStore::compare_and_set`]).
    pub version: i32,
    /// The zxid of the last write.
    pub mzxid: i64,
}

impl Versioned {
    fn new(value: Vec<u8>, stat: &zk::Stat) -> Self {
        Versioned {
            value,
            version: stat.version,
            mzxid: stat.mzxid,
        }
    }
}

/// Resolves a key: an absolute znode path is taken as is, anything else is relative to
/// `prefix`. Empty path components and trailing slashes are rejected.
///
/// # Errors
/// [`Error::BadArguments`] for an empty key, a relative prefix, or a path ZooKeeper would
/// reject (empty component, `.` or `..`, trailing `/`).
pub fn resolve_key(prefix: &str, key: &str) -> Result<String> {
    if !prefix.starts_with('/') {
        return Err(Error::BadArguments(format!(
            "prefix must be absolute: {prefix:?}"
        )));
    }
    let path = if key.starts_with('/') {
        key.to_string()
    } else if key.is_empty() {
        return Err(Error::BadArguments("empty key".into()));
    } else {
        let base = prefix.trim_end_matches('/');
        join(if base.is_empty() { "/" } else { base }, key)
    };
    if path != "/"
        && path[1..]
            .split('/')
            .any(|c| c.is_empty() || c == "." || c == "..")
    {
        return Err(Error::BadArguments(format!("invalid path {path:?}")));
    }
    Ok(path)
}

/// Flattens a tree of values (parsed TOML or JSON) into nodes, parents first: a table/object is
/// a node without data whose entries are its children; any other value is a leaf whose data is
/// the string itself for strings, and the JSON text for numbers, booleans and arrays.
///
/// Paths are relative to the tree's root and start with `/` (the root itself is not included).
///
/// # Errors
/// [`Error::BadArguments`] for a key that is not a valid znode name (empty, `.`, `..`, or
/// containing `/`), or a `null` value.
pub fn flatten_tree(tree: &serde_json::Value) -> Result<Vec<(String, Option<Vec<u8>>)>> {
    fn walk(
        base: &str,
        value: &serde_json::Value,
        out: &mut Vec<(String, Option<Vec<u8>>)>,
    ) -> Result<()> {
        let serde_json::Value::Object(map) = value else {
            return Err(Error::BadArguments("the top level must be a table".into()));
        };
        for (key, child) in map {
            if key.is_empty() || key == "." || key == ".." || key.contains('/') {
                return Err(Error::BadArguments(format!(
                    "invalid key {key:?} under {base:?}"
                )));
            }
            let path = format!("{base}/{key}");
            match child {
                serde_json::Value::Object(_) => {
                    out.push((path.clone(), None));
                    walk(&path, child, out)?;
                }
                serde_json::Value::String(s) => out.push((path, Some(s.as_bytes().to_vec()))),
                serde_json::Value::Null => {
                    return Err(Error::BadArguments(format!("null value at {path:?}")))
                }
                other => out.push((path, Some(other.to_string().into_bytes()))),
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    walk("", tree, &mut out)?;
    Ok(out)
}

/// A key/value configuration store under one prefix (default `/config` in the CLI).
#[derive(Debug, Clone)]
pub struct ConfigStore {
    pub(crate) session: Session,
    prefix: String,
    pub(crate) policy: RetryPolicy,
}

impl ConfigStore {
    /// A store whose relative keys live under `prefix` (an absolute path, created on the first
    /// write if missing). Operations retry with the default [`RetryPolicy`].
    ///
    /// # Errors
    /// [`Error::BadArguments`] if `prefix` is not absolute.
    pub fn new(session: &Session, prefix: &str) -> Result<Self> {
        resolve_key(prefix, "/")?;
        if prefix != "/" {
            resolve_key("/", prefix)?;
        }
        Ok(ConfigStore {
            session: session.clone(),
            prefix: prefix.to_string(),
            policy: RetryPolicy::default(),
        })
    }

    /// Replaces the retry policy.
    pub fn with_retry_policy(mut self, policy: RetryPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// The prefix relative keys are resolved against.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The session the store works on.
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// The znode path of `key` (see [`resolve_key`]).
    ///
    /// # Errors
    /// As [`resolve_key`].
    pub fn path_of(&self, key: &str) -> Result<String> {
        resolve_key(&self.prefix, key)
    }

    /// Writes `value` at `key`, creating the node and its parents if needed: create, and on
    /// `NodeExists` set (a race-free upsert). Returns the node's new version.
    ///
    /// # Errors
    /// Non-recoverable ZooKeeper errors (e.g. [`Error::NoAuth`], [`Error::NoChildrenForEphemerals`]),
    /// or the last recoverable one when the retry policy gives up.
    ///
    /// # Cancellation safety
    /// A dropped write may or may not have been applied.
    pub async fn write(&self, key: &str, value: &[u8]) -> Result<Versioned> {
        let path = self.path_of(key)?;
        retry(&self.policy, || async {
            let client = self.session.client();
            let stat = upsert(&client, &path, value).await?;
            Ok::<_, Error>(Versioned::new(value.to_vec(), &stat))
        })
        .await
    }

    /// Reads `key`: `None` if it does not exist.
    ///
    /// # Errors
    /// As [`ConfigStore::write`].
    pub async fn read(&self, key: &str) -> Result<Option<Versioned>> {
        let path = self.path_of(key)?;
        retry(&self.policy, || async {
            match self.session.client().get_data(&path).await {
                Ok((value, stat)) => Ok(Some(Versioned::new(value, &stat))),
                Err(zk::Error::NoNode) => Ok(None),
                Err(err) => Err(Error::from(err)),
            }
        })
        .await
    }

    /// Reads `key` and leaves a one-shot watch on it (the classic `read(path, watcher)`): the
    /// watcher fires on the next change or deletion, or on creation when the key did not exist.
    /// For a stream of every change use [`crate::config::ConfigWatcher`] instead: between the
    /// firing of a one-shot watch and the next read, intermediate values are skipped.
    ///
    /// # Errors
    /// As [`ConfigStore::write`].
    pub async fn read_and_watch(
        &self,
        key: &str,
    ) -> Result<(Option<Versioned>, zk::OneshotWatcher)> {
        let path = self.path_of(key)?;
        retry(&self.policy, || async {
            let client = self.session.client();
            match client.get_and_watch_data(&path).await {
                Ok((value, stat, watcher)) => Ok((Some(Versioned::new(value, &stat)), watcher)),
                Err(zk::Error::NoNode) => {
                    // Watch for creation instead; if it was created in between, read again.
                    let (stat, watcher) = client.check_and_watch_stat(&path).await?;
                    match stat {
                        None => Ok((None, watcher)),
                        Some(_) => Err(Error::ConnectionLoss),
                    }
                }
                Err(err) => Err(Error::from(err)),
            }
        })
        .await
    }

    /// Sets `key` to `value` only if its version is `expected_version` (`-1`: any version; the
    /// node must exist). Returns the new version.
    ///
    /// # Errors
    /// [`Error::BadVersion`] when someone else wrote first, [`Error::NoNode`] when the key does
    /// not exist, otherwise as [`ConfigStore::write`]. A retry after connection loss may report
    /// `BadVersion` for a write that was in fact applied by the first attempt; callers that must
    /// know re-read and compare values.
    pub async fn compare_and_set(
        &self,
        key: &str,
        value: &[u8],
        expected_version: i32,
    ) -> Result<Versioned> {
        let path = self.path_of(key)?;
        let expected = (expected_version >= 0).then_some(expected_version);
        retry(&self.policy, || async {
            let stat = self
                .session
                .client()
                .set_data(&path, value, expected)
                .await?;
            Ok::<_, Error>(Versioned::new(value.to_vec(), &stat))
        })
        .await
    }

    /// Deletes `key` (any version). Deleting a missing key is not an error.
    ///
    /// # Errors
    /// [`Error::NotEmpty`] if the key has children, otherwise as [`ConfigStore::write`].
    pub async fn delete(&self, key: &str) -> Result<()> {
        let path = self.path_of(key)?;
        retry(&self.policy, || async {
            match self.session.client().delete(&path, None).await {
                Ok(()) | Err(zk::Error::NoNode) => Ok(()),
                Err(err) => Err(Error::from(err)),
            }
        })
        .await
    }

    /// Writes a value serialized as JSON.
    ///
    /// # Errors
    /// [`Error::BadArguments`] if it cannot be serialized, otherwise as [`ConfigStore::write`].
    pub async fn write_json<T: Serialize>(&self, key: &str, value: &T) -> Result<Versioned> {
        let bytes = Format::Json.encode(&format!("{key:?}"), value)?;
        self.write(key, &bytes).await
    }

    /// Reads a JSON value; `None` if the key does not exist.
    ///
    /// # Errors
    /// [`Error::Unexpected`] if the stored bytes are not valid JSON for `T`.
    pub async fn read_json<T: DeserializeOwned>(&self, key: &str) -> Result<Option<T>> {
        let Some(v) = self.read(key).await? else {
            return Ok(None);
        };
        Format::Json.decode(&format!("{key:?}"), &v.value).map(Some)
    }

    /// Writes a value serialized as TOML (it must serialize to a table).
    ///
    /// # Errors
    /// [`Error::BadArguments`] if it cannot be serialized, otherwise as [`ConfigStore::write`].
    pub async fn write_toml<T: Serialize>(&self, key: &str, value: &T) -> Result<Versioned> {
        let bytes = Format::Toml.encode(&format!("{key:?}"), value)?;
        self.write(key, &bytes).await
    }

    /// Reads a TOML value; `None` if the key does not exist.
    ///
    /// # Errors
    /// [`Error::Unexpected`] if the stored bytes are not valid TOML for `T`.
    pub async fn read_toml<T: DeserializeOwned>(&self, key: &str) -> Result<Option<T>> {
        let Some(v) = self.read(key).await? else {
            return Ok(None);
        };
        Format::Toml.decode(&format!("{key:?}"), &v.value).map(Some)
    }
}

/// Create-or-set, creating missing parents as empty persistent nodes: create, and on
/// `NodeExists` set (a node deleted in between is created again). Returns the node's stat.
/// Also the write of a typed [`crate::model::Model`].
pub(crate) async fn upsert(client: &zk::Client, path: &str, value: &[u8]) -> Result<zk::Stat> {
    let options = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
    let mut made_parents = false;
    loop {
        match client.create(path, value, &options).await {
            Ok((stat, _)) => return Ok(stat),
            Err(zk::Error::NodeExists) => {
                return match client.set_data(path, value, None).await {
                    Ok(stat) => Ok(stat),
                    // Deleted between our create and set: create again.
                    Err(zk::Error::NoNode) => continue,
                    Err(err) => Err(err.into()),
                };
            }
            Err(zk::Error::NoNode) if !made_parents => {
                if let Some((parent, _)) = path.rsplit_once('/') {
                    if !parent.is_empty() {
                        client.mkdir(parent, &options).await?;
                    }
                }
                made_parents = true;
            }
            Err(err) => return Err(err.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_resolve_against_the_prefix() {
        assert_eq!(resolve_key("/config", "db/url").unwrap(), "/config/db/url");
        assert_eq!(resolve_key("/config/", "x").unwrap(), "/config/x");
        assert_eq!(resolve_key("/", "x").unwrap(), "/x");
        assert_eq!(resolve_key("/config", "/abs/k").unwrap(), "/abs/k");
        for bad in ["", "a//b", "a/", "../x", "a/./b"] {
            assert!(resolve_key("/config", bad).is_err(), "{bad:?}");
        }
        assert!(resolve_key("config", "x").is_err());
    }

    #[test]
    fn trees_flatten_parents_first_with_scalars_as_text() {
        let tree: serde_json::Value = toml::from_str(
            r#"
            name = "svc"
            [db]
            port = 5432
            tls = true
            "#,
        )
        .unwrap();
        let nodes = flatten_tree(&tree).unwrap();
        let find = |p: &str| nodes.iter().position(|(path, _)| path == p).unwrap();
        assert!(find("/db") < find("/db/port"));
        assert_eq!(nodes[find("/db")].1, None);
        assert_eq!(nodes[find("/db/port")].1.as_deref(), Some(&b"5432"[..]));
        assert_eq!(nodes[find("/db/tls")].1.as_deref(), Some(&b"true"[..]));
        assert_eq!(nodes[find("/name")].1.as_deref(), Some(&b"svc"[..]));
        let bad: serde_json::Value = serde_json::json!({"a/b": "x"});
        assert!(flatten_tree(&bad).is_err());
        assert!(flatten_tree(&serde_json::json!("x")).is_err());
    }
}
