//! Serving one connection: the loop that writes what is buffered, reads frames, takes
//! commands, pings after idle sending, enforces the read timeout and, in read-only mode,
//! probes for a read-write server.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use bytes::BytesMut;
use tokio::time::Instant;
use tracing::{debug, info};
use zkit_proto::codec::put_i32;
use zkit_proto::op::xid;
use zkit_proto::OpCode;

use crate::hosts::Host;
use crate::timing;
use crate::types::SessionState;

use super::connect::probe_rw;
use super::handle::Command;
use super::task::{write_frame, Conn, PendingKind, Stop, Task};

/// Read-only mode: first and largest pause between probes for a read-write server
/// (`minPingRwTimeout`, `maxPingRwTimeout`).
const MIN_PING_RW: Duration = Duration::from_millis(100);
const MAX_PING_RW: Duration = Duration::from_secs(60);
/// A write buffer above this is given back once flushed.
const KEEP_WRITE_CAPACITY: usize = 64 * 1024;

impl Task {
    pub(super) async fn serve(&mut self, mut conn: Conn) -> Stop {
        let read_timeout = self
            .config
            .read_timeout
            .unwrap_or_else(|| timing::read_timeout(self.negotiated));
        let ping_every = timing::ping_interval(read_timeout);
        let mut rw_probe: Option<RwProbe> = None;
        let mut ping_rw = MIN_PING_RW;
        let mut next_rw_probe = Instant::now() + ping_rw;
        debug!(host = %conn.host, ?read_timeout, ?ping_every, "serving");
        let sleep = tokio::time::sleep_until(Instant::now() + ping_every);
        tokio::pin!(sleep);
        let stop = loop {
            let readonly = self.shared.state.borrow().state == SessionState::ConnectedReadOnly;
            let mut deadline = (conn.last_recv + read_timeout).min(conn.last_send + ping_every);
            if readonly && rw_probe.is_none() {
                deadline = deadline.min(next_rw_probe);
            }
            // Activity only moves the deadline later: let the timer fire at the old one and
            // re-arm then (the checks below are against the real clocks), instead of touching
            // the timer wheel on every frame.
            if deadline < sleep.deadline() || sleep.is_elapsed() {
                sleep.as_mut().reset(deadline);
            }
            let accept = self.closing.is_none();
            let event = std::future::poll_fn(|cx| {
                if !conn.wbuf.is_empty() {
                    match conn.transport.poll_write(cx, &conn.wbuf) {
                        Poll::Ready(Ok(n)) => return Poll::Ready(Event::Wrote(Ok(n))),
                        Poll::Ready(Err(e)) => return Poll::Ready(Event::Wrote(Err(e))),
                        Poll::Pending => {}
                    }
                }
                if let Poll::Ready(r) = conn.rbuf.poll_read_from(&mut conn.transport, cx) {
                    return Poll::Ready(Event::Read(r));
                }
                if accept {
                    if let Poll::Ready(cmd) = self.rx.poll_recv(cx) {
                        return Poll::Ready(Event::Command(cmd));
                    }
                }
                if let Some(probe) = rw_probe.as_mut() {
                    if let Poll::Ready(found) = probe.as_mut().poll(cx) {
                        return Poll::Ready(Event::RwProbe(found));
                    }
                }
                if sleep.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(Event::Timer);
                }
                Poll::Pending
            })
            .await;
            let now = Instant::now();
            match event {
                Event::Wrote(Ok(n)) => {
                    bytes::Buf::advance(&mut conn.wbuf, n);
                    conn.last_send = now;
                    if conn.wbuf.is_empty() && conn.wbuf.capacity() > KEEP_WRITE_CAPACITY {
                        conn.wbuf = BytesMut::new();
                    }
                }
                Event::Wrote(Err(e)) => break Stop::Disconnected(format!("write: {e}")),
                Event::Read(Ok(0)) => {
                    break Stop::Disconnected("server closed the connection".into())
                }
                Event::Read(Ok(_)) => {
                    conn.last_recv = now;
                    if let Some(stop) = self.process_frames(&mut conn, now) {
                        break stop;
                    }
                    if conn.pending.is_empty() && conn.pings.is_empty() {
                        conn.rbuf.shrink_if_idle();
                    }
                    // Take what is queued meanwhile in one go: fewer wakeups under load.
                    for _ in 0..64 {
                        match self.rx.try_recv() {
                            Ok(cmd) => self.handle_command(&mut conn, Some(cmd), now),
                            Err(_) => break,
                        }
                    }
                }
                Event::Read(Err(e)) => break Stop::Disconnected(format!("read: {e}")),
                Event::Command(cmd) => {
                    self.handle_command(&mut conn, cmd, now);
                    for _ in 0..64 {
                        match self.rx.try_recv() {
                            Ok(cmd) => self.handle_command(&mut conn, Some(cmd), now),
                            Err(_) => break,
                        }
                    }
                }
                Event::RwProbe(found) => {
                    rw_probe = None;
                    if let Some(host) = found {
                        info!(%host, "found a read-write server");
                        self.rw_host = Some(host);
                        break Stop::Disconnected("switching to a read-write server".into());
                    }
                }
                Event::Timer => {
                    if now >= conn.last_recv + read_timeout {
                        break Stop::Disconnected(format!(
                            "no answer from the server for {} ms",
                            now.duration_since(conn.last_recv).as_millis()
                        ));
                    }
                    if now >= conn.last_send + ping_every && conn.wbuf.is_empty() {
                        write_frame(&mut conn.wbuf, |b| {
                            put_i32(b, xid::PING);
                            put_i32(b, OpCode::Ping.code());
                        });
                        conn.pings.push_back(now);
                        // Counts as sending from now on, as `clientCnxnSocket.updateLastSend()`.
                        conn.last_send = now;
                    }
                    if readonly && rw_probe.is_none() && now >= next_rw_probe {
                        // ClientCnxn.pingRwServer, with its doubling pause.
                        let (host, _) = self.hosts.next();
                        rw_probe = Some(Box::pin(probe_rw(host)));
                        ping_rw = (ping_rw * 2).min(MAX_PING_RW);
                        next_rw_probe = now + ping_rw;
                    }
                }
            }
            if let Some(stop) = self.closing_done(&conn) {
                break stop;
            }
        };
        self.end_connection(conn, stop).await
    }

    /// The close is complete when its reply came (or there was no session to close).
    pub(super) fn closing_done(&self, conn: &Conn) -> Option<Stop> {
        match &self.closing {
            Some(_)
                if !conn
                    .pending
                    .iter()
                    .any(|p| matches!(p.kind, PendingKind::Close { .. })) =>
            {
                Some(Stop::Terminal(self.close_as))
            }
            _ => None,
        }
    }

    /// Flushes what is buffered (a best effort, bounded) before a terminal stop.
    pub(super) async fn end_connection(&mut self, mut conn: Conn, stop: Stop) -> Stop {
        if let Stop::Terminal(_) = stop {
            let flush = async {
                while !conn.wbuf.is_empty() {
                    match std::future::poll_fn(|cx| conn.transport.poll_write(cx, &conn.wbuf)).await
                    {
                        Ok(0) | Err(_) => break,
                        Ok(n) => bytes::Buf::advance(&mut conn.wbuf, n),
                    }
                }
                let _ = std::future::poll_fn(|cx| conn.transport.poll_flush(cx)).await;
            };
            let _ = tokio::time::timeout(Duration::from_secs(1), flush).await;
        }
        self.fail_pending(conn, &stop);
        stop
    }
}

enum Event {
    Wrote(std::io::Result<usize>),
    Read(std::io::Result<usize>),
    Command(Option<Command>),
    RwProbe(Option<Host>),
    Timer,
}

type RwProbe = Pin<Box<dyn Future<Output = Option<Host>> + Send>>;
