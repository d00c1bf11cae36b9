//! Writes: mkdir, create, delete, check, setData, setACL, and the multi builder.

use std::future::Future;

use zkit_proto::codec::{put_i32, put_opt_buffer, Reader};
use zkit_proto::{OpCode, Record, Stat};

use crate::acl::{encode_acls, Acl};
use crate::error::{Error, Result};
use crate::multi::MultiWriter;
use crate::path::validate_path;
use crate::types::{CreateOptions, CreateSequence};

use super::wire::{decode_stat, encode_create, frame, parse_sequence, put_path, reply, Sent};
use super::Client;

impl Client {
    /// Makes every missing node up to `path` (`mkdir -p`).
    ///
    /// # Notable behaviours
    /// Not atomic: it may fail with only some levels created. No [`Error::NodeExists`].
    ///
    /// # Errors
    /// [`Error::NoNode`] when the chroot does not exist; [`Error::BadArguments`] for an
    /// ephemeral or sequential mode or a bad path; [`Error::InvalidAcl`]; connection errors.
    ///
    /// # Cancellation safety
    /// Dropping it stops after the level being created (which may still be created).
    pub async fn mkdir(&self, path: &str, options: &CreateOptions<'_>) -> Result<()> {
        options.validate()?;
        if options.mode.is_ephemeral() || options.mode.is_sequential() {
            return Err(Error::bad_arguments(
                "directory node must not be ephemeral or sequential",
            ));
        }
        validate_path(path, false)?;
        if path == "/" {
            return Ok(());
        }
        // Try the whole path first; walk up on NoNode, then down again.
        let mut end = path.len();
        loop {
            match self.create(&path[..end], &[], options).await {
                Ok(_) | Err(Error::NodeExists) => {
                    if end == path.len() {
                        return Ok(());
                    }
                    end = path[end + 1..]
                        .find('/')
                        .map_or(path.len(), |i| end + 1 + i);
                }
                Err(Error::NoNode) => match path[..end].rfind('/') {
                    Some(0) | None => return Err(Error::NoNode),
                    Some(i) => end = i,
                },
                Err(err) => return Err(err),
            }
        }
    }

    /// Creates a node; returns its stat and, for a sequential node, its sequence number
    /// (`CreateSequence(-1)` otherwise). Uses create2 (15), createContainer (19) or createTTL
    /// (21), each of which answers with the stat.
    ///
    /// # Errors
    /// - [`Error::NodeExists`], [`Error::NoNode`] (no parent), [`Error::NoChildrenForEphemerals`],
    ///   [`Error::NoAuth`], [`Error::InvalidAcl`] (empty list, or `auth` ids without auth).
    /// - [`Error::BadArguments`] for a bad path, the root, or a TTL with a non-persistent mode;
    ///   [`Error::Unimplemented`] for a TTL on a server without extended types.
    /// - [`Error::ConnectionLoss`] (the node may have been created) and the session errors.
    ///
    /// # Cancellation safety
    /// The request is sent when this is called; dropping the future does not undo it.
    pub fn create(
        &self,
        path: &str,
        data: &[u8],
        options: &CreateOptions<'_>,
    ) -> impl Future<Output = Result<(Stat, CreateSequence)>> + Send + 'static {
        let sent = self.send_create(path, data, options);
        let chroot = self.chroot.clone();
        let prefix = path.to_owned();
        let sequential = options.mode.is_sequential();
        async move {
            let reply = reply(sent).await?;
            let mut r = Reader::new(&reply.body);
            let server_path = r.read_ustring()?;
            let stat = Stat::decode(&mut r)?;
            let sequence = if sequential {
                parse_sequence(&chroot.client_path_or_same(server_path), &prefix)?
            } else {
                CreateSequence(-1)
            };
            Ok((stat, sequence))
        }
    }

    fn send_create(&self, path: &str, data: &[u8], options: &CreateOptions<'_>) -> Sent {
        options.validate()?;
        validate_path(path, options.mode.is_sequential())?;
        if path == "/" {
            return Err(Error::bad_arguments("can not create the root node"));
        }
        let (_, buf) = encode_create(&self.chroot, path, data, options);
        self.send(buf, None)
    }

    /// Deletes a node, if its version is `expected_version` (any when `None`).
    ///
    /// # Errors
    /// [`Error::NoNode`], [`Error::BadVersion`], [`Error::NotEmpty`], [`Error::NoAuth`],
    /// [`Error::BadArguments`] (bad path, the root, `/zookeeper`), connection and session errors.
    ///
    /// # Cancellation safety
    /// The request is sent when this is called; dropping the future does not undo it.
    pub fn delete(
        &self,
        path: &str,
        expected_version: Option<i32>,
    ) -> impl Future<Output = Result<()>> + Send + 'static {
        let sent = (|| {
            let path = self.validate(path)?;
            if path == "/" {
                return Err(Error::bad_arguments("can not delete the root node"));
            }
            let mut buf = frame(OpCode::Delete, path.len() + 8);
            put_path(&mut buf, &self.chroot, path);
            put_i32(&mut buf, expected_version.unwrap_or(-1));
            self.send(buf, None)
        })();
        async move {
            reply(sent).await?;
            Ok(())
        }
    }

    /// Checks that a node has `version` (any when `None`): the condition of a multi, on its
    /// own. Sent as a multi of one check: Apache ZooKeeper 3.8 never answers a standalone
    /// `check` (13) request (its `FinalRequestProcessor` fails to serialize the reply).
    ///
    /// # Errors
    /// [`Error::NoNode`], [`Error::BadVersion`], [`Error::NoAuth`], [`Error::BadArguments`],
    /// connection and session errors.
    ///
    /// # Cancellation safety
    /// A read: dropping the future is harmless.
    pub fn check(
        &self,
        path: &str,
        version: Option<i32>,
    ) -> impl Future<Output = Result<()>> + Send + 'static {
        let mut writer = self.new_multi_writer();
        let added = writer.add_check_version(path, version.unwrap_or(-1));
        let commit = added.map(|()| writer.commit());
        async move {
            commit?.await.map_err(Error::from)?;
            Ok(())
        }
    }

    /// Sets a node's data, if its version is `expected_version` (any when `None`); returns the
    /// new stat.
    ///
    /// # Errors
    /// [`Error::NoNode`], [`Error::BadVersion`], [`Error::NoAuth`], [`Error::BadArguments`],
    /// connection and session errors.
    ///
    /// # Cancellation safety
    /// The request is sent when this is called; dropping the future does not undo it.
    pub fn set_data(
        &self,
        path: &str,
        data: &[u8],
        expected_version: Option<i32>,
    ) -> impl Future<Output = Result<Stat>> + Send + 'static {
        let sent = (|| {
            let path = self.validate(path)?;
            let mut buf = frame(OpCode::SetData, path.len() + data.len() + 12);
            put_path(&mut buf, &self.chroot, path);
            put_opt_buffer(&mut buf, Some(data));
            put_i32(&mut buf, expected_version.unwrap_or(-1));
            self.send(buf, None)
        })();
        async move { decode_stat(reply(sent).await?) }
    }

    /// Sets a node's ACL, if its ACL version is `expected_acl_version`; returns the new stat.
    ///
    /// # Errors
    /// [`Error::NoNode`], [`Error::BadVersion`], [`Error::NoAuth`], [`Error::InvalidAcl`],
    /// [`Error::BadArguments`], connection and session errors.
    ///
    /// # Cancellation safety
    /// The request is sent when this is called; dropping the future does not undo it.
    pub fn set_acl(
        &self,
        path: &str,
        acl: &[Acl],
        expected_acl_version: Option<i32>,
    ) -> impl Future<Output = Result<Stat>> + Send + 'static {
        let sent = (|| {
            let path = self.validate(path)?;
            let mut buf = frame(OpCode::SetAcl, path.len() + 8 + acl.len() * 32);
            put_path(&mut buf, &self.chroot, path);
            encode_acls(&mut buf, acl);
            put_i32(&mut buf, expected_acl_version.unwrap_or(-1));
            self.send(buf, None)
        })();
        async move { decode_stat(reply(sent).await?) }
    }

    /// A builder of one multi (op 14): writes and checks applied all or none.
    pub fn new_multi_writer(&self) -> MultiWriter<'_> {
        MultiWriter::new(self)
    }
}
