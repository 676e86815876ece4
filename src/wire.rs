//! How a peer request travels once the fault layer has let it out: over the network
//! ([`HttpWire`], what a node uses), or, in the lab's simulator, straight into the peer's router
//! in the same process. The transport ([`crate::transport`]) builds the request (headers,
//! proof, body) and judges the answer the same way whichever wire carries it, so the fault
//! layer and the peer checks are the same code in both.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{Request, Response};
use futures_util::future::BoxFuture;

use crate::role::NodeId;
use crate::tls::Tls;

/// Why no answer came back.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// Nothing before the deadline.
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    /// No connection (the peer is down, its port closed, the address unknown).
    #[error("{0}")]
    Unreachable(String),
}

/// Carries one request to member `to` and brings back its response, within `timeout`.
pub trait Wire: Send + Sync + 'static {
    fn send(
        &self,
        to: NodeId,
        req: Request<Bytes>,
        timeout: Duration,
    ) -> BoxFuture<'_, Result<Response<Bytes>, WireError>>;
}

/// The members' addresses, self included: the config's `peers`, and every member that a
/// membership change named since (quorum mode), and at most [`MAX_STRANGERS`] senders that no
/// membership this node applied names yet (learned from their authenticated requests).
/// Shared by the transport and its wire. In quorum mode it follows the log: a member removed is
/// forgotten ([`AddressBook::keep_only`]), so the book never outgrows the membership by more
/// than the strangers' cap, whoever holds the secret.
#[derive(Debug, Default)]
pub struct AddressBook {
    book: std::sync::RwLock<BTreeMap<NodeId, String>>,
    /// The ids in the book learned from a request, not from a membership.
    strangers: std::sync::Mutex<std::collections::BTreeSet<NodeId>>,
}

/// How many senders no applied membership names the book holds at once (a member added while
/// this node was cut off, before its log catches up, is one).
pub const MAX_STRANGERS: usize = 16;

impl AddressBook {
    pub fn new(peers: BTreeMap<NodeId, String>) -> Arc<AddressBook> {
        Arc::new(AddressBook {
            book: std::sync::RwLock::new(peers),
            strangers: std::sync::Mutex::new(Default::default()),
        })
    }

    pub fn get(&self, id: NodeId) -> Option<String> {
        self.book.read().expect("address book").get(&id).cloned()
    }

    pub fn contains(&self, id: NodeId) -> bool {
        self.book.read().expect("address book").contains_key(&id)
    }

    /// Records `addr` for `id` (a member added, or one whose address changed).
    pub fn learn(&self, id: NodeId, addr: &str) {
        self.strangers.lock().expect("strangers").remove(&id);
        let mut book = self.book.write().expect("address book");
        if book.get(&id).map(String::as_str) != Some(addr) {
            tracing::info!(peer = id, addr, "peer address learned from the membership");
            book.insert(id, addr.to_string());
        }
    }

    /// Records `addr` for `id`, a sender no membership this node applied names (it learned
    /// it from the sender's authenticated request), unless [`MAX_STRANGERS`] such are held:
    /// false then.
    pub fn learn_sender(&self, id: NodeId, addr: &str) -> bool {
        let mut strangers = self.strangers.lock().expect("strangers");
        if !strangers.contains(&id) && strangers.len() >= MAX_STRANGERS {
            return false;
        }
        strangers.insert(id);
        let mut book = self.book.write().expect("address book");
        tracing::info!(peer = id, addr, "peer address learned from its request");
        book.insert(id, addr.to_string());
        true
    }

    /// Keeps only `ids` (the members of the membership in force, this node among them) and
    /// forgets the strangers; returns the ids forgotten.
    pub fn keep_only(&self, ids: &std::collections::BTreeSet<NodeId>) -> Vec<NodeId> {
        self.strangers.lock().expect("strangers").clear();
        let mut book = self.book.write().expect("address book");
        let gone: Vec<NodeId> = book
            .keys()
            .copied()
            .filter(|id| !ids.contains(id))
            .collect();
        for id in &gone {
            book.remove(id);
        }
        gone
    }

    /// Every address in the book.
    pub fn addrs(&self) -> Vec<String> {
        self.book
            .read()
            .expect("address book")
            .values()
            .cloned()
            .collect()
    }

    /// The id that has `addr`, if any.
    pub fn id_of(&self, addr: &str) -> Option<NodeId> {
        let book = self.book.read().expect("address book");
        book.iter().find(|(_, a)| *a == addr).map(|(id, _)| *id)
    }
}

/// The network: HTTP to each member's `addr`, from the IP this node listens on (unless it
/// listens on all addresses), so that kernel-level faults can tell nodes apart; with TLS,
/// HTTPS, presenting this node's certificate and taking answers to a request for member N
/// only from a server whose certificate names member N ([`crate::tls::MemberServer`]).
pub struct HttpWire {
    listen: SocketAddr,
    connect_timeout: Duration,
    tls: Option<Arc<Tls>>,
    /// A client for each member (its own connections, its own verifier), and the TLS
    /// generation it was built on (built again after a reload).
    clients: RwLock<BTreeMap<NodeId, (u64, reqwest::Client)>>,
    peers: Arc<AddressBook>,
}

impl HttpWire {
    pub fn new(
        listen: SocketAddr,
        peers: Arc<AddressBook>,
        connect_timeout: Duration,
        tls: Option<Arc<Tls>>,
    ) -> HttpWire {
        HttpWire {
            listen,
            connect_timeout,
            tls,
            clients: RwLock::new(BTreeMap::new()),
            peers,
        }
    }

    /// The client for member `to` under the TLS files in force; the clients of members no
    /// longer in the address book are dropped with their connections.
    fn client(&self, to: NodeId) -> Result<reqwest::Client, WireError> {
        let generation = self.tls.as_ref().map_or(0, |t| t.generation());
        {
            let clients = self.clients.read().expect("wire client lock");
            if let Some((_, c)) = clients.get(&to).filter(|(g, _)| *g == generation) {
                return Ok(c.clone());
            }
        }
        let tls = match &self.tls {
            Some(t) => Some(
                t.client_config_for(to)
                    .map_err(|e| WireError::Unreachable(format!("no TLS client: {e}")))?,
            ),
            None => None,
        };
        let fresh = build(self.listen, self.connect_timeout, tls);
        let mut clients = self.clients.write().expect("wire client lock");
        clients.retain(|id, _| self.peers.contains(*id));
        clients.insert(to, (generation, fresh.clone()));
        Ok(fresh)
    }

    async fn round_trip(
        &self,
        to: NodeId,
        req: Request<Bytes>,
        timeout: Duration,
    ) -> Result<Response<Bytes>, WireError> {
        let addr = self
            .peers
            .get(to)
            .ok_or_else(|| WireError::Unreachable(format!("node {to} has no address")))?;
        let (parts, body) = req.into_parts();
        let path = parts
            .uri
            .path_and_query()
            .map(|p| p.as_str())
            .unwrap_or("/");
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        let res = self
            .client(to)?
            .request(parts.method, format!("{scheme}://{addr}{path}"))
            .headers(parts.headers)
            .body(body)
            .timeout(timeout)
            .send()
            .await
            .map_err(|e| classify(e, timeout))?;
        let mut out = Response::builder().status(res.status());
        if let Some(h) = out.headers_mut() {
            *h = res.headers().clone();
        }
        let bytes = read_answer(res, timeout).await?;
        Ok(out.body(bytes).expect("a response from parts"))
    }
}

/// The most a peer's answer may be: read before its MAC is checked (transport.rs,
/// `check_answer`), by anyone who can answer in the peer's place on a hostile network. Every
/// answer of electd's peer protocol is small (a vote, the result of an append or a snapshot, a
/// hello's verdict: what the requests carry is what may be large): a megabyte is room enough,
/// and a bound (issue 48, item 3: answers were read whole, whatever their size).
pub const PEER_ANSWER_LIMIT: usize = crate::error::BODY_LIMIT;

/// The body of `res`, chunk by chunk, refused once it passes [`PEER_ANSWER_LIMIT`] (announced
/// or read): the connection is dropped, the caller sees an unreachable peer.
async fn read_answer(mut res: reqwest::Response, timeout: Duration) -> Result<Bytes, WireError> {
    let too_large = || {
        WireError::Unreachable(format!(
            "the answer is larger than {PEER_ANSWER_LIMIT} bytes: refused unread"
        ))
    };
    if res
        .content_length()
        .is_some_and(|n| n > PEER_ANSWER_LIMIT as u64)
    {
        return Err(too_large());
    }
    let mut out = Vec::new();
    while let Some(chunk) = res.chunk().await.map_err(|e| classify(e, timeout))? {
        if out.len() + chunk.len() > PEER_ANSWER_LIMIT {
            return Err(too_large());
        }
        out.extend_from_slice(&chunk);
    }
    Ok(Bytes::from(out))
}

/// Idle connections kept open to each member (one client a member: each its own pool); the
/// descriptors they take are kept free beside `max_connections` (src/connections.rs).
pub const PEER_POOL_IDLE: usize = 8;

/// A client with electd's settings (idle connections dropped below the server's cut-off).
fn build(
    listen: SocketAddr,
    connect_timeout: Duration,
    tls: Option<Arc<rustls::ClientConfig>>,
) -> reqwest::Client {
    let mut builder = electd_client::http_client()
        .pool_max_idle_per_host(PEER_POOL_IDLE)
        .connect_timeout(connect_timeout);
    if !listen.ip().is_unspecified() {
        builder = builder.local_address(listen.ip());
    }
    if let Some(tls) = tls {
        builder = builder.use_preconfigured_tls((*tls).clone());
    }
    builder.build().expect("reqwest client builds")
}

fn classify(e: reqwest::Error, timeout: Duration) -> WireError {
    if e.is_timeout() {
        return WireError::Timeout(timeout);
    }
    // With its causes: "error sending request" alone does not say that a certificate named
    // another member.
    WireError::Unreachable(electd_client::causes(&e))
}

impl Wire for HttpWire {
    fn send(
        &self,
        to: NodeId,
        req: Request<Bytes>,
        timeout: Duration,
    ) -> BoxFuture<'_, Result<Response<Bytes>, WireError>> {
        Box::pin(self.round_trip(to, req, timeout))
    }
}
