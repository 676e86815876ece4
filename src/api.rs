//! The HTTP API of `docs/design/api-v1.md`: the status page (`/`, in `page.rs`), the read API
//! (`/v1/leader`, `/v1/claim`,
//! `/v1/watch` (in `watch.rs`), `/v1/status`, `/v1/events`, `/v1/health`, `/metrics`), the admin
//! fault API, and the engine's `/peer/` routes behind the transport guard. [`app`] builds the router, testable without a socket.
//!
//! Every error is a 4xx/5xx with `{"error": {"code": "...", "message": "..."}}`.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::rejection::QueryRejection;
use axum::extract::{DefaultBodyLimit, Query, State};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{middleware, Json, Router};
use electd_client::{EventsPage, Health, LeaderInfo, PeerStatus, ResignRequest, Status, Timings};
use serde::Deserialize;
use subtle::ConstantTimeEq;

use crate::config::ExposeSecret;
use crate::connections::LocalClient;
use crate::connections::Reserved;
use crate::engine::{
    MembershipError, ResignError, RoleCounts, RolesError, RolesQuery, RolesReply, RolesRequest,
};
use crate::error::{ApiError, BODY_LIMIT, REQUEST_TIMEOUT};
use crate::faults::FaultSet;
use crate::metrics;
use crate::node::Node;
use crate::page;
use crate::role::{NodeId, Resigned};
use crate::transport;
use crate::watch;
use axum::extract::{FromRequestParts, Path};
use electd_client::{
    AddMember, Members, NodeRoleLimit, RoleClaimInfo, RoleInfo, RoleLimit, RoleName, RolePreferred,
    RoleResign, RoleResigned, RolesPage,
};

/// A membership change refused or failed, as its answer.
fn membership_error(e: MembershipError) -> ApiError {
    let (status, code) = match e {
        MembershipError::NotSupported => (StatusCode::CONFLICT, "not_supported"),
        MembershipError::NotLeader { .. } => (StatusCode::CONFLICT, "not_leader"),
        MembershipError::UnknownMember(_) => (StatusCode::NOT_FOUND, "unknown_member"),
        MembershipError::AlreadyMember(_) => (StatusCode::CONFLICT, "already_member"),
        MembershipError::AddressInUse { .. } => (StatusCode::CONFLICT, "address_in_use"),
        MembershipError::InProgress => (StatusCode::CONFLICT, "change_in_progress"),
        MembershipError::LastVoter(_) => (StatusCode::CONFLICT, "last_voter"),
        MembershipError::Invalid(_) => (StatusCode::BAD_REQUEST, "invalid_member"),
        MembershipError::Failed(_) => (StatusCode::SERVICE_UNAVAILABLE, "change_failed"),
    };
    ApiError::new(status, code, e.to_string())
}

/// A resign refused, as its answer.
fn resign_error(e: ResignError) -> ApiError {
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

/// The whole router of one node.
pub fn app(node: Arc<Node>) -> Router {
    let peer = node.peer_routes().layer(middleware::from_fn_with_state(
        node.transport.clone(),
        transport::guard,
    ));
    let read = Router::new()
        .route("/", get(page::get_page))
        .route("/v1/leader", get(get_leader))
        .route("/v1/claim", get(get_claim))
        .route("/v1/watch", get(watch::get_watch))
        .route("/v1/status", get(get_status))
        .route("/v1/events", get(get_events))
        .route("/v1/health", get(health))
        .route("/v1/roles", get(get_roles))
        .route("/v1/roles/watch", get(crate::role_watch::get_role_watch))
        .route("/v1/claim/{name}", get(get_role_claim))
        .route("/metrics", get(get_metrics));
    // The admin API: every route behind one door (client certificate, then token).
    let admin = Router::new()
        .route(
            "/v1/admin/faults",
            get(get_faults).put(put_faults).delete(delete_faults),
        )
        .route(
            "/v1/roles/{name}/preferred",
            axum::routing::put(change_preferred).delete(change_preferred),
        )
        .route("/v1/admin/resign", axum::routing::post(post_resign))
        .route("/v1/admin/members", axum::routing::post(post_member))
        .route(
            "/v1/admin/members/{id}",
            axum::routing::delete(delete_member),
        )
        .route_layer(middleware::from_fn_with_state(node.clone(), admin_door));
    Router::new()
        .merge(read)
        .route("/v1/members", get(get_members))
        .merge(role_routes())
        .merge(admin)
        .with_state(node)
        .merge(peer)
        .method_not_allowed_fallback(method_not_allowed)
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .layer(middleware::from_fn(limits))
        .layer(middleware::from_fn(any_origin))
}

/// A node's own candidacies, resigns and `max_roles`: from its own host without the token,
/// else through the admin door (`role_door`).
fn role_routes() -> Router<Arc<Node>> {
    Router::new()
        .route(
            "/v1/roles/{name}/candidates/{id}",
            axum::routing::put(put_candidate).delete(delete_candidate),
        )
        .route(
            "/v1/roles/{name}/resign",
            axum::routing::post(post_role_resign),
        )
        .route(
            "/v1/members/{id}/max_roles",
            get(max_roles).put(max_roles).delete(max_roles),
        )
}

/// On every request: a body announced above [`BODY_LIMIT`] gets 413 without being handled
/// (a body that turns out larger is cut off by the extractors' limit); a request that takes
/// longer than [`REQUEST_TIMEOUT`] (a client that sends its body slowly, a handler that hangs)
/// gets 408. Both with the JSON error body.
///
/// The refused body is read and thrown away first (up to [`DRAIN_LIMIT`], while it keeps
/// coming), as nginx's lingering close does: a client that writes its whole body before it
/// reads (Python's urllib) would otherwise hit a closed connection and never see the 413.
async fn limits(req: axum::extract::Request, next: middleware::Next) -> Response {
    let peer = req.uri().path().starts_with(PEER_PREFIX);
    // A connection on the members' reserve (src/connections.rs) serves peer requests only.
    let reserved = req.extensions().get::<Reserved>().is_some();
    if reserved && !peer {
        return closing(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "too_many_connections",
            "this node serves max_connections connections already; the rest are kept for its \
             members' peer requests",
        ));
    }
    let announced = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if announced.is_some_and(|n| n > BODY_LIMIT as u64) {
        // Members never send a body this large: on a peer path it is a stranger's, and the
        // node reads none of it (up to DRAIN_LIMIT a connection, else) and closes.
        if peer {
            return closing(ApiError::too_large());
        }
        drain(req.into_body()).await;
        return ApiError::too_large().into_response();
    }
    match tokio::time::timeout(REQUEST_TIMEOUT, next.run(req)).await {
        Ok(res) => res,
        Err(_) => ApiError::request_timeout().into_response(),
    }
}

/// `e`'s answer, and the connection closed after it.
fn closing(e: ApiError) -> Response {
    let mut res = e.into_response();
    res.headers_mut().insert(
        header::CONNECTION,
        header::HeaderValue::from_static("close"),
    );
    res
}

/// How much of a refused body is read and thrown away before the 413.
pub const DRAIN_LIMIT: usize = 16 << 20;
/// Draining stops when the client sends nothing for this long.
const DRAIN_IDLE: Duration = Duration::from_secs(1);

/// Reads and discards `body` until it ends, [`DRAIN_LIMIT`] bytes have come, the client has
/// been silent for [`DRAIN_IDLE`], or [`REQUEST_TIMEOUT`] has passed.
async fn drain(body: axum::body::Body) {
    use futures_util::StreamExt;
    let mut stream = body.into_data_stream();
    let mut read = 0usize;
    let until = tokio::time::Instant::now() + REQUEST_TIMEOUT;
    while read < DRAIN_LIMIT {
        let idle = until
            .saturating_duration_since(tokio::time::Instant::now())
            .min(DRAIN_IDLE);
        match tokio::time::timeout(idle, stream.next()).await {
            Ok(Some(Ok(chunk))) => read += chunk.len(),
            _ => return,
        }
    }
}

/// `Access-Control-Allow-Origin: *` on every answer but those under [`ADMIN_PREFIX`] and the
/// peers': the read API carries no secret and takes no credentials, and the status page of one
/// node reads the others. Judged by the path, so that every answer under the admin prefix
/// answers no origin whatever made it: the admin door, a 405 or 404 of the router, or the
/// limits' 413, 408 and 503, which never reach a route.
///
/// And `Date` on every answer but the peers' (the server writes none by itself,
/// `src/server.rs`): peer answers are a protocol between members, which reads neither, and
/// each costs every exchange its bytes (about 70 of the 240 that signing the answers added:
/// docs/benchmarks.md, "The cost side").
async fn any_origin(req: axum::extract::Request, next: middleware::Next) -> Response {
    let path = req.uri().path();
    let (admin, peer) = (
        path.starts_with(ADMIN_PREFIX),
        path.starts_with(PEER_PREFIX),
    );
    let mut res = next.run(req).await;
    if peer {
        return res;
    }
    if !admin {
        res.headers_mut().insert(
            header::ACCESS_CONTROL_ALLOW_ORIGIN,
            header::HeaderValue::from_static("*"),
        );
    }
    let date = httpdate::fmt_http_date(std::time::SystemTime::now());
    if let Ok(v) = header::HeaderValue::from_str(&date) {
        res.headers_mut().insert(header::DATE, v);
    }
    res
}

/// A known path asked with a method it does not serve: 405 with the JSON error body (axum
/// adds the `Allow` header).
async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "this path does not serve that method",
    )
}

/// The JSON object in `body` as a `T`, read only after the caller checked who is asking:
/// `Content-Type: application/json` (415 otherwise), at most [`BODY_LIMIT`] bytes (413), JSON
/// (400 `malformed_json`), an object (400 `invalid_body`: serde would also take an array of
/// the fields in order) of the fields `T` knows (400 `invalid_body`). An empty body is `empty`
/// when the route allows none (else 400 `invalid_body`).
async fn read_json<T: serde::de::DeserializeOwned>(
    headers: &HeaderMap,
    body: axum::body::Body,
    empty: Option<T>,
) -> Result<T, ApiError> {
    let bytes = axum::body::to_bytes(body, BODY_LIMIT)
        .await
        .map_err(|_| ApiError::too_large())?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return empty
            .ok_or_else(|| ApiError::bad_request("invalid_body", "a JSON object is needed"));
    }
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        })
        .is_some_and(|m| m == "application/json" || m.ends_with("+json"));
    if !json {
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "send the body with 'Content-Type: application/json'",
        ));
    }
    let value: serde_json::Value = serde_json::from_slice(&bytes)
        .map_err(|e| ApiError::bad_request("malformed_json", e.to_string()))?;
    if !value.is_object() {
        return Err(ApiError::bad_request(
            "invalid_body",
            "the body must be a JSON object",
        ));
    }
    serde_json::from_value(value).map_err(|e| ApiError::bad_request("invalid_body", e.to_string()))
}

async fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such route")
}

/// 200 while the node is whole; 503 with the reasons when its engine stopped or its event
/// log's file refuses writes (liveness: restart a node that stays 503).
async fn health(State(node): State<Arc<Node>>) -> Result<Json<Health>, ApiError> {
    match node.health() {
        Ok(()) => Ok(Json(Health {
            status: "ok".into(),
        })),
        Err(why) => Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unhealthy",
            why,
        )),
    }
}

async fn get_leader(State(node): State<Arc<Node>>) -> Json<LeaderInfo> {
    Json(node.leader_info())
}

/// `GET /v1/claim`: 200 while this node holds the lease-bound claim, 503 otherwise; the body
/// of `/v1/leader` either way (for readiness probes and load balancers).
async fn get_claim(State(node): State<Arc<Node>>) -> (StatusCode, Json<LeaderInfo>) {
    let info = node.leader_info();
    let status = if info.view().claims() {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(info))
}

async fn get_status(State(node): State<Arc<Node>>) -> Json<Status> {
    let now = node.clock.mono_ns();
    let peers = node
        .members_in_force()
        .into_iter()
        .filter(|(id, _)| *id != node.cfg.id)
        .map(|(id, addr)| PeerStatus {
            id,
            addr,
            last_contact_ms: node
                .counters
                .last_contact_ns(id)
                .map(|t| now.saturating_sub(t) / 1_000_000),
            clock_offset_ms: node.counters.clock_offset_ms(id),
        })
        .collect();
    let t = node.cfg.timing;
    Json(Status {
        leader: node.leader_info(),
        cluster_id: node.cfg.cluster_id.clone(),
        peers,
        counters: node.counters.snapshot(),
        timings: Timings {
            heartbeat_ms: t.heartbeat_ms,
            follower_lease_ms: t.follower_lease_ms,
            lease_ms: t.effective_lease_ms(),
        },
        uptime_ms: node.uptime_ms(),
        version: env!("CARGO_PKG_VERSION").to_string(),
        seed: node.seed,
        faults: node.transport.faults.get(),
        insecure: node.cfg.runs_insecure(),
        two_leaders_possible: !node.cfg.mode.leased(),
        admin_api: node.cfg.admin_token.is_some(),
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
    let (events, next) = node.events.page(q.since, q.limit.clamp(1, 10_000)).await;
    Ok(Json(EventsPage { events, next }))
}

async fn get_metrics(State(node): State<Arc<Node>>, headers: HeaderMap) -> Response {
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    let openmetrics = metrics::wants_openmetrics(accept);
    let kind = if openmetrics {
        metrics::OPENMETRICS
    } else {
        metrics::CLASSIC
    };
    (
        [(header::CONTENT_TYPE, kind)],
        metrics::render(&node, openmetrics, roles_counted(&node).await),
    )
        .into_response()
}

/// Where the admin API's paths start. Its routes are found by the router and pass one door
/// ([`admin_door`]); the prefix only tells [`any_origin`] which answers go without CORS.
const ADMIN_PREFIX: &str = "/v1/admin/";
/// Where the members' peer protocol's paths start (every mode's `peer_routes`).
const PEER_PREFIX: &str = "/peer/";

/// The admin API's one door, in front of every admin route. With `tls.admin_client_cert`, the
/// request must come on a connection that presented a client certificate (the handshake
/// checked that the cluster CA signed it): 403 `client_certificate_required` otherwise (no
/// HTTP challenge can ask for one). Then the bearer token ([`check_admin`]).
async fn admin_door(
    State(node): State<Arc<Node>>,
    req: axum::extract::Request,
    next: middleware::Next,
) -> Response {
    match admit(&node, req.extensions(), req.headers()) {
        Ok(()) => next.run(req).await,
        Err(e) => e.into_response(),
    }
}

/// The admin door's judgement of one request: its client certificate when the config asks for
/// one, then its bearer token.
fn admit(
    node: &Node,
    extensions: &axum::http::Extensions,
    headers: &HeaderMap,
) -> Result<(), ApiError> {
    let tls = node.tls.as_ref().filter(|t| t.admin_client_cert());
    // Judged again on every admin request, not only at the handshake (a reload may have removed
    // its CA since, on a kept-alive connection).
    let presented = extensions
        .get::<crate::tls::ClientCert>()
        .and_then(|c| c.0.as_deref())
        .is_some_and(|c| tls.is_some_and(|t| t.admits_client(c)));
    if tls.is_some() && !presented {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "client_certificate_required",
            "the admin API of this node needs a client certificate signed by the cluster CA",
        ));
    }
    check_admin(node, headers)
}

/// Checks the admin bearer token; without one configured the admin API is disabled (403).
fn check_admin(node: &Node, headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(token) = &node.cfg.admin_token else {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "admin_disabled",
            "the admin API is disabled: this node has no admin_token (ELECTD_ADMIN_TOKEN)",
        ));
    };
    // The scheme's name is case-insensitive (RFC 9110, 11.1).
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map_or("", |(_, token)| token.trim());
    // Digests compared in constant time (subtle): timing reveals neither the token nor its
    // length (a compare of the tokens themselves ends at once on a length that differs).
    let digest = |t: &str| <sha2::Sha256 as sha2::Digest>::digest(t.as_bytes());
    if bool::from(digest(given).ct_eq(&digest(token.expose_secret()))) {
        Ok(())
    } else {
        Err(ApiError {
            challenge: Some("Bearer realm=\"electd admin API\""),
            ..ApiError::unauthorized(
                "unauthorized",
                "the admin API needs 'Authorization: Bearer <admin token>'",
            )
        })
    }
}

async fn get_faults(State(node): State<Arc<Node>>) -> Result<Json<FaultSet>, ApiError> {
    Ok(Json(node.transport.faults.get()))
}

async fn put_faults(
    State(node): State<Arc<Node>>,
    headers: HeaderMap,
    body: axum::body::Body,
) -> Result<Json<FaultSet>, ApiError> {
    let set: FaultSet = read_json(&headers, body, None).await?;
    let members: Vec<NodeId> = node.members_in_force().iter().map(|m| m.0).collect();
    set.validate(&members).map_err(|(field, msg)| {
        ApiError::bad_request("invalid_fault_set", format!("{field}: {msg}"))
    })?;
    tracing::info!(faults = ?set, "fault set replaced");
    node.transport.faults.replace(set);
    Ok(Json(node.transport.faults.get()))
}

async fn delete_faults(State(node): State<Arc<Node>>) -> Result<Json<FaultSet>, ApiError> {
    node.transport.faults.replace(FaultSet::default());
    tracing::info!("fault set cleared");
    Ok(Json(FaultSet::default()))
}

/// `POST /v1/admin/resign [{"to": N}]`: answers once the old claim is fenced.
async fn post_resign(
    State(node): State<Arc<Node>>,
    headers: HeaderMap,
    body: axum::body::Body,
) -> Result<Json<Resigned>, ApiError> {
    let req: ResignRequest = read_json(&headers, body, Some(ResignRequest::default())).await?;
    let done = node.resign(req.to).await.map_err(resign_error)?;
    tracing::info!(
        term = done.term,
        successor = done.successor,
        "resigned by the admin API"
    );
    Ok(Json(done))
}

/// `GET /v1/members`: the membership in force on this node (quorum mode).
async fn get_members(State(node): State<Arc<Node>>) -> Result<Json<Members>, ApiError> {
    Ok(Json(node.engine().members().map_err(membership_error)?))
}

/// `POST /v1/admin/members {"id": N, "addr": "HOST:PORT"}`: answers once the new member is a
/// voter and the change is committed.
async fn post_member(
    State(node): State<Arc<Node>>,
    headers: HeaderMap,
    body: axum::body::Body,
) -> Result<Json<Members>, ApiError> {
    let add: AddMember = read_json(&headers, body, None).await?;
    let (id, addr) = (add.id, add.addr.clone());
    let members = node
        .engine()
        .add_member(add)
        .await
        .map_err(membership_error)?;
    tracing::info!(member = id, addr, "member added by the admin API");
    Ok(Json(members))
}

/// `DELETE /v1/admin/members/{id}`: answers once the change is committed.
async fn delete_member(
    State(node): State<Arc<Node>>,
    axum::extract::Path(id): axum::extract::Path<String>,
) -> Result<Json<Members>, ApiError> {
    let id: NodeId = id.parse().map_err(|_| {
        ApiError::bad_request("bad_member_id", format!("{id:?} is not a member id"))
    })?;
    let members = node
        .engine()
        .remove_member(id)
        .await
        .map_err(membership_error)?;
    tracing::info!(member = id, "member removed by the admin API");
    Ok(Json(members))
}

/// A request about a named role refused, as its answer.
fn roles_error(node: &Node, e: RolesError) -> ApiError {
    node.roles_error(e)
}

/// A role name from the path, or 400 `invalid_role_name` saying which rule it breaks.
fn role_name(s: String) -> Result<RoleName, ApiError> {
    RoleName::new(s).map_err(|e| ApiError::bad_request("invalid_role_name", e.to_string()))
}

/// `GET /v1/roles[?prefix=P&after=NAME&limit=N]`.
async fn get_roles(
    State(node): State<Arc<Node>>,
    q: Result<Query<RolesQuery>, QueryRejection>,
) -> Result<Json<RolesPage>, ApiError> {
    let Query(q) = q?;
    match roles(&node, RolesRequest::List(q)).await? {
        RolesReply::Page(p) => Ok(Json(p)),
        other => Err(unexpected(other)),
    }
}

/// The roles counted for `/metrics`, in a mode that has them.
async fn roles_counted(node: &Node) -> Option<RoleCounts> {
    match node.engine().roles(RolesRequest::Counts).await {
        Ok(RolesReply::Counts(c)) => Some(c),
        _ => None,
    }
}

/// Asks the engine about roles; its refusal as the answer.
async fn roles(node: &Node, req: RolesRequest) -> Result<RolesReply, ApiError> {
    node.engine()
        .roles(req)
        .await
        .map_err(|e| roles_error(node, e))
}

/// An engine's reply of another request's kind: a 500, the node keeps running.
fn unexpected(reply: RolesReply) -> ApiError {
    tracing::error!(?reply, "a roles reply of another request's kind");
    ApiError::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        "internal",
        "the request could not be handled",
    )
}

/// `GET /v1/claim/{name}`: 200 on the role's holder while its claim holds, 503 elsewhere.
async fn get_role_claim(
    State(node): State<Arc<Node>>,
    Path(name): Path<String>,
) -> Result<(StatusCode, Json<RoleClaimInfo>), ApiError> {
    let name = role_name(name)?;
    let (holds, info) = match roles(&node, RolesRequest::Claim(name)).await? {
        RolesReply::Claim(holds, info) => (holds, info),
        other => return Err(unexpected(other)),
    };
    let status = match holds {
        true => StatusCode::OK,
        false => StatusCode::SERVICE_UNAVAILABLE,
    };
    Ok((status, Json(info)))
}

/// Who may change node `id`'s roles: the node's own host for its own id, with no token (the
/// local application decides whether its node stands); anyone else through the admin door.
fn role_door(
    node: &Node,
    id: NodeId,
    local: bool,
    extensions: &axum::http::Extensions,
    headers: &HeaderMap,
) -> Result<(), ApiError> {
    if local && id == node.cfg.id {
        return Ok(());
    }
    admit(node, extensions, headers)
}

/// A member id of a path, or 400 `bad_member_id`.
fn member_id(id: &str) -> Result<NodeId, ApiError> {
    id.parse()
        .map_err(|_| ApiError::bad_request("bad_member_id", format!("{id:?} is not a member id")))
}

/// `id`, if it is a member, or 404 `unknown_member`: a setting or candidacy of a stranger would
/// be asked for ever, and never applied.
fn known_member(node: &Node, id: NodeId) -> Result<NodeId, ApiError> {
    let members = node.members_in_force();
    if !members.iter().any(|(m, _)| *m == id) {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "unknown_member",
            format!("{id} is not a member of this cluster"),
        ));
    }
    Ok(id)
}

/// The name and member id of a candidacy's path, once the door let the request in.
fn candidacy(node: &Node, name: String, id: NodeId) -> Result<(RoleName, NodeId), ApiError> {
    Ok((role_name(name)?, known_member(node, id)?))
}

/// The path parameters of a request taken apart by hand (a handler that judges its door
/// before its body), or 400 `bad_path`.
async fn path_of<T>(parts: &mut axum::http::request::Parts, node: &Arc<Node>) -> Result<T, ApiError>
where
    T: serde::de::DeserializeOwned + Send,
{
    let Path(t) = Path::<T>::from_request_parts(parts, node)
        .await
        .map_err(|e| ApiError::bad_request("bad_path", e.body_text()))?;
    Ok(t)
}

/// `PUT` and `DELETE /v1/roles/{name}/candidates/{id}`: answers the role once applied.
async fn change_candidacy(
    node: Arc<Node>,
    req: axum::extract::Request,
    stands: bool,
) -> Result<Json<RoleInfo>, ApiError> {
    let (mut parts, _) = req.into_parts();
    let (name, id): (String, String) = path_of(&mut parts, &node).await?;
    // The door first (it needs the id): a stranger learns nothing of names or members.
    let id = member_id(&id)?;
    let local = parts.extensions.get::<LocalClient>().is_some();
    role_door(&node, id, local, &parts.extensions, &parts.headers)?;
    let (name, id) = candidacy(&node, name, id)?;
    let stand = RolesRequest::Stand {
        name,
        node: id,
        stands,
    };
    match roles(&node, stand).await? {
        RolesReply::Role(info) => Ok(Json(info)),
        other => Err(unexpected(other)),
    }
}

async fn put_candidate(
    State(node): State<Arc<Node>>,
    req: axum::extract::Request,
) -> Result<Json<RoleInfo>, ApiError> {
    change_candidacy(node, req, true).await
}

async fn delete_candidate(
    State(node): State<Arc<Node>>,
    req: axum::extract::Request,
) -> Result<Json<RoleInfo>, ApiError> {
    change_candidacy(node, req, false).await
}

/// `POST /v1/roles/{name}/resign {"token": T}`: answers once the release is applied.
async fn post_role_resign(
    State(node): State<Arc<Node>>,
    req: axum::extract::Request,
) -> Result<Json<RoleResigned>, ApiError> {
    let (mut parts, body) = req.into_parts();
    let name: String = path_of(&mut parts, &node).await?;
    let local = parts.extensions.get::<LocalClient>().is_some();
    role_door(&node, node.cfg.id, local, &parts.extensions, &parts.headers)?;
    let name = role_name(name)?;
    let RoleResign { token } = read_json(&parts.headers, body, None).await?;
    match roles(&node, RolesRequest::Resign { name, token }).await? {
        RolesReply::Resigned(done) => Ok(Json(done)),
        other => Err(unexpected(other)),
    }
}

/// `PUT /v1/roles/{name}/preferred {"node": N}` or `DELETE` it: answers the role once the
/// setting is applied. Behind the admin door: placement is the operator's.
async fn change_preferred(
    State(node): State<Arc<Node>>,
    req: axum::extract::Request,
) -> Result<Json<RoleInfo>, ApiError> {
    let (mut parts, body) = req.into_parts();
    let name = role_name(path_of(&mut parts, &node).await?)?;
    let to = match parts.method == Method::PUT {
        true => {
            let RolePreferred { node: id } = read_json(&parts.headers, body, None).await?;
            Some(known_member(&node, id)?)
        }
        false => None,
    };
    match roles(&node, RolesRequest::Prefer { name, node: to }).await? {
        RolesReply::Role(info) => Ok(Json(info)),
        other => Err(unexpected(other)),
    }
}

/// `GET`, `PUT {"max_roles": N}` and `DELETE /v1/members/{id}/max_roles`: how many roles
/// member `id` may hold (`DELETE` lifts the limit). A change through the door of a candidacy
/// (a node's own from its own host, else the admin token); answered once applied.
async fn max_roles(
    State(node): State<Arc<Node>>,
    req: axum::extract::Request,
) -> Result<Json<NodeRoleLimit>, ApiError> {
    let (mut parts, body) = req.into_parts();
    let id = member_id(&path_of::<String>(&mut parts, &node).await?)?;
    let max_roles = match parts.method {
        Method::PUT | Method::DELETE => {
            let local = parts.extensions.get::<LocalClient>().is_some();
            role_door(&node, id, local, &parts.extensions, &parts.headers)?;
            match parts.method == Method::PUT {
                true => Some(Some(
                    read_json::<RoleLimit>(&parts.headers, body, None)
                        .await?
                        .max_roles,
                )),
                false => Some(None),
            }
        }
        _ => None,
    };
    let limit = RolesRequest::Limit {
        node: known_member(&node, id)?,
        max_roles,
    };
    match roles(&node, limit).await? {
        RolesReply::Limit(limit) => Ok(Json(limit)),
        other => Err(unexpected(other)),
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};

    use tokio_util::sync::CancellationToken;

    use super::*;
    use crate::role::Mode;

    /// A body announced above the limit: drained on the API (so that a client that writes
    /// before it reads sees the 413), not read at all on a peer path (a stranger's: members
    /// send none so large), whose connection is closed.
    #[tokio::test]
    async fn a_peer_paths_oversized_body_is_not_read() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use tower::ServiceExt;
        let app = Router::new()
            .route("/peer/msg", axum::routing::post(|| async { "ok" }))
            .route("/v1/admin/faults", axum::routing::put(|| async { "ok" }))
            .layer(middleware::from_fn(limits));
        for (method, path, drained) in [
            ("POST", "/peer/msg", false),
            ("PUT", "/v1/admin/faults", true),
        ] {
            let read = Arc::new(AtomicUsize::new(0));
            let counted = read.clone();
            let chunks = futures_util::stream::iter((0..32).map(move |_| {
                counted.fetch_add(1, Ordering::SeqCst);
                Ok::<_, std::io::Error>(axum::body::Bytes::from(vec![b' '; 64 << 10]))
            }));
            let req = axum::http::Request::builder()
                .method(method)
                .uri(path)
                .header(header::CONTENT_LENGTH, 2 << 20)
                .body(axum::body::Body::from_stream(chunks))
                .unwrap();
            let res = app.clone().oneshot(req).await.unwrap();
            assert_eq!(res.status(), StatusCode::PAYLOAD_TOO_LARGE, "{path}");
            assert_eq!(
                read.load(Ordering::SeqCst) > 0,
                drained,
                "{path}: chunks read"
            );
            assert_eq!(
                res.headers().get(header::CONNECTION).is_some(),
                !drained,
                "{path}"
            );
        }
    }

    /// A one-member bully node (no durable state to open), served on 127.0.0.1:0.
    async fn serve_one(dir: &std::path::Path) -> (std::net::SocketAddr, CancellationToken) {
        let cfg = crate::config::single_member(dir, Mode::Bully);
        let cfg = crate::config::ValidConfig::new(cfg).unwrap();
        let stop = CancellationToken::new();
        let node = Node::start(cfg, 1, stop.clone(), CancellationToken::new())
            .await
            .unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let done = stop.clone().cancelled_owned();
        let connections = node.connections.clone();
        tokio::spawn(crate::server::serve(
            listener,
            app(node),
            None,
            connections,
            done,
        ));
        (addr, stop)
    }

    /// A client that writes its whole (too large) body before it reads, as Python's urllib
    /// does, gets the 413 with its JSON body, not a broken pipe.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_client_that_sends_a_too_large_body_whole_reads_the_413() {
        let dir = tempfile::tempdir().unwrap();
        let (addr, stop) = serve_one(dir.path()).await;
        let answer = tokio::task::spawn_blocking(move || {
            let body = vec![b' '; 4 << 20];
            let mut s = std::net::TcpStream::connect(addr).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            s.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
            let head = format!(
                "PUT /v1/admin/faults HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
                 Content-Length: {}\r\n\r\n",
                body.len()
            );
            s.write_all(head.as_bytes())
                .and_then(|()| s.write_all(&body))
                .map_err(|e| format!("writing the body: {e}"))?;
            let mut text = Vec::new();
            let mut buf = [0u8; 4096];
            loop {
                match s.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => text.extend_from_slice(&buf[..n]),
                    Err(_) if !text.is_empty() => break,
                    Err(e) => return Err(format!("reading the answer: {e}")),
                }
                if text.windows(4).any(|w| w == b"\r\n\r\n") && text.ends_with(b"}}") {
                    break;
                }
            }
            Ok(String::from_utf8_lossy(&text).into_owned())
        })
        .await
        .unwrap();
        stop.cancel();
        let text = answer.expect("the client reads an answer");
        assert!(text.starts_with("HTTP/1.1 413"), "{text}");
        assert!(text.contains("body_too_large"), "{text}");
    }
}
