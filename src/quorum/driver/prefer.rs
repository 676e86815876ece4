//! The preferred leader's turn of the driver (driver/mod.rs; the rules are preference.rs):
//! while this node leads and claims, it looks every beat for a member of higher priority that
//! answers and has the whole log, and once one has for the settle time, resigns to it. Idle in
//! a cluster without priorities.

use std::sync::Arc;
use std::time::Duration;

use openraft::{BasicNode, RaftMetrics};

use crate::clock::ms;
use crate::quorum::core::{Input, RaftView};
use crate::quorum::node::QuorumNode;
use crate::quorum::preference::{Followers, Look, Seen};
use crate::quorum::types::voters_of;
use crate::role::NodeId;

/// Whether the cluster has priorities at all: without, the driver never looks.
pub(super) fn wanted(node: &QuorumNode) -> bool {
    node.priorities.values().any(|p| *p != 0)
}

/// One look, a beat after the last, for the core to judge: it answers the member to hand over
/// to (once one of higher priority has been ready for the settle time while this node claims).
pub(super) fn look(node: &QuorumNode) -> Input {
    let m = node.raft_metrics();
    let look = Look {
        mine: priority_of(node, node.id),
        seen: seen(node, &m, node.clock.mono_ns()),
        settle_ns: node.settle_ns,
    };
    let raft = RaftView::of(&m);
    Input::Look { raft, look }
}

/// Hands over to `to`, the member [`look`] chose, if it can campaign; else tells the core,
/// whose settle time then starts again.
pub(super) async fn hand_over(node: Arc<QuorumNode>, to: NodeId) {
    if !may_campaign(&node, to).await {
        // A voter on a data dir not confirmed (a wiped disk started again with join)
        // acknowledges appends but never campaigns: handing over to it left the cluster
        // leaderless every settle time (issue 29, finding 2).
        tracing::debug!(
            successor = to,
            "no handover to the preferred leader: its data dir is not confirmed"
        );
        node.ask(Input::CannotTakeOver).await;
        return;
    }
    match node.resign(Some(to)).await {
        Ok(r) => tracing::info!(
            term = r.term,
            successor = to,
            priority = priority_of(&node, to),
            "handing over to a member of higher priority (preferred leader)"
        ),
        Err(e) => tracing::debug!(error = %e, "no handover to the preferred leader"),
    }
}

/// The other voters as the preferred leader judges them at `now` (MONOTONIC): each one's
/// priority, and whether it is ready (has the whole log, was heard within a follower lease).
fn seen(node: &QuorumNode, m: &RaftMetrics<NodeId, BasicNode>, now: u64) -> Vec<Seen> {
    let f = ms(node.timing.follower_lease_ms);
    let followers = Followers::of(m, &voters_of(m), node.id);
    followers
        .matched
        .iter()
        .map(|&(id, _)| Seen {
            id,
            priority: priority_of(node, id),
            ready: followers.has_all(id)
                && node
                    .counters
                    .last_contact_ns(id)
                    .is_some_and(|at| now.saturating_sub(at) < f),
        })
        .collect()
}

/// Whether member `id` answers a hello now with the confirmed incarnation this node holds
/// for it (identity.rs): only then can it campaign, and so take over a handover.
async fn may_campaign(node: &QuorumNode, id: NodeId) -> bool {
    if node.flaws.handover_to_unconfirmed() {
        return true;
    }
    let deadline = Duration::from_millis(node.timing.follower_lease_ms / 3);
    match node.hellos.ask(id, &node.hellos.own(), deadline).await {
        Ok(a) => a.accepted && a.incarnation.is_some() && a.incarnation == node.store.recorded(id),
        Err(_) => false,
    }
}

/// A member's priority (0 unless the config gives one).
fn priority_of(node: &QuorumNode, id: NodeId) -> u32 {
    node.priorities.get(&id).copied().unwrap_or_default()
}
