//! `/metrics` of a live quorum node after an election, read by parsers nobody here wrote:
//! Python's `prometheus_client` OpenMetrics parser on the OpenMetrics body, and `promtool
//! check metrics` on the classic text body (`scripts/test.sh` installs both as root; a check
//! whose tool is missing is skipped and recorded as such, [`electd_lab::skip`], and one whose
//! tool is there and does not run fails the test). Then what the histograms and per-peer
//! gauges must hold after that election.

mod common;

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{sample, TestCluster};
use electd_client::Mode;

const WAIT: Duration = Duration::from_secs(15);

/// `/metrics` of `addr`, asking for OpenMetrics or not; the body and its content type.
async fn scrape(addr: &str, openmetrics: bool) -> (String, String) {
    let mut req = reqwest::Client::new().get(format!("http://{addr}/metrics"));
    if openmetrics {
        req = req.header(
            "accept",
            "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5",
        );
    }
    let resp = req
        .timeout(Duration::from_secs(5))
        .send()
        .await
        .expect("scrape");
    let kind = resp.headers()["content-type"].to_str().unwrap().to_string();
    (resp.text().await.unwrap(), kind)
}

/// Runs `cmd` with `input` on its stdin: `Err(why)` when it cannot run at all, else its exit
/// status and its output.
fn run_with_input(cmd: &mut Command, input: &str) -> std::io::Result<(bool, String)> {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output()?;
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    Ok((out.status.success(), text))
}

const PARSE: &str = "import sys\n\
from prometheus_client.openmetrics.parser import text_string_to_metric_families\n\
fams = list(text_string_to_metric_families(sys.stdin.read()))\n\
print(' '.join(sorted(f.name for f in fams)))\n";

#[test]
fn metrics_parse_with_tools_nobody_here_wrote_and_hold_the_election() {
    let rt = TestCluster::rt();
    let mut tc = TestCluster::start(Mode::Quorum, 3);
    let first = rt.block_on(tc.c.wait_agreed(WAIT)).expect("a leader");
    tc.kill(first);
    let leader = rt
        .block_on(tc.c.wait_agreed_other_than(Some(first), WAIT))
        .expect("a new leader");
    let addr = tc.c.member(leader).unwrap().addr.clone();
    let ((om, om_kind), (classic, classic_kind)) =
        rt.block_on(async { (scrape(&addr, true).await, scrape(&addr, false).await) });
    assert!(
        om_kind.starts_with("application/openmetrics-text"),
        "{om_kind}"
    );
    assert!(om.ends_with("# EOF\n"), "{om}");
    assert!(
        classic_kind.starts_with("text/plain; version=0.0.4"),
        "{classic_kind}"
    );

    // What an operator tunes by, after one election won by `leader`.
    let at_least = |series: &str, min: f64| {
        let v = sample(&classic, series).unwrap_or_else(|| panic!("no {series}:\n{classic}"));
        assert!(v >= min, "{series} = {v}, expected at least {min}");
        v
    };
    at_least("electd_probe_round_trip_seconds_count", 1.0);
    at_least("electd_election_duration_seconds_count", 1.0);
    let took = at_least("electd_election_duration_seconds_sum", 0.0);
    assert!(took < WAIT.as_secs_f64(), "election took {took} s");
    at_least("electd_leaderless_seconds_count", 1.0);
    at_least("electd_role{role=\"leader\"}", 1.0);
    at_least("electd_lease_remaining_seconds", 0.0);
    at_least("electd_start_time_seconds", 1.7e9);
    let survivor = tc.c.ids().into_iter().find(|&i| i != leader && i != first);
    let survivor = survivor.expect("a third node");
    let contact = at_least(
        &format!("electd_peer_last_contact_seconds{{peer=\"{survivor}\"}}"),
        0.0,
    );
    assert!(contact < 5.0, "the live peer last heard {contact} s ago");
    // Issue 52, item 4: what runs, and the process's own figures, named by convention.
    let info = format!(
        "electd_build_info{{version=\"{}\",commit=",
        env!("CARGO_PKG_VERSION")
    );
    assert!(
        classic
            .lines()
            .any(|l| l.starts_with(&info) && l.contains("mode=\"quorum\"") && l.ends_with(" 1")),
        "no {info}…,mode=\"quorum\"}} 1:\n{classic}"
    );
    at_least("process_cpu_seconds_total", 0.0);
    at_least("process_resident_memory_bytes", 1e6);
    at_least("process_virtual_memory_bytes", 1e6);
    at_least("process_open_fds", 3.0);
    at_least("process_max_fds", 64.0);
    at_least("process_start_time_seconds", 1.7e9);
    for old in ["electd_uptime_ms", "electd_lease_remaining_ms"] {
        assert!(!classic.contains(old), "{old} is still served");
    }

    // The tools.
    let mut skipped = Vec::new();
    match run_with_input(Command::new("python3").args(["-c", PARSE]), &om) {
        Ok((true, names)) => {
            for name in [
                "electd_election_duration_seconds",
                "electd_watch_lag_seconds",
                "electd_build_info",
                "process_resident_memory_bytes",
            ] {
                assert!(names.contains(name), "{name} not parsed: {names}");
            }
            eprintln!("prometheus_client parsed: {}", names.trim());
        }
        Ok((false, why)) if why.contains("ModuleNotFoundError") => skipped.push(format!(
            "python's prometheus_client is missing: {}",
            why.trim()
        )),
        Ok((false, why)) => panic!("the OpenMetrics parser refused /metrics: {why}\n{om}"),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            skipped.push(format!("python3 is not installed: {e}"))
        }
        Err(e) => panic!("python3 cannot run: {e}"),
    }
    match run_with_input(
        Command::new("promtool").args(["check", "metrics"]),
        &classic,
    ) {
        Ok((ok, problems)) => assert!(
            ok && problems.trim().is_empty(),
            "promtool check metrics: {problems}\n{classic}"
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => skipped.push(format!(
            "promtool is not installed (Debian's prometheus package): {e}"
        )),
        Err(e) => panic!("promtool cannot run: {e}"),
    }
    // A test that left out a check is a skip, not a pass.
    for why in skipped {
        electd_lab::skip::skip(&format!("part of the metrics check: {why}"));
    }
}

/// `electd_claims_ended_total{cause}`, which the alert ElectdClaimLost reads: a leader that
/// resigns counts `resigned` and no loss; a leader cut off from the others counts `lost`.
#[test]
fn a_claim_lost_is_counted_apart_from_a_resignation() {
    let rt = TestCluster::rt();
    let tc = TestCluster::start(Mode::Quorum, 3);
    let ended = |id, cause: &str| {
        let addr = tc.c.member(id).unwrap().addr.clone();
        let (text, _) = rt.block_on(scrape(&addr, false));
        let series = format!("electd_claims_ended_total{{cause=\"{cause}\"}}");
        sample(&text, &series).unwrap_or_else(|| panic!("no {series}:\n{text}"))
    };
    let first = rt.block_on(tc.c.wait_agreed(WAIT)).expect("a leader");
    assert_eq!(ended(first, "lost"), 0.0, "every cause from 0");
    rt.block_on(tc.c.client(first).unwrap().resign(None))
        .expect("resign");
    let second = rt
        .block_on(tc.c.wait_agreed_other_than(Some(first), WAIT))
        .expect("a new leader");
    assert_eq!(ended(first, "resigned"), 1.0);
    assert_eq!(ended(first, "lost"), 0.0, "a resignation is no loss");

    let rest: Vec<_> = tc.c.ids().into_iter().filter(|&i| i != second).collect();
    rt.block_on(tc.c.partition(&[vec![second], rest]))
        .expect("partition");
    let until = std::time::Instant::now() + WAIT;
    while ended(second, "lost") < 1.0 {
        assert!(
            std::time::Instant::now() < until,
            "node {second}, cut off, still counts no claim lost after {WAIT:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(ended(second, "resigned"), 0.0);
    rt.block_on(tc.c.heal()).expect("heal");
}
