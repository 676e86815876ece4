//! [`QuorumNode`]: a node of quorum mode. It starts openraft (its own elections and
//! heartbeats off), judges its view and its claim, records role changes, and reacts to what
//! its peers say ([`QuorumPeer`]: the protocol is `protocol.rs`). What it runs is in files of
//! their own: the role loop that probes, claims and demotes (`role_loop.rs`), the election
//! driver that decides when to campaign (`driver.rs`), and the handover on resignation and at
//! shutdown (`handover.rs`); `engine.rs` makes it the node's `Engine`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use openraft::error::{InitializeError, InstallSnapshotError, RaftError};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::{BasicNode, Raft, RaftMetrics, SnapshotPolicy};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::core::{Action, Answer, CoreTiming, Input, Observation, QuorumCore, RaftView};
use super::election::{self, ElectionTiming, Gate};
use super::identity::{self, Recognition};
use super::protocol::{
    Hello, HelloAnswer, PreVoteRequest, PreVoteResponse, QuorumPeer, RaftNet, RemoveRequest,
    Resign, PATH_APPEND, PATH_SNAPSHOT,
};
use super::storage::{LogStore, StateMachine, Store, StoreError};
use super::types::TypeConfig;
use crate::clock::{ms, Clock};
use crate::config::{Timing, ValidConfig};
use crate::counters::Counters;
use crate::engine::{Flaws, Judged, Plumbing};
use crate::events::EventLog;
use crate::role::NodeId;
use crate::transport::Transport;
use electd_client::Members;

/// Why quorum mode could not start.
#[derive(Debug, thiserror::Error)]
pub enum QuorumError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("openraft refused the timing config: {0}")]
    Config(Box<openraft::ConfigError>),
    #[error("openraft failed to start: {0}")]
    Start(String),
}

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
    /// Every decision about the claim, the campaign and the contact (core/mod.rs). Locked only to
    /// step it, never across an `.await`; the one lock of the node's state.
    pub(super) core: Mutex<QuorumCore>,
    /// The follower-lease gate: orders appends and votes against an election (election.rs).
    pub(super) gate: Gate,
    /// The election driver's timings (from the config; the campaign holds a copy).
    pub(super) election: ElectionTiming,
    /// A completion of a joint membership config is under way (membership.rs).
    pub(super) finishing: std::sync::atomic::AtomicBool,
    /// Started with `join`: a member's refusal of its incarnation is not final (driver.rs).
    pub(super) joins: bool,
    pub(super) events: Arc<EventLog>,
    pub(super) counters: Arc<Counters>,
    /// Pokes the role loop (a vote was granted, a claim must be re-judged).
    pub(super) wake: Notify,
    pub(super) transport: Arc<Transport>,
    /// Deliberate flaws (the lab's), and how often their paths were taken.
    pub(super) flaws: Flaws,
}

impl QuorumNode {
    /// Opens the durable state, starts openraft and bootstraps the membership from the config.
    /// `seed` seeds the election driver's jitter; `clock` is where claims and leases are judged.
    pub async fn start(
        cfg: &ValidConfig,
        store: Arc<Store>,
        plumbing: Plumbing,
        seed: u64,
        flaws: Flaws,
    ) -> Result<Arc<QuorumNode>, QuorumError> {
        let Plumbing {
            transport,
            events,
            counters,
            clock,
        } = plumbing;
        // Appends carry at most the log since the last snapshot (`raft_config`: a snapshot
        // every 32 entries, 8 kept) and snapshots the membership and incarnations: more
        // than the transport's small default, read before the MAC is checked.
        transport.allow_body(PATH_APPEND, APPEND_BODY_LIMIT);
        transport.allow_body(PATH_SNAPSHOT, crate::BODY_LIMIT);
        let t = cfg.timing;
        let raft_cfg = raft_config(&cfg.cluster_id, &t)?;
        let net = RaftNet {
            transport: transport.clone(),
            backoff: Duration::from_millis(t.heartbeat_ms),
        };
        let raft = Raft::new(
            cfg.id,
            Arc::new(raft_cfg),
            net,
            LogStore(store.clone()),
            StateMachine(store.clone()),
        )
        .await
        .map_err(|e| QuorumError::Start(e.to_string()))?;

        let members: BTreeMap<NodeId, BasicNode> = cfg
            .peers
            .iter()
            .map(|p| (p.id, BasicNode::new(&p.addr)))
            .collect();
        let bootstrap = if cfg.join.is_some() {
            // A node that joins takes its membership from the cluster's log.
            tracing::info!("joining: the membership comes from the cluster, not from peers");
            Ok(())
        } else if raft
            .is_initialized()
            .await
            .map_err(|e| QuorumError::Start(e.to_string()))?
        {
            // openraft refuses to initialise a node that has voted or has a log, and logs an
            // ERROR saying so: only a new data dir is initialised. (Asked of openraft's core,
            // a round trip that also has its metrics, the term among them, loaded before the
            // node answers: a node skipping the call answered term 0 after a restart.)
            tracing::debug!("membership already initialised (the node has voted or has a log)");
            Ok(())
        } else {
            raft.initialize(members).await
        };
        match bootstrap {
            Ok(()) => tracing::info!("bootstrapped the membership from the config"),
            Err(RaftError::APIError(InitializeError::NotAllowed(_))) => {
                tracing::debug!("membership already initialised (the node has voted or has a log)")
            }
            Err(e) => tracing::warn!(error = %e, "initialize failed"),
        }
        let timing = ElectionTiming::from_config(&t);
        let started_ns = clock.boot_ns();
        let me = store
            .take_identity(identity::draw_incarnation(seed, cfg.id, started_ns))
            .await
            .map_err(|e| QuorumError::Start(format!("cannot record the incarnation: {e}")))?;
        if !me.confirmed {
            tracing::info!(
                incarnation = format!("{:#x}", me.incarnation),
                need = identity::confirmations_needed(cfg.peers.len()),
                "a new data dir: no votes until enough members have recorded its incarnation"
            );
        }
        let core = QuorumCore::new(cfg.id, CoreTiming::from_config(&t), seed, started_ns);
        #[cfg(feature = "flaws")]
        let core = core.with_vote_while_leading(flaws.vote_while_leading());
        Ok(Arc::new(QuorumNode {
            id: cfg.id,
            priorities: cfg.peers.iter().map(|p| (p.id, p.priority)).collect(),
            settle_ns: ms(cfg.effective_priority_settle_ms()),
            timing: t,
            raft,
            store,
            gate: Gate::default(),
            core: Mutex::new(core),
            finishing: std::sync::atomic::AtomicBool::new(false),
            joins: cfg.join.is_some(),
            election: timing,
            clock,
            events,
            counters,
            wake: Notify::new(),
            transport,
            flaws,
        }))
    }

    pub(super) fn raft_metrics(&self) -> RaftMetrics<NodeId, BasicNode> {
        self.raft.metrics().borrow().clone()
    }

    /// The answer to a vote request this node refuses before openraft sees it: its own vote
    /// and log, not granted (the candidate learns nothing that makes it step down).
    pub(super) fn refuse_vote(&self) -> VoteResponse<NodeId> {
        VoteResponse {
            vote: self.raft.metrics().borrow().vote,
            vote_granted: false,
            last_log_id: self.store.last_log_id(),
        }
    }

    /// The effective role now.
    pub(super) fn view(&self) -> Judged {
        self.judge(&self.raft_metrics())
    }

    /// The effective role now, judged from openraft's state and the claim at this moment.
    pub(super) fn judge(&self, m: &RaftMetrics<NodeId, BasicNode>) -> Judged {
        let core = self.core.lock().expect("core");
        core.judge(self.clock.read(), &RaftView::of(m))
    }

    /// Steps the core with `input` at this instant (read under its lock, so that steps come
    /// in the order of their instants) and carries out what it says; returns its answer.
    pub(super) fn step(&self, input: Input) -> Option<Answer> {
        let actions = {
            let mut core = self.core.lock().expect("core");
            core.step(self.clock.read(), input)
        };
        self.carry_out(actions)
    }

    /// Carries out what the core said, but probes (the role loop's own): records the view,
    /// wakes the election driver or the role loop, counts the lab's observations.
    pub(super) fn carry_out(&self, actions: Vec<Action>) -> Option<Answer> {
        let mut answer = None;
        for a in actions {
            match a {
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

    /// Extra status for `/v1/status`: what openraft itself says, and the election driver.
    pub(super) fn status(&self) -> serde_json::Value {
        let m = self.raft_metrics();
        let (contact, failed_attempts) = {
            let core = self.core.lock().expect("core");
            (core.contact(), core.failed_attempts())
        };
        let since_contact = self.clock.boot_ns().saturating_sub(contact.at_ns) / 1_000_000;
        serde_json::json!({
            "raft_state": format!("{:?}", m.state),
            "vote": self.store.vote().map(|v| v.to_string()),
            "last_log_index": m.last_log_index,
            "last_applied": m.last_applied.map(|l| l.to_string()),
            "millis_since_quorum_ack": m.millis_since_quorum_ack,
            "running": m.running_state.is_ok(),
            "identity": self.store.identity().map(|i| serde_json::json!({
                "incarnation": format!("{:#x}", i.incarnation),
                "confirmed": i.confirmed,
                // What this node holds for the others (the applied log's first, identity.rs
                // rule 5), and whether it abstains from judging a hello meanwhile.
                "peers": self.store.recorded_all().into_iter().map(|(id, (inc, in_log))| {
                    (id.to_string(), serde_json::json!({
                        "incarnation": format!("{inc:#x}"),
                        "in_log": in_log,
                    }))
                }).collect::<serde_json::Map<_, _>>(),
                "abstains": self.store.unapplied(),
            })),
            "election": {
                "ms_since_contact": since_contact,
                "failed_attempts": failed_attempts,
            },
        })
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

    /// Starts the node's two loops (the role loop and the election driver); the returned future
    /// ends when `stop` is cancelled, or with an error when openraft stops on its own.
    pub async fn run(self: Arc<Self>, stop: CancellationToken) -> Result<(), String> {
        let members = tokio_util::task::AbortOnDropHandle::new(tokio::spawn(
            self.clone().follow_members(stop.clone()),
        ));
        let preferring = tokio_util::task::AbortOnDropHandle::new(tokio::spawn(
            self.clone().prefer_leader(stop.clone()),
        ));
        let mut driver = tokio::spawn(self.clone().drive_elections(stop.clone()));
        let role = self.clone().role_loop(stop.clone());
        tokio::pin!(role);
        let res = tokio::select! {
            res = &mut role => res,
            ended = &mut driver => match ended {
                Err(e) if e.is_panic() => Err(format!("the election driver panicked: {e}")),
                // A member knows this node by an earlier data dir (identity.rs).
                Ok(Err(e)) => Err(e),
                // The driver ends by itself when the node stops or when openraft stopped (its
                // metrics closed): the role loop, which ends on both too, says which. (Taking
                // the driver's end for a stop let a storage failure end the engine "Ok", and
                // the binary ran on with a dead engine.)
                _ => role.await,
            },
        };
        driver.abort();
        drop((members, preferring));
        // openraft stopping after this node closed its claim is the node's own shutdown.
        res.or_else(|e| {
            if self.core.lock().expect("core").lease().is_closed() {
                Ok(())
            } else {
                Err(e)
            }
        })
    }

    /// Runs [`run`](Self::run) in the background; when openraft stops on its own (a storage
    /// error), the reason is logged and `fatal` is cancelled, which stops the process.
    pub fn spawn(self: Arc<Self>, stop: CancellationToken, fatal: CancellationToken) {
        let run = self.run(stop);
        tokio::spawn(async move {
            if let Err(e) = run.await {
                tracing::error!(error = %e, "quorum engine stopped");
                fatal.cancel();
            }
        });
    }
}

impl QuorumPeer for QuorumNode {
    fn counters(&self) -> &Counters {
        &self.counters
    }

    /// An append accepted from the leader it names renews the follower lease (the gate), names
    /// the leader, and settles any campaign; openraft processes it under the gate's read side,
    /// so that the election driver sees it before it campaigns, or campaigns first and the
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
                self.step(Input::AppendAccepted { leader: l, commit });
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
        }) = self.step(asked)
        else {
            if confirmed {
                tracing::debug!(term, "vote refused: a promise of this node can still run");
            } else {
                tracing::debug!(
                    term,
                    "vote refused: this data dir's incarnation is not confirmed"
                );
            }
            return Ok(self.refuse_vote());
        };
        // Under the gate's read side, like an append: the election driver sees a vote this
        // node granted before it campaigns itself, or campaigns first and openraft refuses
        // the request (one vote per term).
        let admitted = self.gate.admit().await;
        let res = self.raft.vote(req).await;
        self.step(Input::VoteAnswered {
            term,
            higher,
            granted: matches!(&res, Ok(r) if r.vote_granted),
            failed: res.is_err(),
            inside_promise,
        });
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
            self.step(Input::SnapshotAccepted { leader });
        }
        res
    }

    /// Judged by the core (core/mod.rs, `prevote_asked`): its follower lease, its log and the
    /// pre-vote it pledged last, changing nothing durable; a grant is a pledge to `from`.
    fn on_prevote_request(&self, from: NodeId, req: PreVoteRequest) -> PreVoteResponse {
        let term = self.raft.metrics().borrow().current_term;
        let asked = Input::PreVoteAsked {
            from,
            theirs: req.last_log_id,
            mine: self.store.last_log_id(),
            confirmed: self.store.confirmed(),
        };
        let (verdict, lease_left_us) = match self.step(asked) {
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
    /// leases allow, everyone else one stagger step later (election.rs).
    fn on_resign_notice(&self, from: NodeId, notice: Resign) {
        let raft = RaftView::of(&self.raft_metrics());
        let told = Input::ResignNotice {
            from,
            term: notice.term,
            successor: notice.successor,
            raft,
        };
        if self.step(told) == Some(Answer::Handoff { taken: true }) {
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
        if req.id != from {
            return Err(format!("node {from} may remove only itself this way"));
        }
        // Only from the membership it asked in: a request held back on the path until the node
        // was removed and added again names an older one.
        let now = self.membership_index();
        if req.membership.is_none() || req.membership != now {
            return Err(format!(
                "node {from} asked to be removed from the membership of log index {:?}, and the \
                 membership in force is of index {now:?}: ask again",
                req.membership
            ));
        }
        self.remove_member(req.id).await.map_err(|e| e.to_string())
    }

    /// Records `from`'s incarnation if this node knows none; refuses another one than it
    /// knows (identity.rs).
    async fn on_hello(self: Arc<Self>, from: NodeId, hello: Hello) -> Result<HelloAnswer, String> {
        let mine = HelloAnswer {
            member: true,
            incarnation: self
                .store
                .identity()
                .filter(|i| i.confirmed)
                .map(|i| i.incarnation),
            ..HelloAnswer::default()
        };
        // Applied entries only grow, so a member not behind now is not behind when it records.
        // One that holds entries it has not applied yet may not know the incarnation they
        // record for the sender (rule 5): it abstains too, until it has applied them.
        if identity::is_behind(self.store.applied_index(), hello.membership)
            || self.store.unapplied()
        {
            tracing::debug!(
                peer = from,
                membership = hello.membership,
                "node {from} said hello from a membership this node has not applied yet"
            );
            return Ok(HelloAnswer {
                behind: true,
                ..mine
            });
        }
        let members = self.members_now();
        if members.committed
            && !members.voter_sets.is_empty()
            && !members.members.iter().any(|m| m.id == from)
        {
            tracing::warn!(
                peer = from,
                "node {from} said hello but is no member of the membership in force: not recorded"
            );
            return Ok(HelloAnswer {
                member: false,
                ..mine
            });
        }
        let r = self
            .store
            .recognise_peer(from, hello.incarnation)
            .await
            .map_err(|e| e.to_string())?;
        match r {
            Recognition::New => tracing::info!(
                peer = from,
                incarnation = format!("{:#x}", hello.incarnation),
                "recorded a member's incarnation"
            ),
            Recognition::Same => {}
            Recognition::Replaced { was } => tracing::error!(
                peer = from,
                incarnation = format!("{:#x}", hello.incarnation),
                known = format!("{was:#x}"),
                "member {from} came back on a new data dir: refused (it lost its votes)"
            ),
            // Removed between the check above (openraft's view) and the record (identity.rs,
            // rule 3).
            Recognition::Stranger => {
                tracing::warn!(
                    peer = from,
                    "node {from} said hello but the applied membership does not name it: not \
                     recorded"
                );
                return Ok(HelloAnswer {
                    member: false,
                    ..mine
                });
            }
        }
        Ok(HelloAnswer {
            accepted: r.accepted(),
            known: match r {
                Recognition::Replaced { was } => Some(was),
                _ => None,
            },
            ..mine
        })
    }
}

/// The most an append's body may be (`/peer/raft/append`): 40 entries of a membership of
/// a few hundred members fit.
pub const APPEND_BODY_LIMIT: usize = 512 << 10;

/// openraft's config for electd's timings: its own elections and heartbeats off, its follower
/// lease the follower lease, its RPC deadlines from `election`. Every timing that
/// `Config::validate` accepts passes openraft's own validation (test below).
pub(super) fn raft_config(cluster_id: &str, t: &Timing) -> Result<openraft::Config, QuorumError> {
    openraft::Config {
        cluster_name: cluster_id.to_string(),
        // Not the beat (the role loop keeps that, every `heartbeat_ms`): openraft uses this
        // value as the deadline of each AppendEntries, the probes' included (3/4 of it).
        // A third of the follower lease, so that a follower that answers a little late on
        // a busy host does not fail the probe, and so demote, a leader it still hears.
        heartbeat_interval: election::rpc_interval_ms(t),
        // electd decides when to campaign (election.rs): openraft's own timer is off. Its
        // heartbeats are sent by the role loop, in step with the quorum probes.
        enable_elect: false,
        enable_heartbeat: false,
        // Only the vote RPC deadline and the follower lease are still openraft's: its
        // `election_timeout_max` *is* the follower lease, and `election_timeout_min` is the
        // deadline of a vote request (half the lease).
        election_timeout_min: election::vote_deadline_ms(t),
        election_timeout_max: t.follower_lease_ms,
        install_snapshot_timeout: t.follower_lease_ms,
        // One blank entry per elected leader: snapshot and purge often, so that the state
        // written on every vote stays a few KiB over thousands of elections.
        snapshot_policy: SnapshotPolicy::LogsSinceLast(32),
        max_in_snapshot_log_to_keep: 8,
        ..Default::default()
    }
    .validate()
    .map_err(|e| QuorumError::Config(Box::new(e)))
}

#[cfg(test)]
mod tests {
    use axum::body::Bytes;
    use axum::extract::State;
    use openraft::raft::VoteRequest;

    use super::*;
    use crate::quorum::protocol::vote;
    use crate::quorum::types::Command;
    use crate::role::{Role, View};

    /// A one-member quorum node in this process (it elects itself), and its stop token.
    async fn single_node(dir: &std::path::Path) -> (Arc<QuorumNode>, CancellationToken) {
        node_of(dir, 1, Flaws::default()).await
    }

    /// Node 1 of a cluster of `members` in this process (the others never start), with `flaws`.
    async fn node_of(
        dir: &std::path::Path,
        members: u64,
        flaws: Flaws,
    ) -> (Arc<QuorumNode>, CancellationToken) {
        let (q, stop, _) = node_on(dir, members, flaws, None).await;
        (q, stop)
    }

    /// [`node_of`] with its state on `disk` (else in `dir`), and its running loops; its
    /// incarnation taken as confirmed (the others never start to record it).
    async fn node_on(
        dir: &std::path::Path,
        members: u64,
        flaws: Flaws,
        disk: Option<Arc<dyn crate::quorum::storage::Disk>>,
    ) -> (
        Arc<QuorumNode>,
        CancellationToken,
        tokio::task::JoinHandle<Result<(), String>>,
    ) {
        node_started(dir, members, flaws, disk, true).await
    }

    /// [`node_on`], its incarnation `confirmed` or as new.
    async fn node_started(
        dir: &std::path::Path,
        members: u64,
        flaws: Flaws,
        disk: Option<Arc<dyn crate::quorum::storage::Disk>>,
        confirmed: bool,
    ) -> (
        Arc<QuorumNode>,
        CancellationToken,
        tokio::task::JoinHandle<Result<(), String>>,
    ) {
        let mut cfg = crate::config::single_member(dir, crate::role::Mode::Quorum);
        // The peers are never reached: no secret to share.
        cfg.insecure = true;
        for id in 2..=members {
            cfg.peers.push(crate::config::Peer {
                id,
                addr: format!("127.0.0.1:{}", 9 + id),
                priority: 0,
            });
        }
        let counters = Arc::new(Counters::default());
        let faults = Arc::new(crate::faults::Faults::new(1));
        let transport = Arc::new(Transport::new(
            &cfg,
            faults,
            counters.clone(),
            crate::clock::system(),
            None,
        ));
        let events = Arc::new(EventLog::open(dir, 1).unwrap());
        let store = match disk {
            Some(disk) => Store::open_on(disk, 1, "t").unwrap(),
            None => Store::open(dir, 1, "t").unwrap(),
        };
        let plumbing = Plumbing {
            transport,
            events,
            counters,
            clock: crate::clock::system(),
        };
        let cfg = ValidConfig::new(cfg).expect("a valid config");
        let q = QuorumNode::start(&cfg, store, plumbing, 1, flaws)
            .await
            .unwrap();
        if confirmed {
            q.store.confirm_identity().await.unwrap();
        }
        let stop = CancellationToken::new();
        let run = tokio::spawn(q.clone().run(stop.clone()));
        (q, stop, run)
    }

    /// `req` through the node's vote handler, as a peer would send it; its answer.
    async fn ask_vote(q: &Arc<QuorumNode>, req: &VoteRequest<NodeId>) -> VoteResponse<NodeId> {
        let body = Bytes::from(serde_json::to_vec(req).unwrap());
        let res = vote(State(q.clone()), body).await.unwrap();
        let bytes = axum::body::to_bytes(res.into_body(), usize::MAX)
            .await
            .unwrap();
        let answer: Result<VoteResponse<NodeId>, serde_json::Value> =
            serde_json::from_slice(&bytes).unwrap();
        answer.expect("a vote response")
    }

    async fn until_claiming(q: &QuorumNode) -> bool {
        for _ in 0..200 {
            if q.view().view.role == Role::Leader {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        false
    }

    /// A vote request whose handler is dropped between suspending the
    /// claim and resuming it (client gone, request timeout) must not leave the claim suspended.
    // One thread, so that the handler's first poll is all that runs before the drop. Needs
    // the feature `flaws` (on in the workspace's tests: the lab enables it).
    #[cfg(feature = "flaws")]
    #[tokio::test(flavor = "current_thread")]
    async fn a_dropped_vote_request_does_not_suspend_the_claim_for_good() {
        let dir = tempfile::tempdir().unwrap();
        // The flaw lets the request past the refusal inside the node's promise, to the suspend.
        let flaws = Flaws {
            vote_while_leading: true,
            ..Flaws::default()
        };
        let (q, stop) = node_of(dir.path(), 1, flaws).await;
        assert!(
            until_claiming(&q).await,
            "the single node claims within 2 s"
        );
        let term = q.raft_metrics().current_term;
        // A higher-term candidate with an empty log: openraft refuses it (log behind), but
        // only after the claim was suspended.
        let req = VoteRequest::<NodeId>::new(openraft::Vote::new(term + 1, 2), None);
        let body = Bytes::from(serde_json::to_vec(&req).unwrap());
        let call = vote(State(q.clone()), body);
        // Poll the handler once (it suspends the claim and waits for openraft), then drop it.
        use futures_util::FutureExt;
        if let Some(r) = call.now_or_never() {
            panic!("the handler answered at once: {:?}", r.map(|r| r.status()));
        }
        assert!(
            until_claiming(&q).await,
            "the claim came back after the dropped request: {:?}",
            q.view()
        );
        stop.cancel();
        q.shutdown().await;
    }

    /// A vote request in the term openraft has already moved to (by adopting a higher vote
    /// from an answer, which no handler of electd sees) is refused while a promise of this node
    /// can still run: the same term is no excuse. Here openraft adopts the candidate's vote
    /// through `Raft::vote` directly, as it would from a HigherVote; the same request through
    /// the handler must then be refused (it was granted, as openraft's vote equals it, when
    /// only higher terms were checked).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_vote_in_an_adopted_term_is_refused_inside_the_promise() {
        let dir = tempfile::tempdir().unwrap();
        let (q, stop) = single_node(dir.path()).await;
        assert!(until_claiming(&q).await);
        // openraft grants a vote once the leader has led for a follower lease.
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(until_claiming(&q).await, "still claiming");
        let m = q.raft_metrics();
        let req = VoteRequest::<NodeId>::new(
            openraft::Vote::new(m.current_term + 1, 2),
            q.store.last_log_id(),
        );
        let adopted = q.raft.vote(req.clone()).await.unwrap();
        assert!(adopted.vote_granted, "openraft adopts the higher vote");
        let answer = ask_vote(&q, &req).await;
        assert!(
            !answer.vote_granted,
            "a same-term vote was granted inside the promise"
        );
        stop.cancel();
        q.shutdown().await;
    }

    /// A node refuses every vote for a follower lease after it starts: before a crash it may
    /// have answered promises it cannot know of, and openraft keeps no lease for a restored
    /// vote that is not committed.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_node_refuses_votes_for_a_follower_lease_after_it_starts() {
        let dir = tempfile::tempdir().unwrap();
        let (q, stop) = node_of(dir.path(), 3, Flaws::default()).await;
        let req = VoteRequest::<NodeId>::new(openraft::Vote::new(5, 2), q.store.last_log_id());
        let answer = ask_vote(&q, &req).await;
        assert!(!answer.vote_granted, "granted right after the start");
        // After a follower lease, the same request is granted.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let answer = ask_vote(&q, &req).await;
        assert!(answer.vote_granted, "refused after a follower lease");
        stop.cancel();
        q.shutdown().await;
    }

    /// A new data dir votes for nobody, and grants no pre-vote, until ⌈n/2⌉ other members
    /// recorded its incarnation (identity.rs); then it votes like any node.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_new_data_dir_votes_only_once_its_incarnation_is_confirmed() {
        let dir = tempfile::tempdir().unwrap();
        let (q, stop, _) = node_started(dir.path(), 3, Flaws::default(), None, false).await;
        // Past the start's follower lease: only the identity can refuse now.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let req = VoteRequest::<NodeId>::new(openraft::Vote::new(5, 2), q.store.last_log_id());
        assert!(
            !ask_vote(&q, &req).await.vote_granted,
            "a new data dir voted"
        );
        let pre = q.on_prevote_request(
            2,
            PreVoteRequest {
                term: 5,
                last_log_id: q.store.last_log_id(),
            },
        );
        assert_eq!(pre.refused.as_deref(), Some("unconfirmed"), "{pre:?}");
        q.store.confirm_identity().await.unwrap();
        assert!(
            ask_vote(&q, &req).await.vote_granted,
            "refused once confirmed"
        );
        stop.cancel();
        q.shutdown().await;
    }

    /// A member records the first incarnation it hears from a peer, durably, and refuses
    /// another one, also after its own restart.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_member_records_a_peers_first_incarnation_and_refuses_another() {
        let dir = tempfile::tempdir().unwrap();
        let (q, stop) = node_of(dir.path(), 3, Flaws::default()).await;
        let hello = |incarnation| Hello {
            incarnation,
            membership: None,
        };
        // Node 1 applied nothing yet (no leader): a hello from a log whose membership is
        // entry 5 is one it cannot judge (identity.rs, rule 3): it records nothing.
        let later = Hello {
            incarnation: 6,
            membership: Some(5),
        };
        let a = q.clone().on_hello(2, later).await.unwrap();
        assert!(a.behind && !a.accepted && a.known.is_none(), "{a:?}");
        let a = q.clone().on_hello(2, hello(7)).await.unwrap();
        // The answer names node 1's own incarnation (confirmed by node_of), for node 2 to
        // record in turn (rule 4).
        let mine = q.store.identity().unwrap().incarnation;
        assert_eq!(
            a,
            HelloAnswer {
                accepted: true,
                known: None,
                member: true,
                behind: false,
                incarnation: Some(mine),
            }
        );
        let a = q.clone().on_hello(2, hello(7)).await.unwrap();
        assert!(a.accepted);
        let a = q.clone().on_hello(3, hello(9)).await.unwrap();
        assert!(a.accepted);
        // Node 1 records what an accepting member answers with: its own incarnation.
        let answer = |incarnation| HelloAnswer {
            accepted: true,
            member: true,
            incarnation: Some(incarnation),
            ..HelloAnswer::default()
        };
        q.record_answer(3, &answer(9)).await;
        q.record_answer(3, &answer(10)).await;
        assert_eq!(
            q.store.recognise_peer(3, 9).await.unwrap(),
            Recognition::Same
        );
        stop.cancel();
        q.shutdown().await;
        drop(q);
        let store = Store::open(dir.path(), 1, "t").unwrap();
        assert_eq!(
            store.recognise_peer(2, 8).await.unwrap(),
            Recognition::Replaced { was: 7 }
        );
        assert_eq!(store.recognise_peer(3, 9).await.unwrap(), Recognition::Same);
        assert!(store.confirmed(), "the node's own confirmation is kept too");
    }

    /// A restarted node's events keep their order in time, and its claim is stamped where it
    /// began: the view before the first probe (openraft's new leader, not yet claiming) is
    /// written before that probe goes out, never while it is out (then the claim, stamped at
    /// the probe's send instant, came before the event written ahead of it: `t_mono_ns` went
    /// back with `seq`, and the chaos checkers saw the node end as a candidate: S2 seeds 2
    /// and 8). Each restart re-elects the one member, from a log that already has entries.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_restarted_leader_stamps_its_claim_at_its_start_after_every_earlier_event() {
        let dir = tempfile::tempdir().unwrap();
        for run in 0..8 {
            let (q, stop) = single_node(dir.path()).await;
            assert!(until_claiming(&q).await, "run {run}: claims");
            // The claim is recorded just after it is granted: until then, at most 2 s.
            for _ in 0..200 {
                if q.events.last().is_some_and(|v| v.role == Role::Leader) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            let term = q.raft_metrics().current_term;
            let since = {
                let now = q.clock.boot_ns();
                let core = q.core.lock().unwrap();
                core.lease().current(term, now).expect("a claim").since_ns
            };
            let events = q.events.since(0, usize::MAX).0;
            for w in events.windows(2) {
                assert!(
                    w[1].t_mono_ns >= w[0].t_mono_ns,
                    "run {run}: time goes back: {:?} then {:?}",
                    w[0],
                    w[1]
                );
            }
            let n = events.len();
            assert_eq!(
                events[n - 1].view.role,
                Role::Leader,
                "run {run}: {events:?}"
            );
            // In a new log the claim may be the first event.
            let prev = n.checked_sub(2).map_or(&events[0], |i| &events[i]);
            // Raised to an earlier claim's end, the start loses nothing (events.rs, `record`).
            let after_a_claim = prev.view.role != Role::Leader
                && n.checked_sub(3).is_some_and(|i| {
                    events[i].view.role == Role::Leader && events[i].view.term == term
                });
            assert!(
                after_a_claim || n == 1 || prev.t_mono_ns <= q.clock.mono_of_boot(since),
                "run {run}: {prev:?} was written while the probe that started the claim \
                 (sent at mono {}) was out: {events:?}",
                q.clock.mono_of_boot(since)
            );
            stop.cancel();
            q.shutdown().await;
        }
    }

    /// The probe step of the role loop records the view as it stands before the probe goes
    /// out: an event recorded while the probe is out (openraft's metrics changed) can then not
    /// come after the claim the probe starts. Here the claim has lapsed (the node's view is
    /// "candidate", its log's last event "follower") and the metrics receiver has changes
    /// unseen, so the step records while its probe is out. Without the record first,
    /// "candidate" was stamped after the probe's send instant and the claim's start was raised
    /// past it (what a restarted node did: chaos S2).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_probe_step_records_the_view_before_its_probe_goes_out() {
        let dir = tempfile::tempdir().unwrap();
        let (q, stop) = single_node(dir.path()).await;
        assert!(until_claiming(&q).await);
        stop.cancel();
        let term = q.raft_metrics().current_term;
        for round in 0..10 {
            // The claim ended, and the event log last told of another view (a restarted
            // node's log ends in its earlier run), so that the probe step has a change to record.
            q.core.lock().unwrap().lease_mut().revoke(q.clock.boot_ns());
            q.events
                .record(
                    q.clock.mono_ns(),
                    View::without_leader(Role::Follower, term),
                )
                .unwrap();
            // A receiver with a change unseen (a log entry written and applied since).
            let mut metrics = q.raft.metrics();
            metrics.borrow_and_update();
            q.raft
                .client_write(Command::Incarnations(BTreeMap::new()))
                .await
                .unwrap();
            assert!(metrics.has_changed().unwrap());
            assert!(q.probe_recording(term, &mut metrics).await);
            q.record_view();
            let since = {
                let now = q.clock.boot_ns();
                q.core
                    .lock()
                    .unwrap()
                    .lease()
                    .current(term, now)
                    .unwrap()
                    .since_ns
            };
            let events = q.events.since(0, usize::MAX).0;
            let [.., prev, last] = &events[..] else {
                panic!("round {round}: {events:?}")
            };
            assert_eq!(last.view.role, Role::Leader, "round {round}: {events:?}");
            assert_ne!(prev.view.role, Role::Leader, "round {round}: {events:?}");
            assert!(
                prev.t_mono_ns <= q.clock.mono_of_boot(since),
                "round {round}: {prev:?} was written after the probe went out (mono {}), \
                 the claim's start raised to it: {last:?}",
                q.clock.mono_of_boot(since)
            );
        }
        q.shutdown().await;
    }

    /// Once stopping, a node never claims again in its process, even if a
    /// probe in flight at the stop is acknowledged after it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_stopping_node_never_claims_again() {
        let dir = tempfile::tempdir().unwrap();
        let (q, stop) = single_node(dir.path()).await;
        assert!(until_claiming(&q).await);
        let term = q.raft_metrics().current_term;
        q.core.lock().unwrap().lease_mut().close(q.clock.boot_ns());
        // The role loop keeps running (its stop token is not cancelled) and keeps getting
        // acknowledgements from its one-member quorum: none of them may claim.
        for _ in 0..20 {
            tokio::time::sleep(Duration::from_millis(10)).await;
            assert_ne!(q.view().view.role, Role::Leader);
            assert!(
                !q.probe(term).await,
                "a probe after the close claims nothing"
            );
        }
        stop.cancel();
        q.shutdown().await;
    }

    /// `Config::validate` accepts no timing that openraft would refuse at start: every beat
    /// up to 100 ms against every follower lease up to 400 ms and a spread up to 3 s, default
    /// and explicit leases, and the longest lease allowed.
    #[test]
    fn every_accepted_timing_is_accepted_by_openraft() {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = crate::config::single_member(dir.path(), crate::role::Mode::Quorum);
        let mut accepted = 0;
        let leases = |f: u64| [0, f / 2, f - f / 10, f.saturating_sub(2), 540_000];
        for hb in 1..=100 {
            for f in (1..=400).chain((400..=3000).step_by(37)).chain([600_000]) {
                for lease_ms in leases(f) {
                    cfg.timing = Timing {
                        heartbeat_ms: hb,
                        follower_lease_ms: f,
                        lease_ms,
                    };
                    if cfg.validate().is_ok() {
                        accepted += 1;
                        if let Err(e) = raft_config("t", &cfg.timing) {
                            panic!("{:?} passes validation but openraft says: {e}", cfg.timing);
                        }
                    }
                }
            }
        }
        assert!(accepted > 20_000, "only {accepted} timings were accepted");
    }

    /// A disk whose writes fail from a moment the test picks.
    #[derive(Default)]
    struct FailingDisk {
        inner: crate::quorum::storage::MemDisk,
        failing: std::sync::atomic::AtomicBool,
    }

    impl crate::quorum::storage::Disk for FailingDisk {
        fn write(&self, bytes: &[u8]) -> std::io::Result<()> {
            if self.failing.load(std::sync::atomic::Ordering::Relaxed) {
                return Err(std::io::Error::other("injected: the disk refuses writes"));
            }
            self.inner.write(bytes)
        }
        fn read(
            &self,
        ) -> Result<Option<(std::path::PathBuf, Vec<u8>)>, crate::quorum::storage::StoreError>
        {
            self.inner.read()
        }
        fn blocks(&self) -> bool {
            false
        }
    }

    /// When the vote and log can no longer be written, openraft stops and the engine says so
    /// (`/v1/health` 503; the binary then exits), instead of answering healthy.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failing_state_write_makes_the_engine_unhealthy() {
        use crate::engine::Engine;
        let dir = tempfile::tempdir().unwrap();
        let disk = Arc::new(FailingDisk::default());
        // Node 1 of three, alone: it cannot win, but each election it starts writes a vote.
        let (q, stop, run) = node_on(dir.path(), 3, Flaws::default(), Some(disk.clone())).await;
        let _ = q.raft.trigger().elect().await;
        assert_eq!(q.health(), Ok(()));
        disk.failing
            .store(true, std::sync::atomic::Ordering::Relaxed);
        let _ = q.raft.trigger().elect().await;
        let mut health = Ok(());
        for _ in 0..200 {
            health = q.health();
            if health.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let why = health.expect_err("healthy with a disk that refuses every write");
        assert!(why.contains("openraft stopped"), "{why}");
        let ended = tokio::time::timeout(Duration::from_secs(5), run).await;
        assert!(
            matches!(ended, Ok(Ok(Err(_)))),
            "the engine's run ends with an error (the binary exits): {ended:?}"
        );
        stop.cancel();
    }

    /// Issue 30: a `/peer/raft/remove` withheld on the path and delivered after the node was
    /// removed and added back would have removed it again. A removal now names the membership
    /// the sender asked in, and the receiver refuses any other one (and one that names none).
    #[tokio::test]
    async fn a_removal_from_another_membership_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (q, stop) = single_node(dir.path()).await;
        assert!(until_claiming(&q).await, "node 1 leads");
        let now = q.membership_index();
        for stale in [None, now.map(|i| i + 7)] {
            let e = q
                .clone()
                .on_remove(
                    1,
                    RemoveRequest {
                        id: 1,
                        membership: stale,
                    },
                )
                .await
                .expect_err("refused");
            assert!(e.contains("ask again"), "{e}");
        }
        assert_eq!(q.membership_index(), now, "nothing removed");
        stop.cancel();
    }
}
