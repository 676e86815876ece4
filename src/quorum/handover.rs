//! Handing leadership over: on `POST /v1/admin/resign` ([`QuorumNode::resign`]) and at a
//! graceful stop ([`QuorumNode::shutdown`]). The claim is fenced or closed *before* anything
//! else, the followers are told who should campaign first ([`Resign`]), and openraft's
//! followers' leases then run out (openraft 0.9 has no leader transfer).

use std::time::Duration;

use openraft::{BasicNode, RaftMetrics, ServerState};

use super::node::{judge_claim, QuorumNode};
use super::protocol::{Resign, PATH_RESIGN};
use crate::engine::ResignError;
use crate::lease::Lease;
use crate::role::{NodeId, Resigned};

/// How long the leader waits for the followers to take its resignation.
pub(super) const RESIGN_TIMEOUT: Duration = Duration::from_millis(100);

impl QuorumNode {
    /// Hands leadership over (`POST /v1/admin/resign`): fences this node's claim in its term
    /// for good *before* anything else, stops heartbeats and probes, and tells the followers
    /// who should campaign first: `to`, else the follower with the most of the log.
    pub async fn resign(&self, to: Option<NodeId>) -> Result<Resigned, ResignError> {
        let m = self.raft_metrics();
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
        self.record_view();
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
        let was_claiming = {
            let mut lease = self.lease.lock().expect("lease");
            let claiming = judge_claim(&lease, m.current_term, &*self.clock).is_some();
            lease.close(self.clock.boot_ns());
            claiming
        };
        self.record_view();
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
