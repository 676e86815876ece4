//! The chaos runner (`electd-lab chaos`, `scripts/chaos.sh`): for each mode × scenario × layer ×
//! seed, start a real 5-node cluster in a temp dir, apply the scenario's faults on a schedule,
//! collect every node's events from their files, run the checkers, clean up everything.
//!
//! The scenarios are in [`super::scenario`], the harness they act through (and the fault
//! layers) in [`super::harness`].

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::SeedableRng;

use super::checkers::cap_paused_claims;
pub use super::harness::Layer;
use super::harness::{roles, sleep, Harness, ROLE_POLL_EVERY, STORE};
use super::kernel::{self, Chain};
use super::record::{Promise, RunLog};
pub use super::scenario::Scenario;
use super::verdict::{evaluate, RunResult, HARNESS_NOTE};
use crate::chaos::record::{Dropped, PromisePoller, Recorder, RolePoller};
use crate::cluster::{AddrBlock, Cluster};
use electd::clock::{mono_ns, ms};
use electd_client::Mode;
use electd_client::NodeId;

pub use super::scenario::CONVERGE_BOUND_MS;

/// One run of the matrix.
#[derive(Clone, Debug)]
pub struct RunSpec {
    pub mode: Mode,
    pub scenario: Scenario,
    pub layer: Layer,
    pub seed: u64,
    /// The nodes serve the API and the peer RPC over TLS, their peers authenticated by their
    /// certificates instead of the cluster secret (docs/security.md, "TLS").
    pub tls: bool,
}

const DIR_PREFIX: &str = "electd-chaos-";
/// The runner's pid, in each run's temp dir: a runner killed mid-run cannot remove its dir,
/// so the next run removes every such dir whose runner is gone.
const OWNER_FILE: &str = "runner.pid";

fn sweep_stale_dirs() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten().take(10_000) {
        let path = entry.path();
        let ours = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with(DIR_PREFIX));
        if !ours {
            continue;
        }
        let Ok(owner) = std::fs::read_to_string(path.join(OWNER_FILE)) else {
            continue;
        };
        let alive = owner
            .trim()
            .parse::<u32>()
            .is_ok_and(|pid| Path::new(&format!("/proc/{pid}")).exists());
        if !alive && std::fs::remove_dir_all(&path).is_ok() {
            eprintln!("removed {} left by a runner that is gone", path.display());
        }
    }
}

/// Sum of every running node's `messages_sent` by type.
async fn messages(c: &Cluster) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for id in c.ids() {
        let Ok(status) = c.status(id).await else {
            continue;
        };
        for (kind, n) in status.counters.messages_sent {
            *out.entry(kind).or_default() += n;
        }
    }
    out
}

/// Addresses of a run: a loopback block of its own (held while the returned block lives), each
/// node on its own IP, so that kernel rules can tell nodes apart and parallel runs never match
/// each other's rules or ports.
fn addresses(n: usize) -> (AddrBlock, Vec<String>, BTreeMap<NodeId, String>) {
    let block = AddrBlock::claim();
    let ips = (1..=n as NodeId).map(|id| (id, block.ip(id))).collect();
    let addrs = block.addrs(n);
    (block, addrs, ips)
}

/// Runs one spec; returns the judged result and the log (for the timeline).
pub async fn run_one(spec: &RunSpec, bin: &Path, keep: Option<&Path>) -> (RunResult, RunLog) {
    run_one_with(spec, bin, keep, &[]).await
}

/// [`run_one`] with `extra` added to every node's command line: the lab's broken variants run
/// the `electd-flawed` binary with `--lab-flaw NAME` (src/bin/electd/main.rs), so that the
/// checkers are shown to catch a flaw on real processes.
pub async fn run_one_with(
    spec: &RunSpec,
    bin: &Path,
    keep: Option<&Path>,
    extra: &[&str],
) -> (RunResult, RunLog) {
    let mut run = match set_up(spec, bin, extra) {
        Ok(run) => run,
        Err(NotRun::Missing(why)) => return skipped(spec, why),
        Err(NotRun::Failed(why)) => return not_done(spec, why),
    };
    let start_ns = mono_ns();
    // The voters; members that don't vote start in the warm-up, once there is a leader.
    for id in run.h.shape.voter_ids() {
        if let Err(e) = run.h.start(id) {
            // Everything it needs is there: a node that does not start is a failure.
            run.h.c.down(Duration::from_secs(2));
            return not_done(spec, format!("node {id} does not start: {e}"));
        }
    }
    let poller = PromisePoller::start(&run.h.c);
    // Named roles in quorum mode: every node stands for each (in the warm-up), and a client of
    // every node asks about each throughout, as the cluster's own poller does.
    let role_poller = (spec.mode == Mode::Quorum)
        .then(|| RolePoller::start_on(&run.h.c, &run.h.ids(), &roles(), ROLE_POLL_EVERY));
    let (steady, outcome) = exercise(&mut run.h, spec.scenario).await;
    run.h.note_exits();
    // A node that ended by itself fails the run, whatever the checkers say of the rest: its
    // last view would otherwise pass for agreement, and the wind-down would end it unseen.
    let outcome = match (outcome, run.h.died.is_empty()) {
        (o, true) => o,
        (Ok(()), false) => Err(run.h.died.join("; ")),
        (Err(e), false) => Err(format!("{e}; {}", run.h.died.join("; "))),
    };
    let msgs = messages(&run.h.c).await;
    let end_ns = mono_ns();
    let (promises, polled) = poller.finish().await;
    let role_promises = match role_poller {
        Some(p) => p.finish().await,
        None => BTreeMap::new(),
    };
    let polled = Polled {
        promises,
        dropped: polled,
        role_promises,
    };
    let log = wind_down(&mut run.h, spec, start_ns, end_ns, polled);
    let res = judge(spec, &log, steady.as_ref(), msgs, end_ns, outcome);
    if let Some(k) = keep {
        keep_logs(k, spec, &run.h.c, &log);
    }
    (res, log)
}

/// Why a run was not done: a tool it needs is missing here and cannot be had (a skip), or
/// anything else (a failure: the run was meant to happen and did not).
enum NotRun {
    Missing(String),
    Failed(String),
}

/// What fails a run's set-up.
fn failed<E: std::fmt::Display>(what: &str) -> impl Fn(E) -> NotRun + '_ {
    move |e| NotRun::Failed(format!("{what}: {e}"))
}

/// The row of a run that failed before its nodes ran, with why, and an empty log.
fn not_done(spec: &RunSpec, why: String) -> (RunResult, RunLog) {
    let (mut res, log) = skipped(spec, String::new());
    res.skipped = None;
    res.passed = false;
    res.notes.push(format!("{HARNESS_NOTE}{why}"));
    (res, log)
}

/// The row of a run that could not be done for want of a tool, and an empty log.
fn skipped(spec: &RunSpec, why: String) -> (RunResult, RunLog) {
    (
        RunResult::skipped(
            spec.mode.as_str(),
            spec.scenario.as_str(),
            spec.layer.as_str(),
            spec.seed,
            &why,
        ),
        RunLog::default(),
    )
}

/// What a run holds until it ends, dropped in this order: the harness (with the iptables chain,
/// if still there), the address block, the temp dir (removed).
struct Run {
    h: Harness,
    _block: AddrBlock,
    _dir: tempfile::TempDir,
}

/// Everything before the nodes start: the iptables chain (kernel layer), a temp dir marked as
/// this runner's, the configs on an address block of the run's own, the cluster and its
/// secrets. `Err` says why the run is skipped (a missing tool: not root for iptables, no
/// PostgreSQL, no libfaketime) or failed (anything else, such as an iptables chain that root
/// cannot make or a PostgreSQL that is installed and does not start).
fn set_up(spec: &RunSpec, bin: &Path, extra: &[&str]) -> Result<Run, NotRun> {
    let chain = if spec.layer == Layer::Kernel {
        if let Some(why) = kernel::missing() {
            return Err(NotRun::Missing(why));
        }
        Some(Chain::create().map_err(failed("the iptables chain"))?)
    } else {
        None
    };
    sweep_stale_dirs();
    let dir = tempfile::Builder::new()
        .prefix(DIR_PREFIX)
        .tempdir()
        .map_err(failed("temp dir"))?;
    std::fs::write(dir.path().join(OWNER_FILE), std::process::id().to_string())
        .map_err(failed("temp dir"))?;
    let timing = spec.scenario.timing(spec.mode);
    let shape = spec.scenario.shape(spec.mode, timing);
    let (block, addrs, mut ips) = addresses(shape.len());
    Cluster::write_configs_shaped(dir.path(), &addrs, spec.mode, timing, "electd-chaos", shape)
        .map_err(failed("configs"))?;
    let mut c = Cluster::open(dir.path(), bin).map_err(failed("cluster"))?;
    if spec.scenario.moves_store_clock() {
        c.store_wall_clock = Some(crate::cluster::libfaketime().map_err(NotRun::Missing)?);
    }
    if spec.mode == Mode::Mutex {
        // The store on an address of the run's own block; kernel rules reach it too.
        crate::cluster::postgres_bin_dir().map_err(NotRun::Missing)?;
        c.start_store(&block.store_ip(), crate::cluster::BLOCK_STORE_PORT)
            .map_err(failed("PostgreSQL is installed and does not start"))?;
        ips.insert(STORE, block.store_ip());
    }
    c.extra_args = vec![
        "--seed".into(),
        spec.seed.to_string(),
        "--log".into(),
        "warn".into(),
    ];
    c.extra_args.extend(extra.iter().map(|a| a.to_string()));
    c.die_with_parent = true;
    if spec.scenario.moves_wall_clocks() {
        c.wall_clocks = Some(crate::cluster::libfaketime().map_err(NotRun::Missing)?);
    }
    c.ensure_secrets().map_err(failed("secrets"))?;
    if spec.tls {
        let secret = c.run.join("cluster-secret");
        std::fs::remove_file(&secret)
            .map_err(|e| NotRun::Failed(format!("TLS set-up: {}: {e}", secret.display())))?;
        c.ensure_tls().map_err(failed("TLS set-up"))?;
    }
    let h = Harness {
        c,
        mode: spec.mode,
        layer: spec.layer,
        ips,
        chain,
        cuts: BTreeSet::new(),
        cuts_on_receiver: false,
        loss: 0.0,
        delays: BTreeMap::new(),
        rec: Recorder::new(),
        faults: Vec::new(),
        open: None,
        fault_ns: None,
        heal_ns: None,
        rng: StdRng::seed_from_u64(spec.seed),
        timing,
        died: Vec::new(),
        shape,
    };
    Ok(Run {
        h,
        _block: block,
        _dir: dir,
    })
}

/// The steady-state sample: the cluster's sent-message counters before and after a fault-free
/// second with an agreed leader, how long it lasted (s), and when it ended.
struct Steady {
    before: BTreeMap<String, u64>,
    after: BTreeMap<String, u64>,
    seconds: f64,
    end_ns: u64,
}

/// Warms up, runs the scenario, then observes convergence. The steady sample is there once the
/// warm-up got that far, even when the scenario then failed.
async fn exercise(h: &mut Harness, scenario: Scenario) -> (Option<Steady>, Result<(), String>) {
    let steady = match warm_up(h).await {
        Ok(steady) => steady,
        Err(e) => return (None, Err(e)),
    };
    let outcome = match scenario.run(h).await {
        Ok(()) => {
            observe(h, scenario.converge_bound_ms()).await;
            Ok(())
        }
        Err(e) => Err(e),
    };
    (Some(steady), outcome)
}

/// Waits for an agreed leader (then starts the members that don't vote, if any, and waits until
/// they joined; in quorum mode: stands every node for the roles and waits until each is held),
/// then samples the steady-state message rate.
async fn warm_up(h: &mut Harness) -> Result<Steady, String> {
    h.leader().await?;
    if h.shape.nonvoters > 0 {
        h.start_nonvoters().await?;
    }
    if h.mode == Mode::Quorum {
        h.stand_roles().await?;
    }
    sleep(Duration::from_millis(300)).await;
    // A fault-free second with an agreed leader: the steady-state message rate.
    let (before, ta) = (messages(&h.c).await, mono_ns());
    sleep(Duration::from_millis(1_000)).await;
    let (after, tb) = (messages(&h.c).await, mono_ns());
    Ok(Steady {
        before,
        after,
        seconds: (tb - ta) as f64 / 1e9,
        end_ns: tb,
    })
}

/// Observes convergence (within `bound_ms`) and a stable second after it.
async fn observe(h: &Harness, bound_ms: u64) {
    let _ = h.c.wait_agreed(Duration::from_millis(bound_ms)).await;
    sleep(Duration::from_millis(1_200)).await;
}

/// What the run's clients recorded: the cluster's promises and what could not be read, and the
/// roles' promises.
struct Polled {
    promises: Vec<Promise>,
    dropped: Dropped,
    role_promises: BTreeMap<String, Vec<Promise>>,
}

/// Closes the last fault window, stops the nodes, removes the iptables chain and reads the run
/// log from the nodes' event files, with what the pollers recorded.
fn wind_down(
    h: &mut Harness,
    spec: &RunSpec,
    start_ns: u64,
    end_ns: u64,
    polled: Polled,
) -> RunLog {
    h.close_window();
    h.c.down(Duration::from_secs(3));
    drop(h.chain.take());
    let (events, event_logs) = h.c.events_checked(spec.mode);
    let log = RunLog {
        nodes: h.ids(),
        start_ns,
        end_ns,
        events,
        procs: h.rec.procs().to_vec(),
        faults: h.faults.clone(),
        heal_ns: h.heal_ns,
        fault_ns: h.fault_ns,
        leased: spec.mode.leased(),
        promises: polled.promises,
        dropped: Dropped {
            event_logs,
            ..polled.dropped
        },
        role_promises: polled.role_promises,
        voters: match h.shape.nonvoters {
            0 => Vec::new(),
            _ => h.shape.voter_ids(),
        },
    };
    if spec.mode.leased() {
        // A paused node's claim ends with its lease, as the API judges it.
        cap_paused_claims(&log, ms(h.timing.effective_lease_ms()))
    } else {
        log
    }
}

/// Runs the checkers on the log and adds what the harness saw: the message cost (from the
/// steady sample and the counters `msgs` at `end_ns`) and a failed harness step.
fn judge(
    spec: &RunSpec,
    log: &RunLog,
    steady: Option<&Steady>,
    msgs: BTreeMap<String, u64>,
    end_ns: u64,
    outcome: Result<(), String>,
) -> RunResult {
    let mut res = evaluate(
        log,
        spec.mode.as_str(),
        spec.scenario.as_str(),
        spec.layer.as_str(),
        spec.seed,
        spec.scenario.converge_bound_ms(),
    );
    if let Some(s) = steady {
        res.set_cost(
            &s.before,
            &s.after,
            &msgs,
            s.seconds,
            (end_ns - s.end_ns) as f64 / 1e9,
        );
    }
    res.messages = msgs;
    if let Err(e) = outcome {
        res.passed = false;
        res.notes.push(format!("{HARNESS_NOTE}{e}"));
    }
    res
}

/// Copies every node's log and the run log to `keep/<scenario>-<mode>-<layer>-<seed>/`, as far
/// as it can.
fn keep_logs(keep: &Path, spec: &RunSpec, c: &Cluster, log: &RunLog) {
    let dest = keep.join(format!(
        "{}-{}-{}-{}",
        spec.scenario.as_str(),
        spec.mode.as_str(),
        spec.layer.as_str(),
        spec.seed
    ));
    let _ = std::fs::create_dir_all(&dest);
    for &id in &log.nodes {
        let _ = std::fs::copy(c.log_file(id), dest.join(format!("node{id}.log")));
    }
    let _ = std::fs::write(
        dest.join("runlog.json"),
        serde_json::to_vec(log).unwrap_or_default(),
    );
}

/// What the harness itself failed at in a run (a node that did not start, a step of the
/// scenario), for the run's line: empty when nothing.
fn harness_notes(res: &RunResult) -> String {
    let notes: Vec<&str> = res
        .notes
        .iter()
        .filter(|n| n.starts_with(HARNESS_NOTE))
        .map(String::as_str)
        .collect();
    if notes.is_empty() {
        String::new()
    } else {
        format!(" {}", notes.join("; "))
    }
}

/// The whole matrix for `electd-lab chaos`.
pub struct Matrix {
    pub modes: Vec<Mode>,
    pub scenarios: Vec<Scenario>,
    pub layers: Option<Vec<Layer>>,
    pub seeds: Vec<u64>,
    pub out: PathBuf,
    /// Every run over TLS ([`RunSpec::tls`]).
    pub tls: bool,
    /// Deliberate flaws (`--lab-flaw NAME` each): the runs use the lab's `electd-flawed`
    /// binary beside `bin` with them, to see which checker catches a flaw.
    pub flaws: Vec<String>,
}

/// Runs the matrix, writes the report; returns whether every run passed (a skipped run did not).
pub async fn run_matrix(m: &Matrix, bin: &Path) -> std::io::Result<bool> {
    std::fs::create_dir_all(&m.out)?;
    let keep = m.out.join("runs");
    let flawed = bin.with_file_name("electd-flawed");
    let (bin, extra): (&Path, Vec<&str>) = if m.flaws.is_empty() {
        (bin, Vec::new())
    } else {
        let args = m.flaws.iter().flat_map(|f| ["--lab-flaw", f.as_str()]);
        (&flawed, args.collect())
    };
    let mut results = Vec::new();
    let mut timelines = Vec::new();
    for s in &m.scenarios {
        for layer in s.layers() {
            if let Some(only) = &m.layers {
                if !only.contains(layer) {
                    continue;
                }
            }
            for mode in &m.modes {
                if s.store_only() && *mode != Mode::Mutex {
                    continue; // only mutex mode has a store
                }
                if s.between_peers() && *mode == Mode::Mutex {
                    continue; // mutex mode's nodes talk to the store only
                }
                if s.quorum_only() && *mode != Mode::Quorum {
                    continue; // appends and votes are quorum mode's
                }
                if s.leased_only() && !mode.leased() {
                    continue; // bully, ring and invitation have no resign
                }
                for (k, seed) in m.seeds.iter().enumerate() {
                    let spec = RunSpec {
                        mode: *mode,
                        scenario: *s,
                        layer: *layer,
                        seed: *seed,
                        tls: m.tls,
                    };
                    let (res, log) = run_one_with(&spec, bin, Some(&keep), &extra).await;
                    println!(
                        "{:<4} {:<7} {:<7} seed={:<6} split_brain={:>7.1} ms max_leaders={} leaderless={:>7.1} ms failover={} converge={} {}{}",
                        s.as_str(),
                        mode.as_str(),
                        layer.as_str(),
                        seed,
                        res.split_brain_ms,
                        res.max_leaders,
                        res.leaderless_ms,
                        res.failover_ms.map(|x| format!("{x:.0} ms")).unwrap_or("-".into()),
                        res.converge_ms.map(|x| format!("{x:.0} ms")).unwrap_or("-".into()),
                        if res.skipped.is_some() { "SKIPPED " } else if res.passed { "ok" } else { "FAILED" },
                        res.skipped.clone().unwrap_or_else(|| harness_notes(&res)),
                    );
                    // A run that failed before its nodes ran has no log to draw.
                    if k == 0 && res.skipped.is_none() && !log.nodes.is_empty() {
                        timelines.push((
                            format!("{}-{}-{}", s.as_str(), mode.as_str(), layer.as_str()),
                            log,
                            format!(
                                "{} {} ({} layer, seed {seed})",
                                s.as_str(),
                                mode.as_str(),
                                layer.as_str()
                            ),
                        ));
                    }
                    results.push(res);
                }
            }
        }
    }
    super::report::write_report(&m.out, &results, &timelines)?;
    let skipped = results.iter().filter(|r| r.skipped.is_some()).count();
    let passed = results.iter().filter(|r| r.passed).count();
    println!(
        "chaos: {passed} passed, {} failed, {skipped} skipped",
        results.len() - passed - skipped
    );
    // A skipped run tested nothing: the matrix did not pass.
    Ok(passed == results.len())
}
