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

use crate::auth::{wall_ms, PeerAuth, Signed, HDR_AUTH, HDR_NONCE, HDR_TS};
use crate::clock::Clock;
use crate::config::Config;
use crate::counters::Counters;
use crate::error::{ApiError, BODY_LIMIT};
use crate::faults::{Faults, Verdict};
use crate::role::NodeId;
use crate::wire::{AddressBook, HttpWire, Wire, WireError};

pub const HDR_CLUSTER: &str = "x-electd-cluster";
pub const HDR_FROM: &str = "x-electd-from";
/// Set on a response that the fault layer lost: the client treats it as silence.
pub const HDR_LOST: &str = "x-electd-lost";

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
    pub faults: Arc<Faults>,
    pub counters: Arc<Counters>,
    /// Where the instants of contact are read.
    clock: Arc<dyn Clock>,
}

impl Transport {
    /// Builds the transport. Outgoing connections are made from the IP this node listens on
    /// (unless it listens on all addresses), so that kernel-level faults can tell nodes apart.
    pub fn new(
        cfg: &Config,
        faults: Arc<Faults>,
        counters: Arc<Counters>,
        clock: Arc<dyn Clock>,
    ) -> Transport {
        let peers = AddressBook::new(cfg.peers.iter().map(|p| (p.id, p.addr.clone())).collect());
        let connect_timeout = Duration::from_millis(cfg.timing.follower_lease_ms / 2);
        let wire = HttpWire::new(cfg.listen_addr(), peers.clone(), connect_timeout);
        Transport::on(cfg, peers, faults, counters, Arc::new(wire), clock)
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
            auth: cfg.cluster_secret.clone().map(PeerAuth::new),
            faults,
            counters,
            clock,
        }
    }

    pub fn id(&self) -> NodeId {
        self.id
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
        match self.faults.on_send(to) {
            Verdict::Drop => return Err(lost().await),
            Verdict::Deliver(delay) if !delay.is_zero() => tokio::time::sleep(delay).await,
            Verdict::Deliver(_) => {}
        }
        let remaining = deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            return Err(TransportError::Timeout(to, timeout));
        }
        let body = serde_json::to_vec(req).expect("peer message serialises");
        let mut builder = axum::http::Request::post(path)
            .header(HDR_CLUSTER, &self.cluster_id)
            .header(HDR_FROM, self.id.to_string())
            .header("content-type", "application/json");
        if let Some(auth) = &self.auth {
            let proof = auth.sign(&self.cluster_id, self.id, "POST", path, &body, wall_ms());
            builder = builder
                .header(HDR_TS, proof.ts_ms)
                .header(HDR_NONCE, proof.nonce)
                .header(HDR_AUTH, proof.mac_hex);
        }
        let request = builder
            .body(Bytes::from(body))
            .expect("a peer request from valid parts");
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
        if self.faults.on_receive(to) == Verdict::Drop {
            return Err(lost().await);
        }
        // An answer is contact too (as in etcd and hashicorp/raft): a leader hears its
        // followers through the answers to its own requests.
        self.counters.contact(to, self.clock.mono_ns());
        let status = res.status();
        let bytes = res.into_body();
        if !status.is_success() {
            let text = String::from_utf8_lossy(&bytes).chars().take(300).collect();
            return Err(TransportError::Refused(to, status, text));
        }
        serde_json::from_slice(&bytes).map_err(|e| TransportError::Decode(to, e.to_string()))
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
    /// Checks the cluster, the sender and (with a secret) the request's proof; gives back the
    /// sender and the request, its body buffered because the proof covers it.
    async fn authenticate(&self, req: Request<Body>) -> Result<(NodeId, Request<Body>), ApiError> {
        let from = self.check_headers(req.headers())?;
        let Some(auth) = &self.auth else {
            return Ok((from, req));
        };
        let (parts, body) = req.into_parts();
        let header = |name: &str| parts.headers.get(name).and_then(|v| v.to_str().ok());
        let ts = header(HDR_TS).and_then(|v| v.parse::<u64>().ok());
        let nonce = header(HDR_NONCE).and_then(|v| v.parse::<u64>().ok());
        let (Some(ts_ms), Some(nonce), Some(mac)) = (ts, nonce, header(HDR_AUTH)) else {
            let e = crate::auth::AuthError::Missing;
            return Err(ApiError::unauthorized(e.reason(), e.to_string()));
        };
        let mac = mac.to_string();
        let bytes = axum::body::to_bytes(body, BODY_LIMIT)
            .await
            .map_err(|_| ApiError::too_large())?;
        let path = parts
            .uri
            .path_and_query()
            .map(|p| p.as_str())
            .unwrap_or("/");
        let signed = Signed {
            cluster: &self.cluster_id,
            from,
            method: parts.method.as_str(),
            path,
            ts_ms,
            nonce,
            body: &bytes,
        };
        auth.verify(&signed, &mac, wall_ms())
            .map_err(|e| ApiError::unauthorized(e.reason(), e.to_string()))?;
        Ok((from, Request::from_parts(parts, Body::from(bytes))))
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
pub async fn guard(State(t): State<Arc<Transport>>, req: Request<Body>, next: Next) -> Response {
    let (from, mut req) = match t.authenticate(req).await {
        Ok(ok) => ok,
        Err(e) => {
            t.counters.rejected(e.code);
            return e.into_response();
        }
    };
    if t.faults.on_receive(from) == Verdict::Drop {
        return lost_response();
    }
    t.counters.contact(from, t.clock.mono_ns());
    req.extensions_mut().insert(PeerId(from));
    let res = next.run(req).await;
    match t.faults.on_send(from) {
        Verdict::Drop => lost_response(),
        Verdict::Deliver(delay) => {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            res
        }
    }
}

/// Decodes the JSON body of a peer message; a malformed one is refused with 400 and counted
/// (`rejected_peer_requests.bad_body`). The one decoder of every engine's `/peer/` handlers.
pub fn decode_peer<T: DeserializeOwned>(counters: &Counters, body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|e| {
        counters.rejected("bad_body");
        ApiError::bad_request("bad_body", format!("malformed peer message: {e}"))
    })
}
