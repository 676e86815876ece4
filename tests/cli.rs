//! The binary's contract at start: config errors exit 2 naming the field; a corrupt state file
//! stops the node with an error naming the file, and leaves the file as it was.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_electd");

fn write_config(dir: &std::path::Path, extra: &str) -> std::path::PathBuf {
    // No node of these tests talks to its peers: they are refused before (config) or right
    // after binding (state file), and a node that binds is given `--listen 127.0.0.1:0`.
    let mut text = format!(
        "id = 1\ndata_dir = \"data\"\ncluster_secret = \"0123456789abcdef0123\"\n{extra}\n"
    );
    for id in 1..=3 {
        text.push_str(&format!(
            "[[peers]]\nid = {id}\naddr = \"127.0.0.1:{id}\"\n"
        ));
    }
    let path = dir.join("node.toml");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn invalid_config_exits_2_and_names_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_config(dir.path(), "[timing]\nheartbeat_ms = 5000");
    let out = Command::new(BIN)
        .arg("--config")
        .arg(&cfg)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("timing.heartbeat_ms (5000) must be at most 1/3 of the default claim lease"),
        "{err}"
    );
    // A flag overrides the file, and is validated the same way.
    let cfg = write_config(dir.path(), "");
    let out = Command::new(BIN)
        .args([
            "--config",
            cfg.to_str().unwrap(),
            "--lease-ms",
            "400",
            "--check-config",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("timing.lease_ms"));
    let out = Command::new(BIN)
        .args(["--config", cfg.to_str().unwrap(), "--check-config"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = Command::new(BIN)
        .arg("--config")
        .arg(dir.path().join("missing.toml"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("missing.toml"));
}

#[test]
fn corrupt_state_file_refuses_to_start_and_is_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_config(dir.path(), "");
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let state = data.join(electd::quorum::STATE_FILE);
    std::fs::write(&state, b"{\"format\":1,\"node_id\":1,\"vo").unwrap();
    let out = Command::new(BIN)
        .arg("--config")
        .arg(&cfg)
        .args(["--listen", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&state.display().to_string()) && err.contains("corrupt"),
        "{err}"
    );
    assert_eq!(
        std::fs::read(&state).unwrap(),
        b"{\"format\":1,\"node_id\":1,\"vo"
    );
}

/// A second `electd` on a data dir another one runs on is refused before it reads the dir,
/// naming the dir (electd::data_dir), and the first runs on.
#[test]
fn a_second_process_on_one_data_dir_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_config(dir.path(), "");
    let start = |listen: &str, stderr: std::process::Stdio| {
        Command::new(BIN)
            .arg("--config")
            .arg(&cfg)
            .args(["--listen", listen])
            .stdout(std::process::Stdio::null())
            .stderr(stderr)
            .spawn()
            .unwrap()
    };
    let port = free_port();
    let mut first = start(&format!("127.0.0.1:{port}"), std::process::Stdio::null());
    // Until the first answers HTTP (it binds first, but serves only once its node started,
    // the lock taken), at most 20 s.
    let answers = || {
        use std::io::{Read, Write};
        let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(std::time::Duration::from_secs(2)));
        let mut head = [0u8; 8];
        s.write_all(b"GET /v1/health HTTP/1.0\r\n\r\n").is_ok()
            && s.read_exact(&mut head).is_ok()
            && head.starts_with(b"HTTP/1.")
    };
    let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !answers() {
        assert!(std::time::Instant::now() < until, "the first never served");
        assert!(first.try_wait().unwrap().is_none(), "the first node exited");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let mut second = start("127.0.0.1:0", std::process::Stdio::piped());
    // Until it exits, at most 10 s: one that runs is killed, and the test fails.
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while second.try_wait().unwrap().is_none() && std::time::Instant::now() < until {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    if second.try_wait().unwrap().is_none() {
        second.kill().unwrap();
        first.kill().unwrap();
        let _ = first.wait();
    }
    let second = second.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&second.stderr);
    let data = dir.path().join("data");
    assert_eq!(second.status.code(), Some(1), "{err}");
    assert!(
        err.contains("in use by another electd process") && err.contains(&*data.to_string_lossy()),
        "{err}"
    );
    assert!(first.try_wait().unwrap().is_none(), "the first runs on");
    first.kill().unwrap();
    first.wait().unwrap();
}

/// A cluster without a cluster secret is refused unless `--insecure` (or `insecure = true`, or
/// `ELECTD_INSECURE=true`) is given.
#[test]
fn a_cluster_without_a_secret_refuses_to_start_unless_insecure() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_config(dir.path(), "");
    let text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(
        &cfg,
        text.replace("cluster_secret = \"0123456789abcdef0123\"\n", ""),
    )
    .unwrap();
    let check = |args: &[&str], env: &[(&str, &str)]| {
        let out = Command::new(BIN)
            .arg("--config")
            .arg(&cfg)
            .arg("--check-config")
            .args(args)
            .env_remove("ELECTD_CLUSTER_SECRET")
            .envs(env.iter().copied())
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, err) = check(&[], &[]);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("cluster_secret: a cluster of 3 members needs one"),
        "{err}"
    );
    assert!(err.contains("--insecure"), "{err}");
    assert_eq!(check(&["--insecure"], &[]).0, Some(0));
    assert_eq!(check(&[], &[("ELECTD_INSECURE", "true")]).0, Some(0));
    assert_eq!(
        check(&[], &[("ELECTD_CLUSTER_SECRET", "0123456789abcdef0123")]).0,
        Some(0)
    );
}

/// Every field can come from the file, the environment (ELECTD_<FIELD>) or a flag; a flag wins
/// over the environment, the environment over the file.
#[test]
fn flags_win_over_the_environment_and_the_environment_over_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_config(dir.path(), "[timing]\nheartbeat_ms = 5000");
    let check = |env: &[(&str, &str)], args: &[&str]| {
        let out = Command::new(BIN)
            .arg("--config")
            .arg(&cfg)
            .arg("--check-config")
            .args(args)
            .envs(env.iter().copied())
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    // The file alone is refused (heartbeat above the follower lease) …
    assert_eq!(check(&[], &[]).0, Some(2));
    // … the environment overrides it …
    let (code, err) = check(&[("ELECTD_HEARTBEAT_MS", "20")], &[]);
    assert_eq!(code, Some(0), "{err}");
    // … and a flag overrides the environment.
    let (code, err) = check(&[("ELECTD_HEARTBEAT_MS", "20")], &["--heartbeat-ms", "400"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("timing.heartbeat_ms (400)"), "{err}");
    // A value the environment cannot hold names the variable.
    let (code, err) = check(&[("ELECTD_MODE", "paxos")], &[]);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("ELECTD_MODE") || err.contains("--mode"),
        "{err}"
    );
}

/// `--log-format json`: one JSON object a line, for log collectors.
#[test]
fn json_logs_are_one_object_a_line() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("one.toml");
    std::fs::write(
        &cfg,
        "id = 1\ndata_dir = \"data\"\nmode = \"bully\"\n[[peers]]\nid = 1\naddr = \"127.0.0.1:9\"\n",
    )
    .unwrap();
    let child = Command::new(BIN)
        .arg("--config")
        .arg(&cfg)
        .args(["--listen", "127.0.0.1:0", "--log-format", "json"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let line = first_line(child).expect("a log line");
    let v: serde_json::Value = serde_json::from_str(line.trim()).expect("a JSON line");
    assert_eq!(v["fields"]["message"], "electd starting", "{line}");
    assert_eq!(v["level"], "INFO", "{line}");
}

// --- Several endpoints (issue 31, section 4), completions and the man page (section 2) ---

/// The admin token of the test clusters.
const TOKEN: &str = "0123456789abcdef-token";

/// A port nothing listens on: bound, read, and let go.
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// `electd ARGS` with `env` and none of the caller's ELECTD_* client variables: its exit code,
/// stdout and stderr.
fn electd(args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String, String) {
    let out = Command::new(BIN)
        .args(args)
        .env_remove("ELECTD_NODE")
        .env_remove("ELECTD_ENDPOINTS")
        .env_remove("ELECTD_ADMIN_TOKEN")
        .env_remove("ELECTD_CACERT")
        .env_remove("ELECTD_CLIENT_CERT")
        .envs(env.iter().copied())
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A cluster of `members` quorum nodes on 127.0.0.1 at the default timings, of which the first
/// `started` run; killed when dropped.
struct Cluster {
    addrs: Vec<String>,
    nodes: Vec<std::process::Child>,
    dir: tempfile::TempDir,
}

impl Cluster {
    fn start(members: usize, started: usize) -> Cluster {
        let addrs = (0..members)
            .map(|_| format!("127.0.0.1:{}", free_port()))
            .collect();
        Cluster::start_in(tempfile::tempdir().unwrap(), addrs, started, "")
    }

    /// The same in `dir`, with the members at `addrs` and `extra` in each config (tables).
    fn start_in(
        dir: tempfile::TempDir,
        addrs: Vec<String>,
        started: usize,
        extra: &str,
    ) -> Cluster {
        Cluster::start_with(dir, addrs, started, extra, |_| Vec::new())
    }

    /// The same, node N started with the variables `env(N)` besides (they win over its file).
    fn start_with(
        dir: tempfile::TempDir,
        addrs: Vec<String>,
        started: usize,
        extra: &str,
        env: impl Fn(usize) -> Vec<(&'static str, String)>,
    ) -> Cluster {
        let mut nodes = Vec::new();
        for id in 1..=started {
            let mut text = format!(
                "id = {id}\ndata_dir = \"data{id}\"\ncluster_secret = \"0123456789abcdef0123\"\n\
                 admin_token = \"{TOKEN}\"\n{extra}\n"
            );
            for (i, addr) in addrs.iter().enumerate() {
                text.push_str(&format!("[[peers]]\nid = {}\naddr = \"{addr}\"\n", i + 1));
            }
            let cfg = dir.path().join(format!("node{id}.toml"));
            std::fs::write(&cfg, text).unwrap();
            let log = std::fs::File::create(dir.path().join(format!("node{id}.log"))).unwrap();
            nodes.push(
                Command::new(BIN)
                    .arg("--config")
                    .arg(&cfg)
                    .env_remove("RUST_LOG")
                    .envs(env(id))
                    .stdout(log.try_clone().unwrap())
                    .stderr(log)
                    .spawn()
                    .unwrap(),
            );
        }
        Cluster { addrs, nodes, dir }
    }

    /// The logs of the nodes, for a failure's message.
    fn logs(&self) -> String {
        (1..=self.nodes.len())
            .map(|id| {
                let log = std::fs::read_to_string(self.dir.path().join(format!("node{id}.log")))
                    .unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(15).collect();
                format!(
                    "node {id}:\n{}",
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The leader's id once every running node names it, in `until`.
    fn leader(&self, until: std::time::Duration) -> u64 {
        let deadline = std::time::Instant::now() + until;
        loop {
            let named: Vec<Option<u64>> = self.addrs[..self.nodes.len()]
                .iter()
                .map(|a| {
                    let (code, out, _) = electd(&["leader", "--json", "--node", a], &[]);
                    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_default();
                    v["leader"]["id"].as_u64().filter(|_| code == Some(0))
                })
                .collect();
            if let Some(Some(id)) = named.first() {
                if named.iter().all(|n| *n == Some(*id)) {
                    return *id;
                }
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no agreed leader in {until:?} ({named:?})\n{}",
                self.logs()
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            let _ = node.kill();
            let _ = node.wait();
        }
    }
}

/// Read commands with `--endpoints` (or ELECTD_ENDPOINTS) skip an endpoint nothing listens on
/// and take the answer of the next; `--node` with `--endpoints` is a usage error.
#[test]
fn client_commands_skip_an_endpoint_that_does_not_answer() {
    let one = Cluster::start(1, 1);
    let live = one.addrs[0].clone();
    let dead = format!("127.0.0.1:{}", free_port());
    one.leader(std::time::Duration::from_secs(30));
    let endpoints = format!("{dead},{live}");

    let (code, out, err) = electd(&["leader", "--endpoints", &endpoints], &[]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.starts_with("node 1: leader, term "), "{out}");
    assert!(out.contains(&format!("leader 1 ({live})")), "{out}");
    let (code, out, err) = electd(&["status", "--json", "--endpoints", &endpoints], &[]);
    assert_eq!(code, Some(0), "{err}");
    let status: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(status["node_id"], 1, "{out}");
    let (code, out, err) = electd(&["member", "list", "--endpoints", &endpoints], &[]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out.trim(), format!("node 1 ({live}): voter"));

    // The same from the environment; a flag wins over the other's variable.
    let (code, out, err) = electd(&["leader"], &[("ELECTD_ENDPOINTS", &endpoints)]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains(&format!("leader 1 ({live})")), "{out}");
    let (code, _, err) = electd(
        &["leader", "--endpoints", &endpoints],
        &[("ELECTD_NODE", &dead)],
    );
    assert_eq!(code, Some(0), "--endpoints wins over ELECTD_NODE: {err}");
    let (code, _, err) = electd(&["leader", "--node", &live], &[("ELECTD_ENDPOINTS", &dead)]);
    assert_eq!(code, Some(0), "--node wins over ELECTD_ENDPOINTS: {err}");

    // watch follows the first endpoint that answers.
    let watch = Command::new(BIN)
        .args(["watch", "--json", "--endpoints", &endpoints])
        .env_remove("ELECTD_NODE")
        .env_remove("ELECTD_ENDPOINTS")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let line = first_line(watch).expect("a watch line");
    let v: serde_json::Value = serde_json::from_str(line.trim()).expect("a JSON line");
    assert_eq!(v["node_id"], 1, "{line}");
    assert!(v["id"].as_u64().is_some(), "{line}");

    // Usage errors: both flags, both variables, an endpoint that is not HOST:PORT.
    let (code, _, err) = electd(&["leader", "--node", &live, "--endpoints", &endpoints], &[]);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("--node and --endpoints cannot be used together"),
        "{err}"
    );
    let (code, _, err) = electd(
        &["status"],
        &[("ELECTD_NODE", &live), ("ELECTD_ENDPOINTS", &endpoints)],
    );
    assert_eq!(code, Some(2));
    assert!(
        err.contains("ELECTD_NODE and ELECTD_ENDPOINTS are both set"),
        "{err}"
    );
    for bad in [format!("{live},127.0.0.1"), format!("{live},,{dead}")] {
        let (code, _, err) = electd(&["leader", "--endpoints", &bad], &[]);
        assert_eq!(code, Some(2), "{bad}");
        assert!(
            err.contains("is not HOST:PORT") || err.contains("an empty endpoint"),
            "{bad}: {err}"
        );
    }
    // `run` follows the claim of one node, its own: it takes no endpoints.
    let (code, _, _) = electd(&["run", "--endpoints", &live, "--", "true"], &[]);
    assert_eq!(code, Some(2));
}

/// When no endpoint answers, a command exits 1 naming each one it tried, and why.
#[test]
fn no_endpoint_answering_exits_1_naming_each() {
    let dead: Vec<String> = (0..2)
        .map(|_| format!("127.0.0.1:{}", free_port()))
        .collect();
    let endpoints = dead.join(",");
    for args in [
        vec!["leader"],
        vec!["status"],
        vec!["member", "list"],
        vec!["resign"],
        vec!["watch", "--give-up-ms", "1"],
    ] {
        let mut args = args.clone();
        args.extend(["--endpoints", &endpoints]);
        let (code, _, err) = electd(&args, &[("ELECTD_ADMIN_TOKEN", TOKEN)]);
        assert_eq!(code, Some(1), "{args:?}: {err}");
        assert!(
            err.contains("none of the 2 endpoints answered"),
            "{args:?}: {err}"
        );
        for d in &dead {
            assert!(
                err.contains(&format!("{d}: ")) && err.contains("refused"),
                "{args:?} names {d}: {err}"
            );
        }
    }
}

/// An admin command with `--endpoints` goes to the leader they name, wherever it is in the
/// list: `resign` to a follower is refused (not the leader), through the endpoints it hands the
/// role over. Without a leader, or to a leader's address that is not an endpoint (without
/// TLS), the command says so and sends nothing.
#[test]
fn admin_commands_with_endpoints_reach_the_leader() {
    let cluster = Cluster::start(3, 3);
    let secs = std::time::Duration::from_secs;
    let leader = cluster.leader(secs(30));
    let addr = |id: u64| cluster.addrs[id as usize - 1].clone();
    let followers: Vec<String> = (1..=3).filter(|&id| id != leader).map(addr).collect();
    // The leader last, after a dead endpoint and the followers.
    let dead = format!("127.0.0.1:{}", free_port());
    let endpoints = format!("{dead},{},{},{}", followers[0], followers[1], addr(leader));
    let token = [("ELECTD_ADMIN_TOKEN", TOKEN)];

    let (code, _, err) = electd(&["resign", "--node", &followers[0]], &token);
    assert_eq!(code, Some(3), "a follower refuses: {err}");
    let (code, out, err) = electd(&["resign", "--endpoints", &endpoints], &token);
    assert_eq!(code, Some(0), "{err}\n{}", cluster.logs());
    let successor: u64 = out
        .trim()
        .rsplit("node ")
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("resigned …; successor: node N: {out}"));
    assert_ne!(successor, leader, "{out}");
    // The successor campaigns first; whoever wins, the old leader has handed over.
    let now = cluster.leader(secs(30));
    assert_ne!(now, leader, "{out}");

    // The leader named by an endpoint that is not itself one of the endpoints: not sent.
    let via_name = format!("localhost:{}", followers[0].rsplit(':').next().unwrap());
    let (code, _, err) = electd(&["resign", "--endpoints", &via_name], &token);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(&format!("names the leader {}", addr(now)))
            && err.contains("not one of --endpoints"),
        "{err}"
    );

    // One member of three alive: no leader, said for each endpoint.
    drop(cluster);
    let alone = Cluster::start(3, 1);
    let deadline = std::time::Instant::now() + secs(15);
    let (code, _, err) = loop {
        let answer = electd(
            &[
                "resign",
                "--endpoints",
                &format!("{dead},{}", alone.addrs[0]),
            ],
            &token,
        );
        if answer.0 != Some(1) || std::time::Instant::now() > deadline {
            break answer;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert_eq!(code, Some(3), "{err}");
    assert!(err.contains("no leader to send the request to"), "{err}");
    assert!(
        err.contains(&format!("{}: node 1 (", alone.addrs[0])) && err.contains("knows no leader"),
        "{err}"
    );
    assert!(err.contains(&format!("{dead}: ")), "{err}");
}

/// Over TLS, `--cacert` and `--client-cert` hold for every endpoint, and an admin request goes
/// to the leader's address even when it is not one of the endpoints: the leader's certificate
/// vouches for it.
#[test]
fn endpoints_over_tls_trust_the_ca_for_each() {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
    let dir = tempfile::tempdir().unwrap();
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issue = |names: Vec<String>| {
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(names)
            .unwrap()
            .signed_by(&key, &ca_cert, &ca_key)
            .unwrap();
        (cert.pem(), key.serialize_pem())
    };
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    };
    let ca_file = write("ca.pem", &ca_cert.pem());
    let (cert, key) = issue(vec![
        "127.0.0.1".into(),
        "localhost".into(),
        electd::tls::member_name(1),
    ]);
    let extra = format!(
        "[tls]\nca = \"{ca_file}\"\ncert = \"{}\"\nkey = \"{}\"\nadmin_client_cert = true\n",
        write("node1.pem", &cert),
        write("node1-key.pem", &key)
    );
    let (cert, key) = issue(vec!["admin.electd.invalid".into()]);
    let admin = write("admin.pem", &(cert + &key));
    let other_ca = write("other-ca.pem", &{
        let key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.self_signed(&key).unwrap().pem()
    });
    let port = free_port();
    let live = format!("127.0.0.1:{port}");
    let one = Cluster::start_in(dir, vec![live.clone()], 1, &extra);
    let dead = format!("127.0.0.1:{}", free_port());
    let endpoints = format!("{dead},{live}");

    // A read through the endpoints, over TLS; without the cluster's CA, refused.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let (code, out, err) = loop {
        let answer = electd(
            &["leader", "--endpoints", &endpoints, "--cacert", &ca_file],
            &[],
        );
        if answer.0 == Some(0) || std::time::Instant::now() > deadline {
            break answer;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert_eq!(code, Some(0), "{err}\n{}", one.logs());
    assert!(out.contains(&format!("leader 1 ({live})")), "{out}");
    let (code, _, err) = electd(
        &["leader", "--endpoints", &endpoints, "--cacert", &other_ca],
        &[],
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("certificate"), "{err}");

    // An admin request, named by `localhost:PORT`, goes to the leader at 127.0.0.1:PORT with
    // the client certificate: the node's own answer (no successor in a cluster of one).
    let via_name = format!("localhost:{port}");
    let admin_args = [
        "resign",
        "--endpoints",
        &via_name,
        "--cacert",
        &ca_file,
        "--client-cert",
        &admin,
    ];
    let (code, _, err) = electd(&admin_args, &[("ELECTD_ADMIN_TOKEN", TOKEN)]);
    assert_eq!(code, Some(3), "{err}");
    assert!(err.contains(&format!("{live}: 409 no_successor")), "{err}");
    // Without the client certificate the admin API refuses it.
    let (code, _, err) = electd(&admin_args[..5], &[("ELECTD_ADMIN_TOKEN", TOKEN)]);
    assert_eq!(code, Some(3), "{err}");
    assert!(
        err.contains(&format!("{live}: 403 client_certificate_required")),
        "{err}"
    );
}

// --- electd doctor (issue 31, section 4) ---

/// The checks `electd doctor` prints for a reachable quorum cluster.
const DOCTOR_CHECKS: [&str; 11] = [
    "discovery",
    "reachable",
    "cluster-id",
    "mode",
    "peer-auth",
    "membership",
    "leader",
    "health",
    "event-log",
    "clock",
    "roles",
];

/// `electd doctor ARGS`, again (a second apart) until `done` holds of its answer or `until`
/// has passed: the last answer.
fn doctor_until(
    args: &[&str],
    until: std::time::Duration,
    done: impl Fn(&(Option<i32>, String, String)) -> bool,
) -> (Option<i32>, String, String) {
    let deadline = std::time::Instant::now() + until;
    let mut argv = vec!["doctor"];
    argv.extend(args);
    loop {
        let answer = electd(&argv, &[]);
        if done(&answer) || std::time::Instant::now() > deadline {
            return answer;
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
}

/// The (status, check) of each line of doctor's human report, the summary line left out.
fn doctor_lines(out: &str) -> Vec<(&str, &str, &str)> {
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines.last().is_some_and(|l| l.contains(" checks in ")),
        "a summary line last: {out}"
    );
    lines[..lines.len() - 1]
        .iter()
        .map(|l| {
            let mut words = l.split_whitespace();
            let status = words.next().unwrap_or_default();
            let check = words.next().unwrap_or_default();
            assert!(["OK", "WARN", "FAIL"].contains(&status), "{l}\n{out}");
            (status, check, *l)
        })
        .collect()
}

/// A healthy cluster of three, asked through one member: every member found and checked, every
/// check OK, exit 0.
#[test]
fn doctor_finds_a_healthy_cluster_all_ok() {
    let cluster = Cluster::start(3, 3);
    cluster.leader(std::time::Duration::from_secs(30));
    let (code, out, err) = doctor_until(
        &["--node", &cluster.addrs[1]],
        std::time::Duration::from_secs(10),
        |a| a.0 == Some(0),
    );
    assert_eq!(code, Some(0), "{out}\n{err}\n{}", cluster.logs());
    let lines = doctor_lines(&out);
    assert!(lines.iter().all(|(s, _, _)| *s == "OK"), "{out}");
    for check in DOCTOR_CHECKS {
        assert!(lines.iter().any(|(_, c, _)| *c == check), "{check}: {out}");
    }
    for (id, addr) in cluster.addrs.iter().enumerate() {
        for check in [
            "reachable",
            "peer-auth",
            "membership",
            "leader",
            "health",
            "event-log",
        ] {
            let who = format!("node {} ({addr}):", id + 1);
            assert!(
                lines
                    .iter()
                    .any(|(_, c, l)| *c == check && l.contains(&who)),
                "{check} of {who}: {out}"
            );
        }
    }
    assert!(out.ends_with("0 WARN, 0 FAIL (exit 0)\n"), "{out}");
    eprintln!("electd doctor on a healthy cluster:\n{out}");
}

/// A member killed: exit 1, and the FAIL line names it and why (connection refused); the rest
/// is still checked.
#[test]
fn doctor_names_a_stopped_member() {
    let mut cluster = Cluster::start(3, 3);
    let leader = cluster.leader(std::time::Duration::from_secs(30));
    let victim = if leader == 3 { 2 } else { 3 };
    let child = &mut cluster.nodes[victim - 1];
    child.kill().unwrap(); // SIGKILL to its pid
    child.wait().unwrap();
    let endpoints = cluster.addrs.join(",");
    let (code, out, err) = electd(&["doctor", "--endpoints", &endpoints], &[]);
    assert_eq!(code, Some(1), "{out}\n{err}");
    let lines = doctor_lines(&out);
    let named = format!(
        "node {victim} ({}): unreachable (connection refused)",
        cluster.addrs[victim - 1]
    );
    assert!(
        lines
            .iter()
            .any(|(s, c, l)| *s == "FAIL" && *c == "reachable" && l.contains(&named)),
        "{named}: {out}"
    );
    // The others answered, and are checked.
    for id in (1..=3).filter(|&id| id != victim) {
        let who = format!("node {id} (");
        assert!(
            lines
                .iter()
                .any(|(s, c, l)| *s == "OK" && *c == "reachable" && l.contains(&who)),
            "{who}: {out}"
        );
    }
    assert!(lines.iter().any(|(_, c, _)| *c == "leader"), "{out}");
}

/// A member started with another cluster secret: its peers refuse its requests and it refuses
/// theirs (bad_signature, answer_bad_signature); doctor names it, FAIL, exit 1.
#[test]
fn doctor_names_a_member_with_another_secret() {
    let addrs: Vec<String> = (0..3)
        .map(|_| format!("127.0.0.1:{}", free_port()))
        .collect();
    let cluster = Cluster::start_with(tempfile::tempdir().unwrap(), addrs, 3, "", |id| {
        if id == 3 {
            vec![(
                "ELECTD_CLUSTER_SECRET",
                "another-secret-0123456789".to_string(),
            )]
        } else {
            Vec::new()
        }
    });
    let endpoints = cluster.addrs.join(",");
    let odd_one = "node 3 heard from none of its peers";
    let (code, out, err) = doctor_until(
        &["--endpoints", &endpoints],
        std::time::Duration::from_secs(15),
        |(_, out, _)| out.contains(odd_one),
    );
    assert_eq!(code, Some(1), "{out}\n{err}\n{}", cluster.logs());
    let lines = doctor_lines(&out);
    let who = format!("node 3 ({}): refused peer requests", cluster.addrs[2]);
    assert!(
        lines.iter().any(|(s, c, l)| *s == "FAIL"
            && *c == "peer-auth"
            && l.contains(&who)
            && l.contains("bad_signature")),
        "{who}: {out}"
    );
    assert!(
        lines
            .iter()
            .any(|(s, c, l)| *s == "FAIL" && *c == "peer-auth" && l.contains(odd_one)),
        "{out}"
    );
}

/// `--json`: an array of {check, member, status, detail}, the checks named, and the exit code
/// is the worst status's.
#[test]
fn doctor_json_is_an_array_of_checks() {
    let cluster = Cluster::start(3, 3);
    cluster.leader(std::time::Duration::from_secs(30));
    let endpoints = cluster.addrs.join(",");
    let (code, out, err) = electd(&["doctor", "--json", "--endpoints", &endpoints], &[]);
    let checks: Vec<serde_json::Value> =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}\n{err}"));
    let mut worst = 0;
    for c in &checks {
        let mut keys: Vec<&String> = c.as_object().expect("an object").keys().collect();
        keys.sort();
        assert_eq!(keys, ["check", "detail", "member", "status"], "{c}");
        assert!(
            c["member"].is_null() || (1..=3).contains(&c["member"].as_u64().unwrap()),
            "{c}"
        );
        assert!(c["detail"].as_str().is_some_and(|d| !d.is_empty()), "{c}");
        worst = worst.max(match c["status"].as_str() {
            Some("OK") => 0,
            Some("WARN") => 4,
            Some("FAIL") => 5,
            other => panic!("status {other:?}: {c}"),
        });
    }
    for check in DOCTOR_CHECKS {
        assert!(checks.iter().any(|c| c["check"] == check), "{check}: {out}");
    }
    assert_eq!(code, Some(if worst == 5 { 1 } else { worst }), "{out}");
}

/// A mode that may lead twice (bully): found through /v1/status (409 on /v1/members), and a
/// WARN says so; nothing else wrong: exit 4.
#[test]
fn doctor_warns_of_a_mode_that_may_lead_twice() {
    let addrs: Vec<String> = (0..3)
        .map(|_| format!("127.0.0.1:{}", free_port()))
        .collect();
    let cluster = Cluster::start_in(tempfile::tempdir().unwrap(), addrs, 3, "mode = \"bully\"");
    cluster.leader(std::time::Duration::from_secs(30));
    let (code, out, err) = doctor_until(
        &["--node", &cluster.addrs[0]],
        std::time::Duration::from_secs(10),
        |a| a.0 == Some(4),
    );
    assert_eq!(code, Some(4), "{out}\n{err}\n{}", cluster.logs());
    let lines = doctor_lines(&out);
    assert!(
        lines.iter().any(|(s, c, l)| *s == "OK"
            && *c == "discovery"
            && l.contains("/v1/status (bully mode)")),
        "{out}"
    );
    assert!(
        lines.iter().any(|(s, c, l)| *s == "WARN"
            && *c == "mode"
            && l.contains("two members may lead at once under a partition")),
        "{out}"
    );
    assert!(lines.iter().all(|(s, _, _)| *s != "FAIL"), "{out}");
}

/// A test that cannot run for want of a tool records a skip as `lab/src/skip.rs` does (this
/// package cannot depend on the lab): a line in `$ELECTD_SKIPS_FILE`, which scripts/test.sh
/// counts as skipped, `SKIPPED …` on stderr, and a failure on CI as root, where
/// scripts/lib/checkers.sh installs every tool.
fn skip(test: &str, missing: &str) {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let name = match (var("NEXTEST_BINARY_ID"), var("NEXTEST_TEST_NAME")) {
        (Some(binary), Some(test)) => format!("{binary} {test}"),
        _ => format!("electd::cli {test}"),
    };
    let line = format!("{name}: {missing}");
    if let Some(path) = std::env::var_os("ELECTD_SKIPS_FILE").filter(|p| !p.is_empty()) {
        use std::io::Write;
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut f| f.write_all(format!("{line}\n").as_bytes()))
            .unwrap_or_else(|e| panic!("{line}, and the skip cannot be recorded: {e}"));
    }
    eprintln!("SKIPPED {line}");
    let ci = std::env::var("CI").is_ok_and(|v| v == "true");
    assert!(
        !(ci && rustix::process::geteuid().is_root()),
        "skipped on CI as root, where scripts/test.sh installs every tool: {missing}"
    );
}

/// Runs `tool ARGS FILE`: `None` when the tool is not installed, else its exit status and
/// everything it said.
fn check_with(tool: &str, args: &[&str], file: &std::path::Path) -> Option<(bool, String)> {
    let out = match Command::new(tool)
        .args(args)
        .arg(file)
        .env("MANWIDTH", "80")
        .output()
    {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        other => other.unwrap(),
    };
    Some((
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

/// A stand-in for elvish's interactive `edit:` module: the completers' table, and a candidate
/// that is its text.
const ELVISH_EDIT: &str = "var edit: = (ns [&completion:=(ns [&arg-completer=[&]]) \
    &complex-candidate~={|c &display='' &code-suffix=''| put $c }])";
/// Asks the completer for `electd <TAB>`; fails unless `run` and `status` are offered.
const ELVISH_COMPLETE: &str = "var got = [($edit:completion:arg-completer[electd] electd '')]\n\
    if (not (and (has-value $got run) (has-value $got status))) { fail 'offered: '(to-string $got) }";

/// `electd completions SHELL` is accepted by each shell's own parser, and `electd man` (and a
/// command's page) by groff with every warning on, and by man.
#[test]
fn completions_and_man_pages_pass_the_shells_and_man() {
    let test = "completions_and_man_pages_pass_the_shells_and_man";
    let dir = tempfile::tempdir().unwrap();
    for (shell, check) in [
        ("bash", &["-n"][..]),
        ("zsh", &["-n"][..]),
        ("fish", &["--no-execute"][..]),
        ("elvish", &[][..]),
        ("powershell", &[][..]),
    ] {
        let (code, mut script, err) = electd(&["completions", shell], &[]);
        assert_eq!(code, Some(0), "{shell}: {err}");
        assert!(script.contains("endpoints"), "{shell}: {script}");
        if shell == "powershell" {
            // PowerShell is in no Debian archive, and Microsoft's is not reachable from here:
            // generated by clap_complete, not checked (docs/applications.md, "Shell
            // completions and man page").
            continue;
        }
        if shell == "elvish" {
            // Elvish has no parse-only mode that knows the interactive `edit:` module: the
            // script runs against a stand-in of the two names it uses, and its completer must
            // offer the subcommands.
            script = format!("{ELVISH_EDIT}\n{script}\n{ELVISH_COMPLETE}\n");
        }
        let file = dir.path().join(format!("electd.{shell}"));
        std::fs::write(&file, &script).unwrap();
        match check_with(shell, check, &file) {
            None => skip(test, &format!("{shell} is not installed")),
            Some((ok, said)) => assert!(
                ok && said.is_empty(),
                "{shell} {check:?} refuses the completions: {said}"
            ),
        }
        if shell == "zsh" {
            // A `:` of a value name is escaped, or _arguments takes it for a separator.
            assert!(
                script.contains(":IP\\:PORT:") && !script.contains(":IP:PORT:"),
                "zsh value names"
            );
        }
    }
    let (code, _, err) = electd(&["completions", "tcsh"], &[]);
    assert_eq!(code, Some(2));
    assert!(err.contains("tcsh"), "{err}");

    for page in [&[][..], &["member", "add"][..]] {
        let mut args = vec!["man"];
        args.extend(page);
        let (code, roff, err) = electd(&args, &[]);
        assert_eq!(code, Some(0), "{args:?}: {err}");
        assert!(roff.contains(".TH"), "{args:?}: {roff}");
        assert!(
            roff.contains("ELECTD_ENDPOINTS"),
            "{args:?}: the variables named: {roff}"
        );
        let file = dir.path().join("electd.1");
        std::fs::write(&file, &roff).unwrap();
        match check_with("groff", &["-man", "-Tutf8", "-ww", "-z"], &file) {
            None => skip(test, "groff is not installed"),
            Some((ok, said)) => assert!(ok && said.is_empty(), "groff -ww on {args:?}: {said}"),
        }
        match check_with("man", &["-l"], &file) {
            None => skip(test, "man (man-db) is not installed"),
            Some((ok, said)) => assert!(ok && said.is_empty(), "man -l on {args:?}: {said}"),
        }
    }
    let (code, _, err) = electd(&["man", "member", "nope"], &[]);
    assert_eq!(code, Some(2));
    assert!(err.contains("no command \"nope\""), "{err}");
}

/// The first line `child` writes to its piped stdout (waited for at most 15 s); the child is
/// killed and reaped either way.
fn first_line(mut child: std::process::Child) -> std::io::Result<String> {
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        use std::io::BufRead;
        let mut line = String::new();
        std::io::BufReader::new(stdout)
            .read_line(&mut line)
            .map(|_| line)
    });
    let until = std::time::Instant::now() + std::time::Duration::from_secs(15);
    while !reader.is_finished() && std::time::Instant::now() < until {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    reader.join().unwrap()
}
