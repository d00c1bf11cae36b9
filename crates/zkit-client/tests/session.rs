//! Sessions and connections: re-attach, expiry, drops and stalls through the fault proxy,
//! pings, the acknowledged-send instant, pipelining, TCP_NODELAY, host rotation, and what a
//! misbehaving or read-only server gets (scripted fake servers on zkit-proto).

mod common;

use std::collections::HashSet;
use std::time::Duration;

use bytes::BytesMut;
use common::{
    connect, eventually, on_both, on_both_with, ready_now, root, short_tick, within, Kind,
    EPHEMERAL, PERSISTENT,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use zkit_client::{
    Acls, AddWatchMode, Client, CreateMode, Error, SessionInfo, SessionState, WatchedEvent,
};
use zkit_proto::{ConnectRequest, ConnectResponse, Record, ReplyHeader, RequestHeader};
use zkit_server::Server;
use zkit_testkit::FaultProxy;

async fn via(proxy: &FaultProxy, timeout_ms: u64) -> Client {
    within(
        Client::connector()
            .with_session_timeout(Duration::from_millis(timeout_ms))
            .connect(&proxy.connect_string()),
    )
    .await
    .unwrap()
}

async fn gone(client: &Client, path: &str) -> bool {
    client.check_stat(path).await.unwrap().is_none()
}

#[tokio::test]
async fn reattach_with_id_and_password() {
    on_both(|addr, _| async move {
        let first = Client::connector()
            .with_detached()
            .connect(&addr)
            .await
            .unwrap();
        let r = root(&first, "reattach").await;
        let node = format!("{r}/eph");
        first.create(&node, b"", &EPHEMERAL).await.unwrap();
        let info = first.session();
        assert_eq!(info.password().len(), 16);
        // Detached: dropping the last handle leaves the session open.
        drop(first);
        // A wrong password is an expired session. (Asked while no connection holds the
        // session: a server moves a session to the connection that asks for it, so asking
        // would disconnect `second` below.)
        let mut wrong = info.password().to_vec();
        wrong[0] ^= 1;
        let bad = SessionInfo::new(info.id(), wrong);
        assert_eq!(
            Client::connector()
                .with_session(bad)
                .connect(&addr)
                .await
                .err(),
            Some(Error::SessionExpired)
        );
        let second = Client::connector()
            .with_session(info.clone())
            .connect(&addr)
            .await
            .unwrap();
        assert_eq!(second.session_id(), info.id());
        let (_, stat) = second.get_data(&node).await.unwrap();
        assert_eq!(stat.ephemeral_owner, info.id().0);
        // Not detached: dropping the last handle closes the session, its ephemerals go.
        drop(second);
        let observer = connect(&addr).await;
        eventually("the ephemeral to go", || gone(&observer, &node)).await;
    })
    .await;
}

/// The server clamps the requested timeout to its bounds (both test servers tick every 500 ms:
/// at least 1 s; at most 10 s on zkit, 40 s on Apache as scripts/apache-zk sets it) and the
/// client uses what it granted.
#[tokio::test]
async fn the_session_timeout_is_negotiated() {
    on_both_with(short_tick(), |addr, kind| async move {
        let max = if kind == Kind::Zkit { 10_000 } else { 40_000 };
        for (asked, granted) in [(100, 1000), (3000, 3000), (60_000, max)] {
            let c = Client::connector()
                .with_session_timeout(Duration::from_millis(asked))
                .connect(&addr)
                .await
                .unwrap();
            assert_eq!(
                c.session_timeout(),
                Duration::from_millis(granted),
                "asked {asked}"
            );
        }
    })
    .await;
}

/// Ends a session holding an ephemeral node and a watch with `close` (`Closed`) or `expire`
/// (`Expired`), and checks what every clone, watcher and later request is told, and that the
/// server ended the session too.
async fn end_and_check(addr: &str, end: SessionState) {
    let c = connect(addr).await;
    let expire = end == SessionState::Expired;
    let r = root(&c, if expire { "expire" } else { "close" }).await;
    c.create(&format!("{r}/e"), b"", &EPHEMERAL).await.unwrap();
    let (_, watcher) = c.check_and_watch_stat(&format!("{r}/never")).await.unwrap();
    let clone = c.clone();
    if expire {
        within(c.expire()).await;
    } else {
        within(c.close()).await;
    }
    assert_eq!(c.state(), end);
    let err = if expire {
        Error::SessionExpired
    } else {
        Error::ClientClosed
    };
    assert_eq!(clone.get_data("/").await, Err(err));
    assert_eq!(
        within(watcher.changed()).await,
        WatchedEvent::new_session(end)
    );
    if expire {
        // A later close changes nothing.
        within(c.close()).await;
        assert_eq!(clone.state(), SessionState::Expired);
    }
    let observer = connect(addr).await;
    assert!(gone(&observer, &format!("{r}/e")).await);
}

#[tokio::test]
async fn close_ends_the_session() {
    on_both(|addr, _| async move { end_and_check(&addr, SessionState::Closed).await }).await;
}

/// `expire` ends the session on the server as `close` does, but the client reports it as
/// expired, to every clone, watcher and later request; a later `close` changes nothing.
#[tokio::test]
async fn expire_ends_the_session_and_reports_it_expired() {
    on_both(|addr, _| async move { end_and_check(&addr, SessionState::Expired).await }).await;
}

/// The server expires a partitioned session: the client reports Expired to its state
/// watchers and to every watcher, and fails what waited and what follows.
#[tokio::test]
async fn expiry_reaches_every_watcher_and_request() {
    on_both_with(short_tick(), |addr, _| async move {
        let proxy = FaultProxy::start(addr.clone()).await.unwrap();
        let c = via(&proxy, 2000).await;
        let observer = connect(&addr).await;
        let r = root(&observer, "expiry").await;
        let eph = format!("{r}/eph");
        c.create(&eph, b"", &EPHEMERAL).await.unwrap();
        let (_, oneshot) = c.check_and_watch_stat(&format!("{r}/none")).await.unwrap();
        let mut persistent = c
            .watch(&r, AddWatchMode::PersistentRecursive)
            .await
            .unwrap();
        let mut states = c.state_watcher();

        proxy.pause();
        assert_eq!(within(states.changed()).await, SessionState::Disconnected);
        let waiting = c.get_data(&eph);
        eventually("the server to expire the session", || gone(&observer, &eph)).await;
        proxy.resume();
        assert_eq!(within(states.changed()).await, SessionState::Expired);
        assert_eq!(c.state(), SessionState::Expired);
        let err = within(waiting).await.unwrap_err();
        assert!(
            matches!(err, Error::SessionExpired | Error::ConnectionLoss),
            "{err:?}"
        );
        assert_eq!(c.get_data(&r).await, Err(Error::SessionExpired));
        assert_eq!(
            c.create(&eph, b"", &EPHEMERAL).await,
            Err(Error::SessionExpired)
        );
        assert_eq!(
            within(oneshot.changed()).await,
            WatchedEvent::new_session(SessionState::Expired)
        );
        let mut seen = Vec::new();
        loop {
            let event = within(persistent.changed()).await;
            seen.push(event.session_state);
            if event.session_state.is_terminated() {
                break;
            }
        }
        // The removal of r/eph by the expiry fires nothing here: the watch died with us.
        assert_eq!(seen.last(), Some(&SessionState::Expired));
        assert!(seen.contains(&SessionState::Disconnected), "{seen:?}");
        assert_eq!(
            within(persistent.changed()).await.session_state,
            SessionState::Expired
        );
    })
    .await;
}

/// A stalled link (nothing closes, nothing arrives) is detected by the read timeout, well
/// before the session expires; the session survives the reconnect.
#[tokio::test]
async fn a_stall_is_detected_and_the_session_survives() {
    on_both_with(short_tick(), |addr, _| async move {
        let proxy = FaultProxy::start(addr.clone()).await.unwrap();
        let c = via(&proxy, 6000).await;
        let r = root(&c, "stall").await;
        let eph = format!("{r}/eph");
        c.create(&eph, b"", &EPHEMERAL).await.unwrap();
        let session = c.session_id();
        let mut states = c.state_watcher();
        proxy.pause();
        let paused = tokio::time::Instant::now();
        assert_eq!(within(states.changed()).await, SessionState::Disconnected);
        let detected = paused.elapsed();
        // The read timeout is 2/3 of the negotiated 6 s, counted from the last answer, which came
        // at most one ping interval (1 s) before the pause.
        assert!(
            detected >= Duration::from_millis(2900),
            "detected after {detected:?}"
        );
        proxy.resume();
        assert_eq!(within(states.changed()).await, SessionState::SyncConnected);
        assert_eq!(c.session_id(), session);
        assert!(!gone(&c, &eph).await, "the ephemeral lives");
    })
    .await;
}

/// Idle for several session timeouts: pings keep the session, and each answered ping moves
/// `last_acknowledged_send`; while disconnected it stands still.
#[tokio::test]
async fn pings_keep_the_session_and_move_the_acknowledged_send() {
    on_both_with(short_tick(), |addr, _| async move {
        let proxy = FaultProxy::start(addr.clone()).await.unwrap();
        let c = via(&proxy, 2000).await;
        assert_eq!(c.session_timeout(), Duration::from_millis(2000));
        let r = root(&c, "pings").await;
        let eph = format!("{r}/eph");
        c.create(&eph, b"", &EPHEMERAL).await.unwrap();
        let mut states = c.state_watcher();
        let start = tokio::time::Instant::now();
        let mut acks = HashSet::new();
        // Three session timeouts without a request of ours.
        while start.elapsed() < Duration::from_secs(6) {
            acks.insert(c.last_acknowledged_send().expect("connected"));
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(
            acks.len() >= 6,
            "only {} acknowledged sends in 6 s",
            acks.len()
        );
        let latest = acks.iter().max().copied().unwrap();
        assert!(
            latest.elapsed() < Duration::from_secs(2),
            "the latest bounds the expiry"
        );
        assert!(
            ready_now(states.changed()).await.is_none(),
            "no state change while idle"
        );
        let observer = connect(&addr).await;
        assert!(!gone(&observer, &eph).await);

        // Disconnected at once (held from reconnecting), well within the 2 s session.
        proxy.pause();
        proxy.drop_connections().await;
        assert_eq!(within(states.changed()).await, SessionState::Disconnected);
        let frozen = c.last_acknowledged_send().unwrap();
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(
            c.last_acknowledged_send(),
            Some(frozen),
            "no answer, no advance"
        );
        proxy.resume();
        assert_eq!(within(states.changed()).await, SessionState::SyncConnected);
        assert!(
            c.last_acknowledged_send().unwrap() > frozen,
            "the reconnect was an answer"
        );
    })
    .await;
}

#[tokio::test]
async fn a_dropped_connection_fails_in_flight_requests_and_reconnects() {
    on_both(|addr, _| async move {
        let proxy = FaultProxy::start(addr.clone()).await.unwrap();
        let c = via(&proxy, 10_000).await;
        let r = root(&c, "drop").await;
        let session = c.session_id();
        let zxid = c.last_zxid();
        assert!(zxid > 0);
        proxy.pause();
        let in_flight = c.get_data(&r);
        proxy.drop_connections().await;
        proxy.resume();
        assert_eq!(within(in_flight).await, Err(Error::ConnectionLoss));
        // The next request waits for the new connection on the same session.
        within(c.create(&format!("{r}/after"), b"", &PERSISTENT))
            .await
            .unwrap();
        assert_eq!(c.session_id(), session);
        assert!(proxy.accepted_connections() >= 2);
        assert!(c.last_zxid() > zxid);
    })
    .await;
}

/// Thousands of requests issued without waiting: written as issued, answered in order.
#[tokio::test]
async fn pipelined_requests_are_answered_in_order() {
    on_both(|addr, _| async move {
        let c = connect(&addr).await;
        let r = root(&c, "pipeline").await;
        let seq = CreateMode::PersistentSequential.with_acls(Acls::anyone_all());
        let prefix = format!("{r}/n-");
        let mut creates = Vec::new();
        let mut reads = Vec::new();
        for i in 0..2000u32 {
            creates.push(c.create(&prefix, &i.to_be_bytes(), &seq));
            if i % 10 == 0 {
                reads.push((i, c.get_children(&r)));
            }
        }
        // Awaited in reverse: the order is the call order, not the await order.
        let mut numbers = Vec::new();
        for create in creates.into_iter().rev() {
            numbers.push(within(create).await.unwrap().1.into_i64());
        }
        numbers.reverse();
        assert!(
            numbers.windows(2).all(|w| w[0] < w[1]),
            "sequence follows call order"
        );
        for (i, read) in reads {
            let (children, _) = within(read).await.unwrap();
            assert_eq!(
                children.len(),
                i as usize + 1,
                "read {i} sees the creates before it"
            );
        }
        // Several tasks sharing one client.
        let mut tasks = Vec::new();
        for t in 0..4 {
            let c = c.clone();
            let r = r.clone();
            tasks.push(tokio::spawn(async move {
                for i in 0..200 {
                    c.set_data(&r, format!("{t}-{i}").as_bytes(), None)
                        .await
                        .unwrap();
                }
            }));
        }
        for t in tasks {
            within(t).await.unwrap();
        }
        assert_eq!(c.get_data(&r).await.unwrap().1.version, 800);
    })
    .await;
}

/// The client's sockets have TCP_NODELAY, read back from the kernel.
#[tokio::test]
async fn client_sockets_set_tcp_nodelay() {
    let server = Server::start(zkit_server::ServerConfig::ephemeral())
        .await
        .unwrap();
    let port = server.addr().port();
    let c = connect(&server.addr().to_string()).await;
    c.sync("/").await.unwrap();
    let mut checked = 0;
    for entry in std::fs::read_dir("/proc/self/fd").unwrap() {
        let entry = entry.unwrap();
        let Ok(fd) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        if peer_port(fd) != Some(port) {
            continue;
        }
        let mut on: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: fd is open (listed by /proc/self/fd, and the client holds it); `on`/`len`
        // are valid for writes of their size.
        let rc = unsafe {
            libc::getsockopt(
                fd,
                libc::IPPROTO_TCP,
                libc::TCP_NODELAY,
                (&mut on as *mut libc::c_int).cast(),
                &mut len,
            )
        };
        assert_eq!(rc, 0);
        assert_ne!(on, 0, "TCP_NODELAY is off on fd {fd}");
        checked += 1;
    }
    assert_eq!(checked, 1, "one client socket to the server");
    drop(c);
    server.stop().await;
}

/// The remote port of a TCP socket fd, if it is one.
fn peer_port(fd: i32) -> Option<u16> {
    let mut addr: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: `addr`/`len` are valid for writes; a non-socket fd just fails.
    let rc = unsafe {
        libc::getpeername(
            fd,
            (&mut addr as *mut libc::sockaddr_storage).cast(),
            &mut len,
        )
    };
    if rc != 0 || addr.ss_family != libc::AF_INET as libc::sa_family_t {
        return None;
    }
    // SAFETY: AF_INET means it holds a sockaddr_in.
    let v4: libc::sockaddr_in =
        unsafe { std::ptr::read((&addr as *const libc::sockaddr_storage).cast()) };
    Some(u16::from_be(v4.sin_port))
}

/// Two hosts (proxies in front of one server): losing the one in use moves the same session
/// to the other, as a member switch on an ensemble would.
#[tokio::test]
async fn the_session_moves_to_another_host() {
    on_both(|addr, _| async move {
        let a = FaultProxy::start(addr.clone()).await.unwrap();
        let b = FaultProxy::start(addr.clone()).await.unwrap();
        let closed = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let dead = closed.local_addr().unwrap();
        drop(closed);
        // One host by name: names are resolved on each attempt.
        let cluster = format!(
            "{dead},{},localhost:{}",
            a.connect_string(),
            b.addr().port()
        );
        let c = within(
            Client::connector()
                .with_session_timeout(Duration::from_secs(10))
                .connect(&cluster),
        )
        .await
        .unwrap();
        let r = root(&c, "rotate").await;
        c.create(&format!("{r}/eph"), b"", &EPHEMERAL)
            .await
            .unwrap();
        let session = c.session_id();
        let (used, other) = if a.open_connections() == 1 {
            (a, b)
        } else {
            (b, a)
        };
        assert_eq!(used.open_connections(), 1);
        assert_eq!(other.open_connections(), 0);
        let mut states = c.state_watcher();
        used.shutdown().await;
        assert_eq!(within(states.changed()).await, SessionState::Disconnected);
        assert_eq!(within(states.changed()).await, SessionState::SyncConnected);
        assert_eq!(c.session_id(), session);
        assert_eq!(other.open_connections(), 1);
        assert!(!gone(&c, &format!("{r}/eph")).await);
    })
    .await;
}

#[tokio::test]
async fn connecting_to_nothing_fails() {
    let closed = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let dead = closed.local_addr().unwrap();
    drop(closed);
    let err = Client::connector()
        .with_fail_eagerly()
        .connect(&format!("{dead},{dead}"))
        .await
        .err();
    assert_eq!(err, Some(Error::NoHosts));
    let started = tokio::time::Instant::now();
    let err = within(
        Client::connector()
            .with_session_timeout(Duration::from_millis(1500))
            .connect(&dead.to_string()),
    )
    .await
    .err();
    assert_eq!(err, Some(Error::Timeout));
    assert!(started.elapsed() >= Duration::from_millis(1500));
    assert!(matches!(
        Client::connect("").await,
        Err(Error::BadArguments(_))
    ));
    assert!(matches!(
        Client::connect("h:notaport").await,
        Err(Error::BadArguments(_))
    ));
}

// ---- scripted servers -------------------------------------------------------------------

async fn read_frame(s: &mut TcpStream) -> Option<Vec<u8>> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len).await.ok()?;
    let mut buf = vec![0; i32::from_be_bytes(len) as usize];
    s.read_exact(&mut buf).await.ok()?;
    Some(buf)
}

async fn write_frame(s: &mut TcpStream, payload: impl FnOnce(&mut BytesMut)) {
    let mut buf = BytesMut::new();
    zkit_proto::encode_frame(&mut buf, payload);
    s.write_all(&buf).await.unwrap();
}

fn response(timeout: i32, session: i64, read_only: bool) -> ConnectResponse {
    ConnectResponse {
        protocol_version: 0,
        time_out: timeout,
        session_id: session,
        passwd: vec![7; 16],
        read_only: Some(read_only),
    }
}

/// A server that answers the first request with zxid 0x55 and the second with a wrong xid:
/// the client must drop the connection, fail the request, and come back with the same
/// session and lastZxidSeen 0x55 — and report Expired when told timeOut 0.
#[tokio::test]
async fn xid_out_of_order_reconnects_and_timeout_zero_expires() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let script = tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.unwrap();
        let first = ConnectRequest::decode_from(&read_frame(&mut s).await.unwrap()).unwrap();
        assert_eq!((first.session_id, first.last_zxid_seen), (0, 0));
        assert_eq!(first.read_only, Some(false));
        write_frame(&mut s, |b| response(4000, 0x42, false).encode(b)).await;
        let mut replies = 0;
        while let Some(frame) = read_frame(&mut s).await {
            let h = RequestHeader::decode_from(&frame).unwrap();
            if h.xid == -2 {
                write_frame(&mut s, |b| {
                    ReplyHeader {
                        xid: -2,
                        zxid: 0x55,
                        err: 0,
                    }
                    .encode(b)
                })
                .await;
                continue;
            }
            replies += 1;
            let xid = if replies == 1 { h.xid } else { h.xid + 100 };
            // sync's reply: the path.
            write_frame(&mut s, |b| {
                ReplyHeader {
                    xid,
                    zxid: 0x55,
                    err: 0,
                }
                .encode(b);
                zkit_proto::codec::put_ustring(b, "/");
            })
            .await;
        }
        let (mut s, _) = listener.accept().await.unwrap();
        let second = ConnectRequest::decode_from(&read_frame(&mut s).await.unwrap()).unwrap();
        assert_eq!(second.session_id, 0x42);
        assert_eq!(second.passwd, vec![7; 16]);
        assert_eq!(second.last_zxid_seen, 0x55);
        assert_eq!(second.time_out, 4000);
        write_frame(&mut s, |b| response(0, 0, false).encode(b)).await;
    });
    let c = Client::connector()
        .with_session_timeout(Duration::from_millis(4000))
        .connect(&addr.to_string())
        .await
        .unwrap();
    assert_eq!(c.session_id().0, 0x42);
    c.sync("/").await.unwrap();
    assert_eq!(c.last_zxid(), 0x55);
    let mut states = c.state_watcher();
    assert_eq!(within(c.sync("/")).await, Err(Error::ConnectionLoss));
    let mut seen = vec![];
    while !seen
        .last()
        .is_some_and(|s: &SessionState| s.is_terminated())
    {
        seen.push(within(states.changed()).await);
    }
    assert_eq!(seen.last(), Some(&SessionState::Expired));
    within(script).await.unwrap();
    assert_eq!(c.sync("/").await, Err(Error::SessionExpired));
}

/// Read-only mode: connected to a read-only server (a script), the client probes the other
/// host with `isro`, finds a read-write zkit server and moves there, with a new session (a
/// read-only server's session is local to it).
#[tokio::test]
async fn read_only_mode_moves_to_a_read_write_server() {
    let rw = Server::start(zkit_server::ServerConfig::ephemeral())
        .await
        .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let ro = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut first = [0u8; 4];
                if s.read_exact(&mut first).await.is_err() {
                    return;
                }
                if &first == b"isro" {
                    let _ = s.write_all(b"ro").await;
                    return;
                }
                let mut body = vec![0; i32::from_be_bytes(first) as usize];
                s.read_exact(&mut body).await.unwrap();
                let req = ConnectRequest::decode_from(&body).unwrap();
                assert_eq!(req.read_only, Some(true));
                write_frame(&mut s, |b| response(4000, 0x77, true).encode(b)).await;
                while let Some(frame) = read_frame(&mut s).await {
                    let h = RequestHeader::decode_from(&frame).unwrap();
                    let err = if h.xid == -2 { 0 } else { -119 }; // NotReadOnly
                    write_frame(&mut s, |b| {
                        ReplyHeader {
                            xid: h.xid,
                            zxid: 0,
                            err,
                        }
                        .encode(b)
                    })
                    .await;
                }
            });
        }
    });
    // The hosts are shuffled: retry until the first connection is the read-only one.
    let mut attempts = 0;
    let c = loop {
        attempts += 1;
        assert!(
            attempts < 40,
            "never connected to the read-only server first"
        );
        let c = Client::connector()
            .with_readonly(true)
            .with_session_timeout(Duration::from_millis(4000))
            .connect(&format!("{ro},{}", rw.addr()))
            .await
            .unwrap();
        if c.state() == SessionState::ConnectedReadOnly {
            break c;
        }
        c.close().await;
    };
    let mut states = c.state_watcher();
    assert_eq!(c.session_id().0, 0x77);
    assert!(c.session().is_readonly());
    assert_eq!(
        c.create("/w", b"", &PERSISTENT).await.err(),
        Some(Error::NotReadOnly)
    );
    loop {
        if within(states.changed()).await == SessionState::SyncConnected {
            break;
        }
    }
    assert_ne!(c.session_id().0, 0x77, "a new, global session");
    assert!(!c.session().is_readonly());
    c.create("/w", b"", &PERSISTENT).await.unwrap();
    drop(c);
    rw.stop().await;
}
