//! One client connection: a reader and a writer over the two halves of the socket.
//!
//! The reader cuts frames (4-byte length, limit `max_frame`), decodes the handshake and then
//! request headers and bodies, and queues them for the pipeline; it never touches state. The
//! writer encodes whatever the pipeline sends back, in order, coalescing what is queued into one
//! write. What the pipeline sends back goes through an [`Outbox`] (see `outbox`). On a fresh
//! connection the first four bytes may be a four-letter word instead of a length: it is
//! answered and the connection closed (see `four_letter`).
//!
//! On the secure client port the same happens inside TLS (`serve_tls`): the handshake comes
//! first, and a verified client certificate gives the connection its `x509` identity.
//!
//! Anything malformed — a negative or oversized length, a handshake or request header that does
//! not decode, a closed socket — ends this connection only. A body that does not decode (or an
//! unknown op code) is answered with ZooKeeper's error code instead, as Apache does.

use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Instant;

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::{Semaphore, TryAcquireError};
use tokio_util::sync::CancellationToken;
use tracing::{debug, field, info_span, warn, Instrument, Span};
use zkit_core::{ConnId, Outbound};
use zkit_proto::frame::{decode_frame, encode_frame, is_four_letter_word, FrameError};
use zkit_proto::op::xid;
use zkit_proto::{
    ConnectRequest, DecodeError, ErrorCode, Reader, Record, ReplyHeader, Request, RequestHeader,
};

use crate::four_letter;
use crate::metrics::{op_name, ConnMetrics, Metrics};
use crate::outbox::{outbox, Outbox, Taken};
use crate::shared::Shared;
use crate::to_core::ToCore;

/// Largest chunk the writer builds before writing, so one slow client's backlog is written in
/// bounded pieces.
const WRITE_CHUNK: usize = 256 * 1024;

/// Serves one accepted connection until it closes.
pub(crate) async fn serve(stream: TcpStream, peer: SocketAddr, conn: ConnId, shared: Arc<Shared>) {
    let span = info_span!("conn", conn, %peer, session = field::Empty);
    async move {
        let Some(_slot) = admit(&stream, peer, &shared) else {
            return;
        };
        let metrics = shared.metrics.add_connection(conn, peer);
        run(stream, peer, conn, &shared, &metrics, None).await;
        shared.metrics.remove_connection(conn);
        debug!("connection closed");
    }
    .instrument(span)
    .await
}

/// Serves one connection of the secure client port: the TLS handshake first (bounded by the
/// handshake timeout, as the ZooKeeper handshake is), then as [`serve`]. A client that does
/// not complete the handshake — a plaintext client, a certificate that does not verify —
/// is closed; nobody else notices (Apache's `NettyServerCnxnFactory.CertificateVerifier`
/// closes it too).
#[cfg(feature = "tls")]
pub(crate) async fn serve_tls(
    stream: TcpStream,
    peer: SocketAddr,
    conn: ConnId,
    shared: Arc<Shared>,
    acceptor: tokio_rustls::TlsAcceptor,
) {
    let span = info_span!("conn", conn, %peer, tls = true, session = field::Empty);
    async move {
        let Some(_slot) = admit(&stream, peer, &shared) else {
            return;
        };
        let handshake = tokio::select! {
            () = shared.shutdown.cancelled() => return,
            done = tokio::time::timeout(shared.config.sessionless_timeout, acceptor.accept(stream)) => done,
        };
        let stream = match handshake {
            Ok(Ok(stream)) => stream,
            Ok(Err(err)) => {
                shared.metrics.tls_handshake_failures.fetch_add(1, Relaxed);
                warn!(%err, "TLS handshake failed; closing the connection");
                return;
            }
            Err(_) => {
                shared.metrics.tls_handshake_failures.fetch_add(1, Relaxed);
                warn!("no TLS handshake in time; closing the connection");
                return;
            }
        };
        let subject = crate::tls::peer_subject(stream.get_ref().1);
        if let Some(subject) = &subject {
            debug!(%subject, "authenticated by client certificate (x509)");
        }
        let metrics = shared.metrics.add_connection(conn, peer);
        run(stream, peer, conn, &shared, &metrics, subject).await;
        shared.metrics.remove_connection(conn);
        debug!("connection closed");
    }
    .instrument(span)
    .await
}

/// Counts the connection against its IP's `maxClientCnxns`, or refuses it; sets TCP_NODELAY.
fn admit(
    stream: &TcpStream,
    peer: SocketAddr,
    shared: &Shared,
) -> Option<crate::limits::ConnectionSlot> {
    let max = shared.config.limits.max_client_cnxns;
    let Some(slot) = shared.conn_counts.admit(peer.ip(), max) else {
        // Apache's NIOServerCnxnFactory closes such a socket before reading anything.
        warn!("Too many connections from {} - max is {max}", peer.ip());
        shared.metrics.refused_connections.fetch_add(1, Relaxed);
        return None;
    };
    // Latency matters more than packet count for this protocol (pings, small replies).
    let _ = stream.set_nodelay(true);
    Some(slot)
}

/// A connection's byte stream, cut into a read half and a write half for the reader and
/// writer tasks.
pub(crate) trait Duplex: AsyncRead + AsyncWrite + Unpin + Send + 'static {
    /// The read half.
    type Read: AsyncRead + Unpin + Send + 'static;
    /// The write half.
    type Write: AsyncWrite + Unpin + Send + 'static;
    /// Splits the stream.
    fn split(self) -> (Self::Read, Self::Write);
}

impl Duplex for TcpStream {
    type Read = OwnedReadHalf;
    type Write = OwnedWriteHalf;
    fn split(self) -> (OwnedReadHalf, OwnedWriteHalf) {
        self.into_split()
    }
}

#[cfg(feature = "tls")]
impl Duplex for tokio_rustls::server::TlsStream<TcpStream> {
    type Read = tokio::io::ReadHalf<Self>;
    type Write = tokio::io::WriteHalf<Self>;
    fn split(self) -> (Self::Read, Self::Write) {
        tokio::io::split(self)
    }
}

async fn run<S: Duplex>(
    mut stream: S,
    peer: SocketAddr,
    conn: ConnId,
    shared: &Arc<Shared>,
    metrics: &Arc<ConnMetrics>,
    x509: Option<String>,
) {
    let mut buf = BytesMut::with_capacity(4096);
    // A connection gets this long to complete its handshake; idle ones do not pile up.
    let handshake_deadline = tokio::time::Instant::now() + shared.config.sessionless_timeout;
    // The first four bytes decide: a four-letter word, or the length of the handshake.
    while buf.len() < 4 {
        tokio::select! {
            () = shared.shutdown.cancelled() => return,
            () = tokio::time::sleep_until(handshake_deadline) => {
                debug!("no handshake in time");
                return;
            }
            read = stream.read_buf(&mut buf) => match read {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    }
    if let Some(word) = buf.first_chunk::<4>().and_then(|b| is_four_letter_word(*b)) {
        shared.metrics.packets_received.fetch_add(1, Relaxed);
        metrics.received.fetch_add(1, Relaxed);
        // `stmk` carries its argument: the new trace mask as an 8-byte long.
        let mut arg = None;
        if word == "stmk" {
            while buf.len() < 12 {
                tokio::select! {
                    () = shared.shutdown.cancelled() => return,
                    () = tokio::time::sleep_until(handshake_deadline) => return,
                    read = stream.read_buf(&mut buf) => match read {
                        Ok(0) | Err(_) => return,
                        Ok(_) => {}
                    }
                }
            }
            arg = buf
                .get(4..12)
                .and_then(|b| <[u8; 8]>::try_from(b).ok())
                .map(i64::from_be_bytes);
        }
        let text = four_letter::answer(word, arg, shared).await;
        let _ = stream.write_all(text.as_bytes()).await;
        let _ = stream.shutdown().await;
        return;
    }

    let (read_half, write_half) = stream.split();
    // The pipeline never waits on one slow client (that would stall everyone, like a blocked
    // ZooKeeper commit processor): a client whose queue passes the bound is closed instead.
    let (out_tx, out_rx) = outbox(shared.config.limits.max_outbound_bytes.max(1));
    if shared
        .to_core
        .send(ToCore::Open {
            conn,
            peer: peer.ip(),
            x509,
            outbound: out_tx,
        })
        .await
        .is_err()
    {
        return; // the pipeline has stopped
    }
    let closing = shared.shutdown.child_token();
    // Back-pressure: one permit per request in flight; the reader takes one before handing a
    // request to the pipeline, the writer returns it once the reply is written. A client that
    // pipelines too much (or stops reading its replies) stops being read.
    let in_flight = Arc::new(Semaphore::new(
        shared.config.limits.max_outstanding_per_connection.max(1),
    ));
    let writer = tokio::spawn(
        write_loop(
            write_half,
            out_rx,
            closing.clone(),
            shared.metrics.clone(),
            metrics.clone(),
            in_flight.clone(),
        )
        .instrument(Span::current()),
    );
    let reading = read_loop(
        read_half,
        buf,
        peer,
        conn,
        shared,
        metrics,
        &closing,
        handshake_deadline,
        &in_flight,
    );
    if let Err(why) = reading.await {
        debug!(%why, "closing connection");
    }
    // Tell the core (its watches die, its session lives on) and let the writer finish what is
    // queued: it ends when the pipeline drops our sender.
    let _ = shared.to_core.send(ToCore::Closed { conn }).await;
    let _ = writer.await;
}

/// Reads frames until the peer closes, a frame is malformed, or `closing` fires.
#[allow(clippy::too_many_arguments)]
async fn read_loop(
    mut read: impl AsyncRead + Unpin,
    mut buf: BytesMut,
    peer: SocketAddr,
    conn: ConnId,
    shared: &Shared,
    metrics: &ConnMetrics,
    closing: &CancellationToken,
    handshake_deadline: tokio::time::Instant,
    in_flight: &Semaphore,
) -> Result<(), String> {
    let mut handshaken = false;
    // When the bytes in `buf` arrived: every request cut from one read shares it (one clock
    // read per read, not per request).
    let mut received = Instant::now();
    loop {
        // Every complete frame already buffered.
        loop {
            let (consumed, message) = match decode_frame(&buf, shared.config.max_frame) {
                Err(FrameError::TooLarge { len, max }) => {
                    // Once per connection: it is closed now. Apache logs "Len error" and
                    // "Closing connection to <addr>" at WARN (ServerCnxn,
                    // checkRequestSizeWhenReceivingMessage).
                    warn!(
                        client = %peer,
                        "Len error {len}: a frame of {len} bytes from {peer} exceeds \
                         jute.maxbuffer ({max} bytes); closing the connection"
                    );
                    return Err("frame too large".into());
                }
                Err(err) => return Err(format!("bad frame: {err}")),
                Ok(None) => break,
                Ok(Some((consumed, payload))) => {
                    let message = if handshaken {
                        decode_request(conn, payload, received)?
                    } else {
                        let request = ConnectRequest::decode_from(payload)
                            .map_err(|err| format!("bad handshake: {err}"))?;
                        handshaken = true;
                        ToCore::Connect { conn, request }
                    };
                    (consumed, message)
                }
            };
            buf.advance(consumed);
            shared.metrics.packets_received.fetch_add(1, Relaxed);
            metrics.received.fetch_add(1, Relaxed);
            let is_request = matches!(message, ToCore::Request { .. } | ToCore::Reject { .. });
            if is_request {
                let op = match &message {
                    ToCore::Request { request, .. } => op_name(request.op_code()),
                    _ => "error",
                };
                metrics.request_read(op, received);
                // A permit is returned by the writer (add_permits) when the reply is written.
                // Taken without waiting when one is free, the common case: waiting builds a
                // cancellation future per request.
                match in_flight.try_acquire() {
                    Ok(permit) => permit.forget(),
                    Err(TryAcquireError::Closed) => {
                        return Err("in-flight limiter closed".into());
                    }
                    Err(TryAcquireError::NoPermits) => tokio::select! {
                        () = closing.cancelled() => return Ok(()),
                        permit = in_flight.acquire() => match permit {
                            Ok(permit) => permit.forget(),
                            Err(_) => return Err("in-flight limiter closed".into()),
                        },
                    },
                }
            }
            // The same for the pipeline's queue: wait only when it is full.
            match shared.to_core.try_send(message) {
                Ok(()) => {}
                Err(TrySendError::Closed(_)) => return Err("server stopping".into()),
                Err(TrySendError::Full(message)) => tokio::select! {
                    () = closing.cancelled() => return Ok(()),
                    sent = shared.to_core.send(message) => {
                        if sent.is_err() {
                            return Err("server stopping".into());
                        }
                    }
                },
            }
            if is_request {
                // May briefly run behind the pipeline's decrement; readers clamp at 0.
                shared.metrics.outstanding.fetch_add(1, Relaxed);
            }
        }
        tokio::select! {
            () = closing.cancelled() => return Ok(()),
            () = tokio::time::sleep_until(handshake_deadline), if !handshaken => {
                return Err("no handshake in time".into());
            }
            read = read.read_buf(&mut buf) => match read {
                Ok(0) => return Err("peer closed".into()),
                Ok(_) => received = Instant::now(),
                Err(err) => return Err(format!("read: {err}")),
            }
        }
    }
}

/// A request frame after the handshake. A header that does not decode closes the connection;
/// a body that does not decode is answered with an error, as ZooKeeper does (it reads the
/// header in the connection, the body later in the pipeline).
fn decode_request(conn: ConnId, payload: &[u8], received: Instant) -> Result<ToCore, String> {
    let mut r = Reader::new(payload);
    let header =
        RequestHeader::decode(&mut r).map_err(|err| format!("bad request header: {err}"))?;
    match Request::decode(&header, r.rest()) {
        Ok(request) => Ok(ToCore::Request {
            conn,
            xid: header.xid,
            request,
            received,
        }),
        Err(err) => {
            debug!(xid = header.xid, op = header.op, %err, "request rejected");
            let err = match err {
                // ZooKeeper answers op codes it does not know with Unimplemented.
                DecodeError::UnknownOp(_) => ErrorCode::Unimplemented,
                _ => ErrorCode::MarshallingError,
            };
            Ok(ToCore::Reject {
                conn,
                xid: header.xid,
                op: header.op,
                err,
                received,
            })
        }
    }
}

/// Writes the pipeline's messages in order until it closes the outbox or sends a close; stops
/// at once, writing nothing more, when the outbox overflowed.
async fn write_loop(
    mut write: impl AsyncWrite + Unpin,
    outbox: Arc<Outbox>,
    closing: CancellationToken,
    server: Arc<Metrics>,
    metrics: Arc<ConnMetrics>,
    in_flight: Arc<Semaphore>,
) {
    let mut out = BytesMut::with_capacity(4096);
    let mut taken: Vec<Outbound> = Vec::new();
    let mut written: Vec<(i32, i64)> = Vec::new();
    'outer: loop {
        let closed = match outbox.take(&mut taken) {
            Taken::Overflowed => break 'outer,
            Taken::Messages { closed } => closed,
        };
        if taken.is_empty() {
            if closed {
                break;
            }
            outbox.queued().await;
            continue;
        }
        let mut messages = taken.drain(..);
        let mut close = false;
        while !close {
            // Coalesce into one write, in bounded pieces so one backlog is not one huge buffer.
            let (mut count, mut replies) = (0u64, 0usize);
            for message in messages.by_ref() {
                count += u64::from(!matches!(message, Outbound::Close));
                replies += usize::from(matches!(message, Outbound::Reply { .. }));
                close = encode(message, &mut out, &metrics, &mut written);
                if close || out.len() >= WRITE_CHUNK {
                    break;
                }
            }
            if out.is_empty() {
                break;
            }
            tokio::select! {
                written = write.write_all(&out) => if let Err(err) = written {
                    debug!(%err, "write failed");
                    break 'outer;
                },
                // The client stopped reading and the pipeline gave up on it: the pending
                // write never completes, so do not wait for it.
                () = outbox.overflowed() => break 'outer,
            }
            out.clear();
            metrics.replies_written(&server, &written);
            written.clear();
            in_flight.add_permits(replies);
            server.packets_sent.fetch_add(count, Relaxed);
            metrics.sent.fetch_add(count, Relaxed);
        }
        drop(messages);
        if close {
            break;
        }
    }
    let _ = write.shutdown().await;
    // Stop the reader too: after a close nothing more is read.
    closing.cancel();
}

/// Appends one message's frame; returns whether the connection closes after it.
/// A written reply's `(xid, zxid)` goes to `written`, for [`ConnMetrics::replies_written`].
fn encode(
    message: Outbound,
    out: &mut BytesMut,
    metrics: &ConnMetrics,
    written: &mut Vec<(i32, i64)>,
) -> bool {
    match message {
        Outbound::Connect {
            response,
            close_after,
        } => {
            if !close_after {
                metrics.session.store(response.session_id, Relaxed);
                Span::current().record(
                    "session",
                    field::display(format_args!("{:#x}", response.session_id)),
                );
            }
            encode_frame(out, |b| response.encode(b));
            close_after
        }
        Outbound::Reply { header, body } => {
            // Counted once written (write_loop): per-op latency and `cons` fields.
            written.push((header.xid, header.zxid));
            encode_frame(out, |b| {
                header.encode(b);
                if header.err == 0 {
                    body.encode(b);
                }
            });
            false
        }
        Outbound::Event { zxid, event } => {
            encode_frame(out, |b| {
                ReplyHeader {
                    xid: xid::NOTIFICATION,
                    zxid,
                    err: 0,
                }
                .encode(b);
                event.encode(b);
            });
            false
        }
        Outbound::Close => true,
    }
}
