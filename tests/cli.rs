//! The binary's contract at start: config errors exit 2 naming the field; a corrupt state file
//! stops the node with an error naming the file, and leaves the file as it was.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_electd");

fn write_config(dir: &std::path::Path, extra: &str) -> std::path::PathBuf {
    // No node of these tests talks to its peers: they are refused before (config) or right
    // after binding (state file), and a node that binds is given `--listen 127.0.0.1:0`.
    let mut text = format!("id = 1\ndata_dir = \"data\"\n{extra}\n");
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
        err.contains("timing.heartbeat_ms (5000) must be below timing.follower_lease_ms (150)"),
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
    let state = data.join(electd::quorum::storage::STATE_FILE);
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
