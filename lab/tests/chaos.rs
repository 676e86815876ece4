//! The CI-sized subset of the chaos suite on real processes: every scenario runs at least once
//! in quorum mode (the store's, S15–S18, in mutex mode, the only one with a store), and each
//! run checks both that the mode stayed safe (0 ms split brain, no term with two leaders, every
//! promise kept, convergence after heal within the bound) and that its fault took effect, as
//! the run log shows it (a leader cut off stops claiming and the majority elects another; a
//! follower cut off loses its leader while the leader keeps its claim; no side of a split without
//! a majority claims; the loss and the delay the harness measured; …): a run whose fault did
//! nothing would pass the safety checks without having tested them. Bully, ring and
//! invitation show split brain in the 2 | 3 partition and converge after heal.
//!
//! Each run prints its time and its result as JSON; a failed check prints both. Mutex runs need
//! PostgreSQL (installed by `scripts/test.sh` as root); without it they are skipped. Kernel-layer
//! runs need root and iptables; without them they are skipped (this test then covers the app
//! layer). A skip is recorded as one ([`electd_lab::skip`]: listed and counted by
//! `scripts/test.sh`, a failure on CI as root); a run that could not be done for any other reason
//! fails.

use std::collections::BTreeSet;
use std::time::Instant;

use electd::config::Timing;
use electd_client::{Mode, NodeId};
use electd_lab::chaos::checkers::{claim_intervals, node_segments, ClaimInterval, LogState};
use electd_lab::chaos::record::{FaultWindow, ProcKind, RunLog};
use electd_lab::chaos::runner::{run_one, Layer, RunSpec, Scenario};
use electd_lab::chaos::verdict::RunResult;

/// One run done: its verdict and its log.
struct Ran {
    r: RunResult,
    log: RunLog,
}

impl Ran {
    /// What a failed check prints: the run's row as JSON and what its log shows.
    fn why(&self) -> String {
        format!(
            "{} {} {} seed {}: {}\n{}",
            self.r.scenario,
            self.r.mode,
            self.r.layer,
            self.r.seed,
            serde_json::to_string(&self.r).unwrap(),
            summary(&self.log)
        )
    }
}

fn run(mode: Mode, scenario: Scenario, layer: Layer) -> Option<Ran> {
    run_spec(RunSpec {
        mode,
        scenario,
        layer,
        seed: 1,
        tls: false,
    })
}

fn run_spec(spec: RunSpec) -> Option<Ran> {
    let (mode, scenario, layer) = (spec.mode, spec.scenario, spec.layer);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let began = Instant::now();
    let (res, log) = rt.block_on(run_one(
        &spec,
        &electd_lab::bin::electd_bin().expect("the electd binary"),
        None,
    ));
    if let Some(why) = &res.skipped {
        // Only a missing tool makes the runner skip; the rest of the test goes on.
        electd_lab::skip::skip(&format!("{scenario} {mode:?} {layer:?}: {why}"));
        return None;
    }
    eprintln!(
        "{scenario} {mode:?} {layer:?} seed {} took {:.1} s: {}",
        spec.seed,
        began.elapsed().as_secs_f64(),
        serde_json::to_string(&res).unwrap()
    );
    eprintln!("{}", summary(&log));
    Some(Ran { r: res, log })
}

fn quorum_is_safe(scenario: Scenario, layer: Layer) -> Option<Ran> {
    leased_is_safe(Mode::Quorum, scenario, layer)
}

fn leased_is_safe(mode: Mode, scenario: Scenario, layer: Layer) -> Option<Ran> {
    let ran = run(mode, scenario, layer)?;
    leased_is_safe_in(&ran);
    Some(ran)
}

fn leased_is_safe_in(ran: &Ran) {
    let (r, why) = (&ran.r, ran.why());
    assert_eq!(r.promises_broken, Some(0), "{why}");
    assert_eq!(r.split_brain_ms, 0.0, "{why}");
    assert_eq!(r.election_safety, Some(true), "{why}");
    assert!(r.converge_ms.is_some(), "converges: {why}");
    if r.mode == "quorum" {
        // Every node stood for the run's named roles: each role's promises judged and kept.
        assert!(r.role_promises.is_some_and(|n| n > 0), "{why}");
        assert_eq!(r.role_promises_broken, Some(0), "{why}");
    }
    assert!(r.passed, "{why}");
}

fn legacy_splits(mode: Mode, layer: Layer) {
    if let Some(ran) = run(mode, Scenario::S5, layer) {
        let (r, why) = (&ran.r, ran.why());
        assert!(r.max_leaders >= 2 && r.split_brain_ms > 0.0, "{why}");
        assert!(r.converge_ms.is_some(), "converges: {why}");
    }
}

// ---- What the run log shows of a fault -------------------------------------------------------

/// The follower lease F in ns: a leased node that lost its majority (or its store) stops
/// claiming within its claim lease L = F less a fifth of its last acknowledged probe, so F
/// bounds it with a margin.
fn f_ns() -> u64 {
    Timing::default().follower_lease_ms * 1_000_000
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// The fault windows in order.
fn windows(log: &RunLog) -> Vec<FaultWindow> {
    let mut w = log.faults.clone();
    w.sort_by_key(|w| w.start_ns);
    w
}

/// The voters: the log's (S26), else every member.
fn voters(log: &RunLog) -> Vec<NodeId> {
    match log.voters.is_empty() {
        true => log.nodes.clone(),
        false => log.voters.clone(),
    }
}

/// The majority of the voters.
fn majority(log: &RunLog) -> usize {
    voters(log).len() / 2 + 1
}

/// The voters node `n` can talk to under window `w`, itself included when it votes.
fn votes(log: &RunLog, w: &FaultWindow, n: NodeId) -> usize {
    let voters = voters(log);
    reach(log, w, n)
        .iter()
        .filter(|x| voters.contains(x))
        .count()
}

/// Who node `n` can talk to under window `w` (itself included): every node when the window
/// cuts nobody off (loss, delay, cuts from the store).
fn reach(log: &RunLog, w: &FaultWindow, n: NodeId) -> BTreeSet<NodeId> {
    if w.groups.is_empty() {
        return log.nodes.iter().copied().collect();
    }
    let mut out: BTreeSet<NodeId> = w
        .groups
        .iter()
        .filter(|g| g.contains(&n))
        .flatten()
        .copied()
        .collect();
    out.insert(n);
    out
}

/// The nodes cut off from every majority under `w`.
fn cut_off(log: &RunLog, w: &FaultWindow) -> Vec<NodeId> {
    log.nodes
        .iter()
        .copied()
        .filter(|&n| votes(log, w, n) < majority(log))
        .collect()
}

/// The claim intervals that overlap `[from, to)`.
fn claims_in(log: &RunLog, from: u64, to: u64) -> Vec<ClaimInterval> {
    claim_intervals(log)
        .into_iter()
        .filter(|c| c.from_ns < to && c.to_ns > from)
        .collect()
}

/// Who claims at `t`.
fn claimants_at(log: &RunLog, t: u64) -> Vec<NodeId> {
    claim_intervals(log)
        .into_iter()
        .filter(|c| c.from_ns <= t && t < c.to_ns)
        .map(|c| c.node)
        .collect()
}

/// The one node claiming at `t`, if exactly one does.
fn leader_at(log: &RunLog, t: u64) -> Option<NodeId> {
    match claimants_at(log, t)[..] {
        [l] => Some(l),
        _ => None,
    }
}

/// Whether `node` claims all through `[from, to)` in one claim.
fn claims_through(log: &RunLog, node: NodeId, from: u64, to: u64) -> bool {
    claim_intervals(log)
        .iter()
        .any(|c| c.node == node && c.from_ns <= from && c.to_ns >= to)
}

/// The claims that began in `[from, to)` by a node other than `not`.
fn new_claims(log: &RunLog, from: u64, to: u64, not: &[NodeId]) -> Vec<ClaimInterval> {
    claim_intervals(log)
        .into_iter()
        .filter(|c| c.from_ns >= from && c.from_ns < to && !not.contains(&c.node))
        .collect()
}

/// Whether `node`'s view named no leader at some moment of `[from, to)` (it lost its leader).
fn lost_leader(log: &RunLog, node: NodeId, from: u64, to: u64) -> bool {
    node_segments(log)
        .into_iter()
        .filter(|(n, _)| *n == node)
        .flat_map(|(_, segs)| segs)
        .filter(|s| s.from_ns < to && s.to_ns > from)
        .any(|s| !matches!(s.state, LogState::Up(v) if v.leader.is_some()))
}

/// The process faults of `kind` in order, as (time, node).
fn procs(log: &RunLog, kind: ProcKind) -> Vec<(u64, NodeId)> {
    let mut p: Vec<(u64, NodeId)> = log
        .procs
        .iter()
        .filter(|p| p.kind == kind)
        .map(|p| (p.t_ns, p.node))
        .collect();
    p.sort();
    p
}

/// The node ids in brackets at the end of a label, as the harness writes a list
/// (`"a minority cut from the store: [2, 5]"`).
fn ids_in_label(label: &str) -> Vec<NodeId> {
    let Some((_, rest)) = label.split_once('[') else {
        return Vec::new();
    };
    let list = rest.split(']').next().unwrap_or("");
    list.split(',')
        .filter_map(|x| x.trim().parse().ok())
        .collect()
}

/// The first number before `what` in the harness's observation of window `w` (`[… what …]`).
fn observed(w: &FaultWindow, what: &str) -> Option<f64> {
    let at = w.label.find(what)?;
    let head = &w.label[..at];
    let start = head.rfind(|c: char| !(c.is_ascii_digit() || c == '.' || c == ' '))? + 1;
    head[start..].split_whitespace().last()?.parse().ok()
}

/// The value between `before` and `after` in `label`, parsed.
fn between<T: std::str::FromStr>(label: &str, before: &str, after: &str) -> Option<T> {
    let rest = &label[label.find(before)? + before.len()..];
    rest[..rest.find(after)?].trim().parse().ok()
}

/// Whether `w` is a partition the harness applied (its label says so).
fn is_partition(w: &FaultWindow) -> bool {
    w.label.starts_with("partition ")
}

/// What the log shows, relative to the run's start: the fault windows with their claimants
/// and the nodes that lost their leader in each, and the process faults.
fn summary(log: &RunLog) -> String {
    let at = |t: u64| ms(t.saturating_sub(log.start_ns));
    let mut out = String::new();
    if let Some(f) = log.fault_ns {
        out.push_str(&format!("  fault at {:.0} ms", at(f)));
    }
    if let Some(h) = log.heal_ns {
        out.push_str(&format!(", heal at {:.0} ms", at(h)));
    }
    out.push_str(&format!(", end at {:.0} ms\n", at(log.end_ns)));
    for p in &log.procs {
        out.push_str(&format!(
            "  {:>7.0} ms {:?} {}\n",
            at(p.t_ns),
            p.kind,
            p.node
        ));
    }
    for c in claim_intervals(log) {
        out.push_str(&format!(
            "  claim {} {:.0}..{:.0} ms\n",
            c.node,
            at(c.from_ns),
            at(c.to_ns)
        ));
    }
    for w in windows(log) {
        let lost: Vec<NodeId> = log
            .nodes
            .iter()
            .copied()
            .filter(|&n| lost_leader(log, n, w.start_ns, w.end_ns))
            .collect();
        out.push_str(&format!(
            "  window {:.0}..{:.0} ms {:?}: claimants {:?}, without a leader at some point {:?}\n",
            at(w.start_ns),
            at(w.end_ns),
            w.label,
            claims_in(log, w.start_ns, w.end_ns)
                .iter()
                .map(|c| c.node)
                .collect::<BTreeSet<_>>(),
            lost
        ));
    }
    out
}

// ---- The proofs, one a fault ----------------------------------------------------------------

/// Under window `w`, no node cut off from every majority claims later than F after the window
/// opened (a leader that lost its majority stops within its lease).
fn cut_off_stop_claiming(ran: &Ran, w: &FaultWindow) {
    let log = &ran.log;
    let late: Vec<ClaimInterval> = claims_in(log, w.start_ns + f_ns(), w.end_ns)
        .into_iter()
        .filter(|c| cut_off(log, w).contains(&c.node))
        .collect();
    assert!(
        late.is_empty(),
        "{:?}: nodes cut off from every majority claim more than F after it began: {late:?}\n{}",
        w.label,
        ran.why()
    );
}

/// Under window `w` the leader `l` (claiming when it opened) is cut off: its claim ends within
/// F, and a node of a majority side begins a claim before the window closes.
fn leader_fails_over(ran: &Ran, w: &FaultWindow) -> NodeId {
    let log = &ran.log;
    let why = ran.why();
    let l = leader_at(log, w.start_ns)
        .unwrap_or_else(|| panic!("{:?}: one leader when the window opened: {why}", w.label));
    assert!(
        cut_off(log, w).contains(&l),
        "{:?}: the fault cuts off the leader {l}: {why}",
        w.label
    );
    cut_off_stop_claiming(ran, w);
    let elected: Vec<ClaimInterval> = new_claims(log, w.start_ns, w.end_ns, &[])
        .into_iter()
        .filter(|c| votes(log, w, c.node) >= majority(log))
        .collect();
    assert!(
        !elected.is_empty(),
        "{:?}: a majority side elects another leader while {l} is cut off: {why}",
        w.label
    );
    l
}

/// Under window `w` the leader claiming when it opened keeps its claim all through it, and each
/// of `lose` loses its leader at some moment of it (the fault reached them).
fn leader_keeps_and_cut_lose(ran: &Ran, w: &FaultWindow, lose: &[NodeId]) -> NodeId {
    let log = &ran.log;
    let why = ran.why();
    let l = leader_at(log, w.start_ns)
        .unwrap_or_else(|| panic!("{:?}: one leader when the window opened: {why}", w.label));
    assert!(
        claims_through(log, l, w.start_ns, w.end_ns),
        "{:?}: the leader {l} keeps its claim all through the fault: {why}",
        w.label
    );
    for &n in lose {
        assert!(
            n != l && lost_leader(log, n, w.start_ns, w.end_ns),
            "{:?}: node {n}, cut off from the leader {l}, loses its leader: {why}",
            w.label
        );
    }
    l
}

/// The only window of a run of one fault window.
fn one_window(ran: &Ran) -> FaultWindow {
    let w = windows(&ran.log);
    assert_eq!(w.len(), 1, "one fault window: {}", ran.why());
    w[0].clone()
}

/// The process fault `kind` applied to the leader: the node claiming just before it is the one
/// it hit, and another node begins a claim before the node is back (`back`).
fn leader_process_fault_fails_over(ran: &Ran, kind: ProcKind, back: ProcKind) {
    let log = &ran.log;
    let why = ran.why();
    let hits = procs(log, kind);
    let &(t, l) = hits
        .first()
        .unwrap_or_else(|| panic!("a {kind:?} recorded: {why}"));
    assert_eq!(
        claimants_at(log, t.saturating_sub(1)),
        vec![l],
        "the {kind:?} hit the leader: {why}"
    );
    let (until, _) = procs(log, back)
        .into_iter()
        .find(|&(u, n)| n == l && u > t)
        .unwrap_or_else(|| panic!("{l} back by {back:?}: {why}"));
    assert!(
        !new_claims(log, t, until, &[l]).is_empty(),
        "another node leads while {l} is down ({kind:?} at {:.0} ms, {back:?} at {:.0} ms): {why}",
        ms(t - log.start_ns),
        ms(until - log.start_ns)
    );
    assert!(ran.r.failover_ms.is_some(), "failover measured: {why}");
}

/// S1: the leader's SIGKILL: another node leads before it is restarted.
fn s1_leader_crash_fails_over(ran: &Ran) {
    leader_process_fault_fails_over(ran, ProcKind::Kill, ProcKind::Start);
}

/// S2: a follower's crash leaves the leader's claim alone; while three of five are down nobody
/// claims (after F); after all five crashed and restarted a new leader is elected, and every
/// node reports it (convergence, checked by the verdict, counts every running node).
fn s2_crashes(ran: &Ran) {
    let log = &ran.log;
    let why = ran.why();
    let mut changes: Vec<(u64, NodeId, bool)> = log
        .procs
        .iter()
        .filter_map(|p| match p.kind {
            ProcKind::Kill => Some((p.t_ns, p.node, true)),
            ProcKind::Start => Some((p.t_ns, p.node, false)),
            _ => None,
        })
        .collect();
    changes.sort();
    // The first instant each number of nodes is down, and when the next start follows it.
    let mut down = BTreeSet::new();
    let mut phases: Vec<(usize, u64, u64)> = Vec::new();
    for (i, &(t, n, killed)) in changes.iter().enumerate() {
        if killed {
            down.insert(n);
            let next_start = changes[i + 1..].iter().find(|c| !c.2).map(|c| c.0);
            if let Some(until) = next_start {
                if changes.get(i + 1).is_none_or(|c| !c.2) {
                    phases.push((down.len(), t, until));
                }
            }
        } else {
            down.remove(&n);
        }
    }
    let sizes: Vec<usize> = phases.iter().map(|p| p.0).collect();
    assert_eq!(
        sizes,
        vec![1, 3, 5],
        "a follower, then three, then all five down: {why}"
    );
    let (_, t1, u1) = phases[0];
    let l = leader_at(log, t1.saturating_sub(1))
        .unwrap_or_else(|| panic!("one leader when the follower crashed: {why}"));
    assert!(
        claims_through(log, l, t1, u1),
        "the leader {l} keeps its claim while one follower is down: {why}"
    );
    let (_, t3, u3) = phases[1];
    let during = claims_in(log, t3 + f_ns(), u3);
    assert!(
        during.is_empty(),
        "nobody claims while three of five are down: {during:?}: {why}"
    );
    let (_, _, u5) = phases[2];
    assert!(
        !new_claims(log, u5, log.end_ns, &[]).is_empty(),
        "a leader elected after all five restarted: {why}"
    );
    assert!(ran.r.leader_changes >= 1, "{why}");
}

/// S3: the leader cut off from everyone stops claiming within F; the other four elect.
fn s3_isolated_leader_fails_over(ran: &Ran) {
    let w = one_window(ran);
    leader_fails_over(ran, &w);
    assert!(ran.r.failover_ms.is_some(), "{}", ran.why());
}

/// S4: a follower cut off loses its leader; the leader keeps its claim, and the follower gains
/// no term while cut off (pre-vote), so that it deposes nobody when healed. (Not "no leader
/// change in the whole run" at the default 150 ms: a host that starves the leader past its
/// lease changes the leader whatever the fault, and that was a time the test could cross;
/// issue 48, item 10.)
fn s4_follower_isolated_changes_nothing(ran: &Ran) {
    let w = one_window(ran);
    let victim = cut_off(&ran.log, &w);
    assert_eq!(victim.len(), 1, "one node cut off: {}", ran.why());
    leader_keeps_and_cut_lose(ran, &w, &victim);
    assert_eq!(ran.r.minority_terms_gained, 0, "{}", ran.why());
    assert!(
        !claim_intervals(&ran.log)
            .iter()
            .any(|c| victim.contains(&c.node) && c.to_ns > w.start_ns),
        "the cut-off follower claimed: {}",
        ran.why()
    );
}

/// S5: with the leader on the 2 side, it stops claiming and the 3 side elects; with the (new)
/// leader on the 3 side, it keeps its claim and the 2 side loses its leader.
fn s5_split_both_ways(ran: &Ran) {
    let w = windows(&ran.log);
    assert_eq!(w.len(), 2, "two splits: {}", ran.why());
    leader_fails_over(ran, &w[0]);
    let small = cut_off(&ran.log, &w[1]);
    assert_eq!(small.len(), 2, "a 2 | 3 split: {}", ran.why());
    leader_keeps_and_cut_lose(ran, &w[1], &small);
}

/// S6 and S7: the nodes that cannot hear the leader (its non-neighbours in the ring; the far
/// side of the bridge) lose it, while the leader, whose reach is a majority, keeps its claim:
/// one leader all through, no election.
fn leader_keeps_far_nodes_lose(ran: &Ran) {
    let log = &ran.log;
    let w = one_window(ran);
    let l = leader_at(log, w.start_ns)
        .unwrap_or_else(|| panic!("one leader when the fault began: {}", ran.why()));
    let far: Vec<NodeId> = log
        .nodes
        .iter()
        .copied()
        .filter(|n| !reach(log, &w, l).contains(n))
        .collect();
    assert_eq!(far.len(), 2, "two nodes out of {l}'s reach: {}", ran.why());
    leader_keeps_and_cut_lose(ran, &w, &far);
    assert_eq!(
        claims_in(log, w.start_ns, w.end_ns).len(),
        1,
        "one claim through the fault: {}",
        ran.why()
    );
}

/// S8: the leader that cannot receive, then the (new) one that cannot send: each stops claiming
/// within F and the others elect.
fn s8_one_way_cuts_fail_over(ran: &Ran) {
    let w = windows(&ran.log);
    assert_eq!(w.len(), 2, "two one-way cuts: {}", ran.why());
    for w in &w {
        leader_fails_over(ran, w);
    }
}

/// S9: the leader's messages were delayed: its acknowledged probes took at least the delay
/// (the harness's measure), or it lost its claim under the delay.
fn s9_delay_applied(ran: &Ran) {
    let w = one_window(ran);
    let delay = Timing::default().follower_lease_ms as f64 * 0.75;
    let probes = observed(&w, "probes of").unwrap_or_else(|| {
        panic!("the harness measured the probes: {}", ran.why());
    });
    let mean = observed(&w, "ms]").unwrap_or(0.0);
    let l = leader_at(&ran.log, w.start_ns);
    // A window with no leader at its start delayed nobody's probes: it tested nothing.
    assert!(l.is_some(), "a leader when the delay began: {}", ran.why());
    let kept = l.is_some_and(|l| claims_through(&ran.log, l, w.start_ns, w.end_ns));
    if probes > 0.0 {
        assert!(
            mean >= delay,
            "the leader's probes took the delay of {delay} ms: {}",
            ran.why()
        );
    } else {
        assert!(
            !kept,
            "a leader that acknowledged no probe lost its claim: {}",
            ran.why()
        );
    }
}

/// S10: the harness counted the loss: between a sixth and a half of the peer requests sent under
/// the window never got past their receiver's fault layer (30% on each link).
fn s10_loss_applied(ran: &Ran) {
    let w = one_window(ran);
    let lost = observed(&w, " of ").unwrap_or(-1.0);
    let sent = observed(&w, "peer requests lost").unwrap_or(0.0);
    assert!(sent > 100.0, "peer requests under loss: {}", ran.why());
    let rate = lost / sent;
    assert!(
        (0.15..=0.45).contains(&rate),
        "30% loss: {lost} of {sent} peer requests lost: {}",
        ran.why()
    );
}

/// S11: the leader SIGSTOPped: another node leads before it is resumed.
fn s11_paused_leader_fails_over(ran: &Ran) {
    leader_process_fault_fails_over(ran, ProcKind::Pause, ProcKind::Resume);
}

/// S12: six 2 | 3 partitions applied one after the other; under each the 2 side stops claiming
/// within F; the leader changed at least once (a partition put it on the 2 side).
fn s12_flapping(ran: &Ran) {
    let w: Vec<FaultWindow> = windows(&ran.log).into_iter().filter(is_partition).collect();
    assert_eq!(w.len(), 6, "six partitions: {}", ran.why());
    let mut cut_leaders = 0;
    for w in &w {
        assert_eq!(cut_off(&ran.log, w).len(), 2, "2 | 3: {}", ran.why());
        cut_off_stop_claiming(ran, w);
        if leader_at(&ran.log, w.start_ns).is_some_and(|l| cut_off(&ran.log, w).contains(&l)) {
            cut_leaders += 1;
        }
    }
    assert!(
        cut_leaders >= 1 && ran.r.leader_changes >= 1,
        "a partition cut the leader off, and the leader changed: {}",
        ran.why()
    );
}

/// S13: the 2 side of the split stops claiming within F; a node was killed and restarted; after
/// heal everyone converges (the verdict's check).
fn s13_mixture(ran: &Ran) {
    let w = windows(&ran.log);
    assert_eq!(
        w.len(),
        2,
        "the split, then split, kill and loss: {}",
        ran.why()
    );
    for w in &w {
        cut_off_stop_claiming(ran, w);
    }
    // The loss and the cut bit: requests were lost under the second window (issue 48, item 8).
    let lost = observed(&w[1], " of ").unwrap_or(-1.0);
    let sent = observed(&w[1], "peer requests lost").unwrap_or(0.0);
    assert!(
        sent > 50.0 && lost / sent >= 0.1,
        "requests lost under the split, kill and loss: {lost} of {sent}: {}",
        ran.why()
    );
    let killed = procs(&ran.log, ProcKind::Kill);
    assert_eq!(killed.len(), 1, "one node killed: {}", ran.why());
    assert!(
        procs(&ran.log, ProcKind::Start)
            .iter()
            .any(|&(t, n)| n == killed[0].1 && t > killed[0].0),
        "the killed node restarted: {}",
        ran.why()
    );
}

/// S14: 2 | 2 | 1, no majority anywhere: nobody claims from F after the split to its heal.
fn s14_no_majority_no_leader(ran: &Ran) {
    let w = one_window(ran);
    assert_eq!(
        cut_off(&ran.log, &w).len(),
        ran.log.nodes.len(),
        "every node cut off from every majority: {}",
        ran.why()
    );
    cut_off_stop_claiming(ran, &w);
    assert!(
        leader_at(&ran.log, w.start_ns).is_some(),
        "a leader lost its claim: {}",
        ran.why()
    );
}

/// S15 and S18: the nodes of the label's list cut from the store, the leader among them: it
/// stops claiming within F, and a node still reaching the store takes the row before heal.
fn store_cut_fails_over(ran: &Ran) {
    let log = &ran.log;
    let w = one_window(ran);
    let cut = ids_in_label(&w.label);
    let l = leader_at(log, w.start_ns)
        .unwrap_or_else(|| panic!("one leader when the cut began: {}", ran.why()));
    assert!(cut.contains(&l), "the leader is cut off: {}", ran.why());
    let late = claims_in(log, w.start_ns + f_ns(), w.end_ns)
        .into_iter()
        .filter(|c| cut.contains(&c.node))
        .collect::<Vec<_>>();
    assert!(
        late.is_empty(),
        "the nodes cut from the store stop claiming within F: {late:?}: {}",
        ran.why()
    );
    assert!(
        !new_claims(log, w.start_ns, w.end_ns, &cut).is_empty(),
        "a node that reaches the store takes the row: {}",
        ran.why()
    );
}

/// S16 and S17: the store killed or paused (the harness's window, from the signal to the
/// restart or resume): nobody claims from F after it to its end.
fn store_down_no_leader(ran: &Ran) {
    let log = &ran.log;
    let w = one_window(ran);
    assert!(w.label.starts_with("store "), "{}", ran.why());
    assert!(
        leader_at(log, w.start_ns.saturating_sub(1)).is_some(),
        "a leader when the store went down: {}",
        ran.why()
    );
    let during = claims_in(log, w.start_ns + f_ns(), w.end_ns);
    assert!(
        during.is_empty(),
        "nobody claims while the store is down: {during:?}: {}",
        ran.why()
    );
}

// ---- The tests -------------------------------------------------------------------------------

#[test]
fn quorum_leader_isolated_app_and_kernel() {
    for layer in [Layer::App, Layer::Kernel] {
        if let Some(ran) = quorum_is_safe(Scenario::S3, layer) {
            s3_isolated_leader_fails_over(&ran);
        }
    }
}

#[test]
fn quorum_split_and_one_way_cuts() {
    if let Some(ran) = quorum_is_safe(Scenario::S5, Layer::App) {
        s5_split_both_ways(&ran);
    }
    if let Some(ran) = quorum_is_safe(Scenario::S8, Layer::Kernel) {
        s8_one_way_cuts_fail_over(&ran);
    }
}

#[test]
fn quorum_paused_leader() {
    if let Some(ran) = quorum_is_safe(Scenario::S11, Layer::Process) {
        s11_paused_leader_fails_over(&ran);
    }
}

/// S2: a follower, then three nodes, then all five crash and restart.
#[test]
fn quorum_crashes() {
    if let Some(ran) = quorum_is_safe(Scenario::S2, Layer::Process) {
        s2_crashes(&ran);
    }
}

/// S4 and S14: a follower cut off changes nothing; a 2 | 2 | 1 split leaves no leader.
#[test]
fn quorum_follower_isolated_and_three_way_split() {
    if let Some(ran) = quorum_is_safe(Scenario::S4, Layer::App) {
        s4_follower_isolated_changes_nothing(&ran);
    }
    if let Some(ran) = quorum_is_safe(Scenario::S14, Layer::App) {
        s14_no_majority_no_leader(&ran);
    }
}

/// S6 and S7: partial partitions in which the leader still reaches a majority.
#[test]
fn quorum_majorities_ring_and_bridge() {
    for s in [Scenario::S6, Scenario::S7] {
        if let Some(ran) = quorum_is_safe(s, Layer::App) {
            leader_keeps_far_nodes_lose(&ran);
        }
    }
}

/// S9 and S10: the leader's messages delayed near the election timeout; 30% loss everywhere.
#[test]
fn quorum_delay_and_loss() {
    if let Some(ran) = quorum_is_safe(Scenario::S9, Layer::App) {
        s9_delay_applied(&ran);
    }
    if let Some(ran) = quorum_is_safe(Scenario::S10, Layer::App) {
        s10_loss_applied(&ran);
    }
}

/// S25: named roles moved under faults (a holder cut off, a holder paused, a holder
/// withdrawing during a 2 / 3 split): every role's promises kept, and the faults moved roles:
/// each of the three steps hands at least one role to another node.
#[test]
fn quorum_roles_moved_under_partitions_and_pauses() {
    if let Some(ran) = quorum_is_safe(Scenario::S25, Layer::App) {
        assert!(ran.r.role_moves.is_some_and(|n| n >= 3), "{}", ran.why());
        assert!(procs(&ran.log, ProcKind::Pause).len() == 1, "{}", ran.why());
        let w = windows(&ran.log);
        assert!(
            w.iter().any(|w| w.label.contains("withdraws from")),
            "{}",
            ran.why()
        );
    }
}

/// S26: three voters and two members that don't vote (docs/safety.md, "Non-voters"). Safe as
/// every quorum run (C1, C2, C6, per role too), no claim of a non-voter (N1), and each step
/// took effect: the non-voter killed was started again well inside its absence; the leader,
/// with both non-voters but one voter of three, stopped claiming and the two other voters
/// elected; the non-voter cut off was removed no sooner than `remove_after` after the cut.
#[test]
fn quorum_nonvoters_count_in_no_majority_and_never_claim() {
    let Some(ran) = quorum_is_safe(Scenario::S26, Layer::App) else {
        return;
    };
    let (log, r, why) = (&ran.log, &ran.r, ran.why());
    assert_eq!(log.voters, [1, 2, 3], "{why}");
    assert_eq!(r.nonvoter_claims, Some(0), "N1: {why}");
    let remove_after_ms = electd_lab::chaos::scenario::s26_remove_after_ms(Timing::default());
    let kills = procs(log, ProcKind::Kill);
    let [(killed_at, nv)] = kills[..] else {
        panic!("one kill: {why}")
    };
    assert!(nv > 3, "a non-voter was killed: {why}");
    let started = procs(log, ProcKind::Start)
        .into_iter()
        .find(|&(t, n)| n == nv && t > killed_at)
        .unwrap_or_else(|| panic!("node {nv} started again: {why}"));
    assert!(
        (started.0 - killed_at) / 1_000_000 < remove_after_ms / 2,
        "{why}"
    );
    let w = windows(log);
    assert_eq!(w.len(), 2, "the split and the cut: {why}");
    let l = leader_fails_over(&ran, &w[0]);
    let with_l = reach(log, &w[0], l);
    assert!(
        with_l.contains(&4) && with_l.contains(&5) && votes(log, &w[0], l) == 1,
        "the leader with the non-voters, apart from the other voters: {why}"
    );
    // The leader last heard the non-voter at most a learner's heartbeat (four beats, 120 ms)
    // before the cut, and the removal is seen within a 50 ms poll: 200 ms of slack.
    let removed = observed(&w[1], " ms after the cut").unwrap_or_else(|| panic!("{why}"));
    assert!(
        removed + 200.0 >= remove_after_ms as f64,
        "removed {removed} ms after the cut, before its absence of {remove_after_ms} ms: {why}"
    );
    assert!(r.role_moves.is_some_and(|n| n >= 1), "{why}");
}

/// S12 and S13: a partition that keeps changing; a split, a kill and loss, then heal.
#[test]
fn quorum_flapping_and_mixture() {
    if let Some(ran) = quorum_is_safe(Scenario::S12, Layer::App) {
        s12_flapping(&ran);
    }
    if let Some(ran) = quorum_is_safe(Scenario::S13, Layer::App) {
        s13_mixture(&ran);
    }
}

#[test]
fn bully_and_ring_split_brain_in_two_three_partition() {
    legacy_splits(Mode::Bully, Layer::App);
    legacy_splits(Mode::Ring, Layer::Kernel);
}

#[test]
fn mutex_store_cut_and_paused() {
    if let Some(ran) = leased_is_safe(Mode::Mutex, Scenario::S15, Layer::Kernel) {
        store_cut_fails_over(&ran);
    }
    if let Some(ran) = leased_is_safe(Mode::Mutex, Scenario::S17, Layer::Process) {
        store_down_no_leader(&ran);
    }
}

/// S16 and S18: the store killed and restarted; a minority with the leader cut from it.
#[test]
fn mutex_store_killed_and_minority_cut() {
    if let Some(ran) = leased_is_safe(Mode::Mutex, Scenario::S16, Layer::Process) {
        store_down_no_leader(&ran);
    }
    if let Some(ran) = leased_is_safe(Mode::Mutex, Scenario::S18, Layer::App) {
        store_cut_fails_over(&ran);
    }
}

/// One scenario per mode over TLS, the peers authenticated by their certificates alone: the
/// leader crashed and restarted (S1; the mutex leader cut from its store, S15, for mutex mode,
/// whose nodes have no peers): the lease-bound modes keep every promise and fail over before
/// the old leader is back (the mutex leader's row taken by another node), bully, ring and
/// invitation converge.
#[test]
fn one_scenario_per_mode_over_tls() {
    for mode in Mode::ALL {
        let scenario = if mode == Mode::Mutex {
            Scenario::S15
        } else {
            Scenario::S1
        };
        let layer = scenario.layers()[0];
        let Some(ran) = run_spec(RunSpec {
            mode,
            scenario,
            layer,
            seed: 1,
            tls: true,
        }) else {
            continue;
        };
        match mode {
            Mode::Quorum => {
                leased_is_safe_in(&ran);
                s1_leader_crash_fails_over(&ran);
            }
            Mode::Mutex => {
                leased_is_safe_in(&ran);
                store_cut_fails_over(&ran);
            }
            _ => assert!(ran.r.passed, "over TLS converges: {}", ran.why()),
        }
    }
}

/// S19, wall clocks jumping by a minute, an hour, a day: in the lease-bound modes nothing
/// changes (no leader change at all: no decision rests on a wall clock); bully only converges
/// (it is judged so; ring and invitation run S19 in `scripts/chaos.sh --quick`, not here, since
/// the suite crossed 30 minutes on 2026-11-29). Skipped, and said so, without libfaketime. The
/// lease-bound
/// modes run at `shared` timings (`Scenario::timing`): at the 150 ms default a starved CI host
/// could change the leader whatever the clocks did (issue 48, item 10).
#[test]
fn wall_clock_jumps_change_nothing() {
    for mode in [Mode::Quorum, Mode::Mutex] {
        if let Some(ran) = run(mode, Scenario::S19, Layer::Process) {
            leased_is_safe_in(&ran);
            assert_eq!(ran.r.leader_changes, 0, "{}", ran.why());
            clocks_jumped(&ran);
        }
    }
    if let Some(ran) = run(Mode::Bully, Scenario::S19, Layer::Process) {
        assert!(ran.r.passed, "converges: {}", ran.why());
    }
}

/// S19's faults took effect: each window's node answered with its wall clock where the window
/// put it (`wall clock of 3 +60 s [wall clock read +60 s]`; issue 48, item 8).
fn clocks_jumped(ran: &Ran) {
    let w = windows(&ran.log);
    assert_eq!(w.len(), 5, "five jumps: {}", ran.why());
    for w in &w {
        let asked: i64 = between(&w.label, " of ", " s [")
            .and_then(|rest: String| rest.split_whitespace().nth(1)?.parse().ok())
            .unwrap_or_else(|| panic!("no jump in {}", w.label));
        let read: i64 = between(&w.label, "[wall clock read ", " s]")
            .unwrap_or_else(|| panic!("the jump was not read back: {}", w.label));
        assert!(
            (read - asked).abs() <= 2,
            "the node's clock did not jump: {}",
            w.label
        );
    }
}

/// S21, the holder's row deleted three times, and S22, the store's wall clock stepped by two
/// follower leases, a minute, back a minute and an hour: mutex mode keeps every promise (no
/// two claimants, one holder a term) and the fault took effect: each deletion removed a row, of
/// a term above the last one's (terms never go back), and the store read each clock step. Before
/// the row was judged on the nodes' own clocks (issue 33), both failed on C1, C2 and C6 (S21:
/// every deletion's next row in term 1 again; S22: the forward steps expired the row early).
/// S22 is skipped, and said so, without libfaketime.
#[test]
fn mutex_row_deleted_and_store_clock_steps() {
    if let Some(ran) = leased_is_safe(Mode::Mutex, Scenario::S21, Layer::Process) {
        let w = windows(&ran.log);
        assert_eq!(w.len(), 3, "three deletions: {}", ran.why());
        // `the holder's row deleted [row of term 4 deleted]`
        let terms: Vec<u64> = w
            .iter()
            .map(|w| {
                between(&w.label, "[row of term ", " deleted]")
                    .unwrap_or_else(|| panic!("no row deleted: {}", w.label))
            })
            .collect();
        assert!(
            terms.windows(2).all(|t| t[1] > t[0]),
            "the deleted rows' terms went back: {terms:?}: {}",
            ran.why()
        );
    }
    if let Some(ran) = leased_is_safe(Mode::Mutex, Scenario::S22, Layer::Process) {
        let w = windows(&ran.log);
        assert_eq!(w.len(), 4, "four clock steps: {}", ran.why());
        // `store clock +60 s [store clock read +60.1 s]`
        for w in &w {
            let asked: f64 = between(&w.label, "store clock ", " s [")
                .unwrap_or_else(|| panic!("no step in {}", w.label));
            let read: f64 = between(&w.label, "[store clock read ", " s]")
                .unwrap_or_else(|| panic!("not read: {}", w.label));
            assert!(
                (read - asked).abs() < 1.0,
                "the store's clock did not step: {}",
                w.label
            );
        }
    }
}

/// S23, the holder resigning ten times, each right after a client was answered: in quorum and
/// mutex mode every promise holds (the next holder claims only after the resigning one's
/// answers ran out) and the fault took effect: each resign gave up a term (the terms grow), a
/// promise of the resigning node still ran at nearly every resign (the precondition of the
/// defect: a resign with no running promise tests nothing), and the role moved each time.
/// Before issue 48's fix a mutex holder released its row with a wait of F − L (30 ms) while
/// its answers promised up to L (120 ms): C2 and C6 failed it (lab/tests/broken.rs keeps that
/// node as a broken variant).
#[test]
fn leased_modes_keep_promises_across_resigns() {
    for mode in [Mode::Quorum, Mode::Mutex] {
        let Some(ran) = leased_is_safe(mode, Scenario::S23, Layer::Process) else {
            continue;
        };
        let w = windows(&ran.log);
        assert_eq!(w.len(), 10, "ten resigns: {}", ran.why());
        let terms: Vec<u64> = w
            .iter()
            .map(|w| {
                between(&w.label, "[term ", " resigned]")
                    .unwrap_or_else(|| panic!("no term resigned: {}: {}", w.label, ran.why()))
            })
            .collect();
        assert!(
            terms.windows(2).all(|t| t[1] > t[0]),
            "the resigned terms did not grow: {terms:?}: {}",
            ran.why()
        );
        let running = w
            .iter()
            .filter(|w| {
                let node: NodeId = between(&w.label, "node ", " resigns").expect("who resigned");
                ran.log
                    .promises
                    .iter()
                    .any(|p| p.node == node && p.from_ns < w.start_ns && p.until_ns > w.start_ns)
            })
            .count();
        eprintln!("{mode:?}: a promise of the resigning node still ran at {running} of 10 resigns");
        assert!(
            running >= 8,
            "a promise ran at only {running} of 10 resigns: {}",
            ran.why()
        );
        assert!(
            ran.r.leader_changes >= 10,
            "the role moved {} times: {}",
            ran.r.leader_changes,
            ran.why()
        );
    }
}

/// S20: the forger on the leader's links, then on a follower's (an attacker without the
/// cluster secret: forged grants and acks, replayed answers, late and rewritten requests).
/// Quorum mode stays safe, and the fault took effect: under each window the forger forged,
/// replayed and rewrote, and what it made up was refused (answers without the member's MAC,
/// requests without the sender's); under the first the leader was cut off: it stopped claiming
/// within F and another node led; under the second the follower lost its leader, who kept
/// its claim (no forged grant won the follower a vote).
#[test]
fn quorum_forger_on_the_path() {
    let Some(ran) = quorum_is_safe(Scenario::S20, Layer::App) else {
        return;
    };
    let w = windows(&ran.log);
    assert_eq!(w.len(), 2, "two forger windows: {}", ran.why());
    for w in &w {
        for what in [
            " forged",
            " replayed",
            " rewritten",
            " answers refused",
            " requests refused",
        ] {
            assert!(
                observed(w, what).is_some_and(|n| n > 0.0),
                "{what} > 0 under {:?}: {}",
                w.label,
                ran.why()
            );
        }
    }
    assert!(
        w.iter()
            .any(|w| observed(w, " withheld").is_some_and(|n| n > 0.0)),
        "a withheld request delivered late: {}",
        ran.why()
    );
    leader_fails_over(&ran, &w[0]);
    let victim = cut_off(&ran.log, &w[1]);
    assert_eq!(victim.len(), 1, "one follower forged off: {}", ran.why());
    leader_keeps_and_cut_lose(&ran, &w[1], &victim);
}

/// S24, the leader squeezed twelve times (docs/safety.md, step 4, on real processes): quorum
/// mode keeps every promise, and the schedule reached what it is for: a vote request arrived at
/// a leader inside a promise it had answered, and was refused (`[N vote requests refused inside
/// a promise]`), in several squeezes (7 and 8 of 12 on seeds 1 and 2 here). The flawed node
/// that votes there fails the same run on C6 (broken.rs).
#[test]
fn quorum_squeezed_leader_refuses_votes_inside_its_promise() {
    let Some(ran) = quorum_is_safe(Scenario::S24, Layer::App) else {
        return;
    };
    let w = windows(&ran.log);
    assert_eq!(w.len(), 24, "twelve squeezes of two windows: {}", ran.why());
    let reached = w
        .iter()
        .filter(|w| observed(w, " vote requests refused inside a promise").is_some_and(|n| n > 0.0))
        .count();
    assert!(
        reached >= 2,
        "a vote request reached a leader inside its promise in {reached} of 12 squeezes: {}",
        ran.why()
    );
}

/// Legacy modes under S20: they converge (judged as they are: the forged links are a cut, and
/// a cut leader of bully, ring or invitation goes on claiming), and what the forger made up was
/// refused as in quorum mode.
#[test]
fn legacy_forger_on_the_path() {
    for mode in [Mode::Bully, Mode::Ring, Mode::Invitation] {
        if let Some(ran) = run(mode, Scenario::S20, Layer::App) {
            assert!(ran.r.passed, "converges: {}", ran.why());
            let w = windows(&ran.log);
            assert_eq!(w.len(), 2, "two forger windows: {}", ran.why());
            // An invitation coordinator may send nothing while cut off (its members ask it):
            // the forger then only rewrites what they send; the run as a whole forges.
            let forged: f64 = w.iter().filter_map(|w| observed(w, " forged")).sum();
            assert!(forged > 0.0, "answers forged: {}", ran.why());
            for w in &w {
                assert!(
                    observed(w, " answers refused").is_some_and(|n| n > 0.0),
                    "answers refused under {:?}: {}",
                    w.label,
                    ran.why()
                );
            }
        }
    }
}

#[test]
fn invitation_splits_and_converges() {
    legacy_splits(Mode::Invitation, Layer::App);
}
