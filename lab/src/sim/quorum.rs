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
//! - **the event log keeps up**: a member's last recorded event (`GET /v1/events`, what a
//!   watcher is told) says it claims exactly when its answers do; a mismatch may last no longer
//!   than the instant of the change (two samples in a row are a violation);
//! - **convergence**: after the final heal, one leader that every member names, within 10 s;
//!   with membership changes, its membership committed, every member the simulation added (and
//!   did not remove) a voter and every member it removed not one; no member stopped on a
//!   refusal, and every voter's incarnation confirmed (it may vote).
//!
//! With [`Spec::membership`], schedules also add, remove and replace members (the leader
//! included) through the admin API as an operator would, and wipe a member's disk and start it
//! again as the member it was, which must never vote (it refuses to run, or waits unconfirmed);
//! the checkers judge every node that ever ran.
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
use electd_client::{EventsPage, FaultSet, LeaderInfo, Members, Role};
use electd_client::{Mode, NodeId};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use std::sync::atomic::Ordering::Relaxed;
use tokio_util::sync::CancellationToken;

use super::clock::SimClock;
use super::net::{Effect, Leg, Net, Rule};
use super::schedule::{draw, draw_timing, draw_with_members, Step, Target, Timed};
use crate::chaos::checkers::{election_safety, promise_keeping, split_brain, time_goes_back};
use crate::chaos::record::{ProcEvent, ProcKind, Promise, RunLog};

/// The simulated nodes' admin token.
const SIM_ADMIN_TOKEN: &str = "simulation-admin-token";

/// A GET of `path`, as a client would send it.
fn get(path: &str) -> Request<Body> {
    Request::get(path).body(Body::empty()).expect("a request")
}

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
    /// Schedules add, remove, replace and wipe members too (drawn step by step, from the
    /// members as they are then).
    pub membership: bool,
}

/// A deliberately broken node (`electd-lab sim --unsafe`, `--vote-while-leading`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Flaw {
    /// Its claim lease is three times the followers' lease, so it claims long after the
    /// others may elect (`--unsafe`).
    LongLease,
    /// A leader votes for a higher term while a promise it answered can still run: the vote
    /// handler before the fix of docs/safety.md's step 4 (`--vote-while-leading`).
    VoteWhileLeading,
    /// A new data dir votes at once, without the members recording its incarnation: a member
    /// restarted on a wiped disk votes again as the member it was (docs/safety.md's step 10
    /// left out; `--trust-new-incarnation`).
    TrustNewIncarnation,
    /// A leader records the end of its claim only between probes, up to a probe timeout after
    /// it ended: the event log says it claims while its answers say not (the role loop before
    /// `probe_recording`; `--record-between-probes`).
    RecordBetweenProbes,
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
            membership: false,
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
    /// Membership changes that completed: adds, removals (replacements count as both).
    pub added: u64,
    pub removed: u64,
    /// Members restarted on a wiped disk that refused to run.
    pub refused: u64,
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
    /// Each member's event log as the sampler has read it.
    logs: BTreeMap<NodeId, LogCursor>,
}

impl Watch {
    /// A violation seen by sampling: kept up to 20 (one that lasts is seen at every sample).
    fn sampled_violation(&mut self, v: String) {
        if self.violations.len() < 20 {
            self.violations.push(v);
        }
    }
}

/// How far the sampler has read a member's event log (`GET /v1/events?since=`), whether its
/// last event claims, and since when its answers have said otherwise.
#[derive(Default)]
struct LogCursor {
    next: u64,
    claims: bool,
    disagrees_since: Option<u64>,
}

struct Running {
    node: Arc<Node>,
    stop: CancellationToken,
    /// Cancelled by the node when it stops on its own (a refused incarnation, a storage
    /// failure).
    fatal: CancellationToken,
}

struct Sim {
    spec: Spec,
    timing: Timing,
    dir: PathBuf,
    clock: Arc<SimClock>,
    net: Arc<Net>,
    rng: StdRng,
    /// The members as the simulation knows them (its changes that completed).
    ids: Vec<NodeId>,
    /// Every node that ever ran, for the sampler and the checkers.
    ever: Arc<Mutex<Vec<NodeId>>>,
    /// Members whose removal completed (and who were not added again).
    removed: BTreeSet<NodeId>,
    /// Members whose last change did not answer done: it may still complete (or not), so
    /// the end checks neither way for them.
    uncertain: BTreeSet<NodeId>,
    /// Wiped members stopped whose removal did not complete yet: removed and joined again as
    /// soon as the cluster lets (an operator would retry too).
    to_replace: BTreeSet<NodeId>,
    added: u64,
    removals: u64,
    refused: u64,
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
            ever: Arc::new(Mutex::new(ids.clone())),
            ids,
            removed: BTreeSet::new(),
            uncertain: BTreeSet::new(),
            to_replace: BTreeSet::new(),
            added: 0,
            removals: 0,
            refused: 0,
            running: BTreeMap::new(),
            cuts: BTreeMap::new(),
            loss: 0.0,
            delays: BTreeMap::new(),
            procs: Vec::new(),
            watch: Arc::default(),
            flaws: Flaws {
                vote_while_leading: spec.flaw == Some(Flaw::VoteWhileLeading),
                trust_new_incarnation: spec.flaw == Some(Flaw::TrustNewIncarnation),
                record_between_probes: spec.flaw == Some(Flaw::RecordBetweenProbes),
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

    fn addr(id: NodeId) -> String {
        format!("127.0.0.1:{}", 20_000 + id)
    }

    /// Member `id`'s config: the members as the simulation knows them, and `id` itself; with
    /// `join`, the address of another member (the node takes its membership from the log).
    fn config(&self, id: NodeId, join: bool) -> Config {
        let mut peers: BTreeSet<NodeId> = self.ids.iter().copied().collect();
        peers.insert(id);
        let join = join
            .then(|| self.ids.iter().find(|&&m| m != id).map(|&m| Sim::addr(m)))
            .flatten();
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
            join,
            priority_settle_ms: None,
            tls: None,
            peers: peers
                .into_iter()
                .map(|p| Peer {
                    id: p,
                    addr: Sim::addr(p),
                    priority: 0,
                })
                .collect(),
        }
    }

    /// Starts member `id` on its disk, as a new incarnation (with `join`: as a node that joins).
    async fn start(&mut self, id: NodeId, join: bool) {
        let (incarnation, wire) = self.net.incarnate(id);
        let around = Surroundings {
            clock: self.clock.clone(),
            wire: Some(wire),
            disk: Some(self.disks[&id].clone()),
            flaws: self.flaws.clone(),
        };
        let seed = self.spec.seed ^ (id << 32) ^ incarnation;
        let (stop, fatal) = (CancellationToken::new(), CancellationToken::new());
        self.proc_event(id, ProcKind::Start);
        let cfg = self.config(id, join);
        let node = Node::start_in(cfg, seed, stop.clone(), fatal.clone(), around)
            .await
            .expect("a simulated node starts");
        self.net.attach(id, incarnation, electd::app(node.clone()));
        self.running.insert(id, Running { node, stop, fatal });
        self.apply_faults(id).await;
    }

    /// A wiped disk for `id`: what it had is gone; the sampler's memory of its terms too.
    fn wipe(&mut self, id: NodeId) {
        self.disks.insert(id, Arc::default());
        self.watch.lock().expect("watch").terms.remove(&id);
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
        let mut set = self.fault_set(id);
        if self.spec.membership {
            // A node takes cuts only for the members it knows: a new member it has not heard
            // of yet, a removed one it forgot, are none of its business.
            let known = self.known_members(id).await;
            set.block_to.retain(|p| known.contains(p));
            set.block_from.retain(|p| known.contains(p));
        }
        let body = serde_json::to_vec(&set).expect("a fault set");
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

    /// The members node `id` knows (`GET /v1/status`'s peers, which the fault layer checks
    /// its sets against).
    async fn known_members(&self, id: NodeId) -> BTreeSet<NodeId> {
        let req = get("/v1/status");
        match self.net.ask(id, req).await {
            Some((200, b)) => serde_json::from_slice::<electd_client::Status>(&b)
                .map(|st| st.peers.iter().map(|p| p.id).collect())
                .unwrap_or_default(),
            _ => BTreeSet::new(),
        }
    }

    /// The smallest voter set of the latest membership any running member's log names (two
    /// sets during a joint change): a change that did not answer may have left one smaller
    /// than the members the simulation counts.
    async fn smallest_voter_set(&self) -> usize {
        let mut latest: Option<Members> = None;
        for &id in self.running.keys() {
            let req = get("/v1/members");
            if let Some((200, b)) = self.net.ask(id, req).await {
                if let Ok(m) = serde_json::from_slice::<Members>(&b) {
                    if latest.as_ref().is_none_or(|l| m.log_index > l.log_index) {
                        latest = Some(m);
                    }
                }
            }
        }
        latest
            .and_then(|m| m.voter_sets.iter().map(Vec::len).min())
            .unwrap_or(0)
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
            (Target::Leader, Some(l)) if self.ids.contains(&l) => l,
            (Target::Leader, _) => self.ids[self.rng.gen_range(0..self.ids.len())],
        }
    }

    /// An admin request to the claimant (whoever claims when it is sent), asked again up to
    /// five times, a follower lease apart, while nobody claims or the answer says to (no
    /// leader, another change in progress, a change that did not complete). The last answer.
    async fn to_leader(&self, method: &str, path: &str, body: &str) -> Option<(u16, String)> {
        let f = Duration::from_millis(self.timing.follower_lease_ms);
        let mut last = None;
        for _ in 0..5 {
            if let Some(l) = self.claimant() {
                let req = admin(Request::builder().method(method).uri(path))
                    .header("content-type", "application/json")
                    .body(Body::from(body.to_string()))
                    .expect("a request");
                let answer = self.net.ask(l, req).await;
                last = answer.map(|(s, b)| (s, String::from_utf8_lossy(&b).into_owned()));
                match &last {
                    Some((200, _)) => return last,
                    Some((s, b)) if *s == 404 || b.contains("already_member") => return last,
                    _ => {}
                }
            }
            tokio::time::sleep(f).await;
        }
        last
    }

    /// Starts `id` on an empty disk with `join` and asks the claimant to add it; a member of
    /// the simulation's once the add completed. A node whose add did not complete runs on (it
    /// may still become a learner or a voter: the membership at the end says).
    async fn join(&mut self, id: NodeId) {
        self.wipe(id);
        {
            let mut ever = self.ever.lock().expect("ever");
            if !ever.contains(&id) {
                ever.push(id);
            }
        }
        self.start(id, true).await;
        let body = format!("{{\"id\": {id}, \"addr\": \"{}\"}}", Sim::addr(id));
        let answer = self.to_leader("POST", "/v1/admin/members", &body).await;
        match answer {
            Some((200, _)) => {
                self.ids.push(id);
                self.ids.sort_unstable();
                self.removed.remove(&id);
                self.uncertain.remove(&id);
                self.added += 1;
                self.note(format!("add {id}: a voter"));
            }
            other => {
                // It may still complete: the node runs on, a member or not (the membership at
                // the end says).
                self.note(format!("add {id} did not complete ({other:?})"));
                self.uncertain.insert(id);
            }
        }
    }

    /// Asks the claimant to remove `id` (the leader hands over first when it is `id`); answers
    /// whether the removal completed.
    async fn remove(&mut self, id: NodeId) -> bool {
        let answer = self
            .to_leader("DELETE", &format!("/v1/admin/members/{id}"), "")
            .await;
        let done = matches!(answer, Some((200 | 404, _)));
        if done {
            self.ids.retain(|&m| m != id);
            self.removed.insert(id);
            self.uncertain.remove(&id);
            self.removals += 1;
        } else {
            self.uncertain.insert(id);
        }
        let said = match &answer {
            Some((status, body)) => match serde_json::from_str::<Members>(body) {
                Ok(m) => format!("{status}, voters {:?}", m.voter_sets),
                Err(_) => format!("{status} {}", body.chars().take(160).collect::<String>()),
            },
            None => "no answer".into(),
        };
        self.note(format!("remove {id}: {said}"));
        done
    }

    /// Steps that change the members; `false` for any other step.
    async fn change_members(&mut self, step: &Step) -> bool {
        let f = self.timing.follower_lease_ms;
        match step {
            Step::Add => {
                let id = self.ever.lock().expect("ever").iter().max().unwrap_or(&0) + 1;
                self.join(id).await;
            }
            Step::Remove { target, linger_ms } => {
                let n = self.resolve(*target);
                self.note(format!(
                    "remove {n} ({target}), stop it {linger_ms} ms later"
                ));
                if self.ids.len() <= super::schedule::FEWEST_MEMBERS {
                    self.note(format!("remove {n}: none (too few members)"));
                } else if self.remove(n).await {
                    tokio::time::sleep(Duration::from_millis(*linger_ms)).await;
                    self.crash(n);
                }
            }
            Step::Replace { target, down_ms } => {
                let n = self.resolve(*target);
                self.note(format!("replace {n} ({target})"));
                if self.remove(n).await {
                    self.crash(n);
                    tokio::time::sleep(Duration::from_millis(*down_ms)).await;
                    self.join(n).await;
                }
            }
            Step::Wipe { .. }
                if !self.to_replace.is_empty()
                    || self.ids.len() < 3
                    || self.smallest_voter_set().await < 3 =>
            {
                // One lost disk at a time, among three voters or more in every voter set in
                // force: two of four lost, or one of two (the new set of a joint change that
                // did not complete), would be a majority whose data is gone, where no leader
                // may be elected (and none is).
                self.note(format!(
                    "wipe: none ({} members, {:?} still to replace, or a voter set of fewer \
                     than 3 in force)",
                    self.ids.len(),
                    self.to_replace
                ));
            }
            Step::Wipe { target, down_ms } => {
                let n = self.resolve(*target);
                self.note(format!("wipe {n} ({target}), restart it without join"));
                self.crash(n);
                self.wipe(n);
                tokio::time::sleep(Duration::from_millis(*down_ms)).await;
                self.start(n, false).await;
                self.watch_wiped(n, 20 * f).await;
                // Then as an operator would: remove it and let it join again.
                self.crash(n);
                self.to_replace.insert(n);
                self.replace_wiped().await;
            }
            _ => return false,
        }
        true
    }

    /// Removes each wiped member still waiting for it and lets it join again.
    async fn replace_wiped(&mut self) {
        for n in std::mem::take(&mut self.to_replace) {
            if self.remove(n).await {
                self.join(n).await;
            } else {
                self.to_replace.insert(n);
            }
        }
    }

    /// For `ms` of simulated time, member `n`, started on a wiped disk as the member it was:
    /// it must stop on its own (a member knows its earlier incarnation) or stay unconfirmed;
    /// never be confirmed as a voter.
    async fn watch_wiped(&mut self, n: NodeId, ms: u64) {
        let until = self.clock.elapsed_ms() + ms;
        while self.clock.elapsed_ms() < until {
            let Some(r) = self.running.get(&n) else {
                return;
            };
            if r.fatal.is_cancelled() {
                self.refused += 1;
                self.note(format!("{n} refused to run on its wiped disk"));
                return;
            }
            let confirmed = r.node.engine_status()["identity"]["confirmed"] == true;
            if confirmed {
                self.watch.lock().expect("watch").violations.push(format!(
                    "at {} ms member {n}, restarted on a wiped disk without join, was \
                     confirmed: it votes again as the member it was",
                    self.clock.elapsed_ms()
                ));
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        self.note(format!("{n} still unconfirmed on its wiped disk"));
    }

    async fn apply(&mut self, step: &Step) {
        if self.change_members(step).await {
            self.apply_all_faults().await;
            return;
        }
        match step {
            Step::Crash { target, down_ms } => {
                let n = self.resolve(*target);
                self.note(format!("crash {n} ({target}) for {down_ms} ms"));
                self.crash(n);
                tokio::time::sleep(Duration::from_millis(*down_ms)).await;
                self.start(n, false).await;
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
            | Step::Squeeze { .. }
            | Step::Add
            | Step::Remove { .. }
            | Step::Replace { .. }
            | Step::Wipe { .. } => {
                unreachable!("not a network step")
            }
        }
    }

    async fn play(&mut self) {
        for id in self.ids.clone() {
            self.start(id, false).await;
        }
        let f = self.timing.follower_lease_ms;
        self.note(format!("timing {:?}", self.timing));
        let sampler = tokio::spawn(sample(
            self.net.clone(),
            self.ever.clone(),
            self.clock.clone(),
            self.watch.clone(),
            sample_every(f),
        ));
        let schedule: Vec<Timed> = match &self.spec.script {
            Some(steps) => steps.clone(),
            None if self.spec.membership => Vec::new(),
            None => draw(&mut self.rng, self.spec.nodes, self.spec.steps, f),
        };
        tokio::time::sleep(Duration::from_millis(10 * f)).await;
        for t in &schedule {
            self.apply(&t.step).await;
            tokio::time::sleep(Duration::from_millis(t.then_ms)).await;
        }
        if self.spec.membership && self.spec.script.is_none() {
            // Drawn as they come: the members change.
            for _ in 0..self.spec.steps {
                let t = draw_with_members(&mut self.rng, &self.ids, f);
                self.apply(&t.step).await;
                tokio::time::sleep(Duration::from_millis(t.then_ms)).await;
                self.replace_wiped().await;
            }
        }
        self.apply(&Step::Heal).await;
        self.replace_wiped().await;
        self.converge().await;
        sampler.abort();
        for r in self.running.values() {
            r.stop.cancel();
        }
        self.running.clear();
        self.net.clear();
    }

    /// After the final heal: one leader that every member names, within 10 s. The members
    /// are those of the leader's membership, once it is committed with one voter set, in
    /// which every member the simulation added is a voter and none it removed is; a node that
    /// runs outside it (an add that did not complete) is not asked.
    async fn converge(&mut self) {
        let until = self.clock.elapsed_ms() + 10_000;
        let mut last = String::new();
        while self.clock.elapsed_ms() < until {
            let running: Vec<NodeId> = self.running.keys().copied().collect();
            match self.settled(&running).await {
                Ok(()) => return,
                Err(why) => last = why,
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // For the replay's timeline: how each running node sees itself and the membership.
        for (id, r) in &self.running {
            let req = get("/v1/members");
            let members = match self.net.ask(*id, req).await {
                Some((_, b)) => String::from_utf8_lossy(&b).into_owned(),
                None => "no answer".into(),
            };
            self.note(format!(
                "{id}: {} members {members}",
                r.node.engine_status()
            ));
        }
        self.watch.lock().expect("watch").violations.push(format!(
            "no leader agreed by all members within 10 s of the final heal: {last}"
        ));
    }

    /// Whether the running members agree on a leader whose membership is settled as the
    /// simulation changed it; why not, if not.
    async fn settled(&self, running: &[NodeId]) -> Result<(), String> {
        let seen = answers(&self.net, running).await;
        let claimants: Vec<NodeId> = seen
            .iter()
            .filter(|(_, i)| i.role == Role::Leader)
            .map(|(id, _)| *id)
            .collect();
        let [l] = claimants[..] else {
            return Err(format!("claimants {claimants:?}: {}", describe(&seen)));
        };
        let req = get("/v1/members");
        let m: Members = match self.net.ask(l, req).await {
            Some((200, b)) => serde_json::from_slice(&b).map_err(|e| e.to_string())?,
            other => return Err(format!("{l} /v1/members: {other:?}")),
        };
        let [voters] = &m.voter_sets[..] else {
            return Err(format!("{l}: voter sets {:?}", m.voter_sets));
        };
        if !m.committed {
            return Err(format!("{l}: membership {voters:?} not committed"));
        }
        let sure = |i: &&NodeId| !self.uncertain.contains(i);
        if let Some(x) = self.ids.iter().filter(sure).find(|i| !voters.contains(i)) {
            return Err(format!("{l}: {x} added but not a voter of {voters:?}"));
        }
        if let Some(x) = self
            .removed
            .iter()
            .filter(sure)
            .find(|i| voters.contains(i))
        {
            return Err(format!("{l}: {x} removed but a voter of {voters:?}"));
        }
        let members: Vec<NodeId> = m
            .members
            .iter()
            .map(|x| x.id)
            .filter(|id| running.contains(id))
            .collect();
        // A member that stopped on a refusal, or a voter that may not vote, is no live member
        // even when it still follows the leader.
        for id in &members {
            let r = &self.running[id];
            if r.fatal.is_cancelled() {
                return Err(format!("{id} stopped: it refused to run"));
            }
            if voters.contains(id) && r.node.engine_status()["identity"]["confirmed"] != true {
                return Err(format!("{id}: a voter whose incarnation is not confirmed"));
            }
        }
        let disagree: Vec<NodeId> = members
            .iter()
            .copied()
            .filter(|id| seen.get(id).and_then(|i| i.view().leader) != Some(l))
            .collect();
        if disagree.is_empty() {
            Ok(())
        } else {
            Err(format!("{disagree:?} do not name {l}: {}", describe(&seen)))
        }
    }

    /// The checkers over the event logs, and what the sampler found.
    fn outcome(&self) -> Outcome {
        let ever = self.ever.lock().expect("ever").clone();
        let mut unread = Vec::new();
        let events = ever
            .iter()
            .flat_map(|&id| {
                let path = self.dir.join(format!("node{id}")).join(electd::EVENTS_FILE);
                // A member that ever ran has a log (its node opens it at start): one that
                // cannot be read is a violation, not a member without events.
                electd::read_events_file(&path).unwrap_or_else(|e| {
                    unread.push(format!("node {id}'s event log cannot be read: {e}"));
                    Vec::new()
                })
            })
            .collect();
        let log = RunLog {
            nodes: ever.clone(),
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
        violations.extend(unread);
        if let Some(b) = time_goes_back(&log).first() {
            violations.push(format!(
                "node {}'s event log goes back in time: seq {} at {} ns after seq {} at {} ns",
                b.node, b.seq, b.t_mono_ns, b.after_seq, b.after_t_mono_ns
            ));
        }
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
            added: self.added,
            removed: self.removals,
            refused: self.refused,
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
        let req = get("/v1/leader");
        if let Some((200, bytes)) = net.ask(id, req).await {
            if let Ok(info) = serde_json::from_slice::<LeaderInfo>(&bytes) {
                out.insert(id, info);
            }
        }
    }
    out
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
    ids: Arc<Mutex<Vec<NodeId>>>,
    clock: Arc<SimClock>,
    watch: Arc<Mutex<Watch>>,
    every: Duration,
) {
    let mut tick = tokio::time::interval(every);
    loop {
        tick.tick().await;
        let sent_ns = clock.now_ns();
        let ids = ids.lock().expect("ever").clone();
        let seen = answers(&net, &ids).await;
        let froms: Vec<(NodeId, u64)> = {
            let w = watch.lock().expect("watch");
            seen.keys()
                .map(|&id| (id, w.logs.get(&id).map_or(0, |c| c.next)))
                .collect()
        };
        let mut pages = BTreeMap::new();
        for (id, since) in froms {
            if let Some((200, b)) = net.ask(id, get(&format!("/v1/events?since={since}"))).await {
                if let Ok(page) = serde_json::from_slice::<EventsPage>(&b) {
                    pages.insert(id, page);
                }
            }
        }
        let claimants: Vec<NodeId> = seen
            .iter()
            .filter(|(_, i)| i.role == Role::Leader)
            .map(|(id, _)| *id)
            .collect();
        let t = clock.elapsed_ms();
        let mut w = watch.lock().expect("watch");
        for (id, page) in pages {
            let answered = seen[&id].role == Role::Leader;
            let c = w.logs.entry(id).or_default();
            if let Some(last) = page.events.last() {
                c.claims = last.view.claims();
            }
            c.next = page.next;
            let lagged = if c.claims == answered {
                c.disagrees_since = None;
                None
            } else if let Some(since) = c.disagrees_since.take() {
                Some(format!(
                    "at {t} ms node {id}'s event log has said since {since} ms that it {}, its \
                     answers the opposite",
                    if c.claims { "claims" } else { "does not claim" }
                ))
            } else {
                c.disagrees_since = Some(t);
                None
            };
            if let Some(v) = lagged {
                w.sampled_violation(v);
            }
        }
        for (&node, info) in seen.iter().filter(|(_, i)| i.role == Role::Leader) {
            // In quorum mode every "leader" answer carries its promise (api-v1.md): one
            // without is a broken contract, not a promise of no length.
            let Some(lease_ms) = info.lease_ms else {
                w.sampled_violation(format!(
                    "at {t} ms node {node} answers leader of term {} without lease_ms",
                    info.term
                ));
                continue;
            };
            w.promises.push(Promise {
                node,
                term: info.term,
                from_ns: sent_ns,
                until_ns: sent_ns + lease_ms * 1_000_000,
            });
        }
        if claimants.len() > 1 {
            w.sampled_violation(format!("at {t} ms two nodes claim: {}", describe(&seen)));
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
