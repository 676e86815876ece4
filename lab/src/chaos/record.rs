//! What the lab does to a cluster's processes, recorded for the checkers: every kill, stop,
//! start, pause and resume, stamped on the host's monotonic clock (the clock of the nodes'
//! events); what clients were promised ([`PromisePoller`]); and the [`RunLog`] the checkers
//! judge.
//!
//! Stamps err on the wide side: a node is recorded down (killed, stopped, paused) once it is,
//! and up (started, resumed) just before it is, so a recorded down interval never covers a
//! moment the node ran.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use electd::clock::{mono_ns, ms};
use electd_client::{Mode, NodeId, Role};
use rustix::process::Signal;
use tokio_util::sync::CancellationToken;

use crate::chaos::check::{FaultWindow, ProcEvent, ProcKind, Promise, RunLog};
use crate::cluster::{Cluster, CtlError};

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
    /// from their event logs), these process events, and the network fault windows given.
    pub fn run_log(&self, c: &Cluster, mode: Mode, faults: Vec<FaultWindow>) -> RunLog {
        RunLog {
            nodes: c.ids(),
            start_ns: self.start_ns,
            end_ns: mono_ns(),
            events: c.events(mode),
            procs: self.procs.clone(),
            faults,
            heal_ns: None,
            fault_ns: None,
            quorum_mode: mode == Mode::Quorum,
            promises: Vec::new(),
        }
    }
}

/// How often the promise poller asks each node.
pub const POLL_EVERY: Duration = Duration::from_millis(10);

/// A client of every node, as an application beside each would be: it asks `GET /v1/leader`
/// every [`POLL_EVERY`] and keeps each claiming answer as the [`Promise`] it makes, until the
/// instant the request was sent plus its `lease_ms` (C6 judges them). Each node has its own task, so a paused or
/// unreachable node delays no other's answers.
pub struct PromisePoller {
    promises: Arc<Mutex<Vec<Promise>>>,
    stop: CancellationToken,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl PromisePoller {
    /// Starts asking every node of `c` (on the current tokio runtime).
    pub fn start(c: &Cluster) -> PromisePoller {
        let promises = Arc::new(Mutex::new(Vec::new()));
        let stop = CancellationToken::new();
        let mut tasks = Vec::new();
        for id in c.ids() {
            let Ok(client) = c.client(id) else { continue };
            let (promises, stop) = (promises.clone(), stop.clone());
            tasks.push(tokio::spawn(async move {
                let mut tick = tokio::time::interval(POLL_EVERY);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    tokio::select! {
                        _ = stop.cancelled() => return,
                        _ = tick.tick() => {}
                    }
                    let sent = mono_ns();
                    let asked = tokio::time::timeout(Duration::from_millis(200), client.leader());
                    let Ok(Ok(info)) = asked.await else { continue };
                    let received = mono_ns();
                    if let (Role::Leader, Some(lease)) = (info.role, info.lease_ms) {
                        promises.lock().expect("promises").push(Promise {
                            node: id,
                            term: info.term,
                            from_ns: received,
                            until_ns: sent + ms(lease),
                        });
                    }
                }
            }));
        }
        PromisePoller {
            promises,
            stop,
            tasks,
        }
    }

    /// Stops asking; answers every promise recorded.
    pub async fn finish(self) -> Vec<Promise> {
        self.stop.cancel();
        for t in self.tasks {
            let _ = t.await;
        }
        std::mem::take(&mut *self.promises.lock().expect("promises"))
    }
}
