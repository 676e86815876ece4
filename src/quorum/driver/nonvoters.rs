//! The non-voters' turn, once a beat (docs/design/nonvoters.md):
//! - on a member that does not vote: its join, at start and whenever its log does not name it
//!   or no leader's append has reached it for [`UNHEARD`] (a removal it never received: the
//!   leader stops replicating to a removed learner), at most once every [`JOIN_EVERY`]. Only
//!   appends count (the core's contact), not the answers to its own requests: a removed
//!   non-voter's renewals are still answered;
//! - on a leader: the removal of the non-voters that have not answered its own requests (its
//!   appends, at the address the membership names) for `nonvoters.remove_after_ms`
//!   (nonvoters.rs, rule 3). What a non-voter sends itself does not count: one restarted at
//!   another address, or one the leader cannot reach, is removed and can join again.
//!
//! One piece of work at a time, run inside the driver's task like every other turn's.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use openraft::{BasicNode, RaftMetrics, ServerState};
use tokio::time::Instant;

use crate::quorum::node::QuorumNode;
use crate::quorum::nonvoters::Absence;
use crate::quorum::protocol::{JoinAnswer, JoinRequest, PATH_JOIN};
use crate::role::NodeId;

/// How often a non-voter that is no member asks to be added.
const JOIN_EVERY: Duration = Duration::from_secs(1);
/// How long a non-voter that its log names may hear no leader's append before it asks again
/// (at least eight beats): the leader's heartbeats reach it every fourth beat, and a removal
/// may never have.
const UNHEARD: Duration = Duration::from_secs(2);
/// How long one join request may take (the leader's change takes at most 4 s).
const JOIN_TIME: Duration = Duration::from_secs(5);

/// What the turn remembers.
pub(super) struct NonVotersWork {
    absence: Absence,
    next_join: Instant,
    /// The join said `Member` last time (its log is logged once per change of outcome).
    joined: bool,
    pub(super) under_way: Option<BoxFuture<'static, bool>>,
}

impl NonVotersWork {
    pub(super) fn new(node: &QuorumNode) -> NonVotersWork {
        NonVotersWork {
            absence: Absence::new(node.admission.remove_after_ns),
            next_join: Instant::now(),
            joined: false,
            under_way: None,
        }
    }

    /// The work ended: whether a join made or found this node a member.
    pub(super) fn done(&mut self, joined: bool) {
        self.under_way = None;
        if joined && !self.joined {
            tracing::info!("a member of the cluster that does not vote");
        }
        self.joined = joined;
    }
}

/// The turn: starts the work it calls for, unless some is under way.
pub(super) fn turn(
    node: &Arc<QuorumNode>,
    w: &mut NonVotersWork,
    m: &RaftMetrics<NodeId, BasicNode>,
) {
    if w.under_way.is_some() {
        return;
    }
    if node.admission.nonvoter {
        let named = m.membership_config.nodes().any(|(id, _)| *id == node.id);
        let contact = node.core.read().contact();
        let since = node.clock.boot_ns().saturating_sub(contact.at_ns);
        // Heartbeats reach a learner every fourth beat: two of them may be lost.
        let unheard = UNHEARD.max(Duration::from_millis(8 * node.timing.heartbeat_ms));
        let heard = contact.leader.is_some() && since < unheard.as_nanos() as u64;
        if (named && heard) || Instant::now() < w.next_join {
            return;
        }
        w.next_join = Instant::now() + JOIN_EVERY;
        w.under_way = Some(Box::pin(join(node.clone(), m.current_leader)));
        return;
    }
    let voter = m.membership_config.voter_ids().any(|v| v == node.id);
    if m.state != ServerState::Leader || !voter {
        w.absence.follow();
        return;
    }
    w.absence.lead(m.current_term, node.clock.mono_ns());
    if !absent(node, &w.absence).is_empty() {
        let (node, a) = (node.clone(), w.absence.clone());
        w.under_way = Some(Box::pin(async move {
            // Judged again once this node may write, on the membership and answers of then.
            node.admission.remove_absent(|| absent(&node, &a)).await;
            false
        }));
    }
}

/// The non-voters absent now by `a`: unheard in the answers to this node's own requests.
fn absent(node: &QuorumNode, a: &Absence) -> BTreeSet<NodeId> {
    let view = node.members.nonvoter_view();
    let answered = |id| node.counters.last_answer_ns(id);
    a.absent(&view, answered, node.clock.mono_ns())
}

/// Asks to be added: the leader if this node knows one, else each member its config names,
/// following a `NotLeader` answer's leader once. Whether it is a member now.
async fn join(node: Arc<QuorumNode>, leader: Option<NodeId>) -> bool {
    let req = JoinRequest {
        addr: node.admission.addr.clone(),
    };
    let mut asks: Vec<NodeId> = leader.filter(|l| *l != node.id).into_iter().collect();
    asks.extend(
        node.admission
            .config_peers
            .iter()
            .filter(|p| Some(**p) != leader),
    );
    if asks.is_empty() {
        tracing::warn!("a non-voter with no member to ask: list the voters in its peers");
        return false;
    }
    let mut followed = false;
    let mut i = 0;
    while i < asks.len() {
        let to = asks[i];
        i += 1;
        let answer = node
            .transport
            .call::<_, JoinAnswer>(to, PATH_JOIN, "join", &req, JOIN_TIME)
            .await;
        match answer {
            Ok(JoinAnswer::Member) => return true,
            Ok(JoinAnswer::NotLeader {
                leader: Some(l),
                addr,
            }) if !followed && l != node.id => {
                // A member's signed answer: the leader may be one added since the config.
                if let Some(addr) = addr.filter(|_| !node.transport.peers.contains(l)) {
                    node.transport.peers.learn(l, &addr);
                }
                followed = true;
                asks.insert(i, l);
            }
            Ok(JoinAnswer::NotLeader { .. }) => {}
            Ok(JoinAnswer::Refused { code, message }) => {
                tracing::warn!(
                    leader = to,
                    code,
                    message,
                    "the join was refused; asking again"
                );
                return false;
            }
            Err(e) => tracing::debug!(peer = to, error = %e, "join: no answer"),
        }
    }
    false
}
