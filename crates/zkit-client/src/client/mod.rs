//! [`Client`]: every ZooKeeper operation, each as a method that validates and *sends* its
//! request when called and returns a future of the reply. Requests therefore reach the server
//! in call order, whatever order the futures are awaited in.
//!
//! This file holds the handle and what every operation uses (sending, paths, the session's
//! state); the operations are `impl Client` blocks by concern: `writes` (create, delete,
//! setData, setACL, multi), `reads` (getData, exists, children, ACLs, multiRead, sync),
//! `watches` (addWatch, removeWatches, checkWatches) and `admin` (connecting, auth, whoAmI,
//! the ensemble config). `wire` encodes requests and awaits replies.

mod admin;
mod reads;
mod watches;
mod wire;
mod writes;

use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use zkit_proto::codec::put_bool;
use zkit_proto::OpCode;

use crate::error::{Error, Result};
use crate::path::{validate_path, Chroot};
use crate::session::{Command, Shared, Submit, WatchIntent};
use crate::types::{SessionId, SessionInfo, SessionState};
use crate::watch::WatchKind;
use crate::watcher::StateWatcher;

pub(crate) use self::wire::{encode_create_body, frame, put_path, reply, Sent};

/// A ZooKeeper session, shared by every clone (and every [`Client::chroot`]ed view).
///
/// The session lives while a clone lives: dropping the last one closes it (unless
/// [`Connector::with_detached`](crate::Connector::with_detached)). Every remote method fails
/// with the session's error after it ended ([`Error::SessionExpired`], [`Error::AuthFailed`],
/// [`Error::ClientClosed`]).
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

impl Client {
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

    /// The session's id and password, for
    /// [`Connector::with_session`](crate::Connector::with_session).
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
        self.shared.state.borrow().state
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
        self.end(SessionState::Closed)
    }

    /// Ends the session as expired, for an owner whose own clock says the session may be gone
    /// (a session layer past its validity deadline; Curator injects an expiration for the
    /// same reason). It closes as [`Client::close`] does (a closeSession is sent if there is
    /// a connection, so that the old session cannot be revived and its ephemeral nodes go at
    /// once), but the client ends in [`SessionState::Expired`]: watchers get `Expired`, and
    /// in-flight and later requests fail with [`Error::SessionExpired`], so that code using
    /// it tells a lost session (retry on the next one) from a client closed on purpose. A
    /// client already closing keeps the end it was given first.
    ///
    /// # Cancellation safety
    /// As for [`Client::close`].
    pub fn expire(&self) -> impl Future<Output = ()> + Send + 'static {
        self.end(SessionState::Expired)
    }

    fn end(&self, end: SessionState) -> impl Future<Output = ()> + Send + 'static {
        let (reply, done) = oneshot::channel();
        let sent = self.tx.send(Command::Close { reply, end }).is_ok();
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
}
