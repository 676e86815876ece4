//! [`QuorumNode`]: starts openraft (its own elections off), runs the role loop (probe, claim,
//! demote, record events) and the election driver, hands over on resign and at shutdown, and
//! is the node's [`Engine`] in quorum mode. Its `/peer/raft/*` handlers are in `peer.rs`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use openraft::error::{InitializeError, RaftError};
use openraft::raft::VoteResponse;
use openraft::{BasicNode, Raft, RaftMetrics, ServerState, SnapshotPolicy};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::election::{
    self, prevote_retry_after_us, rank, Campaign, ElectionTiming, Gate, Pledge, PreVoteRequest,
    PreVoteResponse,
};
use super::lease::{follower_leader, Claim, Lease, Quiet};
use super::network::{RaftNet, PATH_PREVOTE, PATH_RESIGN};
use super::storage::{LogStore, StateMachine, Store, StoreError};
use super::types::TypeConfig;
use crate::clock::{ms, Clock};
use crate::config::{Config, Timing};
use crate::engine::{Flaws, Judged, Plumbing, ResignError};
use crate::events::EventLog;
use crate::role::{NodeId, Resigned, Role, View};
use crate::stats::Stats;
use crate::transport::Transport;

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
    pub(super) members: Vec<NodeId>,
    pub(super) timing: Timing,
    pub(super) raft: Raft<TypeConfig>,
    pub(super) store: Arc<Store>,
    pub(super) clock: Arc<dyn Clock>,
    pub(super) lease: Mutex<Lease>,
    /// The follower-lease gate: last contact, shared by the append handler and the driver.
    pub(super) gate: Gate,
    pub(super) campaign: Mutex<Campaign>,
    /// The election driver's timings (from the config; the campaign holds a copy).
    pub(super) election: ElectionTiming,
    /// The pre-vote this node granted last (or its own round), see [`Pledge`].
    pub(super) pledge: Mutex<Option<Pledge>>,
    /// The last leader whose AppendEntries this node accepted, and when (MONOTONIC).
    pub(super) contact: Mutex<Option<(NodeId, u64)>>,
    pub(super) events: Arc<EventLog>,
    pub(super) stats: Arc<Stats>,
    /// Pokes the role loop (a vote was granted, a claim must be re-judged).
    pub(super) wake: Notify,
    pub(super) transport: Arc<Transport>,
    /// Deliberate flaws (the lab's), and how often their paths were taken.
    pub(super) flaws: Flaws,
}

/// A leader's notice that it resigned `term` (`POST /v1/admin/resign`, SIGTERM): its
/// `successor` campaigns first, as soon as the followers' leases allow, and every other
/// follower one stagger step later. Like Raft's TimeoutNow, which openraft 0.9 lacks; it only
/// orders the next election, so safety never depends on it.
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
pub struct Resign {
    pub term: u64,
    pub successor: NodeId,
}

/// openraft's own heartbeat (which also pushes missing log entries to a lagging follower)
/// goes out with every this many probes.
const HEARTBEAT_EVERY: u64 = 4;

/// How long the leader waits for the followers to take its resignation.
pub(super) const RESIGN_TIMEOUT: Duration = Duration::from_millis(100);

impl QuorumNode {
    /// Opens the durable state, starts openraft and bootstraps the membership from the config.
    /// `seed` seeds the election driver's jitter; `clock` is where claims and leases are judged.
    pub async fn start(
        cfg: &Config,
        store: Arc<Store>,
        plumbing: Plumbing,
        seed: u64,
        flaws: Flaws,
    ) -> Result<Arc<QuorumNode>, QuorumError> {
        let Plumbing {
            transport,
            events,
            stats,
            clock,
        } = plumbing;
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
        match raft.initialize(members).await {
            Ok(()) => tracing::info!("bootstrapped the membership from the config"),
            Err(RaftError::APIError(InitializeError::NotAllowed(_))) => {
                tracing::debug!("membership already initialised (the node has voted or has a log)")
            }
            Err(e) => tracing::warn!(error = %e, "initialize failed"),
        }
        let timing = ElectionTiming::from_config(&t);
        let started_ns = clock.boot_ns();
        Ok(Arc::new(QuorumNode {
            id: cfg.id,
            members: cfg.member_ids(),
            timing: t,
            raft,
            store,
            gate: Gate::new(started_ns),
            campaign: Mutex::new(Campaign::new(timing, seed)),
            election: timing,
            pledge: Mutex::new(None),
            clock,
            lease: Mutex::new(Lease::starting(started_ns)),
            contact: Mutex::new(None),
            events,
            stats,
            wake: Notify::new(),
            transport,
            flaws,
        }))
    }

    pub(super) fn metrics(&self) -> RaftMetrics<NodeId, BasicNode> {
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

    /// The effective role now, judged from openraft's state and the claim at this moment.
    pub(super) fn view_with(&self, m: &RaftMetrics<NodeId, BasicNode>) -> Judged {
        let term = m.current_term;
        match m.state {
            ServerState::Leader => {
                match judge_claim(&self.lease.lock().expect("lease"), term, &*self.clock) {
                    Some((c, now)) => Judged {
                        view: View {
                            role: Role::Leader,
                            term,
                            leader: Some(self.id),
                        },
                        lease_remaining_ns: Some(c.until_ns - now),
                    },
                    // Elected but not (or no longer) acknowledged by a majority: not a leader.
                    None => Judged::unleased(View::without_leader(Role::Candidate, term)),
                }
            }
            ServerState::Candidate => Judged::unleased(View::without_leader(Role::Candidate, term)),
            ServerState::Follower | ServerState::Learner => Judged::unleased(View {
                role: Role::Follower,
                term,
                leader: follower_leader(
                    m.current_leader.filter(|l| *l != self.id),
                    *self.contact.lock().expect("contact"),
                    self.clock.mono_ns(),
                    ms(self.timing.follower_lease_ms),
                ),
            }),
            ServerState::Shutdown => Judged::unleased(View::without_leader(Role::Follower, term)),
        }
    }

    /// Extra status for `/v1/status`: what openraft itself says, and the election driver.
    pub(super) fn status_extra(&self) -> serde_json::Value {
        let m = self.metrics();
        let c = self.gate.contact();
        let since_contact = self.clock.boot_ns().saturating_sub(c.at_ns) / 1_000_000;
        serde_json::json!({
            "raft_state": format!("{:?}", m.state),
            "vote": self.store.vote().map(|v| v.to_string()),
            "last_log_index": m.last_log_index,
            "last_applied": m.last_applied.map(|l| l.to_string()),
            "millis_since_quorum_ack": m.millis_since_quorum_ack,
            "running": m.running_state.is_ok(),
            "election": {
                "ms_since_contact": since_contact,
                "failed_attempts": self.campaign.lock().expect("campaign").failures,
            },
        })
    }

    /// Records an event if (role, term, leader) changed. The one place quorum mode records role
    /// changes. Stamps err wide: "became leader" at the send time of the probe that started the
    /// claim, "stopped leading" at the moment the claim ended, never earlier.
    fn observe(&self) {
        let m = self.metrics();
        let state = self.view_with(&m).view;
        let prev = self.events.last().unwrap_or(View::INITIAL);
        if prev == state {
            return;
        }
        let stamp = {
            let lease = self.lease.lock().expect("lease");
            match (prev.role, state.role) {
                // Counted back from now: a suspend in between only makes it earlier (wider).
                (r, Role::Leader) if r != Role::Leader => {
                    let now = self.clock.boot_ns();
                    let since = lease.current(state.term, now).map(|c| c.since_ns);
                    self.clock.mono_of_boot(since.unwrap_or(now).min(now))
                }
                // Counted forward from the last probe: never before the claim really ended.
                (Role::Leader, r) if r != Role::Leader => {
                    let now = self.clock.mono_ns();
                    lease.last().map_or(now, |c| c.until_mono_ns().min(now))
                }
                _ => self.clock.mono_ns(),
            }
        };
        if self.events.record(stamp, state).is_some()
            && state.leader.is_some()
            && state.leader != prev.leader
        {
            self.stats.leader_changed();
        }
    }

    /// Starts the node's two loops (the role loop and the election driver); the returned future
    /// ends when `stop` is cancelled, or with an error when openraft stops on its own.
    pub async fn run(self: Arc<Self>, stop: CancellationToken) -> Result<(), String> {
        let mut driver = tokio::spawn(self.clone().drive_elections(stop.clone()));
        let res = tokio::select! {
            // openraft stopping after this node closed its claim is the node's own shutdown.
            res = self.clone().role_loop(stop.clone()) => {
                res.or_else(|e| if self.lease.lock().expect("lease").is_closed() { Ok(()) } else { Err(e) })
            }
            // The driver ends by itself only when the node stops; a panic stops the node.
            ended = &mut driver => match ended {
                Err(e) if e.is_panic() => Err(format!("the election driver panicked: {e}")),
                _ => Ok(()),
            },
        };
        driver.abort();
        res
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

    /// The role loop: while openraft has this node as leader, probe the quorum every heartbeat
    /// and claim for a lease after each acknowledged probe; go quiet after 2F without acks;
    /// record every role change. Runs until `stop` is cancelled or openraft stops.
    ///
    /// The probes are the leader's heartbeats: one AppendEntries round every `heartbeat_ms`
    /// exactly, so a follower's silence is measured against a regular beat. openraft's own
    /// heartbeat (which also pushes missing entries to a follower that lags) is off and sent
    /// together with every [`HEARTBEAT_EVERY`]th probe instead.
    ///
    /// Kept whole (about 80 lines) on purpose: it is the one place where the claim is taken,
    /// renewed and given up, and the README's safety argument reads it top to bottom.
    async fn role_loop(self: Arc<Self>, stop: CancellationToken) -> Result<(), String> {
        let t = self.timing;
        let hb = Duration::from_millis(t.heartbeat_ms);
        let lease_ns = ms(t.effective_lease_ms());
        let quiet_after_ns = 2 * ms(t.follower_lease_ms);
        let quiet_ns = quiet_after_ns + lease_ns;
        let mut metrics = self.raft.metrics();
        let mut quiet = Quiet::default();
        let mut probes = 0u64;
        let mut next_probe = tokio::time::Instant::now();
        loop {
            let (claim_left, probing) = {
                let now = self.clock.boot_ns();
                let m = metrics.borrow();
                let lease = self.lease.lock().expect("lease");
                let claim = lease
                    .current(m.current_term, now)
                    .map(|c| Duration::from_nanos(c.until_ns - now));
                let probing = m.state == ServerState::Leader
                    && !lease.is_closed()
                    && !lease.is_fenced(m.current_term)
                    && quiet.may_probe(now);
                (claim, probing)
            };
            // A probing leader wakes for its next probe; anyone else (a follower, whose leader
            // expires with its lease; a quiet, resigned or stopping leader) every beat.
            let wake_at = if probing {
                next_probe
            } else {
                tokio::time::Instant::now() + hb
            };
            tokio::select! {
                biased;
                _ = stop.cancelled() => return Ok(()),
                r = metrics.changed() => if r.is_err() { return Err("openraft stopped".into()) },
                _ = self.wake.notified() => {}
                _ = tokio::time::sleep_until(wake_at) => {}
                _ = tokio::time::sleep(claim_left.unwrap_or_default()), if claim_left.is_some() => {}
            }
            let m = metrics.borrow_and_update().clone();
            if let Err(fatal) = &m.running_state {
                return Err(format!("openraft stopped: {fatal}"));
            }
            let now = self.clock.boot_ns();
            let (closed, fenced) = {
                let l = self.lease.lock().expect("lease");
                (l.is_closed(), l.is_fenced(m.current_term))
            };
            if m.state == ServerState::Leader && !closed && !fenced {
                quiet.leading(m.current_term, now);
                if quiet.may_probe(now) && tokio::time::Instant::now() >= next_probe {
                    next_probe = tokio::time::Instant::now() + hb;
                    // Not with the first probe of a term: the new leader's replication is already
                    // on its way, and the followers answer the probe after it.
                    if probes % HEARTBEAT_EVERY == HEARTBEAT_EVERY - 1 {
                        let _ = self.raft.trigger().heartbeat().await;
                    }
                    probes += 1;
                    let t0 = self.clock.boot_ns();
                    if self.probe(m.current_term, lease_ns).await {
                        quiet.acked(t0);
                    } else if quiet.failed(self.clock.boot_ns(), quiet_after_ns, quiet_ns) {
                        tracing::warn!(
                            quiet_ms = quiet_ns / 1_000_000,
                            "no quorum for two follower leases: probes and heartbeats paused"
                        );
                    }
                }
            } else {
                // Not leading, resigned (fenced) or stopping: no probes, no heartbeats. Should
                // this node be elected, it probes at once.
                quiet.not_leading();
                probes = 0;
                next_probe = tokio::time::Instant::now();
                if m.state != ServerState::Leader {
                    self.lease.lock().expect("lease").revoke(now);
                }
            }
            self.observe();
        }
    }

    /// One probe of the quorum in `term`: a fresh AppendEntries round (`get_read_log_id`, which
    /// returns when a majority has acknowledged the round, without waiting for the blank
    /// entry to be committed and applied as `ensure_linearizable` does). `t0` is read before
    /// the round is built, so every acknowledgement was processed after it. On success the
    /// claim runs to `t0 + lease`; returns whether the quorum acknowledged.
    async fn probe(&self, term: u64, lease_ns: u64) -> bool {
        let t0 = self.clock.read();
        let acked = matches!(
            tokio::time::timeout(self.election.probe_timeout(), self.raft.get_read_log_id()).await,
            Ok(Ok(_))
        );
        let still = self.metrics();
        let granted = acked
            && still.state == ServerState::Leader
            && still.current_term == term
            && self.lease.lock().expect("lease").grant(term, t0, lease_ns);
        tracing::debug!(
            term,
            acked,
            granted,
            took_us = (self.clock.boot_ns() - t0.boot_ns) / 1000,
            "probe"
        );
        if granted {
            // The leader's own contact: it refuses pre-votes while its quorum answers, waits a
            // whole lease before campaigning should it step down, and then goes last.
            self.gate
                .heard(t0.boot_ns, Some((self.id, still.last_log_index)));
        }
        granted
    }

    /// The election driver (election.rs): campaigns when the follower lease has run out, a
    /// pre-vote round succeeded and this node's stagger slot has come, then watches the
    /// outcome. Runs until `stop` is cancelled.
    async fn drive_elections(self: Arc<Self>, stop: CancellationToken) {
        let mut metrics = self.raft.metrics();
        loop {
            if stop.is_cancelled() || self.lease.lock().expect("lease").is_closed() {
                return;
            }
            let m = metrics.borrow_and_update().clone();
            if m.state == ServerState::Leader || m.running_state.is_err() {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    r = metrics.changed() => if r.is_err() { return },
                }
                continue;
            }
            let contact = self.gate.contact();
            let my_rank = rank(
                self.id,
                &self.members,
                contact.leader,
                m.last_log_index < contact.leader_commit,
            );
            let due =
                self.campaign
                    .lock()
                    .expect("campaign")
                    .due_at(&contact, my_rank, m.current_term);
            let now = self.clock.boot_ns();
            if now < due {
                let slept = tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(Duration::from_nanos(due - now)) => true,
                    _ = self.gate.changed() => false,
                    r = metrics.changed() => if r.is_err() { return } else { false },
                };
                let woke = self.clock.boot_ns();
                if slept && self.election.woke_late(due, woke) {
                    tracing::debug!(
                        late_us = (woke - due) / 1000,
                        "woke late for the campaign slot: one more beat for the leader"
                    );
                    tokio::select! {
                        _ = stop.cancelled() => return,
                        _ = tokio::time::sleep(Duration::from_nanos(self.election.heartbeat_ns)) => {}
                        _ = self.gate.changed() => {}
                    }
                }
                continue;
            }
            match self.pre_vote(m.current_term + 1).await {
                Ok(()) => {}
                // Lost only to leases that end within a stagger step (the others heard the
                // last heartbeat a little later): ask again right then.
                Err(Some(wait)) => {
                    tokio::select! {
                        _ = stop.cancelled() => return,
                        _ = tokio::time::sleep(wait + Duration::from_micros(200)) => {}
                    }
                    continue;
                }
                Err(None) => {
                    self.campaign
                        .lock()
                        .expect("campaign")
                        .failed(self.clock.boot_ns());
                    continue;
                }
            }
            let Some(term) = self.elect_if_still_due(contact.seq).await else {
                continue;
            };
            self.stats.election_started();
            let won = self.await_outcome(term, contact.seq, &stop).await;
            let mut c = self.campaign.lock().expect("campaign");
            if won {
                c.settled();
            } else {
                c.failed(self.clock.boot_ns());
            }
        }
    }

    /// Asks every other member whether it would vote for this node in `term`. `Ok` when a
    /// majority (this node included) says yes within the pre-vote deadline; otherwise
    /// `Err(Some(wait))` when the round was lost only to leases that end within `wait`, and
    /// `Err(None)` when it was lost for good (a live leader, a longer log, no answer).
    async fn pre_vote(&self, term: u64) -> Result<(), Option<Duration>> {
        let res = self.pre_vote_round(term).await;
        election::release_own_pledge(&mut self.pledge.lock().expect("pledge"), self.id);
        res
    }

    /// [`QuorumNode::pre_vote`]'s round; its pledge to itself is released by the caller.
    async fn pre_vote_round(&self, term: u64) -> Result<(), Option<Duration>> {
        use futures_util::StreamExt;
        let req = PreVoteRequest {
            term,
            last_log_id: self.store.last_log_id(),
        };
        let need = self.members.len() / 2 + 1;
        let timing = self.election;
        let deadline = Duration::from_nanos(timing.prevote_timeout_ns);
        // This node's own round counts as its pledge: it refuses other candidates meanwhile.
        {
            let now = self.clock.boot_ns();
            let mut p = self.pledge.lock().expect("pledge");
            if matches!(*p, Some(p) if p.to != self.id && now < p.until_ns) {
                return Err(None);
            }
            *p = Some(Pledge {
                to: self.id,
                until_ns: now + timing.pledge_ns(),
            });
        }
        let mut asks: futures_util::stream::FuturesUnordered<_> = self
            .members
            .iter()
            .filter(|id| **id != self.id)
            .map(|&to| async move {
                let r: Result<PreVoteResponse, _> = self
                    .transport
                    .call(to, PATH_PREVOTE, "prevote", &req, deadline)
                    .await;
                r.ok()
            })
            .collect();
        let mut yes = 1;
        let mut waits = Vec::new();
        if yes >= need {
            return Ok(());
        }
        while let Some(answer) = asks.next().await {
            match answer {
                Some(r) if r.granted => yes += 1,
                Some(r) => waits.extend(r.lease_left_us),
                None => {}
            }
            if yes >= need {
                tracing::debug!(term, yes, "pre-vote won");
                return Ok(());
            }
        }
        let retry = prevote_retry_after_us(yes, need, waits)
            .filter(|us| *us <= timing.stagger_ns / 1000)
            .map(Duration::from_micros);
        tracing::debug!(term, yes, need, ?retry, "pre-vote lost: no election");
        Err(retry)
    }

    /// Under the gate's write side: if no contact arrived since `seen_seq` and the follower
    /// lease is still over, enqueue openraft's election. Returns the term campaigned for.
    async fn elect_if_still_due(&self, seen_seq: u64) -> Option<u64> {
        let _exclusive = self.gate.exclusive().await;
        let c = self.gate.contact();
        let lease_over = self.clock.boot_ns() >= c.at_ns + self.election.follower_lease_ns;
        let m = self.metrics();
        if c.seq != seen_seq
            || !lease_over
            || m.state == ServerState::Leader
            || self.lease.lock().expect("lease").is_closed()
        {
            return None;
        }
        let term = m.current_term + 1;
        tracing::info!(term, "follower lease over and pre-vote won: campaigning");
        self.raft.trigger().elect().await.ok()?;
        Some(term)
    }

    /// Waits until this node leads `term`, hears from a leader, or the election deadline
    /// passes; true when it leads.
    async fn await_outcome(&self, term: u64, seq: u64, stop: &CancellationToken) -> bool {
        let mut metrics = self.raft.metrics();
        let limit = Duration::from_nanos(self.election.outcome_ns);
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            {
                let m = metrics.borrow_and_update();
                if m.state == ServerState::Leader && m.current_term >= term {
                    return true;
                }
                if m.current_term > term {
                    return false;
                }
            }
            if self.gate.contact().seq != seq {
                return false;
            }
            tokio::select! {
                _ = stop.cancelled() => return false,
                _ = tokio::time::sleep_until(deadline) => return false,
                _ = self.gate.changed() => {}
                r = metrics.changed() => if r.is_err() { return false },
            }
        }
    }

    /// Hands leadership over (`POST /v1/admin/resign`): fences this node's claim in its term
    /// for good *before* anything else, stops heartbeats and probes, and tells the followers
    /// who should campaign first: `to`, else the follower with the most of the log.
    pub async fn hand_over(&self, to: Option<NodeId>) -> Result<Resigned, ResignError> {
        let m = self.metrics();
        let term = m.current_term;
        let holds = |lease: &Lease| {
            judge_claim(lease, term, &*self.clock).filter(|_| m.state == ServerState::Leader)
        };
        if holds(&self.lease.lock().expect("lease")).is_none() {
            return Err(ResignError::NotLeader(self.id));
        }
        let successor = self.pick_successor(&m, to)?;
        {
            let mut lease = self.lease.lock().expect("lease");
            let Some((_, now)) = holds(&lease) else {
                return Err(ResignError::NotLeader(self.id));
            };
            lease.resign(term, now);
        }
        self.observe();
        self.wake.notify_one();
        let msg = Resign { term, successor };
        let notices = self.tell_followers(msg);
        tokio::spawn(notices);
        Ok(Resigned { term, successor })
    }

    /// The successor: `to` when it can take over, else the follower with the most of the log
    /// (lowest id on a tie), which must have all of it.
    fn pick_successor(
        &self,
        m: &RaftMetrics<NodeId, BasicNode>,
        to: Option<NodeId>,
    ) -> Result<NodeId, ResignError> {
        let matched = |id: NodeId| {
            m.replication
                .as_ref()
                .and_then(|r| r.get(&id).copied())
                .flatten()
                .map(|l| l.index)
        };
        match to {
            Some(n) if n == self.id || !self.members.contains(&n) => {
                Err(ResignError::UnknownTarget(n))
            }
            Some(n) => match (matched(n), m.last_log_index) {
                (Some(have), Some(last)) if have >= last => Ok(n),
                (have, last) => Err(ResignError::Unsuitable(
                    n,
                    format!(
                        "its log reaches index {} of the leader's {}",
                        have.map_or("none".into(), |i| i.to_string()),
                        last.map_or("none".into(), |i| i.to_string())
                    ),
                )),
            },
            None => self
                .members
                .iter()
                .filter(|id| **id != self.id)
                .max_by_key(|id| (matched(**id), std::cmp::Reverse(**id)))
                .copied()
                .filter(|id| matched(*id).is_some() && matched(*id) >= m.last_log_index)
                .ok_or(ResignError::NoSuccessor),
        }
    }

    /// Sends `msg` to every follower, waiting at most [`RESIGN_TIMEOUT`].
    fn tell_followers(&self, msg: Resign) -> impl std::future::Future<Output = ()> + 'static {
        let transport = self.transport.clone();
        let others: Vec<NodeId> = self
            .members
            .iter()
            .copied()
            .filter(|id| *id != self.id)
            .collect();
        async move {
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
            tracing::info!(
                term = msg.term,
                successor = msg.successor,
                told = told.iter().filter(|ok| **ok).count(),
                "resigned: the successor campaigns when the followers' leases end"
            );
        }
    }

    /// Graceful stop (SIGTERM): the claim ends for good at once (no probe in flight can renew
    /// it), heartbeats stop so that the followers' leases run out, a leader names its
    /// successor, and openraft stops.
    pub async fn step_down(&self) {
        let m = self.metrics();
        let was_claiming = {
            let mut lease = self.lease.lock().expect("lease");
            let claiming = judge_claim(&lease, m.current_term, &*self.clock).is_some();
            lease.close(self.clock.boot_ns());
            claiming
        };
        self.observe();
        if m.state == ServerState::Leader || was_claiming {
            if let Ok(successor) = self.pick_successor(&m, None) {
                self.tell_followers(Resign {
                    term: m.current_term,
                    successor,
                })
                .await;
            }
        }
        if let Err(e) = self.raft.shutdown().await {
            tracing::warn!(error = %e, "openraft shutdown");
        }
    }
}

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

/// The claim in force now for a node that openraft has as leader of `term`, and the instant it
/// was judged at: the one judgement `/v1/leader` makes. Read on `CLOCK_BOOTTIME` (on
/// `CLOCK_MONOTONIC` a host that resumes from suspend would still see its old
/// claim running while another node leads).
pub(super) fn judge_claim(lease: &Lease, term: u64, clock: &dyn Clock) -> Option<(Claim, u64)> {
    let now = clock.boot_ns();
    lease.current(term, now).map(|c| (c, now))
}

#[cfg(test)]
mod tests {
    use axum::body::Bytes;
    use axum::extract::State;
    use openraft::raft::VoteRequest;

    use super::*;
    use crate::clock::testing::ManualClock;
    use crate::engine::Engine;
    use crate::quorum::peer::vote;

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
        let mut cfg = crate::config::single_member(dir, crate::role::Mode::Quorum);
        for id in 2..=members {
            cfg.peers.push(crate::config::Peer {
                id,
                addr: format!("127.0.0.1:{}", 9 + id),
            });
        }
        let stats = Arc::new(Stats::default());
        let faults = Arc::new(crate::faults::Faults::new(1));
        let transport = Arc::new(Transport::new(&cfg, faults, stats.clone()));
        let events = Arc::new(EventLog::open(dir, 1).unwrap());
        let store = Store::open(dir, 1, "t").unwrap();
        let plumbing = Plumbing {
            transport,
            events,
            stats,
            clock: crate::clock::system(),
        };
        let q = QuorumNode::start(&cfg, store, plumbing, 1, flaws)
            .await
            .unwrap();
        let stop = CancellationToken::new();
        tokio::spawn(q.clone().run(stop.clone()));
        (q, stop)
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
    // One thread, so that the handler's first poll is all that runs before the drop.
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
        let term = q.metrics().current_term;
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
        q.step_down().await;
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
        let m = q.metrics();
        let req = VoteRequest::<NodeId>::new(
            openraft::Vote::new(m.current_term + 1, 2),
            q.store.last_log_id(),
        );
        let adopted = q.raft.vote(req.clone()).await.unwrap();
        assert!(adopted.vote_granted, "openraft adopts the higher vote");
        let body = Bytes::from(serde_json::to_vec(&req).unwrap());
        let res = vote(State(q.clone()), body).await.unwrap();
        let bytes = axum::body::to_bytes(res.into_body(), usize::MAX)
            .await
            .unwrap();
        let answer: Result<openraft::raft::VoteResponse<NodeId>, serde_json::Value> =
            serde_json::from_slice(&bytes).unwrap();
        let answer = answer.expect("a vote response");
        assert!(
            !answer.vote_granted,
            "a same-term vote was granted inside the promise"
        );
        stop.cancel();
        q.step_down().await;
    }

    /// A node refuses every vote for a follower lease after it starts: before a crash it may
    /// have answered promises it cannot know of, and openraft keeps no lease for a restored
    /// vote that is not committed.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_node_refuses_votes_for_a_follower_lease_after_it_starts() {
        let dir = tempfile::tempdir().unwrap();
        let (q, stop) = node_of(dir.path(), 3, Flaws::default()).await;
        let req = VoteRequest::<NodeId>::new(openraft::Vote::new(5, 2), q.store.last_log_id());
        let body = Bytes::from(serde_json::to_vec(&req).unwrap());
        let res = vote(State(q.clone()), body).await.unwrap();
        let bytes = axum::body::to_bytes(res.into_body(), usize::MAX)
            .await
            .unwrap();
        let answer: Result<openraft::raft::VoteResponse<NodeId>, serde_json::Value> =
            serde_json::from_slice(&bytes).unwrap();
        assert!(
            !answer.unwrap().vote_granted,
            "granted right after the start"
        );
        // After a follower lease, the same request is granted.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let body = Bytes::from(serde_json::to_vec(&req).unwrap());
        let res = vote(State(q.clone()), body).await.unwrap();
        let bytes = axum::body::to_bytes(res.into_body(), usize::MAX)
            .await
            .unwrap();
        let answer: Result<openraft::raft::VoteResponse<NodeId>, serde_json::Value> =
            serde_json::from_slice(&bytes).unwrap();
        assert!(
            answer.unwrap().vote_granted,
            "refused after a follower lease"
        );
        stop.cancel();
        q.step_down().await;
    }

    /// Once stopping, a node never claims again in its process, even if a
    /// probe in flight at the stop is acknowledged after it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_stopping_node_never_claims_again() {
        let dir = tempfile::tempdir().unwrap();
        let (q, stop) = single_node(dir.path()).await;
        assert!(until_claiming(&q).await);
        let term = q.metrics().current_term;
        q.lease.lock().unwrap().close(q.clock.boot_ns());
        // The role loop keeps running (its stop token is not cancelled) and keeps getting
        // acknowledgements from its one-member quorum: none of them may claim.
        for _ in 0..20 {
            tokio::time::sleep(Duration::from_millis(10)).await;
            assert_ne!(q.view().view.role, Role::Leader);
            assert!(
                !q.probe(term, ms(120)).await,
                "a probe after the close claims nothing"
            );
        }
        stop.cancel();
        q.step_down().await;
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

    /// A claim is judged on CLOCK_BOOTTIME, so a leader whose host was
    /// suspended past its lease does not claim when it resumes (CLOCK_MONOTONIC stood still
    /// meanwhile, so judged on it the claim would still run).
    #[test]
    fn a_claim_ends_while_the_host_is_suspended() {
        let clock = ManualClock::default();
        let mut lease = Lease::default();
        assert!(lease.grant(7, clock.read(), ms(120)));
        clock.advance(ms(50));
        assert!(judge_claim(&lease, 7, &clock).is_some());
        clock.suspend(ms(10_000));
        assert!(
            judge_claim(&lease, 7, &clock).is_none(),
            "the claim must have ended during the suspend"
        );
        // What the monotonic clock alone would have said: still claiming.
        let mono_since_grant = ms(50);
        assert!(lease
            .current(7, lease.last().unwrap().since_ns + mono_since_grant)
            .is_some());
    }
}
