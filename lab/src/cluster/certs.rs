//! A cluster's TLS (docs/security.md, "TLS"): a CA of its own and a certificate for each member, made with
//! rcgen under `run/tls/` by `up --tls` (and the tests and chaos runs that ask for TLS). A node
//! gets its files by `--tls-ca`, `--tls-cert` and `--tls-key` (`process.rs`); the lab's clients
//! trust the CA and present `admin.pem`, a client certificate for admin APIs that ask for one.
//!
//! Each member's certificate names the host of its address (an IP or a DNS name) and its
//! member id as `member-ID.electd.invalid` (what peers check, `src/tls.rs`), for server and
//! client use. Every certificate is valid from a week before it was made: TLS judges
//! certificates on the wall clock, and the chaos suite turns nodes' clocks back by a day (S19).

use std::fs;
use std::path::PathBuf;
use std::time::Duration;

use electd_client::{Client, NodeId};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};

use super::dir::{io, Cluster, CtlError};

/// Where a cluster's TLS files are, under its `run/`.
const TLS_DIR: &str = "tls";

fn rcgen_error(e: rcgen::Error) -> CtlError {
    CtlError::Tls(e.to_string())
}

/// A week before now to ten years after it.
fn validity(p: &mut CertificateParams) {
    let now = time::OffsetDateTime::now_utc();
    p.not_before = now - time::Duration::days(7);
    p.not_after = now + time::Duration::days(3650);
}

impl Cluster {
    fn tls_dir(&self) -> PathBuf {
        self.run.join(TLS_DIR)
    }

    /// The cluster CA's certificate, when the cluster runs TLS.
    pub fn tls_ca(&self) -> Option<PathBuf> {
        let ca = self.tls_dir().join("ca.pem");
        ca.exists().then_some(ca)
    }

    /// Node `id`'s certificate and key files.
    pub fn tls_files(&self, id: NodeId) -> (PathBuf, PathBuf) {
        let dir = self.tls_dir();
        (
            dir.join(format!("node{id}.pem")),
            dir.join(format!("node{id}-key.pem")),
        )
    }

    /// Makes the CA, every member's certificate and the admin client certificate, unless the
    /// CA is there already; from then on the cluster runs TLS (its nodes and its clients).
    pub fn ensure_tls(&mut self) -> Result<(), CtlError> {
        if self.tls_ca().is_none() {
            self.make_tls()?;
        }
        self.http = self.http_for(Duration::from_millis(800))?;
        Ok(())
    }

    /// Removes the TLS files: the cluster runs plain HTTP again.
    pub fn drop_tls(&mut self) -> Result<(), CtlError> {
        let dir = self.tls_dir();
        if dir.exists() {
            fs::remove_dir_all(&dir).map_err(io(&dir))?;
        }
        self.http = self.http_for(Duration::from_millis(800))?;
        Ok(())
    }

    fn make_tls(&self) -> Result<(), CtlError> {
        let dir = self.tls_dir();
        fs::create_dir_all(&dir).map_err(io(&dir))?;
        let ca_key = KeyPair::generate().map_err(rcgen_error)?;
        let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(rcgen_error)?;
        ca.distinguished_name
            .push(DnType::CommonName, "electd cluster CA");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        validity(&mut ca);
        let ca_cert = ca.self_signed(&ca_key).map_err(rcgen_error)?;
        let write = |name: &str, text: &str, secret: bool| -> Result<(), CtlError> {
            let path = dir.join(name);
            fs::write(&path, text).map_err(io(&path))?;
            if secret {
                use std::os::unix::fs::PermissionsExt;
                let _ = fs::set_permissions(&path, fs::Permissions::from_mode(0o600));
            }
            Ok(())
        };
        let issue = |names: Vec<String>, cn: &str| -> Result<(String, String), CtlError> {
            let key = KeyPair::generate().map_err(rcgen_error)?;
            let mut p = CertificateParams::new(names).map_err(rcgen_error)?;
            p.distinguished_name.push(DnType::CommonName, cn);
            p.key_usages = vec![
                KeyUsagePurpose::DigitalSignature,
                KeyUsagePurpose::KeyEncipherment,
            ];
            p.extended_key_usages = vec![
                ExtendedKeyUsagePurpose::ServerAuth,
                ExtendedKeyUsagePurpose::ClientAuth,
            ];
            validity(&mut p);
            let cert = p.signed_by(&key, &ca_cert, &ca_key).map_err(rcgen_error)?;
            Ok((cert.pem(), key.serialize_pem()))
        };
        for m in &self.members {
            let host = m
                .addr
                .rsplit_once(':')
                .map(|(h, _)| h.trim_start_matches('[').trim_end_matches(']'))
                .unwrap_or(&m.addr)
                .to_string();
            let (cert, key) = issue(
                vec![host, electd::tls::member_name(m.id)],
                &format!("electd member {}", m.id),
            )?;
            write(&format!("node{}.pem", m.id), &cert, false)?;
            write(&format!("node{}-key.pem", m.id), &key, true)?;
        }
        let (cert, key) = issue(vec!["admin.electd.invalid".into()], "electd admin")?;
        write("admin.pem", &(cert + &key), true)?;
        write("ca.pem", &ca_cert.pem(), false)?;
        write("ca-key.pem", &ca_key.serialize_pem(), true)
    }

    /// A connection pool for the cluster's nodes whose requests end after `timeout`: over TLS
    /// (trusting the cluster CA, presenting the admin certificate) when the cluster runs it.
    pub fn http_for(&self, timeout: Duration) -> Result<reqwest::Client, CtlError> {
        let builder = match self.tls_ca() {
            None => electd_client::http_client(),
            Some(ca) => {
                let ca = fs::read(&ca).map_err(io(&ca))?;
                let admin = self.tls_dir().join("admin.pem");
                let admin = fs::read(&admin).map_err(io(&admin))?;
                electd_client::tls_client(&ca, Some(&admin))
                    .map_err(|e| CtlError::Tls(e.to_string()))?
            }
        };
        builder
            .timeout(timeout)
            .build()
            .map_err(|e| CtlError::Tls(e.to_string()))
    }

    /// A client of node `id` on `http` (a pool of [`Cluster::http_for`]), speaking HTTPS when
    /// the cluster runs TLS.
    pub fn client_on(&self, http: reqwest::Client, id: NodeId) -> Result<Client, CtlError> {
        let client = Client::with_http(http, &self.member(id)?.addr);
        Ok(if self.tls_ca().is_some() {
            client.https()
        } else {
            client
        })
    }
}
