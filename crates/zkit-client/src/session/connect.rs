//! Connecting: host after host until a session is established (ClientCnxn.startConnect and
//! primeConnection), with what arrives meanwhile queued for the connection.

use std::collections::VecDeque;
use std::future::Future;
use std::sync::atomic::Ordering;
#[cfg(feature = "tls")]
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use rand::Rng;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tracing::{debug, info, warn};
use zkit_proto::codec::{put_i32, put_ustring};
use zkit_proto::op::xid;
use zkit_proto::{ConnectRequest, ConnectResponse, OpCode, Record};

use crate::error::Error;
use crate::hosts::Host;
use crate::timing;
use crate::transport::{ReadBuffer, Transport};
use crate::types::{SessionId, SessionInfo, SessionState};

use super::handle::{lock, Command};
use super::task::{write_frame, Conn, Queued, Task};

impl Task {
    /// Tries hosts until a session is established (returns its connection) or the session ends.
    pub(super) async fn establish(&mut self) -> std::result::Result<Conn, SessionState> {
        let mut tried = 0usize;
        // Full rounds over the hosts without a session, since this (re)connect began.
        let mut rounds = 0u32;
        loop {
            if let Some(state) = self.closing_state() {
                return Err(state);
            }
            let (host, back_off) = match self.rw_host.take() {
                Some(host) => (host, false),
                None => self.hosts.next(),
            };
            tried += 1;
            if !self.connected_once {
                if self.config.fail_eagerly && back_off {
                    self.fail_ready(Error::NoHosts);
                    return Err(SessionState::Closed);
                }
                if self.started.elapsed() >= self.config.session_timeout {
                    self.fail_ready(Error::Timeout);
                    return Err(SessionState::Closed);
                }
            }
            // No pause within a round; between rounds, a growing jittered one (see
            // `timing::round_pause` for how and why this differs from ClientCnxn.startConnect).
            if back_off {
                rounds = rounds.saturating_add(1);
                let most = timing::round_pause(rounds, timing::spin_delay(self.negotiated));
                if !most.is_zero() {
                    let pause = rand::thread_rng().gen_range(most / 2..=most);
                    debug!(?pause, rounds, "no host gave a session this round; pausing");
                    let sleep = tokio::time::sleep(pause);
                    if self.queue_while(sleep).await.is_none() {
                        continue;
                    }
                }
            }
            let timeout = timing::connect_timeout(self.negotiated, self.hosts.len());
            let request = ConnectRequest {
                protocol_version: 0,
                last_zxid_seen: self.last_zxid,
                time_out: i32::try_from(self.config.session_timeout.as_millis())
                    .unwrap_or(i32::MAX),
                session_id: if self.seen_rw { self.session_id } else { 0 },
                passwd: if self.seen_rw {
                    self.passwd.clone()
                } else {
                    vec![0; 16]
                },
                read_only: Some(self.config.readonly),
            };
            let attempt = attempt(
                host.clone(),
                request,
                self.config.max_frame,
                #[cfg(feature = "tls")]
                self.config.tls.clone(),
            );
            let sent = Instant::now();
            let outcome = match self
                .queue_while(tokio::time::timeout(timeout, attempt))
                .await
            {
                None => continue,
                Some(Err(_)) => Err(format!("no session within the connect timeout {timeout:?}")),
                Some(Ok(result)) => result,
            };
            match outcome {
                Err(why) => {
                    debug!(%host, reason = %why, tried, "connection attempt failed");
                    // ClientCnxn.cleanup: what waited for this attempt fails with it.
                    self.fail_queued(Error::ConnectionLoss);
                }
                Ok((transport, response, rbuf)) => {
                    if response.time_out <= 0 {
                        warn!(session = %SessionId(self.session_id), "session expired");
                        self.fail_ready(Error::SessionExpired);
                        return Err(SessionState::Expired);
                    }
                    return Ok(self.on_connected(transport, response, rbuf, host, sent));
                }
            }
        }
    }

    /// Runs `fut` while queueing commands; `None` when a close request interrupted it.
    /// Commands are looked at first: a close queued before `fut` finished (a connect attempt,
    /// say) wins over it, so a closed client never comes back connected.
    pub(super) async fn queue_while<F: Future>(&mut self, fut: F) -> Option<F::Output> {
        tokio::pin!(fut);
        loop {
            if self.closing.is_some() {
                return None;
            }
            tokio::select! {
                biased;
                cmd = self.rx.recv() => self.queue_command(cmd),
                out = &mut fut => return Some(out),
            }
        }
    }

    /// Handles a command while there is no connection.
    pub(super) fn queue_command(&mut self, cmd: Option<Command>) {
        match cmd {
            None => self.closing = Some(None),
            Some(Command::Request(submit)) => self.queued.push_back(Queued::Request(submit)),
            Some(Command::RemoveWatches {
                path,
                watch_type,
                frame,
                reply,
            }) => self.queued.push_back(Queued::RemoveWatches {
                path,
                watch_type,
                frame,
                reply,
            }),
            Some(Command::Auth {
                scheme,
                auth,
                reply,
            }) => {
                self.auths.push((scheme, auth));
                self.auth_waiters.push((self.auths.len() - 1, reply));
            }
            // The server forgets a connection's watches with it: only the local side remains.
            Some(Command::Unwatch { kind, path, id }) => {
                self.watches.remove(kind, &path, id);
            }
            Some(Command::Close { reply, end }) => {
                self.close_as_first(end);
                self.closing = Some(Some(reply));
            }
        }
    }

    pub(super) fn closing_state(&mut self) -> Option<SessionState> {
        // Without a connection there is nothing to close on the server: the session expires.
        let reply = self.closing.as_mut()?.take();
        if let Some(reply) = reply {
            let _ = reply.send(());
        }
        self.fail_ready(self.close_as.to_error());
        Some(self.close_as)
    }

    pub(super) fn on_connected(
        &mut self,
        transport: Transport,
        response: ConnectResponse,
        rbuf: ReadBuffer,
        host: Host,
        sent: Instant,
    ) -> Conn {
        let readonly = response.read_only == Some(true);
        if !self.config.readonly && readonly {
            warn!(%host, "read/write client got connected to read-only server");
        }
        self.negotiated = Duration::from_millis(u64::try_from(response.time_out).unwrap_or(0));
        self.session_id = response.session_id;
        self.passwd = response.passwd;
        self.seen_rw |= !readonly;
        self.hosts.on_connected();
        self.connected_once = true;
        self.shared.timeout_ms.store(
            u64::try_from(response.time_out).unwrap_or(0),
            Ordering::Relaxed,
        );
        *lock(&self.shared.info) = SessionInfo {
            id: SessionId(self.session_id),
            password: self.passwd.clone(),
            readonly,
        };
        self.shared.set_ack(sent);
        *lock(&self.shared.server) = Some(host.address());
        info!(
            session = %SessionId(self.session_id),
            %host,
            timeout_ms = response.time_out,
            readonly,
            "session established"
        );
        let now = Instant::now();
        let mut conn = Conn {
            transport,
            rbuf,
            wbuf: BytesMut::new(),
            pending: VecDeque::new(),
            pings: VecDeque::new(),
            auths: VecDeque::new(),
            last_send: now,
            last_recv: now,
            host,
        };
        // primeConnection: auth packets, then the watches, then what waited.
        for (i, (scheme, auth)) in self.auths.iter().enumerate() {
            write_frame(&mut conn.wbuf, |b| {
                put_i32(b, xid::AUTH);
                put_i32(b, OpCode::Auth.code());
                put_i32(b, 0);
                put_ustring(b, scheme);
                zkit_proto::codec::put_buffer(b, auth);
            });
            conn.auths.push_back(i);
        }
        self.write_set_watches(&mut conn, now);
        let state = if readonly {
            SessionState::ConnectedReadOnly
        } else {
            SessionState::SyncConnected
        };
        self.set_state(state);
        if let Some(ready) = self.ready.take() {
            let _ = ready.send(Ok(()));
        }
        for queued in std::mem::take(&mut self.queued) {
            match queued {
                Queued::Request(submit) => self.write_submit(&mut conn, submit, now),
                Queued::RemoveWatches {
                    path,
                    watch_type,
                    frame,
                    reply,
                } => self.write_remove_watches(&mut conn, path, watch_type, frame, reply, now),
            }
        }
        conn
    }
}

/// One connection attempt: resolve, connect, (TLS), ConnectRequest, ConnectResponse.
pub(super) async fn attempt(
    host: Host,
    request: ConnectRequest,
    max_frame: usize,
    #[cfg(feature = "tls")] tls: Option<Arc<crate::tls::TlsConnector>>,
) -> std::result::Result<(Transport, ConnectResponse, ReadBuffer), String> {
    let tcp = connect_tcp(&host).await?;
    #[allow(unused_mut)]
    let mut transport = Transport::Tcp(tcp);
    if host.tls {
        #[cfg(feature = "tls")]
        {
            let Some(tls) = tls else {
                return Err(format!("{host} asks for TLS but no TLS options were given"));
            };
            let Transport::Tcp(tcp) = transport else {
                unreachable!("plain TCP was just made")
            };
            transport = Transport::Tls(Box::new(tls.connect(&host.host, tcp).await?));
        }
        #[cfg(not(feature = "tls"))]
        return Err(format!(
            "{host} asks for TLS but zkit-client was built without the `tls` feature"
        ));
    }
    let mut out = BytesMut::new();
    write_frame(&mut out, |b| request.encode(b));
    write_all(&mut transport, &out)
        .await
        .map_err(|e| format!("write: {e}"))?;
    let mut rbuf = ReadBuffer::default();
    loop {
        match zkit_proto::decode_frame(rbuf.data(), max_frame) {
            Ok(Some((consumed, payload))) => {
                let response = ConnectResponse::decode_from(payload)
                    .map_err(|e| format!("bad ConnectResponse: {e}"))?;
                rbuf.consume(consumed);
                return Ok((transport, response, rbuf));
            }
            Ok(None) => {}
            Err(e) => return Err(format!("bad frame: {e}")),
        }
        let n = std::future::poll_fn(|cx| rbuf.poll_read_from(&mut transport, cx))
            .await
            .map_err(|e| format!("read: {e}"))?;
        if n == 0 {
            return Err("closed before the ConnectResponse".into());
        }
    }
}

async fn write_all(transport: &mut Transport, mut bytes: &[u8]) -> std::io::Result<()> {
    while !bytes.is_empty() {
        let n = std::future::poll_fn(|cx| transport.poll_write(cx, bytes)).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        bytes = &bytes[n..];
    }
    std::future::poll_fn(|cx| transport.poll_flush(cx)).await
}

/// Resolves `host` (every attempt, as `StaticHostProvider.resolve`; one of its addresses at
/// random) and connects with `TCP_NODELAY`.
async fn connect_tcp(host: &Host) -> std::result::Result<TcpStream, String> {
    let mut addrs: Vec<_> = tokio::net::lookup_host(host.address())
        .await
        .map_err(|e| format!("resolve {host}: {e}"))?
        .collect();
    if addrs.is_empty() {
        return Err(format!("{host} resolves to no address"));
    }
    let pick = rand::thread_rng().gen_range(0..addrs.len());
    let addr = addrs.swap_remove(pick);
    let tcp = TcpStream::connect(addr)
        .await
        .map_err(|e| format!("connect {addr}: {e}"))?;
    tcp.set_nodelay(true)
        .map_err(|e| format!("TCP_NODELAY: {e}"))?;
    Ok(tcp)
}

/// `ClientCnxn.SendThread.pingRwServer`: asks `host` `isro`; `Some(host)` when it answers `rw`.
pub(super) async fn probe_rw(host: Host) -> Option<Host> {
    let probe = async {
        let mut tcp = connect_tcp(&host).await.ok()?;
        tcp.write_all(b"isro").await.ok()?;
        let _ = tcp.shutdown().await;
        let mut answer = Vec::new();
        tcp.read_to_end(&mut answer).await.ok()?;
        (answer.starts_with(b"rw")).then_some(())
    };
    match tokio::time::timeout(Duration::from_secs(1), probe).await {
        Ok(Some(())) => Some(host),
        _ => None,
    }
}
