//! Ring election (LeLann 1977 / Tanenbaum's list form) that skips dead successors, with
//! Chang–Roberts-style dropping of concurrent elections.
//!
//! * The logical ring is ordered by id; the successor of the highest id is the lowest. Every
//!   node knows the whole ring.
//! * A node calls an election at `start`, when its coordinator has been silent for
//!   `failure_timeout` ticks, and when its own election does not complete within
//!   [`Ticks::ring_election_deadline`]: it sends `ELECTION {initiator: self, ids: [self]}` to its
//!   successor. Each receiver appends its id and forwards it to its own successor. Whenever the
//!   transport reports `delivery_failed` for a forwarded ELECTION, the node sends the same
//!   message to the next node after the one that failed (skipping dead successors); when every
//!   other node has failed it becomes coordinator alone.
//! * When the message comes back to a node whose id is already in the list, the election is
//!   complete: the highest id in the list is the coordinator, with epoch *max epoch seen + 1*
//!   (the ELECTION carries the highest epoch of the nodes it passed). That node sends
//!   `COORDINATOR {leader, epoch, initiator: self}` once around the ring: each node adopts it and
//!   forwards it (skipping dead successors); it stops when it would reach the node that started
//!   the circulation, i.e. n − 1 hops.
//!
//! # Concurrent elections (duplicate dropping)
//!
//! A node remembers the initiator of the election it last forwarded (or started) while that
//! election is under way (it is a candidate). An ELECTION from a *lower* initiator that reaches
//! it then is dropped, as in Chang–Roberts; a higher one is forwarded and replaces it. A node
//! that is a candidate does not start an election of its own. So when several nodes initiate at
//! once, every message but the one of the highest initiator is dropped on its way, and exactly
//! one election completes. An ELECTION stamped with an epoch lower than the coordinator epoch the
//! receiver already holds was started before that coordinator was elected and is dropped too
//! (this stops a slow, lower election from overtaking a finished one and re-running it).
//!
//! # When the initiator dies mid-circulation
//!
//! The node before the dead initiator gets `delivery_failed` and skips it, so the message reaches
//! the first live node after the initiator, which finds its own id already in the list: it
//! completes the election itself (the list has passed every live node once) and starts the
//! COORDINATOR circulation, which stops before that node again. So every ELECTION ends, by
//! completion or by being dropped, after at most two passes of the ring. If a message is lost
//! outright (its holder crashed after acknowledging it), every candidate that forwarded it
//! gives up after the election deadline and starts a new election.
//!
//! # Announcements, failure detection and healing
//!
//! The coordinator sends `ANNOUNCE {leader, epoch}` directly to every other node every
//! `announce_interval` ticks. A follower that hears nothing from its coordinator (ANNOUNCE or
//! COORDINATOR) for `failure_timeout` ticks starts a ring election. A node that hears an
//! announcement of a coordinator other than its own reacts only if that claim is newer (rank
//! `(epoch, leader)` above the one it follows; for a candidate, an epoch newer than the last
//! one it knew):
//!
//! * from a higher id: it simply follows it. This is the case of a just-elected coordinator
//!   whose COORDINATOR is still circulating, so announcements cannot make a healthy cluster
//!   churn;
//! * from a lower id: it starts a ring election (a candidate only when its own election
//!   carries an older epoch than the announcement, i.e. it is likely being dropped as stale),
//!   which the higher node then wins with a newer epoch.
//!
//! Older or weaker claims are ignored (for example the last announcements of a coordinator
//! that has just been replaced). A COORDINATOR naming a lower id than the receiver (which was
//! therefore not in that election) is not adopted either: the receiver ends that circulation
//! and calls an election. No quorum: every side of a partition elects its own coordinator.

use serde::{Deserialize, Serialize};

use super::core::{count_down, Algorithm, Core, MsgKind, Outbox, Tick, Ticks};
use crate::role::{NodeId, Role, View};

/// Ring messages.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum RingMsg {
    /// Travels around the ring collecting the ids of the live nodes it passes; `epoch` is the
    /// highest epoch known to those nodes.
    Election {
        initiator: NodeId,
        ids: Vec<NodeId>,
        epoch: u64,
    },
    /// The result of an election, circulated once around the ring by `initiator` (the node
    /// that completed the election).
    Coordinator {
        leader: NodeId,
        epoch: u64,
        initiator: NodeId,
    },
    /// Periodic heartbeat of the coordinator, sent directly to every other node.
    Announce { leader: NodeId, epoch: u64 },
}

impl MsgKind for RingMsg {
    fn epoch(&self) -> u64 {
        match *self {
            RingMsg::Election { epoch, .. }
            | RingMsg::Coordinator { epoch, .. }
            | RingMsg::Announce { epoch, .. } => epoch,
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            RingMsg::Election { .. } => "election",
            RingMsg::Coordinator { .. } => "coordinator",
            RingMsg::Announce { .. } => "announce",
        }
    }
}

/// A ring candidate's election state (the shared core's `Electing` phase): it forwarded (or
/// started) the election of `initiator`, stamped `epoch` when it left this node; ticks left
/// before giving up on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct RingElection {
    initiator: NodeId,
    epoch: u64,
    left: u32,
}

/// Ring-election state machine of one node: the shared legacy core (members in ring order,
/// epochs, view, phase, outbox; see [`super::core`]) with the ring election state.
#[derive(Debug)]
pub struct Ring {
    /// Its members, ascending, are the ring order.
    core: Core<RingMsg, RingElection>,
    /// [`Ticks::ring_election_deadline`] for this ring's size.
    deadline: u32,
}

impl Ring {
    /// The node after `n` on the ring (wrapping from the highest id to the lowest).
    fn successor_of(&self, n: NodeId) -> NodeId {
        let ring = self.core.members();
        match ring.iter().find(|&&m| m > n) {
            Some(&m) => m,
            None => ring[0],
        }
    }

    /// Whether a coordinator claim `(epoch, leader)` ranks above what this node currently holds.
    fn claim_is_newer(&self, epoch: u64, leader: NodeId) -> bool {
        let view = self.core.view();
        match view.role {
            Role::Candidate => epoch > view.term,
            Role::Leader | Role::Follower => (epoch, Some(leader)) > (view.term, view.leader),
        }
    }

    fn start_election(&mut self) {
        let id = self.core.id();
        if self.core.members().len() == 1 {
            self.core
                .become_leader(self.core.max_epoch().saturating_add(1));
            return;
        }
        let epoch = self.core.max_epoch();
        self.become_candidate(id, epoch);
        let next = self.successor_of(id);
        self.core.send(
            next,
            RingMsg::Election {
                initiator: id,
                ids: vec![id],
                epoch,
            },
        );
    }

    /// The only place a node becomes a candidate: it has started or forwarded the election of
    /// `initiator`, stamped `epoch`. The reported epoch stays the last coordinator epoch known.
    fn become_candidate(&mut self, initiator: NodeId, epoch: u64) {
        self.core.become_candidate(RingElection {
            initiator,
            epoch,
            left: self.deadline,
        });
    }

    /// Adopts the result `(leader, epoch)`: as coordinator if it names this node, else as a
    /// follower of `leader`.
    fn adopt(&mut self, leader: NodeId, epoch: u64) {
        if leader == self.core.id() {
            self.core.become_leader(epoch);
        } else {
            self.core.become_follower(leader, epoch);
        }
    }

    fn on_election(&mut self, initiator: NodeId, mut ids: Vec<NodeId>, epoch: u64) {
        if epoch < self.core.view().term {
            // Started before the coordinator this node knows was elected.
            return;
        }
        self.core.observe_epoch(epoch);
        let id = self.core.id();
        if ids.contains(&id) {
            // Back at a node that has already appended itself: the message has passed every
            // live node. Normally this is the initiator; if the initiator died or became
            // unreachable, the first live node after it completes the election instead.
            self.complete(&ids, epoch);
            return;
        }
        if ids.len() >= self.core.members().len() {
            return; // malformed: more entries than the ring has other members
        }
        if matches!(self.core.election(), Some(e) if e.initiator > initiator) {
            // Chang–Roberts: an election of a higher initiator is under way here.
            return;
        }
        ids.push(id);
        let epoch = epoch.max(self.core.max_epoch());
        self.become_candidate(initiator, epoch);
        let next = self.successor_of(id);
        self.core.send(
            next,
            RingMsg::Election {
                initiator,
                ids,
                epoch,
            },
        );
    }

    fn complete(&mut self, ids: &[NodeId], epoch: u64) {
        let id = self.core.id();
        let winner = ids.iter().copied().max().unwrap_or(id).max(id);
        let epoch = epoch.max(self.core.max_epoch()).saturating_add(1);
        self.adopt(winner, epoch);
        let next = self.successor_of(id);
        if next != id {
            self.core.send(
                next,
                RingMsg::Coordinator {
                    leader: winner,
                    epoch,
                    initiator: id,
                },
            );
        }
    }

    fn on_coordinator(&mut self, leader: NodeId, epoch: u64, initiator: NodeId) {
        let view = self.core.view();
        let id = self.core.id();
        let same =
            view.role != Role::Candidate && view.leader == Some(leader) && view.term == epoch;
        if !same {
            if !self.claim_is_newer(epoch, leader) {
                return; // stale result: its circulation ends here
            }
            if leader < id {
                // An election this node was not part of chose a lower id: end that
                // circulation and run an election this node would win.
                self.core.observe_epoch(epoch);
                if !self.core.is_electing() {
                    self.start_election();
                }
                return;
            }
        }
        self.adopt(leader, epoch);
        let next = self.successor_of(id);
        if next != initiator && next != id {
            self.core.send(
                next,
                RingMsg::Coordinator {
                    leader,
                    epoch,
                    initiator,
                },
            );
        }
    }

    fn on_announce(&mut self, leader: NodeId, epoch: u64) {
        let view = self.core.view();
        let id = self.core.id();
        if view.role == Role::Follower && view.leader == Some(leader) {
            // Our coordinator's heartbeat; an older epoch is a reordered message.
            if epoch >= view.term {
                self.core.become_follower(leader, epoch);
            }
            return;
        }
        if leader == id || !self.claim_is_newer(epoch, leader) {
            return;
        }
        self.core.observe_epoch(epoch);
        if leader > id {
            self.core.become_follower(leader, epoch);
            return;
        }
        let own_election_is_current = matches!(self.core.election(), Some(e) if e.epoch >= epoch);
        if !own_election_is_current {
            self.start_election();
        }
    }

    /// A forwarded ELECTION was not delivered to `to`: send it on to the node after `to`, or
    /// become coordinator alone when every other node has failed.
    fn election_failed(&mut self, to: NodeId, initiator: NodeId, ids: Vec<NodeId>, epoch: u64) {
        let id = self.core.id();
        // Only for the message this node sent last and whose election is still under way.
        let current = matches!(
            self.core.election(),
            Some(e) if e.initiator == initiator && e.epoch == epoch
        );
        if !current || ids.last() != Some(&id) {
            return;
        }
        let next = self.successor_of(to);
        if next == id {
            // Every other node has failed: coordinator alone.
            let epoch = epoch.max(self.core.max_epoch()).saturating_add(1);
            self.core.become_leader(epoch);
        } else {
            self.core.send(
                next,
                RingMsg::Election {
                    initiator,
                    ids,
                    epoch,
                },
            );
        }
    }

    /// A circulated COORDINATOR was not delivered to `to`: send it on to the node after `to`
    /// unless the circulation ends there.
    fn coordinator_failed(&mut self, to: NodeId, leader: NodeId, epoch: u64, initiator: NodeId) {
        let view = self.core.view();
        if view.role == Role::Candidate || view.leader != Some(leader) || view.term != epoch {
            return; // this node has moved on; let the circulation end
        }
        let next = self.successor_of(to);
        if next != initiator && next != self.core.id() {
            self.core.send(
                next,
                RingMsg::Coordinator {
                    leader,
                    epoch,
                    initiator,
                },
            );
        }
    }
}

impl Algorithm for Ring {
    type Msg = RingMsg;

    fn new(id: NodeId, members: Vec<NodeId>, ticks: Ticks) -> Self {
        let core = Core::new(id, members, ticks);
        let deadline = ticks.ring_election_deadline(core.members().len());
        Ring { core, deadline }
    }

    fn start(&mut self) {
        self.start_election();
    }

    fn epoch(&self) -> u64 {
        self.core.max_epoch()
    }

    fn restore_epoch(&mut self, epoch: u64) {
        self.core.observe_epoch(epoch);
    }

    fn tick(&mut self) {
        match self.core.tick() {
            Tick::Nothing => {}
            Tick::Timeout => self.start_election(),
            Tick::Electing(election) => {
                if count_down(&mut election.left) {
                    self.start_election();
                }
            }
            Tick::Announce => {
                let announce = RingMsg::Announce {
                    leader: self.core.id(),
                    epoch: self.core.view().term,
                };
                self.core.send_to_others(announce);
            }
        }
    }

    /// Each handler starts with its epoch check: an ELECTION stamped below the current
    /// coordinator epoch is dropped; a COORDINATOR or ANNOUNCE must rank above the claim this
    /// node holds (or be that same claim).
    fn step(&mut self, from: NodeId, msg: RingMsg) {
        if !self.core.is_peer(from) {
            return; // not a member of this ring
        }
        match msg {
            RingMsg::Election {
                initiator,
                ids,
                epoch,
            } => self.on_election(initiator, ids, epoch),
            RingMsg::Coordinator {
                leader,
                epoch,
                initiator,
            } => self.on_coordinator(leader, epoch, initiator),
            RingMsg::Announce { leader, epoch } => {
                if leader == from {
                    self.on_announce(leader, epoch);
                }
            }
        }
    }

    fn delivery_failed(&mut self, to: NodeId, msg: RingMsg) {
        match msg {
            RingMsg::Election {
                initiator,
                ids,
                epoch,
            } => self.election_failed(to, initiator, ids, epoch),
            RingMsg::Coordinator {
                leader,
                epoch,
                initiator,
            } => self.coordinator_failed(to, leader, epoch, initiator),
            RingMsg::Announce { .. } => {}
        }
    }

    fn view(&self) -> View {
        self.core.view()
    }

    fn take_outbox(&mut self) -> Outbox<RingMsg> {
        self.core.take_outbox()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Ticks = Ticks {
        answer_timeout: 3,
        coordinator_timeout: 2,
        failure_timeout: 4,
        announce_interval: 2,
    };

    fn node(id: NodeId) -> Ring {
        Ring::new(id, vec![1, 2, 3, 4, 5], T)
    }

    fn election(initiator: NodeId, ids: &[NodeId], epoch: u64) -> RingMsg {
        RingMsg::Election {
            initiator,
            ids: ids.to_vec(),
            epoch,
        }
    }

    fn coord(leader: NodeId, epoch: u64, initiator: NodeId) -> RingMsg {
        RingMsg::Coordinator {
            leader,
            epoch,
            initiator,
        }
    }

    fn follower(leader: NodeId, epoch: u64) -> View {
        View {
            role: Role::Follower,
            term: epoch,
            leader: Some(leader),
        }
    }

    #[test]
    fn start_sends_to_successor_and_wraps() {
        let mut n = node(2);
        n.start();
        let out = n.take_outbox();
        assert_eq!(out.msgs, vec![(3, election(2, &[2], 0))]);
        assert_eq!(out.view_changes[0].role, Role::Candidate);
        let mut n = node(5);
        n.start();
        assert_eq!(n.take_outbox().msgs, vec![(1, election(5, &[5], 0))]);
    }

    #[test]
    fn forward_appends_and_carries_highest_epoch() {
        let mut n = node(3);
        n.step(
            5,
            RingMsg::Announce {
                leader: 5,
                epoch: 4,
            },
        );
        n.take_outbox();
        n.step(2, election(1, &[1, 2], 4));
        let out = n.take_outbox();
        assert_eq!(out.msgs, vec![(4, election(1, &[1, 2, 3], 4))]);
        assert_eq!(
            n.view(),
            View {
                role: Role::Candidate,
                term: 4,
                leader: None
            }
        );
    }

    #[test]
    fn initiator_completes_and_circulates_coordinator() {
        let mut n = node(2);
        n.start();
        n.take_outbox();
        n.step(1, election(2, &[2, 3, 4, 5, 1], 6));
        let out = n.take_outbox();
        assert_eq!(out.msgs, vec![(3, coord(5, 7, 2))]);
        assert_eq!(n.view(), follower(5, 7));
        // Circulation: 3 adopts and forwards; 1 adopts and stops before 2.
        let mut three = node(3);
        three.step(2, coord(5, 7, 2));
        assert_eq!(three.take_outbox().msgs, vec![(4, coord(5, 7, 2))]);
        assert_eq!(three.view(), follower(5, 7));
        let mut five = node(5);
        five.step(4, coord(5, 7, 2));
        assert_eq!(five.take_outbox().msgs, vec![(1, coord(5, 7, 2))]);
        assert_eq!(five.view().role, Role::Leader);
        let mut one = node(1);
        one.step(5, coord(5, 7, 2));
        assert!(one.take_outbox().msgs.is_empty());
        assert_eq!(one.view(), follower(5, 7));
    }

    #[test]
    fn highest_initiator_becomes_leader_on_completion() {
        let mut n = node(5);
        n.start();
        n.take_outbox();
        n.step(4, election(5, &[5, 1, 2, 3, 4], 0));
        let out = n.take_outbox();
        assert_eq!(out.msgs, vec![(1, coord(5, 1, 5))]);
        assert_eq!(
            n.view(),
            View {
                role: Role::Leader,
                term: 1,
                leader: Some(5)
            }
        );
    }

    #[test]
    fn chang_roberts_drops_lower_initiator_while_higher_under_way() {
        let mut n = node(3);
        n.step(2, election(4, &[4, 5, 1, 2], 0));
        n.take_outbox();
        n.step(2, election(1, &[1, 2], 0));
        assert!(n.take_outbox().msgs.is_empty(), "lower initiator dropped");
        n.step(2, election(5, &[5, 1, 2], 0));
        assert_eq!(
            n.take_outbox().msgs,
            vec![(4, election(5, &[5, 1, 2, 3], 0))]
        );
        // A candidate of its own election drops lower ones too, and never starts a second one.
        let mut four = node(4);
        four.start();
        four.take_outbox();
        four.step(3, election(2, &[2, 3], 0));
        assert!(four.take_outbox().msgs.is_empty());
    }

    #[test]
    fn non_initiator_completes_when_initiator_died() {
        // Initiator 1 died after sending; 5's forward to 1 failed and was skipped to 2.
        let mut two = node(2);
        two.step(1, election(1, &[1], 0));
        two.take_outbox();
        two.step(5, election(1, &[1, 2, 3, 4, 5], 0));
        let out = two.take_outbox();
        assert_eq!(out.msgs, vec![(3, coord(5, 1, 2))]);
        // The circulation stops before 2; skipping the dead 1 does not loop.
        let mut five = node(5);
        five.step(4, coord(5, 1, 2));
        assert_eq!(five.take_outbox().msgs, vec![(1, coord(5, 1, 2))]);
        five.delivery_failed(1, coord(5, 1, 2));
        assert!(
            five.take_outbox().msgs.is_empty(),
            "next after 1 is 2 = circulation start"
        );
    }

    #[test]
    fn skips_one_and_two_dead_successors() {
        let mut n = node(2);
        n.start();
        n.take_outbox();
        n.delivery_failed(3, election(2, &[2], 0));
        assert_eq!(n.take_outbox().msgs, vec![(4, election(2, &[2], 0))]);
        n.delivery_failed(4, election(2, &[2], 0));
        assert_eq!(n.take_outbox().msgs, vec![(5, election(2, &[2], 0))]);
        // A forwarder skips the same way, wrapping around the ring.
        let mut five = node(5);
        five.step(4, election(3, &[3, 4], 0));
        five.take_outbox();
        five.delivery_failed(1, election(3, &[3, 4, 5], 0));
        assert_eq!(
            five.take_outbox().msgs,
            vec![(2, election(3, &[3, 4, 5], 0))]
        );
        five.delivery_failed(2, election(3, &[3, 4, 5], 0));
        assert_eq!(
            five.take_outbox().msgs,
            vec![(3, election(3, &[3, 4, 5], 0))]
        );
    }

    #[test]
    fn all_others_failing_makes_coordinator_alone() {
        let mut n = node(3);
        n.start();
        n.take_outbox();
        for to in [4, 5, 1] {
            n.delivery_failed(to, election(3, &[3], 0));
            assert_eq!(n.view().role, Role::Candidate);
            n.take_outbox();
        }
        n.delivery_failed(2, election(3, &[3], 0));
        assert!(n.take_outbox().msgs.is_empty());
        assert_eq!(
            n.view(),
            View {
                role: Role::Leader,
                term: 1,
                leader: Some(3)
            }
        );
    }

    #[test]
    fn stale_delivery_failure_is_ignored() {
        let mut n = node(3);
        n.start();
        n.take_outbox();
        n.step(2, coord(5, 1, 2));
        n.take_outbox();
        n.delivery_failed(4, election(3, &[3], 0));
        assert!(n.take_outbox().msgs.is_empty());
        assert_eq!(n.view(), follower(5, 1));
    }

    #[test]
    fn stale_election_is_dropped() {
        let mut n = node(3);
        n.step(2, coord(5, 4, 2));
        n.take_outbox();
        n.step(2, election(2, &[2], 3));
        assert!(n.take_outbox().msgs.is_empty());
        assert_eq!(n.view(), follower(5, 4));
        // Stamped with the current epoch: a real election (the coordinator may be dead).
        n.step(2, election(2, &[2], 4));
        assert_eq!(n.take_outbox().msgs, vec![(4, election(2, &[2, 3], 4))]);
    }

    #[test]
    fn follower_times_out_leader_announces() {
        let mut n = node(2);
        n.step(1, coord(5, 1, 1));
        n.take_outbox();
        for _ in 0..3 {
            n.tick();
        }
        n.step(
            5,
            RingMsg::Announce {
                leader: 5,
                epoch: 1,
            },
        );
        for _ in 0..3 {
            n.tick();
        }
        assert!(n.take_outbox().msgs.is_empty());
        n.tick();
        assert_eq!(n.take_outbox().msgs, vec![(3, election(2, &[2], 1))]);

        let mut five = node(5);
        five.step(4, coord(5, 1, 1));
        five.take_outbox();
        five.tick();
        assert!(five.take_outbox().msgs.is_empty());
        five.tick();
        let out = five.take_outbox();
        assert_eq!(out.msgs.len(), 4);
        assert!(out.msgs.iter().all(|(_, m)| *m
            == RingMsg::Announce {
                leader: 5,
                epoch: 1
            }));
    }

    #[test]
    fn candidate_follows_newer_announcement_of_higher_id() {
        // The COORDINATOR is still circulating; the new leader's ANNOUNCE arrives first.
        let mut n = node(2);
        n.step(1, election(1, &[1], 0));
        n.take_outbox();
        n.step(
            5,
            RingMsg::Announce {
                leader: 5,
                epoch: 1,
            },
        );
        assert!(n.take_outbox().msgs.is_empty());
        assert_eq!(n.view(), follower(5, 1));
        // The circulation arriving afterwards is adopted (no change) and forwarded.
        n.step(1, coord(5, 1, 1));
        let out = n.take_outbox();
        assert_eq!(out.msgs, vec![(3, coord(5, 1, 1))]);
        assert!(out.view_changes.is_empty());
    }

    #[test]
    fn newer_announcement_of_lower_id_starts_election() {
        let mut n = node(4);
        n.step(3, coord(5, 1, 3));
        n.take_outbox();
        n.step(
            2,
            RingMsg::Announce {
                leader: 2,
                epoch: 3,
            },
        );
        assert_eq!(n.take_outbox().msgs, vec![(5, election(4, &[4], 3))]);
        // Further announcements of 2 do not restart it.
        n.step(
            2,
            RingMsg::Announce {
                leader: 2,
                epoch: 3,
            },
        );
        assert!(n.take_outbox().msgs.is_empty());
    }

    #[test]
    fn older_or_weaker_announcements_are_ignored() {
        let mut n = node(3);
        n.step(2, coord(5, 4, 2));
        n.take_outbox();
        n.step(
            4,
            RingMsg::Announce {
                leader: 4,
                epoch: 3,
            },
        );
        n.step(
            2,
            RingMsg::Announce {
                leader: 2,
                epoch: 4,
            },
        );
        n.step(
            5,
            RingMsg::Announce {
                leader: 5,
                epoch: 2,
            },
        );
        // An ANNOUNCE whose sender is not the announced leader.
        n.step(
            4,
            RingMsg::Announce {
                leader: 5,
                epoch: 9,
            },
        );
        let out = n.take_outbox();
        assert!(
            out.msgs.is_empty() && out.view_changes.is_empty(),
            "{out:?}"
        );
        assert_eq!(n.view(), follower(5, 4));
        // A newer claim of a lower id, by contrast, starts an election.
        n.step(
            1,
            RingMsg::Announce {
                leader: 1,
                epoch: 9,
            },
        );
        assert_eq!(n.take_outbox().msgs, vec![(4, election(3, &[3], 9))]);
    }

    #[test]
    fn restarted_highest_reinitiates_with_learned_epoch() {
        let mut five = node(5);
        five.start();
        assert_eq!(five.take_outbox().msgs, vec![(1, election(5, &[5], 0))]);
        // Its election is dropped by the others (stale); 4's announcement teaches the epoch.
        five.step(
            4,
            RingMsg::Announce {
                leader: 4,
                epoch: 6,
            },
        );
        assert_eq!(five.take_outbox().msgs, vec![(1, election(5, &[5], 6))]);
        assert_eq!(five.view().role, Role::Candidate);
    }

    #[test]
    fn coordinator_naming_lower_id_makes_higher_node_elect() {
        let mut n = node(4);
        n.step(2, coord(3, 2, 1));
        let out = n.take_outbox();
        assert_eq!(out.msgs, vec![(5, election(4, &[4], 2))]);
        assert_eq!(n.view().role, Role::Candidate);
    }

    #[test]
    fn stale_coordinator_ends_circulation() {
        let mut n = node(3);
        n.step(2, coord(5, 4, 2));
        n.take_outbox();
        n.step(2, coord(4, 3, 1));
        let out = n.take_outbox();
        assert!(out.msgs.is_empty() && out.view_changes.is_empty());
    }

    #[test]
    fn candidate_gives_up_after_deadline() {
        let mut n = node(2);
        n.start();
        n.take_outbox();
        let deadline = T.ring_election_deadline(5);
        assert_eq!(deadline, 10);
        for _ in 0..deadline - 1 {
            n.tick();
        }
        assert!(n.take_outbox().msgs.is_empty());
        n.tick();
        assert_eq!(n.take_outbox().msgs, vec![(3, election(2, &[2], 0))]);
    }

    #[test]
    fn single_node_ring() {
        let mut n = Ring::new(9, vec![9], T);
        n.start();
        assert!(n.take_outbox().msgs.is_empty());
        assert_eq!(n.view().role, Role::Leader);
        for _ in 0..10 {
            n.tick();
        }
        assert!(n.take_outbox().msgs.is_empty());
    }

    #[test]
    fn kinds() {
        assert_eq!(election(1, &[1], 0).kind(), "election");
        assert_eq!(coord(1, 1, 1).kind(), "coordinator");
        assert_eq!(
            RingMsg::Announce {
                leader: 1,
                epoch: 1
            }
            .kind(),
            "announce"
        );
    }
}
