//! What the client handles and the connection task exchange: commands and their replies,
//! the state the task publishes, watcher channels, and the task's settings.

use std::sync::atomic::{AtomicI64, AtomicU64};
#[cfg(feature = "tls")]
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;

use crate::error::Result;
use crate::path::Chroot;
use crate::types::{SessionInfo, SessionState, StateCell, WatchType, WatchedEvent};
use crate::watch::{WatchKind, WatcherId};

/// State the task publishes for [`crate::Client`]'s synchronous accessors.
#[derive(Debug)]
pub(crate) struct Shared {
    pub state: watch::Sender<StateCell>,
    pub info: Mutex<SessionInfo>,
    /// Negotiated session timeout in ms.
    pub timeout_ms: AtomicU64,
    /// zxid of the last reply (`ClientCnxn.lastZxid`).
    pub last_zxid: AtomicI64,
    /// Send instant of the latest request a server answered on this session.
    pub last_ack: Mutex<Option<Instant>>,
    /// `host:port` of the server of the live connection; `None` while there is none.
    pub server: Mutex<Option<String>>,
}

impl Shared {
    pub(crate) fn session_info(&self) -> SessionInfo {
        lock(&self.info).clone()
    }

    pub(super) fn set_ack(&self, sent: Instant) {
        let mut ack = lock(&self.last_ack);
        if ack.map_or(true, |a| a < sent) {
            *ack = Some(sent);
        }
    }
}

pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Critical sections are single assignments: a poisoned lock holds consistent data.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What a watch-setting request registers when it succeeds.
#[derive(Debug)]
pub(crate) struct WatchIntent {
    /// Server path.
    pub path: String,
    pub kind: WatchKind,
    /// exists: a missing node registers an exist watch.
    pub exists: bool,
    /// The requesting client's root, to strip from event paths.
    pub chroot: Chroot,
}

/// A server's answer to one request.
#[derive(Debug)]
pub(crate) struct Reply {
    /// The reply header's error code (0: success, and `body` holds the response).
    pub err: i32,
    pub body: Bytes,
    /// The registered watcher, when the request set one and the server's answer registers it.
    pub watcher: Option<WatcherReceiver>,
}

/// One encoded request: `[len][xid][op][body]`, `len` and `xid` patched by the task.
#[derive(Debug)]
pub(crate) struct Submit {
    pub frame: BytesMut,
    pub watch: Option<WatchIntent>,
    /// checkWatches: fail with NoWatcher without asking the server unless a local registration
    /// of this type exists (`ZKWatchManager.containsWatcher`).
    pub precheck: Option<(String, WatchType)>,
    pub reply: oneshot::Sender<Result<Reply>>,
}

/// What a client handle asks the task.
#[derive(Debug)]
pub(crate) enum Command {
    Request(Submit),
    Auth {
        scheme: String,
        auth: Vec<u8>,
        reply: oneshot::Sender<Result<()>>,
    },
    /// A watcher was dropped before it fired.
    Unwatch {
        kind: WatchKind,
        path: String,
        id: WatcherId,
    },
    RemoveWatches {
        path: String,
        watch_type: WatchType,
        frame: BytesMut,
        reply: oneshot::Sender<Result<()>>,
    },
    Close {
        reply: oneshot::Sender<()>,
        /// The terminal state the session ends in: `Closed`, or `Expired` for
        /// [`Client::expire`](crate::Client::expire).
        end: SessionState,
    },
}

/// Where a registration's events go.
#[derive(Debug)]
pub(crate) enum Sink {
    Oneshot(oneshot::Sender<WatchedEvent>),
    Persistent(mpsc::UnboundedSender<WatchedEvent>),
}

impl Sink {
    pub(super) fn send(self, event: WatchedEvent) {
        match self {
            Sink::Oneshot(tx) => {
                let _ = tx.send(event);
            }
            Sink::Persistent(tx) => {
                let _ = tx.send(event);
            }
        }
    }

    pub(super) fn send_ref(&self, event: WatchedEvent) {
        if let Sink::Persistent(tx) = self {
            let _ = tx.send(event);
        }
    }
}

/// The receiving end of a registration, handed to the client with the reply.
#[derive(Debug)]
pub(crate) struct WatcherReceiver {
    pub events: WatcherEvents,
    pub unwatch: Unwatch,
    pub chroot: Chroot,
}

/// Receiving channel of a registration.
#[derive(Debug)]
pub(crate) enum WatcherEvents {
    Oneshot(oneshot::Receiver<WatchedEvent>),
    Persistent(mpsc::UnboundedReceiver<WatchedEvent>),
}

/// Tells the task a watcher is gone (on drop), unless disarmed.
#[derive(Debug)]
pub(crate) struct Unwatch {
    pub(super) tx: mpsc::WeakUnboundedSender<Command>,
    pub(super) kind: WatchKind,
    pub(super) path: String,
    pub(super) id: WatcherId,
    pub(super) armed: bool,
}

impl Unwatch {
    /// The registration is already gone (it fired): nothing to tell.
    pub(crate) fn disarm(&mut self) {
        self.armed = false;
    }
}

impl Drop for Unwatch {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        if let Some(tx) = self.tx.upgrade() {
            let _ = tx.send(Command::Unwatch {
                kind: self.kind,
                path: std::mem::take(&mut self.path),
                id: self.id,
            });
        }
    }
}

/// How the task is set up.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub session_timeout: Duration,
    pub read_timeout: Option<Duration>,
    pub readonly: bool,
    pub detached: bool,
    pub fail_eagerly: bool,
    pub max_frame: usize,
    #[cfg(feature = "tls")]
    pub tls: Option<Arc<crate::tls::TlsConnector>>,
}

/// Whom `connect` tells when the first session is established or cannot be.
pub(crate) type Ready = oneshot::Sender<Result<()>>;
