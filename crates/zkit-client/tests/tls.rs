//! TLS against Apache ZooKeeper 3.8's `secureClientPort` (Netty, PEM key and trust stores,
//! client certificates required), with certificates made by the `openssl` CLI in a temp dir.
//! Runs where the Apache-side tests run (`ZKIT_APACHE_ZK` set), on a private TLS server.
#![cfg(feature = "tls")]

mod common;

use std::path::Path;
use std::time::Duration;

use common::{within, PERSISTENT};
use tempfile::TempDir;
use zkit_client::{Client, Error, TlsOptions};
use zkit_testkit::pki::{issue, make_ca, make_ca_and_server, read, TlsZooKeeper};

fn options(dir: &Path, client: &str) -> TlsOptions {
    TlsOptions::new()
        .with_pem_ca_certs(&read(dir, "ca.crt"))
        .unwrap()
        .with_pem_identity(
            &read(dir, &format!("{client}.crt")),
            &read(dir, &format!("{client}.key")),
        )
        .unwrap()
}

async fn tls_connect(options: TlsOptions, cluster: &str) -> zkit_client::Result<Client> {
    Client::connector()
        .with_tls(options)
        .with_fail_eagerly()
        .with_session_timeout(Duration::from_secs(10))
        .secure_connect(cluster)
        .await
}

#[tokio::test]
async fn tls_against_apache_secure_client_port() {
    if zkit_testkit::apache_zk().is_none() {
        return;
    }
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    make_ca_and_server(d);
    issue(d, "ca", "client", "/CN=client", "DNS:client");
    make_ca(d, "rogue");
    issue(d, "rogue", "intruder", "/CN=intruder", "DNS:client");
    // ZooKeeper, jute and Netty (the TLS server is Netty's), as Debian installs them.
    let classpath = zkit_testkit::curator_classpath().expect("ZooKeeper jars in /usr/share/java");
    let zk = TlsZooKeeper::start(d, &classpath);
    let cluster = format!("127.0.0.1:{}", zk.port);

    // Up once a TLS session works (the JVM takes a few seconds).
    let client = zk
        .first_connection(|| tls_connect(options(d, "client"), &cluster))
        .await;
    let (stat, _) = within(client.create("/tls", b"secret", &PERSISTENT))
        .await
        .unwrap();
    assert_eq!(
        client.get_data("/tls").await.unwrap(),
        (b"secret".to_vec(), stat)
    );
    let (_, _, watcher) = client.get_and_watch_data("/tls").await.unwrap();
    client.set_data("/tls", b"2", None).await.unwrap();
    assert_eq!(within(watcher.changed()).await.path, "/tls");
    let users = client.list_auth_users().await.unwrap();
    assert!(users.iter().any(|u| u.scheme() == "x509"), "{users:?}");

    // By name: the certificate is for localhost.
    let by_name = tls_connect(options(d, "client"), &format!("localhost:{}", zk.port))
        .await
        .unwrap();
    by_name.sync("/").await.unwrap();
    // A name the certificate is not for: refused, unless verification is off.
    let wrong = options(d, "client").with_server_name("zookeeper.invalid");
    assert_eq!(
        tls_connect(wrong.clone(), &cluster).await.err(),
        Some(Error::NoHosts)
    );
    tls_connect(wrong.with_no_hostname_verification(), &cluster)
        .await
        .unwrap()
        .sync("/")
        .await
        .unwrap();
    // A server signed by a CA we do not trust: refused.
    let untrusting = TlsOptions::new()
        .with_pem_ca_certs(&read(d, "rogue.crt"))
        .unwrap();
    assert_eq!(
        tls_connect(untrusting, &cluster).await.err(),
        Some(Error::NoHosts)
    );
    // The server requires a client certificate from its CA.
    let anonymous = TlsOptions::new()
        .with_pem_ca_certs(&read(d, "ca.crt"))
        .unwrap();
    assert!(tls_connect(anonymous, &cluster).await.is_err());
    assert!(tls_connect(options(d, "intruder"), &cluster).await.is_err());
    // A plain connection to the TLS port does not get a session.
    let plain = Client::connector()
        .with_fail_eagerly()
        .connect(&cluster)
        .await;
    assert!(plain.is_err());
    // Bad PEM is refused up front.
    assert!(TlsOptions::new().with_pem_ca_certs("not pem").is_err());
    assert!(TlsOptions::new()
        .with_pem_identity(&read(d, "client.crt"), "no key")
        .is_err());
    assert!(matches!(
        Client::connector().secure_connect(&cluster).await,
        Err(Error::BadArguments(_))
    ));
    drop(zk);
}
