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
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
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
    open: HashMap<u64, JoinHandle<()>>,
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
        let open: Vec<JoinHandle<()>> = self.shared.conns().open.drain().map(|(_, h)| h).collect();
        for handle in &open {
            handle.abort();
        }
        for handle in open {
            // The sockets are owned by the task's future, so they are closed once it has been
            // dropped, which is what awaiting an aborted task waits for.
            let _ = handle.await;
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
        for (_, handle) in self.shared.conns().open.drain() {
            handle.abort();
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
        let task_member = Arc::clone(&member);
        let handle = tokio::spawn(async move {
            let _ = proxy_connection(client, &task_member, &task_shared).await;
            task_shared.conns().open.remove(&id);
        });
        conns.open.insert(id, handle);
    }
}

async fn proxy_connection(client: TcpStream, member: &str, shared: &Shared) -> io::Result<()> {
    let mut paused = shared.paused.subscribe();
    // A partitioned network does not let the connection reach the server: hold it here.
    wait_unpaused(&mut paused).await;
    let upstream = TcpStream::connect(member).await?;
    let _ = upstream.set_nodelay(true);
    let (client_rd, client_wr) = client.into_split();
    let (upstream_rd, upstream_wr) = upstream.into_split();
    // try_join: an error in one direction ends the connection and drops both sockets.
    tokio::try_join!(
        pipe(client_rd, upstream_wr, shared.paused.subscribe()),
        pipe(upstream_rd, client_wr, shared.paused.subscribe()),
    )?;
    Ok(())
}

/// Copies `from` to `to` until EOF, then half-closes `to`. Moves nothing while paused.
async fn pipe(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    mut paused: watch::Receiver<bool>,
) -> io::Result<()> {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        wait_unpaused(&mut paused).await;
        let n = from.read(&mut buf).await?;
        // A read may have been in flight when pause() was called: hold what it got.
        wait_unpaused(&mut paused).await;
        if n == 0 {
            to.shutdown().await?;
            return Ok(());
        }
        to.write_all(&buf[..n]).await?;
    }
}

async fn wait_unpaused(paused: &mut watch::Receiver<bool>) {
    // The sender lives in `Shared`, which outlives every connection task, so this cannot fail
    // in practice; if it did, treat the link as unpaused rather than hanging forever.
    let _ = paused.wait_for(|p| !*p).await;
}
