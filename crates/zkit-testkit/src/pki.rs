//! Test certificates made by the `openssl` CLI in a directory (usually a temp dir): a
//! self-signed CA ([`make_ca`]) and P-256 certificates signed by it ([`issue`]), for the TLS
//! tests of the server, the client and `zkit serve`.
//!
//! Every file is named after its owner: `NAME.key`, `NAME.crt`, and for an issued certificate
//! `NAME.pem` too (key then certificate: Apache ZooKeeper's PEM key store). The helpers panic
//! (with openssl's own message) when openssl fails: they are for tests only.

use std::path::Path;
use std::process::{Command, Stdio};

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

/// The text of `dir/file`.
///
/// # Panics
/// When it cannot be read.
pub fn read(dir: &Path, file: &str) -> String {
    std::fs::read_to_string(dir.join(file)).unwrap()
}
