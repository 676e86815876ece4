//! The engine interface: what a node asks of the election engine of its mode, whichever it is
//! (quorum on openraft, or bully and ring behind the legacy node). The node holds one
//! `Arc<dyn Engine>` and never matches on the mode after starting it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use axum::Router;
use futures_util::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use crate::clock::Clock;
use crate::counters::Counters;
use crate::events::EventLog;
use crate::lease::Claim;
use crate::role::{Mode, NodeId, Resigned, Role, View};
use crate::transport::Transport;
use electd_client::{
    AddMember, Members, NodeRoleLimit, RoleClaimInfo, RoleInfo, RoleName, RoleResigned, RolesPage,
    Token,
};

/// The node's view judged at one instant: the lease is a judgement made at that instant, not
/// part of the view.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Judged {
    pub view: View,
    /// Quorum mode, while leading: nanoseconds of claim left.
    pub lease_remaining_ns: Option<u64>,
}

impl Judged {
    /// The view of node `id` while its claim `c` runs: leader of the claim's term, with the
    /// claim's time left at `now_ns` (the `lease_ms` answered, in quorum and mutex mode alike).
    pub fn claiming(id: NodeId, c: &Claim, now_ns: u64) -> Judged {
        Judged {
            view: View {
                role: Role::Leader,
                term: c.term,
                leader: Some(id),
            },
            lease_remaining_ns: Some(c.left_ns(now_ns)),
        }
    }

    /// A view without a lease (every view but a leader's while its claim runs).
    pub fn unleased(view: View) -> Judged {
        Judged {
            view,
            lease_remaining_ns: None,
        }
    }
}

/// Why a resignation (`POST /v1/admin/resign`) was refused.
#[derive(Clone, Debug, PartialEq, Eq, Hash, thiserror::Error)]
pub enum ResignError {
    /// This node does not hold the claim.
    #[error("node {0} does not hold the claim")]
    NotLeader(NodeId),
    /// The named successor is not another member of the cluster.
    #[error("node {0} is not another member of this cluster")]
    UnknownTarget(NodeId),
    /// The named successor cannot win the next election (its log is behind, or it does not
    /// answer the leader).
    #[error("node {0} cannot take over: {1}")]
    Unsuitable(NodeId, String),
    /// No follower has the whole log: none could win the next election.
    #[error("no follower has the leader's whole log, so none could take over")]
    NoSuccessor,
    /// The mode's algorithm has no handoff (bully and ring in their textbook form).
    #[error("{0} mode has no handoff: stop the node (SIGTERM) to make the others elect")]
    NotSupported(Mode),
}

/// Why a membership change or query (`/v1/members`, `/v1/admin/members`) was refused.
#[derive(Debug, thiserror::Error)]
pub enum MembershipError {
    /// Only quorum mode changes its members at runtime; the others keep the config's.
    #[error("this mode keeps the members of its config: no runtime membership changes")]
    NotSupported,
    /// Changes go through the leader.
    #[error("node {me} is not the leader; {}", match leader {
        Some((id, addr)) => format!("node {id} at {addr} is"),
        None => "no leader is known now: retry".to_string(),
    })]
    NotLeader {
        me: NodeId,
        leader: Option<(NodeId, String)>,
    },
    #[error("node {0} is not a member")]
    UnknownMember(NodeId),
    #[error("node {0} is already a voter")]
    AlreadyMember(NodeId),
    #[error("address {addr} is already node {id}'s")]
    AddressInUse { addr: String, id: NodeId },
    #[error("a membership change is in progress: retry once it is committed")]
    InProgress,
    #[error("node {0} is the only voter: a cluster needs one")]
    LastVoter(NodeId),
    #[error("{0}")]
    Invalid(String),
    /// The change did not complete in time or openraft refused it (it may still complete).
    #[error("the membership change did not complete: {0}")]
    Failed(String),
}

/// Why a request about a named role (docs/design/roles.md) was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RolesError {
    /// Named roles are quorum mode's.
    #[error("named roles are served in quorum mode only")]
    NotSupported,
    #[error("no node stands for role {0}")]
    UnknownRole(RoleName),
    /// A resign named a grant that is not this node's current one (nothing changed).
    #[error("{}", stale_message(.role, *.given, .current))]
    StaleToken {
        role: RoleName,
        given: Token,
        current: Option<(NodeId, Token)>,
    },
    /// The log did not apply the change in time (no leader, or it did not answer); it is
    /// still asked in every renewal, and may be applied later.
    #[error("the change to role {0} was not applied in time: no leader, or it did not answer")]
    NotApplied(RoleName),
    /// The same for a node's `max_roles`.
    #[error("node {0}'s max_roles was not applied in time: no leader, or it did not answer")]
    LimitNotApplied(NodeId),
    #[error("this node is stopping")]
    Stopping,
}

fn stale_message(role: &RoleName, given: Token, current: &Option<(NodeId, Token)>) -> String {
    match current {
        Some((node, token)) => format!(
            "token {given} is not this node's grant of role {role}: node {node} holds it with token {token}"
        ),
        None => format!("token {given} is not this node's grant of role {role}: no node holds it"),
    }
}

/// A request about named roles, as the API takes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RolesRequest {
    /// `GET /v1/roles`.
    List(RolesQuery),
    /// `GET /v1/claim/{name}`: this node's claim on a role.
    Claim(RoleName),
    /// `PUT`/`DELETE /v1/roles/{name}/candidates/{id}`: answered once the log applied it.
    Stand {
        name: RoleName,
        node: NodeId,
        stands: bool,
    },
    /// `POST /v1/roles/{name}/resign`: answered once the release is applied.
    Resign { name: RoleName, token: Token },
    /// `PUT`/`DELETE /v1/roles/{name}/preferred`: answered once the log applied it.
    Prefer {
        name: RoleName,
        node: Option<NodeId>,
    },
    /// `PUT`/`DELETE /v1/members/{id}/max_roles` (`Some`), or `GET` (`None`): answered once
    /// the log applied it.
    Limit {
        node: NodeId,
        max_roles: Option<Option<u32>>,
    },
    /// The counts `/metrics` exports (bounded: no label carries a role name).
    Counts,
}

/// The answers to a [`RolesRequest`], in its order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RolesReply {
    Page(RolesPage),
    /// Whether this node holds the role's claim (200), and the answer.
    Claim(bool, RoleClaimInfo),
    Role(RoleInfo),
    Resigned(RoleResigned),
    Counts(RoleCounts),
    Limit(NodeRoleLimit),
}

/// The roles counted, as the node's applied log has them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RoleCounts {
    pub roles: u64,
    pub held: u64,
    /// Held by this node.
    pub mine: u64,
    /// Held by this node and claimed now: a claim on each would be answered (renewed, not
    /// stopped).
    pub claimed: u64,
    /// Grants applied, ever (the last token drawn).
    pub grants: u64,
}

/// `GET /v1/roles`'s query.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Deserialize)]
pub struct RolesQuery {
    /// Only names that start with this.
    #[serde(default)]
    pub prefix: Option<String>,
    /// Only names after this one.
    #[serde(default)]
    pub after: Option<String>,
    #[serde(default)]
    pub limit: Option<usize>,
}

/// What a node gives the engine of its mode: the one peer transport, the event log, the
/// counters, and the clock through which the engine reads time.
#[derive(Clone)]
pub struct Plumbing {
    pub transport: Arc<Transport>,
    pub events: Arc<EventLog>,
    pub counters: Arc<Counters>,
    pub clock: Arc<dyn Clock>,
}

/// The election engine of one mode.
pub trait Engine: Send + Sync + 'static {
    /// The node's effective role, judged now.
    fn view(&self) -> Judged;

    /// The engine's `/peer/...` routes (without the transport guard; the API adds it).
    fn routes(self: Arc<Self>) -> Router;

    /// What the engine adds to `/v1/status` (`engine`): not part of the contract.
    fn status(&self) -> serde_json::Value;

    /// Hands the leader role over to `to` (or to the engine's choice).
    fn resign(&self, to: Option<NodeId>) -> BoxFuture<'_, Result<Resigned, ResignError>>;

    /// `Err` with the reason when the engine no longer runs (`/v1/health` answers 503).
    fn health(&self) -> Result<(), String>;

    /// Graceful stop: the engine stops claiming and hands over as fast as its algorithm
    /// allows, and cancels `stop` (its background tasks) in the order its safety needs.
    fn shutdown(&self, stop: CancellationToken) -> BoxFuture<'_, ()>;

    /// The membership in force (`GET /v1/members`); quorum mode only.
    fn members(&self) -> Result<Members, MembershipError> {
        Err(MembershipError::NotSupported)
    }

    /// Adds a member (`POST /v1/admin/members`); quorum mode only.
    fn add_member(&self, _add: AddMember) -> BoxFuture<'_, Result<Members, MembershipError>> {
        Box::pin(async { Err(MembershipError::NotSupported) })
    }

    /// Removes a member (`DELETE /v1/admin/members/{id}`); quorum mode only.
    fn remove_member(&self, _id: NodeId) -> BoxFuture<'_, Result<Members, MembershipError>> {
        Box::pin(async { Err(MembershipError::NotSupported) })
    }

    /// A request about named roles (docs/design/roles.md); quorum mode only.
    fn roles(&self, _req: RolesRequest) -> BoxFuture<'_, Result<RolesReply, RolesError>> {
        Box::pin(async { Err(RolesError::NotSupported) })
    }

    /// The role events this node's log applied (`GET /v1/roles/watch`); quorum mode only.
    fn role_events(&self) -> Result<crate::roles::feed::RoleEvents, RolesError> {
        Err(RolesError::NotSupported)
    }
}

/// Whether an engine's loop still runs. The loop holds the [`LoopGuard`]; when the loop ends
/// for any reason, a panic included, the guard drops and the flag falls.
#[derive(Clone)]
pub struct Running(Arc<AtomicBool>);

/// Held by a running loop (see [`Running`]).
pub struct LoopGuard(Arc<AtomicBool>);

impl Drop for LoopGuard {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Relaxed);
    }
}

impl Running {
    /// A flag that is up, and the guard that holds it up.
    pub fn start() -> (Running, LoopGuard) {
        let up = Arc::new(AtomicBool::new(true));
        (Running(up.clone()), LoopGuard(up))
    }

    /// `Err` naming `what` once the loop has ended.
    pub fn check(&self, what: &str) -> Result<(), String> {
        if self.0.load(Ordering::Relaxed) {
            Ok(())
        } else {
            Err(format!("{what} has stopped"))
        }
    }
}

/// Deliberate flaws that the lab switches on to show that its checkers catch them, and counts
/// of how often the paths they break were taken. The flaws exist only with the cargo feature
/// `flaws`, which only the lab enables (`lab/Cargo.toml`): in a build of the node alone
/// (`cargo build --release --bin electd`, `cargo install`, the package) the type has no field,
/// every accessor below is `false`, every count does nothing, and the branches that read them
/// are compiled out. Even where the feature is on, only
/// the lab's `electd-flawed` binary (`src/bin/electd/main.rs`) and the simulator set one.
#[derive(Clone, Debug, Default)]
pub struct Flaws {
    /// Quorum mode: the vote handler as it was before a leader kept its promises: a vote
    /// request for a higher term is passed to openraft even while a claim this node answered
    /// can still run (docs/safety.md, "Why two nodes never claim at once", step 4).
    #[cfg(feature = "flaws")]
    pub vote_while_leading: bool,
    /// Vote requests for a higher term that arrived while a promise of this node could still
    /// run (refused, unless `vote_while_leading`): the simulator's proof that its schedules
    /// reach the precondition.
    #[cfg(feature = "flaws")]
    pub votes_inside_promise: Arc<std::sync::atomic::AtomicU64>,
    /// Of those, the votes granted (only ever with `vote_while_leading`).
    #[cfg(feature = "flaws")]
    pub granted_inside_promise: Arc<std::sync::atomic::AtomicU64>,
    /// Quorum mode: a new data dir's incarnation is taken as confirmed at once, without the
    /// members recording it: a wiped disk votes again as the member it was (the identity check
    /// of docs/safety.md's step 10 left out).
    #[cfg(feature = "flaws")]
    pub trust_new_incarnation: bool,
    /// Quorum mode: the role turn as it was before it kept the event log in step during a
    /// probe: a claim that ends while a probe is out is recorded only when the probe returns,
    /// up to a probe timeout late (`quorum/driver/probe.rs`, `probe_recording`).
    #[cfg(feature = "flaws")]
    pub record_between_probes: bool,
    /// HMAC mode: the peer transport as it was before answers were signed (bedd083): an
    /// answer is taken as it comes, without its MAC checked (transport.rs, `send_once`), so an
    /// attacker on the path (the forger, faults.rs) grants votes and acknowledges probes.
    /// Given to the transport by `Node::start_in` (`Transport::takes_unsigned_answers`).
    #[cfg(feature = "flaws")]
    pub accept_unsigned_answers: bool,
    /// Quorum mode: a leader changes the membership without writing the voters'
    /// incarnations into the log first (hellos.rs, `log_incarnations` returns at once:
    /// identity.rs, rule 5 left out): members added later know a voter's data dir only from
    /// its hellos, and may confirm its wiped successor.
    #[cfg(feature = "flaws")]
    pub unlogged_incarnations: bool,
    /// Quorum mode: the preferred leader hands over to a member without asking whether its
    /// data dir is confirmed (quorum/driver/prefer.rs, `may_campaign` always true): a wiped
    /// voter started again with join is handed the role it cannot take, every settle time.
    #[cfg(feature = "flaws")]
    pub handover_to_unconfirmed: bool,
    /// Quorum mode: a snapshot that removed a member does not make this node forget the
    /// member's incarnation (storage/raft.rs, `install_snapshot` without `forget_outside`): it
    /// refuses the member's new data dir once it is added back.
    #[cfg(feature = "flaws")]
    pub snapshot_keeps_incarnations: bool,
    /// Mutex mode: a release counts the wait it writes into the row from the claim it has just
    /// ended (nothing left after a resign) instead of from the promises answered
    /// (mutex/node.rs, `release_wait_ms`; the node before issue 48): the row is free F − L
    /// after a resign while answers given just before still promise up to L.
    #[cfg(feature = "flaws")]
    pub release_from_ended_claim: bool,
    /// Quorum mode, named roles: one rule of docs/safety.md's "Roles" left out
    /// (`crate::roles::RoleFlaw`: `hasty-revoke` R4, `grant-in-first-lease` R3,
    /// `ignore-taken-at` R2, `release-at-once` R5).
    #[cfg(feature = "flaws")]
    pub role_flaw: Option<crate::roles::RoleFlaw>,
    /// Quorum mode: a leader's probe goes to the members that don't vote too and counts their
    /// acknowledgements as voters' (quorum/driver/probe.rs, `round`; docs/safety.md, N1 left
    /// out): a leader cut off from the voters goes on claiming on the non-voters' answers.
    #[cfg(feature = "flaws")]
    pub count_learner_acks: bool,
}

/// Whether each flaw is on: always `false` without the feature.
#[cfg(feature = "flaws")]
impl Flaws {
    pub fn vote_while_leading(&self) -> bool {
        self.vote_while_leading
    }
    pub fn trust_new_incarnation(&self) -> bool {
        self.trust_new_incarnation
    }
    pub fn record_between_probes(&self) -> bool {
        self.record_between_probes
    }
    pub fn accept_unsigned_answers(&self) -> bool {
        self.accept_unsigned_answers
    }
    pub fn unlogged_incarnations(&self) -> bool {
        self.unlogged_incarnations
    }
    pub fn handover_to_unconfirmed(&self) -> bool {
        self.handover_to_unconfirmed
    }
    pub fn snapshot_keeps_incarnations(&self) -> bool {
        self.snapshot_keeps_incarnations
    }
    pub fn role_flaw(&self) -> Option<crate::roles::RoleFlaw> {
        self.role_flaw
    }
    pub fn release_from_ended_claim(&self) -> bool {
        self.release_from_ended_claim
    }
    pub fn count_learner_acks(&self) -> bool {
        self.count_learner_acks
    }
    /// Counts a vote request for a higher term inside a promise of this node.
    pub fn vote_asked_inside_promise(&self) {
        self.votes_inside_promise.fetch_add(1, Ordering::Relaxed);
    }
    /// Counts a vote granted inside a promise of this node.
    pub fn vote_granted_inside_promise(&self) {
        self.granted_inside_promise.fetch_add(1, Ordering::Relaxed);
    }
}

/// Whether each flaw is on: always `false` without the feature.
#[cfg(not(feature = "flaws"))]
impl Flaws {
    pub fn vote_while_leading(&self) -> bool {
        false
    }
    pub fn trust_new_incarnation(&self) -> bool {
        false
    }
    pub fn record_between_probes(&self) -> bool {
        false
    }
    pub fn accept_unsigned_answers(&self) -> bool {
        false
    }
    pub fn unlogged_incarnations(&self) -> bool {
        false
    }
    pub fn handover_to_unconfirmed(&self) -> bool {
        false
    }
    pub fn snapshot_keeps_incarnations(&self) -> bool {
        false
    }
    pub fn role_flaw(&self) -> Option<crate::roles::RoleFlaw> {
        None
    }
    pub fn release_from_ended_claim(&self) -> bool {
        false
    }
    pub fn count_learner_acks(&self) -> bool {
        false
    }
    pub fn vote_asked_inside_promise(&self) {}
    pub fn vote_granted_inside_promise(&self) {}
}
