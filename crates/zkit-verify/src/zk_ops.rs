//! Every ZooKeeper call of this crate, on the `zkit` library's [`Session`] and its client
//! (`session.client()`, the `zookeeper-client` crate today). When the client type is replaced,
//! this is the one module to port; nothing else names it.
//!
//! Calls return `zkit::Result`; [`Outcome::of`] sorts an error into *definite* (the server
//! answered: the operation did not happen) or *unknown* (connection loss, timeout, session
//! gone: it may have happened), which is what the history's fail and info mean.

use std::time::Duration;

use zkit::lock::{LockGuard, LockOptions, Mutex};
use zkit::queue::{Claim, Queue};
use zkit::zkit_client as zk;
use zkit::{Error, Result, Session, SessionOptions};

use crate::history::{Cell, Seen, SeqNode};

/// Whether a failed call definitely did not happen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The server answered with an error: no effect.
    Definite(String),
    /// It may or may not have taken effect.
    Unknown(String),
}

impl Outcome {
    /// Sorts `err`: state errors (NoNode, BadVersion, NodeExists, ...) are definite, anything
    /// about the connection or the session is unknown.
    pub fn of(err: &Error) -> Outcome {
        if err.is_state() || matches!(err, Error::BadArguments(_) | Error::Unimplemented(_)) {
            Outcome::Definite(err.to_string())
        } else {
            Outcome::Unknown(err.to_string())
        }
    }
}

fn open_acl() -> zk::CreateOptions<'static> {
    zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all())
}

/// A ZooKeeper session's id and password, and its client's state, for
/// [`Zk::server_says_expired`].
pub struct SessionProbe {
    id: i64,
    info: zk::SessionInfo,
    watcher: zk::StateWatcher,
    client: zk::Client,
}

impl std::fmt::Debug for SessionProbe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SessionProbe({:#x})", self.id)
    }
}

impl SessionProbe {
    /// The session id.
    pub fn id(&self) -> i64 {
        self.id
    }

    /// When the server must have expired the session if the client has not been heard from
    /// since: the send time of the last request a server answered, plus `timeout` and `grace`.
    /// A probe that reconnects to the session earlier would itself keep it alive (the session
    /// layer gives up at its validity deadline, before the server's expiry).
    pub fn server_deadline(&self, timeout: Duration, grace: Duration) -> tokio::time::Instant {
        let last = self
            .client
            .last_acknowledged_send()
            .unwrap_or_else(tokio::time::Instant::now);
        last + timeout + grace
    }
}

/// One client's connection: a `zkit` [`Session`] (which replaces a lost ZooKeeper session by
/// itself) plus what the lock and queue recipes need.
#[derive(Debug, Clone)]
pub struct Zk {
    session: Session,
}

impl Zk {
    /// Connects to `connect_string` with `session_timeout`.
    ///
    /// # Errors
    /// What the first connect fails with.
    pub async fn connect(connect_string: &str, session_timeout: Duration) -> Result<Zk> {
        let options = SessionOptions::default()
            .with_session_timeout(session_timeout)
            .with_connection_timeout(session_timeout * 2 / 5);
        let session = Session::connect(connect_string, options).await?;
        Ok(Zk { session })
    }

    /// The session layer.
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// The current ZooKeeper session id and its negotiated timeout.
    pub fn current(&self) -> (i64, Duration, u64) {
        let (client, generation) = self.session.client_and_generation();
        (client.session_id().0, client.session_timeout(), generation)
    }

    /// Waits (up to `bound`) until the current ZooKeeper session can take requests, i.e. is
    /// not terminated (expired or closed; the session layer then builds a new one). `false`:
    /// it still cannot, and a request sent now would be refused by the client without ever
    /// reaching the server.
    pub async fn wait_usable(&self, bound: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + bound;
        loop {
            if !self.session.client().state().is_terminated() {
                return true;
            }
            if tokio::time::Instant::now() >= deadline || self.session.is_closed() {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// What it takes to ask the server later about the ZooKeeper session current now.
    pub fn probe_current(&self) -> SessionProbe {
        let client = self.session.client();
        SessionProbe {
            id: client.session_id().0,
            info: client.session().clone(),
            watcher: client.state_watcher(),
            client: client.clone(),
        }
    }

    /// Resolves once this client gave up on `probe`'s session: its raw state is terminal
    /// (the client marks a session expired also when it merely failed to reconnect in time),
    /// or the session layer replaced it (`Lost`). Polls every 50 ms.
    pub async fn until_given_up(&self, probe: &SessionProbe) {
        loop {
            if probe.watcher.peek_state().is_terminated() || self.session.session_id() != probe.id {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Asks the server, on a connection of its own, whether `probe`'s session is expired: a
    /// reconnect to it is refused as expired (`true`) or accepted (`false`; the session is
    /// left as it was, detached, not closed).
    ///
    /// # Errors
    /// When the server does not answer either way.
    pub async fn server_says_expired(
        connect_string: &str,
        probe: &SessionProbe,
        timeout: Duration,
    ) -> Result<bool> {
        let connect = zk::Client::connector()
            .with_session_timeout(timeout)
            .with_session(probe.info.clone())
            .with_detached()
            .connect(connect_string);
        match tokio::time::timeout(timeout, connect).await {
            Ok(Ok(_client)) => Ok(false),
            Ok(Err(zk::Error::SessionExpired)) => Ok(true),
            Ok(Err(e)) => Err(e.into()),
            Err(_) => Err(Error::OperationTimeout),
        }
    }

    /// Creates `path` and its missing ancestors (persistent); an existing node is fine.
    ///
    /// # Errors
    /// ZooKeeper errors.
    pub async fn ensure_path(&self, path: &str) -> Result<()> {
        match self.session.client().mkdir(path, &open_acl()).await {
            Ok(()) | Err(zk::Error::NodeExists) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    // --- register ---

    /// getData of a register znode, after a `sync` of it when `sync` is set (the way to read
    /// what the leader has committed from any member, as the ZooKeeper programmer's guide
    /// says; the read is sent once the sync's reply arrived).
    ///
    /// # Errors
    /// ZooKeeper errors (NoNode is [`Cell::Absent`]).
    pub async fn read_cell(&self, path: &str, sync: bool) -> Result<Cell> {
        let client = self.session.client();
        if sync {
            client.sync(path).await?;
        }
        match client.get_data(path).await {
            Ok((data, stat)) => Ok(Cell::Present {
                value: parse_i64(&data)?,
                version: stat.version,
            }),
            Err(zk::Error::NoNode) => Ok(Cell::Absent),
            Err(e) => Err(e.into()),
        }
    }

    /// setData any version, creating the znode when absent; returns the version written.
    /// Each attempt that fails before the last had no effect (NoNode, NodeExists), so the
    /// whole call has one effect point.
    ///
    /// # Errors
    /// ZooKeeper errors.
    pub async fn write_cell(&self, path: &str, value: i64) -> Result<i32> {
        let client = self.session.client();
        let data = value.to_string();
        loop {
            match client.set_data(path, data.as_bytes(), None).await {
                Ok(stat) => return Ok(stat.version),
                Err(zk::Error::NoNode) => {}
                Err(e) => return Err(e.into()),
            }
            match client.create(path, data.as_bytes(), &open_acl()).await {
                Ok((stat, _)) => return Ok(stat.version),
                Err(zk::Error::NodeExists) => continue,
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// setData only at version `expected`; returns the new version.
    ///
    /// # Errors
    /// BadVersion, NoNode and the other ZooKeeper errors.
    pub async fn cas_cell(&self, path: &str, expected: i32, value: i64) -> Result<i32> {
        let stat = self
            .session
            .client()
            .set_data(path, value.to_string().as_bytes(), Some(expected))
            .await?;
        Ok(stat.version)
    }

    // --- set and unique ids ---

    /// Creates persistent `path` with no data.
    ///
    /// # Errors
    /// ZooKeeper errors.
    pub async fn create(&self, path: &str) -> Result<()> {
        self.session
            .client()
            .create(path, b"", &open_acl())
            .await
            .map(|_| ())
            .map_err(Error::from)
    }

    /// The children of `path`.
    ///
    /// # Errors
    /// ZooKeeper errors.
    pub async fn children(&self, path: &str) -> Result<Vec<String>> {
        Ok(self.session.client().list_children(path).await?)
    }

    /// Creates a persistent sequential znode `prefix` + sequence; returns the sequence number
    /// and czxid. Not retried: a blind retry could create a second node.
    ///
    /// # Errors
    /// ZooKeeper errors.
    pub async fn create_sequential(&self, prefix: &str) -> Result<SeqNode> {
        let options = zk::CreateMode::PersistentSequential.with_acls(zk::Acls::anyone_all());
        let (stat, seq) = self.session.client().create(prefix, b"", &options).await?;
        Ok(SeqNode {
            seq: seq.into_i64(),
            czxid: stat.czxid,
        })
    }

    // --- queue (zkit::queue, claim/ack) ---

    /// The queue recipe at `path`.
    ///
    /// # Errors
    /// A bad path.
    pub fn queue(&self, path: &str) -> Result<Queue> {
        Queue::new(&self.session, path)
    }

    /// Offers `item` (its decimal digits as data).
    ///
    /// # Errors
    /// ZooKeeper errors (connection loss: unknown whether it was enqueued).
    pub async fn offer(&self, queue: &Queue, item: u64) -> Result<()> {
        queue.offer(item.to_string().as_bytes()).await.map(|_| ())
    }

    /// Claims the head unclaimed item, if any: (its number, the claim).
    ///
    /// # Errors
    /// ZooKeeper errors.
    pub async fn try_claim(&self, queue: &Queue) -> Result<Option<(u64, Claim)>> {
        let Some(claim) = queue.try_claim().await? else {
            return Ok(None);
        };
        let item = u64::try_from(parse_i64(&claim.item().data)?)
            .map_err(|_| Error::Unexpected("negative queue item".into()))?;
        Ok(Some((item, claim)))
    }

    /// Acks `claim` in one multi that also creates `result_path` (the item's effect).
    ///
    /// # Errors
    /// As `Claim::ack_with`.
    pub async fn ack(&self, claim: &Claim, result_path: &str) -> Result<()> {
        claim
            .ack_with(|multi| multi.add_create(result_path, b"", &open_acl()))
            .await
    }

    /// Whether `queue_path` still holds items or claims (for the final drain).
    ///
    /// # Errors
    /// ZooKeeper errors.
    pub async fn queue_entries(&self, queue_path: &str) -> Result<usize> {
        match self.session.client().list_children(queue_path).await {
            Ok(c) => Ok(c.len()),
            Err(zk::Error::NoNode) => Ok(0),
            Err(e) => Err(e.into()),
        }
    }

    // --- locks (zkit::lock::Mutex) ---

    /// The mutex at `path`, failing waiters on suspension (the default, Curator's).
    pub fn mutex(&self, path: &str) -> Mutex {
        Mutex::with_options(&self.session, path, LockOptions::default())
    }

    /// Acquires `mutex`, giving up after `timeout`.
    ///
    /// # Errors
    /// As `Mutex::try_lock_for`.
    pub async fn lock(&self, mutex: &Mutex, timeout: Duration) -> Result<LockGuard> {
        mutex.try_lock_for(timeout).await
    }

    // --- sessions ---

    /// Creates ephemeral `path` owned by the current session; returns the owner.
    ///
    /// # Errors
    /// ZooKeeper errors.
    pub async fn create_ephemeral(&self, path: &str) -> Result<i64> {
        let options = zk::CreateMode::Ephemeral.with_acls(zk::Acls::anyone_all());
        let (stat, _) = self.session.client().create(path, b"", &options).await?;
        Ok(stat.ephemeral_owner)
    }

    /// setData on `path` through the ZooKeeper session `expect_session` only; returns what it
    /// left. Fails (definitely: nothing sent) if the current session is another one.
    ///
    /// # Errors
    /// ZooKeeper errors.
    pub async fn write_seen(&self, expect_session: i64, path: &str) -> Result<Seen> {
        let client = self.client_of(expect_session)?;
        let stat = client.set_data(path, b"w", None).await?;
        Ok(Seen {
            mzxid: stat.mzxid,
            czxid: stat.czxid,
        })
    }

    /// getData of `path` through session `expect_session` only (`None`: no node).
    ///
    /// # Errors
    /// ZooKeeper errors, and as for [`Zk::write_seen`].
    pub async fn read_seen(&self, expect_session: i64, path: &str) -> Result<Option<Seen>> {
        let client = self.client_of(expect_session)?;
        match client.get_data(path).await {
            Ok((_, stat)) => Ok(Some(Seen {
                mzxid: stat.mzxid,
                czxid: stat.czxid,
            })),
            Err(zk::Error::NoNode) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// The ephemeralOwner of `path` (`None`: no node).
    ///
    /// # Errors
    /// ZooKeeper errors.
    pub async fn owner(&self, path: &str) -> Result<Option<i64>> {
        Ok(self
            .session
            .client()
            .check_stat(path)
            .await?
            .map(|s| s.ephemeral_owner))
    }

    /// The client of ZooKeeper session `session`, if it is still the current one and usable;
    /// else a definite error (nothing was sent).
    fn client_of(&self, session: i64) -> Result<zk::Client> {
        let client = self.session.client();
        if client.session_id().0 != session {
            return Err(Error::BadArguments(
                "the session was replaced before the request was sent".into(),
            ));
        }
        if client.state().is_terminated() {
            return Err(Error::BadArguments(
                "the session expired before the request was sent".into(),
            ));
        }
        Ok(client)
    }

    /// Soak churn: a new session creates ephemeral `path`, watches it, and closes.
    ///
    /// # Errors
    /// ZooKeeper errors.
    pub async fn churn_once(connect_string: &str, path: &str, timeout: Duration) -> Result<()> {
        let zk = Zk::connect(connect_string, timeout).await?;
        let client = zk.session.client();
        let options = zk::CreateMode::Ephemeral.with_acls(zk::Acls::anyone_all());
        let created = client.create(path, b"churn", &options).await;
        let watched = client.get_and_watch_data(path).await;
        drop(client);
        zk.close();
        created?;
        watched?;
        Ok(())
    }

    /// Closes the session (its ephemerals go once no client clone is left).
    pub fn close(&self) {
        self.session.close();
    }
}

fn parse_i64(data: &[u8]) -> Result<i64> {
    std::str::from_utf8(data)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .ok_or_else(|| {
            Error::Unexpected(format!("not a number: {:?}", String::from_utf8_lossy(data)))
        })
}
