//! The run log and how it is recorded: [`RunLog`], everything one run left behind on one
//! monotonic clock (the nodes' events, the process faults, the network fault windows, the
//! promises clients were given), which the checkers judge; what the lab does to a cluster's
//! processes, recorded as [`ProcEvent`]s by the [`Recorder`]; and what clients were promised,
//! recorded by the [`PromisePoller`].
//!
//! Stamps err on the wide side: a node is recorded down (killed, stopped, paused) once it is,
//! and up (started, resumed) just before it is, so a recorded down interval never covers a
//! moment the node ran.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use electd::clock::{mono_ns, ms};
use electd_client::{Event, Mode, NodeId, Role};
use rustix::process::Signal;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::cluster::{Cluster, CtlError};

/// What the harness did to a process.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProcKind {
    /// SIGKILL: a crash.
    Kill,
    /// SIGTERM: a graceful stop.
    Stop,
    /// The process was spawned (again) on its data dir.
    Start,
    /// SIGSTOP: a freeze, like a long GC pause.
    Pause,
    /// SIGCONT: the end of a freeze.
    Resume,
}

/// One process fault, stamped on the same monotonic clock as the events.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcEvent {
    pub t_ns: u64,
    pub node: NodeId,
    pub kind: ProcKind,
}

/// One network fault in force on `[start_ns, end_ns)`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultWindow {
    pub start_ns: u64,
    pub end_ns: u64,
    /// Shown in the report and on the timeline, e.g. `"partition 1,2 | 3,4,5"`.
    pub label: String,
    /// Who can talk to whom while the window is in force (see the module docs).
    pub groups: Vec<Vec<NodeId>>,
}

/// Everything one run left behind, on one monotonic clock.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunLog {
    /// The membership, e.g. 1..=5; majorities are counted on it. When empty, the nodes named in
    /// events and process faults are taken.
    pub nodes: Vec<NodeId>,
    /// The observation window: only `[start_ns, end_ns)` is judged; earlier events still give the
    /// state at `start_ns`.
    pub start_ns: u64,
    pub end_ns: u64,
    /// All nodes' events in any order.
    pub events: Vec<Event>,
    /// Process faults in any order.
    pub procs: Vec<ProcEvent>,
    /// Network fault windows in any order.
    pub faults: Vec<FaultWindow>,
    /// When the last fault was cleared; C4 measures from here.
    pub heal_ns: Option<u64>,
    /// When the first fault was applied; failover and the cost count measure from here.
    pub fault_ns: Option<u64>,
    /// The mode's claims are lease-bound (quorum, mutex): C1 applies, and any split brain or
    /// broken promise fails the run. (`quorum_mode` in run logs written before mutex mode.)
    #[serde(alias = "quorum_mode")]
    pub leased: bool,
    /// The claiming answers clients received during the run, in any order (C6); in a leased
    /// mode also those without a lease ([`Promise::unleased`]).
    #[serde(default)]
    pub promises: Vec<Promise>,
    /// What the run's readers could not read (issue 48, item 7): a run judged on part of what
    /// happened must say so, and fails ([`Dropped::problems`]).
    #[serde(default)]
    pub dropped: Dropped,
    /// The claiming answers clients received on named roles (quorum mode, issue 49), by role,
    /// every role the [`RolePoller`] asked about a key even when none was claimed; empty when
    /// no roles were asked about. Judged per role by `checkers::role_checks`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub role_promises: BTreeMap<String, Vec<Promise>>,
    /// The voters, when some members don't vote (S26: 1, 2, 3 of 5); majorities are counted
    /// on them, and the others must never claim (N1). Empty: every member votes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub voters: Vec<NodeId>,
}

/// The most of the answers a client got that may be unreadable before a run fails: an answer
/// that is not the contract's JSON (or an error status from `/v1/leader`, which always answers
/// 200) is a defect of the node or of the client; one in a thousand allows for an answer cut
/// by a kill in the middle of its write.
pub const MAX_UNREADABLE_ANSWERS: f64 = 0.001;

/// What the readers of a run dropped.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dropped {
    /// Event logs not read whole: lines that are not events, files that exist and could not
    /// be read.
    #[serde(default)]
    pub event_logs: Vec<String>,
    /// The poller's questions answered, and of those not readable (an error status, not the
    /// contract's JSON).
    #[serde(default)]
    pub answers: u64,
    #[serde(default)]
    pub unreadable_answers: u64,
    /// The first of them, as the client read it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_unreadable: Option<String>,
    /// Questions that got no answer (a node killed, paused or cut off: normal under faults).
    #[serde(default)]
    pub unanswered: u64,
}

impl Dropped {
    /// Why a run judged on this much cannot pass: any event log not read whole, or more
    /// unreadable answers than [`MAX_UNREADABLE_ANSWERS`] of all answers.
    pub fn problems(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .event_logs
            .iter()
            .map(|p| format!("event log: {p}"))
            .collect();
        if self.unreadable_answers as f64 > MAX_UNREADABLE_ANSWERS * self.answers.max(1) as f64 {
            out.push(format!(
                "{} of {} answers to the poller could not be read (at most {:.1}% may); first: {}",
                self.unreadable_answers,
                self.answers,
                MAX_UNREADABLE_ANSWERS * 100.0,
                self.first_unreadable.as_deref().unwrap_or("-")
            ));
        }
        out
    }
}

/// One claiming answer a client received: node `node` answered `leader` in `term` with
/// `lease_ms` to a request the client sent at `asked`; the promise runs from `from_ns`, when
/// the client had the answer (it cannot act on it sooner), until `until_ns = asked +
/// lease_ms`. (Counted from the asking instant instead, an answer that was in flight longer
/// than the margin F − L would seem to overlap the claim of the node that led when it was
/// asked, although no client could have acted on it then.)
///
/// A `leader` answer without `lease_ms` is kept too, as [`Promise::unleased`]: it promises
/// nothing a client could bound, and in a leased mode it breaks the API's contract (every claim
/// answered with its lease), which fails the run. It is kept among the promises, not apart,
/// so that every writer of a run log (the chaos runner, the tests' clusters) carries it with
/// no change of theirs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Promise {
    pub node: NodeId,
    pub term: u64,
    pub from_ns: u64,
    /// `0` for an answer without `lease_ms` (no real answer's bound is 0: it is the send
    /// instant plus the lease on a clock that has run since boot).
    pub until_ns: u64,
}

impl Promise {
    /// A `leader` answer without `lease_ms`, received at `from_ns`.
    pub fn unleased(node: NodeId, term: u64, from_ns: u64) -> Promise {
        Promise {
            node,
            term,
            from_ns,
            until_ns: 0,
        }
    }

    /// Whether the answer came with a lease (else it is [`Promise::unleased`]).
    pub fn is_leased(&self) -> bool {
        self.until_ns != 0
    }
}

/// The process events of one run, from its start.
#[derive(Clone, Debug)]
pub struct Recorder {
    start_ns: u64,
    procs: Vec<ProcEvent>,
}

impl Default for Recorder {
    fn default() -> Self {
        Recorder::new()
    }
}

impl Recorder {
    /// A run that starts now.
    pub fn new() -> Recorder {
        Recorder {
            start_ns: mono_ns(),
            procs: Vec::new(),
        }
    }

    pub fn start_ns(&self) -> u64 {
        self.start_ns
    }

    pub fn procs(&self) -> &[ProcEvent] {
        &self.procs
    }

    /// Records that `node` went through `kind` now; answers the stamp.
    pub fn note(&mut self, node: NodeId, kind: ProcKind) -> u64 {
        let t_ns = mono_ns();
        self.procs.push(ProcEvent { t_ns, node, kind });
        t_ns
    }

    /// Starts node `id` in `mode` (recorded first).
    pub fn start(&mut self, c: &Cluster, id: NodeId, mode: Mode) -> Result<u64, CtlError> {
        let t = self.note(id, ProcKind::Start);
        c.start(id, mode)?;
        Ok(t)
    }

    /// SIGKILLs node `id` and waits until it is gone; `None` when it was not running.
    pub fn kill(&mut self, c: &Cluster, id: NodeId) -> Option<u64> {
        let was_running = c.kill(id);
        was_running.then(|| self.note(id, ProcKind::Kill))
    }

    /// SIGTERM to node `id`, SIGKILL after `grace`.
    pub fn stop(&mut self, c: &Cluster, id: NodeId, grace: Duration) -> u64 {
        c.stop(id, grace);
        self.note(id, ProcKind::Stop)
    }

    /// SIGSTOP to node `id`.
    pub fn pause(&mut self, c: &Cluster, id: NodeId) -> u64 {
        c.signal(id, Signal::STOP);
        self.note(id, ProcKind::Pause)
    }

    /// SIGCONT to node `id` (recorded first).
    pub fn resume(&mut self, c: &Cluster, id: NodeId) -> u64 {
        let t = self.note(id, ProcKind::Resume);
        c.signal(id, Signal::CONT);
        t
    }

    /// The run from its start until now, as the checkers take it: the nodes' events (read
    /// from their event logs, what could not be read in `dropped`), these process events, and
    /// the network fault windows given.
    pub fn run_log(&self, c: &Cluster, mode: Mode, faults: Vec<FaultWindow>) -> RunLog {
        let (events, event_logs) = c.events_checked(mode);
        RunLog {
            nodes: c.ids(),
            start_ns: self.start_ns,
            end_ns: mono_ns(),
            events,
            dropped: Dropped {
                event_logs,
                ..Dropped::default()
            },
            procs: self.procs.clone(),
            faults,
            heal_ns: None,
            fault_ns: None,
            leased: mode.leased(),
            promises: Vec::new(),
            role_promises: BTreeMap::new(),
            voters: Vec::new(),
        }
    }
}

/// How often the promise poller asks each node.
pub const POLL_EVERY: Duration = Duration::from_millis(10);

/// A client of every node, as an application beside each would be: it asks `GET /v1/leader`
/// every [`POLL_EVERY`] and keeps each claiming answer as the [`Promise`] it makes, until the
/// instant the request was sent plus its `lease_ms` (C6 judges them). Each node has its own
/// task, so a paused or unreachable node delays no other's answers.
///
/// In a leased mode (quorum, mutex) a claiming answer without `lease_ms` is kept as
/// [`Promise::unleased`]: the contract is broken, and the verdict fails the run on it. (It was
/// dropped, so a node that stopped giving leases was judged on the answers it still bounded,
/// or on none.) In bully, ring and invitation no answer has a lease, and none is kept.
pub struct PromisePoller {
    promises: Arc<Mutex<Vec<Promise>>>,
    /// What the poller could not read: answers, unreadable answers, no answer.
    counts: Arc<Mutex<Dropped>>,
    stop: CancellationToken,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl PromisePoller {
    /// Starts asking every node of `c` every [`POLL_EVERY`] (on the current tokio runtime).
    pub fn start(c: &Cluster) -> PromisePoller {
        Self::start_every(c, POLL_EVERY)
    }

    /// Starts asking every node of `c` every `every` (on the current tokio runtime).
    pub fn start_every(c: &Cluster, every: Duration) -> PromisePoller {
        Self::start_on(c, &c.ids(), every)
    }

    /// Starts asking nodes `ids` of `c` every `every` (on the current tokio runtime).
    pub fn start_on(c: &Cluster, ids: &[NodeId], every: Duration) -> PromisePoller {
        let promises = Arc::new(Mutex::new(Vec::new()));
        let counts = Arc::new(Mutex::new(Dropped::default()));
        let stop = CancellationToken::new();
        let leased = c.mode().leased();
        let mut tasks = Vec::new();
        for &id in ids {
            // A connection pool of its own: a pool shared with another runtime would hand it
            // connections driven there.
            let http = c.http_for(ANSWER_WITHIN);
            let Ok(client) = http.and_then(|http| c.client_on(http, id)) else {
                continue;
            };
            let (promises, stop, counts) = (promises.clone(), stop.clone(), counts.clone());
            tasks.push(tokio::spawn(async move {
                let mut tick = tokio::time::interval(every);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    tokio::select! {
                        _ = stop.cancelled() => return,
                        _ = tick.tick() => {}
                    }
                    let sent = mono_ns();
                    let answer = client.leader().await;
                    {
                        let mut c = counts.lock().expect("counts");
                        match &answer {
                            Ok(_) => c.answers += 1,
                            Err(e @ electd_client::Error::Api { .. })
                            | Err(e @ electd_client::Error::Decode { .. }) => {
                                c.answers += 1;
                                c.unreadable_answers += 1;
                                c.first_unreadable
                                    .get_or_insert_with(|| format!("node {id}: {e}"));
                            }
                            Err(_) => c.unanswered += 1,
                        }
                    }
                    let Ok(info) = answer else {
                        continue;
                    };
                    let received = mono_ns();
                    let promise = match (info.role, info.lease_ms) {
                        (Role::Leader, Some(lease)) => Some(Promise {
                            node: id,
                            term: info.term,
                            from_ns: received,
                            until_ns: sent + ms(lease),
                        }),
                        (Role::Leader, None) if leased => {
                            Some(Promise::unleased(id, info.term, received))
                        }
                        _ => None,
                    };
                    if let Some(p) = promise {
                        promises.lock().expect("promises").push(p);
                    }
                }
            }));
        }
        PromisePoller {
            promises,
            counts,
            stop,
            tasks,
        }
    }

    /// How many promises were recorded so far.
    pub fn recorded(&self) -> usize {
        self.promises.lock().expect("promises").len()
    }

    /// Every promise recorded so far, and what could not be read, while it goes on asking.
    pub fn so_far(&self) -> (Vec<Promise>, Dropped) {
        let promises = self.promises.lock().expect("promises").clone();
        let counts = self.counts.lock().expect("counts").clone();
        (promises, counts)
    }

    /// Stops asking; answers every promise recorded, and what could not be read.
    pub async fn finish(self) -> (Vec<Promise>, Dropped) {
        self.stop.cancel();
        for t in self.tasks {
            let _ = t.await;
        }
        let promises = std::mem::take(&mut *self.promises.lock().expect("promises"));
        let counts = self.counts.lock().expect("counts").clone();
        (promises, counts)
    }
}

/// How long a poller waits for an answer: every answer it keeps was asked at most this long
/// before it arrived (`checkers::role_tokens_back` leans on it).
pub const ANSWER_WITHIN: Duration = Duration::from_millis(200);

/// What clients were promised on named roles: a client of every node asking
/// `GET /v1/claim/{name}` for each role every period, each 200 recorded as a [`Promise`] of
/// that role (its `term` the grant's token), judged by `checkers::role_checks`. Every role asked
/// about is a key of what it answers, claimed or not.
pub struct RolePoller {
    promises: Arc<Mutex<BTreeMap<String, Vec<Promise>>>>,
    stop: CancellationToken,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl RolePoller {
    /// Starts asking nodes `ids` of `c` about `roles` every `every` (on the current runtime).
    pub fn start_on(
        c: &Cluster,
        ids: &[NodeId],
        roles: &[electd_client::RoleName],
        every: Duration,
    ) -> RolePoller {
        let asked: BTreeMap<String, Vec<Promise>> =
            roles.iter().map(|r| (r.to_string(), Vec::new())).collect();
        let promises = Arc::new(Mutex::new(asked));
        let stop = CancellationToken::new();
        let mut tasks = Vec::new();
        for &id in ids {
            let http = c.http_for(ANSWER_WITHIN);
            let Ok(client) = http.and_then(|http| c.client_on(http, id)) else {
                continue;
            };
            let (promises, stop, roles) = (promises.clone(), stop.clone(), roles.to_vec());
            tasks.push(tokio::spawn(async move {
                let mut tick = tokio::time::interval(every);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    tokio::select! {
                        _ = stop.cancelled() => return,
                        _ = tick.tick() => {}
                    }
                    for role in &roles {
                        let sent = mono_ns();
                        let Ok((true, info)) = client.role_claim(role).await else {
                            continue;
                        };
                        let p = Promise {
                            node: id,
                            term: info.token.unwrap_or(0),
                            from_ns: mono_ns(),
                            until_ns: sent + ms(info.lease_ms),
                        };
                        let mut all = promises.lock().expect("role promises");
                        all.entry(role.to_string()).or_default().push(p);
                    }
                }
            }));
        }
        RolePoller {
            promises,
            stop,
            tasks,
        }
    }

    /// Every promise recorded so far, by role.
    pub fn so_far(&self) -> BTreeMap<String, Vec<Promise>> {
        self.promises.lock().expect("role promises").clone()
    }

    /// Stops asking; every promise recorded, by role.
    pub async fn finish(self) -> BTreeMap<String, Vec<Promise>> {
        self.stop.cancel();
        for t in self.tasks {
            let _ = t.await;
        }
        std::mem::take(&mut *self.promises.lock().expect("role promises"))
    }
}
