//! A running node: the config, the shared transport and fault layer, the event log, the
//! counters, and the election engine of the configured mode. The API asks it for a [`View`].

use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use tokio_util::sync::CancellationToken;

use crate::config::{Config, Mode};
use crate::events::{EventLog, EventLogError};
use crate::faults::Faults;
use crate::legacy::driver::{LegacyEngine, LegacyNode};
use crate::legacy::{Bully, Ring};
use crate::quorum::{QuorumError, QuorumNode};
use crate::role::{NodeId, Role};
use crate::stats::Stats;
use crate::transport::Transport;

/// What an engine says about the node at one moment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EngineView {
    pub role: Role,
    pub term: u64,
    pub leader: Option<NodeId>,
    /// Quorum mode, while leading: nanoseconds of claim left.
    pub lease_remaining_ns: Option<u64>,
}

impl EngineView {
    pub fn without_leader(role: Role, term: u64) -> EngineView {
        EngineView {
            role,
            term,
            leader: None,
            lease_remaining_ns: None,
        }
    }
}

/// The election engine of the configured mode.
pub enum Engine {
    Quorum(Arc<QuorumNode>),
    /// Bully or ring, behind the one legacy driver.
    Legacy(Arc<dyn LegacyEngine>),
}

/// Why a node could not start.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error("cannot create data dir {path}: {source}")]
    DataDir {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Events(#[from] EventLogError),
    #[error(transparent)]
    Quorum(#[from] QuorumError),
}

pub struct Node {
    pub cfg: Arc<Config>,
    pub engine: Engine,
    pub transport: Arc<Transport>,
    pub events: Arc<EventLog>,
    pub stats: Arc<Stats>,
    pub seed: u64,
    started: Instant,
    stop: CancellationToken,
}

impl Node {
    /// Starts the engine of `cfg.mode` (after `cfg.validate()`), with the fault layer seeded by
    /// `seed`. The engine's background task stops when `stop` is cancelled; if it fails on its
    /// own (openraft stopped on a storage error), `fatal` is cancelled with the reason logged.
    pub async fn start(
        cfg: Config,
        seed: u64,
        stop: CancellationToken,
        fatal: CancellationToken,
    ) -> Result<Arc<Node>, NodeError> {
        std::fs::create_dir_all(&cfg.data_dir).map_err(|source| NodeError::DataDir {
            path: cfg.data_dir.clone(),
            source,
        })?;
        let cfg = Arc::new(cfg);
        let stats = Arc::new(Stats::default());
        let faults = Arc::new(Faults::new(seed));
        let transport = Arc::new(Transport::new(&cfg, faults, stats.clone()));
        let events = Arc::new(EventLog::open(&cfg.data_dir, cfg.id)?);
        let engine = match cfg.mode {
            Mode::Quorum => {
                let q = QuorumNode::start(
                    &cfg,
                    transport.clone(),
                    events.clone(),
                    stats.clone(),
                    seed,
                    crate::clock::system(),
                )
                .await?;
                let run = q.clone().run(stop.clone());
                tokio::spawn(async move {
                    if let Err(e) = run.await {
                        tracing::error!(error = %e, "quorum engine stopped");
                        fatal.cancel();
                    }
                });
                Engine::Quorum(q)
            }
            Mode::Bully => Engine::Legacy(LegacyNode::<Bully>::start(
                &cfg,
                transport.clone(),
                events.clone(),
                stats.clone(),
                stop.clone(),
            )),
            Mode::Ring => Engine::Legacy(LegacyNode::<Ring>::start(
                &cfg,
                transport.clone(),
                events.clone(),
                stats.clone(),
                stop.clone(),
            )),
        };
        Ok(Arc::new(Node {
            cfg,
            engine,
            transport,
            events,
            stats,
            seed,
            started: Instant::now(),
            stop,
        }))
    }

    /// The node's effective role, judged now.
    pub fn view(&self) -> EngineView {
        match &self.engine {
            Engine::Quorum(q) => q.view(),
            Engine::Legacy(l) => l.view(),
        }
    }

    /// Hands the leader role over (`POST /v1/admin/resign`): quorum mode only; bully and ring
    /// have no handoff in their textbook form.
    pub async fn resign(
        &self,
        to: Option<NodeId>,
    ) -> Result<crate::quorum::Resigned, crate::api::ApiError> {
        match &self.engine {
            Engine::Quorum(q) => Ok(q.resign(to).await?),
            Engine::Legacy(_) => Err(crate::api::ApiError::new(
                axum::http::StatusCode::CONFLICT,
                "not_supported",
                format!(
                    "{} mode has no handoff: stop the node (SIGTERM) to make the others elect",
                    self.cfg.mode.as_str()
                ),
            )),
        }
    }

    pub fn mode(&self) -> Mode {
        self.cfg.mode
    }

    pub fn uptime_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    pub fn engine_status(&self) -> serde_json::Value {
        match &self.engine {
            Engine::Quorum(q) => q.status_extra(),
            Engine::Legacy(l) => l.status_extra(),
        }
    }

    /// The engine's `/peer/...` routes (without the transport guard; the API adds it).
    pub fn peer_routes(&self) -> Router {
        match &self.engine {
            Engine::Quorum(q) => q.clone().routes(),
            Engine::Legacy(l) => l.clone().routes(),
        }
    }

    /// Graceful stop: the engine stops claiming and hands over as fast as its algorithm allows.
    pub async fn shutdown(&self) {
        match &self.engine {
            // Quorum: the claim is closed before the loops are stopped, so that the election
            // driver cannot start a campaign on its way out.
            Engine::Quorum(q) => {
                q.shutdown().await;
                self.stop.cancel();
            }
            Engine::Legacy(l) => {
                self.stop.cancel();
                l.shutdown();
            }
        }
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
