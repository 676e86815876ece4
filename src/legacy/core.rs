//! What bully and ring share: the [`Algorithm`] trait the legacy node feeds, the timeouts in
//! [`Ticks`], the [`Outbox`] of messages and view changes, and `Core`, the state and the
//! transitions both algorithms have alike. An algorithm reports its (role, epoch, leader) as a
//! [`View`] whose `term` is the coordinator epoch, as `docs/design/api-v1.md` says.
//!
//! # The shared core
//!
//! `Core<M, E>` holds what every legacy node has: its id, the sorted member list, the
//! [`Ticks`], the highest epoch seen, its [`View`], its phase and its [`Outbox`] of messages
//! `M`. The phase is `Phase<E>`: `Idle` (created, not started, nothing heard), `Following`,
//! `Leading`, or `Electing(E)`, where `E` is the algorithm's own election state (bully: waiting
//! for ANSWERs or for a COORDINATOR; ring: the election it forwarded).
//!
//! As in raft-rs, where every `become_*` goes through one `reset`, the three transitions
//! `become_follower(leader, epoch)`, `become_leader(epoch)` and `become_candidate(election)` are
//! the only places the phase and the view change, and all three go through one `reset` that sets
//! the phase and records the view (queued for the legacy node only when it changed). What each
//! algorithm sends on a transition (the bully COORDINATOR to all, the ring COORDINATOR
//! circulation) stays in the algorithm.
//!
//! The timers are shared too: `Core::tick` counts a follower's silence and a leader's
//! announcement interval and says what came of it as a `Tick`: a follower's coordinator timed
//! out (call an election), a leader is due to re-announce itself, or the algorithm's own
//! election state is to be counted down (with `count_down`).

use crate::role::{NodeId, Role, View};

/// Timeouts of the legacy algorithms, in ticks (the legacy node converts; one tick = timing.heartbeat_ms).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ticks {
    /// Bully: how long an initiator waits for any ANSWER before it declares itself coordinator.
    pub answer_timeout: u32,
    /// Bully: after an ANSWER, how long to wait for a COORDINATOR before starting again.
    pub coordinator_timeout: u32,
    /// Both: a follower that hears nothing from its coordinator for this long starts an election.
    pub failure_timeout: u32,
    /// Both: the coordinator re-announces itself every this many ticks (heartbeat + convergence after heal).
    pub announce_interval: u32,
}

impl Ticks {
    /// Converts the node's timing settings to ticks of one heartbeat each (see the module docs):
    /// `announce_interval = 1`, `failure_timeout = max(ceil(lease / heartbeat), 2)`,
    /// `answer_timeout = ceil(lease / 2 / heartbeat)`, `coordinator_timeout = failure_timeout`;
    /// every value is at least 1 and `failure_timeout > announce_interval`.
    /// A heartbeat of 0 ms is treated as 1 ms.
    pub fn from_timing(heartbeat_ms: u64, follower_lease_ms: u64) -> Ticks {
        let hb = heartbeat_ms.max(1);
        let ticks = |ms: u64| -> u32 { u32::try_from(ms.div_ceil(hb)).unwrap_or(u32::MAX).max(1) };
        let announce_interval = 1;
        let failure_timeout = ticks(follower_lease_ms).max(announce_interval + 1);
        Ticks {
            answer_timeout: ticks(follower_lease_ms / 2),
            coordinator_timeout: failure_timeout,
            failure_timeout,
            announce_interval,
        }
    }

    /// Ring: how long a node that forwarded an ELECTION waits for it to complete before it
    /// starts a new election: `coordinator_timeout × ring_size` (at least 1).
    pub fn ring_election_deadline(&self, ring_size: usize) -> u32 {
        let n = u32::try_from(ring_size.max(1)).unwrap_or(u32::MAX);
        self.coordinator_timeout.max(1).saturating_mul(n)
    }
}

/// Outputs drained by the legacy node after every input.
#[derive(Debug)]
pub struct Outbox<M> {
    pub msgs: Vec<(NodeId, M)>,
    pub view_changes: Vec<View>,
}

// Written out by hand so that `Outbox<M>: Default` does not require `M: Default`.
impl<M> Default for Outbox<M> {
    fn default() -> Self {
        Outbox {
            msgs: Vec::new(),
            view_changes: Vec::new(),
        }
    }
}

pub trait Algorithm {
    type Msg: Clone
        + std::fmt::Debug
        + PartialEq
        + serde::Serialize
        + serde::de::DeserializeOwned
        + Send
        + 'static;
    /// `members` sorted ascending, includes `id`. Does not send anything yet.
    fn new(id: NodeId, members: Vec<NodeId>, ticks: Ticks) -> Self
    where
        Self: Sized;
    /// Called once when the node starts or restarts: both algorithms call an election here.
    fn start(&mut self);
    fn tick(&mut self);
    /// A message that arrived from `from`. Check the epoch first (style of etcd-io/raft Step).
    fn step(&mut self, from: NodeId, msg: Self::Msg);
    /// The legacy node could not deliver `msg` to `to` (no acknowledgement within the transport deadline, or refused).
    /// Every message the algorithm sends yields at most one of `delivered` / `delivery_failed`.
    fn delivery_failed(&mut self, to: NodeId, msg: Self::Msg);
    fn delivered(&mut self, to: NodeId, msg: &Self::Msg) {
        let _ = (to, msg);
    }
    fn view(&self) -> View;
    /// The highest epoch this node has seen or made (what the node keeps in stable storage,
    /// `epoch_file.rs`).
    fn epoch(&self) -> u64;
    /// A restarted node's stored epoch: it makes only epochs above it.
    fn restore_epoch(&mut self, epoch: u64);
    /// What the algorithm adds to `/v1/status` beyond its view (the invitation algorithm: its
    /// group and members); nothing by default.
    fn details(&self) -> serde_json::Value {
        serde_json::Value::Null
    }
    fn take_outbox(&mut self) -> Outbox<Self::Msg>;
}

/// Message type name used for counters: e.g. "election", "answer", "coordinator".
pub trait MsgKind {
    fn kind(&self) -> &'static str;
    /// The epoch (group number) the message names.
    fn epoch(&self) -> u64;
    /// Whether the message is part of the steady state's periodic traffic, whatever the tick
    /// that sends it (the invitation algorithm's checks and their answers); the simulator
    /// counts them with the heartbeats.
    fn periodic(&self) -> bool {
        false
    }
}

/// The highest epoch a message may name: a node adopts the highest epoch it sees and makes the
/// next one above it, so a message naming `u64::MAX` (one signed by a faulty member, say) would
/// leave no number to make, and every node would saturate on it. Refused at the door
/// (`node.rs`, `receive`), with room for 2^63 elections after it.
pub const MAX_EPOCH: u64 = u64::MAX / 2;

/// Sorted, deduplicated member list that contains `id` (defensive normalisation of `new`'s input).
fn normalize_members(id: NodeId, mut members: Vec<NodeId>) -> Vec<NodeId> {
    members.push(id);
    members.sort_unstable();
    members.dedup();
    members
}

/// Where a node stands; `E` is the algorithm's own election state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase<E> {
    /// Created, not started, nothing heard yet: no timer runs.
    Idle,
    /// Following `view.leader`; ticks since it was last heard from.
    Following { silent: u32 },
    /// Candidate, in the algorithm's election state `E` (which has its own timer).
    Electing(E),
    /// Coordinator; ticks left until the next re-announcement.
    Leading { next_announce: u32 },
}

/// What a tick of [`Core::tick`] means for the algorithm.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Tick<'a, E> {
    /// Nothing to do: the node is idle, or a follower's or leader's counter moved on.
    Nothing,
    /// A follower has not heard from its coordinator for `failure_timeout` ticks: the
    /// algorithm calls an election (which leaves the `Following` phase).
    Timeout,
    /// A leader's `announce_interval` is up (the countdown has already started again): the
    /// algorithm re-announces itself.
    Announce,
    /// A candidate: the algorithm counts its election state down (see [`count_down`]).
    Electing(&'a mut E),
}

/// One tick of an election timer holding `left` ticks: `true` when it runs out now (`left` ≤ 1,
/// left as it is), otherwise `false` after counting it down by one.
pub(crate) fn count_down(left: &mut u32) -> bool {
    if *left <= 1 {
        true
    } else {
        *left -= 1;
        false
    }
}

/// The state and transitions bully and ring share (see the module docs): members, epochs,
/// the view, the phase (with the algorithm's election state `E`) and the outbox of messages `M`.
#[derive(Debug)]
pub(crate) struct Core<M, E> {
    id: NodeId,
    /// All members, ascending, including `id` (the ring order, for the ring).
    members: Vec<NodeId>,
    ticks: Ticks,
    /// Highest epoch seen in any message or held by this node.
    max_epoch: u64,
    /// What the node reports; `term` is the coordinator epoch.
    view: View,
    phase: Phase<E>,
    outbox: Outbox<M>,
}

impl<M, E> Core<M, E> {
    /// A passive node: `Idle`, [`View::INITIAL`], epoch 0; `members` is normalised (sorted,
    /// deduplicated, with `id`).
    pub(crate) fn new(id: NodeId, members: Vec<NodeId>, ticks: Ticks) -> Self {
        Core {
            id,
            members: normalize_members(id, members),
            ticks,
            max_epoch: 0,
            view: View::INITIAL,
            phase: Phase::Idle,
            outbox: Outbox::default(),
        }
    }

    pub(crate) fn id(&self) -> NodeId {
        self.id
    }

    /// All members, ascending, including this node.
    pub(crate) fn members(&self) -> &[NodeId] {
        &self.members
    }

    pub(crate) fn ticks(&self) -> Ticks {
        self.ticks
    }

    /// Highest epoch seen in any message or held by this node.
    pub(crate) fn max_epoch(&self) -> u64 {
        self.max_epoch
    }

    /// Adopts `epoch` if it is higher than any seen so far.
    pub(crate) fn observe_epoch(&mut self, epoch: u64) {
        self.max_epoch = self.max_epoch.max(epoch);
    }

    /// The node's current (role, epoch, leader).
    pub(crate) fn view(&self) -> View {
        self.view
    }

    /// The algorithm's election state, when the node is a candidate.
    pub(crate) fn election(&self) -> Option<&E> {
        match &self.phase {
            Phase::Electing(e) => Some(e),
            _ => None,
        }
    }

    /// The algorithm's election state, to change it in place.
    pub(crate) fn election_mut(&mut self) -> Option<&mut E> {
        match &mut self.phase {
            Phase::Electing(e) => Some(e),
            _ => None,
        }
    }

    pub(crate) fn is_electing(&self) -> bool {
        self.election().is_some()
    }

    /// Created and not started: nothing heard, no timer running.
    pub(crate) fn is_idle(&self) -> bool {
        matches!(self.phase, Phase::Idle)
    }

    /// Whether a message from `from` is to be handled: another member of this cluster.
    pub(crate) fn is_peer(&self, from: NodeId) -> bool {
        from != self.id && self.members.binary_search(&from).is_ok()
    }

    pub(crate) fn send(&mut self, to: NodeId, msg: M) {
        self.outbox.msgs.push((to, msg));
    }

    /// Sends `msg` to every other member, in ascending id order.
    pub(crate) fn send_to_others(&mut self, msg: M)
    where
        M: Clone,
    {
        for &m in &self.members {
            if m != self.id {
                self.outbox.msgs.push((m, msg.clone()));
            }
        }
    }

    pub(crate) fn take_outbox(&mut self) -> Outbox<M> {
        std::mem::take(&mut self.outbox)
    }

    /// The one step under every `become_*`: enter `phase` and report `view`.
    fn reset(&mut self, phase: Phase<E>, view: View) {
        self.phase = phase;
        self.set_view(view);
    }

    /// Records `next` as the node's view and queues it for the legacy node when any of
    /// (role, epoch, leader) changed.
    fn set_view(&mut self, next: View) {
        if self.view != next {
            self.view = next;
            self.outbox.view_changes.push(next);
        }
    }

    /// The only place a node becomes (or refreshes being) a follower of `leader` in `epoch`;
    /// its silence count starts again from 0.
    pub(crate) fn become_follower(&mut self, leader: NodeId, epoch: u64) {
        self.observe_epoch(epoch);
        let view = View {
            role: Role::Follower,
            term: epoch,
            leader: Some(leader),
        };
        self.reset(Phase::Following { silent: 0 }, view);
    }

    /// The only place a node becomes (or stays, with a new epoch) coordinator of `epoch`; its
    /// next announcement is due in `announce_interval` ticks. Sends nothing: announcing the
    /// new role is the algorithm's part.
    pub(crate) fn become_leader(&mut self, epoch: u64) {
        self.observe_epoch(epoch);
        let view = View {
            role: Role::Leader,
            term: epoch,
            leader: Some(self.id),
        };
        let next_announce = self.ticks.announce_interval.max(1);
        self.reset(Phase::Leading { next_announce }, view);
    }

    /// The only place a node becomes (or stays) a candidate, in the algorithm's election state
    /// `election`. The reported epoch stays the last coordinator epoch this node knew.
    pub(crate) fn become_candidate(&mut self, election: E) {
        let view = View {
            role: Role::Candidate,
            term: self.view.term,
            leader: None,
        };
        self.reset(Phase::Electing(election), view);
    }

    /// Advances the shared timers by one tick and says what the algorithm has to do (see
    /// [`Tick`]). A follower's silence count that reaches `failure_timeout` is left as it is:
    /// the election the algorithm then calls leaves the `Following` phase.
    pub(crate) fn tick(&mut self) -> Tick<'_, E> {
        match &mut self.phase {
            Phase::Idle => Tick::Nothing,
            Phase::Following { silent } => {
                let next = silent.saturating_add(1);
                if next >= self.ticks.failure_timeout.max(1) {
                    Tick::Timeout
                } else {
                    *silent = next;
                    Tick::Nothing
                }
            }
            Phase::Electing(election) => Tick::Electing(election),
            Phase::Leading { next_announce } => {
                if *next_announce <= 1 {
                    *next_announce = self.ticks.announce_interval.max(1);
                    Tick::Announce
                } else {
                    *next_announce -= 1;
                    Tick::Nothing
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_timing_defaults() {
        let t = Ticks::from_timing(50, 300);
        assert_eq!(
            t,
            Ticks {
                answer_timeout: 3,
                coordinator_timeout: 6,
                failure_timeout: 6,
                announce_interval: 1
            }
        );
        assert_eq!(t.ring_election_deadline(5), 30);
    }

    #[test]
    fn from_timing_rounds_up_and_clamps() {
        let t = Ticks::from_timing(100, 250);
        assert_eq!((t.answer_timeout, t.failure_timeout), (2, 3));
        let t = Ticks::from_timing(30, 150);
        assert_eq!((t.answer_timeout, t.failure_timeout), (3, 5));
        // Timeouts shorter than a heartbeat still give a usable configuration.
        let t = Ticks::from_timing(1000, 10);
        assert_eq!(t.answer_timeout, 1);
        assert_eq!(t.announce_interval, 1);
        assert!(t.failure_timeout > t.announce_interval);
        assert_eq!(t.coordinator_timeout, t.failure_timeout);
        // A zero heartbeat does not divide by zero.
        let t = Ticks::from_timing(0, 6);
        assert_eq!((t.answer_timeout, t.failure_timeout), (3, 6));
        // Huge values saturate.
        let t = Ticks::from_timing(1, u64::MAX);
        assert_eq!(t.failure_timeout, u32::MAX);
        assert_eq!(t.ring_election_deadline(9), u32::MAX);
    }

    const T: Ticks = Ticks {
        answer_timeout: 3,
        coordinator_timeout: 5,
        failure_timeout: 3,
        announce_interval: 2,
    };

    /// A core with `u8` messages and a bare countdown as its election state.
    fn core(id: NodeId) -> Core<u8, u32> {
        Core::new(id, vec![5, 1, 3, 3], T)
    }

    #[test]
    fn new_core_is_passive_with_normalised_members() {
        let mut c = core(2);
        assert_eq!(c.members(), &[1, 2, 3, 5]);
        assert_eq!((c.id(), c.max_epoch(), c.view()), (2, 0, View::INITIAL));
        for _ in 0..10 {
            assert_eq!(c.tick(), Tick::Nothing);
        }
        assert!(!c.is_electing());
        assert!(c.is_peer(1) && c.is_peer(5));
        assert!(!c.is_peer(2) && !c.is_peer(4));
        let out = c.take_outbox();
        assert!(out.msgs.is_empty() && out.view_changes.is_empty());
    }

    #[test]
    fn become_star_sets_view_and_queues_only_changes() {
        let mut c = core(2);
        c.become_follower(5, 4);
        c.become_follower(5, 4);
        assert_eq!(c.max_epoch(), 4);
        c.become_candidate(7);
        assert_eq!(c.election(), Some(&7));
        c.become_candidate(8);
        c.become_leader(6);
        assert_eq!(c.max_epoch(), 6);
        // An older epoch than the highest seen is reported, but not adopted as the highest.
        c.become_follower(5, 3);
        assert_eq!(c.max_epoch(), 6);
        let changes = c.take_outbox().view_changes;
        let view = |role, term, leader| View { role, term, leader };
        assert_eq!(
            changes,
            vec![
                view(Role::Follower, 4, Some(5)),
                // A candidate keeps reporting the last coordinator epoch it knew.
                view(Role::Candidate, 4, None),
                view(Role::Leader, 6, Some(2)),
                view(Role::Follower, 3, Some(5)),
            ]
        );
    }

    #[test]
    fn follower_times_out_after_failure_timeout_unless_refreshed() {
        let mut c = core(2);
        c.become_follower(5, 1);
        assert_eq!(c.tick(), Tick::Nothing);
        assert_eq!(c.tick(), Tick::Nothing);
        c.become_follower(5, 1);
        assert_eq!(c.tick(), Tick::Nothing);
        assert_eq!(c.tick(), Tick::Nothing);
        assert_eq!(c.tick(), Tick::Timeout);
        // Until the algorithm leaves the phase, every further tick is a timeout too.
        assert_eq!(c.tick(), Tick::Timeout);
    }

    #[test]
    fn leader_announces_every_interval() {
        let mut c = core(2);
        c.become_leader(1);
        let ticks: Vec<_> = (0..6).map(|_| c.tick() == Tick::Announce).collect();
        assert_eq!(ticks, [false, true, false, true, false, true]);
    }

    #[test]
    fn electing_hands_the_election_state_to_the_algorithm() {
        let mut c = core(2);
        c.become_candidate(2);
        let mut expired = Vec::new();
        for _ in 0..3 {
            match c.tick() {
                Tick::Electing(left) => expired.push(count_down(left)),
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(expired, [false, true, true]);
        assert_eq!(c.election(), Some(&1));
    }

    #[test]
    fn sends_keep_their_order() {
        let mut c = core(3);
        c.send(1, 10);
        c.send_to_others(20);
        assert_eq!(c.take_outbox().msgs, vec![(1, 10), (1, 20), (5, 20)]);
        assert!(c.take_outbox().msgs.is_empty());
    }

    #[test]
    fn outbox_default_needs_no_default_msg() {
        #[derive(Debug)]
        struct NoDefault;
        let o: Outbox<NoDefault> = Outbox::default();
        assert!(o.msgs.is_empty() && o.view_changes.is_empty());
    }
}
