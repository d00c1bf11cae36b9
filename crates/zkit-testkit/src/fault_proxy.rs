//! A loopback TCP proxy that injects network faults between a client and a server.
//!
//! Point a client at [`FaultProxy::addr`] instead of the server, then:
//! - [`FaultProxy::drop_connections`] closes every open connection on both sides, the way a
//!   crashed middlebox or a server restart looks to both ends: the client sees a disconnect
//!   (Curator's `Suspended`) and reconnects, the session survives.
//! - [`FaultProxy::pause`] black-holes the link, the way a network partition does: nothing is
//!   forwarded in either direction and new connections are accepted but held unanswered.
//!   Held long enough (longer than the session timeout), the server expires the session.
//!   [`FaultProxy::resume`] lets the held bytes and connections through.
//! - [`FaultProxy::reset_connections`] aborts every open connection with a TCP RST on both
//!   sides (SO_LINGER 0), the way a crashed peer's kernel or a firewall answers: both ends get
//!   "connection reset" at once instead of an orderly end of stream.
//! - [`FaultProxy::stall_connections`] freezes the connections open now, forever (until
//!   dropped or [`FaultProxy::unstall`]), while new connections pass normally: a half-dead TCP
//!   connection that only the client's own timeout can detect, after which its reconnect works.
//!
//! In front of an ensemble (a connect string `h1:p1,h2:p2,…`), it listens once per member and
//! [`FaultProxy::connect_string`] names all of its listeners: a fault then applies to the link
//! to every member, as a partition of the client's machine does.
//!
//! It only moves bytes; it never parses them. It listens on `127.0.0.1` only.

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// A TCP proxy on `127.0.0.1:<ephemeral port>` (one per upstream member) forwarding to the
/// upstream address(es).
///
/// Dropping it stops the listener and closes every connection (asynchronously: the tasks are
/// aborted and the runtime drops their sockets); [`FaultProxy::shutdown`] does the same and
/// waits for it.
#[derive(Debug)]
pub struct FaultProxy {
    /// One listener per upstream member, in the connect string's order.
    addrs: Vec<SocketAddr>,
    /// The connect string's chroot suffix (`/app`), or empty.
    chroot: String,
    shared: Arc<Shared>,
    accept_tasks: Vec<JoinHandle<()>>,
}

#[derive(Debug)]
struct Shared {
    /// What [`FaultProxy::start`] was given.
    upstream: String,
    /// `true` while paused; connection tasks wait for `false` before moving any byte.
    paused: watch::Sender<bool>,
    conns: Mutex<Conns>,
}

#[derive(Debug, Default)]
struct Conns {
    next_id: u64,
    accepted: u64,
    open: HashMap<u64, Conn>,
}

/// One proxied connection: its task and its own controls.
#[derive(Debug)]
struct Conn {
    task: JoinHandle<()>,
    control: watch::Sender<Control>,
}

/// What a connection's task is told to do besides forwarding.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Control {
    /// Move no byte (until unstalled).
    stalled: bool,
    /// Abort both sockets with RST.
    reset: bool,
}

impl Shared {
    fn conns(&self) -> MutexGuard<'_, Conns> {
        // A panic while holding this lock cannot leave `Conns` half-updated (each critical
        // section is one map operation), so a poisoned lock is still usable.
        self.conns.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl FaultProxy {
    /// Starts a proxy in front of `upstream`: `host:port`, or a connect string
    /// `h1:p1,h2:p2,…[/chroot]` (one listener per member). Members are resolved on each new
    /// connection.
    ///
    /// Must be called inside a tokio runtime; the proxy's tasks run on it.
    ///
    /// # Errors
    /// When binding a loopback listener fails, or `upstream` names no host.
    pub async fn start(upstream: impl Into<String>) -> io::Result<FaultProxy> {
        let upstream = upstream.into();
        let (hosts, chroot) = match upstream.find('/') {
            Some(at) => upstream.split_at(at),
            None => (upstream.as_str(), ""),
        };
        let members: Vec<String> = hosts
            .split(',')
            .map(str::trim)
            .filter(|h| !h.is_empty())
            .map(str::to_owned)
            .collect();
        if members.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("no upstream host in {upstream:?}"),
            ));
        }
        let shared = Arc::new(Shared {
            upstream: upstream.clone(),
            paused: watch::Sender::new(false),
            conns: Mutex::new(Conns::default()),
        });
        let mut addrs = Vec::new();
        let mut accept_tasks = Vec::new();
        for member in members {
            let listener = TcpListener::bind("127.0.0.1:0").await?;
            addrs.push(listener.local_addr()?);
            accept_tasks.push(tokio::spawn(accept_loop(
                listener,
                member,
                Arc::clone(&shared),
            )));
        }
        Ok(FaultProxy {
            addrs,
            chroot: chroot.to_owned(),
            shared,
            accept_tasks,
        })
    }

    /// The address clients connect to (the first member's listener, for an ensemble).
    pub fn addr(&self) -> SocketAddr {
        self.addrs[0]
    }

    /// The listeners as a ZooKeeper connect string: `127.0.0.1:P` or, in front of an
    /// ensemble, `127.0.0.1:P1,127.0.0.1:P2,…`, with the upstream's chroot.
    pub fn connect_string(&self) -> String {
        let hosts: Vec<String> = self.addrs.iter().map(SocketAddr::to_string).collect();
        format!("{}{}", hosts.join(","), self.chroot)
    }

    /// The upstream address this proxy forwards to.
    pub fn upstream(&self) -> &str {
        &self.shared.upstream
    }

    /// Closes every connection open now, both the client side and the upstream side, and waits
    /// until their sockets are closed. The proxy keeps accepting new connections.
    pub async fn drop_connections(&self) {
        let open: Vec<JoinHandle<()>> = self
            .shared
            .conns()
            .open
            .drain()
            .map(|(_, c)| c.task)
            .collect();
        for handle in &open {
            handle.abort();
        }
        for handle in open {
            // The sockets are owned by the task's future, so they are closed once it has been
            // dropped, which is what awaiting an aborted task waits for.
            let _ = handle.await;
        }
    }

    /// Aborts every connection open now with a TCP RST on both sides (SO_LINGER 0, then
    /// close) and waits until their sockets are closed. The proxy keeps accepting.
    pub async fn reset_connections(&self) {
        let open: Vec<Conn> = self.shared.conns().open.drain().map(|(_, c)| c).collect();
        for conn in &open {
            conn.control.send_modify(|c| c.reset = true);
        }
        for conn in open {
            // The task sets linger 0 and drops its sockets when it sees `reset`; a task that
            // has not connected upstream yet just ends.
            let _ = conn.task.await;
        }
    }

    /// Freezes every connection open now: neither direction moves a byte, nothing is closed,
    /// while connections accepted later work normally. Returns how many were stalled.
    pub fn stall_connections(&self) -> usize {
        let conns = self.shared.conns();
        for conn in conns.open.values() {
            conn.control.send_modify(|c| c.stalled = true);
        }
        conns.open.len()
    }

    /// Lets stalled connections move again (what they held goes through).
    pub fn unstall(&self) {
        for conn in self.shared.conns().open.values() {
            conn.control.send_modify(|c| c.stalled = false);
        }
    }

    /// Black-holes the link: stops forwarding in both directions on every connection, and holds
    /// new connections accepted but unanswered, until [`FaultProxy::resume`].
    ///
    /// Nothing is closed, so neither end learns of the partition except through its own
    /// timeouts, as with a real one: the client times out its reads and reconnects (to a held
    /// connection), the server expires the session after its negotiated timeout.
    pub fn pause(&self) {
        self.shared.paused.send_replace(true);
    }

    /// Ends a [`FaultProxy::pause`]: held bytes and held connections go through.
    pub fn resume(&self) {
        self.shared.paused.send_replace(false);
    }

    /// Whether the proxy is paused.
    pub fn is_paused(&self) -> bool {
        *self.shared.paused.borrow()
    }

    /// Connections open now (including held ones).
    pub fn open_connections(&self) -> usize {
        self.shared.conns().open.len()
    }

    /// Connections accepted since the start.
    pub fn accepted_connections(&self) -> u64 {
        self.shared.conns().accepted
    }

    /// Stops listening, closes every connection and waits until all sockets are closed.
    pub async fn shutdown(mut self) {
        for task in std::mem::take(&mut self.accept_tasks) {
            task.abort();
            let _ = task.await;
        }
        self.drop_connections().await;
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        for task in self.accept_tasks.drain(..) {
            task.abort();
        }
        for (_, conn) in self.shared.conns().open.drain() {
            conn.task.abort();
        }
    }
}

async fn accept_loop(listener: TcpListener, member: String, shared: Arc<Shared>) {
    let member: Arc<str> = member.into();
    loop {
        let (client, _) = match listener.accept().await {
            Ok(accepted) => accepted,
            // Per-connection errors (e.g. the peer reset before accept, or EMFILE) must not
            // stop the proxy; back off briefly so a persistent error does not spin.
            Err(_) => {
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                continue;
            }
        };
        let _ = client.set_nodelay(true);
        // Hold the lock across spawn+insert so the task's own removal (at its end) cannot run
        // before the insert and leave a stale entry.
        let mut conns = shared.conns();
        let id = conns.next_id;
        conns.next_id += 1;
        conns.accepted += 1;
        let task_shared = Arc::clone(&shared);
        let (control, control_rx) = watch::channel(Control::default());
        let task_member = Arc::clone(&member);
        let task = tokio::spawn(async move {
            let _ = proxy_connection(client, &task_member, &task_shared, control_rx).await;
            task_shared.conns().open.remove(&id);
        });
        conns.open.insert(id, Conn { task, control });
    }
}

async fn proxy_connection(
    mut client: TcpStream,
    member: &str,
    shared: &Shared,
    mut control: watch::Receiver<Control>,
) -> io::Result<()> {
    let mut paused = shared.paused.subscribe();
    // A partitioned network does not let the connection reach the server: hold it here.
    tokio::select! {
        () = wait_unpaused(&mut paused) => {}
        _ = control.wait_for(|c| c.reset) => return reset(&client, None),
    }
    let mut upstream = TcpStream::connect(member).await?;
    let _ = upstream.set_nodelay(true);
    let result = {
        let (client_rd, client_wr) = client.split();
        let (upstream_rd, upstream_wr) = upstream.split();
        let mut reset_rx = control.clone();
        // try_join: an error in one direction ends the connection and drops both sockets.
        tokio::select! {
            r = async {
                tokio::try_join!(
                    pipe(client_rd, upstream_wr, shared.paused.subscribe(), control.clone()),
                    pipe(upstream_rd, client_wr, shared.paused.subscribe(), control.clone()),
                )
            } => r.map(|_| false),
            _ = reset_rx.wait_for(|c| c.reset) => Ok(true),
        }
    };
    match result {
        Ok(true) => reset(&client, Some(&upstream)),
        Ok(false) => Ok(()),
        Err(e) => Err(e),
    }
}

/// SO_LINGER 0 on both sockets: closing them (when the caller drops them) sends RST.
fn reset(client: &TcpStream, upstream: Option<&TcpStream>) -> io::Result<()> {
    client.set_zero_linger()?;
    if let Some(u) = upstream {
        u.set_zero_linger()?;
    }
    Ok(())
}

/// Copies `from` to `to` until EOF, then half-closes `to`. Moves nothing while paused or
/// stalled.
async fn pipe<R, W>(
    mut from: R,
    mut to: W,
    mut paused: watch::Receiver<bool>,
    mut control: watch::Receiver<Control>,
) -> io::Result<()>
where
    R: tokio::io::AsyncRead + Unpin,
    W: tokio::io::AsyncWrite + Unpin,
{
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        wait_unpaused(&mut paused).await;
        wait_unstalled(&mut control).await;
        let n = from.read(&mut buf).await?;
        // A read may have been in flight when pause() was called: hold what it got.
        wait_unpaused(&mut paused).await;
        wait_unstalled(&mut control).await;
        if n == 0 {
            to.shutdown().await?;
            return Ok(());
        }
        to.write_all(&buf[..n]).await?;
    }
}

async fn wait_unstalled(control: &mut watch::Receiver<Control>) {
    // The sender lives in `Conns` until the connection is removed; if it is gone, the
    // connection is being torn down anyway: do not hang.
    let _ = control.wait_for(|c| !c.stalled).await;
}

async fn wait_unpaused(paused: &mut watch::Receiver<bool>) {
    // The sender lives in `Shared`, which outlives every connection task, so this cannot fail
    // in practice; if it did, treat the link as unpaused rather than hanging forever.
    let _ = paused.wait_for(|p| !*p).await;
}
