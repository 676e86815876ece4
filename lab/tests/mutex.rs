//! Mutex mode on real processes and a real PostgreSQL server of the lab's own: one holder,
//! failover after a kill, the store gone and back, and the start-up errors of a bad
//! `store_url`. Without PostgreSQL (`scripts/test.sh` installs it as root) each test is
//! skipped, and recorded as such ([`electd_lab::skip`]); a PostgreSQL that is installed and does
//! not start fails the test.

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::{describe, no_postgres, TestCluster};
use electd::clock::ms;
use electd_client::Mode;
use electd_lab::chaos::checkers::{
    cap_paused_claims, election_safety, promise_keeping, split_brain,
};
use electd_lab::chaos::record::PromisePoller;
use electd_lab::cluster::claimants;

const WAIT: Duration = Duration::from_secs(15);

/// Whether the test skips: PostgreSQL is not installed (and the skip is recorded).
fn skip() -> bool {
    match no_postgres() {
        Some(why) => {
            electd_lab::skip::skip(&why);
            true
        }
        None => false,
    }
}

/// A client of every node that records the promises it is given, on a runtime of its own
/// (so that it asks while the test waits).
fn poller(tc: &TestCluster) -> (tokio::runtime::Runtime, PromisePoller) {
    let prt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let poller = {
        let _in = prt.enter();
        PromisePoller::start(&tc.c)
    };
    (prt, poller)
}

/// Waits until the poller has recorded `more` promises more than now (the new holder's, when
/// called after a change), at most 5 s.
fn observe(poller: &PromisePoller, more: usize) {
    let want = poller.recorded() + more;
    let until = Instant::now() + Duration::from_secs(5);
    while poller.recorded() < want {
        assert!(Instant::now() < until, "no promise recorded for 5 s");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// C1, C2 and C6 over the run: one holder per term, never two claimants, no promise broken.
fn assert_kept(tc: &TestCluster, promises: Vec<electd_lab::chaos::record::Promise>) {
    let mut log = tc.run_log(None, None);
    log.promises = promises;
    let log = cap_paused_claims(&log, ms(tc.timing.effective_lease_ms()));
    let c1 = election_safety(&log).expect("mutex claims are leased");
    assert!(c1.safe, "a term with two holders: {:?}", c1.conflicts);
    let sb = split_brain(&log);
    assert_eq!(sb.split_brain_ns, 0, "two claimants: {:?}", sb.spans);
    let c6 = promise_keeping(&log).expect("promises were recorded");
    assert!(c6.broken.is_empty(), "promises broken: {:?}", c6.broken);
    eprintln!("{} promises kept", c6.promises);
}

#[test]
fn one_holder_and_a_new_one_with_a_higher_term_after_a_kill() {
    if skip() {
        return;
    }
    let rt = TestCluster::rt();
    let mut tc = TestCluster::start(Mode::Mutex, 3);
    let (prt, poller) = poller(&tc);
    let first = rt
        .block_on(tc.c.wait_agreed(WAIT))
        .expect("one holder within 15 s");
    observe(&poller, 30);
    let term = rt.block_on(tc.c.leader_info(first)).unwrap().term;
    let killed = Instant::now();
    tc.kill(first);
    let next = rt
        .block_on(tc.c.wait_agreed(WAIT))
        .expect("a new holder within 15 s of the kill");
    let took = killed.elapsed();
    assert_ne!(next, first);
    let next_term = rt.block_on(tc.c.leader_info(next)).unwrap().term;
    assert!(next_term > term, "term {next_term} after {term}");
    eprintln!("failover after a kill: {took:?} (the row's lease is 300 ms)");
    observe(&poller, 30);
    let promises = prt.block_on(poller.finish());
    assert_kept(&tc, promises);
}

#[test]
fn the_store_gone_ends_the_claim_and_nobody_claims_until_it_is_back() {
    if skip() {
        return;
    }
    let rt = TestCluster::rt();
    let mut tc = TestCluster::start(Mode::Mutex, 3);
    let (prt, poller) = poller(&tc);
    let holder = rt.block_on(tc.c.wait_agreed(WAIT)).expect("a holder");
    observe(&poller, 30);
    tc.c.store.as_mut().expect("the store").kill();
    let gone = Instant::now();
    // The claim ends within the claim lease (240 ms) and a beat; nobody claims meanwhile.
    let ok = rt.block_on(tc.c.wait_for(WAIT, |s| claimants(s).is_empty()));
    let ended = gone.elapsed();
    assert!(ok, "{}", describe(&rt.block_on(tc.c.states())));
    assert!(
        ended < Duration::from_millis(240 + 50 + 400),
        "the claim ran {ended:?} past the store's end"
    );
    for _ in 0..10 {
        std::thread::sleep(Duration::from_millis(100));
        let states = rt.block_on(tc.c.states());
        assert!(claimants(&states).is_empty(), "{}", describe(&states));
        // The API keeps answering.
        rt.block_on(tc.c.status(holder)).expect("the node answers");
    }
    tc.c.store
        .as_mut()
        .expect("the store")
        .start()
        .expect("the store restarts");
    let back = rt
        .block_on(tc.c.wait_agreed(WAIT))
        .expect("a holder once the store is back");
    eprintln!("claim ended {ended:?} after the store was killed; holder {back} once it was back");
    observe(&poller, 30);
    let promises = prt.block_on(poller.finish());
    assert_kept(&tc, promises);
}

/// A bad `store_url` is an error that names the field: a malformed URL or none at all in mutex
/// mode at configuration (exit 2), a wrong password or a missing database at start (exit 1).
#[test]
fn a_bad_store_url_is_refused_naming_the_field() {
    if skip() {
        return;
    }
    let mut tc = TestCluster::configure(Mode::Mutex, 1, common::TEST_TIMING);
    let ip = tc.block.store_ip();
    tc.c.start_store(&ip, electd_lab::cluster::BLOCK_STORE_PORT)
        .expect("the store starts");
    let good = tc.c.store_url().expect("a url");
    let member = tc.c.member(1).unwrap().clone();
    let run = |url: Option<&str>| {
        let mut cmd = Command::new(electd_lab::bin::electd_bin().unwrap());
        cmd.arg("--config")
            .arg(&member.config)
            .args(["--mode", "mutex", "--insecure"])
            .env_remove("ELECTD_STORE_URL");
        if let Some(u) = url {
            cmd.env("ELECTD_STORE_URL", u);
        }
        let out = cmd.output().expect("electd runs");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, err) = run(None);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("store_url: mutex mode needs one"), "{err}");
    let (code, err) = run(Some("mysql://x@h/db"));
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("store_url"), "{err}");
    let (user, at) = good.split_once('@').expect("user@host");
    let user = user.rsplit_once(':').expect("user:password").0;
    let wrong_password = format!("{user}:wrong@{at}");
    let (code, err) = run(Some(&wrong_password));
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("store_url") && err.contains("refused"),
        "{err}"
    );
    let no_db = good
        .rsplit_once('/')
        .map(|(a, _)| format!("{a}/nosuchdb"))
        .unwrap();
    let (code, err) = run(Some(&no_db));
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("store_url") && err.contains("nosuchdb"),
        "{err}"
    );
}
