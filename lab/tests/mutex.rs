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
    cap_paused_claims, claim_intervals, election_safety, promise_keeping, split_brain,
};
use electd_lab::chaos::record::{Dropped, Promise, PromisePoller};
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

/// C1, C2 and C6 over the run: one holder per term, never two claimants, no promise broken;
/// and every event log and nearly every answer read (issue 48, item 7).
fn assert_kept(tc: &TestCluster, polled: (Vec<Promise>, Dropped)) {
    let (promises, polled) = polled;
    let mut log = tc.run_log(None, None);
    log.promises = promises;
    log.dropped = Dropped {
        event_logs: log.dropped.event_logs,
        ..polled
    };
    let unread = log.dropped.problems();
    assert!(unread.is_empty(), "not read: {unread:?}");
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
    let killed_ns = electd::clock::mono_ns();
    tc.c.store.as_mut().expect("the store").kill();
    let gone = Instant::now();
    // Nobody claims once the claim has ended.
    let ok = rt.block_on(tc.c.wait_for(WAIT, |s| claimants(s).is_empty()));
    let ended = gone.elapsed();
    assert!(ok, "{}", describe(&rt.block_on(tc.c.states())));
    // The claim ended within the claim lease (240 ms) of the store's end, as the holder's event
    // log stamps it: from its last answered statement, which went out before the kill. (Judged
    // from the log, not from when this test saw it: a busy host's poll comes late, and a
    // bound of 690 ms on that was a time the test could cross; issue 48, item 10.)
    let lease_ns = ms(tc.timing.effective_lease_ms());
    let last_end = claim_intervals(&tc.run_log(None, None))
        .iter()
        .filter(|c| c.node == holder)
        .map(|c| c.to_ns)
        .max()
        .expect("the holder's claim");
    assert!(
        last_end <= killed_ns + lease_ns,
        "the claim ran {:.1} ms past the store's end (lease {} ms)",
        (last_end.saturating_sub(killed_ns)) as f64 / 1e6,
        tc.timing.effective_lease_ms()
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

/// Issue 33, item 1: the row deleted under the holder (by hand, or a restore from a backup)
/// five times over. Before, the next insert started again at term 1 and another node took it
/// at once, inside the holder's promise (3 trials of 5 by hand: two claimants, both in term
/// 1). Now a row created again is held by nobody, with a term above every term seen, and is
/// taken only once seen unchanged for a whole lease: every promise kept, terms only grow.
#[test]
fn a_deleted_row_gives_no_second_claimant_and_terms_never_go_back() {
    if skip() {
        return;
    }
    let rt = TestCluster::rt();
    let tc = TestCluster::start(Mode::Mutex, 3);
    let (prt, poller) = poller(&tc);
    let mut term = 0;
    for trial in 0..5 {
        let holder = rt
            .block_on(tc.c.wait_for(WAIT, |s| {
                claimants(s).len() == 1
                    && s.values().all(|o| match o {
                        electd_lab::cluster::Observed::Up(i) => i.term > term,
                        _ => true,
                    })
            }))
            .then(|| claimants(&rt.block_on(tc.c.states()))[0]);
        let holder = holder.unwrap_or_else(|| {
            panic!(
                "trial {trial}: no holder in a term above {term} within 15 s: {}",
                describe(&rt.block_on(tc.c.states()))
            )
        });
        observe(&poller, 20);
        term = rt.block_on(tc.c.leader_info(holder)).unwrap().term;
        let store = tc.c.store.as_ref().expect("the store");
        let deleted = store
            .sql("DELETE FROM electd_lease_v2 RETURNING term")
            .unwrap();
        eprintln!(
            "trial {trial}: node {holder} held term {term}; deleted the row of term {deleted}"
        );
    }
    let promises = prt.block_on(poller.finish());
    assert_kept(&tc, promises);
}

/// Issue 33, item 1: a second process with the holder's id (a force-deleted pod started again
/// elsewhere, its old one still running). Before, both got "mine" from the store and claimed
/// the same term at once. Now each process draws an instance that the row keeps: the second
/// one is a contender like any other, and takes the row (in a higher term) only once the first
/// is gone.
#[test]
fn two_processes_with_one_id_never_claim_at_once() {
    if skip() {
        return;
    }
    let rt = TestCluster::rt();
    // One node, so that the twin is the only other contender.
    let mut tc = TestCluster::start(Mode::Mutex, 1);
    let holder = rt.block_on(tc.c.wait_agreed(WAIT)).expect("a holder");
    let term = rt.block_on(tc.c.leader_info(holder)).unwrap().term;
    // The twin: the holder's config, its own address (node 9's of this block) and data dir.
    let twin_addr = format!(
        "{}:{}",
        tc.block.ip(9),
        electd_lab::cluster::BLOCK_NODE_PORT
    );
    let data = tempfile::tempdir().unwrap();
    let member = tc.c.member(holder).unwrap().clone();
    let twin = Command::new(electd_lab::bin::electd_bin().unwrap())
        .arg("--config")
        .arg(&member.config)
        .args(["--mode", "mutex", "--insecure", "--listen", &twin_addr])
        .arg("--data-dir")
        .arg(data.path())
        .env("ELECTD_STORE_URL", tc.c.store_url().unwrap())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("the twin starts");
    // Killed and reaped however the test ends (a failed assertion too).
    let _twin = Reaped(twin);
    let original = tc.c.client(holder).unwrap();
    let twin_client = electd_client::Client::new(twin_addr.clone(), Duration::from_secs(1));
    // Every answer that says leader is a promise to `lease_ms` after it was asked.
    let promises = |c: &electd_client::Client, until: Instant| {
        let mut out = Vec::new();
        while Instant::now() < until {
            let asked = Instant::now();
            if let Ok(i) = rt.block_on(c.leader()) {
                if let (electd_client::Role::Leader, Some(l)) = (i.role, i.lease_ms) {
                    out.push((asked, asked + Duration::from_millis(l), i.term));
                }
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        out
    };
    let until = Instant::now() + Duration::from_secs(3);
    let (mine, theirs) = std::thread::scope(|s| {
        let a = s.spawn(|| promises(&original, until));
        let b = s.spawn(|| promises(&twin_client, until));
        (a.join().unwrap(), b.join().unwrap())
    });
    let overlaps = mine
        .iter()
        .flat_map(|a| theirs.iter().map(move |b| (a, b)))
        .filter(|(a, b)| a.0 < b.1 && b.0 < a.1)
        .count();
    eprintln!(
        "original: {} promises, twin: {} promises, overlapping: {overlaps}",
        mine.len(),
        theirs.len()
    );
    assert!(!mine.is_empty(), "the original holder stopped promising");
    assert_eq!(
        overlaps, 0,
        "two processes of node {holder} promised at once"
    );
    // The original gone, the twin takes the row, in a higher term.
    tc.kill(holder);
    let deadline = Instant::now() + WAIT;
    let taken = loop {
        if let Ok(i) = rt.block_on(twin_client.leader()) {
            if i.role == electd_client::Role::Leader {
                break i.term;
            }
        }
        assert!(Instant::now() < deadline, "the twin never took the row");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(
        taken > term,
        "the twin took term {taken}, the original held {term}"
    );
}

/// Issue 33, item 1: the holder resigns while its renewal waits on a row lock that another
/// session holds; the renewal then runs, in the term it gave up. Before, the node refused to
/// claim in that term but renewed the row every beat once its pause after the resignation was
/// over, so nobody could take it until the node restarted. Now it releases the row (and never
/// renews a fenced term), and another node holds it within a few leases.
#[test]
fn a_resign_racing_a_held_statement_releases_the_row() {
    if skip() {
        return;
    }
    let rt = TestCluster::rt();
    let tc = TestCluster::start(Mode::Mutex, 3);
    let (prt, poller) = poller(&tc);
    let holder = rt.block_on(tc.c.wait_agreed(WAIT)).expect("a holder");
    observe(&poller, 20);
    let store = tc.c.store.as_ref().expect("the store");
    // Another session locks the row for 600 ms: the holder's renewal waits, its answer comes
    // too late (a statement's deadline is 100 ms), and it runs once the lock goes, after the
    // resignation, renewing the row in the term given up.
    let mut locker = store
        .sql_in_background(
            "BEGIN; SELECT 1 FROM electd_lease_v2 FOR UPDATE; SELECT pg_sleep(0.6); COMMIT;",
        )
        .unwrap();
    // Until the holder's renewal waits on the lock (at most 2 s).
    let waiting = "SELECT count(*) FROM pg_locks WHERE NOT granted";
    let until = Instant::now() + Duration::from_secs(2);
    while store.sql(waiting).unwrap() == "0" {
        assert!(
            Instant::now() < until,
            "no statement waited on the row lock"
        );
    }
    let resigned = rt
        .block_on(tc.c.client(holder).unwrap().resign(None))
        .expect("the holder resigns");
    locker.wait().unwrap();
    let next = rt
        .block_on(tc.c.wait_for(Duration::from_secs(5), |s| {
            claimants(s).len() == 1 && claimants(s)[0] != holder
        }))
        .then(|| claimants(&rt.block_on(tc.c.states()))[0]);
    assert!(
        next.is_some(),
        "nobody took the row within 5 s of node {holder}'s resignation of term {}: {}",
        resigned.term,
        describe(&rt.block_on(tc.c.states()))
    );
    observe(&poller, 20);
    let promises = prt.block_on(poller.finish());
    assert_kept(&tc, promises);
}

/// Issue 33, item 1: a server whose default is `synchronous_commit = off` answers a renewal
/// before it is on disk, and a crash loses it (the row then expires early, and a term is handed
/// out twice). Each node's session asks for `on`, and says so in `/v1/status`; before, nothing
/// was asked, and the session kept the server's `off`.
#[test]
fn each_session_keeps_its_commits_durable_whatever_the_server_default() {
    if skip() {
        return;
    }
    let rt = TestCluster::rt();
    let mut tc = TestCluster::configure(Mode::Mutex, 2, common::TEST_TIMING);
    let ip = tc.block.store_ip();
    tc.c.start_store(&ip, electd_lab::cluster::BLOCK_STORE_PORT)
        .expect("the store starts");
    let store = tc.c.store.as_ref().expect("the store");
    store
        .sql("ALTER SYSTEM SET synchronous_commit = off")
        .unwrap();
    store.sql("SELECT pg_reload_conf()").unwrap();
    assert_eq!(store.sql("SHOW synchronous_commit").unwrap(), "off");
    for id in tc.c.ids() {
        tc.start_node(id);
    }
    rt.block_on(tc.c.wait_agreed(WAIT)).expect("a holder");
    for id in tc.c.ids() {
        let status = rt.block_on(tc.c.status(id)).unwrap();
        let engine = serde_json::to_value(&status).unwrap()["engine"].clone();
        assert_eq!(
            engine["store_synchronous_commit"], "on",
            "node {id}: {engine}"
        );
    }
}

/// A child process that is killed and reaped when dropped.
struct Reaped(std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// How many answers of node `id`'s store had a bad row, by field (`electd_store_bad_rows_total`).
fn bad_rows(rt: &tokio::runtime::Runtime, tc: &TestCluster, id: u64, field: &str) -> u64 {
    rt.block_on(tc.c.status(id))
        .map(|s| s.counters.bad_store_rows.get(field).copied().unwrap_or(0))
        .unwrap_or(0)
}

/// Every running node answers `/v1/health` with 200: no beat died (a panic under the lease lock
/// did), and none exited.
fn all_healthy(rt: &tokio::runtime::Runtime, tc: &TestCluster, killed: u64) {
    for id in tc.c.ids().into_iter().filter(|&id| id != killed) {
        let h = rt.block_on(tc.c.client(id).unwrap().health());
        assert!(h.is_ok(), "node {id} is not healthy: {h:?}");
    }
}

/// The one holder, once one claims in a term above `above` (at most 15 s).
fn holder_above(
    rt: &tokio::runtime::Runtime,
    tc: &TestCluster,
    above: u64,
    what: &str,
) -> (u64, u64) {
    let ok = rt.block_on(tc.c.wait_for(WAIT, |s| {
        let c = claimants(s);
        c.len() == 1 && matches!(&s[&c[0]], electd_lab::cluster::Observed::Up(i) if i.term > above)
    }));
    let states = rt.block_on(tc.c.states());
    assert!(
        ok,
        "{what}: no holder in a term above {above}: {}",
        describe(&states)
    );
    let h = claimants(&states)[0];
    (h, rt.block_on(tc.c.leader_info(h)).unwrap().term)
}

/// Issue 48, item 2: the row's values are input. A term near i64::MAX made every statement
/// overflow (nobody claimed again, and a node that recorded the term kept it across restarts);
/// a huge `wait_ms` overflowed the instant a contender may take (a panic in a debug build, a
/// wrap and an early take in a release one); a renewal kept the row's term, so a row restored
/// with an older term naming the holder's process made terms go back. Now each bad value is
/// named (`electd_store_bad_rows_total`), nothing panics, a bad term is taken into a term above
/// every term claimed, a bad wait waits the longest any holder writes, and a restored older term
/// is renewed into a new one: every promise kept, the terms claimed never go back.
#[test]
fn bad_values_in_the_row_are_named_and_break_nothing() {
    if skip() {
        return;
    }
    let rt = TestCluster::rt();
    let mut tc = TestCluster::start(Mode::Mutex, 3);
    let (prt, poller) = poller(&tc);
    let (holder, t1) = holder_above(&rt, &tc, 0, "at start");
    observe(&poller, 20);
    let sql = |tc: &TestCluster, q: &str| {
        tc.c.store.as_ref().expect("the store").sql(q).unwrap();
    };

    // 1. The term i64::MAX while the holder is paused: the others see it, name it, and one
    // takes the row (after the wait) into a term of the sequence's, above t1.
    tc.rec.pause(&tc.c, holder);
    sql(&tc, "UPDATE electd_lease_v2 SET term = 9223372036854775807");
    let (h2, t2) = holder_above(&rt, &tc, t1, "after the term i64::MAX");
    tc.rec.resume(&tc.c, holder);
    assert!(t2 < (1 << 53), "claimed in a term out of range: {t2}");
    let named: u64 =
        tc.c.ids()
            .iter()
            .map(|&id| bad_rows(&rt, &tc, id, "term"))
            .sum();
    assert!(named > 0, "nobody named the bad term");
    // A node that saw the bad term, restarted, still speaks to the store (before, the term it
    // recorded made every statement of its overflow).
    let seer = *tc
        .c
        .ids()
        .iter()
        .find(|&&id| id != h2 && bad_rows(&rt, &tc, id, "term") > 0)
        .expect("a node other than the new holder saw the bad term");
    tc.kill(seer);
    tc.start_node(seer);
    let sees = rt.block_on(tc.c.wait_for(WAIT, |s| {
        matches!(&s.get(&seer), Some(electd_lab::cluster::Observed::Up(i)) if i.leader.is_some())
    }));
    assert!(sees, "node {seer} restarted and never read the row again");
    observe(&poller, 20);

    // 2. A restored row naming the holder's process with an older term: the holder renews it
    // into a new term, never back to term 1.
    let (h3, t3) = holder_above(&rt, &tc, t2 - 1, "before the restore");
    sql(&tc, "UPDATE electd_lease_v2 SET term = 1");
    let (h4, t4) = holder_above(&rt, &tc, t3, "after a restore to term 1");
    assert_eq!(h4, h3, "the holder keeps the row");
    observe(&poller, 20);

    // 3. A huge wait with the holder killed: nobody panics, nobody takes the row for 2 s (the
    // wait counts as 600 s), and the bad value is named; a deleted row is taken again.
    tc.kill(h4);
    sql(
        &tc,
        "UPDATE electd_lease_v2 SET wait_ms = 9223372036854775807",
    );
    let until = Instant::now() + Duration::from_secs(2);
    while Instant::now() < until {
        let states = rt.block_on(tc.c.states());
        assert!(claimants(&states).is_empty(), "{}", describe(&states));
        std::thread::sleep(Duration::from_millis(50));
    }
    all_healthy(&rt, &tc, h4);
    let named: u64 =
        tc.c.ids()
            .iter()
            .map(|&id| bad_rows(&rt, &tc, id, "wait_ms"))
            .sum();
    assert!(named > 0, "nobody named the bad wait");
    sql(&tc, "DELETE FROM electd_lease_v2");
    let (_, t5) = holder_above(&rt, &tc, t4, "after the bad row was deleted");
    eprintln!(
        "terms claimed: {t1}, {t2} (after the term i64::MAX), {t4} (after a restore to 1), {t5}"
    );
    observe(&poller, 20);
    let promises = prt.block_on(poller.finish());
    // The terms claimed, in the order clients heard them, never go back.
    let mut heard: Vec<(u64, u64)> = promises.0.iter().map(|p| (p.from_ns, p.term)).collect();
    heard.sort();
    for w in heard.windows(2) {
        assert!(
            w[1].1 >= w[0].1,
            "a term went back: {:?} after {:?}",
            w[1],
            w[0]
        );
    }
    assert_kept(&tc, promises);
}
