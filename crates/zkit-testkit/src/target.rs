//! Test targets: the servers a suite runs each scenario on, [`targets`].
//!
//! - `zkit`: an embedded [`zkit_server::Server`] on port 0 (in memory, short session bounds, a
//!   fast container/TTL reaper), always there.
//! - `apache`: Apache ZooKeeper standalone, at `ZKIT_APACHE_ZK` ([`crate::apache_zk`]).
//! - `ensemble`: an Apache ZooKeeper ensemble, at `ZKIT_APACHE_ENSEMBLE` ([`apache_ensemble`];
//!   `scripts/test` starts a 3-member one). Shared by every test: a test that kills or pauses
//!   members starts its own [`crate::Ensemble`] instead.
//!
//! The Apache targets print a `SKIP` line when their variable is unset, and fail under `CI`.
//! `ZKIT_TARGETS=zkit,ensemble` (any of `zkit`, `apache`, `ensemble`) restricts the run while
//! iterating; a target left out that way is not reported.

use std::time::Duration;

/// The environment variable with the ensemble's connect string (`h1:p1,h2:p2,h3:p3`).
pub const APACHE_ENSEMBLE_ENV: &str = "ZKIT_APACHE_ENSEMBLE";
/// The environment variable restricting the targets (comma-separated names).
pub const TARGETS_ENV: &str = "ZKIT_TARGETS";

/// A kind of server under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetKind {
    /// Apache ZooKeeper standalone (`ZKIT_APACHE_ZK`).
    Apache,
    /// An Apache ZooKeeper ensemble (`ZKIT_APACHE_ENSEMBLE`).
    Ensemble,
    /// The embedded zkit server.
    Zkit,
}

impl TargetKind {
    /// Every kind, in the order [`targets`] returns them.
    pub const ALL: [TargetKind; 3] = [TargetKind::Apache, TargetKind::Ensemble, TargetKind::Zkit];

    /// The kind's name, as in `ZKIT_TARGETS` and in test output.
    pub fn name(self) -> &'static str {
        match self {
            TargetKind::Apache => "apache",
            TargetKind::Ensemble => "ensemble",
            TargetKind::Zkit => "zkit",
        }
    }

    /// Whether the kind is one of Apache's servers.
    pub fn is_apache(self) -> bool {
        matches!(self, TargetKind::Apache | TargetKind::Ensemble)
    }
}

/// One server under test.
#[derive(Debug)]
pub struct Target {
    /// `apache`, `ensemble` or `zkit` (the kind's name).
    pub name: &'static str,
    /// Which server it is.
    pub kind: TargetKind,
    /// The connect string: `host:port`, or `h1:p1,h2:p2,…` for an ensemble.
    pub addr: String,
    /// The server's smallest session timeout: expiry tests must wait at least this long.
    pub min_session_timeout: Duration,
    /// The embedded server (kept running while the target lives); `None` for Apache's.
    pub server: Option<zkit_server::Server>,
}

/// The ensemble to run ensemble-side tests against, from `ZKIT_APACHE_ENSEMBLE`; `None` after
/// printing `SKIP ensemble: ZKIT_APACHE_ENSEMBLE not set` when unset.
///
/// # Panics
/// When the variable is unset and `CI` is set (as [`crate::apache_zk`]).
#[track_caller]
pub fn apache_ensemble() -> Option<String> {
    crate::server_from_env(
        APACHE_ENSEMBLE_ENV,
        "ensemble",
        "ensemble-side",
        "an Apache ZooKeeper ensemble",
    )
}

/// The kinds `ZKIT_TARGETS` selects (all when unset or empty).
///
/// # Panics
/// On a name that is not a target's, so that a typo cannot silently run nothing.
pub fn selected() -> Vec<TargetKind> {
    parse_selection(std::env::var(TARGETS_ENV).ok().as_deref()).unwrap_or_else(|bad| {
        panic!("{TARGETS_ENV}: unknown target {bad:?} (zkit, apache, ensemble)")
    })
}

fn parse_selection(value: Option<&str>) -> Result<Vec<TargetKind>, String> {
    let Some(value) = value.map(str::trim).filter(|v| !v.is_empty()) else {
        return Ok(TargetKind::ALL.to_vec());
    };
    let mut kinds = Vec::new();
    for name in value.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let kind = TargetKind::ALL
            .into_iter()
            .find(|k| k.name() == name)
            .ok_or_else(|| name.to_owned())?;
        if !kinds.contains(&kind) {
            kinds.push(kind);
        }
    }
    // Keep the canonical order whatever order the variable lists them in.
    kinds.sort_by_key(|k| TargetKind::ALL.iter().position(|a| a == k));
    Ok(kinds)
}

/// The embedded zkit server's configuration for tests: in memory, port 0, tick 250 ms, minimum
/// session timeout 1 s (Apache's with `scripts/apache-zk`'s tick of 500 ms), the container/TTL
/// reaper every 200 ms.
pub fn embedded_config() -> zkit_server::ServerConfig {
    let mut config = zkit_server::ServerConfig::ephemeral();
    config.tick_time = Duration::from_millis(250);
    config.min_session_timeout = Some(Duration::from_millis(1000));
    config.container_check_interval = Duration::from_millis(200);
    config
}

/// The servers every recipe test runs against, restricted by `ZKIT_TARGETS`: Apache standalone
/// and the ensemble when configured (else a `SKIP` line; a failure under `CI`), and a fresh
/// embedded zkit server.
///
/// # Panics
/// When the embedded server does not start, or as [`crate::apache_zk`] and
/// [`apache_ensemble`] do.
pub async fn targets() -> Vec<Target> {
    let mut targets = Vec::new();
    for kind in selected() {
        let addr = match kind {
            TargetKind::Apache => crate::apache_zk(),
            TargetKind::Ensemble => apache_ensemble(),
            TargetKind::Zkit => {
                let server = zkit_server::Server::start(embedded_config())
                    .await
                    .expect("embedded zkit server starts");
                targets.push(Target {
                    name: kind.name(),
                    kind,
                    addr: server.addr().to_string(),
                    min_session_timeout: Duration::from_millis(1000),
                    server: Some(server),
                });
                continue;
            }
        };
        if let Some(addr) = addr {
            targets.push(Target {
                name: kind.name(),
                kind,
                addr,
                // scripts/apache-zk: tickTime 500 → minimum 2 × tick = 1 s.
                min_session_timeout: Duration::from_millis(1000),
                server: None,
            });
        }
    }
    targets
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selection_defaults_to_all_in_order() {
        assert_eq!(parse_selection(None), Ok(TargetKind::ALL.to_vec()));
        assert_eq!(parse_selection(Some(" ")), Ok(TargetKind::ALL.to_vec()));
        assert_eq!(
            parse_selection(Some("zkit, ensemble,zkit")),
            Ok(vec![TargetKind::Ensemble, TargetKind::Zkit])
        );
        assert_eq!(parse_selection(Some("zkit,apach")), Err("apach".to_owned()));
    }
}
