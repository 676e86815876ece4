//! The chaos runner (`electd chaos`, `scripts/chaos.sh`): for each mode × scenario × layer ×
//! seed, start a real 5-node cluster in a temp dir, apply the scenario's faults on a schedule,
//! collect every node's events from their files, run the checkers, clean up everything.
//!
//! Layers: `app` (each node's fault set over the admin API), `kernel` (iptables on per-node
//! loopback addresses, see [`super::kernel`]), `process` (signals only: S1, S2, S11). Delays
//! always come from the app layer: this kernel has no netem.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use super::check::{cap_paused_claims, evaluate, FaultWindow, RunLog, RunResult};
use super::kernel::{self, Chain};
use crate::cluster::{AddrBlock, Cluster};
use crate::record::Recorder;
use electd::clock::{mono_ns, ms};
use electd::config::{Mode, Timing};
use electd_client::FaultSet;
use electd_client::NodeId;

/// Every scenario of `docs/design/chaos.md`.
pub const SCENARIOS: [&str; 14] = [
    "S1", "S2", "S3", "S4", "S5", "S6", "S7", "S8", "S9", "S10", "S11", "S12", "S13", "S14",
];

/// How long after heal a run may take to converge and still pass (C4).
pub const CONVERGE_BOUND_MS: u64 = 5_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layer {
    App,
    Kernel,
    Process,
}

impl Layer {
    pub fn as_str(self) -> &'static str {
        match self {
            Layer::App => "app",
            Layer::Kernel => "kernel",
            Layer::Process => "process",
        }
    }
    pub fn parse(s: &str) -> Option<Layer> {
        match s {
            "app" => Some(Layer::App),
            "kernel" => Some(Layer::Kernel),
            "process" => Some(Layer::Process),
            _ => None,
        }
    }
}

/// The layers where a scenario's faults live.
pub fn layers_of(scenario: &str) -> &'static [Layer] {
    match scenario {
        "S1" | "S2" | "S11" => &[Layer::Process],
        "S9" => &[Layer::App],
        _ => &[Layer::App, Layer::Kernel],
    }
}

/// One run of the matrix.
#[derive(Clone, Debug)]
pub struct RunSpec {
    pub mode: Mode,
    pub scenario: String,
    pub layer: Layer,
    pub seed: u64,
}

/// A live run: the cluster, the fault state, and everything recorded for the checkers.
struct Harness {
    c: Cluster,
    mode: Mode,
    layer: Layer,
    ips: BTreeMap<NodeId, String>,
    chain: Option<Chain>,
    cuts: BTreeSet<(NodeId, NodeId)>,
    loss: f64,
    delays: BTreeMap<NodeId, u64>,
    rec: Recorder,
    faults: Vec<FaultWindow>,
    /// The fault window in force: start, label, and who could talk to whom when it opened.
    open: Option<(u64, String, Vec<Vec<NodeId>>)>,
    fault_ns: Option<u64>,
    heal_ns: Option<u64>,
    rng: StdRng,
    timing: Timing,
}

const WAIT: Duration = Duration::from_secs(20);

impl Harness {
    fn ids(&self) -> Vec<NodeId> {
        self.c.ids()
    }

    /// The first fault is in force from `t_ns` on (failover is measured from it).
    fn mark_fault(&mut self, t_ns: u64) {
        if self.fault_ns.is_none() {
            self.fault_ns = Some(t_ns);
        }
    }

    fn kill(&mut self, id: NodeId) {
        if let Some(t) = self.rec.kill(&self.c, id) {
            self.mark_fault(t);
        }
    }

    fn start(&mut self, id: NodeId) -> Result<(), String> {
        self.rec
            .start(&self.c, id, self.mode)
            .map_err(|e| e.to_string())?;
        Ok(())
    }

    fn pause(&mut self, id: NodeId) {
        let t = self.rec.pause(&self.c, id);
        self.mark_fault(t);
    }

    fn resume(&mut self, id: NodeId) {
        self.rec.resume(&self.c, id);
    }

    async fn leader(&self) -> Result<NodeId, String> {
        self.c
            .wait_agreed(WAIT)
            .await
            .ok_or_else(|| "no agreed leader".to_string())
    }

    /// Who can talk to whom under the current cuts, as the checker's groups (pairs open both
    /// ways, singletons for cut-off nodes; none when nothing is cut).
    fn groups(&self) -> Vec<Vec<NodeId>> {
        if self.cuts.is_empty() {
            return Vec::new();
        }
        let ids = self.ids();
        let mut g = Vec::new();
        for &a in &ids {
            let mut alone = true;
            for &b in &ids {
                if a != b && !self.cuts.contains(&(a, b)) && !self.cuts.contains(&(b, a)) {
                    alone = false;
                    if a < b {
                        g.push(vec![a, b]);
                    }
                }
            }
            if alone {
                g.push(vec![a]);
            }
        }
        g
    }

    /// Pushes the network fault state to the layer and opens a fault window labelled `label`.
    async fn apply(&mut self, label: &str) -> Result<(), String> {
        self.close_window();
        match self.layer {
            Layer::Kernel => {
                let chain = self.chain.as_ref().ok_or("no iptables chain")?;
                let cuts: Vec<(String, String)> = self
                    .cuts
                    .iter()
                    .map(|(a, b)| (self.ips[a].clone(), self.ips[b].clone()))
                    .collect();
                let ips: Vec<String> = self.ips.values().cloned().collect();
                chain.set(&cuts, self.loss, &ips)?;
                self.push_app(true).await?;
            }
            _ => self.push_app(false).await?,
        }
        // The window starts once every rule is in force.
        let t = mono_ns();
        self.mark_fault(t);
        self.open = Some((t, label.to_string(), self.groups()));
        Ok(())
    }

    /// The app-layer fault sets: cuts and loss (unless the kernel does those) and delays.
    async fn push_app(&self, delays_only: bool) -> Result<(), String> {
        // A message crosses the sender's and the receiver's fault set: per-node loss r gives
        // link loss 1 - (1 - r)^2 = loss.
        let r = 1.0 - (1.0 - self.loss).sqrt();
        for id in self.ids() {
            if self.c.pid(id).is_none() {
                continue;
            }
            let set = FaultSet {
                block_to: if delays_only {
                    BTreeSet::new()
                } else {
                    self.cuts
                        .iter()
                        .filter(|(a, _)| *a == id)
                        .map(|(_, b)| *b)
                        .collect()
                },
                block_from: BTreeSet::new(),
                drop_rate: if delays_only { 0.0 } else { r },
                delay_ms: self.delays.get(&id).copied().unwrap_or(0),
            };
            self.c
                .set_faults(id, &set)
                .await
                .map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    fn close_window(&mut self) {
        // The groups of the window are those in force while it was open (taken when it
        // opened: by the time it closes, a flapping scenario has set the next cuts).
        if let Some((start, label, groups)) = self.open.take() {
            self.faults.push(FaultWindow {
                start_ns: start,
                end_ns: mono_ns(),
                label,
                groups,
            });
        }
    }

    /// Cuts every link between the groups, both ways.
    async fn partition(&mut self, groups: &[Vec<NodeId>]) -> Result<(), String> {
        self.cuts.clear();
        for (i, g) in groups.iter().enumerate() {
            for (j, h) in groups.iter().enumerate() {
                if i != j {
                    for a in g {
                        for b in h {
                            self.cuts.insert((*a, *b));
                        }
                    }
                }
            }
        }
        let label = format!(
            "partition {}",
            groups
                .iter()
                .map(|g| g
                    .iter()
                    .map(|x| x.to_string())
                    .collect::<Vec<_>>()
                    .join(","))
                .collect::<Vec<_>>()
                .join(" | ")
        );
        self.apply(&label).await
    }

    /// Clears every network fault; the next moment is the heal.
    async fn heal(&mut self) -> Result<(), String> {
        self.close_window();
        self.cuts.clear();
        self.loss = 0.0;
        self.delays.clear();
        if let Some(chain) = &self.chain {
            chain.set(&[], 0.0, &[])?;
        }
        for id in self.ids() {
            if self.c.pid(id).is_some() {
                self.c.clear_faults(id).await.map_err(|e| e.to_string())?;
            }
        }
        self.heal_ns = Some(mono_ns());
        Ok(())
    }

    fn others(&self, not: &[NodeId]) -> Vec<NodeId> {
        self.ids()
            .into_iter()
            .filter(|i| !not.contains(i))
            .collect()
    }

    fn hold(&self) -> Duration {
        // Long enough for many follower leases on each side: 3 s at the default timings, as
        // with the timings of earlier reports.
        Duration::from_millis(20 * self.timing.follower_lease_ms)
    }
}

async fn sleep(d: Duration) {
    tokio::time::sleep(d).await
}

/// Runs the schedule of one scenario on a warmed-up cluster.
async fn scenario(h: &mut Harness, s: &str) -> Result<(), String> {
    let hold = h.hold();
    let et = h.timing.follower_lease_ms;
    let l = h.leader().await?;
    match s {
        "S1" => {
            h.kill(l);
            sleep(hold).await;
            h.start(l)?;
            h.heal_ns = Some(mono_ns());
        }
        "S2" => {
            let f = h.others(&[l])[0];
            h.kill(f);
            sleep(hold / 2).await;
            h.start(f)?;
            sleep(hold / 2).await;
            let mut three = h.others(&[]);
            three.shuffle(&mut h.rng);
            three.truncate(3);
            for id in &three {
                h.kill(*id);
            }
            sleep(hold / 2).await;
            for id in &three {
                h.start(*id)?;
            }
            sleep(hold / 2).await;
            for id in h.ids() {
                h.kill(id);
            }
            sleep(hold / 4).await;
            for id in h.ids() {
                h.start(id)?;
            }
            h.heal_ns = Some(mono_ns());
        }
        "S3" => {
            h.partition(&[vec![l], h.others(&[l])]).await?;
            sleep(hold).await;
            h.heal().await?;
        }
        "S4" => {
            let victim = if h.mode == Mode::Bully {
                *h.ids().iter().max().expect("nodes")
            } else {
                let f = h.others(&[l]);
                f[h.rng.gen_range(0..f.len())]
            };
            h.partition(&[vec![victim], h.others(&[victim])]).await?;
            sleep(hold).await;
            h.heal().await?;
        }
        "S5" => {
            let mut rest = h.others(&[l]);
            rest.shuffle(&mut h.rng);
            let small = vec![l, rest[0]];
            h.partition(&[small.clone(), h.others(&small)]).await?;
            sleep(hold).await;
            h.heal().await?;
            let l = h.leader().await?;
            let mut rest = h.others(&[l]);
            rest.shuffle(&mut h.rng);
            let small = vec![rest[0], rest[1]];
            h.partition(&[small.clone(), h.others(&small)]).await?;
            sleep(hold).await;
            h.heal().await?;
        }
        "S6" => {
            // Ring of neighbours: each node talks to the two next to it only.
            let ids = h.ids();
            let n = ids.len();
            h.cuts.clear();
            for i in 0..n {
                for j in 0..n {
                    let d = (i + n - j) % n;
                    if i != j && d != 1 && d != n - 1 {
                        h.cuts.insert((ids[i], ids[j]));
                    }
                }
            }
            h.apply("majorities ring").await?;
            sleep(hold).await;
            h.heal().await?;
        }
        "S7" => {
            let mut rest = h.others(&[l]);
            rest.shuffle(&mut h.rng);
            let (a, bridge, c, d) = (rest[0], rest[1], rest[2], rest[3]);
            let left = [l, a];
            let right = [c, d];
            h.cuts.clear();
            for x in left {
                for y in right {
                    h.cuts.insert((x, y));
                    h.cuts.insert((y, x));
                }
            }
            h.apply(&format!("bridge {bridge} between {l},{a} and {c},{d}"))
                .await?;
            sleep(hold).await;
            h.heal().await?;
        }
        "S8" => {
            let others = h.others(&[l]);
            h.cuts = others.iter().map(|o| (*o, l)).collect();
            h.apply(&format!("{l} sends, cannot receive")).await?;
            sleep(hold).await;
            h.heal().await?;
            let l = h.leader().await?;
            let others = h.others(&[l]);
            h.cuts = others.iter().map(|o| (l, *o)).collect();
            h.apply(&format!("{l} receives, cannot send")).await?;
            sleep(hold).await;
            h.heal().await?;
        }
        "S9" => {
            h.delays.insert(l, et * 3 / 4);
            h.apply(&format!("delay {} ms on {l}", et * 3 / 4)).await?;
            sleep(hold).await;
            h.heal().await?;
        }
        "S10" => {
            h.loss = 0.3;
            h.apply("30% loss on all links").await?;
            sleep(hold).await;
            h.heal().await?;
        }
        "S11" => {
            h.pause(l);
            sleep(Duration::from_millis(4 * et)).await;
            h.resume(l);
            h.heal_ns = Some(mono_ns());
        }
        "S12" => {
            for _ in 0..6 {
                let mut ids = h.ids();
                ids.shuffle(&mut h.rng);
                let (a, b) = ids.split_at(2);
                h.partition(&[a.to_vec(), b.to_vec()]).await?;
                sleep(Duration::from_millis(3 * et)).await;
            }
            h.heal().await?;
        }
        "S13" => {
            // A mixture, then heal: the convergence bound is the point.
            let mut ids = h.ids();
            ids.shuffle(&mut h.rng);
            h.partition(&[ids[..2].to_vec(), ids[2..].to_vec()]).await?;
            sleep(hold / 2).await;
            let victim = ids[h.rng.gen_range(0..ids.len())];
            h.kill(victim);
            h.loss = 0.2;
            h.apply("partition, a kill and 20% loss").await?;
            sleep(hold / 2).await;
            // Heal first: a node that is still starting cannot take a fault set yet.
            h.heal().await?;
            h.start(victim)?;
        }
        "S14" => {
            let mut ids = h.ids();
            ids.shuffle(&mut h.rng);
            h.partition(&[ids[..2].to_vec(), ids[2..4].to_vec(), ids[4..].to_vec()])
                .await?;
            sleep(hold).await;
            h.heal().await?;
        }
        other => return Err(format!("unknown scenario {other}")),
    }
    Ok(())
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
                &spec.scenario,
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
        scenario(&mut h, &spec.scenario).await?;
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
        &spec.scenario,
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
            spec.scenario,
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

/// The whole matrix for `electd chaos`.
pub struct Matrix {
    pub modes: Vec<Mode>,
    pub scenarios: Vec<String>,
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
        for layer in layers_of(s) {
            if let Some(only) = &m.layers {
                if !only.contains(layer) {
                    continue;
                }
            }
            for mode in &m.modes {
                for (k, seed) in m.seeds.iter().enumerate() {
                    let spec = RunSpec {
                        mode: *mode,
                        scenario: s.clone(),
                        layer: *layer,
                        seed: *seed,
                    };
                    let (res, log) = run_one(&spec, bin, Some(&keep)).await;
                    println!(
                        "{:<4} {:<7} {:<7} seed={:<6} split_brain={:>7.1} ms max_leaders={} leaderless={:>7.1} ms failover={} converge={} {}{}",
                        s,
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
                            format!("{}-{}-{}", s, mode.as_str(), layer.as_str()),
                            log,
                            format!(
                                "{s} {} ({} layer, seed {seed})",
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
