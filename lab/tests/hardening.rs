//! Hardening (docs/security.md, "Hardening") on real processes, in every mode: intruders and garbage are refused with the right
//! status, a JSON error body and a counted reason, slow clients are cut off, and none of it
//! disturbs the leader.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::TestCluster;
use electd::auth::{PeerAuth, HDR_EPOCH, HDR_TS};
use electd::config::Secret;
use electd::{HDR_CLUSTER, HDR_FROM};
use electd_client::Mode;
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(20);

/// Requests to one node of a running test cluster, with its secrets at hand.
struct Probe {
    client: reqwest::Client,
    base: String,
    addr: String,
    secret: String,
    token: String,
    /// The peer path of the mode (`/peer/raft/vote`, `/peer/msg`).
    path: &'static str,
    /// The member requests claim to come from, and another member besides it and the target.
    from: u64,
    other: u64,
    /// The target's epoch, which requests to it are signed for (src/auth.rs).
    epoch: u64,
}

impl Probe {
    /// A POST to a peer path of the node under test, as node `from`, with the given headers.
    async fn peer(
        &self,
        path: &str,
        from: &str,
        cluster: Option<&str>,
        extra: &[(&str, String)],
        body: Vec<u8>,
    ) -> (u16, Value) {
        let mut req = self
            .client
            .post(format!("{}{path}", self.base))
            .header("content-type", "application/json")
            .header(HDR_FROM, from);
        if let Some(c) = cluster {
            req = req.header(HDR_CLUSTER, c);
        }
        for (k, v) in extra {
            req = req.header(*k, v);
        }
        let res = req.body(body).send().await.expect("request");
        let status = res.status().as_u16();
        let body = res.json::<Value>().await.unwrap_or(Value::Null);
        (status, body)
    }

    fn signed_headers(
        &self,
        auth: &PeerAuth,
        from: u64,
        path: &str,
        body: &[u8],
    ) -> Vec<(&'static str, String)> {
        self.signed_at(auth, from, path, body, electd::auth::wall_ms())
    }

    /// The proof headers of a request signed for the target's epoch, stamped `ts_ms`.
    fn signed_at(
        &self,
        auth: &PeerAuth,
        from: u64,
        path: &str,
        body: &[u8],
        ts_ms: u64,
    ) -> Vec<(&'static str, String)> {
        let p = auth.sign(
            "electd-test",
            from,
            "",
            self.epoch,
            "POST",
            path,
            body,
            ts_ms,
        );
        p.headers().to_vec()
    }

    async fn metrics(&self) -> String {
        let res = self
            .client
            .get(format!("{}/metrics", self.base))
            .send()
            .await;
        res.expect("metrics").text().await.expect("metrics text")
    }
}

fn error_code(body: &Value) -> &str {
    body["error"]["code"]
        .as_str()
        .unwrap_or("<no JSON error body>")
}

/// Reads from `s` until the peer closes it or `limit` passes; returns what was read and
/// whether it was closed.
fn read_until_closed(s: &mut TcpStream, limit: Duration) -> (String, bool) {
    let deadline = Instant::now() + limit;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while Instant::now() < deadline {
        s.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        match s.read(&mut buf) {
            Ok(0) => return (String::from_utf8_lossy(&got).into(), true),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return (String::from_utf8_lossy(&got).into(), true),
        }
    }
    (String::from_utf8_lossy(&got).into(), false)
}

/// Sends `head` (request line and headers, without the blank line) and no body on a connection
/// of its own; returns what the node answered before closing (at most 10 s).
fn raw(addr: &str, head: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(b"\r\n").unwrap();
    read_until_closed(&mut s, Duration::from_secs(10)).0
}

fn hardening(mode: Mode) {
    let tc = TestCluster::start(mode, 3);
    let rt = TestCluster::rt();
    rt.block_on(async {
        let leader = tc.c.wait_agreed(WAIT).await.expect("an agreed leader");
        let before = tc.c.leader_info(leader).await.expect("leader info");
        // Probe a follower: the peer paths are the same on every node.
        let target = tc.c.ids().into_iter().find(|&i| i != leader).unwrap();
        // A mode that may lead twice under a partition says so (issue 31), at start and in
        // /v1/status.
        let status = tc.c.status(target).await.expect("status");
        assert_eq!(status.two_leaders_possible, !mode.leased(), "{mode}");
        let warned = tc
            .log_since(target, 0)
            .contains("two nodes may lead at once");
        assert_eq!(warned, !mode.leased(), "{mode}: the start warning");
        let from = if target == 1 { 2 } else { 1 };
        let read = |name: &str| {
            let text = std::fs::read_to_string(tc.c.run.join(name)).unwrap();
            text.trim().to_string()
        };
        let addr = tc.c.member(target).unwrap().addr.clone();
        // Every answer to a peer request names the node's epoch, a refusal too.
        let path = match mode {
            Mode::Quorum => "/peer/raft/vote",
            _ => "/peer/msg",
        };
        let client = reqwest::Client::new();
        let res = client
            .post(format!("http://{addr}{path}"))
            .header(HDR_CLUSTER, "electd-test")
            .header(HDR_FROM, from)
            .send()
            .await
            .expect("a peer request");
        let epoch = res
            .headers()
            .get(HDR_EPOCH)
            .and_then(|v| u64::from_str_radix(v.to_str().ok()?, 16).ok())
            .expect("an x-electd-epoch header (hex) on a peer answer");
        let p = Probe {
            client: electd_client::http_client()
                .timeout(Duration::from_secs(10))
                .build()
                .unwrap(),
            base: format!("http://{addr}"),
            addr,
            secret: read("cluster-secret"),
            token: read("admin-token"),
            path,
            from,
            other: tc
                .c
                .ids()
                .into_iter()
                .find(|&i| i != target && i != from)
                .unwrap(),
            epoch,
        };
        peers_must_prove_who_they_are(&p).await;
        bodies_above_the_limit_get_413(&p);
        the_admin_api_needs_its_token(&p).await;
        refusals_are_counted_by_reason(&p).await;
        slow_clients_are_cut_off(&p);
        // The secret is nowhere to be read.
        let status = p
            .client
            .get(format!("{}/v1/status", p.base))
            .send()
            .await
            .unwrap();
        let status = status.text().await.unwrap();
        assert!(!status.contains(&p.secret) && !status.contains(&p.token));
        for id in tc.c.ids() {
            let log = std::fs::read_to_string(tc.c.log_file(id)).unwrap_or_default();
            assert!(
                !log.contains(&p.secret) && !log.contains(&p.token),
                "node {id} logged a secret"
            );
        }
        // None of it disturbed the leader.
        let after =
            tc.c.wait_agreed(WAIT)
                .await
                .expect("still an agreed leader");
        let now = tc.c.leader_info(after).await.unwrap();
        assert_eq!(
            (after, now.term),
            (leader, before.term),
            "the leader changed"
        );
    });
}

/// Peer authentication: the cluster, the signature over sender, path and body, the epoch,
/// the sequence number (no replay) and the membership, each refused with its own reason; no wall
/// clock decides.
async fn peers_must_prove_who_they_are(p: &Probe) {
    let (path, from_id) = (p.path, p.from);
    let from = &from_id.to_string();
    let (s, b) = p.peer(path, from, None, &[], b"{}".to_vec()).await;
    assert_eq!((s, error_code(&b)), (401, "missing_cluster"), "{b}");
    let (s, b) = p
        .peer(path, from, Some("other-cluster"), &[], b"{}".to_vec())
        .await;
    assert_eq!((s, error_code(&b)), (401, "wrong_cluster"), "{b}");
    let (s, b) = p
        .peer(path, from, Some("electd-test"), &[], b"{}".to_vec())
        .await;
    assert_eq!((s, error_code(&b)), (401, "missing_auth"), "{b}");
    let wrong = PeerAuth::new(Secret::from("not the cluster secret"));
    let h = p.signed_headers(&wrong, from_id, path, b"{}");
    let (s, b) = p
        .peer(path, from, Some("electd-test"), &h, b"{}".to_vec())
        .await;
    assert_eq!((s, error_code(&b)), (401, "bad_signature"), "{b}");
    let right = PeerAuth::new(Secret::from(p.secret.clone()));
    // Signed for one body, sent with another.
    let h = p.signed_headers(&right, from_id, path, b"{}");
    let (s, b) = p
        .peer(path, from, Some("electd-test"), &h, b"{ }".to_vec())
        .await;
    assert_eq!((s, error_code(&b)), (401, "bad_signature"), "{b}");
    // Signed as one sender, sent as another member.
    let other = p.other.to_string();
    let (s, b) = p
        .peer(path, &other, Some("electd-test"), &h, b"{}".to_vec())
        .await;
    assert_eq!((s, error_code(&b)), (401, "bad_signature"), "{b}");
    // Signed for another epoch of the node (one from before it started): refused, and the
    // answer names the epoch to sign for.
    let stale = PeerAuth::new(Secret::from(p.secret.clone()));
    let q = stale.sign(
        "electd-test",
        from_id,
        "",
        p.epoch ^ 1,
        "POST",
        path,
        b"{}",
        0,
    );
    let (s, b) = p
        .peer(
            path,
            from,
            Some("electd-test"),
            &q.headers(),
            b"{}".to_vec(),
        )
        .await;
    assert_eq!((s, error_code(&b)), (401, "stale_epoch"), "{b}");
    // No clock decides: stamped an hour behind or a day ahead, a request for the node's epoch
    // passes authentication (and is refused as a malformed message), once.
    let day = 86_400_000;
    for ts in [
        electd::auth::wall_ms() - 3_600_000,
        electd::auth::wall_ms() + day,
    ] {
        let h = p.signed_at(&right, from_id, path, b"{}", ts);
        let (s, b) = p
            .peer(path, from, Some("electd-test"), &h, b"{}".to_vec())
            .await;
        assert_eq!(s, 400, "a signed request must pass authentication: {b}");
        let (s, b) = p
            .peer(path, from, Some("electd-test"), &h, b"{}".to_vec())
            .await;
        assert_eq!((s, error_code(&b)), (401, "replayed"), "{b}");
    }
    // Its timestamp changed after signing.
    let mut h = p.signed_headers(&right, from_id, path, b"{}");
    let ts = h.iter_mut().find(|(k, _)| *k == HDR_TS).unwrap();
    ts.1 = (electd::auth::wall_ms() + 1).to_string();
    let (s, b) = p
        .peer(path, from, Some("electd-test"), &h, b"{}".to_vec())
        .await;
    assert_eq!((s, error_code(&b)), (401, "bad_signature"), "{b}");
    // A sender outside the membership.
    let h = p.signed_headers(&right, 9, path, b"{}");
    let (s, b) = p
        .peer(path, "9", Some("electd-test"), &h, b"{}".to_vec())
        .await;
    assert_eq!((s, error_code(&b)), (403, "unknown_peer"), "{b}");
}

/// Too large a body (announced: 2 MiB), on a peer path (signed) and on the admin API; on
/// connections of their own, which the node closes after answering.
fn bodies_above_the_limit_get_413(p: &Probe) {
    let right = PeerAuth::new(Secret::from(p.secret.clone()));
    let big = vec![b' '; 2 << 20];
    let h = p.signed_headers(&right, p.from, p.path, &big);
    let mut head = format!(
        "POST {} HTTP/1.1\r\nHost: x\r\n{HDR_CLUSTER}: electd-test\r\n{HDR_FROM}: {}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n",
        p.path,
        p.from,
        big.len()
    );
    for (k, v) in &h {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    let text = raw(&p.addr, &head);
    assert!(
        text.starts_with("HTTP/1.1 413") && text.contains("body_too_large"),
        "{text}"
    );
    let head = format!(
        "PUT /v1/admin/faults HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n",
        p.token,
        big.len()
    );
    let text = raw(&p.addr, &head);
    assert!(
        text.starts_with("HTTP/1.1 413") && text.contains("body_too_large"),
        "{text}"
    );
}

/// Admin API: token needed; malformed JSON is a 400 with the JSON body. Its answers, refusals
/// included, answer no origin; the read API's answer any.
async fn the_admin_api_needs_its_token(p: &Probe) {
    let any_origin =
        |res: &reqwest::Response| res.headers().contains_key("access-control-allow-origin");
    // Without a token: (path, status, whether the answer names any origin). The router's own
    // answers under the admin prefix (405, 404) never reach the admin door.
    for (path, status, origin) in [
        ("/v1/leader", 200, true),
        ("/v1/admin/faults", 401, false),
        ("/v1/admin/resign", 405, false),
        ("/v1/admin/nothing-here", 404, false),
    ] {
        let res = p
            .client
            .get(format!("{}{path}", p.base))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status().as_u16(), status, "{path}");
        assert_eq!(any_origin(&res), origin, "{path}: answers any origin");
    }
    let admin = format!("{}/v1/admin/faults", p.base);
    let res = p
        .client
        .get(&admin)
        .bearer_auth("wrong-token-wrong-token")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 401);
    let res = p
        .client
        .put(&admin)
        .bearer_auth(&p.token)
        .header("content-type", "application/json")
        .body("{\"block_to\": [")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 400);
    let b: Value = res.json().await.unwrap();
    assert_eq!(error_code(&b), "malformed_json", "{b}");
    let res = p
        .client
        .get(&admin)
        .bearer_auth(&p.token)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 200);
    assert!(!any_origin(&res), "an admin answer answers no origin");
}

/// Every refused peer request is counted in `/metrics`, by reason.
async fn refusals_are_counted_by_reason(p: &Probe) {
    let m = p.metrics().await;
    let reasons = [
        "missing_cluster",
        "wrong_cluster",
        "missing_auth",
        "bad_signature",
        "stale_epoch",
        "replayed",
        "unknown_peer",
    ];
    for reason in reasons {
        assert!(
            m.lines()
                .any(|l| l.starts_with("electd_peer_requests_rejected")
                    && l.contains(&format!("reason=\"{reason}\""))),
            "no rejected count for {reason}:\n{m}"
        );
    }
}

/// Slow clients: headers never finished → closed; body never finished → 408 JSON.
fn slow_clients_are_cut_off(p: &Probe) {
    let mut slow = TcpStream::connect(&p.addr).unwrap();
    slow.write_all(b"GET /v1/leader HTTP/1.1\r\nHost: x\r\n")
        .unwrap();
    let (_, closed) = read_until_closed(
        &mut slow,
        electd::HEADER_READ_TIMEOUT + Duration::from_secs(5),
    );
    assert!(
        closed,
        "a client that never finishes its headers must be cut off"
    );
    let mut slow = TcpStream::connect(&p.addr).unwrap();
    let head = format!(
        "PUT /v1/admin/faults HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{{",
        p.token
    );
    slow.write_all(head.as_bytes()).unwrap();
    let (text, _) = read_until_closed(&mut slow, electd::REQUEST_TIMEOUT + Duration::from_secs(5));
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(text.contains("request_timeout"), "{text}");
}

#[test]
fn quorum_refuses_intruders_and_garbage_without_disturbance() {
    hardening(Mode::Quorum);
}

#[test]
fn bully_refuses_intruders_and_garbage_without_disturbance() {
    hardening(Mode::Bully);
}

#[test]
fn ring_refuses_intruders_and_garbage_without_disturbance() {
    hardening(Mode::Ring);
}

/// SIGTERM on the leader, twice: it records its step-down, exits within 2 s (the bench fails
/// the trial otherwise), and the others agree on a new leader; quorum mode stays safe.
fn graceful(mode: Mode) {
    let tc = TestCluster::start(mode, 5);
    let rt = TestCluster::rt();
    let h = rt
        .block_on(electd_lab::bench::handoff(&tc.c, 2))
        .unwrap_or_else(|e| {
            tc.dump_logs();
            panic!("handoff failed: {e}")
        });
    assert_eq!(h.handoff.len(), 2);
    assert!(
        h.stopped_claiming.iter().all(|s| s.is_some()),
        "the leader must record that it stopped claiming: {h:?}"
    );
    assert!(h.exited.iter().all(|&ms| ms < 2_000.0), "{h:?}");
    if mode == Mode::Quorum {
        tc.assert_safe();
    }
}

#[test]
fn quorum_leader_hands_off_on_sigterm() {
    graceful(Mode::Quorum);
}

#[test]
fn bully_leader_hands_off_on_sigterm() {
    graceful(Mode::Bully);
}

#[test]
fn ring_leader_hands_off_on_sigterm() {
    graceful(Mode::Ring);
}

/// A SIGHUP (a logrotate's, or one meant to reload TLS files on a node without TLS) does not
/// stop a node: the handler is installed first thing, with TLS or without. (Without TLS there
/// was none, and SIGHUP's default action ended the process.)
#[test]
fn a_sighup_does_not_stop_a_node_without_tls() {
    let tc = TestCluster::start(Mode::Quorum, 1);
    let rt = TestCluster::rt();
    rt.block_on(tc.c.wait_agreed(Duration::from_secs(20)))
        .expect("a leader");
    let before = tc.log_len(1);
    assert!(tc.c.signal(1, rustix::process::Signal::HUP), "SIGHUP sent");
    let until = Instant::now() + Duration::from_secs(10);
    while !tc.log_since(1, before).contains("SIGHUP") && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        tc.log_since(1, before)
            .contains("no TLS files to read again"),
        "the SIGHUP was logged: {}",
        tc.log_since(1, before)
    );
    assert!(tc.c.pid(1).is_some(), "node 1 still runs");
    assert_eq!(
        rt.block_on(tc.c.wait_agreed(Duration::from_secs(5))),
        Some(1)
    );
}

/// Issue 30: a flood of connections cannot take the descriptors the election needs. Every
/// node of three runs with 512 open files and `max_connections` 64, and gets 700 connections
/// from an address that is no member's, held open without a byte: beyond the cap they are
/// closed unread (counted), and the leader stays in place, its term unchanged, for as long as
/// the flood is held. Then, flooded again, the leader is killed: the others elect within a few
/// follower leases. Prints each node's resident memory before and under the flood, and the
/// failover.
#[test]
fn a_connection_flood_leaves_the_leader_in_place() {
    use rustix::process::{getrlimit, prlimit, setrlimit, Pid, Resource, Rlimit};
    // This process holds the flood: its own soft limit up to its hard one.
    let mine = getrlimit(Resource::Nofile);
    let _ = setrlimit(
        Resource::Nofile,
        Rlimit {
            current: mine.maximum,
            maximum: mine.maximum,
        },
    );
    let mut tc = TestCluster::configure(Mode::Quorum, 3, common::TEST_TIMING);
    tc.c.extra_args
        .extend(["--max-connections".to_string(), "64".to_string()]);
    for id in tc.c.ids() {
        tc.start_node(id);
    }
    let rt = TestCluster::rt();
    let leader = rt
        .block_on(tc.c.wait_agreed(Duration::from_secs(20)))
        .expect("a leader");
    let term = rt.block_on(tc.c.leader_info(leader)).unwrap().term;
    let rss = |id| {
        let pid = tc.c.pid(id).expect("running");
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let kb = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .map(|v| v.trim().trim_end_matches(" kB").trim().to_string())
            .unwrap_or_default();
        kb.parse::<u64>().unwrap_or(0)
    };
    let before: Vec<u64> = tc.c.ids().into_iter().map(rss).collect();
    for id in tc.c.ids() {
        let pid = Pid::from_raw(tc.c.pid(id).unwrap()).unwrap();
        let limit = Rlimit {
            current: Some(512),
            maximum: Some(512),
        };
        prlimit(Some(pid), Resource::Nofile, limit).expect("the node's open-files limit set");
    }
    // 700 connections to every node from 127.0.0.1, held open without a byte.
    let flood = |tc: &TestCluster| -> Vec<TcpStream> {
        let mut held = Vec::new();
        for id in tc.c.ids() {
            let addr: std::net::SocketAddr = tc.c.member(id).unwrap().addr.parse().unwrap();
            for _ in 0..700 {
                if let Ok(s) = TcpStream::connect_timeout(&addr, Duration::from_secs(1)) {
                    held.push(s);
                }
            }
        }
        held
    };
    let t0 = Instant::now();
    let held = flood(&tc);
    // Held 3 s past the last one opened (the header read timeout closes idle ones after 5 s).
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
    }
    let under: Vec<u64> = tc.c.ids().into_iter().map(rss).collect();
    let opened = held.len();
    drop(held);
    eprintln!(
        "flood: {opened} connections opened to 3 nodes over {:?}, the last held 3 s; resident \
         memory before {before:?} kB, under the flood {under:?} kB",
        t0.elapsed()
    );
    let after = rt
        .block_on(tc.c.wait_agreed(Duration::from_secs(10)))
        .expect("a leader after the flood");
    let info = rt.block_on(tc.c.leader_info(after)).unwrap();
    assert_eq!(
        (after, info.term),
        (leader, term),
        "the flood moved the leader or its term"
    );
    for id in tc.c.ids() {
        let metrics = rt
            .block_on(tc.c.client(id).unwrap().metrics_text())
            .unwrap();
        let refused: u64 = metrics
            .lines()
            .find_map(|l| l.strip_prefix("electd_connections_refused_total "))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        eprintln!("node {id}: {refused} connections refused");
        assert!(refused >= 600, "node {id} refused {refused} of 700");
    }
    // Failover under the flood: the leader killed while every node is flooded again; the
    // others elect on the connections they hold and the members' reserve.
    let held = flood(&tc);
    let killed_ns = electd::clock::mono_ns();
    tc.kill(leader);
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(held);
    let next = rt
        .block_on(tc.c.wait_agreed(Duration::from_secs(10)))
        .expect("a leader after the failover under the flood");
    assert_ne!(next, leader);
    let claimed_ns = tc
        .events()
        .iter()
        .filter(|e| e.node_id != leader && e.t_mono_ns > killed_ns)
        .find(|e| e.view.role == electd_client::Role::Leader)
        .map(|e| e.t_mono_ns)
        .expect("a new leader's event");
    let failover_ms = (claimed_ns - killed_ns) as f64 / 1e6;
    eprintln!(
        "failover under the flood: node {next} leads {failover_ms:.0} ms after the kill \
         (follower lease {} ms)",
        tc.timing.follower_lease_ms
    );
    // A bound against a cluster the flood stopped, not a time to meet: a host busy with the
    // flood's 2,100 connections runs the election late by however long it is starved (3 F here
    // was a time the test could cross; issue 48, item 10). The figure is printed above.
    assert!(
        failover_ms < 20.0 * tc.timing.follower_lease_ms as f64,
        "failover under the flood took {failover_ms:.0} ms"
    );
    tc.assert_safe();
}

/// Three quorum nodes; once a leader is agreed, the forger (src/faults.rs) sits on both of the
/// leader's links: its requests are withheld from its peers and answered by the forger (forged
/// grants and acknowledgements, replays of genuine answers), its peers' requests to it are
/// rewritten. Gives back, for the 4 s after: how long two nodes claimed at once (C2), and how
/// long the cut-off node claimed later than a claim lease after the last genuine round. The
/// forger lets the first request of each path through to record its answer, so one more
/// genuine acknowledgement may come within a beat (and its round trip) after it came.
fn forged_peers(flaw: Option<&str>) -> (u64, u64) {
    use electd_lab::chaos::checkers::{claim_intervals, split_brain};
    let mut tc = TestCluster::configure(Mode::Quorum, 3, common::TEST_TIMING);
    if let Some(flaw) = flaw {
        tc.c.bin = tc.c.bin.with_file_name("electd-flawed");
        assert!(tc.c.bin.is_file(), "no {}", tc.c.bin.display());
        tc.c.extra_args
            .extend(["--lab-flaw".to_string(), flaw.to_string()]);
    }
    for id in tc.c.ids() {
        tc.start_node(id);
    }
    let rt = TestCluster::rt();
    let victim = rt
        .block_on(tc.c.wait_agreed(Duration::from_secs(20)))
        .expect("a leader");
    let peers: std::collections::BTreeSet<u64> =
        tc.c.ids().into_iter().filter(|&i| i != victim).collect();
    let t0 = electd::clock::mono_ns();
    rt.block_on(async {
        let mut set = tc.c.client(victim).unwrap().faults().await.unwrap();
        set.forge_to = peers.clone();
        set.forger = None;
        tc.c.set_faults(victim, &set).await.unwrap();
    });
    // Until the others agree on another leader (at most 10 s), then 4 s more.
    let until = Instant::now() + Duration::from_secs(10);
    while Instant::now() < until {
        let others: Vec<Option<u64>> = peers
            .iter()
            .map(|&p| {
                rt.block_on(tc.c.leader_info(p))
                    .ok()
                    .and_then(|i| i.leader.map(|l| l.id))
            })
            .collect();
        if others.iter().all(|l| l.is_some_and(|l| l != victim)) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_secs(4));
    let forger = rt
        .block_on(tc.c.status(victim))
        .ok()
        .and_then(|s| s.faults.forger)
        .unwrap_or_default();
    eprintln!(
        "forger on node {victim}'s links: {} forged, {} replayed, {} withheld, {} rewritten",
        forger.forged, forger.replayed, forger.withheld, forger.rewritten
    );
    assert!(
        forger.forged > 0 && forger.replayed > 0,
        "the forger answered nothing: {forger:?}"
    );
    let log = tc.run_log(None, None);
    let genuine = ms(tc.timing.effective_lease_ms() + 2 * tc.timing.heartbeat_ms);
    let lease_ns = u64::try_from(genuine.as_nanos()).unwrap();
    let late: u64 = claim_intervals(&log)
        .iter()
        .filter(|c| c.node == victim)
        .map(|c| c.to_ns.saturating_sub(c.from_ns.max(t0 + lease_ns)))
        .sum();
    let split = split_brain(&log).split_brain_ns;
    eprintln!(
        "two claimants for {:.1} ms; node {victim} claimed {:.1} ms past the last genuine round",
        split as f64 / 1e6,
        late as f64 / 1e6
    );
    (split, late)
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Issue 30, done when: a real node whose two peers are forging proxies never claims (past
/// the claim it held when the forger came, which ends within a claim lease), and no two
/// nodes claim at once.
#[test]
fn a_node_whose_peers_are_forging_proxies_never_claims() {
    let (split_ns, late_ns) = forged_peers(None);
    assert_eq!(
        (split_ns, late_ns),
        (0, 0),
        "two claimants, or a claim on forged answers"
    );
}

/// The same with the lab's flaw `accept-unsigned-answers` (answers taken as they come, as
/// before bedd083): the forged acknowledgements keep the cut-off node claiming, so the test
/// above can fail.
#[test]
fn a_node_that_takes_unsigned_answers_claims_on_forged_ones() {
    let (split_ns, late_ns) = forged_peers(Some("accept-unsigned-answers"));
    assert!(
        split_ns > 0 && late_ns > 0,
        "the flawed node did not claim on forged answers: {split_ns} ns two claimants, \
         {late_ns} ns claimed late"
    );
}

/// Issue 48, item 5: the cluster secret changed without stopping the cluster, as
/// docs/operations.md, "Changing the cluster secret", says: three rolling restarts of three
/// quorum nodes (the new secret taken besides the old; signed with, the old taken besides; the
/// old dropped). After every restart all three nodes agree on a leader (so a node in one phase
/// talks both ways with nodes in the one before), and a request signed with the old secret alone
/// is refused at the end. Quorum mode stays safe throughout.
#[test]
fn the_cluster_secret_changes_node_by_node_with_a_leader_throughout() {
    let mut tc = TestCluster::start(Mode::Quorum, 3);
    let rt = TestCluster::rt();
    let secret_file = tc.c.run.join("cluster-secret");
    let old = std::fs::read_to_string(&secret_file)
        .unwrap()
        .trim()
        .to_string();
    let new = "a-new-cluster-secret-0123456789".to_string();
    let base = tc.c.extra_args.clone();
    rt.block_on(tc.c.wait_agreed(WAIT))
        .expect("a leader at start");
    let phases: [(&str, &str, Option<&str>); 3] = [
        ("the new secret taken besides", &old, Some(&new)),
        ("the new secret signed with", &new, Some(&old)),
        ("the old secret dropped", &new, None),
    ];
    for (what, signs, takes) in phases {
        std::fs::write(&secret_file, signs).unwrap();
        tc.c.extra_args = base.clone();
        if let Some(t) = takes {
            tc.c.extra_args
                .extend(["--cluster-secret-accepted".to_string(), t.to_string()]);
        }
        for id in tc.c.ids() {
            let before = tc.c.pid(id);
            tc.stop(id);
            tc.start_node(id);
            assert_ne!(tc.c.pid(id), before, "node {id} was not restarted");
            // All three up, the restarted one among them, naming one leader that claims.
            let agreed = rt.block_on(tc.c.wait_for(WAIT, |s| {
                let named: std::collections::BTreeSet<Option<u64>> = s
                    .values()
                    .map(|o| match o {
                        electd_lab::cluster::Observed::Up(i) => i.leader.as_ref().map(|l| l.id),
                        _ => None,
                    })
                    .collect();
                named.len() == 1
                    && named.iter().all(Option::is_some)
                    && electd_lab::cluster::claimants(s).len() == 1
            }));
            let states = rt.block_on(tc.c.states());
            assert!(
                agreed,
                "{what}: the three nodes do not agree on a leader after node {id} restarted: {}",
                common::describe(&states)
            );
            eprintln!(
                "{what}: node {id} restarted (pid {before:?} -> {:?}), node {} leads",
                tc.c.pid(id),
                electd_lab::cluster::claimants(&states)[0]
            );
        }
    }
    // No request or answer was refused for its MAC along the way.
    for id in tc.c.ids() {
        let status = rt.block_on(tc.c.status(id)).unwrap();
        let refused = &status.counters.rejected_peer_requests;
        for reason in ["bad_signature", "answer_bad_signature"] {
            assert_eq!(
                refused.get(reason).copied().unwrap_or(0),
                0,
                "node {id} refused {reason} during the roll: {refused:?}"
            );
        }
    }
    // The old secret alone no longer passes.
    let target = tc.c.ids()[0];
    let addr = tc.c.member(target).unwrap().addr.clone();
    let path = "/peer/raft/vote";
    let (status, body) = rt.block_on(async {
        let client = reqwest::Client::new();
        let first = client
            .post(format!("http://{addr}{path}"))
            .header(HDR_CLUSTER, "electd-test")
            .header(HDR_FROM, 2)
            .send()
            .await
            .unwrap();
        let epoch = first
            .headers()
            .get(HDR_EPOCH)
            .and_then(|v| u64::from_str_radix(v.to_str().ok()?, 16).ok())
            .expect("an epoch");
        let auth = PeerAuth::new(Secret::from(old.as_str()));
        let p = auth.sign("electd-test", 2, "", epoch, "POST", path, b"{}", 1);
        let mut req = client
            .post(format!("http://{addr}{path}"))
            .header(HDR_CLUSTER, "electd-test")
            .header(HDR_FROM, 2)
            .body("{}");
        for (k, v) in p.headers() {
            req = req.header(k, v);
        }
        let res = req.send().await.unwrap();
        let status = res.status().as_u16();
        (status, res.json::<Value>().await.unwrap_or(Value::Null))
    });
    assert_eq!(status, 401, "the old secret alone is refused: {body}");
    assert_eq!(error_code(&body), "bad_signature");
    tc.assert_safe();
}
