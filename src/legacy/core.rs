//! What bully and ring share: the [`Algorithm`] trait the driver feeds, the timeouts in
//! [`Ticks`], the [`Outbox`] of messages and view changes, and the helpers of their `become_*`
//! functions. An algorithm reports its (role, epoch, leader) as a [`View`] whose `term` is the
//! coordinator epoch, as `docs/api-v1.md` says.

use crate::role::{NodeId, View};

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

/// Outputs drained by the driver after every input.
#[derive(Debug)]
pub struct Outbox<M> {
    pub msgs: Vec<(NodeId, M)>,
    pub status_changes: Vec<View>,
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
    fn status(&self) -> View;
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

/// Records `next` as the node's view and queues it for the driver when any of
/// (role, epoch, leader) changed. Used only by the `become_*` functions.
pub(crate) fn set_status<M>(current: &mut View, outbox: &mut Outbox<M>, next: View) {
    if *current != next {
        *current = next;
        outbox.status_changes.push(next);
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

    #[test]
    fn outbox_default_needs_no_default_msg() {
        #[derive(Debug)]
        struct NoDefault;
        let o: Outbox<NoDefault> = Outbox::default();
        assert!(o.msgs.is_empty() && o.status_changes.is_empty());
    }
}
