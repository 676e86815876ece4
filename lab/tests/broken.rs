//! Broken variants on real processes: the node with a deliberate flaw (the lab's
//! `electd-flawed` binary, `--lab-flaw NAME`; src/engine.rs, `Flaws`) run through a chaos
//! scenario, so that the checkers of the chaos suite are shown to catch what they are for.
//! (The simulator's broken variants are in tests/sim.rs.)

mod common;

use std::time::{Duration, Instant};

use common::{TestCluster, TEST_TIMING};
use electd::roles::RoleFlaw;
use electd_client::Mode;
use electd_lab::chaos::runner::{run_one_with, Layer, RunSpec, Scenario};
use electd_lab::chaos::verdict::RunResult;

/// Runs `scenario` (quorum mode, application layer, seed 1) on nodes with `flaw`, and checks
/// that the checkers fail the run: C2 sees two claimants and C6 broken promises.
fn caught(scenario: Scenario, flaw: &str) {
    caught_in(Mode::Quorum, scenario, Layer::App, flaw, true);
}

/// Runs `scenario` in `mode` on `layer` (seed 1) on the lab's flawed node with `flaw`; its row.
fn run_flawed(mode: Mode, scenario: Scenario, layer: Layer, flaw: &str) -> RunResult {
    run_flawed_with(mode, scenario, layer, &["--lab-flaw", flaw])
}

/// Runs `scenario` in `mode` on `layer` (seed 1) on `electd-flawed` with `args` (the flaw, and
/// whatever else its nodes take on their command line).
fn run_flawed_with(mode: Mode, scenario: Scenario, layer: Layer, args: &[&str]) -> RunResult {
    let bin = electd_lab::bin::electd_bin().expect("the electd binary");
    let flawed = bin.with_file_name("electd-flawed");
    assert!(
        flawed.is_file(),
        "no {} (build it: cargo build -p electd --features flaws --bin electd-flawed)",
        flawed.display()
    );
    let spec = RunSpec {
        mode,
        scenario,
        layer,
        seed: 1,
        tls: false,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (r, _) = rt.block_on(run_one_with(&spec, &flawed, None, args));
    r
}

/// Runs `scenario` in `mode` on `layer` (seed 1) on nodes with `flaw`: C6 fails it, and C2 too
/// when `two_claimants` (a flaw that breaks promises while no two nodes claim at one instant
/// shows on C6 only).
fn caught_in(mode: Mode, scenario: Scenario, layer: Layer, flaw: &str, two_claimants: bool) {
    let r = run_flawed(mode, scenario, layer, flaw);
    eprintln!("{}", serde_json::to_string(&r).unwrap());
    if let Some(why) = r.skipped.as_ref().filter(|_| mode == Mode::Mutex) {
        // Only PostgreSQL missing skips a mutex run (recorded, a failure on CI).
        electd_lab::skip::skip(&format!("{scenario} {mode:?} {flaw}: {why}"));
        return;
    }
    assert!(r.skipped.is_none(), "the run happened: {r:?}");
    assert!(!r.passed, "a broken node passed: {r:?}");
    if two_claimants {
        assert!(r.split_brain_ms > 0.0, "C2 sees two claimants: {r:?}");
    }
    assert!(
        r.promises_broken.is_some_and(|n| n > 0),
        "C6 sees broken promises: {r:?}"
    );
}

/// S25 (roles moved under cuts, a pause and a withdrawal during a split) on nodes with one rule
/// of named roles left out (`flaw`, electd's `roles::RoleFlaw`): the role checks fail the run on
/// a role's promise broken, while the cluster's own promises are all kept.
fn role_flaw_fails_s25(flaw: RoleFlaw) {
    role_flaw_breaks_promises(flaw, Scenario::S25, &[]);
}

/// `scenario` on nodes with `flaw` at `timing` fails with a role's promise broken (C6 per role).
fn role_flaw_breaks_promises(flaw: RoleFlaw, scenario: Scenario, timing: &[&str]) {
    let r = role_flaw_fails(flaw, scenario, timing);
    assert!(
        r.role_promises_broken.is_some_and(|n| n > 0),
        "C6 per role sees broken promises: {r:?}"
    );
}

/// Timings whose beat is short against the claim lease (10 ms against L = 360 ms, F = 400 ms):
/// at the defaults (30 / 120 / 150 ms) the entries and renewals a grant needs take about as
/// long as the promises a flaw leaves running, so `release-at-once` and `grant-in-first-lease`
/// break none in S25 and S5 (tried on 2026-11-29: every run passed); here the grant comes well
/// inside them.
const SHORT_BEATS: &[&str] = &[
    "--heartbeat-ms",
    "10",
    "--follower-lease-ms",
    "400",
    "--lease-ms",
    "360",
];

/// `scenario` on nodes with `flaw` and the command-line `timing` (none: the scenario's own):
/// the run fails while the cluster's own promises are all kept.
fn role_flaw_fails(flaw: RoleFlaw, scenario: Scenario, timing: &[&str]) -> RunResult {
    let mut args = vec!["--lab-flaw", flaw.name()];
    args.extend(timing);
    let r = run_flawed_with(Mode::Quorum, scenario, Layer::App, &args);
    eprintln!("{}", serde_json::to_string(&r).unwrap());
    assert!(r.skipped.is_none(), "the run happened: {r:?}");
    assert!(!r.passed, "a broken node passed: {r:?}");
    assert_eq!(
        r.promises_broken,
        Some(0),
        "the cluster's own promises kept: {r:?}"
    );
    r
}

/// R4 left out (`hasty-revoke`): a leader revokes a cut-off or paused holder's roles and
/// grants them a sixth of a follower lease before the holder's last promise ends.
#[test]
fn the_chaos_checkers_catch_a_hasty_role_revocation() {
    role_flaw_fails_s25(RoleFlaw::HastyRevoke);
}

/// R3 left out (`grant-in-first-lease`): a new leader grants at once, and takes the holders it
/// has not renewed yet for silent, while the old leader, cut off on the 2 side of S5's split,
/// still renews the holders there.
#[test]
fn the_chaos_checkers_catch_a_grant_in_a_new_leaderships_first_lease() {
    role_flaw_breaks_promises(RoleFlaw::GrantInFirstLease, Scenario::S5, SHORT_BEATS);
}

/// R2 left out (`ignore-taken-at`): S25's cut-off holder, healed while the leader's appends to
/// it stay lost, renews from answers its table has not caught up with, and claims the roles
/// their successors hold.
#[test]
fn the_chaos_checkers_catch_a_renewal_used_before_the_taking_is_applied() {
    role_flaw_fails_s25(RoleFlaw::IgnoreTakenAt);
}

/// R5 left out (`release-at-once`): a holder that withdraws or is moved releases the role at
/// once, and the role granted on is claimed inside its promises.
#[test]
fn the_chaos_checkers_catch_a_release_with_promises_still_running() {
    role_flaw_breaks_promises(RoleFlaw::ReleaseAtOnce, Scenario::S25, SHORT_BEATS);
}

/// R1 left out (`claim-from-receipt`): S25's last holder, whose renewals are answered late and
/// whose messages to the leader are then lost, claims past what the leader waits out (at 10 ms
/// beats; at the defaults the late answers leave it only a few ms past, and seed 1 passed).
#[test]
fn the_chaos_checkers_catch_a_claim_counted_from_the_answers_arrival() {
    role_flaw_breaks_promises(RoleFlaw::ClaimFromReceipt, Scenario::S25, SHORT_BEATS);
}

/// R6 left out (`reuse-token`): a grant takes the last token drawn again, so a role that
/// changes hands keeps its token: C1 per role sees one token claimed by two nodes.
#[test]
fn the_chaos_checkers_catch_a_token_drawn_again() {
    let r = role_flaw_fails(RoleFlaw::ReuseToken, Scenario::S25, &[]);
    assert!(
        r.notes
            .iter()
            .any(|n| n.starts_with("C1: role") && n.contains("claimed by nodes")),
        "C1 per role sees a token claimed by two nodes: {r:?}"
    );
}

/// The leader isolated (S3) while its claim lease is three follower leases (`long-lease`,
/// docs/safety.md's step 3 left out): the isolated leader goes on claiming after the majority
/// elected another.
#[test]
fn the_chaos_checkers_catch_a_claim_that_outlives_the_election_timeout() {
    caught(Scenario::S3, "long-lease");
}

/// The forger on the leader's links (S20) against a node that takes answers as they come
/// (`accept-unsigned-answers`: the transport before bedd083): the forged acknowledgements keep
/// the cut-off leader claiming while the others elect another.
#[test]
fn the_chaos_checkers_catch_answers_taken_unsigned() {
    caught(Scenario::S20, "accept-unsigned-answers");
}

/// A non-voter counted in a quorum (`count-learner-ack`: the leader probes its learners too and
/// counts their acknowledgements toward the voters' majority): in S26's split the leader keeps
/// both non-voters but one voter of three, and 1 + 2 acknowledgements make a majority of three,
/// so it claims on while the two other voters elect: C2 and C6 fail the run. N1 sees nothing:
/// the leader claims, not the non-voters.
#[test]
fn the_chaos_checkers_catch_a_nonvoter_counted_in_a_quorum() {
    let r = run_flawed(Mode::Quorum, Scenario::S26, Layer::App, "count-learner-ack");
    eprintln!("{}", serde_json::to_string(&r).unwrap());
    assert!(r.skipped.is_none(), "the run happened: {r:?}");
    assert!(!r.passed, "a broken node passed: {r:?}");
    assert!(r.split_brain_ms > 0.0, "C2 sees two claimants: {r:?}");
    assert!(r.promises_broken.is_some_and(|n| n > 0), "C6: {r:?}");
    assert_eq!(r.nonvoter_claims, Some(0), "N1: {r:?}");
}

/// The leader squeezed (S24: docs/safety.md's step 4 on real processes) on nodes whose vote
/// handler is the one before that step (`vote-while-leading`): a leader grants a vote that
/// reaches it inside a promise it just answered, and the winner claims inside that promise.
/// C6 catches it (6 to 7 promises broken a run on seeds 1-3 here); C2, which judges claim
/// intervals, does not (the voter's claim ended when it voted), as in the simulator.
#[test]
fn the_chaos_checkers_catch_a_vote_inside_a_promise() {
    caught_in(
        Mode::Quorum,
        Scenario::S24,
        Layer::App,
        "vote-while-leading",
        false,
    );
}

/// The holder resigning again and again (S23) in mutex mode, on nodes whose release counts the
/// row's wait from the claim the resign had just ended (`release-from-ended-claim`: the node
/// before issue 48): the row is free 30 ms after the resign, and the next holder claims inside
/// the answers the resigning one gave just before. The resigning node's own claim ended at the
/// resign (C2 sees one claimant at a time): its answers' promises are what break (C6).
#[test]
fn the_chaos_checkers_catch_a_mutex_release_inside_its_promises() {
    caught_in(
        Mode::Mutex,
        Scenario::S23,
        Layer::Process,
        "release-from-ended-claim",
        false,
    );
}

/// Issue 48, item 6: a node that ends by itself (node 5 aborts 3 s after its start,
/// `abort-node-5`) fails the run, named with how it ended, whatever the checkers make of its
/// last view: a follower that panicked after the fault passed S4 before (C4 counted its last
/// view as agreeing, and the wind-down killed what was left).
#[test]
fn a_node_that_dies_by_itself_fails_the_run() {
    let bin = electd_lab::bin::electd_bin().expect("the electd binary");
    let flawed = bin.with_file_name("electd-flawed");
    let spec = RunSpec {
        mode: Mode::Quorum,
        scenario: Scenario::S4,
        layer: Layer::App,
        seed: 1,
        tls: false,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (r, _) = rt.block_on(run_one_with(
        &spec,
        &flawed,
        None,
        &["--lab-flaw", "abort-node-5"],
    ));
    eprintln!("{}", serde_json::to_string(&r).unwrap());
    assert!(!r.passed, "a run with a node that aborted passed: {r:?}");
    assert!(
        r.notes
            .iter()
            .any(|n| n.contains("node 5 exited by itself (killed by signal 6 (ABORT))")),
        "the run names the node and how it ended: {:?}",
        r.notes
    );
}

/// The multi-process tests' own check (`TestCluster::assert_safe`, issue 48, item 8) judges
/// promises (C6) and can fail: on nodes whose claim lease is three follower leases
/// (`long-lease`), the leader is paused (SIGSTOP) once the poller holds its promises; the others
/// elect one and it claims inside the paused leader's last promise.
#[test]
fn the_tests_own_check_catches_a_promise_broken_by_the_next_leader() {
    let bin = electd_lab::bin::electd_bin().expect("the electd binary");
    let mut tc = TestCluster::configure(Mode::Quorum, 3, TEST_TIMING);
    tc.c.bin = bin.with_file_name("electd-flawed");
    tc.c.extra_args
        .extend(["--lab-flaw".into(), "long-lease".into()]);
    for id in tc.c.ids() {
        tc.start_node(id);
    }
    tc.poll();
    let rt = TestCluster::rt();
    let wait = Duration::from_secs(20);
    let leader = rt.block_on(tc.c.wait_agreed(wait)).expect("a leader");
    let until = Instant::now() + wait;
    while tc.promises_so_far() < 10 {
        assert!(Instant::now() < until, "no promise recorded in {wait:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
    tc.c.signal(leader, rustix::process::Signal::STOP);
    let next = rt.block_on(tc.c.wait_agreed_other_than(Some(leader), wait));
    assert!(next.is_some(), "the others elected none in {wait:?}");
    // The new leader's promises, then the paused one back.
    let recorded = tc.promises_so_far();
    while tc.promises_so_far() < recorded + 5 {
        assert!(Instant::now() < until, "no promise of the new leader");
        std::thread::sleep(Duration::from_millis(20));
    }
    tc.c.signal(leader, rustix::process::Signal::CONT);
    let found = tc.safety_violations();
    assert!(
        found.iter().any(|v| v.starts_with("promises broken (C6)")),
        "C6 did not see the claim inside the paused leader's promise: {found:#?}"
    );
}

/// A wiped follower restarted (without join) as the leader dies, on nodes that take a new data
/// dir's incarnation as confirmed at once (`trust-new-incarnation`: docs/safety.md's "A wiped
/// disk never votes twice" left out). What the nodes did shows it, not the flag the flaw sets:
/// the wiped node stays up and holds a vote of the cluster's term (it voted, or followed a
/// leader, so its answers count), while fewer than ⌈n/2⌉ of the others recorded its new
/// incarnation (they still hold the one it had, in `/v1/status` `engine.identity.peers`). The
/// same check passes the fixed node, which stops (`quorum.rs`, `a_wiped_follower_refuses_...`).
#[test]
fn a_wiped_member_that_votes_at_once_is_caught_on_real_processes() {
    let fixed = wiped_during_an_election(None);
    assert!(fixed.is_empty(), "the fixed node was flagged: {fixed:?}");
    let flawed = wiped_during_an_election(Some("trust-new-incarnation"));
    assert!(
        !flawed.is_empty(),
        "the wiped node voted unrecorded and went unseen"
    );
}

/// Five nodes; once every member recorded every other's incarnation, a follower is wiped and
/// restarted (with `flaw`, the only node started from then on) as the leader dies. Samples
/// [`unrecorded`] every 20 ms until the others agree on a new leader and for 3 s more (or the
/// wiped node stopped, as the fixed one does): the times the wiped node was found.
fn wiped_during_an_election(flaw: Option<&str>) -> Vec<usize> {
    let bin = electd_lab::bin::electd_bin().expect("the electd binary");
    let mut tc = TestCluster::start(Mode::Quorum, 5);
    let rt = TestCluster::rt();
    let wait = Duration::from_secs(20);
    let leader = rt.block_on(tc.c.wait_agreed(wait)).expect("a leader");
    let wiped = tc.c.ids().into_iter().find(|i| *i != leader).unwrap();
    let until = Instant::now() + wait;
    while !unrecorded(&tc, &rt).is_empty() {
        assert!(
            Instant::now() < until,
            "not recorded: {:?}",
            unrecorded(&tc, &rt)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    tc.kill(wiped);
    std::fs::remove_dir_all(tc.c.data_dir(Mode::Quorum, wiped)).unwrap();
    if let Some(flaw) = flaw {
        tc.c.bin = bin.with_file_name("electd-flawed");
        tc.c.extra_args.extend(["--lab-flaw".into(), flaw.into()]);
    }
    tc.start_node(wiped);
    tc.kill(leader);
    let mut found = Vec::new();
    let (until, mut agreed_at) = (Instant::now() + wait, None);
    while Instant::now() < until && agreed_at.is_none_or(|t: Instant| t.elapsed().as_secs() < 3) {
        found.extend(
            unrecorded(&tc, &rt)
                .iter()
                .filter(|(id, _)| *id == wiped)
                .map(|(_, n)| *n),
        );
        if agreed_at.is_none()
            && rt
                .block_on(tc.c.agreed_leader())
                .is_some_and(|l| l != leader)
        {
            agreed_at = Some(Instant::now());
        }
        if tc.c.pid(wiped).is_none() || tc.c.wait_exit(wiped, Duration::ZERO) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        agreed_at.is_some() || flaw.is_none(),
        "no leader after the leader died"
    );
    found
}

/// The running members that hold a vote of some term while fewer than ⌈n/2⌉ of the other
/// running members record the incarnation they run on (identity.rs, rule 1), each with how
/// many do.
fn unrecorded(tc: &TestCluster, rt: &tokio::runtime::Runtime) -> Vec<(u64, usize)> {
    let ids = tc.c.ids();
    let needed = electd::quorum::confirmations_needed(ids.len());
    let statuses: Vec<(u64, serde_json::Value)> = ids
        .iter()
        .filter(|id| tc.c.pid(**id).is_some())
        .filter_map(|&id| Some((id, rt.block_on(tc.c.status(id)).ok()?.engine)))
        .collect();
    let mut out = Vec::new();
    for (id, engine) in &statuses {
        let mine = &engine["identity"]["incarnation"];
        let voted = engine["vote"].as_str().is_some();
        let recorders = statuses
            .iter()
            .filter(|(other, e)| {
                other != id && &e["identity"]["peers"][id.to_string()]["incarnation"] == mine
            })
            .count();
        if voted && recorders < needed {
            out.push((*id, recorders));
        }
    }
    out
}
