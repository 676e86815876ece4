//! Runtime membership of a quorum cluster: the members in force, read from openraft's
//! effective membership (what the node's log holds, committed or not), and the changes the
//! admin API asks for, on openraft's joint consensus (docs/operations.md, "Changing the members").
//!
//! - **Add** (`POST /v1/admin/members`): the leader records the address, adds the node as a
//!   learner, waits until its log has caught up, then makes it a voter (`change_membership`:
//!   a joint config, then the new one).
//! - **Remove** (`DELETE /v1/admin/members/{id}`): the leader changes the voters without it; a
//!   leader removing itself resigns, then asks its successor to (`/peer/raft/remove`).
//! - Members that don't vote join and leave by themselves, as learners (admission.rs).
//! - Every node learns the addresses of the members its log names (`follow_members`, at every
//!   turn of the driver), and forgets the incarnation of a node that is no longer a member
//!   (storage/raft.rs), so that a removed node can be added again on a new data dir.
//!
//! During a joint change, a claim (openraft's read quorum), a vote (openraft) and a pre-vote
//! (election/mod.rs, `majority_of_each`) need a majority of both voter sets.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use openraft::{BasicNode, ChangeMembers, LogId, Raft, RaftMetrics, ServerState};
use tokio_util::sync::CancellationToken;

use super::election::ElectionTiming;
use super::hellos::Hellos;
use super::nonvoters;
use super::preference::Followers;
use super::protocol::{RemoveRequest, PATH_REMOVE};
use super::storage::Store;
use super::types::{changed, membership_index, sets_of, voters_of, TypeConfig};
use crate::config::ValidConfig;
use crate::engine::{MembershipError, ResignError};
use crate::role::{NodeId, Resigned};
use crate::transport::Transport;
use electd_client::{AddMember, Member, Members};

/// How long a change may take in all, below the API's request limit (5 s, `src/error.rs`), so
/// that the caller hears why it did not complete rather than a 408.
pub(super) const CHANGE_TIME: Duration = Duration::from_millis(4000);

/// The time left until `until`.
fn left(until: tokio::time::Instant) -> Duration {
    until.saturating_duration_since(tokio::time::Instant::now())
}

/// One node's view of the members and its part in changing them: the [`QuorumNode`]'s
/// `members` (node/mod.rs). It reads openraft's membership and proposes changes to it; the
/// claim is not its business (a leader removing itself resigns through the node first).
///
/// [`QuorumNode`]: super::node::QuorumNode
#[derive(Clone)]
pub struct Membership {
    id: NodeId,
    raft: Raft<TypeConfig>,
    store: Arc<Store>,
    transport: Arc<Transport>,
    /// Asks a voter's incarnation, and whether a learner's is confirmed (hellos.rs).
    hellos: Hellos,
    timing: ElectionTiming,
    /// A completion of a joint membership config is under way.
    finishing: Arc<AtomicBool>,
}

impl Membership {
    pub fn new(
        cfg: &ValidConfig,
        raft: &Raft<TypeConfig>,
        store: &Arc<Store>,
        transport: &Arc<Transport>,
        hellos: &Hellos,
    ) -> Membership {
        Membership {
            id: cfg.id,
            raft: raft.clone(),
            store: store.clone(),
            transport: transport.clone(),
            hellos: hellos.clone(),
            timing: ElectionTiming::from_config(&cfg.timing),
            finishing: Arc::new(AtomicBool::new(false)),
        }
    }

    fn raft_metrics(&self) -> RaftMetrics<NodeId, BasicNode> {
        self.raft.metrics().borrow().clone()
    }

    /// The voter sets in force: one, or two during a joint change.
    pub(super) fn voter_sets(&self) -> Vec<Vec<NodeId>> {
        let m = self.raft_metrics();
        sets_of(m.membership_config.membership())
    }

    /// Every voter of the sets in force, in id order.
    pub(super) fn voters(&self) -> Vec<NodeId> {
        voters_of(&self.raft_metrics())
    }

    /// Every voter of the sets in force but this node.
    pub(super) fn other_voters(&self) -> Vec<NodeId> {
        let mut voters = self.voters();
        voters.retain(|v| *v != self.id);
        voters
    }

    /// Whether `id` is none of the members of the committed membership in force (once the
    /// log names one): a stranger, whose hello is not judged (hellos.rs, `answer`).
    pub(super) fn is_stranger(&self, id: NodeId) -> bool {
        let members = self.members_now();
        members.committed
            && !members.voter_sets.is_empty()
            && !members.members.iter().any(|m| m.id == id)
    }

    /// The membership in force on this node, as `GET /v1/members` answers it.
    pub(super) fn members_now(&self) -> Members {
        let m = self.raft_metrics();
        let eff = &m.membership_config;
        let voters: BTreeSet<NodeId> = eff.voter_ids().collect();
        let log_id = *eff.log_id();
        Members {
            members: eff
                .nodes()
                .map(|(id, node)| Member::new(*id, node.addr.clone(), voters.contains(id)))
                .collect(),
            voter_sets: sets_of(eff.membership()),
            log_index: log_id.map(|l| l.index),
            committed: log_id.is_none() || log_id <= m.last_applied,
        }
    }

    /// The membership in force as the non-voters' rules read it (nonvoters.rs).
    pub(super) fn nonvoter_view(&self) -> nonvoters::Members {
        let now = self.members_now();
        nonvoters::Members {
            voters: now
                .members
                .iter()
                .filter(|m| m.voter)
                .map(|m| m.id)
                .collect(),
            nodes: now.members.into_iter().map(|m| (m.id, m.addr)).collect(),
            changing: now.voter_sets.len() > 1 || !now.committed,
        }
    }

    /// The log index of the membership this node's log names (`None` before it names one).
    pub(super) fn membership_index(&self) -> Option<u64> {
        membership_index(&self.raft_metrics())
    }

    /// `Err(NotLeader)` naming the leader unless this node leads as a voter of the membership
    /// in force. A leader that has just committed its own removal says Leader until openraft's
    /// next tick steps it down, and a change it proposed then would stop a debug build's
    /// openraft core (docs/design/openraft.md, "A leader that removed itself"): it refuses, as a
    /// node that knows no leader.
    pub(super) fn must_lead(&self) -> Result<(), MembershipError> {
        let m = self.raft_metrics();
        let member = m.membership_config.voter_ids().any(|v| v == self.id);
        if m.state == ServerState::Leader && member {
            return Ok(());
        }
        let leader = m.current_leader.filter(|l| *l != self.id).map(|l| {
            let addr = self.transport.peers.get(l).unwrap_or_default();
            (l, addr)
        });
        Err(MembershipError::NotLeader {
            me: self.id,
            leader,
        })
    }

    /// Adds `add.id` at `add.addr`: a learner first, a voter once its log has caught up.
    pub(super) async fn add_member(&self, add: AddMember) -> Result<Members, MembershipError> {
        crate::config::check_addr(&add.addr).map_err(MembershipError::Invalid)?;
        if add.id == 0 {
            return Err(MembershipError::Invalid("id must be positive".into()));
        }
        self.must_lead()?;
        let now = self.members_now();
        if now.voter_sets.len() > 1 || !now.committed {
            return Err(MembershipError::InProgress);
        }
        if now.members.iter().any(|m| m.id == add.id && m.voter) {
            return Err(MembershipError::AlreadyMember(add.id));
        }
        if let Some(other) = now
            .members
            .iter()
            .find(|m| m.addr == add.addr && m.id != add.id)
        {
            return Err(MembershipError::AddressInUse {
                addr: add.addr,
                id: other.id,
            });
        }
        self.transport.peers.learn(add.id, &add.addr);
        let until = tokio::time::Instant::now() + CHANGE_TIME;
        tracing::info!(
            member = add.id,
            addr = add.addr,
            "adding a member: learner first"
        );
        let learner = self
            .raft
            .add_learner(add.id, BasicNode::new(&add.addr), false);
        changed(self.id, tokio::time::timeout(left(until), learner).await)?;
        self.until_caught_up(add.id, until).await?;
        self.until_confirmed(add.id, until).await?;
        let mut voters: BTreeSet<NodeId> = self.voters().into_iter().collect();
        voters.insert(add.id);
        self.hellos.log_incarnations(&voters, until).await?;
        tracing::info!(
            member = add.id,
            "learner caught up and confirmed: promoting it to voter"
        );
        let voters = BTreeSet::from([add.id]);
        let promote = self
            .raft
            .change_membership(ChangeMembers::AddVoterIds(voters), false);
        changed(self.id, tokio::time::timeout(left(until), promote).await)?;
        Ok(self.members_now())
    }

    /// Removes `id`; the leader removing itself hands over first (`resign`, the node's) and has
    /// its successor do it.
    pub(super) async fn remove_member(
        &self,
        id: NodeId,
        resign: impl Future<Output = Result<Resigned, ResignError>>,
    ) -> Result<Members, MembershipError> {
        self.must_lead()?;
        let now = self.members_now();
        let Some(member) = now.members.iter().find(|m| m.id == id) else {
            return Err(MembershipError::UnknownMember(id));
        };
        if now.voter_sets.len() > 1 || !now.committed {
            return Err(MembershipError::InProgress);
        }
        if member.voter && now.voter_sets[0].len() == 1 {
            return Err(MembershipError::LastVoter(id));
        }
        let until = tokio::time::Instant::now() + CHANGE_TIME;
        if id == self.id {
            return self.hand_over_and_remove_self(resign, until).await;
        }
        let staying: BTreeSet<NodeId> = self.voters().into_iter().filter(|v| *v != id).collect();
        self.hellos.log_incarnations(&staying, until).await?;
        let change = if member.voter {
            ChangeMembers::RemoveVoters(BTreeSet::from([id]))
        } else {
            ChangeMembers::RemoveNodes(BTreeSet::from([id]))
        };
        tracing::info!(member = id, "removing a member");
        let change = self.raft.change_membership(change, false);
        changed(self.id, tokio::time::timeout(left(until), change).await)?;
        Ok(self.members_now())
    }

    /// Removes `from` at its request (`/peer/raft/remove`): itself only, and only from the
    /// membership it asked in (one held back until it was removed and added again is older).
    pub(super) async fn remove_self(
        &self,
        from: NodeId,
        r: RemoveRequest,
        resign: impl Future<Output = Result<Resigned, ResignError>>,
    ) -> Result<Members, String> {
        if r.id != from {
            return Err(format!("node {from} may remove only itself this way"));
        }
        let now = self.membership_index();
        if r.membership.is_none() || r.membership != now {
            return Err(format!(
                "node {from} asked to be removed from the membership of log index {:?}, and the \
                 membership in force is of index {now:?}: ask again",
                r.membership
            ));
        }
        let removed = self.remove_member(r.id, resign).await;
        removed.map_err(|e| e.to_string())
    }

    /// The leader removes itself: it resigns (its claim fenced, a successor named), waits for
    /// the next leader, and asks it to do the removal.
    async fn hand_over_and_remove_self(
        &self,
        resign: impl Future<Output = Result<Resigned, ResignError>>,
        until: tokio::time::Instant,
    ) -> Result<Members, MembershipError> {
        let resigned = resign
            .await
            .map_err(|e| MembershipError::Failed(format!("could not hand over first: {e}")))?;
        tracing::info!(
            term = resigned.term,
            successor = resigned.successor,
            "removing this node, the leader: handed over first"
        );
        let mut metrics = self.raft.metrics();
        let leader = loop {
            let next = {
                let m = metrics.borrow_and_update();
                m.current_leader
                    .filter(|l| *l != self.id && m.current_term > resigned.term)
            };
            if let Some(l) = next {
                break l;
            }
            tokio::select! {
                _ = tokio::time::sleep_until(until) => {
                    return Err(MembershipError::Failed(
                        "no new leader in time after the handover; this node no longer \
                         leads: ask the new leader"
                            .into(),
                    ))
                }
                r = metrics.changed() => if r.is_err() {
                    return Err(MembershipError::Failed("openraft stopped".into()));
                }
            }
        };
        let answer: Result<Result<Members, String>, _> = self
            .transport
            .call(
                leader,
                PATH_REMOVE,
                "remove",
                &RemoveRequest {
                    id: self.id,
                    membership: self.membership_index(),
                },
                left(until),
            )
            .await;
        match answer {
            Ok(Ok(members)) => Ok(members),
            Ok(Err(e)) => Err(MembershipError::Failed(format!("node {leader}: {e}"))),
            Err(e) => Err(MembershipError::Failed(format!(
                "asked node {leader}, the new leader, to remove this node: {e}"
            ))),
        }
    }

    /// Waits until learner `id`'s incarnation is confirmed (it may vote: identity.rs), asking
    /// it every beat: a voter that may not vote would count against every majority, and could
    /// leave the live members without one (a member behind the log cannot help confirm it
    /// until a leader brings it up to date, and that leader might need the new voter's vote).
    async fn until_confirmed(
        &self,
        id: NodeId,
        until: tokio::time::Instant,
    ) -> Result<(), MembershipError> {
        if self.hellos.until_confirmed(id, until).await {
            return Ok(());
        }
        Err(MembershipError::Failed(format!(
            "node {id} caught up, but ⌈n/2⌉ members did not record its data dir's incarnation \
             within {} ms (see its log); it stays a learner: add it again, or remove it",
            CHANGE_TIME.as_millis()
        )))
    }

    /// Waits until the leader's replication to `id` has reached its last log entry.
    async fn until_caught_up(
        &self,
        id: NodeId,
        until: tokio::time::Instant,
    ) -> Result<(), MembershipError> {
        let mut metrics = self.raft.metrics();
        loop {
            let caught_up = Followers::of(&metrics.borrow_and_update(), &[id], self.id).has_all(id);
            if caught_up {
                return Ok(());
            }
            tokio::select! {
                _ = tokio::time::sleep_until(until) => return Err(MembershipError::Failed(format!(
                    "node {id} did not catch up within {} ms (is it running, with --join?); it \
                     stays a learner: add it again once it runs, or remove it",
                    CHANGE_TIME.as_millis()
                ))),
                r = metrics.changed() => if r.is_err() {
                    return Err(MembershipError::Failed("openraft stopped".into()));
                }
            }
        }
    }

    /// Keeps the transport's address book in step with the members the log names, once for
    /// each membership the log holds (`seen`: the last one followed). The driver calls it at
    /// each of its turns (driver/mod.rs) and runs the work it returns: a confirmed node's
    /// hellos to a changed membership, and the completion of a joint config.
    pub(super) fn follow_members(
        &self,
        m: &RaftMetrics<NodeId, BasicNode>,
        seen: &mut Option<Option<LogId<NodeId>>>,
        stop: &CancellationToken,
    ) -> Vec<BoxFuture<'static, ()>> {
        let mut work: Vec<BoxFuture<'static, ()>> = Vec::new();
        let at = *m.membership_config.log_id();
        if *seen != Some(at) {
            *seen = Some(at);
            let nodes: BTreeMap<NodeId, String> = m
                .membership_config
                .nodes()
                .map(|(id, n)| (*id, n.addr.clone()))
                .collect();
            let others: Vec<NodeId> = nodes.keys().copied().filter(|id| *id != self.id).collect();
            for (id, addr) in &nodes {
                if *id != self.id {
                    self.transport.peers.learn(*id, addr);
                }
            }
            // The book follows the log: members removed (and senders learned before this node's
            // log named them) are forgotten, so no secret holder grows it (issue 30). Not before
            // the log names a membership (a joining node's config is all it has).
            if !nodes.is_empty() {
                let mut keep: BTreeSet<NodeId> = nodes.keys().copied().collect();
                keep.insert(self.id);
                self.transport.keep_members(&keep);
            }
            // A confirmed node tells a changed membership its incarnation again: a member
            // added since records it, and so does every member again after this node was
            // removed and added back (they forgot it then).
            if let Some(incarnation) = self.store.confirmed_incarnation() {
                let index = at.map(|l| l.index);
                let say = self
                    .hellos
                    .clone()
                    .say(others, incarnation, index, stop.clone());
                work.push(Box::pin(say));
            }
        }
        if let Some(at) = self.joint_to_finish() {
            work.push(Box::pin(self.clone().finish_joint(at)));
        }
        work
    }

    /// The log index of the joint membership in force, when this node leads, the entry is
    /// committed and no completion is under way: openraft's leader that appended a joint
    /// config goes on to the new one itself, but a leader elected while a joint config is in
    /// force does not, and the cluster would stay in it (found by the simulator: a leader
    /// removed while its successor was partitioned).
    fn joint_to_finish(&self) -> Option<u64> {
        let m = self.raft_metrics();
        let eff = &m.membership_config;
        let joint = eff.membership().get_joint_config().len() > 1;
        let at = eff.log_id().filter(|l| Some(*l) <= m.last_applied)?;
        (m.state == ServerState::Leader && joint && !self.finishing.swap(true, Relaxed))
            .then_some(at.index)
    }

    /// After a follower lease, if the same joint config (at log index `at`) is still in force
    /// and this node still leads, changes to its new voter set: the second half of the change
    /// that an earlier leader began.
    async fn finish_joint(self, at: u64) {
        tokio::time::sleep(Duration::from_nanos(self.timing.follower_lease_ns)).await;
        let m = self.raft_metrics();
        let eff = &m.membership_config;
        let configs = eff.membership().get_joint_config();
        let still = m.state == ServerState::Leader
            && configs.len() > 1
            && eff.log_id().map(|l| l.index) == Some(at);
        let goal: BTreeSet<NodeId> = configs
            .last()
            .map(|c| c.iter().copied().collect())
            .unwrap_or_default();
        let until = tokio::time::Instant::now() + CHANGE_TIME;
        let logged = still && {
            match self.hellos.log_incarnations(&goal, until).await {
                Ok(()) => true,
                Err(e) => {
                    tracing::warn!("cannot finish the membership change yet: {e}");
                    false
                }
            }
        };
        if still && logged {
            tracing::info!(
                ?goal,
                "finishing the membership change an earlier leader began"
            );
            let change = self
                .raft
                .change_membership(ChangeMembers::ReplaceAllVoters(goal), false);
            match tokio::time::timeout(CHANGE_TIME, change).await {
                Ok(Ok(_)) => tracing::info!("membership change finished"),
                Ok(Err(e)) => tracing::warn!("could not finish the membership change: {e}"),
                Err(_) => tracing::warn!("membership change not finished within {CHANGE_TIME:?}"),
            }
        }
        self.finishing.store(false, Relaxed);
    }
}
