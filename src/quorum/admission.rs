//! [`Admission`]: members that don't vote, as one node sees them (docs/design/nonvoters.md).
//! On a leader: a join asked over `/peer/raft/join` (signed with the cluster's credential, no
//! admin token) is judged by the rules of nonvoters.rs and written as a learner that is never
//! promoted, and the non-voters not heard from for `nonvoters.remove_after_ms` are removed.
//! Neither change touches a voter set (docs/safety.md, "Non-voters", N2). On a non-voter: what
//! its join says of it (driver/nonvoters.rs asks). One change at a time: a join that finds
//! another being written is refused and asked again a second later.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;

use openraft::{BasicNode, ChangeMembers, Raft};

use super::membership::{Membership, CHANGE_TIME};
use super::nonvoters::{self, Admit};
use super::protocol::{JoinAnswer, JoinRequest};
use super::types::{changed, TypeConfig};
use crate::config::ValidConfig;
use crate::engine::MembershipError;
use crate::role::NodeId;
use crate::transport::Transport;

/// The non-voters' side of a node's membership.
#[derive(Clone)]
pub struct Admission {
    id: NodeId,
    raft: Raft<TypeConfig>,
    transport: Arc<Transport>,
    members: Membership,
    /// The most non-voters this node, leading, takes (`nonvoters.max`).
    max: usize,
    /// A join or a removal is being written.
    writing: Arc<AtomicBool>,
    /// This node is a non-voter (`nonvoter`): it joins by itself, never confirms an
    /// incarnation and never campaigns.
    pub nonvoter: bool,
    /// This node's address, and the other members its config names (whom a non-voter asks to
    /// be added before it knows a leader).
    pub addr: String,
    pub config_peers: Vec<NodeId>,
    /// How long a leader hears nothing from a non-voter before it removes it.
    pub remove_after_ns: u64,
}

/// The answer of a node that does not lead, naming the leader it knows and its address.
fn not_leader(leader: Option<(NodeId, String)>) -> JoinAnswer {
    let (leader, addr) = leader.map_or((None, None), |(id, a)| (Some(id), Some(a)));
    let addr = addr.filter(|a| !a.is_empty());
    JoinAnswer::NotLeader { leader, addr }
}

/// The one change being written; let go when dropped.
struct Writing<'a>(&'a AtomicBool);

impl Drop for Writing<'_> {
    fn drop(&mut self) {
        self.0.store(false, SeqCst);
    }
}

impl Admission {
    pub fn new(
        cfg: &ValidConfig,
        raft: &Raft<TypeConfig>,
        transport: &Arc<Transport>,
        members: &Membership,
    ) -> Admission {
        Admission {
            id: cfg.id,
            raft: raft.clone(),
            transport: transport.clone(),
            members: members.clone(),
            max: cfg.nonvoters.max,
            writing: Arc::new(AtomicBool::new(false)),
            nonvoter: cfg.nonvoter,
            addr: cfg.peer_addr(cfg.id).unwrap_or_default().to_string(),
            config_peers: cfg
                .peers
                .iter()
                .map(|p| p.id)
                .filter(|p| *p != cfg.id)
                .collect(),
            remove_after_ns: crate::clock::ms(cfg.effective_remove_after_ms()),
        }
    }

    /// The one change this node writes, unless another is being written.
    fn write(&self) -> Option<Writing<'_>> {
        let free = self.writing.compare_exchange(false, true, SeqCst, SeqCst);
        free.is_ok().then(|| Writing(&self.writing))
    }

    /// Adds `from`, a member that does not vote, at its request: a learner that is never
    /// promoted, by the rules of nonvoters.rs. `req.addr` must be the address the request
    /// carried under the MAC. Each outcome is counted (`nonvoter_joins` in `/v1/status`).
    pub async fn join(&self, from: NodeId, req: JoinRequest) -> JoinAnswer {
        let (answer, outcome) = self.judge_join(from, req).await;
        self.transport.counters.nonvoter_join(outcome);
        answer
    }

    /// The answer to a join, and its outcome as counted: `added`, `member`, `not_leader`, or
    /// the refusal's code.
    async fn judge_join(&self, from: NodeId, req: JoinRequest) -> (JoinAnswer, &'static str) {
        let refused = |code: &'static str, message: String| {
            let answer = JoinAnswer::Refused {
                code: code.into(),
                message,
            };
            (answer, code)
        };
        if let Err(e) = crate::config::check_addr(&req.addr) {
            return refused("invalid", e);
        }
        if from == 0 {
            return refused("invalid", "a member's id is positive".into());
        }
        if self.transport.peers.get(from).as_deref() != Some(req.addr.as_str()) {
            let message = format!("{} is not the address node {from} sends from", req.addr);
            return refused("invalid", message);
        }
        if let Err(MembershipError::NotLeader { leader, .. }) = self.members.must_lead() {
            return (not_leader(leader), "not_leader");
        }
        let Some(_one) = self.write() else {
            let message = "another join or removal is being written".to_string();
            return refused("change_in_progress", message);
        };
        let view = self.members.nonvoter_view();
        match nonvoters::admit(self.max, &view, from, &req.addr) {
            Admit::Member => return (JoinAnswer::Member, "member"),
            Admit::Refused(r) => return refused(r.code(), r.message()),
            Admit::Add => {}
        }
        self.transport.peers.learn(from, &req.addr);
        tracing::info!(
            member = from,
            addr = req.addr,
            "a non-voter joins: a learner"
        );
        let add = self
            .raft
            .add_learner(from, BasicNode::new(&req.addr), false);
        match changed(self.id, tokio::time::timeout(CHANGE_TIME, add).await) {
            Ok(_) => (JoinAnswer::Member, "added"),
            Err(MembershipError::NotLeader { leader, .. }) => (not_leader(leader), "not_leader"),
            Err(e) => refused("failed", e.to_string()),
        }
    }

    /// Removes the non-voters `absent()` names once this node may write (nonvoters.rs, rule 3):
    /// one `RemoveNodes`, which openraft refuses for a voter; the voters are left out here as
    /// well.
    pub async fn remove_absent(&self, absent: impl Fn() -> BTreeSet<NodeId>) {
        let Some(_one) = self.write() else { return };
        let voters: BTreeSet<NodeId> = self.members.voters().into_iter().collect();
        let absent: BTreeSet<NodeId> = absent().difference(&voters).copied().collect();
        if absent.is_empty() || self.members.must_lead().is_err() {
            return;
        }
        tracing::info!(nonvoters = ?absent, "removing non-voters not heard from");
        let n = absent.len() as u64;
        let change = ChangeMembers::RemoveNodes(absent);
        let change = self.raft.change_membership(change, false);
        match changed(self.id, tokio::time::timeout(CHANGE_TIME, change).await) {
            Ok(_) => self.transport.counters.nonvoters_removed(n),
            Err(e) => tracing::warn!(error = %e, "could not remove the absent non-voters"),
        }
    }
}
