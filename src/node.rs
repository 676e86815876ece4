//! A running node: the config, the shared transport and fault layer, the event log, the
//! counters, and the election engine of the configured mode. The API asks it for a judged
//! view ([`Judged`]).

use std::sync::Arc;

use axum::Router;
use tokio_util::sync::CancellationToken;

use crate::clock::Clock;
use crate::config::ValidConfig;
use crate::connections::Connections;
use crate::counters::Counters;
use crate::data_dir::DataDirLock;
use crate::engine::{Engine, Flaws, Judged, Plumbing, ResignError, RolesError};
use crate::error::ApiError;
use crate::events::{EventLog, EventLogError, Watchers};
use crate::faults::Faults;
use crate::legacy::{Bully, Invitation, LegacyNode, Ring};
use crate::mutex::{MutexNode, Store as MutexStore, StoreError};
use crate::quorum::{Disk, Driver, QuorumError, QuorumNode, StateFile, Store};
use crate::role::{Mode, NodeId, Resigned, View};
use crate::tls::Tls;
use crate::transport::Transport;
use crate::wire::Wire;
use axum::http::StatusCode;
use electd_client::{LeaderInfo, LeaderRef};

/// Why a node could not start.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error("cannot create data dir {path}: {source}")]
    DataDir {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Locked(#[from] crate::data_dir::DataDirError),
    #[error(transparent)]
    Events(#[from] EventLogError),
    #[error(transparent)]
    Quorum(#[from] QuorumError),
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A legacy mode's epoch file could not be read.
    #[error("{0}")]
    Legacy(String),
    /// The TLS files could not be read or do not fit together.
    #[error("{0}")]
    Tls(crate::config::ConfigError),
}

pub struct Node {
    pub(crate) cfg: Arc<ValidConfig>,
    engine: Arc<dyn Engine>,
    pub(crate) transport: Arc<Transport>,
    /// TLS for the API and the peer RPC, when the config has `[tls]`.
    pub tls: Option<Arc<Tls>>,
    pub(crate) events: Arc<EventLog>,
    /// The followers of `events` (`/v1/watch`), bounded by `cfg.max_watchers`, and by
    /// `cfg.max_watchers_per_client` for each client.
    pub(crate) watchers: Watchers,
    /// The connections served at once (`cfg.max_connections`, the members' reserve).
    pub connections: Arc<Connections>,
    pub(crate) counters: Arc<Counters>,
    pub(crate) seed: u64,
    /// Where the node reads time (the host's clocks, or the simulator's).
    pub(crate) clock: Arc<dyn Clock>,
    /// When the node started (MONOTONIC ns).
    started_ns: u64,
    /// The lock on the data dir, when the node's state lives in its files (not in the lab
    /// simulator's memory).
    _data_dir: Option<DataDirLock>,
    /// When the node started, seconds since the Unix epoch (`electd_start_time_seconds`).
    pub(crate) started_unix_s: f64,
    stop: CancellationToken,
}

/// What a node runs on besides its config: the clock its claims are judged on and the wire
/// its peer requests travel. A node uses the host's clocks and HTTP ([`Surroundings::host`]);
/// the lab's simulator gives it a simulated clock and an in-memory wire.
pub struct Surroundings {
    pub clock: Arc<dyn Clock>,
    /// `None`: HTTP to the members' addresses.
    pub wire: Option<Arc<dyn Wire>>,
    /// Quorum mode's durable state; `None`: the files in the data dir.
    pub disk: Option<Arc<dyn Disk>>,
    /// Deliberate flaws for the lab's checkers to catch; none on a real host.
    pub flaws: Flaws,
}

impl Surroundings {
    /// The host's clocks and the network.
    pub fn host() -> Surroundings {
        Surroundings {
            clock: crate::clock::system(),
            wire: None,
            disk: None,
            flaws: Flaws::default(),
        }
    }
}

/// Makes `cfg`'s data dir if it is missing and, on a host, takes its lock before anything in
/// it is read: another process's state is no state of ours.
fn open_data_dir(cfg: &ValidConfig, on_host: bool) -> Result<Option<DataDirLock>, NodeError> {
    std::fs::create_dir_all(&cfg.data_dir).map_err(|source| NodeError::DataDir {
        path: cfg.data_dir.clone(),
        source,
    })?;
    Ok(if on_host {
        Some(DataDirLock::take(&cfg.data_dir)?)
    } else {
        None
    })
}

/// The peer transport, its fault layer seeded by `seed`: over `wire` (the lab's simulator) or
/// over HTTP, with the lab's `flaws`; and the TLS the config names certificates for, if any.
fn open_transport(
    cfg: &ValidConfig,
    seed: u64,
    counters: &Arc<Counters>,
    clock: &Arc<dyn Clock>,
    wire: Option<Arc<dyn Wire>>,
    flaws: &Flaws,
) -> Result<(Arc<Transport>, Option<Arc<Tls>>), NodeError> {
    let tls = match &cfg.tls {
        Some(files) => Some(Arc::new(Tls::load(files).map_err(NodeError::Tls)?)),
        None => None,
    };
    let faults = Arc::new(Faults::new(seed));
    let mut transport = match wire {
        Some(wire) => Transport::with_wire(cfg, faults, counters.clone(), wire, clock.clone()),
        None => Transport::new(cfg, faults, counters.clone(), clock.clone(), tls.clone()),
    };
    transport.takes_unsigned_answers = flaws.accept_unsigned_answers();
    Ok((Arc::new(transport), tls))
}

/// Starts the engine of `cfg.mode` on `plumbing`: the one place the mode is matched; from
/// here on the node talks to `dyn Engine`. Quorum mode keeps its state on `disk` (`None`: the
/// files in the data dir); its background task stops with `stop`, or cancels `fatal`.
async fn start_engine(
    cfg: &Arc<ValidConfig>,
    seed: u64,
    plumbing: Plumbing,
    disk: Option<Arc<dyn Disk>>,
    flaws: Flaws,
    stop: &CancellationToken,
    fatal: CancellationToken,
) -> Result<Arc<dyn Engine>, NodeError> {
    Ok(match cfg.mode {
        Mode::Quorum => {
            let disk = disk.unwrap_or_else(|| Arc::new(StateFile::new(&cfg.data_dir)));
            let store = Store::open_on(disk, cfg.id, &cfg.cluster_id).map_err(QuorumError::from)?;
            let (q, core) = QuorumNode::start(cfg, store, plumbing, seed, flaws).await?;
            Driver::spawn(q.clone(), core, stop.clone(), fatal);
            q
        }
        Mode::Bully => {
            LegacyNode::<Bully>::start(cfg, plumbing, stop.clone()).map_err(NodeError::Legacy)?
        }
        Mode::Ring => {
            LegacyNode::<Ring>::start(cfg, plumbing, stop.clone()).map_err(NodeError::Legacy)?
        }
        Mode::Invitation => LegacyNode::<Invitation>::start(cfg, plumbing, stop.clone())
            .map_err(NodeError::Legacy)?,
        Mode::Mutex => {
            let url = cfg
                .store_url
                .as_ref()
                .ok_or(NodeError::Store(StoreError::Refused(
                    "mutex mode needs a store_url".into(),
                )))?;
            let store = MutexStore::new(
                url,
                &cfg.cluster_id,
                Some(cfg.listen_addr().ip()),
                plumbing.transport.faults.clone(),
                plumbing.counters.clone(),
            )?;
            MutexNode::start(
                cfg.id,
                cfg.timing,
                store,
                plumbing,
                seed,
                flaws,
                stop.clone(),
            )
            .await?
        }
    })
}

impl Node {
    /// A refusal of the engine about roles as the API's error (4xx or 503 with the JSON body).
    pub(crate) fn roles_error(&self, e: RolesError) -> ApiError {
        let (status, code) = match &e {
            RolesError::NotSupported => (StatusCode::CONFLICT, "roles_unsupported"),
            RolesError::UnknownRole(_) => (StatusCode::NOT_FOUND, "unknown_role"),
            RolesError::StaleToken { .. } => (StatusCode::CONFLICT, "stale_token"),
            RolesError::NotApplied(_) | RolesError::LimitNotApplied(_) => {
                (StatusCode::SERVICE_UNAVAILABLE, "not_applied")
            }
            RolesError::Stopping => (StatusCode::SERVICE_UNAVAILABLE, "stopping"),
        };
        let message = match e {
            RolesError::NotSupported => format!(
                "named roles are served in quorum mode only; this node runs {} mode",
                self.cfg.mode
            ),
            e => e.to_string(),
        };
        ApiError::new(status, code, message)
    }

    /// Starts the engine of `cfg.mode` (validated: see [`ValidConfig`]), with the fault layer seeded by
    /// `seed`. The engine's background task stops when `stop` is cancelled; if it fails on its
    /// own (openraft stopped on a storage error), `fatal` is cancelled with the reason logged.
    pub async fn start(
        cfg: ValidConfig,
        seed: u64,
        stop: CancellationToken,
        fatal: CancellationToken,
    ) -> Result<Arc<Node>, NodeError> {
        Node::start_in(cfg, seed, stop, fatal, Surroundings::host()).await
    }

    /// [`Node::start`] on the given clock and wire.
    pub async fn start_in(
        cfg: ValidConfig,
        seed: u64,
        stop: CancellationToken,
        fatal: CancellationToken,
        around: Surroundings,
    ) -> Result<Arc<Node>, NodeError> {
        // The lab's simulator runs its nodes in one process, on its own wire and disk, and on
        // its own time: no data dir lock, no lookups of host names.
        let on_host = around.wire.is_none() && around.disk.is_none();
        let data_dir = open_data_dir(&cfg, on_host)?;
        let cfg = Arc::new(cfg);
        let counters = Arc::new(Counters::for_timing(&cfg.timing));
        let clock = around.clock;
        let (transport, tls) =
            open_transport(&cfg, seed, &counters, &clock, around.wire, &around.flaws)?;
        let events = Arc::new(EventLog::open(&cfg.data_dir, cfg.id)?);
        let plumbing = Plumbing {
            transport: transport.clone(),
            events: events.clone(),
            counters: counters.clone(),
            clock: clock.clone(),
        };
        let engine = start_engine(
            &cfg,
            seed,
            plumbing,
            around.disk,
            around.flaws,
            &stop,
            fatal,
        )
        .await?;
        tokio::spawn(retry_event_writes(events.clone(), stop.clone()));
        let connections = Arc::new(Connections::new(
            cfg.max_connections,
            transport.peers.clone(),
        ));
        if on_host {
            tokio::spawn(connections.clone().resolve_members(stop.clone()));
        }
        Ok(Arc::new(Node {
            watchers: Watchers::new(cfg.max_watchers, cfg.max_watchers_per_client),
            connections,
            cfg,
            engine,
            transport,
            tls,
            events,
            counters,
            seed,
            started_ns: clock.mono_ns(),
            _data_dir: data_dir,
            started_unix_s: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64()),
            clock,
            stop,
        }))
    }

    /// The node's effective role, judged now.
    pub fn view(&self) -> Judged {
        self.engine.view()
    }

    /// The view judged now, as the body of `/v1/leader`.
    pub fn leader_info(&self) -> LeaderInfo {
        let judged = self.view();
        self.render(judged.view, judged.lease_remaining_ns)
    }

    /// A view of this node as the body of `/v1/leader` (and of each `/v1/watch` event).
    pub(crate) fn render(&self, v: View, lease_remaining_ns: Option<u64>) -> LeaderInfo {
        LeaderInfo {
            node_id: self.cfg.id,
            mode: self.mode(),
            role: v.role,
            term: v.term,
            leader: v.leader.map(|id| LeaderRef {
                id,
                addr: self.transport.peers.get(id).unwrap_or_default(),
            }),
            // Rounded down: never promise more lease than there is.
            lease_ms: lease_remaining_ns.map(|ns| ns / 1_000_000),
            no_promise: (!matches!(self.mode(), Mode::Quorum | Mode::Mutex)).then(|| {
                format!(
                    "{} mode has no lease: a leader answer holds at its instant only, and \
                     another node may lead at the same time (a partition)",
                    self.mode().as_str()
                )
            }),
        }
    }

    /// Hands the leader role over (`POST /v1/admin/resign`): quorum mode only; bully and ring
    /// have no handoff in their textbook form.
    pub async fn resign(&self, to: Option<NodeId>) -> Result<Resigned, ResignError> {
        self.engine.resign(to).await
    }

    pub fn mode(&self) -> Mode {
        self.cfg.mode
    }

    pub fn uptime_ms(&self) -> u64 {
        self.clock.mono_ns().saturating_sub(self.started_ns) / 1_000_000
    }

    /// The engine of the node's mode (membership changes go to it directly).
    pub(crate) fn engine(&self) -> &dyn Engine {
        &*self.engine
    }

    /// The members in force and their addresses, this node included: in quorum mode the
    /// membership of the log (members added and removed at run time), else the config's.
    pub fn members_in_force(&self) -> Vec<(NodeId, String)> {
        match self.engine.members() {
            Ok(m) if !m.members.is_empty() => {
                m.members.into_iter().map(|m| (m.id, m.addr)).collect()
            }
            _ => self
                .cfg
                .peers
                .iter()
                .map(|p| (p.id, p.addr.clone()))
                .collect(),
        }
    }

    /// The node is taken as dead (the lab's simulator crashes it in its own process): its
    /// event log records nothing more (`EventLog::seal`), as a killed process writes nothing.
    pub fn crashed(&self) {
        self.events.seal();
    }

    pub fn engine_status(&self) -> serde_json::Value {
        self.engine.status()
    }

    /// The engine's `/peer/...` routes (without the transport guard; the API adds it).
    pub fn peer_routes(&self) -> Router {
        self.engine.clone().routes()
    }

    /// `Err` with the reasons while the node is not whole (`/v1/health` answers 503): its
    /// engine stopped, or its event log's file refuses writes.
    pub fn health(&self) -> Result<(), String> {
        let reasons: Vec<String> = [self.engine.health(), self.events.health()]
            .into_iter()
            .filter_map(Result::err)
            .collect();
        if reasons.is_empty() {
            Ok(())
        } else {
            Err(reasons.join("; "))
        }
    }

    /// Cancelled when the node stops (its streams end then).
    pub(crate) fn stopping(&self) -> CancellationToken {
        self.stop.clone()
    }

    /// Graceful stop: the engine stops claiming and hands over as fast as its algorithm allows.
    pub async fn shutdown(&self) {
        self.engine.shutdown(self.stop.clone()).await
    }
}

/// Every second, the event log writes again what its file refused before (if anything).
async fn retry_event_writes(events: Arc<EventLog>, stop: CancellationToken) {
    let mut tick = tokio::time::interval(std::time::Duration::from_secs(1));
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        // A no-op unless events wait; then as cheap as a record (a few appended lines).
        events.retry();
    }
}

/// Waits for SIGTERM or SIGINT; returns the signal's name.
pub async fn terminate_signal() -> &'static str {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("SIGINT handler");
    tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
    }
}
