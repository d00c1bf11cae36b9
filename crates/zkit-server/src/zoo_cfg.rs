//! Reads Apache ZooKeeper's `zoo.cfg` (Java properties: `key=value`, `#`/`!` comments) — or the
//! same keys as a flat TOML table — into a [`ServerConfig`] plus the storage settings.
//!
//! The keys that apply to a standalone server are read (`tickTime`, `dataDir`, `dataLogDir`,
//! `clientPort`, `clientPortAddress`, `maxClientCnxns`, `minSessionTimeout`,
//! `maxSessionTimeout`, `extendedTypesEnabled`, `4lw.commands.whitelist`,
//! `znode.container.checkIntervalMs`, `jute.maxbuffer`, `superDigest`, `snapCount`, `snapSizeLimitInKb`,
//! `autopurge.snapRetainCount`, `forceSync`, `admin.enableServer`,
//! `admin.serverAddress`, `admin.serverPort`, and zkit's own `snapLogPercent` (see
//! [`ServerConfig::snap_log_percent`]) and `logLevel`, a `tracing` filter
//! re-read on SIGHUP by `zkit serve`). Any other key is kept as a warning, not an error,
//! so an existing ensemble's file loads; a value that does not parse is an error naming the line.
//! `autopurge.purgeInterval` is read and warned about: zkit prunes after every snapshot.
//!
//! TLS for clients is read as Apache 3.8 reads it: `secureClientPort`,
//! `secureClientPortAddress`, `ssl.keyStore.location` (PEM: key and chain in one file),
//! `ssl.keyStore.type`/`.password`, `ssl.trustStore.location`/`.type`, `ssl.clientAuth`,
//! `ssl.protocol`, `ssl.enabledProtocols`, `ssl.ciphersuites`, `ssl.hostnameVerification`,
//! `ssl.authProvider=x509`, and `X509AuthenticationProvider.superUser`.
//!
//! Security settings never fail open: a key that asks for something zkit does not implement
//! (JKS/PKCS12 stores, TLS below 1.2, revocation checks, SASL, Kerberos, an
//! `authProvider.N` other than the built-in digest/ip/x509, enforced authentication,
//! `portUnification`, ...) is an error naming it, because zkit would otherwise serve without
//! it. Only the explicit off state of a switch (`ssl.crl=false`, `enforce.auth.enabled=false`,
//! ...) is accepted. The quorum TLS keys (`sslQuorum`, `ssl.quorum.*`) are ignored with a
//! warning, as a standalone Apache server ignores them: there are no quorum connections.
//! Pure: the caller reads the file and prints the warnings.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use crate::config::{FourLetterWhitelist, FsyncMode, ServerConfig};
use crate::tls::{ClientAuth, TlsConfig, TlsVersion};

/// `autopurge.snapRetainCount`'s smallest value: a smaller one is raised to it, with a warning,
/// as Apache's `QuorumPeerConfig` does.
const MIN_SNAP_RETAIN_COUNT: u32 = 3;

/// A parsed configuration file.
#[derive(Debug, Clone)]
pub struct ZooCfg {
    /// The server settings (defaults from [`ServerConfig::default`] for absent keys;
    /// `dataDir` and `snapCount` land in `server.data_dir` and `server.snap_count`).
    pub server: ServerConfig,
    /// `dataLogDir` (defaults to `dataDir` in ZooKeeper; zkit keeps its log in `dataDir`, so a
    /// different value is reported in `warnings`).
    pub data_log_dir: Option<PathBuf>,
    /// `logLevel` (zkit's own key): a `tracing` filter such as `info` or `zkit_server=debug`.
    pub log_level: Option<String>,
    /// `autopurge.snapRetainCount` as the file gives it (what the server keeps, at least 3, is
    /// `server.snap_retain_count`).
    pub autopurge_snap_retain_count: Option<u32>,
    /// `autopurge.purgeInterval` in hours as the file gives it. It has no effect (reported in
    /// `warnings`): zkit prunes after every snapshot.
    pub autopurge_purge_interval_hours: Option<u32>,
    /// Keys that were read but have no effect on a zkit server, with their line numbers.
    pub warnings: Vec<String>,
}

/// A configuration file that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct ZooCfgError {
    /// 1-based line number (0 when the error is not tied to a line).
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

fn err(line: usize, message: impl Into<String>) -> ZooCfgError {
    ZooCfgError {
        line,
        message: message.into(),
    }
}

/// Keys of a clustered or Java-specific setup: accepted with a warning. `ssl.quorum.*` and
/// `sslQuorum` protect connections between ensemble members, which a standalone server does
/// not have; Apache's standalone `ZooKeeperServerMain` ignores them too (only `QuorumPeer`
/// builds a `QuorumX509Util`).
const IGNORED_PREFIXES: [&str; 6] = [
    "server.",
    "group.",
    "weight.",
    "ssl.quorum.",
    "sslQuorum",
    "quorum.",
];

/// Switches whose explicit off state (`false`/`no`) is harmless: nothing is asked for.
const SECURITY_SWITCHES: [&str; 9] = [
    "ssl.crl",
    "ssl.ocsp",
    "portUnification",
    "client.secure",
    "quorum.auth.enableSasl",
    "quorum.auth.learnerRequireSasl",
    "quorum.auth.serverRequireSasl",
    "enforce.auth.enabled",
    "sessionRequireClientSASLAuth",
];

/// The authentication providers built into zkit (`authProvider.N=<class>` naming one of
/// them asks for nothing zkit lacks).
const BUILT_IN_PROVIDERS: [&str; 3] = [
    "org.apache.zookeeper.server.auth.DigestAuthenticationProvider",
    "org.apache.zookeeper.server.auth.IPAuthenticationProvider",
    "org.apache.zookeeper.server.auth.X509AuthenticationProvider",
];

/// Why `key=value` asks for a security feature that zkit does not implement, if it does.
/// (The `ssl.*` keys zkit implements are matched before this is asked.)
fn unsupported_security(key: &str, value: &str) -> Option<&'static str> {
    let off = matches!(value.to_ascii_lowercase().as_str(), "false" | "no");
    if off && SECURITY_SWITCHES.contains(&key) {
        return None;
    }
    let lower = key.to_ascii_lowercase();
    if lower.starts_with("ssl.quorum.") {
        return None; // quorum TLS: ignored, as by a standalone Apache server
    }
    if key == "client.secure" {
        Some("TLS from a server's configuration (client.secure is a client setting)")
    } else if key == "portUnification" {
        Some("TLS and plaintext on one port (use secureClientPort beside clientPort)")
    } else if lower == "ssl.crl" || lower == "ssl.ocsp" {
        Some("certificate revocation checks")
    } else if lower.starts_with("ssl.") {
        Some("this TLS setting")
    } else if lower.starts_with("authprovider.") {
        if BUILT_IN_PROVIDERS.contains(&value) {
            None
        } else {
            Some("pluggable authentication providers other than digest, ip and x509")
        }
    } else if lower.starts_with("sasl")
        || lower.starts_with("quorum.auth.")
        || key == "sessionRequireClientSASLAuth"
    {
        Some("SASL authentication")
    } else if lower.starts_with("enforce.auth.") || key == "requireClientAuthScheme" {
        Some("enforced client authentication")
    } else {
        None
    }
}

impl ZooCfg {
    /// Parses `zoo.cfg` text.
    ///
    /// # Errors
    /// The first line whose value is invalid, or whose syntax is not `key=value`.
    pub fn parse_properties(text: &str) -> Result<ZooCfg, ZooCfgError> {
        let mut entries = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let trimmed = raw.trim();
            if trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with('!') {
                continue;
            }
            // java.util.Properties also accepts ':' and whitespace as separators.
            let Some(at) = trimmed.find(['=', ':']) else {
                return Err(err(line, format!("expected key=value, got {trimmed:?}")));
            };
            let (key, value) = (trimmed[..at].trim(), trimmed[at + 1..].trim());
            if key.is_empty() {
                return Err(err(line, "empty key"));
            }
            entries.push((line, key.to_string(), value.to_string()));
        }
        ZooCfg::from_entries(entries)
    }

    /// Parses the TOML form: a flat table with zoo.cfg's keys (quote dotted keys:
    /// `"4lw.commands.whitelist" = "*"`), values as integers, booleans or strings.
    ///
    /// # Errors
    /// TOML syntax errors and invalid values, with their line numbers.
    pub fn parse_toml(text: &str) -> Result<ZooCfg, ZooCfgError> {
        let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
            let line = e.span().map_or(0, |s| {
                text[..s.start.min(text.len())].lines().count().max(1)
            });
            err(line, e.message().to_string())
        })?;
        let line_of = |key: &str| {
            text.lines()
                .position(|l| {
                    let l = l.trim_start();
                    l.starts_with(key) || l.starts_with(&format!("\"{key}\""))
                })
                .map_or(0, |i| i + 1)
        };
        let mut entries = Vec::new();
        for (key, value) in &table {
            let line = line_of(key);
            let value = match value {
                toml::Value::String(s) => s.clone(),
                toml::Value::Integer(i) => i.to_string(),
                toml::Value::Boolean(b) => b.to_string(),
                toml::Value::Array(items) => items
                    .iter()
                    .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string))
                    .collect::<Vec<_>>()
                    .join(","),
                other => {
                    return Err(err(
                        line,
                        format!("{key}: unsupported value {other} (use a string or a number)"),
                    ))
                }
            };
            entries.push((line, key.clone(), value));
        }
        entries.sort_by_key(|(line, _, _)| *line);
        ZooCfg::from_entries(entries)
    }

    /// Parses by file name: `.toml` as TOML, anything else as `zoo.cfg` properties.
    ///
    /// # Errors
    /// As [`ZooCfg::parse_properties`] / [`ZooCfg::parse_toml`].
    pub fn parse_named(name: &std::path::Path, text: &str) -> Result<ZooCfg, ZooCfgError> {
        if name.extension().is_some_and(|e| e == "toml") {
            ZooCfg::parse_toml(text)
        } else {
            ZooCfg::parse_properties(text)
        }
    }

    fn from_entries(entries: Vec<(usize, String, String)>) -> Result<ZooCfg, ZooCfgError> {
        let mut cfg = ZooCfg {
            server: ServerConfig::default(),
            data_log_dir: None,
            log_level: None,
            autopurge_snap_retain_count: None,
            autopurge_purge_interval_hours: None,
            warnings: Vec::new(),
        };
        let mut port: Option<u16> = None;
        let mut host: Option<IpAddr> = None;
        let mut admin_enabled = true;
        let mut admin_port: Option<u16> = None;
        let mut admin_host: Option<IpAddr> = None;
        let mut seen: BTreeMap<String, usize> = BTreeMap::new();
        let mut secure_port: Option<(usize, u16)> = None;
        let mut secure_host: Option<(usize, IpAddr)> = None;
        let mut ssl = SslKeys::default();
        for (line, key, value) in entries {
            if let Some(first) = seen.insert(key.clone(), line) {
                cfg.warnings.push(format!(
                    "line {line}: {key} repeats line {first}; the last value wins"
                ));
            }
            let v = value.as_str();
            match key.as_str() {
                "tickTime" => {
                    let ms = num::<u64>(line, &key, v)?;
                    if ms == 0 {
                        return Err(err(line, "tickTime must be positive"));
                    }
                    cfg.server.tick_time = Duration::from_millis(ms);
                }
                "dataDir" => cfg.server.data_dir = Some(path(line, &key, v)?),
                "dataLogDir" => cfg.data_log_dir = Some(path(line, &key, v)?),
                "forceSync" => {
                    cfg.server.fsync = if boolean(line, &key, v)? {
                        FsyncMode::Always
                    } else {
                        FsyncMode::Never
                    };
                }
                "logLevel" => {
                    if v.is_empty() {
                        return Err(err(line, "logLevel: empty filter"));
                    }
                    cfg.log_level = Some(v.to_string());
                }
                "clientPort" => port = Some(num(line, &key, v)?),
                "clientPortAddress" => host = Some(ip(line, &key, v)?),
                "maxClientCnxns" => cfg.server.limits.max_client_cnxns = num(line, &key, v)?,
                // ZooKeeper: -1 (or absent) = the 2/20 × tickTime default.
                "minSessionTimeout" => {
                    cfg.server.min_session_timeout = timeout(line, &key, v)?;
                }
                "maxSessionTimeout" => {
                    cfg.server.max_session_timeout = timeout(line, &key, v)?;
                }
                "extendedTypesEnabled" => cfg.server.extended_types = boolean(line, &key, v)?,
                "4lw.commands.whitelist" => {
                    cfg.server.four_letter_words =
                        FourLetterWhitelist::parse(v).map_err(|m| err(line, m))?;
                }
                "znode.container.checkIntervalMs" => {
                    let ms = num::<u64>(line, &key, v)?;
                    if ms == 0 {
                        return Err(err(line, format!("{key} must be positive")));
                    }
                    cfg.server.container_check_interval = Duration::from_millis(ms);
                }
                "jute.maxbuffer" => {
                    let n = num::<usize>(line, &key, v)?;
                    if n < 8 {
                        return Err(err(line, format!("{key} must be at least 8")));
                    }
                    cfg.server.max_frame = n;
                }
                "superDigest" => {
                    match v.split_once(':') {
                        Some((user, hash)) if !user.is_empty() && !hash.is_empty() => {}
                        _ => {
                            return Err(err(
                                line,
                                "superDigest must be user:base64(sha1(user:password))",
                            ))
                        }
                    }
                    cfg.server.super_digest = Some(v.to_string());
                }
                "snapCount" => {
                    let n = num::<u64>(line, &key, v)?;
                    if n == 0 {
                        return Err(err(line, "snapCount must be positive"));
                    }
                    cfg.server.snap_count = n;
                }
                "snapSizeLimitInKb" => {
                    // As ZooKeeperServer.getSnapSizeInBytes: a non-positive value turns it off.
                    let kb = num::<i64>(line, &key, v)?;
                    cfg.server.snap_size_limit =
                        u64::try_from(kb).unwrap_or(0).saturating_mul(1024);
                }
                "snapLogPercent" => cfg.server.snap_log_percent = num(line, &key, v)?,
                "autopurge.snapRetainCount" => {
                    let n: u32 = num(line, &key, v)?;
                    cfg.autopurge_snap_retain_count = Some(n);
                    if n < MIN_SNAP_RETAIN_COUNT {
                        // As QuorumPeerConfig: below the minimum is a warning, not an error.
                        cfg.warnings.push(format!(
                            "line {line}: {key}={n} is below {MIN_SNAP_RETAIN_COUNT}; \
                             keeping {MIN_SNAP_RETAIN_COUNT} snapshots"
                        ));
                    }
                    cfg.server.snap_retain_count = n.max(MIN_SNAP_RETAIN_COUNT) as usize;
                }
                "autopurge.purgeInterval" => {
                    let hours: u32 = num(line, &key, v)?;
                    cfg.autopurge_purge_interval_hours = Some(hours);
                    cfg.warnings.push(format!(
                        "line {line}: {key} ignored: zkit deletes old snapshots and the WAL \
                         before them after every snapshot, keeping autopurge.snapRetainCount"
                    ));
                }
                "admin.enableServer" => admin_enabled = boolean(line, &key, v)?,
                "admin.serverPort" => admin_port = Some(num(line, &key, v)?),
                "admin.serverAddress" => admin_host = Some(ip(line, &key, v)?),
                "secureClientPort" => secure_port = Some((line, num(line, &key, v)?)),
                "secureClientPortAddress" => secure_host = Some((line, ip(line, &key, v)?)),
                "X509AuthenticationProvider.superUser" => {
                    cfg.server.x509_super_user = Some(v.to_string());
                }
                k if k.starts_with("ssl.") && !k.starts_with("ssl.quorum.") => {
                    if let Some(what) = ssl.read(line, k, v)? {
                        cfg.warnings.push(format!("line {line}: {k} {what}"));
                    }
                }
                other if unsupported_security(other, v).is_some() => {
                    let what = unsupported_security(other, v).unwrap_or("this setting");
                    return Err(refusal(line, other, what));
                }
                other if other.to_ascii_lowercase().starts_with("authprovider.") => cfg
                    .warnings
                    .push(format!("line {line}: {other}: built in (nothing to load)")),
                other if IGNORED_PREFIXES.iter().any(|p| other.starts_with(p)) => cfg
                    .warnings
                    .push(format!("line {line}: {other} ignored (standalone server)")),
                other => cfg
                    .warnings
                    .push(format!("line {line}: {other} ignored (not used by zkit)")),
            }
        }
        let listen = cfg.server.listen;
        cfg.server.listen =
            SocketAddr::new(host.unwrap_or(listen.ip()), port.unwrap_or(listen.port()));
        // The TLS port. Apache binds it to every interface unless secureClientPortAddress
        // says otherwise; zkit binds it where the plain port is (127.0.0.1 by default).
        match secure_port {
            Some((line, port)) => {
                let host = secure_host.map_or(cfg.server.listen.ip(), |(_, h)| h);
                cfg.server.secure_listen = Some(SocketAddr::new(host, port));
                cfg.server.tls = Some(ssl.into_config(line)?);
            }
            None if ssl.any() => {
                return Err(err(
                    ssl.first_line,
                    "ssl.* settings without secureClientPort: zkit serves TLS only on the \
                     secure client port; set secureClientPort (or remove the ssl.* keys)",
                ))
            }
            None if secure_host.is_some() => {
                let line = secure_host.map_or(0, |(l, _)| l);
                return Err(err(
                    line,
                    "secureClientPortAddress without secureClientPort: no TLS port to place",
                ));
            }
            None => {}
        }
        // Unlike ZooKeeper (whose AdminServer defaults to 0.0.0.0:8080), the admin endpoint is
        // off unless a port is configured: no surprise listener on a well-known port.
        if admin_enabled {
            if let Some(p) = admin_port {
                let h = admin_host.unwrap_or(cfg.server.listen.ip());
                cfg.server.admin_listen = Some(SocketAddr::new(h, p));
            }
        }
        if let (Some(log), Some(data)) = (&cfg.data_log_dir, &cfg.server.data_dir) {
            if log != data {
                cfg.warnings.push(format!(
                    "dataLogDir {} ignored: zkit keeps its log in dataDir {}",
                    log.display(),
                    data.display()
                ));
            }
        }
        let (min, max) = cfg.server.session_timeout_bounds_ms();
        if min > max {
            return Err(err(
                0,
                format!("minSessionTimeout {min} ms exceeds maxSessionTimeout {max} ms"),
            ));
        }
        Ok(cfg)
    }
}

/// The client-TLS `ssl.*` keys as read, before they become a [`TlsConfig`].
#[derive(Debug, Default)]
struct SslKeys {
    /// The line of the first ssl.* key, for errors about the set as a whole.
    first_line: usize,
    key_store: Option<(usize, PathBuf)>,
    key_store_password: Option<String>,
    trust_store: Option<PathBuf>,
    client_auth: Option<ClientAuth>,
    protocol: Option<TlsVersion>,
    enabled_protocols: Option<Vec<TlsVersion>>,
    cipher_suites: Vec<String>,
    seen: bool,
}

/// `ssl.keyStore.type` / `ssl.trustStore.type`, or the type Apache infers from the file name
/// when it is absent (`KeyStoreFileType.fromFilename`): only PEM is read.
fn store_type(line: usize, key: &str, v: &str) -> Result<(), ZooCfgError> {
    match v.to_ascii_uppercase().as_str() {
        "PEM" | "" => Ok(()),
        kind @ ("JKS" | "PKCS12" | "BCFKS") => Err(err(
            line,
            format!(
                "{key}: zkit reads PEM key and trust stores only, not {kind}; convert it (e.g. \
                 `openssl pkcs12 -in store.p12 -nodes -out store.pem`, or keytool to PKCS12 \
                 first) and set {key}=PEM"
            ),
        )),
        other => Err(err(line, format!("{key}: unknown store type {other:?}"))),
    }
}

impl SslKeys {
    /// Reads one `ssl.*` key; `Ok(Some(note))` for a key accepted with no effect.
    fn read(
        &mut self,
        line: usize,
        key: &str,
        v: &str,
    ) -> Result<Option<&'static str>, ZooCfgError> {
        match key {
            "ssl.keyStore.location" => self.key_store = Some((line, path(line, key, v)?)),
            "ssl.keyStore.password" | "ssl.keyStore.passwordPath" => {
                self.key_store_password = Some(v.to_string());
            }
            "ssl.trustStore.location" => self.trust_store = Some(path(line, key, v)?),
            "ssl.keyStore.type" | "ssl.trustStore.type" => store_type(line, key, v)?,
            // A PEM trust store holds certificates only: there is nothing to unlock.
            "ssl.trustStore.password" | "ssl.trustStore.passwordPath" => {
                return Ok(Some("ignored (a PEM trust store has no password)"))
            }
            "ssl.clientAuth" => {
                self.client_auth =
                    Some(ClientAuth::parse(v).map_err(|m| err(line, format!("{key}: {m}")))?);
            }
            "ssl.protocol" => {
                self.protocol =
                    Some(TlsVersion::parse(v).map_err(|m| err(line, format!("{key}: {m}")))?);
            }
            "ssl.enabledProtocols" => {
                let versions = v
                    .split(',')
                    .filter(|p| !p.trim().is_empty())
                    .map(TlsVersion::parse)
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|m| err(line, format!("{key}: {m}")))?;
                self.enabled_protocols = Some(versions);
            }
            "ssl.ciphersuites" => {
                self.cipher_suites = v
                    .split(',')
                    .map(str::trim)
                    .filter(|c| !c.is_empty())
                    .map(str::to_string)
                    .collect();
            }
            // On the server, Apache checks no client host names (ClientX509Util's
            // shouldVerifyClientHostname is false): both values leave nothing undone.
            "ssl.hostnameVerification" | "ssl.allowReverseDnsLookup" => {
                boolean(line, key, v)?;
                return Ok(Some(
                    "has no effect on a server (client host names are not checked, as in Apache)",
                ));
            }
            "ssl.handshakeDetectionTimeoutMillis" => {
                num::<u64>(line, key, v)?;
                return Ok(Some("ignored (it applies to portUnification only)"));
            }
            "ssl.authProvider" if v == "x509" => {}
            _ => match unsupported_security(key, v) {
                Some(what) => return Err(refusal(line, key, what)),
                None => return Ok(Some("is off (nothing asked for)")),
            },
        }
        if !self.seen {
            self.seen = true;
            self.first_line = line;
        }
        Ok(None)
    }

    fn any(&self) -> bool {
        self.seen
    }

    /// The TLS settings of a secure port declared at `line`.
    fn into_config(self, line: usize) -> Result<TlsConfig, ZooCfgError> {
        let Some((_, key_store)) = self.key_store else {
            return Err(err(
                line,
                "secureClientPort needs ssl.keyStore.location (a PEM file with the private key \
                 and the certificate chain)",
            ));
        };
        let mut tls = TlsConfig::new(key_store.clone(), key_store, self.trust_store);
        tls.key_password = self.key_store_password;
        // Apache's default is need; its absence asks for client certificates.
        tls.client_auth = self.client_auth.unwrap_or(ClientAuth::Need);
        tls.versions = match (self.enabled_protocols, self.protocol) {
            (Some(list), _) => list,
            (None, Some(one)) => vec![one],
            (None, None) => Vec::new(),
        };
        tls.cipher_suites = self.cipher_suites;
        Ok(tls)
    }
}

fn refusal(line: usize, key: &str, what: &str) -> ZooCfgError {
    err(
        line,
        format!(
            "{key}: zkit does not implement {what}; refusing to start rather than serve \
             without it (remove the key to run without it)"
        ),
    )
}

fn num<T: std::str::FromStr>(line: usize, key: &str, v: &str) -> Result<T, ZooCfgError> {
    v.parse()
        .map_err(|_| err(line, format!("{key}: invalid number {v:?}")))
}

fn boolean(line: usize, key: &str, v: &str) -> Result<bool, ZooCfgError> {
    match v.to_ascii_lowercase().as_str() {
        "true" | "yes" => Ok(true),
        "false" | "no" => Ok(false),
        _ => Err(err(
            line,
            format!("{key}: expected true or false, got {v:?}"),
        )),
    }
}

fn ip(line: usize, key: &str, v: &str) -> Result<IpAddr, ZooCfgError> {
    if v == "localhost" {
        return Ok(IpAddr::from([127, 0, 0, 1]));
    }
    v.parse()
        .map_err(|_| err(line, format!("{key}: invalid IP address {v:?}")))
}

fn path(line: usize, key: &str, v: &str) -> Result<PathBuf, ZooCfgError> {
    if v.is_empty() {
        return Err(err(line, format!("{key}: empty path")));
    }
    Ok(PathBuf::from(v))
}

fn timeout(line: usize, key: &str, v: &str) -> Result<Option<Duration>, ZooCfgError> {
    let ms = num::<i64>(line, key, v)?;
    match ms {
        -1 => Ok(None),
        ms if ms > 0 => Ok(Some(Duration::from_millis(ms.unsigned_abs()))),
        _ => Err(err(
            line,
            format!("{key}: must be positive or -1, got {ms}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\
# a comment
tickTime=500
dataDir=/var/lib/zk
clientPort=2999
clientPortAddress=127.0.0.2
maxClientCnxns=7
minSessionTimeout=1500
maxSessionTimeout=9000
extendedTypesEnabled=true
4lw.commands.whitelist=srvr, ruok
znode.container.checkIntervalMs=250
jute.maxbuffer=4096
superDigest=super:D/InIHSb7yEEbrWz8b9l71RjZJU=
snapCount=1000
autopurge.snapRetainCount=5
autopurge.purgeInterval=1
initLimit=5
server.1=zk1:2888:3888
admin.serverPort=8081
snapSizeLimitInKb=2048
snapLogPercent=25
";

    #[test]
    fn reads_every_standalone_key() {
        let cfg = ZooCfg::parse_properties(SAMPLE).unwrap();
        let s = &cfg.server;
        assert_eq!(s.tick_time, Duration::from_millis(500));
        assert_eq!(s.listen, "127.0.0.2:2999".parse().unwrap());
        assert_eq!(s.limits.max_client_cnxns, 7);
        assert_eq!(s.session_timeout_bounds_ms(), (1500, 9000));
        assert!(s.extended_types);
        assert!(s.four_letter_words.allows("ruok") && !s.four_letter_words.allows("mntr"));
        assert_eq!(s.container_check_interval, Duration::from_millis(250));
        assert_eq!(s.max_frame, 4096);
        assert_eq!(
            s.super_digest.as_deref(),
            Some("super:D/InIHSb7yEEbrWz8b9l71RjZJU=")
        );
        assert_eq!(s.admin_listen, Some("127.0.0.2:8081".parse().unwrap()));
        assert_eq!(s.data_dir, Some(PathBuf::from("/var/lib/zk")));
        assert_eq!(s.snap_count, 1000);
        assert_eq!((s.snap_size_limit, s.snap_log_percent), (2 << 20, 25));
        let off = ZooCfg::parse_properties("snapSizeLimitInKb=-1\n").unwrap();
        assert_eq!(off.server.snap_size_limit, 0);
        assert_eq!(cfg.autopurge_snap_retain_count, Some(5));
        assert_eq!(s.snap_retain_count, 5);
        assert_eq!(cfg.autopurge_purge_interval_hours, Some(1));
        assert_eq!(cfg.warnings.len(), 3, "{:?}", cfg.warnings);
        assert!(cfg.warnings[0].starts_with("line 16: autopurge.purgeInterval ignored"));
        assert!(cfg.warnings[1].starts_with("line 17: initLimit"));
        assert!(cfg.warnings[2].starts_with("line 18: server.1"));
    }

    #[test]
    fn snap_retain_count_below_three_keeps_three_with_a_warning() {
        assert_eq!(ServerConfig::default().snap_retain_count, 3);
        let cfg = ZooCfg::parse_properties("autopurge.snapRetainCount=1\n").unwrap();
        assert_eq!(cfg.autopurge_snap_retain_count, Some(1));
        assert_eq!(cfg.server.snap_retain_count, 3);
        assert_eq!(
            cfg.warnings,
            ["line 1: autopurge.snapRetainCount=1 is below 3; keeping 3 snapshots"]
        );
        let cfg = ZooCfg::parse_properties("autopurge.snapRetainCount=12\n").unwrap();
        assert_eq!(cfg.server.snap_retain_count, 12);
        assert!(cfg.warnings.is_empty(), "{:?}", cfg.warnings);
        let e = ZooCfg::parse_properties("autopurge.snapRetainCount=-2\n").unwrap_err();
        assert_eq!(e.line, 1);
    }

    #[test]
    fn bad_values_name_their_line() {
        let e = ZooCfg::parse_properties("tickTime=2000\nclientPort=http\n").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.message.contains("clientPort"), "{e}");
        let e = ZooCfg::parse_properties("\n\nextendedTypesEnabled=maybe").unwrap_err();
        assert_eq!(e.line, 3);
        let e = ZooCfg::parse_properties("4lw.commands.whitelist=nope").unwrap_err();
        assert_eq!(e.line, 1);
        let e = ZooCfg::parse_properties("just words").unwrap_err();
        assert_eq!(e.line, 1);
        let e = ZooCfg::parse_properties("superDigest=nocolon").unwrap_err();
        assert_eq!(e.line, 1);
        let e =
            ZooCfg::parse_properties("minSessionTimeout=9000\nmaxSessionTimeout=5000").unwrap_err();
        assert!(e.message.contains("exceeds"), "{e}");
        // -1 restores the tick-based default, as in ZooKeeper.
        let cfg = ZooCfg::parse_properties("minSessionTimeout=-1").unwrap();
        assert_eq!(cfg.server.min_session_timeout, None);
    }

    #[test]
    fn security_settings_never_fail_open() {
        for (text, what) in [
            ("secureClientPort=2281", "needs ssl.keyStore.location"),
            (
                "secureClientPortAddress=127.0.0.1",
                "without secureClientPort",
            ),
            ("client.secure=true", "client setting"),
            ("ssl.keyStore.location=/k.pem", "without secureClientPort"),
            ("ssl.keyStore.type=JKS", "PEM key and trust stores only"),
            (
                "ssl.trustStore.type=PKCS12",
                "PEM key and trust stores only",
            ),
            ("ssl.protocol=TLSv1.1", "not supported"),
            ("ssl.enabledProtocols=TLSv1.2,TLSv1", "not supported"),
            ("ssl.clientAuth=maybe", "expected none, want or need"),
            ("ssl.crl=true", "revocation"),
            ("ssl.ocsp=true", "revocation"),
            ("ssl.context.supplier.class=com.example.Ctx", "TLS setting"),
            ("ssl.authProvider=custom", "TLS setting"),
            ("ssl.sasl.whatever=1", "TLS setting"),
            ("portUnification=true", "one port"),
            (
                "authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider",
                "other than digest, ip and x509",
            ),
            ("authProvider.k=com.example.Kerberos", "other than digest"),
            ("quorum.auth.enableSasl=true", "SASL"),
            ("quorum.auth.kerberos.servicePrincipal=zk/host", "SASL"),
            ("saslMechanism=GSSAPI", "SASL"),
            ("sessionRequireClientSASLAuth=true", "SASL"),
            (
                "enforce.auth.enabled=true",
                "enforced client authentication",
            ),
            (
                "enforce.auth.schemes=digest",
                "enforced client authentication",
            ),
            (
                "requireClientAuthScheme=sasl",
                "enforced client authentication",
            ),
        ] {
            let e = ZooCfg::parse_properties(&format!("tickTime=500\n{text}\n")).expect_err(text);
            let key = text.split('=').next().unwrap_or_default();
            assert_eq!(e.line, 2, "{text}: {e}");
            assert!(e.message.contains(what), "{text}: {e}");
            if !what.contains("without secureClientPort") && !what.contains("needs") {
                assert!(e.message.starts_with(key), "{text}: {e}");
            }
            // The TOML form refuses the same keys.
            let (k, v) = text.split_once('=').unwrap_or_default();
            let toml = format!("\"{k}\" = \"{v}\"\n");
            assert!(ZooCfg::parse_toml(&toml).is_err(), "{toml}");
        }
        // The explicit off state of a switch asks for nothing; built-in providers and the
        // quorum TLS keys (no quorum in a standalone server) are accepted with a warning.
        for text in [
            "enforce.auth.enabled=false",
            "client.secure=no",
            "ssl.crl=false",
            "sslQuorum=true",
            "ssl.quorum.keyStore.location=/q.pem",
            "authProvider.1=org.apache.zookeeper.server.auth.X509AuthenticationProvider",
            "authProvider.2=org.apache.zookeeper.server.auth.DigestAuthenticationProvider",
        ] {
            let cfg = ZooCfg::parse_properties(text).expect(text);
            assert_eq!(cfg.warnings.len(), 1, "{text}: {:?}", cfg.warnings);
            assert!(cfg.server.tls.is_none(), "{text}");
        }
    }

    #[test]
    fn tls_keys_as_apache_reads_them() {
        let text = "\
clientPort=2181
secureClientPort=2281
ssl.keyStore.location=/etc/zk/server.pem
ssl.keyStore.type=PEM
ssl.keyStore.password=secret
ssl.trustStore.location=/etc/zk/ca.pem
ssl.trustStore.type=PEM
ssl.clientAuth=want
ssl.enabledProtocols=TLSv1.3,TLSv1.2
ssl.ciphersuites=TLS_AES_128_GCM_SHA256
ssl.hostnameVerification=false
X509AuthenticationProvider.superUser=CN=admin
";
        let cfg = ZooCfg::parse_properties(text).unwrap();
        let s = &cfg.server;
        assert_eq!(s.listen, "127.0.0.1:2181".parse().unwrap());
        assert_eq!(s.secure_listen, Some("127.0.0.1:2281".parse().unwrap()));
        let tls = s.tls.as_ref().unwrap();
        assert_eq!(tls.cert_chain, PathBuf::from("/etc/zk/server.pem"));
        assert_eq!(tls.key, tls.cert_chain);
        assert_eq!(tls.key_password.as_deref(), Some("secret"));
        assert_eq!(tls.trust, Some(PathBuf::from("/etc/zk/ca.pem")));
        assert_eq!(tls.client_auth, ClientAuth::Want);
        assert_eq!(tls.versions, vec![TlsVersion::Tls13, TlsVersion::Tls12]);
        assert_eq!(tls.cipher_suites, vec!["TLS_AES_128_GCM_SHA256"]);
        assert_eq!(s.x509_super_user.as_deref(), Some("CN=admin"));
        assert_eq!(cfg.warnings.len(), 1, "{:?}", cfg.warnings);
        // Apache's defaults: client certificates needed; one protocol from ssl.protocol.
        let cfg = ZooCfg::parse_properties(
            "secureClientPort=0\nsecureClientPortAddress=127.0.0.2\n\
             ssl.keyStore.location=/k.pem\nssl.protocol=TLSv1.2\n",
        )
        .unwrap();
        let tls = cfg.server.tls.as_ref().unwrap();
        assert_eq!(tls.client_auth, ClientAuth::Need);
        assert_eq!(tls.trust, None);
        assert_eq!(tls.versions, vec![TlsVersion::Tls12]);
        assert_eq!(
            cfg.server.secure_listen,
            Some("127.0.0.2:0".parse().unwrap())
        );
    }

    #[test]
    fn toml_form_reads_the_same_keys() {
        let text = "\
tickTime = 500
clientPort = 2999
extendedTypesEnabled = true
\"4lw.commands.whitelist\" = [\"srvr\", \"ruok\"]
superDigest = \"super:D/InIHSb7yEEbrWz8b9l71RjZJU=\"
initLimit = 5
";
        let cfg = ZooCfg::parse_toml(text).unwrap();
        assert_eq!(cfg.server.tick_time, Duration::from_millis(500));
        assert_eq!(cfg.server.listen.port(), 2999);
        assert!(cfg.server.extended_types);
        assert!(cfg.server.four_letter_words.allows("ruok"));
        assert_eq!(
            cfg.warnings,
            vec!["line 6: initLimit ignored (not used by zkit)"]
        );
        let e = ZooCfg::parse_toml("tickTime = 5\nclientPort = \"x\"\n").unwrap_err();
        assert_eq!(e.line, 2);
        let e = ZooCfg::parse_toml("tickTime = \n").unwrap_err();
        assert_eq!(e.line, 1);
        assert!(ZooCfg::parse_named(std::path::Path::new("z.toml"), "tickTime = 3").is_ok());
        assert!(ZooCfg::parse_named(std::path::Path::new("zoo.cfg"), "tickTime=3").is_ok());
    }
}
