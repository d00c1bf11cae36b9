//! TLS with rustls (feature `tls`): [`TlsOptions`] from PEM — the CA bundle that signs the
//! servers, an optional client certificate chain and key — with the server's name checked
//! against its certificate unless explicitly turned off (for test certificates).
//!
//! Works with Apache ZooKeeper's `secureClientPort` (Netty, `ssl.keyStore.type=PEM`) and any
//! TLS 1.2/1.3 server. The crypto provider is rustls' `ring`.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio::net::TcpStream;

use crate::error::{Error, Result};

/// How to speak TLS to the servers. Start from [`TlsOptions::new`] and add the CA.
#[derive(Clone, Debug, Default)]
pub struct TlsOptions {
    ca: Vec<CertificateDer<'static>>,
    identity: Option<(Vec<CertificateDer<'static>>, Arc<PrivateKeyDer<'static>>)>,
    server_name: Option<String>,
    verify_hostname: bool,
}

fn pem_error(what: &'static str) -> Error {
    Error::BadArguments(std::borrow::Cow::Borrowed(what))
}

fn certs(pem: &str) -> Result<Vec<CertificateDer<'static>>> {
    let certs = rustls_pemfile::certs(&mut pem.as_bytes())
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|_| pem_error("malformed PEM certificate"))?;
    if certs.is_empty() {
        return Err(pem_error("no certificate in PEM"));
    }
    Ok(certs)
}

impl TlsOptions {
    /// No trusted CA yet, hostname verification on.
    pub fn new() -> TlsOptions {
        TlsOptions {
            verify_hostname: true,
            ..TlsOptions::default()
        }
    }

    /// Trusts the CA certificates of a PEM bundle (added to those already trusted).
    ///
    /// # Errors
    /// [`Error::BadArguments`] when the PEM holds no certificate or a malformed one.
    pub fn with_pem_ca_certs(mut self, pem: &str) -> Result<TlsOptions> {
        self.ca.extend(certs(pem)?);
        Ok(self)
    }

    /// Presents a client certificate: the PEM chain (leaf first) and its PEM private key
    /// (PKCS#8, PKCS#1 or SEC1).
    ///
    /// # Errors
    /// [`Error::BadArguments`] for malformed PEM or a missing key.
    pub fn with_pem_identity(mut self, cert_chain: &str, key: &str) -> Result<TlsOptions> {
        let chain = certs(cert_chain)?;
        let key = rustls_pemfile::private_key(&mut key.as_bytes())
            .map_err(|_| pem_error("malformed PEM private key"))?
            .ok_or(pem_error("no private key in PEM"))?;
        self.identity = Some((chain, Arc::new(key)));
        Ok(self)
    }

    /// The name to check the server certificates against, instead of each host's name from
    /// the connect string (e.g. one name for a whole ensemble behind IP addresses).
    pub fn with_server_name(mut self, name: &str) -> TlsOptions {
        self.server_name = Some(name.to_owned());
        self
    }

    /// Accepts a server certificate signed by a trusted CA whatever name it is for.
    ///
    /// For test certificates only: anyone with a certificate from the same CA can then pose
    /// as the server. (zookeeper-client has this as an `unsafe fn`.)
    pub fn with_no_hostname_verification(mut self) -> TlsOptions {
        self.verify_hostname = false;
        self
    }

    pub(crate) fn connector(&self) -> Result<TlsConnector> {
        let mut roots = RootCertStore::empty();
        for ca in &self.ca {
            roots
                .add(ca.clone())
                .map_err(|_| pem_error("unusable CA certificate"))?;
        }
        if roots.is_empty() {
            return Err(pem_error(
                "TLS needs a CA certificate (TlsOptions::with_pem_ca_certs)",
            ));
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| Error::unexpected(format!("TLS setup: {e}")))?;
        let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
            .build()
            .map_err(|e| Error::unexpected(format!("TLS verifier: {e}")))?;
        let builder = if self.verify_hostname {
            builder.with_webpki_verifier(webpki)
        } else {
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AnyName(webpki)))
        };
        let config = match &self.identity {
            None => builder.with_no_client_auth(),
            Some((chain, key)) => builder
                .with_client_auth_cert(chain.clone(), key.clone_key())
                .map_err(|e| Error::BadArguments(format!("client certificate: {e}").into()))?,
        };
        Ok(TlsConnector {
            connector: tokio_rustls::TlsConnector::from(Arc::new(config)),
            server_name: self.server_name.clone(),
        })
    }
}

/// A TLS client ready to wrap connections.
pub(crate) struct TlsConnector {
    connector: tokio_rustls::TlsConnector,
    server_name: Option<String>,
}

impl std::fmt::Debug for TlsConnector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsConnector")
            .field("server_name", &self.server_name)
            .finish_non_exhaustive()
    }
}

impl TlsConnector {
    /// The TLS handshake over `tcp` with `host` (a name or an IP literal).
    pub(crate) async fn connect(
        &self,
        host: &str,
        tcp: TcpStream,
    ) -> std::result::Result<tokio_rustls::client::TlsStream<TcpStream>, String> {
        let name = self.server_name.as_deref().unwrap_or(host);
        let name = ServerName::try_from(name.to_owned())
            .map_err(|e| format!("server name {name}: {e}"))?;
        self.connector
            .connect(name, tcp)
            .await
            .map_err(|e| format!("TLS handshake: {e}"))
    }
}

/// Verifies the chain and signatures as webpki does, but not the name.
#[derive(Debug)]
struct AnyName(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::NotValidForName
                | rustls::CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}
