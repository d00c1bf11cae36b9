//! TLS for client connections (`secureClientPort`): [`TlsConfig`], the key material and the
//! policy as Apache ZooKeeper 3.8 reads them from `ssl.*` (its PEM key store type), and, with
//! the `tls` feature, the rustls acceptor built from it.
//!
//! The key store is PEM: a private key and its certificate chain, in one file as Apache's
//! `PEMFileLoader` reads `ssl.keyStore.location`, or in two (`--tls-cert`, `--tls-key`).
//! The trust store is a PEM bundle of CA certificates that sign the client certificates.
//! An encrypted private key is refused with a message saying how to decrypt it: no well-kept
//! crate of the rustls family decrypts PKCS#8 today.
//!
//! Nothing here fails open: a setting that cannot be honoured is an error when the server
//! starts, never a quiet fallback to something weaker.

use std::path::PathBuf;

/// Whether TLS clients must present a certificate (`ssl.clientAuth`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    /// No certificate is asked for.
    None,
    /// A certificate is asked for; a client without one is served (with no `x509` id), a
    /// client with one that does not verify is refused.
    Want,
    /// A verified certificate is required (Apache's default).
    Need,
}

impl ClientAuth {
    /// Parses `none`, `want` or `need` (any case, as Apache's `ClientAuth.fromPropertyValue`).
    ///
    /// # Errors
    /// Any other value.
    pub fn parse(text: &str) -> Result<ClientAuth, String> {
        match text.to_ascii_lowercase().as_str() {
            "none" => Ok(ClientAuth::None),
            "want" => Ok(ClientAuth::Want),
            "need" => Ok(ClientAuth::Need),
            _ => Err(format!("expected none, want or need, not {text:?}")),
        }
    }
}

/// A TLS protocol version rustls speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsVersion {
    /// `TLSv1.2`.
    Tls12,
    /// `TLSv1.3`.
    Tls13,
}

impl TlsVersion {
    /// Parses Java's protocol names (`TLSv1.2`, `TLSv1.3`).
    ///
    /// # Errors
    /// Older protocols (`TLSv1`, `TLSv1.1`, `SSLv3`; rustls does not speak them) and
    /// unknown names.
    pub fn parse(text: &str) -> Result<TlsVersion, String> {
        match text.trim() {
            "TLSv1.2" => Ok(TlsVersion::Tls12),
            "TLSv1.3" => Ok(TlsVersion::Tls13),
            "TLS" => Err(
                "TLS (any version) cannot be honoured exactly: name TLSv1.2 and/or \
                 TLSv1.3"
                    .into(),
            ),
            old @ ("TLSv1" | "TLSv1.1" | "SSLv3" | "SSLv2Hello") => Err(format!(
                "{old} is not supported (zkit speaks TLSv1.2 and TLSv1.3 only)"
            )),
            other => Err(format!("unknown TLS protocol {other:?}")),
        }
    }
}

/// TLS for the secure client port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsConfig {
    /// PEM file with the server's certificate chain, leaf first (`--tls-cert`; with
    /// `ssl.keyStore.location` the key store file itself, which holds key and chain).
    pub cert_chain: PathBuf,
    /// PEM file with the server's private key (`--tls-key`; may be the same file).
    pub key: PathBuf,
    /// `ssl.keyStore.password`: accepted for an unencrypted key (which ignores it); an
    /// encrypted key is refused either way.
    pub key_password: Option<String>,
    /// PEM bundle of the CAs whose client certificates are trusted (`ssl.trustStore.location`,
    /// `--tls-ca`). Needed unless `client_auth` is [`ClientAuth::None`].
    pub trust: Option<PathBuf>,
    /// `ssl.clientAuth` [default: need, as Apache].
    pub client_auth: ClientAuth,
    /// `ssl.enabledProtocols` (else `ssl.protocol`); empty = TLSv1.2 and TLSv1.3.
    pub versions: Vec<TlsVersion>,
    /// `ssl.ciphersuites` by their IANA (Java) names; empty = rustls' defaults (AEAD suites
    /// with forward secrecy only).
    pub cipher_suites: Vec<String>,
}

impl TlsConfig {
    /// Certificate chain and key from their PEM files, client certificates required and
    /// verified against the CA bundle `trust` (or none asked for when `trust` is `None`).
    pub fn new(cert_chain: PathBuf, key: PathBuf, trust: Option<PathBuf>) -> TlsConfig {
        TlsConfig {
            cert_chain,
            key,
            key_password: None,
            client_auth: if trust.is_some() {
                ClientAuth::Need
            } else {
                ClientAuth::None
            },
            trust,
            versions: Vec::new(),
            cipher_suites: Vec::new(),
        }
    }
}

#[cfg(feature = "tls")]
pub(crate) use acceptor::{acceptor, peer_subject};

#[cfg(feature = "tls")]
mod acceptor {
    use std::path::Path;
    use std::sync::Arc;

    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    use rustls::server::WebPkiClientVerifier;
    use rustls::{RootCertStore, ServerConfig};

    use super::{ClientAuth, TlsConfig, TlsVersion};
    use crate::error::Error;

    fn read(what: &str, path: &Path) -> Result<String, Error> {
        std::fs::read_to_string(path)
            .map_err(|e| Error::Tls(format!("cannot read the {what} {}: {e}", path.display())))
    }

    fn certs(what: &str, path: &Path) -> Result<Vec<CertificateDer<'static>>, Error> {
        let pem = read(what, path)?;
        let certs = rustls_pemfile::certs(&mut pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| Error::Tls(format!("{}: malformed PEM: {e}", path.display())))?;
        if certs.is_empty() {
            return Err(Error::Tls(format!(
                "{}: no PEM certificate (-----BEGIN CERTIFICATE-----) in the {what}",
                path.display()
            )));
        }
        Ok(certs)
    }

    fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, Error> {
        let pem = read("private key", path)?;
        if pem.contains("-----BEGIN ENCRYPTED PRIVATE KEY-----")
            || pem.contains("Proc-Type: 4,ENCRYPTED")
        {
            return Err(Error::Tls(format!(
                "{}: the private key is encrypted, which zkit cannot read; decrypt it \
                 (`openssl pkey -in KEY -out PLAIN_KEY`) and protect the file instead",
                path.display()
            )));
        }
        rustls_pemfile::private_key(&mut pem.as_bytes())
            .map_err(|e| Error::Tls(format!("{}: malformed PEM: {e}", path.display())))?
            .ok_or_else(|| {
                Error::Tls(format!(
                    "{}: no PEM private key (PKCS#8, PKCS#1 or SEC1)",
                    path.display()
                ))
            })
    }

    /// The rustls acceptor for `config`.
    pub(crate) fn acceptor(config: &TlsConfig) -> Result<tokio_rustls::TlsAcceptor, Error> {
        let provider = rustls::crypto::ring::default_provider();
        let provider = if config.cipher_suites.is_empty() {
            provider
        } else {
            let mut chosen = Vec::new();
            for name in &config.cipher_suites {
                // Java names TLS 1.3 suites TLS_AES_…; rustls (as IANA's registry) TLS13_AES_….
                let rustls_name = match name.strip_prefix("TLS_") {
                    Some(rest) if !rest.contains("_WITH_") => format!("TLS13_{rest}"),
                    _ => name.clone(),
                };
                let suite = provider
                    .cipher_suites
                    .iter()
                    .find(|s| s.suite().as_str() == Some(rustls_name.as_str()))
                    .ok_or_else(|| {
                        Error::Tls(format!(
                            "ssl.ciphersuites: {name} is not a cipher suite zkit speaks (it \
                             has: {})",
                            provider
                                .cipher_suites
                                .iter()
                                .filter_map(|s| s.suite().as_str())
                                .collect::<Vec<_>>()
                                .join(", ")
                        ))
                    })?;
                chosen.push(*suite);
            }
            rustls::crypto::CryptoProvider {
                cipher_suites: chosen,
                ..provider
            }
        };
        let provider = Arc::new(provider);
        let mut versions: Vec<&'static rustls::SupportedProtocolVersion> = Vec::new();
        for v in &config.versions {
            versions.push(match v {
                TlsVersion::Tls12 => &rustls::version::TLS12,
                TlsVersion::Tls13 => &rustls::version::TLS13,
            });
        }
        if versions.is_empty() {
            versions = vec![&rustls::version::TLS12, &rustls::version::TLS13];
        }
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&versions)
            .map_err(|e| Error::Tls(format!("ssl.enabledProtocols / ssl.ciphersuites: {e}")))?;
        let builder = match (config.client_auth, &config.trust) {
            (ClientAuth::None, _) => builder.with_no_client_auth(),
            (_, None) => {
                return Err(Error::Tls(
                    "client certificates are asked for (ssl.clientAuth=need is Apache's \
                     default) but no trust store says who signs them: set \
                     ssl.trustStore.location (--tls-ca), or ssl.clientAuth=none"
                        .into(),
                ))
            }
            (auth, Some(trust)) => {
                let mut roots = RootCertStore::empty();
                for ca in certs("trust store", trust)? {
                    roots.add(ca).map_err(|e| {
                        Error::Tls(format!("{}: unusable CA certificate: {e}", trust.display()))
                    })?;
                }
                let verifier =
                    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
                let verifier = if auth == ClientAuth::Want {
                    verifier.allow_unauthenticated()
                } else {
                    verifier
                };
                let verifier = verifier
                    .build()
                    .map_err(|e| Error::Tls(format!("client certificate verifier: {e}")))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let chain = certs("certificate chain", &config.cert_chain)?;
        let key = private_key(&config.key)?;
        let server = builder.with_single_cert(chain, key).map_err(|e| {
            Error::Tls(format!(
                "{} / {}: the key and certificate do not make a usable identity: {e}",
                config.cert_chain.display(),
                config.key.display()
            ))
        })?;
        Ok(tokio_rustls::TlsAcceptor::from(Arc::new(server)))
    }

    /// The `x509` id of a verified client: its certificate's subject as Apache writes it.
    pub(crate) fn peer_subject(conn: &rustls::ServerConnection) -> Option<String> {
        let leaf = conn.peer_certificates()?.first()?;
        crate::x509_name::subject_rfc2253(leaf.as_ref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apache_values_parse() {
        assert_eq!(ClientAuth::parse("NEED"), Ok(ClientAuth::Need));
        assert_eq!(ClientAuth::parse("want"), Ok(ClientAuth::Want));
        assert_eq!(ClientAuth::parse("none"), Ok(ClientAuth::None));
        assert!(ClientAuth::parse("optional").is_err());
        assert_eq!(TlsVersion::parse("TLSv1.3"), Ok(TlsVersion::Tls13));
        assert!(TlsVersion::parse("TLSv1.1")
            .unwrap_err()
            .contains("not supported"));
        assert!(TlsVersion::parse("TLS").is_err());
    }
}
