//! Server configuration: what `zoo.cfg` holds for a standalone ZooKeeper, as a Rust struct.
//!
//! Field names follow ZooKeeper's settings (`tickTime`, `minSessionTimeout`,
//! `extendedTypesEnabled`, `znode.container.checkIntervalMs`, `jute.maxbuffer`,
//! `4lw.commands.whitelist`). Nothing here does I/O.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::admin_handler::AdminHandler;
use crate::storage::durable::DurableOptions;
pub use crate::storage::wal::FsyncMode;
use crate::storage::wal::WalOptions;
use zkit_proto::frame::{DEFAULT_MAX_FRAME, FOUR_LETTER_WORDS};

/// How a server is set up. Build one with [`ServerConfig::default`] (ZooKeeper's defaults on
/// 127.0.0.1:2181) or [`ServerConfig::ephemeral`] (port 0, for tests), then adjust fields.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Address to listen on; port 0 picks a free port (see [`crate::Server::addr`]).
    pub listen: SocketAddr,
    /// `secureClientPort` / `secureClientPortAddress`: where TLS clients connect, beside the
    /// plain port; needs [`ServerConfig::tls`] (and the `tls` feature). Port 0 picks a free
    /// port (see [`crate::Server::secure_addr`]). `None` (the default): no TLS port.
    pub secure_listen: Option<SocketAddr>,
    /// The key material and policy of the TLS port (`ssl.*`).
    pub tls: Option<crate::tls::TlsConfig>,
    /// `tickTime`: the unit of session timeouts and the expiry granularity (default 2 s).
    pub tick_time: Duration,
    /// `minSessionTimeout`; `None` = 2 × tick_time.
    pub min_session_timeout: Option<Duration>,
    /// `maxSessionTimeout`; `None` = 20 × tick_time.
    pub max_session_timeout: Option<Duration>,
    /// `extendedTypesEnabled`: allow TTL nodes (default false, as in ZooKeeper).
    pub extended_types: bool,
    /// `znode.container.checkIntervalMs`: how often empty containers and expired TTL nodes are
    /// reaped (default 60 s).
    pub container_check_interval: Duration,
    /// `jute.maxbuffer`: the largest frame accepted from a client (default 1,048,575 bytes);
    /// a longer length prefix closes the connection.
    pub max_frame: usize,
    /// `4lw.commands.whitelist` (default: only `srvr`).
    pub four_letter_words: FourLetterWhitelist,
    /// `zookeeper.nio.sessionlessCnxnTimeout`: a connection that has not completed its
    /// handshake (or sent a four-letter word) within this time is closed (default 10 s).
    pub sessionless_timeout: Duration,
    /// `superDigest` (`zookeeper.DigestAuthenticationProvider.superDigest`): `user:base64hash`
    /// as `zkit_core::acl::digest_id("user:password")` makes it; who authenticates as it
    /// bypasses every ACL. `None` (the default): no super user.
    pub super_digest: Option<String>,
    /// Limits against abusive clients (connections per IP, requests in flight per connection).
    pub limits: crate::limits::Limits,
    /// Where the HTTP admin endpoint (`/metrics`, `/commands/<name>`) listens; `None` = off.
    pub admin_listen: Option<SocketAddr>,
    /// Serves every other path of the admin endpoint (`/` included), e.g. the web dashboard;
    /// `None` (the default): those paths are 404.
    pub admin_extra: Option<Arc<dyn AdminHandler>>,
    /// `dataDir`: where the WAL and snapshots live (locked while the server runs). `None` (the
    /// default, and what [`ServerConfig::ephemeral`] gives tests) keeps state in memory only.
    pub data_dir: Option<PathBuf>,
    /// `forceSync`: fdatasync the WAL before acknowledging writes (default
    /// [`FsyncMode::Always`]); [`FsyncMode::Never`] survives a process crash but not power loss.
    pub fsync: FsyncMode,
    /// `snapCount`: txns since the last snapshot before the next one (default 100,000).
    pub snap_count: u64,
    /// `snapLogPercent` (zkit's own): the WAL since the last snapshot must also reach this
    /// share of that snapshot's size, in percent, before the next one (default 50; 0: every
    /// `snap_count` txns whatever the tree's size). See [`crate::storage::snapshotter`].
    pub snap_log_percent: u32,
    /// `snapSizeLimitInKb` (`zookeeper.snapSizeLimitInKb`), in bytes: this much WAL since the
    /// last snapshot makes one due whatever the txn count (default 4 GiB; 0: off).
    pub snap_size_limit: u64,
    /// `autopurge.snapRetainCount`: how many snapshots are kept, with the WAL the oldest of
    /// them needs (default 3; 0 is taken as 1). Older ones are deleted after every snapshot,
    /// so unlike Apache's purge task (`autopurge.purgeInterval`) this needs no schedule.
    pub snap_retain_count: usize,
    /// Start even if the WAL is corrupt before its tail, cutting it there (`--truncate-corrupt`);
    /// by default the server refuses to start and names the file and offset.
    pub truncate_corrupt: bool,
    /// `X509AuthenticationProvider.superUser`: the subject of the client certificate (as
    /// its `x509` id reads) that bypasses every ACL, as `super` does. `None`: no such user.
    pub x509_super_user: Option<String>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 2181)),
            secure_listen: None,
            tls: None,
            tick_time: Duration::from_millis(2000),
            min_session_timeout: None,
            max_session_timeout: None,
            extended_types: false,
            container_check_interval: Duration::from_secs(60),
            max_frame: DEFAULT_MAX_FRAME,
            four_letter_words: FourLetterWhitelist::default(),
            sessionless_timeout: Duration::from_secs(10),
            super_digest: None,
            limits: crate::limits::Limits::default(),
            admin_listen: None,
            admin_extra: None,
            data_dir: None,
            fsync: FsyncMode::Always,
            snap_count: crate::storage::snapshotter::DEFAULT_SNAP_COUNT,
            snap_log_percent: crate::storage::snapshotter::DEFAULT_SNAP_LOG_PERCENT,
            snap_size_limit: crate::storage::snapshotter::DEFAULT_SNAP_SIZE_LIMIT,
            snap_retain_count: crate::storage::snapshot::DEFAULT_KEEP_SNAPSHOTS,
            truncate_corrupt: false,
            x509_super_user: None,
        }
    }
}

impl ServerConfig {
    /// A configuration for tests and embedding: 127.0.0.1 on a free port, TTL nodes enabled,
    /// every four-letter word allowed; other settings are ZooKeeper's defaults.
    pub fn ephemeral() -> Self {
        ServerConfig {
            listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            extended_types: true,
            four_letter_words: FourLetterWhitelist::All,
            // Tests open many connections from 127.0.0.1.
            limits: crate::limits::Limits::unlimited_connections(),
            ..ServerConfig::default()
        }
    }

    /// The session-timeout bounds in ms after defaults: `(min, max)`.
    pub fn session_timeout_bounds_ms(&self) -> (u64, u64) {
        let tick = millis(self.tick_time);
        let min = self.min_session_timeout.map_or(2 * tick, millis);
        let max = self.max_session_timeout.map_or(20 * tick, millis);
        (min, max)
    }

    /// The data dir as the admin commands print it (`dataDir`); empty for an in-memory server.
    pub(crate) fn data_dir_display(&self) -> String {
        self.data_dir
            .as_ref()
            .map(|d| d.display().to_string())
            .unwrap_or_default()
    }

    /// The settings the state machine needs. The path-hash seed is drawn at random, as the
    /// session passwords are: the core is deterministic for a seed, the server's seed is secret.
    pub(crate) fn core_config(&self) -> zkit_core::Config {
        let ms32 = |d: Duration| u32::try_from(d.as_millis()).unwrap_or(u32::MAX);
        zkit_core::Config {
            tick_time_ms: ms32(self.tick_time),
            min_session_timeout_ms: self.min_session_timeout.map(ms32),
            max_session_timeout_ms: self.max_session_timeout.map(ms32),
            extended_types: self.extended_types,
            container_check_interval_ms: millis(self.container_check_interval),
            server_id: 0,
            super_digest: self.super_digest.clone(),
            x509_super_user: self.x509_super_user.clone(),
            hash_seed: rand::random(),
        }
    }

    /// The storage settings for [`crate::storage::WalStorage`].
    pub(crate) fn durable_options(&self) -> DurableOptions {
        DurableOptions {
            wal: WalOptions {
                fsync: self.fsync,
                truncate_corrupt: self.truncate_corrupt,
                ..WalOptions::default()
            },
            snapshots: crate::storage::snapshotter::SnapshotPolicy {
                snap_count: self.snap_count,
                log_percent: self.snap_log_percent,
                size_limit: self.snap_size_limit,
            },
            keep_snapshots: self.snap_retain_count.max(1),
        }
    }

    /// Checks the settings are usable.
    pub(crate) fn validate(&self) -> Result<(), crate::error::Error> {
        if self.tick_time.is_zero() {
            return Err(crate::error::Error::Config(
                "tick time must be positive".into(),
            ));
        }
        if self.container_check_interval.is_zero() {
            return Err(crate::error::Error::Config(
                "container check interval must be positive".into(),
            ));
        }
        let (min, max) = self.session_timeout_bounds_ms();
        if min > max {
            return Err(crate::error::Error::Config(format!(
                "minimum session timeout {min} ms exceeds maximum {max} ms"
            )));
        }
        match (&self.secure_listen, &self.tls) {
            (Some(_), None) => {
                return Err(crate::error::Error::Config(
                    "a secure client port needs TLS key material (ssl.keyStore.location, or \
                     --tls-cert and --tls-key)"
                        .into(),
                ))
            }
            (None, Some(_)) => {
                return Err(crate::error::Error::Config(
                    "TLS settings are given but no secure client port (secureClientPort, \
                     --secure-port) to serve them on"
                        .into(),
                ))
            }
            (Some(_), Some(_)) if !cfg!(feature = "tls") => {
                return Err(crate::error::Error::Tls(
                    "this build of zkit-server has no TLS (the `tls` feature); refusing to \
                     start without the secure client port"
                        .into(),
                ))
            }
            _ => {}
        }
        if self.max_frame < 8 {
            return Err(crate::error::Error::Config(
                "max frame must hold a request header".into(),
            ));
        }
        Ok(())
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Which four-letter words are answered (`4lw.commands.whitelist`). Others get ZooKeeper's
/// "`<cmd>` is not executed because it is not in the whitelist." reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FourLetterWhitelist {
    /// `*`: every word.
    All,
    /// Only these words.
    Only(Vec<String>),
}

impl Default for FourLetterWhitelist {
    /// ZooKeeper's default since 3.5: only `srvr`.
    fn default() -> Self {
        FourLetterWhitelist::Only(vec!["srvr".to_string()])
    }
}

impl FourLetterWhitelist {
    /// Parses ZooKeeper's syntax: `*`, or words separated by commas and/or spaces.
    ///
    /// # Errors
    /// A word that is not one of ZooKeeper's four-letter words.
    pub fn parse(text: &str) -> Result<Self, String> {
        let words: Vec<&str> = text
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|w| !w.is_empty())
            .collect();
        if words.contains(&"*") {
            return Ok(FourLetterWhitelist::All);
        }
        let mut only = Vec::new();
        for word in words {
            if !FOUR_LETTER_WORDS.contains(&word) {
                return Err(format!("unknown four-letter word {word:?}"));
            }
            only.push(word.to_string());
        }
        Ok(FourLetterWhitelist::Only(only))
    }

    /// Whether `word` is answered.
    pub fn allows(&self, word: &str) -> bool {
        match self {
            FourLetterWhitelist::All => true,
            FourLetterWhitelist::Only(words) => words.iter().any(|w| w == word),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whitelist_parses_zookeeper_syntax() {
        assert_eq!(
            FourLetterWhitelist::parse("*"),
            Ok(FourLetterWhitelist::All)
        );
        let list = FourLetterWhitelist::parse("srvr, ruok mntr").unwrap();
        assert!(list.allows("ruok") && list.allows("mntr") && !list.allows("stat"));
        assert!(FourLetterWhitelist::parse("nope").is_err());
        assert!(FourLetterWhitelist::default().allows("srvr"));
        assert!(!FourLetterWhitelist::default().allows("ruok"));
    }

    #[test]
    fn session_bounds_default_to_ticks() {
        let config = ServerConfig::default();
        assert_eq!(config.session_timeout_bounds_ms(), (4000, 40000));
        assert!(config.validate().is_ok());
        let bad = ServerConfig {
            min_session_timeout: Some(Duration::from_secs(50)),
            ..ServerConfig::default()
        };
        assert!(bad.validate().is_err());
    }
}
