//! TLS for the API and the peer RPC (docs/security.md, "TLS"), with rustls on ring: one port, one
//! certificate per node, one cluster CA.
//!
//! - **Server.** Every connection is TLS. A client may present a certificate; one that does not
//!   chain to the cluster CA fails the handshake. The certificate a connection presented rides
//!   on each of its requests as a [`ClientCert`] (`src/server.rs`).
//! - **Peers.** A peer request must come with a certificate that names its sender's member id:
//!   the DNS name [`member_name`] (`member-ID.electd.invalid`) among its subject alternative
//!   names, checked against `x-electd-from` by the transport's guard (`src/transport.rs`). A
//!   node's requests to member N present its own certificate and take an answer only from a
//!   server whose certificate chains to the cluster CA, names the address dialled *and* names
//!   member N ([`MemberServer`]): a member's key answers as no other member, though the lab
//!   issues every certificate for 127.0.0.1. Both directions take the intermediates a peer
//!   presents, and refuse a certificate that a wildcard would let name every member
//!   (`*.electd.invalid`, [`is_wildcard`]).
//! - **API.** Clients verify the node's certificate against the cluster CA (`--cacert`); with
//!   `tls.admin_client_cert` the admin API also asks for a client certificate signed by it.
//! - **Reload.** [`Tls::reload`] reads the three files again (SIGHUP): new connections use the
//!   new certificate and CA, and open ones are judged again on their next peer request: a
//!   connection whose certificate no longer chains to the CA in force (a member cut off by
//!   replacing the CA) is refused and closed (`src/transport.rs`), and outgoing connections are
//!   made anew, verifying the peers against the new CA. The node's claim never notices a
//!   reload that keeps its peers. A reload that fails (a missing file, a key that does not
//!   match) keeps what was loaded.
//!
//! TLS authenticates both ends and encrypts, and a replayed TLS record fails its MAC, so the
//! peer HMAC (`src/auth.rs`) is not needed with it; a cluster may run both.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use axum::http::StatusCode;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, ServerConfig, SignatureScheme};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};

use crate::config::{ConfigError, TlsFiles};
use crate::error::ApiError;
use crate::role::NodeId;

/// The DNS name by which a certificate names member `id`.
pub fn member_name(id: NodeId) -> String {
    format!("member-{id}.electd.invalid")
}

/// The certificate the client of a connection presented (`None`: none, or no TLS), in the
/// extensions of each request on it.
#[derive(Clone, Debug, Default)]
pub struct ClientCert(pub Option<Arc<PeerCert>>);

/// The certificates a connection presented (its own first, then the intermediates it sent), and
/// the member they were found to name under which load of the files: checked on the
/// connection's first peer request and again after each reload, not on every heartbeat.
#[derive(Debug)]
pub struct PeerCert {
    pub chain: Vec<CertificateDer<'static>>,
    /// The member named, the [`Tls::generation`] it was judged under, and when.
    named: std::sync::Mutex<Option<(NodeId, u64, std::time::Instant)>>,
}

/// How long a connection's certificate is taken as judged: judged again after, so that one that
/// expires on a kept-alive connection is refused within this of its end (issue 48, item 5: it
/// was judged once a load of the files, and an expired certificate passed until a reload).
pub const PEER_CERT_RECHECK: std::time::Duration = std::time::Duration::from_secs(10);

impl PeerCert {
    /// `chain`: what the connection presented, its own certificate first (not empty).
    pub fn new(chain: Vec<CertificateDer<'static>>) -> PeerCert {
        PeerCert {
            chain,
            named: std::sync::Mutex::new(None),
        }
    }
}

/// A DNS name no member has: a certificate valid for it names every member (a wildcard such
/// as `*.electd.invalid`), and is refused.
const NO_MEMBER: &str = "electd-wildcard-probe.electd.invalid";

/// Whether `verifier` finds the certificate chain `ee` + `intermediates` valid for `name`.
fn valid_for(
    verifier: &WebPkiServerVerifier,
    ee: &CertificateDer<'_>,
    intermediates: &[CertificateDer<'_>],
    name: &str,
    now: UnixTime,
) -> Result<(), rustls::Error> {
    let name = ServerName::try_from(name.to_string())
        .map_err(|e| rustls::Error::General(format!("{name}: {e}")))?;
    verifier
        .verify_server_cert(ee, intermediates, &name, &[], now)
        .map(|_| ())
}

/// Whether a certificate that chains to the CA is valid for a name no member has: a wildcard
/// (`*.electd.invalid`) that would let one key stand for every member.
pub fn is_wildcard(
    verifier: &WebPkiServerVerifier,
    ee: &CertificateDer<'_>,
    intermediates: &[CertificateDer<'_>],
) -> bool {
    valid_for(verifier, ee, intermediates, NO_MEMBER, UnixTime::now()).is_ok()
}

/// Verifies the server of a connection to member `to`: the chain to the cluster CA and the
/// address dialled (as any TLS client does), then [`member_name`]`(to)`, and no wildcard.
#[derive(Debug)]
pub struct MemberServer {
    to: NodeId,
    inner: Arc<WebPkiServerVerifier>,
}

impl ServerCertVerifier for MemberServer {
    fn verify_server_cert(
        &self,
        ee: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.inner
            .verify_server_cert(ee, intermediates, server_name, ocsp, now)?;
        let member = member_name(self.to);
        if valid_for(&self.inner, ee, intermediates, &member, now).is_err() {
            return Err(rustls::Error::General(format!(
                "the server's certificate does not name member {} ({member})",
                self.to
            )));
        }
        if valid_for(&self.inner, ee, intermediates, NO_MEMBER, now).is_ok() {
            return Err(rustls::Error::General(
                "the server's certificate names every member (a wildcard): refused".into(),
            ));
        }
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// What one load of the files made.
struct Loaded {
    server: Arc<ServerConfig>,
    /// This node's certificate chain and key, which its client side presents.
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    /// Checks that a certificate chains to the CA and names a member.
    members: Arc<WebPkiServerVerifier>,
    /// Checks that a client's certificate chains to the CA (the admin door, again on every
    /// admin request: a CA removed by a reload no longer lets a kept-alive connection in).
    clients: Arc<dyn rustls::server::danger::ClientCertVerifier>,
}

/// A node's TLS: its files, what was last loaded from them, and how often that changed.
pub struct Tls {
    files: TlsFiles,
    loaded: RwLock<Loaded>,
    generation: AtomicU64,
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn bad(field: &str, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        field: field.into(),
        message: message.into(),
    }
}

fn load(files: &TlsFiles) -> Result<Loaded, ConfigError> {
    let read_certs = |field: &str, path: &std::path::Path| {
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
            .and_then(|it| it.collect::<Result<_, _>>())
            .map_err(|e| bad(field, format!("{}: {e}", path.display())))?;
        if certs.is_empty() {
            return Err(bad(
                field,
                format!("{}: no PEM certificate in it", path.display()),
            ));
        }
        Ok(certs)
    };
    let ca = read_certs("tls.ca", &files.ca)?;
    let chain = read_certs("tls.cert", &files.cert)?;
    let key = PrivateKeyDer::from_pem_file(&files.key)
        .map_err(|e| bad("tls.key", format!("{}: {e}", files.key.display())))?;
    let mut roots = RootCertStore::empty();
    for c in ca {
        roots
            .add(c)
            .map_err(|e| bad("tls.ca", format!("{}: {e}", files.ca.display())))?;
    }
    let roots = Arc::new(roots);
    let clients = WebPkiClientVerifier::builder_with_provider(roots.clone(), provider())
        .allow_unauthenticated()
        .build()
        .map_err(|e| bad("tls.ca", e.to_string()))?;
    let mut server = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| bad("tls", e.to_string()))?
        .with_client_cert_verifier(clients.clone())
        .with_single_cert(chain.clone(), key.clone_key())
        .map_err(|e| bad("tls.key", format!("does not fit tls.cert: {e}")))?;
    server.alpn_protocols = vec![b"http/1.1".to_vec()];
    let members = WebPkiServerVerifier::builder_with_provider(roots, provider())
        .build()
        .map_err(|e| bad("tls.ca", e.to_string()))?;
    Ok(Loaded {
        server: Arc::new(server),
        chain,
        key,
        members,
        clients,
    })
}

impl Tls {
    /// Reads the CA, the certificate and the key; an error names the field and the file.
    pub fn load(files: &TlsFiles) -> Result<Tls, ConfigError> {
        Ok(Tls {
            files: files.clone(),
            loaded: RwLock::new(load(files)?),
            generation: AtomicU64::new(0),
        })
    }

    /// Reads the files again; on an error what was loaded stays in force.
    pub fn reload(&self) -> Result<(), ConfigError> {
        let fresh = load(&self.files)?;
        *self.loaded.write().expect("tls lock") = fresh;
        self.generation.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// How many reloads took effect (a client built on an older one is built again).
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Relaxed)
    }

    /// The server side of new connections.
    pub fn server_config(&self) -> Arc<ServerConfig> {
        self.loaded.read().expect("tls lock").server.clone()
    }

    /// The client side of new connections to member `to`: its answers count only from a server
    /// whose certificate names it ([`MemberServer`]).
    pub fn client_config_for(&self, to: NodeId) -> Result<Arc<ClientConfig>, ConfigError> {
        let loaded = self.loaded.read().expect("tls lock");
        let verifier = MemberServer {
            to,
            inner: loaded.members.clone(),
        };
        let config = ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| bad("tls", e.to_string()))?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(verifier))
            .with_client_auth_cert(loaded.chain.clone(), loaded.key.clone_key())
            .map_err(|e| bad("tls.key", format!("does not fit tls.cert: {e}")))?;
        Ok(Arc::new(config))
    }

    /// Whether a peer request from member `from` may pass, having presented `cert` (`None`:
    /// none): it must name `from` ([`Tls::names_member`]).
    pub fn check_client_cert(&self, cert: Option<&PeerCert>, from: NodeId) -> Result<(), ApiError> {
        match cert {
            None => Err(ApiError::unauthorized(
                "missing_client_cert",
                "a peer request needs a client certificate of the cluster (TLS)",
            )),
            Some(c) if !self.names_member(c, from) => Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "wrong_client_cert",
                format!(
                    "the client certificate does not name member {from} ({})",
                    member_name(from)
                ),
            )),
            Some(_) => Ok(()),
        }
    }

    /// Whether `cert` chains to the cluster CA in force (through the intermediates it
    /// presented) and names member `id` ([`member_name`]), and no wildcard lets it name every
    /// member. A connection's certificate is checked once for the member it names, and again
    /// after each reload (a CA replaced to cut a member off then refuses its open connections).
    pub fn names_member(&self, cert: &PeerCert, id: NodeId) -> bool {
        self.names_member_at(cert, id, std::time::Instant::now(), UnixTime::now())
    }

    /// [`Tls::names_member`] at `now` (the cache's clock) and `wall` (the certificates'
    /// validity): a verdict is kept [`PEER_CERT_RECHECK`] at most.
    pub fn names_member_at(
        &self,
        cert: &PeerCert,
        id: NodeId,
        now: std::time::Instant,
        wall: UnixTime,
    ) -> bool {
        let generation = self.generation();
        let mut named = cert.named.lock().expect("peer cert lock");
        if matches!(*named, Some((i, g, at))
            if (i, g) == (id, generation) && now.saturating_duration_since(at) < PEER_CERT_RECHECK)
        {
            return true;
        }
        let Some((ee, intermediates)) = cert.chain.split_first() else {
            return false;
        };
        let members = self.loaded.read().expect("tls lock").members.clone();
        let ok = valid_for(&members, ee, intermediates, &member_name(id), wall).is_ok()
            && !is_wildcard(&members, ee, intermediates);
        *named = ok.then_some((id, generation, now));
        ok
    }

    /// Whether a client certificate (the admin door's) chains to the cluster CA in force and is
    /// valid now: judged on every admin request, so that a reload that removed its CA, or its
    /// expiry, shuts a kept-alive connection out too (issue 48, item 5).
    pub fn admits_client(&self, cert: &PeerCert) -> bool {
        let Some((ee, intermediates)) = cert.chain.split_first() else {
            return false;
        };
        let clients = self.loaded.read().expect("tls lock").clients.clone();
        clients
            .verify_client_cert(ee, intermediates, UnixTime::now())
            .is_ok()
    }

    /// Whether the admin API asks for a client certificate.
    pub fn admin_client_cert(&self) -> bool {
        self.files.admin_client_cert
    }
}

/// A cluster's certificates made in a test: a CA, and members' certificates signed by it or by
/// an intermediate it signed, written as PEM files.
#[cfg(test)]
pub(crate) mod test_pki {
    use std::path::{Path, PathBuf};

    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
        KeyUsagePurpose,
    };

    use crate::config::TlsFiles;

    /// A CA (or an intermediate) that signs.
    pub struct Signer {
        pub cert: rcgen::Certificate,
        pub key: KeyPair,
    }

    pub fn ca(name: &str, parent: Option<&Signer>) -> Signer {
        let key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.distinguished_name.push(DnType::CommonName, name);
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let cert = match parent {
            None => p.self_signed(&key).unwrap(),
            Some(s) => p.signed_by(&key, &s.cert, &s.key).unwrap(),
        };
        Signer { cert, key }
    }

    /// A certificate for `names`, signed by `by`: (certificate PEM, key PEM).
    pub fn issue(names: &[&str], by: &Signer) -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut p = CertificateParams::new(names).unwrap();
        p.distinguished_name.push(DnType::CommonName, "electd test");
        p.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let cert = p.signed_by(&key, &by.cert, &by.key).unwrap();
        (cert.pem(), key.serialize_pem())
    }

    /// Writes `ca`, the chain `chain` (PEM, concatenated) and `key` into `dir` as `name`'s
    /// files.
    pub fn files(dir: &Path, name: &str, ca: &Signer, chain: &str, key: &str) -> TlsFiles {
        let path = |f: &str| -> PathBuf { dir.join(format!("{name}-{f}.pem")) };
        std::fs::write(path("ca"), ca.cert.pem()).unwrap();
        std::fs::write(path("cert"), chain).unwrap();
        std::fs::write(path("key"), key).unwrap();
        TlsFiles {
            ca: path("ca"),
            cert: path("cert"),
            key: path("key"),
            admin_client_cert: false,
        }
    }

    /// The DER certificates of a PEM chain.
    pub fn ders(pem: &str) -> Vec<rustls_pki_types::CertificateDer<'static>> {
        use rustls_pki_types::pem::PemObject;
        rustls_pki_types::CertificateDer::pem_slice_iter(pem.as_bytes())
            .collect::<Result<_, _>>()
            .unwrap()
    }
}

#[cfg(test)]
mod tests {
    use super::test_pki::{ca, ders, files, issue};
    use super::*;

    /// Issue 30: the server of a request for member 2 must show member 2's certificate; the
    /// address alone (every lab certificate names 127.0.0.1) let any member's key answer as
    /// any other. A wildcard that names every member is refused too.
    #[test]
    fn the_server_of_a_request_must_name_the_member_it_is_for() {
        let root = ca("electd test CA", None);
        let mut roots = RootCertStore::empty();
        roots.add(root.cert.der().clone()).unwrap();
        let inner = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider())
            .build()
            .unwrap();
        let to_2 = MemberServer { to: 2, inner };
        let addr = ServerName::try_from("127.0.0.1").unwrap();
        let check = |names: &[&str]| {
            let (pem, _) = issue(names, &root);
            let der = ders(&pem).remove(0);
            to_2.verify_server_cert(&der, &[], &addr, &[], UnixTime::now())
        };
        assert!(check(&["127.0.0.1", &member_name(2)]).is_ok());
        let e = check(&["127.0.0.1", &member_name(3)]).expect_err("member 3 as member 2");
        assert!(e.to_string().contains("does not name member 2"), "{e}");
        assert!(check(&["127.0.0.1"]).is_err(), "the address alone");
        let e = check(&["127.0.0.1", "*.electd.invalid"]).expect_err("a wildcard");
        assert!(e.to_string().contains("wildcard"), "{e}");
        assert!(
            check(&["127.0.0.2", &member_name(2)]).is_err(),
            "another address"
        );
    }

    /// A member's certificate through an intermediate CA names it (the intermediate comes on
    /// the connection, after the member's own); a wildcard does not name any member.
    #[test]
    fn a_peer_named_through_an_intermediate_passes_and_a_wildcard_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let root = ca("electd test CA", None);
        let mid = ca("electd intermediate", Some(&root));
        let (own, own_key) = issue(&["127.0.0.1", &member_name(1)], &root);
        let tls = Tls::load(&files(dir.path(), "n1", &root, &own, &own_key)).unwrap();
        let (leaf, _) = issue(&["127.0.0.1", &member_name(2)], &mid);
        let chain = format!("{leaf}{}", mid.cert.pem());
        assert!(tls.names_member(&PeerCert::new(ders(&chain)), 2));
        assert!(!tls.names_member(&PeerCert::new(ders(&chain)), 3));
        assert!(
            !tls.names_member(&PeerCert::new(ders(&leaf)), 2),
            "without the intermediate it chains to nothing"
        );
        let (wild, _) = issue(&["127.0.0.1", "*.electd.invalid"], &root);
        assert!(!tls.names_member(&PeerCert::new(ders(&wild)), 2));
    }

    /// Issue 30: replacing the CA cuts a member off on the connections it has open too. A
    /// certificate judged once is judged again after a reload; one the new CA did not sign no
    /// longer names its member (the transport then refuses and closes the connection).
    #[test]
    fn after_a_reload_a_connection_is_judged_against_the_new_ca() {
        let dir = tempfile::tempdir().unwrap();
        let old = ca("old CA", None);
        let (own, own_key) = issue(&["127.0.0.1", &member_name(1)], &old);
        let f = files(dir.path(), "n1", &old, &own, &own_key);
        let tls = Tls::load(&f).unwrap();
        let (peer, _) = issue(&["127.0.0.1", &member_name(2)], &old);
        let open = PeerCert::new(ders(&peer));
        assert!(tls.names_member(&open, 2), "before the reload");
        assert!(tls.names_member(&open, 2), "judged once, then remembered");
        let new = ca("new CA", None);
        let (own, own_key) = issue(&["127.0.0.1", &member_name(1)], &new);
        files(dir.path(), "n1", &new, &own, &own_key);
        tls.reload().unwrap();
        assert!(
            !tls.names_member(&open, 2),
            "the old CA's member after the reload"
        );
        let (renewed, _) = issue(&["127.0.0.1", &member_name(2)], &new);
        assert!(tls.names_member(&PeerCert::new(ders(&renewed)), 2));
    }

    /// Issue 48, item 5: a member's certificate that expires on a kept-alive connection is
    /// refused within [`PEER_CERT_RECHECK`] of its end (here: the host's wall clock past the
    /// certificate's end, 4096-01-01). Before, a verdict held until the next reload.
    #[test]
    fn an_expired_certificate_on_an_open_connection_is_refused_within_the_recheck() {
        let dir = tempfile::tempdir().unwrap();
        let root = ca("CA", None);
        let (own, own_key) = issue(&["127.0.0.1", &member_name(1)], &root);
        let tls = Tls::load(&files(dir.path(), "n1", &root, &own, &own_key)).unwrap();
        let (peer, _) = issue(&["127.0.0.1", &member_name(2)], &root);
        let open = PeerCert::new(ders(&peer));
        let t0 = std::time::Instant::now();
        let after_its_end =
            UnixTime::since_unix_epoch(std::time::Duration::from_secs(70_000_000_000));
        assert!(tls.names_member_at(&open, 2, t0, UnixTime::now()));
        let soon = t0 + PEER_CERT_RECHECK / 2;
        assert!(
            tls.names_member_at(&open, 2, soon, after_its_end),
            "within the recheck the verdict stands"
        );
        let later = t0 + PEER_CERT_RECHECK;
        assert!(
            !tls.names_member_at(&open, 2, later, after_its_end),
            "judged again: expired"
        );
    }

    /// Issue 48, item 5: the admin door judges a client's certificate on every request: after a
    /// reload that replaced the CA, a kept-alive connection's certificate of the old CA is
    /// refused (the handshake had taken it).
    #[test]
    fn the_admin_door_refuses_a_certificate_whose_ca_a_reload_removed() {
        let dir = tempfile::tempdir().unwrap();
        let old = ca("old CA", None);
        let (own, own_key) = issue(&["127.0.0.1", &member_name(1)], &old);
        let tls = Tls::load(&files(dir.path(), "n1", &old, &own, &own_key)).unwrap();
        let (admin, _) = issue(&["admin"], &old);
        let open = PeerCert::new(ders(&admin));
        assert!(tls.admits_client(&open), "signed by the CA in force");
        let new = ca("new CA", None);
        let (own, own_key) = issue(&["127.0.0.1", &member_name(1)], &new);
        files(dir.path(), "n1", &new, &own, &own_key);
        tls.reload().unwrap();
        assert!(!tls.admits_client(&open), "its CA is gone");
        let (renewed, _) = issue(&["admin"], &new);
        assert!(tls.admits_client(&PeerCert::new(ders(&renewed))));
    }
}
