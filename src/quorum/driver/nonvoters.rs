//! The non-voters' turn, once a beat (docs/design/nonvoters.md):
//! - on a member that does not vote: its join, at start and whenever its log does not name it
//!   or it has heard no leader for [`UNHEARD`] (a removal it never received), at most once
//!   every [`JOIN_EVERY`];
//! - on a leader: the removal of the non-voters it has not heard from for
//!   `nonvoters.remove_after_ms` (nonvoters.rs, rule 3).
//!
//! One piece of work at a time, run inside the driver's task like every other turn's.

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
/// How long a non-voter that its log names may hear no leader before it asks again: the
/// leader's heartbeats reach it every fourth beat, and a removal may never have.
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
        let heard = m
            .current_leader
            .filter(|l| *l != node.id)
            .and_then(|l| node.counters.last_contact_ns(l))
            .is_some_and(|at| node.clock.mono_ns().saturating_sub(at) < UNHEARD.as_nanos() as u64);
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
    let now = node.clock.mono_ns();
    w.absence.lead(m.current_term, now);
    let view = node.members.nonvoter_view();
    let absent = w
        .absence
        .absent(&view, |id| node.counters.last_contact_ns(id), now);
    if !absent.is_empty() {
        let node = node.clone();
        w.under_way = Some(Box::pin(async move {
            node.admission.remove_absent(absent).await;
            false
        }));
    }
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
            Ok(JoinAnswer::NotLeader { leader: Some(l) }) if !followed && l != node.id => {
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
