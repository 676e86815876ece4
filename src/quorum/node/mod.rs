//! [`QuorumNode`], a node of quorum mode, and what it is as the node's [`Engine`]: it starts
//! (openraft as `start.rs` starts it, then its identity and its core), judges its view and its
//! claim, records role changes, hands leadership over (a resign, a graceful stop), and reacts
//! to what its peers say ([`QuorumPeer`]; the protocol is `protocol.rs`). The task that turns
//! its core is the driver (`driver/mod.rs`); the members are `membership.rs`'s.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

use axum::Router;
use futures_util::future::BoxFuture;
use openraft::error::{InstallSnapshotError, RaftError};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::{BasicNode, Raft, RaftMetrics};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::admission::Admission;
use super::core::{Action, Answer, CoreTiming, Input, Observation, QuorumCore, RaftView};
use super::election::{self, ElectionTiming, Gate};
use super::hellos::Hellos;
use super::inbox::{self, CoreOwner, Inbox};
use super::membership::Membership;
use super::preference::Followers;
use super::protocol::{
    tell_resign, Hello, HelloAnswer, JoinAnswer, JoinRequest, PreVoteRequest, PreVoteResponse,
    QuorumPeer, RemoveRequest, Resign,
};
use super::start::{start_raft, QuorumError};
use super::storage::Store;
use super::types::{voters_of, TypeConfig};
use crate::clock::{ms, Clock};
use crate::config::{Timing, ValidConfig};
use crate::counters::Counters;
use crate::engine::{Engine, Flaws, Judged, MembershipError, Plumbing, ResignError};
use crate::engine::{RolesError, RolesReply, RolesRequest};
use crate::events::EventLog;
use crate::role::{NodeId, Resigned};
use crate::roles::holder::Renewed;
use crate::roles::steward::RenewRequest;
use crate::transport::Transport;
use electd_client::{AddMember, Members};

/// A running quorum-mode node.
pub struct QuorumNode {
    pub(super) id: NodeId,
    /// The members' priorities from the config (preference.rs); a member not listed: 0.
    pub(super) priorities: BTreeMap<NodeId, u32>,
    /// How long a member of higher priority must be ready before the leader hands over.
    pub(super) settle_ns: u64,
    pub(super) timing: Timing,
    pub(super) raft: Raft<TypeConfig>,
    pub(super) store: Arc<Store>,
    pub(super) clock: Arc<dyn Clock>,
    /// Every decision about the claim, the campaign and the contact (core/mod.rs): stepped by
    /// the driver alone, which owns it; asked and read through here (inbox.rs).
    pub(super) core: Inbox,
    /// The follower-lease gate: orders appends and votes against an election (election/mod.rs).
    pub(super) gate: Gate,
    /// The campaign's timings (from the config; the core's campaign holds a copy).
    pub(super) election: ElectionTiming,
    /// Started with `join`: a member's refusal of its incarnation is not final (driver/confirm.rs).
    pub(super) joins: bool,
    /// Members that don't vote: joins and removals, and whether this node is one (admission.rs).
    pub(super) admission: Admission,
    pub(super) events: Arc<EventLog>,
    pub(super) counters: Arc<Counters>,
    /// Pokes the driver's role turn (a vote was granted, a claim must be re-judged).
    pub(super) wake: Notify,
    pub(super) transport: Arc<Transport>,
    /// The hellos it says, and what it records of the answers (hellos.rs).
    pub(super) hellos: Hellos,
    /// The members in force, and the changes this node makes to them (membership.rs).
    pub(super) members: Membership,
    /// Deliberate flaws (the lab's), and how often their paths were taken.
    pub(super) flaws: Flaws,
}

impl QuorumNode {
    /// Opens the durable state, starts openraft and bootstraps the membership from the config.
    /// `seed` seeds the campaign's jitter; `clock` is where claims and leases are judged.
    pub async fn start(
        cfg: &ValidConfig,
        store: Arc<Store>,
        plumbing: Plumbing,
        seed: u64,
        flaws: Flaws,
    ) -> Result<(Arc<QuorumNode>, CoreOwner), QuorumError> {
        let Plumbing {
            transport,
            events,
            counters,
            clock,
        } = plumbing;
        super::protocol::allow_bodies(&transport);
        let t = cfg.timing;
        let raft = start_raft(cfg, &transport, &store).await?;
        let started_ns = clock.boot_ns();
        let taken = super::hellos::take_identity(&store, cfg, seed, started_ns).await;
        taken.map_err(QuorumError::Start)?;
        let core = QuorumCore::new(cfg.id, CoreTiming::from_config(&t), seed, started_ns);
        #[cfg(feature = "flaws")]
        let core = core.with_vote_while_leading(flaws.vote_while_leading());
        let hellos = Hellos::new(cfg, &transport, &store, &raft, &flaws);
        let members = Membership::new(cfg, &raft, &store, &transport, &hellos);
        let admission = Admission::new(cfg, &raft, &transport, &members);
        let (core, owner) = inbox::own(core);
        let node = Arc::new(QuorumNode {
            admission,
            members,
            hellos,
            id: cfg.id,
            priorities: cfg.peers.iter().map(|p| (p.id, p.priority)).collect(),
            settle_ns: ms(cfg.effective_priority_settle_ms()),
            timing: t,
            raft,
            store,
            gate: Gate::default(),
            core,
            joins: cfg.join.is_some(),
            election: ElectionTiming::from_config(&t),
            clock,
            events,
            counters,
            wake: Notify::new(),
            transport,
            flaws,
        });
        Ok((node, owner))
    }

    pub(super) fn raft_metrics(&self) -> RaftMetrics<NodeId, BasicNode> {
        self.raft.metrics().borrow().clone()
    }

    /// The effective role now, judged from openraft's state and the claim at this moment (read
    /// while the core is held, so that no step comes between: inbox.rs).
    pub(super) fn judge(&self, m: &RaftMetrics<NodeId, BasicNode>) -> Judged {
        let core = self.core.read();
        core.judge(self.clock.read(), &RaftView::of(m))
    }

    /// Has the driver step the core with `input`, and carry out what it says; its answer
    /// (`None`: none, or the driver has stopped).
    pub(super) async fn ask(&self, input: Input) -> Option<Answer> {
        self.core.ask(input).await
    }

    /// Carries out what the core said, but probes (the driver's own): records the view,
    /// wakes a campaign waiting on the contact or the driver's role turn, counts the lab's
    /// observations, and tells the followers of a resignation. Called in the driver's task,
    /// in the same poll as the step: what a step decided is carried out even if the one who
    /// asked for it has gone (an admin's request dropped at its timeout).
    pub(super) fn carry_out(&self, actions: Vec<Action>) -> Option<Answer> {
        let mut answer = None;
        for a in actions {
            match a {
                Action::Answer(Answer::Resign(Ok(resigned))) => {
                    let msg = Resign {
                        term: resigned.term,
                        successor: resigned.successor,
                    };
                    tokio::spawn(self.tell_followers(msg));
                    answer = Some(Answer::Resign(Ok(resigned)));
                }
                Action::Answer(x) => answer = Some(x),
                Action::Record => self.record_view(),
                Action::ContactChanged => self.gate.wake(),
                Action::Wake => self.wake.notify_one(),
                Action::Observed(Observation::VoteAskedInsidePromise) => {
                    self.flaws.vote_asked_inside_promise()
                }
                Action::Observed(Observation::VoteGrantedInsidePromise) => {
                    self.flaws.vote_granted_inside_promise()
                }
                Action::Probe { .. } => debug_assert!(false, "only a tick probes: {a:?}"),
            }
        }
        answer
    }

    /// Records an event if (role, term, leader) changed. The one place quorum mode records role
    /// changes. Stamps err wide: "became leader" at the send time of the probe that started the
    /// claim, "stopped leading" at the moment the claim ended, never earlier.
    pub(super) fn record_view(&self) {
        self.events.record_leased_view(
            || self.judge(&self.raft_metrics()).view,
            &self.core,
            &*self.clock,
            &self.counters,
        );
    }

    /// Hands leadership over (`POST /v1/admin/resign`, and to a preferred leader,
    /// driver/prefer.rs): one step of the core fences this node's claim in its term for good
    /// *before* anything else, stops heartbeats and probes, and names the successor (`to`, else
    /// the follower with the most of the log: preference.rs, `Followers::successor`); the
    /// followers are then told to let it campaign first ([`Resign`]: `carry_out` sends it), and
    /// openraft's followers' leases run out (openraft 0.9 has no leader transfer).
    pub(super) async fn resign(&self, to: Option<NodeId>) -> Result<Resigned, ResignError> {
        let m = self.raft_metrics();
        let resign = Input::Resign {
            raft: RaftView::of(&m),
            to,
            followers: Followers::of(&m, &voters_of(&m), self.id),
        };
        match self.ask(resign).await {
            Some(Answer::Resign(r)) => r,
            // The driver has stopped: the node stops, and holds no claim it can hand over.
            _ => Err(ResignError::NotLeader(self.id)),
        }
    }

    /// What the core is told when the node stops, openraft's state being `m`.
    pub(super) fn stopping(&self, m: &RaftMetrics<NodeId, BasicNode>) -> Input {
        Input::Shutdown {
            raft: RaftView::of(m),
            followers: Followers::of(m, &voters_of(m), self.id),
        }
    }

    /// What the core's `answer` to [`QuorumNode::stopping`] calls for: a leader that named its
    /// successor tells every other voter, in `m`'s term, as a resignation does; nothing else
    /// does. The notice to send (the caller awaits it or spawns it).
    pub(super) fn stopped(
        &self,
        m: &RaftMetrics<NodeId, BasicNode>,
        answer: Option<Answer>,
    ) -> Option<impl Future<Output = ()> + 'static> {
        let Some(Answer::Shutdown(Some(successor))) = answer else {
            return None;
        };
        let term = m.current_term;
        Some(self.tell_followers(Resign { term, successor }))
    }

    /// Tells every other voter that this node resigned (protocol.rs, `tell_resign`).
    pub(super) fn tell_followers(&self, msg: Resign) -> impl Future<Output = ()> + 'static {
        tell_resign(self.transport.clone(), self.members.other_voters(), msg)
    }

    /// Graceful stop (SIGTERM): the claim ends for good at once (no probe in flight can renew
    /// it), heartbeats stop so that the followers' leases run out, a leader names its
    /// successor, and openraft stops. The successor is told before openraft stops.
    pub(super) async fn shutdown(&self) {
        let m = self.raft_metrics();
        let answer = self.ask(self.stopping(&m)).await;
        if let Some(told) = self.stopped(&m, answer) {
            told.await;
        }
        if let Err(e) = self.raft.shutdown().await {
            tracing::warn!(error = %e, "openraft shutdown");
        }
    }
}

/// Quorum mode as the node's [`Engine`].
impl Engine for QuorumNode {
    /// The effective role now.
    fn view(&self) -> Judged {
        self.judge(&self.raft_metrics())
    }

    fn routes(self: Arc<Self>) -> Router {
        super::protocol::routes(self)
    }

    /// Extra status for `/v1/status` (status.rs).
    fn status(&self) -> serde_json::Value {
        status::of(self)
    }

    /// openraft's core stopped (a storage error; the process exits right after).
    fn health(&self) -> Result<(), String> {
        let running = self.raft.metrics().borrow().running_state.clone();
        running.map_err(|e| format!("openraft stopped: {e}"))
    }

    fn resign(&self, to: Option<NodeId>) -> BoxFuture<'_, Result<Resigned, ResignError>> {
        Box::pin(QuorumNode::resign(self, to))
    }

    fn members(&self) -> Result<Members, MembershipError> {
        Ok(status::members(self))
    }

    fn add_member(&self, add: AddMember) -> BoxFuture<'_, Result<Members, MembershipError>> {
        Box::pin(self.members.add_member(add))
    }

    fn remove_member(&self, id: NodeId) -> BoxFuture<'_, Result<Members, MembershipError>> {
        Box::pin(self.members.remove_member(id, self.resign(None)))
    }

    fn roles(&self, req: RolesRequest) -> BoxFuture<'_, Result<RolesReply, RolesError>> {
        Box::pin(roles::serve(self, req))
    }

    fn role_events(&self) -> Result<crate::roles::feed::RoleEvents, RolesError> {
        Ok(self.store.role_events.clone())
    }

    /// The claim is closed before the driver is stopped, so that it cannot start a campaign
    /// on its way out.
    fn shutdown(&self, stop: CancellationToken) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            QuorumNode::shutdown(self).await;
            stop.cancel();
        })
    }
}

impl QuorumPeer for QuorumNode {
    fn counters(&self) -> &Counters {
        &self.counters
    }

    fn confirmed(&self) -> bool {
        self.store.confirmed()
    }

    /// An append accepted from the leader it names renews the follower lease (the gate), names
    /// the leader, and settles any campaign; openraft processes it under the gate's read side,
    /// so that a campaign sees it before it enqueues the election, or campaigns first and the
    /// append is refused as of a lower vote.
    async fn on_append(
        self: Arc<Self>,
        from: NodeId,
        req: AppendEntriesRequest<TypeConfig>,
    ) -> Result<AppendEntriesResponse<NodeId>, RaftError<NodeId>> {
        let leader = req.vote.leader_id().voted_for();
        let commit = req.leader_commit.map(|l| l.index);
        let _admitted = self.gate.admit().await;
        let res = self.raft.append_entries(req).await;
        if let (Ok(r), Some(l)) = (&res, leader) {
            if l == from && !matches!(r, AppendEntriesResponse::HigherVote(_)) {
                self.ask(Input::AppendAccepted { leader: l, commit }).await;
            }
        }
        res
    }

    /// Judged by the core first (core/mod.rs, `vote_asked`: no vote while a promise of this node
    /// can still run; a request for a higher term suspends the claim before openraft sees
    /// it), then by openraft, whose answer the core takes before the gate is let go.
    async fn on_vote_request(
        self: Arc<Self>,
        req: VoteRequest<NodeId>,
    ) -> Result<VoteResponse<NodeId>, RaftError<NodeId>> {
        let term = req.vote.leader_id().get_term();
        let confirmed = self.store.confirmed();
        let asked = Input::VoteAsked {
            term,
            current_term: self.raft.metrics().borrow().current_term,
            confirmed,
        };
        let Some(Answer::PassVote {
            higher,
            inside_promise,
        }) = self.ask(asked).await
        else {
            let (reason, why) = match confirmed {
                true => (
                    "promise",
                    "a promise of this node can still run, or the node stops",
                ),
                false => (
                    "unconfirmed",
                    "this data dir's incarnation is not confirmed",
                ),
            };
            self.counters.vote_refused(reason);
            tracing::debug!(term, "vote refused: {why}");
            // Its own vote and log, not granted: nothing the candidate learns makes it step down.
            let vote = self.raft.metrics().borrow().vote;
            let last_log_id = self.store.last_log_id();
            return Ok(VoteResponse {
                vote,
                vote_granted: false,
                last_log_id,
            });
        };
        // Under the gate's read side, like an append: a campaign sees a vote this
        // node granted before it campaigns itself, or campaigns first and openraft refuses
        // the request (one vote per term).
        let admitted = self.gate.admit().await;
        let res = self.raft.vote(req).await;
        self.ask(Input::VoteAnswered {
            term,
            higher,
            granted: matches!(&res, Ok(r) if r.vote_granted),
            failed: res.is_err(),
            inside_promise,
        })
        .await;
        drop(admitted);
        res
    }

    /// A snapshot renews the follower lease like an append, when openraft's vote did not
    /// outrank the sender's (a stale leader's snapshot is answered `Ok` too, with the higher
    /// vote).
    async fn on_snapshot(
        self: Arc<Self>,
        req: InstallSnapshotRequest<TypeConfig>,
    ) -> Result<InstallSnapshotResponse<NodeId>, RaftError<NodeId, InstallSnapshotError>> {
        let leader = req.vote.leader_id().voted_for();
        let vote = req.vote;
        let _admitted = self.gate.admit().await;
        let res = self.raft.install_snapshot(req).await;
        if matches!(&res, Ok(r) if r.vote <= vote) {
            self.ask(Input::SnapshotAccepted { leader }).await;
        }
        res
    }

    /// Judged by the core (core/mod.rs, `prevote_asked`): its follower lease, its log and the
    /// pre-vote it pledged last, changing nothing durable; a grant is a pledge to `from`.
    async fn on_prevote_request(&self, from: NodeId, req: PreVoteRequest) -> PreVoteResponse {
        let term = self.raft.metrics().borrow().current_term;
        let asked = Input::PreVoteAsked {
            from,
            theirs: req.last_log_id,
            mine: self.store.last_log_id(),
            confirmed: self.store.confirmed(),
        };
        let (verdict, lease_left_us) = match self.ask(asked).await {
            Some(Answer::PreVote {
                verdict,
                lease_left_us,
            }) => (verdict, lease_left_us),
            _ => (Err(election::PreVoteRefusal::Stopping), None),
        };
        PreVoteResponse {
            granted: verdict.is_ok(),
            term,
            refused: verdict.err().map(|r| r.code().to_string()),
            lease_left_us,
        }
    }

    /// Its leader resigned: the named successor campaigns first, as soon as the followers'
    /// leases allow, everyone else one stagger step later (election/mod.rs).
    async fn on_resign_notice(&self, from: NodeId, notice: Resign) {
        let raft = RaftView::of(&self.raft_metrics());
        let told = Input::ResignNotice {
            from,
            term: notice.term,
            successor: notice.successor,
            raft,
        };
        if self.ask(told).await == Some(Answer::Handoff { taken: true }) {
            tracing::info!(
                term = notice.term,
                successor = notice.successor,
                "leader {from} resigned"
            );
        }
    }

    /// Only the node itself may ask to be removed this way, and only of a leader.
    async fn on_remove(
        self: Arc<Self>,
        from: NodeId,
        req: RemoveRequest,
    ) -> Result<Members, String> {
        self.members.remove_self(from, req, self.resign(None)).await
    }

    /// Records `from`'s incarnation if this node knows none; refuses another one than it
    /// knows (identity.rs).
    async fn on_hello(self: Arc<Self>, from: NodeId, hello: Hello) -> Result<HelloAnswer, String> {
        let stranger = || self.members.is_stranger(from);
        self.hellos.answer(from, hello, stranger).await
    }

    /// A member that does not vote asks to be added: only a leader adds it (membership.rs).
    async fn on_join(self: Arc<Self>, from: NodeId, req: JoinRequest) -> JoinAnswer {
        self.admission.join(from, req).await
    }

    async fn on_renew(&self, from: NodeId, req: RenewRequest) -> Option<Renewed> {
        roles::renew_for(self, from, req).await
    }
}

pub(super) mod roles;
mod status;
#[cfg(test)]
mod tests;
