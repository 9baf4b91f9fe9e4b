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

/// The names of the hub's own certificate's files in a directory.
const OWN_CERT: &str = "network.crt";
const OWN_KEY: &str = "network.key";

/// A certificate of the hub's own, in `dir` (made on first use, then kept, so its pin stays
/// the same across restarts and invite links keep working): for a hub its clients pin
/// rather than trust through a CA, such as the app's hub when the person lets teammates on
/// the network in. `names` go in the certificate for tools that look (clients that pin do
/// not). The key is written 0600 whole or not at all.
pub fn own_certificate(dir: &Path, names: &[String]) -> Result<TlsFiles, HubError> {
    let files = TlsFiles {
        cert: dir.join(OWN_CERT),
        key: dir.join(OWN_KEY),
    };
    if files.cert.exists() && files.key.exists() {
        // Kept only if it still loads; a damaged pair is replaced (its pin with it).
        match server_config(&files) {
            Ok(_) => return Ok(files),
            Err(error) => {
                tracing::warn!(%error, "the hub's own certificate is unreadable; making a new one")
            }
        }
    }
    let failed = |error: rcgen::Error| HubError::Tls(format!("cannot make a certificate: {error}"));
    let key = rcgen::KeyPair::generate().map_err(failed)?;
    let mut names = names.to_vec();
    if !names.iter().any(|name| name == "localhost") {
        names.push("localhost".to_owned());
    }
    let certificate = rcgen::CertificateParams::new(names)
        .map_err(failed)?
        .self_signed(&key)
        .map_err(failed)?;
    write_private(&files.key, key.serialize_pem().as_bytes())?;
    write_private(&files.cert, certificate.pem().as_bytes())?;
    Ok(files)
}

/// Writes `path` whole (a new temporary file, its owner's alone, renamed over it).
fn write_private(path: &Path, bytes: &[u8]) -> Result<(), HubError> {
    use std::io::Write as _;
    let temporary = path.with_extension("tmp");
    let _ = std::fs::remove_file(&temporary);
    let mut file = roundtable_platform::private::open(
        std::fs::OpenOptions::new().write(true).create_new(true),
        &temporary,
    )?;
    file.write_all(bytes)?;
    file.sync_all()?;
    std::fs::rename(&temporary, path)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hubs_own_certificate_is_made_once_kept_private_and_replaced_when_damaged() {
        let dir = tempfile::tempdir().unwrap();
        let files = own_certificate(dir.path(), &["192.168.1.20".to_owned()]).unwrap();
        let first = leaf_certificate(&files).unwrap();
        server_config(&files).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&files.key).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        // Kept: the same certificate (and pin) the next time.
        let again = own_certificate(dir.path(), &[]).unwrap();
        assert_eq!(leaf_certificate(&again).unwrap(), first);
        // A damaged key: a new pair, which loads.
        std::fs::write(&files.key, "not a key").unwrap();
        let fresh = own_certificate(dir.path(), &[]).unwrap();
        server_config(&fresh).unwrap();
        assert_ne!(leaf_certificate(&fresh).unwrap(), first);
    }
}
