//! Serving `wss`/`https`: the rustls configuration (ring provider) the listener completes
//! TLS handshakes with, each in its connection's own task, so a slow or hostile client
//! never holds up the others; one that does not finish in time is dropped (see
//! [`crate::listener`]).

use std::path::Path;
use std::sync::Arc;

use rustls::ServerConfig;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use crate::HubError;
use crate::config::TlsFiles;

/// The hub's own certificate (the first of the chain), DER-encoded: what a client that
/// does not trust its issuer pins.
pub fn leaf_certificate(files: &TlsFiles) -> Result<Vec<u8>, HubError> {
    let certificate = CertificateDer::pem_file_iter(&files.cert)
        .map_err(|error| HubError::Tls(format!("cannot read {}: {error}", files.cert.display())))?
        .next()
        .ok_or_else(|| HubError::Tls(format!("{} holds no certificate", files.cert.display())))?
        .map_err(|error| HubError::Tls(format!("cannot read {}: {error}", files.cert.display())))?;
    Ok(certificate.as_ref().to_vec())
}

/// Loads a PEM certificate chain and private key into a server configuration.
pub fn server_config(files: &TlsFiles) -> Result<Arc<ServerConfig>, HubError> {
    let read_error = |what: &str, path: &Path, error: &dyn std::fmt::Display| {
        HubError::Tls(format!(
            "cannot read the {what} {}: {error}; give a PEM file",
            path.display()
        ))
    };
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&files.cert)
        .map_err(|error| read_error("certificate", &files.cert, &error))?
        .collect::<Result<_, _>>()
        .map_err(|error| read_error("certificate", &files.cert, &error))?;
    if chain.is_empty() {
        return Err(HubError::Tls(format!(
            "{} holds no certificate",
            files.cert.display()
        )));
    }
    let key = PrivateKeyDer::from_pem_file(&files.key)
        .map_err(|error| read_error("private key", &files.key, &error))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|error| HubError::Tls(error.to_string()))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|error| {
            HubError::Tls(format!(
                "the certificate and the key do not go together: {error}"
            ))
        })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}
