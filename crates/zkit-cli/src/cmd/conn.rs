//! The connection flags every client command shares, and the one place that connects and
//! closes.
//!
//! [`ConnArgs`] is flattened into each command that talks to a server (node commands, `lock`,
//! `elect`, `config`, `proc`, `txn`, `service`, `ledger`, `bench`, …), so `--server`,
//! `--auth`, `--session-timeout` and the TLS options mean the same everywhere:
//!
//! - `--server HOSTS` (env `ZKIT_SERVER`): `HOST:PORT[,HOST:PORT…][/chroot]`, a chroot making
//!   every path relative to it, as in ZooKeeper's connect strings. It has no short form: `-s`
//!   keeps zkCli's meanings (`create -s` sequential, `get -s`/`set -s` print the Stat).
//! - `--auth USER:PASSWORD` (env `ZKIT_AUTH`): digest authentication on every connection
//!   (zkCli's `addauth digest`).
//! - `--session-timeout`: the session timeout asked for (the server clamps it).
//! - `--tls-ca FILE` turns on TLS for every host (PEM CA bundle); `--tls-cert`/`--tls-key` add
//!   a client certificate; `--tls-server-name` checks the certificates against one name.
//!
//! [`ConnArgs::client`] opens a one-shot [`Client`] (fails once every host was tried),
//! [`ConnArgs::session`] a reconnecting [`Session`] for the recipes. When either fails, the
//! error names the hosts tried, for how long, and what each did (refused, closed the
//! connection during the handshake, did not answer).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};
use clap::Args;
use tokio::io::AsyncReadExt;
use zkit::{Session, SessionOptions};
use zkit_client::{Client, Connector};

/// Session timeout when neither `--session-timeout` nor the command chooses another.
pub const DEFAULT_SESSION_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a one-shot command waits for a session before giving up.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the diagnosis of a failed connect waits for each host.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// How to reach and authenticate to the servers (shared by every client command).
#[derive(Debug, Clone, Args)]
pub struct ConnArgs {
    /// Server(s) to talk to: `HOST:PORT[,HOST:PORT…][/chroot]`.
    #[arg(
        long,
        env = "ZKIT_SERVER",
        default_value = "127.0.0.1:2181",
        value_name = "HOSTS",
        global = true
    )]
    pub server: String,
    /// Authenticate every connection with digest `USER:PASSWORD` (zkCli's `addauth digest`).
    #[arg(long, env = "ZKIT_AUTH", value_name = "USER:PASSWORD", global = true)]
    pub auth: Option<String>,
    /// Session timeout to ask for, e.g. `10s` (the server clamps it to its bounds)
    /// [default: 10s; 4s for proc and txn].
    #[arg(long, value_parser = humantime::parse_duration, value_name = "DURATION", global = true)]
    pub session_timeout: Option<Duration>,
    /// TLS: the PEM bundle of the CA(s) that sign the servers' certificates; turns TLS on for
    /// every host (a host written `tcp://HOST:PORT` stays plaintext).
    #[arg(long, env = "ZKIT_TLS_CA", value_name = "FILE", global = true)]
    pub tls_ca: Option<PathBuf>,
    /// TLS: a client certificate chain (PEM, leaf first), with --tls-key.
    #[arg(
        long,
        env = "ZKIT_TLS_CERT",
        value_name = "FILE",
        requires = "tls_key",
        global = true
    )]
    pub tls_cert: Option<PathBuf>,
    /// TLS: the private key (PEM) of --tls-cert.
    #[arg(
        long,
        env = "ZKIT_TLS_KEY",
        value_name = "FILE",
        requires = "tls_cert",
        global = true
    )]
    pub tls_key: Option<PathBuf>,
    /// TLS: check the servers' certificates against this name instead of each host's.
    #[arg(long, value_name = "NAME", global = true)]
    pub tls_server_name: Option<String>,
    /// The largest reply accepted from the server, in bytes: the client's `jute.maxbuffer`
    /// (raise it with the server's to read nodes over 1 MB) [default: 1048575].
    #[arg(long, value_name = "BYTES", global = true)]
    pub jute_maxbuffer: Option<usize>,
}

impl ConnArgs {
    /// Plain connection flags for `server` (no auth, no TLS, the default session timeout).
    pub fn to(server: &str) -> ConnArgs {
        ConnArgs {
            server: server.to_string(),
            auth: None,
            session_timeout: None,
            tls_ca: None,
            tls_cert: None,
            tls_key: None,
            tls_server_name: None,
            jute_maxbuffer: None,
        }
    }

    /// The connect string to dial: `--server`, with every host marked for TLS when `--tls-ca`
    /// is given (hosts that already name a scheme keep it).
    pub fn connect_string(&self) -> String {
        if self.tls_ca.is_none() {
            return self.server.clone();
        }
        let (hosts, chroot) = split_chroot(&self.server);
        let hosts: Vec<String> = hosts
            .split(',')
            .map(str::trim)
            .filter(|h| !h.is_empty())
            .map(|h| {
                if h.contains("://") {
                    h.to_string()
                } else {
                    format!("tcp+tls://{h}")
                }
            })
            .collect();
        format!("{}{chroot}", hosts.join(","))
    }

    /// The session timeout: `--session-timeout`, else `default`.
    pub fn session_timeout_or(&self, default: Duration) -> Duration {
        self.session_timeout.unwrap_or(default)
    }

    fn user_password(&self) -> Result<Option<&str>> {
        match self.auth.as_deref() {
            Some(up) if !up.contains(':') => {
                bail!("--auth expects USER:PASSWORD, got {up:?} (no ':')")
            }
            other => Ok(other),
        }
    }

    #[cfg(feature = "tls")]
    fn tls_options(&self) -> Result<Option<zkit_client::TlsOptions>> {
        use anyhow::Context as _;
        let Some(ca) = &self.tls_ca else {
            if self.tls_cert.is_some() || self.tls_server_name.is_some() {
                bail!("--tls-cert, --tls-key and --tls-server-name need --tls-ca");
            }
            return Ok(None);
        };
        let read = |path: &PathBuf, what: &str| {
            std::fs::read_to_string(path)
                .with_context(|| format!("reading the {what} {}", path.display()))
        };
        let mut options = zkit_client::TlsOptions::new()
            .with_pem_ca_certs(&read(ca, "TLS CA bundle")?)
            .with_context(|| format!("{}", ca.display()))?;
        if let (Some(cert), Some(key)) = (&self.tls_cert, &self.tls_key) {
            options = options
                .with_pem_identity(
                    &read(cert, "TLS certificate")?,
                    &read(key, "TLS private key")?,
                )
                .with_context(|| format!("{} / {}", cert.display(), key.display()))?;
        }
        if let Some(name) = &self.tls_server_name {
            options = options.with_server_name(name);
        }
        Ok(Some(options))
    }

    #[cfg(not(feature = "tls"))]
    fn check_no_tls(&self) -> Result<()> {
        if self.tls_ca.is_some() || self.tls_cert.is_some() || self.tls_server_name.is_some() {
            bail!("this zkit was built without TLS (the `tls` feature)");
        }
        Ok(())
    }

    /// Opens a one-shot session (for commands that do their work and exit): fails once every
    /// host was tried, or after 10 s, with an error naming the hosts and what each did.
    pub async fn client(&self) -> Result<Client> {
        let connector = self.connector(DEFAULT_SESSION_TIMEOUT)?.with_fail_eagerly();
        let started = Instant::now();
        let target = self.connect_string();
        match tokio::time::timeout(CONNECT_TIMEOUT, connector.connect(&target)).await {
            Ok(Ok(client)) => Ok(client),
            Ok(Err(zkit_client::Error::NoHosts | zkit_client::Error::Timeout)) => {
                Err(self.no_session(started.elapsed()).await)
            }
            Ok(Err(err)) => {
                Err(anyhow::Error::new(err).context(format!("cannot connect to {}", self.server)))
            }
            Err(_) => Err(self.no_session(started.elapsed()).await),
        }
    }

    /// A [`Connector`] with auth, TLS and the session timeout (`--session-timeout`, else
    /// `default_timeout`), for [`ConnArgs::connect_string`].
    pub fn connector(&self, default_timeout: Duration) -> Result<Connector> {
        let mut connector =
            Client::connector().with_session_timeout(self.session_timeout_or(default_timeout));
        if let Some(user_password) = self.user_password()? {
            connector = connector.with_auth("digest", user_password.as_bytes());
        }
        #[cfg(feature = "tls")]
        if let Some(tls) = self.tls_options()? {
            connector = connector.with_tls(tls);
        }
        #[cfg(not(feature = "tls"))]
        self.check_no_tls()?;
        if let Some(bytes) = self.jute_maxbuffer {
            connector = connector.with_max_frame(bytes);
        }
        Ok(connector)
    }

    /// Options for a reconnecting [`Session`]: auth, TLS and the session timeout
    /// (`--session-timeout`, else `default_timeout`).
    pub fn session_options(&self, default_timeout: Duration) -> Result<SessionOptions> {
        if self.jute_maxbuffer.is_some() {
            bail!("--jute-maxbuffer applies to the node commands, export, import and bench server only");
        }
        let mut options = SessionOptions::default()
            .with_session_timeout(self.session_timeout_or(default_timeout));
        if let Some(user_password) = self.user_password()? {
            options = options.with_digest_auth(user_password);
        }
        #[cfg(feature = "tls")]
        {
            options.tls = self.tls_options()?;
        }
        #[cfg(not(feature = "tls"))]
        self.check_no_tls()?;
        Ok(options)
    }

    /// Opens a reconnecting session for the recipes, with the session timeout of
    /// `--session-timeout` or else `default_timeout`.
    pub async fn session(&self, default_timeout: Duration) -> Result<Session> {
        let options = self.session_options(default_timeout)?;
        let started = Instant::now();
        match Session::connect(&self.connect_string(), options).await {
            Ok(session) => Ok(session),
            Err(zkit::Error::ConnectTimeout | zkit::Error::NoHosts) => {
                Err(self.no_session(started.elapsed()).await)
            }
            Err(err) => {
                Err(anyhow::Error::new(err).context(format!("cannot connect to {}", self.server)))
            }
        }
    }

    /// The error for "no session": the hosts tried, for how long, and what each does when
    /// probed now (a plain TCP connect and a short read, which creates no session).
    async fn no_session(&self, elapsed: Duration) -> anyhow::Error {
        let (hosts, _) = split_chroot(&self.server);
        let hosts: Vec<&str> = hosts
            .split(',')
            .map(str::trim)
            .filter(|h| !h.is_empty())
            .collect();
        let mut findings = Vec::new();
        for host in &hosts {
            findings.push(format!("{host}: {}", probe(host).await));
        }
        anyhow!(
            "cannot connect to {}: no session after trying {} for {}; {}",
            self.server,
            if hosts.len() == 1 {
                "its one host".to_string()
            } else {
                format!("its {} hosts", hosts.len())
            },
            human_duration(elapsed),
            findings.join("; ")
        )
    }
}

/// Closes the session and waits (briefly) for the server to confirm, so ephemerals go and the
/// server forgets the session at once instead of at its timeout.
pub async fn close(client: Client) {
    // Not waiting forever: the session would expire anyway.
    let _ = tokio::time::timeout(Duration::from_secs(2), client.close()).await;
}

/// `h1:1,h2:2/chroot` → (`h1:1,h2:2`, `/chroot`).
fn split_chroot(server: &str) -> (&str, &str) {
    // A scheme's `://` is not a chroot: look for the first '/' after the last "://".
    let start = server.rfind("://").map_or(0, |i| i + 3);
    match server[start..].find('/') {
        Some(i) => server.split_at(start + i),
        None => (server, ""),
    }
}

/// What one host does with a new TCP connection, in words.
async fn probe(host: &str) -> String {
    let address = host
        .strip_prefix("tcp+tls://")
        .or_else(|| host.strip_prefix("tcp://"))
        .unwrap_or(host);
    let address = if address.contains(':') && !address.ends_with(']') {
        address.to_string()
    } else {
        format!("{address}:{}", zkit_client::DEFAULT_PORT)
    };
    let connecting = tokio::net::TcpStream::connect(&address);
    let mut stream = match tokio::time::timeout(PROBE_TIMEOUT, connecting).await {
        Err(_) => {
            return format!(
                "no answer to a TCP connect within {}",
                human_duration(PROBE_TIMEOUT)
            )
        }
        Ok(Err(err)) => return format!("cannot connect ({err})"),
        Ok(Ok(stream)) => stream,
    };
    // A server over its connection limit (maxClientCnxns) closes the socket at once, before
    // reading anything, as Apache's NIOServerCnxnFactory does; a healthy one waits for our
    // ConnectRequest.
    let mut byte = [0u8; 1];
    match tokio::time::timeout(Duration::from_millis(500), stream.read(&mut byte)).await {
        Ok(Ok(0)) | Ok(Err(_)) => "the server closed the connection during the handshake \
                                   (too many connections from this address?)"
            .to_string(),
        Ok(Ok(_)) => "answered with data before the handshake (not a ZooKeeper server?)".into(),
        Err(_) => "accepts connections now".to_string(),
    }
}

/// A duration as people write it, to the millisecond (`1.5s`, `250ms`, `2m 3s`).
pub fn human_duration(d: Duration) -> String {
    let millis = Duration::from_millis(u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    if millis >= Duration::from_secs(60) {
        // Whole seconds are enough once minutes show.
        humantime::format_duration(Duration::from_secs(millis.as_secs())).to_string()
    } else if millis >= Duration::from_secs(1) {
        format!("{:.1}s", millis.as_secs_f64())
    } else {
        format!("{}ms", millis.as_millis())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        conn: ConnArgs,
    }

    fn conn(args: &[&str]) -> ConnArgs {
        let mut argv = vec!["zkit"];
        argv.extend_from_slice(args);
        Cli::try_parse_from(argv).expect("parses").conn
    }

    #[test]
    fn tls_marks_every_host_and_keeps_the_chroot() {
        let plain = conn(&["--server", "a:1,b:2/app"]);
        assert_eq!(plain.connect_string(), "a:1,b:2/app");
        let tls = conn(&["--server", "a:1, tcp://b:2/app", "--tls-ca", "ca.pem"]);
        assert_eq!(tls.connect_string(), "tcp+tls://a:1,tcp://b:2/app");
    }

    #[test]
    fn chroot_is_split_after_any_scheme() {
        assert_eq!(split_chroot("a:1,b:2/x/y"), ("a:1,b:2", "/x/y"));
        assert_eq!(split_chroot("tcp+tls://a:1"), ("tcp+tls://a:1", ""));
        assert_eq!(split_chroot("a:1"), ("a:1", ""));
    }

    #[test]
    fn session_timeout_defaults_per_command() {
        let c = conn(&[]);
        assert_eq!(
            c.session_timeout_or(Duration::from_secs(4)),
            Duration::from_secs(4)
        );
        let c = conn(&["--session-timeout", "3s"]);
        assert_eq!(
            c.session_timeout_or(Duration::from_secs(4)),
            Duration::from_secs(3)
        );
    }

    #[test]
    fn a_certificate_needs_its_key() {
        let argv = ["zkit", "--tls-ca", "ca", "--tls-cert", "c"];
        assert!(Cli::try_parse_from(argv).is_err());
    }

    #[test]
    fn auth_without_a_colon_is_refused() {
        let c = conn(&["--auth", "nocolon"]);
        assert!(c.session_options(DEFAULT_SESSION_TIMEOUT).is_err());
    }

    #[test]
    fn durations_read_like_people_write_them() {
        assert_eq!(human_duration(Duration::from_micros(5_144_544)), "5.1s");
        assert_eq!(human_duration(Duration::from_millis(250)), "250ms");
        assert_eq!(human_duration(Duration::from_secs(123)), "2m 3s");
    }
}
