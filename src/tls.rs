//! TLS for the API and the peer RPC (docs/security.md, "TLS"), with rustls on ring: one port, one
//! certificate per node, one cluster CA.
//!
//! - **Server.** Every connection is TLS. A client may present a certificate; one that does not
//!   chain to the cluster CA fails the handshake. The certificate a connection presented rides
//!   on each of its requests as a [`ClientCert`] (`src/server.rs`).
//! - **Peers.** A peer request must come with a certificate that names its sender's member id:
//!   the DNS name [`member_name`] (`member-ID.electd.invalid`) among its subject alternative
//!   names, checked against `x-electd-from` by the transport's guard (`src/transport.rs`). A
//!   node's requests to its peers present its own certificate and verify theirs against the
//!   cluster CA and the peer's address.
//! - **API.** Clients verify the node's certificate against the cluster CA (`--cacert`); with
//!   `tls.admin_client_cert` the admin API also asks for a client certificate signed by it.
//! - **Reload.** [`Tls::reload`] reads the three files again (SIGHUP): new connections use the
//!   new certificate and CA, open ones go on with the old, and the node's claim never notices.
//!   A reload that fails (a missing file, a key that does not match) keeps what was loaded.
//!
//! TLS authenticates both ends and encrypts, and a replayed TLS record fails its MAC, so the
//! peer HMAC (`src/auth.rs`) is not needed with it; a cluster may run both.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use rustls::client::danger::ServerCertVerifier;
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};

use crate::config::{ConfigError, TlsFiles};
use crate::role::NodeId;

/// The DNS name by which a certificate names member `id`.
pub fn member_name(id: NodeId) -> String {
    format!("member-{id}.electd.invalid")
}

/// The certificate the client of a connection presented (`None`: none, or no TLS), in the
/// extensions of each request on it.
#[derive(Clone, Debug, Default)]
pub struct ClientCert(pub Option<Arc<PeerCert>>);

/// A certificate a connection presented, and the member it was found to name: checked on the
/// connection's first peer request, not again on each heartbeat after it.
#[derive(Debug)]
pub struct PeerCert {
    pub der: CertificateDer<'static>,
    named: std::sync::OnceLock<NodeId>,
}

impl PeerCert {
    pub fn new(der: CertificateDer<'static>) -> PeerCert {
        PeerCert {
            der,
            named: std::sync::OnceLock::new(),
        }
    }
}

/// What one load of the files made.
struct Loaded {
    server: Arc<ServerConfig>,
    client: Arc<ClientConfig>,
    /// Checks that a certificate chains to the CA and names a member.
    members: Arc<WebPkiServerVerifier>,
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
        .with_client_cert_verifier(clients)
        .with_single_cert(chain.clone(), key.clone_key())
        .map_err(|e| bad("tls.key", format!("does not fit tls.cert: {e}")))?;
    server.alpn_protocols = vec![b"http/1.1".to_vec()];
    let client = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| bad("tls", e.to_string()))?
        .with_root_certificates(roots.clone())
        .with_client_auth_cert(chain, key)
        .map_err(|e| bad("tls.key", format!("does not fit tls.cert: {e}")))?;
    let members = WebPkiServerVerifier::builder_with_provider(roots, provider())
        .build()
        .map_err(|e| bad("tls.ca", e.to_string()))?;
    Ok(Loaded {
        server: Arc::new(server),
        client: Arc::new(client),
        members,
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

    /// The client side of new connections to peers.
    pub fn client_config(&self) -> Arc<ClientConfig> {
        self.loaded.read().expect("tls lock").client.clone()
    }

    /// Whether `cert` chains to the cluster CA and names member `id` ([`member_name`]); a
    /// connection's certificate is checked once for the member it names.
    pub fn names_member(&self, cert: &PeerCert, id: NodeId) -> bool {
        if cert.named.get() == Some(&id) {
            return true;
        }
        let Ok(name) = ServerName::try_from(member_name(id)) else {
            return false;
        };
        let members = self.loaded.read().expect("tls lock").members.clone();
        let named = members
            .verify_server_cert(&cert.der, &[], &name, &[], UnixTime::now())
            .is_ok();
        if named {
            let _ = cert.named.set(id);
        }
        named
    }

    /// Whether the admin API asks for a client certificate.
    pub fn admin_client_cert(&self) -> bool {
        self.files.admin_client_cert
    }
}
