//! The connection flags every client command shares: `--auth` and a chroot in `--server` on
//! recipe commands as on node commands, and the errors when no session can be had (nothing
//! listening; a server refusing the connection over its per-address limit).

mod common;

use std::time::Duration;

use zkit_server::{Server, ServerConfig};

const WAIT: Duration = Duration::from_secs(30);

/// Runs `zkit ARGS` (no ZKIT_* environment) and returns (exit code, stdout, stderr).
async fn zkit(args: &[&str]) -> (i32, String, String) {
    common::zkit_within(WAIT, args).await
}

/// A loopback port nothing listens on (bound, then released).
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr").port()
}

#[tokio::test]
async fn unreachable_servers_are_named_with_what_each_did() {
    let (a, b) = (closed_port(), closed_port());
    let hosts = format!("127.0.0.1:{a},127.0.0.1:{b}");
    for args in [
        vec!["ls", "/", "--server", &hosts],
        vec![
            "config",
            "get",
            "k",
            "--server",
            &hosts,
            "--session-timeout",
            "1s",
        ],
    ] {
        let (code, _, err) = zkit(&args).await;
        assert_ne!(code, 0, "{args:?}");
        assert!(err.contains("its 2 hosts for "), "{args:?}: {err}");
        for port in [a, b] {
            assert!(
                err.contains(&format!(
                    "127.0.0.1:{port}: cannot connect (Connection refused"
                )),
                "{args:?}: {err}"
            );
        }
    }
}

#[tokio::test]
async fn a_server_over_its_connection_limit_is_named_as_the_cause() {
    let mut config = ServerConfig::ephemeral();
    config.limits.max_client_cnxns = 1;
    let server = Server::start(config).await.unwrap();
    let s = server.addr().to_string();
    // The one connection this address may have.
    let holder = zkit_client::Client::connect(&s).await.unwrap();
    for args in [
        vec!["ls", "/", "--server", &s],
        vec![
            "lock",
            "/l",
            "--server",
            &s,
            "--session-timeout",
            "1s",
            "--",
            "true",
        ],
    ] {
        let (code, _, err) = zkit(&args).await;
        assert_ne!(code, 0, "{args:?}");
        assert!(
            err.contains(
                "the server closed the connection during the handshake \
                          (too many connections from this address?)"
            ),
            "{args:?}: {err}"
        );
    }
    holder.close().await;
    server.stop().await;
}

#[tokio::test]
async fn auth_and_chroot_reach_recipe_commands() {
    let server = Server::start(ServerConfig::ephemeral()).await.unwrap();
    let s = server.addr().to_string();
    let (code, _, err) = zkit(&["create", "/app", "--server", &s]).await;
    assert_eq!(code, 0, "{err}");
    // A chroot in --server: `config set` writes /app/config/k.
    let chrooted = format!("{s}/app");
    let (code, _, err) = zkit(&["config", "set", "k", "v1", "--server", &chrooted]).await;
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = zkit(&["get", "/app/config/k", "--server", &s]).await;
    assert_eq!((code, out.as_str()), (0, "v1\n"), "{err}");
    // A node only alice may read: `config get --auth` reads it, without --auth it is refused.
    let (code, _, err) = zkit(&[
        "create",
        "/config/secret",
        "s3",
        "-p",
        "--auth",
        "alice:pw",
        "--acl",
        "auth::cdrwa",
        "--server",
        &s,
    ])
    .await;
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = zkit(&[
        "config", "get", "secret", "--auth", "alice:pw", "--server", &s,
    ])
    .await;
    assert_eq!((code, out.trim()), (0, "s3"), "{err}");
    let (code, _, err) = zkit(&["config", "get", "secret", "--server", &s]).await;
    assert_ne!(code, 0);
    assert!(
        err.contains("NoAuth") || err.contains("not authorized"),
        "{err}"
    );
    server.stop().await;
}

#[tokio::test]
async fn tls_flags_name_the_file_they_cannot_read() {
    let (code, _, err) = zkit(&[
        "ls",
        "/",
        "--server",
        "127.0.0.1:1",
        "--tls-ca",
        "/nonexistent/ca.pem",
    ])
    .await;
    assert_ne!(code, 0);
    assert!(err.contains("/nonexistent/ca.pem"), "{err}");
    // A certificate without its key is refused by the parser.
    let (code, _, err) = zkit(&["ls", "/", "--tls-ca", "ca", "--tls-cert", "c"]).await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--tls-key"), "{err}");
}
