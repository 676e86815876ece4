//! `docs/openapi.yaml` against a live node, by schemathesis (a property-based API tester from
//! PyPI that nobody here wrote; `scripts/test.sh` installs it into `target/py`): every
//! operation, with the admin token, positive and negative inputs (its configuration:
//! `lab/tests/schemathesis.toml`). Passes only with 0 server errors, every response matching its
//! schema, and bad input getting a documented 4xx. Without schemathesis the test is skipped, and
//! recorded as such ([`electd_lab::skip`]); a schemathesis that is there and does not run fails
//! it.

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use common::TestCluster;
use electd_client::Mode;

#[test]
fn the_api_matches_its_openapi_document() {
    match Command::new("schemathesis").arg("--version").output() {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            electd_lab::skip::skip(
                "schemathesis is not installed (scripts/test.sh installs it into target/py)",
            );
            return;
        }
        Err(e) => panic!("schemathesis --version cannot run: {e}"),
        Ok(o) => assert!(
            o.status.success(),
            "schemathesis --version fails: {}",
            String::from_utf8_lossy(&o.stderr)
        ),
    }
    let spec = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/openapi.yaml");
    let rt = TestCluster::rt();
    // One node of its own: the admin operations (fault sets, resign) touch nothing else.
    let tc = TestCluster::start(Mode::Quorum, 1);
    let leader = rt.block_on(tc.c.wait_agreed(Duration::from_secs(15)));
    assert_eq!(leader, Some(1), "the single node leads");
    let addr = tc.c.member(1).unwrap().addr.clone();
    let token =
        tc.c.admin_token()
            .expect("the test cluster has an admin token");
    let reports = tempfile::tempdir().unwrap();
    let seed = std::env::var("ELECTD_SCHEMATHESIS_SEED")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or_else(|| electd::clock::mono_ns() % 1_000_000);
    eprintln!("schemathesis seed {seed} (replay: ELECTD_SCHEMATHESIS_SEED={seed})");
    let config = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/schemathesis.toml");
    let out = Command::new("schemathesis")
        .arg("--config-file")
        .arg(&config)
        .arg("run")
        .arg(&spec)
        .args(["--url", &format!("http://{addr}")])
        .args(["-H", &format!("Authorization: Bearer {token}")])
        .args(["--checks", "all"])
        .args(["--phases", "examples,coverage,fuzzing"])
        .args(["--max-examples", "60", "--seed", &seed.to_string()])
        .args(["--workers", "1", "--request-timeout", "10"])
        .args(["--no-color", "--report-dir"])
        .arg(reports.path())
        .output()
        .expect("schemathesis runs");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    let summary: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.contains("SUMMARY"))
        .collect();
    eprintln!("{}", summary.join("\n"));
    assert!(out.status.success(), "schemathesis found problems:\n{text}");
    assert!(
        rt.block_on(tc.c.client(1).unwrap().health()).is_ok(),
        "the node is still healthy after the run"
    );
}
