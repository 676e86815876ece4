//! The quorum peer protocol, both sides: the `/peer/raft/*` paths, the messages, and the
//! handlers and routes that receive them (openraft's RPCs are sent by network.rs). A handler decodes, counts, and tells the node what happened
//! through [`QuorumPeer`] (`on_append`, `on_vote_request`, …); what the node then does is in
//! `node/mod.rs`.
//!
//! | path | message | answer |
//! |---|---|---|
//! | `/peer/raft/append` | openraft's AppendEntries (a heartbeat when it has no entries), or a leader's probe: an empty one marked `"probe": true` ([`Probe`]) | `Result<AppendEntriesResponse, RaftError>`; to a probe, `503 unconfirmed` from a node whose incarnation is not confirmed |
//! | `/peer/raft/vote` | openraft's VoteRequest | `Result<VoteResponse, RaftError>` |
//! | `/peer/raft/snapshot` | openraft's InstallSnapshotRequest | `Result<InstallSnapshotResponse, RaftError>` |
//! | `/peer/raft/prevote` | [`PreVoteRequest`] (electd's) | [`PreVoteResponse`] |
//! | `/peer/raft/resign` | [`Resign`] (electd's) | `{"ok": true}` |
//! | `/peer/raft/hello` | [`Hello`] (electd's: identity.rs) | [`HelloAnswer`] |
//! | `/peer/raft/remove` | [`RemoveRequest`] (electd's: a leader that removes itself asks its successor; membership.rs) | `Result<Members, String>` |
//! | `/peer/raft/join` | [`JoinRequest`] (electd's: a member that does not vote asks the leader to add it; admission.rs) | [`JoinAnswer`] |
//! | `/peer/roles/renew` | [`RenewRequest`] (electd's: a node's renewal of its named roles, once a beat; roles/steward.rs) | `Option<Renewed>` (`null`: not renewed) |
//!

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Extension, Json, Router};
use openraft::error::{InstallSnapshotError, RaftError};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::LogId;
use serde::{Deserialize, Serialize};

use super::types::{TypeConfig, APPEND_BODY_LIMIT};
use crate::counters::Counters;
use crate::error::ApiError;
use crate::role::NodeId;
use crate::roles::holder::Renewed;
use crate::roles::steward::RenewRequest;
use crate::transport::{decode_peer, PeerId, Transport};
use electd_client::Members;

pub const PATH_APPEND: &str = "/peer/raft/append";
pub const PATH_VOTE: &str = "/peer/raft/vote";
pub const PATH_SNAPSHOT: &str = "/peer/raft/snapshot";
/// Not an openraft RPC: a leader's resignation (see [`Resign`]).
pub const PATH_RESIGN: &str = "/peer/raft/resign";
/// Not an openraft RPC: electd's pre-vote (see [`PreVoteRequest`]).
pub const PATH_PREVOTE: &str = "/peer/raft/prevote";

/// Not an openraft RPC: a leader that removes itself asks its successor to (membership.rs).
pub const PATH_REMOVE: &str = "/peer/raft/remove";
/// Not an openraft RPC: a node's incarnation, for its peers to record (identity.rs).
pub const PATH_HELLO: &str = "/peer/raft/hello";
/// Not an openraft RPC: a member that does not vote asks the leader to add it (admission.rs).
pub const PATH_JOIN: &str = "/peer/raft/join";
/// Not an openraft RPC: a node renews its named roles with the leader (roles/steward.rs).
pub const PATH_RENEW: &str = "/peer/roles/renew";

/// A leader's probe (driver/probe.rs): an AppendEntries without entries, marked: its
/// acknowledgement counts for a claim. A node whose incarnation is not confirmed answers it
/// `503 unconfirmed` and takes nothing from it: a wiped data dir has forgotten the vote its
/// earlier incarnation may have given a later leader (docs/safety.md, step 10). Unmarked
/// appends it takes as any node does, so that it catches up and learns the members that
/// would refuse it. The mark is in the body (under the MAC); older peers ignore it.
#[derive(Serialize)]
pub struct Probe<'a> {
    #[serde(flatten)]
    pub append: &'a AppendEntriesRequest<TypeConfig>,
    pub probe: bool,
}

/// The mark of a [`Probe`], read apart from the request it marks.
#[derive(Deserialize)]
struct ProbeMark {
    #[serde(default)]
    probe: bool,
}

/// The peer request of a leader that removes itself: "remove `id`" to its successor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoveRequest {
    pub id: NodeId,
    /// The log index of the membership the sender's log named when it asked: the receiver
    /// removes only from that membership, so a request withheld on the path and delivered
    /// after the node was removed and added back removes nothing (issue 30). Absent from an
    /// older sender: refused.
    #[serde(default)]
    pub membership: Option<u64>,
}

/// A member that does not vote asks to be added, at `addr`: the address its request carries
/// under the MAC, and the one the members will send to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JoinRequest {
    pub addr: String,
}

/// The leader's answer to a [`JoinRequest`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "outcome")]
pub enum JoinAnswer {
    /// A member now, that does not vote (added, or one already at this address).
    Member,
    /// The receiver does not lead: ask `leader` (at `addr`), when it knows one.
    NotLeader {
        leader: Option<NodeId>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        addr: Option<String>,
    },
    /// Refused (nonvoters.rs, `Refusal`: its code and why), or the change failed.
    Refused { code: String, message: String },
}

/// "This is the incarnation of my data dir": the receiver records it if it knows none.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    pub incarnation: u64,
    /// The log index of the membership the sender's log names (identity.rs, rule 3); absent
    /// from a sender that predates it, and then judged as the initial membership.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub membership: Option<u64>,
}

/// The answer to a [`Hello`]: whether the receiver recorded (or already knew) that
/// incarnation, and the other one it knows if not; `member: false` when the receiver's
/// committed membership does not name the sender (it records nothing then); `behind` when
/// the receiver has not applied its log up to the sender's membership (it neither records
/// nor refuses; identity.rs, rule 3). `incarnation` is the receiver's own, once confirmed:
/// the sender records it in turn (rule 4).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HelloAnswer {
    pub accepted: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub known: Option<u64>,
    #[serde(default = "yes", skip_serializing_if = "Clone::clone")]
    pub member: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub behind: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incarnation: Option<u64>,
}

fn yes() -> bool {
    true
}

/// A pre-vote request: "would you vote for me in `term`?" No durable state changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreVoteRequest {
    /// The term the sender would campaign for (its current term + 1).
    pub term: u64,
    pub last_log_id: Option<LogId<NodeId>>,
}

/// The answer to a [`PreVoteRequest`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreVoteResponse {
    pub granted: bool,
    /// The answering node's current term.
    pub term: u64,
    /// Why it was refused (`leader_alive`, `pledged`, `log_behind`, `stopping`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
    /// With `leader_alive`: microseconds until this node's follower lease ends, so that a
    /// candidate whose own lease ended a little earlier asks again exactly then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_left_us: Option<u64>,
}

/// A leader's notice that it resigned `term` (`POST /v1/admin/resign`, SIGTERM): its
/// `successor` campaigns first, as soon as the followers' leases allow, and every other
/// follower one stagger step later. Like Raft's TimeoutNow, which openraft 0.9 lacks; it only
/// orders the next election, so safety never depends on it.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct Resign {
    pub term: u64,
    pub successor: NodeId,
}

/// How long a resigning leader waits for the followers to take its [`Resign`].
pub const RESIGN_TIMEOUT: Duration = Duration::from_millis(100);

/// Tells each of `others` that its leader resigned (`msg`), waiting at most [`RESIGN_TIMEOUT`]
/// for each, and logs how many took it.
pub async fn tell_resign(transport: Arc<Transport>, others: Vec<NodeId>, msg: Resign) {
    let sends = others.into_iter().map(|to| {
        let transport = transport.clone();
        async move {
            let r: Result<serde_json::Value, _> = transport
                .call(to, PATH_RESIGN, "resign", &msg, RESIGN_TIMEOUT)
                .await;
            r.is_ok()
        }
    });
    let told = futures_util::future::join_all(sends).await;
    let told = told.iter().filter(|ok| **ok).count();
    tracing::info!(
        term = msg.term,
        successor = msg.successor,
        told,
        "resigned: the successor campaigns when the followers' leases end"
    );
}

/// What a quorum node is told when a peer's message arrives, one method per message. The
/// methods that hand a message to openraft run in a task of their own (the handler spawns
/// them), so that what they record is recorded even when the request is dropped.
pub trait QuorumPeer: Send + Sync + 'static {
    /// The node's counters (messages received, malformed bodies).
    fn counters(&self) -> &Counters;
    /// Whether ⌈n/2⌉ other members have recorded this data dir's incarnation (identity.rs).
    fn confirmed(&self) -> bool;
    /// AppendEntries from `from`.
    fn on_append(
        self: Arc<Self>,
        from: NodeId,
        req: AppendEntriesRequest<TypeConfig>,
    ) -> impl Future<Output = Result<AppendEntriesResponse<NodeId>, RaftError<NodeId>>> + Send;
    /// A candidate's vote request.
    fn on_vote_request(
        self: Arc<Self>,
        req: VoteRequest<NodeId>,
    ) -> impl Future<Output = Result<VoteResponse<NodeId>, RaftError<NodeId>>> + Send;
    /// InstallSnapshot from a leader.
    fn on_snapshot(
        self: Arc<Self>,
        req: InstallSnapshotRequest<TypeConfig>,
    ) -> impl Future<
        Output = Result<InstallSnapshotResponse<NodeId>, RaftError<NodeId, InstallSnapshotError>>,
    > + Send;
    /// Would this node vote for `from` in its next term?
    fn on_prevote_request(
        &self,
        from: NodeId,
        req: PreVoteRequest,
    ) -> impl Future<Output = PreVoteResponse> + Send;
    /// `from` says it resigned.
    fn on_resign_notice(&self, from: NodeId, notice: Resign) -> impl Future<Output = ()> + Send;
    /// `from`, the leader before this one, asks this node to remove it (membership.rs).
    fn on_remove(
        self: Arc<Self>,
        from: NodeId,
        req: RemoveRequest,
    ) -> impl Future<Output = Result<Members, String>> + Send;
    /// `from` names the incarnation of its data dir.
    fn on_hello(
        self: Arc<Self>,
        from: NodeId,
        hello: Hello,
    ) -> impl Future<Output = Result<HelloAnswer, String>> + Send;
    /// `from`, a member that does not vote, asks to be added (admission.rs).
    fn on_join(
        self: Arc<Self>,
        from: NodeId,
        req: JoinRequest,
    ) -> impl Future<Output = JoinAnswer> + Send;
    /// `from` renews its named roles: the leader's answer, or `None` (not renewed).
    fn on_renew(
        &self,
        from: NodeId,
        req: RenewRequest,
    ) -> impl Future<Output = Option<Renewed>> + Send;
}

/// The `/peer/raft/*` routes of a node (without the transport guard; the API adds it).
pub fn routes<P: QuorumPeer>(peer: Arc<P>) -> Router {
    Router::new()
        .route(PATH_APPEND, post(append::<P>))
        .route(PATH_PREVOTE, post(prevote::<P>))
        .route(PATH_RESIGN, post(resign::<P>))
        .route(PATH_HELLO, post(hello::<P>))
        .route(PATH_REMOVE, post(remove::<P>))
        .route(PATH_JOIN, post(join::<P>))
        .route(PATH_VOTE, post(vote::<P>))
        .route(PATH_SNAPSHOT, post(snapshot::<P>))
        .route(PATH_RENEW, post(renew::<P>))
        .with_state(peer)
}

/// A join error of a handler's task (a panic): 500, the node keeps running.
fn internal(e: tokio::task::JoinError) -> ApiError {
    tracing::error!(error = %e, "peer handler task failed");
    ApiError::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        "internal",
        "the request could not be handled",
    )
}

pub(super) async fn append<P: QuorumPeer>(
    State(p): State<Arc<P>>,
    Extension(PeerId(from)): Extension<PeerId>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let req: AppendEntriesRequest<TypeConfig> = decode_peer(p.counters(), &body)?;
    let probe = serde_json::from_slice::<ProbeMark>(&body).is_ok_and(|m| m.probe);
    p.counters()
        .received(match (probe, req.entries.is_empty()) {
            (true, _) => "probe",
            (false, true) => "heartbeat",
            (false, false) => "append",
        });
    if probe && !p.confirmed() {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unconfirmed",
            "this node's incarnation is not confirmed: its acknowledgement counts for no claim",
        ));
    }
    let res = tokio::spawn(p.on_append(from, req))
        .await
        .map_err(internal)?;
    Ok(Json(res).into_response())
}

pub(super) async fn vote<P: QuorumPeer>(
    State(p): State<Arc<P>>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let req: VoteRequest<NodeId> = decode_peer(p.counters(), &body)?;
    p.counters().received("vote");
    let res = tokio::spawn(p.on_vote_request(req))
        .await
        .map_err(internal)?;
    Ok(Json(res).into_response())
}

async fn snapshot<P: QuorumPeer>(
    State(p): State<Arc<P>>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let req: InstallSnapshotRequest<TypeConfig> = decode_peer(p.counters(), &body)?;
    p.counters().received("snapshot");
    let res = tokio::spawn(p.on_snapshot(req)).await.map_err(internal)?;
    Ok(Json(res).into_response())
}

async fn prevote<P: QuorumPeer>(
    State(p): State<Arc<P>>,
    Extension(PeerId(from)): Extension<PeerId>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let req: PreVoteRequest = decode_peer(p.counters(), &body)?;
    p.counters().received("prevote");
    Ok(Json(p.on_prevote_request(from, req).await).into_response())
}

async fn resign<P: QuorumPeer>(
    State(p): State<Arc<P>>,
    Extension(PeerId(from)): Extension<PeerId>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let notice: Resign = decode_peer(p.counters(), &body)?;
    p.counters().received("resign");
    p.on_resign_notice(from, notice).await;
    Ok(Json(serde_json::json!({"ok": true})).into_response())
}

async fn hello<P: QuorumPeer>(
    State(p): State<Arc<P>>,
    Extension(PeerId(from)): Extension<PeerId>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let hello: Hello = decode_peer(p.counters(), &body)?;
    p.counters().received("hello");
    // In a task of its own: a recorded incarnation is recorded even if the request is dropped.
    match tokio::spawn(p.on_hello(from, hello))
        .await
        .map_err(internal)?
    {
        Ok(answer) => Ok(Json(answer).into_response()),
        Err(e) => Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "storage",
            format!("cannot record the incarnation: {e}"),
        )),
    }
}

async fn remove<P: QuorumPeer>(
    State(p): State<Arc<P>>,
    Extension(PeerId(from)): Extension<PeerId>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let req: RemoveRequest = decode_peer(p.counters(), &body)?;
    p.counters().received("remove");
    let res = tokio::spawn(p.on_remove(from, req))
        .await
        .map_err(internal)?;
    Ok(Json(res).into_response())
}

async fn join<P: QuorumPeer>(
    State(p): State<Arc<P>>,
    Extension(PeerId(from)): Extension<PeerId>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let req: JoinRequest = decode_peer(p.counters(), &body)?;
    p.counters().received("join");
    // In a task of its own: a change proposed is seen through even if the request is dropped.
    let res = tokio::spawn(p.on_join(from, req)).await.map_err(internal)?;
    Ok(Json(res).into_response())
}

async fn renew<P: QuorumPeer>(
    State(p): State<Arc<P>>,
    Extension(PeerId(from)): Extension<PeerId>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let req: RenewRequest = decode_peer(p.counters(), &body)?;
    p.counters().received("renew");
    Ok(Json(p.on_renew(from, req).await).into_response())
}

/// Appends carry at most the log since the last snapshot (`raft_config`: a snapshot every 32
/// entries, 8 kept) and snapshots the membership and incarnations: more than the transport's
/// small default, read before the MAC is checked.
pub fn allow_bodies(transport: &Transport) {
    transport.allow_body(PATH_APPEND, APPEND_BODY_LIMIT);
    transport.allow_body(PATH_SNAPSHOT, crate::BODY_LIMIT);
}
