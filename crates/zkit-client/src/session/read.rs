//! Incoming: frames decoded in arrival order and matched to what is pending (replies in xid
//! order, pings, auth answers, notifications).

use std::sync::atomic::Ordering;

use bytes::Bytes;
use tokio::time::Instant;
use tracing::warn;
use zkit_proto::op::xid;
use zkit_proto::{ErrorCode, Record, ReplyHeader, WatcherEvent};

use crate::error::Error;
use crate::types::{SessionId, SessionState, WatchedEvent};

use super::handle::Reply;
use super::task::{Conn, PendingKind, Stop, Task};

impl Task {
    /// Handles every complete frame in the read buffer, in order.
    pub(super) fn process_frames(&mut self, conn: &mut Conn, now: Instant) -> Option<Stop> {
        loop {
            let (consumed, frame) =
                match zkit_proto::decode_frame(conn.rbuf.data(), self.config.max_frame) {
                    Ok(Some((consumed, payload))) => (consumed, Bytes::copy_from_slice(payload)),
                    Ok(None) => {
                        // Make room for the rest of a large frame in one go.
                        if let Some(len) = conn.rbuf.data().first_chunk::<4>() {
                            let want = usize::try_from(i32::from_be_bytes(*len)).unwrap_or(0) + 4;
                            let have = conn.rbuf.data().len();
                            conn.rbuf.reserve(want.saturating_sub(have));
                        }
                        return None;
                    }
                    Err(e) => {
                        return Some(Stop::Disconnected(format!("bad frame from server: {e}")))
                    }
                };
            conn.rbuf.consume(consumed);
            if let Err(stop) = self.process_frame(conn, frame, now) {
                return Some(stop);
            }
        }
    }

    pub(super) fn process_frame(
        &mut self,
        conn: &mut Conn,
        frame: Bytes,
        now: Instant,
    ) -> std::result::Result<(), Stop> {
        let header = ReplyHeader::decode_from(&frame)
            .map_err(|e| Stop::Disconnected(format!("bad reply header: {e}")))?;
        let body = frame.slice(16..);
        match header.xid {
            xid::NOTIFICATION => {
                let event = WatcherEvent::decode_from(&body)
                    .map_err(|e| Stop::Disconnected(format!("bad notification: {e}")))?;
                self.dispatch_event(&event, header.zxid);
                Ok(())
            }
            xid::PING => {
                let sent = conn
                    .pings
                    .pop_front()
                    .ok_or_else(|| Stop::Disconnected("ping reply without a ping".into()))?;
                self.shared.set_ack(sent);
                Ok(())
            }
            xid::AUTH => {
                let index = conn
                    .auths
                    .pop_front()
                    .ok_or_else(|| Stop::Disconnected("auth reply without an auth".into()))?;
                if header.err == ErrorCode::AuthFailed.code() {
                    warn!(session = %SessionId(self.session_id), "authentication failed");
                    return Err(Stop::Terminal(SessionState::AuthFailed));
                }
                let result = match Error::from_code(header.err) {
                    None => Ok(()),
                    Some(err) => Err(err),
                };
                let mut waiting = Vec::new();
                for (i, waiter) in std::mem::take(&mut self.auth_waiters) {
                    if i == index {
                        let _ = waiter.send(result.clone());
                    } else {
                        waiting.push((i, waiter));
                    }
                }
                self.auth_waiters = waiting;
                Ok(())
            }
            _ => {
                let Some(pending) = conn.pending.pop_front() else {
                    return Err(Stop::Disconnected(format!(
                        "reply for xid {} with nothing pending",
                        header.xid
                    )));
                };
                if pending.xid != header.xid {
                    // ClientCnxn.SendThread.readResponse: "Xid out of order".
                    let stop = Stop::Disconnected(format!(
                        "xid out of order: got {} expected {}",
                        header.xid, pending.xid
                    ));
                    conn.pending.push_front(pending);
                    return Err(stop);
                }
                if header.zxid > 0 && header.zxid > self.last_zxid {
                    self.last_zxid = header.zxid;
                    self.shared.last_zxid.store(header.zxid, Ordering::Relaxed);
                }
                self.shared.set_ack(pending.sent);
                self.complete(conn, pending.kind, header.err, body, now)
            }
        }
    }

    pub(super) fn complete(
        &mut self,
        conn: &mut Conn,
        kind: PendingKind,
        err: i32,
        body: Bytes,
        now: Instant,
    ) -> std::result::Result<(), Stop> {
        match kind {
            PendingKind::User { watch, reply } => {
                let watcher = watch
                    .and_then(|intent| self.register(conn, intent, err, reply.is_closed(), now));
                let _ = reply.send(Ok(Reply { err, body, watcher }));
            }
            PendingKind::SetWatches => {
                if err != 0 {
                    warn!(err, "the server refused to re-register watches");
                }
            }
            PendingKind::InternalRemove => {}
            PendingKind::RemoveWatches {
                path,
                watch_type,
                reply,
            } => {
                let result = if err == 0 || err == ErrorCode::NoWatcher.code() {
                    let removed = self.watches.remove_all(&path, watch_type);
                    if removed.is_empty() {
                        Err(Error::NoWatcher)
                    } else {
                        for (sink, event_type) in removed {
                            sink.send(WatchedEvent::new(event_type, path.clone()));
                        }
                        Ok(())
                    }
                } else {
                    Err(Error::from_code(err).unwrap_or(Error::NoWatcher))
                };
                let _ = reply.send(result);
            }
            PendingKind::Close { reply } => {
                if let Some(reply) = reply {
                    let _ = reply.send(());
                }
                return Err(Stop::Terminal(self.close_as));
            }
        }
        Ok(())
    }
}
