//! electd's own election clock for quorum mode: *when* a node campaigns. openraft's elections
//! are off (`enable_elect = false`); openraft keeps the durable vote, terms, vote granting and
//! the log, and electd calls `trigger().elect()` only when all of these hold, checked in
//! [`QuorumNode`](super::QuorumNode)'s campaign (driver/campaign.rs):
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

use std::collections::BTreeSet;

use openraft::LogId;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tokio::sync::{Notify, RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::clock::ms;
use crate::config::Timing;
use crate::role::NodeId;

/// The campaign's timings, derived from the config. The deadlines of messages follow
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

    /// The first instant at which a follower lease renewed at `contact_ns` no longer runs.
    /// openraft refuses a vote while `now <= vote_utime + leader_lease` (docs/design/openraft.md,
    /// "Follower vote refusal"): its lease runs through its last nanosecond, so the core's does
    /// too. Judged with the end left out (`now < contact + F`), a node whose contact and
    /// openraft's `vote_utime` fell on one instant granted pre-votes and asked for an election
    /// at `contact + F`, where openraft still refused the vote: the model checker's heals with
    /// five nodes lost elections that way (docs/testing.md, "Model checking").
    pub fn lease_over_at(&self, contact_ns: u64) -> u64 {
        contact_ns + self.follower_lease_ns + 1
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

/// The follower-lease gate shared by the peer handlers and the campaign: the order
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

    /// Held by a campaign while it re-checks the lease and enqueues the election.
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
        let lease_end = self.timing.lease_over_at(contact.at_ns);
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

/// Whether `yes` holds a majority of every voter set in `sets` (two during a joint change).
pub fn majority_of_each(sets: &[Vec<NodeId>], yes: &BTreeSet<NodeId>) -> bool {
    !sets.is_empty()
        && sets
            .iter()
            .all(|set| set.iter().filter(|id| yes.contains(id)).count() > set.len() / 2)
}

/// A pre-vote this node granted (or its own round): for a short while it refuses the
/// pre-votes of other candidates, so that candidates whose slots come close together (a slow
/// disk, a loaded host) do not split the vote.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Pledge {
    pub to: NodeId,
    pub until_ns: u64,
}

impl Pledge {
    /// Whether it keeps `candidate` out at `now_ns`: it is to another, and still runs.
    pub fn keeps_out(&self, candidate: NodeId, now_ns: u64) -> bool {
        self.to != candidate && now_ns < self.until_ns
    }
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
        if self.0.is_some_and(|p| p.keeps_out(me, now_ns)) {
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
    if now_ns < timing.lease_over_at(contact_ns) {
        return Err(PreVoteRefusal::LeaderAlive);
    }
    if their_last_log < my_last_log {
        return Err(PreVoteRefusal::LogBehind);
    }
    if pledge.is_some_and(|p| p.keeps_out(from, now_ns)) {
        return Err(PreVoteRefusal::Pledged);
    }
    Ok(())
}

#[cfg(test)]
mod tests;
