//! Runtime membership on real processes (quorum mode; docs/operations.md, "Changing the members"): grow
//! 3 → 5 and shrink 5 → 3 under load, remove the leader, replace a dead member on a new data
//! dir. Each with no term led twice and no two claimants at once over every node's event log
//! (C1, C2), and the time without a claimant it cost printed. Bully, ring and the others keep
//! the members of their config and say so.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use common::{TestCluster, TEST_TIMING};
use electd::clock::mono_ns;
use electd_client::{Members, Mode, NodeId};
use electd_lab::chaos::checkers::availability;

const WAIT: Duration = Duration::from_secs(20);

/// Rewrites node `id`'s config: its `peers` limited to `peers`, and `join` set or not.
fn rewrite_config(path: &Path, peers: &[NodeId], join: Option<&str>) {
    common::rewrite_config(path, peers, |cfg| {
        match join {
            Some(j) => cfg.insert("join".into(), toml::Value::String(j.into())),
            None => cfg.remove("join"),
        };
    });
}

/// Node `id`'s membership answer.
async fn members_of(tc: &TestCluster, id: NodeId) -> Option<Members> {
    tc.c.client(id).ok()?.members().await.ok()
}

/// Waits until node `at` reports exactly `voters` as the one voter set, committed.
async fn until_voters(tc: &TestCluster, at: NodeId, voters: &[NodeId]) -> bool {
    let until = Instant::now() + WAIT;
    while Instant::now() < until {
        if let Some(m) = members_of(tc, at).await {
            if m.voter_sets == vec![voters.to_vec()] && m.committed {
                return true;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

/// A change through the leader's admin API, with the time a change may take.
fn admin(tc: &TestCluster, id: NodeId) -> electd_client::Client {
    tc.c.client(id).unwrap().timeout(Duration::from_secs(6))
}

/// Prints and returns the time without a claimant from `from_ns` on.
fn leaderless_ms(tc: &TestCluster, what: &str, from_ns: u64) -> f64 {
    let a = availability(&tc.run_log(Some(from_ns), None));
    let ms = a.leaderless_ns as f64 / 1e6;
    eprintln!("{what}: {ms:.1} ms without a claimant");
    ms
}

#[test]
fn grow_three_to_five_and_shrink_back_under_load() {
    let rt = TestCluster::rt();
    let mut tc = TestCluster::configure(Mode::Quorum, 5, TEST_TIMING);
    let node1 = tc.c.member(1).unwrap().addr.clone();
    for id in 1..=3 {
        rewrite_config(&tc.c.member(id).unwrap().config.clone(), &[1, 2, 3], None);
    }
    for id in 4..=5 {
        rewrite_config(
            &tc.c.member(id).unwrap().config.clone(),
            &[1, 2, 3, 4, 5],
            Some(&node1),
        );
    }
    for id in 1..=3 {
        tc.start_node(id);
    }
    rt.block_on(tc.c.wait_agreed(WAIT))
        .expect("a leader of three");
    assert!(rt.block_on(until_voters(&tc, 1, &[1, 2, 3])));
    let urls: Vec<String> = (1..=3)
        .map(|id| format!("http://{}/v1/leader", tc.c.member(id).unwrap().addr))
        .collect();
    let load = rt.spawn(async move { electd_lab::bench::hammer(&urls, 12, 8).await });
    let t0 = mono_ns();
    // Grow: each new node joins through node 1 and asks the leader to add it (admin token).
    tc.start_node(4);
    assert!(
        rt.block_on(until_voters(&tc, 1, &[1, 2, 3, 4])),
        "node 4 joined"
    );
    tc.start_node(5);
    assert!(
        rt.block_on(until_voters(&tc, 1, &[1, 2, 3, 4, 5])),
        "node 5 joined"
    );
    let leader = rt.block_on(tc.c.wait_agreed(WAIT)).expect("five agree");
    for id in 1..=5 {
        assert!(
            rt.block_on(until_voters(&tc, id, &[1, 2, 3, 4, 5])),
            "node {id}"
        );
    }
    let grown = leaderless_ms(&tc, "grow 3 -> 5", t0);
    // A node of the first three, whose config names only them, shows the members in force
    // in /v1/status and takes a fault set that names a member added since.
    let st = rt.block_on(tc.c.status(2)).unwrap();
    let peers: Vec<NodeId> = st.peers.iter().map(|p| p.id).collect();
    assert_eq!(peers, vec![1, 3, 4, 5], "node 2's peers in /v1/status");
    let cut = electd_client::FaultSet {
        block_to: [5].into(),
        ..Default::default()
    };
    let set = rt.block_on(tc.c.set_faults(2, &cut));
    assert!(set.is_ok(), "a fault set naming member 5: {set:?}");
    rt.block_on(tc.c.clear_faults(2)).unwrap();
    // Shrink: the leader removes 5, then 4 (whichever leads; the leader removing itself
    // hands over first).
    let t1 = mono_ns();
    for (gone, left) in [(5, vec![1, 2, 3, 4]), (4, vec![1, 2, 3])] {
        let l = rt.block_on(tc.c.wait_agreed(WAIT)).unwrap_or(leader);
        let m = rt.block_on(admin(&tc, l).remove_member(gone));
        assert!(m.is_ok(), "remove {gone} at {l}: {m:?}");
        assert!(rt.block_on(until_voters(&tc, 1, &left)), "without {gone}");
    }
    tc.stop(5);
    tc.stop(4);
    let shrunk = leaderless_ms(&tc, "shrink 5 -> 3", t1);
    let now = rt.block_on(tc.c.wait_agreed(WAIT)).expect("three agree");
    assert!(now <= 3, "the leader {now} is one of the three left");
    let h = rt.block_on(load).unwrap().expect("the load ran");
    let pct = |q: f64| h.latency_ms[((h.latency_ms.len() - 1) as f64 * q) as usize];
    eprintln!(
        "load: {} requests in {:.1} s, {} errors, p50 {:.2} ms, p99 {:.2} ms",
        h.requests,
        h.seconds,
        h.errors,
        pct(0.5),
        pct(0.99)
    );
    assert_eq!(h.errors, 0, "GET /v1/leader failed during the changes");
    tc.assert_safe();
    assert!(grown < 2000.0 && shrunk < 2000.0, "{grown} / {shrunk} ms");
}

#[test]
fn removing_the_leader_hands_over_first() {
    let rt = TestCluster::rt();
    let mut tc = TestCluster::start(Mode::Quorum, 5);
    let leader = rt.block_on(tc.c.wait_agreed(WAIT)).expect("leader");
    let t0 = mono_ns();
    let m = rt
        .block_on(admin(&tc, leader).remove_member(leader))
        .expect("the leader removed itself");
    assert!(m.members.iter().all(|x| x.id != leader), "{m:?}");
    let others: Vec<NodeId> = (1..=5).filter(|i| *i != leader).collect();
    let next = rt.block_on(tc.c.wait_agreed(WAIT)).expect("a new leader");
    assert_ne!(next, leader);
    assert!(rt.block_on(until_voters(&tc, next, &others)));
    tc.stop(leader);
    leaderless_ms(&tc, "remove the leader", t0);
    // The removed node neither campaigns nor claims again (it was stopped only now).
    tc.assert_safe();
}

/// A member removed, its disk wiped, and started again as before, without `--join`: its config
/// still names it among the peers, so it would bootstrap a membership of its own; the members
/// do not count it among theirs, and it stops with a message that says how to rejoin. (Before,
/// the members recorded the incarnation they had forgotten with the removal, and it ran on,
/// campaigning with an empty log.)
#[test]
fn a_removed_member_restarted_on_a_wiped_disk_without_join_refuses_to_run() {
    let rt = TestCluster::rt();
    let mut tc = TestCluster::start(Mode::Quorum, 5);
    let leader = rt.block_on(tc.c.wait_agreed(WAIT)).expect("leader");
    let gone = (1..=5).find(|i| *i != leader).unwrap();
    rt.block_on(admin(&tc, leader).remove_member(gone))
        .expect("removed");
    let rest: Vec<NodeId> = (1..=5).filter(|i| *i != gone).collect();
    assert!(rt.block_on(until_voters(&tc, leader, &rest)));
    tc.kill(gone);
    let logged_before = tc.log_len(gone);
    std::fs::remove_dir_all(tc.c.data_dir(Mode::Quorum, gone)).unwrap();
    tc.start_node(gone);
    assert!(
        tc.c.wait_exit(gone, Duration::from_secs(20)),
        "the removed, wiped node {gone} is still running"
    );
    let log = tc.log_since(gone, logged_before);
    assert!(
        log.contains("do not count it among") && log.contains("--join"),
        "no refusal in node {gone}'s log:\n{log}"
    );
    let now = rt.block_on(tc.c.wait_agreed(WAIT)).expect("the four agree");
    assert_ne!(now, gone);
    tc.assert_safe();
}

#[test]
fn a_dead_member_is_replaced_on_a_new_data_dir() {
    let rt = TestCluster::rt();
    let mut tc = TestCluster::start(Mode::Quorum, 5);
    let leader = rt.block_on(tc.c.wait_agreed(WAIT)).expect("leader");
    let dead = (1..=5).find(|i| *i != leader).unwrap();
    tc.kill(dead);
    std::fs::remove_dir_all(tc.c.data_dir(Mode::Quorum, dead)).unwrap();
    let t0 = mono_ns();
    rt.block_on(admin(&tc, leader).remove_member(dead))
        .expect("the dead member removed");
    let rest: Vec<NodeId> = (1..=5).filter(|i| *i != dead).collect();
    assert!(rt.block_on(until_voters(&tc, leader, &rest)));
    // The replacement: the same id and address, an empty data dir, joining through the leader.
    let through = tc.c.member(leader).unwrap().addr.clone();
    rewrite_config(
        &tc.c.member(dead).unwrap().config.clone(),
        &[1, 2, 3, 4, 5],
        Some(&through),
    );
    tc.start_node(dead);
    assert!(rt.block_on(until_voters(&tc, leader, &[1, 2, 3, 4, 5])));
    // Its new incarnation was recorded (the old one was forgotten with the removal): it votes.
    let confirmed = rt.block_on(async {
        let until = Instant::now() + WAIT;
        while Instant::now() < until {
            if let Ok(st) = tc.c.status(dead).await {
                if st.engine["identity"]["confirmed"] == serde_json::json!(true) {
                    return true;
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        false
    });
    assert!(confirmed, "the replacement was not confirmed");
    // With the leader and one more down, the three left need the replacement's vote.
    let other = (1..=5).find(|i| *i != leader && *i != dead).unwrap();
    tc.kill(leader);
    tc.kill(other);
    let next = rt
        .block_on(tc.c.wait_agreed(WAIT))
        .expect("elected with the replacement");
    assert!(next != leader && next != other);
    leaderless_ms(&tc, "replace a dead member", t0);
    tc.assert_safe();
}

/// A cut of `ids` both ways, as `Cluster::partition` sets it (the admin faults API).
fn cut_from(ids: impl IntoIterator<Item = NodeId>) -> electd_client::FaultSet {
    let ids: BTreeSet<NodeId> = ids.into_iter().collect();
    electd_client::FaultSet {
        block_to: ids.clone(),
        block_from: ids,
        ..Default::default()
    }
}

/// Sets node `id`'s fault set, until it takes it (a node starting, or one that has not applied
/// the addition of a member the set names yet), at most [`WAIT`].
async fn until_faults(tc: &TestCluster, id: NodeId, set: &electd_client::FaultSet) -> bool {
    let until = Instant::now() + WAIT;
    while Instant::now() < until {
        if tc.c.set_faults(id, set).await.is_ok() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

/// Waits until every node of `ids` names the same leader, one of them.
async fn until_leader_among(tc: &TestCluster, ids: &[NodeId]) -> Option<NodeId> {
    let until = Instant::now() + WAIT;
    while Instant::now() < until {
        let mut named = BTreeSet::new();
        for &id in ids {
            let l = tc.c.leader_info(id).await.ok().and_then(|i| i.leader);
            named.insert(l.map(|l| l.id));
        }
        if let [Some(l)] = named.into_iter().collect::<Vec<_>>()[..] {
            if ids.contains(&l) {
                return Some(l);
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    None
}

/// Starts node `id` again after a kill, until it serves its API or stops for another reason, at
/// most [`WAIT`]: now and then the killed process's address is still taken a moment after it
/// is gone ("cannot listen on ...: Address already in use"), and the node exits at once; it is
/// started again then.
fn restart(rt: &tokio::runtime::Runtime, tc: &mut TestCluster, id: NodeId) {
    let until = Instant::now() + WAIT;
    let mut starts = 0;
    while Instant::now() < until {
        let from = tc.log_len(id);
        tc.start_node(id);
        starts += 1;
        while Instant::now() < until {
            if rt.block_on(tc.c.status(id)).is_ok() {
                return;
            }
            if tc.c.pid(id).is_none() {
                if tc.log_since(id, from).contains("cannot listen") {
                    break;
                }
                return; // it ran, and stopped: the caller judges why
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    panic!("node {id} does not serve its API after {starts} starts");
}

/// Issue 29, finding 1, on real processes (the simulator's
/// `a_wiped_member_is_refused_by_members_added_while_it_was_cut_off`): members 4-7 are added
/// one at a time to {1, 2, 3} while 3 is cut off from them (app-layer faults, both ways), so
/// none of them ever hears 3's incarnation from 3 itself. Then {1, 2} are cut off and crash,
/// and 3 restarts on a wiped data dir without `--join` and is healed to 4-7, a majority of
/// the seven. 4-7 hold 3's earlier incarnation from the log (the leader wrote it before each
/// change: identity.rs, rule 5), so 3 is refused and stops, never confirmed, never voting.
/// (Before, 4-7 knew no incarnation of 3, recorded the new one and confirmed it: a data dir
/// that lost its votes voted again.)
#[test]
fn a_wiped_member_is_refused_by_members_added_while_it_was_cut_off() {
    let rt = TestCluster::rt();
    let mut tc = TestCluster::configure(Mode::Quorum, 7, TEST_TIMING);
    let (t0, logged_before) = grow_without_3_then_wipe_it(&rt, &mut tc);
    // Until 3 stops, at most 20 s: never confirmed while it runs, by its own account or by
    // 4-7's records (none holds the incarnation it runs on).
    let until = Instant::now() + WAIT;
    let mut answers = 0;
    while tc.c.pid(3).is_some() && Instant::now() < until {
        if let Ok(st) = rt.block_on(tc.c.status(3)) {
            answers += 1;
            assert_ne!(
                st.engine["identity"]["confirmed"],
                serde_json::json!(true),
                "node 3 on a wiped data dir was confirmed by 4-7: it votes again"
            );
        }
        let recorders = recorders_of_3(&tc, &rt);
        assert!(
            recorders.len() < 4,
            "4-7 recorded 3's wiped data dir: {recorders:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let log = tc.log_since(3, logged_before);
    assert!(
        !log.contains("incarnation confirmed"),
        "node 3 on a wiped data dir was confirmed:\n{log}"
    );
    assert!(
        tc.c.wait_exit(3, Duration::from_millis(500)),
        "node 3 on a wiped data dir still runs after {} s ({answers} status answers, never \
         confirmed):\n{log}",
        WAIT.as_secs()
    );
    assert!(
        log.contains("knows it by an earlier one") && log.contains("Refusing to vote or run"),
        "no refusal in node 3's log:\n{log}"
    );
    eprintln!(
        "node 3 refused {:.1} s after the crash of 1 and 2 ({answers} status answers first)",
        (mono_ns() - t0) as f64 / 1e9
    );
    let next = rt.block_on(until_leader_among(&tc, &[4, 5, 6, 7]));
    assert!(next.is_some(), "4-7 elect a leader without 1, 2 and 3");
    tc.assert_safe();
}

/// Issue 48, item 9: the same growth on nodes whose leader changes the membership without
/// writing the voters' incarnations into the log (`unlogged-incarnations`, identity.rs's rule 5
/// left out): 4-7, which never heard 3, record the incarnation its wiped data dir runs on, all
/// four of them (⌈7/2⌉ = 4 confirm it), as their `/v1/status` shows: a data dir that lost its
/// votes may vote again. Read from the members' records, not from the flag the flaw sets.
#[test]
fn members_added_later_that_confirm_a_wiped_disk_are_caught() {
    let rt = TestCluster::rt();
    let mut tc = TestCluster::configure(Mode::Quorum, 7, TEST_TIMING);
    let bin = electd_lab::bin::electd_bin().expect("the electd binary");
    tc.c.bin = bin.with_file_name("electd-flawed");
    tc.c.extra_args
        .extend(["--lab-flaw".into(), "unlogged-incarnations".into()]);
    grow_without_3_then_wipe_it(&rt, &mut tc);
    let until = Instant::now() + WAIT;
    let mut recorders = recorders_of_3(&tc, &rt);
    while recorders.len() < 4 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
        recorders = recorders_of_3(&tc, &rt);
    }
    assert_eq!(recorders, [4, 5, 6, 7].into(), "the flaw went unseen");
}

/// The members of 4-7 whose `/v1/status` records, for node 3, the incarnation node 3 runs on.
fn recorders_of_3(tc: &TestCluster, rt: &tokio::runtime::Runtime) -> BTreeSet<NodeId> {
    let Ok(three) = rt.block_on(tc.c.status(3)) else {
        return BTreeSet::new();
    };
    let mine = &three.engine["identity"]["incarnation"];
    (4..=7)
        .filter(|&id| {
            rt.block_on(tc.c.status(id))
                .is_ok_and(|st| &st.engine["identity"]["peers"]["3"]["incarnation"] == mine)
        })
        .collect()
}

/// The schedule of `a_wiped_member_is_refused_by_members_added_while_it_was_cut_off` up to node
/// 3's restart on a wiped data dir, healed to 4-7: when 1 and 2 were cut off, and how long 3's
/// log was before the restart.
fn grow_without_3_then_wipe_it(rt: &tokio::runtime::Runtime, tc: &mut TestCluster) -> (u64, usize) {
    let all: Vec<NodeId> = (1..=7).collect();
    let node1 = tc.c.member(1).unwrap().addr.clone();
    for id in 1..=3 {
        rewrite_config(&tc.c.member(id).unwrap().config.clone(), &[1, 2, 3], None);
    }
    for id in 4..=7 {
        rewrite_config(&tc.c.member(id).unwrap().config.clone(), &all, Some(&node1));
    }
    for id in 1..=3 {
        tc.start_node(id);
    }
    let leader = rt
        .block_on(tc.c.wait_agreed(WAIT))
        .expect("a leader of three");
    assert!(rt.block_on(until_voters(tc, 1, &[1, 2, 3])));
    // 3 must not lead: the new members catch up from the leader, and 3 will not reach them.
    if leader == 3 {
        rt.block_on(admin(tc, 3).resign(Some(1)))
            .expect("3 hands over");
        let next = rt.block_on(until_leader_among(tc, &[1, 2, 3]));
        assert!(
            next.is_some_and(|l| l != 3),
            "a leader other than 3: {next:?}"
        );
    }
    // Grow to seven, 3 cut off from each new member from its start: 3 is paused while the
    // member starts and takes its cut (a hello from 3 would beat the fault set otherwise), and
    // takes the cut itself once it counts the member (a fault set names members only).
    let mut voters = vec![1, 2, 3];
    for k in 4..=7 {
        tc.rec.pause(&tc.c, 3);
        tc.start_node(k);
        assert!(
            rt.block_on(until_faults(tc, k, &cut_from([3]))),
            "node {k} takes the cut from 3"
        );
        tc.rec.resume(&tc.c, 3);
        assert!(
            rt.block_on(until_faults(tc, 3, &cut_from(4..=k))),
            "node 3 takes the cut from 4-{k}"
        );
        voters.push(k);
        assert!(
            rt.block_on(until_voters(tc, 1, &voters)),
            "node {k} added without 3"
        );
    }
    // The cut held: none of 4-7 recorded 3's incarnation from a hello of 3 or an answer of 3.
    for id in 4..=7 {
        let heard = tc.log_since(id, 0);
        let heard: Vec<&str> = heard
            .lines()
            .filter(|l| l.contains("recorded a member's incarnation") && l.contains(" peer=3 "))
            .collect();
        assert!(heard.is_empty(), "node {id} heard 3: {heard:?}");
    }
    let t0 = mono_ns();
    // The steps: {1, 2} cut off from the rest, and crashed.
    for id in [1, 2] {
        assert!(rt.block_on(until_faults(tc, id, &cut_from(3..=7))));
    }
    assert!(rt.block_on(until_faults(tc, 3, &cut_from([1, 2, 4, 5, 6, 7]))));
    for id in 4..=7 {
        assert!(rt.block_on(until_faults(tc, id, &cut_from([1, 2, 3]))));
    }
    tc.kill(1);
    tc.kill(2);
    // 3 on a wiped data dir, without --join: its config still names {1, 2, 3}.
    tc.kill(3);
    let logged_before = tc.log_len(3);
    std::fs::remove_dir_all(tc.c.data_dir(Mode::Quorum, 3)).unwrap();
    restart(rt, tc, 3);
    // Heal the cut between 3 and 4-7 (3 started with no fault set).
    for id in 4..=7 {
        assert!(rt.block_on(until_faults(tc, id, &cut_from([1, 2]))));
    }
    (t0, logged_before)
}

#[test]
fn modes_other_than_quorum_keep_their_config_members() {
    let rt = TestCluster::rt();
    let tc = TestCluster::start(Mode::Bully, 3);
    rt.block_on(tc.c.wait_agreed(WAIT)).expect("leader");
    for answer in [
        rt.block_on(tc.c.client(1).unwrap().members()).map(|_| ()),
        rt.block_on(admin(&tc, 1).remove_member(2)).map(|_| ()),
        rt.block_on(admin(&tc, 1).add_member(9, "127.0.0.1:9"))
            .map(|_| ()),
    ] {
        let e = answer.expect_err("not supported");
        assert_eq!(e.code(), Some("not_supported"), "{e}");
        assert_eq!(e.status(), Some(409), "{e}");
    }
}

/// A rolling replacement of all five members, one at a time, with `electd run` beside each
/// node (a stand-in application that stamps its lifetime every millisecond): each member in
/// turn is removed (the leader hands over first), killed, its vote and log wiped (its event log
/// kept, to judge its claims), started again with `--join`, and added back. The child runs on at most one node at every
/// instant, each child only inside a claim of its own node.
#[test]
fn a_rolling_replacement_of_all_five_keeps_one_child_running() {
    use common::{stamps, Supervisors};
    use electd_lab::chaos::checkers::claim_intervals;

    let rt = TestCluster::rt();
    let mut tc = TestCluster::start(Mode::Quorum, 5);
    rt.block_on(tc.c.wait_agreed(WAIT)).expect("a leader");
    let dir = tempfile::tempdir().unwrap();
    let file = |id: NodeId| dir.path().join(format!("stamps{id}"));
    let mut sups = Supervisors::stamping(&tc, dir.path());
    let all: Vec<NodeId> = (1..=5).collect();
    let t0 = mono_ns();
    for gone in 1..=5 {
        let rest: Vec<NodeId> = all.iter().copied().filter(|i| *i != gone).collect();
        // As an operator would: ask the leader, and ask again where an answer says to (a
        // handover whose election took longer than the 4 s an answer may take, on a busy host).
        let until = Instant::now() + WAIT;
        loop {
            let leader = rt.block_on(tc.c.wait_agreed(WAIT)).expect("a leader");
            match rt.block_on(admin(&tc, leader).remove_member(gone)) {
                Ok(_) => break,
                Err(e) if e.code() == Some("unknown_member") => break,
                Err(e) => {
                    eprintln!("remove {gone} at {leader}: {e}; asking again");
                    assert!(Instant::now() < until, "remove {gone}: {e}");
                }
            }
        }
        let ask = rest[0];
        assert!(rt.block_on(until_voters(&tc, ask, &rest)), "without {gone}");
        tc.kill(gone);
        // Its vote, log and incarnation are lost; its event log is kept, for the checks below
        // (a node's claims are read from it).
        let data = tc.c.data_dir(Mode::Quorum, gone);
        for f in electd::quorum::SLOT_FILES {
            let _ = std::fs::remove_file(data.join(f));
        }
        let through = tc.c.member(ask).unwrap().addr.clone();
        rewrite_config(
            &tc.c.member(gone).unwrap().config.clone(),
            &all,
            Some(&through),
        );
        // Started again while its address may still be taken a moment (`restart`).
        restart(&rt, &mut tc, gone);
        assert!(rt.block_on(until_voters(&tc, ask, &all)), "{gone} back");
    }
    rt.block_on(tc.c.wait_agreed(WAIT))
        .expect("five agree at the end");
    let codes = sups.interrupt_all();
    for (id, code) in &codes {
        assert_eq!(*code, Some(0), "electd run beside node {id} at SIGINT");
    }
    leaderless_ms(&tc, "rolling replacement of five", t0);
    tc.assert_safe();
    // Every child (node, pid) as the interval of its stamps: it begins inside a claim of its
    // node (or inside that claim's last promise) and ends before the last promise that claim can have given (a claim lease after
    // it ended: a resignation ends the claim at once, and `electd run` stops its child when it
    // hears, within the promise), never overlaps another node's claim, nor another node's child.
    let claims = claim_intervals(&tc.run_log(None, None));
    let lease_ns = electd::clock::ms(tc.timing.effective_lease_ms());
    let mut children: Vec<(NodeId, u32, u64, u64)> = Vec::new();
    let mut past_claim_ms: f64 = 0.0;
    for id in tc.c.ids() {
        let mut by_pid: BTreeMap<u32, (u64, u64)> = BTreeMap::new();
        for (t, _, pid) in stamps(&file(id)) {
            let e = by_pid.entry(pid).or_insert((t, t));
            e.0 = e.0.min(t);
            e.1 = e.1.max(t);
        }
        for (pid, (first, last)) in by_pid {
            // (It may start just after the claim ended: `electd run` acts on an answer given
            // inside the claim, whose promise runs a claim lease from the asking.)
            let own = claims
                .iter()
                .find(|c| c.node == id && c.from_ns <= first && first <= c.to_ns + lease_ns);
            let Some(own) = own else {
                panic!(
                    "node {id}'s child {pid} started at {first} outside its node's claims {:?}; \
                     events {:?}",
                    claims.iter().filter(|c| c.node == id).collect::<Vec<_>>(),
                    tc.events()
                        .iter()
                        .filter(|e| e.node_id == id)
                        .collect::<Vec<_>>()
                );
            };
            assert!(
                last <= own.to_ns + lease_ns,
                "node {id}'s child {pid} ran {first}..{last}, past its claim's promises ({own:?})"
            );
            past_claim_ms = past_claim_ms.max(last.saturating_sub(own.to_ns) as f64 / 1e6);
            common::assert_no_other_claim(&claims, id, pid, first, last);
            children.push((id, pid, first, last));
        }
    }
    for a in &children {
        for b in &children {
            assert!(
                a.0 == b.0 || a.3 < b.2 || b.3 < a.2,
                "children of two nodes ran at once: {a:?} and {b:?}"
            );
        }
    }
    eprintln!(
        "rolling replacement: {} children over the run, never two at once; a child outlived \
         its node's claim (a resignation) by at most {past_claim_ms:.1} ms",
        children.len()
    );
    assert!(children.len() >= 2, "the child never moved: {children:?}");
}

/// `cluster.sh up` after a member was removed: the cluster keeps its data across `down` and
/// `up`, so the removed member's config still starts it; agreement is judged among the members
/// in force, and the node outside is named (it answered no leader, and `up` waited 30 s and
/// reported "no agreed leader"). `down --wipe` then starts a new cluster of the configs.
#[test]
fn up_after_a_removal_agrees_among_the_members_in_force_and_wipe_starts_over() {
    let rt = TestCluster::rt();
    let mut tc = TestCluster::start(Mode::Quorum, 3);
    let leader = rt.block_on(tc.c.wait_agreed(WAIT)).expect("leader");
    let gone = (1..=3).find(|i| *i != leader).unwrap();
    rt.block_on(admin(&tc, leader).remove_member(gone))
        .expect("removed");
    let rest: Vec<NodeId> = (1..=3).filter(|i| *i != gone).collect();
    assert!(rt.block_on(until_voters(&tc, leader, &rest)));
    for id in 1..=3 {
        tc.stop(id);
    }
    for id in 1..=3 {
        tc.start_node(id);
    }
    let (agreed, outside) = rt.block_on(tc.c.wait_agreed_members(WAIT));
    assert!(agreed.is_some_and(|l| l != gone), "agreed {agreed:?}");
    assert_eq!(outside, [gone], "the removed member is named");
    for id in 1..=3 {
        tc.stop(id);
    }
    tc.c.wipe().unwrap();
    assert!(!tc.c.data_dir(Mode::Quorum, gone).exists());
    for id in 1..=3 {
        tc.start_node(id);
    }
    let (agreed, outside) = rt.block_on(tc.c.wait_agreed_members(WAIT));
    assert!(agreed.is_some(), "a new cluster of the configs elects");
    assert!(
        outside.is_empty(),
        "every config is a member again: {outside:?}"
    );
    tc.assert_safe();
}

/// `electd --inspect-data-dir` / `--force-new-cluster` on node `id`'s config and data dir (the
/// node stopped), with `extra` flags: what it printed, or what it said when it failed.
fn recover_cmd(tc: &TestCluster, id: NodeId, extra: &[&str]) -> Result<String, String> {
    let m = tc.c.member(id).unwrap();
    let secret = std::fs::read_to_string(tc.c.run.join("cluster-secret")).unwrap();
    let out = std::process::Command::new(&tc.c.bin)
        .env("ELECTD_CLUSTER_SECRET", secret.trim())
        .arg("--config")
        .arg(&m.config)
        .args(["--mode", "quorum", "--data-dir"])
        .arg(tc.c.data_dir(Mode::Quorum, id))
        .args(extra)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    if out.status.success() {
        Ok(text)
    } else {
        Err(format!("{text}{}", String::from_utf8_lossy(&out.stderr)))
    }
}

/// Issue 31, "Recovery when a majority is gone", on real processes: five members, three of
/// them (the leader among them) killed for good; the two survivors cannot elect. Each is
/// inspected, the one with the most of the log made a one-member cluster at a new term
/// (`--force-new-cluster`), started, and grown back to five with `--join` on empty data dirs
/// (the other survivor too: its data dir holds votes of the old cluster). No term is led
/// twice, the new terms lie above every old one, and the recovered node's event log goes on
/// without a gap.
#[test]
fn a_majority_lost_for_good_is_recovered_from_the_best_survivor() {
    let rt = TestCluster::rt();
    let mut tc = TestCluster::configure(Mode::Quorum, 5, TEST_TIMING);
    for id in 1..=5 {
        tc.start_node(id);
    }
    let leader = rt.block_on(tc.c.wait_agreed(WAIT)).expect("five agree");
    let mut lost = vec![leader];
    lost.extend((1..=5).filter(|&i| i != leader).take(2));
    let survivors: Vec<NodeId> = (1..=5).filter(|i| !lost.contains(i)).collect();
    for &id in &lost {
        tc.kill(id);
    }
    let old_term = tc.events().iter().map(|e| e.view.term).max().unwrap();
    for &id in &survivors {
        tc.stop(id);
    }
    // A plain inspection of each survivor.
    let best = survivors
        .iter()
        .copied()
        .max_by_key(|&id| {
            let text = recover_cmd(&tc, id, &["--inspect-data-dir"]).expect("inspected");
            eprint!("{text}");
            // "member N: last log entry term T index I; ..."
            let num = |after: &str| -> u64 {
                let rest = text.split(after).nth(1).unwrap_or("0");
                rest.split(|c: char| !c.is_ascii_digit())
                    .next()
                    .unwrap_or("0")
                    .parse()
                    .unwrap_or(0)
            };
            (num("entry term "), num(" index "))
        })
        .unwrap();
    tc.start_node(best);
    // Refused while the node answers on its address (once it does: at most 20 s).
    let until = Instant::now() + WAIT;
    while rt.block_on(tc.c.status(best)).is_err() {
        assert!(Instant::now() < until, "node {best} does not answer");
        std::thread::sleep(Duration::from_millis(20));
    }
    let refused = recover_cmd(&tc, best, &["--force-new-cluster"]).expect_err("a running node");
    assert!(refused.contains("stop the node first"), "{refused}");
    tc.stop(best);
    let said = recover_cmd(&tc, best, &["--force-new-cluster"]).expect("recovered");
    eprint!("{said}");
    tc.start_node(best);
    assert!(
        rt.block_on(until_voters(&tc, best, &[best])),
        "node {best} leads a cluster of one"
    );
    let term = rt.block_on(tc.c.leader_info(best)).unwrap().term;
    assert!(
        term >= old_term + electd::quorum::RECOVERY_TERM_GAP,
        "term {term} after recovery, {old_term} before"
    );
    // A --term-above that leaves no term is refused, naming the flag.
    tc.stop(best);
    let max = u64::MAX.to_string();
    let e = recover_cmd(&tc, best, &["--force-new-cluster", "--term-above", &max])
        .expect_err("no term above u64::MAX");
    assert!(e.contains("--term-above"), "{e}");
    tc.start_node(best);
    assert!(rt.block_on(until_voters(&tc, best, &[best])));
    // Grown back: the other survivor and the lost ones on empty data dirs, joining through
    // the recovered node.
    let through = tc.c.member(best).unwrap().addr.clone();
    let mut voters = vec![best];
    for id in (1..=5).filter(|&i| i != best) {
        let _ = std::fs::remove_dir_all(tc.c.data_dir(Mode::Quorum, id));
        rewrite_config(
            &tc.c.member(id).unwrap().config.clone(),
            &[1, 2, 3, 4, 5],
            Some(&through),
        );
        tc.start_node(id);
        voters.push(id);
        voters.sort();
        assert!(
            rt.block_on(until_voters(&tc, best, &voters)),
            "node {id} joined the recovered cluster"
        );
    }
    let now = rt
        .block_on(tc.c.wait_agreed(WAIT))
        .expect("five agree again");
    let info = rt.block_on(tc.c.leader_info(now)).unwrap();
    assert!(info.term > old_term);
    // The recovered node's event log: one sequence, before and after.
    let seqs: Vec<u64> = tc
        .events()
        .iter()
        .filter(|e| e.node_id == best)
        .map(|e| e.seq)
        .collect();
    assert!(
        seqs.windows(2).all(|w| w[1] == w[0] + 1) && seqs.first() == Some(&1),
        "node {best}'s event log has a gap: {seqs:?}"
    );
    eprintln!(
        "recovered from node {best}: old terms up to {old_term}, the cluster of one at term \
         {term}, five members again at term {} (leader {now}); node {best}'s event log {} events",
        info.term,
        seqs.len()
    );
    tc.assert_safe();
}

/// docs/operations.md, "Backup": a copy of a stopped member's data dir, put back after its
/// disk was lost (before it ran again), is the member it was: its peers take it (the same
/// incarnation), it votes and follows, and the cluster goes on with no term led twice.
#[test]
fn a_data_dir_restored_from_a_copy_taken_while_stopped_rejoins() {
    let rt = TestCluster::rt();
    let mut tc = TestCluster::start(Mode::Quorum, 3);
    let leader = rt.block_on(tc.c.wait_agreed(WAIT)).expect("three agree");
    let member = (1..=3).find(|&i| i != leader).unwrap();
    let data = tc.c.data_dir(Mode::Quorum, member);
    tc.stop(member);
    let copy = tc.c.run.join("backup");
    let cp = |from: &Path, to: &Path| {
        let ok = std::process::Command::new("cp")
            .arg("-a")
            .arg(from)
            .arg(to)
            .status()
            .unwrap()
            .success();
        assert!(ok, "cp -a {} {}", from.display(), to.display());
    };
    cp(&data, &copy);
    std::fs::remove_dir_all(&data).unwrap();
    cp(&copy, &data);
    tc.start_node(member);
    // Taken back as itself: the other two are killed in turn, and it wins each election.
    assert_eq!(rt.block_on(tc.c.wait_agreed(WAIT)), Some(leader));
    tc.kill(leader);
    let next = rt
        .block_on(tc.c.wait_agreed(WAIT))
        .expect("a leader of the two left");
    let status = rt.block_on(tc.c.status(member)).unwrap();
    assert!(
        status.engine["identity"]["confirmed"].as_bool() == Some(true),
        "the restored data dir is not confirmed: {}",
        status.engine["identity"]
    );
    eprintln!("restored node {member}; after the leader's loss node {next} leads");
    tc.assert_safe();
}
