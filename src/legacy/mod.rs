//! Legacy leader-election algorithms: the Bully algorithm (Garcia-Molina 1982) and a ring
//! election (LeLann / Tanenbaum list form with Chang–Roberts-style duplicate dropping).
//!
//! Both are I/O-free state machines behind the [`Algorithm`] trait: the driver feeds them
//! `start`, `tick`, `step` (a received message), `delivered` / `delivery_failed` (transport
//! outcome of a message they sent) and drains [`Outbox`] after every input. Inside the
//! algorithms time is counted in ticks only; there are no clocks, no I/O and no randomness.
//!
//! **Neither algorithm has any quorum check.** Under a network partition every side elects its
//! own coordinator (for example `1,2 | 3,4,5` gives coordinators 2 and 5). This split brain is
//! the documented weakness of the legacy algorithms; they converge again on the highest id once
//! the partition heals.
//!
//! # Roles and epochs
//!
//! * The coordinator reports [`Role::Leader`]; a node running an election (bully: waiting for
//!   ANSWERs or for a COORDINATOR; ring: having forwarded an ELECTION that has not completed)
//!   reports [`Role::Candidate`] with `leader: None`; every other node reports
//!   [`Role::Follower`] with `leader` = its coordinator. A node that has been created but not
//!   yet started reports `Follower` with `leader: None` and is passive (no timers run) until it
//!   is started or a message reaches it.
//! * `epoch` is the coordinator epoch. Every message carries an epoch and a node adopts the
//!   highest epoch it sees; a new coordinator takes *max epoch seen + 1*. Epochs are not
//!   persisted: a restarted node starts from 0 and learns the current epoch from the messages
//!   of the others (the algorithms are built so that this always happens, see their docs).
//! * Claims of a coordinator are compared by *rank* `(epoch, leader id)`, lexicographically.
//!   A follower ignores a claim that ranks below the coordinator it follows (a stale or
//!   weaker claim; the stronger coordinator's periodic announcements will reach the weaker
//!   one and make it step down). A candidate holds `(last coordinator epoch, none)`: in the
//!   bully algorithm it therefore accepts its old coordinator again (that coordinator was
//!   alive after all); in the ring it only accepts a claim with a newer epoch than the last
//!   one it knew, so late announcements of a dead coordinator cannot interrupt an election.
//! * Neither algorithm ever follows a coordinator with a lower id than its own: hearing a
//!   newer claim of a lower id makes the node call an election instead (the bully rule, used
//!   by both). That is what makes both converge on the highest live id after a partition
//!   heals or after the highest id restarts.
//!
//! # Timeouts (ticks)
//!
//! One tick is one `timing.heartbeat_ms`; [`Ticks::from_timing`] converts the node's timing
//! settings (all values rounded up, each at least 1):
//!
//! | field | formula | with heartbeat 30, follower lease 150 ms |
//! |---|---|---|
//! | `announce_interval` | `1` (one heartbeat) | 1 |
//! | `failure_timeout` | `max(ceil(follower_lease / heartbeat), announce_interval + 1)` | 5 |
//! | `answer_timeout` | `ceil(follower_lease / 2 / heartbeat)` | 3 |
//! | `coordinator_timeout` | `failure_timeout` | 5 |
//! | ring election deadline | `coordinator_timeout × n` ([`Ticks::ring_election_deadline`]) | 25 for n = 5 |
//!
//! * A follower that hears nothing from its coordinator for `failure_timeout` ticks calls an
//!   election; the coordinator re-announces itself every `announce_interval` ticks, so with
//!   the defaults five announcements in a row must be lost (or delayed) before a follower gives
//!   up on a live coordinator.
//! * Bully: an initiator waits `answer_timeout` ticks for an ANSWER (this should exceed a
//!   round trip; if it does not, a lower node may briefly claim the role and is then overruled
//!   by the higher one), then `coordinator_timeout` ticks for the COORDINATOR after an ANSWER.
//!   A coordinator that gets an ELECTION only answers it and lets its next periodic
//!   announcement end the sender's wait, so `announce_interval` should stay below
//!   `coordinator_timeout` (it does with `from_timing`: 1 < `failure_timeout`).
//! * `failure_timeout` must exceed `announce_interval` plus the worst delivery latency, or
//!   followers of a healthy coordinator call elections.
//! * Ring: a node that has forwarded an ELECTION (a candidate) gives up on it after
//!   `coordinator_timeout × n` ticks (n = ring size: one `coordinator_timeout` per hop is a
//!   generous budget for delivery plus skipping dead successors) and starts a new election.
//!   This is what ends an election whose message was lost (for example the node holding it
//!   crashed after acknowledging it).
//!
//! # Messages per election (ids 1..=n, everybody up, nobody coordinator yet)
//!
//! * Bully, only the lowest id initiates (worst case): node 1 sends ELECTION to the n−1
//!   higher nodes, each node i = 2..n−1 sends ELECTION to its n−i higher nodes
//!   ((n−1)(n−2)/2 in all), so n(n−1)/2 ELECTIONs, as many ANSWERs, and n−1 COORDINATORs:
//!   **n² − 1** messages, O(n²). This is exact when every message takes the same time. With
//!   varying latency it costs more: a node that already follows n and only then receives
//!   node 1's late ELECTION answers it and, as the algorithm says, holds its own election
//!   (the test table shows about 1.2× for n = 5 and 1.7× for n = 15).
//! * Bully, the highest id initiates (best case): **n − 1** COORDINATORs.
//! * Ring, one initiator: n ELECTION hops and n − 1 COORDINATOR hops (the circulation stops
//!   before it would reach the node that started it): **2n − 1**; textbooks say 2n because
//!   they count the final hop back to the initiator.
//! * Ring, everybody initiates at once: the ring is ordered by ascending id, so every
//!   ELECTION except the highest id's is dropped after one hop (Chang–Roberts best case):
//!   n + (n − 1) ELECTION hops and n − 1 COORDINATOR hops, **3n − 2** (plain LeLann without
//!   dropping would need n² ELECTION hops).
//!
//! Periodic announcements (bully COORDINATOR re-announcements, ring ANNOUNCE) are not
//! part of these figures. `cargo test -- --nocapture message_counts` prints the measured table.

use crate::role::{NodeId, Role};

pub mod bully;
pub mod driver;
pub mod ring;
pub mod sim;

pub use bully::{Bully, BullyMsg};
pub use ring::{Ring, RingMsg};

/// Timeouts of the legacy algorithms, in ticks (the driver converts; one tick = timing.heartbeat_ms).
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

/// What the algorithm reports about itself; the driver records a change of it as an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Status {
    pub role: Role,
    pub epoch: u64,
    pub leader: Option<NodeId>,
}

/// Outputs drained by the driver after every input.
#[derive(Debug)]
pub struct Outbox<M> {
    pub msgs: Vec<(NodeId, M)>,
    pub status_changes: Vec<Status>,
}

// Written out by hand so that `Outbox<M>: Default` does not require `M: Default`.
impl<M> Default for Outbox<M> {
    fn default() -> Self {
        Outbox {
            msgs: Vec::new(),
            status_changes: Vec::new(),
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
    /// The driver could not deliver `msg` to `to` (no acknowledgement within the transport deadline, or refused).
    /// Every message the algorithm sends yields at most one of `delivered` / `delivery_failed`.
    fn delivery_failed(&mut self, to: NodeId, msg: Self::Msg);
    fn delivered(&mut self, to: NodeId, msg: &Self::Msg) {
        let _ = (to, msg);
    }
    fn status(&self) -> Status;
    fn take_outbox(&mut self) -> Outbox<Self::Msg>;
}

/// Message type name used for counters: e.g. "election", "answer", "coordinator".
pub trait MsgKind {
    fn kind(&self) -> &'static str;
}

/// Sorted, deduplicated member list that contains `id` (defensive normalisation of `new`'s input).
pub(crate) fn normalize_members(id: NodeId, mut members: Vec<NodeId>) -> Vec<NodeId> {
    members.push(id);
    members.sort_unstable();
    members.dedup();
    members
}

/// Records `next` as the node's status and queues it for the driver when any of
/// (role, epoch, leader) changed. Used only by the `become_*` functions.
pub(crate) fn set_status<M>(current: &mut Status, outbox: &mut Outbox<M>, next: Status) {
    if *current != next {
        *current = next;
        outbox.status_changes.push(next);
    }
}

/// The status of a node that has been created but not started.
pub(crate) const INITIAL_STATUS: Status = Status {
    role: Role::Follower,
    epoch: 0,
    leader: None,
};

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

    #[test]
    fn outbox_default_needs_no_default_msg() {
        #[derive(Debug)]
        struct NoDefault;
        let o: Outbox<NoDefault> = Outbox::default();
        assert!(o.msgs.is_empty() && o.status_changes.is_empty());
    }
}
