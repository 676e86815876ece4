//! The one peer transport every mode uses: HTTP requests to `/peer/...` on the other members,
//! with the fault layer ([`crate::faults`]) inside it on both the sending and the receiving side.
//!
//! Sending side: [`Transport::call`]. Receiving side: the [`guard`] middleware, mounted on every
//! `/peer/` route, which checks that the request belongs to this cluster and comes from a member,
//! applies the fault set, and records when the peer was last heard from.
//!
//! Every request carries `x-electd-cluster` (the cluster id) and `x-electd-from` (the sender's id),
//! and, when a cluster secret is configured, its HMAC proof ([`crate::auth`]), checked here too.

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::time::Instant;

use crate::auth::{
    answer_header, parse_answer_header, wall_ms, Answer, PeerAuth, Proof, Signed,
    CLOCK_SKEW_WARN_MS, HDR_ANSWER, HDR_EPOCH, HDR_PROOF, HDR_TS,
};
use crate::clock::Clock;
use crate::config::Config;
use crate::counters::Counters;
use crate::error::{ApiError, BODY_LIMIT};
use crate::faults::{Faults, Verdict};
use crate::role::NodeId;
use crate::tls::{ClientCert, Tls};
use crate::wire::{AddressBook, HttpWire, Wire, WireError};

pub const HDR_CLUSTER: &str = "x-electd-cluster";
pub const HDR_FROM: &str = "x-electd-from";
pub use crate::auth::HDR_ADDR;
/// Set on a response that the fault layer lost: the client treats it as silence.
pub const HDR_LOST: &str = "x-electd-lost";
/// The most a peer request's body may be, unless its path was given more
/// ([`Transport::allow_body`]): read before its MAC is checked, so kept small (the cluster id
/// and member ids are not secret, so anyone can send one that gets that far).
pub const PEER_BODY_LIMIT: usize = 64 << 10;

/// Why a peer request failed.
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    /// No connection could be made (the peer is down or its port is closed).
    #[error("peer {0} unreachable: {1}")]
    Unreachable(NodeId, String),
    /// No answer before the deadline (lost by a fault, a partition, a paused peer…).
    #[error("peer {0} did not answer within {1:?}")]
    Timeout(NodeId, Duration),
    /// The peer answered with an error status (refused the request).
    #[error("peer {0} refused the request: {1} {2}")]
    Refused(NodeId, StatusCode, String),
    /// The peer's answer could not be decoded.
    #[error("peer {0} sent an undecodable answer: {1}")]
    Decode(NodeId, String),
    /// The target is not a member of the cluster.
    #[error("node {0} is not a member")]
    UnknownPeer(NodeId),
    /// The answer carries no valid MAC of the member it was sent to (src/auth.rs): forged,
    /// replayed or mangled on the way; it is no answer.
    #[error("peer {0}'s answer is not signed by it (forged or replayed on the way)")]
    UnsignedAnswer(NodeId),
}

/// The peer transport of one node.
pub struct Transport {
    id: NodeId,
    cluster_id: String,
    /// The members and their addresses (self included).
    pub peers: Arc<AddressBook>,
    wire: Arc<dyn Wire>,
    /// Signs and verifies peer requests when a cluster secret is configured.
    auth: Option<PeerAuth>,
    /// With TLS, a peer request must come with a certificate that names its sender.
    tls: Option<Arc<Tls>>,
    /// The lab's flaw `accept-unsigned-answers` (src/engine.rs, `Flaws`): answers are taken
    /// without their MAC checked, as before they were signed. Always false in a node.
    pub takes_unsigned_answers: bool,
    /// Peers an answer without a valid MAC came from (logged once each).
    unsigned_from: std::sync::Mutex<std::collections::BTreeSet<NodeId>>,
    /// This node's address as its peers know it (sent in [`HDR_ADDR`]).
    own_addr: String,
    /// Quorum mode: a sender not in the address book that names its address is learned.
    learns_senders: bool,
    pub faults: Arc<Faults>,
    pub counters: Arc<Counters>,
    /// Where the instants of contact are read.
    clock: Arc<dyn Clock>,
    /// Peer paths whose bodies may be larger than [`PEER_BODY_LIMIT`], and how large.
    body_limits: std::sync::RwLock<Vec<(String, usize)>>,
    /// The bytes of bodies read before their request is authenticated (connections.rs).
    pre_auth: crate::connections::PreAuthBodies,
}

impl Transport {
    /// Builds the transport. Outgoing connections are made from the IP this node listens on
    /// (unless it listens on all addresses), so that kernel-level faults can tell nodes apart.
    pub fn new(
        cfg: &Config,
        faults: Arc<Faults>,
        counters: Arc<Counters>,
        clock: Arc<dyn Clock>,
        tls: Option<Arc<Tls>>,
    ) -> Transport {
        let peers = AddressBook::new(cfg.peers.iter().map(|p| (p.id, p.addr.clone())).collect());
        let connect_timeout = Duration::from_millis(cfg.timing.follower_lease_ms / 2);
        let wire = HttpWire::new(
            cfg.listen_addr(),
            peers.clone(),
            connect_timeout,
            tls.clone(),
        );
        Transport {
            tls,
            ..Transport::on(cfg, peers, faults, counters, Arc::new(wire), clock)
        }
    }

    /// The transport over another wire (the lab's simulator carries requests in memory).
    pub fn with_wire(
        cfg: &Config,
        faults: Arc<Faults>,
        counters: Arc<Counters>,
        wire: Arc<dyn Wire>,
        clock: Arc<dyn Clock>,
    ) -> Transport {
        Transport::on(
            cfg,
            AddressBook::new(cfg.peers.iter().map(|p| (p.id, p.addr.clone())).collect()),
            faults,
            counters,
            wire,
            clock,
        )
    }

    fn on(
        cfg: &Config,
        peers: Arc<AddressBook>,
        faults: Arc<Faults>,
        counters: Arc<Counters>,
        wire: Arc<dyn Wire>,
        clock: Arc<dyn Clock>,
    ) -> Transport {
        Transport {
            id: cfg.id,
            cluster_id: cfg.cluster_id.clone(),
            peers,
            wire,
            auth: cfg
                .cluster_secret
                .clone()
                .map(|k| PeerAuth::rolling(k, cfg.cluster_secret_accepted.clone())),
            tls: None,
            own_addr: cfg.peer_addr(cfg.id).unwrap_or_default().to_string(),
            unsigned_from: Default::default(),
            takes_unsigned_answers: false,
            learns_senders: cfg.mode == electd_client::Mode::Quorum,
            faults,
            counters,
            clock,
            body_limits: Default::default(),
            pre_auth: Default::default(),
        }
    }

    pub fn id(&self) -> NodeId {
        self.id
    }

    /// Requests to `path` may carry bodies of up to `limit` bytes (a snapshot, say).
    pub fn allow_body(&self, path: &str, limit: usize) {
        let mut limits = self.body_limits.write().expect("body limits lock");
        limits.retain(|(p, _)| p != path);
        limits.push((path.to_string(), limit));
    }

    /// The most a request to `path` may carry.
    fn body_limit(&self, path: &str) -> usize {
        let limits = self.body_limits.read().expect("body limits lock");
        limits
            .iter()
            .find(|(p, _)| p == path)
            .map_or(PEER_BODY_LIMIT, |(_, n)| *n)
    }

    /// Sends `req` as JSON to `to` at `path` and decodes the JSON answer, all within `timeout`.
    /// `kind` is the message type for the counters. A message lost by the fault layer, on
    /// either side, costs the caller the whole timeout, as a real loss would.
    pub async fn call<Req: Serialize, Resp: DeserializeOwned>(
        &self,
        to: NodeId,
        path: &str,
        kind: &'static str,
        req: &Req,
        timeout: Duration,
    ) -> Result<Resp, TransportError> {
        let deadline = Instant::now() + timeout;
        if !self.peers.contains(to) {
            return Err(TransportError::UnknownPeer(to));
        }
        self.counters.sent(kind);
        let lost = || async {
            tokio::time::sleep_until(deadline).await;
            TransportError::Timeout(to, timeout)
        };
        for verdict in [self.faults.on_send(to), self.faults.on_send_path(to, path)] {
            match verdict {
                Verdict::Drop => return Err(lost().await),
                Verdict::Deliver(delay) if !delay.is_zero() => tokio::time::sleep(delay).await,
                Verdict::Deliver(_) => {}
            }
        }
        let body = Bytes::from(serde_json::to_vec(req).expect("peer message serialises"));
        // With a cluster secret the first request to a peer (after it or we started) is signed
        // for an epoch it no longer has: its answer names the current one, and the request is
        // signed again and sent once more (src/auth.rs).
        let (mut res, signed_for) = self.send_once(to, path, &body, deadline, timeout).await?;
        if let Some(auth) = &self.auth {
            // The epoch of a signed answer (send_once took no other).
            if let Some(epoch) = answer_epoch(res.headers()).filter(|e| *e != 0) {
                auth.learn_epoch(to, epoch);
                if res.status() == StatusCode::UNAUTHORIZED && epoch != signed_for {
                    res = self.send_once(to, path, &body, deadline, timeout).await?.0;
                    if let Some(e) = answer_epoch(res.headers()).filter(|e| *e != 0) {
                        auth.learn_epoch(to, e);
                    }
                }
            }
        }
        // An answer is contact too (as in etcd and hashicorp/raft): a leader hears its
        // followers through the answers to its own requests.
        self.counters.answered(to, self.clock.mono_ns());
        let status = res.status();
        let bytes = res.into_body();
        if !status.is_success() {
            let text = String::from_utf8_lossy(&bytes).chars().take(300).collect();
            return Err(TransportError::Refused(to, status, text));
        }
        serde_json::from_slice(&bytes).map_err(|e| TransportError::Decode(to, e.to_string()))
    }

    /// The request that carries `body` to `to` at `path`, stamped now and, with a cluster
    /// secret, signed for `to`'s epoch: with that epoch (0 without a secret) and the request's
    /// MAC (empty without), which `to`'s answer must carry.
    fn signed_request(
        &self,
        to: NodeId,
        path: &str,
        body: &Bytes,
    ) -> (axum::http::Request<Bytes>, u64, String) {
        let ts_ms = wall_ms();
        let mut builder = axum::http::Request::post(path)
            .header(HDR_CLUSTER, &self.cluster_id)
            .header(HDR_FROM, self.id.to_string())
            .header(HDR_ADDR, self.own_addr.as_str())
            // No content type: the peers' handlers read JSON bytes whatever it says, and it
            // would cost every exchange its bytes (as the answer's, removed in `guard`).
            .header(HDR_TS, ts_ms);
        let mut signed_for = 0;
        let mut request_mac = String::new();
        if let Some(auth) = &self.auth {
            signed_for = auth.epoch_of(to);
            let proof = auth.sign(
                &self.cluster_id,
                self.id,
                &self.own_addr,
                signed_for,
                "POST",
                path,
                body,
                ts_ms,
            );
            request_mac = proof.mac_hex.clone();
            builder = builder.header(HDR_PROOF, proof.header());
        }
        let request = builder
            .body(body.clone())
            .expect("a peer request from valid parts");
        (request, signed_for, request_mac)
    }

    /// Sends one signed copy of `body` to `to` and gives back its answer and the epoch of `to`
    /// it was signed for (0 without a secret), or why there was none: the fault layer's losses
    /// cost the caller the time left until `deadline`.
    async fn send_once(
        &self,
        to: NodeId,
        path: &str,
        body: &Bytes,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<(axum::http::Response<Bytes>, u64), TransportError> {
        let lost = || async {
            tokio::time::sleep_until(deadline).await;
            TransportError::Timeout(to, timeout)
        };
        let remaining = deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            return Err(TransportError::Timeout(to, timeout));
        }
        let (request, signed_for, request_mac) = self.signed_request(to, path, body);
        // The forger on the link (src/faults.rs): the request withheld (one a path delivered
        // late), and the answer made up, where the wire would have returned it.
        if let Some(forged) = self.faults.forge_answer(to, path, body) {
            if self.faults.hold(to, path) {
                let (wire, faults, path) =
                    (self.wire.clone(), self.faults.clone(), path.to_string());
                tokio::spawn(async move {
                    tokio::time::sleep(crate::faults::HOLD).await;
                    let _ = tokio::time::timeout(timeout, wire.send(to, request, timeout)).await;
                    faults.delivered_late(to, &path);
                });
            }
            self.take_answer(to, &forged, &request_mac)?;
            return Ok((forged, signed_for));
        }
        let res = match tokio::time::timeout(remaining, self.wire.send(to, request, remaining))
            .await
        {
            Ok(Ok(r)) => r,
            Ok(Err(WireError::Timeout(_))) | Err(_) => {
                return Err(TransportError::Timeout(to, timeout))
            }
            Ok(Err(WireError::Unreachable(e))) => return Err(TransportError::Unreachable(to, e)),
        };
        if res.headers().contains_key(HDR_LOST) {
            return Err(lost().await);
        }
        // The response is a message from `to`: `block_from` and the drop rate apply to it as
        // to a request from `to`.
        if self.faults.on_receive(to) == Verdict::Drop || self.faults.answer_lost(to, path) {
            return Err(lost().await);
        }
        if !self.faults.hold_answer(to, path, deadline).await {
            return Err(lost().await);
        }
        self.faults.record_answer(to, path, &res);
        self.take_answer(to, &res, &request_mac)?;
        Ok((res, signed_for))
    }

    /// Whether `res` is taken as `to`'s answer: with a cluster secret, if it carries `to`'s
    /// MAC over this request ([`Transport::check_answer`]; not with the lab's flaw
    /// `accept-unsigned-answers`, which takes every answer as it comes, as before bedd083).
    fn take_answer(
        &self,
        to: NodeId,
        res: &axum::http::Response<Bytes>,
        request_mac: &str,
    ) -> Result<(), TransportError> {
        match &self.auth {
            Some(_) if self.takes_unsigned_answers => Ok(()),
            Some(auth) => self.check_answer(auth, to, res, request_mac),
            None => Ok(()),
        }
    }

    /// Whether `res` is `to`'s own answer to the request whose MAC was `request_mac` (src/auth.rs,
    /// "Answers are signed too"); if not, it is no answer: counted
    /// (`rejected_peer_requests.answer_bad_signature`) and logged, once a peer.
    fn check_answer(
        &self,
        auth: &PeerAuth,
        to: NodeId,
        res: &axum::http::Response<Bytes>,
        request_mac: &str,
    ) -> Result<(), TransportError> {
        let proof = res
            .headers()
            .get(HDR_ANSWER)
            .and_then(|v| parse_answer_header(v.to_str().ok()?));
        let verified = proof.is_some_and(|(epoch, mac)| {
            let answer = Answer {
                cluster: &self.cluster_id,
                from: to,
                epoch,
                status: res.status().as_u16(),
                request_mac,
                body: res.body(),
            };
            auth.verify_answer(&answer, mac)
        });
        if verified {
            return Ok(());
        }
        self.counters.rejected("answer_bad_signature");
        if self.unsigned_from.lock().expect("unsigned lock").insert(to) {
            tracing::warn!(
                peer = to,
                status = res.status().as_u16(),
                "an answer from peer {to} carries no valid MAC of it: taken as no answer \
                 (forged or replayed on the way, or the peer has another cluster secret); \
                 logged once"
            );
        }
        Err(TransportError::UnsignedAnswer(to))
    }

    /// Keeps only `ids` in the address book (the membership in force; quorum mode) and forgets
    /// the sessions and epochs of the peers it drops.
    pub fn keep_members(&self, ids: &std::collections::BTreeSet<NodeId>) {
        let gone = self.peers.keep_only(ids);
        if gone.is_empty() {
            return;
        }
        tracing::info!(?gone, "peers no longer in the membership forgotten");
        if let Some(auth) = &self.auth {
            auth.forget(&gone);
        }
    }

    /// The address a sender names in [`HDR_ADDR`], when this node learns senders from it.
    fn sender_addr<'a>(&self, headers: &'a HeaderMap) -> Option<&'a str> {
        let addr = headers.get(HDR_ADDR)?.to_str().ok()?;
        (self.learns_senders && crate::config::is_host_port(addr)).then_some(addr)
    }

    /// Checks a request's peer headers; returns the sender's id or the reason to refuse it.
    fn check_headers(&self, headers: &HeaderMap) -> Result<NodeId, ApiError> {
        let cluster = headers.get(HDR_CLUSTER).and_then(|v| v.to_str().ok());
        match cluster {
            None => {
                return Err(ApiError::unauthorized(
                    "missing_cluster",
                    "peer request names no cluster",
                ))
            }
            Some(c) if c != self.cluster_id => {
                return Err(ApiError::unauthorized(
                    "wrong_cluster",
                    "peer request belongs to another cluster",
                ))
            }
            Some(_) => {}
        }
        let from = headers
            .get(HDR_FROM)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<NodeId>().ok())
            .ok_or_else(|| {
                ApiError::unauthorized("missing_sender", "peer request names no sender")
            })?;
        if !self.peers.contains(from) && from != self.id && self.sender_addr(headers).is_some() {
            // Learned once the request proves itself (`authenticate`).
            return Ok(from);
        }
        if !self.peers.contains(from) || from == self.id {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "unknown_peer",
                format!("node {from} is not a member of this cluster"),
            ));
        }
        Ok(from)
    }
}

impl Transport {
    /// Checks the cluster, the sender, (with TLS) the certificate its connection presented and
    /// (with a secret) the request's proof; gives back the sender, the request, its body
    /// buffered because the proof covers it, and its MAC if it held ([`HeldMac`]).
    async fn authenticate(
        &self,
        req: Request<Body>,
    ) -> Result<(NodeId, Request<Body>, HeldMac), (ApiError, HeldMac)> {
        let from = self.check_headers(req.headers()).map_err(|e| (e, None))?;
        let (from, req, held) = self.authenticated(from, req).await?;
        if !self.peers.contains(from) {
            if let Some(addr) = self.sender_addr(req.headers()) {
                if !self.peers.learn_sender(from, addr) {
                    // Its MAC held: the refusal is signed (a member's, not a forger's).
                    return Err((
                        ApiError::new(
                            StatusCode::FORBIDDEN,
                            "unknown_peer",
                            format!(
                                "node {from} is not a member of this node's membership, and \
                                 {} such senders are known already",
                                crate::wire::MAX_STRANGERS
                            ),
                        ),
                        held,
                    ));
                }
            }
        }
        Ok((from, req, held))
    }

    /// A peer request's body, read up to its path's limit before anything else is made of it,
    /// within its share of the bodies read before authentication: the permit is held until the
    /// request was authenticated or refused ([`crate::connections::PreAuthBodies`]).
    async fn read_body(
        &self,
        parts: &axum::http::request::Parts,
        body: Body,
    ) -> Result<(Bytes, tokio::sync::OwnedSemaphorePermit), ApiError> {
        let limit = self.body_limit(parts.uri.path());
        let announced = parts
            .headers
            .get(axum::http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        if announced.is_some_and(|n| n > limit as u64) {
            return Err(ApiError::too_large_for(limit));
        }
        let from_member = parts
            .extensions
            .get::<crate::connections::FromMemberHost>()
            .is_some();
        let need = announced.map_or(limit, |n| n as usize);
        let Some(permit) = self.pre_auth.take(from_member, need).await else {
            self.counters.rejected("busy");
            return Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "busy",
                "too many peer request bodies are being read before authentication; try again",
            ));
        };
        let bytes = axum::body::to_bytes(body, limit)
            .await
            .map_err(|_| ApiError::too_large_for(limit))?;
        Ok((bytes, permit))
    }

    /// [`Transport::authenticate`] past the headers: the certificate and the proof. A refusal
    /// carries the request's MAC if it held (a stale epoch, a replay): its answer is signed.
    async fn authenticated(
        &self,
        from: NodeId,
        req: Request<Body>,
    ) -> Result<(NodeId, Request<Body>, HeldMac), (ApiError, HeldMac)> {
        let unsigned = |e: ApiError| (e, None);
        if let Some(tls) = &self.tls {
            let cert = req.extensions().get::<ClientCert>();
            tls.check_client_cert(cert.and_then(|c| c.0.as_deref()), from)
                .map_err(unsigned)?;
        }
        let (parts, body) = req.into_parts();
        // The permit goes when this function returns: the request is authenticated or refused.
        let (bytes, _pre_auth) = self.read_body(&parts, body).await.map_err(unsigned)?;
        let Some(auth) = &self.auth else {
            return Ok((from, Request::from_parts(parts, Body::from(bytes)), None));
        };
        let proof = header_u64(&parts.headers, HDR_TS)
            .and_then(|ts_ms| Proof::parse(parts.headers.get(HDR_PROOF)?.to_str().ok()?, ts_ms));
        let Some(proof) = proof else {
            let e = crate::auth::AuthError::Missing;
            return Err(unsigned(ApiError::unauthorized(e.reason(), e.to_string())));
        };
        let path = parts
            .uri
            .path_and_query()
            .map(|p| p.as_str())
            .unwrap_or("/");
        let addr = parts
            .headers
            .get(HDR_ADDR)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        let signed = Signed {
            cluster: &self.cluster_id,
            from,
            addr,
            method: parts.method.as_str(),
            path,
            epoch: proof.epoch,
            session: proof.session,
            seq: proof.seq,
            ts_ms: proof.ts_ms,
            body: &bytes,
        };
        let mac = proof.mac_hex;
        let admit = || self.admits(from, &parts.headers);
        if let Err(e) = auth.verify_admitted(&signed, &mac, Instant::now(), admit) {
            let held = (e != crate::auth::AuthError::BadSignature).then_some(mac);
            return Err((refusal(e), held));
        }
        Ok((
            from,
            Request::from_parts(parts, Body::from(bytes)),
            Some(mac),
        ))
    }
}

impl Transport {
    /// Whether this node keeps anything for sender `from` (a replay window): a member, or a
    /// stranger within the cap, learned here once its MAC held (issue 48, item 3).
    fn admits(&self, from: NodeId, headers: &HeaderMap) -> bool {
        self.peers.contains(from)
            || self
                .sender_addr(headers)
                .is_some_and(|a| self.peers.learn_sender(from, a))
    }
}

/// The answer to a request that failed authentication: 401 with the reason, or 403 for a
/// sender that is no member, and no stranger this node may learn.
fn refusal(e: crate::auth::AuthError) -> ApiError {
    match e {
        crate::auth::AuthError::Unadmitted => ApiError::new(
            StatusCode::FORBIDDEN,
            e.reason(),
            format!(
                "{e} ({} such senders are known already)",
                crate::wire::MAX_STRANGERS
            ),
        ),
        _ => ApiError::unauthorized(e.reason(), e.to_string()),
    }
}

/// The MAC (hex, as it travelled) of a peer request whose MAC held, whatever its answer: the
/// answer is signed over it (src/auth.rs). `None` for a request without a valid MAC, or on a
/// node without a cluster secret.
type HeldMac = Option<String>;

/// A header's value as an unsigned integer, if it is one.
fn header_u64(headers: &HeaderMap, name: &str) -> Option<u64> {
    headers.get(name)?.to_str().ok()?.parse().ok()
}

/// The epoch a signed answer names (in [`HDR_ANSWER`]).
fn answer_epoch(headers: &HeaderMap) -> Option<u64> {
    parse_answer_header(headers.get(HDR_ANSWER)?.to_str().ok()?).map(|(epoch, _)| epoch)
}

impl Transport {
    /// `from`'s wall clock read `ts_ms` when it sent a request that arrives now: records how
    /// far it is from ours (network delay included), and says so in the log when it goes past
    /// [`CLOCK_SKEW_WARN_MS`] or comes back within it. Nothing is refused for it: no decision
    /// of electd rests on two wall clocks agreeing (src/auth.rs).
    fn clock_seen(&self, from: NodeId, ts_ms: u64) {
        // In i128: a timestamp from the network may be anything (u64::MAX overflowed i64).
        let offset = (i128::from(ts_ms) - i128::from(wall_ms()))
            .clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64;
        let before = self.counters.clock_offset(from, offset);
        let skewed = |o: i64| o.unsigned_abs() > CLOCK_SKEW_WARN_MS;
        match before {
            Some(b) if skewed(b) == skewed(offset) => {}
            None if !skewed(offset) => {}
            _ if skewed(offset) => tracing::warn!(
                peer = from,
                offset_ms = offset,
                "peer's wall clock is {} ms {} ours (seen in its requests; electd judges leases on \
                 monotonic clocks and goes on, but logs and certificates will disagree)",
                offset.unsigned_abs(),
                if offset > 0 { "ahead of" } else { "behind" }
            ),
            _ => tracing::info!(
                peer = from,
                offset_ms = offset,
                "peer's wall clock agrees with ours again"
            ),
        }
    }
}

/// The id of the peer that sent a request, put into the request's extensions by [`guard`].
#[derive(Clone, Copy, Debug)]
pub struct PeerId(pub NodeId);

fn lost_response() -> Response {
    let mut res = ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "lost_by_fault",
        "message lost by the fault layer",
    )
    .into_response();
    res.headers_mut()
        .insert(HDR_LOST, HeaderValue::from_static("1"));
    res
}

/// Middleware on every `/peer/` route: refuses foreign or unknown senders (counted by reason),
/// applies the fault set to the request and to its response, and records the contact.
pub async fn guard(
    State(t): State<Arc<Transport>>,
    mut req: Request<Body>,
    next: Next,
) -> Response {
    // The forger on the link rewrites the request before this node sees it (src/faults.rs).
    if let Some(from) = header_u64(req.headers(), HDR_FROM) {
        t.faults.rewrite_request(from, req.headers_mut());
    }
    let (mut res, held) = guarded(&t, req, next).await;
    // The sender reads the JSON bytes whatever the type says (src/transport.rs, `send`).
    res.headers_mut().remove(axum::http::header::CONTENT_TYPE);
    let Some(auth) = &t.auth else {
        return res;
    };
    // Every answer names this node's epoch, which the sender signs its requests for: the
    // answer to a request whose MAC held is signed over it (src/auth.rs), the epoch included,
    // in HDR_ANSWER; any other names it in HDR_EPOCH.
    let epoch = auth.epoch();
    let Some(request_mac) = held else {
        res.headers_mut().insert(
            HDR_EPOCH,
            HeaderValue::from_str(&format!("{epoch:016x}")).expect("hex is a header value"),
        );
        return res;
    };
    let (mut parts, body) = res.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, BODY_LIMIT).await else {
        return ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "answer_too_large",
            "the answer could not be signed",
        )
        .into_response();
    };
    let mac = auth.answer_mac(&Answer {
        cluster: &t.cluster_id,
        from: t.id,
        epoch,
        status: parts.status.as_u16(),
        request_mac: &request_mac,
        body: &bytes,
    });
    parts.headers.insert(
        HDR_ANSWER,
        HeaderValue::from_str(&answer_header(epoch, &mac)).expect("hex is a header value"),
    );
    Response::from_parts(parts, Body::from(bytes))
}

/// The answer to a peer request, and the request's MAC if it held (then the answer is signed:
/// also a refusal as stale or replayed, whose epoch the sender needs).
async fn guarded(t: &Transport, req: Request<Body>, next: Next) -> (Response, HeldMac) {
    // A connection on the members' reserve is kept only for what authenticates.
    let reserved = req
        .extensions()
        .get::<crate::connections::Reserved>()
        .is_some();
    let (from, mut req, held) = match t.authenticate(req).await {
        Ok(ok) => ok,
        Err((e, held)) => {
            t.counters.rejected(e.code);
            // A certificate that names no member (or no longer chains to the CA after a
            // reload: a member cut off) gets no more requests on this connection.
            let close = reserved || e.code == "wrong_client_cert";
            let mut res = e.into_response();
            if close {
                res.headers_mut().insert(
                    axum::http::header::CONNECTION,
                    HeaderValue::from_static("close"),
                );
            }
            return (res, held);
        }
    };
    if let Some(ts_ms) = header_u64(req.headers(), HDR_TS) {
        t.clock_seen(from, ts_ms);
    }
    if t.faults.on_receive(from) == Verdict::Drop {
        return (lost_response(), held);
    }
    t.counters.contact(from, t.clock.mono_ns());
    req.extensions_mut().insert(PeerId(from));
    let res = next.run(req).await;
    let res = match t.faults.on_send(from) {
        Verdict::Drop => lost_response(),
        Verdict::Deliver(delay) => {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            res
        }
    };
    (res, held)
}

/// Decodes the JSON body of a peer message; a malformed one is refused with 400 and counted
/// (`rejected_peer_requests.bad_body`). The one decoder of every engine's `/peer/` handlers.
pub fn decode_peer<T: DeserializeOwned>(counters: &Counters, body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|e| {
        counters.rejected("bad_body");
        ApiError::bad_request("bad_body", format!("malformed peer message: {e}"))
    })
}

#[cfg(test)]
mod tests;
