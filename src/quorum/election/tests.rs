//! The election rules' tests: timings, the order of candidates, pre-votes and pledges, joint
//! majorities.

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
    // The lease runs through its last nanosecond, as openraft's does.
    assert_eq!(c.due_at(&contact(at), 0, 5), at + ms(150) + 1);
    assert_eq!(
        c.due_at(&contact(at), 2, 5),
        at + ms(170) + 1,
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
    assert_eq!(a.due_at(&contact(ms(3000)), 0, 5), ms(3150) + 1);
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
    assert_eq!(succ.due_at(&contact(0), 3, 9), ms(150) + 1);
    assert_eq!(
        succ.due_at(&contact(0), 3, 10),
        ms(180) + 1,
        "only for the resigned term"
    );
    let mut other = Campaign::new(timing(), 1);
    other.handoff(9, false);
    assert_eq!(other.due_at(&contact(0), 0, 9), ms(160) + 1);
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
    assert_eq!(
        judge(ms(1150), log(5, 10), None),
        Err(PreVoteRefusal::LeaderAlive),
        "openraft refuses a vote at the lease's last instant: so does the pre-vote"
    );
    assert_eq!(judge(ms(1150) + 1, log(5, 10), None), Ok(()));
    assert_eq!(
        judge(ms(1150) + 1, log(5, 11), None),
        Err(PreVoteRefusal::LogBehind)
    );
    assert_eq!(
        judge(ms(1150) + 1, log(6, 2), None),
        Err(PreVoteRefusal::LogBehind),
        "a later term's log is longer whatever its index"
    );
    assert_eq!(judge(ms(1150) + 1, None, None), Ok(()));
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

#[test]
fn a_joint_change_needs_a_majority_of_both_sets() {
    let yes = |ids: &[NodeId]| ids.iter().copied().collect::<BTreeSet<_>>();
    let old = vec![1, 2, 3];
    let new = vec![1, 2, 3, 4, 5];
    assert!(majority_of_each(std::slice::from_ref(&old), &yes(&[1, 2])));
    assert!(!majority_of_each(std::slice::from_ref(&new), &yes(&[1, 2])));
    // Two of the old three, but only two of the new five.
    assert!(!majority_of_each(
        &[old.clone(), new.clone()],
        &yes(&[1, 2])
    ));
    // Three of five but only one of three.
    assert!(!majority_of_each(
        &[old.clone(), new.clone()],
        &yes(&[3, 4, 5])
    ));
    assert!(majority_of_each(&[old, new], &yes(&[1, 2, 4])));
    assert!(!majority_of_each(&[], &yes(&[1])));
}
