//! `electd run` on real processes: one supervisor beside each node of a 3-node cluster, each
//! running a stand-in application (`electd-lab stamp`) that stamps its lifetime to a file every
//! millisecond. The leader is paused (SIGSTOP) past its lease, then the next one is killed;
//! every stamp of every child must lie inside a claim interval of its own node, in the term it
//! was given (`ELECTD_TERM`), by the nodes' event logs.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{stamps, Supervisors, TestCluster};
use electd_client::Mode;
use electd_client::NodeId;
use electd_lab::chaos::checkers::{cap_paused_claims, claim_intervals};
use electd_lab::chaos::record::ProcKind;

const WAIT: Duration = Duration::from_secs(15);

/// Waits until the stamps of `path` satisfy `ok`, at most [`WAIT`].
fn wait_stamps(path: &Path, what: &str, ok: impl Fn(&[(u64, u64, u32)]) -> bool) {
    let until = Instant::now() + WAIT;
    while !ok(&stamps(path)) {
        assert!(Instant::now() < until, "{what}: not within {WAIT:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until the running nodes other than `not` agree on a leader that is not `not` and that
/// claims, at most [`WAIT`].
async fn leader_other_than(tc: &TestCluster, not: NodeId) -> NodeId {
    let until = Instant::now() + WAIT;
    loop {
        let mut named = BTreeSet::new();
        let mut claimant = None;
        for id in tc.c.ids().into_iter().filter(|&i| i != not) {
            if let Ok(info) = tc.c.leader_info(id).await {
                named.insert(info.view().leader);
                if info.view().claims() {
                    claimant = Some(id);
                }
            }
        }
        let named: Vec<Option<NodeId>> = named.into_iter().collect();
        if let (Some(c), [Some(l)]) = (claimant, named.as_slice()) {
            if c == *l {
                return c;
            }
        }
        assert!(
            Instant::now() < until,
            "no leader other than {not} within {WAIT:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[test]
fn the_child_of_electd_run_lives_only_inside_its_nodes_claim() {
    let rt = TestCluster::rt();
    let mut tc = TestCluster::start(Mode::Quorum, 3);
    let l1 = rt.block_on(tc.c.wait_agreed(WAIT)).expect("a leader");
    let dir = tempfile::tempdir().unwrap();
    let file = |id: NodeId| -> PathBuf { dir.path().join(format!("stamps{id}")) };
    let mut sups = Supervisors::stamping(&tc, dir.path());
    wait_stamps(&file(l1), "the leader's child starts", |s| s.len() > 50);

    // The leader stops (SIGSTOP) for longer than its lease: its child must stop before the
    // claim can end; the next leader's child starts.
    tc.rec.pause(&tc.c, l1);
    let l2 = rt.block_on(leader_other_than(&tc, l1));
    wait_stamps(&file(l2), "the new leader's child starts", |s| s.len() > 50);
    tc.rec.resume(&tc.c, l1);

    // The new leader is killed: its child must stop by the claim's deadline; a child starts
    // beside the third leader (a new child, even if that is the first leader again).
    let seen: BTreeSet<u32> =
        tc.c.ids()
            .iter()
            .flat_map(|&id| stamps(&file(id)).into_iter().map(|s| s.2))
            .collect();
    tc.kill(l2);
    let l3 = rt.block_on(leader_other_than(&tc, l2));
    wait_stamps(&file(l3), "the third leader's child starts", |s| {
        s.iter().filter(|st| !seen.contains(&st.2)).count() > 50
    });
    // The killed node's child has stopped: its process is gone.
    wait_gone(&file(l2), "the killed node's child");
    let codes = sups.interrupt_all();
    for (id, code) in &codes {
        assert_eq!(*code, Some(0), "electd run beside node {id} at SIGINT");
    }

    for id in tc.c.ids() {
        let text = std::fs::read_to_string(dir.path().join(format!("run{id}.log")));
        eprintln!(
            "---- electd run beside node {id} ----\n{}",
            text.unwrap_or_default()
        );
    }
    eprintln!("leaders: {l1} (paused), {l2} (killed), {l3}");
    // The claims, read from the event logs. A paused leader claims at most one lease past its
    // pause; so does a killed one (what it had acknowledged before the kill runs out then, and
    // the log, ending at the kill, cannot say sooner): both are capped there.
    let mut raw = tc.run_log(None, None);
    for p in &mut raw.procs {
        if p.kind == ProcKind::Kill {
            p.kind = ProcKind::Pause;
        }
    }
    let lease_ns = electd::clock::ms(tc.timing.effective_lease_ms());
    let claims = claim_intervals(&cap_paused_claims(&raw, lease_ns));
    let events = tc.events();
    let term_at = |node: NodeId, t: u64| {
        events
            .iter()
            .filter(|e| e.node_id == node && e.t_mono_ns <= t)
            .max_by_key(|e| (e.t_mono_ns, e.seq))
            .map(|e| e.view.term)
    };
    // Per child: ms between its last stamp and the end of its node's claim, and the start of
    // the next claim of another node.
    let mut margins: BTreeMap<(NodeId, u32), (f64, Option<f64>)> = BTreeMap::new();
    let mut children = 0;
    for id in tc.c.ids() {
        let mut by_pid: BTreeMap<u32, Vec<(u64, u64)>> = BTreeMap::new();
        for (t, term, pid) in stamps(&file(id)) {
            by_pid.entry(pid).or_default().push((t, term));
        }
        for (pid, st) in by_pid {
            children += 1;
            let (first, term) = st[0];
            let (last, _) = *st.last().unwrap();
            // Inside one claim of its own node …
            let claim = claims
                .iter()
                .find(|c| c.node == id && c.from_ns <= first && last <= c.to_ns);
            let Some(claim) = claim else {
                panic!(
                    "node {id}'s child {pid} ran {first}..{last} outside its node's claims: {:?}",
                    claims.iter().filter(|c| c.node == id).collect::<Vec<_>>()
                );
            };
            // … and never while another node claims.
            common::assert_no_other_claim(&claims, id, pid, first, last);
            assert_eq!(
                term_at(id, last),
                Some(term),
                "child {pid} of node {id}: wrong term"
            );
            let next = claims
                .iter()
                .filter(|c| c.node != id && c.from_ns > last)
                .map(|c| (c.from_ns - last) as f64 / 1e6)
                .reduce(f64::min);
            margins.insert((id, pid), ((claim.to_ns - last) as f64 / 1e6, next));
        }
    }
    assert!(children >= 2, "the child ran under fewer than two claims");
    eprintln!(
        "child stopped before (its node's claim ended, the next claim began), ms, per (node, pid): \
         {margins:.1?}"
    );
}

/// `electd run` beside node `id` of `tc`, running `sh -c SCRIPT` (in which `$LAB` is the lab
/// binary), its log in `dir/run{id}.log`.
fn supervise(tc: &TestCluster, id: NodeId, dir: &Path, flags: &[&str], script: &str) -> Child {
    Command::new(electd_lab::bin::electd_bin().unwrap())
        .args(["run", "--node", &tc.c.member(id).unwrap().addr])
        .args(flags)
        .args(["--", "sh", "-c", script])
        .env("LAB", env!("CARGO_BIN_EXE_electd-lab"))
        .stdin(Stdio::null())
        .stderr(std::fs::File::create(dir.join(format!("run{id}.log"))).unwrap())
        .spawn()
        .expect("electd run starts")
}

/// The state letter and the start time (clock ticks after boot) of process `pid`, from
/// `/proc/<pid>/stat`; `None` once the process has no entry there.
fn proc_stat(pid: u32) -> Option<(char, u64)> {
    let st = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state ppid …`: the comm may hold spaces, so read after its ')'; the start
    // time is the 22nd field, the 20th after the comm. A line that does not parse is no
    // answer (not "gone"), or every process would pass for gone.
    let parsed = st.rsplit_once(')').and_then(|(_, rest)| {
        let f: Vec<&str> = rest.split_whitespace().collect();
        Some((f.first()?.chars().next()?, f.get(19)?.parse().ok()?))
    });
    Some(parsed.unwrap_or_else(|| panic!("/proc/{pid}/stat does not parse: {st}")))
}

/// [`proc_stat`] sees a running process, and no longer one that was killed and reaped.
#[test]
fn a_process_is_seen_until_it_is_gone() {
    let mut child = Command::new("sleep")
        .arg("10")
        .spawn()
        .expect("sleep starts");
    let pid = child.id();
    let (state, start) = proc_stat(pid).expect("a running process has a /proc entry");
    assert!(!matches!(state, 'Z' | 'X'), "state {state}");
    assert!(start > 0);
    child.kill().expect("SIGKILL");
    child.wait().expect("reaped");
    assert_eq!(proc_stat(pid), None);
}

/// Waits until every process that stamped into `path` is gone, at most [`WAIT`]; answers the
/// last stamp's instant. Gone is judged by pid, not by a pause in the stamps: a child starved
/// of CPU on a busy host can stamp nothing for a while and still be running. A process is gone
/// when `/proc` has no entry for its pid, when it is a zombie (dead; whoever inherited it has
/// not reaped it yet), or when its pid names a process started later than the one first seen
/// there (the pid was reused).
fn wait_gone(path: &Path, what: &str) -> u64 {
    let until = Instant::now() + WAIT;
    // Start time of each pid when first seen running.
    let mut born: BTreeMap<u32, u64> = BTreeMap::new();
    loop {
        let pids: BTreeSet<u32> = stamps(path).into_iter().map(|s| s.2).collect();
        let running: Vec<u32> = pids
            .into_iter()
            .filter(|&pid| match proc_stat(pid) {
                None | Some(('Z' | 'X', _)) => false,
                Some((_, start)) => *born.entry(pid).or_insert(start) == start,
            })
            .collect();
        if running.is_empty() {
            return stamps(path).last().map_or(0, |s| s.0);
        }
        assert!(
            Instant::now() < until,
            "{what}: pid {running:?} still running after {WAIT:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Stamp files whose writers are SIGKILLed by pid when this is dropped, even when the test
/// fails (a child that outlives its supervisor is what these tests look for).
struct Stampers(Vec<PathBuf>);

impl Drop for Stampers {
    fn drop(&mut self) {
        for f in &self.0 {
            let pids: BTreeSet<u32> = stamps(f).into_iter().map(|s| s.2).collect();
            for pid in pids {
                if let Some(pid) = rustix::process::Pid::from_raw(pid as i32) {
                    let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
                }
            }
        }
    }
}

/// The deadline (CLOCK_MONOTONIC ns) that the supervisor's SIGKILL line names.
fn kill_deadline(log: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let line = text
        .lines()
        .find(|l| l.contains("SIGKILL to the child's group"))?;
    let at = line.split("(mono ").nth(1)?;
    at.trim_end_matches(')').parse().ok()
}

/// A child that ignores SIGTERM, beside a leader that is then paused (its claim is no longer
/// renewed, and the node answers nothing): SIGKILL reaches it before the deadline, by a
/// timer, with the polls and grace the rule of docs/applications.md allows (`--poll-ms 40 --grace-ms 30`).
#[test]
fn a_child_that_ignores_sigterm_is_killed_before_the_deadline() {
    let rt = TestCluster::rt();
    let mut tc = TestCluster::start(Mode::Quorum, 3);
    let l = rt.block_on(tc.c.wait_agreed(WAIT)).expect("a leader");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("stamps");
    let _stampers = Stampers(vec![file.clone()]);
    let script = format!(
        "trap '' TERM; exec \"$LAB\" stamp {} --outlive-parent",
        file.display()
    );
    let mut sups = Supervisors(vec![(
        l,
        supervise(
            &tc,
            l,
            dir.path(),
            &["--poll-ms", "40", "--grace-ms", "30"],
            &script,
        ),
    )]);
    wait_stamps(&file, "the child starts", |s| s.len() > 50);
    tc.rec.pause(&tc.c, l);
    let last = wait_gone(&file, "a child that ignores SIGTERM");
    tc.rec.resume(&tc.c, l);
    sups.interrupt_all();
    let log = dir.path().join(format!("run{l}.log"));
    eprintln!("{}", std::fs::read_to_string(&log).unwrap_or_default());
    let deadline = kill_deadline(&log).expect("the supervisor sent SIGKILL");
    assert!(
        last < deadline,
        "the child stamped {:.2} ms after its deadline",
        (last - deadline) as f64 / 1e6
    );
    eprintln!(
        "SIGKILL margin: the child's last stamp {:.2} ms before its deadline",
        (deadline - last) as f64 / 1e6
    );
}

/// A 3-node cluster with `electd run` beside its leader, whose CMD starts a grandchild in its
/// group; both stamp their lives (their files: `child`, `grandchild`), neither ends when its
/// parent does, and both have started.
struct Family {
    tc: TestCluster,
    leader: NodeId,
    child: PathBuf,
    grandchild: PathBuf,
    sups: Supervisors,
    _stampers: Stampers,
    _dir: tempfile::TempDir,
}

impl Family {
    /// With `daemon`, the grandchild is a daemon: started through a double fork (its parent
    /// exits at once, so it is orphaned), in a session and process group of its own
    /// (`setsid`), ignoring SIGTERM: what nginx or `redis --daemonize yes` do. A signal to
    /// CMD's group does not reach it.
    fn start_with(rt: &tokio::runtime::Runtime, daemon: bool) -> Family {
        let tc = TestCluster::start(Mode::Quorum, 3);
        let leader = rt.block_on(tc.c.wait_agreed(WAIT)).expect("a leader");
        let dir = tempfile::tempdir().unwrap();
        let (child, grandchild) = (dir.path().join("child"), dir.path().join("grandchild"));
        let stampers = Stampers(vec![child.clone(), grandchild.clone()]);
        let grand = if daemon {
            format!(
                "( ( trap '' TERM; exec setsid \"$LAB\" stamp {} --outlive-parent ) & );",
                grandchild.display()
            )
        } else {
            format!("\"$LAB\" stamp {} --outlive-parent &", grandchild.display())
        };
        let script = format!(
            "{grand} exec \"$LAB\" stamp {} --outlive-parent",
            child.display()
        );
        let sup = supervise(&tc, leader, dir.path(), &[], &script);
        let sups = Supervisors(vec![(leader, sup)]);
        wait_stamps(&child, "the child starts", |s| s.len() > 50);
        wait_stamps(&grandchild, "the grandchild starts", |s| s.len() > 50);
        Family {
            tc,
            leader,
            child,
            grandchild,
            sups,
            _stampers: stampers,
            _dir: dir,
        }
    }
}

/// What CMD starts in its group stops with it: a grandchild is gone when the claim ends (a
/// resignation), before another node claims.
#[test]
fn a_grandchild_is_gone_when_the_claim_ends() {
    grandchild_gone_when_the_claim_ends(false, Ending::Resign);
}

/// A daemon (double fork, `setsid`, SIGTERM ignored) that CMD started is gone before the next
/// leader claims too: CMD's cgroup or the supervisor as subreaper keeps it in reach (before,
/// it left CMD's group and ran on after the resignation, 2.2 s in the trial, until
/// killed by hand).
#[test]
fn a_daemonized_grandchild_is_gone_when_the_claim_ends() {
    grandchild_gone_when_the_claim_ends(true, Ending::Resign);
}

/// Issue 33, item 3, on a paused node: the leader's node frozen (SIGSTOP), its supervisor
/// hears nothing more and its last promise runs out; the daemon CMD started is gone before
/// the next leader claims, as on a resignation.
#[test]
fn a_daemonized_grandchild_is_gone_when_its_node_is_paused() {
    grandchild_gone_when_the_claim_ends(true, Ending::PauseNode);
}

/// How the claim ends.
#[derive(Clone, Copy)]
enum Ending {
    /// The leader resigns.
    Resign,
    /// The leader's node is paused (SIGSTOP) until the next leader claims.
    PauseNode,
}

fn grandchild_gone_when_the_claim_ends(daemon: bool, ending: Ending) {
    let rt = TestCluster::rt();
    let mut f = Family::start_with(&rt, daemon);
    let (tc, l) = (&f.tc, f.leader);
    match ending {
        Ending::Resign => {
            let client = tc.c.client(l).unwrap();
            rt.block_on(client.resign(None))
                .expect("the leader resigns");
        }
        Ending::PauseNode => {
            assert!(
                tc.c.signal(l, rustix::process::Signal::STOP),
                "node {l} paused"
            );
        }
    }
    let last_child = wait_gone(&f.child, "the child");
    let last_grandchild = wait_gone(&f.grandchild, "the grandchild");
    f.sups.interrupt_all();
    let tc = &f.tc;
    let next = rt.block_on(leader_other_than(tc, l));
    if let Ending::PauseNode = ending {
        tc.c.signal(l, rustix::process::Signal::CONT);
    }
    let claims = claim_intervals(&tc.run_log(None, None));
    let next_claim = claims
        .iter()
        .filter(|c| c.node == next)
        .map(|c| c.from_ns)
        .min()
        .expect("the next leader's claim");
    for (who, last) in [("child", last_child), ("grandchild", last_grandchild)] {
        assert!(
            last < next_claim,
            "the {who} ran {:.1} ms into node {next}'s claim",
            (last - next_claim) as f64 / 1e6
        );
        eprintln!(
            "the {who} stopped {:.1} ms before node {next} claimed",
            (next_claim - last) as f64 / 1e6
        );
    }
}

/// The supervisor SIGKILLed: its child and the child's group die with it.
#[test]
fn a_killed_supervisor_takes_its_child_with_it() {
    killed_supervisor_takes_its_child(false);
}

/// The supervisor SIGKILLed: a daemon its child started dies with it too, where the host gives
/// the run a cgroup (the keeper kills it; with a subreaper only, the daemon of a dead
/// supervisor is init's and escapes, as `contain.rs` says, and the test is a skip).
#[test]
fn a_killed_supervisor_takes_a_daemonized_grandchild_with_it() {
    if !cgroup_v2_writable() {
        electd_lab::skip::skip("no cgroup v2 this process may make a child cgroup in");
        return;
    }
    killed_supervisor_takes_its_child(true);
}

/// Whether this process may make a child cgroup (v2) under its own, as `electd run` does.
fn cgroup_v2_writable() -> bool {
    let Ok(mounts) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return false;
    };
    let Some(mount) = mounts.lines().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        (right.split_whitespace().next()? == "cgroup2").then(|| left.split_whitespace().nth(4))?
    }) else {
        return false;
    };
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let Some(path) = own.lines().find_map(|l| l.strip_prefix("0::")) else {
        return false;
    };
    let probe = Path::new(mount)
        .join(path.trim_start_matches('/'))
        .join(format!("electd-test-probe-{}", std::process::id()));
    let ok = std::fs::create_dir(&probe).is_ok();
    let _ = std::fs::remove_dir(&probe);
    ok
}

fn killed_supervisor_takes_its_child(daemon: bool) {
    let rt = TestCluster::rt();
    let mut f = Family::start_with(&rt, daemon);
    let (_, mut sup) = f.sups.0.pop().expect("the supervisor");
    sup.kill().expect("SIGKILL to the supervisor");
    let killed = electd::clock::mono_ns();
    sup.wait().expect("reaped");
    let (child, grandchild) = (&f.child, &f.grandchild);
    let last_child = wait_gone(child, "the child of a killed supervisor");
    let last_grandchild = wait_gone(grandchild, "the grandchild of a killed supervisor");
    for (who, last) in [("child", last_child), ("grandchild", last_grandchild)] {
        eprintln!(
            "the {who} stopped {:.1} ms after the supervisor was killed",
            last.saturating_sub(killed) as f64 / 1e6
        );
        assert!(
            last < killed + 500_000_000,
            "the {who} ran on for {:.1} ms",
            (last - killed) as f64 / 1e6
        );
    }
}
