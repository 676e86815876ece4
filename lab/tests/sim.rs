//! The quorum simulator in the suite: 450 schedules of 5 real quorum nodes per run, in six
//! tests of a fixed amount of work each, so that two run at once on 2 cores: three of 100
//! schedules (150 until the suite crossed 30 minutes on 2026-11-29), and three of 50 with membership changes (adds, removals and replacements, the
//! leader's too, and wiped disks, from 3 to 7 members), which cost about three times as much
//! each. The seed range changes from run to run and is printed (replay one with
//! `scripts/sim.sh --seed S`, `--membership` for the membership parts'). What a random range
//! must reach is asserted only where every range reaches it (a membership change in 50
//! schedules); the rarer preconditions are asserted on a pinned range
//! ([`membership_schedules_reach_issue_29s_preconditions`]), so that no run fails by the seeds
//! it drew (issue 48, item 10). The broken variants must be caught.

use electd::roles::RoleFlaw;
use electd_lab::sim::quorum::{run, Flaw, Outcome, Profile, Reached, Spec};
use electd_lab::sim::schedule::{Step, Target, Timed};

/// Schedules per test without membership changes (three tests: about 0.15 s of CPU each at
/// the dev profile's opt-level 1, Cargo.toml).
const PLAIN: u64 = 100;
/// Schedules per test with membership changes (three tests: 0.3 to 1.5 s each).
const WITH_MEMBERS: u64 = 50;

/// The first seed of this run's range (`ELECTD_SIM_FIRST` to pin it).
fn first_seed() -> u64 {
    std::env::var("ELECTD_SIM_FIRST")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs() % 1_000_000 * 10_000)
                .unwrap_or(0)
        })
}

/// Part `part` of the run's range: parts 0 to 2 plain, 3 to 5 with membership changes, each
/// on seeds of its own.
fn schedules(part: u64) {
    let membership = part >= 3;
    let (first, count) = if membership {
        (
            first_seed() + 3 * PLAIN + (part - 3) * WITH_MEMBERS,
            WITH_MEMBERS,
        )
    } else {
        (first_seed() + part * PLAIN, PLAIN)
    };
    // The last part of each kind stands for named roles too.
    let roles = part == 2 || part == 5;
    let flag = replay_flags(membership, roles);
    eprintln!("sim: seeds {first}..{}{flag}", first + count - 1);
    let t = run_range(first, count, (membership, roles));
    if roles {
        eprintln!(
            "sim: roles: {} promises on named roles judged, {} changes of hands",
            t.role_promises, t.role_moves
        );
        assert!(
            t.role_promises > 0 && t.role_moves > 0,
            "the schedules judged no role promise or moved no role: {} promises, {} moves",
            t.role_promises,
            t.role_moves
        );
    }
    // What every range reaches, or the part judged nothing (issue 48, item 8): promises
    // (claiming answers judged whole), and a leader change (a second term claimed).
    eprintln!(
        "sim: {} promises judged; {} of {count} schedules claimed a second term",
        t.promises, t.second_terms
    );
    assert!(
        t.promises > 0 && t.second_terms > 0,
        "the schedules judged no promise or changed no leader: {} promises, {} second terms",
        t.promises,
        t.second_terms
    );
    if membership {
        eprintln!(
            "sim: {} adds and {} removals completed, {} wiped members refused",
            t.added, t.removed, t.refused
        );
        eprintln!("sim: reached {:?}", t.reached);
        assert!(
            t.added > 0 && t.removed > 0,
            "membership schedules changed nothing: {} adds, {} removals",
            t.added,
            t.removed
        );
    }
    assert!(t.failed.is_empty(), "violated schedules: {:?}", t.failed);
}

/// What a range of schedules did.
#[derive(Default)]
struct Tally {
    /// Seeds that broke a property.
    failed: Vec<u64>,
    reached: Reached,
    added: u64,
    removed: u64,
    refused: u64,
    /// Claiming answers judged as promises.
    promises: u64,
    /// Schedules in which a second term was claimed.
    second_terms: u64,
    /// Claiming answers on named roles judged as promises, and changes of hands.
    role_promises: u64,
    role_moves: u64,
}

/// The flags of `scripts/sim.sh` that replay a schedule of these kinds.
fn replay_flags(membership: bool, roles: bool) -> String {
    let membership = if membership { " --membership" } else { "" };
    format!("{membership}{}", if roles { " --roles" } else { "" })
}

/// Runs `count` schedules from seed `first`, with membership changes and named roles or not.
fn run_range(first: u64, count: u64, (membership, roles): (bool, bool)) -> Tally {
    let flag = replay_flags(membership, roles);
    let mut t = Tally::default();
    for seed in first..first + count {
        let out = run(&Spec {
            membership,
            roles,
            ..Spec::new(seed, 5)
        });
        t.role_promises += out.role_promises;
        t.role_moves += out.role_moves;
        t.added += out.added;
        t.removed += out.removed;
        t.refused += out.refused;
        t.promises += out.promises;
        t.second_terms += u64::from(out.max_term >= 2 && out.promises > 0);
        t.reached.add(&out.reached);
        if let Some(v) = out.violations.first() {
            eprintln!("FAIL seed {seed}: {v} (replay: scripts/sim.sh --seed {seed}{flag})");
            t.failed.push(seed);
        }
    }
    t
}

#[test]
fn schedules_part_1() {
    schedules(0);
}

#[test]
fn schedules_part_2() {
    schedules(1);
}

#[test]
fn schedules_part_3() {
    schedules(2);
}

#[test]
fn schedules_part_4_with_membership_changes() {
    schedules(3);
}

#[test]
fn schedules_part_5_with_membership_changes() {
    schedules(4);
}

#[test]
fn schedules_part_6_with_membership_changes() {
    schedules(5);
}

/// Issue 29's findings each need a precondition that about one membership schedule in six
/// reaches: a growth to 7 members with one cut off from those added past the hellos, then
/// wiped; a wiped voter started with join while preferred; a handover to a member of higher
/// priority; a member added back after a snapshot removed it. On 30 pinned seeds every one is
/// reached (9, 3, 102 and 5 times on 2026-11-28); on a random range of 50 some were not now
/// and then, which failed the run by the seeds it drew. If the schedules' draws change, pick
/// another range: `electd-lab sim --membership --seeds 30 --first S` prints what it reached.
#[test]
fn membership_schedules_reach_issue_29s_preconditions() {
    let t = run_range(8_589_440_450, 30, (true, false));
    let r = &t.reached;
    eprintln!("sim: reached {r:?}");
    assert!(
        r.wiped_after_growth > 0
            && r.wipe_joined_preferred > 0
            && r.preferred_handovers > 0
            && r.readded_after_snapshot > 0,
        "issue 29's preconditions not reached: {r:?}"
    );
    assert!(t.failed.is_empty(), "violated schedules: {:?}", t.failed);
}

/// Schedules with membership changes that the simulator once failed, each on a bug of the
/// node it found: a wiped member that answered appends with an empty log tripped openraft's
/// assertion in the leader (777000478); a joint config whose leader changed was never finished
/// (777000457, 777000480); a member cut off while a new member was added never heard from it
/// once it led, not knowing its address (888000032, 888000142); a member behind the log
/// refused a node added back, which stopped, or a node that joined while it caught up
/// (5819240593, 6100000302, 6100000437, 6100000545); a voter added before its incarnation was
/// confirmed left the live members without a majority that may vote (5819240593 again); a
/// member replaced twice over never recorded a confirmed member's incarnation, whose wiped
/// successor was then confirmed (6100000904, with hellos not asked again); and two of the
/// simulator's own (wiping a majority's disks: 888000146, 5764240481).
#[test]
fn membership_schedules_that_once_failed() {
    for seed in [
        777000457, 777000478, 777000480, 888000032, 888000142, 888000146, 5764240481, 5819240593,
        6100000302, 6100000437, 6100000545, 6100000904,
    ] {
        // As they were drawn then: without issue 29's priorities and steps.
        let out = run(&Spec {
            membership: true,
            lapses: false,
            ..Spec::new(seed, 5)
        });
        assert!(
            out.violations.is_empty(),
            "seed {seed}: {:?} (replay: scripts/sim.sh --seed {seed} --membership)",
            out.violations
        );
    }
}

/// Issue 29's 10,000-schedule soak (`scripts/sim.sh --membership --seeds 10000`) failed these:
/// a member recorded the last hello of a node it had just applied the removal of (openraft's
/// membership, which the hello was judged by, lags the apply), and refused that node's new
/// data dir once it was added back, for ever (626: node 3 never confirmed); and the sampler
/// compared an answer with an event log whose writer had not yet run at the same simulated
/// instant (a claim ending exactly at the sample; 1098, a checker artefact: the sampler now
/// lets the instant's tasks run and reads again). A later soak (seeds 20001..22000) failed
/// 20544, a checker artefact too: a handover decided on the hello answer of a member's old,
/// confirmed data dir just before it was killed and wiped, delivered to the new one; the
/// check now counts only handovers delivered a resign timeout after the crash. CI failed
/// 7133860454 (a debug build only): a leader that had just finished a change removing itself
/// still said Leader and took another change, whose append openraft's debug assertion
/// refused, stopping its core; the node's answers then froze while its event log said it
/// claimed (20 violations). Such a leader now refuses membership changes (`must_lead`).
/// CI failed 8333340513, a checker artefact: a leader's disk wiped under a partition, the node
/// refused to run (as it must), and its removal found no leader until the heal; the last of
/// its five tries came 20 ms before one was elected, and nothing tried again, so the refused
/// member stayed in the membership and "every member names the leader" never held. The
/// simulation now goes on replacing it after the heal, as an operator would.
#[test]
fn membership_schedules_the_soak_found() {
    for seed in [626, 1098, 20544, 7133860454, 8333340513] {
        let out = run(&Spec {
            membership: true,
            ..Spec::new(seed, 5)
        });
        assert_kept(&out, &format!("seed {seed}: "));
    }
}

/// No violation in `out`; else the violations and the timeline, after `what`.
fn assert_kept(out: &Outcome, what: &str) {
    assert!(
        out.violations.is_empty(),
        "{what}{:?}\n{}",
        out.violations,
        out.timeline.join("\n")
    );
}

/// Members change under the checkers, at the default timings: a member added; the leader
/// removed (it hands over first); the leader replaced (removed, wiped, joined again); the
/// leader's disk wiped and the node started again as the member it was, without join, twice.
fn member_changes(flaw: Option<Flaw>) -> Outcome {
    let at = |step| Timed { step, then_ms: 600 };
    run(&Spec {
        flaw,
        profile: Profile::Default,
        membership: true,
        script: Some(vec![
            at(Step::Add),
            at(Step::Remove {
                target: Target::Leader,
                linger_ms: 100,
            }),
            at(Step::Replace {
                target: Target::Leader,
                down_ms: 100,
            }),
            at(Step::Wipe {
                target: Target::Leader,
                down_ms: 0,
            }),
            at(Step::Wipe {
                target: Target::Leader,
                down_ms: 300,
            }),
        ]),
        ..Spec::new(11, 5)
    })
}

#[test]
fn members_change_and_wiped_disks_refuse_under_the_checkers() {
    let out = member_changes(None);
    assert_kept(&out, "");
    // The add, the replacement and the two wiped members joined again; the removal, the
    // replacement and the two wiped members removed first.
    assert_eq!(
        (out.added, out.removed, out.refused),
        (4, 4, 2),
        "{}",
        out.timeline.join("\n")
    );
}

/// A member that has not applied the log up to a node's removal still knows the node's old
/// incarnation; when the node is added back on a new data dir, that member must not refuse it
/// (identity.rs, rule 3). Node 3 is reachable but hears no appends while node 5 is replaced:
/// node 5 must be confirmed by the others, and after the heal every member names one leader.
/// Before the rule, node 3's answer made node 5 refuse to run, and the members left without a
/// leader (seed 5819240593 of the membership schedules).
#[test]
fn a_member_behind_the_log_does_not_refuse_a_node_added_back() {
    use electd::quorum::{PATH_APPEND, PATH_SNAPSHOT};
    use electd_lab::sim::net::{Effect, Leg, Rule};
    let starved = [1, 2, 4, 5, 6]
        .into_iter()
        .flat_map(|from| {
            [PATH_APPEND, PATH_SNAPSHOT].map(|path| Rule {
                from,
                to: 3,
                path,
                leg: Leg::Request,
                effect: Effect::Drop,
            })
        })
        .collect();
    let at = |step, then_ms| Timed { step, then_ms };
    let out = run(&Spec {
        profile: Profile::Default,
        membership: true,
        script: Some(vec![
            at(Step::Heal, 600),
            at(Step::Rules(starved), 300),
            at(
                Step::Replace {
                    target: Target::Node(5),
                    down_ms: 100,
                },
                1_500,
            ),
        ]),
        ..Spec::new(12, 5)
    });
    assert_kept(&out, "");
    assert_eq!(
        (out.added, out.removed),
        (1, 1),
        "{}",
        out.timeline.join("\n")
    );
}

/// The broken variant: nodes that vote at once on a new data dir (the identity check left
/// out) are caught when a wiped member comes back, by a vote it granted as the member it was
/// (read from the network, not from the flag the flaw sets; issue 48, item 9).
#[test]
fn a_wiped_member_that_votes_at_once_is_caught() {
    let out = member_changes(Some(Flaw::TrustNewIncarnation));
    assert!(
        out.violations
            .iter()
            .any(|v| v.contains("wiped disk") && v.contains("a vote as the member it was")),
        "the flaw went unseen: {:?}\n{}",
        out.violations,
        out.timeline.join("\n")
    );
}

/// The checkers can fail: a node whose claim outlives the followers' lease is caught, on pinned
/// seeds, by both checks that judge claims: the promise check (C6: the next leader claims
/// inside a promise the broken node answered with its lease, three times the followers') and
/// the event logs' two-claimant check (C2: the broken node's claim overlaps the next leader's).
/// Each is named, so that a hole in one is not hidden by the other; the seeds are pinned, so
/// that every run judges schedules known to reach the flaw. (It used to pass on any violation
/// in 60 schedules from the run's random first seed, whichever check raised it.) Of seeds
/// 2800000000..=2800000011 with this flaw C6 trips on 9 and C2 on 5; these five trip both.
/// (Before the follower lease ran through its last nanosecond, 727b231, the schedules were
/// others: C6 tripped on 10 and C2 on 7, and 2800000009 was pinned in place of 2800000010.)
#[test]
fn a_claim_lease_longer_than_the_followers_lease_is_caught() {
    for seed in [2800000001, 2800000002, 2800000003, 2800000004, 2800000010] {
        let out = run(&Spec {
            flaw: Some(Flaw::LongLease),
            ..Spec::new(seed, 5)
        });
        let tripped = |what: &str| out.violations.iter().any(|v| v.contains(what));
        assert!(
            tripped("a promise broken (C6)") && tripped("two claimants for"),
            "seed {seed}: the broken node went unseen by C6 or C2: {:?} (replay: \
             scripts/sim.sh --unsafe --seed {seed})",
            out.violations
        );
    }
}

/// A schedule leaves nothing behind: the nodes, their files and tasks go with its runtime
/// (a soak runs 10,000 of them in one process).
#[test]
fn schedules_leave_no_open_files_behind() {
    let open_files = || {
        std::fs::read_dir("/proc/self/fd")
            .map(|d| d.count())
            .unwrap_or(0)
    };
    let spec = |seed| Spec::new(seed, 5);
    run(&spec(first_seed()));
    let before = open_files();
    for seed in first_seed()..first_seed() + 20 {
        run(&spec(seed));
    }
    let after = open_files();
    assert!(
        after <= before + 2,
        "open files grew from {before} to {after} over 20 schedules"
    );
}

/// A replay is the same run: same timeline, same verdict.
#[test]
fn a_seed_replays_the_same_schedule() {
    let spec = Spec::new(first_seed(), 5);
    let (a, b) = (run(&spec), run(&spec));
    assert_eq!(a.timeline, b.timeline);
    assert_eq!(a.violations, b.violations);
}

/// The schedule of docs/safety.md's step 4 at the default timings (follower lease 150 ms): the
/// leader has led for 1.5 s; its appends to two members are lost, and the answers of the other
/// two for `hold_ms`, so the two cut-off members campaign and the leader grants a pre-vote; the
/// answers come back, the leader claims, and the winner's vote request reaches it
/// `vote_delay_ms` late, inside the promise it just answered. A few holds and delays around
/// that instant, so that the test does not hang on one exact timing.
fn squeezes(flaw: Option<Flaw>) -> Vec<((u64, u64), Outcome)> {
    let mut outs = Vec::new();
    for hold_ms in [146, 150, 154] {
        for vote_delay_ms in [25, 45] {
            let spec = Spec {
                flaw,
                profile: Profile::Default,
                script: Some(vec![Timed {
                    step: Step::Squeeze {
                        hold_ms,
                        vote_delay_ms,
                    },
                    then_ms: 600,
                }]),
                ..Spec::new(7, 5)
            };
            outs.push(((hold_ms, vote_delay_ms), run(&spec)));
        }
    }
    outs
}

/// A leader refuses a vote while a promise it answered can still run, so nobody claims
/// inside it. Fails on the vote handler before the fix (see the next test, which runs it).
#[test]
fn a_leader_never_votes_inside_its_own_promise() {
    for ((hold, delay), out) in squeezes(None) {
        assert!(
            out.votes_inside_promise > 0,
            "hold {hold} delay {delay}: the vote request did not reach the leader inside its \
             promise, so this schedule tests nothing:\n{}",
            out.timeline.join("\n")
        );
        assert_eq!(out.granted_inside_promise, 0);
        assert_kept(&out, &format!("hold {hold} delay {delay}: "));
    }
}

/// The broken variant "vote while leading" (the old vote handler) is caught by the promise
/// checker (C6) on the same schedules; C2, which judges the event logs' claim intervals only,
/// saw nothing there.
#[test]
fn a_leader_voting_inside_its_promise_is_caught() {
    for ((hold, delay), out) in squeezes(Some(Flaw::VoteWhileLeading)) {
        assert!(out.granted_inside_promise > 0, "hold {hold} delay {delay}");
        assert!(
            out.violations
                .iter()
                .any(|v| v.contains("promise broken (C6)")),
            "hold {hold} delay {delay}: the flaw went unseen: {:?}",
            out.violations
        );
    }
}

/// The leader cut off from everyone at the default timings: each probe it sends waits for its
/// deadline (50 ms), and its claim ends while one is out; after 1 s the cut heals.
fn isolated_leader(flaw: Option<Flaw>) -> Outcome {
    isolated_leader_beside(flaw, 0)
}

/// [`isolated_leader`] with `nonvoters` members that don't vote, which the cut leaves out.
fn isolated_leader_beside(flaw: Option<Flaw>, nonvoters: usize) -> Outcome {
    run(&Spec {
        flaw,
        nonvoters,
        profile: Profile::Default,
        script: Some(vec![Timed {
            step: Step::Isolate(Target::Leader),
            then_ms: 1_000,
        }]),
        ..Spec::new(13, 5)
    })
}

/// A claim that ends while a probe is out reaches the leader's event log (`/v1/events`,
/// `/v1/watch`) at its instant. Before the fix the role loop recorded only between probes:
/// the log said the leader claimed for up to a probe timeout after its answers stopped
/// (the sampler's check), and a schedule that ended then showed two claimants in the event
/// logs (seed 720002798: node 5 cut off by a bridge, node 1 elected 204 ms after node 5's
/// claim ended, node 5's end still unrecorded).
#[test]
fn the_end_of_a_claim_reaches_the_event_log_at_once() {
    assert_kept(&isolated_leader(None), "");
    assert_kept(&run(&Spec::new(720002798, 5)), "seed 720002798: ");
}

/// The broken variant (the role loop recording only between probes) is caught by the
/// sampler's event-log check.
#[test]
fn an_event_log_that_trails_the_claim_is_caught() {
    let out = isolated_leader(Some(Flaw::RecordBetweenProbes));
    assert!(
        out.violations
            .iter()
            .any(|v| v.contains("event log has said")),
        "the flaw went unseen: {:?}\n{}",
        out.violations,
        out.timeline.join("\n")
    );
}

/// Five voters and two members that don't vote (docs/safety.md, "Non-voters"), the leader cut
/// off from the voters but not from the non-voters, at the default timings, for 1 s.
fn isolated_leader_with_nonvoters(flaw: Option<Flaw>) -> Outcome {
    isolated_leader_beside(flaw, 2)
}

/// As built, the non-voters join by themselves, their acknowledgements count for no claim,
/// none claims the cluster's election and none sits in a voter set (N1, N2).
#[test]
fn nonvoters_count_in_no_quorum() {
    let out = isolated_leader_with_nonvoters(None);
    assert_kept(&out, "");
    assert_eq!(out.nonvoters_joined, 2, "{}", out.timeline.join("\n"));
}

/// The broken variant (`count-learner-ack`: the probe counts the non-voters' acknowledgements
/// as voters'): the cut-off leader goes on claiming on theirs while the voters elect another,
/// and the checkers see two claimants.
#[test]
fn a_nonvoter_counted_in_a_quorum_is_caught() {
    let out = isolated_leader_with_nonvoters(Some(Flaw::CountLearnerAck));
    assert!(
        out.violations
            .iter()
            .any(|v| v.contains("two claimants") || v.contains("(C6)")),
        "the flaw went unseen: {:?}\n{}",
        out.violations,
        out.timeline.join("\n")
    );
}

/// Issue 29, finding 1: node 3 is cut off from the four members added after it (4-7 never
/// hear its hello), 1 and 2 are then cut off, and 3's disk is wiped and it starts again as the
/// member it was, without join. Before the members' incarnations were in the log, 4-7 answered
/// "new" (4 of 6, a majority of the 7), and the wiped 3 was confirmed and voted again as the
/// member it was ("... was confirmed: it votes again as the member it was", seeds 2 and 3).
/// Now the leader writes 3's incarnation into the log before each add (identity.rs, rule 5),
/// 4-7 apply it, and refuse the new data dir.
fn wiped_after_growth(seed: u64) -> Outcome {
    let at = |step, then_ms| Timed { step, then_ms };
    run(&Spec {
        profile: Profile::Default,
        membership: true,
        script: Some(vec![
            at(Step::Heal, 1_000),
            at(Step::Split(vec![vec![3], vec![4, 5, 6, 7]]), 100),
            at(Step::Add, 2_000),
            at(Step::Add, 2_000),
            at(Step::Add, 2_000),
            at(Step::Add, 30_000),
            at(Step::Heal, 1_000),
            at(Step::Split(vec![vec![1, 2], vec![3, 4, 5, 6, 7]]), 1_000),
            at(
                Step::Wipe {
                    target: Target::Node(3),
                    down_ms: 100,
                },
                10_000,
            ),
        ]),
        ..Spec::new(seed, 3)
    })
}

#[test]
fn a_wiped_member_is_refused_by_members_added_while_it_was_cut_off() {
    for seed in [1, 2, 3] {
        let out = wiped_after_growth(seed);
        assert_kept(&out, &format!("seed {seed}: "));
        // The four adds, then 3 refused to run and was replaced (removed, added again).
        assert_eq!(
            (out.added, out.refused),
            (5, 1),
            "seed {seed}: {}",
            out.timeline.join("\n")
        );
    }
}

/// Issue 29's broken variants, each caught by the drawn membership schedules (`electd-lab sim
/// --membership --FLAG`) on pinned seeds, by the check that the rule it breaks keeps: `check`
/// must be among the violations of each seed, which passes without the flaw
/// (`issue_29_seeds_pass_without_the_flaws`).
fn caught_in_membership_schedules(flaw: Flaw, flag: &str, seeds: &[u64], check: &str) {
    for &seed in seeds {
        let out = run(&Spec {
            flaw: Some(flaw),
            membership: true,
            ..Spec::new(seed, 5)
        });
        assert!(
            out.violations.iter().any(|v| v.contains(check)),
            "seed {seed}: the flaw went unseen by '{check}': {:?} (replay: scripts/sim.sh \
             --seed {seed} --membership --{flag})",
            out.violations
        );
    }
}

/// Issue 29's pinned seeds of each variant below, among those of seeds 1..=100 that it
/// failed (`electd-lab sim --membership --seeds 100 --first 1 --FLAG`); seeds 1..=300 pass
/// without a flaw.
const UNLOGGED_SEEDS: [u64; 3] = [7, 38, 44];
const HANDOVER_SEEDS: [u64; 3] = [27, 33, 47];
const SNAPSHOT_SEEDS: [u64; 3] = [2, 5, 21];

/// A leader that changes the membership without writing the voters' incarnations into the
/// log (identity.rs, rule 5 left out): a member cut off from the four added while the cluster
/// grew from 3 to 7, for longer than its hellos, is wiped and started again without join; the
/// members added know nothing of its earlier data dir and confirm it (`Step::Grow`).
#[test]
fn unlogged_incarnations_are_caught() {
    caught_in_membership_schedules(
        Flaw::UnloggedIncarnations,
        "unlogged-incarnations",
        &UNLOGGED_SEEDS,
        "restarted on a wiped disk without join, was recorded by",
    );
}

/// A preferred leader that hands over without asking whether the successor's data dir is
/// confirmed: the member of the highest priority, wiped and started again with join, is
/// handed the role every settle time and cannot campaign (`Step::WipeJoin`).
#[test]
fn a_handover_to_an_unconfirmed_member_is_caught() {
    caught_in_membership_schedules(
        Flaw::HandoverToUnconfirmed,
        "handover-to-unconfirmed",
        &HANDOVER_SEEDS,
        "with join and not confirmed (it cannot campaign)",
    );
}

/// A node that keeps a removed member's incarnation when a snapshot tells it of the removal:
/// starved of appends while the member was removed, it refuses the member added back on a new
/// data dir, whose confirmation needs it (`Step::Starve`).
#[test]
fn a_snapshot_that_keeps_a_removed_members_incarnation_is_caught() {
    caught_in_membership_schedules(
        Flaw::SnapshotKeepsIncarnations,
        "snapshot-keeps-incarnations",
        &SNAPSHOT_SEEDS,
        "was not confirmed within",
    );
}

/// The seeds that catch issue 29's broken variants pass with the nodes as they are, and
/// reach the preconditions they were pinned for.
#[test]
fn issue_29_seeds_pass_without_the_flaws() {
    let mut reached = Reached::default();
    for seed in UNLOGGED_SEEDS
        .into_iter()
        .chain(HANDOVER_SEEDS)
        .chain(SNAPSHOT_SEEDS)
    {
        let out = run(&Spec {
            membership: true,
            ..Spec::new(seed, 5)
        });
        assert_kept(&out, &format!("seed {seed}: "));
        reached.add(&out.reached);
    }
    assert!(
        reached.wiped_after_growth >= UNLOGGED_SEEDS.len() as u64
            && reached.wipe_joined_preferred >= HANDOVER_SEEDS.len() as u64
            && reached.readded_after_snapshot >= SNAPSHOT_SEEDS.len() as u64,
        "{reached:?}"
    );
}

/// The schedules from `first` (at most `most`) in which the role checker catches `flaw`,
/// up to the first `enough`: a grant inside a promise, an old holder claiming after its
/// successor did, or one token claimed by two nodes.
fn role_flaw_caught(flaw: RoleFlaw, first: u64, most: u64, enough: usize) -> Vec<u64> {
    let mut caught = Vec::new();
    for seed in first..first + most {
        let out = run(&Spec {
            roles: true,
            flaw: Some(Flaw::Role(flaw)),
            ..Spec::new(seed, 5)
        });
        let role = |v: &&String| {
            v.contains("role's promise broken")
                || v.contains("claims sim-")
                || (v.starts_with("role sim-") && v.contains("claimed by nodes"))
        };
        if let Some(v) = out.violations.iter().find(role) {
            eprintln!("sim: seed {seed}: {v}");
            caught.push(seed);
            if caught.len() >= enough {
                break;
            }
        }
    }
    eprintln!("sim: {} caught in seeds {caught:?}", flaw.name());
    caught
}

/// Named roles' broken variant of R4 (`hasty-revoke`: a holder silent for a sixth of the
/// follower lease taken for dead, its roles granted at once) is caught by the role checker in
/// drawn schedules: a crash, a pause or a cut of a holder gets its roles granted inside its
/// promises. At most 40 schedules from a pinned seed; the test needs one caught (on
/// 2026-11-29 the first seeds caught it: see the count printed).
#[test]
fn a_hasty_revocation_of_a_role_is_caught() {
    let caught = role_flaw_caught(RoleFlaw::HastyRevoke, 4_900_000, 40, 3);
    assert!(
        !caught.is_empty(),
        "hasty-revoke not caught in 40 schedules"
    );
}

/// R3 broken (`grant-in-first-lease`: a new leadership grants, and takes holders it has not
/// renewed yet for silent, from its start): a holder renewed by the old leader until its claim
/// ended still claims when the new one grants its role on. On 2026-11-29, 8 of the 100
/// schedules from this seed caught it, the first at 4,900,007.
#[test]
fn a_grant_in_a_new_leaderships_first_lease_is_caught() {
    let caught = role_flaw_caught(RoleFlaw::GrantInFirstLease, 4_900_000, 100, 1);
    assert!(
        !caught.is_empty(),
        "grant-in-first-lease not caught in 100 schedules"
    );
}

/// R2 broken (`ignore-taken-at`: a leader renews, and a holder uses the answer, before the
/// holder's table has applied what the log took from it): a revoked holder that comes back
/// claims the role its successor holds. On 2026-11-29, 11 of the 100 schedules from this seed
/// caught it, the first at 4,900,003.
#[test]
fn a_renewal_used_before_the_taking_is_applied_is_caught() {
    let caught = role_flaw_caught(RoleFlaw::IgnoreTakenAt, 4_900_000, 100, 1);
    assert!(
        !caught.is_empty(),
        "ignore-taken-at not caught in 100 schedules"
    );
}

/// R6 broken (`reuse-token`: a grant takes the last token drawn again): a role that changes
/// hands keeps its token, claimed by two nodes. On 2026-11-29, all of the 40 schedules from
/// this seed caught it.
#[test]
fn a_token_drawn_again_is_caught() {
    let caught = role_flaw_caught(RoleFlaw::ReuseToken, 4_900_000, 40, 1);
    assert!(!caught.is_empty(), "reuse-token not caught in 40 schedules");
}

/// Every renewal's answer held nine tenths of L (the leader ran it at once), then every renewal
/// lost as well (Step::Rules, on every link), at 10 ms beats against L = 360 ms, F = 400 ms:
/// the holders' last renewals come late and the leader, once each holder is silent for F,
/// grants their roles to itself (its own renewal does not cross the network).
fn late_renewals(flaw: Option<Flaw>) -> Outcome {
    use electd_lab::sim::net::{Effect, Leg, Rule};
    let timing = electd::Timing {
        heartbeat_ms: 10,
        follower_lease_ms: 400,
        lease_ms: 360,
    };
    let rules = |leg, effect: Effect| -> Vec<Rule> {
        let mut rules = Vec::new();
        for from in 1..=5 {
            for to in (1..=5).filter(|to| *to != from) {
                let path = electd::quorum::PATH_RENEW;
                rules.push(Rule {
                    from,
                    to,
                    path,
                    leg,
                    effect,
                });
            }
        }
        rules
    };
    let late = rules(
        Leg::Answer,
        Effect::Delay(std::time::Duration::from_millis(324)),
    );
    let mut lost = late.clone();
    lost.extend(rules(Leg::Request, Effect::Drop));
    run(&Spec {
        flaw,
        roles: true,
        timing: Some(timing),
        script: Some(vec![
            Timed {
                step: Step::Rules(late),
                then_ms: 800,
            },
            Timed {
                step: Step::Rules(lost),
                then_ms: 1_500,
            },
        ]),
        ..Spec::new(4_900_000, 5)
    })
}

/// R1 broken (`claim-from-receipt`: a renewal's claims counted from its answer's arrival): in
/// `late_renewals`, the holders claim past what the leader waits out, and the leader's own
/// claims on their roles fall inside those promises; as built, nothing breaks. (Drawn schedules
/// do not reach this: 0 of 1,000 on 2026-11-29.)
#[test]
fn a_claim_counted_from_the_answers_arrival_is_caught() {
    let sound = late_renewals(None);
    assert_kept(&sound, "as built: ");
    assert!(sound.role_promises > 0, "roles were judged: {sound:?}");
    let out = late_renewals(Some(Flaw::Role(RoleFlaw::ClaimFromReceipt)));
    let caught = out
        .violations
        .iter()
        .find(|v| v.contains("role's promise broken"));
    assert!(
        caught.is_some(),
        "claim-from-receipt not caught: {:?}",
        out.violations
    );
    eprintln!("sim: claim-from-receipt caught: {}", caught.unwrap());
}

/// R5 broken (`release-at-once`: a holder releases a role it stopped claiming with its
/// promises still running): the role granted on at once is claimed inside them. On 2026-11-29,
/// 14 of the 40 schedules from this seed caught it.
#[test]
fn a_release_with_promises_still_running_is_caught() {
    let caught = role_flaw_caught(RoleFlaw::ReleaseAtOnce, 4_900_000, 40, 1);
    assert!(
        !caught.is_empty(),
        "release-at-once not caught in 40 schedules"
    );
}

/// A schedule with roles that the suite once failed (CI of 2026-11-29, a checker artefact): the
/// sampler asked the roles between reading the members' `/v1/leader` answers and recording them,
/// and a wipe of node 2 ran in that gap; its old term was recorded after the wipe had reset it,
/// and the wiped node's term 0 then counted as a term going back. The sampler now asks the roles
/// first.
#[test]
fn roles_schedules_that_once_failed() {
    let seed = 9251210587;
    let out = run(&Spec {
        membership: true,
        roles: true,
        ..Spec::new(seed, 5)
    });
    assert_kept(&out, &format!("seed {seed}: "));
}
