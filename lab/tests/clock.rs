//! Wall clocks that disagree change nothing (docs/security.md, "Peer authentication"): nodes run under
//! libfaketime with wall clocks a minute apart, or jumped while they run, and still elect,
//! follow and fail over as one cluster with a cluster secret; each node names the skew it sees
//! in `/v1/status` and its log. Real processes, quorum mode.
//!
//! Before peer requests were protected from replay without a clock, a follower 60 s ahead was
//! refused by everyone (`stale_timestamp`) and refused everyone: two such followers of five and
//! one crash left no majority.

mod common;

use std::time::Duration;

use common::{TestCluster, TEST_TIMING};
use electd_client::{Mode, NodeId};
use electd_lab::cluster::{claimants, libfaketime};

const WAIT: Duration = Duration::from_secs(20);

/// libfaketime is needed; without it the test is skipped, and recorded as such
/// ([`electd_lab::skip`]).
fn skip() -> bool {
    match libfaketime() {
        Ok(_) => false,
        Err(why) => {
            electd_lab::skip::skip(&why);
            true
        }
    }
}

/// A cluster of five whose nodes run under libfaketime, not started yet.
fn five_with_wall_clocks() -> TestCluster {
    let mut tc = TestCluster::configure(Mode::Quorum, 5, TEST_TIMING);
    tc.c.wall_clocks = Some(libfaketime().expect("libfaketime"));
    tc
}

/// `id`'s wall-clock offset from `about`'s as `about` last saw it, in ms.
async fn offset_seen(tc: &TestCluster, about: NodeId, by: NodeId) -> Option<i64> {
    let st = tc.c.status(by).await.ok()?;
    st.peers.iter().find(|p| p.id == about)?.clock_offset_ms
}

#[test]
fn followers_a_minute_off_still_vote_and_a_crash_leaves_a_majority() {
    if skip() {
        return;
    }
    let mut tc = five_with_wall_clocks();
    // Nodes 4 and 5 start a minute ahead and a minute behind.
    tc.c.set_wall_clock(4, 60).unwrap();
    tc.c.set_wall_clock(5, -60).unwrap();
    for id in tc.c.ids() {
        tc.start_node(id);
    }
    let rt = TestCluster::rt();
    rt.block_on(async {
        // All five agree, the two skewed nodes included.
        let leader =
            tc.c.wait_agreed(WAIT)
                .await
                .expect("all five nodes agree on a leader");
        // The others see the skew, and say so.
        let plain = (1..=3).find(|&i| i != leader).unwrap();
        for (skewed, want) in [(4, 60_000i64), (5, -60_000)] {
            let mut seen = None;
            for _ in 0..100 {
                seen = offset_seen(&tc, skewed, plain).await;
                if seen.is_some_and(|o| (o - want).abs() < 5_000) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            let seen = seen.unwrap_or_else(|| panic!("node {plain} reports no offset of {skewed}"));
            assert!(
                (seen - want).abs() < 5_000,
                "node {plain} sees node {skewed} {seen} ms off, not about {want}"
            );
        }
        // The leader crashes: the four left, two of them skewed, elect one of them.
        tc.kill(leader);
        let next =
            tc.c.wait_agreed(WAIT)
                .await
                .expect("the four left agree on a new leader");
        assert_ne!(next, leader);
    });
    // Node 1 heard from node 4 (whether it led or not; a killed node's log stays).
    let log = tc.log_since(1, 0);
    assert!(
        log.contains("wall clock is") && log.contains("ahead of ours"),
        "a node logs the skew it sees"
    );
    tc.assert_safe();
}

#[test]
fn jumps_of_a_running_nodes_wall_clock_disturb_nothing() {
    if skip() {
        return;
    }
    let mut tc = five_with_wall_clocks();
    for id in tc.c.ids() {
        tc.start_node(id);
    }
    let rt = TestCluster::rt();
    rt.block_on(async {
        let leader = tc.c.wait_agreed(WAIT).await.expect("an agreed leader");
        let term = tc.c.leader_info(leader).await.unwrap().term;
        let follower = tc.c.ids().into_iter().find(|&i| i != leader).unwrap();
        // The leader's and a follower's wall clocks jump an hour either way, and back, each
        // held for ten follower leases.
        let hold = Duration::from_millis(10 * TEST_TIMING.follower_lease_ms);
        for (id, offset) in [
            (leader, 3_600),
            (follower, -3_600),
            (leader, -86_400),
            (follower, 60),
            (leader, 0),
            (follower, 0),
        ] {
            tc.c.set_wall_clock(id, offset).unwrap();
            let until = std::time::Instant::now() + hold;
            while std::time::Instant::now() < until {
                let states = tc.c.states().await;
                assert!(
                    claimants(&states).iter().all(|&c| c == leader),
                    "node {id}'s wall clock at {offset:+} s changed who leads: {states:?}"
                );
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
        }
        let now = tc.c.wait_agreed(WAIT).await.expect("an agreed leader");
        let info = tc.c.leader_info(now).await.unwrap();
        assert_eq!((now, info.term), (leader, term), "the leader changed");
    });
    tc.assert_safe();
}
