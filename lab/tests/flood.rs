//! Memory before authentication (issue 48, item 3), on real processes: three floods that cost
//! a node memory before it knows who is asking, each measured as the node's peak resident memory
//! above its idle level (`VmHWM` after `VmRSS` before, the peak reset between floods), with the
//! goal that each stays under 64 MiB and the cluster keeps its leader:
//! 1. a holder of the cluster secret signing requests from ever new sender ids (a replay window
//!    of 8 KiB was kept for each before the stranger cap refused it);
//! 2. connections from a host that is no member's, each announcing a peer body of 1 MiB and
//!    sending all of it but its last byte (bodies were read whole before their MAC was checked,
//!    from headers anyone can write);
//! 3. a peer that answers every request with a body of 64 MiB (answers were read whole before
//!    their MAC was checked).
//!
//! The cluster runs at the `shared` timings (follower lease 1 s): "keeps its leader" (the same
//! leader in the same term after the floods) is judged against a second's starvation, not
//! against the 300 ms of the other tests, which a CI host under a flood of 10,000 signed
//! requests crossed once (the term went from 2 to 4, the leader the same; issue 48, item 10).

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::TestCluster;
use electd::auth::{PeerAuth, HDR_ADDR, HDR_EPOCH};
use electd::config::{Secret, TimingProfile};
use electd::{HDR_CLUSTER, HDR_FROM};
use electd_client::{Mode, NodeId};

const WAIT: Duration = Duration::from_secs(20);
/// The goal: a flood costs a node at most this much above its idle memory.
const GOAL_KB: u64 = 64 << 10;

/// A field of `/proc/PID/status` in kB.
fn status_kb(pid: i32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Node `id`'s resident memory now, its peak reset to now (`clear_refs` 5): what a flood
/// after it costs is [`peak_above`].
fn idle_kb(tc: &TestCluster, id: NodeId) -> u64 {
    let pid = tc.c.pid(id).expect("running");
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").expect("the peak reset");
    status_kb(pid, "VmRSS:")
}

/// How far node `id`'s peak resident memory went above `idle` kB.
fn peak_above(tc: &TestCluster, id: NodeId, idle: u64) -> u64 {
    let pid = tc.c.pid(id).expect("running");
    status_kb(pid, "VmHWM:").saturating_sub(idle)
}

/// The epoch of node `addr` (named on every answer to a peer request, a refusal too).
fn epoch_of(addr: &str, from: NodeId) -> u64 {
    let mut s = TcpStream::connect(addr).expect("connect");
    write!(
        s,
        "POST /peer/raft/vote HTTP/1.1\r\nhost: {addr}\r\n{HDR_CLUSTER}: electd-test\r\n\
         {HDR_FROM}: {from}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    answer
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{HDR_EPOCH}: ")))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .expect("an epoch on the answer")
}

/// Flood 1: `n` requests signed with the cluster secret, each from a new sender id, 16 at a
/// time; answers how many were answered with each status.
fn senders_flood(tc: &TestCluster, target: NodeId, n: u64) -> std::collections::BTreeMap<u16, u64> {
    let addr = tc.c.member(target).unwrap().addr.clone();
    let secret = std::fs::read_to_string(tc.c.run.join("cluster-secret")).unwrap();
    let auth = Arc::new(PeerAuth::new(Secret::from(secret.trim())));
    let epoch = epoch_of(&addr, if target == 1 { 2 } else { 1 });
    let rt = TestCluster::rt();
    rt.block_on(async {
        let client = reqwest::Client::new();
        let mut statuses = std::collections::BTreeMap::new();
        let path = "/peer/raft/vote";
        for batch in 0..n.div_ceil(16) {
            let mut calls = Vec::new();
            for k in 0..16 {
                let from = 1_000 + batch * 16 + k;
                let sender = "127.0.0.1:9";
                let p = auth.sign(
                    "electd-test",
                    from,
                    sender,
                    epoch,
                    "POST",
                    path,
                    b"{}",
                    electd::auth::wall_ms(),
                );
                let mut req = client
                    .post(format!("http://{addr}{path}"))
                    .header(HDR_CLUSTER, "electd-test")
                    .header(HDR_FROM, from)
                    .header(HDR_ADDR, sender)
                    .header("content-type", "application/json")
                    .body("{}");
                for (k, v) in p.headers() {
                    req = req.header(k, v);
                }
                calls.push(req.send());
            }
            for res in futures_util::future::join_all(calls).await {
                let status = res.map_or(0, |r| r.status().as_u16());
                *statuses.entry(status).or_default() += 1;
            }
        }
        statuses
    })
}

/// Flood 2: `n` connections from 127.0.0.1 (no member's address) to node `target`'s snapshot
/// path as member `from`, each announcing 1 MiB and sending all but its last byte, held `hold`;
/// answers how many sent their whole part.
fn bodies_flood(tc: &TestCluster, target: NodeId, from: NodeId, n: usize, hold: Duration) -> usize {
    let addr = tc.c.member(target).unwrap().addr.clone();
    let sent = Arc::new(AtomicU64::new(0));
    let threads: Vec<_> = (0..n)
        .map(|_| {
            let (addr, sent) = (addr.clone(), sent.clone());
            std::thread::spawn(move || {
                let Ok(mut s) = TcpStream::connect(&addr) else {
                    return;
                };
                let _ = s.set_write_timeout(Some(hold));
                let head = format!(
                    "POST /peer/raft/snapshot HTTP/1.1\r\nhost: {addr}\r\n{HDR_CLUSTER}: \
                     electd-test\r\n{HDR_FROM}: {from}\r\ncontent-length: {}\r\n\r\n",
                    1 << 20
                );
                if s.write_all(head.as_bytes()).is_err() {
                    return;
                }
                let chunk = vec![b'x'; 64 << 10];
                let mut left = (1 << 20) - 1;
                while left > 0 {
                    let k = left.min(chunk.len());
                    if s.write_all(&chunk[..k]).is_err() {
                        return;
                    }
                    left -= k;
                }
                sent.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(hold);
            })
        })
        .collect();
    for t in threads {
        let _ = t.join();
    }
    sent.load(Ordering::Relaxed) as usize
}

/// Flood 3: serves node 3's address as a peer that answers every request with a chunked body of
/// 64 MiB, until `stop`; counts the answers begun.
fn huge_answers(
    addr: &str,
    stop: Arc<AtomicBool>,
    begun: Arc<AtomicU64>,
) -> std::thread::JoinHandle<()> {
    let l = TcpListener::bind(addr).expect("node 3's address");
    l.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            let Ok((mut s, _)) = l.accept() else {
                std::thread::sleep(Duration::from_millis(5));
                continue;
            };
            let (stop, begun) = (stop.clone(), begun.clone());
            std::thread::spawn(move || {
                let _ = s.set_nonblocking(false);
                let _ = s.set_write_timeout(Some(Duration::from_secs(2)));
                let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
                let mut buf = [0u8; 4096];
                let mut head = Vec::new();
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match s.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(k) => head.extend_from_slice(&buf[..k]),
                    }
                }
                begun.fetch_add(1, Ordering::Relaxed);
                let chunk = vec![b'0'; 64 << 10];
                let mut out = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n".to_vec();
                for _ in 0..1024 {
                    if stop.load(Ordering::Relaxed) {
                        return;
                    }
                    out.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
                    out.extend_from_slice(&chunk);
                    out.extend_from_slice(b"\r\n");
                    if s.write_all(&out).is_err() {
                        return;
                    }
                    out.clear();
                }
                let _ = s.write_all(b"0\r\n\r\n");
            });
        }
    })
}

#[test]
fn floods_before_authentication_stay_bounded_and_the_leader_stays() {
    let mut tc = TestCluster::start_with(Mode::Quorum, 3, TimingProfile::Shared.timing());
    let rt = TestCluster::rt();
    let leader = rt
        .block_on(tc.c.wait_agreed(WAIT))
        .expect("an agreed leader");
    let term = rt.block_on(tc.c.leader_info(leader)).unwrap().term;
    let member = tc.c.ids().into_iter().find(|&i| i != leader).unwrap();
    // The promises judged are those of the nodes flood 3 does not play (a client asking the
    // played member's address would read the player's 64 MiB answers).
    let others: Vec<NodeId> = tc.c.ids().into_iter().filter(|&i| i != member).collect();
    tc.poll_on(&others);
    // Floods 1 and 2 on the leader, each from its idle level (flood 1 first: a heap that an
    // earlier flood grew would hide a later one's growth from the peak).
    let idle = idle_kb(&tc, leader);
    let t0 = Instant::now();
    let statuses = senders_flood(&tc, leader, 10_000);
    let senders = peak_above(&tc, leader, idle);
    eprintln!(
        "flood 1: 10,000 signed requests from new sender ids in {:?}, answered {statuses:?}: \
         node {leader}'s peak resident memory rose {senders} kB above idle ({idle} kB)",
        t0.elapsed()
    );
    assert!(
        statuses.get(&403).copied().unwrap_or(0) >= 9_900,
        "the senders past the stranger cap are refused: {statuses:?}"
    );
    assert!(
        senders < GOAL_KB,
        "{senders} kB above idle under new senders"
    );

    let idle = idle_kb(&tc, leader);
    let t0 = Instant::now();
    let whole = bodies_flood(&tc, leader, member, 300, Duration::from_secs(2));
    let bodies = peak_above(&tc, leader, idle);
    eprintln!(
        "flood 2: 300 connections announcing 1 MiB bodies ({whole} sent all but the last byte) \
         in {:?}: node {leader}'s peak resident memory rose {bodies} kB above idle ({idle} kB)",
        t0.elapsed()
    );
    assert!(
        bodies < GOAL_KB,
        "{bodies} kB above idle under unauthenticated bodies"
    );

    // Flood 3: a follower stopped and played by a peer whose every answer is 64 MiB; the other
    // two (a majority of 3, the leader among them) keep their leader and send it heartbeats.
    let played = member;
    tc.stop(played);
    let stop = Arc::new(AtomicBool::new(false));
    let begun = Arc::new(AtomicU64::new(0));
    let idle: Vec<u64> = others.iter().map(|&id| idle_kb(&tc, id)).collect();
    let server = huge_answers(
        &tc.c.member(played).unwrap().addr.clone(),
        stop.clone(),
        begun.clone(),
    );
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
    }
    let states = rt.block_on(tc.c.states());
    let leads = electd_lab::cluster::claimants(&states);
    stop.store(true, Ordering::Relaxed);
    let _ = server.join();
    assert_eq!(
        leads.len(),
        1,
        "the majority keeps a leader beside a peer whose answers are huge"
    );
    let answers: Vec<u64> = others
        .iter()
        .zip(&idle)
        .map(|(&id, &i)| peak_above(&tc, id, i))
        .collect();
    eprintln!(
        "flood 3: {} answers of 64 MiB begun to nodes {others:?} over 3 s: their peak resident \
         memory rose {} kB and {} kB above idle ({idle:?} kB)",
        begun.load(Ordering::Relaxed),
        answers[0],
        answers[1]
    );
    assert!(begun.load(Ordering::Relaxed) > 0, "no answer was asked for");
    for (id, kb) in others.iter().zip(&answers) {
        assert!(
            *kb < GOAL_KB,
            "node {id}: {kb} kB above idle under huge answers"
        );
    }
    tc.start_node(played);
    let after = rt
        .block_on(tc.c.wait_agreed(WAIT))
        .expect("a leader after the floods");
    let now = rt.block_on(tc.c.leader_info(after)).unwrap().term;
    assert_eq!(
        (after, now),
        (leader, term),
        "the floods moved the leader or its term"
    );
    tc.assert_safe();
}
