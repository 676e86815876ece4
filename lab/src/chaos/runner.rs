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

use super::check::{cap_paused_claims, evaluate, RunLog, RunResult};
pub use super::harness::Layer;
use super::harness::{sleep, Harness};
use super::kernel::{self, Chain};
pub use super::scenario::Scenario;
use crate::cluster::{AddrBlock, Cluster};
use crate::record::Recorder;
use electd::clock::{mono_ns, ms};
use electd::config::{Mode, Timing};
use electd_client::NodeId;

/// How long after heal a run may take to converge and still pass (C4).
pub const CONVERGE_BOUND_MS: u64 = 5_000;

/// One run of the matrix.
#[derive(Clone, Debug)]
pub struct RunSpec {
    pub mode: Mode,
    pub scenario: Scenario,
    pub layer: Layer,
    pub seed: u64,
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
    let skip = |why: String| {
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
    };
    let chain = if spec.layer == Layer::Kernel {
        if let Some(why) = kernel::unavailable() {
            return skip(why);
        }
        match Chain::create() {
            Ok(c) => Some(c),
            Err(e) => return skip(e),
        }
    } else {
        None
    };
    sweep_stale_dirs();
    let dir = match tempfile::Builder::new().prefix(DIR_PREFIX).tempdir() {
        Ok(d) => d,
        Err(e) => return skip(format!("temp dir: {e}")),
    };
    if let Err(e) = std::fs::write(dir.path().join(OWNER_FILE), std::process::id().to_string()) {
        return skip(format!("temp dir: {e}"));
    }
    let timing = Timing::default();
    let (_block, addrs, ips) = addresses(5);
    if let Err(e) = Cluster::write_configs(dir.path(), &addrs, spec.mode, timing, "electd-chaos") {
        return skip(e.to_string());
    }
    let mut c = match Cluster::open(dir.path(), bin) {
        Ok(c) => c,
        Err(e) => return skip(e.to_string()),
    };
    c.extra_args = vec![
        "--seed".into(),
        spec.seed.to_string(),
        "--log".into(),
        "warn".into(),
    ];
    c.die_with_parent = true;
    if let Err(e) = c.ensure_secrets() {
        return skip(e.to_string());
    }
    let mut h = Harness {
        c,
        mode: spec.mode,
        layer: spec.layer,
        ips,
        chain,
        cuts: BTreeSet::new(),
        loss: 0.0,
        delays: BTreeMap::new(),
        rec: Recorder::new(),
        faults: Vec::new(),
        open: None,
        fault_ns: None,
        heal_ns: None,
        rng: StdRng::seed_from_u64(spec.seed),
        timing,
    };
    let start_ns = mono_ns();
    for id in h.ids() {
        if let Err(e) = h.start(id) {
            h.c.down(Duration::from_secs(2));
            return skip(e);
        }
    }
    let mut steady = None;
    let outcome = async {
        h.leader().await?;
        sleep(Duration::from_millis(300)).await;
        // A fault-free second with an agreed leader: the steady-state message rate.
        let (a, ta) = (messages(&h.c).await, mono_ns());
        sleep(Duration::from_millis(1_000)).await;
        let (b, tb) = (messages(&h.c).await, mono_ns());
        steady = Some((a, b, (tb - ta) as f64 / 1e9, tb));
        spec.scenario.run(&mut h).await?;
        // Observe convergence and a stable second after it.
        let _ =
            h.c.wait_agreed(Duration::from_millis(CONVERGE_BOUND_MS))
                .await;
        sleep(Duration::from_millis(1_200)).await;
        Ok::<(), String>(())
    }
    .await;
    let msgs = messages(&h.c).await;
    let end_ns = mono_ns();
    h.close_window();
    h.c.down(Duration::from_secs(3));
    drop(h.chain.take());
    let events = h.c.events(spec.mode);
    let mut log = RunLog {
        nodes: h.ids(),
        start_ns,
        end_ns,
        events,
        procs: h.rec.procs().to_vec(),
        faults: h.faults.clone(),
        heal_ns: h.heal_ns,
        fault_ns: h.fault_ns,
        quorum_mode: spec.mode == Mode::Quorum,
    };
    if spec.mode == Mode::Quorum {
        // A paused node's claim ends with its lease, as the API judges it.
        log = cap_paused_claims(&log, ms(timing.effective_lease_ms()));
    }
    let mut res = evaluate(
        &log,
        spec.mode.as_str(),
        spec.scenario.as_str(),
        spec.layer.as_str(),
        spec.seed,
        CONVERGE_BOUND_MS,
    );
    if let Some((a, b, steady_s, tb)) = &steady {
        res.set_cost(a, b, &msgs, *steady_s, (end_ns - tb) as f64 / 1e9);
    }
    res.messages = msgs;
    if let Err(e) = outcome {
        res.passed = false;
        res.notes.push(format!("harness: {e}"));
    }
    if let Some(k) = keep {
        let dest = k.join(format!(
            "{}-{}-{}-{}",
            spec.scenario.as_str(),
            spec.mode.as_str(),
            spec.layer.as_str(),
            spec.seed
        ));
        let _ = std::fs::create_dir_all(&dest);
        for id in log.nodes.clone() {
            let _ = std::fs::copy(h.c.log_file(id), dest.join(format!("node{id}.log")));
        }
        let _ = std::fs::write(
            dest.join("runlog.json"),
            serde_json::to_vec(&log).unwrap_or_default(),
        );
    }
    (res, log)
}

/// The whole matrix for `electd-lab chaos`.
pub struct Matrix {
    pub modes: Vec<Mode>,
    pub scenarios: Vec<Scenario>,
    pub layers: Option<Vec<Layer>>,
    pub seeds: Vec<u64>,
    pub out: PathBuf,
}

/// Runs the matrix, writes the report; returns whether every run passed (skips aside).
pub async fn run_matrix(m: &Matrix, bin: &Path) -> std::io::Result<bool> {
    std::fs::create_dir_all(&m.out)?;
    let keep = m.out.join("runs");
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
                for (k, seed) in m.seeds.iter().enumerate() {
                    let spec = RunSpec {
                        mode: *mode,
                        scenario: *s,
                        layer: *layer,
                        seed: *seed,
                    };
                    let (res, log) = run_one(&spec, bin, Some(&keep)).await;
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
                        res.skipped.clone().unwrap_or_default(),
                    );
                    if k == 0 && res.skipped.is_none() {
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
    Ok(results.iter().all(|r| r.passed || r.skipped.is_some()))
}
