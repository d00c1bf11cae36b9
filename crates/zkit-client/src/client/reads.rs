//! Reads: getData, exists, the children calls, ephemerals, getACL, and the multiRead builder.

use std::future::Future;

use zkit_proto::codec::{put_bool, Reader};
use zkit_proto::{ErrorCode, OpCode, Record, Stat};

use crate::acl::{decode_acls, Acl};
use crate::error::{Error, Result};
use crate::multi::MultiReader;
use crate::path::{validate_path, Chroot};
use crate::session::WatchIntent;
use crate::watch::WatchKind;
use crate::watcher::OneshotWatcher;

use super::wire::{frame, put_path, raw_reply, reply};
use super::Client;

impl Client {
    pub(super) fn get_data_with(
        &self,
        chroot: &Chroot,
        path: &str,
        watch: bool,
    ) -> impl Future<Output = Result<(Vec<u8>, Stat, Option<OneshotWatcher>)>> + Send + 'static
    {
        let sent = (|| {
            validate_path(path, false)?;
            let mut buf = frame(OpCode::GetData, chroot.server_path_len(path) + 5);
            put_path(&mut buf, chroot, path);
            put_bool(&mut buf, watch);
            let intent = watch.then(|| WatchIntent {
                path: chroot.server_path(path),
                kind: WatchKind::Data,
                exists: false,
                chroot: chroot.clone(),
            });
            self.send(buf, intent)
        })();
        async move {
            let reply = reply(sent).await?;
            let mut r = Reader::new(&reply.body);
            let data = r.read_buffer()?;
            let stat = Stat::decode(&mut r)?;
            Ok((data, stat, reply.watcher.map(OneshotWatcher::new)))
        }
    }

    /// [`Client::get_data_with`] with a watch, which must have been registered.
    pub(super) fn get_and_watch_with(
        &self,
        chroot: &Chroot,
        path: &str,
    ) -> impl Future<Output = Result<(Vec<u8>, Stat, OneshotWatcher)>> + Send + 'static {
        let fut = self.get_data_with(chroot, path, true);
        async move {
            let (data, stat, watcher) = fut.await?;
            Ok((
                data,
                stat,
                watcher.ok_or_else(|| Error::unexpected("watch not registered"))?,
            ))
        }
    }

    /// A node's data and stat (null data reads as empty).
    ///
    /// # Errors
    /// [`Error::NoNode`], [`Error::NoAuth`], [`Error::BadArguments`], connection and session
    /// errors.
    ///
    /// # Cancellation safety
    /// A read: dropping the future is harmless.
    pub fn get_data(
        &self,
        path: &str,
    ) -> impl Future<Output = Result<(Vec<u8>, Stat)>> + Send + 'static {
        let fut = self.get_data_with(&self.chroot, path, false);
        async move { fut.await.map(|(data, stat, _)| (data, stat)) }
    }

    /// As [`Client::get_data`], and watches the node: fires on a data change or deletion.
    ///
    /// # Errors
    /// As [`Client::get_data`]; no watch is set when it fails.
    ///
    /// # Cancellation safety
    /// Dropping the future drops the watch: it is not registered (and removed from the server
    /// if the server set it).
    pub fn get_and_watch_data(
        &self,
        path: &str,
    ) -> impl Future<Output = Result<(Vec<u8>, Stat, OneshotWatcher)>> + Send + 'static {
        self.get_and_watch_with(&self.chroot, path)
    }

    fn exists_with(
        &self,
        path: &str,
        watch: bool,
    ) -> impl Future<Output = Result<(Option<Stat>, Option<OneshotWatcher>)>> + Send + 'static {
        let sent = (|| {
            let buf = self.path_request(OpCode::Exists, path, Some(watch))?;
            let intent = watch.then(|| self.intent(path, WatchKind::Data, true));
            self.send(buf, intent)
        })();
        async move {
            let reply = raw_reply(sent).await?;
            let watcher = reply.watcher.map(OneshotWatcher::new);
            match reply.err {
                0 => Ok((Some(Stat::decode_from(&reply.body)?), watcher)),
                e if e == ErrorCode::NoNode.code() => Ok((None, watcher)),
                e => Err(Error::from_code(e).unwrap_or(Error::NoNode)),
            }
        }
    }

    /// A node's stat, `None` when it does not exist (exists, op 3).
    ///
    /// # Errors
    /// [`Error::NoAuth`], [`Error::BadArguments`], connection and session errors.
    ///
    /// # Cancellation safety
    /// A read: dropping the future is harmless.
    pub fn check_stat(
        &self,
        path: &str,
    ) -> impl Future<Output = Result<Option<Stat>>> + Send + 'static {
        let fut = self.exists_with(path, false);
        async move { fut.await.map(|(stat, _)| stat) }
    }

    /// As [`Client::check_stat`], and watches the node: fires on its creation, data change or
    /// deletion (it may not exist yet).
    ///
    /// # Errors
    /// As [`Client::check_stat`].
    ///
    /// # Cancellation safety
    /// Dropping the future drops the watch (see [`Client::get_and_watch_data`]).
    pub fn check_and_watch_stat(
        &self,
        path: &str,
    ) -> impl Future<Output = Result<(Option<Stat>, OneshotWatcher)>> + Send + 'static {
        let fut = self.exists_with(path, true);
        async move {
            let (stat, watcher) = fut.await?;
            Ok((
                stat,
                watcher.ok_or_else(|| Error::unexpected("watch not registered"))?,
            ))
        }
    }

    fn children_with(
        &self,
        path: &str,
        watch: bool,
        op: OpCode,
    ) -> impl Future<Output = Result<(Vec<String>, Option<Stat>, Option<OneshotWatcher>)>> + Send + 'static
    {
        let sent = (|| {
            let buf = self.path_request(op, path, Some(watch))?;
            let intent = watch.then(|| self.intent(path, WatchKind::Child, false));
            self.send(buf, intent)
        })();
        async move {
            let reply = reply(sent).await?;
            let mut r = Reader::new(&reply.body);
            let children = r.read_string_vec()?;
            let stat = match op {
                OpCode::GetChildren2 => Some(Stat::decode(&mut r)?),
                _ => None,
            };
            Ok((children, stat, reply.watcher.map(OneshotWatcher::new)))
        }
    }

    /// A node's child names (getChildren, op 8).
    ///
    /// # Errors
    /// [`Error::NoNode`], [`Error::NoAuth`], [`Error::BadArguments`], connection and session
    /// errors.
    ///
    /// # Cancellation safety
    /// A read: dropping the future is harmless.
    pub fn list_children(
        &self,
        path: &str,
    ) -> impl Future<Output = Result<Vec<String>>> + Send + 'static {
        let fut = self.children_with(path, false, OpCode::GetChildren);
        async move { fut.await.map(|(children, _, _)| children) }
    }

    /// As [`Client::list_children`], and watches the children: fires when one is created or
    /// deleted, or the node is deleted.
    ///
    /// # Errors
    /// As [`Client::list_children`].
    ///
    /// # Cancellation safety
    /// Dropping the future drops the watch (see [`Client::get_and_watch_data`]).
    pub fn list_and_watch_children(
        &self,
        path: &str,
    ) -> impl Future<Output = Result<(Vec<String>, OneshotWatcher)>> + Send + 'static {
        let fut = self.children_with(path, true, OpCode::GetChildren);
        async move {
            let (children, _, watcher) = fut.await?;
            Ok((
                children,
                watcher.ok_or_else(|| Error::unexpected("watch not registered"))?,
            ))
        }
    }

    /// A node's child names and its stat (getChildren2, op 12).
    ///
    /// # Errors
    /// As [`Client::list_children`].
    ///
    /// # Cancellation safety
    /// A read: dropping the future is harmless.
    pub fn get_children(
        &self,
        path: &str,
    ) -> impl Future<Output = Result<(Vec<String>, Stat)>> + Send + 'static {
        let fut = self.children_with(path, false, OpCode::GetChildren2);
        async move {
            let (children, stat, _) = fut.await?;
            Ok((children, stat.unwrap_or_default()))
        }
    }

    /// As [`Client::get_children`], and watches the children.
    ///
    /// # Errors
    /// As [`Client::list_children`].
    ///
    /// # Cancellation safety
    /// Dropping the future drops the watch (see [`Client::get_and_watch_data`]).
    pub fn get_and_watch_children(
        &self,
        path: &str,
    ) -> impl Future<Output = Result<(Vec<String>, Stat, OneshotWatcher)>> + Send + 'static {
        let fut = self.children_with(path, true, OpCode::GetChildren2);
        async move {
            let (children, stat, watcher) = fut.await?;
            Ok((
                children,
                stat.unwrap_or_default(),
                watcher.ok_or_else(|| Error::unexpected("watch not registered"))?,
            ))
        }
    }

    /// How many descendants a node has, itself excluded (getAllChildrenNumber, op 104).
    ///
    /// # Errors
    /// [`Error::NoNode`], [`Error::NoAuth`], [`Error::BadArguments`], connection and session
    /// errors.
    ///
    /// # Cancellation safety
    /// A read: dropping the future is harmless.
    pub fn get_all_children_number(
        &self,
        path: &str,
    ) -> impl Future<Output = Result<usize>> + Send + 'static {
        let sent = self
            .path_request(OpCode::GetAllChildrenNumber, path, None)
            .and_then(|buf| self.send(buf, None));
        async move {
            let reply = reply(sent).await?;
            let n = Reader::new(&reply.body).read_i32()?;
            usize::try_from(n).map_err(|_| Error::unexpected(format!("negative count {n}")))
        }
    }

    /// zookeeper-client's name for [`Client::get_all_children_number`].
    ///
    /// # Errors
    /// As [`Client::get_all_children_number`].
    ///
    /// # Cancellation safety
    /// A read: dropping the future is harmless.
    pub fn count_descendants_number(
        &self,
        path: &str,
    ) -> impl Future<Output = Result<usize>> + Send + 'static {
        self.get_all_children_number(path)
    }

    /// This session's ephemeral nodes whose path starts with `prefix` as a *string*
    /// (`/locks/lock-` matches `/locks/lock-0000000001`), relative to the chroot
    /// (getEphemerals, op 103). `/` lists them all. No [`Error::NoNode`].
    ///
    /// # Errors
    /// [`Error::BadArguments`] for a prefix that is not a valid path; connection and session
    /// errors.
    ///
    /// # Cancellation safety
    /// A read: dropping the future is harmless.
    pub fn get_ephemerals(
        &self,
        prefix: &str,
    ) -> impl Future<Output = Result<Vec<String>>> + Send + 'static {
        let sent = self
            .path_request(OpCode::GetEphemerals, prefix, None)
            .and_then(|buf| self.send(buf, None));
        let chroot = self.chroot.clone();
        async move {
            let reply = reply(sent).await?;
            let paths = Reader::new(&reply.body).read_string_vec()?;
            // With a chroot `/app`, the server's string prefix also matches `/apple/...`:
            // those are not this client's to see.
            let mut paths: Vec<String> =
                paths.iter().filter_map(|p| chroot.client_path(p)).collect();
            paths.sort();
            Ok(paths)
        }
    }

    /// zookeeper-client's name for [`Client::get_ephemerals`].
    ///
    /// # Errors
    /// As [`Client::get_ephemerals`].
    ///
    /// # Cancellation safety
    /// A read: dropping the future is harmless.
    pub fn list_ephemerals(
        &self,
        path: &str,
    ) -> impl Future<Output = Result<Vec<String>>> + Send + 'static {
        self.get_ephemerals(path)
    }

    /// A node's ACL and stat.
    ///
    /// # Errors
    /// [`Error::NoNode`], [`Error::NoAuth`], [`Error::BadArguments`], connection and session
    /// errors.
    ///
    /// # Cancellation safety
    /// A read: dropping the future is harmless.
    pub fn get_acl(
        &self,
        path: &str,
    ) -> impl Future<Output = Result<(Vec<Acl>, Stat)>> + Send + 'static {
        let sent = self
            .path_request(OpCode::GetAcl, path, None)
            .and_then(|buf| self.send(buf, None));
        async move {
            let reply = reply(sent).await?;
            let mut r = Reader::new(&reply.body);
            let acls = decode_acls(&mut r)?;
            let stat = Stat::decode(&mut r)?;
            Ok((acls, stat))
        }
    }

    /// A builder of one multiRead (op 22): several reads answered from one state.
    pub fn new_multi_reader(&self) -> MultiReader<'_> {
        MultiReader::new(self)
    }
}
