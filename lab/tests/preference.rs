//! The preferred leader on real processes (quorum mode; docs/operations.md, "Preferred leader"): a member
//! of higher priority gets the role through the resign path once it has been connected and up
//! to date for the settle time, never sooner after it restarts, and a member that flaps
//! moves the role at most about twice a settle time. No term led twice, never two claimants.

mod common;

use std::time::{Duration, Instant};

use common::{TestCluster, TEST_TIMING};
use electd::clock::mono_ns;
use electd_client::{Mode, NodeId, Role};

const SETTLE_MS: u64 = 1500;
const WAIT: Duration = Duration::from_secs(20);

/// Gives node `preferred` priority 10 and every node the settle time, in every config.
fn prefer(tc: &TestCluster, preferred: NodeId) {
    for id in tc.c.ids() {
        let path = tc.c.member(id).unwrap().config.clone();
        let mut cfg: toml::Table =
            toml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        cfg.insert(
            "priority_settle_ms".into(),
            toml::Value::Integer(SETTLE_MS as i64),
        );
        if let Some(toml::Value::Array(peers)) = cfg.get_mut("peers") {
            for p in peers.iter_mut() {
                if p.get("id").and_then(|v| v.as_integer()) == Some(preferred as i64) {
                    p.as_table_mut()
                        .unwrap()
                        .insert("priority".into(), toml::Value::Integer(10));
                }
            }
        }
        std::fs::write(&path, toml::to_string(&cfg).unwrap()).unwrap();
    }
}

/// Waits until node `id` claims; when it began to, as the test saw it.
async fn until_leads(tc: &TestCluster, id: NodeId) -> Option<Instant> {
    let until = Instant::now() + WAIT;
    while Instant::now() < until {
        if let Ok(info) = tc.c.leader_info(id).await {
            if info.role == Role::Leader && info.lease_ms.is_some() {
                return Some(Instant::now());
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    None
}

#[test]
fn the_member_of_highest_priority_leads_after_the_settle_time_and_flapping_is_bounded() {
    let rt = TestCluster::rt();
    let mut tc = TestCluster::configure(Mode::Quorum, 3, TEST_TIMING);
    prefer(&tc, 3);
    // A new cluster of three elects once all three have recorded each other (a new data dir
    // votes once ceil(n/2) others know it): whoever leads first, node 3 leads soon after.
    for id in 1..=3 {
        tc.start_node(id);
    }
    rt.block_on(tc.c.wait_agreed(WAIT)).expect("a first leader");
    rt.block_on(until_leads(&tc, 3)).expect("node 3 leads");
    // Flap the preferred node: kill it, let another lead, bring it back, three times.
    let t0 = mono_ns();
    let flaps = 3;
    for _ in 0..flaps {
        tc.kill(3);
        let other = rt
            .block_on(tc.c.wait_agreed(WAIT))
            .expect("a leader without 3");
        assert_ne!(other, 3);
        let back = Instant::now();
        tc.start_node(3);
        let led = rt
            .block_on(until_leads(&tc, 3))
            .expect("node 3 took over again");
        let after = led - back;
        eprintln!(
            "node 3 leads again {} ms after its restart",
            after.as_millis()
        );
        assert!(
            after >= Duration::from_millis(SETTLE_MS),
            "handed over before the settle time: {after:?}"
        );
    }
    let elapsed_ms = (mono_ns() - t0) / 1_000_000;
    let changes = electd_lab::chaos::checkers::leader_changes(&tc.run_log(Some(t0), None));
    eprintln!("{flaps} flaps in {elapsed_ms} ms: {changes} leader changes");
    // Each flap: a failover away from 3, and one handover back; no more.
    assert!(
        changes <= 2 * flaps as u64,
        "{changes} leader changes for {flaps} flaps"
    );
    tc.assert_safe();
}

/// Issue 29, finding 2: the preferred node (3, priority 10) leads; its disk is wiped and it
/// starts again with `join`, without being removed. It acknowledges the leader's appends, but
/// the members know its earlier data dir, so it is never confirmed and never campaigns. The
/// leader must not hand over to it: before, it resigned to node 3 every settle time, node 3
/// never campaigned and another member won after a leaderless follower lease, for ever.
#[test]
fn no_handover_to_a_preferred_member_whose_data_dir_is_not_confirmed() {
    let rt = TestCluster::rt();
    let mut tc = TestCluster::configure(Mode::Quorum, 3, TEST_TIMING);
    prefer(&tc, 3);
    for id in 1..=3 {
        tc.start_node(id);
    }
    rt.block_on(until_leads(&tc, 3)).expect("node 3 leads");
    tc.kill(3);
    let leader = rt
        .block_on(tc.c.wait_agreed(WAIT))
        .expect("a leader without 3");
    std::fs::remove_dir_all(tc.c.data_dir(Mode::Quorum, 3)).unwrap();
    let through = tc.c.member(leader).unwrap().addr.clone();
    let path = tc.c.member(3).unwrap().config.clone();
    let mut cfg: toml::Table = toml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    cfg.insert("join".into(), toml::Value::String(through));
    std::fs::write(&path, toml::to_string(&cfg).unwrap()).unwrap();
    tc.start_node(3);
    // Watched for four settle times, with node 3 running, up to date and of the highest
    // priority; a change of leader ends the watch early.
    let t0 = mono_ns();
    let watch_until = Instant::now() + Duration::from_millis(4 * SETTLE_MS);
    while Instant::now() < watch_until {
        let now = rt.block_on(tc.c.agreed_leader());
        if now.is_some_and(|l| l != leader) {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let changes = electd_lab::chaos::checkers::leader_changes(&tc.run_log(Some(t0), None));
    let status = rt.block_on(tc.c.status(3)).expect("node 3 runs");
    assert_eq!(
        status.engine["identity"]["confirmed"],
        serde_json::json!(false),
        "the wiped node is not confirmed"
    );
    assert_eq!(changes, 0, "leader changes in four settle times");
    assert_eq!(rt.block_on(tc.c.wait_agreed(WAIT)), Some(leader));
    tc.assert_safe();
}
