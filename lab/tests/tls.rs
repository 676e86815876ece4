//! TLS (docs/security.md, "TLS") on real processes: a quorum cluster whose peers authenticate by their
//! certificates alone (no cluster secret) elects, fails over and serves the API over HTTPS;
//! the client commands and `electd run` take `--cacert`; a peer request without a member's
//! certificate, or with one that names another member, is refused; plain HTTP gets nowhere;
//! SIGHUP reads the files again without a leader change, and a broken file is refused while
//! the node goes on with what it had.

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::{TestCluster, TEST_TIMING};
use electd_client::{Client, Mode};

const WAIT: Duration = Duration::from_secs(20);

/// A cluster of `n` with TLS and without a cluster secret, whose admin API asks for a client
/// certificate, started.
fn tls_cluster(n: usize) -> TestCluster {
    let mut tc = TestCluster::configure(Mode::Quorum, n, TEST_TIMING);
    std::fs::remove_file(tc.c.run.join("cluster-secret")).unwrap();
    tc.c.ensure_tls().unwrap();
    tc.c.extra_args.push("--tls-admin-client-cert".into());
    for id in tc.c.ids() {
        tc.start_node(id);
    }
    tc
}

fn electd() -> std::path::PathBuf {
    electd_lab::bin::electd_bin().expect("the electd binary")
}

/// A peer request to `addr` presenting `identity` (PEM cert and key), as member `from`.
async fn peer_request(tc: &TestCluster, addr: &str, identity: Option<&[u8]>, from: u64) -> u16 {
    let ca = std::fs::read(tc.c.tls_ca().unwrap()).unwrap();
    let http = electd_client::tls_client(&ca, identity)
        .unwrap()
        .build()
        .unwrap();
    let res = http
        .post(format!("https://{addr}/peer/raft/vote"))
        .header(electd::HDR_CLUSTER, "electd-test")
        .header(electd::HDR_FROM, from)
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await
        .expect("an answer over TLS");
    let status = res.status().as_u16();
    let body = res.text().await.unwrap_or_default();
    eprintln!("peer request as {from}: {status} {body}");
    status
}

#[test]
fn peers_authenticate_by_certificate_and_clients_by_the_cluster_ca() {
    let mut tc = tls_cluster(3);
    let rt = TestCluster::rt();
    rt.block_on(async {
        let leader =
            tc.c.wait_agreed(WAIT)
                .await
                .expect("an agreed leader over TLS");
        let follower = tc.c.ids().into_iter().find(|&i| i != leader).unwrap();
        let addr = tc.c.member(follower).unwrap().addr.clone();
        let st = tc.c.status(follower).await.unwrap();
        assert!(!st.insecure, "TLS authenticates the peers: not insecure");

        // Plain HTTP to a TLS port gets no answer.
        let plain = Client::new(addr.clone(), Duration::from_secs(2));
        let err = plain.leader().await.expect_err("plain HTTP was answered");
        assert!(
            err.to_string().contains("pass --cacert"),
            "the error does not say what to do: {err}"
        );

        // A peer request must present a member's certificate naming its sender.
        let dir = tc.c.run.join("tls");
        let member = |id: u64| {
            let mut pem = std::fs::read(dir.join(format!("node{id}.pem"))).unwrap();
            pem.extend(std::fs::read(dir.join(format!("node{id}-key.pem"))).unwrap());
            pem
        };
        let admin = std::fs::read(dir.join("admin.pem")).unwrap();
        assert_eq!(peer_request(&tc, &addr, None, leader).await, 401);
        assert_eq!(peer_request(&tc, &addr, Some(&admin), leader).await, 403);
        assert_eq!(
            peer_request(&tc, &addr, Some(&member(leader)), 99).await,
            403,
            "an unknown sender"
        );
        let third =
            tc.c.ids()
                .into_iter()
                .find(|&i| i != leader && i != follower)
                .unwrap();
        assert_eq!(
            peer_request(&tc, &addr, Some(&member(third)), leader).await,
            403,
            "member {third}'s certificate used as member {leader}"
        );
        // Its own certificate passes authentication (and `{}` is no vote request: 400).
        assert_eq!(
            peer_request(&tc, &addr, Some(&member(leader)), leader).await,
            400
        );

        // The admin API asks for a client certificate besides the token: the lab's clients
        // present the cluster's admin certificate; one with the token alone gets 403.
        assert!(tc.c.client(follower).unwrap().faults().await.is_ok());
        let ca_pem = std::fs::read(tc.c.tls_ca().unwrap()).unwrap();
        let bare = Client::new_tls(addr.clone(), Duration::from_secs(2), &ca_pem, None)
            .unwrap()
            .admin_token(tc.c.admin_token());
        let e = bare
            .faults()
            .await
            .expect_err("an admin request without a certificate");
        assert_eq!(
            (e.status(), e.code()),
            (Some(403), Some("client_certificate_required")),
            "{e}"
        );

        // The client commands take --cacert.
        let ca = tc.c.tls_ca().unwrap();
        let leader_cmd = |cacert: Option<&std::path::Path>| {
            let mut cmd = Command::new(electd());
            cmd.args(["leader", "--node", &addr]);
            if let Some(f) = cacert {
                cmd.arg("--cacert").arg(f);
            }
            cmd.output().unwrap()
        };
        let out = leader_cmd(Some(&ca));
        assert!(out.status.success(), "{out:?}");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains(&leader.to_string()),
            "{out:?}"
        );
        // Refused, saying what to do: without --cacert, and with a node's certificate given
        // as --cacert (not the CA that signed it).
        let node_cert = dir.join(format!("node{leader}.pem"));
        for (cacert, says) in [
            (None, "if the node serves TLS, pass --cacert"),
            (Some(node_cert.as_path()), "is --cacert the CA"),
        ] {
            let out = leader_cmd(cacert);
            assert_eq!(out.status.code(), Some(1), "--cacert {cacert:?}: {out:?}");
            assert!(
                String::from_utf8_lossy(&out.stderr).contains(says),
                "{out:?}"
            );
        }

        // `electd run --cacert` beside the leader starts its child, and stops it at SIGINT.
        let started = tc.c.run.join("run-over-tls");
        let leader_addr = tc.c.member(leader).unwrap().addr.clone();
        let run = Command::new(electd())
            .args(["run", "--node", &leader_addr, "--cacert"])
            .arg(&ca)
            .args(["--", "sh", "-c", "touch \"$0\"; exec sleep 60"])
            .arg(&started)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let until = Instant::now() + WAIT;
        while !started.exists() && Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let ran = started.exists();
        let pid = rustix::process::Pid::from_raw(run.id() as i32).unwrap();
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::INT);
        let out = run.wait_with_output().unwrap();
        assert!(ran, "electd run --cacert started no child: {out:?}");
        assert_eq!(out.status.code(), Some(0), "electd run at SIGINT: {out:?}");

        // SIGHUP: the files read again, the leader and its term unchanged.
        let term = tc.c.leader_info(leader).await.unwrap().term;
        for id in tc.c.ids() {
            assert!(tc.c.signal(id, rustix::process::Signal::HUP));
        }
        let log = |id| tc.log_since(id, 0);
        let until = Instant::now() + WAIT;
        while !tc
            .c
            .ids()
            .into_iter()
            .all(|id| log(id).contains("TLS files read again"))
        {
            assert!(Instant::now() < until, "no reload logged");
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        // A broken key: refused, the node goes on with the files it had.
        let (_, key) = tc.c.tls_files(follower);
        let good = std::fs::read(&key).unwrap();
        std::fs::write(&key, "not a key").unwrap();
        assert!(tc.c.signal(follower, rustix::process::Signal::HUP));
        let until = Instant::now() + WAIT;
        while !log(follower).contains("TLS files not reloaded") {
            assert!(Instant::now() < until, "no refused reload logged");
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        std::fs::write(&key, good).unwrap();
        let now = tc.c.wait_agreed(WAIT).await.expect("still agreed");
        let info = tc.c.leader_info(now).await.unwrap();
        assert_eq!(
            (now, info.term),
            (leader, term),
            "a reload changed the leader"
        );
        assert!(tc.c.status(follower).await.is_ok(), "the follower serves");

        // Failover over TLS.
        tc.kill(leader);
        let next = tc.c.wait_agreed(WAIT).await.expect("a new leader over TLS");
        assert_ne!(next, leader);
    });
    tc.assert_safe();
}
