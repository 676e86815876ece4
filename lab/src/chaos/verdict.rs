//! One run's verdict: [`evaluate`] folds the checkers' results over a [`RunLog`] into a
//! [`RunResult`], the `report.json` row of `docs/design/chaos.md`, with notes saying why a run
//! failed and what was odd in its log.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use electd_client::NodeId;

use super::checkers::{
    disruption, election_safety, leader_changes, nonvoter_claims, promise_keeping, role_checks,
    time_goes_back, Convergence, ElectionSafety, NonVoterClaims, PromiseKeeping, RoleChecks,
    SplitBrain, Sweep, TimeBack, STABLE_NS,
};
use super::record::RunLog;
use electd::clock::ms;

/// One run's verdict: the `report.json` row of `docs/design/chaos.md`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    pub mode: String,
    pub scenario: String,
    pub layer: String,
    pub seed: u64,
    /// Rounded up to 0.1 ms, so that any overlap at all shows as non-zero.
    pub split_brain_ms: f64,
    pub max_leaders: u32,
    pub leaderless_ms: f64,
    /// `null` when no majority side existed under a fault window.
    pub majority_leaderless_ms: Option<f64>,
    pub failover_ms: Option<f64>,
    pub converge_ms: Option<f64>,
    pub leader_changes: u64,
    /// Peer messages sent during the run, by message type; filled by the caller.
    pub messages: BTreeMap<String, u64>,
    /// Cost in steady state: peer messages per second by type, over a fault-free second with an
    /// agreed leader before the scenario began; filled by the caller.
    #[serde(default)]
    pub steady_msgs_per_s: BTreeMap<String, f64>,
    /// Cost of an election: messages sent from the first fault to the end beyond the steady
    /// rate, by type, divided by the leader changes; `null` without a leader change. Counters
    /// of killed processes are lost, so runs with kills undercount.
    #[serde(default)]
    pub msgs_per_election: Option<BTreeMap<String, f64>>,
    /// C5: terms gained by nodes cut off from every majority while they were cut off (summed
    /// over the nodes and fault windows). With pre-vote, quorum mode gains none.
    #[serde(default)]
    pub minority_terms_gained: u64,
    /// C5: leaders of a higher term than the one claiming when a fault window ended, elected
    /// before the next window (a healed node deposing a healthy leader); `null` when no node
    /// claimed at any window's end.
    #[serde(default)]
    pub heal_leader_changes: Option<u64>,
    /// C6: the claiming answers a client received during the run; `null` when none was
    /// recorded (bully and ring answer without a lease).
    #[serde(default)]
    pub promises: Option<u64>,
    /// C6: of those, the promises another node broke by claiming inside them.
    #[serde(default)]
    pub promises_broken: Option<u64>,
    /// C6: how long some promise was broken, rounded up to 0.1 ms.
    #[serde(default)]
    pub promise_broken_ms: Option<f64>,
    /// C6: claiming answers without `lease_ms`; in a leased mode any fails the run.
    #[serde(default)]
    pub unleased_answers: u64,
    /// Named roles (issue 49): the claiming answers clients received on them; `null` when the
    /// run stood no roles (every mode but quorum).
    #[serde(default)]
    pub role_promises: Option<u64>,
    /// Of those, the promises another node broke by claiming the role inside them (C6 per role).
    #[serde(default)]
    pub role_promises_broken: Option<u64>,
    /// How long two nodes' claims on one role overlapped (C2 per role), rounded up to 0.1 ms.
    #[serde(default)]
    pub role_broken_ms: Option<f64>,
    /// How often a role changed hands during the run.
    #[serde(default)]
    pub role_moves: Option<u64>,
    /// Events stamped before an earlier event of their node (`t_mono_ns` going back with
    /// `seq`); any fails the run.
    #[serde(default)]
    pub time_goes_back: u64,
    /// N1: claims of members that don't vote (their event logs and `/v1/leader` answers);
    /// `null` when every member votes. Any fails the run.
    #[serde(default)]
    pub nonvoter_claims: Option<u64>,
    /// C1; `null` outside quorum mode.
    pub election_safety: Option<bool>,
    pub passed: bool,
    /// Why a run failed, and anything odd in its log.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Why the run could not be done (no root for iptables, …); then `passed` is false and the
    /// numbers mean nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
}

impl RunResult {
    /// A row for a run that could not be done.
    pub fn skipped(mode: &str, scenario: &str, layer: &str, seed: u64, reason: &str) -> RunResult {
        RunResult {
            mode: mode.to_string(),
            scenario: scenario.to_string(),
            layer: layer.to_string(),
            seed,
            split_brain_ms: 0.0,
            max_leaders: 0,
            leaderless_ms: 0.0,
            majority_leaderless_ms: None,
            failover_ms: None,
            converge_ms: None,
            leader_changes: 0,
            messages: BTreeMap::new(),
            steady_msgs_per_s: BTreeMap::new(),
            msgs_per_election: None,
            minority_terms_gained: 0,
            heal_leader_changes: None,
            promises: None,
            promises_broken: None,
            promise_broken_ms: None,
            unleased_answers: 0,
            role_promises: None,
            role_promises_broken: None,
            role_broken_ms: None,
            role_moves: None,
            time_goes_back: 0,
            nonvoter_claims: None,
            election_safety: None,
            passed: false,
            notes: Vec::new(),
            skipped: Some(reason.to_string()),
        }
    }

    /// All peer messages of the run.
    pub fn messages_total(&self) -> u64 {
        self.messages.values().sum()
    }

    /// Fills the cost fields from three samples of the cluster's sent-message counters: `a`
    /// and `b` bracket the steady second (`steady_s` long), `end` is taken at the end of the run,
    /// `rest_s` after `b`. Per type, the excess over the steady rate is never below zero.
    pub fn set_cost(
        &mut self,
        a: &BTreeMap<String, u64>,
        b: &BTreeMap<String, u64>,
        end: &BTreeMap<String, u64>,
        steady_s: f64,
        rest_s: f64,
    ) {
        let get = |m: &BTreeMap<String, u64>, k: &str| m.get(k).copied().unwrap_or(0) as f64;
        let kinds: std::collections::BTreeSet<&String> =
            a.keys().chain(b.keys()).chain(end.keys()).collect();
        self.steady_msgs_per_s.clear();
        let mut excess = BTreeMap::new();
        for k in kinds {
            let rate = if steady_s > 0.0 {
                ((get(b, k) - get(a, k)) / steady_s).max(0.0)
            } else {
                0.0
            };
            self.steady_msgs_per_s.insert(k.clone(), round1(rate));
            let extra = (get(end, k) - get(b, k) - rate * rest_s).max(0.0);
            excess.insert(k.clone(), extra);
        }
        self.msgs_per_election = (self.leader_changes > 0).then(|| {
            excess
                .into_iter()
                .map(|(k, v)| (k, round1(v / self.leader_changes as f64)))
                .collect()
        });
    }
}

/// How a note of a failed harness step begins (it fails the run; the run's log does not hold
/// it, so a rejudged run keeps it).
pub const HARNESS_NOTE: &str = "harness: ";

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// Judges one run. `passed` is, in the lease-bound modes (quorum, mutex), no split brain at
/// all, C1 holding, at least one promise observed and none broken, no claiming answer without
/// a lease, and convergence within `converge_bound_ms`; in bully, ring and invitation mode only
/// the convergence (their split brain is expected under partitions: it is reported, not
/// failed). In every mode an event log whose time goes back fails the run. Which mode it is
/// comes from `log.leased`; `mode` is a label.
///
/// A leased run without a single promise fails because C6 then judged nothing: the poller
/// asks every node throughout the run, so a run in which no answer bounded a claim either never
/// had a leader answer or lost the client, and passing it would pass what was not checked.
pub fn evaluate(
    log: &RunLog,
    mode: &str,
    scenario: &str,
    layer: &str,
    seed: u64,
    converge_bound_ms: u64,
) -> RunResult {
    let sweep = Sweep::new(log);
    let safety = election_safety(log);
    let split = sweep.split_brain();
    let avail = sweep.availability(log);
    let conv = sweep.convergence(log);
    let changes = leader_changes(log);
    let c5 = disruption(log);
    let c6 = promise_keeping(log);
    let back = time_goes_back(log);

    let mut notes = order_notes(&back, log.start_ns);
    notes.extend(safety_notes(safety.as_ref()));
    notes.extend(split_notes(&split, log.start_ns));
    notes.extend(promise_notes(c6.as_ref(), log.start_ns));
    let judged = c6.as_ref().map_or(0, |p| p.promises);
    let unleased = c6.as_ref().map_or(0, |p| p.unleased);
    if log.leased {
        notes.extend(lease_notes(c6.as_ref(), log.start_ns));
    }
    let bound_ns = converge_bound_ms.saturating_mul(1_000_000);
    let converged = matches!(conv.converge_ns, Some(c) if c <= bound_ns);
    notes.extend(convergence_notes(&conv, converge_bound_ms));
    notes.extend(log_notes(&sweep, log, mode));
    let unread = log.dropped.problems();
    notes.extend(unread.iter().map(|p| format!("not read: {p}")));
    let roles = (!log.role_promises.is_empty())
        .then(|| role_checks(&log.role_promises, ms(ROLE_ORDER_SLACK_MS)));
    let roles_kept = roles.as_ref().is_none_or(|r| {
        r.keeping.promises > 0
            && r.keeping.broken.is_empty()
            && r.shared.is_empty()
            && r.back.is_empty()
    });
    if let Some(r) = &roles {
        notes.extend(role_notes(r, log.start_ns));
    }
    let n1 = nonvoter_claims(log);
    let n1_kept = n1
        .as_ref()
        .is_none_or(|n| n.claims.is_empty() && n.judged > 0);
    notes.extend(n1.as_ref().map(n1_notes).unwrap_or_default());

    let passed = back.is_empty()
        && unread.is_empty()
        && roles_kept
        && n1_kept
        && converged
        && (!log.leased
            || (split.split_brain_ns == 0
                && safety.as_ref().is_some_and(|s| s.safe)
                && judged > 0
                && unleased == 0
                && c6.as_ref().is_none_or(|p| p.broken.is_empty())));

    RunResult {
        mode: mode.to_string(),
        scenario: scenario.to_string(),
        layer: layer.to_string(),
        seed,
        split_brain_ms: ms_up(split.split_brain_ns),
        max_leaders: split.max_leaders,
        leaderless_ms: ms_round(avail.leaderless_ns),
        majority_leaderless_ms: avail.majority_leaderless_ns.map(ms_round),
        failover_ms: avail.failover_ns.map(ms_round),
        converge_ms: conv.converge_ns.map(ms_round),
        leader_changes: changes,
        messages: BTreeMap::new(),
        steady_msgs_per_s: BTreeMap::new(),
        msgs_per_election: None,
        minority_terms_gained: c5.minority_terms_gained,
        heal_leader_changes: c5.heal_leader_changes,
        promises: c6.as_ref().map(|p| p.promises),
        promises_broken: c6.as_ref().map(|p| p.broken.len() as u64),
        promise_broken_ms: c6.as_ref().map(|p| ms_up(p.broken_ns)),
        unleased_answers: unleased,
        role_promises: roles.as_ref().map(|r| r.keeping.promises),
        role_promises_broken: roles.as_ref().map(|r| r.keeping.broken.len() as u64),
        role_broken_ms: roles.as_ref().map(|r| ms_up(r.keeping.broken_ns)),
        role_moves: roles.as_ref().map(|r| r.moves),
        time_goes_back: back.len() as u64,
        nonvoter_claims: n1.as_ref().map(|n| n.claims.len() as u64),
        election_safety: safety.map(|s| s.safe),
        passed,
        notes,
        skipped: None,
    }
}

/// How much later than another answer one node's answer on a role must arrive to have been
/// asked after that one arrived (`checkers::role_tokens_back`): five times the poller's answer
/// timeout (`record::ANSWER_WITHIN`), for a lab process starved of CPU a while.
pub const ROLE_ORDER_SLACK_MS: u64 = 1_000;

/// The role checks' notes: no role claimed at all (the run judged nothing), the first broken
/// promise on a role, tokens shared or going back.
fn role_notes(r: &RoleChecks, start_ns: u64) -> Vec<String> {
    let mut notes = Vec::new();
    if r.keeping.promises == 0 {
        notes.push("roles: no role was ever claimed, so no role's promise was judged".into());
    }
    let what = ("C6: a role's promise broken", "token", "role promises");
    notes.extend(r.keeping.first_broken(start_ns, what));
    notes.extend(r.shared.iter().map(|s| format!("C1: {s}")));
    notes.extend(r.back.iter().map(|s| format!("roles: {s}")));
    notes
}

/// N1's notes: the first claims of a member that doesn't vote, or that none of their events was
/// read (the check judged nothing).
fn n1_notes(n: &NonVoterClaims) -> Vec<String> {
    let mut notes: Vec<String> = n
        .claims
        .iter()
        .take(3)
        .map(|c| format!("N1: a member that doesn't vote claimed: {c}"))
        .collect();
    if n.claims.len() > 3 {
        notes.push(format!(
            "N1: {} claims of non-voters in all",
            n.claims.len()
        ));
    }
    if n.judged == 0 {
        let who = n
            .nonvoters
            .iter()
            .map(|x| x.to_string())
            .collect::<Vec<_>>();
        notes.push(format!(
            "N1: no event of non-voters {} read: nothing judged",
            who.join(", ")
        ));
    }
    notes
}

/// C1's notes: each term led by more than one node.
fn safety_notes(safety: Option<&ElectionSafety>) -> Vec<String> {
    let mut notes = Vec::new();
    if let Some(s) = safety {
        for c in &s.conflicts {
            notes.push(format!(
                "C1: term {} was led by nodes {}",
                c.term,
                join_ids(&c.nodes)
            ));
        }
    }
    notes
}

/// The event-log order check's note: how many events go back in time, and the first.
fn order_notes(back: &[TimeBack], start_ns: u64) -> Vec<String> {
    let Some(first) = back.first() else {
        return Vec::new();
    };
    let at = |ns: u64| fmt_ms(ms_round(ns.saturating_sub(start_ns)));
    vec![format!(
        "event log time goes back: node {} seq {} stamped at {} ms, before seq {} at {} ms ({} \
         such events in all)",
        first.node,
        first.seq,
        at(first.t_mono_ns),
        first.after_seq,
        at(first.after_t_mono_ns),
        back.len()
    )]
}

/// The leased modes' contract on answers: no claim answered without a lease, and at least one
/// promise observed (else C6 judged nothing).
fn lease_notes(c6: Option<&PromiseKeeping>, start_ns: u64) -> Vec<String> {
    let mut notes = Vec::new();
    if let Some(p) = c6.and_then(|c6| c6.first_unleased.map(|p| (c6.unleased, p))) {
        notes.push(format!(
            "C6: {} leader answers without lease_ms in a leased mode; first: node {} in term {} \
             at {} ms",
            p.0,
            p.1.node,
            p.1.term,
            fmt_ms(ms_round(p.1.from_ns.saturating_sub(start_ns)))
        ));
    }
    if c6.is_none_or(|c6| c6.promises == 0) {
        notes
            .push("C6: no promise observed in a leased mode, so no promise was judged".to_string());
    }
    notes
}

/// C6's notes: how many promises were broken, and the first one.
fn promise_notes(c6: Option<&PromiseKeeping>, start_ns: u64) -> Vec<String> {
    let Some(c6) = c6 else { return Vec::new() };
    let Some(first) = c6.broken.iter().min_by_key(|b| b.from_ns) else {
        return Vec::new();
    };
    let p = first.promise;
    vec![format!(
        "C6: {} of {} promises broken for {} in all; first: node {} claimed at {} inside node {}'s \
         promise of term {} ({} to {})",
        c6.broken.len(),
        c6.promises,
        fmt_ms(ms_up(c6.broken_ns)),
        first.intruder,
        fmt_ms(ms_round(first.from_ns.saturating_sub(start_ns))),
        p.node,
        p.term,
        fmt_ms(ms_round(p.from_ns.saturating_sub(start_ns))),
        fmt_ms(ms_round(p.until_ns.saturating_sub(start_ns))),
    )]
}

/// C2's notes: how long two or more claimed, the first time, and how much of it with a paused
/// claimant.
fn split_notes(split: &SplitBrain, start_ns: u64) -> Vec<String> {
    let mut notes = Vec::new();
    if split.split_brain_ns > 0 {
        let first = &split.spans[0];
        notes.push(format!(
            "C2: {} ms with two or more leaders (at most {}); first at {} ms into the run: nodes {}",
            fmt_ms(ms_up(split.split_brain_ns)),
            split.max_leaders,
            fmt_ms(ms_round(first.from_ns.saturating_sub(start_ns))),
            join_ids(&first.leaders)
        ));
        if split.paused_ns > 0 {
            notes.push(format!(
                "C2: {} ms of it with a paused (SIGSTOPped) claimant",
                fmt_ms(ms_up(split.paused_ns))
            ));
        }
    }
    notes
}

/// C4's notes: not measured, never converged (and how long an agreement at the window's end
/// had held), or converged too late.
fn convergence_notes(conv: &Convergence, converge_bound_ms: u64) -> Vec<String> {
    let bound_ns = converge_bound_ms.saturating_mul(1_000_000);
    let mut notes = Vec::new();
    match (conv.from_ns, conv.converge_ns) {
        (None, _) => notes.push("C4: no heal_ns, so convergence was not measured".to_string()),
        (Some(_), None) => notes.push("C4: never converged after heal".to_string()),
        (Some(_), Some(c)) => {
            if c > bound_ns {
                notes.push(format!(
                    "C4: converged after {} ms, above the bound of {converge_bound_ms} ms",
                    fmt_ms(ms_round(c))
                ));
            }
        }
    }
    if conv.converge_ns.is_none() && conv.stable_ns > 0 && conv.stable_ns < STABLE_NS {
        notes.push(format!(
            "C4: the agreement on node {} held only {} ms of the {} ms needed before the window \
             ended",
            conv.leader.map_or("?".to_string(), |l| l.to_string()),
            fmt_ms(ms_round(conv.stable_ns)),
            STABLE_NS / 1_000_000
        ));
    }
    notes
}

/// Notes on the log itself: events ignored, and a mode label that disagrees with it.
fn log_notes(sweep: &Sweep, log: &RunLog, mode: &str) -> Vec<String> {
    let mut notes = Vec::new();
    if sweep.ignored_while_down > 0 {
        notes.push(format!(
            "log: {} events stamped while their node was down were ignored",
            sweep.ignored_while_down
        ));
    }
    if sweep.foreign_events > 0 {
        notes.push(format!(
            "log: {} events from nodes outside the membership were ignored",
            sweep.foreign_events
        ));
    }
    if log.leased != (mode == "quorum" || mode == "mutex") {
        notes.push(format!(
            "log: mode label {mode:?} but leased = {}",
            log.leased
        ));
    }
    notes
}

/// Nanoseconds to milliseconds, rounded to 0.1 ms.
pub fn ms_round(ns: u64) -> f64 {
    (ns as f64 / 100_000.0).round() / 10.0
}

/// Nanoseconds to milliseconds, rounded up to 0.1 ms (so any non-zero time stays non-zero).
pub fn ms_up(ns: u64) -> f64 {
    ns.div_ceil(100_000) as f64 / 10.0
}

fn fmt_ms(ms: f64) -> String {
    format!("{ms:.1}")
}

fn join_ids(ids: &[NodeId]) -> String {
    ids.iter()
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chaos::checkers::{cap_paused_claims, split_brain};
    use crate::chaos::fixtures::{
        all_follow, follow, lead, log, no_promise_log, promise, resumed_claim_log,
        settled_leased_log, short_agreement_log, time_back_log, unleased_answer_log, window, MS, S,
    };

    /// `r` failed, and every note says so for the one check whose notes begin with `prefix`.
    fn fails_alone(r: &RunResult, prefix: &str) {
        assert!(!r.passed, "{r:?}");
        assert!(!r.notes.is_empty());
        assert!(
            r.notes.iter().all(|n| n.starts_with(prefix)),
            "notes other than {prefix:?}: {:?}",
            r.notes
        );
    }

    fn quorum(l: &RunLog) -> RunResult {
        evaluate(l, "quorum", "S11", "app", 1, 2000)
    }

    /// N1 (S26): with voters named, a claim of another member fails the run (here C6 too: node
    /// 1 leads throughout), and so does a run that read none of the non-voters' events; without
    /// a claim of theirs the run passes, majorities counted on the voters.
    #[test]
    fn a_claim_of_a_nonvoter_fails_n1() {
        let mut l = settled_leased_log();
        l.voters = vec![1, 2, 3];
        let r = quorum(&l);
        assert!(r.passed && r.notes.is_empty(), "{r:?}");
        assert_eq!(r.nonvoter_claims, Some(0));
        let mut claimed = l.clone();
        claimed.promises.push(promise(4, 1, 2 * S, 100 * MS));
        let r = quorum(&claimed);
        assert!(!r.passed, "{r:?}");
        assert_eq!(r.nonvoter_claims, Some(1));
        let said = "N1: a member that doesn't vote claimed: node 4 answered a claim";
        assert!(r.notes.iter().any(|n| n.starts_with(said)), "{r:?}");
        // (C4 fails it too: nodes 4 and 5, with no event, never tell the leader.)
        let mut unread = l;
        unread.events.retain(|e| e.node_id <= 3);
        let r = quorum(&unread);
        assert!(!r.passed, "{r:?}");
        assert_eq!(r.nonvoter_claims, Some(0));
        let said = "N1: no event of non-voters 4, 5 read";
        assert!(r.notes.iter().any(|n| n.starts_with(said)), "{r:?}");
    }

    #[test]
    fn the_settled_leased_run_passes() {
        let r = quorum(&settled_leased_log());
        assert!(r.passed && r.notes.is_empty(), "{r:?}");
        assert_eq!(r.promises, Some(1));
    }

    /// Issue 48, item 7: a run judged on part of its logs fails: an event line that is not an
    /// event, or more unreadable answers than one in a thousand.
    #[test]
    fn what_was_not_read_fails_the_run_alone() {
        let mut log = settled_leased_log();
        log.dropped.event_logs = vec!["node 2: 1 lines of events.jsonl are not events".into()];
        fails_alone(&quorum(&log), "not read: event log: node 2");
        let mut log = settled_leased_log();
        log.dropped.answers = 5000;
        log.dropped.unreadable_answers = 5;
        log.dropped.unanswered = 900;
        assert!(
            quorum(&log).passed,
            "5 of 5000 is the allowance; no answer is no answer"
        );
        log.dropped.unreadable_answers = 6;
        fails_alone(&quorum(&log), "not read: 6 of 5000 answers");
    }

    #[test]
    fn time_going_back_fails_the_order_check_alone() {
        let r = quorum(&time_back_log());
        fails_alone(&r, "event log time goes back: node 2 seq 3");
        assert_eq!(r.time_goes_back, 1);
        assert_eq!(r.converge_ms, Some(0.0), "read in seq order, node 2 agrees");
        // In a mode without leases too.
        let mut bully = time_back_log();
        bully.leased = false;
        bully.promises.clear();
        fails_alone(
            &evaluate(&bully, "bully", "S4", "app", 1, 2000),
            "event log time goes back",
        );
    }

    #[test]
    fn a_leader_resumed_still_claiming_fails_c2_alone() {
        let l = cap_paused_claims(&resumed_claim_log(), 150 * MS);
        let r = quorum(&l);
        fails_alone(&r, "C2: ");
        assert_eq!(r.split_brain_ms, 1000.0);
        assert_eq!(r.election_safety, Some(true));
        assert_eq!(r.promises_broken, Some(0));
        assert_eq!(r.converge_ms, Some(500.0));
    }

    #[test]
    fn a_leader_answer_without_a_lease_fails_c6_alone() {
        let r = quorum(&unleased_answer_log());
        fails_alone(&r, "C6: 1 leader answers without lease_ms");
        assert_eq!((r.unleased_answers, r.promises), (1, Some(1)));
        // Outside the leased modes an answer without a lease is the norm.
        let mut bully = unleased_answer_log();
        bully.leased = false;
        assert!(evaluate(&bully, "bully", "S4", "app", 1, 2000).passed);
    }

    #[test]
    fn a_leased_run_without_promises_fails_c6_alone() {
        let r = quorum(&no_promise_log());
        fails_alone(&r, "C6: no promise observed");
        assert_eq!(r.promises, None);
        // Only answers without a lease: no promise either.
        let mut only = no_promise_log();
        only.promises
            .push(crate::chaos::record::Promise::unleased(1, 1, 300 * MS));
        let r = quorum(&only);
        assert!(r
            .notes
            .iter()
            .any(|n| n.starts_with("C6: no promise observed")));
    }

    #[test]
    fn an_agreement_shorter_than_the_stable_second_fails_c4_alone() {
        let r = quorum(&short_agreement_log());
        fails_alone(&r, "C4: ");
        assert_eq!(r.converge_ms, None);
        assert!(r
            .notes
            .iter()
            .any(|n| n.contains("agreement on node 1 held only 500.0 ms of the 1000 ms")));
    }

    #[test]
    fn cost_is_steady_rate_and_excess_per_election() {
        let m = |pairs: &[(&str, u64)]| -> BTreeMap<String, u64> {
            pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
        };
        let mut r = RunResult::skipped("quorum", "S1", "app", 1, "x");
        r.leader_changes = 2;
        // 80 appends in the steady second; 10 s later 800 more appends and 24 votes.
        let a = m(&[("append", 100)]);
        let b = m(&[("append", 180)]);
        let end = m(&[("append", 1_060), ("vote", 24)]);
        r.set_cost(&a, &b, &end, 1.0, 10.0);
        assert_eq!(r.steady_msgs_per_s["append"], 80.0);
        assert_eq!(r.steady_msgs_per_s["vote"], 0.0);
        let per = r.msgs_per_election.clone().unwrap();
        assert_eq!(per["append"], 40.0); // (880 - 800) / 2
        assert_eq!(per["vote"], 12.0);
        // Fewer messages than the steady rate (a leaderless stretch) is no negative cost.
        r.set_cost(&a, &b, &m(&[("append", 300)]), 1.0, 10.0);
        assert_eq!(r.msgs_per_election.clone().unwrap()["append"], 0.0);
        // No leader change: no per-election cost.
        r.leader_changes = 0;
        r.set_cost(&a, &b, &end, 1.0, 10.0);
        assert_eq!(r.msgs_per_election, None);
    }

    #[test]
    fn evaluate_quorum_pass_and_fail() {
        let mut events = all_follow(0, 1, 1);
        events.push(follow(300 * MS, 1, 1, None));
        events.push(lead(400 * MS, 2, 2));
        for n in [1, 3, 4, 5] {
            events.push(follow(450 * MS, n, 2, Some(2)));
        }
        let mut l = log(3 * S, events);
        l.leased = true;
        l.fault_ns = Some(100 * MS);
        l.heal_ns = Some(S);
        l.faults = vec![window(100 * MS, S, vec![vec![1], vec![2, 3, 4, 5]])];
        l.promises = vec![promise(2, 2, 500 * MS, 150 * MS)];
        let r = evaluate(&l, "quorum", "S3", "kernel", 3, 2000);
        assert!(r.passed, "{r:?}");
        assert_eq!(r.split_brain_ms, 0.0);
        assert_eq!(r.max_leaders, 1);
        assert_eq!(r.election_safety, Some(true));
        assert_eq!(r.leaderless_ms, 100.0);
        assert_eq!(r.majority_leaderless_ms, Some(300.0));
        assert_eq!(r.failover_ms, Some(350.0));
        assert_eq!(r.converge_ms, Some(0.0));
        assert_eq!(r.leader_changes, 1);

        // A 40 ns overlap still fails quorum mode and shows as 0.1 ms.
        l.events.push(lead(400 * MS, 3, 2));
        l.events.push(follow(400 * MS + 40, 3, 2, Some(2)));
        let r = evaluate(&l, "quorum", "S3", "kernel", 3, 2000);
        assert!(!r.passed);
        assert_eq!(r.split_brain_ms, 0.1);
        assert_eq!(r.election_safety, Some(false));
        assert!(r.notes.iter().any(|n| n.starts_with("C1: term 2")));
        let json = serde_json::to_value(&r).unwrap();
        assert!(json.get("skipped").is_none());
        assert_eq!(json["election_safety"], serde_json::json!(false));
    }

    #[test]
    fn evaluate_legacy_passes_despite_split_brain() {
        let mut events = all_follow(0, 1, 1);
        events.push(lead(200 * MS, 5, 2));
        events.push(follow(1100 * MS, 5, 2, Some(1)));
        let mut l = log(3 * S, events);
        l.fault_ns = Some(100 * MS);
        l.heal_ns = Some(S);
        l.faults = vec![window(100 * MS, S, vec![vec![5], vec![1, 2, 3, 4]])];
        let r = evaluate(&l, "bully", "S4", "app", 1, 500);
        assert!(r.passed);
        assert_eq!(r.split_brain_ms, 900.0);
        assert_eq!(r.max_leaders, 2);
        assert_eq!(r.election_safety, None);
        assert_eq!(r.converge_ms, Some(100.0));
        let tight = evaluate(&l, "bully", "S4", "app", 1, 50);
        assert!(!tight.passed);
    }

    #[test]
    fn baseline_without_faults_converges_from_start() {
        let l = log(2 * S, all_follow(10 * MS, 3, 1));
        let r = evaluate(&l, "ring", "baseline", "app", 0, 100);
        assert!(r.passed);
        assert_eq!(r.converge_ms, Some(10.0));
        assert_eq!(r.failover_ms, None);
        assert_eq!(r.leader_changes, 1);
    }

    #[test]
    fn rounding() {
        assert_eq!(ms_round(1_249_999), 1.2);
        assert_eq!(ms_round(1_250_000), 1.3);
        assert_eq!(ms_up(1), 0.1);
        assert_eq!(ms_up(0), 0.0);
        assert_eq!(ms_up(3_200_000_000), 3200.0);
    }

    /// Node 1 stops claiming at 100 ms (a vote request suspended its claim), but it answered
    /// a lease of 120 ms at 50 ms: node 2, claiming from 110 ms, breaks that promise although
    /// the claim intervals never overlap (C2 sees nothing).
    #[test]
    fn a_claim_inside_an_earlier_answer_breaks_its_promise() {
        let mut l = log(
            S,
            vec![
                lead(0, 1, 1),
                follow(100 * MS, 1, 1, None),
                lead(110 * MS, 2, 2),
            ],
        );
        l.leased = true;
        l.promises = vec![
            promise(1, 1, 50 * MS, 120 * MS),
            promise(1, 1, 10 * MS, 30 * MS),
        ];
        assert_eq!(split_brain(&l).split_brain_ns, 0, "C2 sees no overlap");
        let c6 = promise_keeping(&l).unwrap();
        assert_eq!(c6.promises, 2);
        assert_eq!(c6.broken.len(), 1);
        let b = c6.broken[0];
        assert_eq!((b.intruder, b.from_ns, b.to_ns), (2, 110 * MS, 170 * MS));
        assert_eq!(c6.broken_ns, 60 * MS);
        let r = evaluate(&l, "quorum", "S3", "app", 1, 5_000);
        assert!(!r.passed);
        assert_eq!(r.promises_broken, Some(1));
        assert!(r
            .notes
            .iter()
            .any(|n| n.starts_with("C6: 1 of 2 promises broken")));
    }
}
