//! When a quorum leader without a quorum goes quiet ([`Quiet`]), and which leader a follower
//! reports ([`follower_leader`]): plain logic on `CLOCK_BOOTTIME` and `CLOCK_MONOTONIC`
//! nanoseconds.

use crate::role::NodeId;

/// When a leader without a quorum goes quiet (`docs/design/openraft.md`, the bridge trap, openraft #2080).
///
/// A leader whose probes have failed for `after_ns` (two follower leases, 2F) stops its
/// heartbeats and its probes for `quiet_ns`, so that a voter it can still reach (a bridge) lets
/// its follower lease run out and can vote for a candidate of the majority side. `quiet_ns`
/// covers that voter's lease (`election_timeout_max`), one more election timeout for the
/// majority's candidate to retry, and the claim lease itself: `quiet = 2 × election_timeout_max
/// + lease`.
///
/// Going quiet is for liveness only. The claim needs no help from it: it ends `lease` after the
/// last acknowledged probe whatever happens here. So the leader waits well past its lease before
/// it gives up on its followers, and it wants [`QUIET_AFTER_PROBES`] failed probes in a row
/// too: a host that stalls for a few beats (CPU steal, a descheduled idle vCPU, a debug build
/// on 2 busy cores) fails only the probes that were in flight, loses the claim for the stall,
/// then claims again with its next acknowledged probe, without an election.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Quiet {
    /// Start of the current leadership in openraft (state Leader), to time the first lease.
    leader_since_ns: Option<(u64, u64)>,
    last_ack_ns: Option<u64>,
    /// Probes failed since the last acknowledged one.
    failed: u32,
    quiet_until_ns: Option<u64>,
}

/// How many probes in a row must fail (besides `after_ns` without an acknowledgement) before a
/// leader goes quiet. While probes time out, the driver sends one per RPC deadline (F/4 at
/// the bundled timings, 30/150 and 10/50), about eight within 2F, so a leader that really lost
/// its quorum still goes quiet at 2F; only with a beat longer than 2F/5 does quiet come later
/// (after five beats).
pub const QUIET_AFTER_PROBES: u32 = 5;

impl Quiet {
    /// openraft has this node as leader of `term` at `now_ns`.
    pub fn leading(&mut self, term: u64, now_ns: u64) {
        match self.leader_since_ns {
            Some((t, _)) if t == term => {}
            _ => {
                self.leader_since_ns = Some((term, now_ns));
                self.last_ack_ns = None;
                self.failed = 0;
                self.quiet_until_ns = None;
            }
        }
    }

    /// The node is not leader: forget everything.
    pub fn not_leading(&mut self) {
        *self = Quiet::default();
    }

    pub fn acked(&mut self, t0_ns: u64) {
        self.last_ack_ns = Some(t0_ns);
        self.failed = 0;
        self.quiet_until_ns = None;
    }

    /// May the node probe (and send heartbeats) now?
    pub fn may_probe(&self, now_ns: u64) -> bool {
        self.quiet_until_ns.is_none_or(|q| now_ns >= q)
    }

    /// After a failed probe: should the node go quiet now (no acknowledgement for `after_ns`,
    /// and [`QUIET_AFTER_PROBES`] failed probes in a row)? Sets the quiet period if so.
    pub fn failed(&mut self, now_ns: u64, after_ns: u64, quiet_ns: u64) -> bool {
        self.failed += 1;
        let since = self
            .last_ack_ns
            .or(self.leader_since_ns.map(|(_, s)| s))
            .unwrap_or(now_ns);
        if now_ns >= since + after_ns && self.failed >= QUIET_AFTER_PROBES {
            self.failed = 0;
            self.quiet_until_ns = Some(now_ns + quiet_ns);
            true
        } else {
            false
        }
    }
}

/// The leader a follower reports: the one openraft names, if it was heard within the lease
/// a follower grants it (`election_timeout_max`).
pub fn follower_leader(
    named: Option<NodeId>,
    contact: Option<(NodeId, u64)>,
    now_ns: u64,
    window_ns: u64,
) -> Option<NodeId> {
    match (named, contact) {
        (Some(l), Some((c, at))) if l == c && now_ns < at + window_ns => Some(l),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quiet_after_two_follower_leases_without_acks() {
        const AFTER: u64 = 240;
        let mut q = Quiet::default();
        q.leading(5, 0);
        for t in [20, 40, 60, 80] {
            assert!(!q.failed(t, AFTER, 1000), "too early");
        }
        assert!(
            !q.failed(100, AFTER, 1000),
            "five failed, but not for long enough"
        );
        assert!(q.failed(240, AFTER, 1000));
        assert!(!q.may_probe(1239));
        assert!(q.may_probe(1240));
        q.acked(1240);
        assert!(q.may_probe(1241));
        for t in [1300, 1400, 1500, 1600] {
            assert!(!q.failed(t, AFTER, 1000), "measured from the last ack");
        }
        assert!(q.failed(1700, AFTER, 1000));
        q.leading(6, 2000);
        for t in [2100, 2150, 2200, 2250] {
            assert!(!q.failed(t, AFTER, 1000), "a new term starts afresh");
        }
    }

    #[test]
    fn a_stall_that_fails_only_the_probes_in_flight_does_not_make_the_leader_quiet() {
        const AFTER: u64 = 240;
        let mut q = Quiet::default();
        q.leading(5, 0);
        q.acked(10);
        // The host stalls from 20 to 400: two probes in flight fail when it resumes.
        assert!(!q.failed(400, AFTER, 1000));
        assert!(!q.failed(401, AFTER, 1000));
        q.acked(402);
        assert!(q.may_probe(403));
    }

    #[test]
    fn follower_reports_a_leader_only_while_fresh() {
        assert_eq!(follower_leader(Some(2), Some((2, 100)), 150, 300), Some(2));
        assert_eq!(follower_leader(Some(2), Some((2, 100)), 400, 300), None);
        assert_eq!(follower_leader(Some(2), Some((3, 100)), 150, 300), None);
        assert_eq!(follower_leader(None, Some((2, 100)), 150, 300), None);
    }
}
