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
    let mut child = Command::new(BIN)
        .arg("--config")
        .arg(&cfg)
        .args(["--listen", "127.0.0.1:0", "--log-format", "json"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
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
    let line = reader.join().unwrap().expect("a log line");
    let v: serde_json::Value = serde_json::from_str(line.trim()).expect("a JSON line");
    assert_eq!(v["fields"]["message"], "electd starting", "{line}");
    assert_eq!(v["level"], "INFO", "{line}");
}
