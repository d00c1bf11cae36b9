//! Outgoing: commands from the handles turned into frames (requests, auth, close), with the
//! xid each reply will be matched by.

use bytes::BytesMut;
use tokio::sync::oneshot;
use tokio::time::Instant;
use zkit_proto::codec::{put_i32, put_ustring};
use zkit_proto::op::xid;
use zkit_proto::OpCode;

use crate::error::Error;

use super::handle::{Command, Submit};
use super::task::{write_frame, Conn, Pending, PendingKind, Task};

impl Task {
    pub(super) fn handle_command(&mut self, conn: &mut Conn, cmd: Option<Command>, now: Instant) {
        match cmd {
            None => {
                // Every handle is gone: close the session unless it is detached.
                if self.config.detached {
                    self.closing = Some(None);
                } else {
                    self.write_close(conn, None, now);
                }
            }
            Some(Command::Close { reply, end }) => {
                self.close_as_first(end);
                self.write_close(conn, Some(reply), now);
            }
            Some(Command::Request(submit)) => self.write_submit(conn, submit, now),
            Some(Command::Auth {
                scheme,
                auth,
                reply,
            }) => {
                write_frame(&mut conn.wbuf, |b| {
                    put_i32(b, xid::AUTH);
                    put_i32(b, OpCode::Auth.code());
                    put_i32(b, 0);
                    put_ustring(b, &scheme);
                    zkit_proto::codec::put_buffer(b, &auth);
                });
                self.auths.push((scheme, auth));
                let index = self.auths.len() - 1;
                conn.auths.push_back(index);
                self.auth_waiters.push((index, reply));
            }
            Some(Command::Unwatch { kind, path, id }) => {
                if self.watches.remove(kind, &path, id).is_some() {
                    self.maybe_remove_server_watch(conn, kind, &path, now);
                }
            }
            Some(Command::RemoveWatches {
                path,
                watch_type,
                frame,
                reply,
            }) => self.write_remove_watches(conn, path, watch_type, frame, reply, now),
        }
    }

    pub(super) fn write_close(
        &mut self,
        conn: &mut Conn,
        reply: Option<oneshot::Sender<()>>,
        now: Instant,
    ) {
        if self.closing.is_some() {
            if let Some(reply) = reply {
                let _ = reply.send(());
            }
            return;
        }
        let xid = self.xid();
        write_frame(&mut conn.wbuf, |b| {
            put_i32(b, xid);
            put_i32(b, OpCode::CloseSession.code());
        });
        conn.pending.push_back(Pending {
            xid,
            sent: now,
            kind: PendingKind::Close { reply },
        });
        self.closing = Some(None);
    }

    pub(super) fn write_submit(&mut self, conn: &mut Conn, submit: Submit, now: Instant) {
        let Submit {
            frame,
            watch,
            precheck,
            reply,
        } = submit;
        if let Some((path, watch_type)) = precheck {
            if !self.watches.contains(&path, watch_type) {
                let _ = reply.send(Err(Error::NoWatcher));
                return;
            }
        }
        if reply.is_closed() {
            // Dropped before it was sent (it waited for a connection): nobody wants it.
            return;
        }
        if let Some(intent) = &watch {
            *self.inflight_watch.entry(intent.path.clone()).or_default() += 1;
        }
        let xid = self.write_user_frame(conn, frame);
        conn.pending.push_back(Pending {
            xid,
            sent: now,
            kind: PendingKind::User { watch, reply },
        });
    }

    /// Patches length and xid into a client-encoded frame and appends it.
    pub(super) fn write_user_frame(&mut self, conn: &mut Conn, mut frame: BytesMut) -> i32 {
        let xid = self.xid();
        let len = i32::try_from(frame.len() - 4).unwrap_or(i32::MAX);
        frame[..4].copy_from_slice(&len.to_be_bytes());
        frame[4..8].copy_from_slice(&xid.to_be_bytes());
        conn.wbuf.extend_from_slice(&frame);
        xid
    }

    pub(super) fn xid(&mut self) -> i32 {
        let xid = self.next_xid;
        // Negative xids are special (notification, ping, auth, setWatches): wrap to 1.
        self.next_xid = if xid == i32::MAX { 1 } else { xid + 1 };
        xid
    }
}
