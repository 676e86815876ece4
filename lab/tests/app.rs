//! What an application uses, on real processes: the watch stream (`GET /v1/watch`), leader-only
//! readiness (`GET /v1/claim`), the watcher bound, and the `electd` client commands' exit codes.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::TestCluster;
use electd::clock::mono_ns;
use electd_client::Mode;
use electd_client::{Client, Event, NodeId, Watch, Watched};
use electd_lab::cluster::agreed;

const WAIT: Duration = Duration::from_secs(15);

/// Reads events from `w` until `done` holds for one (at most [`WAIT`]); returns them all.
async fn read_until(w: &mut Watch, done: impl Fn(&Watched) -> bool) -> Vec<(Watched, u64)> {
    let until = Instant::now() + WAIT;
    let mut seen = Vec::new();
    while Instant::now() < until {
        let left = until.saturating_duration_since(Instant::now());
        let Ok(next) = tokio::time::timeout(left, w.next()).await else {
            break;
        };
        let ev = next.expect("the stream reads").expect("the stream goes on");
        let stop = done(&ev);
        seen.push((ev, mono_ns()));
        if stop {
            return seen;
        }
    }
    panic!(
        "no awaited event within {WAIT:?}; seen: {:?}",
        seen.iter().map(|(w, _)| w).collect::<Vec<_>>()
    );
}

/// Until the node behind `client` answers `/v1/health`, at most [`WAIT`].
async fn until_it_answers(client: &Client) {
    let until = Instant::now() + WAIT;
    while let Err(e) = client.health().await {
        assert!(Instant::now() < until, "no answer within {WAIT:?}: {e}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The node's own events with `seq` in `from..=to`, from its event log.
async fn logged(c: &Client, from: u64, to: u64) -> Vec<Event> {
    let page = c.events(from, 1000).await.expect("events");
    page.events.into_iter().filter(|e| e.seq <= to).collect()
}

/// The watched events are the node's event log, id for id and view for view, with no gap.
async fn assert_is_the_log(c: &Client, seen: &[(Watched, u64)]) {
    let ids: Vec<u64> = seen.iter().map(|(w, _)| w.id).collect();
    for pair in ids.windows(2) {
        assert_eq!(pair[1], pair[0] + 1, "ids not consecutive: {ids:?}");
    }
    let log = logged(c, ids[0], *ids.last().unwrap()).await;
    let views: Vec<_> = seen.iter().map(|(w, _)| w.info.view()).collect();
    let log_views: Vec<_> = log.iter().map(|e| e.view).collect();
    assert_eq!(views, log_views, "the stream differs from the event log");
}

/// Node event (stamped on CLOCK_MONOTONIC) to the line the client read, in ms.
async fn latencies(c: &Client, seen: &[(Watched, u64)]) -> Vec<f64> {
    let first = seen[0].0.id;
    let log = logged(c, first, seen.last().unwrap().0.id).await;
    seen.iter()
        .zip(log)
        .map(|((_, got), e)| got.saturating_sub(e.t_mono_ns) as f64 / 1e6)
        .collect()
}

/// A kill of the leader, seen on a follower's watch: the leader, then no leader, then a new
/// one, with consecutive ids that are the node's event log; a stream that reconnects with
/// `Last-Event-ID` gets what happened while it was away, without a gap.
#[test]
fn the_watch_shows_a_kill_then_no_leader_then_a_new_leader_and_resumes_without_gaps() {
    let rt = TestCluster::rt();
    let mut tc = TestCluster::start(Mode::Quorum, 5);
    let l1 = rt.block_on(tc.c.wait_agreed(WAIT)).expect("a leader");
    let f = tc.c.ids().into_iter().find(|&i| i != l1).unwrap();
    let client = Client::new(tc.c.member(f).unwrap().addr.clone(), Duration::from_secs(2));
    rt.block_on(async {
        // Live: the current view first, then every change.
        let mut w = client.watch(None).await.expect("a watch stream");
        let first = w.next().await.unwrap().unwrap();
        assert_eq!(first.info.view().leader, Some(l1), "{first:?}");
        tc.kill(l1);
        let seen = read_until(&mut w, |e| {
            e.info.leader.as_ref().is_some_and(|l| l.id != l1)
        })
        .await;
        let views: Vec<Option<NodeId>> = seen.iter().map(|(w, _)| w.info.view().leader).collect();
        assert!(
            views.contains(&None),
            "no 'no leader' between the two: {views:?}"
        );
        assert_eq!(
            seen[0].0.id,
            first.id + 1,
            "the first change follows the current view"
        );
        assert_is_the_log(&client, &seen).await;
        let lat = latencies(&client, &seen).await;
        eprintln!("watch latency (node event -> client), ms: {lat:.2?}");
        let l2 = seen.last().unwrap().0.info.leader.as_ref().unwrap().id;

        // Away: the stream is dropped, the new leader hands over, the node moves on.
        let last = w.last_id().unwrap();
        drop(w);
        tc.c.client(l2)
            .unwrap()
            .resign(None)
            .await
            .expect("the new leader resigns");
        let until = Instant::now() + WAIT;
        loop {
            let now = client
                .leader()
                .await
                .ok()
                .and_then(|i| i.leader.map(|l| l.id));
            if now.is_some_and(|l| l != l2) {
                break;
            }
            assert!(Instant::now() < until, "no third leader within {WAIT:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // Back: resumes right after the last event read, with what it missed.
        let mut w = client.watch(Some(last)).await.expect("a resumed stream");
        let missed = read_until(&mut w, |e| {
            e.info.leader.as_ref().is_some_and(|l| l.id != l2)
        })
        .await;
        assert_eq!(missed[0].0.id, last + 1, "resumed with a gap");
        assert_is_the_log(&client, &missed).await;
    });
    tc.assert_safe();
}

/// `GET /v1/claim`: 200 on the one node that holds the claim, 503 on the others, the body of
/// `/v1/leader` on every node.
#[test]
fn claim_answers_200_on_exactly_the_leader_and_503_elsewhere() {
    let rt = TestCluster::rt();
    let tc = TestCluster::start(Mode::Quorum, 5);
    let leader = rt.block_on(tc.c.wait_agreed(WAIT)).expect("a leader");
    let until = Instant::now() + WAIT;
    loop {
        let answers: Vec<(NodeId, bool)> = rt.block_on(async {
            let mut out = Vec::new();
            for id in tc.c.ids() {
                let (claims, info) = tc.c.client(id).unwrap().claim().await.expect("an answer");
                assert_eq!(info.node_id, id);
                assert_eq!(claims, info.view().claims(), "status and body disagree");
                out.push((id, claims));
            }
            out
        });
        let claimants: Vec<NodeId> = answers.iter().filter(|a| a.1).map(|a| a.0).collect();
        if claimants == [leader] {
            break;
        }
        assert!(claimants.len() <= 1, "two claim at once: {answers:?}");
        assert!(
            Instant::now() < until,
            "not one 200 and four 503s: {answers:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A client of the node at `addr` whose connections come from `127.0.0.K`: another client,
/// to the node's per-client watcher cap.
fn client_from(k: u8, addr: &str) -> Client {
    let http = electd_client::http_client()
        .local_address(std::net::IpAddr::from([127, 0, 0, k]))
        .connect_timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    Client::with_http(http, addr).timeout(Duration::from_secs(2))
}

/// At most `max_watchers` streams, and at most `max_watchers_per_client` of one client (its
/// source address); one more gets 429 with the JSON error, counted in /metrics; a freed slot
/// can be taken again. Issue 30: the slots were first come first served, so one client
/// could take them all; now a client past its share is refused while another gets one.
#[test]
fn watchers_beyond_the_bound_get_429_and_are_counted() {
    let rt = TestCluster::rt();
    let tc = TestCluster::start(Mode::Bully, 1);
    let addr = tc.c.member(1).unwrap().addr.clone();
    let client = client_from(1, &addr);
    rt.block_on(async {
        until_it_answers(&client).await;
        let max = electd::config::DEFAULT_MAX_WATCHERS;
        let share = electd::config::DEFAULT_MAX_WATCHERS_PER_CLIENT;
        let mut open = Vec::new();
        for _ in 0..share {
            open.push(client.watch(None).await.expect("a stream within the share"));
        }
        let err = client
            .watch(None)
            .await
            .err()
            .expect("one more of one client");
        assert_eq!(
            (err.status(), err.code()),
            (Some(429), Some("too_many_watchers")),
            "{err}"
        );
        // The others' shares, from other addresses, up to the node's bound.
        for i in share..max {
            let other = client_from(2 + (i / share) as u8, &addr);
            open.push(other.watch(None).await.expect("another client's stream"));
        }
        let err = client_from(200, &addr)
            .watch(None)
            .await
            .err()
            .expect("one more is refused");
        assert_eq!(err.status(), Some(429), "{err}");
        assert_eq!(err.code(), Some("too_many_watchers"), "{err}");
        let metrics = client.metrics_text().await.unwrap();
        assert!(
            metrics.contains(&format!("electd_watchers {max}")),
            "{metrics}"
        );
        assert!(
            metrics.contains("electd_watchers_refused_total 2"),
            "{metrics}"
        );
        // A slot freed by the first client is its own again.
        open.remove(0);
        // The slot is freed when the server notices the stream is gone: bounded retry.
        let until = Instant::now() + WAIT;
        loop {
            match client.watch(None).await {
                Ok(_) => break,
                Err(e) if e.status() == Some(429) && Instant::now() < until => {
                    tokio::time::sleep(Duration::from_millis(50)).await
                }
                Err(e) => panic!("a freed slot is not given again: {e}"),
            }
        }
    });
}

/// Issue 52, item 3: applications on a node's own host are each their own client. 60 watch
/// streams opened to a follower from the address the follower listens on (as 60 local workers
/// would) all get a stream, and all hear the failover when the leader is killed; before,
/// `max_watchers_per_client` (16) counted them as one client, and 44 got 429. A remote client
/// (another address) still gets at most its share.
#[test]
fn sixty_local_streams_all_hear_a_failover() {
    let rt = TestCluster::rt();
    let mut tc = TestCluster::start(Mode::Quorum, 3);
    let leader = rt.block_on(tc.c.wait_agreed(WAIT)).expect("a leader");
    let follower = tc.c.ids().into_iter().find(|&i| i != leader).unwrap();
    let addr = tc.c.member(follower).unwrap().addr.clone();
    let own_ip: std::net::IpAddr = addr.parse::<std::net::SocketAddr>().unwrap().ip();
    let local = Client::with_http(
        electd_client::http_client()
            .local_address(own_ip)
            .connect_timeout(Duration::from_secs(2))
            .build()
            .unwrap(),
        &addr,
    )
    .timeout(Duration::from_secs(2));
    let mut streams = rt.block_on(async {
        let mut open = Vec::new();
        for i in 0..60 {
            let w = local.watch(None).await;
            open.push(w.unwrap_or_else(|e| panic!("local stream {i}: {e}")));
        }
        open
    });
    // A remote client's share is still its share.
    let remote = client_from(7, &addr);
    rt.block_on(async {
        let share = electd::config::DEFAULT_MAX_WATCHERS_PER_CLIENT;
        let mut held = Vec::new();
        for _ in 0..share {
            held.push(remote.watch(None).await);
        }
        let refused = held.iter().filter(|w| w.is_err()).count();
        // 60 local and the node's bound of 64: the remote client gets what is left, 4.
        assert_eq!(refused, share - 4, "the node's bound still holds");
    });
    tc.kill(leader);
    let heard = rt.block_on(async {
        let mut heard = 0;
        for w in streams.iter_mut() {
            let deadline = tokio::time::Instant::now() + WAIT;
            loop {
                match tokio::time::timeout_at(deadline, w.next()).await {
                    Ok(Ok(Some(ev))) if ev.info.leader.as_ref().is_some_and(|l| l.id != leader) => {
                        heard += 1;
                        break;
                    }
                    Ok(Ok(Some(_))) => continue,
                    _ => break,
                }
            }
        }
        heard
    });
    assert_eq!(heard, 60, "local streams that heard the new leader");
}

fn electd(args: &[&str]) -> (i32, String) {
    let out = Command::new(electd_lab::bin::electd_bin().unwrap())
        .args(args)
        .env_remove("ELECTD_NODE")
        .env_remove("ELECTD_ADMIN_TOKEN")
        .stdin(Stdio::null())
        .output()
        .expect("electd runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// `electd leader|status|resign|watch`: exit 0 for yes, 1 unreachable, 2 bad flags, 3 no.
#[test]
fn client_commands_answer_with_exit_codes_a_shell_can_use() {
    let rt = TestCluster::rt();
    let tc = TestCluster::start(Mode::Quorum, 3);
    let leader = rt.block_on(tc.c.wait_agreed(WAIT)).expect("a leader");
    let follower = tc.c.ids().into_iter().find(|&i| i != leader).unwrap();
    let addr = |id| tc.c.member(id).unwrap().addr.clone();

    let (code, out) = electd(&["leader", "--node", &addr(follower), "--json"]);
    assert_eq!(code, 0, "{out}");
    let info: electd_client::LeaderInfo = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(info.view().leader, Some(leader));
    let (code, out) = electd(&["leader", "--node", &addr(follower)]);
    assert_eq!(code, 0);
    assert!(out.contains(&format!("leader {leader}")), "{out}");

    let (code, out) = electd(&["status", "--node", &addr(leader), "--json"]);
    assert_eq!(code, 0);
    let status: electd_client::Status = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(status.leader.node_id, leader);

    // Unreachable: a port nobody listens on (the block's own addresses are ours alone).
    let (block, spare) = common::block_addrs(1);
    let (code, _) = electd(&["leader", "--node", &spare[0], "--timeout-ms", "500"]);
    assert_eq!(code, 1);
    drop(block);
    let (code, _) = electd(&["leader", "--bogus"]);
    assert_eq!(code, 2);

    // Resign: refused by a follower (3), done by the leader (0), with the admin token.
    let token =
        tc.c.admin_token()
            .expect("the test cluster has an admin token");
    let resign = |id: NodeId| {
        let out = Command::new(electd_lab::bin::electd_bin().unwrap())
            .args(["resign", "--node", &addr(id), "--json"])
            .env("ELECTD_ADMIN_TOKEN", &token)
            .output()
            .expect("electd runs");
        out.status.code().unwrap_or(-1)
    };
    assert_eq!(resign(follower), 3);
    assert_eq!(resign(leader), 0);

    // Watch: the current view as a JSON line with its id, first.
    let mut child = Command::new(electd_lab::bin::electd_bin().unwrap())
        .args(["watch", "--node", &addr(follower), "--json"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("electd watch runs");
    let mut line = String::new();
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        use std::io::BufRead;
        std::io::BufReader::new(stdout)
            .read_line(&mut line)
            .map(|_| line)
    });
    let until = Instant::now() + WAIT;
    while !reader.is_finished() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    let line = reader.join().unwrap().expect("a line");
    let v: serde_json::Value = serde_json::from_str(line.trim()).expect("a JSON line");
    assert!(
        v["id"].as_u64().is_some() && v["node_id"] == follower,
        "{line}"
    );
}

/// Secure by default: a node of a cluster without a cluster secret refuses to start unless
/// `--insecure`, and then says so in its log and in `/v1/status`; without an admin token its
/// admin API answers 403 `admin_disabled`.
#[test]
fn without_a_secret_a_node_refuses_to_start_unless_insecure_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let (_block, addrs) = common::block_addrs(3);
    electd_lab::cluster::Cluster::write_configs(
        dir.path(),
        &addrs,
        Mode::Quorum,
        common::TEST_TIMING,
        "electd-test",
    )
    .unwrap();
    let node = |extra: &[&str]| {
        let mut cmd = Command::new(electd_lab::bin::electd_bin().unwrap());
        cmd.arg("--config")
            .arg(dir.path().join("node1.toml"))
            .args(extra)
            .env_remove("ELECTD_CLUSTER_SECRET")
            .env_remove("ELECTD_ADMIN_TOKEN")
            .env_remove("ELECTD_INSECURE")
            .stdin(Stdio::null());
        cmd
    };
    let out = node(&[]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cluster_secret") && err.contains("--insecure"),
        "{err}"
    );

    let log = dir.path().join("node1.log");
    let out = std::fs::File::create(&log).unwrap();
    let child = node(&["--insecure"])
        .stderr(out.try_clone().unwrap())
        .stdout(out)
        .spawn()
        .unwrap();
    struct Reap(std::process::Child);
    impl Drop for Reap {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _reap = Reap(child);
    let client = Client::new(addrs[0].clone(), Duration::from_secs(2));
    let rt = TestCluster::rt();
    rt.block_on(async {
        until_it_answers(&client).await;
        let status = client.status().await.unwrap();
        assert!(status.insecure && !status.admin_api, "{status:?}");
        let err = client
            .set_faults(&electd_client::FaultSet::default())
            .await
            .expect_err("no admin API without a token");
        assert_eq!(err.status(), Some(403), "{err}");
        assert_eq!(err.code(), Some("admin_disabled"), "{err}");
    });
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("INSECURE"), "{text}");
}

/// Watchers far behind, and watchers that stop reading, cost the node nothing. Node 1 starts
/// with a history of [`HISTORY`] events (far more than memory keeps) and leads; five streams
/// resume from its first event and never read; one more resumes from it and reads everything.
/// The reader gets every event once, in order, to the live end; node 1 answers `/v1/leader`
/// throughout; and no node records a change of leader or term meanwhile (a node whose runtime
/// stalled while it read its file would have lost its claim).
#[test]
fn watchers_far_behind_or_stalled_do_not_disturb_the_node() {
    const HISTORY: u64 = 30_000;
    let rt = TestCluster::rt();
    let mut tc = TestCluster::configure(Mode::Quorum, 3, common::TEST_TIMING);
    let dir = tc.c.data_dir(Mode::Quorum, 1);
    std::fs::create_dir_all(&dir).unwrap();
    let mut history = Vec::new();
    for seq in 1..=HISTORY {
        let view = electd_client::View {
            role: electd_client::Role::Follower,
            term: 0,
            leader: None,
        };
        let ev = Event {
            seq,
            t_mono_ns: seq,
            node_id: 1,
            view,
        };
        serde_json::to_writer(&mut history, &ev).unwrap();
        history.push(b'\n');
    }
    std::fs::write(dir.join(electd::EVENTS_FILE), history).unwrap();
    for id in tc.c.ids() {
        tc.start_node(id);
    }
    let client = Client::new(tc.c.member(1).unwrap().addr.clone(), Duration::from_secs(2));
    rt.block_on(async {
        let l = tc.c.wait_agreed(WAIT).await.expect("a leader");
        if l != 1 {
            tc.c.client(l)
                .unwrap()
                .resign(Some(1))
                .await
                .expect("a handover to 1");
        }
        assert!(
            tc.c.wait_for(WAIT, |s| agreed(s) == Some(1)).await,
            "node 1 does not lead within {WAIT:?}"
        );
        let led = client.leader().await.expect("node 1 answers").view();
        let flood_ns = mono_ns();

        // Five streams ask for everything and read nothing: their sockets fill, they stall.
        let stalled: Vec<std::net::TcpStream> = (0..5)
            .map(|_| {
                let mut s = std::net::TcpStream::connect(&tc.c.member(1).unwrap().addr).unwrap();
                let req = "GET /v1/watch HTTP/1.1\r\nHost: electd\r\nLast-Event-ID: 0\r\n\r\n";
                std::io::Write::write_all(&mut s, req.as_bytes()).unwrap();
                s
            })
            .collect();
        let done = std::cell::Cell::new(false);
        let reader = async {
            let mut w = client.watch(Some(0)).await.expect("a stream from the top");
            let until = Instant::now() + Duration::from_secs(120);
            let mut want = 1;
            let mut live = u64::MAX;
            while want <= live {
                assert!(Instant::now() < until, "event {want} not read within 120 s");
                let ev = w
                    .next()
                    .await
                    .expect("the stream reads")
                    .expect("it goes on");
                assert_eq!(ev.id, want, "out of order or a gap");
                if ev.id > HISTORY && live == u64::MAX {
                    // Past the history: read on to where the log was when the reader got here.
                    live = client.events(ev.id, 1000).await.unwrap().next - 1;
                }
                want += 1;
            }
            done.set(true);
            want - 1
        };
        let prober = async {
            let (mut probes, mut slowest) = (0u32, Duration::ZERO);
            while !done.get() {
                let t = Instant::now();
                let info = client.leader().await.expect("node 1 answers throughout");
                assert_eq!(info.node_id, 1);
                slowest = slowest.max(t.elapsed());
                probes += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            (probes, slowest)
        };
        let (read, (probes, slowest)) = tokio::join!(reader, prober);
        eprintln!(
            "read {read} events from the top; {probes} probes of /v1/leader, slowest {slowest:?}"
        );
        drop(stalled);
        let moved: Vec<Event> = tc
            .events()
            .into_iter()
            .filter(|e| e.t_mono_ns > flood_ns)
            .filter(|e| e.view.leader != Some(1) || e.view.term != led.term)
            .collect();
        if !moved.is_empty() {
            tc.dump_logs();
            panic!("the cluster moved: {moved:?}");
        }
    });
    tc.assert_safe();
}
