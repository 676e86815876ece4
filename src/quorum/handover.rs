//! Handing leadership over: on `POST /v1/admin/resign` ([`QuorumNode::resign`]), at a
//! graceful stop ([`QuorumNode::shutdown`]), and to a preferred leader
//! ([`QuorumNode::prefer_leader`], preference.rs). The claim is fenced or closed *before* anything
//! else, the followers are told who should campaign first ([`Resign`]), and openraft's
//! followers' leases then run out (openraft 0.9 has no leader transfer).

use std::sync::Arc;
use std::time::Duration;

use openraft::{BasicNode, RaftMetrics, ServerState};
use tokio_util::sync::CancellationToken;

use super::core::{Answer, Input, RaftView};
use super::node::QuorumNode;
use super::preference::{Seen, Settle};
use super::protocol::{Resign, PATH_RESIGN};
use crate::clock::ms;
use crate::engine::ResignError;
use crate::role::{NodeId, Resigned};

/// How long the leader waits for the followers to take its resignation.
pub const RESIGN_TIMEOUT: Duration = Duration::from_millis(100);

impl QuorumNode {
    /// Hands leadership over (`POST /v1/admin/resign`): fences this node's claim in its term
    /// for good *before* anything else, stops heartbeats and probes, and tells the followers
    /// who should campaign first: `to`, else the follower with the most of the log.
    pub async fn resign(&self, to: Option<NodeId>) -> Result<Resigned, ResignError> {
        let m = self.raft_metrics();
        let raft = RaftView::of(&m);
        if !self.claims(&raft) {
            return Err(ResignError::NotLeader(self.id));
        }
        let successor = self.pick_successor(&m, to)?;
        // Judged again by the core: the claim may have ended while the successor was picked.
        let Some(Answer::Resign(Ok(term))) = self.step(Input::Resign { raft }) else {
            return Err(ResignError::NotLeader(self.id));
        };
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
        let matched = |id: NodeId| matched_index(m, id);
        match to {
            Some(n) if n == self.id || !self.voters().contains(&n) => {
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
                .voters()
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
            .voters()
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
    pub async fn shutdown(&self) {
        let m = self.raft_metrics();
        let raft = RaftView::of(&m);
        let was_claiming = matches!(
            self.step(Input::Shutdown { raft }),
            Some(Answer::Shutdown { was_claiming: true })
        );
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

    /// The preferred leader (preference.rs): while this node leads and claims, it looks every
    /// beat for a member of higher priority that answers and has the whole log, and once one
    /// has for the settle time, resigns to it. Runs until `stop` is cancelled or openraft
    /// stops; idle (one look a beat) in a cluster without priorities.
    pub(super) async fn prefer_leader(self: Arc<Self>, stop: CancellationToken) {
        if self.priorities.values().all(|p| *p == 0) {
            return;
        }
        let beat = Duration::from_millis(self.timing.heartbeat_ms);
        let mine = self.priority_of(self.id);
        let mut settle = Settle::default();
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(beat) => {}
            }
            let m = self.raft_metrics();
            if m.running_state.is_err() {
                return;
            }
            if !self.claims(&RaftView::of(&m)) {
                settle.not_leading();
                continue;
            }
            let now = self.clock.mono_ns();
            let members = self.seen(&m, now);
            if let Some(to) = settle.judge(now, mine, &members, self.settle_ns) {
                if !self.may_campaign(to).await {
                    // A voter on a data dir not confirmed (a wiped disk started again with
                    // join) acknowledges appends but never campaigns: handing over to it left
                    // the cluster leaderless every settle time (issue 29, finding 2). The
                    // settle time starts again.
                    tracing::debug!(
                        successor = to,
                        "no handover to the preferred leader: its data dir is not confirmed"
                    );
                    settle.not_leading();
                    continue;
                }
                match self.resign(Some(to)).await {
                    Ok(r) => tracing::info!(
                        term = r.term,
                        successor = to,
                        priority = self.priority_of(to),
                        "handing over to a member of higher priority (preferred leader)"
                    ),
                    Err(e) => tracing::debug!(error = %e, "no handover to the preferred leader"),
                }
            }
        }
    }

    /// The other voters as the preferred leader judges them at `now` (MONOTONIC): each one's
    /// priority, and whether it is ready (has the whole log, was heard within a follower lease).
    fn seen(&self, m: &RaftMetrics<NodeId, BasicNode>, now: u64) -> Vec<Seen> {
        let f = ms(self.timing.follower_lease_ms);
        let matched = |id: NodeId| matched_index(m, id);
        self.voters()
            .into_iter()
            .filter(|id| *id != self.id)
            .map(|id| Seen {
                id,
                priority: self.priority_of(id),
                ready: matched(id).is_some()
                    && matched(id) >= m.last_log_index
                    && self
                        .counters
                        .last_contact_ns(id)
                        .is_some_and(|at| now.saturating_sub(at) < f),
            })
            .collect()
    }

    /// Whether member `id` answers a hello now with the confirmed incarnation this node holds
    /// for it (identity.rs): only then can it campaign, and so take over a handover.
    async fn may_campaign(&self, id: NodeId) -> bool {
        if self.flaws.handover_to_unconfirmed() {
            return true;
        }
        let deadline = Duration::from_millis(self.timing.follower_lease_ms / 3);
        match self.hellos.ask(id, &self.hellos.own(), deadline).await {
            Ok(a) => {
                a.accepted && a.incarnation.is_some() && a.incarnation == self.store.recorded(id)
            }
            Err(_) => false,
        }
    }

    /// Whether this node claims now, openraft's state being `raft`.
    fn claims(&self, raft: &RaftView) -> bool {
        self.with_core(|core, now| core.claim(now.boot_ns, raft).is_some())
    }

    /// A member's priority (0 unless the config gives one).
    fn priority_of(&self, id: NodeId) -> u32 {
        self.priorities.get(&id).copied().unwrap_or_default()
    }
}

/// How far the leader's log reaches on `id`, as openraft's replication metrics say (`None` on a
/// follower, or before `id` first answered).
pub(super) fn matched_index(m: &RaftMetrics<NodeId, BasicNode>, id: NodeId) -> Option<u64> {
    m.replication
        .as_ref()
        .and_then(|r| r.get(&id).copied())
        .flatten()
        .map(|l| l.index)
}
