//! Handing leadership over: on `POST /v1/admin/resign` ([`QuorumNode::resign`]), at a
//! graceful stop ([`QuorumNode::shutdown`]), and to a preferred leader (driver/prefer.rs). One
//! step of the core fences or closes the claim *before* anything else and names the successor
//! (preference.rs, `Followers::successor`); the followers are told who should campaign first
//! ([`Resign`]), and openraft's followers' leases then run out (openraft 0.9 has no leader
//! transfer).

use std::time::Duration;

use super::core::{Answer, Input, RaftView};
use super::node::QuorumNode;
use super::preference::Followers;
use super::protocol::{Resign, PATH_RESIGN};
use super::types::voters_of;
use crate::engine::ResignError;
use crate::role::{NodeId, Resigned};

/// How long the leader waits for the followers to take its resignation.
pub const RESIGN_TIMEOUT: Duration = Duration::from_millis(100);

impl QuorumNode {
    /// Hands leadership over (`POST /v1/admin/resign`): the core fences this node's claim in
    /// its term for good *before* anything else, stops heartbeats and probes, and names the
    /// successor the followers are told to let campaign first: `to`, else the follower with
    /// the most of the log (preference.rs, `Followers::successor`).
    pub async fn resign(&self, to: Option<NodeId>) -> Result<Resigned, ResignError> {
        let m = self.raft_metrics();
        let resign = Input::Resign {
            raft: RaftView::of(&m),
            to,
            followers: Followers::of(&m, &voters_of(&m), self.id),
        };
        let resigned = match self.step(resign) {
            Some(Answer::Resign(r)) => r?,
            _ => return Err(ResignError::NotLeader(self.id)),
        };
        let msg = Resign {
            term: resigned.term,
            successor: resigned.successor,
        };
        tokio::spawn(self.tell_followers(msg));
        Ok(resigned)
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
        let stop = Input::Shutdown {
            raft: RaftView::of(&m),
            followers: Followers::of(&m, &voters_of(&m), self.id),
        };
        if let Some(Answer::Shutdown(Some(successor))) = self.step(stop) {
            let term = m.current_term;
            self.tell_followers(Resign { term, successor }).await;
        }
        if let Err(e) = self.raft.shutdown().await {
            tracing::warn!(error = %e, "openraft shutdown");
        }
    }
}
