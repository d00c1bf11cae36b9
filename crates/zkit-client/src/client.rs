//! [`Client`]: every ZooKeeper operation, each as a method that validates and *sends* its
//! request when called and returns a future of the reply. Requests therefore reach the server
//! in call order, whatever order the futures are awaited in.

use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, BytesMut};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use zkit_proto::codec::{put_bool, put_i32, put_opt_buffer, Reader};
use zkit_proto::{ErrorCode, OpCode, Record, Stat};

use crate::acl::{decode_acls, encode_acls, Acl, AuthUser};
use crate::connector::Connector;
use crate::error::{Error, Result};
use crate::multi::{MultiReader, MultiWriter};
use crate::path::{validate_path, Chroot};
use crate::session::{Command, Reply, Shared, Submit, WatchIntent};
use crate::types::{
    AddWatchMode, CreateOptions, CreateSequence, SessionId, SessionInfo, SessionState, WatchType,
};
use crate::watch::WatchKind;
use crate::watcher::{OneshotWatcher, PersistentWatcher, StateWatcher};

const CONFIG_NODE: &str = "/zookeeper/config";

/// A ZooKeeper session, shared by every clone (and every [`Client::chroot`]ed view).
///
/// The session lives while a clone lives: dropping the last one closes it (unless
/// [`Connector::with_detached`]). Every remote method fails with the session's error after it
/// ended ([`Error::SessionExpired`], [`Error::AuthFailed`], [`Error::ClientClosed`]).
///
/// # Notable behaviours
/// - Methods send their request when called, not when the future is first polled; requests of
///   one client reach the server in call order and are pipelined.
/// - A watch event reaches its watcher before the reply of any request sent after the change
///   completes.
/// - Authentication added with [`Client::auth`] is shared by every clone and sent again on
///   every reconnect.
#[derive(Clone, Debug)]
pub struct Client {
    tx: mpsc::UnboundedSender<Command>,
    shared: Arc<Shared>,
    chroot: Chroot,
}

/// The future of a request that was sent, or the error that stopped it before sending.
type Sent = Result<oneshot::Receiver<Result<Reply>>>;

/// A request frame: length and xid placeholders (patched by the connection task), op code.
pub(crate) fn frame(op: OpCode, capacity: usize) -> BytesMut {
    let mut buf = BytesMut::with_capacity(12 + capacity);
    put_i32(&mut buf, 0);
    put_i32(&mut buf, 0);
    put_i32(&mut buf, op.code());
    buf
}

/// Writes a ustring: the server path of `path` under `chroot`, without building it.
pub(crate) fn put_path(buf: &mut BytesMut, chroot: &Chroot, path: &str) {
    let (root, rest) = chroot.server_path_parts(path);
    put_i32(
        buf,
        i32::try_from(root.len() + rest.len()).unwrap_or(i32::MAX),
    );
    buf.put_slice(root.as_bytes());
    buf.put_slice(rest.as_bytes());
}

/// Awaits a reply; a non-zero code is the error.
pub(crate) async fn reply(sent: Sent) -> Result<Reply> {
    let reply = raw_reply(sent).await?;
    match Error::from_code(reply.err) {
        None => Ok(reply),
        Some(err) => Err(err),
    }
}

/// Awaits a reply, whatever its code.
async fn raw_reply(sent: Sent) -> Result<Reply> {
    match sent?.await {
        Ok(result) => result,
        // The task dropped the request: it is shutting down.
        Err(_) => Err(Error::ClientClosed),
    }
}

impl Client {
    /// Connects with default options; see [`Connector::connect`].
    ///
    /// # Errors
    /// As [`Connector::connect`].
    pub async fn connect(cluster: &str) -> Result<Client> {
        Client::connector().connect(cluster).await
    }

    /// A builder with every connection option.
    pub fn connector() -> Connector {
        Connector::new()
    }

    pub(crate) fn new(
        tx: mpsc::UnboundedSender<Command>,
        shared: Arc<Shared>,
        chroot: Chroot,
    ) -> Client {
        Client { tx, shared, chroot }
    }

    pub(crate) fn chroot_ref(&self) -> &Chroot {
        &self.chroot
    }

    /// The chroot this client works under (`/` when none).
    pub fn path(&self) -> &str {
        self.chroot.path()
    }

    /// The session's id and password, for [`Connector::with_session`].
    ///
    /// (zookeeper-client 0.11 returns `&SessionInfo`; this returns the current value, since a
    /// read-only client's session can be replaced by a read-write server's.)
    pub fn session(&self) -> SessionInfo {
        self.shared.session_info()
    }

    /// The session id.
    pub fn session_id(&self) -> SessionId {
        self.shared.session_info().id
    }

    /// The session info, consuming this handle.
    pub fn into_session(self) -> SessionInfo {
        self.session()
    }

    /// The session timeout the server granted.
    pub fn session_timeout(&self) -> Duration {
        Duration::from_millis(self.shared.timeout_ms.load(Ordering::Relaxed))
    }

    /// The current session state.
    pub fn state(&self) -> SessionState {
        *self.shared.state.borrow()
    }

    /// A watcher of state changes from now on.
    pub fn state_watcher(&self) -> StateWatcher {
        StateWatcher::new(self.shared.state.subscribe())
    }

    /// The local monotonic instant at which the most recent request that a server *answered*
    /// on this session was sent — any request: pings, reads, writes, errors, and the
    /// ConnectRequest that established or re-attached the session.
    ///
    /// What it proves: the server received that request after this instant and touched the
    /// session then, so **the session cannot expire before this instant plus
    /// [`Client::session_timeout`]** (a server expires a session only after a full timeout
    /// without hearing from it; ZooKeeper even rounds up to its next tick). It advances with
    /// pings while idle and stops advancing while disconnected, which is what failover rules
    /// (locks held through a disconnect) measure against. It is a lower bound: the server may
    /// keep the session longer.
    ///
    /// `None` only before the first session was established (never, on a connected client).
    pub fn last_acknowledged_send(&self) -> Option<Instant> {
        *self
            .shared
            .last_ack
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// The server (`host:port`, as the connect string names it) of the live connection, `None`
    /// while disconnected or after the session ended (as `ClientCnxn.getRemoteSocketAddress`,
    /// which tests of failover use to know which member to fault).
    pub fn connected_server(&self) -> Option<String> {
        self.shared
            .server
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The zxid of the last reply seen (`ClientCnxn.getLastZxid`): every later read on this
    /// session reflects at least this state. 0 before any reply carried one.
    pub fn last_zxid(&self) -> i64 {
        self.shared.last_zxid.load(Ordering::Relaxed)
    }

    /// The same session under another root: `path` is absolute, interpreted from this client's
    /// root. Watchers keep the root they were made with.
    ///
    /// # Errors
    /// The unchanged client, when `path` is not a valid path.
    pub fn chroot(mut self, path: &str) -> std::result::Result<Client, Client> {
        match self.chroot.join(path) {
            Ok(chroot) => {
                self.chroot = chroot;
                Ok(self)
            }
            Err(_) => Err(self),
        }
    }

    /// Closes the session: the server deletes its ephemeral nodes and forgets its watches.
    /// Every clone is closed with it; in-flight requests fail with [`Error::ClientClosed`].
    /// Returns once the server confirmed (or the connection ended).
    ///
    /// # Cancellation safety
    /// The close is sent when this is called; dropping the future does not stop it.
    pub fn close(&self) -> impl Future<Output = ()> + Send + 'static {
        let (reply, done) = oneshot::channel();
        let sent = self.tx.send(Command::Close { reply }).is_ok();
        async move {
            if sent {
                let _ = done.await;
            }
        }
    }

    fn validate<'p>(&self, path: &'p str) -> Result<&'p str> {
        validate_path(path, false)?;
        Ok(path)
    }

    fn send(&self, frame: BytesMut, watch: Option<WatchIntent>) -> Sent {
        self.submit(Submit {
            frame,
            watch,
            precheck: None,
            reply: oneshot::channel().0,
        })
    }

    fn submit(&self, mut submit: Submit) -> Sent {
        let (reply, receiver) = oneshot::channel();
        submit.reply = reply;
        self.tx
            .send(Command::Request(submit))
            .map_err(|_| self.state_error())?;
        Ok(receiver)
    }

    pub(crate) fn send_frame(&self, frame: BytesMut) -> Sent {
        self.send(frame, None)
    }

    fn state_error(&self) -> Error {
        match self.state() {
            state if state.is_terminated() => state.to_error(),
            _ => Error::ClientClosed,
        }
    }

    fn intent(&self, path: &str, kind: WatchKind, exists: bool) -> WatchIntent {
        WatchIntent {
            path: self.chroot.server_path(path),
            kind,
            exists,
            chroot: self.chroot.clone(),
        }
    }

    fn path_request(&self, op: OpCode, path: &str, watch: Option<bool>) -> Result<BytesMut> {
        let path = self.validate(path)?;
        let mut buf = frame(op, self.chroot.server_path_len(path) + 5);
        put_path(&mut buf, &self.chroot, path);
        if let Some(watch) = watch {
            put_bool(&mut buf, watch);
        }
        Ok(buf)
    }

    // ---- writes ---------------------------------------------------------------------------

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

    // ---- reads ----------------------------------------------------------------------------

    fn get_data_with(
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
        let fut = self.get_data_with(&self.chroot, path, true);
        async move {
            let (data, stat, watcher) = fut.await?;
            Ok((
                data,
                stat,
                watcher.ok_or_else(|| Error::unexpected("watch not registered"))?,
            ))
        }
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

    // ---- watches --------------------------------------------------------------------------

    /// Adds a persistent watch (addWatch, op 106) on `path`, which need not exist.
    ///
    /// [`AddWatchMode::Persistent`] fires for data changes, creation and deletion of the node
    /// and for its children; [`AddWatchMode::PersistentRecursive`] for creation, deletion and
    /// data changes of the node and every descendant. Re-registered after every reconnect.
    ///
    /// # Cautions
    /// A ZooKeeper 3.8 server keeps one watch mode per path and session: a one-shot watch set on
    /// the same path later turns the server's persistent watch into a one-shot one
    /// (ZOOKEEPER-4466). Hold events: a watcher that is never polled buffers without bound.
    ///
    /// # Errors
    /// [`Error::BadArguments`], connection and session errors.
    ///
    /// # Cancellation safety
    /// Dropping the future drops the watch: it is not registered, and the server's watch is
    /// removed when nothing else on the path needs it.
    pub fn watch(
        &self,
        path: &str,
        mode: AddWatchMode,
    ) -> impl Future<Output = Result<PersistentWatcher>> + Send + 'static {
        let sent = (|| {
            let path = self.validate(path)?;
            let mut buf = frame(OpCode::AddWatch, path.len() + 8);
            put_path(&mut buf, &self.chroot, path);
            let (code, kind) = match mode {
                AddWatchMode::Persistent => (0, WatchKind::Persistent),
                AddWatchMode::PersistentRecursive => (1, WatchKind::PersistentRecursive),
            };
            put_i32(&mut buf, code);
            self.send(buf, Some(self.intent(path, kind, false)))
        })();
        async move {
            let reply = reply(sent).await?;
            let watcher = reply
                .watcher
                .ok_or_else(|| Error::unexpected("watch not registered"))?;
            Ok(PersistentWatcher::new(watcher))
        }
    }

    /// Removes this client's watches of `watch_type` on `path` from the server and locally
    /// (removeWatches, op 18, as `ZooKeeper.removeAllWatches`); each removed watcher gets a
    /// `DataWatchRemoved`, `ChildWatchRemoved` or `PersistentWatchRemoved` event.
    /// [`WatchType::Any`] removes persistent watches too.
    ///
    /// # Errors
    /// [`Error::NoWatcher`] when this client has no such watch (checked locally first, as
    /// `ZKWatchManager.containsWatcher`); connection and session errors (then nothing is
    /// removed).
    ///
    /// # Cancellation safety
    /// The request is sent when this is called; dropping the future does not undo it.
    pub fn remove_watches(
        &self,
        path: &str,
        watch_type: WatchType,
    ) -> impl Future<Output = Result<()>> + Send + 'static {
        let sent = (|| -> Result<oneshot::Receiver<Result<()>>> {
            let path = self.validate(path)?;
            let mut frame_buf = frame(OpCode::RemoveWatches, path.len() + 8);
            put_path(&mut frame_buf, &self.chroot, path);
            put_i32(&mut frame_buf, watch_type.code());
            let (reply, receiver) = oneshot::channel();
            self.tx
                .send(Command::RemoveWatches {
                    path: self.chroot.server_path(path),
                    watch_type,
                    frame: frame_buf,
                    reply,
                })
                .map_err(|_| self.state_error())?;
            Ok(receiver)
        })();
        async move {
            match sent?.await {
                Ok(result) => result,
                Err(_) => Err(Error::ClientClosed),
            }
        }
    }

    /// Checks that this client has a watch of `watch_type` on `path`, locally and on the
    /// server (checkWatches, op 17).
    ///
    /// # Errors
    /// [`Error::NoWatcher`] when it has none; connection and session errors.
    ///
    /// # Cancellation safety
    /// A read: dropping the future is harmless.
    pub fn check_watches(
        &self,
        path: &str,
        watch_type: WatchType,
    ) -> impl Future<Output = Result<()>> + Send + 'static {
        let sent = (|| {
            let path = self.validate(path)?;
            let mut buf = frame(OpCode::CheckWatches, path.len() + 8);
            put_path(&mut buf, &self.chroot, path);
            put_i32(&mut buf, watch_type.code());
            self.submit(Submit {
                frame: buf,
                watch: None,
                precheck: Some((self.chroot.server_path(path), watch_type)),
                reply: oneshot::channel().0,
            })
        })();
        async move {
            reply(sent).await?;
            Ok(())
        }
    }

    // ---- session --------------------------------------------------------------------------

    /// Waits until the server this client is connected to has caught up with the leader for
    /// `path` (sync, op 9).
    ///
    /// # Cautions
    /// `sync` + read is not linearizable on an ensemble (ZOOKEEPER-1675, ZOOKEEPER-2136).
    ///
    /// # Errors
    /// [`Error::BadArguments`], connection and session errors.
    ///
    /// # Cancellation safety
    /// Dropping the future is harmless.
    pub fn sync(&self, path: &str) -> impl Future<Output = Result<()>> + Send + 'static {
        let sent = self
            .path_request(OpCode::Sync, path, None)
            .and_then(|buf| self.send(buf, None));
        async move {
            reply(sent).await?;
            Ok(())
        }
    }

    /// Adds authentication (addAuthInfo) for every clone of this client, e.g.
    /// `("digest", b"user:password")`; resent on every reconnect.
    ///
    /// # Errors
    /// [`Error::AuthFailed`] when the server refuses it — which ends the session, as in
    /// ZooKeeper — and the session errors.
    ///
    /// # Cancellation safety
    /// The packet is sent when this is called; dropping the future does not undo it (a refusal
    /// still ends the session). A disconnect does not fail it: it completes with the answer
    /// on the next connection.
    pub fn auth(
        &self,
        scheme: &str,
        auth: &[u8],
    ) -> impl Future<Output = Result<()>> + Send + 'static {
        let (reply, receiver) = oneshot::channel();
        let sent = self
            .tx
            .send(Command::Auth {
                scheme: scheme.to_owned(),
                auth: auth.to_vec(),
                reply,
            })
            .map_err(|_| self.state_error());
        async move {
            sent?;
            match receiver.await {
                Ok(result) => result,
                Err(_) => Err(Error::ClientClosed),
            }
        }
    }

    /// This session's identities as the server sees them (whoAmI, op 107; ZooKeeper 3.7+).
    ///
    /// # Errors
    /// [`Error::Unimplemented`] on older servers; connection and session errors.
    ///
    /// # Cancellation safety
    /// A read: dropping the future is harmless.
    pub fn list_auth_users(&self) -> impl Future<Output = Result<Vec<AuthUser>>> + Send + 'static {
        let sent = self.send(frame(OpCode::WhoAmI, 0), None);
        async move {
            let reply = reply(sent).await?;
            let mut r = Reader::new(&reply.body);
            let users = r
                .read_opt_vec(8, |r| {
                    Ok(AuthUser::new(&r.read_ustring()?, &r.read_ustring()?))
                })?
                .unwrap_or_default();
            Ok(users)
        }
    }

    /// The ensemble configuration, `/zookeeper/config` (outside any chroot).
    ///
    /// # Errors
    /// [`Error::NoNode`] on servers without it; connection and session errors.
    ///
    /// # Cancellation safety
    /// A read: dropping the future is harmless.
    pub fn get_config(&self) -> impl Future<Output = Result<(Vec<u8>, Stat)>> + Send + 'static {
        let fut = self.get_data_with(&Chroot::default(), CONFIG_NODE, false);
        async move { fut.await.map(|(data, stat, _)| (data, stat)) }
    }

    /// As [`Client::get_config`], and watches it.
    ///
    /// # Errors
    /// As [`Client::get_config`].
    ///
    /// # Cancellation safety
    /// Dropping the future drops the watch.
    pub fn get_and_watch_config(
        &self,
    ) -> impl Future<Output = Result<(Vec<u8>, Stat, OneshotWatcher)>> + Send + 'static {
        let fut = self.get_data_with(&Chroot::default(), CONFIG_NODE, true);
        async move {
            let (data, stat, watcher) = fut.await?;
            Ok((
                data,
                stat,
                watcher.ok_or_else(|| Error::unexpected("watch not registered"))?,
            ))
        }
    }

    /// A builder of one multiRead (op 22): several reads answered from one state.
    pub fn new_multi_reader(&self) -> MultiReader<'_> {
        MultiReader::new(self)
    }

    /// A builder of one multi (op 14): writes and checks applied all or none.
    pub fn new_multi_writer(&self) -> MultiWriter<'_> {
        MultiWriter::new(self)
    }
}

/// Encodes a create (op chosen from the options) into a request frame or a multi sub-op body.
pub(crate) fn encode_create(
    chroot: &Chroot,
    path: &str,
    data: &[u8],
    options: &CreateOptions<'_>,
) -> (OpCode, BytesMut) {
    let ttl = options.ttl_millis();
    let op = if ttl != 0 {
        OpCode::CreateTtl
    } else if options.mode == crate::types::CreateMode::Container {
        OpCode::CreateContainer
    } else {
        OpCode::Create2
    };
    let mut buf = frame(op, path.len() + data.len() + 48);
    encode_create_body(&mut buf, chroot, path, data, options);
    (op, buf)
}

pub(crate) fn encode_create_body(
    buf: &mut BytesMut,
    chroot: &Chroot,
    path: &str,
    data: &[u8],
    options: &CreateOptions<'_>,
) {
    let ttl = options.ttl_millis();
    put_path(buf, chroot, path);
    put_opt_buffer(buf, Some(data));
    encode_acls(buf, &options.acls);
    put_i32(buf, options.mode.flags(ttl != 0));
    if ttl != 0 {
        buf.put_i64(ttl);
    }
}

fn decode_stat(reply: Reply) -> Result<Stat> {
    Ok(Stat::decode_from(&reply.body)?)
}

/// The sequence number of a created sequential node: the digits after the requested prefix.
fn parse_sequence(created: &str, prefix: &str) -> Result<CreateSequence> {
    let digits = created
        .strip_prefix(prefix)
        .ok_or_else(|| Error::unexpected(format!("created {created} is not under {prefix}")))?;
    digits
        .parse::<i64>()
        .map(CreateSequence)
        .map_err(|_| Error::unexpected(format!("no sequence number in {created}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequence_numbers() {
        assert_eq!(
            parse_sequence("/a/n0000000012", "/a/n"),
            Ok(CreateSequence(12))
        );
        assert!(parse_sequence("/b/n0000000012", "/a/n").is_err());
    }

    #[test]
    fn paths_are_encoded_under_the_chroot() {
        let chroot = Chroot::new("/app").unwrap();
        let mut buf = BytesMut::new();
        put_path(&mut buf, &chroot, "/x");
        assert_eq!(&buf[..], b"\x00\x00\x00\x06/app/x");
        buf.clear();
        put_path(&mut buf, &chroot, "/");
        assert_eq!(&buf[..], b"\x00\x00\x00\x04/app");
    }
}
