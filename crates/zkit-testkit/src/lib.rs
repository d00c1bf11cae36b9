//! Helpers for zkit's own tests and benchmarks (`publish = false`): a dependency of the test
//! suites and of `zkit-bench` only, never of the library, the server or the CLI.
//!
//! # Layout
//! - this file: where the Apache ZooKeeper under test is ([`apache_zk`]), fresh znode paths
//!   so that many tests can share one server ([`unique_path`]), and a bounded wait for an
//!   effect that happens in the background ([`eventually`]), and a free loopback port
//!   ([`free_port`]).
//! - [`fault_proxy`]: [`FaultProxy`], a loopback TCP proxy that drops connections or black-holes
//!   traffic, to produce real disconnects and real session expiry.
//! - [`pki`]: a CA and certificates made by the `openssl` CLI, for the TLS tests, and
//!   [`pki::TlsZooKeeper`], Apache ZooKeeper serving TLS on them.
//! - [`process`]: finding and running the built `zkit` binary, and `kill -9` of child processes.
//! - [`curator_classpath`]: Debian's Curator jars, for Java programs compiled by tests and by
//!   `zkit-bench lock-compare`.
//! - [`target`]: the three servers recipe suites run on ([`targets`]: the embedded zkit server,
//!   Apache standalone, an Apache ensemble), restricted with `ZKIT_TARGETS`.
//! - [`ensemble`]: [`Ensemble`], a private Apache ZooKeeper ensemble with kill/pause/restart of
//!   members, for fault tests.
//! - [`tmpfs`]: [`Tmpfs`], a small tmpfs mounted for a real disk-full (root only).
//!
//! Apache ZooKeeper is found through the environment variable `ZKIT_APACHE_ZK=host:port`, which
//! `scripts/test` sets after starting a private server. Without it, Apache-side tests print a
//! `SKIP` line and pass, so `cargo test` works on a machine without Java; under CI (env `CI`
//! set) a missing server is a failure instead, so a broken setup cannot pass silently.
#![deny(missing_docs)]

pub mod ensemble;
pub mod fault_proxy;
pub mod pki;
pub mod process;
pub mod target;
pub mod tmpfs;

pub use ensemble::{apache_installed, ensemble_available, Ensemble};
pub use fault_proxy::FaultProxy;
pub use process::{kill9, tied_command, zkit_bin, ChildGuard};
pub use target::{apache_ensemble, targets, Target, TargetKind};
pub use tmpfs::Tmpfs;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The environment variable holding the Apache ZooKeeper address (`host:port`).
pub const APACHE_ZK_ENV: &str = "ZKIT_APACHE_ZK";

/// The Apache ZooKeeper to run Apache-side tests against, from `ZKIT_APACHE_ZK`.
///
/// Returns `None` after printing `SKIP apache: ZKIT_APACHE_ZK not set` to stderr when the
/// variable is unset or empty; the caller then returns early from the test.
///
/// # Panics
/// When the variable is unset and the environment variable `CI` is set: CI must run the
/// Apache-side tests, and a skip there would hide a broken setup.
#[track_caller]
pub fn apache_zk() -> Option<String> {
    server_from_env(APACHE_ZK_ENV, "apache", "Apache-side", "Apache ZooKeeper")
}

/// The address in the environment variable `var`; `None` after printing `SKIP skip: VAR not
/// set` when it is unset or empty.
///
/// # Panics
/// When it is unset and `CI` is set: CI must run the `side` tests (scripts/test starts
/// `started` for them).
#[track_caller]
pub(crate) fn server_from_env(var: &str, skip: &str, side: &str, started: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(addr) if !addr.trim().is_empty() => Some(addr.trim().to_owned()),
        _ if std::env::var_os("CI").is_some() => panic!(
            "{var} is not set but CI is: {side} tests must run in CI \
             (run the tests through scripts/test, which starts {started})"
        ),
        _ => {
            eprintln!("SKIP {skip}: {var} not set");
            None
        }
    }
}

/// A fresh absolute znode path directly under `/`, unique across tests, processes and runs.
///
/// The result looks like `/{prefix}-{pid}-{n}-{uuid}`; `prefix` is sanitized so the result is
/// always a valid single-level path (`/` and characters ZooKeeper rejects become `_`). Tests
/// sharing one server use it as their private root, so they never see each other's nodes.
pub fn unique_path(prefix: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let clean: String = prefix
        .trim_start_matches('/')
        .chars()
        .map(|c| {
            // ZooKeeper rejects \u0000-\u001f, \u007f-\u009f, \ud800-\uf8ff and \ufff0-\uffff in
            // names (PathUtils.validatePath); '/' would add a level whose parent may not exist.
            if c == '/'
                || c.is_control()
                || ('\u{e000}'..='\u{f8ff}').contains(&c)
                || c >= '\u{fff0}'
            {
                '_'
            } else {
                c
            }
        })
        .collect();
    let clean = if clean.is_empty() || clean == "." || clean == ".." {
        "t".to_owned()
    } else {
        clean
    };
    format!(
        "/{clean}-{}-{n}-{}",
        std::process::id(),
        uuid::Uuid::new_v4().simple()
    )
}

/// Waits (bounded, checking every 50 ms) until `cond` holds: for effects that happen in the
/// background by design (orphan cleanup, TTL reaping, a collector's next round), not to paper
/// over races.
///
/// # Panics
/// When `cond` still does not hold after `limit`; the message names `what`.
pub async fn eventually<F, Fut>(what: &str, limit: Duration, mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if cond().await {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {limit:?} waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A TCP port on 127.0.0.1 that was free a moment ago (bound, read and released), for a
/// process the test starts with an explicit port.
///
/// # Panics
/// When no loopback port can be bound.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// Debian's Curator, ZooKeeper and their dependencies in /usr/share/java, as a Java classpath;
/// `None` when Curator or ZooKeeper is not installed (`apt-get install libcurator-recipes-java`).
/// Optional jars that are missing are left out.
pub fn curator_classpath() -> Option<String> {
    let dir = std::path::Path::new("/usr/share/java");
    let wanted = [
        "curator-framework.jar",
        "curator-client.jar",
        "curator-recipes.jar",
        "zookeeper.jar",
        "zookeeper-jute.jar",
        "guava.jar",
        "slf4j-api.jar",
        "slf4j-nop.jar",
        "netty-handler.jar",
        "netty-transport.jar",
        "netty-common.jar",
        "netty-buffer.jar",
        "netty-codec.jar",
        "netty-resolver.jar",
        "netty-transport-native-epoll.jar",
        "netty-transport-native-unix-common.jar",
    ];
    let mut parts = Vec::new();
    for jar in wanted {
        let path = dir.join(jar);
        if path.is_file() {
            parts.push(path.display().to_string());
        } else if jar.starts_with("curator") || jar == "zookeeper.jar" {
            return None;
        }
    }
    Some(parts.join(":"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unique_paths_differ_and_are_single_level() {
        let a = unique_path("lock");
        let b = unique_path("lock");
        assert_ne!(a, b);
        assert!(a.starts_with("/lock-"), "{a}");
        assert_eq!(a.matches('/').count(), 1, "{a}");
    }

    #[test]
    fn unique_path_sanitizes_prefix() {
        let p = unique_path("/a/b\u{0}c");
        assert!(p.starts_with("/a_b_c-"), "{p}");
        assert_eq!(p.matches('/').count(), 1, "{p}");
        for odd in ["", "/", ".", ".."] {
            let p = unique_path(odd);
            assert!(p.starts_with("/t-"), "{odd:?} gave {p}");
        }
    }
}
