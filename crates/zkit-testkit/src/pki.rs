//! Test certificates made by the `openssl` CLI in a directory (usually a temp dir): a
//! self-signed CA ([`make_ca`]) and P-256 certificates signed by it ([`issue`]), for the TLS
//! tests of the server, the client and `zkit serve`.
//!
//! Every file is named after its owner: `NAME.key`, `NAME.crt`, and for an issued certificate
//! `NAME.pem` too (key then certificate: Apache ZooKeeper's PEM key store). The helpers panic
//! (with openssl's own message) when openssl fails: they are for tests only.
//!
//! [`TlsZooKeeper`] runs Apache ZooKeeper with only a TLS port on such certificates, for the
//! tests that compare zkit's TLS with Apache's.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Runs `openssl ARGS` in `dir`.
///
/// # Panics
/// When openssl cannot be run or exits unsuccessfully (its stderr is in the message).
pub fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .expect("run openssl");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A P-256 key `name.key`.
///
/// # Panics
/// When openssl fails.
pub fn key(dir: &Path, name: &str) {
    let out = format!("{name}.key");
    openssl(
        dir,
        &[
            "genpkey",
            "-algorithm",
            "EC",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-out",
            &out,
        ],
    );
}

/// `out`: the private key `name.key` as encrypted PKCS#8 under `password`.
///
/// # Panics
/// When openssl fails.
pub fn encrypted_key(dir: &Path, name: &str, password: &str, out: &str) {
    let key = format!("{name}.key");
    let pass = format!("pass:{password}");
    openssl(
        dir,
        &[
            "pkcs8", "-topk8", "-in", &key, "-passout", &pass, "-out", out,
        ],
    );
}

/// A self-signed CA: `ca.key`, `ca.crt` (subject `/CN=ca`, valid two days).
///
/// # Panics
/// When openssl fails.
pub fn make_ca(dir: &Path, ca: &str) {
    key(dir, ca);
    let subject = format!("/CN={ca}");
    let (k, c) = (format!("{ca}.key"), format!("{ca}.crt"));
    openssl(
        dir,
        &[
            "req", "-x509", "-new", "-key", &k, "-subj", &subject, "-days", "2", "-out", &c,
        ],
    );
}

/// `name.key`, `name.crt` (signed by `ca`, with `subject` and `san` as subjectAltName) and
/// `name.pem` (key then certificate: Apache's PEM key store).
///
/// # Panics
/// When openssl fails or a file cannot be read or written.
pub fn issue(dir: &Path, ca: &str, name: &str, subject: &str, san: &str) {
    key(dir, name);
    let (k, csr, crt, ext) = (
        format!("{name}.key"),
        format!("{name}.csr"),
        format!("{name}.crt"),
        format!("{name}.ext"),
    );
    openssl(
        dir,
        &["req", "-new", "-key", &k, "-subj", subject, "-out", &csr],
    );
    std::fs::write(dir.join(&ext), format!("subjectAltName={san}\n")).unwrap();
    let (ca_crt, ca_key) = (format!("{ca}.crt"), format!("{ca}.key"));
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            &ca_crt,
            "-CAkey",
            &ca_key,
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            &ext,
            "-out",
            &crt,
        ],
    );
    std::fs::write(
        dir.join(format!("{name}.pem")),
        read(dir, &k) + &read(dir, &crt),
    )
    .unwrap();
}

/// A CA `ca` ([`make_ca`]) and a `server` certificate it signed for `localhost` and
/// `127.0.0.1` (`/CN=server`; [`issue`]), as every TLS test starts.
///
/// # Panics
/// When openssl fails.
pub fn make_ca_and_server(dir: &Path) {
    make_ca(dir, "ca");
    issue(
        dir,
        "ca",
        "server",
        "/CN=server",
        "DNS:localhost,IP:127.0.0.1",
    );
}

/// The text of `dir/file`.
///
/// # Panics
/// When it cannot be read.
pub fn read(dir: &Path, file: &str) -> String {
    std::fs::read_to_string(dir.join(file)).unwrap()
}

/// Apache ZooKeeper standalone with only a TLS port (`secureClientPort` on 127.0.0.1, Netty,
/// PEM key and trust stores, client certificates required); killed when dropped.
pub struct TlsZooKeeper {
    child: Child,
    dir: std::path::PathBuf,
    /// The TLS port on 127.0.0.1.
    pub port: u16,
}

impl TlsZooKeeper {
    /// Starts it in `dir`, which holds `server.pem` (key and certificate, as [`issue`] writes
    /// it for `server`) and `ca.crt` (the CA it trusts for client certificates, as
    /// [`make_ca`] writes it for `ca`). Its config, data and log (`zk.log`) go in `dir` too.
    /// `classpath` holds ZooKeeper, jute and Netty ([`crate::curator_classpath`]).
    ///
    /// # Panics
    /// When `dir` cannot be written or `java` cannot be started.
    pub fn start(dir: &Path, classpath: &str) -> TlsZooKeeper {
        let port = crate::free_port();
        let data = dir.join("zk-data");
        std::fs::create_dir_all(&data).unwrap();
        let cfg = format!(
            "tickTime=500\ndataDir={}\nsecureClientPort={port}\nsecureClientPortAddress=127.0.0.1\n\
             admin.enableServer=false\n4lw.commands.whitelist=*\n\
             serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory\n\
             ssl.keyStore.location={}\nssl.keyStore.type=PEM\n\
             ssl.trustStore.location={}\nssl.trustStore.type=PEM\nssl.clientAuth=need\n",
            data.display(),
            dir.join("server.pem").display(),
            dir.join("ca.crt").display(),
        );
        std::fs::write(dir.join("zoo.cfg"), cfg).unwrap();
        let log = std::fs::File::create(dir.join("zk.log")).unwrap();
        let child = Command::new("java")
            .args([
                "-Xmx256m",
                "-Dzookeeper.serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory",
                "-Dzookeeper.admin.enableServer=false",
                "-cp",
                classpath,
                "org.apache.zookeeper.server.ZooKeeperServerMain",
            ])
            .arg(dir.join("zoo.cfg"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start java");
        TlsZooKeeper {
            child,
            dir: dir.to_path_buf(),
            port,
        }
    }

    /// The first success of `connect`, called every 200 ms while the JVM comes up.
    ///
    /// # Panics
    /// When `connect` still fails after 60 s; the message holds its last error and
    /// ZooKeeper's log.
    pub async fn first_connection<T, E, F, Fut>(&self, mut connect: F) -> T
    where
        E: std::fmt::Display,
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, E>>,
    {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            match connect().await {
                Ok(client) => return client,
                Err(e) => {
                    assert!(
                        tokio::time::Instant::now() < deadline,
                        "TLS ZooKeeper not up: {e}; {}",
                        read(&self.dir, "zk.log")
                    );
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        }
    }
}

impl Drop for TlsZooKeeper {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
