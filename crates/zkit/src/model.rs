//! Typed nodes: [`Model<T>`], a znode holding one value of a Rust type (like Curator's
//! `ModeledFramework` in curator-x-async: a `ModelSpec` of a path, a serializer and a schema,
//! and typed `read` / `set` / `update` / `watch` / versioned writes on it).
//!
//! The value is encoded as JSON or TOML ([`Format`]). With a [`Schema`] (a name and a
//! version), the node holds an envelope carrying both next to the value, and every read checks
//! them: a reader of `config v2` that finds `config v1` (or something without an envelope)
//! gets [`Error::SchemaMismatch`] naming both, instead of a confusing decode error or, worse, a
//! successful decode of the wrong shape. The envelope is
//!
//! ```json
//! {"schema":"config","version":2,"value":{ ... }}
//! ```
//!
//! (the same three keys in TOML). Without a schema, the node holds the encoded value alone —
//! the format [`crate::config::ConfigStore`]'s `read_json`/`write_json`/`read_toml`/`write_toml`
//! use, which are built on [`Format`]; [`crate::config::ConfigStore::model`] gives a typed
//! `Model` of one key.
//!
//! Writes are versioned: [`Model::compare_and_set`] writes only over the version you read, and
//! [`Model::update`] is the read-modify-CAS loop. The codec ([`Model::encode`],
//! [`Model::decode`]) is pure and unit-tested without a server.
//!
//! ```no_run
//! # async fn demo(session: zkit::Session) -> zkit::Result<()> {
//! use zkit::model::{Format, Model, Schema};
//! #[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq)]
//! struct Limits { max_conns: u32 }
//!
//! let limits: Model<Limits> = Model::new(&session, "/app/limits", Format::Json)?
//!     .with_schema(Schema::new("limits", 1));
//! limits.set(&Limits { max_conns: 100 }).await?;
//! let raised = limits.update(|old| Ok(Limits { max_conns: old.map_or(100, |l| l.max_conns) * 2 })).await?;
//! assert_eq!(raised.value.max_conns, 200);
//! # Ok(()) }
//! ```

use std::marker::PhantomData;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use zkit_client as zk;

use crate::cache::{CacheEvent, ChildData, NodeCache};
use crate::error::{Error, Result};
use crate::retry::{retry, RetryPolicy};
use crate::session::Session;

pub use crate::format::Format;

/// A schema: a name and a version, stored with every value and checked on every read.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Schema {
    /// What the value is.
    pub name: String,
    /// Which shape of it; bump when the type changes incompatibly.
    pub version: u32,
}

impl Schema {
    /// A schema `name` at `version`.
    pub fn new(name: &str, version: u32) -> Self {
        Schema {
            name: name.to_string(),
            version,
        }
    }
}

impl std::fmt::Display for Schema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} v{}", self.name, self.version)
    }
}

#[derive(Serialize)]
struct EnvelopeOut<'a, T: ?Sized> {
    schema: &'a str,
    version: u32,
    value: &'a T,
}

#[derive(Deserialize)]
struct EnvelopeHeader {
    schema: String,
    version: u32,
}

#[derive(Deserialize)]
struct EnvelopeIn<T> {
    value: T,
}

/// The pure encoding of a [`Model`]: a [`Format`] and an optional [`Schema`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Codec {
    /// The value's encoding.
    pub format: Format,
    /// The schema stored and checked with every value, if any.
    pub schema: Option<Schema>,
}

impl Codec {
    /// The bytes stored for `value`; `path` names the node in errors.
    ///
    /// # Errors
    /// [`Error::BadArguments`] when it does not serialize.
    pub fn encode<T: Serialize + ?Sized>(&self, path: &str, value: &T) -> Result<Vec<u8>> {
        let what = format!("{path:?}");
        match &self.schema {
            None => self.format.encode(&what, value),
            Some(schema) => self.format.encode(
                &what,
                &EnvelopeOut {
                    schema: &schema.name,
                    version: schema.version,
                    value,
                },
            ),
        }
    }

    /// The value stored as `bytes`, its schema checked first; `path` names the node in errors.
    ///
    /// # Errors
    /// [`Error::SchemaMismatch`] for another schema name or version, or no envelope where a
    /// schema is expected; [`Error::Unexpected`] when the bytes do not decode.
    pub fn decode<T: DeserializeOwned>(&self, path: &str, bytes: &[u8]) -> Result<T> {
        let what = format!("{path:?}");
        let Some(schema) = &self.schema else {
            return self.format.decode(&what, bytes);
        };
        let mismatch = |found: String| Error::SchemaMismatch {
            path: path.to_string(),
            expected: schema.to_string(),
            found,
        };
        let header: EnvelopeHeader = self
            .format
            .decode(&what, bytes)
            .map_err(|_| mismatch("no schema".into()))?;
        if header.schema != schema.name || header.version != schema.version {
            return Err(mismatch(format!("{} v{}", header.schema, header.version)));
        }
        let envelope: EnvelopeIn<T> = self.format.decode(&what, bytes)?;
        Ok(envelope.value)
    }
}

/// A decoded value with its node's version information.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Versioned<T> {
    /// The value.
    pub value: T,
    /// The node's data version (for [`Model::compare_and_set`]).
    pub version: i32,
    /// The zxid of the node's last write.
    pub mzxid: i64,
}

/// A typed znode. See the module docs.
pub struct Model<T> {
    session: Session,
    path: String,
    codec: Codec,
    policy: RetryPolicy,
    _type: PhantomData<fn() -> T>,
}

impl<T> Clone for Model<T> {
    fn clone(&self) -> Self {
        Model {
            session: self.session.clone(),
            path: self.path.clone(),
            codec: self.codec.clone(),
            policy: self.policy.clone(),
            _type: PhantomData,
        }
    }
}

impl<T> std::fmt::Debug for Model<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Model")
            .field("path", &self.path)
            .field("codec", &self.codec)
            .finish()
    }
}

impl<T: Serialize + DeserializeOwned> Model<T> {
    /// A model of the node `path`, encoded in `format`, without a schema.
    ///
    /// # Errors
    /// [`Error::BadArguments`] for an invalid path.
    pub fn new(session: &Session, path: &str, format: Format) -> Result<Self> {
        Ok(Model {
            session: session.clone(),
            path: crate::config::resolve_key("/", path)?,
            codec: Codec {
                format,
                schema: None,
            },
            policy: RetryPolicy::default(),
            _type: PhantomData,
        })
    }

    /// Stores and checks `schema` with every value.
    pub fn with_schema(mut self, schema: Schema) -> Self {
        self.codec.schema = Some(schema);
        self
    }

    /// Replaces the retry policy of the idempotent operations (reads, unconditional sets,
    /// deletes).
    pub fn with_retry_policy(mut self, policy: RetryPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// The node's path.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The schema, if any.
    pub fn schema(&self) -> Option<&Schema> {
        self.codec.schema.as_ref()
    }

    /// The codec.
    pub fn codec(&self) -> &Codec {
        &self.codec
    }

    /// The bytes stored for `value` ([`Codec::encode`]).
    ///
    /// # Errors
    /// [`Error::BadArguments`] when it does not serialize.
    pub fn encode(&self, value: &T) -> Result<Vec<u8>> {
        self.codec.encode(&self.path, value)
    }

    /// The value stored as `bytes` ([`Codec::decode`]).
    ///
    /// # Errors
    /// As [`Codec::decode`].
    pub fn decode(&self, bytes: &[u8]) -> Result<T> {
        self.codec.decode(&self.path, bytes)
    }

    fn versioned(&self, data: &[u8], stat: &zk::Stat) -> Result<Versioned<T>> {
        Ok(Versioned {
            value: self.decode(data)?,
            version: stat.version,
            mzxid: stat.mzxid,
        })
    }

    /// Reads the value (`None`: the node does not exist).
    ///
    /// # Errors
    /// As [`Model::decode`]; ZooKeeper errors after retries.
    pub async fn get(&self) -> Result<Option<Versioned<T>>> {
        let read = retry(&self.policy, || async {
            match self.session.client().get_data(&self.path).await {
                Ok(read) => Ok(Some(read)),
                Err(zk::Error::NoNode) => Ok(None),
                Err(err) => Err(err),
            }
        })
        .await?;
        read.map(|(data, stat)| self.versioned(&data, &stat))
            .transpose()
    }

    /// Writes `value`, creating the node (and its parents) if needed. Returns the new version.
    ///
    /// # Errors
    /// [`Error::BadArguments`] when it does not serialize; ZooKeeper errors after retries.
    pub async fn set(&self, value: &T) -> Result<i32> {
        let bytes = self.encode(value)?;
        retry(&self.policy, || async {
            let client = self.session.client();
            let stat = crate::config::store::upsert(&client, &self.path, &bytes).await?;
            Ok::<_, Error>(stat.version)
        })
        .await
    }

    /// Creates the node with `value`.
    ///
    /// # Errors
    /// [`Error::NodeExists`] when it exists; ZooKeeper errors.
    pub async fn create(&self, value: &T) -> Result<i32> {
        let bytes = self.encode(value)?;
        let client = self.session.client();
        let options = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
        match client.create(&self.path, &bytes, &options).await {
            Ok((stat, _)) => Ok(stat.version),
            Err(zk::Error::NoNode) => {
                if let Some((parent, _)) = self.path.rsplit_once('/') {
                    if !parent.is_empty() {
                        client.mkdir(parent, &options).await?;
                    }
                }
                Ok(client.create(&self.path, &bytes, &options).await?.0.version)
            }
            Err(err) => Err(err.into()),
        }
    }

    /// Writes `value` only over `expected_version` (the version of a [`Versioned`] read).
    /// Returns the new version.
    ///
    /// # Errors
    /// [`Error::BadVersion`] when someone wrote in between, [`Error::NoNode`] when it does not
    /// exist; ZooKeeper errors (not retried: after a connection loss the write may have
    /// happened, and a retry would report `BadVersion` for it).
    pub async fn compare_and_set(&self, value: &T, expected_version: i32) -> Result<i32> {
        let bytes = self.encode(value)?;
        let stat = self
            .session
            .client()
            .set_data(&self.path, &bytes, Some(expected_version))
            .await?;
        Ok(stat.version)
    }

    /// Read, apply `f`, compare-and-set; again on a conflict. `f` gets the current value
    /// (`None` when the node does not exist, which is then created) and may be called several
    /// times. Returns what was written.
    ///
    /// # Errors
    /// An error of `f` (nothing written); as [`Model::get`] and [`Model::compare_and_set`].
    pub async fn update<F>(&self, mut f: F) -> Result<Versioned<T>>
    where
        F: FnMut(Option<T>) -> Result<T>,
    {
        loop {
            let current = self.get().await?;
            let client = self.session.client();
            match current {
                Some(current) => {
                    let next = f(Some(current.value))?;
                    let bytes = self.encode(&next)?;
                    match client
                        .set_data(&self.path, &bytes, Some(current.version))
                        .await
                    {
                        Ok(stat) => {
                            return Ok(Versioned {
                                value: next,
                                version: stat.version,
                                mzxid: stat.mzxid,
                            })
                        }
                        Err(zk::Error::BadVersion | zk::Error::NoNode) => continue,
                        Err(err) => return Err(err.into()),
                    }
                }
                None => {
                    let next = f(None)?;
                    match self.create(&next).await {
                        Ok(version) => {
                            // A fresh node's mzxid is its czxid; read it for the caller.
                            let mzxid = client.check_stat(&self.path).await?.map_or(0, |s| s.mzxid);
                            return Ok(Versioned {
                                value: next,
                                version,
                                mzxid,
                            });
                        }
                        Err(Error::NodeExists) => continue,
                        Err(err) => return Err(err),
                    }
                }
            }
        }
    }

    /// Deletes the node (missing is fine).
    ///
    /// # Errors
    /// ZooKeeper errors after retries.
    pub async fn delete(&self) -> Result<()> {
        retry(&self.policy, || async {
            match self.session.client().delete(&self.path, None).await {
                Ok(()) | Err(zk::Error::NoNode) => Ok(()),
                Err(err) => Err(err),
            }
        })
        .await
    }

    /// A stream of the node's typed changes (on [`NodeCache`], so it survives reconnects and
    /// session replacements).
    ///
    /// # Errors
    /// [`Error::BadArguments`] for an invalid path.
    pub fn watch(&self) -> Result<ModelWatcher<T>> {
        Ok(ModelWatcher {
            cache: NodeCache::new(&self.session, &self.path)?,
            model: self.clone(),
        })
    }
}

/// One change of a watched [`Model`].
#[derive(Debug, Clone, PartialEq)]
pub enum ModelEvent<T> {
    /// The node holds this value (first the current one, then each new one).
    Set(Versioned<T>),
    /// The node does not exist (at the start) or was deleted.
    Deleted,
    /// The node holds something that does not decode (another schema, say); the watcher goes
    /// on.
    Invalid {
        /// The node's version.
        version: i32,
        /// Why.
        error: Error,
    },
}

/// Typed changes of a [`Model`] (from [`Model::watch`]).
#[derive(Debug)]
pub struct ModelWatcher<T> {
    cache: NodeCache,
    model: Model<T>,
}

impl<T: Serialize + DeserializeOwned> ModelWatcher<T> {
    fn event_of(&self, data: &ChildData) -> ModelEvent<T> {
        match self.model.decode(&data.data) {
            Ok(value) => ModelEvent::Set(Versioned {
                value,
                version: data.version,
                mzxid: data.mzxid,
            }),
            Err(error) => ModelEvent::Invalid {
                version: data.version,
                error,
            },
        }
    }

    /// The next change: first the current state (`Set` or `Deleted`), then every change.
    ///
    /// # Errors
    /// [`Error::Closed`] once the session is closed.
    ///
    /// # Cancellation safety
    /// Cancel-safe (as [`NodeCache::next`]).
    pub async fn next(&mut self) -> Result<ModelEvent<T>> {
        loop {
            match self.cache.next().await? {
                CacheEvent::Added(data) | CacheEvent::Updated { new: data, .. } => {
                    return Ok(self.event_of(&data))
                }
                CacheEvent::Removed(_) => return Ok(ModelEvent::Deleted),
                CacheEvent::Initialized => {
                    if self.cache.current().is_none() {
                        return Ok(ModelEvent::Deleted);
                    }
                }
            }
        }
    }
}

/// The store side of a [`Model`]: defined here so that the configuration store does not
/// depend on the model built on its caches.
impl crate::config::ConfigStore {
    /// A typed [`Model`] of `key` in `format`, with the store's retry policy. Without a
    /// schema it reads and writes exactly what [`crate::config::ConfigStore::write_json`] /
    /// [`crate::config::ConfigStore::write_toml`] do; add one with [`Model::with_schema`] to have
    /// every value carry and check it (see [`crate::model`]).
    ///
    /// # Errors
    /// As [`crate::config::resolve_key`].
    pub fn model<T: Serialize + DeserializeOwned>(
        &self,
        key: &str,
        format: Format,
    ) -> Result<Model<T>> {
        Ok(Model::new(&self.session, &self.path_of(key)?, format)?
            .with_retry_policy(self.policy.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    struct Limits {
        max_conns: u32,
        name: String,
    }

    fn codec(format: Format, schema: Option<Schema>) -> Codec {
        Codec { format, schema }
    }

    #[test]
    fn envelopes_carry_and_check_the_schema() {
        let v = Limits {
            max_conns: 7,
            name: "db".into(),
        };
        let v1 = Some(Schema::new("limits", 1));
        let bytes = codec(Format::Json, v1.clone()).encode("/p", &v).unwrap();
        assert_eq!(
            String::from_utf8(bytes.clone()).unwrap(),
            r#"{"schema":"limits","version":1,"value":{"max_conns":7,"name":"db"}}"#
        );
        assert_eq!(
            codec(Format::Json, v1.clone())
                .decode::<Limits>("/p", &bytes)
                .unwrap(),
            v
        );
        // Another version, another name, no envelope: clear mismatches.
        let err = codec(Format::Json, Some(Schema::new("limits", 2)))
            .decode::<Limits>("/p", &bytes)
            .unwrap_err();
        assert_eq!(
            err,
            Error::SchemaMismatch {
                path: "/p".into(),
                expected: "limits v2".into(),
                found: "limits v1".into()
            }
        );
        assert!(
            err.to_string()
                .contains("expected limits v2, found limits v1"),
            "{err}"
        );
        assert!(matches!(
            codec(Format::Json, Some(Schema::new("quota", 1))).decode::<Limits>("/p", &bytes),
            Err(Error::SchemaMismatch { found, .. }) if found == "limits v1"
        ));
        let plain = codec(Format::Json, None).encode("/p", &v).unwrap();
        assert_eq!(
            String::from_utf8(plain.clone()).unwrap(),
            r#"{"max_conns":7,"name":"db"}"#
        );
        assert!(matches!(
            codec(Format::Json, v1.clone()).decode::<Limits>("/p", &plain),
            Err(Error::SchemaMismatch { found, .. }) if found == "no schema"
        ));
        // Right schema, wrong shape: a decode error, not a mismatch.
        let wrong = br#"{"schema":"limits","version":1,"value":{"max_conns":"many"}}"#;
        assert!(matches!(
            codec(Format::Json, v1).decode::<Limits>("/p", wrong),
            Err(Error::Unexpected(_))
        ));
        // TOML works the same way.
        let v3 = Some(Schema::new("limits", 3));
        let toml_bytes = codec(Format::Toml, v3.clone()).encode("/p", &v).unwrap();
        let text = String::from_utf8(toml_bytes.clone()).unwrap();
        assert!(
            text.contains("schema = \"limits\"") && text.contains("version = 3"),
            "{text}"
        );
        assert_eq!(
            codec(Format::Toml, v3)
                .decode::<Limits>("/p", &toml_bytes)
                .unwrap(),
            v
        );
        let plain_toml = codec(Format::Toml, None).encode("/p", &v).unwrap();
        assert_eq!(
            codec(Format::Toml, None)
                .decode::<Limits>("/p", &plain_toml)
                .unwrap(),
            v
        );
    }
}
