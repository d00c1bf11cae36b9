//! `--auth user:password` and `create --acl`: a node created for an authenticated user is
//! readable with the same credentials and refused (NoAuth) without them.

mod common;

use std::time::Duration;

use zkit_server::{Server, ServerConfig};

const WAIT: Duration = Duration::from_secs(30);

async fn zkit(server: &str, args: &[&str]) -> (i32, String, String) {
    common::zkit_at(WAIT, server, args).await
}

#[tokio::test]
async fn auth_and_acl_flags() {
    let server = Server::start(ServerConfig::ephemeral()).await.unwrap();
    let s = server.addr().to_string();
    let (code, _, err) = zkit(
        &s,
        &[
            "create",
            "/mine",
            "secret",
            "--auth",
            "alice:pw",
            "--acl",
            "auth::cdrwa",
        ],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = zkit(&s, &["get", "/mine", "--auth", "alice:pw"]).await;
    assert_eq!((code, out.as_str()), (0, "secret\n"), "{err}");
    let (code, _, err) = zkit(&s, &["get", "/mine"]).await;
    assert_ne!(code, 0);
    assert!(err.contains("NoAuth"), "{err}");
    let (code, _, err) = zkit(&s, &["get", "/mine", "--auth", "bob:pw"]).await;
    assert_ne!(code, 0);
    assert!(err.contains("NoAuth"), "{err}");
    // A world-readable entry beside it opens reads only.
    let (code, _, err) = zkit(
        &s,
        &[
            "create",
            "/shared",
            "x",
            "--auth",
            "alice:pw",
            "--acl",
            "auth::cdrwa,world:anyone:r",
        ],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(zkit(&s, &["get", "/shared"]).await.0, 0);
    let (code, _, err) = zkit(&s, &["set", "/shared", "y"]).await;
    assert!(code != 0 && err.contains("NoAuth"), "{err}");
    let (code, _, err) = zkit(&s, &["create", "/bad", "--acl", "world:anyone:z"]).await;
    assert!(code != 0 && err.contains("unknown permission"), "{err}");
    server.stop().await;
}
