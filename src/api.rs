//! The HTTP API of `docs/design/api-v1.md`: the read API (`/v1/leader`, `/v1/status`, `/v1/events`,
//! `/v1/health`, `/metrics`), the admin fault API, and the engine's `/peer/` routes behind the
//! transport guard. [`app`] builds the router, testable without a socket.
//!
//! Every error is a 4xx/5xx with `{"error": {"code": "...", "message": "..."}}`.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::rejection::{BytesRejection, JsonRejection, QueryRejection};
use axum::extract::{DefaultBodyLimit, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{middleware, Json, Router};
use serde::{Deserialize, Serialize};
use subtle::ConstantTimeEq;

use crate::faults::FaultSet;
use crate::metrics;
use crate::node::Node;
use crate::role::{NodeId, Role};
use crate::transport;

/// Largest request body any route accepts.
pub const BODY_LIMIT: usize = 1 << 20;

/// An API error: status, stable snake_case code, human message.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code,
            message: message.into(),
        }
    }
    pub fn bad_request(code: &'static str, message: impl Into<String>) -> ApiError {
        Self::new(StatusCode::BAD_REQUEST, code, message)
    }
    pub fn unauthorized(code: &'static str, message: impl Into<String>) -> ApiError {
        Self::new(StatusCode::UNAUTHORIZED, code, message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({"error": {"code": self.code, "message": self.message}});
        (self.status, Json(body)).into_response()
    }
}

impl From<JsonRejection> for ApiError {
    fn from(r: JsonRejection) -> ApiError {
        match r {
            JsonRejection::JsonDataError(e) => ApiError::bad_request("invalid_body", e.body_text()),
            JsonRejection::JsonSyntaxError(e) => {
                ApiError::bad_request("malformed_json", e.body_text())
            }
            JsonRejection::MissingJsonContentType(e) => ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                e.body_text(),
            ),
            JsonRejection::BytesRejection(e) => from_bytes_rejection(e),
            other => ApiError::bad_request("bad_request", other.body_text()),
        }
    }
}

fn from_bytes_rejection(e: BytesRejection) -> ApiError {
    if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
        too_large()
    } else {
        ApiError::bad_request("bad_body", e.body_text())
    }
}

impl From<BytesRejection> for ApiError {
    fn from(e: BytesRejection) -> ApiError {
        from_bytes_rejection(e)
    }
}

impl From<QueryRejection> for ApiError {
    fn from(r: QueryRejection) -> ApiError {
        ApiError::bad_request("invalid_query", r.body_text())
    }
}

/// `leader` in `/v1/leader`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaderRef {
    pub id: NodeId,
    pub addr: String,
}

/// The body of `GET /v1/leader`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaderInfo {
    pub node_id: NodeId,
    pub mode: String,
    pub role: Role,
    pub term: u64,
    pub leader: Option<LeaderRef>,
    pub lease_ms: Option<u64>,
}

/// Judges the node's role now and renders it as the contract says.
pub fn leader_info(node: &Node) -> LeaderInfo {
    let v = node.view();
    LeaderInfo {
        node_id: node.cfg.id,
        mode: node.mode().as_str().to_string(),
        role: v.role,
        term: v.term,
        leader: v.leader.map(|id| LeaderRef {
            id,
            addr: node.cfg.peer_addr(id).unwrap_or_default().to_string(),
        }),
        // Rounded down: never promise more lease than there is.
        lease_ms: v.lease_remaining_ns.map(|ns| ns / 1_000_000),
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

/// Every request is answered within this time (body reading included), or gets 408.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// 413 with the JSON error body.
pub fn too_large() -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "body_too_large",
        format!("request body exceeds {BODY_LIMIT} bytes"),
    )
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
        return too_large().into_response();
    }
    match tokio::time::timeout(REQUEST_TIMEOUT, next.run(req)).await {
        Ok(res) => res,
        Err(_) => ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            "request_timeout",
            format!(
                "the request was not complete within {} ms",
                REQUEST_TIMEOUT.as_millis()
            ),
        )
        .into_response(),
    }
}

async fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such route")
}

async fn health() -> Json<serde_json::Value> {
    Json(serde_json::json!({"status": "ok"}))
}

async fn get_leader(State(node): State<Arc<Node>>) -> Json<LeaderInfo> {
    Json(leader_info(&node))
}

async fn get_status(State(node): State<Arc<Node>>) -> Json<serde_json::Value> {
    let info = leader_info(&node);
    let now = crate::clock::mono_ns();
    let peers: Vec<_> = node
        .cfg
        .peers
        .iter()
        .filter(|p| p.id != node.cfg.id)
        .map(|p| {
            serde_json::json!({
                "id": p.id,
                "addr": p.addr,
                "last_contact_ms": node.stats.last_contact_ns(p.id).map(|t| now.saturating_sub(t) / 1_000_000),
            })
        })
        .collect();
    let t = node.cfg.timing;
    let mut body = serde_json::to_value(&info).expect("serialises");
    let extra = serde_json::json!({
        "cluster_id": node.cfg.cluster_id,
        "peers": peers,
        "counters": node.stats.snapshot(),
        "timings": {
            "heartbeat_ms": t.heartbeat_ms,
            "follower_lease_ms": t.follower_lease_ms,
            "lease_ms": t.effective_lease_ms(),
        },
        "uptime_ms": node.uptime_ms(),
        "version": env!("CARGO_PKG_VERSION"),
        "seed": node.seed,
        "faults": node.transport.faults.get(),
        "engine": node.engine_status(),
    });
    if let (Some(b), serde_json::Value::Object(e)) = (body.as_object_mut(), extra) {
        b.extend(e);
    }
    Json(body)
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
) -> Result<Json<serde_json::Value>, ApiError> {
    let Query(q) = q?;
    let (events, next) = node.events.since(q.since, q.limit.clamp(1, 10_000));
    Ok(Json(serde_json::json!({"events": events, "next": next})))
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
    if bool::from(given.as_bytes().ct_eq(token.expose().as_bytes())) {
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

/// The optional body of `POST /v1/admin/resign`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ResignRequest {
    /// The member that should campaign first; default: the follower with the most of the log.
    to: Option<NodeId>,
}

/// `POST /v1/admin/resign [{"to": N}]`: answers once the old claim is fenced.
async fn post_resign(
    State(node): State<Arc<Node>>,
    headers: HeaderMap,
    body: Result<axum::body::Bytes, BytesRejection>,
) -> Result<Json<crate::quorum::Resigned>, ApiError> {
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
