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

/// A TCP proxy on `127.0.0.1:<ephemeral port>` forwarding to one upstream address.
///
/// Dropping it stops the listener and closes every connection (asynchronously: the tasks are
/// aborted and the runtime drops their sockets); [`FaultProxy::shutdown`] does the same and
/// waits for it.
#[derive(Debug)]
pub struct FaultProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept_task: Option<JoinHandle<()>>,
}

#[derive(Debug)]
struct Shared {
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
    /// Starts a proxy in front of `upstream` (`host:port`), resolved on each new connection.
    ///
    /// Must be called inside a tokio runtime; the proxy's tasks run on it.
    ///
    /// # Errors
    /// When binding the loopback listener fails.
    pub async fn start(upstream: impl Into<String>) -> io::Result<FaultProxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            upstream: upstream.into(),
            paused: watch::Sender::new(false),
            conns: Mutex::new(Conns::default()),
        });
        let accept_task = tokio::spawn(accept_loop(listener, Arc::clone(&shared)));
        Ok(FaultProxy {
            addr,
            shared,
            accept_task: Some(accept_task),
        })
    }

    /// The address clients connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The address as `host:port`, the form ZooKeeper connect strings use.
    pub fn connect_string(&self) -> String {
        self.addr.to_string()
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
        if let Some(task) = self.accept_task.take() {
            task.abort();
            let _ = task.await;
        }
        self.drop_connections().await;
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        if let Some(task) = self.accept_task.take() {
            task.abort();
        }
        for (_, handle) in self.shared.conns().open.drain() {
            handle.abort();
        }
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
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
        let handle = tokio::spawn(async move {
            let _ = proxy_connection(client, &task_shared).await;
            task_shared.conns().open.remove(&id);
        });
        conns.open.insert(id, handle);
    }
}

async fn proxy_connection(client: TcpStream, shared: &Shared) -> io::Result<()> {
    let mut paused = shared.paused.subscribe();
    // A partitioned network does not let the connection reach the server: hold it here.
    wait_unpaused(&mut paused).await;
    let upstream = TcpStream::connect(shared.upstream.as_str()).await?;
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
