//! The core's unit tests, one or more per input.

use super::*;
use crate::clock::testing::ManualClock;
use crate::clock::{ms, Clock};
use crate::config::Timing;
use crate::quorum::preference::Followers;

const F: u64 = ms(150);

fn core(clock: &ManualClock) -> QuorumCore {
    let t = Timing {
        heartbeat_ms: 30,
        follower_lease_ms: 150,
        lease_ms: 0,
    };
    QuorumCore::new(1, CoreTiming::from_config(&t), 7, clock.boot_ns())
}

fn leader(term: u64) -> RaftView {
    RaftView {
        role: RaftRole::Leader,
        term,
        leader: Some(1),
        last_log_index: Some(3),
    }
}

fn answer(actions: &[Action]) -> Option<&Answer> {
    actions.iter().find_map(|a| match a {
        Action::Answer(x) => Some(x),
        _ => None,
    })
}

/// Ticks, and acknowledges the probe the tick sent: the claim then runs.
fn claim(c: &mut QuorumCore, clock: &ManualClock, term: u64) {
    let raft = leader(term);
    let out = c.tick(clock.read(), &raft);
    assert!(
        out.contains(&Action::Probe {
            term,
            heartbeat: false
        }),
        "{out:?}"
    );
    let t0 = clock.read();
    clock.advance(ms(2));
    let done = Input::ProbeDone {
        term,
        t0,
        acked: true,
        raft,
    };
    let out = c.step(clock.read(), done);
    assert_eq!(
        answer(&out),
        Some(&Answer::Probe {
            granted: true,
            went_quiet: false
        })
    );
    assert!(out.contains(&Action::ContactChanged), "{out:?}");
}

/// A claim is judged on CLOCK_BOOTTIME, so a leader whose host was suspended past its
/// lease does not claim when it resumes (CLOCK_MONOTONIC stood still meanwhile, so judged
/// on it the claim would still run).
#[test]
fn a_claim_ends_while_the_host_is_suspended() {
    let clock = ManualClock::default();
    let mut c = core(&clock);
    clock.advance(F);
    claim(&mut c, &clock, 7);
    clock.advance(ms(50));
    let judged = c.judge(clock.read(), &leader(7));
    assert_eq!(judged.view.role, Role::Leader);
    assert!(judged.lease_remaining_ns.is_some_and(|l| l > 0));
    clock.suspend(ms(10_000));
    assert_eq!(
        c.judge(clock.read(), &leader(7)).view.role,
        Role::Candidate,
        "the claim must have ended during the suspend"
    );
    // What the monotonic clock alone would have said: still claiming.
    let since = c.lease().last().unwrap().since_ns;
    assert!(c.lease().current(7, since + ms(52)).is_some());
}

/// A vote request is refused while a promise can run, and after the promise's follower
/// lease a request for a higher term suspends the claim until openraft answered.
#[test]
fn votes_wait_for_the_promises_and_a_higher_term_suspends_the_claim() {
    let clock = ManualClock::default();
    let mut c = core(&clock);
    let ask = |current_term| Input::VoteAsked {
        term: 8,
        current_term,
        confirmed: true,
    };
    assert_eq!(
        answer(&c.step(clock.read(), ask(7))),
        Some(&Answer::RefuseVote),
        "a follower lease after the start"
    );
    clock.advance(F);
    claim(&mut c, &clock, 7);
    let out = c.step(clock.read(), ask(7));
    assert_eq!(
        answer(&out),
        Some(&Answer::RefuseVote),
        "inside the promise"
    );
    assert!(out.contains(&Action::Observed(Observation::VoteAskedInsidePromise)));
    clock.advance(F);
    let out = c.step(clock.read(), ask(7));
    assert_eq!(
        answer(&out),
        Some(&Answer::PassVote {
            higher: true,
            inside_promise: false
        })
    );
    assert!(c.claim(clock.boot_ns(), &leader(7)).is_none(), "suspended");
    let out = c.step(
        clock.read(),
        Input::VoteAnswered {
            term: 8,
            higher: true,
            granted: true,
            failed: false,
            inside_promise: false,
        },
    );
    assert!(out.contains(&Action::Wake) && out.contains(&Action::ContactChanged));
    assert!(
        c.lease().is_fenced(7),
        "a granted vote fences the lower terms"
    );
    let unconfirmed = Input::VoteAsked {
        term: 9,
        current_term: 8,
        confirmed: false,
    };
    clock.advance(F);
    assert_eq!(
        answer(&c.step(clock.read(), unconfirmed)),
        Some(&Answer::RefuseVote)
    );
}

/// An election is enqueued only when no contact came since the campaign looked, the
/// follower lease is over, and the node is neither leader nor stopping.
#[test]
fn an_election_needs_the_same_contact_and_the_lease_over() {
    let clock = ManualClock::default();
    let mut c = core(&clock);
    let follower = RaftView {
        role: RaftRole::Follower,
        term: 4,
        leader: Some(2),
        last_log_index: Some(3),
    };
    let (due, seen) = c.campaign_due(&follower, &[1, 2, 3]);
    assert!(due >= clock.boot_ns() + F);
    let may = |seq| Input::MayElect {
        seq,
        raft: follower,
    };
    assert_eq!(
        answer(&c.step(clock.read(), may(seen.seq))),
        Some(&Answer::Elect(None))
    );
    clock.advance(F);
    assert_eq!(
        answer(&c.step(clock.read(), may(seen.seq))),
        Some(&Answer::Elect(None)),
        "openraft refuses a vote at the lease's last instant, its own included"
    );
    clock.advance(1);
    assert_eq!(
        answer(&c.step(clock.read(), may(seen.seq))),
        Some(&Answer::Elect(Some(5)))
    );
    c.step(
        clock.read(),
        Input::AppendAccepted {
            leader: 2,
            commit: Some(3),
        },
    );
    clock.advance(F);
    assert_eq!(
        answer(&c.step(clock.read(), may(seen.seq))),
        Some(&Answer::Elect(None)),
        "a contact came since"
    );
    let judged = c.judge(clock.read(), &follower);
    assert_eq!(judged.view.leader, None, "its lease ran out");
}

/// A resignation ends the claim and fences the term; a stop closes the lease for good.
#[test]
fn resigning_and_stopping_end_the_claim_for_good() {
    let clock = ManualClock::default();
    let mut c = core(&clock);
    clock.advance(F);
    claim(&mut c, &clock, 3);
    let resign = |to| Input::Resign {
        raft: leader(3),
        to,
        followers: Followers {
            matched: vec![(2, Some(9)), (3, Some(7))],
            last: Some(9),
        },
    };
    assert_eq!(
        answer(&c.step(clock.read(), resign(Some(3)))),
        Some(&Answer::Resign(Err(ResignError::Unsuitable(
            3,
            "its log reaches index 7 of the leader's 9".into()
        )))),
        "a successor that lacks the log is refused, and the claim holds"
    );
    let out = c.step(clock.read(), resign(None));
    let resigned = Resigned {
        term: 3,
        successor: 2,
    };
    assert_eq!(answer(&out), Some(&Answer::Resign(Ok(resigned))));
    assert!(out.contains(&Action::Record));
    assert_eq!(
        answer(&c.step(clock.read(), resign(Some(2)))),
        Some(&Answer::Resign(Err(ResignError::NotLeader(1)))),
        "nothing left to resign"
    );
    assert_eq!(
        c.tick(clock.read(), &leader(3)),
        vec![Action::Record],
        "a resigned term is not probed"
    );
    claim(&mut c, &clock, 4);
    let stop = Input::Shutdown {
        raft: leader(4),
        followers: Followers {
            matched: vec![(2, None), (3, Some(9))],
            last: Some(9),
        },
    };
    let out = c.step(clock.read(), stop);
    assert_eq!(answer(&out), Some(&Answer::Shutdown(Some(3))));
    assert_eq!(c.tick(clock.read(), &leader(4)), vec![Action::Record]);
    let prevote = Input::PreVoteAsked {
        from: 2,
        theirs: None,
        mine: None,
        confirmed: true,
    };
    assert!(matches!(
        answer(&c.step(clock.read(), prevote)),
        Some(Answer::PreVote {
            verdict: Err(PreVoteRefusal::Stopping),
            ..
        })
    ));
}

/// openraft's heartbeat goes with every fourth probe; the next tick is the next probe or
/// the claim's end.
#[test]
fn a_leader_probes_every_beat_with_a_heartbeat_every_fourth() {
    let clock = ManualClock::default();
    let mut c = core(&clock);
    let raft = leader(2);
    let mut heartbeats = Vec::new();
    for _ in 0..8 {
        let out = c.tick(clock.read(), &raft);
        match out.first() {
            Some(Action::Probe { heartbeat, .. }) => heartbeats.push(*heartbeat),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            c.tick(clock.read(), &raft),
            vec![Action::Record],
            "one probe a beat"
        );
        assert_eq!(
            c.next_tick_ns(clock.boot_ns(), &raft),
            clock.boot_ns() + ms(30)
        );
        clock.advance(ms(30));
    }
    assert_eq!(
        heartbeats,
        [false, false, false, true, false, false, false, true]
    );
}

/// The preferred leader's look (preference.rs) is judged with the claim: a member of higher
/// priority is named only once it has been ready for the settle time while this node claims;
/// a look without the claim, or a member that cannot take over, starts the settle time over.
#[test]
fn a_look_names_a_preferred_member_only_while_the_node_claims() {
    use crate::quorum::preference::{Look, Seen};
    let clock = ManualClock::default();
    let mut c = core(&clock);
    let settle_ns = ms(100);
    let look = |raft: RaftView| {
        let look = Look {
            mine: 0,
            seen: vec![Seen {
                id: 3,
                priority: 10,
                ready: true,
            }],
            settle_ns,
        };
        Input::Look { raft, look }
    };
    let named = |c: &mut QuorumCore, raft: RaftView| match answer(&c.step(clock.read(), look(raft)))
    {
        Some(Answer::HandOver(to)) => *to,
        other => panic!("{other:?}"),
    };
    clock.advance(F);
    // Leader in openraft's eyes, but no claim yet: no look counts.
    assert_eq!(named(&mut c, leader(3)), None);
    clock.advance(settle_ns);
    assert_eq!(
        named(&mut c, leader(3)),
        None,
        "the settle time starts with the claim"
    );
    claim(&mut c, &clock, 3);
    assert_eq!(named(&mut c, leader(3)), None);
    clock.advance(settle_ns / 2);
    c.step(clock.read(), Input::CannotTakeOver);
    clock.advance(settle_ns / 2);
    claim(&mut c, &clock, 3);
    assert_eq!(
        named(&mut c, leader(3)),
        None,
        "a member that cannot take over starts over"
    );
    clock.advance(settle_ns);
    claim(&mut c, &clock, 3);
    assert_eq!(named(&mut c, leader(3)), Some(3));
}
