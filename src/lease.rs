//! The lease-bound leadership claim, and the promises it makes, as plain logic on
//! `CLOCK_BOOTTIME` (see [`crate::clock`]), without I/O, so that every rule can be unit-tested.
//! Quorum mode and mutex mode claim through it alike: a node claims from the instant it *sent*
//! what a majority (quorum) or the store (mutex) acknowledged, for the claim lease, never
//! longer; every answer given meanwhile is a promise that must hold to its end.
//!
//! # Why the claim is safe (quorum mode; docs/safety.md)
//! The leader records `t0` *before* it sends a probe round (fresh AppendEntries to every voter).
//! A voter that acknowledges received the probe after `t0`, and then refuses any vote request
//! for `election_timeout_max` (its follower lease). Any majority that could elect another
//! leader shares a voter with the acknowledging majority. If that shared voter is a follower,
//! no election can finish before `t0 + election_timeout_max`; if it is the leader itself, it
//! refuses every vote until then too ([`Lease::vote_refused_until`]), and a vote request for a
//! higher term that passes [suspends](Lease::suspend) the claim before openraft sees it; a
//! granted vote [fences](Lease::resume) every lower term for good. The claim runs until
//! `t0 + lease`, with `lease < election_timeout_max`, so it always ends before a successor can
//! exist. Mutex mode's argument is in `mutex/node.rs`.

use crate::clock::{Clock, Reading};
use crate::role::Role;

/// One granted claim: the node leads `term` until `until_ns` (CLOCK_BOOTTIME).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Claim {
    pub term: u64,
    /// Send time of the probe that started this run of claims (the "became leader" stamp).
    pub since_ns: u64,
    /// The claim holds while `now < until_ns`.
    pub until_ns: u64,
    /// The send time of the latest acknowledged probe on both clocks (BOOTTIME, MONOTONIC): the
    /// anchor from which the claim's end is stamped on MONOTONIC ([`Claim::until_mono_ns`]).
    pub anchor: Reading,
}

impl Claim {
    /// How long the claim still runs at `now_ns` (CLOCK_BOOTTIME): the `lease_ms` an answer
    /// promises, and the wait a release owes. Zero once it has ended. The one place the time
    /// left is counted, for quorum and mutex alike.
    pub fn left_ns(&self, now_ns: u64) -> u64 {
        self.until_ns.saturating_sub(now_ns)
    }

    /// The claim's end on CLOCK_MONOTONIC, for the "stopped leading" event: counted forward from
    /// the latest acknowledged probe, never back from now. Across a host suspend MONOTONIC
    /// stands still while BOOTTIME runs on, so counting back from now (`mono_now - (boot_now -
    /// until)`) would stamp the end before the instant the host stopped, while the claim still
    /// ran; counted forward it errs late (the suspend lies inside), the safe side for a
    /// checker. The caller caps it at MONOTONIC now.
    pub fn until_mono_ns(&self) -> u64 {
        self.anchor.mono_ns + self.until_ns.saturating_sub(self.anchor.boot_ns)
    }
}

/// Why a claim ended ([`Lease::end_of`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ClaimEnd {
    /// Not by this node's choice: its renewal failed.
    Lost,
    /// The node resigned the term (a resign, a handover, its removal from the members).
    Resigned,
    /// The node is stopping.
    Stopped,
}

impl ClaimEnd {
    /// The `cause` label of `electd_claims_ended_total` and the key in `/v1/status`.
    pub fn as_str(self) -> &'static str {
        match self {
            ClaimEnd::Lost => "lost",
            ClaimEnd::Resigned => "resigned",
            ClaimEnd::Stopped => "stopped",
        }
    }
}

/// The claim state of one node.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Lease {
    claim: Option<Claim>,
    /// No claim in a term below this: the node granted its vote to a candidate of this term.
    fence: u64,
    /// Vote requests for a higher term being handled right now; no claim while any is.
    suspended: u32,
    suspended_since_ns: u64,
    /// The node is stopping: no claim ever again in this process.
    closed: bool,
    /// A claim this node ended by choice, in which term and how (a resign, a handover or its
    /// removal from the members; a shutdown): set only when that claim was still running at
    /// that instant, so that a claim that had run out before counts as lost ([`Lease::end_of`]).
    chosen_end: Option<(u64, ClaimEnd)>,
    /// Send time (BOOTTIME) of the latest probe whose acknowledgement granted a claim: the
    /// answers given since promise the role until at most `acked_ns + lease`, so this node
    /// refuses every vote until `acked_ns + follower lease` ([`Lease::vote_refused_until`]).
    acked_ns: Option<u64>,
    /// When this process started (BOOTTIME): it may have answered promises before a crash that
    /// it cannot know of (and openraft keeps no lease for a restored vote that is not
    /// committed), so it refuses every vote until a follower lease after its start too.
    started_ns: Option<u64>,
    /// The latest end (BOOTTIME) any claim of this process reached: every answer it gave
    /// promised the role until at most this instant. [`revoke`](Lease::revoke),
    /// [`resign`](Lease::resign) and [`close`](Lease::close) end the claim, not the promises
    /// already answered, so they never move it ([`Lease::promises_left_ns`]).
    promised_ns: u64,
}

impl Lease {
    /// A probe sent at `t0_ns` for `term` was acknowledged by a majority: claim until
    /// `t0_ns + lease_ns`. Returns `false` (and claims nothing) when the term is fenced or a
    /// vote request is being handled.
    pub fn grant(&mut self, term: u64, t0: Reading, lease_ns: u64) -> bool {
        if term < self.fence || self.suspended > 0 || self.closed {
            return false;
        }
        let t0_ns = t0.boot_ns;
        let until_ns = t0_ns + lease_ns;
        self.acked_ns = Some(self.acked_ns.unwrap_or(0).max(t0_ns));
        self.promised_ns = self.promised_ns.max(until_ns);
        self.claim = Some(match self.claim {
            // Still inside the previous claim of the same term: the run goes on.
            Some(c) if c.term == term && c.until_ns > t0_ns => Claim {
                until_ns: c.until_ns.max(until_ns),
                anchor: if until_ns >= c.until_ns { t0 } else { c.anchor },
                ..c
            },
            _ => Claim {
                term,
                since_ns: t0_ns,
                until_ns,
                anchor: t0,
            },
        });
        true
    }

    /// The claim state of a process that starts at `now_ns` (BOOTTIME).
    pub fn starting(now_ns: u64) -> Lease {
        Lease {
            started_ns: Some(now_ns),
            ..Lease::default()
        }
    }

    /// Until when (BOOTTIME) this node refuses every vote request, whatever its role and the
    /// request's term: one follower lease after the send time of its latest acknowledged probe,
    /// as a follower that acknowledged that probe does, and one after its own start. A claim
    /// answered since promises the role until `acked + lease`; a vote granted before `acked +
    /// follower lease` could elect a successor inside that promise (openraft stamps a leader's
    /// own lease only once, when it is elected, and none on a vote it adopted from a higher
    /// vote in an answer). `None` when this node neither claimed nor knows when it started.
    pub fn vote_refused_until(&self, follower_lease_ns: u64) -> Option<u64> {
        self.acked_ns
            .max(self.started_ns)
            .map(|a| a + follower_lease_ns)
    }

    /// Until when a promise this node answered in this process may run, plus a follower lease:
    /// the part of [`Lease::vote_refused_until`] that its own claims make.
    pub fn promised_until(&self, follower_lease_ns: u64) -> Option<u64> {
        self.acked_ns.map(|a| a + follower_lease_ns)
    }

    /// How long the promises this process answered may still run at `now_ns` (BOOTTIME): up to
    /// the latest end any of its claims reached, whether or not the claim was ended since (a
    /// resign, a loss, a stop). What a release owes before anyone else may claim (mutex mode,
    /// `mutex/node.rs`, rule 4). Zero once every promise has run out.
    pub fn promises_left_ns(&self, now_ns: u64) -> u64 {
        self.promised_ns.saturating_sub(now_ns)
    }

    /// This node granted its vote in `term` (a request it did not have to suspend for: its
    /// term was already current): no claim in a lower term from now on.
    pub fn voted(&mut self, term: u64, now_ns: u64) {
        self.fence = self.fence.max(term);
        if let Some(c) = &mut self.claim {
            if c.term < self.fence {
                c.until_ns = c.until_ns.min(now_ns);
            }
        }
    }

    /// The claim in force at `now_ns` for a node that openraft has as leader of `term`.
    pub fn current(&self, term: u64, now_ns: u64) -> Option<Claim> {
        match self.claim {
            Some(c)
                if self.suspended == 0
                    && !self.closed
                    && c.term == term
                    && term >= self.fence
                    && now_ns < c.until_ns =>
            {
                Some(c)
            }
            _ => None,
        }
    }

    /// The last claim granted, valid or not (to stamp the "stopped leading" event).
    pub fn last(&self) -> Option<Claim> {
        self.claim
    }

    /// Ends the claim now (the node left the leader state, or shuts down).
    pub fn revoke(&mut self, now_ns: u64) {
        if let Some(c) = &mut self.claim {
            c.until_ns = c.until_ns.min(now_ns);
        }
    }

    /// The leader resigns `term`: the claim ends now and no claim in `term` or below is ever
    /// granted again (a later term, won in a later election, may claim).
    pub fn resign(&mut self, term: u64, now_ns: u64) {
        self.fence = self.fence.max(term + 1);
        if self.claim.is_some_and(|c| c.term == term) {
            self.choose_end(ClaimEnd::Resigned, now_ns);
        }
        self.revoke(now_ns);
    }

    /// The claim, if it still runs at `now_ns`, ends by this node's choice, for `cause`.
    fn choose_end(&mut self, cause: ClaimEnd, now_ns: u64) {
        if let Some(c) = self.claim.filter(|c| c.until_ns > now_ns) {
            self.chosen_end = Some((c.term, cause));
        }
    }

    /// The node is stopping: the claim ends now and is never granted again in this process,
    /// whatever a probe still in flight reports (test: `a_closed_lease_never_claims_again`).
    pub fn close(&mut self, now_ns: u64) {
        self.closed = true;
        self.choose_end(ClaimEnd::Stopped, now_ns);
        self.revoke(now_ns);
    }

    /// True once [`close`](Self::close) was called.
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// Why a claim in `term` that just ended ended: the node stopping or resigning while it
    /// still ran, or else lost (no quorum acknowledged in time, the store refused or did not
    /// answer the renewal, a higher term got this node's vote), whatever came after. Judged
    /// by the claim at the instant of the choice, not when the end is recorded (a mutex node
    /// records after its store call returns: a loss followed by a shutdown is still a loss).
    /// Counted by cause in `electd_claims_ended_total` (the alert `ElectdClaimLost`,
    /// contrib/prometheus/).
    pub fn end_of(&self, term: u64) -> ClaimEnd {
        match self.chosen_end {
            Some((t, cause)) if t == term => cause,
            _ => ClaimEnd::Lost,
        }
    }

    /// Is `term` fenced (resigned, or a higher term got this node's vote)?
    pub fn is_fenced(&self, term: u64) -> bool {
        term < self.fence
    }

    /// A vote request for a higher term than the claim's arrived: stop claiming before
    /// openraft decides on it.
    pub fn suspend(&mut self, now_ns: u64) {
        if self.suspended == 0 {
            self.suspended_since_ns = now_ns;
        }
        self.suspended += 1;
    }

    /// openraft has answered the vote request; `granted_term` is its term when the vote was
    /// granted. A granted vote fences every lower term: the claim ended at the suspension.
    pub fn resume(&mut self, granted_term: Option<u64>) {
        self.suspended = self.suspended.saturating_sub(1);
        if let Some(t) = granted_term {
            self.fence = self.fence.max(t);
            if let Some(c) = &mut self.claim {
                if c.term < self.fence {
                    c.until_ns = c.until_ns.min(self.suspended_since_ns);
                }
            }
        }
    }

    /// The MONOTONIC stamp of a change of role from `prev` to `next` in `term`, judged now on
    /// `clock`: "became leader" at the send time of what started the claim, counted back from
    /// now (a suspend in between only makes it earlier); "stopped leading" at the claim's end,
    /// counted forward from its last acknowledgement, never before it really ended (see
    /// [`Claim::until_mono_ns`]); anything else now.
    pub fn stamp_change(&self, prev: Role, next: Role, term: u64, clock: &dyn Clock) -> u64 {
        match (prev, next) {
            (r, Role::Leader) if r != Role::Leader => {
                let now = clock.boot_ns();
                let since = self.current(term, now).map(|c| c.since_ns);
                clock.mono_of_boot(since.unwrap_or(now).min(now))
            }
            (Role::Leader, r) if r != Role::Leader => {
                let now = clock.mono_ns();
                self.last().map_or(now, |c| c.until_mono_ns().min(now))
            }
            _ => clock.mono_ns(),
        }
    }
}

/// Something that holds a node's [`Lease`] behind its lock: the event log reads the claim
/// through it to stamp a change of role (events.rs, `record_leased_view`).
pub trait HoldsLease {
    fn with_lease<R>(&self, f: impl FnOnce(&Lease) -> R) -> R;
}

/// Mutex mode's lease (mutex/node.rs).
impl HoldsLease for std::sync::Mutex<Lease> {
    fn with_lease<R>(&self, f: impl FnOnce(&Lease) -> R) -> R {
        f(&self.lock().expect("lease"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const L: u64 = 240;

    /// An instant at which both clocks read `ns` (no suspend so far).
    fn at(ns: u64) -> Reading {
        Reading {
            boot_ns: ns,
            mono_ns: ns,
        }
    }

    #[test]
    fn votes_are_refused_for_a_follower_lease_after_the_last_acknowledged_probe() {
        const F: u64 = 300;
        let mut l = Lease::default();
        assert_eq!(l.vote_refused_until(F), None, "never claimed: no refusal");
        assert_eq!(
            Lease::starting(700).vote_refused_until(F),
            Some(1000),
            "a start refuses"
        );
        l.grant(3, at(1000), L);
        l.grant(3, at(1100), L);
        assert_eq!(l.vote_refused_until(F), Some(1400));
        l.revoke(1150);
        assert_eq!(
            l.vote_refused_until(F),
            Some(1400),
            "ending the claim early does not shorten the promises already answered"
        );
        l.resign(3, 1160);
        assert_eq!(l.vote_refused_until(F), Some(1400));
    }

    /// Issue 48, item 1: a resign cut the claim to now, and the release that followed counted
    /// the time its promises had left from that cut claim (zero), not from the answers given.
    #[test]
    fn ending_a_claim_leaves_its_promises_running() {
        let mut l = Lease::default();
        assert_eq!(l.promises_left_ns(0), 0, "never claimed: nothing promised");
        l.grant(3, at(1000), L);
        l.grant(3, at(1100), L);
        assert_eq!(l.promises_left_ns(1200), 1340 - 1200);
        l.resign(3, 1200);
        assert_eq!(l.last().unwrap().left_ns(1200), 0, "the claim ended");
        assert_eq!(
            l.promises_left_ns(1200),
            140,
            "an answer at 1199 promised until 1340"
        );
        l.revoke(1210);
        l.close(1220);
        assert_eq!(l.promises_left_ns(1220), 120, "nor do a revoke and a close");
        assert_eq!(l.promises_left_ns(1340), 0);
        assert_eq!(l.promises_left_ns(9999), 0, "never negative");
        let mut m = Lease::default();
        m.grant(4, at(1000), L);
        m.grant(4, at(1500), L);
        assert_eq!(
            m.promises_left_ns(1500),
            L,
            "a run after a gap: the later end"
        );
    }

    #[test]
    fn the_end_of_a_claim_is_stamped_forward_from_its_last_probe() {
        let mut l = Lease::default();
        // The probe went out at boot 1000 = mono 100,000.
        l.grant(
            3,
            Reading {
                boot_ns: 1000,
                mono_ns: 100_000,
            },
            L,
        );
        let c = l.last().unwrap();
        assert_eq!(c.until_mono_ns(), 100_000 + L);
        // The host is then suspended from boot 1100 (mono 100,100) for 10,000: the claim ended
        // during the suspend, so on MONOTONIC no earlier than 100,100, when the host stopped.
        let (boot_now, mono_now) = (11_100, 100_100);
        let counted_back = mono_now - (boot_now - c.until_ns);
        assert!(counted_back < 100_100, "what counting back from now gives");
        assert!(c.until_mono_ns().min(mono_now) >= 100_100);
    }

    #[test]
    fn claim_runs_from_probe_send_time_for_one_lease() {
        let mut l = Lease::default();
        assert!(l.grant(3, at(1000), L));
        assert_eq!(l.current(3, 1000).unwrap().since_ns, 1000);
        assert!(l.current(3, 1239).is_some());
        assert!(l.current(3, 1240).is_none(), "ends exactly at t0 + lease");
        assert!(
            l.current(4, 1100).is_none(),
            "only in the term it was granted for"
        );
    }

    #[test]
    fn the_time_left_counts_down_to_zero_and_stays_there() {
        let mut l = Lease::default();
        l.grant(3, at(1000), L);
        let c = l.last().unwrap();
        assert_eq!(c.left_ns(1000), L);
        assert_eq!(c.left_ns(1239), 1);
        assert_eq!(c.left_ns(1240), 0, "ends exactly at t0 + lease");
        assert_eq!(c.left_ns(5000), 0, "never negative, never wraps");
    }

    #[test]
    fn renewals_extend_one_run_and_gaps_start_a_new_one() {
        let mut l = Lease::default();
        l.grant(3, at(1000), L);
        l.grant(3, at(1050), L);
        let c = l.current(3, 1280).unwrap();
        assert_eq!((c.since_ns, c.until_ns), (1000, 1290));
        l.grant(3, at(2000), L);
        assert_eq!(l.current(3, 2000).unwrap().since_ns, 2000);
    }

    #[test]
    fn vote_request_suspends_and_granted_vote_fences() {
        let mut l = Lease::default();
        l.grant(3, at(1000), L);
        l.suspend(1100);
        assert!(
            l.current(3, 1101).is_none(),
            "no claim while a vote is decided"
        );
        assert!(
            !l.grant(3, at(1090), L),
            "a probe finishing meanwhile claims nothing"
        );
        l.resume(None);
        assert!(
            l.current(3, 1101).is_some(),
            "vote refused: the claim stands"
        );
        l.suspend(1150);
        l.resume(Some(4));
        assert!(l.current(3, 1151).is_none());
        assert_eq!(
            l.last().unwrap().until_ns,
            1150,
            "ended when the vote arrived"
        );
        assert!(!l.grant(3, at(1160), L), "term 3 is fenced for good");
        assert!(l.grant(4, at(1170), L), "a later term may claim");
    }

    #[test]
    fn revoke_ends_now() {
        let mut l = Lease::default();
        l.grant(3, at(1000), L);
        l.revoke(1010);
        assert!(l.current(3, 1010).is_none());
        assert_eq!(l.last().unwrap().until_ns, 1010);
    }

    #[test]
    fn a_closed_lease_never_claims_again() {
        let mut l = Lease::default();
        l.grant(3, at(1000), L);
        l.close(1010);
        assert!(l.current(3, 1010).is_none());
        assert!(
            !l.grant(3, at(1005), L),
            "a probe sent before the close and acknowledged after it claims nothing"
        );
        assert!(!l.grant(4, at(2000), L), "nor does any later term");
        assert!(l.current(4, 2000).is_none());
    }

    #[test]
    fn resigning_fences_the_term_for_good() {
        let mut l = Lease::default();
        l.grant(3, at(1000), L);
        l.resign(3, 1010);
        assert!(l.current(3, 1010).is_none());
        assert!(!l.grant(3, at(1020), L), "never again in the resigned term");
        assert!(l.is_fenced(3));
        assert!(l.grant(5, at(2000), L), "a later election may claim");
    }
}
