//! The Invitation algorithm (H. Garcia-Molina, "Elections in a Distributed Computing System",
//! 1982, section 5): the partition-tolerant companion of Bully. Nodes are organised in
//! *groups*, each with one coordinator; every partition forms groups of its own, and
//! coordinators that find each other merge their groups by invitation. Kept in its textbook
//! form: no quorum, so each side of a partition has a coordinator of its own.
//!
//! * A group is named by a **group number** (`(number, coordinator)`): a new group takes the
//!   highest number seen plus one. The number is the view's `term`. Garcia-Molina keeps the
//!   counter of groups in "safe" storage, which survives a crash; so does the node
//!   (`epoch_file.rs`): a restarted node never names a group it named before.
//! * **Recovery** (at start, and whenever a member loses its coordinator): the node forms a
//!   group of its own and coordinates it.
//! * **Check** (a coordinator, every `announce_interval` ticks): it asks every other node
//!   AreYouCoordinator; the coordinators that answer yes are merged with its group. To avoid
//!   two coordinators inviting each other at once, only the one with the highest id among
//!   those found merges at once; the others wait in proportion to how far their id is below
//!   the highest found (`coordinator_timeout` ticks a step) to be invited, and merge themselves
//!   only if they were not.
//! * **Merge**: the coordinator makes a new group number and sends Invitation to the
//!   coordinators it found and to its own members; it collects Accepts for
//!   `coordinator_timeout` ticks, then sends Ready with the new group's members to each that
//!   accepted, and coordinates the new group.
//! * **Invitation** received in the normal state: the node leaves its group for the new one;
//!   a coordinator forwards the invitation to its members; it answers Accept to the new
//!   coordinator and waits twice `coordinator_timeout` ticks for Ready (recovery if none
//!   comes).
//! * **Timeout** (a member, every tick): it asks its coordinator AreYouThere; a no, or
//!   twice `failure_timeout` ticks without a yes (a round trip of the question), makes it
//!   recover.
//! * A node reports [`Role::Leader`] while it coordinates a group in the normal state,
//!   [`Role::Follower`] of its coordinator while it is a member, and [`Role::Candidate`]
//!   while a merge or an invitation is under way.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::core::{count_down, Algorithm, Core, MsgKind, Outbox, Tick, Ticks};
use crate::role::{NodeId, Role, View};

/// A group's name: its number (the view's `term`) and its coordinator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Group {
    pub number: u64,
    pub coordinator: NodeId,
}

/// Invitation messages. Every one names a group, whose number every receiver adopts as the
/// highest seen.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum InvitationMsg {
    /// A coordinator asks a node outside its group whether it coordinates one.
    AreYouCoordinator { group: Group },
    /// The answer: `yes` when the sender coordinates `group` in the normal state.
    AreYouCoordinatorAnswer { group: Group, yes: bool },
    /// A member asks its coordinator whether it still coordinates `group` with it in it.
    AreYouThere { group: Group },
    /// The answer: `yes` when it does.
    AreYouThereAnswer { group: Group, yes: bool },
    /// "Join my new group": from the merging coordinator, or forwarded by an old one.
    Invitation { group: Group },
    /// The answer to an invitation, sent to the new group's coordinator.
    Accept { group: Group },
    /// The coordinator's answer to an Accept: `yes` when it is still forming `group`.
    AcceptAnswer { group: Group, yes: bool },
    /// The new group is formed: its `members`.
    Ready {
        group: Group,
        members: BTreeSet<NodeId>,
    },
    /// The answer to Ready: `yes` when the sender joined `group`.
    ReadyAnswer { group: Group, yes: bool },
}

impl InvitationMsg {
    /// The group every message names.
    pub fn group(&self) -> Group {
        match self {
            InvitationMsg::AreYouCoordinator { group }
            | InvitationMsg::AreYouCoordinatorAnswer { group, .. }
            | InvitationMsg::AreYouThere { group }
            | InvitationMsg::AreYouThereAnswer { group, .. }
            | InvitationMsg::Invitation { group }
            | InvitationMsg::Accept { group }
            | InvitationMsg::AcceptAnswer { group, .. }
            | InvitationMsg::Ready { group, .. }
            | InvitationMsg::ReadyAnswer { group, .. } => *group,
        }
    }
}

impl MsgKind for InvitationMsg {
    fn epoch(&self) -> u64 {
        self.group().number
    }

    fn kind(&self) -> &'static str {
        match self {
            InvitationMsg::AreYouCoordinator { .. } => "are_you_coordinator",
            InvitationMsg::AreYouCoordinatorAnswer { .. } => "are_you_coordinator_answer",
            InvitationMsg::AreYouThere { .. } => "are_you_there",
            InvitationMsg::AreYouThereAnswer { .. } => "are_you_there_answer",
            InvitationMsg::Invitation { .. } => "invitation",
            InvitationMsg::Accept { .. } => "accept",
            InvitationMsg::AcceptAnswer { .. } => "accept_answer",
            InvitationMsg::Ready { .. } => "ready",
            InvitationMsg::ReadyAnswer { .. } => "ready_answer",
        }
    }

    fn periodic(&self) -> bool {
        matches!(
            self,
            InvitationMsg::AreYouCoordinator { .. }
                | InvitationMsg::AreYouCoordinatorAnswer { .. }
                | InvitationMsg::AreYouThere { .. }
                | InvitationMsg::AreYouThereAnswer { .. }
        )
    }
}

/// A merge or an invitation under way (the shared core's `Electing` phase).
#[derive(Clone, Debug, PartialEq, Eq)]
enum Reorganizing {
    /// This node invited others to `group`; ticks left to collect Accepts.
    Merging {
        group: Group,
        accepted: BTreeSet<NodeId>,
        left: u32,
    },
    /// This node accepted an invitation to `group`; ticks left to wait for Ready.
    Joining { group: Group, left: u32 },
}

/// Invitation state machine of one node: the shared legacy core (members, group numbers as
/// epochs, view, phase, outbox; see [`super::core`]) with the group's members and the merge
/// in progress.
#[derive(Debug)]
pub struct Invitation {
    core: Core<InvitationMsg, Reorganizing>,
    /// The members of this node's group (this node included), as its coordinator formed it.
    members: BTreeSet<NodeId>,
    /// A coordinator: the other coordinators that answered yes since its last check.
    found: BTreeSet<NodeId>,
    /// A coordinator that found others with a higher id: ticks left to be invited before it
    /// merges them itself (in proportion to the difference from the highest found).
    merge_in: Option<u32>,
    /// A member: ticks since its coordinator last answered yes. It gives up after twice the
    /// failure timeout, a round trip of the question (the core's timeout counts one way).
    unanswered: u32,
}

impl Invitation {
    /// The group this node belongs to in the normal state (the one it coordinates or follows).
    pub fn group(&self) -> Option<Group> {
        let view = self.core.view();
        match (view.role, view.leader) {
            (Role::Leader | Role::Follower, Some(coordinator)) => Some(Group {
                number: view.term,
                coordinator,
            }),
            _ => None,
        }
    }

    /// The members of this node's group.
    pub fn members(&self) -> &BTreeSet<NodeId> {
        &self.members
    }

    fn coordinates(&self) -> bool {
        self.core.view().role == Role::Leader
    }

    fn new_group(&self) -> Group {
        Group {
            number: self.core.max_epoch().saturating_add(1),
            coordinator: self.core.id(),
        }
    }

    /// The only place a node coordinates a group: `group` with `members`.
    fn coordinate(&mut self, group: Group, members: BTreeSet<NodeId>) {
        self.members = members;
        self.found.clear();
        self.merge_in = None;
        self.core.become_leader(group.number);
    }

    /// The only place a node joins a group as a member.
    fn join(&mut self, group: Group, members: BTreeSet<NodeId>) {
        self.members = members;
        self.found.clear();
        self.merge_in = None;
        self.unanswered = 0;
        self.core.become_follower(group.coordinator, group.number);
    }

    /// Recovery: a group of its own.
    fn recover(&mut self) {
        let group = self.new_group();
        let me = self.core.id();
        self.coordinate(group, BTreeSet::from([me]));
    }

    /// Check: ask every other node whether it coordinates a group; decide on the coordinators
    /// found in the last round.
    ///
    /// Garcia-Molina's Check (paraphrased from his pseudocode): a coordinator in the normal
    /// state sends AreYouCoordinator to *every* node j ≠ i (not only to those outside its group,
    /// whose member list may be stale: a member that since formed a group of its own is a
    /// coordinator to merge with); with p the highest priority among those that answered yes,
    /// a coordinator with i < p waits "a time proportional to p − i" before it calls Merge, so
    /// that the highest merges first and invites the others before they invite anyone (the
    /// wait avoids the collisions of several merges at once). Priority is the node id; the
    /// unit of the wait is `coordinator_timeout` ticks, the time a merge takes to collect its
    /// Accepts.
    fn check(&mut self) {
        if !self.found.is_empty() {
            let me = self.core.id();
            let highest = self.found.iter().copied().max().unwrap_or(me);
            if highest < me {
                return self.merge();
            }
            match &mut self.merge_in {
                None => {
                    let unit = u64::from(self.core.ticks().coordinator_timeout.max(1));
                    let wait = unit.saturating_mul(highest - me);
                    self.merge_in = Some(u32::try_from(wait).unwrap_or(u32::MAX));
                }
                Some(left) => {
                    if count_down(left) {
                        return self.merge();
                    }
                }
            }
        }
        let Some(group) = self.group() else { return };
        let me = self.core.id();
        let others: Vec<NodeId> = self
            .core
            .members()
            .iter()
            .copied()
            .filter(|&m| m != me)
            .collect();
        for m in others {
            self.core
                .send(m, InvitationMsg::AreYouCoordinator { group });
        }
    }

    /// Merge: invite the coordinators found and this group's members to a new group.
    fn merge(&mut self) {
        let group = self.new_group();
        let me = self.core.id();
        let invitees: BTreeSet<NodeId> = self
            .found
            .iter()
            .chain(self.members.iter())
            .copied()
            .filter(|&m| m != me)
            .collect();
        for m in invitees {
            self.core.send(m, InvitationMsg::Invitation { group });
        }
        self.found.clear();
        self.merge_in = None;
        self.core.become_candidate(Reorganizing::Merging {
            group,
            accepted: BTreeSet::from([me]),
            left: self.core.ticks().coordinator_timeout.max(1),
        });
    }

    /// The merge's Accepts are in: Ready to each that accepted, and coordinate the group.
    fn finish_merge(&mut self, group: Group, accepted: BTreeSet<NodeId>) {
        let me = self.core.id();
        for &m in accepted.iter().filter(|&&m| m != me) {
            let members = accepted.clone();
            self.core.send(m, InvitationMsg::Ready { group, members });
        }
        self.coordinate(group, accepted);
    }

    fn on_invitation(&mut self, group: Group) {
        if self.core.is_electing() || self.group() == Some(group) {
            return; // busy reorganizing, or already in it
        }
        let me = self.core.id();
        if self.coordinates() {
            // Forward to the members of the group this node gives up.
            let others: Vec<NodeId> = self
                .members
                .iter()
                .copied()
                .filter(|&m| m != me && m != group.coordinator)
                .collect();
            for m in others {
                self.core.send(m, InvitationMsg::Invitation { group });
            }
        }
        self.core
            .send(group.coordinator, InvitationMsg::Accept { group });
        self.core.become_candidate(Reorganizing::Joining {
            group,
            left: 2 * self.core.ticks().coordinator_timeout.max(1),
        });
    }

    fn on_accept(&mut self, from: NodeId, group: Group) {
        let yes = match self.core.election() {
            Some(Reorganizing::Merging { group: g, .. }) => *g == group,
            _ => false,
        };
        if yes {
            if let Some(Reorganizing::Merging { accepted, .. }) = self.core.election_mut() {
                accepted.insert(from);
            }
        }
        self.core
            .send(from, InvitationMsg::AcceptAnswer { group, yes });
    }

    fn on_ready(&mut self, from: NodeId, group: Group, members: BTreeSet<NodeId>) {
        let joining = matches!(
            self.core.election(),
            Some(Reorganizing::Joining { group: g, .. }) if *g == group && group.coordinator == from
        );
        if joining {
            self.join(group, members);
        }
        self.core.send(
            from,
            InvitationMsg::ReadyAnswer {
                group,
                yes: joining,
            },
        );
    }

    fn on_are_you_there(&mut self, from: NodeId, group: Group) {
        let yes = self.coordinates() && self.group() == Some(group) && self.members.contains(&from);
        self.core
            .send(from, InvitationMsg::AreYouThereAnswer { group, yes });
    }

    fn on_are_you_there_answer(&mut self, from: NodeId, group: Group, yes: bool) {
        let view = self.core.view();
        let asked = view.role == Role::Follower && view.leader == Some(from);
        if !asked || self.group() != Some(group) {
            return; // a late answer about a group this node has left
        }
        if yes {
            // Its coordinator is there: the silence count starts again.
            self.unanswered = 0;
            self.core.become_follower(group.coordinator, group.number);
        } else {
            self.recover();
        }
    }
}

impl Algorithm for Invitation {
    type Msg = InvitationMsg;

    fn new(id: NodeId, members: Vec<NodeId>, ticks: Ticks) -> Self {
        Invitation {
            core: Core::new(id, members, ticks),
            members: BTreeSet::from([id]),
            found: BTreeSet::new(),
            merge_in: None,
            unanswered: 0,
        }
    }

    /// Recovery, then a check at once (so that the others hear of it, and wake, at once).
    fn start(&mut self) {
        self.recover();
        self.check();
    }

    fn epoch(&self) -> u64 {
        self.core.max_epoch()
    }

    fn restore_epoch(&mut self, epoch: u64) {
        self.core.observe_epoch(epoch);
    }

    fn tick(&mut self) {
        // A member asks its coordinator every tick (before its silence is counted).
        if let (Role::Follower, Some(group)) = (self.core.view().role, self.group()) {
            self.core
                .send(group.coordinator, InvitationMsg::AreYouThere { group });
            self.unanswered = self.unanswered.saturating_add(1);
        }
        match self.core.tick() {
            Tick::Nothing => {}
            Tick::Timeout => {
                if self.unanswered >= 2 * self.core.ticks().failure_timeout {
                    self.recover();
                }
            }
            Tick::Announce => self.check(),
            Tick::Electing(Reorganizing::Merging { left, .. }) => {
                if count_down(left) {
                    if let Some(Reorganizing::Merging {
                        group, accepted, ..
                    }) = self.core.election().cloned()
                    {
                        self.finish_merge(group, accepted);
                    }
                }
            }
            Tick::Electing(Reorganizing::Joining { left, .. }) => {
                if count_down(left) {
                    self.recover();
                }
            }
        }
    }

    fn step(&mut self, from: NodeId, msg: InvitationMsg) {
        if !self.core.is_peer(from) {
            return; // not a member of this cluster
        }
        if self.core.is_idle() {
            // Not started yet: a message from a running member starts it (a group of its own).
            self.recover();
        }
        // The group number first: adopt the highest seen, whatever the message.
        self.core.observe_epoch(msg.group().number);
        match msg {
            InvitationMsg::AreYouCoordinator { group } => {
                // Answered with this node's own group (the asker's when it has none).
                let yes = self.coordinates() && !self.core.is_electing();
                let mine = self.group().unwrap_or(group);
                self.core.send(
                    from,
                    InvitationMsg::AreYouCoordinatorAnswer { group: mine, yes },
                );
            }
            InvitationMsg::AreYouCoordinatorAnswer { group, yes } => {
                // A coordinator of another group, a former member of this one included.
                if yes && self.coordinates() && Some(group) != self.group() {
                    self.found.insert(from);
                }
            }
            InvitationMsg::AreYouThere { group } => self.on_are_you_there(from, group),
            InvitationMsg::AreYouThereAnswer { group, yes } => {
                self.on_are_you_there_answer(from, group, yes)
            }
            InvitationMsg::Invitation { group } => self.on_invitation(group),
            InvitationMsg::Accept { group } => self.on_accept(from, group),
            InvitationMsg::AcceptAnswer { group, yes } => {
                let joining = matches!(
                    self.core.election(),
                    Some(Reorganizing::Joining { group: g, .. }) if *g == group
                );
                if joining && !yes {
                    self.recover();
                }
            }
            InvitationMsg::Ready { group, members } => self.on_ready(from, group, members),
            InvitationMsg::ReadyAnswer { group, yes } => {
                if !yes && self.coordinates() && self.group() == Some(group) {
                    self.members.remove(&from);
                }
            }
        }
    }

    fn delivery_failed(&mut self, to: NodeId, msg: InvitationMsg) {
        // A Ready that did not arrive: that node is not in the group.
        if let InvitationMsg::Ready { group, .. } = msg {
            if self.coordinates() && self.group() == Some(group) {
                self.members.remove(&to);
            }
        }
    }

    fn view(&self) -> View {
        self.core.view()
    }

    fn details(&self) -> serde_json::Value {
        serde_json::json!({
            "group": self.group().map(|g| g.number),
            "coordinator": self.group().map(|g| g.coordinator),
            "members": self.members,
        })
    }

    fn take_outbox(&mut self) -> Outbox<InvitationMsg> {
        self.core.take_outbox()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Ticks = Ticks {
        answer_timeout: 2,
        coordinator_timeout: 3,
        failure_timeout: 4,
        announce_interval: 1,
    };

    fn node(id: NodeId) -> Invitation {
        let mut n = Invitation::new(id, vec![1, 2, 3, 4, 5], T);
        n.start();
        n.take_outbox();
        n
    }

    fn g(number: u64, coordinator: NodeId) -> Group {
        Group {
            number,
            coordinator,
        }
    }

    fn set(ids: &[NodeId]) -> BTreeSet<NodeId> {
        ids.iter().copied().collect()
    }

    fn sent(n: &mut Invitation) -> Vec<(NodeId, InvitationMsg)> {
        n.take_outbox().msgs
    }

    #[test]
    fn a_started_node_recovers_into_a_group_of_its_own() {
        let mut n = Invitation::new(3, vec![1, 2, 3, 4, 5], T);
        n.start();
        let out = n.take_outbox();
        assert_eq!(
            out.view_changes,
            vec![View {
                role: Role::Leader,
                term: 1,
                leader: Some(3)
            }]
        );
        assert_eq!(n.group(), Some(g(1, 3)));
        assert_eq!(n.members(), &set(&[3]));
    }

    #[test]
    fn a_coordinator_checks_every_node_outside_its_group() {
        let mut n = node(3);
        n.tick();
        let asked: Vec<NodeId> = sent(&mut n).into_iter().map(|(to, _)| to).collect();
        assert_eq!(asked, vec![1, 2, 4, 5]);
    }

    #[test]
    fn are_you_coordinator_is_answered_yes_only_by_a_coordinator() {
        let mut c = node(2);
        c.step(4, InvitationMsg::AreYouCoordinator { group: g(1, 4) });
        assert_eq!(
            sent(&mut c),
            vec![(
                4,
                InvitationMsg::AreYouCoordinatorAnswer {
                    group: g(1, 2),
                    yes: true
                }
            )]
        );
        // A member says no.
        let mut m = node(1);
        m.step(5, InvitationMsg::Invitation { group: g(7, 5) });
        m.step(
            5,
            InvitationMsg::Ready {
                group: g(7, 5),
                members: set(&[1, 5]),
            },
        );
        sent(&mut m);
        m.step(4, InvitationMsg::AreYouCoordinator { group: g(8, 4) });
        assert!(matches!(
            sent(&mut m)[..],
            [(4, InvitationMsg::AreYouCoordinatorAnswer { yes: false, .. })]
        ));
    }

    #[test]
    fn the_highest_coordinator_found_merges_at_once_by_invitation() {
        let mut n = node(5);
        n.step(
            2,
            InvitationMsg::AreYouCoordinatorAnswer {
                group: g(1, 2),
                yes: true,
            },
        );
        n.step(
            4,
            InvitationMsg::AreYouCoordinatorAnswer {
                group: g(1, 4),
                yes: true,
            },
        );
        n.tick();
        let out = n.take_outbox();
        assert_eq!(
            out.msgs,
            vec![
                (2, InvitationMsg::Invitation { group: g(2, 5) }),
                (4, InvitationMsg::Invitation { group: g(2, 5) }),
            ]
        );
        assert_eq!(n.view().role, Role::Candidate, "merging");
        n.step(2, InvitationMsg::Accept { group: g(2, 5) });
        n.step(4, InvitationMsg::Accept { group: g(2, 5) });
        n.step(1, InvitationMsg::Accept { group: g(2, 5) });
        let answers = sent(&mut n);
        assert!(answers
            .iter()
            .all(|(_, m)| matches!(m, InvitationMsg::AcceptAnswer { yes: true, .. })));
        // After coordinator_timeout ticks: Ready to each that accepted, and it coordinates.
        n.tick();
        n.tick();
        n.tick();
        let ready: Vec<NodeId> = sent(&mut n)
            .into_iter()
            .filter_map(|(to, m)| matches!(m, InvitationMsg::Ready { .. }).then_some(to))
            .collect();
        assert_eq!(ready, vec![1, 2, 4]);
        assert_eq!(n.group(), Some(g(2, 5)));
        assert_eq!(n.members(), &set(&[1, 2, 4, 5]));
        assert_eq!(n.view().role, Role::Leader);
    }

    #[test]
    fn a_lower_coordinator_waits_to_be_invited_then_merges_itself() {
        // Ticks until coordinator `me`, having found coordinator 4, invites it itself (the
        // answer repeated every tick, as every check brings it again).
        let wait = |me: NodeId| {
            let mut n = node(me);
            for t in 0..1000 {
                n.step(
                    4,
                    InvitationMsg::AreYouCoordinatorAnswer {
                        group: g(1, 4),
                        yes: true,
                    },
                );
                n.tick();
                if sent(&mut n)
                    .iter()
                    .any(|(to, m)| *to == 4 && matches!(m, InvitationMsg::Invitation { .. }))
                {
                    return t;
                }
            }
            panic!("node {me} never merged");
        };
        let (one_below, two_below) = (wait(3), wait(2));
        assert!(one_below >= 1, "node 3 waits for the higher coordinator");
        // Garcia-Molina: a wait in proportion to the difference of priorities, so that the
        // coordinators below the highest do not all merge at once (and collide).
        assert!(
            two_below > one_below,
            "node 2 (two below 4) waits longer than node 3 (one below): {two_below} vs \
             {one_below} ticks"
        );
    }

    /// Check asks every other node, its own group's members too: a member that since formed a
    /// group of its own (its coordinator's list is stale) is a coordinator to merge with.
    #[test]
    fn check_asks_every_node_and_merges_a_former_member_that_coordinates() {
        // Node 5 coordinates all five (its list: 3 has since formed a group of its own).
        let mut n = node(5);
        n.coordinate(g(7, 5), BTreeSet::from([1, 2, 3, 4, 5]));
        n.check();
        let asked: BTreeSet<NodeId> = sent(&mut n)
            .into_iter()
            .filter(|(_, m)| matches!(m, InvitationMsg::AreYouCoordinator { .. }))
            .map(|(to, _)| to)
            .collect();
        assert_eq!(asked, BTreeSet::from([1, 2, 3, 4]), "before: nobody");
        n.step(
            3,
            InvitationMsg::AreYouCoordinatorAnswer {
                group: g(8, 3),
                yes: true,
            },
        );
        n.check();
        assert!(
            sent(&mut n)
                .iter()
                .any(|(to, m)| *to == 3 && matches!(m, InvitationMsg::Invitation { .. })),
            "the former member that coordinates is merged (before: ignored, in the list)"
        );
    }

    #[test]
    fn an_invited_coordinator_forwards_to_its_members_and_accepts() {
        // Node 3 coordinates {1, 3} in group 4 (3, 4).
        let mut n = node(3);
        n.step(
            1,
            InvitationMsg::AreYouCoordinatorAnswer {
                group: g(1, 1),
                yes: true,
            },
        );
        n.tick();
        sent(&mut n);
        let group = match n.core.election() {
            Some(Reorganizing::Merging { group, .. }) => *group,
            e => panic!("{e:?}"),
        };
        n.step(1, InvitationMsg::Accept { group });
        for _ in 0..3 {
            n.tick();
        }
        sent(&mut n);
        assert_eq!(n.members(), &set(&[1, 3]));
        // Node 5 invites it.
        n.step(5, InvitationMsg::Invitation { group: g(9, 5) });
        assert_eq!(
            sent(&mut n),
            vec![
                (1, InvitationMsg::Invitation { group: g(9, 5) }),
                (5, InvitationMsg::Accept { group: g(9, 5) }),
            ]
        );
        assert_eq!(n.view().role, Role::Candidate);
        // Ready makes it a member.
        n.step(
            5,
            InvitationMsg::Ready {
                group: g(9, 5),
                members: set(&[1, 3, 5]),
            },
        );
        assert_eq!(
            sent(&mut n),
            vec![(
                5,
                InvitationMsg::ReadyAnswer {
                    group: g(9, 5),
                    yes: true
                }
            )]
        );
        assert_eq!(
            n.view(),
            View {
                role: Role::Follower,
                term: 9,
                leader: Some(5)
            }
        );
        assert_eq!(n.members(), &set(&[1, 3, 5]));
    }

    #[test]
    fn an_invitation_without_ready_ends_in_recovery() {
        let mut n = node(2);
        n.step(5, InvitationMsg::Invitation { group: g(6, 5) });
        sent(&mut n);
        for _ in 0..5 {
            n.tick();
        }
        assert_eq!(
            n.view().role,
            Role::Candidate,
            "twice coordinator_timeout ticks"
        );
        n.tick();
        assert_eq!(n.view().role, Role::Leader, "a group of its own again");
        assert_eq!(n.group(), Some(g(7, 2)), "with a new number");
    }

    #[test]
    fn a_refused_accept_ends_in_recovery() {
        let mut n = node(2);
        n.step(5, InvitationMsg::Invitation { group: g(6, 5) });
        n.step(
            5,
            InvitationMsg::AcceptAnswer {
                group: g(6, 5),
                yes: false,
            },
        );
        assert_eq!(n.group(), Some(g(7, 2)));
    }

    #[test]
    fn an_accept_for_another_group_is_refused() {
        let mut n = node(5);
        n.step(2, InvitationMsg::Accept { group: g(3, 5) });
        assert_eq!(
            sent(&mut n),
            vec![(
                2,
                InvitationMsg::AcceptAnswer {
                    group: g(3, 5),
                    yes: false
                }
            )]
        );
    }

    #[test]
    fn a_ready_for_a_group_not_joined_is_answered_no() {
        let mut n = node(2);
        n.step(
            5,
            InvitationMsg::Ready {
                group: g(3, 5),
                members: set(&[2, 5]),
            },
        );
        assert_eq!(
            sent(&mut n),
            vec![(
                5,
                InvitationMsg::ReadyAnswer {
                    group: g(3, 5),
                    yes: false
                }
            )]
        );
        assert_eq!(n.view().role, Role::Leader, "still its own group");
    }

    /// A member asks its coordinator every tick; yes keeps it, no or silence makes it recover.
    #[test]
    fn a_member_asks_its_coordinator_and_recovers_without_it() {
        let mut n = node(2);
        n.step(5, InvitationMsg::Invitation { group: g(6, 5) });
        n.step(
            5,
            InvitationMsg::Ready {
                group: g(6, 5),
                members: set(&[2, 5]),
            },
        );
        sent(&mut n);
        n.tick();
        assert_eq!(
            sent(&mut n),
            vec![(5, InvitationMsg::AreYouThere { group: g(6, 5) })]
        );
        for _ in 0..10 {
            n.step(
                5,
                InvitationMsg::AreYouThereAnswer {
                    group: g(6, 5),
                    yes: true,
                },
            );
            n.tick();
        }
        assert_eq!(n.view().leader, Some(5), "its coordinator answers");
        n.step(
            5,
            InvitationMsg::AreYouThereAnswer {
                group: g(6, 5),
                yes: false,
            },
        );
        assert_eq!(n.group(), Some(g(7, 2)), "no: recovery");
        // Silence for twice failure_timeout ticks: recovery too.
        let mut m = node(1);
        m.step(5, InvitationMsg::Invitation { group: g(6, 5) });
        m.step(
            5,
            InvitationMsg::Ready {
                group: g(6, 5),
                members: set(&[1, 5]),
            },
        );
        for _ in 0..7 {
            m.tick();
        }
        assert_eq!(m.view().role, Role::Follower, "still waiting");
        m.tick();
        assert_eq!(m.view().role, Role::Leader);
    }

    #[test]
    fn a_coordinator_answers_are_you_there_for_its_members_only() {
        let mut n = node(5);
        n.step(2, InvitationMsg::AreYouThere { group: g(1, 5) });
        assert_eq!(
            sent(&mut n),
            vec![(
                2,
                InvitationMsg::AreYouThereAnswer {
                    group: g(1, 5),
                    yes: false
                }
            )]
        );
    }

    #[test]
    fn a_failed_or_refused_ready_leaves_that_node_out_of_the_group() {
        let mut n = node(5);
        n.step(
            1,
            InvitationMsg::AreYouCoordinatorAnswer {
                group: g(1, 1),
                yes: true,
            },
        );
        n.step(
            2,
            InvitationMsg::AreYouCoordinatorAnswer {
                group: g(1, 2),
                yes: true,
            },
        );
        n.tick();
        n.step(1, InvitationMsg::Accept { group: g(2, 5) });
        n.step(2, InvitationMsg::Accept { group: g(2, 5) });
        for _ in 0..3 {
            n.tick();
        }
        assert_eq!(n.members(), &set(&[1, 2, 5]));
        n.delivery_failed(
            1,
            InvitationMsg::Ready {
                group: g(2, 5),
                members: set(&[1, 2, 5]),
            },
        );
        n.step(
            2,
            InvitationMsg::ReadyAnswer {
                group: g(2, 5),
                yes: false,
            },
        );
        assert_eq!(n.members(), &set(&[5]));
    }

    #[test]
    fn details_name_the_group_and_its_members() {
        let n = node(4);
        assert_eq!(
            n.details(),
            serde_json::json!({"group": 1, "coordinator": 4, "members": [4]})
        );
    }

    #[test]
    fn strangers_are_ignored() {
        let mut n = node(3);
        n.step(9, InvitationMsg::Invitation { group: g(5, 9) });
        assert!(sent(&mut n).is_empty());
        assert_eq!(n.group(), Some(g(1, 3)));
    }
}
