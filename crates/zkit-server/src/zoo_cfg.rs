//! Reads Apache ZooKeeper's `zoo.cfg` (Java properties: `key=value`, `#`/`!` comments) — or the
//! same keys as a flat TOML table — into a [`ServerConfig`] plus the storage settings.
//!
//! The keys that apply to a standalone server are read (`tickTime`, `dataDir`, `dataLogDir`,
//! `clientPort`, `clientPortAddress`, `maxClientCnxns`, `minSessionTimeout`,
//! `maxSessionTimeout`, `extendedTypesEnabled`, `4lw.commands.whitelist`,
//! `znode.container.checkIntervalMs`, `jute.maxbuffer`, `superDigest`, `snapCount`,
//! `autopurge.snapRetainCount`, `autopurge.purgeInterval`, `forceSync`, `admin.enableServer`,
//! `admin.serverAddress`, `admin.serverPort`, and zkit's own `logLevel`, a `tracing` filter
//! re-read on SIGHUP by `zkit serve`). Any other key is kept as a warning, not an error,
//! so an existing ensemble's file loads; a value that does not parse is an error naming the line.
//!
//! Security settings never fail open: a key that asks for TLS, SASL, an authentication provider
//! or enforced authentication (`secureClientPort`, `ssl.*`, `authProvider.*`, `sasl*`,
//! `quorum.auth.*`, `enforce.auth.*`, ...) is an error naming it, because zkit does not
//! implement it and would otherwise serve in plaintext, unauthenticated. Only the explicit off
//! state of a switch (`sslQuorum=false`, `enforce.auth.enabled=false`, ...) is accepted.
//! Pure: the caller reads the file and prints the warnings.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use crate::config::{FourLetterWhitelist, FsyncMode, ServerConfig};

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
    /// `autopurge.snapRetainCount`.
    pub autopurge_snap_retain_count: Option<u32>,
    /// `autopurge.purgeInterval` in hours (0 = off).
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

/// Keys of a clustered or Java-specific setup: accepted with a warning.
const IGNORED_PREFIXES: [&str; 4] = ["server.", "group.", "weight.", "quorum."];

/// Switches whose explicit off state (`false`/`no`) is harmless: nothing is asked for.
const SECURITY_SWITCHES: [&str; 8] = [
    "sslQuorum",
    "portUnification",
    "client.secure",
    "quorum.auth.enableSasl",
    "quorum.auth.learnerRequireSasl",
    "quorum.auth.serverRequireSasl",
    "enforce.auth.enabled",
    "sessionRequireClientSASLAuth",
];

/// Why `key=value` asks for a security feature that zkit does not implement, if it does.
fn unsupported_security(key: &str, value: &str) -> Option<&'static str> {
    let off = matches!(value.to_ascii_lowercase().as_str(), "false" | "no");
    if off && SECURITY_SWITCHES.contains(&key) {
        return None;
    }
    let lower = key.to_ascii_lowercase();
    if key == "secureClientPort" || key == "secureClientPortAddress" || key == "client.secure" {
        Some("TLS client connections")
    } else if lower.starts_with("ssl.") || key == "sslQuorum" || key == "portUnification" {
        Some("TLS")
    } else if lower.starts_with("authprovider.") {
        Some("pluggable authentication providers")
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
                "autopurge.snapRetainCount" => {
                    cfg.autopurge_snap_retain_count = Some(num(line, &key, v)?);
                }
                "autopurge.purgeInterval" => {
                    cfg.autopurge_purge_interval_hours = Some(num(line, &key, v)?);
                }
                "admin.enableServer" => admin_enabled = boolean(line, &key, v)?,
                "admin.serverPort" => admin_port = Some(num(line, &key, v)?),
                "admin.serverAddress" => admin_host = Some(ip(line, &key, v)?),
                other if unsupported_security(other, v).is_some() => {
                    let what = unsupported_security(other, v).unwrap_or("this setting");
                    return Err(err(
                        line,
                        format!(
                            "{other}: zkit does not implement {what}; refusing to start rather \
                             than serve without it (remove the key to run without it)"
                        ),
                    ));
                }
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
autopurge.snapRetainCount=3
autopurge.purgeInterval=1
initLimit=5
server.1=zk1:2888:3888
admin.serverPort=8081
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
        assert_eq!(cfg.autopurge_snap_retain_count, Some(3));
        assert_eq!(cfg.autopurge_purge_interval_hours, Some(1));
        assert_eq!(cfg.warnings.len(), 2, "{:?}", cfg.warnings);
        assert!(cfg.warnings[0].starts_with("line 17: initLimit"));
        assert!(cfg.warnings[1].starts_with("line 18: server.1"));
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
            ("secureClientPort=2281", "TLS client connections"),
            (
                "secureClientPortAddress=127.0.0.1",
                "TLS client connections",
            ),
            ("client.secure=true", "TLS client connections"),
            ("ssl.keyStore.location=/k.pem", "TLS"),
            ("ssl.quorum.trustStore.location=/t.pem", "TLS"),
            ("sslQuorum=true", "TLS"),
            (
                "authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider",
                "authentication providers",
            ),
            (
                "authProvider.x509=org.apache.zookeeper.server.auth.X509AuthenticationProvider",
                "authentication providers",
            ),
            ("quorum.auth.enableSasl=true", "SASL"),
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
            assert!(e.message.starts_with(key), "{text}: {e}");
            assert!(e.message.contains(what), "{text}: {e}");
            // The TOML form refuses the same keys.
            let (k, v) = text.split_once('=').unwrap_or_default();
            let toml = format!("\"{k}\" = \"{v}\"\n");
            assert!(ZooCfg::parse_toml(&toml).is_err(), "{toml}");
        }
        // The explicit off state of a switch asks for nothing.
        for text in [
            "sslQuorum=false",
            "enforce.auth.enabled=false",
            "client.secure=no",
        ] {
            let cfg = ZooCfg::parse_properties(text).expect(text);
            assert_eq!(cfg.warnings.len(), 1, "{text}: {:?}", cfg.warnings);
        }
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
