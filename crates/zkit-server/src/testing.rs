//! [`TestingCluster`]: several embedded servers behind fixed ports, for testing how *clients*
//! behave when servers stop, restart, hang or drop connections — what Curator's `curator-test`
//! (`TestingServer`, `TestingCluster`) gives Java users.
//!
//! **N independent servers, not a replicated ensemble.** Each member is its own standalone
//! [`Server`] with its own data; nothing is replicated between them and there is no leader
//! election. A session exists on the member it was created on only: when a client fails over to
//! another member, that member does not know the session and the client sees it expire (or,
//! when its last seen zxid is ahead of the new member's, the connection refused), and a
//! resilient client builds a new session there. Use it to test client failover, reconnect and
//! session-loss handling; never to test consensus, and never to claim that data written to one
//! member is visible on another. For that, run an Apache ZooKeeper ensemble.
//!
//! Every member listens on a loopback port that stays the same for the cluster's lifetime, so a
//! connect string built once stays valid across [`TestingCluster::stop`] and
//! [`TestingCluster::restart`]. The port belongs to a small front (a byte-forwarding TCP relay
//! owned by the cluster) in front of the member's server; the front is what makes faults
//! possible without touching the server:
//! - [`TestingCluster::pause`]: the member stops answering but closes nothing (bytes are held in
//!   both directions, new connections are accepted and held), like a `SIGSTOP`ped server or a
//!   network partition: clients time out by themselves, the member expires their sessions after
//!   their timeout once [`TestingCluster::resume`]d.
//! - [`TestingCluster::drop_connections`]: every connection to the member is closed; the member
//!   keeps running, so a client reconnecting within its session timeout keeps its session.
//! - [`TestingCluster::stop`]: the member's server stops (gracefully, sessions not closed, as
//!   when a ZooKeeper server stops); connections to its port are accepted and closed at once.
//! - [`TestingCluster::restart`]: the server starts again from the same data directory
//!   (recovering its tree and sessions) behind the same port.
//!
//! ```no_run
//! # async fn demo() -> Result<(), zkit_server::Error> {
//! use zkit_server::testing::TestingCluster;
//! let cluster = TestingCluster::builder().servers(3).start().await?;
//! let connect_string = cluster.connect_string(); // "127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3"
//! // ... connect a client, find the member it uses with `open_connections(i)` ...
//! cluster.stop(0).await;
//! cluster.restart(0).await?;
//! cluster.shutdown().await;
//! # Ok(()) }
//! ```
//!
//! The front only moves bytes; it never parses them. Members listen on `127.0.0.1` only.

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::storage::error::StorageError;
use crate::{Error, FsyncMode, Server, ServerConfig};

/// Builds a [`TestingCluster`].
#[derive(Debug, Clone)]
pub struct TestingClusterBuilder {
    servers: usize,
    config: ServerConfig,
    durable: bool,
}

impl Default for TestingClusterBuilder {
    fn default() -> Self {
        let mut config = ServerConfig::ephemeral();
        // Short ticks so that tests can use short session timeouts (the minimum is 2 ticks).
        config.tick_time = Duration::from_millis(250);
        config.min_session_timeout = Some(Duration::from_millis(1000));
        config.container_check_interval = Duration::from_millis(200);
        TestingClusterBuilder {
            servers: 3,
            config,
            durable: true,
        }
    }
}

impl TestingClusterBuilder {
    /// How many members (default 3; at least 1).
    pub fn servers(mut self, n: usize) -> Self {
        self.servers = n.max(1);
        self
    }

    /// The configuration every member starts from (default: [`ServerConfig::ephemeral`] with a
    /// 250 ms tick, a 1 s minimum session timeout and a 200 ms TTL/container reaper). Its
    /// `listen` and `data_dir` are replaced per member.
    pub fn config(mut self, config: ServerConfig) -> Self {
        self.config = config;
        self
    }

    /// Keep members in memory only: faster, but a restarted member starts empty (default:
    /// each member has a data directory in the system temp dir, without fsync, removed when the
    /// cluster is shut down or dropped).
    pub fn in_memory(mut self) -> Self {
        self.durable = false;
        self
    }

    /// Starts every member.
    ///
    /// # Errors
    /// [`Error::Bind`] when a loopback port cannot be bound, [`Error::Storage`] when a data
    /// directory cannot be created, and whatever [`Server::start`] fails with.
    pub async fn start(self) -> Result<TestingCluster, Error> {
        let root = if self.durable {
            let dir = std::env::temp_dir().join(format!(
                "zkit-testing-cluster-{}-{:016x}",
                std::process::id(),
                rand::random::<u64>()
            ));
            std::fs::create_dir_all(&dir)
                .map_err(|e| StorageError::io(format!("create {}", dir.display()), e))?;
            Some(dir)
        } else {
            None
        };
        let mut cluster = TestingCluster {
            members: Vec::with_capacity(self.servers),
            root,
        };
        for i in 0..self.servers {
            let mut config = self.config.clone();
            config.listen = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
            config.admin_listen = None;
            if let Some(root) = &cluster.root {
                let dir = root.join(format!("member-{i}"));
                std::fs::create_dir_all(&dir)
                    .map_err(|e| StorageError::io(format!("create {}", dir.display()), e))?;
                config.data_dir = Some(dir);
                config.fsync = FsyncMode::Never;
            }
            let server = Server::start(config.clone()).await?;
            let front = Front::start(server.addr()).await?;
            cluster.members.push(Member {
                config,
                front,
                server: tokio::sync::Mutex::new(Some(server)),
            });
        }
        Ok(cluster)
    }
}

/// N independent embedded servers behind fixed loopback ports. See the module docs, and
/// remember: **not a replicated ensemble**.
#[derive(Debug)]
pub struct TestingCluster {
    members: Vec<Member>,
    root: Option<PathBuf>,
}

#[derive(Debug)]
struct Member {
    config: ServerConfig,
    front: Front,
    server: tokio::sync::Mutex<Option<Server>>,
}

impl TestingCluster {
    /// A builder: 3 members by default.
    pub fn builder() -> TestingClusterBuilder {
        TestingClusterBuilder::default()
    }

    /// Starts `n` members with the builder's defaults.
    ///
    /// # Errors
    /// As [`TestingClusterBuilder::start`].
    pub async fn start(n: usize) -> Result<TestingCluster, Error> {
        TestingCluster::builder().servers(n).start().await
    }

    /// The connect string of all members, `127.0.0.1:p1,127.0.0.1:p2,…`, in member order.
    pub fn connect_string(&self) -> String {
        self.members
            .iter()
            .map(|m| m.front.addr.to_string())
            .collect::<Vec<_>>()
            .join(",")
    }

    /// How many members there are.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Always false: a cluster has at least one member.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// The address member `i` is reached at (stable across stop and restart).
    ///
    /// # Panics
    /// When `i` is out of range (a bug in the test).
    pub fn addr(&self, i: usize) -> SocketAddr {
        self.member(i).front.addr
    }

    /// The data directory of member `i` (`None` for an in-memory cluster).
    ///
    /// # Panics
    /// When `i` is out of range.
    pub fn data_dir(&self, i: usize) -> Option<&std::path::Path> {
        self.member(i).config.data_dir.as_deref()
    }

    /// Client connections open to member `i` right now (held ones included): how a test finds
    /// the member a client is connected to.
    ///
    /// # Panics
    /// When `i` is out of range.
    pub fn open_connections(&self, i: usize) -> usize {
        self.member(i).front.shared.conns().open.len()
    }

    /// The members with at least one open client connection.
    pub fn connected_members(&self) -> Vec<usize> {
        (0..self.len())
            .filter(|&i| self.open_connections(i) > 0)
            .collect()
    }

    /// Whether member `i`'s server is running (it may still be paused).
    ///
    /// # Panics
    /// When `i` is out of range.
    pub fn is_running(&self, i: usize) -> bool {
        *self.member(i).front.shared.running.borrow()
    }

    /// Makes member `i` stop answering without closing anything (see the module docs), until
    /// [`TestingCluster::resume`].
    ///
    /// # Panics
    /// When `i` is out of range.
    pub fn pause(&self, i: usize) {
        self.member(i).front.shared.paused.send_replace(true);
    }

    /// Ends a [`TestingCluster::pause`] of member `i`: held bytes and connections go through.
    ///
    /// # Panics
    /// When `i` is out of range.
    pub fn resume(&self, i: usize) {
        self.member(i).front.shared.paused.send_replace(false);
    }

    /// Closes every client connection to member `i` (both sides) and waits until they are
    /// closed. The member keeps running and accepting.
    ///
    /// # Panics
    /// When `i` is out of range.
    pub async fn drop_connections(&self, i: usize) {
        self.member(i).front.drop_connections().await;
    }

    /// Stops member `i`'s server (gracefully; sessions are not closed) and closes its client
    /// connections; until [`TestingCluster::restart`], connections to its port are closed as
    /// soon as they are accepted. Stopping a stopped member does nothing.
    ///
    /// # Panics
    /// When `i` is out of range.
    pub async fn stop(&self, i: usize) {
        let member = self.member(i);
        let mut server = member.server.lock().await;
        member.front.shared.running.send_replace(false);
        member.front.drop_connections().await;
        if let Some(server) = server.take() {
            server.stop().await;
        }
    }

    /// Starts member `i`'s server again, from the same data directory (its tree and sessions
    /// are recovered; an in-memory member starts empty), behind the same port. Restarting a
    /// running member stops it first.
    ///
    /// # Errors
    /// As [`Server::start`].
    ///
    /// # Panics
    /// When `i` is out of range.
    pub async fn restart(&self, i: usize) -> Result<(), Error> {
        let member = self.member(i);
        let mut server = member.server.lock().await;
        member.front.shared.running.send_replace(false);
        member.front.drop_connections().await;
        if let Some(old) = server.take() {
            old.stop().await;
        }
        let started = Server::start(member.config.clone()).await?;
        member.front.shared.upstream.send_replace(started.addr());
        *server = Some(started);
        member.front.shared.running.send_replace(true);
        Ok(())
    }

    /// Stops every member and the fronts, and removes the data directories.
    pub async fn shutdown(mut self) {
        for member in &self.members {
            member.front.shutdown().await;
            if let Some(server) = member.server.lock().await.take() {
                server.stop().await;
            }
        }
        self.members.clear();
        self.remove_data();
    }

    fn member(&self, i: usize) -> &Member {
        assert!(
            i < self.members.len(),
            "member {i} of a {}-member cluster",
            self.members.len()
        );
        &self.members[i]
    }

    fn remove_data(&mut self) {
        if let Some(root) = self.root.take() {
            let _ = std::fs::remove_dir_all(root);
        }
    }
}

impl Drop for TestingCluster {
    fn drop(&mut self) {
        for member in &self.members {
            member.front.abort();
        }
        // Dropping a Server cancels it; its WAL may still be open for a moment, which
        // remove_dir_all tolerates on Linux (open files are unlinked).
        self.members.clear();
        self.remove_data();
    }
}

/// The relay in front of one member: accepts on a fixed port, forwards to the member's server.
#[derive(Debug)]
struct Front {
    addr: SocketAddr,
    shared: Arc<FrontShared>,
    accept_task: Mutex<Option<JoinHandle<()>>>,
}

#[derive(Debug)]
struct FrontShared {
    /// The member's server address (changes on restart).
    upstream: watch::Sender<SocketAddr>,
    /// `false` while the member is stopped: accepted connections are closed at once.
    running: watch::Sender<bool>,
    /// `true` while paused: nothing moves, new connections wait.
    paused: watch::Sender<bool>,
    conns: Mutex<Conns>,
}

#[derive(Debug, Default)]
struct Conns {
    next_id: u64,
    open: HashMap<u64, JoinHandle<()>>,
}

impl FrontShared {
    fn conns(&self) -> MutexGuard<'_, Conns> {
        // Each critical section is one map operation: a poisoned lock is still consistent.
        self.conns.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Front {
    async fn start(upstream: SocketAddr) -> Result<Front, Error> {
        let asked = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        let listener = TcpListener::bind(asked)
            .await
            .map_err(|source| Error::Bind {
                addr: asked,
                source,
            })?;
        let addr = listener.local_addr().map_err(|source| Error::Bind {
            addr: asked,
            source,
        })?;
        let shared = Arc::new(FrontShared {
            upstream: watch::Sender::new(upstream),
            running: watch::Sender::new(true),
            paused: watch::Sender::new(false),
            conns: Mutex::new(Conns::default()),
        });
        let accept_task = tokio::spawn(accept_loop(listener, Arc::clone(&shared)));
        Ok(Front {
            addr,
            shared,
            accept_task: Mutex::new(Some(accept_task)),
        })
    }

    async fn drop_connections(&self) {
        let open: Vec<JoinHandle<()>> = self.shared.conns().open.drain().map(|(_, h)| h).collect();
        for handle in &open {
            handle.abort();
        }
        for handle in open {
            // The sockets live in the task's future: closed once the aborted task is dropped.
            let _ = handle.await;
        }
    }

    async fn shutdown(&self) {
        let task = self
            .accept_task
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(task) = task {
            task.abort();
            let _ = task.await;
        }
        self.drop_connections().await;
    }

    fn abort(&self) {
        if let Some(task) = self
            .accept_task
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            task.abort();
        }
        for (_, handle) in self.shared.conns().open.drain() {
            handle.abort();
        }
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<FrontShared>) {
    loop {
        let Ok((client, _)) = listener.accept().await else {
            // Out of descriptors and the like: back off instead of spinning.
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        if !*shared.running.borrow() {
            // Stopped member: the port stays ours (for the restart) but nobody answers.
            drop(client);
            continue;
        }
        let _ = client.set_nodelay(true);
        let mut conns = shared.conns();
        let id = conns.next_id;
        conns.next_id += 1;
        let task_shared = Arc::clone(&shared);
        let handle = tokio::spawn(async move {
            relay(client, &task_shared).await;
            task_shared.conns().open.remove(&id);
        });
        conns.open.insert(id, handle);
    }
}

async fn wait_unpaused(paused: &mut watch::Receiver<bool>) {
    // The sender lives as long as the front; a closed channel means it is going away.
    let _ = paused.wait_for(|p| !*p).await;
}

async fn relay(client: TcpStream, shared: &FrontShared) {
    let mut paused = shared.paused.subscribe();
    wait_unpaused(&mut paused).await;
    let upstream_addr = *shared.upstream.borrow();
    let Ok(upstream) = TcpStream::connect(upstream_addr).await else {
        return;
    };
    let _ = upstream.set_nodelay(true);
    let (client_read, client_write) = client.into_split();
    let (upstream_read, upstream_write) = upstream.into_split();
    let up = pump(client_read, upstream_write, shared.paused.subscribe());
    let down = pump(upstream_read, client_write, shared.paused.subscribe());
    // When one direction ends, the connection is over: dropping the other closes both sockets.
    tokio::select! {
        () = up => {}
        () = down => {}
    }
}

async fn pump(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, mut paused: watch::Receiver<bool>) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        wait_unpaused(&mut paused).await;
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        // Bytes read just as a pause began are held until it ends, like everything else.
        wait_unpaused(&mut paused).await;
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}
