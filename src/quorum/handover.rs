//! Handing leadership over: on `POST /v1/admin/resign` ([`QuorumNode::resign`]), at a
//! graceful stop ([`QuorumNode::shutdown`]), and to a preferred leader
//! ([`QuorumNode::prefer_leader`], preference.rs). The claim is fenced or closed *before* anything
//! else, the followers are told who should campaign first ([`Resign`]), and openraft's
//! followers' leases then run out (openraft 0.9 has no leader transfer).

use std::time::Duration;

use openraft::{BasicNode, RaftMetrics, ServerState};

use super::core::{Answer, Input, RaftView};
use super::node::QuorumNode;
use super::protocol::{Resign, PATH_RESIGN};
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

    /// Whether this node claims now, openraft's state being `raft`.
    fn claims(&self, raft: &RaftView) -> bool {
        self.with_core(|core, now| core.claim(now.boot_ns, raft).is_some())
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
