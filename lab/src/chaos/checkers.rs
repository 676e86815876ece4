//! The checkers C1–C6 and the cost count in elections, as pure functions over a [`RunLog`]
//! (`docs/design/chaos.md`), and how they read a node's state and who can talk to whom from the
//! log. The run log itself is in `record.rs`; the verdict of a run in `verdict.rs`.
//!
//! # Promises (C6)
//! A claiming answer a client received is a promise: the node may be acted on as leader from
//! the instant the client has the answer until the instant it *sent* its request plus the
//! `lease_ms` it got back, whatever happens next. C6 judges every [`Promise`] of the log over its whole length:
//! no other node may hold a claim interval that overlaps it, nor give a claiming answer
//! inside it. C2 judges the claim intervals of the event logs, which end when a node stops
//! claiming; a promise it gave earlier may run on past that instant.
//!
//! # How a node's state is read from the log
//! - A node's events are read in `seq` order, the order in which the node decided them; each
//!   applies at its stamp `t_mono_ns`. The API promises that a stamp never goes back with `seq`
//!   (api-v1.md); an event whose stamp does ([`time_goes_back`]) fails the run on its own, and
//!   is read as applying at the latest stamp before it (as the node's own log would have stamped
//!   it), so that the other checkers still see the node's changes in the node's order. (Ordered
//!   by stamp instead, such a log showed the node's states in an order it never went through,
//!   and failed as "never converged", or passed, for a reason that was not the log's.)
//! - A node's state at time `t` is the one given by its latest event at or before `t` (changes
//!   apply at their instant; intervals are half-open `[from, to)`). Before its first event a node
//!   is *unknown*: it claims nothing and reports no leader.
//! - `Kill` and `Stop` make a node *down* from that instant: it claims nothing and reports nothing.
//!   Events stamped while a node is down are ignored (a killed process cannot speak; they are
//!   counted in [`RunResult::notes`](super::verdict::RunResult::notes)). `Start` brings a down node back as *unknown* until its first
//!   event; a `Start` for a node that is not down changes nothing. The harness should therefore take
//!   a `Start`'s time stamp *before* it spawns the process, or the node's first event may be lost.
//! - `Pause` (SIGSTOP) keeps whatever state the node had, its claim included, until its own next
//!   event: a paused bully coordinator still believes it leads, and the log says so. `Resume`
//!   (SIGCONT) ends the pause. [`cap_paused_claims`] offers the lease-bound reading for the
//!   leased modes, for a node that never ran again after its pause.
//! - When several changes share one instant, `Start` and `Resume` apply first, then events (in
//!   `seq` order), then `Kill`, `Stop` and `Pause`.
//! - A *claim interval* is a maximal interval during which a node is up with role leader (a change
//!   of term while leading does not end it). Paused claimants are claimants.
//!
//! # Who can talk to whom
//! A [`FaultWindow`](super::record::FaultWindow) is in force on `[start_ns, end_ns)`. Its `groups` may overlap: two nodes can
//! talk while the window is in force iff some group holds both. An empty `groups` restricts nothing
//! (loss, delay); a member named in no group is cut off from everyone. When windows overlap, two
//! nodes can talk iff every window in force lets them. A node's *reach* is itself plus every node it
//! can talk to directly (no relaying). For a partition, a node's reach is its side; for a bridge
//! `[[1,2,3],[3,4,5]]` the bridge node 3 reaches all; for the majorities ring give the edges
//! `[[1,2],[2,3],[3,4],[4,5],[5,1]]`, so every node reaches a majority and none the same one. A
//! one-way cut is best given as the group of all nodes (messages still flow one way) or as the
//! pair cut apart, whichever the scenario means to judge; the label says which.
//!
//! A *majority* is a strict majority of the voters (`voters`, or the membership `nodes` when it
//! names none), alive or not: 3 of 5, or 2 of 3 beside two members that don't vote (S26); a
//! node's reach counts the voters in it. N1 ([`nonvoter_claims`]): a member that doesn't vote
//! never claims.

use std::collections::{BTreeMap, BTreeSet};

use electd_client::Event;
use electd_client::{NodeId, Role, View};

use super::record::{ProcKind, Promise, RunLog};

/// How long the converged state must hold for C4 to accept it. A window that ends sooner does
/// not converge: one agreed instant is no evidence that the cluster settled (a leader elected
/// and deposed at once agrees for a moment), and the runner observes 1.2 s after agreement, so a
/// run that converged has the whole second in its window.
pub const STABLE_NS: u64 = 1_000_000_000;

/// A promise that another node broke: `intruder` claimed (a claim interval of its event log,
/// or a claiming answer) on `[from_ns, to_ns)` inside `promise`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BrokenPromise {
    pub promise: Promise,
    pub intruder: NodeId,
    pub from_ns: u64,
    pub to_ns: u64,
}

/// C6 result.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PromiseKeeping {
    /// Promises judged (the answers with a lease).
    pub promises: u64,
    /// Claiming answers without a lease ([`Promise::unleased`]); in a leased mode each breaks
    /// the API's contract.
    pub unleased: u64,
    /// The first of them.
    pub first_unleased: Option<Promise>,
    /// Each promise broken, with the first intrusion into it.
    pub broken: Vec<BrokenPromise>,
    /// Total time during which some promise was broken (the union of the intrusions).
    pub broken_ns: u64,
}

impl PromiseKeeping {
    /// The first broken promise as one line, its times in ms from `start_ns`: `title` names
    /// what broke, `number` what a promise's `term` is (a term, a token), `counted` what the
    /// count at the end counts.
    pub fn first_broken(
        &self,
        start_ns: u64,
        (title, number, counted): (&str, &str, &str),
    ) -> Option<String> {
        let b = self.broken.first()?;
        let at = |ns: u64| ns.saturating_sub(start_ns) as f64 / 1e6;
        Some(format!(
            "{title}: node {} claimed at {:.1} ms inside node {}'s promise of {number} {} \
             ({:.1} to {:.1} ms); {} of {} {counted} broken",
            b.intruder,
            at(b.from_ns),
            b.promise.node,
            b.promise.term,
            at(b.promise.from_ns),
            at(b.promise.until_ns),
            self.broken.len(),
            self.promises
        ))
    }
}

/// An event stamped before an event its node recorded earlier (lower `seq`): the event log's
/// time goes back, which the API rules out (`t_mono_ns` never decreases with `seq`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimeBack {
    pub node: NodeId,
    pub seq: u64,
    pub t_mono_ns: u64,
    /// The event of lower `seq` with the latest stamp.
    pub after_seq: u64,
    pub after_t_mono_ns: u64,
}

/// A node's state as the log tells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogState {
    /// No event yet (or none since a restart): claims nothing, reports no leader.
    Unknown,
    /// Killed or stopped.
    Down,
    /// Running, with the view of its latest event.
    Up(View),
}

impl LogState {
    /// Whether this state claims leadership.
    pub fn claims(&self) -> bool {
        matches!(self, LogState::Up(v) if v.claims())
    }
}

/// One stretch of constant state of one node, `[from_ns, to_ns)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    pub from_ns: u64,
    pub to_ns: u64,
    pub state: LogState,
    /// SIGSTOPped during this stretch.
    pub paused: bool,
}

/// One maximal claim of leadership by one node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClaimInterval {
    pub node: NodeId,
    /// When the claim began; may precede the window's start.
    pub from_ns: u64,
    /// When it ended, or the window's end if it still ran then.
    pub to_ns: u64,
}

/// C1: two nodes led the same term.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TermConflict {
    pub term: u64,
    pub nodes: Vec<NodeId>,
}

/// C1 result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ElectionSafety {
    pub safe: bool,
    /// The offending terms, ascending.
    pub conflicts: Vec<TermConflict>,
}

/// A stretch with two or more claimants.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SplitSpan {
    pub from_ns: u64,
    pub to_ns: u64,
    pub leaders: Vec<NodeId>,
}

/// C2 result.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SplitBrain {
    /// Total time with two or more claimants.
    pub split_brain_ns: u64,
    /// The largest number of simultaneous claimants (0 if nobody ever claimed).
    pub max_leaders: u32,
    /// The part of `split_brain_ns` during which at least one claimant was paused.
    pub paused_ns: u64,
    /// The stretches, merged where adjacent with the same claimants.
    pub spans: Vec<SplitSpan>,
}

/// C3 result.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Availability {
    /// Time within `[fault_ns or start_ns, end_ns)` with no claimant anywhere.
    pub leaderless_ns: u64,
    /// Time, while a fault window is in force and some node reaches a majority, during which no
    /// claimant reaches a majority. `None` when no such time exists (no fault window, or no
    /// majority side anywhere, as in a 2/2/1 split).
    pub majority_leaderless_ns: Option<u64>,
    /// From `fault_ns` to the first instant at which a running claimant `L` whose reach is a
    /// majority (or, when no node reaches a majority, of the largest reach there is) is reported
    /// as leader by every running node it reaches. `None` if never, or if there was no fault.
    pub failover_ns: Option<u64>,
    /// The leader of that instant.
    pub failover_leader: Option<NodeId>,
}

/// C4 result.
///
/// Who must agree: every member not taken down by the harness (a recorded `Kill` or `Stop`
/// without a later `Start`), paused ones aside (they cannot answer; a paused claimant is no
/// agreed leader either). A node that died on its own has no such record: the log keeps it up
/// with its last view, so it is not left out; it counts as agreeing only if that view named
/// the agreed leader, which a dead node's last view does not say any more than a live one's.
/// The log cannot tell the two apart: a death the harness did not cause leaves no trace in
/// it (the run log has no record for one yet; the harness would have to note it).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Convergence {
    /// From heal to the first instant at which exactly one node claims, it is running, every
    /// running node reports it as leader, and this holds with the same leader for the whole
    /// [`STABLE_NS`]. `None` if never, also when the window ended before an agreement had held
    /// that long.
    pub converge_ns: Option<u64>,
    /// The converged leader; when `converge_ns` is `None`, the leader of an agreement still
    /// running when the window ended, if any.
    pub leader: Option<NodeId>,
    /// How long the agreement held: [`STABLE_NS`] when converged, else how long the one
    /// running at the window's end had held (0 if none).
    pub stable_ns: u64,
    /// Where C4 started measuring: `heal_ns`, or `start_ns` for a run without any fault.
    pub from_ns: Option<u64>,
}

/// C5 result: how much cut-off nodes disturbed the cluster.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Disruption {
    /// Terms gained by nodes cut off from every majority, while cut off.
    pub minority_terms_gained: u64,
    /// Leaders of a higher term elected after a window's end (before the next window) than the
    /// node that claimed at that end; `None` when no node claimed at any window's end.
    pub heal_leader_changes: Option<u64>,
}

/// C5 over every fault window of the log: a node is cut off when its reach when the window
/// opens (the nodes it can talk to, itself included; see the module docs) is less than a
/// majority. Windows without groups (delay, loss) cut nobody off.
pub fn disruption(log: &RunLog) -> Disruption {
    let nodes = members(log);
    let voting = voting(log, &nodes);
    let majority = voting.iter().filter(|v| **v).count() / 2 + 1;
    let mut windows = log.faults.clone();
    windows.sort_by_key(|w| w.start_ns);
    let in_order: BTreeMap<NodeId, Vec<(u64, &Event)>> =
        nodes.iter().map(|&n| (n, node_events(log, n))).collect();
    let term_at = |node: NodeId, t: u64| {
        in_order.get(&node).map_or(0, |evs| {
            let n = evs.partition_point(|&(at, _)| at <= t);
            if n == 0 {
                0
            } else {
                evs[n - 1].1.view.term
            }
        })
    };
    let claims = claim_intervals(log);
    let mut out = Disruption::default();
    for (i, w) in windows.iter().enumerate() {
        let adj = connectivity(log, &nodes, w.start_ns);
        for (k, &n) in nodes.iter().enumerate() {
            let votes = reach(adj.as_ref(), k, nodes.len())
                .into_iter()
                .filter(|&j| voting[j])
                .count();
            if votes >= majority {
                continue;
            }
            // Only terms it went past the rest of the cluster with count: a node that can still
            // receive (a one-way cut) learns the majority's new terms, which disturbs nobody.
            let before = term_at(n, w.start_ns);
            let others_at = |t: u64| {
                nodes
                    .iter()
                    .filter(|&&o| o != n)
                    .map(|&o| term_at(o, t))
                    .max()
                    .unwrap_or(0)
            };
            let gained = log
                .events
                .iter()
                .filter(|e| e.node_id == n && e.t_mono_ns > w.start_ns && e.t_mono_ns < w.end_ns)
                .map(|e| {
                    e.view
                        .term
                        .saturating_sub(before.max(others_at(e.t_mono_ns)))
                })
                .max()
                .unwrap_or(0);
            out.minority_terms_gained += gained;
        }
        let Some(holder) = claims
            .iter()
            .find(|c| c.from_ns <= w.end_ns && w.end_ns < c.to_ns)
        else {
            continue;
        };
        let term = term_at(holder.node, w.end_ns);
        let until = windows.get(i + 1).map_or(log.end_ns, |next| next.start_ns);
        let deposed = log
            .events
            .iter()
            .filter(|e| {
                e.view.role == Role::Leader
                    && e.view.term > term
                    && e.t_mono_ns >= w.end_ns
                    && e.t_mono_ns < until
            })
            .map(|e| e.view.term)
            .collect::<std::collections::BTreeSet<u64>>()
            .len() as u64;
        *out.heal_leader_changes.get_or_insert(0) += deposed;
    }
    out
}

/// C1 (quorum mode only, else `None`): no term has leader events from two different nodes. Every
/// leader event in the log counts, inside the window or not, whether its node was down or not.
pub fn election_safety(log: &RunLog) -> Option<ElectionSafety> {
    if !log.leased {
        return None;
    }
    let mut by_term: BTreeMap<u64, BTreeSet<NodeId>> = BTreeMap::new();
    for e in log.events.iter().filter(|e| e.view.role == Role::Leader) {
        by_term.entry(e.view.term).or_default().insert(e.node_id);
    }
    let conflicts: Vec<TermConflict> = by_term
        .into_iter()
        .filter(|(_, nodes)| nodes.len() > 1)
        .map(|(term, nodes)| TermConflict {
            term,
            nodes: nodes.into_iter().collect(),
        })
        .collect();
    Some(ElectionSafety {
        safe: conflicts.is_empty(),
        conflicts,
    })
}

/// C2 over the window.
pub fn split_brain(log: &RunLog) -> SplitBrain {
    Sweep::new(log).split_brain()
}

/// C6: no node claims inside another node's promise. `None` when the log holds no claiming
/// answer (a mode without leases, or a run without a client). An answer without a lease is no
/// promise to judge, but it is a claim: given inside another node's promise, it breaks that one.
/// That a leased-mode run gave answers without a lease, or none at all, is the verdict's to fail.
pub fn promise_keeping(log: &RunLog) -> Option<PromiseKeeping> {
    if log.promises.is_empty() {
        return None;
    }
    Some(judge_promises(log.promises.clone(), &claim_intervals(log)))
}

/// C6 for named roles: for each role, no node claims it inside another node's promise on it
/// (`promises` by role; a promise's `term` is the grant's token), and no token is claimed by
/// two nodes. The roles have no event log: the claiming answers are the whole record.
pub fn role_promise_keeping(
    promises: &BTreeMap<String, Vec<Promise>>,
) -> (PromiseKeeping, Vec<String>) {
    let mut out = PromiseKeeping::default();
    let mut shared = Vec::new();
    for (role, ps) in promises {
        let k = judge_promises(ps.clone(), &[]);
        out.promises += k.promises;
        out.unleased += k.unleased;
        out.first_unleased = out.first_unleased.or(k.first_unleased);
        out.broken.extend(k.broken);
        out.broken_ns += k.broken_ns;
        let mut by_token: BTreeMap<u64, BTreeSet<NodeId>> = BTreeMap::new();
        for p in ps {
            by_token.entry(p.term).or_default().insert(p.node);
        }
        for (token, nodes) in by_token.into_iter().filter(|(_, n)| n.len() > 1) {
            shared.push(format!(
                "role {role}: token {token} claimed by nodes {nodes:?}"
            ));
        }
    }
    (out, shared)
}

/// What the role checks found in the answers clients got on named roles (issue 49).
#[derive(Clone, Debug, Default)]
pub struct RoleChecks {
    /// C6 per role (C2 per role is its `broken_ns`: the time two nodes' claims on one role
    /// overlapped, as far as the answers show).
    pub keeping: PromiseKeeping,
    /// C1 per role: a token claimed by more than one node.
    pub shared: Vec<String>,
    /// Tokens that went back ([`role_tokens_back`]).
    pub back: Vec<String>,
    /// How often a role changed hands ([`role_moves`]).
    pub moves: u64,
}

/// Every role check over `promises` (by role): C6 and C1 per role, and tokens never back with
/// `slack_ns` ([`role_tokens_back`]).
pub fn role_checks(promises: &BTreeMap<String, Vec<Promise>>, slack_ns: u64) -> RoleChecks {
    let (keeping, shared) = role_promise_keeping(promises);
    RoleChecks {
        keeping,
        shared,
        back: role_tokens_back(promises, slack_ns),
        moves: role_moves(promises),
    }
}

/// How often the roles changed hands: the tokens claimed, less one for each role claimed at all.
pub fn role_moves(promises: &BTreeMap<String, Vec<Promise>>) -> u64 {
    (promises.values())
        .map(|ps| {
            let tokens = ps.iter().map(|p| p.term).collect::<BTreeSet<u64>>();
            tokens.len().saturating_sub(1) as u64
        })
        .sum()
}

/// A role's token never goes back: no answer claims a role with a lower token than an answer
/// the client had before it asked. One node's answers to one client were asked one after the
/// other, so their order is exact; across nodes an answer received (`from_ns`) more than
/// `slack_ns` after another was asked after that one arrived (the poller's requests time out
/// well within the slack). Up to 20 lines.
pub fn role_tokens_back(promises: &BTreeMap<String, Vec<Promise>>, slack_ns: u64) -> Vec<String> {
    let mut out = Vec::new();
    for (role, ps) in promises {
        let mut ps = ps.clone();
        ps.sort_by_key(|p| p.from_ns);
        let mut top: BTreeMap<NodeId, u64> = BTreeMap::new();
        let (mut seen, mut before) = (0, 0u64);
        for q in &ps {
            while ps[seen].from_ns + slack_ns < q.from_ns {
                before = before.max(ps[seen].term);
                seen += 1;
            }
            let own = top.get(&q.node).copied().unwrap_or(0);
            let over = own.max(before);
            if q.term < over && out.len() < 20 {
                out.push(format!(
                    "role {role}: node {} claimed token {} after token {over} was claimed",
                    q.node, q.term
                ));
            }
            top.insert(q.node, own.max(q.term));
        }
    }
    out
}

/// Judges the claiming `answers` against each other and against `claims` (C6).
fn judge_promises(mut answers: Vec<Promise>, claims: &[ClaimInterval]) -> PromiseKeeping {
    answers.sort_by_key(|p| p.from_ns);
    let mut out = PromiseKeeping {
        promises: answers.iter().filter(|p| p.is_leased()).count() as u64,
        unleased: answers.iter().filter(|p| !p.is_leased()).count() as u64,
        first_unleased: answers.iter().find(|p| !p.is_leased()).copied(),
        ..PromiseKeeping::default()
    };
    let mut intrusions: Vec<(u64, u64)> = Vec::new();
    for p in answers.iter().filter(|p| p.is_leased()) {
        let mut first: Option<BrokenPromise> = None;
        let mut note = |intruder: NodeId, from_ns: u64, to_ns: u64| {
            intrusions.push((from_ns, to_ns));
            if first.is_none_or(|f| from_ns < f.from_ns) {
                first = Some(BrokenPromise {
                    promise: *p,
                    intruder,
                    from_ns,
                    to_ns,
                });
            }
        };
        for c in claims.iter().filter(|c| c.node != p.node) {
            let (from, to) = (c.from_ns.max(p.from_ns), c.to_ns.min(p.until_ns));
            if from < to {
                note(c.node, from, to);
            }
        }
        // Claiming answers of other nodes given inside the promise (sorted by their start).
        let inside = answers.partition_point(|q| q.from_ns < p.from_ns);
        for q in answers[inside..]
            .iter()
            .take_while(|q| q.from_ns < p.until_ns)
            .filter(|q| q.node != p.node)
        {
            // An answer without a lease (`until_ns` 0) intrudes for its instant.
            note(
                q.node,
                q.from_ns,
                q.until_ns.min(p.until_ns).max(q.from_ns + 1),
            );
        }
        out.broken.extend(first);
    }
    out.broken_ns = union_ns(&mut intrusions);
    out
}

/// The total length of the union of `[from, to)` intervals.
fn union_ns(spans: &mut [(u64, u64)]) -> u64 {
    spans.sort_unstable();
    let (mut total, mut reach) = (0u64, 0u64);
    for &(from, to) in spans.iter() {
        let from = from.max(reach);
        if to > from {
            total += to - from;
            reach = to;
        }
    }
    total
}

/// C3 over the window.
pub fn availability(log: &RunLog) -> Availability {
    Sweep::new(log).availability(log)
}

/// C4 over the window.
pub fn convergence(log: &RunLog) -> Convergence {
    Sweep::new(log).convergence(log)
}

/// The cost in elections: how many claim intervals began at or after `fault_ns` (or `start_ns`
/// for a run without faults) and before `end_ns`.
pub fn leader_changes(log: &RunLog) -> u64 {
    let from = log.fault_ns.unwrap_or(log.start_ns).max(log.start_ns);
    claim_intervals(log)
        .iter()
        .filter(|c| c.from_ns >= from && c.from_ns < log.end_ns)
        .count() as u64
}

/// Every claim interval that overlaps the window (or begins at its start), by node then time.
pub fn claim_intervals(log: &RunLog) -> Vec<ClaimInterval> {
    let end = log.end_ns.max(log.start_ns);
    let mut out = Vec::new();
    for node in members(log) {
        let track = Track::new(log, node);
        let mut open: Option<u64> = None;
        for &(t, snap) in &track.changes {
            match (open, snap.state.claims()) {
                (None, true) => open = Some(t),
                (Some(from), false) => {
                    open = None;
                    push_claim(&mut out, node, from, t, log.start_ns, end);
                }
                _ => {}
            }
        }
        if let Some(from) = open {
            push_claim(&mut out, node, from, end, log.start_ns, end);
        }
    }
    out
}

fn push_claim(
    out: &mut Vec<ClaimInterval>,
    node: NodeId,
    from: u64,
    to: u64,
    start: u64,
    end: u64,
) {
    if from < end && (to > start || from == start) {
        out.push(ClaimInterval {
            node,
            from_ns: from,
            to_ns: to.min(end),
        });
    }
}

/// Each member's state over the window as constant stretches (for the timeline).
pub fn node_segments(log: &RunLog) -> Vec<(NodeId, Vec<Segment>)> {
    let start = log.start_ns;
    let end = log.end_ns.max(start);
    members(log)
        .into_iter()
        .map(|node| {
            let track = Track::new(log, node);
            let mut cuts: Vec<u64> = track
                .changes
                .iter()
                .map(|c| c.0)
                .filter(|&t| t > start && t < end)
                .collect();
            cuts.insert(0, start);
            cuts.push(end);
            cuts.dedup();
            let mut segs: Vec<Segment> = Vec::new();
            for w in cuts.windows(2) {
                let snap = track.at(w[0]);
                match segs.last_mut() {
                    Some(last) if last.state == snap.state && last.paused == snap.paused => {
                        last.to_ns = w[1];
                    }
                    _ => segs.push(Segment {
                        from_ns: w[0],
                        to_ns: w[1],
                        state: snap.state,
                        paused: snap.paused,
                    }),
                }
            }
            (node, segs)
        })
        .collect()
}

/// The lease-bound reading of pauses, for the leased modes (quorum, mutex): a node paused while
/// leading that never ran again before it was killed or stopped, or before the window ended,
/// stops claiming `lease_ns` after the pause. Returns a copy of the log with a synthetic
/// follower event (same term, no leader) at that instant, ordered right after the node's last
/// event before the pause. The default reading, used when this is not called, keeps the claim
/// until the node's own next event (or its kill).
///
/// Why the cap is sound for a node that never ran again: a frozen process answers nothing and
/// renews nothing, so every claim it can be acted on is an answer it gave before the pause,
/// and that answer's promise ends by the pause plus the lease (C6 judges each promise with the
/// `lease_ms` the node really answered, so a node whose lease is longer than `lease_ns` is still
/// caught there). Without the cap, a leader paused and then killed would claim in the log until
/// its kill, long after any answer it gave had run out.
///
/// Why it is not applied to a node that was resumed (SIGCONT): then the node itself tells when
/// its claim ended. A leased engine records the end of a claim stamped at the claim's end
/// (`Lease::stamp_change`), also when it writes it after the pause, so the default reading
/// already ends a correct node's claim within the lease; a node that resumes and records no
/// end, or an end stamped later, is still claiming by its own word, and C2 must see that.
/// (Capping at the pause plus the lease regardless, as this did before, hid a node that
/// resumed still claiming while another node claimed meanwhile.)
pub fn cap_paused_claims(log: &RunLog, lease_ns: u64) -> RunLog {
    let mut out = log.clone();
    for node in members(log) {
        let track = Track::new(log, node);
        let events = node_events(log, node);
        for p in log
            .procs
            .iter()
            .filter(|p| p.node == node && p.kind == ProcKind::Pause)
        {
            let snap = track.at(p.t_ns);
            let LogState::Up(View {
                role: Role::Leader,
                term,
                ..
            }) = snap.state
            else {
                continue;
            };
            if !snap.paused {
                continue;
            }
            // What ended the pause: a resume (the node ran again and speaks for itself), a kill
            // or stop, or nothing before the window's end.
            let ended_by = log
                .procs
                .iter()
                .filter(|q| q.node == node && q.t_ns > p.t_ns && q.kind != ProcKind::Pause)
                .min_by_key(|q| (q.t_ns, q.kind == ProcKind::Resume));
            if ended_by.is_some_and(|q| q.kind != ProcKind::Kill && q.kind != ProcKind::Stop) {
                continue;
            }
            let cap = p.t_ns.saturating_add(lease_ns);
            let changed_before_cap = track.changes.iter().any(|&(t, _)| t > p.t_ns && t <= cap)
                || events.iter().any(|&(t, _)| t > p.t_ns && t <= cap);
            // The claim's last event before the pause: the synthetic end goes right after it.
            let Some(&(_, last)) = events.iter().rev().find(|&&(t, _)| t <= p.t_ns) else {
                continue;
            };
            if !changed_before_cap {
                out.events.push(Event {
                    seq: last.seq,
                    t_mono_ns: cap.max(last.t_mono_ns),
                    node_id: node,
                    view: View::without_leader(Role::Follower, term),
                });
            }
        }
    }
    out
}

/// Node `node`'s events in `seq` order (equal `seq`s by stamp: the synthetic end of a paused
/// claim shares the seq of the event before it), each with the instant it applies at: its stamp,
/// or the latest stamp before it when its own goes back (see the module docs).
///
/// A synthetic end written by the earlier [`cap_paused_claims`] (`seq = u64::MAX`, in run logs
/// stored before) goes by its stamp, after the events stamped at or before it: it had no place
/// in the node's order, and read last it would end a claim after the node's later events.
fn node_events(log: &RunLog, node: NodeId) -> Vec<(u64, &Event)> {
    let (mut evs, old_caps): (Vec<&Event>, Vec<&Event>) = log
        .events
        .iter()
        .filter(|e| e.node_id == node)
        .partition(|e| e.seq != u64::MAX);
    evs.sort_by_key(|e| (e.seq, e.t_mono_ns));
    for cap in old_caps {
        let at = evs.partition_point(|e| e.t_mono_ns <= cap.t_mono_ns);
        evs.insert(at, cap);
    }
    let mut latest = 0;
    evs.into_iter()
        .map(|e| {
            latest = latest.max(e.t_mono_ns);
            (latest, e)
        })
        .collect()
}

/// The event-log order check: every event of every member stamped before an event its node
/// recorded with a lower `seq`. The API promises that `t_mono_ns` never decreases with `seq`
/// (a node raises a stamp that would, `EventLog::record`), so any such event means the log is
/// not what the node decided, or not in the order it decided it; the checkers then read the
/// event at the latest stamp before it (module docs), and the run fails on this check alone.
pub fn time_goes_back(log: &RunLog) -> Vec<TimeBack> {
    let mut out = Vec::new();
    for node in members(log) {
        let mut latest: Option<&Event> = None;
        for (_, e) in node_events(log, node) {
            match latest {
                Some(l) if e.t_mono_ns < l.t_mono_ns => out.push(TimeBack {
                    node,
                    seq: e.seq,
                    t_mono_ns: e.t_mono_ns,
                    after_seq: l.seq,
                    after_t_mono_ns: l.t_mono_ns,
                }),
                _ => latest = Some(e),
            }
        }
    }
    out
}

/// The membership, sorted.
/// Whether each of `nodes` votes (every one when the log names no voters).
fn voting(log: &RunLog, nodes: &[NodeId]) -> Vec<bool> {
    nodes
        .iter()
        .map(|n| log.voters.is_empty() || log.voters.contains(n))
        .collect()
}

/// N1 (docs/safety.md, "Non-voters"): what the run's members that don't vote claimed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NonVoterClaims {
    pub nonvoters: Vec<NodeId>,
    /// Their events the check read (none: it judged nothing).
    pub judged: u64,
    /// Each claim of theirs, one line each: a claim interval of an event log, a claiming
    /// answer of `/v1/leader` (with or without a lease).
    pub claims: Vec<String>,
}

/// N1 over the run: `None` when every member votes.
pub fn nonvoter_claims(log: &RunLog) -> Option<NonVoterClaims> {
    if log.voters.is_empty() {
        return None;
    }
    let nonvoters: Vec<NodeId> = members(log)
        .into_iter()
        .filter(|n| !log.voters.contains(n))
        .collect();
    let theirs = |n: &NodeId| nonvoters.contains(n);
    let at = |ns: u64| ns.saturating_sub(log.start_ns) as f64 / 1e6;
    let mut claims: Vec<String> = claim_intervals(log)
        .iter()
        .filter(|c| theirs(&c.node))
        .map(|c| {
            let what = "told of its claim in its event log";
            format!("node {} {what} from {:.1} ms", c.node, at(c.from_ns))
        })
        .collect();
    claims.extend(log.promises.iter().filter(|p| theirs(&p.node)).map(|p| {
        let what = "answered a claim on /v1/leader";
        format!(
            "node {} {what}, term {}, at {:.1} ms",
            p.node,
            p.term,
            at(p.from_ns)
        )
    }));
    let judged = log.events.iter().filter(|e| theirs(&e.node_id)).count() as u64;
    Some(NonVoterClaims {
        nonvoters,
        judged,
        claims,
    })
}

fn members(log: &RunLog) -> Vec<NodeId> {
    let mut v: Vec<NodeId> = if log.nodes.is_empty() {
        log.events
            .iter()
            .map(|e| e.node_id)
            .chain(log.procs.iter().map(|p| p.node))
            .collect()
    } else {
        log.nodes.clone()
    };
    v.sort_unstable();
    v.dedup();
    v
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Snap {
    state: LogState,
    paused: bool,
}

const INITIAL: Snap = Snap {
    state: LogState::Unknown,
    paused: false,
};

/// One node's state changes over all time, in order (several may share an instant).
struct Track {
    changes: Vec<(u64, Snap)>,
    ignored_while_down: usize,
}

enum Change<'a> {
    Proc(ProcKind),
    Ev(&'a Event),
}

impl Track {
    fn new(log: &RunLog, node: NodeId) -> Track {
        // Events in the node's `seq` order, at the instants they apply (never going back), so
        // that sorting by instant keeps that order: the tie is the place in it.
        let mut items: Vec<(u64, u8, u64, Change)> = Vec::new();
        for (i, (at, e)) in node_events(log, node).into_iter().enumerate() {
            items.push((at, 1, i as u64, Change::Ev(e)));
        }
        for (i, p) in log.procs.iter().enumerate().filter(|(_, p)| p.node == node) {
            let rank = match p.kind {
                ProcKind::Start | ProcKind::Resume => 0,
                ProcKind::Kill | ProcKind::Stop | ProcKind::Pause => 2,
            };
            items.push((p.t_ns, rank, i as u64, Change::Proc(p.kind)));
        }
        items.sort_by_key(|&(t, rank, tie, _)| (t, rank, tie));

        let mut cur = INITIAL;
        let mut changes = Vec::new();
        let mut ignored_while_down = 0;
        for (t, _, _, change) in items {
            let mut next = cur;
            match change {
                Change::Ev(e) => {
                    if cur.state == LogState::Down {
                        ignored_while_down += 1;
                    } else {
                        next.state = LogState::Up(e.view);
                    }
                }
                Change::Proc(ProcKind::Kill | ProcKind::Stop) => {
                    next = Snap {
                        state: LogState::Down,
                        paused: false,
                    };
                }
                Change::Proc(ProcKind::Start) => {
                    if cur.state == LogState::Down {
                        next.state = LogState::Unknown;
                    }
                }
                Change::Proc(ProcKind::Pause) => {
                    if cur.state != LogState::Down {
                        next.paused = true;
                    }
                }
                Change::Proc(ProcKind::Resume) => next.paused = false,
            }
            if next != cur {
                changes.push((t, next));
                cur = next;
            }
        }
        Track {
            changes,
            ignored_while_down,
        }
    }

    /// The state at `t`: the last change at or before `t`.
    fn at(&self, t: u64) -> Snap {
        let n = self.changes.partition_point(|&(ct, _)| ct <= t);
        if n == 0 {
            INITIAL
        } else {
            self.changes[n - 1].1
        }
    }
}

/// A stretch `[from, to)` of the window during which nothing changes anywhere.
struct Slice {
    from: u64,
    to: u64,
    /// One per member, in `Sweep::nodes` order.
    snaps: Vec<Snap>,
    /// Who can talk to whom, or `None` when no fault window is in force.
    adj: Option<Vec<Vec<bool>>>,
}

impl Slice {
    fn claimants(&self) -> Vec<usize> {
        (0..self.snaps.len())
            .filter(|&i| self.snaps[i].state.claims())
            .collect()
    }

    fn running(&self, i: usize) -> bool {
        self.snaps[i].state != LogState::Down && !self.snaps[i].paused
    }

    fn reach(&self, i: usize) -> Vec<usize> {
        reach(self.adj.as_ref(), i, self.snaps.len())
    }

    /// Whether node `j` takes node `l` (index, with id `l_id`) to be the leader.
    fn reports(&self, j: usize, l: usize, l_id: NodeId) -> bool {
        if j == l {
            return self.snaps[j].state.claims();
        }
        matches!(self.snaps[j].state, LogState::Up(View { role, leader: Some(x), .. }) if x == l_id && role != Role::Leader)
    }
}

/// The window cut into slices, computed once per run.
pub(crate) struct Sweep {
    nodes: Vec<NodeId>,
    /// Whether each of `nodes` votes.
    voting: Vec<bool>,
    slices: Vec<Slice>,
    /// Events stamped while their node was down (ignored).
    pub(crate) ignored_while_down: usize,
    /// Events of nodes outside the membership.
    pub(crate) foreign_events: usize,
}

impl Sweep {
    pub(crate) fn new(log: &RunLog) -> Sweep {
        let nodes = members(log);
        let tracks: Vec<Track> = nodes.iter().map(|&n| Track::new(log, n)).collect();
        let start = log.start_ns;
        let end = log.end_ns.max(start);
        let inside = |t: u64| t > start && t < end;

        let mut points = vec![start, end];
        points.extend(
            tracks
                .iter()
                .flat_map(|tr| tr.changes.iter().map(|c| c.0))
                .filter(|&t| inside(t)),
        );
        points.extend(
            log.faults
                .iter()
                .flat_map(|w| [w.start_ns, w.end_ns])
                .chain(log.fault_ns)
                .chain(log.heal_ns)
                .filter(|&t| inside(t)),
        );
        points.sort_unstable();
        points.dedup();

        let slices = points
            .windows(2)
            .map(|w| Slice {
                from: w[0],
                to: w[1],
                snaps: tracks.iter().map(|tr| tr.at(w[0])).collect(),
                adj: connectivity(log, &nodes, w[0]),
            })
            .collect();
        let foreign_events = log
            .events
            .iter()
            .filter(|e| nodes.binary_search(&e.node_id).is_err())
            .count();
        Sweep {
            slices,
            ignored_while_down: tracks.iter().map(|t| t.ignored_while_down).sum(),
            foreign_events,
            voting: voting(log, &nodes),
            nodes,
        }
    }

    /// A strict majority of the voters.
    fn majority(&self) -> usize {
        self.voting.iter().filter(|v| **v).count() / 2 + 1
    }

    /// The voters in node `i`'s reach in slice `s`.
    fn votes(&self, s: &Slice, i: usize) -> usize {
        s.reach(i).into_iter().filter(|&j| self.voting[j]).count()
    }

    pub(crate) fn split_brain(&self) -> SplitBrain {
        let mut out = SplitBrain::default();
        for s in &self.slices {
            let claimants = s.claimants();
            out.max_leaders = out.max_leaders.max(claimants.len() as u32);
            if claimants.len() < 2 {
                continue;
            }
            let len = s.to - s.from;
            out.split_brain_ns += len;
            if claimants.iter().any(|&i| s.snaps[i].paused) {
                out.paused_ns += len;
            }
            let leaders: Vec<NodeId> = claimants.iter().map(|&i| self.nodes[i]).collect();
            match out.spans.last_mut() {
                Some(last) if last.to_ns == s.from && last.leaders == leaders => last.to_ns = s.to,
                _ => out.spans.push(SplitSpan {
                    from_ns: s.from,
                    to_ns: s.to,
                    leaders,
                }),
            }
        }
        out
    }

    pub(crate) fn availability(&self, log: &RunLog) -> Availability {
        let maj = self.majority();
        let from = log.fault_ns.unwrap_or(log.start_ns);
        let mut out = Availability::default();
        for s in &self.slices {
            let claimants = s.claimants();
            let reach_sizes: Vec<usize> = (0..self.nodes.len()).map(|i| self.votes(s, i)).collect();

            if claimants.is_empty() && s.to > from {
                out.leaderless_ns += s.to - s.from.max(from);
            }

            if s.adj.is_some() && reach_sizes.iter().any(|&r| r >= maj) {
                let served = claimants.iter().any(|&c| reach_sizes[c] >= maj);
                let acc = out.majority_leaderless_ns.get_or_insert(0);
                if !served {
                    *acc += s.to - s.from;
                }
            }

            if let Some(f) = log.fault_ns {
                if out.failover_ns.is_none() && s.to > f {
                    let need = if reach_sizes.iter().any(|&r| r >= maj) {
                        maj
                    } else {
                        reach_sizes.iter().copied().max().unwrap_or(0)
                    };
                    let agreed = claimants.iter().copied().find(|&l| {
                        s.running(l)
                            && reach_sizes[l] >= need
                            && s.reach(l)
                                .into_iter()
                                .filter(|&j| s.running(j))
                                .all(|j| s.reports(j, l, self.nodes[l]))
                    });
                    if let Some(l) = agreed {
                        out.failover_ns = Some(s.from.max(f) - f);
                        out.failover_leader = Some(self.nodes[l]);
                    }
                }
            }
        }
        out
    }

    /// The single agreed leader of a slice, if there is one (C4's condition).
    fn agreed_leader(&self, s: &Slice) -> Option<usize> {
        let claimants = s.claimants();
        if claimants.len() != 1 {
            return None;
        }
        let l = claimants[0];
        let all = s.running(l)
            && (0..self.nodes.len())
                .filter(|&j| s.running(j))
                .all(|j| s.reports(j, l, self.nodes[l]));
        all.then_some(l)
    }

    pub(crate) fn convergence(&self, log: &RunLog) -> Convergence {
        let baseline = log.faults.is_empty() && log.procs.is_empty() && log.fault_ns.is_none();
        let from = match log.heal_ns {
            Some(h) => h,
            None if baseline => log.start_ns,
            None => return Convergence::default(),
        };
        let mut out = Convergence {
            from_ns: Some(from),
            ..Convergence::default()
        };
        let mut cand: Option<(u64, usize)> = None;
        for s in self.slices.iter().filter(|s| s.to > from) {
            match (self.agreed_leader(s), cand) {
                (Some(l), Some((_, c))) if l == c => {}
                (Some(l), _) => cand = Some((s.from.max(from), l)),
                (None, _) => cand = None,
            }
            if let Some((t0, l)) = cand {
                if s.to - t0 >= STABLE_NS {
                    out.converge_ns = Some(t0 - from);
                    out.leader = Some(self.nodes[l]);
                    out.stable_ns = STABLE_NS;
                    return out;
                }
            }
        }
        // Held, but not for the whole STABLE_NS: not converged (see STABLE_NS); what held is
        // kept for the note.
        if let Some((t0, l)) = cand {
            out.leader = Some(self.nodes[l]);
            out.stable_ns = log.end_ns.max(log.start_ns) - t0;
        }
        out
    }
}

/// Node `i`'s reach among `n` nodes (see the module docs): itself and every node it can talk
/// to directly under `adj` (`None`: everyone). The one model of reach of every checker.
fn reach(adj: Option<&Vec<Vec<bool>>>, i: usize, n: usize) -> Vec<usize> {
    (0..n)
        .filter(|&j| j == i || adj.is_none_or(|a| a[i][j]))
        .collect()
}

/// Who can talk to whom at `t`, or `None` when no fault window is in force.
fn connectivity(log: &RunLog, nodes: &[NodeId], t: u64) -> Option<Vec<Vec<bool>>> {
    let mut in_force = log
        .faults
        .iter()
        .filter(|w| w.start_ns <= t && t < w.end_ns)
        .peekable();
    in_force.peek()?;
    let n = nodes.len();
    let mut adj = vec![vec![true; n]; n];
    for w in in_force.filter(|w| !w.groups.is_empty()) {
        for i in 0..n {
            for j in 0..n {
                let together = i == j
                    || w.groups
                        .iter()
                        .any(|g| g.contains(&nodes[i]) && g.contains(&nodes[j]));
                if !together {
                    adj[i][j] = false;
                }
            }
        }
    }
    Some(adj)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::chaos::fixtures::{
        all_follow, event as ev, follow, lead, log, proc_, promise, window, MS, S,
    };
    use crate::chaos::verdict::evaluate;

    #[test]
    fn a_claim_after_the_promise_keeps_it_and_answers_of_others_inside_break_it() {
        let mut l = log(
            S,
            vec![
                lead(0, 1, 1),
                follow(100 * MS, 1, 1, None),
                lead(200 * MS, 2, 2),
            ],
        );
        l.promises = vec![
            promise(1, 1, 50 * MS, 120 * MS),
            promise(2, 2, 200 * MS, 120 * MS),
        ];
        let c6 = promise_keeping(&l).unwrap();
        assert!(c6.broken.is_empty(), "{:?}", c6.broken);
        // An answer of node 3 inside node 2's promise, without any event log of its own.
        l.promises.push(promise(3, 2, 250 * MS, 10 * MS));
        let c6 = promise_keeping(&l).unwrap();
        assert_eq!(c6.broken.len(), 2, "each promise broken by the other");
        assert_eq!(c6.broken_ns, 10 * MS);
        assert!(
            promise_keeping(&log(S, vec![])).is_none(),
            "no promise: not judged"
        );
    }

    // ---- C2: overlaps that must be found ----

    #[test]
    fn c5_counts_terms_of_the_cut_off_and_leaders_deposed_by_a_heal() {
        let mut l = log(10_000, all_follow(0, 1, 3));
        l.events.push(lead(1, 1, 3));
        l.faults
            .push(window(1000, 5000, vec![vec![1, 2, 3], vec![4, 5]]));
        // Groups given as pairs that can talk: nodes 1, 2, 3 still reach a majority.
        let mut pairs = l.clone();
        pairs.faults = vec![window(
            1000,
            5000,
            vec![vec![1, 2], vec![1, 3], vec![2, 3], vec![4, 5]],
        )];
        pairs.events.push(ev(2000, 1, Role::Candidate, 9, None));
        assert_eq!(disruption(&pairs).minority_terms_gained, 0);
        // Loss or delay on every link is no partition: nobody is cut off.
        let mut lossy = l.clone();
        lossy.faults = vec![window(1000, 5000, vec![])];
        assert_eq!(disruption(&lossy).minority_terms_gained, 0);
        // Node 4 campaigns twice while cut off (no pre-vote): terms 4 and 5.
        l.events.push(ev(2000, 4, Role::Candidate, 4, None));
        l.events.push(ev(3000, 4, Role::Candidate, 5, None));
        let d = disruption(&l);
        assert_eq!(d.minority_terms_gained, 2);
        assert_eq!(d.heal_leader_changes, Some(0), "node 1 still leads");
        // A node that can receive (a one-way cut) and learns the majority's new term gains
        // nothing of its own.
        let mut learns = log(10_000, all_follow(0, 1, 3));
        learns.events.push(lead(1, 1, 3));
        learns
            .faults
            .push(window(1000, 5000, vec![vec![1, 2, 3], vec![4, 5]]));
        learns.events.push(lead(2000, 2, 4));
        learns.events.push(follow(2100, 4, 4, Some(2)));
        assert_eq!(disruption(&learns).minority_terms_gained, 0);
        // On heal, node 4's term 5 deposes node 1: node 2 is elected in term 6.
        l.events.push(follow(5100, 1, 5, None));
        l.events.push(lead(5200, 2, 6));
        let d = disruption(&l);
        assert_eq!(d.heal_leader_changes, Some(1));
        // Without a claimant at the window's end there is nothing to depose.
        let mut quiet = log(10_000, (1..=5).map(|n| follow(0, n, 3, None)).collect());
        quiet
            .faults
            .push(window(1000, 5000, vec![vec![1, 2, 3], vec![4, 5]]));
        assert_eq!(disruption(&quiet).heal_leader_changes, None);
    }

    #[test]
    fn overlap_of_one_ms_is_found() {
        let l = log(
            100 * MS,
            vec![
                lead(0, 1, 1),
                follow(10 * MS, 1, 2, Some(2)),
                lead(9 * MS, 2, 2),
            ],
        );
        let sb = split_brain(&l);
        assert_eq!(sb.split_brain_ns, MS);
        assert_eq!(sb.max_leaders, 2);
        assert_eq!(
            sb.spans,
            vec![SplitSpan {
                from_ns: 9 * MS,
                to_ns: 10 * MS,
                leaders: vec![1, 2]
            }]
        );
    }

    #[test]
    fn three_way_overlap_gives_three_leaders() {
        let l = log(
            100 * MS,
            vec![
                lead(0, 1, 1),
                lead(20 * MS, 2, 2),
                lead(30 * MS, 3, 3),
                follow(40 * MS, 1, 3, Some(3)),
                follow(50 * MS, 2, 3, Some(3)),
            ],
        );
        let sb = split_brain(&l);
        assert_eq!(sb.max_leaders, 3);
        // 1&2 from 20 to 50 (1 until 40), 3 joins at 30: >=2 claimants on [20, 50).
        assert_eq!(sb.split_brain_ns, 30 * MS);
    }

    #[test]
    fn kill_mid_claim_ends_the_overlap() {
        let mut l = log(100 * MS, vec![lead(0, 1, 1), lead(5 * MS, 2, 2)]);
        l.procs = vec![proc_(7 * MS, 1, ProcKind::Kill)];
        let sb = split_brain(&l);
        assert_eq!(sb.split_brain_ns, 2 * MS);
        assert_eq!(sb.max_leaders, 2);
    }

    #[test]
    fn events_in_any_order_and_state_carried_into_the_window() {
        let mut l = log(
            100 * MS,
            vec![
                follow(60 * MS, 2, 3, Some(1)),
                lead(50 * MS, 1, 3),
                lead(0, 2, 2),
            ],
        );
        l.start_ns = 10 * MS;
        let sb = split_brain(&l);
        assert_eq!(sb.split_brain_ns, 10 * MS);
    }

    /// Node 1 leads term 1 and is paused from 10 to 69 ms; node 2 leads term 2 from 40 ms; node
    /// 1 follows it from 70 ms.
    fn paused_leader_log() -> RunLog {
        let mut l = log(
            100 * MS,
            vec![
                lead(0, 1, 1),
                lead(40 * MS, 2, 2),
                follow(70 * MS, 1, 2, Some(2)),
            ],
        );
        l.procs = vec![
            proc_(10 * MS, 1, ProcKind::Pause),
            proc_(69 * MS, 1, ProcKind::Resume),
        ];
        l
    }

    #[test]
    fn paused_claimant_keeps_claiming() {
        let l = paused_leader_log();
        let sb = split_brain(&l);
        assert_eq!(sb.split_brain_ns, 30 * MS);
        assert_eq!(sb.paused_ns, 29 * MS);
    }

    #[test]
    fn lease_cap_ends_the_claim_of_a_leader_that_never_ran_again() {
        // Killed at 69 ms while still paused: it never ran again.
        let mut l = paused_leader_log();
        l.procs[1].kind = ProcKind::Kill;
        assert_eq!(split_brain(&l).split_brain_ns, 29 * MS, "uncapped");
        let capped = cap_paused_claims(&l, 24 * MS);
        assert_eq!(split_brain(&capped).split_brain_ns, 0);
        // Killed before its lease ran out: the kill ends the claim, nothing inserted.
        let long = cap_paused_claims(&l, 60 * MS);
        assert_eq!(long.events.len(), l.events.len());
        // Never resumed before the window's end: capped too.
        l.procs.truncate(1);
        assert_eq!(
            split_brain(&cap_paused_claims(&l, 24 * MS)).split_brain_ns,
            0
        );
    }

    /// A leader that resumes speaks for itself: node 1 resumed at 69 ms still claiming and said
    /// it stopped only at 70 ms, so it claimed beside node 2 from 40 ms, lease or not. (The cap
    /// at the pause plus the lease used to hide this.)
    #[test]
    fn a_resumed_leader_is_judged_by_its_own_events() {
        let l = paused_leader_log();
        let capped = cap_paused_claims(&l, 24 * MS);
        assert_eq!(capped.events.len(), l.events.len(), "nothing inserted");
        assert_eq!(split_brain(&capped).split_brain_ns, 30 * MS);
        // A leased node records the end of its claim stamped at the claim's end, also when it
        // writes it after the resume: the claim ends there, without any cap.
        let mut own_end = paused_leader_log();
        own_end.events[2] = Event {
            seq: 70 * MS,
            ..follow(30 * MS, 1, 2, Some(2))
        };
        assert_eq!(split_brain(&own_end).split_brain_ns, 0);
        assert_eq!(
            split_brain(&cap_paused_claims(&own_end, 24 * MS)).split_brain_ns,
            0
        );
    }

    /// A run log stored before: the cap's synthetic end had `seq = u64::MAX`. It still ends the
    /// claim at its stamp, and is no time going back, although the node restarted later.
    #[test]
    fn an_old_synthetic_cap_goes_by_its_stamp() {
        let mut l = paused_leader_log();
        l.procs = vec![
            proc_(10 * MS, 1, ProcKind::Pause),
            proc_(69 * MS, 1, ProcKind::Kill),
            proc_(80 * MS, 1, ProcKind::Start),
        ];
        l.events[2] = follow(90 * MS, 1, 2, Some(2));
        l.events.push(Event {
            seq: u64::MAX,
            ..follow(34 * MS, 1, 1, None)
        });
        assert!(time_goes_back(&l).is_empty());
        assert_eq!(split_brain(&l).split_brain_ns, 0);
    }

    // ---- The event-log order ----

    /// Node 2's seq 3 is stamped before its seq 2: the order check names it, and the other
    /// checkers read node 2's events in seq order (its candidacy at 300 ms ends at once), not
    /// by stamp (where the candidacy would last to the end).
    #[test]
    fn events_are_read_in_seq_order_and_time_going_back_is_found() {
        let mut events = all_follow(0, 1, 1);
        events.push(Event {
            seq: 2,
            ..ev(300 * MS, 2, Role::Candidate, 2, None)
        });
        events.push(Event {
            seq: 3,
            ..follow(250 * MS, 2, 2, Some(1))
        });
        let l = log(2 * S, events);
        assert_eq!(
            time_goes_back(&l),
            vec![TimeBack {
                node: 2,
                seq: 3,
                t_mono_ns: 250 * MS,
                after_seq: 2,
                after_t_mono_ns: 300 * MS
            }]
        );
        let c = convergence(&l);
        assert_eq!((c.converge_ns, c.leader), (Some(0), Some(1)));
        let segs = node_segments(&l);
        assert_eq!(
            segs[1].1.last().unwrap().state,
            LogState::Up(View {
                role: Role::Follower,
                term: 2,
                leader: Some(1)
            })
        );
        assert!(time_goes_back(&log(S, all_follow(0, 1, 1))).is_empty());
    }

    // ---- C2: near-misses that must not be counted ----

    #[test]
    fn claim_ending_exactly_when_the_next_starts_is_not_split_brain() {
        let l = log(
            100 * MS,
            vec![
                lead(0, 1, 1),
                follow(10 * MS, 1, 2, Some(2)),
                lead(10 * MS, 2, 2),
            ],
        );
        let sb = split_brain(&l);
        assert_eq!(sb.split_brain_ns, 0);
        assert_eq!(sb.max_leaders, 1);
        assert!(sb.spans.is_empty());
    }

    #[test]
    fn killed_leaders_stale_event_is_not_a_claim() {
        let mut l = log(100 * MS, vec![lead(0, 1, 1), lead(8 * MS, 2, 2)]);
        l.procs = vec![proc_(5 * MS, 1, ProcKind::Kill)];
        l.fault_ns = Some(5 * MS);
        assert_eq!(split_brain(&l).split_brain_ns, 0);
        assert_eq!(availability(&l).leaderless_ns, 3 * MS);
    }

    #[test]
    fn events_while_down_are_ignored_and_restart_is_unknown_until_first_event() {
        let mut l = log(
            100 * MS,
            vec![lead(0, 1, 1), lead(6 * MS, 1, 1), lead(50 * MS, 2, 2)],
        );
        l.procs = vec![
            proc_(5 * MS, 1, ProcKind::Kill),
            proc_(20 * MS, 1, ProcKind::Start),
        ];
        let segs = node_segments(&l);
        let n1 = &segs[0].1;
        assert_eq!(n1.len(), 3);
        assert_eq!(n1[1].state, LogState::Down);
        assert_eq!((n1[2].from_ns, n1[2].state), (20 * MS, LogState::Unknown));
        assert_eq!(split_brain(&l).split_brain_ns, 0);
        let r = evaluate(&l, "bully", "S1", "app", 1, 1000);
        assert!(r.notes.iter().any(|n| n.contains("1 events stamped while")));
    }

    #[test]
    fn start_with_event_at_the_same_instant_takes_the_event() {
        let mut l = log(
            100 * MS,
            vec![lead(0, 1, 1), follow(20 * MS, 1, 1, Some(2))],
        );
        l.procs = vec![
            proc_(5 * MS, 1, ProcKind::Kill),
            proc_(20 * MS, 1, ProcKind::Start),
        ];
        let segs = node_segments(&l);
        assert_eq!(
            segs[0].1.last().unwrap().state,
            LogState::Up(View {
                role: Role::Follower,
                term: 1,
                leader: Some(2)
            })
        );
    }

    #[test]
    fn re_election_while_leading_is_one_claim() {
        let mut l = log(
            100 * MS,
            vec![
                lead(0, 1, 1),
                lead(20 * MS, 1, 2),
                follow(30 * MS, 1, 2, Some(2)),
                lead(30 * MS, 2, 3),
            ],
        );
        l.start_ns = 10 * MS;
        let claims = claim_intervals(&l);
        assert_eq!(
            claims,
            vec![
                ClaimInterval {
                    node: 1,
                    from_ns: 0,
                    to_ns: 30 * MS
                },
                ClaimInterval {
                    node: 2,
                    from_ns: 30 * MS,
                    to_ns: 100 * MS
                },
            ]
        );
        // The claim already running at the window's start is not a change.
        assert_eq!(leader_changes(&l), 1);
    }

    // ---- C1 ----

    #[test]
    fn same_node_leading_a_term_twice_is_safe() {
        let mut l = log(
            100 * MS,
            vec![lead(0, 1, 1), lead(10 * MS, 1, 1), lead(20 * MS, 2, 2)],
        );
        l.leased = true;
        let s = election_safety(&l).unwrap();
        assert!(s.safe);
        assert!(s.conflicts.is_empty());
    }

    #[test]
    fn two_nodes_leading_one_term_is_unsafe() {
        let mut l = log(
            100 * MS,
            vec![
                lead(0, 1, 1),
                lead(10 * MS, 2, 3),
                follow(20 * MS, 2, 3, None),
                lead(30 * MS, 4, 3),
                lead(40 * MS, 5, 4),
            ],
        );
        l.leased = true;
        let s = election_safety(&l).unwrap();
        assert!(!s.safe);
        assert_eq!(
            s.conflicts,
            vec![TermConflict {
                term: 3,
                nodes: vec![2, 4]
            }]
        );
        l.leased = false;
        assert_eq!(election_safety(&l), None);
    }

    // ---- C3 ----

    #[test]
    fn failover_after_leader_crash() {
        let mut events = all_follow(0, 1, 1);
        events.push(ev(300 * MS, 2, Role::Candidate, 2, None));
        events.push(lead(320 * MS, 2, 2));
        for n in 3..=5 {
            events.push(follow(330 * MS + n * MS, n, 2, Some(2)));
        }
        let mut l = log(2 * S, events);
        l.fault_ns = Some(100 * MS);
        l.procs = vec![proc_(100 * MS, 1, ProcKind::Kill)];
        let a = availability(&l);
        assert_eq!(a.leaderless_ns, 220 * MS);
        assert_eq!(a.failover_ns, Some(235 * MS));
        assert_eq!(a.failover_leader, Some(2));
        assert_eq!(a.majority_leaderless_ns, None);
        assert_eq!(leader_changes(&l), 1);
    }

    #[test]
    fn isolated_leader_does_not_count_as_failover() {
        // Leader 1 cut off at 100 ms; it keeps claiming (bully); 2..5 elect 5 at 400 ms.
        let mut events = all_follow(0, 1, 1);
        events.push(lead(400 * MS, 5, 2));
        for n in 2..=4 {
            events.push(follow(410 * MS, n, 2, Some(5)));
        }
        let mut l = log(2 * S, events);
        l.fault_ns = Some(100 * MS);
        l.faults = vec![window(100 * MS, S, vec![vec![1], vec![2, 3, 4, 5]])];
        let a = availability(&l);
        assert_eq!(a.failover_ns, Some(310 * MS));
        assert_eq!(a.failover_leader, Some(5));
        // The majority side had no leader from 100 ms to 400 ms.
        assert_eq!(a.majority_leaderless_ns, Some(300 * MS));
        // Somebody always claimed.
        assert_eq!(a.leaderless_ns, 0);
        // 1 never steps down in this log; 5 claims from 400 ms to the end.
        assert_eq!(split_brain(&l).split_brain_ns, 1600 * MS);
    }

    #[test]
    fn follower_isolation_needs_no_failover() {
        let mut l = log(2 * S, all_follow(0, 1, 1));
        l.fault_ns = Some(100 * MS);
        l.faults = vec![window(100 * MS, S, vec![vec![5], vec![1, 2, 3, 4]])];
        let a = availability(&l);
        assert_eq!(a.failover_ns, Some(0));
        assert_eq!(a.majority_leaderless_ns, Some(0));
    }

    #[test]
    fn no_majority_anywhere_gives_null_majority_leaderless() {
        let mut l = log(2 * S, all_follow(0, 1, 1));
        l.fault_ns = Some(100 * MS);
        l.faults = vec![window(100 * MS, S, vec![vec![1, 2], vec![3, 4], vec![5]])];
        let a = availability(&l);
        assert_eq!(a.majority_leaderless_ns, None);
        // Leader 1's side {1,2} is one of the largest sides and agrees: no failover needed.
        assert_eq!(a.failover_ns, Some(0));
    }

    #[test]
    fn paused_leader_is_not_a_failover() {
        let mut events = all_follow(0, 1, 1);
        events.push(lead(500 * MS, 3, 2));
        for n in [2, 4, 5] {
            events.push(follow(510 * MS, n, 2, Some(3)));
        }
        let mut l = log(3 * S, events);
        l.fault_ns = Some(100 * MS);
        l.procs = vec![proc_(100 * MS, 1, ProcKind::Pause)];
        let a = availability(&l);
        assert_eq!(a.failover_ns, Some(410 * MS));
        assert_eq!(a.failover_leader, Some(3));
    }

    #[test]
    fn bridge_leader_reaching_a_majority_counts() {
        let mut l = log(2 * S, all_follow(0, 1, 1));
        l.fault_ns = Some(100 * MS);
        l.faults = vec![window(100 * MS, S, vec![vec![1, 2, 3], vec![3, 4, 5]])];
        let a = availability(&l);
        // 1 reaches {1,2,3}, a majority, and they agree.
        assert_eq!(a.failover_ns, Some(0));
        assert_eq!(a.majority_leaderless_ns, Some(0));
    }

    // ---- C4 ----

    #[test]
    fn convergence_needs_one_stable_second() {
        let mut events = all_follow(0, 1, 1);
        // After heal at 1 s: node 5 claims at 1.2 s, everyone follows at 1.3 s, but 5 steps
        // down at 1.8 s; 1 leads again at 2.0 s and everyone agrees at 2.1 s for good.
        events.push(lead(1200 * MS, 5, 2));
        for n in 1..=4 {
            events.push(follow(1300 * MS, n, 2, Some(5)));
        }
        events.push(follow(1800 * MS, 5, 2, None));
        events.push(lead(2000 * MS, 1, 3));
        for n in 2..=5 {
            events.push(follow(2100 * MS, n, 3, Some(1)));
        }
        let mut l = log(5 * S, events);
        l.fault_ns = Some(500 * MS);
        l.heal_ns = Some(S);
        l.faults = vec![window(500 * MS, S, vec![vec![5], vec![1, 2, 3, 4]])];
        let c = convergence(&l);
        assert_eq!(c.converge_ns, Some(1100 * MS));
        assert_eq!(c.leader, Some(1));
        assert_eq!(c.stable_ns, STABLE_NS);
    }

    #[test]
    fn convergence_ignores_down_nodes_but_waits_for_restarted_ones() {
        let mut events = all_follow(0, 1, 1);
        events.push(follow(1500 * MS, 3, 1, Some(1)));
        let mut l = log(5 * S, events);
        l.fault_ns = Some(100 * MS);
        l.procs = vec![
            proc_(100 * MS, 3, ProcKind::Kill),
            proc_(100 * MS, 4, ProcKind::Kill),
            proc_(S, 3, ProcKind::Start),
        ];
        l.heal_ns = Some(S);
        // 4 stays down (not counted); 3 is up but unknown until 1.5 s.
        assert_eq!(convergence(&l).converge_ns, Some(500 * MS));
    }

    #[test]
    fn two_claimants_never_converge() {
        let mut events = all_follow(0, 1, 1);
        events.push(lead(200 * MS, 5, 2));
        let mut l = log(3 * S, events);
        l.fault_ns = Some(100 * MS);
        l.heal_ns = Some(S);
        assert_eq!(convergence(&l).converge_ns, None);
        let r = evaluate(&l, "bully", "S4", "app", 7, 2000);
        assert!(!r.passed);
        assert_eq!(r.split_brain_ms, 2800.0);
        assert!(r.notes.iter().any(|n| n.contains("never converged")));
    }

    #[test]
    fn agreement_cut_short_by_the_window_end_is_no_convergence() {
        let mut events = all_follow(0, 1, 1);
        events.push(follow(200 * MS, 2, 1, None));
        events.push(follow(1400 * MS, 2, 1, Some(1)));
        let mut l = log(1500 * MS, events);
        l.fault_ns = Some(100 * MS);
        l.heal_ns = Some(S);
        let c = convergence(&l);
        assert_eq!(c.converge_ns, None);
        assert_eq!((c.leader, c.stable_ns), (Some(1), 100 * MS));
        // Given the whole second, it converges 400 ms after the heal.
        l.end_ns = 2400 * MS;
        let c = convergence(&l);
        assert_eq!((c.converge_ns, c.stable_ns), (Some(400 * MS), STABLE_NS));
    }

    // ---- named roles ----

    /// Promises on one role named `r`.
    fn on_role(r: &str, ps: Vec<Promise>) -> BTreeMap<String, Vec<Promise>> {
        BTreeMap::from([(r.to_string(), ps)])
    }

    #[test]
    fn a_role_token_that_goes_back_is_caught_on_one_node_and_across_nodes() {
        // Node 2 holds token 5, then answers token 3: back, on one node's own answers.
        let own = on_role(
            "a",
            vec![
                promise(2, 5, 100 * MS, 50 * MS),
                promise(2, 3, 400 * MS, 50 * MS),
            ],
        );
        assert_eq!(role_tokens_back(&own, S).len(), 1);
        // Node 3 answers token 3 two seconds after node 2's token 5: back across nodes.
        let across = on_role(
            "a",
            vec![
                promise(2, 5, 100 * MS, 50 * MS),
                promise(3, 3, 2100 * MS, 50 * MS),
            ],
        );
        let back = role_tokens_back(&across, S);
        assert_eq!(back.len(), 1, "{back:?}");
        assert!(
            back[0].contains("node 3 claimed token 3 after token 5"),
            "{back:?}"
        );
        // Within the slack the order of two nodes' answers is not known: nothing said.
        let close = on_role(
            "a",
            vec![
                promise(2, 5, 100 * MS, 50 * MS),
                promise(3, 3, 600 * MS, 50 * MS),
            ],
        );
        assert!(role_tokens_back(&close, S).is_empty());
        // Tokens that grow are fine, and a role's hand-overs are counted.
        let grows = on_role(
            "a",
            vec![
                promise(2, 3, 100 * MS, 50 * MS),
                promise(3, 5, 2100 * MS, 50 * MS),
                promise(3, 5, 2200 * MS, 50 * MS),
            ],
        );
        let r = role_checks(&grows, S);
        assert!(r.back.is_empty() && r.shared.is_empty() && r.keeping.broken.is_empty());
        assert_eq!((r.moves, r.keeping.promises), (1, 3));
    }

    #[test]
    fn the_verdict_fails_a_run_on_any_role_check() {
        let mut l = log(3 * S, all_follow(0, 1, 1));
        l.leased = true;
        l.promises = vec![promise(1, 1, 50 * MS, 150 * MS)];
        l.events.push(lead(0, 1, 1));
        let kept = on_role("a", vec![promise(2, 3, 100 * MS, 50 * MS)]);
        let cases = [
            (kept.clone(), true),
            // No role ever claimed: nothing judged.
            (on_role("a", Vec::new()), false),
            // Node 3 claims inside node 2's promise on the role.
            (
                on_role(
                    "a",
                    vec![
                        promise(2, 3, 100 * MS, 50 * MS),
                        promise(3, 4, 120 * MS, 50 * MS),
                    ],
                ),
                false,
            ),
            // One token, two nodes.
            (
                on_role(
                    "a",
                    vec![
                        promise(2, 3, 100 * MS, 50 * MS),
                        promise(3, 3, 900 * MS, 50 * MS),
                    ],
                ),
                false,
            ),
        ];
        let base = evaluate(&l, "quorum", "S1", "app", 1, 2000);
        for (roles, pass) in cases {
            let mut l = l.clone();
            l.role_promises = roles;
            let r = evaluate(&l, "quorum", "S1", "app", 1, 2000);
            assert_eq!(r.passed, pass && base.passed, "{r:?}");
            assert!(r.role_promises.is_some(), "{r:?}");
        }
        assert!(base.role_promises.is_none());
    }

    // ---- evaluate ----
}
