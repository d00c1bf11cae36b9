//! [`Connector`]: the options of a new client, and [`Connector::connect`], which starts the
//! connection task and waits for the first session.

use std::time::Duration;

use tokio::sync::oneshot;

use crate::client::Client;
use crate::error::{Error, Result};
use crate::hosts::{ConnectString, HostProvider};
use crate::session::{self, Config};
use crate::types::SessionInfo;

/// Options for [`Connector::connect`]; start from [`Client::connector`].
#[derive(Clone, Debug)]
pub struct Connector {
    session_timeout: Duration,
    connection_timeout: Option<Duration>,
    readonly: bool,
    auths: Vec<(String, Vec<u8>)>,
    session: Option<SessionInfo>,
    detached: bool,
    fail_eagerly: bool,
    max_frame: usize,
    #[cfg(feature = "tls")]
    tls: Option<crate::tls::TlsOptions>,
}

impl Default for Connector {
    fn default() -> Self {
        Connector::new()
    }
}

impl Connector {
    pub(crate) fn new() -> Connector {
        Connector {
            session_timeout: Duration::from_secs(6),
            connection_timeout: None,
            readonly: false,
            auths: Vec::new(),
            session: None,
            detached: false,
            fail_eagerly: false,
            max_frame: zkit_proto::DEFAULT_MAX_FRAME,
            #[cfg(feature = "tls")]
            tls: None,
        }
    }

    /// The session timeout to ask for; the server clamps it to its bounds (by default 2 to 20
    /// ticks). Default 6 s.
    pub fn with_session_timeout(mut self, timeout: Duration) -> Self {
        self.session_timeout = timeout;
        self
    }

    /// How long the connection may stay silent before it is declared dead and a reconnect
    /// starts. Default: the read timeout of `ClientCnxn`, 2/3 of the negotiated session
    /// timeout. Pings go out after half of it without sending.
    pub fn with_connection_timeout(mut self, timeout: Duration) -> Self {
        self.connection_timeout = Some(timeout);
        self
    }

    /// Allows read-only servers (`canBeReadOnly`): state [`crate::SessionState::ConnectedReadOnly`],
    /// writes fail with [`Error::NotReadOnly`], and the client keeps probing the other hosts
    /// (`isro`, 100 ms doubling to 60 s) and moves to a read-write server once it finds one.
    pub fn with_readonly(mut self, readonly: bool) -> Self {
        self.readonly = readonly;
        self
    }

    /// Authentication sent on every connection before any request, e.g.
    /// `("digest", b"user:password")`.
    pub fn with_auth(mut self, scheme: &str, auth: &[u8]) -> Self {
        self.auths.push((scheme.to_owned(), auth.to_vec()));
        self
    }

    /// Re-attaches to an existing session (from [`Client::session`], maybe of another process)
    /// instead of creating one. Its watches are not carried over.
    pub fn with_session(mut self, session: SessionInfo) -> Self {
        self.session = Some(session);
        self
    }

    /// Leaves the session open when the last handle is dropped (it then expires after its
    /// timeout, or is re-attached with [`Connector::with_session`]).
    pub fn with_detached(mut self) -> Self {
        self.detached = true;
        self
    }

    /// Makes [`Connector::connect`] fail with [`Error::NoHosts`] once every host was tried,
    /// instead of trying until the session timeout.
    pub fn with_fail_eagerly(mut self) -> Self {
        self.fail_eagerly = true;
        self
    }

    /// The largest frame accepted from the server (`jute.maxbuffer`, default 1,048,575
    /// bytes); a larger one drops the connection.
    pub fn with_max_frame(mut self, bytes: usize) -> Self {
        self.max_frame = bytes;
        self
    }

    /// TLS for the hosts that ask for it (`tcp+tls://host:port`, or every host with
    /// [`Connector::secure_connect`]).
    #[cfg(feature = "tls")]
    pub fn with_tls(mut self, options: crate::tls::TlsOptions) -> Self {
        self.tls = Some(options);
        self
    }

    /// As [`Connector::connect`], with TLS for every host without a `tcp://` prefix.
    ///
    /// # Errors
    /// As [`Connector::connect`]; [`Error::BadArguments`] without [`Connector::with_tls`].
    #[cfg(feature = "tls")]
    pub async fn secure_connect(self, cluster: &str) -> Result<Client> {
        self.connect_with(cluster, true).await
    }

    /// Connects to `cluster` (`host1:port1,host2:port2[/chroot]`; `tcp://` or `tcp+tls://`
    /// per host) and returns once a session is established (created, or re-attached with
    /// [`Connector::with_session`]).
    ///
    /// Hosts are shuffled and tried in turn, each attempt bounded by the session timeout
    /// divided by the number of hosts; names are resolved on every attempt.
    ///
    /// # Errors
    /// - [`Error::SessionExpired`]: the session to re-attach is gone.
    /// - [`Error::Timeout`]: no session within the session timeout.
    /// - [`Error::NoHosts`]: with [`Connector::with_fail_eagerly`], every host failed once.
    /// - [`Error::BadArguments`]: a bad connect string.
    ///
    /// # Cancellation safety
    /// Dropping the future stops connecting (and closes a session it had just established).
    pub async fn connect(self, cluster: &str) -> Result<Client> {
        self.connect_with(cluster, false).await
    }

    async fn connect_with(self, cluster: &str, secure: bool) -> Result<Client> {
        let connect_string = ConnectString::parse(cluster, secure)?;
        if self.session_timeout.is_zero() {
            return Err(Error::bad_arguments("session timeout must not be zero"));
        }
        #[cfg(feature = "tls")]
        let tls = match (&self.tls, connect_string.hosts.iter().any(|h| h.tls)) {
            (Some(options), _) => Some(std::sync::Arc::new(options.connector()?)),
            (None, true) => return Err(Error::bad_arguments("TLS hosts need Connector::with_tls")),
            (None, false) => None,
        };
        let config = Config {
            session_timeout: self.session_timeout,
            read_timeout: self.connection_timeout,
            readonly: self.readonly,
            detached: self.detached,
            fail_eagerly: self.fail_eagerly,
            max_frame: self.max_frame,
            #[cfg(feature = "tls")]
            tls,
        };
        let hosts = HostProvider::new(connect_string.hosts, &mut rand::thread_rng());
        let (ready_tx, ready_rx) = oneshot::channel();
        let (task, tx, shared) =
            session::new_task(config, hosts, self.session, self.auths, ready_tx);
        tokio::spawn(task.run());
        match ready_rx.await {
            Ok(Ok(())) => Ok(Client::new(tx, shared, connect_string.chroot)),
            Ok(Err(err)) => Err(err),
            Err(_) => Err(Error::ClientClosed),
        }
    }
}
