//! Quorum mode's own election clock on real processes: pre-vote keeps a cut-off node from
//! raising its term, so healing deposes no healthy leader; `POST /v1/admin/resign` fences the
//! old claim before it answers and hands over to the named successor.

mod common;

use std::time::Duration;

use common::{describe, TestCluster};
use electd::clock::mono_ns;
use electd_client::Mode;
use electd_client::{NodeId, Role};
use electd_lab::cluster::Observed;

const WAIT: Duration = Duration::from_secs(15);
/// How long a node stays cut off: ten follower leases of the test clusters.
const CUT: Duration = Duration::from_millis(10 * common::TEST_TIMING.follower_lease_ms);

/// Cuts `group` off from the rest for [`CUT`], then heals. Asserts that no node of `group`
/// raised its term meanwhile, and that the leader is the same, in the same term, after the
/// heal (no leader change anywhere since the cut).
fn cut_off_and_heal(tc: &TestCluster, rt: &tokio::runtime::Runtime, group: &[NodeId]) {
    let leader = rt.block_on(tc.c.wait_agreed(WAIT)).expect("leader");
    assert!(
        !group.contains(&leader),
        "the leader stays on the majority side"
    );
    let term = rt.block_on(tc.c.leader_info(leader)).unwrap().term;
    let rest: Vec<NodeId> =
        tc.c.ids()
            .into_iter()
            .filter(|i| !group.contains(i))
            .collect();
    let cut_ns = mono_ns();
    rt.block_on(tc.c.partition(&[group.to_vec(), rest]))
        .unwrap();
    let until = std::time::Instant::now() + CUT;
    let mut seen_terms = Vec::new();
    while std::time::Instant::now() < until {
        for id in group {
            // A request that fails (a busy host) is no sample; a term that moved is a failure.
            if let Ok(info) = rt.block_on(tc.c.leader_info(*id)) {
                assert_eq!(info.term, term, "node {id} raised its term while cut off");
                seen_terms.push(info.term);
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        seen_terms.len() >= 10,
        "the group was watched while cut off"
    );
    rt.block_on(tc.c.heal()).unwrap();
    let back = rt.block_on(tc.c.wait_for(WAIT, |s| {
        group
            .iter()
            .all(|id| matches!(s.get(id), Some(Observed::Up(i)) if i.leader.as_ref().map(|l| l.id) == Some(leader)))
    }));
    assert!(
        back,
        "the cut-off nodes follow the leader again:\n{}",
        describe(&rt.block_on(tc.c.states()))
    );
    let info = rt.block_on(tc.c.leader_info(leader)).unwrap();
    assert_eq!(
        (info.role, info.term),
        (Role::Leader, term),
        "the healthy leader kept its role and term"
    );
    let changes: Vec<_> = tc
        .events()
        .into_iter()
        .filter(|e| {
            e.t_mono_ns >= cut_ns && e.view.leader.is_some() && e.view.leader != Some(leader)
        })
        .collect();
    assert!(
        changes.is_empty(),
        "leader changes after the cut: {changes:?}"
    );
}

#[test]
fn an_isolated_follower_raises_no_term_and_its_return_deposes_nobody() {
    let rt = TestCluster::rt();
    let tc = TestCluster::start(Mode::Quorum, 5);
    let leader = rt.block_on(tc.c.wait_agreed(WAIT)).expect("leader");
    let f = tc.c.ids().into_iter().find(|i| *i != leader).unwrap();
    cut_off_and_heal(&tc, &rt, &[f]);
    tc.assert_safe();
}

#[test]
fn a_minority_of_two_raises_no_term_and_healing_changes_no_leader() {
    let rt = TestCluster::rt();
    let tc = TestCluster::start(Mode::Quorum, 5);
    let leader = rt.block_on(tc.c.wait_agreed(WAIT)).expect("leader");
    let two: Vec<NodeId> =
        tc.c.ids()
            .into_iter()
            .filter(|i| *i != leader)
            .take(2)
            .collect();
    cut_off_and_heal(&tc, &rt, &two);
    tc.assert_safe();
}

#[test]
fn resign_fences_the_claim_then_hands_over_to_the_named_successor() {
    let rt = TestCluster::rt();
    let tc = TestCluster::start(Mode::Quorum, 5);
    let leader = rt.block_on(tc.c.wait_agreed(WAIT)).expect("leader");
    let term = rt.block_on(tc.c.leader_info(leader)).unwrap().term;
    let follower = tc.c.ids().into_iter().find(|i| *i != leader).unwrap();
    let successor =
        tc.c.ids()
            .into_iter()
            .find(|i| *i != leader && *i != follower)
            .unwrap();

    // Refusals: a follower does not hold the claim; unknown and self targets are refused.
    let refused = rt
        .block_on(tc.c.client(follower).unwrap().resign(None))
        .unwrap_err();
    assert_eq!(refused.status(), Some(409), "{refused}");
    assert_eq!(refused.code(), Some("not_leader"));
    for bad in [99, leader] {
        let refused = rt
            .block_on(tc.c.client(leader).unwrap().resign(Some(bad)))
            .unwrap_err();
        assert_eq!(refused.status(), Some(400), "to {bad}: {refused}");
        assert_eq!(refused.code(), Some("unknown_target"));
    }
    assert_eq!(
        rt.block_on(tc.c.leader_info(leader)).unwrap().role,
        Role::Leader,
        "a refused resignation changes nothing"
    );

    let t0 = mono_ns();
    let resigned = rt
        .block_on(tc.c.client(leader).unwrap().resign(Some(successor)))
        .expect("the leader resigns");
    let answered = mono_ns();
    assert_eq!(resigned.term, term);
    assert_eq!(resigned.successor, successor);
    // The answer comes once the claim is fenced: the old leader no longer claims.
    assert_ne!(
        rt.block_on(tc.c.leader_info(leader)).unwrap().role,
        Role::Leader
    );

    let next = rt
        .block_on(tc.c.wait_agreed(WAIT))
        .expect("a leader after the handoff");
    assert_eq!(next, successor, "the named successor took over");
    let next_term = rt.block_on(tc.c.leader_info(next)).unwrap().term;
    assert!(next_term > term);
    eprintln!(
        "handoff to {successor}: answered after {} ms, agreed after {} ms",
        (answered - t0) / 1_000_000,
        (mono_ns() - t0) / 1_000_000
    );
    let claims_again: Vec<_> = tc
        .events()
        .into_iter()
        .filter(|e| {
            e.node_id == leader
                && e.t_mono_ns >= answered
                && e.view.role == Role::Leader
                && e.view.term == term
        })
        .collect();
    assert!(
        claims_again.is_empty(),
        "claimed the resigned term again: {claims_again:?}"
    );
    tc.assert_safe();
}
