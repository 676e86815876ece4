//! Members that don't vote, on real processes (quorum mode; docs/design/nonvoters.md): they
//! join by themselves with the cluster's credential (no admin step), never change a voter set,
//! never claim the cluster's election, hold named roles with the same promise, and are removed
//! by the leader once it has not heard from them for `nonvoters.remove_after_ms`; one started
//! again, or healed from a cut, joins again. Every claim of the cluster's election and of the role is judged whole.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{role_poller, role_promises_kept, TestCluster, TEST_TIMING};
use electd_client::{Members, Mode, NodeId, RoleName};

const WAIT: Duration = Duration::from_secs(20);
/// The leader's absence rule here: the least the config takes at the test timings (four
/// follower leases of 300 ms), and a little more.
const REMOVE_AFTER_MS: u64 = 1500;

/// Rewrites node `id`'s config: its `peers` limited to `peers`; a non-voter joins through
/// `join`, a voter removes absent non-voters after [`REMOVE_AFTER_MS`].
fn rewrite_config(path: &Path, peers: &[NodeId], join: Option<&str>) {
    common::rewrite_config(path, peers, |cfg| match join {
        Some(j) => {
            cfg.insert("join".into(), toml::Value::String(j.into()));
            cfg.insert("nonvoter".into(), toml::Value::Boolean(true));
        }
        None => {
            let mut nv = toml::Table::new();
            nv.insert(
                "remove_after_ms".into(),
                toml::Value::Integer(REMOVE_AFTER_MS as i64),
            );
            cfg.insert("nonvoters".into(), toml::Value::Table(nv));
        }
    });
}

async fn members_of(tc: &TestCluster, id: NodeId) -> Option<Members> {
    tc.c.client(id).ok()?.members().await.ok()
}

/// Waits until node `at` shows the voters `[1, 2, 3]`, committed, and exactly `nonvoters` as
/// the members that don't vote; the voter sets stay `[[1, 2, 3]]` meanwhile.
async fn until_members(tc: &TestCluster, at: NodeId, nonvoters: &[NodeId]) -> Result<(), String> {
    let until = Instant::now() + WAIT;
    let mut last = None;
    while Instant::now() < until {
        if let Some(m) = members_of(tc, at).await {
            if m.voter_sets != vec![vec![1, 2, 3]] {
                return Err(format!("the voter sets changed: {m:?}"));
            }
            let learners: Vec<NodeId> = m
                .members
                .iter()
                .filter(|x| !x.voter)
                .map(|x| x.id)
                .collect();
            if m.committed && learners == nonvoters {
                return Ok(());
            }
            last = Some(m);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Err(format!(
        "node {at} never showed non-voters {nonvoters:?}: {last:?}"
    ))
}

/// The value of the sample named exactly `series` in node `id`'s `/metrics` (0 without it).
fn metric(rt: &tokio::runtime::Runtime, tc: &TestCluster, id: NodeId, series: &str) -> f64 {
    let text = rt
        .block_on(tc.c.client(id).unwrap().metrics_text())
        .unwrap();
    common::sample(&text, series).unwrap_or(0.0)
}

/// What the joins of 4 and 5 show to an operator: the leader's `/v1/members` tells how long
/// each non-voter has not answered (`absent_ms`, below the absence rule while they answer), the
/// others tell nothing of it; `/metrics` counts the members by kind, says which node does not
/// vote, and the voters counted two joins `added`.
async fn surface_after_joins(tc: &TestCluster, leader: NodeId) -> Result<(), String> {
    let until = Instant::now() + WAIT;
    let mut seen = String::new();
    let mut leader = leader;
    while Instant::now() < until {
        // The leader of now (one elected since the joins tells the absences instead).
        leader =
            tc.c.wait_agreed_among(&[1, 2, 3], WAIT)
                .await
                .unwrap_or(leader);
        let m = members_of(tc, leader).await.ok_or("no members")?;
        let absent: Vec<Option<u64>> = m.members.iter().map(|x| x.absent_ms).collect();
        let answered = m.members.iter().all(|x| {
            x.voter == x.absent_ms.is_none() && x.absent_ms.is_none_or(|a| a < REMOVE_AFTER_MS)
        });
        let text = tc.c.client(leader).map_err(|e| e.to_string())?;
        let text = text.metrics_text().await.map_err(|e| e.to_string())?;
        let kinds = text.contains("electd_members{kind=\"voter\"} 3")
            && text.contains("electd_members{kind=\"nonvoter\"} 2")
            && text.contains("electd_nonvoter 0");
        if answered && kinds {
            break;
        }
        seen = format!("absent_ms {absent:?}, members by kind on the leader: {kinds}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    if Instant::now() >= until {
        return Err(format!("the leader never showed its non-voters: {seen}"));
    }
    for id in (1..=5).filter(|id| *id != leader) {
        let m = members_of(tc, id).await.ok_or("no members")?;
        if m.members.iter().any(|x| x.absent_ms.is_some()) {
            return Err(format!("node {id}, not the leader, tells absences: {m:?}"));
        }
    }
    let mut added = 0.0;
    for id in 1..=5 {
        let text = tc.c.client(id).map_err(|e| e.to_string())?;
        let text = text.metrics_text().await.map_err(|e| e.to_string())?;
        let line = |series: &str| common::sample(&text, series);
        let nonvoter = line("electd_nonvoter").unwrap_or(-1.0);
        if nonvoter != f64::from(u8::from(id > 3)) {
            return Err(format!("node {id}: electd_nonvoter {nonvoter}"));
        }
        added += line("electd_nonvoter_joins_total{outcome=\"added\"}").unwrap_or(0.0);
    }
    if added < 2.0 {
        return Err(format!("{added} joins counted added, of 2"));
    }
    Ok(())
}

/// Stands node `id` for `role` (the test's client is not on its host: with the admin token).
fn stand(rt: &tokio::runtime::Runtime, tc: &TestCluster, role: &RoleName, id: NodeId) {
    let c = tc.c.client(id).unwrap();
    rt.block_on(c.stand(role, id, true)).unwrap();
}

/// Waits until node `holder` answers its claim on `role` with 200.
async fn until_holds(tc: &TestCluster, holder: NodeId, role: &RoleName) -> bool {
    let until = Instant::now() + WAIT;
    while Instant::now() < until {
        if let Ok(c) = tc.c.client(holder) {
            if matches!(c.role_claim(role).await, Ok((true, _))) {
                return true;
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

#[test]
fn nonvoters_join_by_themselves_hold_roles_never_claim_and_are_removed_when_absent() {
    let rt = TestCluster::rt();
    let mut tc = TestCluster::configure(Mode::Quorum, 5, TEST_TIMING);
    let node1 = tc.c.member(1).unwrap().addr.clone();
    for id in 1..=3 {
        rewrite_config(&tc.c.member(id).unwrap().config.clone(), &[1, 2, 3], None);
    }
    for id in 4..=5 {
        let path = tc.c.member(id).unwrap().config.clone();
        rewrite_config(&path, &[1, 2, 3, id], Some(&node1));
    }
    for id in 1..=3 {
        tc.start_node(id);
    }
    let leader = rt
        .block_on(tc.c.wait_agreed(WAIT))
        .expect("a leader of three");
    tc.poll_on(&[1, 2, 3, 4, 5]);
    // Both join through node 1 with no operator step; the voters stay 1, 2, 3.
    tc.start_node(4);
    tc.start_node(5);
    rt.block_on(until_members(&tc, 1, &[4, 5])).unwrap();
    for id in 1..=5 {
        rt.block_on(until_members(&tc, id, &[4, 5])).unwrap();
    }
    rt.block_on(surface_after_joins(&tc, leader)).unwrap();
    // A non-voter knows the leader and never claims the cluster's election.
    for id in 4..=5 {
        let c = tc.c.client(id).unwrap();
        let (claims, view) = rt.block_on(c.claim()).unwrap();
        assert!(
            !claims,
            "non-voter {id} claims the cluster's election: {view:?}"
        );
        assert!(view.leader.is_some(), "non-voter {id} knows no leader");
    }
    // A role that only the non-voters stand for.
    let role = RoleName::new("nv-job").unwrap();
    let (prt, poller) = role_poller(&tc, &[1, 2, 3, 4, 5], std::slice::from_ref(&role));
    stand(&rt, &tc, &role, 4);
    assert!(
        rt.block_on(until_holds(&tc, 4, &role)),
        "node 4 holds the role"
    );
    stand(&rt, &tc, &role, 5);
    // Node 4 dies: its role moves to node 5 after its promises, and the leader removes it
    // once it has not heard from it for REMOVE_AFTER_MS.
    let t0 = Instant::now();
    tc.kill(4);
    assert!(
        rt.block_on(until_holds(&tc, 5, &role)),
        "node 5 holds the role"
    );
    rt.block_on(until_members(&tc, 1, &[5])).unwrap();
    let removed = t0.elapsed();
    let removals: f64 = (1..=3)
        .map(|id| metric(&rt, &tc, id, "electd_nonvoters_removed_total"))
        .sum();
    assert!(removals >= 1.0, "no removal counted on the voters");
    eprintln!(
        "node 4 removed {} ms after it was killed",
        removed.as_millis()
    );
    // The leader last heard it at most a learner's heartbeat (four beats, 200 ms) before the
    // kill, and counts the absence from there.
    assert!(
        removed + Duration::from_millis(250) >= Duration::from_millis(REMOVE_AFTER_MS),
        "removed after {removed:?}, before its absence ({REMOVE_AFTER_MS} ms)"
    );
    // Started again on its data dir, it joins again by itself.
    tc.start_node(4);
    rt.block_on(until_members(&tc, 1, &[4, 5])).unwrap();
    // Node 5, holding the role now, cut off from the voters past the absence: removed, the role
    // back on node 4. Healed, it joins again by itself, though its renewals (it still stands
    // in its own table) are answered meanwhile: only a leader's appends count as heard.
    stand(&rt, &tc, &role, 4);
    let cut = electd_client::FaultSet {
        block_to: [1, 2, 3].into(),
        block_from: [1, 2, 3].into(),
        ..Default::default()
    };
    rt.block_on(tc.c.set_faults(5, &cut)).unwrap();
    rt.block_on(until_members(&tc, 1, &[4])).unwrap();
    assert!(
        rt.block_on(until_holds(&tc, 4, &role)),
        "node 4 holds the role again"
    );
    rt.block_on(tc.c.clear_faults(5)).unwrap();
    rt.block_on(until_members(&tc, 1, &[4, 5])).unwrap();
    let kept = role_promises_kept(prt, poller);
    assert!(kept.promises >= 5, "too few role promises judged: {kept:?}");
    for id in 1..=3 {
        assert!(
            !tc.log_since(id, 0)
                .contains("adding a member: learner first"),
            "a non-voter went through the admin's add on node {id}"
        );
    }
    tc.assert_safe();
}
