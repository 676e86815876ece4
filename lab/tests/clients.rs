//! The client libraries of other languages, each against a live cluster of its own that its
//! test starts: `clients/python` (its unit tests and live tests, and `mypy --strict`) and
//! `clients/go` (`go vet`, `go test -race`). Their live tests pause a holder's node and judge
//! every holding they saw whole; the lab polls the same roles and the cluster's claim meanwhile
//! and judges every promise it was given (C6 per role). A missing tool is a skip
//! ([`electd_lab::skip`]; `scripts/test.sh` installs Go, and mypy into `target/py`); a skip
//! inside the client's own suite fails the test.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::{role_poller, role_promises_kept, TestCluster};
use electd_client::{Mode, RoleName};

/// Whether `program args` runs: `None` when the program is missing (the reason to skip),
/// a panic when it is there and fails.
fn runs(program: &str, args: &[&str], skip_reason: &str) -> bool {
    match Command::new(program).args(args).output() {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            electd_lab::skip::skip(skip_reason);
            false
        }
        Err(e) => panic!("{program} {args:?} cannot run: {e}"),
        Ok(o) if o.status.success() => true,
        Ok(o) if String::from_utf8_lossy(&o.stderr).contains("No module named") => {
            electd_lab::skip::skip(skip_reason);
            false
        }
        Ok(o) => panic!(
            "{program} {args:?} fails: {}",
            String::from_utf8_lossy(&o.stderr)
        ),
    }
}

/// Runs `program args` in `dir` against a 3-node cluster of its own (`ELECTD_TEST_NODES`,
/// `ELECTD_TEST_PIDS`, `ELECTD_TEST_ADMIN_TOKEN`), judging the promises of `roles` (the ones its
/// live tests use) and of the cluster's claim; fails if it fails or prints `skip_mark`.
fn against_a_live_cluster(
    dir: &Path,
    program: &str,
    args: &[&str],
    roles: &[&str],
    skip_mark: &str,
) {
    let rt = TestCluster::rt();
    let tc = TestCluster::start(Mode::Quorum, 3);
    assert!(
        rt.block_on(tc.c.wait_agreed(Duration::from_secs(20)))
            .is_some(),
        "the cluster elects a leader"
    );
    let ids = tc.c.ids();
    let roles: Vec<RoleName> = roles.iter().map(|r| RoleName::new(*r).unwrap()).collect();
    let (poller_rt, poller) = role_poller(&tc, &ids, &roles);
    let join =
        |f: &dyn Fn(u64) -> String| ids.iter().map(|id| f(*id)).collect::<Vec<_>>().join(",");
    let nodes = join(&|id| tc.c.member(id).unwrap().addr.clone());
    let pids = join(&|id| tc.c.pid(id).expect("node runs").to_string());
    // At most 5 minutes: a client suite that hangs fails here instead of holding the run up.
    let out = Command::new("timeout")
        .args(["-s", "KILL", "300", program])
        .args(args)
        .current_dir(dir)
        .env("ELECTD_TEST_NODES", &nodes)
        .env("ELECTD_TEST_PIDS", &pids)
        .env(
            "ELECTD_TEST_ADMIN_TOKEN",
            tc.c.admin_token().unwrap_or_default(),
        )
        .output()
        .expect("the client's tests run");
    // A paused node is resumed whatever the client's tests did.
    for id in &ids {
        if let Some(pid) = tc.c.pid(*id).and_then(rustix::process::Pid::from_raw) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::CONT);
        }
    }
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    eprintln!("{text}");
    assert!(out.status.success(), "the client's tests failed");
    assert!(
        !text.contains(skip_mark),
        "the client's suite skipped tests: the live ones must run here"
    );
    let kept = role_promises_kept(poller_rt, poller);
    assert!(
        kept.promises >= 5,
        "too few role promises: {}",
        kept.promises
    );
    tc.assert_safe();
}

/// The outcome of `program args` in `dir`; a panic naming `what` when it fails.
fn check(dir: &Path, what: &str, program: &str, args: &[&str]) {
    // At most 5 minutes: a client suite that hangs fails here instead of holding the run up.
    let out = Command::new("timeout")
        .args(["-s", "KILL", "300", program])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("{what} cannot run: {e}"));
    assert!(
        out.status.success(),
        "{what}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn clients_dir(lang: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../clients")
        .join(lang)
}

#[test]
fn the_python_client_keeps_its_promises_on_a_live_cluster() {
    let missing = "python3 or mypy is not installed (scripts/test.sh installs mypy into target/py)";
    if !runs("python3", &["-m", "mypy", "--version"], missing) {
        return;
    }
    let dir = clients_dir("python");
    let cache = tempfile::tempdir().unwrap();
    let cache = cache.path().to_str().unwrap();
    check(
        &dir,
        "mypy --strict",
        "python3",
        &[
            "-m",
            "mypy",
            "--strict",
            "--cache-dir",
            cache,
            "electd",
            "tests",
            "example.py",
        ],
    );
    against_a_live_cluster(
        &dir,
        "python3",
        &[
            "-B", "-m", "unittest", "discover", "-s", "tests", "-t", ".", "-v",
        ],
        &["py-job", "py-watched"],
        "skipped",
    );
}

#[test]
fn the_go_client_keeps_its_promises_on_a_live_cluster() {
    if !runs(
        "go",
        &["version"],
        "go is not installed (scripts/test.sh installs it)",
    ) {
        return;
    }
    let dir = clients_dir("go");
    check(
        &dir,
        "gofmt -l",
        "sh",
        &["-c", "test -z \"$(gofmt -l .)\" || { gofmt -l .; exit 1; }"],
    );
    check(&dir, "go vet", "go", &["vet", "./..."]);
    against_a_live_cluster(
        &dir,
        "go",
        &["test", "-race", "-count=1", "-v", "./..."],
        &["go-job", "go-watched"],
        "--- SKIP",
    );
}
