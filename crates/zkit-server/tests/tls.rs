//! The secure client port: TLS beside the plain port, client certificates (`ssl.clientAuth`
//! need / want), the `x509` identity and ACL scheme, a plaintext client on the TLS port refused
//! without harming anyone, and key material that cannot be used refusing to start.
//!
//! Certificates are made in a temp dir by the `openssl` CLI. The `x509` id is compared with
//! the one Apache ZooKeeper 3.8 computes for the same certificate where the Apache-side tests
//! run (`ZKIT_APACHE_ZK` set, as under CI).
#![cfg(feature = "tls")]

mod common;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use zkit_client::{Acl, Acls, AuthId, Client, CreateMode, Error, Permission, TlsOptions};
use zkit_server::{ClientAuth, Server, ServerConfig, TlsConfig};
use zkit_testkit::pki::{encrypted_key, issue, make_ca, make_ca_and_server, read, TlsZooKeeper};

const WAIT: Duration = Duration::from_secs(20);

/// The subject with every case Java's RFC 2253 writer treats specially: an escaped comma and
/// plus, a multi-valued RDN, an attribute without an RFC 2253 keyword (hex form).
const TRICKY_SUBJECT: &str =
    "/C=US/O=Acme, Inc./OU=zk\\+it/CN=alice+UID=u1/emailAddress=alice@example.com";
/// The x509 id of [`TRICKY_SUBJECT`], as Apache 3.8 on Java 17 reports it (checked against a
/// live Apache in `x509_id_is_what_apache_computes`).
const TRICKY_ID: &str = "1.2.840.113549.1.9.1=#1611616c696365406578616d706c652e636f6d,\
                         CN=alice+UID=u1,OU=zk\\+it,O=Acme\\, Inc.,C=US";

struct Pki {
    dir: tempfile::TempDir,
}

impl Pki {
    /// A CA with a server (for localhost and 127.0.0.1), clients `alice` (tricky subject) and
    /// `bob`; a second, untrusted CA with `mallory`.
    fn new() -> Pki {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        make_ca_and_server(d);
        issue(d, "ca", "alice", TRICKY_SUBJECT, "DNS:alice");
        issue(d, "ca", "bob", "/O=zkit/CN=bob", "DNS:bob");
        make_ca(d, "rogue");
        issue(d, "rogue", "mallory", "/CN=alice", "DNS:alice");
        Pki { dir }
    }

    fn path(&self, file: &str) -> PathBuf {
        self.dir.path().join(file)
    }

    fn read(&self, file: &str) -> String {
        read(self.dir.path(), file)
    }

    /// The server's TLS settings as Apache's zoo.cfg gives them: one PEM key store file.
    fn server_tls(&self, client_auth: ClientAuth) -> TlsConfig {
        let mut tls = TlsConfig::new(
            self.path("server.pem"),
            self.path("server.pem"),
            Some(self.path("ca.crt")),
        );
        tls.client_auth = client_auth;
        tls
    }

    /// TLS options of a client presenting `who`'s certificate (`None`: no certificate).
    fn client(&self, who: Option<&str>) -> TlsOptions {
        let options = TlsOptions::new()
            .with_pem_ca_certs(&self.read("ca.crt"))
            .unwrap();
        match who {
            None => options,
            Some(who) => options
                .with_pem_identity(
                    &self.read(&format!("{who}.crt")),
                    &self.read(&format!("{who}.key")),
                )
                .unwrap(),
        }
    }
}

async fn tls_server(pki: &Pki, client_auth: ClientAuth) -> Server {
    let config = ServerConfig {
        secure_listen: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
        tls: Some(pki.server_tls(client_auth)),
        ..ServerConfig::ephemeral()
    };
    Server::start(config).await.expect("start the TLS server")
}

async fn tls_connect(options: TlsOptions, addr: SocketAddr) -> zkit_client::Result<Client> {
    tokio::time::timeout(
        WAIT,
        Client::connector()
            .with_tls(options)
            .with_fail_eagerly()
            .with_session_timeout(Duration::from_secs(10))
            .secure_connect(&addr.to_string()),
    )
    .await
    .expect("TLS connect finished in time")
}

async fn x509_ids(client: &Client) -> Vec<String> {
    let users = client.list_auth_users().await.unwrap();
    users
        .iter()
        .filter(|u| u.scheme() == "x509")
        .map(|u| u.user().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_beside_plain_with_x509_acls() {
    let pki = Pki::new();
    let server = tls_server(&pki, ClientAuth::Need).await;
    let secure = server.secure_addr().expect("a secure port");
    assert_ne!(secure, server.addr());

    let alice = tls_connect(pki.client(Some("alice")), secure)
        .await
        .unwrap();
    assert_eq!(x509_ids(&alice).await, vec![TRICKY_ID.to_string()]);
    let plain = common::client(server.addr()).await;
    assert!(x509_ids(&plain).await.is_empty());

    // An x509 ACL: only alice's certificate may read.
    let only_alice = [Acl::new(Permission::ALL, AuthId::new("x509", TRICKY_ID))];
    alice
        .create(
            "/alice",
            b"hers",
            &CreateMode::Persistent.with_acls(Acls::new(&only_alice)),
        )
        .await
        .unwrap();
    assert_eq!(alice.get_data("/alice").await.unwrap().0, b"hers");
    assert_eq!(plain.get_data("/alice").await.err(), Some(Error::NoAuth));
    let bob = tls_connect(pki.client(Some("bob")), secure).await.unwrap();
    assert_eq!(x509_ids(&bob).await, vec!["CN=bob,O=zkit".to_string()]);
    assert_eq!(bob.get_data("/alice").await.err(), Some(Error::NoAuth));
    // `auth` expands to the certificate's id (x509 is an authenticated scheme, ip is not).
    bob.create(
        "/bob",
        b"",
        &CreateMode::Persistent.with_acls(Acls::creator_all()),
    )
    .await
    .unwrap();
    let (acl, _) = bob.get_acl("/bob").await.unwrap();
    assert_eq!(
        acl,
        vec![Acl::new(
            Permission::ALL,
            AuthId::new("x509", "CN=bob,O=zkit")
        )]
    );
    assert_eq!(alice.get_data("/bob").await.err(), Some(Error::NoAuth));
    // An x509 auth packet succeeds on a connection that presented a certificate, and fails
    // (ending the session) on one that did not.
    alice.auth("x509", b"").await.unwrap();
    let doomed = common::client(server.addr()).await;
    assert_eq!(
        doomed.auth("x509", b"").await.err(),
        Some(Error::AuthFailed)
    );

    // A plaintext client on the TLS port gets no ZooKeeper answer, only a closed socket.
    let mut raw = tokio::net::TcpStream::connect(secure).await.unwrap();
    let mut handshake = bytes::BytesMut::new();
    zkit_proto::frame::encode_frame(&mut handshake, |b| {
        zkit_proto::Record::encode(&common::new_session_request(), b)
    });
    raw.write_all(&handshake).await.unwrap();
    let mut got = Vec::new();
    let _ = tokio::time::timeout(WAIT, raw.read_to_end(&mut got))
        .await
        .expect("the TLS port closed the plaintext client in time");
    // At most a TLS alert record (content type 21), never a ConnectResponse.
    assert!(
        got.is_empty() || got[0] == 21,
        "plaintext client got {got:?}"
    );
    // Nobody else noticed.
    alice.sync("/").await.unwrap();
    assert_eq!(alice.get_data("/alice").await.unwrap().0, b"hers");
    plain.sync("/").await.unwrap();

    // Refused during the handshake: no certificate, or one from a CA the server does not trust.
    assert!(tls_connect(pki.client(None), secure).await.is_err());
    assert!(tls_connect(pki.client(Some("mallory")), secure)
        .await
        .is_err());
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn want_serves_clients_without_a_certificate() {
    let pki = Pki::new();
    let server = tls_server(&pki, ClientAuth::Want).await;
    let secure = server.secure_addr().unwrap();
    let anonymous = tls_connect(pki.client(None), secure).await.unwrap();
    assert!(x509_ids(&anonymous).await.is_empty());
    let bob = tls_connect(pki.client(Some("bob")), secure).await.unwrap();
    assert_eq!(x509_ids(&bob).await, vec!["CN=bob,O=zkit".to_string()]);
    // A certificate that does not verify is still refused.
    assert!(tls_connect(pki.client(Some("mallory")), secure)
        .await
        .is_err());
    // With none, no certificate is asked for, so none is reported.
    server.stop().await;
    let server = tls_server(&pki, ClientAuth::None).await;
    let bob = tls_connect(pki.client(Some("bob")), server.secure_addr().unwrap())
        .await
        .unwrap();
    assert!(x509_ids(&bob).await.is_empty());
    server.stop().await;
}

#[tokio::test]
async fn unusable_tls_settings_refuse_to_start() {
    let pki = Pki::new();
    let d = pki.dir.path();
    encrypted_key(d, "server", "secret", "encrypted.key");
    let start = |tls: TlsConfig| async move {
        let config = ServerConfig {
            secure_listen: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
            tls: Some(tls),
            ..ServerConfig::ephemeral()
        };
        Server::start(config)
            .await
            .map(|_| ())
            .unwrap_err()
            .to_string()
    };
    let good = pki.server_tls(ClientAuth::Need);

    let mut encrypted = good.clone();
    encrypted.key = pki.path("encrypted.key");
    encrypted.key_password = Some("secret".into());
    let e = start(encrypted).await;
    assert!(
        e.contains("encrypted") && e.contains("encrypted.key"),
        "{e}"
    );

    let mut no_trust = good.clone();
    no_trust.trust = None;
    assert!(start(no_trust).await.contains("ssl.trustStore.location"));

    let mut missing = good.clone();
    missing.cert_chain = pki.path("nope.pem");
    assert!(start(missing).await.contains("nope.pem"));

    let mut no_key = good.clone();
    no_key.key = pki.path("server.crt");
    assert!(start(no_key).await.contains("no PEM private key"));

    let mut wrong_key = good.clone();
    wrong_key.cert_chain = pki.path("server.crt");
    wrong_key.key = pki.path("bob.key");
    assert!(start(wrong_key)
        .await
        .contains("do not make a usable identity"));

    let mut suite = good.clone();
    suite.cipher_suites = vec!["TLS_RSA_WITH_RC4_128_MD5".into()];
    let e = start(suite).await;
    assert!(e.contains("ssl.ciphersuites") && e.contains("RC4"), "{e}");

    // A secure port without key material, or key material without a port.
    let config = ServerConfig {
        secure_listen: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
        ..ServerConfig::ephemeral()
    };
    assert!(Server::start(config).await.is_err());
    let config = ServerConfig {
        tls: Some(good),
        ..ServerConfig::ephemeral()
    };
    assert!(Server::start(config).await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protocol_and_cipher_suite_choices_are_honoured() {
    let pki = Pki::new();
    let mut tls = pki.server_tls(ClientAuth::Need);
    tls.versions = vec![zkit_server::TlsVersion::Tls12];
    tls.cipher_suites = vec!["TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384".into()];
    let config = ServerConfig {
        secure_listen: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
        tls: Some(tls),
        ..ServerConfig::ephemeral()
    };
    let server = Server::start(config).await.unwrap();
    let secure = server.secure_addr().unwrap();
    // The openssl client reports what was negotiated.
    let out = tokio::task::spawn_blocking(move || {
        Command::new("openssl")
            .args(["s_client", "-connect", &secure.to_string(), "-brief"])
            .args(["-cert", "bob.crt", "-key", "bob.key", "-CAfile", "ca.crt"])
            .current_dir(pki.dir.path())
            .stdin(Stdio::null())
            .output()
            .expect("openssl s_client")
    })
    .await
    .unwrap();
    let text = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(text.contains("Protocol version: TLSv1.2"), "{text}");
    assert!(text.contains("ECDHE-ECDSA-AES256-GCM-SHA384"), "{text}");
    server.stop().await;
}

/// The x509 id zkit gives a certificate is the one Apache gives it (where Apache runs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn x509_id_is_what_apache_computes() {
    let (Some(_), Some(classpath)) = (zkit_testkit::apache_zk(), zkit_testkit::curator_classpath())
    else {
        eprintln!("SKIP x509_id_is_what_apache_computes: no Apache ZooKeeper (ZKIT_APACHE_ZK)");
        return;
    };
    let pki = Pki::new();
    let zk = TlsZooKeeper::start(pki.dir.path(), &classpath);
    let addr = SocketAddr::from(([127, 0, 0, 1], zk.port));
    // Up once a TLS session works (the JVM takes a few seconds).
    let on_apache = zk
        .first_connection(|| tls_connect(pki.client(Some("alice")), addr))
        .await;
    let apache_ids = x509_ids(&on_apache).await;
    let server = tls_server(&pki, ClientAuth::Need).await;
    let on_zkit = tls_connect(pki.client(Some("alice")), server.secure_addr().unwrap())
        .await
        .unwrap();
    assert_eq!(x509_ids(&on_zkit).await, apache_ids);
    assert_eq!(apache_ids, vec![TRICKY_ID.to_string()]);
    let bob = tls_connect(pki.client(Some("bob")), addr).await.unwrap();
    assert_eq!(x509_ids(&bob).await, vec!["CN=bob,O=zkit".to_string()]);
    server.stop().await;
    drop(zk);
}
