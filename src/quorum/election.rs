//! electd's own election clock for quorum mode: *when* a node campaigns. openraft's elections
//! are off (`enable_elect = false`); openraft keeps the durable vote, terms, vote granting and
//! the log, and electd calls `trigger().elect()` only when all of these hold, checked in
//! [`QuorumNode`](super::QuorumNode)'s election driver:
//!
//! 1. **Follower lease** ([`Gate`]): the node has accepted no AppendEntries (nor granted a vote,
//!    nor had its own leadership acknowledged) for a whole `follower_lease`. The gate is judged
//!    atomically with the append handler: appends hold the gate's read side while openraft
//!    processes them and stamp the contact before releasing it; the driver re-checks under the
//!    write side and enqueues `elect` before releasing it, so openraft processes every append
//!    the driver did not see *after* the election (where it is refused as a lower vote). This
//!    matters for safety, not only for liveness: `trigger().elect()` votes for itself without
//!    checking its own lease (`docs/design/openraft.md`), and a self-vote inside the lease could complete a
//!    majority that excludes every voter that acknowledged the current leader.
//! 2. **Pre-vote** ([`judge_prevote`]): a majority (this node included) answered that it would
//!    vote for this node in the next term: each judges by its own follower lease and by log
//!    up-to-dateness, and nothing durable changes. A failed pre-vote raises no term, so a node
//!    cut off from the majority never deposes a healthy leader when it comes back.
//! 3. **Staggering** ([`rank`], [`Campaign`]): candidates are ordered, not raced. The first
//!    member after the last known leader (in id order) goes at lease end, the next one
//!    `stagger` later, and so on; a node whose log lacks entries the leader committed goes after
//!    every up-to-date one. After a failed attempt (split vote, refused pre-vote) a node waits a
//!    seeded random jitter. A resigning leader's successor goes first, everyone else one step
//!    later.
//!
//! Everything here is plain logic over `CLOCK_BOOTTIME` nanoseconds (see [`crate::clock`])
//! except [`Gate`], which is the lock the append handler and the driver share.

use openraft::LogId;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tokio::sync::{Notify, RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::clock::ms;
use crate::config::Timing;
use crate::role::NodeId;

/// The election driver's timings, derived from the config. The deadlines of messages follow
/// the follower lease, not the beat, so that any round trip well under the follower lease
/// (up to a quarter of it) works whatever the beat: on a WAN the beat is about one round trip
/// and the follower lease ten (docs/configuration.md, "Timings for a WAN").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ElectionTiming {
    /// How long without contact before a node may campaign (and before it grants a pre-vote).
    pub follower_lease_ns: u64,
    /// Distance between two ranks of candidates: a third of a beat, at least 5 ms (more than a
    /// pre-vote round plus a vote request on one host) unless that is over a tenth of the
    /// follower lease.
    pub stagger_ns: u64,
    /// How long a pre-vote round may take: the deadline openraft gives its own RPCs (three
    /// quarters of [`rpc_interval_ms`], a quarter of the follower lease).
    pub prevote_timeout_ns: u64,
    /// How long a probe of the quorum may take: [`rpc_interval_ms`], openraft's hard deadline
    /// of the AppendEntries round it sends (each request of which gives up at three quarters).
    pub probe_timeout_ns: u64,
    /// How long a triggered election may take before it counts as failed (split vote):
    /// openraft's vote RPC deadline ([`vote_deadline_ms`]).
    pub outcome_ns: u64,
    /// Upper bound of the seeded jitter after a failed attempt: half a follower lease.
    pub jitter_ns: u64,
    /// The leader's beat.
    pub heartbeat_ns: u64,
}

impl ElectionTiming {
    pub fn from_config(t: &Timing) -> ElectionTiming {
        let f = ms(t.follower_lease_ms);
        let rpc = ms(rpc_interval_ms(t));
        ElectionTiming {
            follower_lease_ns: f,
            stagger_ns: (ms(t.heartbeat_ms) / 3).max(ms(5).min(f / 10)),
            prevote_timeout_ns: rpc * 3 / 4,
            probe_timeout_ns: rpc,
            outcome_ns: ms(vote_deadline_ms(t)),
            jitter_ns: f / 2,
            heartbeat_ns: ms(t.heartbeat_ms),
        }
    }

    /// [`ElectionTiming::probe_timeout_ns`] as a duration.
    pub fn probe_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_nanos(self.probe_timeout_ns)
    }

    /// This node slept until its campaign slot `due_ns` and its clock woke it at `woke_ns`:
    /// more than a beat late means its process or its host was stalled. Then the leader may
    /// have been stalled with it, or its beats may be waiting unread in this node's sockets:
    /// the driver gives the leader one more beat before it campaigns. This only ever delays a
    /// campaign.
    pub fn woke_late(&self, due_ns: u64, woke_ns: u64) -> bool {
        woke_ns > due_ns + self.heartbeat_ns
    }
}

/// openraft's `heartbeat_interval`, which electd uses only as the deadline of its RPCs
/// (AppendEntries and probes get 3/4 of it): a third of the follower lease, at least a beat.
pub fn rpc_interval_ms(t: &Timing) -> u64 {
    (t.follower_lease_ms / 3).max(t.heartbeat_ms)
}

/// openraft's vote RPC deadline (its `election_timeout_min`): half a follower lease, and more
/// than [`rpc_interval_ms`], as openraft's config requires.
pub fn vote_deadline_ms(t: &Timing) -> u64 {
    (t.follower_lease_ms / 2).max(rpc_interval_ms(t) + 1)
}

/// What the node last heard from a leader (or did in its place), as the gate holds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Contact {
    /// When (BOOTTIME): an accepted AppendEntries or snapshot, a granted vote, an acknowledged
    /// probe of its own leadership, a resignation, or the start of the process.
    pub at_ns: u64,
    /// Bumped on every contact: an attempt that saw another sequence number is cancelled.
    pub seq: u64,
    /// The leader the last accepted AppendEntries came from.
    pub leader: Option<NodeId>,
    /// The leader's commit index in that AppendEntries (to tell whether this log is behind).
    pub leader_commit: Option<u64>,
}

impl Contact {
    /// The contact of a process that starts at `now_ns` (BOOTTIME): a node that just started
    /// waits a whole follower lease before it campaigns, as openraft waits before it grants a
    /// vote (its restored vote is stamped with the boot instant).
    pub fn starting(now_ns: u64) -> Contact {
        Contact {
            at_ns: now_ns,
            seq: 0,
            leader: None,
            leader_commit: None,
        }
    }

    /// A contact at `now_ns`; `from_leader` names the leader of an accepted append (and its
    /// commit index). The time never goes back; the sequence number always moves.
    pub fn heard(&mut self, now_ns: u64, from_leader: Option<(NodeId, Option<u64>)>) {
        self.at_ns = self.at_ns.max(now_ns);
        self.seq += 1;
        if let Some((leader, commit)) = from_leader {
            self.leader = Some(leader);
            self.leader_commit = commit;
        }
    }
}

/// The follower-lease gate shared by the peer handlers and the election driver: the order
/// rule 1 needs. An append, snapshot or vote holds the read side from before openraft sees it
/// until the core has taken what openraft answered (core/mod.rs, `Input::AppendAccepted`,
/// `SnapshotAccepted`, `VoteAnswered`); the driver holds the write side while it asks the core
/// whether the lease is still over (`Input::MayElect`) and enqueues openraft's election. So
/// every append the driver's check did not see is processed by openraft after the election,
/// and refused as of a lower vote. The contact itself is the core's ([`Contact`]); the gate
/// wakes the driver when it changes.
#[derive(Default)]
pub struct Gate {
    lock: RwLock<()>,
    changed: Notify,
}

impl Gate {
    /// Held by an append, snapshot or vote handler while openraft processes the request.
    pub async fn admit(&self) -> RwLockReadGuard<'_, ()> {
        self.lock.read().await
    }

    /// Held by the election driver while it re-checks the lease and enqueues the election.
    pub async fn exclusive(&self) -> RwLockWriteGuard<'_, ()> {
        self.lock.write().await
    }

    /// The contact changed: wakes every waiter of [`changed`](Self::changed).
    pub fn wake(&self) {
        self.changed.notify_waiters();
    }

    /// Resolves at the next [`wake`](Self::wake).
    pub fn changed(&self) -> tokio::sync::futures::Notified<'_> {
        self.changed.notified()
    }
}

/// This node's place in the order of candidates after a leader is lost: 0 goes first.
///
/// Members are taken in id order, starting after the last known leader (so the leader that
/// just died costs no slot); unknown leader: plain id order. The last leader itself, should it
/// step down, goes last. A node whose log is `behind` (it lacks entries the leader committed,
/// so a majority would refuse it) goes after every member.
pub fn rank(me: NodeId, members: &[NodeId], last_leader: Option<NodeId>, behind: bool) -> u32 {
    let n = members.len().max(1);
    let pos = |id: NodeId| members.iter().position(|m| *m == id);
    let my = pos(me).unwrap_or(n - 1);
    let r = match last_leader.and_then(pos) {
        Some(l) if l == my => n - 1,
        Some(l) => (my + n - l - 1) % n,
        None => my,
    };
    (r + if behind { n } else { 0 }) as u32
}

/// When this node campaigns next: the lease, its rank, and the state of its last attempts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Campaign {
    timing: ElectionTiming,
    rng: SmallRng,
    /// Not before this (BOOTTIME), after a failed attempt.
    retry_at_ns: Option<u64>,
    /// A leader resigned `term`, naming this node (`true`) or another one as its successor.
    handoff: Option<(u64, bool)>,
    /// Attempts that failed since the last contact (for logs and status).
    pub failures: u32,
}

impl Campaign {
    pub fn new(timing: ElectionTiming, seed: u64) -> Campaign {
        Campaign {
            timing,
            rng: SmallRng::seed_from_u64(seed),
            retry_at_ns: None,
            handoff: None,
            failures: 0,
        }
    }

    /// The earliest instant this node may start a pre-vote round, being `rank` in the order
    /// and in `term` now.
    pub fn due_at(&self, contact: &Contact, rank: u32, term: u64) -> u64 {
        let lease_end = contact.at_ns + self.timing.follower_lease_ns;
        let slot = match self.handoff {
            Some((t, true)) if t == term => 0,
            Some((t, false)) if t == term => u64::from(rank) + 1,
            _ => u64::from(rank),
        };
        (lease_end + slot * self.timing.stagger_ns).max(self.retry_at_ns.unwrap_or(0))
    }

    /// A pre-vote was refused or a triggered election did not finish: try again after a
    /// stagger step plus a seeded jitter.
    pub fn failed(&mut self, now_ns: u64) {
        self.failures += 1;
        let jitter = self.rng.gen_range(0..=self.timing.jitter_ns);
        self.retry_at_ns = Some(now_ns + self.timing.stagger_ns + jitter);
    }

    /// A leader was heard from (or this node won): start afresh.
    pub fn settled(&mut self) {
        self.failures = 0;
        self.retry_at_ns = None;
    }

    /// The leader of `term` resigned and named `successor_is_me ? this node : another one`.
    pub fn handoff(&mut self, term: u64, successor_is_me: bool) {
        self.handoff = Some((term, successor_is_me));
    }
}

/// The jitter source by the next number it would draw (SmallRng has no `Hash`): equal campaigns
/// hash alike, as the model checker needs (lab/src/model/).
impl std::hash::Hash for Campaign {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        use rand::RngCore;
        self.timing.hash(h);
        self.rng.clone().next_u64().hash(h);
        self.retry_at_ns.hash(h);
        self.handoff.hash(h);
        self.failures.hash(h);
    }
}

/// When to ask again after a lost pre-vote round. `sets` are the voter sets in force (two
/// during a joint change), `granted` the members that said yes (this node included), and
/// `lease_left_us` the lease time left (µs) of each member that refused only because its lease
/// still ran. Each set needs its own majority, so each set waits for enough of its own refusing
/// leases to end (a grant or a lease in one set counts nothing towards the other); the round can
/// win once every set's wait is over. `None` when waiting for leases cannot win (some set has
/// too few such refusals) or nothing is missing.
pub fn prevote_retry_after_us(
    sets: &[Vec<NodeId>],
    granted: &std::collections::BTreeSet<NodeId>,
    lease_left_us: &std::collections::BTreeMap<NodeId, u64>,
) -> Option<u64> {
    let mut after = None;
    for set in sets {
        let yes = set.iter().filter(|id| granted.contains(id)).count();
        let Some(missing) = (set.len() / 2 + 1).checked_sub(yes).filter(|m| *m > 0) else {
            continue;
        };
        let mut waits: Vec<u64> = set
            .iter()
            .filter_map(|id| lease_left_us.get(id).copied())
            .collect();
        if waits.len() < missing {
            return None;
        }
        waits.sort_unstable();
        after = after.max(Some(waits[missing - 1]));
    }
    after
}

/// Why a pre-vote is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PreVoteRefusal {
    /// This node heard from a leader (or is one, acknowledged) within its follower lease.
    LeaderAlive,
    /// This node granted another candidate's pre-vote (or started its own) a moment ago: that
    /// candidate's vote request is on its way, and a second candidate would split the vote.
    Pledged,
    /// The candidate's log is behind this node's: it could not win the vote.
    LogBehind,
    /// This node is shutting down.
    Stopping,
    /// This node's data dir is new and its incarnation not yet confirmed (identity.rs).
    Unconfirmed,
}

impl PreVoteRefusal {
    pub fn code(self) -> &'static str {
        match self {
            PreVoteRefusal::LeaderAlive => "leader_alive",
            PreVoteRefusal::Pledged => "pledged",
            PreVoteRefusal::LogBehind => "log_behind",
            PreVoteRefusal::Stopping => "stopping",
            PreVoteRefusal::Unconfirmed => "unconfirmed",
        }
    }
}

/// A pre-vote this node granted (or its own round): for a short while it refuses the
/// pre-votes of other candidates, so that candidates whose slots come close together (a slow
/// disk, a loaded host) do not split the vote.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Pledge {
    pub to: NodeId,
    pub until_ns: u64,
}

impl ElectionTiming {
    /// How long a granted pre-vote keeps other candidates out: the candidate's round may take
    /// up to [`ElectionTiming::prevote_timeout_ns`], then its vote request is on its way; a
    /// stagger step more covers the way. A candidate's pledge to itself ends with its round
    /// ([`Pledged::release_own`]), so a node never refuses others for longer than its round.
    pub fn pledge_ns(&self) -> u64 {
        self.prevote_timeout_ns + self.stagger_ns
    }
}

/// The pre-vote this node pledged last, or its own round's pledge to itself.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Pledged(pub Option<Pledge>);

impl Pledged {
    /// This node's own round starts at `now_ns`: unless it is still pledged to another
    /// candidate (then false, and no round), it pledges to itself, refusing other candidates
    /// meanwhile.
    pub fn own_round(&mut self, me: NodeId, now_ns: u64, timing: &ElectionTiming) -> bool {
        if matches!(self.0, Some(p) if p.to != me && now_ns < p.until_ns) {
            return false;
        }
        self.grant(me, now_ns, timing);
        true
    }

    /// A pre-vote granted to `to` at `now_ns`.
    pub fn grant(&mut self, to: NodeId, now_ns: u64, timing: &ElectionTiming) {
        self.0 = Some(Pledge {
            to,
            until_ns: now_ns + timing.pledge_ns(),
        });
    }

    /// A candidate's round ended (won or lost): its pledge to itself no longer keeps anyone
    /// out. Without this, with a small follower lease a node's next round could start before
    /// its last pledge lapsed, and once every node had lost one round all of them would refuse
    /// every pre-vote for good.
    pub fn release_own(&mut self, me: NodeId) {
        if matches!(self.0, Some(p) if p.to == me) {
            self.0 = None;
        }
    }
}

/// Would this node vote for `from` in its next term? Judged by the node's own follower lease
/// (`contact_ns`, BOOTTIME) and by log up-to-dateness, as openraft judges a real vote, and by
/// the pre-vote it pledged last. On a grant the caller records a new [`Pledge`] to `from`.
pub fn judge_prevote(
    now_ns: u64,
    contact_ns: u64,
    timing: &ElectionTiming,
    my_last_log: Option<LogId<NodeId>>,
    pledge: Option<Pledge>,
    from: NodeId,
    their_last_log: Option<LogId<NodeId>>,
) -> Result<(), PreVoteRefusal> {
    if now_ns < contact_ns + timing.follower_lease_ns {
        return Err(PreVoteRefusal::LeaderAlive);
    }
    if their_last_log < my_last_log {
        return Err(PreVoteRefusal::LogBehind);
    }
    if matches!(pledge, Some(p) if p.to != from && now_ns < p.until_ns) {
        return Err(PreVoteRefusal::Pledged);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::CommittedLeaderId;

    fn timing() -> ElectionTiming {
        ElectionTiming::from_config(&Timing::default())
    }

    fn contact(at_ns: u64) -> Contact {
        Contact {
            at_ns,
            seq: 1,
            leader: Some(3),
            leader_commit: Some(7),
        }
    }

    fn log(term: u64, index: u64) -> Option<LogId<NodeId>> {
        Some(LogId::new(CommittedLeaderId::new(term, 0), index))
    }

    #[test]
    fn defaults_for_heartbeat_30_and_follower_lease_150() {
        let t = timing();
        assert_eq!(t.follower_lease_ns, ms(150));
        assert_eq!(t.stagger_ns, ms(10));
        assert_eq!(
            t.prevote_timeout_ns, 37_500_000,
            "openraft's own RPC deadline"
        );
        assert_eq!(t.probe_timeout_ns, ms(50));
        assert_eq!(t.outcome_ns, ms(75));
        let fast = ElectionTiming::from_config(&Timing {
            heartbeat_ms: 10,
            follower_lease_ms: 50,
            lease_ms: 0,
        });
        assert_eq!(fast.stagger_ns, ms(5), "not below 5 ms…");
        let tiny = ElectionTiming::from_config(&Timing {
            heartbeat_ms: 2,
            follower_lease_ms: 12,
            lease_ms: 0,
        });
        assert_eq!(tiny.stagger_ns, 1_200_000, "…unless that is over F/10");
    }

    /// On a WAN (beat 30 ms, follower lease 1 s, 100 ms round trips) probes and pre-votes must
    /// be given longer than a round trip: deadlines follow the follower lease, not the beat.
    #[test]
    fn deadlines_follow_the_follower_lease_not_the_beat() {
        let wan = ElectionTiming::from_config(&Timing {
            heartbeat_ms: 30,
            follower_lease_ms: 1000,
            lease_ms: 0,
        });
        let rtt = ms(100);
        assert!(wan.probe_timeout_ns > 3 * rtt, "{}", wan.probe_timeout_ns);
        assert!(
            wan.prevote_timeout_ns > 2 * rtt,
            "{}",
            wan.prevote_timeout_ns
        );
    }

    /// With a small follower lease (beat 2, F 12) a node retries sooner than three stagger
    /// steps: its pledge to itself must end with its round, or once every node has lost one
    /// round all of them refuse every pre-vote for good.
    #[test]
    fn a_lost_round_releases_the_candidates_pledge_to_itself() {
        let t = ElectionTiming::from_config(&Timing {
            heartbeat_ms: 2,
            follower_lease_ms: 12,
            lease_ms: 0,
        });
        let theirs = log(5, 10);
        // Nodes 1..=3, every lease long over; each starts a round at 1000 ms and loses it.
        let mut pledges = [Pledged::default(); 4];
        let start = ms(1000);
        for me in 1..=3u64 {
            assert!(pledges[me as usize].own_round(me, start, &t));
        }
        let lost_at = start + t.prevote_timeout_ns;
        for me in 1..=3u64 {
            pledges[me as usize].release_own(me);
        }
        // The earliest retry: a stagger step after the loss.
        let retry = lost_at + t.stagger_ns;
        for (me, asker) in [(1u64, 2u64), (2, 3), (3, 1)] {
            assert_eq!(
                judge_prevote(
                    retry,
                    0,
                    &t,
                    log(5, 10),
                    pledges[me as usize].0,
                    asker,
                    theirs
                ),
                Ok(()),
                "node {me} refuses node {asker}'s retry"
            );
        }
        let mut other = Pledged::default();
        other.grant(2, retry, &t);
        assert!(
            !other.own_round(1, retry, &t),
            "pledged to another: no round"
        );
        other.release_own(1);
        assert!(other.0.is_some(), "a pledge to another candidate stands");
    }

    #[test]
    fn a_node_that_woke_more_than_a_beat_late_gives_the_leader_one_more_beat() {
        let t = timing();
        let due = ms(1000);
        assert!(!t.woke_late(due, due));
        assert!(
            !t.woke_late(due, due + ms(30)),
            "a beat late is still on time"
        );
        assert!(t.woke_late(due, due + ms(31)));
    }

    #[test]
    fn the_member_after_the_dead_leader_goes_first() {
        let m = [1, 2, 3, 4, 5];
        assert_eq!(rank(4, &m, Some(3), false), 0);
        assert_eq!(rank(5, &m, Some(3), false), 1);
        assert_eq!(rank(1, &m, Some(3), false), 2);
        assert_eq!(rank(2, &m, Some(3), false), 3);
        assert_eq!(rank(3, &m, Some(3), false), 4, "the old leader goes last");
        assert_eq!(rank(1, &m, Some(5), false), 0, "wraps around");
        assert_eq!(rank(2, &m, None, false), 1, "no leader known: id order");
        assert_eq!(
            rank(4, &m, Some(3), true),
            5,
            "a log that is behind goes after all"
        );
        // Every member gets its own slot.
        let mut ranks: Vec<u32> = m.iter().map(|&i| rank(i, &m, Some(2), false)).collect();
        ranks.sort();
        assert_eq!(ranks, vec![0, 1, 2, 3, 4]);
    }

    #[test]
    fn nobody_campaigns_inside_the_follower_lease() {
        let c = Campaign::new(timing(), 1);
        let at = ms(1000);
        assert_eq!(c.due_at(&contact(at), 0, 5), at + ms(150));
        assert_eq!(
            c.due_at(&contact(at), 2, 5),
            at + ms(170),
            "rank 2: two steps later"
        );
    }

    #[test]
    fn failed_attempts_wait_a_seeded_jitter() {
        let t = timing();
        let mut a = Campaign::new(t, 7);
        let mut b = Campaign::new(t, 7);
        a.failed(ms(2000));
        b.failed(ms(2000));
        let (da, db) = (
            a.due_at(&contact(ms(1000)), 0, 5),
            b.due_at(&contact(ms(1000)), 0, 5),
        );
        assert_eq!(da, db, "the same seed gives the same schedule");
        assert!(da >= ms(2000) + t.stagger_ns && da <= ms(2000) + t.stagger_ns + t.jitter_ns);
        assert_eq!(a.failures, 1);
        a.settled();
        assert_eq!(a.due_at(&contact(ms(3000)), 0, 5), ms(3150));
        let draws: std::collections::BTreeSet<u64> = (0..20)
            .map(|s| {
                let mut c = Campaign::new(t, s);
                c.failed(ms(1000));
                c.due_at(&contact(0), 0, 5)
            })
            .collect();
        assert!(draws.len() > 10, "seeds give different jitters: {draws:?}");
    }

    #[test]
    fn a_resigned_leaders_successor_goes_first_and_the_rest_defer() {
        let mut succ = Campaign::new(timing(), 1);
        succ.handoff(9, true);
        assert_eq!(succ.due_at(&contact(0), 3, 9), ms(150));
        assert_eq!(
            succ.due_at(&contact(0), 3, 10),
            ms(180),
            "only for the resigned term"
        );
        let mut other = Campaign::new(timing(), 1);
        other.handoff(9, false);
        assert_eq!(other.due_at(&contact(0), 0, 9), ms(160));
    }

    #[test]
    fn prevote_is_granted_only_after_the_lease_and_to_a_log_at_least_as_long() {
        let t = timing();
        let theirs = log(5, 10);
        let judge = |now, mine, pledge| judge_prevote(now, ms(1000), &t, mine, pledge, 2, theirs);
        assert_eq!(
            judge(ms(1149), log(5, 10), None),
            Err(PreVoteRefusal::LeaderAlive)
        );
        assert_eq!(judge(ms(1150), log(5, 10), None), Ok(()));
        assert_eq!(
            judge(ms(1150), log(5, 11), None),
            Err(PreVoteRefusal::LogBehind)
        );
        assert_eq!(
            judge(ms(1150), log(6, 2), None),
            Err(PreVoteRefusal::LogBehind),
            "a later term's log is longer whatever its index"
        );
        assert_eq!(judge(ms(1150), None, None), Ok(()));
    }

    #[test]
    fn a_pledged_prevote_keeps_other_candidates_out_for_a_moment() {
        let t = timing();
        let theirs = log(5, 10);
        let p = Some(Pledge {
            to: 3,
            until_ns: ms(1200),
        });
        let judge = |now, from| judge_prevote(now, ms(1000), &t, log(5, 10), p, from, theirs);
        assert_eq!(judge(ms(1199), 2), Err(PreVoteRefusal::Pledged));
        assert_eq!(
            judge(ms(1199), 3),
            Ok(()),
            "the same candidate may ask again"
        );
        assert_eq!(judge(ms(1200), 2), Ok(()), "a pledge lapses");
        assert_eq!(t.pledge_ns(), 47_500_000);
    }

    #[test]
    fn a_lost_prevote_asks_again_when_enough_leases_have_ended() {
        use std::collections::{BTreeMap, BTreeSet};
        let five = vec![vec![1, 2, 3, 4, 5]];
        let me = BTreeSet::from([1]);
        let waits = |w: &[(NodeId, u64)]| w.iter().copied().collect::<BTreeMap<_, _>>();
        let retry = |sets: &[Vec<NodeId>], yes: &BTreeSet<NodeId>, w: &[(NodeId, u64)]| {
            prevote_retry_after_us(sets, yes, &waits(w))
        };
        assert_eq!(
            retry(&five, &me, &[(2, 900), (3, 300), (4, 5000)]),
            Some(900)
        );
        assert_eq!(
            retry(&five, &BTreeSet::from([1, 2]), &[(3, 900), (4, 300)]),
            Some(300)
        );
        assert_eq!(retry(&five, &me, &[(2, 300)]), None, "too few");
        assert_eq!(
            retry(&five, &BTreeSet::from([1, 2, 3]), &[]),
            None,
            "already won"
        );
    }

    /// Issue 29 finding 4: during a joint change each voter set needs its own majority, so the
    /// waits are counted per set. Old {1,2,3}, new {1,4,5}: 1 granted itself, 2 and 3 refused
    /// with leases of 100 µs and 200 µs, 4 and 5 with 5,000 µs and 9,000 µs. Counting the union
    /// (3 of 5 needed, 2 missing) asked again after 200 µs, when the new set still has no
    /// majority; per set it is after 5,000 µs (old set: 1 missing, 100 µs; new: 1, 5,000 µs).
    #[test]
    fn a_lost_joint_prevote_waits_for_a_majority_of_each_set() {
        use std::collections::{BTreeMap, BTreeSet};
        let sets = vec![vec![1, 2, 3], vec![1, 4, 5]];
        let leases = BTreeMap::from([(2, 100), (3, 200), (4, 5_000), (5, 9_000)]);
        assert_eq!(
            prevote_retry_after_us(&sets, &BTreeSet::from([1]), &leases),
            Some(5_000)
        );
        // A set whose refusals are not all leases cannot be waited out: 4 refused for its log.
        let leases = BTreeMap::from([(2, 100), (3, 200), (5, 9_000)]);
        assert_eq!(
            prevote_retry_after_us(&sets, &BTreeSet::from([1]), &leases),
            Some(9_000)
        );
        let sets = vec![vec![1, 2, 3], vec![4, 5, 6]];
        assert_eq!(
            prevote_retry_after_us(&sets, &BTreeSet::from([1]), &leases),
            None,
            "the new set {{4,5,6}} needs two leases to end and has one"
        );
    }

    #[tokio::test]
    async fn contact_bumps_the_sequence_and_the_gate_wakes_the_driver() {
        let mut c = Contact::starting(ms(10));
        let before = c;
        c.heard(ms(5), Some((2, Some(4))));
        assert_eq!(c.seq, before.seq + 1);
        assert_eq!(c.at_ns, ms(10), "contact time never goes back");
        assert_eq!((c.leader, c.leader_commit), (Some(2), Some(4)));
        c.heard(ms(20), None);
        assert_eq!(
            (c.at_ns, c.leader),
            (ms(20), Some(2)),
            "a vote keeps the leader"
        );
        let g = Gate::default();
        let woken = g.changed();
        g.wake();
        tokio::time::timeout(std::time::Duration::from_secs(1), woken)
            .await
            .expect("woken");
    }
}
