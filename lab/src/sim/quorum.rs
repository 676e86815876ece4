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
use electd::config::{Config, Peer, ValidConfig};
use electd::quorum::{Disk, MemDisk};
use electd::quorum::{PATH_APPEND, PATH_VOTE};
use electd::roles::RoleFlaw;
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
use super::roles::{self, RoleWatch};
use super::schedule::{
    draw, draw_lapse, draw_timing, draw_with_members, Step, Target, Timed, FEWEST_MEMBERS,
    MOST_MEMBERS,
};
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
    /// With `membership` and drawn steps: the schedule also draws, from a random source of its
    /// own, the priorities of its members and at most one of the steps that set up issue 29's
    /// preconditions (`schedule::draw_lapse`), and judges the adds that did not answer once
    /// the membership says what became of them. Off, a seed draws the schedule it drew before
    /// (the schedules pinned as once failed).
    pub lapses: bool,
    /// The first members stand for named roles once the cluster has formed, and the sampler
    /// judges every role's promises too (`sim/roles.rs`). Off, a seed runs as it did before
    /// roles were simulated.
    pub roles: bool,
    /// Members that don't vote (ids 101, 102, …) join once the cluster has formed, and the
    /// checks judge that none claims the cluster's election and no voter set holds one
    /// (docs/safety.md, "Non-voters"). 0: a seed runs as it did before.
    pub nonvoters: usize,
}

/// A deliberately broken node (`electd-lab sim --unsafe`, `--vote-while-leading`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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
    /// A leader changes the membership without writing the voters' incarnations into the log
    /// (identity.rs, rule 5 left out; `--unlogged-incarnations`): members added while a node
    /// was cut off confirm its wiped successor.
    UnloggedIncarnations,
    /// The preferred leader hands over without asking whether the successor's data dir is
    /// confirmed (`--handover-to-unconfirmed`): a wiped voter started with join is handed the
    /// role every settle time, and cannot take it.
    HandoverToUnconfirmed,
    /// A snapshot that removed a member does not make the node forget its incarnation
    /// (`--snapshot-keeps-incarnations`): the member added back is refused.
    SnapshotKeepsIncarnations,
    /// One rule of named roles left out (`--role-flaw NAME`, with roles; electd's
    /// `roles::RoleFlaw`): the role checker must report promises broken.
    Role(RoleFlaw),
    /// A leader's probe counts the acknowledgements of non-voters as voters' (N1 left out;
    /// `--count-learner-ack`, with non-voters): an isolated leader goes on claiming on theirs.
    CountLearnerAck,
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
            lapses: true,
            roles: false,
            nonvoters: 0,
        }
    }
}

/// How often a schedule reached the preconditions of issue 29's findings (`schedule::Step::Grow`,
/// `WipeJoin`, `Starve`, the priorities, the adds that did not answer).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Reached {
    /// Growths to seven members with a member cut off from those added for longer than the
    /// rounds of hellos.
    pub grown_cut_off: u64,
    /// Of those, the cut-off member then wiped and started without join, reaching only the
    /// members added.
    pub wiped_after_growth: u64,
    /// Wiped voters started again with join, without being removed.
    pub wipe_joined: u64,
    /// Of those, the member of the highest priority, while another led.
    pub wipe_joined_preferred: u64,
    /// Schedules whose members had priorities.
    pub prioritised: u64,
    /// Handovers (distinct resignations) to a member of higher priority than the leader's.
    pub preferred_handovers: u64,
    /// Snapshots installed on a member starved of appends while a member was removed.
    pub snapshots: u64,
    /// Members removed and added back, judged after a member that missed the removal took a
    /// snapshot, with that member's answer needed for the confirmation.
    pub readded_after_snapshot: u64,
    /// Adds that did not answer, judged once the membership said what became of them, and of
    /// those, the ones that had made the node a voter.
    pub uncertain_judged: u64,
    pub uncertain_members: u64,
}

impl Reached {
    pub fn add(&mut self, o: &Reached) {
        self.grown_cut_off += o.grown_cut_off;
        self.wiped_after_growth += o.wiped_after_growth;
        self.wipe_joined += o.wipe_joined;
        self.wipe_joined_preferred += o.wipe_joined_preferred;
        self.prioritised += o.prioritised;
        self.preferred_handovers += o.preferred_handovers;
        self.snapshots += o.snapshots;
        self.readded_after_snapshot += o.readded_after_snapshot;
        self.uncertain_judged += o.uncertain_judged;
        self.uncertain_members += o.uncertain_members;
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
    /// Claiming answers on named roles judged as promises (`Spec::roles`), how often a role
    /// changed hands, and the candidacies applied at the start.
    pub role_promises: u64,
    pub role_moves: u64,
    pub roles_stood: u64,
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
    /// The preconditions of issue 29's findings this schedule reached.
    pub reached: Reached,
    /// Members that don't vote that joined (`Spec::nonvoters`).
    pub nonvoters_joined: u64,
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
    // ELECTD_SIM_LOG=FILTER (e.g. `electd::quorum=debug`): the nodes' logs on stderr, stamped
    // in simulated ms, to read a replayed schedule (the nodes share this thread: a line does
    // not say which node wrote it unless its fields do).
    let _log = std::env::var("ELECTD_SIM_LOG").ok().map(|filter| {
        let start = rt.block_on(async { tokio::time::Instant::now() });
        let sub = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_timer(SimTimer(start))
            .with_writer(std::io::stderr)
            .with_ansi(false)
            .finish();
        tracing::subscriber::set_default(sub)
    });
    let outcome = rt.block_on(async {
        let mut sim = Sim::new(spec, dir.path());
        sim.play().await;
        sim.outcome()
    });
    // Dropping the runtime ends every task the nodes left.
    drop(rt);
    outcome
}

/// Log lines stamped with the simulated time since the schedule began (ms).
struct SimTimer(tokio::time::Instant);

impl tracing_subscriber::fmt::time::FormatTime for SimTimer {
    fn format_time(&self, w: &mut tracing_subscriber::fmt::format::Writer<'_>) -> std::fmt::Result {
        let ms = tokio::time::Instant::now()
            .saturating_duration_since(self.0)
            .as_secs_f64()
            * 1e3;
        write!(w, "{ms:10.3} ms")
    }
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
    /// Changes of the one claimant from one node to another, and the last one.
    leader_changes: u64,
    last_leader: Option<NodeId>,
    /// The named roles' answers (`Spec::roles`).
    roles: RoleWatch,
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
    /// The random source of the issue-29 draws (`Spec::lapses`), apart from `rng`.
    extra: StdRng,
    /// The members' priorities (none: all 0) and the settle time they run with.
    priorities: BTreeMap<NodeId, u32>,
    settle_ms: Option<u64>,
    /// Adds whose answer did not say done, not judged yet.
    uncertain_adds: BTreeSet<NodeId>,
    reached: Reached,
    /// The members that don't vote (`Spec::nonvoters`), and how many joined.
    nonvoters: BTreeSet<NodeId>,
    nonvoters_joined: u64,
}

impl Sim {
    fn new(spec: &Spec, dir: &Path) -> Sim {
        let clock = SimClock::new();
        let ids: Vec<NodeId> = (1..=spec.nodes as NodeId).collect();
        let nonvoters: BTreeSet<NodeId> = (101..101 + spec.nonvoters as NodeId).collect();
        let mut rng = StdRng::seed_from_u64(spec.seed);
        let timing = timing(spec, &mut rng);
        let mut extra = StdRng::seed_from_u64(spec.seed ^ 0x6973_7375_6529);
        let mut priorities = BTreeMap::new();
        let mut settle_ms = None;
        if spec.membership && spec.lapses && spec.script.is_none() && extra.gen_bool(0.6) {
            // One member preferred, sometimes a second one less so; a settle time of two to
            // four follower leases (the least the config accepts is two).
            let mut shuffled = ids.clone();
            shuffled.shuffle(&mut extra);
            priorities.insert(shuffled[0], extra.gen_range(5..=10));
            if extra.gen_bool(0.5) {
                priorities.insert(shuffled[1], extra.gen_range(1..=4));
            }
            let f = timing.follower_lease_ms;
            settle_ms = Some(extra.gen_range(2 * f..=4 * f));
        }
        Sim {
            spec: spec.clone(),
            timing,
            dir: dir.to_path_buf(),
            start_ns: clock.now_ns(),
            clock,
            net: Net::new(spec.seed ^ 0x6e65_7400),
            rng,
            disks: ids
                .iter()
                .chain(&nonvoters)
                .map(|&i| (i, Arc::default()))
                .collect(),
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
                unlogged_incarnations: spec.flaw == Some(Flaw::UnloggedIncarnations),
                handover_to_unconfirmed: spec.flaw == Some(Flaw::HandoverToUnconfirmed),
                snapshot_keeps_incarnations: spec.flaw == Some(Flaw::SnapshotKeepsIncarnations),
                count_learner_acks: spec.flaw == Some(Flaw::CountLearnerAck),
                role_flaw: match spec.flaw {
                    Some(Flaw::Role(f)) => Some(f),
                    _ => None,
                },
                ..Flaws::default()
            },
            squeezes: 0,
            extra,
            reached: Reached {
                prioritised: u64::from(!priorities.is_empty()),
                ..Reached::default()
            },
            priorities,
            settle_ms,
            uncertain_adds: BTreeSet::new(),
            nonvoters,
            nonvoters_joined: 0,
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
            cluster_secret_accepted: None,
            admin_token: Some(SIM_ADMIN_TOKEN.to_string().into()),
            store_url: None,
            insecure: true,
            seed: None,
            timing: self.timing,
            max_watchers: electd::config::DEFAULT_MAX_WATCHERS,
            max_watchers_per_client: electd::config::DEFAULT_MAX_WATCHERS_PER_CLIENT,
            max_connections: electd::config::DEFAULT_MAX_CONNECTIONS,
            join,
            priority_settle_ms: self.settle_ms,
            nonvoter: self.nonvoters.contains(&id),
            // The least absence the config takes: non-voters cut off are removed and join
            // again within a schedule.
            nonvoters: electd::config::NonVoters {
                remove_after_ms: (!self.nonvoters.is_empty())
                    .then_some((4 * self.timing.follower_lease_ms).max(1_000)),
                ..Default::default()
            },
            tls: None,
            peers: peers
                .into_iter()
                .map(|p| Peer {
                    id: p,
                    addr: Sim::addr(p),
                    priority: self.priorities.get(&p).copied().unwrap_or(0),
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
        // The long lease is the one broken variant that breaks the config's own rules.
        let cfg = if self.spec.flaw == Some(Flaw::LongLease) {
            ValidConfig::unchecked(cfg)
        } else {
            ValidConfig::new(cfg).expect("a simulated member's config is valid")
        };
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
        r.node.crashed();
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
        // One process per member: one still running is stopped first (its event log is the
        // new one's too).
        self.crash(id);
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
                self.uncertain_adds.remove(&id);
                self.added += 1;
                self.note(format!("add {id}: a voter"));
            }
            other => {
                // It may still complete: the node runs on, a member or not (the membership
                // says later: `judge_uncertain`).
                self.note(format!("add {id} did not complete ({other:?})"));
                self.uncertain.insert(id);
                self.uncertain_adds.insert(id);
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
            self.uncertain_adds.remove(&id);
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
            Step::Wipe { .. } if !self.may_wipe().await => {
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
            Step::Grow {
                target,
                hold_ms,
                down_ms,
            } => self.grow(*target, *hold_ms, *down_ms).await,
            Step::WipeJoin { .. } if !self.may_wipe().await => {
                self.note(format!(
                    "wipe with join: none ({} members, {:?} still to replace, or a voter set \
                     of fewer than 3 in force)",
                    self.ids.len(),
                    self.to_replace
                ));
            }
            Step::WipeJoin { target, down_ms } => self.wipe_join(*target, *down_ms).await,
            Step::Starve { lagging, victim } => self.starve(*lagging, *victim).await,
            Step::Wipe { target, down_ms } => {
                let n = self.resolve(*target);
                self.note(format!("wipe {n} ({target}), restart it without join"));
                self.crash(n);
                self.wipe(n);
                tokio::time::sleep(Duration::from_millis(*down_ms)).await;
                self.start(n, false).await;
                self.watch_wiped(n, 20 * f, false).await;
                // Then as an operator would: remove it and let it join again.
                self.crash(n);
                self.to_replace.insert(n);
                self.replace_wiped().await;
            }
            _ => return false,
        }
        true
    }

    /// Whether a disk may be lost now: one at a time, among three voters or more in every
    /// voter set in force (see [`Step::Wipe`]'s refusal).
    async fn may_wipe(&self) -> bool {
        self.to_replace.is_empty() && self.ids.len() >= 3 && self.smallest_voter_set().await >= 3
    }

    /// The member of the highest priority, if the schedule gave priorities.
    fn preferred(&self) -> Option<NodeId> {
        self.priorities
            .iter()
            .max_by_key(|(id, p)| (**p, std::cmp::Reverse(**id)))
            .map(|(id, _)| *id)
    }

    /// Every cut, loss, delay and rule cleared, on every running member.
    async fn heal_network(&mut self) {
        let line = self.change_network(&Step::Heal);
        self.note(line);
        self.apply_all_faults().await;
    }

    /// A running member's engine status field, if it runs.
    fn status_of(&self, id: NodeId) -> Option<serde_json::Value> {
        self.running.get(&id).map(|r| r.node.engine_status())
    }

    fn confirmed(&self, id: NodeId) -> bool {
        self.status_of(id)
            .is_some_and(|s| s["identity"]["confirmed"] == true)
    }

    fn last_log_index(&self, id: NodeId) -> Option<u64> {
        self.status_of(id)
            .and_then(|s| s["last_log_index"].as_u64())
    }

    /// A running member other than the claimant and `not`, at random (`pick` if it is one).
    fn bystander(&mut self, pick: NodeId, not: &[NodeId]) -> Option<NodeId> {
        let leader = self.claimant();
        let ok =
            |i: &NodeId| Some(*i) != leader && !not.contains(i) && self.running.contains_key(i);
        if self.ids.contains(&pick) && ok(&pick) {
            return Some(pick);
        }
        let rest: Vec<NodeId> = self.ids.iter().copied().filter(ok).collect();
        rest.choose(&mut self.rng).copied()
    }

    /// [`Step::Grow`].
    async fn grow(&mut self, target: Target, hold_ms: u64, down_ms: u64) {
        let f = self.timing.follower_lease_ms;
        let picked = self.resolve(target);
        let Some(x) = self.bystander(picked, &[]) else {
            self.note("grow: none (no member but the leader)".into());
            return;
        };
        self.note(format!(
            "grow: {x} cut off from the members added up to {MOST_MEMBERS}, until {hold_ms} ms \
             after the last"
        ));
        while self.ids.len() > FEWEST_MEMBERS {
            let Some(n) = self.bystander(0, &[x]) else {
                break;
            };
            if !self.remove(n).await {
                break;
            }
            self.crash(n);
        }
        if self.ids.len() > FEWEST_MEMBERS {
            self.note(format!("grow: none (still {} members)", self.ids.len()));
            return;
        }
        let grew_with: Vec<NodeId> = self.ids.iter().copied().filter(|&i| i != x).collect();
        let next = self.ever.lock().expect("ever").iter().max().unwrap_or(&0) + 1;
        let new: Vec<NodeId> = (next..).take(MOST_MEMBERS - self.ids.len()).collect();
        // Written on the new members, which know `x` from their config when they start.
        for &y in &new {
            self.cuts.insert((x, y), true);
            self.cuts.insert((y, x), false);
        }
        for &y in &new {
            self.join(y).await;
            self.apply_all_faults().await;
        }
        tokio::time::sleep(Duration::from_millis(hold_ms)).await;
        let grown = new.iter().all(|y| self.ids.contains(y));
        self.reached.grown_cut_off += u64::from(grown);
        self.note(format!(
            "grow: {x} cut off from {new:?} for {hold_ms} ms after the last add ({})",
            if grown { "all added" } else { "not all added" }
        ));
        self.heal_network().await;
        if !grown || !self.ids.contains(&x) || !self.confirmed(x) || !self.may_wipe().await {
            return;
        }
        // At once, before another change of the membership makes anyone say hello again.
        self.cut_between(&[vec![x], grew_with.clone()]);
        self.note(format!(
            "wipe {x}, restart it without join, cut off from {grew_with:?}"
        ));
        self.crash(x);
        self.wipe(x);
        tokio::time::sleep(Duration::from_millis(down_ms)).await;
        self.start(x, false).await;
        self.apply_all_faults().await;
        self.reached.wiped_after_growth += 1;
        self.watch_wiped(x, 20 * f, false).await;
        self.crash(x);
        self.heal_network().await;
        self.to_replace.insert(x);
        self.replace_wiped().await;
    }

    /// [`Step::WipeJoin`]: watched for 20 follower leases or six settle times, whichever is
    /// longer; a handover to it meanwhile is a violation (it cannot campaign, and the
    /// cluster is left without a leader for a follower lease).
    async fn wipe_join(&mut self, target: Target, down_ms: u64) {
        let f = self.timing.follower_lease_ms;
        let n = self.resolve(target);
        if !self.ids.contains(&n) || !self.confirmed(n) {
            // Only the disk of a confirmed member, which may have voted, must never vote again.
            self.note(format!(
                "wipe {n} ({target}) with join: none (not a running, confirmed member)"
            ));
            return;
        }
        self.note(format!(
            "wipe {n} ({target}), restart it with join, not removed"
        ));
        self.crash(n);
        // A handover delivered before this instant may have been decided on the hello answer
        // of n's previous data dir, which was confirmed: the leader checks, then resigns, and
        // its notices take at most RESIGN_TIMEOUT. n may die between the check and the
        // notice (soak seed 20544: decided at 492 ms on an answer from before the crash at
        // 491, delivered to the wiped n at 494). No check can close that window; what must
        // never happen is a handover decided on an answer of the wiped data dir.
        let stale_until = tokio::time::Instant::now() + electd::quorum::RESIGN_TIMEOUT;
        self.wipe(n);
        tokio::time::sleep(Duration::from_millis(down_ms)).await;
        let seen = self.net.handovers().len();
        self.start(n, true).await;
        let ms = (20 * f).max(6 * self.settle_ms.unwrap_or(0));
        let changes = self.watch.lock().expect("watch").leader_changes;
        let t0 = self.clock.elapsed_ms();
        self.watch_wiped(n, ms, true).await;
        self.reached.wipe_joined += 1;
        let leader = self.claimant();
        if self.preferred() == Some(n) && leader.is_some_and(|l| l != n) {
            self.reached.wipe_joined_preferred += 1;
        }
        let to_it: BTreeSet<(NodeId, u64)> = self.net.handovers()[seen..]
            .iter()
            .filter(|h| h.successor == n && h.at >= stale_until)
            .map(|h| (h.from, h.term))
            .collect();
        if let Some((from, term)) = to_it.first() {
            let changes = self.watch.lock().expect("watch").leader_changes - changes;
            self.watch.lock().expect("watch").violations.push(format!(
                "from {t0} ms node {from} (term {term}) handed over to node {n}, restarted on a \
                 wiped disk with join and not confirmed (it cannot campaign): {} handovers to \
                 it and {changes} leader changes in {ms} ms",
                to_it.len()
            ));
        }
        self.crash(n);
        self.to_replace.insert(n);
        self.replace_wiped().await;
    }

    /// [`Step::Starve`].
    async fn starve(&mut self, lagging: Target, victim: Target) {
        use electd::quorum::PATH_SNAPSHOT;
        let f = self.timing.follower_lease_ms;
        if self.ids.len() < 4 {
            let id = self.ever.lock().expect("ever").iter().max().unwrap_or(&0) + 1;
            self.join(id).await;
        }
        self.heal_network().await;
        let until = self.clock.elapsed_ms() + 20 * f;
        while self.claimant().is_none() && self.clock.elapsed_ms() < until {
            tokio::time::sleep(Duration::from_millis(f / 2)).await;
        }
        // The member list must be the cluster's: a change that did not answer may have
        // completed (seed 8045340553: a removal answered 409 yet committed, and the crashes
        // below, counted from the stale list, took the last quorum away).
        self.judge_uncertain().await;
        if !self.uncertain.is_empty() {
            self.note(format!(
                "starve: none (changes not yet judged: {:?})",
                self.uncertain
            ));
            return;
        }
        // Every member runs (a wiped one waiting to be replaced does not): the members left
        // when some crash below must be a majority.
        let all_run = self.ids.iter().all(|i| self.running.contains_key(i));
        let (Some(leader), true) = (self.claimant(), self.ids.len() >= 4 && all_run) else {
            self.note(format!(
                "starve: none ({} members, claimant {:?}, all running: {all_run})",
                self.ids.len(),
                self.claimant()
            ));
            return;
        };
        let picked = self.resolve(lagging);
        let Some(m) = self.bystander(picked, &[]) else {
            return;
        };
        let picked = self.resolve(victim);
        let Some(r) = self.bystander(picked, &[m]) else {
            return;
        };
        let ever = self.ever.lock().expect("ever").clone();
        let rules = ever
            .iter()
            .filter(|&&from| from != m)
            .flat_map(|&from| {
                [PATH_APPEND, PATH_SNAPSHOT].map(|path| Rule {
                    from,
                    to: m,
                    path,
                    leg: Leg::Request,
                    effect: Effect::Drop,
                })
            })
            .collect();
        self.net.set_rules(rules);
        self.note(format!(
            "starve {m} of appends and snapshots (leader {leader}), remove {r}"
        ));
        let took = self.net.snapshots(m);
        if !self.remove(r).await {
            self.net.set_rules(Vec::new());
            self.note(format!("starve {m}: lifted ({r} not removed)"));
            return;
        }
        self.crash(r);
        // Leaders resign (each elected leader appends an entry) until the leader's log is far
        // past the starved member's: snapshots every 32 entries, 8 kept (node.rs).
        let mut resigns = 0;
        for _ in 0..150 {
            let Some(l) = self.claimant() else {
                tokio::time::sleep(Duration::from_millis(f / 2)).await;
                continue;
            };
            let gap = self
                .last_log_index(l)
                .unwrap_or(0)
                .saturating_sub(self.last_log_index(m).unwrap_or(0));
            if gap >= 50 {
                break;
            }
            let req = admin(Request::post("/v1/admin/resign"))
                .header("content-type", "application/json")
                .body(Body::empty())
                .expect("a request");
            if matches!(self.net.ask(l, req).await, Some((200, _))) {
                resigns += 1;
            }
            tokio::time::sleep(Duration::from_millis(2 * f)).await;
        }
        self.net.set_rules(Vec::new());
        // Until it has caught up with the leader.
        let until = self.clock.elapsed_ms() + 40 * f;
        while self.clock.elapsed_ms() < until {
            let l = self.claimant();
            let behind = l.is_none_or(|l| self.last_log_index(m) < self.last_log_index(l));
            if !behind && self.net.snapshots(m) > took {
                break;
            }
            tokio::time::sleep(Duration::from_millis(f / 2)).await;
        }
        let snapshots = self.net.snapshots(m) - took;
        self.reached.snapshots += snapshots;
        let l = self.claimant();
        self.note(format!(
            "starve {m}: lifted after {resigns} resignations; it took {snapshots} snapshots; \
             its log ends at {:?}, the claimant's ({l:?}) at {:?}",
            self.last_log_index(m),
            l.and_then(|l| self.last_log_index(l))
        ));
        // Crash voters until the victim's confirmation needs the starved member: of the v
        // voters, ⌈(v+1)/2⌉ must record it, the leader and `m` among them.
        let v = self.ids.len();
        let need = (v + 1).div_ceil(2);
        let mut down = Vec::new();
        for _ in 0..v.saturating_sub(need) {
            let Some(b) = self.bystander(0, &[m]) else {
                break;
            };
            if down.contains(&b) {
                break;
            }
            self.note(format!("crash {b} while {r} is added back"));
            self.crash(b);
            down.push(b);
        }
        // `bystander` picks among the members: the crashed ones are still members.
        self.join(r).await;
        let until = self.clock.elapsed_ms() + 40 * f;
        while !self.confirmed(r) && self.clock.elapsed_ms() < until {
            tokio::time::sleep(Duration::from_millis(f / 2)).await;
        }
        if snapshots > 0 {
            self.reached.readded_after_snapshot += 1;
        }
        if !self.confirmed(r) {
            // What each member holds for r, to see who refused or abstained.
            let held: Vec<String> = self
                .ids
                .iter()
                .filter_map(|&id| {
                    let s = self.status_of(id)?;
                    let i = &s["identity"];
                    Some(format!(
                        "{id}: {} abstains {} applied {}",
                        if id == r {
                            &i["incarnation"]
                        } else {
                            &i["peers"][r.to_string()]
                        },
                        i["abstains"],
                        s["last_applied"]
                    ))
                })
                .collect();
            self.watch.lock().expect("watch").violations.push(format!(
                "at {} ms node {r}, removed while node {m} was starved of appends ({m} took \
                 {snapshots} snapshots since) and added back on a new data dir with {down:?} \
                 down, was not confirmed within {} ms (held for {r}: {})",
                self.clock.elapsed_ms(),
                40 * f,
                held.join("; ")
            ));
        }
        for b in down {
            self.start(b, false).await;
            self.note(format!("restart {b}"));
        }
    }

    /// The changes whose answer did not say done, judged once the claimant's membership is
    /// committed and says what became of the node: a voter is a member (the end checks it as
    /// one), a node the membership does not name is not; a learner stays uncertain.
    async fn judge_uncertain(&mut self) {
        if self.uncertain.is_empty() {
            return;
        }
        let Some(l) = self.claimant() else {
            return;
        };
        let m: Members = match self.net.ask(l, get("/v1/members")).await {
            Some((200, b)) => match serde_json::from_slice(&b) {
                Ok(m) => m,
                Err(_) => return,
            },
            _ => return,
        };
        if m.voter_sets.len() != 1 || !m.committed {
            return;
        }
        for u in self.uncertain.clone() {
            let add = self.uncertain_adds.contains(&u);
            match m.members.iter().find(|x| x.id == u) {
                Some(x) if x.voter => {
                    if !self.ids.contains(&u) {
                        self.ids.push(u);
                        self.ids.sort_unstable();
                    }
                    self.removed.remove(&u);
                    self.reached.uncertain_members += u64::from(add);
                }
                Some(_) => continue,
                None => {
                    if self.ids.contains(&u) {
                        self.removed.insert(u);
                    }
                    self.ids.retain(|&i| i != u);
                }
            }
            self.reached.uncertain_judged += u64::from(add);
            self.uncertain.remove(&u);
            self.uncertain_adds.remove(&u);
            self.note(format!(
                "{u}: its {} did not answer; judged {}",
                if add { "add" } else { "change" },
                if self.ids.contains(&u) {
                    "a member: a voter of the membership"
                } else {
                    "no member: the membership does not name it"
                }
            ));
        }
    }

    /// Handovers (distinct resignations) to a member of higher priority than the leader's.
    fn count_preferred_handovers(&mut self) {
        let p = |id: NodeId| self.priorities.get(&id).copied().unwrap_or(0);
        let distinct: BTreeSet<(NodeId, u64, NodeId)> = self
            .net
            .handovers()
            .iter()
            .filter(|h| p(h.successor) > p(h.from))
            .map(|h| (h.from, h.term, h.successor))
            .collect();
        self.reached.preferred_handovers = distinct.len() as u64;
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
    /// it must stop on its own (a member knows its earlier incarnation) or stay unconfirmed.
    /// Judged from what crossed the network, not from what the node says of itself: it never
    /// grants a vote as the member it was (its earlier incarnation may have voted in that
    /// term), and never ⌈n/2⌉ other members answer its hellos that they recorded it (which
    /// would confirm it: docs/safety.md, "A wiped disk never votes twice").
    async fn watch_wiped(&mut self, n: NodeId, ms: u64, join: bool) {
        let until = self.clock.elapsed_ms() + ms;
        let Some(incarnation) = self.net.incarnation(n) else {
            return;
        };
        let needed = electd::quorum::confirmations_needed(self.ids.len());
        while self.clock.elapsed_ms() < until {
            let Some(r) = self.running.get(&n) else {
                return;
            };
            if r.fatal.is_cancelled() {
                self.refused += 1;
                self.note(format!("{n} refused to run on its wiped disk"));
                return;
            }
            let granted = self.net.votes_granted(n, incarnation);
            let recorded = self.net.recorded_by(n, incarnation);
            let what = match (granted.first(), recorded.len() >= needed) {
                (Some(c), _) => format!("granted {c} a vote as the member it was"),
                (None, true) => format!("was recorded by {recorded:?}, enough to confirm it"),
                (None, false) => {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    continue;
                }
            };
            self.watch.lock().expect("watch").violations.push(format!(
                "at {} ms member {n}, restarted on a wiped disk {} join, {what}: it may vote \
                 twice in a term",
                self.clock.elapsed_ms(),
                if join { "with" } else { "without" }
            ));
            return;
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
            | Step::Wipe { .. }
            | Step::Grow { .. }
            | Step::WipeJoin { .. }
            | Step::Starve { .. } => {
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
            (sample_every(f), self.spec.roles),
        ));
        let schedule: Vec<Timed> = match &self.spec.script {
            Some(steps) => steps.clone(),
            None if self.spec.membership => Vec::new(),
            None => draw(&mut self.rng, self.spec.nodes, self.spec.steps, f),
        };
        tokio::time::sleep(Duration::from_millis(10 * f)).await;
        self.join_nonvoters().await;
        if self.spec.roles {
            let stood = roles::stand(&self.net, &self.ids, SIM_ADMIN_TOKEN).await;
            self.note(format!("roles: {stood} candidacies applied"));
            self.watch.lock().expect("watch").roles.stood = stood;
        }
        for (i, t) in schedule.iter().enumerate() {
            if self.spec.roles && (i == schedule.len() / 3 || i == 2 * schedule.len() / 3) {
                let lift = i > schedule.len() / 3;
                roles::settings(&self.net, &self.ids, SIM_ADMIN_TOKEN, lift);
                self.note(format!(
                    "roles: placement settings {}",
                    ["set", "lifted"][lift as usize]
                ));
            }
            self.apply(&t.step).await;
            tokio::time::sleep(Duration::from_millis(t.then_ms)).await;
        }
        if self.spec.membership && self.spec.script.is_none() {
            let lapses = self.spec.lapses;
            let lapse_at = lapses.then(|| self.extra.gen_range(0..self.spec.steps.max(1)));
            // Drawn as they come: the members change.
            for i in 0..self.spec.steps {
                if lapse_at == Some(i) {
                    let preferred = self.preferred();
                    let lapse = draw_lapse(&mut self.extra, &self.ids, &self.timing, preferred);
                    if let Some(t) = lapse {
                        self.apply(&t.step).await;
                        tokio::time::sleep(Duration::from_millis(t.then_ms)).await;
                        self.replace_wiped().await;
                        self.judge_uncertain().await;
                    }
                }
                let t = draw_with_members(&mut self.rng, &self.ids, f);
                self.apply(&t.step).await;
                tokio::time::sleep(Duration::from_millis(t.then_ms)).await;
                self.replace_wiped().await;
                if lapses {
                    self.judge_uncertain().await;
                }
            }
        }
        self.apply(&Step::Heal).await;
        self.replace_wiped().await;
        self.converge().await;
        self.count_preferred_handovers();
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
    /// runs outside it (an add that did not complete) is not asked. A wiped member still to
    /// replace (no leader took its removal before the heal) is replaced meanwhile, as an
    /// operator asks again a change answered "retry": it refused to run, and no leader can
    /// make it a live member again.
    async fn converge(&mut self) {
        let until = self.clock.elapsed_ms() + 10_000;
        let mut last = String::new();
        while self.clock.elapsed_ms() < until {
            if self.spec.lapses {
                self.judge_uncertain().await;
            }
            self.replace_wiped().await;
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

    /// Starts the members that don't vote, each joining by itself, and waits until the
    /// claimant's membership names them all as non-voters, at most 40 follower leases and
    /// 5 s; a violation if they did not join by then.
    async fn join_nonvoters(&mut self) {
        if self.nonvoters.is_empty() {
            return;
        }
        for id in self.nonvoters.clone() {
            self.ever.lock().expect("ever").push(id);
            self.start(id, true).await;
        }
        let f = self.timing.follower_lease_ms;
        let until = self.clock.elapsed_ms() + 40 * f + 5_000;
        while self.clock.elapsed_ms() < until {
            let joined = match self.claimant() {
                Some(l) => match self.net.ask(l, get("/v1/members")).await {
                    Some((200, b)) => serde_json::from_slice::<Members>(&b)
                        .map(|m| {
                            m.members
                                .iter()
                                .filter(|x| !x.voter)
                                .map(|x| x.id)
                                .collect()
                        })
                        .unwrap_or_default(),
                    _ => BTreeSet::new(),
                },
                None => BTreeSet::new(),
            };
            if joined == self.nonvoters {
                self.nonvoters_joined = joined.len() as u64;
                self.note(format!("non-voters {joined:?} joined"));
                return;
            }
            tokio::time::sleep(Duration::from_millis(f.div_ceil(2))).await;
        }
        self.watch.lock().expect("watch").violations.push(format!(
            "non-voters {:?} did not join within 40 follower leases and 5 s",
            self.nonvoters
        ));
    }

    /// Whether the running members agree on a leader whose membership is settled as the
    /// simulation changed it; why not, if not.
    async fn settled(&self, running: &[NodeId]) -> Result<(), String> {
        let mut unreadable = Vec::new();
        let seen = answers(&self.net, running, &mut unreadable).await;
        if let Some(u) = unreadable.first() {
            return Err(format!("an answer could not be read: {u}"));
        }
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
        if let Some(x) = voters.iter().find(|v| self.nonvoters.contains(v)) {
            return Err(format!(
                "{l}: non-voter {x} in the voter set {voters:?} (N2)"
            ));
        }
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
        if let Some(p) = log
            .promises
            .iter()
            .find(|p| self.nonvoters.contains(&p.node))
        {
            violations.push(format!(
                "non-voter {} claimed the cluster's election in term {} (N1)",
                p.node, p.term
            ));
        }
        if let Some(c6) = promise_keeping(&log) {
            let what = ("a promise broken (C6)", "term", "promises");
            violations.extend(c6.first_broken(self.start_ns, what));
        }
        let (role_violations, role_promises, role_moves) = watch.roles.judge(self.start_ns);
        violations.extend(role_violations);
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
            role_promises,
            role_moves,
            roles_stood: watch.roles.stood,
            squeezes: self.squeezes,
            votes_inside_promise: self.flaws.votes_inside_promise.load(Relaxed),
            granted_inside_promise: self.flaws.granted_inside_promise.load(Relaxed),
            added: self.added,
            removed: self.removals,
            refused: self.refused,
            reached: self.reached.clone(),
            nonvoters_joined: self.nonvoters_joined,
        }
    }
}

/// How often the sampler asks every member: a thirtieth of the follower lease (5 ms at the
/// default 150), between 1 and 33 ms. The event-log checkers judge claims exactly; the
/// samples are the clients' answers, and a claim lease spans about 25 of them.
pub fn sample_every(follower_lease_ms: u64) -> Duration {
    Duration::from_micros((follower_lease_ms * 1000 / 30).clamp(1_000, 33_000))
}

/// An answer of member `id` to the sampler, decoded: `None` when it gave none (paused, not
/// running); an answer that is not a 200 with the contract's JSON is named in `unreadable` (a
/// violation: `/v1/leader` and `/v1/events` always answer 200, so a checker that dropped such
/// an answer would judge what it could read and pass what it could not; issue 48, item 7).
async fn read_answer<T: serde::de::DeserializeOwned>(
    net: &Net,
    id: NodeId,
    path: &str,
    unreadable: &mut Vec<String>,
) -> Option<T> {
    let (status, bytes) = net.ask(id, get(path)).await?;
    let parsed = (status == 200)
        .then(|| serde_json::from_slice::<T>(&bytes))
        .transpose();
    match parsed {
        Ok(Some(v)) => Some(v),
        Ok(None) => {
            unreadable.push(format!("{id} answered {path} with status {status}"));
            None
        }
        Err(e) => {
            unreadable.push(format!(
                "{id} answered {path} with what is not its JSON: {e}"
            ));
            None
        }
    }
}

/// `GET /v1/events?since=` of member `id`.
async fn events_page(
    net: &Net,
    id: NodeId,
    since: u64,
    unreadable: &mut Vec<String>,
) -> Option<EventsPage> {
    read_answer(net, id, &format!("/v1/events?since={since}"), unreadable).await
}

/// `GET /v1/leader` of every running member.
async fn answers(
    net: &Net,
    ids: &[NodeId],
    unreadable: &mut Vec<String>,
) -> BTreeMap<NodeId, LeaderInfo> {
    let mut out = BTreeMap::new();
    for &id in ids {
        if let Some(info) = read_answer(net, id, "/v1/leader", unreadable).await {
            out.insert(id, info);
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
    (every, with_roles): (Duration, bool),
) {
    let mut tick = tokio::time::interval(every);
    for round in 0.. {
        tick.tick().await;
        let ids = ids.lock().expect("ever").clone();
        // The roles first: the answers of `/v1/leader` below are recorded right after they
        // are read, so that no step of the schedule (a wipe, which resets what the sampler
        // knows of a node) runs between the two.
        let role_answers = match with_roles {
            true => roles::ask(&net, &ids, &clock, round).await,
            false => Vec::new(),
        };
        let sent_ns = clock.now_ns();
        // Each event log is read before and after the answers: a log that moved meanwhile (a
        // claim that began or ended at the instant of the sample, its event written between
        // the two reads) is not compared with an answer this time.
        let froms: Vec<(NodeId, u64)> = {
            let w = watch.lock().expect("watch");
            ids.iter()
                .map(|&id| (id, w.logs.get(&id).map_or(0, |c| c.next)))
                .collect()
        };
        let mut pages = BTreeMap::new();
        let mut unreadable = Vec::new();
        for (id, since) in froms {
            if let Some(page) = events_page(&net, id, since, &mut unreadable).await {
                pages.insert(id, page);
            }
        }
        let seen = answers(&net, &ids, &mut unreadable).await;
        let mut moved = BTreeSet::new();
        for (id, page) in pages.iter_mut() {
            if let Some(after) = events_page(&net, *id, page.next, &mut unreadable).await {
                if !after.events.is_empty() {
                    moved.insert(*id);
                }
                page.events.extend(after.events);
                page.next = after.next;
            }
        }
        pages.retain(|id, _| seen.contains_key(id));
        // A log that disagrees with its answer may only not have run yet at this instant (a
        // claim that ends exactly now is over for the answer, and its end is written by the
        // role loop's timer for this same instant, which may run after the sampler): the
        // sampler lets the tasks of this instant run (no time passes), then reads again.
        let ties: Vec<NodeId> = {
            let w = watch.lock().expect("watch");
            pages
                .iter()
                .filter(|(id, page)| {
                    let logged = page
                        .events
                        .last()
                        .map(|e| e.view.claims())
                        .unwrap_or_else(|| w.logs.get(id).is_some_and(|c| c.claims));
                    !moved.contains(id) && logged != (seen[id].role == Role::Leader)
                })
                .map(|(id, _)| *id)
                .collect()
        };
        if !ties.is_empty() {
            for _ in 0..16 {
                tokio::task::yield_now().await;
            }
            for id in ties {
                let page = pages.get_mut(&id).expect("read above");
                if let Some(after) = events_page(&net, id, page.next, &mut unreadable).await {
                    if !after.events.is_empty() {
                        moved.insert(id);
                    }
                    page.events.extend(after.events);
                    page.next = after.next;
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
        w.roles.record(role_answers, t);
        for u in unreadable {
            w.sampled_violation(format!(
                "at {t} ms the sampler could not read an answer: {u}"
            ));
        }
        for (id, page) in pages {
            let answered = seen[&id].role == Role::Leader;
            let c = w.logs.entry(id).or_default();
            if let Some(last) = page.events.last() {
                c.claims = last.view.claims();
            }
            c.next = page.next;
            let lagged = if moved.contains(&id) {
                None
            } else if c.claims == answered {
                c.disagrees_since = None;
                None
            } else if let Some(since) = c.disagrees_since.take() {
                Some(format!(
                    "at {t} ms node {id}'s event log has said since {since} ms that it {}, its \
                     answers the opposite (answer: {} term {}; last event: {})",
                    if c.claims { "claims" } else { "does not claim" },
                    seen[&id].role.as_str(),
                    seen[&id].term,
                    page.events
                        .last()
                        .and_then(|e| serde_json::to_string(e).ok())
                        .unwrap_or_else(|| "none in this page".into())
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
        if let [l] = claimants[..] {
            if w.last_leader.is_some_and(|was| was != l) {
                w.leader_changes += 1;
            }
            w.last_leader = Some(l);
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
