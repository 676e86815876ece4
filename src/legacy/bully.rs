//! The Bully algorithm (H. Garcia-Molina, "Elections in a Distributed Computing System", 1982),
//! in its textbook form, plus the periodic re-announcement that heals partitions.
//!
//! * An election sends ELECTION to every higher id. Any ANSWER makes the initiator stand down
//!   and wait (at most `coordinator_timeout` ticks) for a COORDINATOR, after which it starts
//!   again; no ANSWER within `answer_timeout` ticks makes it coordinator, and it sends
//!   COORDINATOR to all others. The highest id becomes coordinator at once when it calls an
//!   election.
//! * An ELECTION from a lower id is answered with ANSWER, and the receiver starts its own
//!   election unless it is already in one. A coordinator counts as being in one (it has won
//!   it): it only answers, and its next periodic COORDINATOR (within `announce_interval`)
//!   ends the sender's wait. (Calling a new election there would make the highest id
//!   re-announce with a new epoch for every late ELECTION of the round that elected it.) The
//!   exception is an ELECTION carrying a newer epoch than the coordinator's: its sender would
//!   not accept the old epoch, so the coordinator runs its election again and re-announces
//!   itself with a newer one.
//! * Followers monitor the coordinator: no COORDINATOR (the periodic re-announcement counts)
//!   within `failure_timeout` ticks starts an election. `start` calls an election, so a
//!   restarted highest id takes the role back.
//! * Convergence after a partition heals: the coordinator re-announces COORDINATOR to all
//!   every `announce_interval` ticks. A node that hears a COORDINATOR from a lower id calls an
//!   election; a node (coordinator or not) that hears one from a higher id follows it.
//! * Epochs (see the parent module): a COORDINATOR claim is only acted on when its rank
//!   `(epoch, id)` is above the claim the node currently follows, so delayed announcements of
//!   a coordinator that has since stepped down change nothing. A coordinator that hears a
//!   higher id with an *older* epoch (the higher id restarted) does not step down; the higher
//!   id hears the coordinator's newer announcement, calls an election and comes back with a
//!   newer epoch, which everybody then follows.
//! * Delivery notices are not used: as in the paper, failures are detected by timeouts only.
//! * No quorum: every side of a partition elects its own coordinator.

use serde::{Deserialize, Serialize};

use super::core::{count_down, Algorithm, Core, MsgKind, Outbox, Tick, Ticks};
use crate::role::{NodeId, Role, View};

/// Bully messages; every one carries the sender's highest known epoch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum BullyMsg {
    /// "I am holding an election": sent to every higher id.
    Election { epoch: u64 },
    /// "I am alive and will take over": the reply to an ELECTION from a lower id.
    Answer { epoch: u64 },
    /// "I am the coordinator of `epoch`": sent to all others on election and every
    /// `announce_interval` ticks afterwards.
    Coordinator { epoch: u64 },
}

impl BullyMsg {
    pub fn epoch(&self) -> u64 {
        match *self {
            BullyMsg::Election { epoch }
            | BullyMsg::Answer { epoch }
            | BullyMsg::Coordinator { epoch } => epoch,
        }
    }
}

impl MsgKind for BullyMsg {
    fn epoch(&self) -> u64 {
        BullyMsg::epoch(self)
    }

    fn kind(&self) -> &'static str {
        match self {
            BullyMsg::Election { .. } => "election",
            BullyMsg::Answer { .. } => "answer",
            BullyMsg::Coordinator { .. } => "coordinator",
        }
    }
}

/// A bully candidate's election state (the shared core's `Electing` phase).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BullyElection {
    /// Sent ELECTION to the higher ids; ticks left before claiming the role.
    WaitingAnswers { left: u32 },
    /// Got an ANSWER; ticks left before starting again.
    WaitingCoordinator { left: u32 },
}

/// Bully state machine of one node: the shared legacy core (members, epochs, view, phase,
/// outbox; see [`super::core`]) with the bully election state.
#[derive(Debug)]
pub struct Bully {
    core: Core<BullyMsg, BullyElection>,
}

impl Bully {
    fn broadcast_coordinator(&mut self) {
        let epoch = self.core.view().term;
        self.core.send_to_others(BullyMsg::Coordinator { epoch });
    }

    fn is_highest(&self) -> bool {
        self.core.members().last() == Some(&self.core.id())
    }

    /// Whether a COORDINATOR claim `(epoch, from)` ranks above what this node currently holds
    /// (a candidate holds `(last coordinator epoch, None)`, so it accepts that epoch again).
    fn claim_is_newer(&self, epoch: u64, from: NodeId) -> bool {
        let view = self.core.view();
        (epoch, Some(from)) > (view.term, view.leader)
    }

    fn start_election(&mut self) {
        if self.is_highest() {
            self.become_leader();
            return;
        }
        let epoch = self.core.max_epoch();
        let id = self.core.id();
        let higher: Vec<NodeId> = self
            .core
            .members()
            .iter()
            .copied()
            .filter(|&m| m > id)
            .collect();
        for m in higher {
            self.core.send(m, BullyMsg::Election { epoch });
        }
        self.core.become_candidate(BullyElection::WaitingAnswers {
            left: self.core.ticks().answer_timeout.max(1),
        });
    }

    /// The only place a node becomes coordinator: new epoch, COORDINATOR to all others.
    fn become_leader(&mut self) {
        let epoch = self.core.max_epoch().saturating_add(1);
        self.core.become_leader(epoch);
        self.broadcast_coordinator();
    }

    fn on_coordinator(&mut self, from: NodeId, epoch: u64) {
        let view = self.core.view();
        if view.role == Role::Follower && view.leader == Some(from) {
            // Our coordinator: a (re-)announcement. An older epoch is a reordered message.
            if epoch >= view.term {
                self.core.become_follower(from, epoch);
            }
            return;
        }
        if !self.claim_is_newer(epoch, from) {
            // Stale or weaker claim: the stronger coordinator's announcements will reach the
            // sender and make it step down.
            return;
        }
        if from > self.core.id() {
            // Also ends a running election, and makes a coordinator step down.
            self.core.become_follower(from, epoch);
        } else if !self.core.is_electing() {
            // A lower id claims the role: bully it.
            self.start_election();
        }
    }

    fn on_election(&mut self, from: NodeId, epoch: u64) {
        if from >= self.core.id() {
            return; // an ELECTION from a higher id is not part of the algorithm
        }
        let answer = BullyMsg::Answer {
            epoch: self.core.max_epoch(),
        };
        self.core.send(from, answer);
        if self.core.view().role == Role::Leader {
            // A coordinator counts as "already in one" (it has won it): its periodic
            // COORDINATOR ends the sender's wait. Only a sender that knows a newer
            // epoch (which would not accept that announcement) makes it run its
            // election again, to re-announce itself with a newer one.
            if epoch > self.core.view().term {
                self.start_election();
            }
        } else if !self.core.is_electing() {
            self.start_election();
        }
    }
}

impl Algorithm for Bully {
    type Msg = BullyMsg;

    fn new(id: NodeId, members: Vec<NodeId>, ticks: Ticks) -> Self {
        Bully {
            core: Core::new(id, members, ticks),
        }
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
            Tick::Announce => self.broadcast_coordinator(),
            Tick::Electing(BullyElection::WaitingAnswers { left }) => {
                if count_down(left) {
                    self.become_leader();
                }
            }
            Tick::Electing(BullyElection::WaitingCoordinator { left }) => {
                if count_down(left) {
                    self.start_election();
                }
            }
        }
    }

    fn step(&mut self, from: NodeId, msg: BullyMsg) {
        if !self.core.is_peer(from) {
            return; // not a member of this cluster
        }
        // Epoch first: adopt the highest epoch seen, whatever the message.
        self.core.observe_epoch(msg.epoch());
        match msg {
            BullyMsg::Election { epoch } => self.on_election(from, epoch),
            BullyMsg::Answer { .. } => {
                let waiting = matches!(
                    self.core.election(),
                    Some(BullyElection::WaitingAnswers { .. })
                );
                if from > self.core.id() && waiting {
                    self.core
                        .become_candidate(BullyElection::WaitingCoordinator {
                            left: self.core.ticks().coordinator_timeout.max(1),
                        });
                }
            }
            BullyMsg::Coordinator { epoch } => self.on_coordinator(from, epoch),
        }
    }

    fn delivery_failed(&mut self, to: NodeId, msg: BullyMsg) {
        // Textbook bully detects failures by timeouts only.
        let _ = (to, msg);
    }

    fn view(&self) -> View {
        self.core.view()
    }

    fn take_outbox(&mut self) -> Outbox<BullyMsg> {
        self.core.take_outbox()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Ticks = Ticks {
        answer_timeout: 3,
        coordinator_timeout: 5,
        failure_timeout: 4,
        announce_interval: 2,
    };

    fn node(id: NodeId) -> Bully {
        Bully::new(id, vec![1, 2, 3, 4, 5], T)
    }

    fn sent(out: &Outbox<BullyMsg>) -> Vec<(NodeId, BullyMsg)> {
        out.msgs.clone()
    }

    fn coordinator_to_all_but(id: NodeId, epoch: u64) -> Vec<(NodeId, BullyMsg)> {
        (1..=5)
            .filter(|&m| m != id)
            .map(|m| (m, BullyMsg::Coordinator { epoch }))
            .collect()
    }

    #[test]
    fn new_is_passive() {
        let mut n = node(3);
        assert_eq!(n.view(), View::INITIAL);
        for _ in 0..100 {
            n.tick();
        }
        let out = n.take_outbox();
        assert!(out.msgs.is_empty() && out.view_changes.is_empty());
    }

    #[test]
    fn election_goes_to_higher_ids_only() {
        let mut n = node(2);
        n.start();
        let out = n.take_outbox();
        assert_eq!(
            sent(&out),
            vec![
                (3, BullyMsg::Election { epoch: 0 }),
                (4, BullyMsg::Election { epoch: 0 }),
                (5, BullyMsg::Election { epoch: 0 })
            ]
        );
        assert_eq!(
            out.view_changes,
            vec![View {
                role: Role::Candidate,
                term: 0,
                leader: None
            }]
        );
    }

    #[test]
    fn highest_becomes_coordinator_at_once() {
        let mut n = node(5);
        n.start();
        let out = n.take_outbox();
        assert_eq!(sent(&out), coordinator_to_all_but(5, 1));
        assert_eq!(
            out.view_changes,
            vec![View {
                role: Role::Leader,
                term: 1,
                leader: Some(5)
            }]
        );
    }

    #[test]
    fn no_answer_within_timeout_makes_coordinator() {
        let mut n = node(3);
        n.start();
        n.take_outbox();
        n.tick();
        n.tick();
        assert!(n.take_outbox().msgs.is_empty());
        n.tick();
        let out = n.take_outbox();
        assert_eq!(sent(&out), coordinator_to_all_but(3, 1));
        assert_eq!(n.view().role, Role::Leader);
    }

    #[test]
    fn answer_makes_initiator_wait_then_restart() {
        let mut n = node(3);
        n.start();
        n.take_outbox();
        n.step(4, BullyMsg::Answer { epoch: 0 });
        assert_eq!(n.view().role, Role::Candidate);
        for _ in 0..4 {
            n.tick();
        }
        assert!(
            n.take_outbox().msgs.is_empty(),
            "still waiting for COORDINATOR"
        );
        n.tick();
        let out = n.take_outbox();
        assert_eq!(
            sent(&out),
            vec![
                (4, BullyMsg::Election { epoch: 0 }),
                (5, BullyMsg::Election { epoch: 0 })
            ]
        );
        // A COORDINATOR from a higher id ends the wait.
        n.step(5, BullyMsg::Coordinator { epoch: 1 });
        assert_eq!(
            n.view(),
            View {
                role: Role::Follower,
                term: 1,
                leader: Some(5)
            }
        );
    }

    #[test]
    fn election_from_lower_is_answered_and_starts_own_once() {
        let mut n = node(3);
        n.step(1, BullyMsg::Election { epoch: 7 });
        let out = n.take_outbox();
        assert_eq!(
            sent(&out),
            vec![
                (1, BullyMsg::Answer { epoch: 7 }),
                (4, BullyMsg::Election { epoch: 7 }),
                (5, BullyMsg::Election { epoch: 7 })
            ]
        );
        // Already in an election: answer only.
        n.step(2, BullyMsg::Election { epoch: 0 });
        assert_eq!(
            sent(&n.take_outbox()),
            vec![(2, BullyMsg::Answer { epoch: 7 })]
        );
        // An ELECTION from a higher id is not part of the algorithm.
        n.step(4, BullyMsg::Election { epoch: 0 });
        assert!(n.take_outbox().msgs.is_empty());
        // The adopted epoch is used by the new coordinator.
        for _ in 0..3 {
            n.tick();
        }
        assert_eq!(
            n.view(),
            View {
                role: Role::Leader,
                term: 8,
                leader: Some(3)
            }
        );
    }

    #[test]
    fn coordinator_only_answers_election_and_its_announcement_ends_the_wait() {
        let mut five = node(5);
        five.start();
        five.take_outbox();
        five.step(2, BullyMsg::Election { epoch: 1 });
        let out = five.take_outbox();
        assert_eq!(sent(&out), vec![(2, BullyMsg::Answer { epoch: 1 })]);
        assert!(out.view_changes.is_empty());
        // An ELECTION that knows a newer epoch makes it re-announce with a newer one.
        five.step(1, BullyMsg::Election { epoch: 4 });
        let out = five.take_outbox();
        assert_eq!(out.msgs[0], (1, BullyMsg::Answer { epoch: 4 }));
        assert_eq!(out.msgs[1..], coordinator_to_all_but(5, 5)[..]);
        assert_eq!(five.view().term, 5);
        // The asker (which suspected 5) accepts the same epoch again while waiting.
        let mut two = node(2);
        two.step(5, BullyMsg::Coordinator { epoch: 1 });
        for _ in 0..4 {
            two.tick();
        }
        assert_eq!(two.view().role, Role::Candidate);
        two.step(5, BullyMsg::Answer { epoch: 1 });
        two.step(5, BullyMsg::Coordinator { epoch: 1 });
        assert_eq!(
            two.view(),
            View {
                role: Role::Follower,
                term: 1,
                leader: Some(5)
            }
        );
    }

    #[test]
    fn follower_times_out_and_announcements_keep_it() {
        let mut n = node(2);
        n.step(5, BullyMsg::Coordinator { epoch: 3 });
        assert_eq!(n.view().leader, Some(5));
        for _ in 0..10 {
            n.tick();
            n.tick();
            n.tick();
            n.step(5, BullyMsg::Coordinator { epoch: 3 });
        }
        assert!(n.take_outbox().msgs.is_empty());
        for _ in 0..3 {
            n.tick();
        }
        assert!(n.take_outbox().msgs.is_empty());
        n.tick();
        let out = n.take_outbox();
        assert_eq!(out.msgs.len(), 3, "ELECTION to 3, 4, 5: {out:?}");
        assert_eq!(n.view().role, Role::Candidate);
        assert_eq!(n.view().term, 3);
    }

    #[test]
    fn coordinator_reannounces_every_interval() {
        let mut n = node(5);
        n.start();
        n.take_outbox();
        n.tick();
        assert!(n.take_outbox().msgs.is_empty());
        n.tick();
        assert_eq!(sent(&n.take_outbox()), coordinator_to_all_but(5, 1));
        n.tick();
        n.tick();
        assert_eq!(n.take_outbox().msgs.len(), 4);
    }

    #[test]
    fn coordinator_from_lower_id_triggers_election() {
        let mut n = node(4);
        n.step(5, BullyMsg::Coordinator { epoch: 1 });
        n.take_outbox();
        // After a heal: 2 claims a newer epoch.
        n.step(2, BullyMsg::Coordinator { epoch: 2 });
        let out = n.take_outbox();
        assert_eq!(sent(&out), vec![(5, BullyMsg::Election { epoch: 2 })]);
        assert_eq!(n.view().role, Role::Candidate);
    }

    #[test]
    fn coordinator_steps_down_for_higher_id() {
        let mut n = node(2);
        n.start();
        for _ in 0..3 {
            n.tick();
        }
        assert_eq!(n.view().role, Role::Leader);
        n.take_outbox();
        n.step(5, BullyMsg::Coordinator { epoch: 1 });
        assert_eq!(
            n.view(),
            View {
                role: Role::Follower,
                term: 1,
                leader: Some(5)
            }
        );
        // A follower does not announce.
        for _ in 0..3 {
            n.tick();
        }
        assert!(n.take_outbox().msgs.is_empty());
    }

    #[test]
    fn stale_and_weaker_claims_are_ignored() {
        let mut n = node(3);
        n.step(5, BullyMsg::Coordinator { epoch: 4 });
        n.take_outbox();
        // Reordered older announcement of our own coordinator.
        n.step(5, BullyMsg::Coordinator { epoch: 3 });
        // A late announcement of a coordinator that has stepped down (lower rank).
        n.step(4, BullyMsg::Coordinator { epoch: 3 });
        n.step(2, BullyMsg::Coordinator { epoch: 4 });
        let out = n.take_outbox();
        assert!(
            out.msgs.is_empty() && out.view_changes.is_empty(),
            "{out:?}"
        );
        assert_eq!(
            n.view(),
            View {
                role: Role::Follower,
                term: 4,
                leader: Some(5)
            }
        );
    }

    #[test]
    fn restarted_highest_retakes_role_with_newer_epoch() {
        // 4 leads at epoch 3; 5 restarts with no memory of epochs.
        let mut five = node(5);
        five.start();
        assert_eq!(five.view().term, 1);
        five.take_outbox();
        let mut four = node(4);
        four.step(1, BullyMsg::Election { epoch: 2 });
        for _ in 0..3 {
            four.tick();
        }
        assert_eq!(
            four.view(),
            View {
                role: Role::Leader,
                term: 3,
                leader: Some(4)
            }
        );
        four.take_outbox();
        // 4 ignores the older claim of 5 ...
        four.step(5, BullyMsg::Coordinator { epoch: 1 });
        assert_eq!(four.view().role, Role::Leader);
        // ... 5 hears 4's newer announcement from a lower id and calls an election ...
        five.step(4, BullyMsg::Coordinator { epoch: 3 });
        let out = five.take_outbox();
        assert_eq!(sent(&out), coordinator_to_all_but(5, 4));
        // ... which 4 follows.
        four.step(5, BullyMsg::Coordinator { epoch: 4 });
        assert_eq!(
            four.view(),
            View {
                role: Role::Follower,
                term: 4,
                leader: Some(5)
            }
        );
    }

    #[test]
    fn view_is_pushed_only_on_change() {
        let mut n = node(1);
        n.step(5, BullyMsg::Coordinator { epoch: 1 });
        n.step(5, BullyMsg::Coordinator { epoch: 1 });
        n.step(5, BullyMsg::Coordinator { epoch: 1 });
        assert_eq!(n.take_outbox().view_changes.len(), 1);
        n.step(5, BullyMsg::Coordinator { epoch: 2 });
        assert_eq!(n.take_outbox().view_changes.len(), 1);
    }

    #[test]
    fn ignores_non_members_and_self() {
        let mut n = node(1);
        n.step(9, BullyMsg::Coordinator { epoch: 1 });
        n.step(1, BullyMsg::Coordinator { epoch: 1 });
        assert_eq!(n.view(), View::INITIAL);
    }

    #[test]
    fn single_node_cluster() {
        let mut n = Bully::new(7, vec![7], T);
        n.start();
        let out = n.take_outbox();
        assert!(out.msgs.is_empty());
        assert_eq!(
            n.view(),
            View {
                role: Role::Leader,
                term: 1,
                leader: Some(7)
            }
        );
        for _ in 0..10 {
            n.tick();
        }
        assert!(n.take_outbox().msgs.is_empty());
    }

    #[test]
    fn kinds() {
        assert_eq!(BullyMsg::Election { epoch: 0 }.kind(), "election");
        assert_eq!(BullyMsg::Answer { epoch: 0 }.kind(), "answer");
        assert_eq!(BullyMsg::Coordinator { epoch: 0 }.kind(), "coordinator");
    }
}
