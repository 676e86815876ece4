//! Local cluster control: start, stop, kill, pause and partition the nodes of a cluster
//! directory (`node*.toml` files, runtime files under `run/`), by pid file, never by name.
//!
//! `electd-lab ctl ...` (and so `scripts/cluster.sh`), the integration tests and the chaos
//! runner all drive clusters through this one module. Each job has its own file:
//! - [`addr`]: loopback address blocks for test and chaos clusters;
//! - [`process`]: the nodes as processes (start, signal, stop, kill, by pid file);
//! - [`configs`]: node configs and timing flags;
//! - [`secrets`]: the admin token and cluster secret;
//! - [`state`]: what the nodes say, the agreed leader, the `status` rows;
//! - this file: the cluster directory, its members, and their API through the typed client.

mod addr;
mod configs;
mod process;
mod secrets;
mod state;

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use electd::config::Config;
use electd_client::{Client, Event, FaultSet, LeaderInfo, Mode, NodeId, Status};

pub use self::addr::{claim_addrs, AddrBlock, BLOCK_NODE_PORT};
pub use self::state::{agreed, claimants, status_row, Observed};

/// File under `run/` with the timing flags of the last `ctl up`.
const TIMING_FLAGS: &str = "timing-flags";

/// A cluster member as the control side sees it.
#[derive(Clone, Debug)]
pub struct Member {
    pub id: NodeId,
    pub addr: String,
    pub config: PathBuf,
}

/// Why a control command failed.
#[derive(Debug, thiserror::Error)]
pub enum CtlError {
    #[error("{0}")]
    Config(#[from] electd::config::ConfigError),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("no node {0} in this cluster")]
    NoSuchNode(NodeId),
    #[error("no node*.toml configs in {0}")]
    Empty(PathBuf),
    #[error(transparent)]
    Api(#[from] electd_client::Error),
    #[error("{0}")]
    Usage(String),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> CtlError + '_ {
    move |source| CtlError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// A cluster directory and the binary that runs its nodes.
pub struct Cluster {
    pub dir: PathBuf,
    pub run: PathBuf,
    pub bin: PathBuf,
    pub members: Vec<Member>,
    /// Flags added to every node's command line (tests use them for timings and seeds).
    pub extra_args: Vec<String>,
    /// Nodes get SIGKILL when the thread that started them exits (tests and the chaos runner,
    /// so that a killed runner leaves no node behind); `ctl up` leaves this off.
    pub die_with_parent: bool,
    /// One connection pool for every node's [`Client`].
    http: reqwest::Client,
}

impl Cluster {
    /// Opens the cluster whose `node*.toml` configs are in `dir`.
    pub fn open(dir: &Path, bin: &Path) -> Result<Cluster, CtlError> {
        let mut members = Vec::new();
        for entry in fs::read_dir(dir).map_err(io(dir))? {
            let path = entry.map_err(io(dir))?.path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if name.starts_with("node") && name.ends_with(".toml") {
                let cfg = Config::load(&path)?;
                cfg.validate()?;
                let addr = cfg.own_peer().map(|p| p.addr.clone()).unwrap_or_default();
                members.push(Member {
                    id: cfg.id,
                    addr,
                    config: path,
                });
            }
        }
        if members.is_empty() {
            return Err(CtlError::Empty(dir.to_path_buf()));
        }
        members.sort_by_key(|m| m.id);
        let run = dir.join("run");
        fs::create_dir_all(&run).map_err(io(&run))?;
        // Timing flags of the last `up`, so that a node started later runs like the others.
        let extra_args = fs::read_to_string(run.join(TIMING_FLAGS))
            .map(|s| s.split_whitespace().map(str::to_string).collect())
            .unwrap_or_default();
        Ok(Cluster {
            dir: dir.to_path_buf(),
            run,
            bin: bin.to_path_buf(),
            members,
            extra_args,
            die_with_parent: false,
            http: electd_client::http_client()
                .timeout(Duration::from_millis(800))
                .build()
                .expect("client"),
        })
    }

    pub fn member(&self, id: NodeId) -> Result<&Member, CtlError> {
        self.members
            .iter()
            .find(|m| m.id == id)
            .ok_or(CtlError::NoSuchNode(id))
    }

    pub fn ids(&self) -> Vec<NodeId> {
        self.members.iter().map(|m| m.id).collect()
    }

    pub fn pid_file(&self, id: NodeId) -> PathBuf {
        self.run.join(format!("node{id}.pid"))
    }

    pub fn log_file(&self, id: NodeId) -> PathBuf {
        self.run.join(format!("node{id}.log"))
    }

    /// Data dir of node `id` in `mode`: each mode keeps its own state.
    pub fn data_dir(&self, mode: Mode, id: NodeId) -> PathBuf {
        self.run
            .join("data")
            .join(mode.as_str())
            .join(format!("node{id}"))
    }

    /// The mode a node of the cluster was last started in (quorum if never).
    pub fn mode(&self) -> Mode {
        fs::read_to_string(self.run.join("mode"))
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or_default()
    }

    /// The API client of node `id` (with the admin token, when the cluster has one).
    pub fn client(&self, id: NodeId) -> Result<Client, CtlError> {
        Ok(Client::with_http(self.http.clone(), &self.member(id)?.addr)
            .admin_token(self.admin_token()))
    }

    /// `GET /v1/leader` of node `id`.
    pub async fn leader_info(&self, id: NodeId) -> Result<LeaderInfo, CtlError> {
        Ok(self.client(id)?.leader().await?)
    }

    /// `GET /v1/status` of node `id`.
    pub async fn status(&self, id: NodeId) -> Result<Status, CtlError> {
        Ok(self.client(id)?.status().await?)
    }

    /// Every node's events of `mode`, read from their `events.jsonl` files (which survive kills).
    pub fn events(&self, mode: Mode) -> Vec<Event> {
        self.ids()
            .into_iter()
            .flat_map(|id| {
                electd::events::read_events_file(
                    &self.data_dir(mode, id).join(electd::events::EVENTS_FILE),
                )
                .unwrap_or_default()
            })
            .collect()
    }

    pub async fn set_faults(&self, id: NodeId, set: &FaultSet) -> Result<FaultSet, CtlError> {
        Ok(self.client(id)?.set_faults(set).await?)
    }

    pub async fn clear_faults(&self, id: NodeId) -> Result<FaultSet, CtlError> {
        Ok(self.client(id)?.clear_faults().await?)
    }

    /// Cuts all peer traffic between the groups (each listed node's fault set). Nodes in no
    /// group are left alone.
    pub async fn partition(&self, groups: &[Vec<NodeId>]) -> Result<(), CtlError> {
        for g in groups {
            for id in g {
                self.member(*id)?;
            }
        }
        for (gi, g) in groups.iter().enumerate() {
            let others: BTreeSet<NodeId> = groups
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != gi)
                .flat_map(|(_, o)| o.iter().copied())
                .collect();
            for id in g {
                if self.pid(*id).is_none() {
                    continue;
                }
                let set = FaultSet {
                    block_to: others.clone(),
                    block_from: others.clone(),
                    ..Default::default()
                };
                self.set_faults(*id, &set).await?;
            }
        }
        Ok(())
    }

    /// Clears every running node's fault set.
    pub async fn heal(&self) -> Result<(), CtlError> {
        for m in &self.members {
            if self.pid(m.id).is_some() {
                self.clear_faults(m.id).await?;
            }
        }
        Ok(())
    }
}
