//! Quorum mode on real processes: election, failover, self-demotion under partition, heal,
//! and the safety checks over the nodes' event logs.

mod common;

use std::time::Duration;

use common::{describe, TestCluster};
use electd::clock::{mono_ns, ms};
use electd_client::Mode;
use electd_client::Role;
use electd_lab::cluster::{claimants, Observed};

const WAIT: Duration = Duration::from_secs(15);

/// C1 and C2 over the whole run: no term led by two nodes, never two claimants at once.
#[test]
fn elects_one_leader_that_all_agree_on_and_kill_gives_a_higher_term() {
    let rt = TestCluster::rt();
    let mut tc = TestCluster::start(Mode::Quorum, 5);
    let leader = rt
        .block_on(tc.c.wait_agreed(WAIT))
        .expect("an agreed leader within 15 s");
    let term = rt.block_on(tc.c.leader_info(leader)).unwrap().term;

    // The leader hears every follower through the answers to its probes: `last_contact_ms`
    // stays well under a second once the election's requests are long past (it counted
    // only requests from followers, and grew without bound on a healthy leader).
    let fresh = rt.block_on(async {
        for _ in 0..100 {
            if let Ok(s) = tc.c.status(leader).await {
                let stale: Vec<_> = s
                    .peers
                    .iter()
                    .filter(|p| p.id != leader && p.last_contact_ms.is_none_or(|ms| ms >= 1_000))
                    .collect();
                if s.uptime_ms > 2_000 && stale.is_empty() {
                    return Ok(());
                }
                if s.uptime_ms > 2_000 {
                    return Err(format!("peers not heard from lately: {stale:?}"));
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err("the leader was not up for 2 s within 10 s".to_string())
    });
    fresh.expect("the leader's last contact with every follower is recent");

    tc.kill(leader);
    let next = rt
        .block_on(tc.c.wait_agreed(WAIT))
        .expect("a new leader within 15 s of the kill");
    assert_ne!(next, leader);
    let next_term = rt.block_on(tc.c.leader_info(next)).unwrap().term;
    assert!(next_term > term, "term {next_term} after {term}");

    // The killed node comes back on its data dir and follows.
    tc.start_node(leader);
    let ok = rt.block_on(tc.c.wait_for(WAIT, |s| {
        matches!(s.get(&leader), Some(Observed::Up(i)) if i.role == Role::Follower && i.leader.is_some())
    }));
    assert!(
        ok,
        "restarted node rejoins as a follower:\n{}",
        describe(&rt.block_on(tc.c.states()))
    );
    tc.assert_safe();
}

#[test]
fn minority_leader_stops_claiming_within_lease_while_majority_elects_then_heals() {
    let rt = TestCluster::rt();
    let tc = TestCluster::start(Mode::Quorum, 5);
    let old = rt.block_on(tc.c.wait_agreed(WAIT)).expect("leader");
    let buddy = tc.c.ids().into_iter().find(|i| *i != old).unwrap();
    let majority: Vec<_> =
        tc.c.ids()
            .into_iter()
            .filter(|i| *i != old && *i != buddy)
            .collect();

    let cut_ns = mono_ns();
    rt.block_on(tc.c.partition(&[vec![old, buddy], majority.clone()]))
        .unwrap();
    let set_ns = mono_ns();

    // The majority elects a leader of its own.
    let ok =
        rt.block_on(tc.c.wait_for(WAIT, |s| claimants(s).iter().any(|c| majority.contains(c))));
    assert!(
        ok,
        "majority side elects:\n{}",
        describe(&rt.block_on(tc.c.states()))
    );
    let states = rt.block_on(tc.c.states());
    assert_eq!(claimants(&states).len(), 1, "{}", describe(&states));

    // From the old leader's event log: it stopped claiming no later than lease + heartbeat
    // after the partition was in force.
    let stop = tc
        .events()
        .into_iter()
        .filter(|e| e.node_id == old && e.t_mono_ns >= cut_ns && e.view.role != Role::Leader)
        .map(|e| e.t_mono_ns)
        .min()
        .expect("the old leader recorded that it stopped leading");
    let bound = ms(tc.timing.effective_lease_ms() + tc.timing.heartbeat_ms);
    assert!(
        stop <= set_ns + bound,
        "stopped {} ms after the partition, bound {} ms",
        (stop - cut_ns) / 1_000_000,
        bound / 1_000_000
    );

    // Heal: one leader that everyone reports.
    let heal_ns = mono_ns();
    rt.block_on(tc.c.heal()).unwrap();
    let after = rt.block_on(tc.c.wait_agreed(WAIT));
    assert!(
        after.is_some(),
        "one leader after heal:\n{}",
        describe(&rt.block_on(tc.c.states()))
    );
    eprintln!(
        "old leader stopped claiming {} ms after the cut; converged {} ms after heal",
        (stop - cut_ns) / 1_000_000,
        (mono_ns() - heal_ns) / 1_000_000
    );
    tc.assert_safe();
}

#[test]
fn restarted_node_keeps_its_vote() {
    let rt = TestCluster::rt();
    let mut tc = TestCluster::start(Mode::Quorum, 3);
    let leader = rt.block_on(tc.c.wait_agreed(WAIT)).expect("leader");
    let follower = tc.c.ids().into_iter().find(|i| *i != leader).unwrap();
    let data = tc.c.data_dir(Mode::Quorum, follower);
    // The vote as the node would read it at start (its newest valid state slot).
    let read_vote = || -> serde_json::Value {
        let store = electd::quorum::Store::open(&data, follower, "electd-test").unwrap();
        serde_json::to_value(store.vote()).unwrap()
    };
    let before = read_vote();
    assert!(
        before["leader_id"]["term"].as_u64().unwrap() >= 1,
        "{before}"
    );
    tc.kill(follower);
    assert_eq!(read_vote(), before, "the vote is on disk after SIGKILL");
    tc.start_node(follower);
    let ok =
        rt.block_on(tc.c.wait_for(WAIT, |s| matches!(s.get(&follower), Some(Observed::Up(_)))));
    assert!(ok);
    let info = rt.block_on(tc.c.leader_info(follower)).unwrap();
    assert!(info.term >= before["leader_id"]["term"].as_u64().unwrap());
    let after = read_vote();
    assert!(
        after["leader_id"]["term"].as_u64() >= before["leader_id"]["term"].as_u64(),
        "vote went back: {before} -> {after}"
    );
    tc.assert_safe();
}

/// A cut means the same written on either side (`docs/design/api-v1.md`): the leader with
/// `block_from: [all others]` hears no acknowledgement any more, so it stops claiming, exactly
/// as when the others write `block_to: [leader]`. (Whether the others elect meanwhile is not
/// promised under a one-way cut, chaos S8: they still hear the old leader now and then.)
#[test]
fn a_leader_that_blocks_everything_from_the_others_stops_claiming_either_way() {
    let rt = TestCluster::rt();
    let tc = TestCluster::start(Mode::Quorum, 3);
    for written_on_the_leader in [true, false] {
        let old = rt.block_on(tc.c.wait_agreed(WAIT)).expect("leader");
        let others: std::collections::BTreeSet<_> =
            tc.c.ids().into_iter().filter(|i| *i != old).collect();
        let cut = |(id, set): (u64, electd_client::FaultSet)| {
            rt.block_on(tc.c.set_faults(id, &set)).unwrap();
        };
        if written_on_the_leader {
            let set = electd_client::FaultSet {
                block_from: others.clone(),
                ..Default::default()
            };
            cut((old, set));
        } else {
            for &o in &others {
                let set = electd_client::FaultSet {
                    block_to: [old].into(),
                    ..Default::default()
                };
                cut((o, set));
            }
        }
        let demoted = rt.block_on(tc.c.wait_for(WAIT, |s| !claimants(s).contains(&old)));
        let side = if written_on_the_leader {
            "leader"
        } else {
            "others"
        };
        assert!(
            demoted,
            "cut written on the {side}: the old leader {old} must stop claiming:\n{}",
            describe(&rt.block_on(tc.c.states()))
        );
        rt.block_on(tc.c.heal()).unwrap();
    }
    tc.assert_safe();
}

/// How a wiped follower meets an election (docs/safety.md, "A wiped disk never votes twice").
#[derive(Clone, Copy, Debug)]
enum WipeOrder {
    /// Restarted under the leader that was there when it went down.
    UnderTheSameLeader,
    /// Restarted after the leader died and the others elected another.
    AfterAnElection,
    /// Restarted at the moment the leader dies, while the others elect.
    DuringAnElection,
}

/// A follower whose data dir was wiped comes back with no vote: it must neither vote nor run,
/// whatever the others do meanwhile; it stops with a message that says how to rejoin, and the
/// others go on electing safely. (Before identity.rs it started as a voter with an empty vote.)
fn a_wiped_follower_refuses_to_run(order: WipeOrder) {
    let rt = TestCluster::rt();
    let mut tc = TestCluster::start(Mode::Quorum, 5);
    let leader = rt.block_on(tc.c.wait_agreed(WAIT)).expect("leader");
    let wiped = tc.c.ids().into_iter().find(|i| *i != leader).unwrap();
    tc.kill(wiped);
    // What the wiped node logs from its restart on (its log file goes on across starts).
    let logged_before = tc.log_len(wiped);
    let data = tc.c.data_dir(Mode::Quorum, wiped);
    std::fs::remove_dir_all(&data).unwrap();
    match order {
        WipeOrder::UnderTheSameLeader => tc.start_node(wiped),
        WipeOrder::AfterAnElection => {
            tc.kill(leader);
            let next = rt.block_on(tc.c.wait_agreed(WAIT)).expect("a new leader");
            assert_ne!(next, leader);
            tc.start_node(wiped);
        }
        WipeOrder::DuringAnElection => {
            tc.start_node(wiped);
            tc.kill(leader);
        }
    }
    assert!(
        tc.c.wait_exit(wiped, Duration::from_secs(20)),
        "{order:?}: the wiped node {wiped} is still running"
    );
    let log = tc.log_since(wiped, logged_before);
    assert!(
        log.contains("knows it by an earlier one") && log.contains("To rejoin"),
        "{order:?}: no refusal in node {wiped}'s log:\n{log}"
    );
    assert!(
        !log.contains("campaigning") && !log.contains("became leader"),
        "{order:?}: the wiped node campaigned:\n{log}"
    );
    // The others still agree on a leader (a new one where the leader died).
    let now = rt.block_on(tc.c.wait_agreed(WAIT)).expect("a leader after");
    assert_ne!(now, wiped);
    tc.assert_safe();
}

#[test]
fn a_wiped_follower_refuses_to_run_under_the_same_leader() {
    a_wiped_follower_refuses_to_run(WipeOrder::UnderTheSameLeader);
}

#[test]
fn a_wiped_follower_refuses_to_run_after_an_election() {
    a_wiped_follower_refuses_to_run(WipeOrder::AfterAnElection);
}

#[test]
fn a_wiped_follower_refuses_to_run_during_an_election() {
    a_wiped_follower_refuses_to_run(WipeOrder::DuringAnElection);
}

/// A member that starts for the first time long after the others (a new disk nobody recorded)
/// is not a wiped one: it is confirmed by the members it reaches and votes from then on.
#[test]
fn a_member_that_starts_late_for_the_first_time_is_confirmed_and_votes() {
    let rt = TestCluster::rt();
    let mut tc = TestCluster::configure(Mode::Quorum, 5, common::TEST_TIMING);
    for id in 1..=4 {
        tc.start_node(id);
    }
    let leader = rt
        .block_on(tc.c.wait_agreed(WAIT))
        .expect("a leader of four");
    tc.start_node(5);
    let confirmed = rt.block_on(async {
        let until = std::time::Instant::now() + WAIT;
        while std::time::Instant::now() < until {
            if let Ok(st) = tc.c.status(5).await {
                if st.engine["identity"]["confirmed"] == serde_json::json!(true) {
                    return true;
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        false
    });
    assert!(confirmed, "node 5 was not confirmed");
    // It votes: with two of the first four down, an election needs node 5's vote.
    let others: Vec<_> = (1..=4).filter(|i| *i != leader).take(1).collect();
    tc.kill(leader);
    tc.kill(others[0]);
    let next = rt
        .block_on(tc.c.wait_agreed(WAIT))
        .expect("a leader elected with node 5");
    assert!(next != leader && next != others[0]);
    tc.assert_safe();
}
