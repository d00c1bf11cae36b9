//! Watches on the task's side: registering what a successful request set, firing events,
//! removing the server's watch when nothing needs it, and re-registering everything
//! (SetWatches) on a new connection.

use bytes::{BufMut, BytesMut};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tracing::warn;
use zkit_proto::codec::{put_i32, put_string_vec, put_ustring};
use zkit_proto::op::xid;
use zkit_proto::{ErrorCode, OpCode, WatcherEvent};

use crate::error::{Error, Result};
use crate::types::{EventType, WatchType, WatchedEvent};
use crate::watch::WatchKind;

use super::handle::{Sink, Unwatch, WatchIntent, WatcherEvents, WatcherReceiver};
use super::task::{write_frame, Conn, Pending, PendingKind, Task};

/// `SET_WATCHES_MAX_LENGTH` in `ClientCnxn`: paths per SetWatches batch, in bytes.
const SET_WATCHES_MAX_LENGTH: usize = 128 * 1024;

impl Task {
    /// SetWatches (or SetWatches2 when persistent watches exist), in batches of at most
    /// `SET_WATCHES_MAX_LENGTH` bytes of paths, as `primeConnection` does.
    pub(super) fn write_set_watches(&mut self, conn: &mut Conn, now: Instant) {
        if self.watches.is_empty() {
            return;
        }
        let lists = self.watches.set_watches();
        let mut iters = lists
            .iter()
            .map(|l| l.iter().peekable())
            .collect::<Vec<_>>();
        loop {
            let mut batch: [Vec<&String>; 5] = Default::default();
            let mut len = 0;
            'fill: while len < SET_WATCHES_MAX_LENGTH {
                for (i, it) in iters.iter_mut().enumerate() {
                    if let Some(path) = it.next() {
                        len += path.len();
                        batch[i].push(path);
                        continue 'fill;
                    }
                }
                break;
            }
            if batch.iter().all(Vec::is_empty) {
                return;
            }
            let v2 = !batch[3].is_empty() || !batch[4].is_empty();
            let op = if v2 {
                OpCode::SetWatches2
            } else {
                OpCode::SetWatches
            };
            let zxid = self.last_zxid;
            write_frame(&mut conn.wbuf, |b| {
                put_i32(b, xid::SET_WATCHES);
                put_i32(b, op.code());
                b.put_i64(zxid);
                for list in &batch[..if v2 { 5 } else { 3 }] {
                    put_string_vec(b, list);
                }
            });
            conn.pending.push_back(Pending {
                xid: xid::SET_WATCHES,
                sent: now,
                kind: PendingKind::SetWatches,
            });
        }
    }

    /// After a watcher dropped: remove the server's watch if nothing local needs it any more
    /// and no request in flight may register it again.
    pub(super) fn maybe_remove_server_watch(
        &mut self,
        conn: &mut Conn,
        kind: WatchKind,
        path: &str,
        now: Instant,
    ) {
        if self.inflight_watch.get(path).copied().unwrap_or(0) > 0 {
            return;
        }
        let Some(watch_type) = self.watches.server_removal(kind, path) else {
            return;
        };
        let xid = self.xid();
        write_frame(&mut conn.wbuf, |b| {
            put_i32(b, xid);
            put_i32(b, OpCode::RemoveWatches.code());
            put_ustring(b, path);
            put_i32(b, watch_type.code());
        });
        conn.pending.push_back(Pending {
            xid,
            sent: now,
            kind: PendingKind::InternalRemove,
        });
    }

    pub(super) fn write_remove_watches(
        &mut self,
        conn: &mut Conn,
        path: String,
        watch_type: WatchType,
        frame: BytesMut,
        reply: oneshot::Sender<Result<()>>,
        now: Instant,
    ) {
        if !self.watches.contains(&path, watch_type) {
            let _ = reply.send(Err(Error::NoWatcher));
            return;
        }
        let xid = self.write_user_frame(conn, frame);
        conn.pending.push_back(Pending {
            xid,
            sent: now,
            kind: PendingKind::RemoveWatches {
                path,
                watch_type,
                reply,
            },
        });
    }

    /// Registers the watch a successful request set (`WatchRegistration.register`), unless the
    /// caller is gone, in which case the server's watch is removed if nothing else needs it.
    pub(super) fn register(
        &mut self,
        conn: &mut Conn,
        intent: WatchIntent,
        err: i32,
        caller_gone: bool,
        now: Instant,
    ) -> Option<WatcherReceiver> {
        if let Some(n) = self.inflight_watch.get_mut(&intent.path) {
            *n -= 1;
            if *n == 0 {
                self.inflight_watch.remove(&intent.path);
            }
        }
        let kind = match (intent.kind, err) {
            (kind, 0) => kind,
            // ExistsWatchRegistration: a missing node gets an exist watch.
            (WatchKind::Data, e) if e == ErrorCode::NoNode.code() && intent.exists => {
                WatchKind::Exist
            }
            _ => return None,
        };
        if caller_gone {
            self.maybe_remove_server_watch(conn, kind, &intent.path, now);
            return None;
        }
        let id = self.next_watcher_id;
        self.next_watcher_id += 1;
        let (sink, events) = if kind.is_persistent() {
            let (tx, rx) = mpsc::unbounded_channel();
            (Sink::Persistent(tx), WatcherEvents::Persistent(rx))
        } else {
            let (tx, rx) = oneshot::channel();
            (Sink::Oneshot(tx), WatcherEvents::Oneshot(rx))
        };
        self.watches.add(kind, &intent.path, id, sink);
        Some(WatcherReceiver {
            events,
            unwatch: Unwatch {
                tx: self.weak_tx.clone(),
                kind,
                path: intent.path,
                id,
                armed: true,
            },
            chroot: intent.chroot,
        })
    }

    pub(super) fn dispatch_event(&mut self, event: &WatcherEvent, zxid: i64) {
        let Some(event_type) = EventType::from_server(event.event_type) else {
            warn!(event.event_type, "unknown watch event type");
            return;
        };
        let watched = WatchedEvent::new(event_type, event.path.clone()).with_zxid(zxid);
        let fired = self.watches.fire(event_type, &event.path);
        for sink in fired.persistent {
            sink.send_ref(watched.clone());
        }
        for sink in fired.oneshot {
            sink.send(watched.clone());
        }
    }
}
