//! The real quorum node in simulated time. `run` starts `nodes` [`electd::Node`]s in quorum
//! mode in this process, on a single-threaded tokio runtime whose time is paused (it jumps
//! from one timer to the next), with the simulated clock, the in-memory network and in-memory
//! disks; plays a schedule drawn from the seed, with timings drawn from the seed across the
//! range the config accepts (`schedule::draw_timing`); and judges the run:
//! - **one claimant**: every [`sample_every`] of simulated time (5 ms at the default follower
//!   lease) each running member is asked `GET /v1/leader`, as a client would, and at most one
//!   may answer `"leader"`;
//! - **promises kept**: every claiming answer is a promise from the instant it was asked
//!   until that instant plus its `lease_ms`; no other member may claim inside it, by its
//!   answers or by its event log (the chaos checker C6);
//! - **one leader per term** and **never two claimants** over the members' event logs (the
//!   chaos checkers C1 and C2, which judge claim intervals exactly, not by sampling);
//! - **terms never go back**, across restarts too;
//! - **convergence**: after the final heal, one leader that every member names, within 10 s.
//!
//! Determinism: every random choice (schedule, latencies, the nodes' jitter and fault layers)
//! comes from the seed, and the runtime has one thread. What is not under the seed is tokio's
//! own choice among ready branches of a `select!` without `biased` (in openraft and in
//! electd), whose random source tokio seeds itself; `replays` in the report says whether
//! replaying a seed gave the same run.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::http::Request;
use electd::config::{Config, Peer};
use electd::quorum::{Disk, MemDisk};
use electd::quorum::{PATH_APPEND, PATH_VOTE};
use electd::{Flaws, Node, Surroundings, Timing};
use electd_client::{FaultSet, LeaderInfo, Role};
use electd_client::{Mode, NodeId};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use std::sync::atomic::Ordering::Relaxed;
use tokio_util::sync::CancellationToken;

use super::clock::SimClock;
use super::net::{Effect, Leg, Net, Rule};
use super::schedule::{draw, draw_timing, Step, Target, Timed};
use crate::chaos::checkers::{election_safety, promise_keeping, split_brain};
use crate::chaos::record::{ProcEvent, ProcKind, Promise, RunLog};

/// The simulated nodes' admin token.
const SIM_ADMIN_TOKEN: &str = "simulation-admin-token";

/// An admin request of the simulation (the nodes' admin API needs the token).
fn admin(req: axum::http::request::Builder) -> axum::http::request::Builder {
    req.header("authorization", format!("Bearer {SIM_ADMIN_TOKEN}"))
}

/// What to simulate.
#[derive(Clone, Debug)]
pub struct Spec {
    pub seed: u64,
    pub nodes: usize,
    /// Steps of the schedule before the final heal.
    pub steps: usize,
    /// A deliberately broken node, which the checkers must find out.
    pub flaw: Option<Flaw>,
    /// The timings the nodes run with.
    pub profile: Profile,
    /// The steps to play instead of drawing them from the seed (a test's own schedule).
    pub script: Option<Vec<Timed>>,
    /// Timings to run with instead of the profile's (a test's own schedule).
    pub timing: Option<Timing>,
}

/// A deliberately broken node (`electd-lab sim --unsafe`, `--vote-while-leading`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Flaw {
    /// Its claim lease is three times the followers' lease, so it claims long after the
    /// others may elect (`--unsafe`).
    LongLease,
    /// A leader votes for a higher term while a promise it answered can still run: the vote
    /// handler before the fix of README's safety step 4 (`--vote-while-leading`).
    VoteWhileLeading,
}

/// Where a schedule's timings come from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Profile {
    /// Drawn from the seed across the range the config accepts (`schedule::draw_timing`).
    #[default]
    Drawn,
    /// The product's defaults (heartbeat 30, follower lease 150).
    Default,
}

impl Spec {
    /// A schedule of `nodes` members and 8 steps with drawn timings and no flaw.
    pub fn new(seed: u64, nodes: usize) -> Spec {
        Spec {
            seed,
            nodes,
            steps: 8,
            flaw: None,
            profile: Profile::Drawn,
            script: None,
            timing: None,
        }
    }
}

/// What one schedule did and what the checkers found.
#[derive(Debug, Default)]
pub struct Outcome {
    pub seed: u64,
    pub violations: Vec<String>,
    /// The schedule's steps and every change of claimants, with simulated times.
    pub timeline: Vec<String>,
    /// Simulated time the schedule took.
    pub sim_ms: u64,
    /// Highest term reached.
    pub max_term: u64,
    /// The timings the nodes ran with.
    pub timing: Timing,
    /// Claiming answers judged as promises.
    pub promises: u64,
    /// Squeeze steps played (with a leader to squeeze).
    pub squeezes: u64,
    /// Vote requests for a higher term that reached a node while a promise of its own could
    /// still run: the path the vote-while-leading flaw takes.
    pub votes_inside_promise: u64,
    /// Of those, the votes granted (only with the flaw).
    pub granted_inside_promise: u64,
}

/// The electd timings a schedule runs with: drawn or the defaults, then broken if asked.
pub fn timing(spec: &Spec, rng: &mut StdRng) -> Timing {
    let t = match (spec.timing, spec.profile) {
        (Some(t), _) => t,
        (None, Profile::Drawn) => draw_timing(rng),
        (None, Profile::Default) => Timing::default(),
    };
    if spec.flaw == Some(Flaw::LongLease) {
        Timing {
            lease_ms: 3 * t.follower_lease_ms,
            ..t
        }
    } else {
        t
    }
}

/// Runs one schedule to its end and judges it.
pub fn run(spec: &Spec) -> Outcome {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a runtime");
    let dir = tempfile::tempdir().expect("a temp dir");
    let outcome = rt.block_on(async {
        let mut sim = Sim::new(spec, dir.path());
        sim.play().await;
        sim.outcome()
    });
    // Dropping the runtime ends every task the nodes left.
    drop(rt);
    outcome
}

/// What the sampler saw.
#[derive(Default)]
struct Watch {
    violations: Vec<String>,
    timeline: Vec<String>,
    /// The highest term each member has answered, across its restarts.
    terms: BTreeMap<NodeId, u64>,
    claimants: Vec<NodeId>,
    /// Every claiming answer, as the promise it makes.
    promises: Vec<Promise>,
}

struct Running {
    node: Arc<Node>,
    stop: CancellationToken,
}

struct Sim {
    spec: Spec,
    timing: Timing,
    dir: PathBuf,
    clock: Arc<SimClock>,
    net: Arc<Net>,
    rng: StdRng,
    ids: Vec<NodeId>,
    disks: BTreeMap<NodeId, Arc<MemDisk>>,
    running: BTreeMap<NodeId, Running>,
    /// Directed cuts `from -> to`, each written on its receiver (`block_from`) or not.
    cuts: BTreeMap<(NodeId, NodeId), bool>,
    loss: f64,
    delays: BTreeMap<NodeId, u64>,
    procs: Vec<ProcEvent>,
    start_ns: u64,
    watch: Arc<Mutex<Watch>>,
    /// Shared by every node: the flaw switched on, and the counts of its path.
    flaws: Flaws,
    squeezes: u64,
}

impl Sim {
    fn new(spec: &Spec, dir: &Path) -> Sim {
        let clock = SimClock::new();
        let ids: Vec<NodeId> = (1..=spec.nodes as NodeId).collect();
        let mut rng = StdRng::seed_from_u64(spec.seed);
        Sim {
            spec: spec.clone(),
            timing: timing(spec, &mut rng),
            dir: dir.to_path_buf(),
            start_ns: clock.now_ns(),
            clock,
            net: Net::new(spec.seed ^ 0x6e65_7400),
            rng,
            disks: ids.iter().map(|&i| (i, Arc::default())).collect(),
            ids,
            running: BTreeMap::new(),
            cuts: BTreeMap::new(),
            loss: 0.0,
            delays: BTreeMap::new(),
            procs: Vec::new(),
            watch: Arc::default(),
            flaws: Flaws {
                vote_while_leading: spec.flaw == Some(Flaw::VoteWhileLeading),
                ..Flaws::default()
            },
            squeezes: 0,
        }
    }

    fn note(&self, line: String) {
        let t = self.clock.elapsed_ms();
        self.watch
            .lock()
            .expect("watch")
            .timeline
            .push(format!("{t:>7} ms  {line}"));
    }

    fn config(&self, id: NodeId) -> Config {
        Config {
            id,
            listen: None,
            data_dir: self.dir.join(format!("node{id}")),
            mode: Mode::Quorum,
            cluster_id: "sim".into(),
            // The simulated network has no strangers; the admin API needs its token.
            cluster_secret: None,
            admin_token: Some(SIM_ADMIN_TOKEN.to_string().into()),
            store_url: None,
            insecure: true,
            seed: None,
            timing: self.timing,
            max_watchers: electd::config::DEFAULT_MAX_WATCHERS,
            join: None,
            priority_settle_ms: None,
            peers: self
                .ids
                .iter()
                .map(|&p| Peer {
                    id: p,
                    addr: format!("127.0.0.1:{}", 20_000 + p),
                    priority: 0,
                })
                .collect(),
        }
    }

    /// Starts member `id` on its disk, as a new incarnation.
    async fn start(&mut self, id: NodeId) {
        let (incarnation, wire) = self.net.incarnate(id);
        let around = Surroundings {
            clock: self.clock.clone(),
            wire: Some(wire),
            disk: Some(self.disks[&id].clone()),
            flaws: self.flaws.clone(),
        };
        let seed = self.spec.seed ^ (id << 32) ^ incarnation;
        let stop = CancellationToken::new();
        self.proc_event(id, ProcKind::Start);
        let node = Node::start_in(self.config(id), seed, stop.clone(), stop.clone(), around)
            .await
            .expect("a simulated node starts");
        self.net.attach(id, incarnation, electd::app(node.clone()));
        self.running.insert(id, Running { node, stop });
        self.apply_faults(id).await;
    }

    /// SIGKILL: the process is gone at once; its disk keeps what it had written.
    fn crash(&mut self, id: NodeId) {
        let Some(r) = self.running.remove(&id) else {
            return;
        };
        self.net.detach(id);
        r.stop.cancel();
        // Whatever the dead incarnation still writes lands on a disk nobody reads again.
        let survived = Arc::new(MemDisk::default());
        if let Ok(Some((_, bytes))) = self.disks[&id].read() {
            survived.write(&bytes).expect("memory");
        }
        self.disks.insert(id, survived);
        drop(r.node);
        self.proc_event(id, ProcKind::Kill);
    }

    /// What happened to member `id`'s process, for the checkers.
    fn proc_event(&mut self, node: NodeId, kind: ProcKind) {
        self.procs.push(ProcEvent {
            t_ns: self.clock.now_ns(),
            node,
            kind,
        });
    }

    /// The fault set of member `id` under the current cuts, loss and delays.
    fn fault_set(&self, id: NodeId) -> FaultSet {
        let mut set = FaultSet {
            drop_rate: self.loss,
            delay_ms: self.delays.get(&id).copied().unwrap_or(0),
            ..FaultSet::default()
        };
        for (&(from, to), &on_receiver) in &self.cuts {
            if from == id && !on_receiver {
                set.block_to.insert(to);
            }
            if to == id && on_receiver {
                set.block_from.insert(from);
            }
        }
        set
    }

    async fn apply_faults(&self, id: NodeId) {
        let body = serde_json::to_vec(&self.fault_set(id)).expect("a fault set");
        let req = admin(Request::put("/v1/admin/faults"))
            .header("content-type", "application/json")
            .body(Body::from(body))
            .expect("a request");
        let answer = self.net.ask(id, req).await;
        assert!(
            matches!(answer, Some((200, _))),
            "node {id} refused its fault set: {answer:?}"
        );
    }

    async fn apply_all_faults(&self) {
        for &id in self.running.keys() {
            self.apply_faults(id).await;
        }
    }

    /// Cuts every pair between different groups, each direction written on a random side.
    fn cut_between(&mut self, groups: &[Vec<NodeId>]) {
        for (i, g) in groups.iter().enumerate() {
            for (j, h) in groups.iter().enumerate() {
                if i != j {
                    for &a in g {
                        for &b in h {
                            let on_receiver = self.rng.gen_bool(0.5);
                            self.cuts.insert((a, b), on_receiver);
                        }
                    }
                }
            }
        }
    }

    /// The member that claims now, if one does.
    fn claimant(&self) -> Option<NodeId> {
        self.watch.lock().expect("watch").claimants.first().copied()
    }

    fn resolve(&mut self, t: Target) -> NodeId {
        match (t, self.claimant()) {
            (Target::Node(n), _) => n,
            (Target::Leader, Some(l)) => l,
            (Target::Leader, None) => self.ids[self.rng.gen_range(0..self.ids.len())],
        }
    }

    async fn apply(&mut self, step: &Step) {
        match step {
            Step::Crash { target, down_ms } => {
                let n = self.resolve(*target);
                self.note(format!("crash {n} ({target}) for {down_ms} ms"));
                self.crash(n);
                tokio::time::sleep(Duration::from_millis(*down_ms)).await;
                self.start(n).await;
                self.note(format!("restart {n}"));
            }
            Step::Pause { target, ms } => {
                let n = self.resolve(*target);
                self.note(format!("pause {n} ({target}) for {ms} ms"));
                self.net.pause(n);
                self.proc_event(n, ProcKind::Pause);
                tokio::time::sleep(Duration::from_millis(*ms)).await;
                self.net.resume(n);
                self.proc_event(n, ProcKind::Resume);
                self.note(format!("resume {n}"));
            }
            Step::Squeeze {
                hold_ms,
                vote_delay_ms,
            } => self.squeeze(*hold_ms, *vote_delay_ms).await,
            Step::Resign { to } => {
                if let Some(l) = self.claimant() {
                    let body = match to {
                        Some(t) => format!("{{\"to\": {t}}}"),
                        None => String::new(),
                    };
                    let req = admin(Request::post("/v1/admin/resign"))
                        .header("content-type", "application/json")
                        .body(Body::from(body))
                        .expect("a request");
                    let answer = self.net.ask(l, req).await.map(|(s, _)| s);
                    self.note(format!("resign {l} to {to:?}: {answer:?}"));
                }
            }
            network => {
                let line = self.change_network(network);
                self.note(line);
            }
        }
        self.apply_all_faults().await;
    }

    /// [`Step::Squeeze`] around the claimant: the rules are set, the answers of the muted
    /// members come back after `hold_ms`, the rest stays until the next heal.
    async fn squeeze(&mut self, hold_ms: u64, vote_delay_ms: u64) {
        let Some(leader) = self.claimant() else {
            self.note("squeeze: nobody claims".into());
            return;
        };
        self.squeezes += 1;
        let mut others: Vec<NodeId> = self.ids.iter().copied().filter(|&i| i != leader).collect();
        others.shuffle(&mut self.rng);
        // With the leader, the cut-off members are a majority of the membership.
        let (cut, muted) = others.split_at(self.ids.len() / 2);
        let mut rules = Vec::new();
        for &c in cut {
            rules.push(Rule {
                from: leader,
                to: c,
                path: PATH_APPEND,
                leg: Leg::Request,
                effect: Effect::Drop,
            });
            rules.push(Rule {
                from: c,
                to: leader,
                path: PATH_VOTE,
                leg: Leg::Request,
                effect: Effect::Delay(Duration::from_millis(vote_delay_ms)),
            });
        }
        let lasting = rules.clone();
        for &m in muted {
            rules.push(Rule {
                from: m,
                to: leader,
                path: PATH_APPEND,
                leg: Leg::Answer,
                effect: Effect::Drop,
            });
        }
        self.net.set_rules(rules);
        self.note(format!(
            "squeeze {leader}: its appends to {cut:?} lost, their votes {vote_delay_ms} ms late, \
             the answers of {muted:?} lost for {hold_ms} ms"
        ));
        tokio::time::sleep(Duration::from_millis(hold_ms)).await;
        self.net.set_rules(lasting);
        self.note(format!(
            "squeeze {leader}: the answers of {muted:?} pass again"
        ));
    }

    /// Changes the cuts, loss or delays as `step` says; answers the timeline's line.
    fn change_network(&mut self, step: &Step) -> String {
        match step {
            Step::Rules(rules) => {
                self.net.set_rules(rules.clone());
                format!("rules {rules:?}")
            }
            Step::Heal => {
                self.net.set_rules(Vec::new());
                self.cuts.clear();
                self.loss = 0.0;
                self.delays.clear();
                "heal".into()
            }
            Step::Split(groups) => {
                self.cut_between(groups);
                format!("split {groups:?}")
            }
            Step::Isolate(t) => {
                let n = self.resolve(*t);
                let rest: Vec<NodeId> = self.ids.iter().copied().filter(|&i| i != n).collect();
                self.cut_between(&[vec![n], rest]);
                format!("isolate {n} ({t})")
            }
            Step::Bridge {
                left,
                right,
                bridge,
            } => {
                self.cut_between(&[left.clone(), right.clone()]);
                format!("bridge {left:?} -{bridge}- {right:?}")
            }
            Step::RingOfMajorities => {
                let ids = self.ids.clone();
                let n = ids.len();
                for (i, &a) in ids.iter().enumerate() {
                    for (j, &b) in ids.iter().enumerate() {
                        let d = (i + n - j) % n;
                        if a != b && d != 1 && d != n - 1 {
                            let on_receiver = self.rng.gen_bool(0.5);
                            self.cuts.insert((a, b), on_receiver);
                        }
                    }
                }
                "ring of majorities".into()
            }
            Step::OneWay {
                from,
                to,
                on_receiver,
            } => {
                let from = self.resolve(*from);
                if from == *to {
                    return format!("one-way cut {from} -> {to}: none (the same node)");
                }
                self.cuts.insert((from, *to), *on_receiver);
                let side = if *on_receiver {
                    "block_from"
                } else {
                    "block_to"
                };
                format!("one-way cut {from} -> {to} ({side})")
            }
            Step::Loss(p) => {
                self.loss = *p;
                format!("loss {p}")
            }
            Step::Delay { node, ms } => {
                self.delays.insert(*node, *ms);
                format!("delay {ms} ms on {node}")
            }
            Step::Crash { .. }
            | Step::Pause { .. }
            | Step::Resign { .. }
            | Step::Squeeze { .. } => {
                unreachable!("not a network step")
            }
        }
    }

    async fn play(&mut self) {
        for id in self.ids.clone() {
            self.start(id).await;
        }
        let f = self.timing.follower_lease_ms;
        self.note(format!("timing {:?}", self.timing));
        let sampler = tokio::spawn(sample(
            self.net.clone(),
            self.ids.clone(),
            self.clock.clone(),
            self.watch.clone(),
            sample_every(f),
        ));
        let schedule: Vec<Timed> = match &self.spec.script {
            Some(steps) => steps.clone(),
            None => draw(&mut self.rng, self.spec.nodes, self.spec.steps, f),
        };
        tokio::time::sleep(Duration::from_millis(10 * f)).await;
        for t in &schedule {
            self.apply(&t.step).await;
            tokio::time::sleep(Duration::from_millis(t.then_ms)).await;
        }
        self.apply(&Step::Heal).await;
        self.converge().await;
        sampler.abort();
        for r in self.running.values() {
            r.stop.cancel();
        }
        self.running.clear();
        self.net.clear();
    }

    /// After the final heal: one leader that every member names, within 10 s.
    async fn converge(&mut self) {
        let until = self.clock.elapsed_ms() + 10_000;
        while self.clock.elapsed_ms() < until {
            if agreed(&self.net, &self.ids).await.is_some() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let seen = answers(&self.net, &self.ids).await;
        self.watch.lock().expect("watch").violations.push(format!(
            "no leader agreed by all within 10 s of the final heal: {}",
            describe(&seen)
        ));
    }

    /// The checkers over the event logs, and what the sampler found.
    fn outcome(&self) -> Outcome {
        let events = self
            .ids
            .iter()
            .flat_map(|&id| {
                let path = self.dir.join(format!("node{id}")).join(electd::EVENTS_FILE);
                electd::read_events_file(&path).unwrap_or_default()
            })
            .collect();
        let log = RunLog {
            nodes: self.ids.clone(),
            start_ns: self.start_ns,
            end_ns: self.clock.now_ns(),
            events,
            procs: self.procs.clone(),
            leased: true,
            promises: self.watch.lock().expect("watch").promises.clone(),
            ..RunLog::default()
        };
        let watch = self.watch.lock().expect("watch");
        let mut violations = watch.violations.clone();
        if let Some(c6) = promise_keeping(&log) {
            if let Some(b) = c6.broken.first() {
                let at = |ns: u64| ns.saturating_sub(self.start_ns) as f64 / 1e6;
                violations.push(format!(
                    "a promise broken (C6): node {} claimed at {:.1} ms inside node {}'s promise \
                     of term {} ({:.1} to {:.1} ms); {} of {} promises broken",
                    b.intruder,
                    at(b.from_ns),
                    b.promise.node,
                    b.promise.term,
                    at(b.promise.from_ns),
                    at(b.promise.until_ns),
                    c6.broken.len(),
                    c6.promises
                ));
            }
        }
        if let Some(safety) = election_safety(&log) {
            if !safety.safe {
                violations.push(format!(
                    "a term led by two nodes (event logs): {:?}",
                    safety.conflicts
                ));
            }
        }
        let sb = split_brain(&log);
        if sb.split_brain_ns > 0 {
            violations.push(format!(
                "two claimants for {:.1} ms (event logs): {:?}",
                sb.split_brain_ns as f64 / 1e6,
                sb.spans
            ));
        }
        Outcome {
            seed: self.spec.seed,
            violations,
            timeline: watch.timeline.clone(),
            sim_ms: self.clock.elapsed_ms(),
            max_term: watch.terms.values().copied().max().unwrap_or(0),
            timing: self.timing,
            promises: watch.promises.len() as u64,
            squeezes: self.squeezes,
            votes_inside_promise: self.flaws.votes_inside_promise.load(Relaxed),
            granted_inside_promise: self.flaws.granted_inside_promise.load(Relaxed),
        }
    }
}

/// How often the sampler asks every member: a thirtieth of the follower lease (5 ms at the
/// default 150), between 1 and 33 ms. The event-log checkers judge claims exactly; the
/// samples are the clients' answers, and a claim lease spans about 25 of them.
pub fn sample_every(follower_lease_ms: u64) -> Duration {
    Duration::from_micros((follower_lease_ms * 1000 / 30).clamp(1_000, 33_000))
}

/// `GET /v1/leader` of every running member.
async fn answers(net: &Net, ids: &[NodeId]) -> BTreeMap<NodeId, LeaderInfo> {
    let mut out = BTreeMap::new();
    for &id in ids {
        let req = Request::get("/v1/leader")
            .body(Body::empty())
            .expect("a request");
        if let Some((200, bytes)) = net.ask(id, req).await {
            if let Ok(info) = serde_json::from_slice::<LeaderInfo>(&bytes) {
                out.insert(id, info);
            }
        }
    }
    out
}

/// The leader every running member names, if it claims the role itself.
async fn agreed(net: &Net, ids: &[NodeId]) -> Option<NodeId> {
    let seen = answers(net, ids).await;
    let leaders: BTreeSet<Option<NodeId>> = seen.values().map(|i| i.view().leader).collect();
    match leaders.into_iter().collect::<Vec<_>>()[..] {
        [Some(l)] if seen.get(&l).is_some_and(|i| i.role == Role::Leader) => Some(l),
        _ => None,
    }
}

fn describe(seen: &BTreeMap<NodeId, LeaderInfo>) -> String {
    seen.iter()
        .map(|(id, i)| {
            format!(
                "{id}: {} t{} l{:?}",
                i.role.as_str(),
                i.term,
                i.view().leader
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Every `every`: who claims, judged as `/v1/leader` judges it, and the promise each claiming
/// answer makes; terms never going back.
async fn sample(
    net: Arc<Net>,
    ids: Vec<NodeId>,
    clock: Arc<SimClock>,
    watch: Arc<Mutex<Watch>>,
    every: Duration,
) {
    let mut tick = tokio::time::interval(every);
    loop {
        tick.tick().await;
        let sent_ns = clock.now_ns();
        let seen = answers(&net, &ids).await;
        let claimants: Vec<NodeId> = seen
            .iter()
            .filter(|(_, i)| i.role == Role::Leader)
            .map(|(id, _)| *id)
            .collect();
        let t = clock.elapsed_ms();
        let mut w = watch.lock().expect("watch");
        for (&node, info) in seen.iter().filter(|(_, i)| i.role == Role::Leader) {
            w.promises.push(Promise {
                node,
                term: info.term,
                from_ns: sent_ns,
                until_ns: sent_ns + info.lease_ms.unwrap_or(0) * 1_000_000,
            });
        }
        if claimants.len() > 1 {
            let v = format!("at {t} ms two nodes claim: {}", describe(&seen));
            if w.violations.len() < 20 {
                w.violations.push(v);
            }
        }
        for (id, info) in &seen {
            let before = w.terms.get(id).copied().unwrap_or(0);
            if info.term < before {
                w.violations.push(format!(
                    "at {t} ms node {id} answers term {} after term {before}",
                    info.term
                ));
            }
            w.terms.insert(*id, info.term.max(before));
        }
        if claimants != w.claimants {
            let terms: Vec<u64> = claimants.iter().map(|c| seen[c].term).collect();
            w.timeline.push(format!(
                "{t:>7} ms  claimants {claimants:?} terms {terms:?}"
            ));
            w.claimants = claimants;
        }
    }
}
