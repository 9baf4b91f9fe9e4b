//! Certificates for tests of TLS: one signed by a test CA (a hub with a private CA), and
//! one that signs itself (a hub its clients pin), both for `localhost`, written as PEM.

use std::path::{Path, PathBuf};

use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};

/// A hub's certificate and key files.
pub struct HubCertificate {
    pub cert: PathBuf,
    pub key: PathBuf,
    /// The certificate, DER-encoded (what a pin hashes).
    pub der: Vec<u8>,
}

/// A test CA (its PEM at `ca`, its DER in `ca_der`) and a certificate for `localhost` it
/// signed, written in `dir`.
pub struct SignedByCa {
    pub ca: PathBuf,
    pub ca_der: Vec<u8>,
    pub hub: HubCertificate,
}

fn write(dir: &Path, name: &str, cert: &rcgen::Certificate, key: &KeyPair) -> HubCertificate {
    let paths = (
        dir.join(format!("{name}.crt")),
        dir.join(format!("{name}.key")),
    );
    std::fs::write(&paths.0, cert.pem()).unwrap();
    std::fs::write(&paths.1, key.serialize_pem()).unwrap();
    HubCertificate {
        cert: paths.0,
        key: paths.1,
        der: cert.der().to_vec(),
    }
}

/// A CA, and a certificate for `localhost` it signed, in `dir`.
pub fn signed_by_ca(dir: &Path) -> SignedByCa {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_key = KeyPair::generate().unwrap();
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let ca_path = dir.join("ca.pem");
    std::fs::write(&ca_path, ca_cert.pem()).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["localhost".to_owned()])
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    SignedByCa {
        ca: ca_path,
        ca_der: ca_cert.der().to_vec(),
        hub: write(dir, "hub", &cert, &key),
    }
}

/// A certificate for `localhost` that signs itself, in `dir` as `NAME.crt` and `NAME.key`.
pub fn self_signed(dir: &Path, name: &str) -> HubCertificate {
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["localhost".to_owned()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    write(dir, name, &cert, &key)
}
