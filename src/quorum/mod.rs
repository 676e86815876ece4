//! Quorum mode: Raft-style, term-numbered majority vote on openraft 0.9, plus the lease-bound
//! claim that openraft does not do itself (see [`lease`]).
//!
//! - [`storage`]: the durable vote and log.
//! - [`network`]: openraft's RPCs over the shared peer transport.
//! - [`lease`]: the claim rules (pure logic).
//! - this file: [`QuorumNode`], which starts openraft, runs the role loop (probe, claim, demote,
//!   record events) and serves `/peer/raft/*`.
//!
//! We enable openraft's `single-term-leader` feature: a term has at most one leader, so the term
//! alone is a fencing token, as `api-v1.md` promises (`term` in `/v1/leader`). Without it
//! openraft may elect several leaders in one term, told apart only by node id.

pub mod lease;
pub mod network;
pub mod storage;

use std::collections::BTreeMap;
use std::io::Cursor;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Extension, Json, Router};
use openraft::error::{InitializeError, RaftError};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, VoteRequest,
};
use openraft::{BasicNode, Raft, RaftMetrics, ServerState, SnapshotPolicy};
use serde::de::DeserializeOwned;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use self::lease::{follower_leader, Lease, Quiet};
use self::network::{RaftNet, PATH_APPEND, PATH_RESIGN, PATH_SNAPSHOT, PATH_VOTE};
use self::storage::{LogStore, StateMachine, Store, StoreError};
use crate::api::ApiError;
use crate::clock::{mono_ns, ms};
use crate::config::{Config, Timing};
use crate::events::EventLog;
use crate::node::EngineView;
use crate::role::{NodeId, Role, RoleState};
use crate::stats::Stats;
use crate::transport::{PeerId, Transport};

// `declare_raft_types!` in 0.9 expects `Cursor` in scope for the default snapshot data type.
openraft::declare_raft_types!(
    /// openraft's type configuration: no application data, only elections.
    pub TypeConfig: D = (), R = ()
);

/// Why quorum mode could not start.
#[derive(Debug, thiserror::Error)]
pub enum QuorumError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("openraft refused the timing config: {0}")]
    Config(#[from] openraft::ConfigError),
    #[error("openraft failed to start: {0}")]
    Start(String),
}

/// A running quorum-mode node.
pub struct QuorumNode {
    id: NodeId,
    timing: Timing,
    raft: Raft<TypeConfig>,
    store: Arc<Store>,
    lease: Mutex<Lease>,
    /// The last leader whose AppendEntries this node accepted, and when.
    contact: Mutex<Option<(NodeId, u64)>>,
    events: Arc<EventLog>,
    stats: Arc<Stats>,
    /// Pokes the role loop (a vote was granted, a claim must be re-judged).
    wake: Notify,
    transport: Arc<Transport>,
}

/// A leader's notice that it is shutting down (SIGTERM): its `successor` starts an election as
/// soon as the followers' leader leases allow, rather than after lease plus a random election
/// timeout. Like Raft's TimeoutNow, which openraft 0.9 lacks; it only moves an election earlier,
/// so safety never depends on it.
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
pub struct Resign {
    pub term: u64,
    pub successor: NodeId,
}

/// How long the leader waits for the followers to take its resignation.
const RESIGN_TIMEOUT: Duration = Duration::from_millis(100);
/// Margin past the followers' leader lease before the successor asks for votes.
const RESIGN_MARGIN_NS: u64 = 20_000_000;

impl QuorumNode {
    /// Opens the durable state, starts openraft and bootstraps the membership from the config.
    pub async fn start(
        cfg: &Config,
        transport: Arc<Transport>,
        events: Arc<EventLog>,
        stats: Arc<Stats>,
    ) -> Result<Arc<QuorumNode>, QuorumError> {
        let t = cfg.timing;
        let store = Store::open(&cfg.data_dir, cfg.id, &cfg.cluster_id)?;
        let raft_cfg = openraft::Config {
            cluster_name: cfg.cluster_id.clone(),
            heartbeat_interval: t.heartbeat_ms,
            election_timeout_min: t.election_timeout_min_ms,
            election_timeout_max: t.election_timeout_max_ms,
            install_snapshot_timeout: t.election_timeout_max_ms,
            // One blank entry per elected leader: snapshot and purge now and then so the
            // state file stays small over thousands of elections.
            snapshot_policy: SnapshotPolicy::LogsSinceLast(200),
            max_in_snapshot_log_to_keep: 20,
            ..Default::default()
        }
        .validate()?;
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
        match raft.initialize(members).await {
            Ok(()) => tracing::info!("bootstrapped the membership from the config"),
            Err(RaftError::APIError(InitializeError::NotAllowed(_))) => {
                tracing::debug!("membership already initialised (the node has voted or has a log)")
            }
            Err(e) => tracing::warn!(error = %e, "initialize failed"),
        }
        Ok(Arc::new(QuorumNode {
            id: cfg.id,
            timing: t,
            raft,
            store,
            lease: Mutex::new(Lease::default()),
            contact: Mutex::new(None),
            events,
            stats,
            wake: Notify::new(),
            transport,
        }))
    }

    fn metrics(&self) -> RaftMetrics<NodeId, BasicNode> {
        self.raft.metrics().borrow().clone()
    }

    /// The effective role at `now_ns`, judged from openraft's state and the claim at that moment.
    pub fn view(&self, now_ns: u64) -> EngineView {
        self.view_with(&self.metrics(), now_ns)
    }

    fn view_with(&self, m: &RaftMetrics<NodeId, BasicNode>, now_ns: u64) -> EngineView {
        let term = m.current_term;
        match m.state {
            ServerState::Leader => match self.lease.lock().expect("lease").current(term, now_ns) {
                Some(c) => EngineView {
                    role: Role::Leader,
                    term,
                    leader: Some(self.id),
                    lease_remaining_ns: Some(c.until_ns - now_ns),
                },
                // Elected but not (or no longer) acknowledged by a majority: not a leader.
                None => EngineView::without_leader(Role::Candidate, term),
            },
            ServerState::Candidate => EngineView::without_leader(Role::Candidate, term),
            ServerState::Follower | ServerState::Learner => EngineView {
                role: Role::Follower,
                term,
                leader: follower_leader(
                    m.current_leader.filter(|l| *l != self.id),
                    *self.contact.lock().expect("contact"),
                    now_ns,
                    ms(self.timing.election_timeout_max_ms),
                ),
                lease_remaining_ns: None,
            },
            ServerState::Shutdown => EngineView::without_leader(Role::Follower, term),
        }
    }

    /// Extra status for `/v1/status`: what openraft itself says.
    pub fn status_extra(&self) -> serde_json::Value {
        let m = self.metrics();
        serde_json::json!({
            "raft_state": format!("{:?}", m.state),
            "vote": self.store.vote().map(|v| v.to_string()),
            "last_log_index": m.last_log_index,
            "last_applied": m.last_applied.map(|l| l.to_string()),
            "millis_since_quorum_ack": m.millis_since_quorum_ack,
            "running": m.running_state.is_ok(),
        })
    }

    /// Records an event if (role, term, leader) changed. The one place quorum mode records role
    /// changes. Stamps err wide: "became leader" at the send time of the probe that started the
    /// claim, "stopped leading" at the moment the claim ended, never earlier.
    fn observe(&self) {
        let now = mono_ns();
        let m = self.metrics();
        let v = self.view_with(&m, now);
        let state = RoleState {
            role: v.role,
            term: v.term,
            leader: v.leader,
        };
        let prev = self.events.last().unwrap_or_else(RoleState::initial);
        if prev == state {
            return;
        }
        let stamp = {
            let lease = self.lease.lock().expect("lease");
            match (prev.role, state.role) {
                (r, Role::Leader) if r != Role::Leader => lease
                    .current(v.term, now)
                    .map(|c| c.since_ns.min(now))
                    .unwrap_or(now),
                (Role::Leader, r) if r != Role::Leader => {
                    lease.last().map(|c| c.until_ns.min(now)).unwrap_or(now)
                }
                _ => now,
            }
        };
        if self.events.record(stamp, state).is_some()
            && state.leader.is_some()
            && state.leader != prev.leader
        {
            self.stats.leader_changed();
        }
    }

    /// The role loop: while openraft has this node as leader, probe the quorum every heartbeat
    /// and claim for a lease after each acknowledged probe; go quiet after a lease without acks;
    /// record every role change. Runs until `stop` is cancelled or openraft stops.
    pub async fn run(self: Arc<Self>, stop: CancellationToken) -> Result<(), String> {
        let t = self.timing;
        let hb = Duration::from_millis(t.heartbeat_ms);
        let lease_ns = ms(t.effective_lease_ms());
        let quiet_ns = 2 * ms(t.election_timeout_max_ms) + lease_ns;
        let mut metrics = self.raft.metrics();
        let mut tick = tokio::time::interval(hb);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut quiet = Quiet::default();
        let mut heartbeats_on = true;
        let mut last_probe_ns = 0u64;
        let mut counted_candidate_term = 0u64;
        loop {
            let claim_left = {
                let now = mono_ns();
                self.lease
                    .lock()
                    .expect("lease")
                    .current(metrics.borrow().current_term, now)
                    .map(|c| Duration::from_nanos(c.until_ns - now))
            };
            tokio::select! {
                _ = stop.cancelled() => return Ok(()),
                _ = tick.tick() => {}
                r = metrics.changed() => if r.is_err() { return Err("openraft stopped".into()) },
                _ = self.wake.notified() => {}
                _ = tokio::time::sleep(claim_left.unwrap_or_default()), if claim_left.is_some() => {}
            }
            let m = metrics.borrow_and_update().clone();
            if let Err(fatal) = &m.running_state {
                return Err(format!("openraft stopped: {fatal}"));
            }
            if m.state == ServerState::Candidate && m.current_term > counted_candidate_term {
                counted_candidate_term = m.current_term;
                self.stats.election_started();
            }
            let now = mono_ns();
            if m.state == ServerState::Leader {
                quiet.leading(m.current_term, now);
                if quiet.may_probe(now) && now >= last_probe_ns + ms(t.heartbeat_ms) {
                    last_probe_ns = now;
                    let t0 = mono_ns();
                    let acked = matches!(
                        tokio::time::timeout(3 * hb, self.raft.ensure_linearizable()).await,
                        Ok(Ok(_))
                    );
                    let still = self.metrics();
                    if acked
                        && still.state == ServerState::Leader
                        && still.current_term == m.current_term
                        && self
                            .lease
                            .lock()
                            .expect("lease")
                            .grant(m.current_term, t0, lease_ns)
                    {
                        quiet.acked(t0);
                        if !heartbeats_on {
                            self.raft.runtime_config().heartbeat(true);
                            heartbeats_on = true;
                            tracing::info!("quorum acknowledged again: heartbeats resumed");
                        }
                    } else if quiet.failed(mono_ns(), lease_ns, quiet_ns) && heartbeats_on {
                        self.raft.runtime_config().heartbeat(false);
                        heartbeats_on = false;
                        tracing::warn!(
                            quiet_ms = quiet_ns / 1_000_000,
                            "no quorum for a whole lease: demoted, heartbeats paused"
                        );
                    }
                }
            } else {
                quiet.not_leading();
                self.lease.lock().expect("lease").revoke(now);
                if !heartbeats_on {
                    self.raft.runtime_config().heartbeat(true);
                    heartbeats_on = true;
                }
            }
            self.observe();
        }
    }

    /// Graceful step-down: stop claiming at once, stop heartbeats so that the followers'
    /// leases run out, record it, and stop openraft.
    pub async fn shutdown(&self) {
        self.lease.lock().expect("lease").revoke(mono_ns());
        self.raft.runtime_config().heartbeat(false);
        self.observe();
        self.resign().await;
        if let Err(e) = self.raft.shutdown().await {
            tracing::warn!(error = %e, "openraft shutdown");
        }
    }

    /// If leading: names the follower with the most of the log (lowest id on a tie) as
    /// successor and tells every follower, waiting at most [`RESIGN_TIMEOUT`].
    async fn resign(&self) {
        let m = self.metrics();
        if m.state != ServerState::Leader {
            return;
        }
        let Some(replication) = &m.replication else {
            return;
        };
        let successor = replication
            .iter()
            .filter(|(id, _)| **id != self.id)
            .max_by_key(|(id, matched)| (matched.map(|l| l.index), std::cmp::Reverse(**id)))
            .map(|(id, _)| *id);
        let Some(successor) = successor else {
            return;
        };
        let msg = Resign {
            term: m.current_term,
            successor,
        };
        let sends = replication
            .keys()
            .filter(|id| **id != self.id)
            .map(|&to| async move {
                let r: Result<serde_json::Value, _> = self
                    .transport
                    .call(to, PATH_RESIGN, "resign", &msg, RESIGN_TIMEOUT)
                    .await;
                r.is_ok()
            });
        let told = futures_util::future::join_all(sends).await;
        tracing::info!(
            successor,
            told = told.iter().filter(|ok| **ok).count(),
            "resigned: the successor elects when the followers' leases end"
        );
    }

    /// The `/peer/raft/*` routes.
    pub fn routes(self: Arc<Self>) -> Router {
        Router::new()
            .route(PATH_APPEND, post(append))
            .route(PATH_RESIGN, post(resign))
            .route(PATH_VOTE, post(vote))
            .route(PATH_SNAPSHOT, post(snapshot))
            .with_state(self)
    }
}

fn decode<T: DeserializeOwned>(stats: &Stats, body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|e| {
        stats.rejected("bad_body");
        ApiError::bad_request("bad_body", format!("malformed peer message: {e}"))
    })
}

async fn append(
    State(q): State<Arc<QuorumNode>>,
    Extension(PeerId(from)): Extension<PeerId>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let req: AppendEntriesRequest<TypeConfig> = decode(&q.stats, &body)?;
    q.stats.received(if req.entries.is_empty() {
        "heartbeat"
    } else {
        "append"
    });
    let leader = req.vote.leader_id().voted_for();
    let res = q.raft.append_entries(req).await;
    if let (Ok(r), Some(l)) = (&res, leader) {
        if l == from && !matches!(r, AppendEntriesResponse::HigherVote(_)) {
            *q.contact.lock().expect("contact") = Some((l, mono_ns()));
        }
    }
    Ok(Json(res).into_response())
}

async fn vote(State(q): State<Arc<QuorumNode>>, body: Bytes) -> Result<Response, ApiError> {
    let req: VoteRequest<NodeId> = decode(&q.stats, &body)?;
    q.stats.received("vote");
    let term = req.vote.leader_id().get_term();
    // Stop claiming before openraft can hand our vote to a higher term (see `lease`).
    let higher = term > q.raft.metrics().borrow().current_term;
    if higher {
        q.lease.lock().expect("lease").suspend(mono_ns());
    }
    let res = q.raft.vote(req).await;
    if higher {
        let granted = matches!(&res, Ok(r) if r.vote_granted).then_some(term);
        q.lease.lock().expect("lease").resume(granted);
        q.wake.notify_one();
    }
    Ok(Json(res).into_response())
}

/// A follower hears that its leader resigned; the named successor campaigns once the leader
/// leases of the followers have run out (openraft refuses votes before), if nobody has yet.
async fn resign(
    State(q): State<Arc<QuorumNode>>,
    Extension(PeerId(from)): Extension<PeerId>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let req: Resign = decode(&q.stats, &body)?;
    q.stats.received("resign");
    let m = q.metrics();
    let heard = *q.contact.lock().expect("contact");
    let from_leader = m.current_leader == Some(from) && m.current_term == req.term;
    if let (true, true, Some((_, at_ns))) = (from_leader, req.successor == q.id, heard) {
        let wait_until = at_ns + ms(q.timing.election_timeout_max_ms) + RESIGN_MARGIN_NS;
        let q = q.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_nanos(wait_until.saturating_sub(mono_ns()))).await;
            let m = q.metrics();
            let unchanged = m.current_term == req.term && m.state == ServerState::Follower;
            if unchanged {
                tracing::info!(term = req.term, "leader {from} resigned: campaigning");
                let _ = q.raft.trigger().elect().await;
            }
        });
    }
    Ok(Json(serde_json::json!({"ok": true})).into_response())
}

async fn snapshot(State(q): State<Arc<QuorumNode>>, body: Bytes) -> Result<Response, ApiError> {
    let req: InstallSnapshotRequest<TypeConfig> = decode(&q.stats, &body)?;
    q.stats.received("snapshot");
    Ok(Json(q.raft.install_snapshot(req).await).into_response())
}
