//! The HTTP API of `docs/design/api-v1.md`: the read API (`/v1/leader`, `/v1/status`, `/v1/events`,
//! `/v1/health`, `/metrics`), the admin fault API, and the engine's `/peer/` routes behind the
//! transport guard. [`app`] builds the router, testable without a socket.
//!
//! Every error is a 4xx/5xx with `{"error": {"code": "...", "message": "..."}}`.

use std::sync::Arc;

use axum::extract::rejection::{BytesRejection, JsonRejection, QueryRejection};
use axum::extract::{DefaultBodyLimit, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{middleware, Json, Router};
use electd_client::{
    EventsPage, Health, LeaderInfo, LeaderRef, PeerStatus, ResignRequest, Status, Timings,
};
use serde::Deserialize;
use subtle::ConstantTimeEq;

use crate::config::ExposeSecret;
use crate::engine::ResignError;
use crate::error::{ApiError, BODY_LIMIT, REQUEST_TIMEOUT};
use crate::faults::FaultSet;
use crate::metrics;
use crate::node::Node;
use crate::role::Resigned;
use crate::transport;

impl From<ResignError> for ApiError {
    fn from(e: ResignError) -> ApiError {
        let code = match e {
            ResignError::NotLeader(_) => "not_leader",
            ResignError::UnknownTarget(_) => "unknown_target",
            ResignError::Unsuitable(..) => "unsuitable_target",
            ResignError::NoSuccessor => "no_successor",
            ResignError::NotSupported(_) => "not_supported",
        };
        let status = match e {
            ResignError::UnknownTarget(_) | ResignError::Unsuitable(..) => StatusCode::BAD_REQUEST,
            _ => StatusCode::CONFLICT,
        };
        ApiError::new(status, code, e.to_string())
    }
}

/// Judges the node's role now and renders it as the contract says.
pub fn leader_info(node: &Node) -> LeaderInfo {
    let judged = node.view();
    let v = judged.view;
    LeaderInfo {
        node_id: node.cfg.id,
        mode: node.mode(),
        role: v.role,
        term: v.term,
        leader: v.leader.map(|id| LeaderRef {
            id,
            addr: node.cfg.peer_addr(id).unwrap_or_default().to_string(),
        }),
        // Rounded down: never promise more lease than there is.
        lease_ms: judged.lease_remaining_ns.map(|ns| ns / 1_000_000),
    }
}

/// The whole router of one node.
pub fn app(node: Arc<Node>) -> Router {
    let peer = node.peer_routes().layer(middleware::from_fn_with_state(
        node.transport.clone(),
        transport::guard,
    ));
    Router::new()
        .route("/v1/leader", get(get_leader))
        .route("/v1/status", get(get_status))
        .route("/v1/events", get(get_events))
        .route("/v1/health", get(health))
        .route("/metrics", get(get_metrics))
        .route(
            "/v1/admin/faults",
            get(get_faults).put(put_faults).delete(delete_faults),
        )
        .route("/v1/admin/resign", axum::routing::post(post_resign))
        .with_state(node)
        .merge(peer)
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .layer(middleware::from_fn(limits))
}

/// On every request: a body announced above [`BODY_LIMIT`] gets 413 before any of it is read
/// (a body that turns out larger is cut off by the extractors' limit); a request that takes
/// longer than [`REQUEST_TIMEOUT`] (a client that sends its body slowly, a handler that hangs)
/// gets 408. Both with the JSON error body.
async fn limits(req: axum::extract::Request, next: middleware::Next) -> Response {
    let announced = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if announced.is_some_and(|n| n > BODY_LIMIT as u64) {
        return ApiError::too_large().into_response();
    }
    match tokio::time::timeout(REQUEST_TIMEOUT, next.run(req)).await {
        Ok(res) => res,
        Err(_) => ApiError::request_timeout().into_response(),
    }
}

async fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such route")
}

async fn health() -> Json<Health> {
    Json(Health {
        status: "ok".into(),
    })
}

async fn get_leader(State(node): State<Arc<Node>>) -> Json<LeaderInfo> {
    Json(leader_info(&node))
}

async fn get_status(State(node): State<Arc<Node>>) -> Json<Status> {
    let now = crate::clock::mono_ns();
    let peers = node
        .cfg
        .peers
        .iter()
        .filter(|p| p.id != node.cfg.id)
        .map(|p| PeerStatus {
            id: p.id,
            addr: p.addr.clone(),
            last_contact_ms: node
                .stats
                .last_contact_ns(p.id)
                .map(|t| now.saturating_sub(t) / 1_000_000),
        })
        .collect();
    let t = node.cfg.timing;
    Json(Status {
        leader: leader_info(&node),
        cluster_id: node.cfg.cluster_id.clone(),
        peers,
        counters: node.stats.snapshot(),
        timings: Timings {
            heartbeat_ms: t.heartbeat_ms,
            follower_lease_ms: t.follower_lease_ms,
            lease_ms: t.effective_lease_ms(),
        },
        uptime_ms: node.uptime_ms(),
        version: env!("CARGO_PKG_VERSION").to_string(),
        seed: node.seed,
        faults: node.transport.faults.get(),
        engine: node.engine_status(),
    })
}

#[derive(Deserialize)]
struct EventsQuery {
    #[serde(default)]
    since: u64,
    #[serde(default = "default_limit")]
    limit: usize,
}

fn default_limit() -> usize {
    1000
}

async fn get_events(
    State(node): State<Arc<Node>>,
    q: Result<Query<EventsQuery>, QueryRejection>,
) -> Result<Json<EventsPage>, ApiError> {
    let Query(q) = q?;
    let (events, next) = node.events.since(q.since, q.limit.clamp(1, 10_000));
    Ok(Json(EventsPage { events, next }))
}

async fn get_metrics(State(node): State<Arc<Node>>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        metrics::render(&node),
    )
        .into_response()
}

/// Checks the admin bearer token when one is configured.
fn check_admin(node: &Node, headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(token) = &node.cfg.admin_token else {
        return Ok(());
    };
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    // Constant time (subtle), so that timing does not reveal the token.
    if bool::from(given.as_bytes().ct_eq(token.expose_secret().as_bytes())) {
        Ok(())
    } else {
        Err(ApiError::unauthorized(
            "unauthorized",
            "the admin API needs 'Authorization: Bearer <admin token>'",
        ))
    }
}

async fn get_faults(
    State(node): State<Arc<Node>>,
    headers: HeaderMap,
) -> Result<Json<FaultSet>, ApiError> {
    check_admin(&node, &headers)?;
    Ok(Json(node.transport.faults.get()))
}

async fn put_faults(
    State(node): State<Arc<Node>>,
    headers: HeaderMap,
    body: Result<Json<FaultSet>, JsonRejection>,
) -> Result<Json<FaultSet>, ApiError> {
    check_admin(&node, &headers)?;
    let Json(set) = body?;
    set.validate(&node.cfg.member_ids())
        .map_err(|(field, msg)| {
            ApiError::bad_request("invalid_fault_set", format!("{field}: {msg}"))
        })?;
    tracing::info!(faults = ?set, "fault set replaced");
    node.transport.faults.replace(set);
    Ok(Json(node.transport.faults.get()))
}

async fn delete_faults(
    State(node): State<Arc<Node>>,
    headers: HeaderMap,
) -> Result<Json<FaultSet>, ApiError> {
    check_admin(&node, &headers)?;
    node.transport.faults.replace(FaultSet::default());
    tracing::info!("fault set cleared");
    Ok(Json(FaultSet::default()))
}

/// `POST /v1/admin/resign [{"to": N}]`: answers once the old claim is fenced.
async fn post_resign(
    State(node): State<Arc<Node>>,
    headers: HeaderMap,
    body: Result<axum::body::Bytes, BytesRejection>,
) -> Result<Json<Resigned>, ApiError> {
    check_admin(&node, &headers)?;
    let body = body?;
    let req: ResignRequest = if body.iter().all(u8::is_ascii_whitespace) {
        ResignRequest::default()
    } else {
        serde_json::from_slice(&body)
            .map_err(|e| ApiError::bad_request("invalid_body", e.to_string()))?
    };
    let done = node.resign(req.to).await?;
    tracing::info!(
        term = done.term,
        successor = done.successor,
        "resigned by the admin API"
    );
    Ok(Json(done))
}
