//! The named roles in the driver (mod.rs), which owns the node's [`Steward`]
//! (roles/steward.rs; docs/safety.md, "Roles"). Once a beat, the roles turn: the ledger
//! follows the node's leadership; a leader whose claim holds writes what the steward says
//! (revocations, releases, candidacies, grants: `Steward::writes`); and the node sends its
//! renewal to the leader (`Steward::renewal`), whose answer renews every role it holds. At most
//! one write and one renewal are under way at a time: a turn that finds one still out starts no
//! other. What the node's handlers ask of the steward (node/roles.rs) arrives in the driver's
//! inbox as [`Input::Roles`] and is stepped here, with the applied table, in the order it comes.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use openraft::{BasicNode, RaftMetrics, ServerState};

use crate::clock::ms;
use crate::quorum::core::Answer;
use crate::quorum::node::QuorumNode;
use crate::quorum::protocol::PATH_RENEW;
use crate::quorum::types::Command;
use crate::role::NodeId;
use crate::roles::holder::Renewed;
use crate::roles::steward::{RenewRequest, RolesAnswer, RolesAsk, Steward};
use crate::roles::table::RoleTable;
use crate::roles::Token;

/// How long a turn's writes may take before the turn gives up on them (they may still be
/// applied; what was asked is asked again by the next renewals).
const WRITE_WAIT: Duration = Duration::from_secs(2);

/// A renewal's answer: its id, and what the leader said (`None`: not renewed).
pub(super) type Answered = (u64, Option<Renewed>);

/// The releases a turn wrote.
pub(super) type Written = Vec<(NodeId, crate::roles::RoleName, Token)>;

/// The roles turn's work under way.
#[derive(Default)]
pub(super) struct RolesWork {
    pub renewing: Option<BoxFuture<'static, Option<Answered>>>,
    /// The leader the renewal under way was sent to.
    pub renewing_to: Option<NodeId>,
    pub writing: Option<BoxFuture<'static, Written>>,
}

/// Whether this node leads with its claim holding, openraft's state being `m`.
fn claim_holds(node: &QuorumNode, m: &RaftMetrics<NodeId, BasicNode>) -> bool {
    m.state == ServerState::Leader && node.judge(m).lease_remaining_ns.is_some()
}

/// Steps `ask` with `steward` and the applied table now.
pub(super) fn step(
    node: &QuorumNode,
    steward: &mut Steward,
    m: &RaftMetrics<NodeId, BasicNode>,
    ask: RolesAsk,
) -> Answer {
    let leading = (m.current_term, claim_holds(node, m));
    let now = node.clock.boot_ns();
    Answer::Roles(node.store.roles(|t| steward.step(ask, t, now, leading)))
}

/// This beat's roles turn, openraft's state being `m`.
pub(super) fn turn(
    node: &Arc<QuorumNode>,
    steward: &mut Steward,
    m: &RaftMetrics<NodeId, BasicNode>,
    work: &mut RolesWork,
) {
    let leads = m.state == ServerState::Leader;
    let ready = m.last_applied.map(|l| l.leader_id.term) == Some(m.current_term);
    let now = node.clock.boot_ns();
    steward.leads(leads.then_some((m.current_term, ready)), now);
    let (applied, lost) = node.store.roles(|t| (t.applied(), steward.lapsed(t, now)));
    node.store.role_events.lost(applied, node.id, &lost);
    if leads && work.writing.is_none() && claim_holds(node, m) {
        let members = m.membership_config.nodes().map(|(id, _)| *id).collect();
        work.writing = write(node, steward, &members);
    }
    // A renewal still out to a node that no longer leads is given up once another leads (not
    // while no leader is known), and the new leader asked: waiting for it to time out (L) left this node unrenewed by the new leader for up
    // to L after an election behind a partition (its claims lapsed, and the leader's planner
    // saw no live node to grant to). Its answer is never used: this node claims less, never
    // more.
    let moved = matches!(m.current_leader, Some(l) if Some(l) != work.renewing_to);
    if work.renewing.is_some() && moved {
        work.renewing = None;
    }
    if work.renewing.is_none() {
        work.renewing = renew(node, steward, m);
        work.renewing_to = m.current_leader;
    }
}

/// The leader's writes of this turn, if any, as the work that writes them.
fn write(
    node: &Arc<QuorumNode>,
    steward: &mut Steward,
    members: &BTreeSet<NodeId>,
) -> Option<BoxFuture<'static, Written>> {
    let now = node.clock.boot_ns();
    let writes = node.store.roles(|t| steward.writes(t, members, now));
    if writes.commands.is_empty() {
        return None;
    }
    let node = node.clone();
    Some(Box::pin(async move {
        let all = async {
            for cmd in writes.commands {
                if let Err(e) = node.raft.client_write(Command::Roles(cmd)).await {
                    tracing::debug!(error = %e, "a roles entry was not written");
                    return;
                }
            }
        };
        let _ = tokio::time::timeout(WRITE_WAIT, all).await;
        writes.releases
    }))
}

/// A turn's writes ended: the steward learns which releases the table applied.
pub(super) fn written(node: &QuorumNode, steward: &mut Steward, releases: &Written) {
    let now = node.clock.boot_ns();
    node.store.roles(|t| steward.written(releases, t, now));
}

/// This node's renewal, if it has anything to renew or ask: answered at once when it leads,
/// else the work that sends it to the leader. Its instant is read before it is sent (R1).
fn renew(
    node: &Arc<QuorumNode>,
    steward: &mut Steward,
    m: &RaftMetrics<NodeId, BasicNode>,
) -> Option<BoxFuture<'static, Option<Answered>>> {
    let leader = m.current_leader?;
    let req: RenewRequest = node.store.roles(|t| {
        steward
            .renews(t)
            .then(|| steward.renewal(t, node.clock.boot_ns()))
    })?;
    let id = req.id;
    if leader == node.id {
        let from = node.id;
        if let Answer::Roles(RolesAnswer::Renewed(a)) =
            step(node, steward, m, RolesAsk::Renew { from, req })
        {
            answered(node, steward, &(id, a));
        }
        return None;
    }
    let node = node.clone();
    let timeout = Duration::from_nanos(ms(node.timing.effective_lease_ms()));
    Some(Box::pin(async move {
        let sent = node
            .transport
            .call::<_, Option<Renewed>>(leader, PATH_RENEW, "renew", &req, timeout)
            .await;
        sent.ok().map(|answer| (id, answer))
    }))
}

/// The leader answered a renewal (or did not).
pub(super) fn answered(node: &QuorumNode, steward: &mut Steward, (id, answer): &Answered) {
    let now = node.clock.boot_ns();
    node.store
        .roles(|t: &RoleTable| steward.answered(*id, answer.as_ref(), t, now));
}
